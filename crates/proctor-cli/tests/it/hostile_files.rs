//! Files that are not what proctor expects where it expects its own or a host's (issue 33 item
//! 6): a FIFO at the alerts state, at the alerts log or at a remote-write cursor once held
//! `serve` (no answer, no evaluation, a stop that needed a second signal); a FIFO at a host
//! root's `proc/stat` or `proc/PID/stat` held `snapshot` and `doctor`, and a link to
//! `/dev/zero` or a 4 GiB file there grew a read until the allocation aborted. Every wait here
//! has a bound, and the host-root runs have an address-space limit, so the old behaviour fails
//! rather than holds the suite or takes the machine's memory.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::bounded::{terminate, wait_at_most, StderrLines, STARTUP};
use super::flood::body_json;
use super::{http_get, proctor_argv, proctor_command, Guard};

fn mkfifo(path: &Path) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL");
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A rules file in `dir` with one rule, `NAME`, that fires at once and never resolves.
fn firing_rule(dir: &Path, name: &str) -> std::path::PathBuf {
    let rules = dir.join("rules.yml");
    let text =
        format!("groups:\n  - name: g\n    rules:\n      - alert: {name}\n        expr: host.memory.total > 1MiB\n");
    std::fs::write(&rules, text).expect("rules");
    rules
}

/// `proctor serve` recording into `data` with `extra` flags: the child, its address, its stderr.
fn serve(data: &Path, extra: &[&str]) -> (Guard, String, StderrLines) {
    let mut child = proctor_command()
        .args(["serve", "--listen", "127.0.0.1:0", "--interval", "200ms", "--pss-budget", "0", "--data-dir"])
        .arg(data)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start serve");
    let mut stderr = StderrLines::take(&mut child);
    let addr = stderr.address();
    (Guard(child), addr, stderr)
}

/// SIGTERM once: serve stops, successfully, within the bound.
fn stops_on_one_sigterm(mut serve: Guard, stderr: &mut StderrLines) {
    let status = terminate(&mut serve.0, "serve");
    assert!(status.success(), "{status:?}: {}", stderr.rest(STARTUP));
}

/// A FIFO at `DATA/alerts/state.json`: serve answers, says the state could not be read and why,
/// evaluates, and stops on one SIGTERM. (It used to wait in `open` before it listened.)
#[test]
fn a_fifo_at_the_alerts_state_neither_holds_serve_nor_its_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = firing_rule(dir.path(), "Always");
    let data = dir.path().join("data");
    mkfifo(&data.join("alerts/state.json"));
    let (serve, addr, mut stderr) = serve(&data, &["--rules", rules.to_str().expect("utf-8")]);
    assert!(http_get(&addr, "/api/v1/agent").starts_with("HTTP/1.1 200"));
    wait_until("two evaluations", STARTUP, || {
        body_json(&http_get(&addr, "/api/v1/alerts"))["evaluations_total"].as_u64() >= Some(2)
    });
    let alerts = body_json(&http_get(&addr, "/api/v1/alerts"));
    let said = alerts["last_log_error"].as_str().unwrap_or_default();
    assert!(said.contains("state.json is a FIFO, not a regular file; starting afresh"), "{alerts}");
    stops_on_one_sigterm(serve, &mut stderr);
}

/// A FIFO at `DATA/alerts/events.jsonl`: the rule still fires and evaluations go on, each
/// failed append counted with its reason, and serve stops on one SIGTERM. (The alerts thread
/// used to wait in `open` for a reader: no evaluation after the first event, and a stop that
/// needed a second signal.)
#[test]
fn a_fifo_at_the_alerts_log_neither_holds_evaluation_nor_the_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Fires at once, resolves never: one event to log, then evaluations with nothing to log.
    let rules = firing_rule(dir.path(), "Always");
    let data = dir.path().join("data");
    mkfifo(&data.join("alerts/events.jsonl"));
    let (serve, addr, mut stderr) = serve(&data, &["--rules", rules.to_str().expect("utf-8")]);
    wait_until("the failed append counted and evaluations past it", STARTUP, || {
        let alerts = body_json(&http_get(&addr, "/api/v1/alerts"));
        alerts["log_errors_total"].as_u64() >= Some(1) && alerts["evaluations_total"].as_u64() >= Some(3)
    });
    let alerts = body_json(&http_get(&addr, "/api/v1/alerts"));
    assert_eq!(alerts["firing"], 1, "{alerts}");
    let said = alerts["last_log_error"].as_str().unwrap_or_default();
    assert!(said.contains("events.jsonl is a FIFO, not a regular file"), "{alerts}");
    assert!(http_get(&addr, "/api/v1/agent").starts_with("HTTP/1.1 200"));
    stops_on_one_sigterm(serve, &mut stderr);
}

/// A FIFO at a remote's cursor: the queue says why it has no cursor in `/api/v1/agent`, and
/// serve stops on one SIGTERM. (The queue's thread used to wait in `open`, and serve's stop
/// waited on that thread for ever.)
#[test]
fn a_fifo_at_a_remote_write_cursor_neither_holds_the_queue_nor_the_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A port nothing listens on: every send fails, and the cursor is never written.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let url = format!("http://127.0.0.1:{port}/api/v1/write");
    let data = dir.path().join("data");
    mkfifo(&data.join("remote-write").join(proctor_remote::queue::cursor_file_name(&url)));
    let (serve, addr, mut stderr) = serve(&data, &["--remote-write", &url]);
    wait_until("the cursor's error in /api/v1/agent", STARTUP, || {
        let agent = body_json(&http_get(&addr, "/api/v1/agent"));
        agent["remote_write"][0]["cursor_error"].as_str().is_some_and(|e| e.contains("is a FIFO, not a regular file"))
    });
    stops_on_one_sigterm(serve, &mut stderr);
}

/// The smallest host root a snapshot reads: one CPU's `proc/stat`, memory, and process 4244.
fn host_tree(dir: &Path) {
    let write = |path: &str, text: &str| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    write("proc/stat", "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\nbtime 1\n");
    write("proc/meminfo", "MemTotal: 1048576 kB\nMemAvailable: 524288 kB\n");
    write("proc/4244/stat", "4244 (sleeper) S 1 4244 4244 0 -1 4194304 0 0 0 0 1 1 0 0 20 0 1 0 100 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
    write("proc/4244/statm", "244 100 80 1 0 50 0\n");
    write("proc/4244/status", "Name:\tsleeper\nUid:\t0\t0\t0\t0\nVmRSS:\t400 kB\n");
}

/// `proctor ARGS` under a 1 GiB address-space limit (`prlimit`, util-linux), its stdout and
/// stderr in files, waited for with a bound: (exit status, stdout, stderr).
fn bounded_run(dir: &Path, args: &[&str]) -> (std::process::ExitStatus, String, String) {
    let (out, err) = (dir.join("out"), dir.join("err"));
    let mut child = Guard(
        Command::new("prlimit")
            .arg("--as=1073741824")
            .args(proctor_argv())
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).expect("out"))
            .stderr(std::fs::File::create(&err).expect("err"))
            .spawn()
            .expect("prlimit (util-linux)"),
    );
    let status = wait_at_most(&mut child.0, &format!("proctor {}", args.join(" ")), STARTUP);
    let read = |p: &Path| std::fs::read_to_string(p).expect("read");
    (status, read(&out), read(&err))
}

/// A FIFO at `HOST/proc/stat`: `snapshot` and `doctor` say what it is and exit 1. (Both used to
/// wait in `open` for ever.)
#[test]
fn a_fifo_at_a_host_roots_proc_stat_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let host = dir.path().join("host");
    host_tree(&host);
    std::fs::remove_file(host.join("proc/stat")).expect("rm");
    mkfifo(&host.join("proc/stat"));
    let host = host.to_str().expect("utf-8");
    for args in [&["snapshot", "--host-root", host, "--interval", "0"][..], &["doctor", "--host-root", host]] {
        let (status, _, stderr) = bounded_run(dir.path(), args);
        assert_eq!(status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("cannot read {host}/proc/stat: a FIFO, not a regular file")),
            "{args:?}: {stderr}"
        );
    }
}

/// Under a host root, a process whose `stat` is a link to `/dev/zero`, a 4 GiB (sparse) file or
/// a FIFO is skipped and counted; the others are listed. (The first two grew a read until the
/// allocation aborted, the FIFO waited in `open` for ever.) `doctor` reads the same tree.
#[test]
fn hostile_proc_pid_stat_files_under_a_host_root_are_skipped_and_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let host = dir.path().join("host");
    host_tree(&host);
    std::fs::create_dir_all(host.join("proc/4242")).expect("mkdir");
    std::os::unix::fs::symlink("/dev/zero", host.join("proc/4242/stat")).expect("symlink");
    std::fs::create_dir_all(host.join("proc/4243")).expect("mkdir");
    std::fs::File::create(host.join("proc/4243/stat")).expect("create").set_len(4 << 30).expect("4 GiB, sparse");
    mkfifo(&host.join("proc/4245/stat"));
    let host = host.to_str().expect("utf-8");

    let (status, stdout, stderr) = bounded_run(
        dir.path(),
        &["snapshot", "--host-root", host, "--interval", "0", "--format", "json", "--top", "100"],
    );
    assert!(status.success(), "{status:?}: {stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let top = v["processes"]["top"].as_array().expect("processes");
    let pids: Vec<u64> = top.iter().filter_map(|p| p["pid"].as_u64()).collect();
    assert_eq!(pids, [4244], "{v}");
    let errors = &v["agent"]["errors_total"];
    assert_eq!(errors["process.stat:io"].as_u64(), Some(3), "{errors}");

    let (status, _, stderr) = bounded_run(dir.path(), &["doctor", "--host-root", host]);
    assert!(status.success(), "{status:?}: {stderr}");
}

/// A full disk (a 16-byte file size limit, SIGXFSZ ignored as a full disk sends none) makes
/// each alerts state write fail: counted, and no half-written `state.json.tmp` left behind
/// (issue 33 item 16: a 0-byte `.tmp` stayed).
#[test]
fn a_state_write_that_fails_leaves_no_tmp_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = firing_rule(dir.path(), "Always");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    let mut command = Command::new("sh");
    command.args(["-c", "trap '' XFSZ; exec prlimit --fsize=16 \"$@\"", "sh"]).args(proctor_argv());
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--interval", "200ms", "--pss-budget", "0"])
        .arg("--data-dir")
        .arg(&data)
        .args(["--rules", rules.to_str().expect("utf-8")]);
    let mut child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("sh");
    let mut stderr = StderrLines::take(&mut child);
    let addr = stderr.address();
    let serve = Guard(child);
    wait_until("a failed state write", STARTUP, || {
        body_json(&http_get(&addr, "/api/v1/alerts"))["state_errors_total"].as_u64() >= Some(1)
    });
    let left: Vec<String> = std::fs::read_dir(data.join("alerts"))
        .expect("the alerts dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!left.iter().any(|n| n.ends_with(".tmp")), "left behind: {left:?}");
    stops_on_one_sigterm(serve, &mut stderr);
}

/// A FIFO given as a rules file: `alerts check`, `groups --check` and `serve --rules` say it is
/// a FIFO instead of waiting for a writer, and a SIGHUP that finds the running agent's rules
/// file replaced by one keeps the old rules and says why (the alerts thread used to wait in
/// `open`, and evaluations with it).
#[test]
fn a_fifo_as_a_rules_file_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("fifo.yml");
    mkfifo(&fifo);
    let fifo_arg = fifo.to_str().expect("utf-8");
    for args in [&["alerts", "check", fifo_arg][..], &["groups", "--check", fifo_arg]] {
        let mut child = proctor_command().args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("run");
        let mut stderr = StderrLines::take(&mut child);
        let status = wait_at_most(&mut child, &format!("{args:?}"), STARTUP);
        let said = stderr.rest(STARTUP);
        assert!(!status.success() && said.contains("is a FIFO, not a regular file"), "{args:?}: {said}");
    }
    let rules = firing_rule(dir.path(), "First");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    let (serve, addr, mut stderr) = serve(&data, &["--rules", rules.to_str().expect("utf-8")]);
    let evaluations = || body_json(&http_get(&addr, "/api/v1/alerts"))["evaluations_total"].as_u64().unwrap_or(0);
    wait_until("a first evaluation", STARTUP, || evaluations() >= 1);
    std::fs::remove_file(&rules).expect("rm");
    mkfifo(&rules);
    // SAFETY: kill(2) with the pid of the serve this test started.
    unsafe { libc::kill(serve.0.id() as i32, libc::SIGHUP) };
    wait_until("the reload refused", STARTUP, || {
        body_json(&http_get(&addr, "/api/v1/alerts"))["reload_error"].as_str().is_some_and(|e| e.contains("a FIFO"))
    });
    let alerts = body_json(&http_get(&addr, "/api/v1/alerts"));
    assert_eq!(alerts["rules"][0]["name"], "First", "the old rules kept: {alerts}");
    let after = evaluations();
    wait_until("evaluations going on", STARTUP, || evaluations() > after);
    stops_on_one_sigterm(serve, &mut stderr);
}
