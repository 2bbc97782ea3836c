//! The monitors an arm runs beside the target, and what is read from them: `proctor` itself
//! (the running binary with the user's `--agent` words) and the psutil loop that
//! jupyter-resource-usage runs (`memory_full_info()` over the tree, which reads each process's
//! smaps under its mmap lock). Their CPU comes from `/proc/PID/stat`; proctor's stall ledger
//! from its own HTTP API on a loopback port it picked, through proctor-client.
//!
//! Only processes started here are signalled, by the pid this module got from spawning them.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;

/// jupyter-resource-usage's reading of a tree, as a loop: every process's `memory_full_info()`
/// (psutil reads `/proc/PID/smaps_rollup`, or `smaps` on kernels without it), then a pause.
/// Exits 3 when psutil is missing, so that is told apart from a crash.
const PSUTIL_LOOP: &str = r#"
import sys, time
try:
    import psutil
except ImportError:
    sys.exit(3)
root, pause = int(sys.argv[1]), float(sys.argv[2])
while True:
    try:
        tree = psutil.Process(root)
        members = [tree] + tree.children(recursive=True)
    except psutil.Error:
        members = []
    for p in members:
        try:
            p.memory_full_info()
        except psutil.Error:
            pass
    time.sleep(pause)
"#;

/// How to make a Python with psutil, for messages.
pub const PSUTIL_HOWTO: &str = "python3 -m venv .venv && .venv/bin/pip install psutil (or --baseline-python PATH)";

/// Whether `python` imports psutil; the reason in words when it does not.
pub fn python_has_psutil(python: &Path) -> Result<(), String> {
    match Command::new(python).args(["-c", "import psutil"]).stdin(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(status) if status.success() => Ok(()),
        Ok(_) => Err(format!("{} has no psutil; make one with: {PSUTIL_HOWTO}", python.display())),
        Err(e) => Err(format!("cannot run {}: {e}; make one with: {PSUTIL_HOWTO}", python.display())),
    }
}

/// A monitor running beside the target.
#[derive(Debug)]
pub struct Monitor {
    child: Child,
    /// Where proctor serves its API; `None` for psutil, or a proctor command that serves none.
    pub api: Option<SocketAddr>,
}

impl Monitor {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running; its exit status in words if not.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            _ => None,
        }
    }

    /// Its CPU time so far, user and system, in seconds.
    pub fn cpu_seconds(&self) -> Option<f64> {
        cpu_seconds(self.pid())
    }

    /// Stops it (SIGSTOP) and waits, up to `within`, until every thread of it is stopped. A
    /// thread inside a system call stops only as the call returns, so a stopped monitor holds
    /// no lock of the kernel's: no target's mmap lock, no CPU, until [`Monitor::resume`].
    ///
    /// An agent stopped inside a traced read (its tracing instance recording, between the
    /// `tracing_on` 1 and 0 around the read: proctor-sampler's `lockwait`) would leave the
    /// instance writing every mmap lock operation on the host until it runs again, a cost in
    /// the next arm's turn that is not that arm's. Such a pause lets the agent run until the
    /// read is over and stops it again. Returns how many times it did.
    pub fn pause(&self, within: Duration) -> Result<u32, String> {
        self.pause_watching(&tracing_instances(), within)
    }

    /// [`Monitor::pause`] with the tracing instances looked for under `instances`.
    fn pause_watching(&self, instances: &[PathBuf], within: Duration) -> Result<u32, String> {
        let deadline = Instant::now() + within;
        let mut let_finish = 0;
        loop {
            // SAFETY: signals our own child, not yet reaped (so the pid is still ours).
            unsafe { libc::kill(self.pid() as libc::pid_t, libc::SIGSTOP) };
            loop {
                match all_stopped(self.pid()) {
                    Some(true) => break,
                    None => return Err(format!("pid {} ended while being paused", self.pid())),
                    Some(false) if Instant::now() >= deadline => {
                        return Err(format!("pid {}'s threads did not all stop within {within:?}", self.pid()))
                    }
                    Some(false) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
            if !recording(instances, self.pid()) {
                return Ok(let_finish);
            }
            if Instant::now() >= deadline {
                return Err(format!("pid {} stopped inside a traced read each time within {within:?}", self.pid()));
            }
            self.resume();
            let_finish += 1;
            while recording(instances, self.pid()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Lets a paused monitor run again (SIGCONT).
    pub fn resume(&self) {
        // SAFETY: signals our own child, not yet reaped (so the pid is still ours).
        unsafe { libc::kill(self.pid() as libc::pid_t, libc::SIGCONT) };
    }

    /// SIGTERM, then SIGKILL if it has not ended within `grace`; reaped either way. A paused
    /// monitor is let run first, or the SIGTERM would wait for it.
    pub fn stop(mut self, grace: Duration) {
        let pid = self.pid() as libc::pid_t;
        self.resume();
        // SAFETY: signals our own child, not yet reaped (so the pid is still ours).
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether every thread of `pid` is stopped (state `T` or `t`, or already gone as a zombie);
/// `None` once the process is gone.
fn all_stopped(pid: u32) -> Option<bool> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read(task.path().join("stat")) else { continue };
        // The state is the first field after the command's closing parenthesis.
        let Some(close) = stat.iter().rposition(|&b| b == b')') else { continue };
        if !matches!(stat.get(close + 2), Some(b'T' | b't' | b'Z' | b'X')) {
            return Some(false);
        }
    }
    Some(true)
}

/// Where tracefs keeps its instances on this host (both places it may be mounted).
fn tracing_instances() -> Vec<PathBuf> {
    ["/sys/kernel/tracing/instances", "/sys/kernel/debug/tracing/instances"]
        .into_iter()
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .collect()
}

/// Whether a tracing instance of `pid`'s (`proctor-PID-N`, as an agent names the ones it
/// makes) under one of `instances` is recording now (its `tracing_on` reads 1).
fn recording(instances: &[PathBuf], pid: u32) -> bool {
    let prefix = format!("proctor-{pid}-");
    instances.iter().filter_map(|dir| std::fs::read_dir(dir).ok()).flat_map(|entries| entries.flatten()).any(|entry| {
        entry.file_name().to_str().is_some_and(|name| name.starts_with(&prefix))
            && std::fs::read(entry.path().join("tracing_on")).is_ok_and(|on| on.trim_ascii() == b"1")
    })
}

/// A process's CPU time, user and system, in seconds; `None` once it is gone.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let bytes = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let stat = proctor_procfs::process::parse_stat(&bytes)?;
    Some((stat.utime_ticks + stat.stime_ticks) as f64 / proctor_procfs::system::clock_ticks_per_sec() as f64)
}

/// Starts `exe` with the user's agent words. A `serve` is given a loopback port of its own
/// choosing and no recording (unless the words say otherwise), and this waits, up to
/// `ready_within`, for the line saying where it listens.
pub fn start_agent(exe: &Path, words: &[String], ready_within: Duration) -> Result<Monitor, String> {
    let mut argv: Vec<String> = words.to_vec();
    let serves = argv.first().is_some_and(|w| w == "serve");
    let has = |flag: &str| words.iter().any(|w| w == flag || w.starts_with(&format!("{flag}=")));
    if serves && !has("--listen") {
        argv.extend(["--listen".into(), "127.0.0.1:0".into()]);
    }
    if serves && !has("--no-record") && !has("--data-dir") && !has("--record") {
        argv.push("--no-record".into());
    }
    let mut child = Command::new(exe)
        .args(&argv)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {} {}: {e}", exe.display(), argv.join(" ")))?;
    let stderr = child.stderr.take().expect("stderr is piped");
    // The agent's log is read to its end on a thread of its own (a full pipe would stop the
    // agent); the listening line is handed over, the rest kept to explain a failure.
    let (tx, rx) = mpsc::channel::<Result<SocketAddr, String>>();
    std::thread::spawn(move || {
        let mut said = Vec::new();
        let mut sent = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !sent {
                if let Some(address) = listening_address(&line) {
                    // Nobody waiting any more is fine: the log is still drained.
                    let _ = tx.send(Ok(address));
                    sent = true;
                    continue;
                }
                if said.len() < 20 {
                    said.push(line);
                }
            }
        }
        if !sent {
            let _ = tx.send(Err(said.join("\n")));
        }
    });
    let mut monitor = Monitor { child, api: None };
    if !serves {
        return Ok(monitor);
    }
    match rx.recv_timeout(ready_within) {
        Ok(Ok(address)) => {
            monitor.api = Some(address);
            Ok(monitor)
        }
        Ok(Err(log)) => {
            let status = monitor.exited().unwrap_or_else(|| "running".into());
            monitor.stop(Duration::from_secs(1));
            Err(format!("the agent ({} {}) did not start ({status}): {log}", exe.display(), argv.join(" ")))
        }
        Err(_) => {
            monitor.stop(Duration::from_secs(1));
            Err(format!(
                "the agent ({} {}) did not say where it listens within {ready_within:?}",
                exe.display(),
                argv.join(" ")
            ))
        }
    }
}

/// `serve`'s "listening on http://ADDR/ …" line, its address.
fn listening_address(line: &str) -> Option<SocketAddr> {
    let rest = &line[line.find("listening on http://")? + "listening on http://".len()..];
    rest[..rest.find('/')?].parse().ok()
}

/// Starts the psutil loop over `root`'s tree with `python`, pausing `pause` between passes.
pub fn start_psutil(python: &PathBuf, root: u32, pause: Duration) -> Result<Monitor, String> {
    let child = Command::new(python)
        .args(["-c", PSUTIL_LOOP, &root.to_string(), &pause.as_secs_f64().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}; make one with: {PSUTIL_HOWTO}", python.display()))?;
    Ok(Monitor { child, api: None })
}

/// What the agent's stall ledger says of the target's tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Ledger {
    /// Processes of the tree with a ledger, and of those with a PSS reading (whose
    /// `smaps_rollup` the agent read: the reads whose waits it traces).
    pub processes: u32,
    pub pss_read_processes: u32,
    /// Wall time of the agent's reads that took a tree member's mmap lock, in all.
    pub stall_seconds_total: f64,
    /// The longest single such read, and whose: its pid, its name, and whether it is one of
    /// the processes that time operations (a hold of one that does not shows in no latency).
    pub stall_max_seconds: f64,
    pub stall_max_pid: Option<u32>,
    pub stall_max_name: Option<String>,
    pub stall_max_timed: Option<bool>,
    /// The same total over the processes that time operations (the others never wait).
    pub timed_stall_seconds_total: f64,
    /// What the tree's own threads waited for their mmap locks while those reads held them, as
    /// the agent measured it from the kernel's mmap_lock tracepoints; `None` where it could not
    /// (`proctor doctor` says why).
    pub target_waited_seconds_total: Option<f64>,
}

impl Ledger {
    /// What was added to the ledger since `earlier` (a reading of the same agent): the totals
    /// less `earlier`'s; the counts of processes and the longest read as they are now (since
    /// the agent started).
    pub fn since(&self, earlier: &Ledger) -> Ledger {
        Ledger {
            processes: self.processes,
            pss_read_processes: self.pss_read_processes,
            stall_seconds_total: (self.stall_seconds_total - earlier.stall_seconds_total).max(0.0),
            stall_max_seconds: self.stall_max_seconds,
            stall_max_pid: self.stall_max_pid,
            stall_max_name: self.stall_max_name.clone(),
            stall_max_timed: self.stall_max_timed,
            timed_stall_seconds_total: (self.timed_stall_seconds_total - earlier.timed_stall_seconds_total).max(0.0),
            target_waited_seconds_total: self
                .target_waited_seconds_total
                .map(|now| (now - earlier.target_waited_seconds_total.unwrap_or(0.0)).max(0.0)),
        }
    }
}

/// The agent's ledger for the tree under `root`, once it has published a sample taken after
/// this was called (so reads up to now are in it), within `within`.
pub fn read_ledger(api: SocketAddr, root: u32, timed: &[u32], within: Duration) -> Result<Ledger, String> {
    let deadline = Instant::now() + within;
    let samples = |doc: &serde_json::Value| doc["samples_total"].as_u64();
    let first = samples(&get_json(api, "/api/v1/agent", deadline)?).ok_or("the agent's answer has no samples_total")?;
    loop {
        let doc = get_json(api, "/api/v1/agent", deadline)?;
        if samples(&doc).is_some_and(|n| n > first) {
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!("the agent published no new sample within {within:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let tree = get_json(api, &format!("/api/v1/processes/{root}/tree"), deadline)?;
    let rows = tree["processes"].as_array().ok_or("the agent's tree has no processes")?;
    let mut ledger = Ledger::default();
    for row in rows {
        let Some(total) = row["stall_by_proctor_seconds_total"].as_f64() else { continue };
        ledger.processes += 1;
        ledger.pss_read_processes += u32::from(row["pss_bytes"].is_u64());
        ledger.stall_seconds_total += total;
        let pid = row["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok());
        let is_timed = pid.is_some_and(|pid| timed.contains(&pid));
        let longest = row["stall_by_proctor_max_seconds"].as_f64().unwrap_or(0.0);
        if longest > ledger.stall_max_seconds {
            ledger.stall_max_seconds = longest;
            ledger.stall_max_pid = pid;
            ledger.stall_max_name = row["name"].as_str().map(str::to_string);
            ledger.stall_max_timed = Some(is_timed);
        }
        if is_timed {
            ledger.timed_stall_seconds_total += total;
        }
        if let Some(waited) = row["stall_target_waited_seconds_total"].as_f64() {
            *ledger.target_waited_seconds_total.get_or_insert(0.0) += waited;
        }
    }
    Ok(ledger)
}

fn get_json(api: SocketAddr, path: &str, deadline: Instant) -> Result<serde_json::Value, String> {
    let target = proctor_client::url::parse(&format!("http://{api}{path}")).map_err(|e| e.to_string())?;
    let spec = proctor_client::http::RequestSpec {
        method: "GET".into(),
        headers: vec![("Accept".into(), "application/json".into())],
        body: Vec::new(),
        close: true,
    };
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(100));
    let (status, body) = proctor_client::client::fetch_at_most(&target, None, &spec, left, 16 << 20)
        .map_err(|e| format!("the agent's {path}: {e}"))?;
    if status != 200 {
        return Err(format!("the agent's {path} answered {status}: {}", String::from_utf8_lossy(&body)));
    }
    serde_json::from_slice(&body).map_err(|e| format!("the agent's {path}: not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_since_an_earlier_reading_is_what_was_added() {
        let earlier = Ledger {
            processes: 3,
            pss_read_processes: 1,
            stall_seconds_total: 0.5,
            stall_max_seconds: 0.02,
            stall_max_pid: Some(7),
            stall_max_name: Some("parent".into()),
            stall_max_timed: Some(false),
            timed_stall_seconds_total: 0.25,
            target_waited_seconds_total: None,
        };
        let now = Ledger {
            processes: 4,
            pss_read_processes: 2,
            stall_seconds_total: 2.0,
            stall_max_seconds: 0.03,
            stall_max_pid: Some(9),
            stall_max_name: Some("child".into()),
            stall_max_timed: Some(true),
            timed_stall_seconds_total: 1.0,
            target_waited_seconds_total: Some(0.125),
        };
        let added = now.since(&earlier);
        assert_eq!((added.processes, added.pss_read_processes), (4, 2));
        assert_eq!((added.stall_seconds_total, added.timed_stall_seconds_total), (1.5, 0.75));
        assert_eq!((added.stall_max_seconds, added.target_waited_seconds_total), (0.03, Some(0.125)));
        // Whose the longest read is, as now.
        assert_eq!(
            (added.stall_max_pid, added.stall_max_name.as_deref(), added.stall_max_timed),
            (Some(9), Some("child"), Some(true))
        );
    }

    /// A child of a test, stopped and reaped however the test ends.
    struct Ended(Option<Monitor>);

    impl Drop for Ended {
        fn drop(&mut self) {
            if let Some(monitor) = self.0.take() {
                monitor.stop(Duration::from_secs(5));
            }
        }
    }

    #[test]
    fn a_paused_child_stops_whole_and_runs_again_when_resumed() {
        // A busy loop: it uses CPU whenever it is not stopped. Ended however the test ends.
        let child = Command::new("sh").args(["-c", "while :; do :; done"]).spawn().expect("sh");
        let ended = Ended(Some(Monitor { child, api: None }));
        let monitor = ended.0.as_ref().expect("the loop");
        monitor.pause(Duration::from_secs(10)).expect("paused");
        assert_eq!(all_stopped(monitor.pid()), Some(true));
        let cpu = monitor.cpu_seconds().expect("cpu");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(monitor.cpu_seconds(), Some(cpu), "a paused process uses no CPU");
        monitor.resume();
        let deadline = Instant::now() + Duration::from_secs(30);
        while all_stopped(monitor.pid()) == Some(true) {
            assert!(Instant::now() < deadline, "still stopped 30 s after SIGCONT");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn an_instance_is_recording_when_its_tracing_on_reads_1() {
        let dir = std::env::temp_dir().join(format!("proctor-impact-instances-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let on = |name: &str, value: &str| {
            std::fs::create_dir_all(dir.join(name)).expect("instance dir");
            std::fs::write(dir.join(name).join("tracing_on"), value).expect("tracing_on");
        };
        on("proctor-123-0", "0\n");
        on("proctor-1234-0", "1\n");
        on("other-123-0", "1\n");
        let instances = [dir.clone(), dir.join("absent")];
        assert!(!recording(&instances, 123), "another pid's instance or another name is not this agent's");
        on("proctor-123-1", "1\n");
        assert!(recording(&instances, 123));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_pause_inside_a_traced_read_lets_the_read_finish_and_stops_again() {
        // A busy shell stands for the agent: it says it is recording as it starts, and that
        // its read is over when it runs again after a stop (a trap on SIGCONT).
        let dir = std::env::temp_dir().join(format!("proctor-impact-pause-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("instances dir");
        let script = r#"d="$1/proctor-$$-0"; mkdir -p "$d"; trap 'echo 0 > "$d/tracing_on"' CONT; echo 1 > "$d/tracing_on"; while :; do :; done"#;
        let child = Command::new("sh").args(["-c", script, "sh"]).arg(&dir).spawn().expect("sh");
        let ended = Ended(Some(Monitor { child, api: None }));
        let monitor = ended.0.as_ref().expect("the loop");
        let pid = monitor.pid();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !recording(std::slice::from_ref(&dir), pid) {
            assert!(Instant::now() < deadline, "the shell did not start recording within 60 s");
            std::thread::sleep(Duration::from_millis(2));
        }
        let let_finish = monitor.pause_watching(std::slice::from_ref(&dir), Duration::from_secs(60)).expect("paused");
        assert_eq!(let_finish, 1, "the first stop fell inside the read: let run once, then stopped");
        assert_eq!(all_stopped(pid), Some(true));
        assert!(!recording(std::slice::from_ref(&dir), pid));
        // Not recording: stopped at once, nothing let finish.
        monitor.resume();
        assert_eq!(monitor.pause_watching(std::slice::from_ref(&dir), Duration::from_secs(60)), Ok(0));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_listening_line_gives_the_address() {
        let line = "proctor: listening on http://127.0.0.1:40123/ (dashboard /, API /api/v1/, …); sampling every 1 s";
        assert_eq!(listening_address(line), Some("127.0.0.1:40123".parse().expect("address")));
        assert_eq!(listening_address("proctor: recording into /tmp/x"), None);
    }
}
