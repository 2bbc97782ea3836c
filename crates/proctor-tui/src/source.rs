//! Where frames come from, each on a thread of its own so the screen never waits: the
//! in-process agent, a remote `proctor serve`, and a store worker that answers time-travel
//! questions. They all send [`Msg`]s to the one channel the screen's loop reads; the actions
//! worker (signals, nice) answers there too.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proctor_agent::{Shared, Snapshot};
use proctor_store::{same_run, Reader};
use ratatui::crossterm::event::Event;

use crate::frame::{Frame, Origin, SharedFrame};

/// What the screen's loop is told.
#[derive(Debug)]
pub enum Msg {
    Input(Event),
    /// The newest frame of a live source (the agent, a remote agent, a recording being written).
    Newest(SharedFrame),
    /// The store worker's answer to request `id`.
    Stored {
        id: u64,
        frame: Option<SharedFrame>,
        note: Option<String>,
    },
    /// A source could not give a frame; said on the status line, retried.
    Problem(String),
    /// What a signal or nice request came to.
    Done(String),
    /// Pressure (some avg10: cpu, memory, io) of the cgroups the `z` view asked about.
    Pressure(BTreeMap<String, CgroupPressure>),
    /// SIGTERM (or SIGINT from outside the terminal): leave as `q` does.
    Stop,
}

/// One cgroup's pressure stall figures (`some avg10`, percent); `None` where the file is absent
/// (no PSI on this kernel, or no unified hierarchy for it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CgroupPressure {
    pub cpu: Option<f64>,
    pub memory: Option<f64>,
    pub io: Option<f64>,
}

/// Reads the pressure of each asked cgroup (path, one member's pid) under `root`: the member's
/// unified-hierarchy directory, then `cpu.pressure`, `memory.pressure` and `io.pressure`, when
/// that directory is the cgroup shown ([`own_pressure_dir`]); otherwise the row has none (`-`).
/// Runs only while the `z` view is open, once per frame, off the screen's thread.
pub fn pressure_worker(root: proctor_procfs::Root, requests: Receiver<Vec<(String, u32)>>, tx: Sender<Msg>) {
    use proctor_procfs::cgroup::discover;
    use proctor_procfs::host::parse_pressure;
    while let Ok(mut asked) = requests.recv() {
        // Only the newest question matters.
        while let Ok(newer) = requests.try_recv() {
            asked = newer;
        }
        let mut out = BTreeMap::new();
        for (path, pid) in asked {
            let Ok(Some(paths)) = discover(&root, pid) else { continue };
            let Some(dir) = own_pressure_dir(&paths, &path) else {
                out.insert(path, CgroupPressure::default());
                continue;
            };
            let read = |file: &str| {
                let bytes = root.read(dir.dir.join(file)).ok()?;
                parse_pressure(&bytes)?.some.map(|l| l.avg10)
            };
            out.insert(
                path,
                CgroupPressure { cpu: read("cpu.pressure"), memory: read("memory.pressure"), io: read("io.pressure") },
            );
        }
        if tx.send(Msg::Pressure(out)).is_err() {
            return;
        }
    }
}

/// The unified-hierarchy directory whose PSI is the shown cgroup's own: only where its path is
/// the one shown. On a hybrid host the row is the v1 memory cgroup (`/jobs/a`) while the
/// process may sit in the unified root, whose `cpu.pressure` is the whole host's: every row
/// showed the host's pressure as its own.
pub fn own_pressure_dir<'a>(
    paths: &'a proctor_procfs::cgroup::CgroupPaths,
    shown: &str,
) -> Option<&'a proctor_procfs::cgroup::CgroupDir> {
    paths.unified.as_ref().filter(|dir| dir.path == shown)
}

/// Sends each snapshot the agent publishes, as a frame, until the channel closes; with
/// `alerting`, the rules are evaluated on each snapshot here (off the screen's thread) and the
/// frame says what fires. Nobody is told: telling receivers is `serve`'s.
pub fn live(
    shared: Arc<Shared>,
    interval: Duration,
    tx: Sender<Msg>,
    mut alerting: Option<proctor_alerts::engine::Alerting>,
) {
    let mut seq = 0;
    loop {
        let Some(s) = shared.wait_newer(seq, interval * 4 + Duration::from_secs(1)) else {
            if tx.send(Msg::Problem("the sampling thread has not published a sample for a while".into())).is_err() {
                return;
            }
            continue;
        };
        seq = s.sample.seq;
        let mut frame = Frame::from_snapshot(&s, Origin::Live);
        if let Some(a) = alerting.as_mut() {
            a.evaluate(&s);
            frame.alerts = Some(crate::frame::AlertLine::of(a));
        }
        if tx.send(Msg::Newest(Arc::new(frame))).is_err() {
            return;
        }
    }
}

/// A remote agent: base URL (`http://HOST:PORT`), token.
#[derive(Debug, Clone)]
pub struct Remote {
    /// Where its API is: the URL's host and port, and its path as a prefix (`/proctor` behind a
    /// proxy), without a trailing slash.
    pub target: proctor_client::url::Target,
    pub token: Option<String>,
    pub timeout: Duration,
}

/// The most one answer of a remote agent may be.
const MAX_ANSWER: usize = 64 << 20;

impl Remote {
    pub fn parse(url: &str, token: Option<String>) -> Result<Remote, String> {
        let mut target = proctor_client::url::parse(url).map_err(|e| format!("--connect {url}: {e}"))?;
        if target.tls {
            return Err(format!(
                "--connect {url}: proctor serve speaks plain HTTP; put it behind your TLS proxy's plain side or use an SSH tunnel"
            ));
        }
        target.path = target.path.split('?').next().unwrap_or("").trim_end_matches('/').to_string();
        Ok(Remote { target, token, timeout: Duration::from_secs(5) })
    }

    /// One GET through the one outgoing client: the whole exchange within the timeout, the body
    /// at most 64 MiB.
    pub fn get(&self, path: &str) -> Result<Vec<u8>, String> {
        let authority = &self.target.authority;
        let target = proctor_client::url::Target { path: format!("{}{path}", self.target.path), ..self.target.clone() };
        let mut headers = vec![("Accept".to_string(), "application/json".to_string())];
        if let Some(t) = &self.token {
            headers.push(("Authorization".to_string(), format!("Bearer {t}")));
        }
        let spec = proctor_client::http::RequestSpec { method: "GET".into(), headers, ..Default::default() };
        let (status, body) = proctor_client::client::fetch_at_most(&target, None, &spec, self.timeout, MAX_ANSWER)
            .map_err(|e| format!("{authority}{path}: {e}"))?;
        if status == 401 {
            return Err(format!("{authority} wants a token (--token-file)"));
        }
        if status != 200 {
            let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            return Err(format!("{authority}{path} answered {status}: {}", text.trim()));
        }
        Ok(body)
    }

    /// The remote agent's current frame.
    pub fn frame(&self) -> Result<Frame, String> {
        let snapshot = self.get("/api/v1/snapshot?top=0")?;
        let processes = self.get("/api/v1/processes")?;
        Frame::from_remote(&snapshot, &processes).map_err(|e| format!("{}: {e}", self.target.authority))
    }
}

/// Polls a remote agent every `interval`, until the channel closes.
pub fn remote(remote: Remote, interval: Duration, tx: Sender<Msg>) {
    // An agent without rules says so once and is not asked again.
    let mut alerts_absent = false;
    loop {
        let started = Instant::now();
        let msg = match remote.frame() {
            Ok(mut f) => {
                if !alerts_absent {
                    match remote.get("/api/v1/alerts") {
                        Ok(body) => match crate::frame::AlertLine::from_json(&body) {
                            Ok(Some(line)) => f.alerts = Some(line),
                            Ok(None) => alerts_absent = true,
                            Err(_) => {}
                        },
                        // An agent from before alerts.
                        Err(e) if e.contains(" answered 404") => alerts_absent = true,
                        Err(_) => {}
                    }
                }
                Msg::Newest(Arc::new(f))
            }
            Err(e) => Msg::Problem(e),
        };
        if tx.send(msg).is_err() {
            return;
        }
        std::thread::sleep(interval.saturating_sub(started.elapsed()));
    }
}

/// A question for the store worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// The newest stored frame (a recording being followed).
    Newest,
    AtOrBefore(u64),
    After(u64),
}

/// Answers [`Ask`]s from the store in `dir`, one at a time, until the request channel closes.
/// The reader is reopened for `Newest`, so segments written since are seen.
pub fn store_worker(dir: PathBuf, requests: Receiver<(u64, Ask)>, tx: Sender<Msg>) {
    let mut reader: Option<Reader> = None;
    let mut said = 0usize;
    while let Ok((id, ask)) = requests.recv() {
        if ask == Ask::Newest || reader.is_none() {
            match Reader::open(&dir) {
                Ok(r) => reader = Some(r),
                Err(e) => {
                    let _ = tx.send(Msg::Stored {
                        id,
                        frame: None,
                        note: Some(format!("cannot read {}: {e}", dir.display())),
                    });
                    continue;
                }
            }
        }
        let Some(r) = reader.as_mut() else { continue };
        let (frame, mut note) = match answer(r, ask) {
            Ok(Some(f)) => (Some(Arc::new(f)), None),
            Ok(None) => (None, Some(nothing(ask))),
            Err(e) => (None, Some(format!("reading {}: {e}", dir.display()))),
        };
        // Damage read around is said once per kind of problem, on the status line.
        let problems = r.report().problems();
        if problems.len() > said {
            if let Some(p) = problems.last() {
                note = Some(format!("{}; {}", note.unwrap_or_else(|| "read around damage".into()), p));
            }
            said = problems.len();
        }
        if tx.send(Msg::Stored { id, frame, note }).is_err() {
            return;
        }
    }
}

fn nothing(ask: Ask) -> String {
    match ask {
        Ask::Newest => "the recording has no samples yet".into(),
        Ask::AtOrBefore(_) => "nothing older in the recording".into(),
        Ask::After(_) => "nothing newer in the recording".into(),
    }
}

fn answer(r: &mut Reader, ask: Ask) -> Result<Option<Frame>, proctor_store::StoreError> {
    let at_ns = match ask {
        Ask::Newest => u64::MAX,
        Ask::AtOrBefore(ms) => ms.saturating_mul(1_000_000).saturating_add(999_999),
        Ask::After(ms) => {
            let from = ms.saturating_add(1).saturating_mul(1_000_000);
            let frames = r.frames(from, u64::MAX)?;
            let Some(first) = frames.first() else { return Ok(None) };
            first.unix_ns()
        }
    };
    let Some((cur, prev)) = r.at_or_before(at_ns)? else { return Ok(None) };
    let prev = prev.filter(|p| same_run(p, &cur));
    let snapshot = Snapshot::derive(cur, prev.as_ref());
    Ok(Some(Frame::from_snapshot(&snapshot, Origin::Stored)))
}

/// What the user asked to be done to processes; each target is (pid, start time) so a pid
/// reused since the frame was taken is never hit.
#[derive(Debug, Clone)]
pub enum Action {
    Signal { targets: Vec<(u32, Option<f64>)>, signal: i32, name: &'static str },
    Nice { targets: Vec<(u32, Option<f64>)>, delta: i32 },
}

/// Carries out actions off the screen's thread (each checks the process is still the one
/// shown, which reads `/proc`), answering with [`Msg::Done`].
pub fn actions_worker(requests: Receiver<Action>, boot_time: Option<u64>, tx: Sender<Msg>) {
    while let Ok(action) = requests.recv() {
        let text = match action {
            Action::Signal { targets, signal, name } => each(&targets, boot_time, |pid| {
                // SAFETY: kill(2) with a pid checked against its start time just before.
                let r = unsafe { libc::kill(pid as i32, signal) };
                (r == 0).then_some(()).ok_or_else(std::io::Error::last_os_error)
            })
            .summary(&format!("sent {name} to")),
            Action::Nice { targets, delta } => each(&targets, boot_time, |pid| {
                // SAFETY: plain syscalls on a checked pid; errno is reset to tell -1 from an error.
                unsafe {
                    *libc::__errno_location() = 0;
                    let now = libc::getpriority(libc::PRIO_PROCESS, pid);
                    if now == -1 && *libc::__errno_location() != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let to = (now + delta).clamp(-20, 19);
                    if libc::setpriority(libc::PRIO_PROCESS, pid, to) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                }
            })
            .summary(if delta < 0 {
                "raised the priority of (nice -1)"
            } else {
                "lowered the priority of (nice +1)"
            }),
        };
        if tx.send(Msg::Done(text)).is_err() {
            return;
        }
    }
}

struct Outcomes {
    ok: Vec<u32>,
    failed: Vec<(u32, String)>,
}

impl Outcomes {
    fn summary(&self, verb: &str) -> String {
        let mut text = String::new();
        if !self.ok.is_empty() {
            text = format!("{verb} {}", pids(&self.ok));
        }
        for (pid, why) in &self.failed {
            if !text.is_empty() {
                text.push_str("; ");
            }
            text.push_str(&format!("pid {pid}: {why}"));
        }
        text
    }
}

fn pids(p: &[u32]) -> String {
    let list: Vec<String> = p.iter().take(8).map(u32::to_string).collect();
    let more = if p.len() > 8 { format!(" and {} more", p.len() - 8) } else { String::new() };
    format!("pid {}{more}", list.join(", "))
}

fn each(
    targets: &[(u32, Option<f64>)],
    boot_time: Option<u64>,
    mut act: impl FnMut(u32) -> std::io::Result<()>,
) -> Outcomes {
    let mut out = Outcomes { ok: Vec::new(), failed: Vec::new() };
    for &(pid, start) in targets {
        if let Err(why) = same_process(pid, start, boot_time) {
            out.failed.push((pid, why));
            continue;
        }
        match act(pid) {
            Ok(()) => out.ok.push(pid),
            Err(e) => out.failed.push((
                pid,
                match e.raw_os_error() {
                    Some(libc::EPERM) | Some(libc::EACCES) => {
                        "permission denied (another user's process, or raising priority needs root)".into()
                    }
                    Some(libc::ESRCH) => "no such process (it exited)".into(),
                    _ => e.to_string(),
                },
            )),
        }
    }
    out
}

/// The pid still names the process the frame showed: its start time is the same.
fn same_process(pid: u32, start: Option<f64>, boot_time: Option<u64>) -> Result<(), String> {
    let bytes = std::fs::read(format!("/proc/{pid}/stat")).map_err(|_| "it exited".to_string())?;
    let stat = proctor_procfs::process::parse_stat(&bytes).ok_or("its /proc stat is unreadable")?;
    let (Some(start), Some(boot)) = (start, boot_time) else { return Ok(()) };
    let ticks = proctor_procfs::system::clock_ticks_per_sec().max(1) as f64;
    let now = boot as f64 + stat.start_ticks as f64 / ticks;
    if (now - start).abs() > 0.05 {
        return Err("the pid now belongs to another process; nothing sent".into());
    }
    Ok(())
}

/// Appends slow-log lines on a thread of its own, behind a bounded queue (a slow disk drops
/// lines, counted, rather than stalling the screen).
pub fn slow_log_writer(path: PathBuf, lines: Receiver<String>, tx: Sender<Msg>) {
    let file = std::fs::OpenOptions::new().create(true).append(true).open(&path);
    let mut file = match file {
        Ok(f) => f,
        Err(e) => {
            let _ = tx.send(Msg::Problem(format!("cannot open the slow log {}: {e}", path.display())));
            return;
        }
    };
    let mut failed = false;
    while let Ok(line) = lines.recv() {
        if let Err(e) = file.write_all(line.as_bytes()).and_then(|()| file.write_all(b"\n")) {
            if !std::mem::replace(&mut failed, true) {
                let _ = tx.send(Msg::Problem(format!("cannot write the slow log {}: {e}", path.display())));
            }
        }
    }
}

/// Sends terminal input to the loop; ends when the loop is gone.
pub fn input(tx: Sender<Msg>) {
    loop {
        match ratatui::crossterm::event::read() {
            Ok(event) => {
                if tx.send(Msg::Input(event)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Msg::Problem(format!("cannot read the terminal: {e}")));
                return;
            }
        }
    }
}

/// A bounded queue's sender with a drop counter, for the slow log.
#[derive(Debug)]
pub struct Bounded {
    pub tx: SyncSender<String>,
    pub dropped: u64,
}

impl Bounded {
    pub fn send(&mut self, line: String) {
        if self.tx.try_send(line).is_err() {
            self.dropped += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A one-shot server on loopback answering `reply` to the first request; the request is
    /// returned through the join handle.
    fn answer_once(reply: &'static [u8]) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/proctor/", listener.local_addr().expect("addr"));
        let handle = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let _ = conn.write_all(reply);
            String::from_utf8_lossy(&request).into_owned()
        });
        (url, handle)
    }

    #[test]
    fn a_remote_answer_comes_through_the_one_client_chunked_or_not() {
        let (url, server) = answer_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n2\r\n\":\r\n2\r\n1}\r\n0\r\n\r\n",
        );
        let remote = Remote::parse(&url, Some("t0ken".into())).expect("url");
        assert_eq!(remote.get("/api/v1/agent").as_deref(), Ok(&b"{\"a\":1}"[..]));
        let request = server.join().expect("server");
        assert!(request.starts_with("GET /proctor/api/v1/agent HTTP/1.1\r\n"), "{request}");
        assert!(request.contains("Authorization: Bearer t0ken\r\n"), "{request}");

        let (url, server) = answer_once(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n");
        let remote = Remote::parse(&url, None).expect("url");
        assert!(remote.get("/api/v1/agent").is_err_and(|e| e.contains("wants a token")));
        server.join().expect("server");
    }

    #[test]
    fn a_cgroup_shows_only_its_own_pressure() {
        use proctor_procfs::cgroup::{parse_mountinfo, resolve};
        use proctor_procfs::process::parse_cgroup;
        let mounts = parse_mountinfo(
            b"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
              41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
        );
        let paths = |text: &[u8]| resolve(&mounts, &parse_cgroup(text).expect("parses")).expect("resolves");
        // Hybrid, the process in the unified root: that PSI is the host's, not /jobs/a's.
        assert!(own_pressure_dir(&paths(b"4:memory:/jobs/a\n0::/\n"), "/jobs/a").is_none());
        // The unified path is the one shown (systemd names both alike): its own.
        let same = paths(b"4:memory:/user.slice\n0::/user.slice\n");
        assert_eq!(own_pressure_dir(&same, "/user.slice").map(|d| d.path.as_str()), Some("/user.slice"));
        // v2 only, the root shown: the root's pressure is the host's, and so its own.
        let v2 = resolve(
            &parse_mountinfo(b"1 0 0:1 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
            &parse_cgroup(b"0::/\n").expect("parses"),
        )
        .expect("resolves");
        assert!(own_pressure_dir(&v2, "/").is_some());
    }
}
