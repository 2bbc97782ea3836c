//! `proctor serve` recording into its data directory, as a real child process: what it writes
//! is read back by `replay` and `dump`; an unusable directory is reported while serving goes
//! on; a plain `proctor serve` records into its default directory, created private (`--record`
//! asks for the same); `--no-record` writes nothing; a store that fails a write keeps recording
//! in a new segment.
//!
//! Every child gets HOME and XDG_STATE_HOME inside a temporary directory, so no test can write
//! into the real home directory.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proctor_store::{Reader, StoreConfig, Writer};

use super::{http_get, Guard};

pub(super) struct Served {
    pub(super) child: Guard,
    pub(super) addr: String,
    /// Everything serve printed on stderr up to and including its address.
    early_stderr: String,
    stderr: super::bounded::StderrLines,
}

/// Starts `proctor serve` at 100 ms with HOME and XDG_STATE_HOME set as given (never the
/// caller's), and waits for its address.
pub(super) fn serve(
    home: &Path,
    xdg_state_home: Option<&Path>,
    extra: &[&str],
    setup: impl FnOnce(&mut Command),
) -> Served {
    let mut command = super::proctor_command();
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--interval", "100ms", "--pss-budget", "0"])
        .args(extra)
        .env("HOME", home)
        .env_remove("XDG_STATE_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(state) = xdg_state_home {
        command.env("XDG_STATE_HOME", state);
    }
    setup(&mut command);
    let mut child = command.spawn().expect("start serve");
    let mut stderr = super::bounded::StderrLines::take(&mut child);
    let child = Guard(child);
    let addr = stderr.address();
    let early_stderr = stderr.seen.clone();
    Served { child, addr, early_stderr, stderr }
}

impl Served {
    fn agent(&self) -> serde_json::Value {
        let reply = http_get(&self.addr, "/api/v1/agent");
        let body = reply.split_once("\r\n\r\n").map(|(_, body)| body).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {reply}"))
    }

    /// Polls /api/v1/agent until `check` holds (at most 20 s); returns the last answer.
    fn agent_until(&self, check: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let agent = self.agent();
            if check(&agent) || Instant::now() > deadline {
                return agent;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, then the exit status and the rest of stderr.
    pub(super) fn stop(mut self) -> (std::process::ExitStatus, String) {
        let status = super::bounded::terminate(&mut self.child.0, "serve");
        let rest = self.stderr.rest(super::bounded::STARTUP);
        (status, rest)
    }
}

fn frames_written(agent: &serde_json::Value) -> u64 {
    agent["recording"]["frames_written"].as_u64().unwrap_or(0)
}

/// Every stored sample's seq, checking that every frame decodes.
fn stored_seqs(dir: &Path) -> Vec<u64> {
    let mut reader = Reader::open(dir).expect("store opens");
    let frames = reader.all_frames().expect("frames");
    let seqs = frames.iter().filter_map(|f| reader.read(f)).map(|s| s.seq).collect();
    assert!(reader.report().bad_frames.is_empty(), "{:?}", reader.report());
    seqs
}

#[test]
fn serve_records_into_its_data_dir_and_replay_and_dump_read_it_back() {
    let home = tempfile::tempdir().expect("tempdir");
    let data = tempfile::tempdir().expect("tempdir");
    let dir = data.path().to_str().expect("utf-8 path");
    let served = serve(home.path(), None, &["--data-dir", dir], |_| {});
    assert!(served.early_stderr.contains(&format!("recording into {dir}")), "{}", served.early_stderr);
    let agent = served.agent_until(|a| frames_written(a) >= 5);
    let recording = &agent["recording"];
    assert_eq!(recording["enabled"], true, "{agent}");
    assert_eq!(recording["dir"], dir, "{agent}");
    assert!(recording["error"].is_null(), "{agent}");
    assert!(frames_written(&agent) >= 5, "{agent}");
    assert!(recording["bytes_written"].as_u64().is_some_and(|b| b > 0), "{agent}");
    assert!(recording["write_cpu_seconds"].as_f64().is_some_and(|s| s > 0.0), "{agent}");
    assert_eq!(recording["write_errors"], 0, "{agent}");
    let metrics = http_get(&served.addr, "/metrics");
    assert!(metrics.contains("proctor_agent_record_enabled 1\n"), "{metrics}");
    assert!(metrics.contains("proctor_agent_record_error 0\n"), "{metrics}");
    assert!(metrics.contains("proctor_agent_record_frames_total "), "{metrics}");
    let (status, _) = served.stop();
    assert!(status.success(), "{status:?}");

    // Everything counted as written is there (stopping drains the queue, so maybe more), in
    // order, and the lock went with the process.
    let seqs = stored_seqs(data.path());
    assert!(seqs.len() as u64 >= frames_written(&agent), "{} stored, {} counted", seqs.len(), frames_written(&agent));
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    Writer::open(data.path(), StoreConfig::default()).expect("the lock is released when serve exits");

    let dump = super::proctor_command()
        .args(["dump", "host", "--dir", dir, "--format", "json", "--fields", "time,cpu.busy_percent"])
        .output()
        .expect("run dump");
    assert!(dump.status.success(), "{}", String::from_utf8_lossy(&dump.stderr));
    assert_eq!(String::from_utf8_lossy(&dump.stdout).lines().count(), seqs.len());
    let replay =
        super::proctor_command().args(["replay", "--dir", dir, "--format", "json"]).output().expect("run replay");
    let view = super::json(&replay);
    assert!(view["host"]["cpu"]["busy_percent"].is_number(), "the newest stored sample has a rate: {view}");
}

/// The voluntary context switches of this process's threads named `name` (threads' names are
/// cut to 15 bytes).
fn thread_switches(pid: u32, name: &str) -> Option<u64> {
    let mut found = None;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let dir = task.path();
        if std::fs::read_to_string(dir.join("comm")).ok()?.trim_end() != name {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        let n: u64 = status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?.trim().parse().ok()?;
        *found.get_or_insert(0) += n;
    }
    found
}

/// An idle serve's timed threads sleep until their time or their stop: over 20 samples the
/// rollup thread (its first roll a minute in) and the reader of recorded probe results (every
/// 5 s) wake at most once per 5 s of the window and once more, where each woke to poll a stop
/// flag 5 and 10 times a second; and serve still stops cleanly.
#[test]
fn an_idle_serves_rollup_and_probe_threads_sleep_until_their_time() {
    let home = tempfile::tempdir().expect("tempdir");
    let data = tempfile::tempdir().expect("tempdir");
    let served = serve(home.path(), None, &["--data-dir", data.path().to_str().expect("utf-8")], |_| {});
    let first = frames_written(&served.agent_until(|a| frames_written(a) >= 2));
    let pid = served.child.0.id();
    let names = ["proctor-rollup", "proctor-probe-w"];
    let before: Vec<Option<u64>> = names.iter().map(|n| thread_switches(pid, n)).collect();
    let started = Instant::now();
    let agent = served.agent_until(|a| frames_written(a) >= first + 20);
    let window = started.elapsed();
    assert!(frames_written(&agent) >= first + 20, "20 samples recorded: {agent}");
    let allowed = 1 + window.as_secs() / 5;
    for (name, before) in names.iter().zip(before) {
        let (Some(before), Some(after)) = (before, thread_switches(pid, name)) else {
            panic!("serve has no thread {name}");
        };
        assert!(after - before <= allowed, "{name} woke {} times in {window:?} (at most {allowed})", after - before);
    }
    let (status, _) = served.stop();
    assert!(status.success(), "{status:?}");
}

/// The default directory: created under XDG_STATE_HOME with mode 0700, parents included.
/// `--record` (opt-in while recording was off by default) is accepted and means the same.
#[test]
fn serve_creates_its_default_data_dir_private_and_records_there() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().expect("tempdir");
    let state = home.path().join("state");
    let served = serve(home.path(), Some(&state), &["--record"], |_| {});
    let agent = served.agent_until(|a| frames_written(a) >= 2);
    let dir = state.join("proctor");
    assert_eq!(agent["recording"]["dir"], dir.to_str().expect("utf-8"), "{agent}");
    let (status, _) = served.stop();
    assert!(status.success(), "{status:?}");
    for created in [&state, &dir] {
        let mode = std::fs::metadata(created).expect("created").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", created.display());
    }
    assert!(stored_seqs(&dir).len() >= 2);

    // Without XDG_STATE_HOME: $HOME/.local/state/proctor.
    let served = serve(home.path(), None, &["--record"], |_| {});
    let agent = served.agent_until(|a| frames_written(a) >= 1);
    let (status, _) = served.stop();
    assert!(status.success(), "{status:?}");
    let dir = home.path().join(".local/state/proctor");
    assert_eq!(agent["recording"]["dir"], dir.to_str().expect("utf-8"), "{agent}");
    assert!(!stored_seqs(&dir).is_empty());
}

/// A missing directory, a file in its place, and a directory another recorder holds: each is
/// reported on stderr, in /api/v1/agent and on /metrics, and serving goes on.
#[test]
fn serve_with_an_unusable_data_dir_keeps_serving_and_reports_why() {
    let home = tempfile::tempdir().expect("tempdir");
    let missing = home.path().join("missing");
    let file = home.path().join("a-file");
    std::fs::write(&file, b"not a directory").expect("write");
    let held = home.path().join("held");
    std::fs::create_dir(&held).expect("mkdir");
    let (_other, _) = Writer::open(&held, StoreConfig::default()).expect("this test holds the lock");
    for (dir, reason) in
        [(&missing, "does not exist"), (&file, "is not a directory"), (&held, "locked by another recorder")]
    {
        let served = serve(home.path(), None, &["--data-dir", dir.to_str().expect("utf-8")], |_| {});
        assert!(
            served.early_stderr.contains("cannot record: ") && served.early_stderr.contains(reason),
            "{}",
            served.early_stderr
        );
        let first = served.agent()["samples_total"].as_u64().expect("samples_total");
        let agent = served.agent_until(|a| a["samples_total"].as_u64().is_some_and(|n| n >= first + 3));
        assert!(agent["samples_total"].as_u64().is_some_and(|n| n >= first + 3), "still sampling: {agent}");
        let recording = &agent["recording"];
        assert_eq!(recording["enabled"], false, "{agent}");
        assert_eq!(recording["dir"], dir.to_str().expect("utf-8"), "{agent}");
        assert!(recording["error"].as_str().is_some_and(|e| e.contains(reason)), "{agent}");
        assert_eq!(recording["frames_written"], 0, "{agent}");
        let metrics = http_get(&served.addr, "/metrics");
        assert!(metrics.contains("proctor_agent_record_enabled 0\n"), "{metrics}");
        assert!(metrics.contains("proctor_agent_record_error 1\n"), "{metrics}");
        let (status, _) = served.stop();
        assert!(status.success(), "{status:?}");
    }
    assert!(!missing.exists(), "an explicit --data-dir is never created");
    assert_eq!(std::fs::read(&file).expect("read"), b"not a directory");
    assert!(std::fs::read_dir(&held).expect("ls").all(|e| e.expect("entry").file_name() == "lock"));
}

/// Recording is on by default (issue #7): with no recording flag at all, serve creates the
/// default directory and records every sample into it.
#[test]
fn serve_by_default_records_into_the_default_dir() {
    let home = tempfile::tempdir().expect("tempdir");
    let state = home.path().join("state");
    let dir = state.join("proctor");
    let served = serve(home.path(), Some(&state), &[], |_| {});
    assert!(served.early_stderr.contains("recording into"), "{}", served.early_stderr);
    let agent = served.agent_until(|a| frames_written(a) >= 3);
    let recording = &agent["recording"];
    assert_eq!(recording["enabled"], true, "{agent}");
    assert_eq!(recording["dir"], dir.to_str().expect("utf-8"), "{agent}");
    assert!(recording["error"].is_null(), "{agent}");
    let (status, _) = served.stop();
    assert!(status.success(), "{status:?}");
    assert!(stored_seqs(&dir).len() >= 3, "{:?}", stored_seqs(&dir));
}

#[test]
fn serve_no_record_writes_nothing() {
    let home = tempfile::tempdir().expect("tempdir");
    let state = home.path().join("state");
    std::fs::create_dir(&state).expect("mkdir");
    let served = serve(home.path(), Some(&state), &["--no-record"], |_| {});
    let agent = served.agent_until(|a| a["samples_total"].as_u64().is_some_and(|n| n >= 4));
    let recording = &agent["recording"];
    assert_eq!(recording["enabled"], false, "{agent}");
    assert!(recording["dir"].is_null() && recording["error"].is_null(), "{agent}");
    let (status, _) = served.stop();
    assert!(status.success(), "{status:?}");
    assert_eq!(std::fs::read_dir(home.path()).expect("ls").count(), 1, "only the state dir this test made");
    assert_eq!(std::fs::read_dir(&state).expect("ls").count(), 0);
}

/// Regression: a failed write (here EFBIG from RLIMIT_FSIZE, standing in for a full disk) left
/// the writer appending to the same segment after a torn frame, so every later write failed
/// too, and a write that succeeded would have put good frames after the torn one (the whole
/// segment set aside on the next open). Now the tail is cut and the next sample starts a new
/// segment: recording goes on, and everything stored reads back.
#[test]
fn serve_keeps_recording_after_a_failed_write() {
    use std::os::unix::process::CommandExt;
    let home = tempfile::tempdir().expect("tempdir");
    let data = tempfile::tempdir().expect("tempdir");
    // Room for a key frame of this host (~35 B per process measured, so 64 B leaves margin)
    // and a few seconds of ~1 KiB deltas at 100 ms, so the limit is reached soon.
    let processes = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit())))
        .count() as u64;
    let limit = (16 << 10) + 64 * processes;
    let served = serve(home.path(), None, &["--data-dir", data.path().to_str().expect("utf-8")], |command| {
        // SAFETY: between fork and exec only async-signal-safe calls: setrlimit and signal.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit { rlim_cur: limit, rlim_max: limit };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Ignored signals stay ignored across exec: the write fails with EFBIG
                // instead of SIGXFSZ ending the process.
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    });
    let agent = served.agent_until(|a| {
        let r = &a["recording"];
        r["write_errors"].as_u64().is_some_and(|n| n >= 2)
    });
    let errors = agent["recording"]["write_errors"].as_u64().unwrap_or(0);
    let frames = frames_written(&agent);
    assert!(errors >= 2, "the limit was reached: {agent}");
    assert!(agent["recording"]["last_write_error"].as_str().is_some_and(|e| e.contains("too large")), "{agent}");
    let later = served.agent_until(|a| frames_written(a) >= frames + 3);
    assert!(frames_written(&later) >= frames + 3, "writes go on after a failure: {later}");
    let (status, _) = served.stop();
    assert!(status.success(), "{status:?}");
    let (_, report) = Writer::open(data.path(), StoreConfig::default()).expect("opens");
    assert!(report.set_aside.is_empty(), "{report:?}");
    let segments = std::fs::read_dir(data.path())
        .expect("ls")
        .filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".seg")));
    assert!(segments.count() >= 3, "a new segment after each failure");
    assert!(stored_seqs(data.path()).len() as u64 >= frames_written(&later));
}

/// Every flag is decided before serve touches anything (issue 31 item 5): a receiver URL it
/// cannot use, or a statsd config file that is not there, stops serve with its reason before it
/// binds, creates its data directory or starts a thread. (They were checked once the agent and
/// its store had started: the default data directory was created first.)
#[test]
fn a_mistaken_flag_stops_serve_before_it_creates_anything() {
    let home = tempfile::tempdir().expect("tempdir");
    let state = home.path().join("state");
    let rules = home.path().join("rules.yml");
    std::fs::write(&rules, "groups: []\n").expect("write rules");
    let rules = rules.to_str().expect("utf-8");
    for (extra, says) in [
        (vec!["--rules", rules, "--alert-webhook", "ftp://example.invalid/"], "--alert-webhook"),
        (vec!["--statsd", "--config", "/nonexistent/statsd.js"], "/nonexistent/statsd.js"),
    ] {
        let out = super::proctor_command()
            .args(["serve", "--listen", "127.0.0.1:0", "--interval", "100ms"])
            .args(&extra)
            .env("HOME", home.path())
            .env("XDG_STATE_HOME", &state)
            .stdin(Stdio::null())
            .output()
            .expect("run serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} was served: {stderr}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
        assert!(!state.exists(), "serve created its data directory before refusing {extra:?}: {stderr}");
    }
}
