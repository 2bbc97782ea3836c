//! The `proctor` binary as a user runs it: exit codes, messages, JSON shapes, unprivileged runs.

mod agreement;
mod alerts;
mod architecture;
mod bounded;
mod fleet;
mod flood;
mod gpu;
mod groups;
mod hostile_files;
mod hostile_store;
mod impact;
mod one_language;
mod otlp;
mod probe;
mod record;
mod remote_write;
mod replay;
mod report;
mod rollup;
mod series_catalog;
mod serve_record;
mod share;
mod statsd_attack;
mod statsd_report;

use std::ffi::OsString;
use std::process::{Child, Command, Output, Stdio};

/// The built `proctor` as a command line: the binary, run through the words of
/// `PROCTOR_TEST_RUNNER` when that is set. scripts/test.d/95-aarch64.sh runs these tests under
/// `qemu-aarch64`, and an emulated process cannot exec an aarch64 binary unless the host has
/// qemu registered with binfmt_misc (containers often cannot), so it names the emulator here.
fn proctor_argv() -> Vec<OsString> {
    let runner = std::env::var_os("PROCTOR_TEST_RUNNER").unwrap_or_default();
    let words = runner.to_str().expect("PROCTOR_TEST_RUNNER is UTF-8").split_whitespace().map(OsString::from);
    words.chain([OsString::from(env!("CARGO_BIN_EXE_proctor"))]).collect()
}

/// A command that runs the built `proctor` (see [`proctor_argv`]); add its arguments.
fn proctor_command() -> Command {
    let argv = proctor_argv();
    let mut command = Command::new(&argv[0]);
    command.args(&argv[1..]);
    command
}

fn proctor(args: &[&str]) -> Output {
    proctor_command().args(args).output().expect("run proctor")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "exit {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn tree_of_unknown_pid_exits_1_with_a_clear_message() {
    let out = proctor(&["tree", "4000000000"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no process with pid 4000000000"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_arguments_exit_2() {
    assert_eq!(proctor(&["snapshot", "--interval", "soon"]).status.code(), Some(2));
    assert_eq!(proctor(&["tree", "not-a-pid"]).status.code(), Some(2));
}

#[test]
fn snapshot_json_has_host_container_processes_and_cost() {
    let v = json(&proctor(&["snapshot", "--interval", "200ms", "--format", "json", "--top", "3"]));
    assert!(v["host"]["cpu"]["busy_percent"].is_number(), "{v}");
    assert!(v["host"]["memory"]["total_bytes"].as_u64().is_some_and(|m| m > 0));
    assert!(v["container"]["effective_cpus"].as_f64().is_some_and(|c| c > 0.0));
    assert!(v["container"]["host_online_cpus"].as_u64().is_some_and(|c| c > 0));
    assert_eq!(v["processes"]["top"].as_array().map(Vec::len), Some(3));
    assert!(v["processes"]["count"].as_u64().is_some_and(|n| n >= 3));
    assert!(v["agent"]["last_sample"]["cpu_seconds"].as_f64().is_some_and(|n| n > 0.0));
}

#[test]
fn tree_json_covers_children_and_pss_on_request() {
    let parent = Guard(
        Command::new("sh").args(["-c", "sleep 60 & sleep 60 & wait"]).stdin(Stdio::null()).spawn().expect("spawn sh"),
    );
    let pid = parent.0.id().to_string();
    // The shell forks its children right away; give the scan a moment via the interval.
    let v = json(&proctor(&["tree", &pid, "--interval", "300ms", "--pss", "--format", "json"]));
    let rows = v["processes"].as_array().expect("processes");
    assert_eq!(rows[0]["pid"].as_u64().map(|p| p.to_string()), Some(pid.clone()));
    assert_eq!(v["total"]["processes"].as_u64(), Some(rows.len() as u64));
    assert!(rows.len() >= 3, "sh and two sleeps: {rows:?}");
    assert!(rows[1..].iter().all(|r| r["depth"] == 1 && r["name"] == "sleep"));
    assert!(v["total"]["pss_bytes"].as_u64().is_some_and(|p| p > 0));
    assert_eq!(v["total"]["pss_known"].as_u64(), Some(rows.len() as u64));
    assert!(v["pss_read"]["reads"].as_u64().is_some_and(|n| n as usize == rows.len()));
    let rss: u64 = rows.iter().map(|r| r["rss_bytes"].as_u64().expect("rss")).sum();
    assert_eq!(v["total"]["rss_bytes"].as_u64(), Some(rss));
}

#[test]
fn hostile_process_names_are_not_terminal_escapes() {
    // A comm with an escape sequence and a newline; the text view must not pass them through.
    let name = "\u{1b}[2Jevil\nname";
    let child = Guard(Command::new("bash").args(["-c", &format!("exec -a '{name}' sleep 60")]).spawn().expect("spawn"));
    let pid = child.0.id().to_string();
    let out = proctor(&["tree", &pid, "--interval", "200ms"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(text.contains("?[2Jevil?name"), "{text}");
}

/// Runs proctor as `nobody` when we are root (CI is); otherwise we already are unprivileged.
fn unprivileged(args: &[&str]) -> Output {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return proctor(args);
    }
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(proctor_argv())
        .args(args)
        .output()
        .expect("setpriv is part of util-linux")
}

#[test]
fn unprivileged_runs_degrade_per_field_and_never_fail() {
    // --io makes nobody meet other users' unreadable /proc/PID/io: counted per reason in JSON.
    let v = json(&unprivileged(&["snapshot", "--interval", "0", "--io", "--format", "json"]));
    assert!(v["processes"]["count"].as_u64().is_some_and(|n| n > 0));
    assert!(
        v["agent"]["last_sample"]["errors"]["process.io:permission"].as_u64().is_some_and(|n| n > 0),
        "{}",
        v["agent"]["last_sample"]
    );
    let out = unprivileged(&["tree", "1", "--interval", "0", "--pss", "--format", "json"]);
    let v = json(&out);
    // PID 1 belongs to root: nobody may not read its smaps_rollup, and says so per field.
    assert!(v["pss_read"]["failed"].as_u64().is_some_and(|n| n >= 1), "{v}");
    let doctor = unprivileged(&["doctor", "--format", "json"]);
    let d = json(&doctor);
    let denied: u64 = d["unreadable"].as_array().expect("list").iter().map(|u| u["denied"].as_u64().unwrap_or(0)).sum();
    assert!(denied > 0, "nobody is denied some files: {d}");
}

#[test]
fn bench_reports_figures_with_a_floor() {
    let v = json(&proctor(&["bench", "-n", "50", "--scans", "3", "--format", "json"]));
    assert!(v["host_sample"]["cpu_us"].as_f64().is_some_and(|u| u > 0.0));
    assert!(v["host_floor"]["cpu_us"].as_f64().is_some_and(|u| u > 0.0));
    assert!(v["per_process"]["cpu_us"].as_f64().is_some_and(|u| u > 0.0));
    assert!(v["processes"].as_f64().is_some_and(|n| n > 1.0));
    // The BPF readers run in scans of their own after the /proc ones, with the floor read
    // between them too; where none loads there is no second floor.
    let bpf = !v["per_process_task_iter"].is_null();
    let beside = &v["per_process_floor_beside_task_iter"];
    assert_eq!(!beside.is_null(), bpf, "{v}");
    if bpf {
        assert!(beside["cpu_us"].as_f64().is_some_and(|u| u > 0.0), "{v}");
        let ratio = v["task_iter_ratio_to_floor_cpu"].as_f64().expect("a ratio beside the iterator");
        let floor = v["per_process_floor"]["cpu_us"].as_f64().expect("floor");
        let iter = v["per_process_task_iter"]["cpu_us"].as_f64().expect("iterator");
        assert!((ratio - iter / floor).abs() < 1e-9, "the ratio is taken against the /proc floor: {v}");
    }
}

#[test]
fn snapshot_reads_a_captured_tree_under_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |path: &str, text: &str| {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    write("sys/devices/system/cpu/online", "0-95\n");
    write("proc/meminfo", "MemTotal: 1048576 kB\nMemAvailable: 524288 kB\n");
    write("proc/stat", "cpu  1 0 1 10 0 0 0 0 0 0\nbtime 1\n");
    write("proc/self/mountinfo", "30 1 0:1 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
    write("proc/self/cgroup", "0::/pod\n");
    write("sys/fs/cgroup/pod/cpu.max", "6400000 100000\n");
    let root = dir.path().to_str().expect("utf8");
    let v = json(&proctor(&["snapshot", "--root", root, "--interval", "0", "--format", "json"]));
    assert_eq!(v["container"]["effective_cpus"].as_f64(), Some(64.0));
    assert_eq!(v["container"]["host_online_cpus"].as_u64(), Some(96));
    let text = proctor(&["snapshot", "--root", root, "--interval", "0"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("warning    this process can use 64 CPUs but the host has 96 online"), "{text}");
}

#[test]
fn snapshot_count_streams_json_lines_with_rates() {
    let out = proctor(&["snapshot", "--count", "3", "--interval", "100ms", "--format", "json", "--top", "1", "--io"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON document per line"))
        .collect();
    assert_eq!(lines.len(), 3);
    for v in &lines {
        let interval = v["interval_secs"].as_f64().expect("every line has a rate interval");
        assert!(interval > 0.05 && interval < 5.0, "{interval}");
    }
}

/// `snapshot --io` shows what it read: Read/s and Write/s columns, and `--sort io` orders by
/// both together (htop's IO_RATE), as `io_bytes_per_sec`; without `--io` the columns are not
/// there to be all dashes.
#[test]
fn snapshot_io_has_its_columns_and_sorts_by_io() {
    let args = ["snapshot", "--interval", "100ms", "--io", "--sort", "io", "--top", "20"];
    let out = proctor(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let header = text.lines().find(|l| l.trim_start().starts_with("PID")).expect("the table's header");
    assert!(header.contains("READ/s") && header.contains("WRITE/s"), "{header}");
    // A writer of its own: the same 64 KiB rewritten in place with O_DIRECT, so every write
    // reaches storage (write_bytes) and the disk holds 64 KiB only.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let code = format!(
        "import os, mmap\nfd = os.open({:?}, os.O_WRONLY | os.O_CREAT | os.O_DIRECT)\nbuf = mmap.mmap(-1, 65536)\nwhile True:\n    os.pwrite(fd, buf, 0)",
        dir.path().join("f").display().to_string()
    );
    let writer = Guard(Command::new("python3").args(["-c", &code]).spawn().expect("python3"));
    let written = || std::fs::metadata(dir.path().join("f")).is_ok_and(|m| m.len() == 65536);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !written() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let v = json(&proctor(&[&args[..], &["--format", "json"]].concat()));
    let top = v["processes"]["top"].as_array().expect("top");
    let writing = written();
    if writing && top[0]["write_bytes_per_sec"].as_f64().is_some() {
        // Among the first by io, with its writes: the host's other processes may do more (a
        // build's `ar` read 196 MB/s beside it in a loaded suite run), and the order itself is
        // held below.
        let mine = top.iter().find(|p| p["pid"] == writer.0.id());
        let mine = mine.unwrap_or_else(|| panic!("the writer is not among the first 20 by io: {top:?}"));
        assert!(mine["write_bytes_per_sec"].as_f64() > Some(0.0), "{mine}");
    } else {
        eprintln!("SKIP: snapshot --sort io with a writer: O_DIRECT writes or /proc/PID/io are not available here");
    }
    drop(writer);
    let io: Vec<f64> = top
        .iter()
        .map(|p| {
            let (r, w) = (p["read_bytes_per_sec"].as_f64(), p["write_bytes_per_sec"].as_f64());
            let io = p["io_bytes_per_sec"].as_f64();
            if let (Some(r), Some(w), Some(io)) = (r, w, io) {
                // Equal in the document; serde_json's default float parser (no float_roundtrip)
                // lands a unit in the last place off on ~1 in 6 numbers like these: it reads
                // "11006256.622908141" as 11006256.62290814, and so CI once saw io
                // 11070061.009127898 against a sum of ...896.
                assert!((io - (r + w)).abs() <= 4.0 * f64::EPSILON * io.abs(), "{p}");
            } else if let (Some(_), Some(_)) = (r, w) {
                panic!("read and write per second without io: {p}");
            }
            io.unwrap_or(f64::NEG_INFINITY)
        })
        .collect();
    assert!(io.windows(2).all(|w| w[0] >= w[1]), "not by io, most first: {io:?}");
    let out = proctor(&["snapshot", "--interval", "0", "--top", "3"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("READ/s"), "{text}");
}

/// getrusage's maxrss survives exec: a parent that held 300 MiB and then became proctor would
/// be reported as proctor's peak. The peak is this process image's own (VmHWM).
#[test]
fn the_agents_peak_memory_is_its_own_not_what_exec_inherited() {
    let argv: Vec<String> =
        proctor_argv().into_iter().map(|word| format!("{:?}", word.to_str().expect("UTF-8"))).collect();
    let (exe, argv) = (&argv[0], argv.join(", "));
    let code = format!(
        "import os\nheld = b'x' * (300 << 20)\nos.execv({exe}, [{argv}, 'snapshot', '--interval', '0', '--format', 'json'])"
    );
    let v = json(&Command::new("python3").args(["-c", &code]).output().expect("python3"));
    let peak = v["agent"]["max_resident_bytes"].as_u64().expect("max_resident_bytes");
    assert!(peak > 0 && peak < 150 << 20, "peak {} MiB is the exec'ing parent's", peak >> 20);
}

#[test]
fn serve_refuses_a_public_address_without_a_token() {
    let out = proctor(&["serve", "--no-record", "--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("give --token or --token-file"), "{err}");
    let out = proctor(&["serve", "--no-record", "--interval", "0s"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--interval must be more than 0"));
}

/// The real binary: serves on an ephemeral port, answers, and stops cleanly on SIGTERM.
#[test]
fn serve_answers_and_stops_on_sigterm() {
    let mut child = Guard(
        proctor_command()
            .args(["serve", "--no-record", "--listen", "127.0.0.1:0", "--interval", "200ms"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve"),
    );
    let mut stderr = bounded::StderrLines::take(&mut child.0);
    let addr = stderr.address();
    let reply = http_get(&addr, "/api/v1/agent");
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("\"samples_total\""), "{reply}");
    let status = bounded::terminate(&mut child.0, "serve");
    assert!(status.success(), "{status:?}");
    let rest = stderr.rest(bounded::STARTUP);
    assert!(rest.contains("stopping"), "{rest}");
}

/// The DaemonSet's liveness probe (docs/deploy.md): `proctor probe URL -n 1
/// --bearer-token-file FILE` against a serve that needs the token exits 0; with no token, or
/// the wrong one, it exits 1; a file that holds no token is refused before any request.
#[test]
fn a_probe_with_the_token_file_is_the_liveness_check_of_a_serve_with_a_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token\n").expect("token");
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "not-it").expect("wrong");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "  \n").expect("empty");
    let token_arg = token.to_str().expect("UTF-8");
    let mut child = Guard(
        proctor_command()
            .args(["serve", "--no-record", "--listen", "127.0.0.1:0", "--interval", "200ms", "--token-file", token_arg])
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve"),
    );
    let mut stderr = bounded::StderrLines::take(&mut child.0);
    let url = format!("http://{}/api/v1/agent", stderr.address());
    let check = |extra: &[&str]| {
        let mut args = vec!["probe", url.as_str(), "-n", "1", "--timeout", "30s"];
        args.extend_from_slice(extra);
        proctor(&args)
    };
    let ok = check(&["--bearer-token-file", token_arg]);
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    let none = check(&[]);
    assert_eq!(none.status.code(), Some(1), "{}", String::from_utf8_lossy(&none.stdout));
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("HTTP 4xx")
            || String::from_utf8_lossy(&none.stderr).contains("http_4xx"),
        "{}",
        String::from_utf8_lossy(&none.stderr)
    );
    let bad = check(&["--bearer-token-file", wrong.to_str().expect("UTF-8")]);
    assert_eq!(bad.status.code(), Some(1));
    let refused = check(&["--bearer-token-file", empty.to_str().expect("UTF-8")]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("holds no token"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let status = bounded::terminate(&mut child.0, "serve");
    assert!(status.success(), "{status:?}");
}

/// `promtool check metrics` on the exposition in an HTTP reply, when PROCTOR_PROMTOOL names it
/// (scripts/test.d/65-prometheus.sh sets it); else a SKIP line.
pub(crate) fn promtool_check(reply: &str) {
    let Ok(promtool) = std::env::var("PROCTOR_PROMTOOL") else {
        eprintln!("SKIP: promtool part: PROCTOR_PROMTOOL is unset (scripts/test.d/65-prometheus.sh sets it)");
        return;
    };
    let exposition = reply.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    std::io::Write::write_all(&mut check.stdin.take().expect("stdin"), exposition.as_bytes()).expect("write");
    let out = check.wait_with_output().expect("promtool runs");
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One `GET` with `Connection: close`: the whole reply, head and body. A reply that does not
/// end within [`bounded::STARTUP`] fails the test with what did come.
pub(crate) fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let limit = bounded::STARTUP;
    let socket: std::net::SocketAddr = addr.parse().unwrap_or_else(|e| panic!("address {addr:?}: {e}"));
    let mut stream = std::net::TcpStream::connect_timeout(&socket, limit).expect("connect");
    stream.set_read_timeout(Some(limit)).expect("read timeout");
    stream.set_write_timeout(Some(limit)).expect("write timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").expect("send");
    let mut reply = Vec::new();
    if let Err(e) = stream.read_to_end(&mut reply) {
        panic!("GET {path} from {addr}: {e} after {limit:?}; so far: {}", String::from_utf8_lossy(&reply));
    }
    String::from_utf8_lossy(&reply).into_owned()
}

/// An agent with the BPF process events says how often its drains of the event ring waited
/// for a record still being written (docs/api.md, `starts`), in `/api/v1/agent` and on
/// `/metrics` alike, after a storm of short children it sampled through.
#[test]
fn an_agent_says_how_its_drains_of_the_event_ring_waited() {
    let (mut serve, addr) = flood::serve(proctor_command(), "100ms", &[]);
    let agent = || flood::body_json(&http_get(&addr, "/api/v1/agent"));
    let samples_past = |n: u64| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let a = agent();
            if a["samples_total"].as_u64().is_some_and(|s| s >= n) {
                return a;
            }
            assert!(std::time::Instant::now() < deadline, "{n} samples within 60 s: {a}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    let first = samples_past(2);
    if first["process_events_from"] != "bpf" {
        eprintln!(
            "SKIP: the event ring's drain waits: no process events here ({})",
            first["process_events_unavailable"]
        );
        bounded::terminate(&mut serve.0, "serve");
        return;
    }
    let storm = Command::new("sh")
        .args(["-c", "i=0; while [ $i -lt 500 ]; do /bin/true; i=$((i+1)); done"])
        .status()
        .expect("sh");
    assert!(storm.success());
    // Three samples begun after the storm ended: the last of them has counted all of it.
    let done = agent()["samples_total"].as_u64().unwrap_or(0) + 3;
    let a = samples_past(done);
    let metrics = http_get(&addr, "/metrics");
    let status = bounded::terminate(&mut serve.0, "serve");
    let starts = &a["starts"];
    let count = |k: &str| starts[k].as_u64().unwrap_or_else(|| panic!("starts.{k}: {starts}"));
    let (waits, unsettled) = (count("event_drain_waits_total"), count("event_drain_unsettled_total"));
    let waited = starts["event_drain_wait_seconds_total"].as_f64().unwrap_or_else(|| panic!("{starts}"));
    // The drains ran through the storm: the sh and its 500 children, and whatever else started.
    assert!(count("process_forks_total") >= 501, "the storm counted: {starts}");
    // A drain that gave up waited the whole bound (1 ms); one that waited took some time.
    assert!(unsettled <= waits && waited >= unsettled as f64 * 1e-3 && (waits > 0) == (waited > 0.0), "{starts}");
    // The same counts on /metrics (a later sample's: they only grow).
    let outcome = |o: &str| {
        sample_value(&metrics, &format!("proctor_agent_process_event_drain_waits_total{{outcome=\"{o}\"}} "))
            .unwrap_or_else(|| panic!("no {o} drain waits on /metrics: {metrics}"))
    };
    let (settled_m, unsettled_m) = (outcome("settled"), outcome("unsettled"));
    assert!(unsettled_m >= unsettled as f64 && settled_m + unsettled_m >= waits as f64, "{metrics}");
    eprintln!("drains that waited: {waits} ({unsettled} past the bound), {waited} s");
    assert!(status.success(), "{status:?}");
}

/// The value of the first sample line of `body` that starts with `prefix`.
fn sample_value(body: &str, prefix: &str) -> Option<f64> {
    body.lines().find(|l| l.starts_with(prefix))?.rsplit(' ').next()?.parse().ok()
}

/// `serve --statsd`: packets sent over UDP show up on /metrics after a flush, with the statsd
/// server's own figures beside them; counters also as a monotonic `_total` per key; the whole
/// exposition passes `promtool check metrics` (when PROCTOR_PROMTOOL names it, as
/// scripts/test.d/65-prometheus.sh does).
#[test]
fn serve_with_statsd_exposes_flushed_keys_on_metrics() {
    let udp_port = std::net::UdpSocket::bind("127.0.0.1:0").expect("probe").local_addr().expect("addr").port();
    let udp = format!("127.0.0.1:{udp_port}");
    let mut child = Guard(
        proctor_command()
            .args(["serve", "--no-record", "--listen", "127.0.0.1:0", "--interval", "200ms", "--statsd", "--udp", &udp])
            .args(["--admin", "off", "--flush-interval", "300ms", "--groups", "cgroup"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve --statsd"),
    );
    let mut stderr = bounded::StderrLines::take(&mut child.0);
    let addr = stderr.address();
    let early = stderr.seen.clone();
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").expect("sender");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let total = |body: &str| sample_value(body, "proctor_statsd_events_total{key=\"jobs.done\"}");
    let mut body = String::new();
    let mut first_total = None;
    while std::time::Instant::now() < deadline {
        sender.send_to(b"jobs.done:3|c\nqueue.depth:7|g\nreq.time:250|ms", &udp).expect("send");
        std::thread::sleep(std::time::Duration::from_millis(200));
        body = http_get(&addr, "/metrics");
        first_total = first_total.or(total(&body));
        let grew = first_total.zip(total(&body)).is_some_and(|(a, b)| b >= a + 6.0);
        if body.contains("proctor_statsd_value{key=\"queue.depth\"} 7")
            && body.contains("key=\"req.time\",stat=\"upper\"} 0.25")
            && grew
        {
            break;
        }
    }
    let status = bounded::terminate(&mut child.0, "serve --statsd");
    drop(stderr);
    assert!(body.contains("proctor_statsd_value{key=\"queue.depth\"} 7"), "{body}");
    assert!(body.contains("proctor_statsd_events_per_second{key=\"jobs.done\"} "), "{body}");
    assert!(body.contains("proctor_statsd_timer_seconds{key=\"req.time\",stat=\"upper\"} 0.25"), "{body}");
    assert!(body.contains("proctor_statsd_packets_received_total "), "{body}");
    assert!(body.contains("proctor_host_cpu_seconds_total{"), "{body}");
    // --groups cgroup: one series set per group (checked by promtool below with the rest).
    assert!(body.contains("proctor_group_processes{group=\"") && body.contains("proctor_group_overflow 0"), "{body}");
    // Counts add up across flushes: 3 per packet, several flushes apart.
    let (first, last) = (first_total.expect("a first total"), total(&body).expect("a last total"));
    assert!(last >= first + 6.0 && last % 3.0 == 0.0, "{first} then {last}");
    // Flushes feed /metrics, so serve does not claim they are dropped.
    assert!(!early.contains("computed and dropped") && early.contains("statsd flushes go to /metrics"), "{early}");
    promtool_check(&body);
    assert!(status.success(), "{status:?}");
}

/// Answers every request on one kept-alive connection with `200 ok` until the client closes.
fn answer_ok_until_closed(mut stream: impl std::io::Read + std::io::Write) {
    let mut pending = Vec::new();
    let mut chunk = [0u8; 2048];
    loop {
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            if stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").is_err() {
                return;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(read) => pending.extend_from_slice(&chunk[..read]),
        }
    }
}

/// A keep-alive loopback server answering every request with `200 ok` (test-local, bounded
/// by the test's own request count).
fn probe_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || answer_ok_until_closed(stream));
        }
    });
    port
}

#[test]
fn probe_records_every_request_and_analyze_reads_them_back() {
    let port = probe_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run.jsonl");
    let out_text = out.to_str().expect("utf-8 path");
    let url = format!("http://127.0.0.1:{port}/");
    let first = proctor(&["probe", &url, "-n", "7", "-c", "2", "--out", out_text]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let text = String::from_utf8_lossy(&first.stdout);
    assert!(text.contains("7 requests") && text.contains("7 ok") && text.contains("modes:"), "{text}");
    // A second run appends; analyze merges both.
    let second = proctor(&["probe", &url, "-n", "3", "--rate", "100", "--out", out_text]);
    assert!(second.status.success());
    let plot = dir.path().join("plot.svg");
    let v =
        json(&proctor(&["probe", "analyze", out_text, "--format", "json", "--plot", plot.to_str().expect("utf-8")]));
    assert_eq!(v["requests"], 10, "{v}");
    assert_eq!(v["ok"], 10);
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(2));
    assert!(v["latency"]["percentiles"][0]["value_ns"].as_u64().is_some_and(|ns| ns > 0));
    let svg = std::fs::read_to_string(&plot).expect("plot written");
    assert!(svg.starts_with("<svg") && svg.contains("mode"), "{svg}");
}

#[test]
fn probe_rejects_a_bad_url_and_reports_refused_connections() {
    let bad = proctor(&["probe", "localhost:80"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid URL"));
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let refused = proctor(&["probe", &format!("http://127.0.0.1:{port}/"), "-n", "3", "--format", "json"]);
    // The report is printed, and the exit status says nothing worked.
    assert_eq!(refused.status.code(), Some(1), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no request succeeded (3 sent): 3 refused"));
    let v: serde_json::Value = serde_json::from_slice(&refused.stdout).expect("a JSON report on stdout");
    assert_eq!(v["errors"]["refused"], 3, "{v}");
    assert!(v["latency"].is_null());
}

/// A loopback WebSocket echo server (tungstenite's server side), one thread per connection.
fn ws_echo_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let Ok(mut socket) = tungstenite::accept(stream) else { return };
                while let Ok(message) = socket.read() {
                    if (message.is_text() || message.is_binary()) && socket.send(message).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn probe_a_websocket_echo_reports_messages_and_the_upgrade() {
    let port = ws_echo_server();
    let url = format!("ws://127.0.0.1:{port}/echo");
    let run = proctor(&["probe", &url, "-n", "12"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(text.contains("closed loop, one connection, numbered messages"), "{text}");
    assert!(text.contains("12 requests") && text.contains("12 ok, 0 failed; 1 connections opened"), "{text}");
    assert!(text.lines().any(|line| line.trim_start().starts_with("upgrade ")), "no upgrade phase row: {text}");
    assert!(text.contains("websocket: 1 connection opened; 0 pings answered, 0 closes from the server"), "{text}");
    let held = json(&proctor(&["probe", &url, "--keys", "j", "-n", "10", "--key-rate", "100/s", "--format", "json"]));
    assert_eq!((held["requests"].as_u64(), held["ok"].as_u64()), (Some(10), Some(10)), "{held}");
    assert_eq!(held["websocket"]["connections"], 1, "{held}");
    assert!(held["phases"].as_array().is_some_and(|phases| phases.iter().any(|p| p["name"] == "queue")), "{held}");
}

#[test]
fn probe_refuses_flags_that_do_not_fit_the_protocol() {
    for (args, says) in [
        (
            vec!["probe", "ws://127.0.0.1:9/", "-c", "2"],
            "-c/--concurrency (one connection, one message stream) does not apply",
        ),
        (vec!["probe", "ws://127.0.0.1:9/", "--data", "x"], "--data does not apply to a WebSocket probe"),
        (vec!["probe", "ws://127.0.0.1:9/", "--hold", "3s"], "--hold and --key-rate go with --keys"),
        (vec!["probe", "http://127.0.0.1:9/", "--keys", "j"], "--keys applies to WebSocket URLs"),
        (vec!["probe", "ws://127.0.0.1:9/", "--keys", "j", "--key-rate", "fast"], "invalid key rate"),
    ] {
        let out = proctor(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// A loopback server that answers whatever arrives on each of its first 8 connections with
/// `status` and closes it, as a plain HTTP server answers bytes it cannot parse (a TLS
/// ClientHello) with `400 Bad Request`. Returns its `127.0.0.1:PORT`.
fn canned_reply_server(status: &'static str) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let address = listener.local_addr().expect("addr").to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 1024];
            let _ = std::io::Read::read(&mut stream, &mut request);
            let reply = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = std::io::Write::write_all(&mut stream, reply.as_bytes());
        }
    });
    address
}

/// Complete responses that are all 5xx are no success either; 2xx ones are.
#[test]
fn probe_exits_1_when_every_response_is_a_server_error() {
    let failing_url = format!("http://{}/", canned_reply_server("503 Service Unavailable"));
    let failing = proctor(&["probe", &failing_url, "-n", "3", "--no-reuse"]);
    assert_eq!(failing.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failing.stderr);
    assert!(stderr.contains("no request succeeded (3 sent): 3 http_5xx"), "{stderr}");
    assert!(String::from_utf8_lossy(&failing.stdout).contains("0 ok, 3 failed"));
    let fine_url = format!("http://{}/", canned_reply_server("204 No Content"));
    let fine = proctor(&["probe", &fine_url, "-n", "3", "--no-reuse"]);
    assert!(fine.status.success(), "{}", String::from_utf8_lossy(&fine.stderr));
}

/// `https://` to a plain HTTP server: the message is about the scheme, not about --cacert.
#[test]
fn probe_https_to_a_plain_http_server_says_it_does_not_speak_tls() {
    let address = canned_reply_server("400 Bad Request");
    let out = proctor(&["probe", &format!("https://{address}/"), "-n", "2", "--timeout", "5s"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("the server does not speak TLS: 2 of 2 requests got a plain HTTP answer to their TLS handshake"),
        "{stderr}"
    );
    assert!(!stderr.contains("--cacert"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("is it http://{address}/?")), "{stdout}");
}

/// A keep-alive loopback HTTPS server answering `200 ok`, with a self-signed certificate for
/// 127.0.0.1 generated now; returns its port and the certificate's PEM (its own root).
fn https_probe_server() -> (u16, String) {
    use std::sync::Arc;
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).expect("self-signed certificate");
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key.into())
            .expect("server config"),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { continue };
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let Ok(session) = rustls::ServerConnection::new(config) else { return };
                answer_ok_until_closed(rustls::StreamOwned::new(session, tcp));
            });
        }
    });
    (port, certified.cert.pem())
}

#[test]
fn probe_https_trusts_a_cacert_file_or_says_it_verified_nothing() {
    let (port, pem) = https_probe_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pem).expect("write ca.pem");
    let ca_text = ca.to_str().expect("utf-8 path");
    let url = format!("https://127.0.0.1:{port}/");

    let v = json(&proctor(&["probe", &url, "--cacert", ca_text, "-n", "5", "--format", "json"]));
    assert_eq!((v["requests"].as_u64(), v["ok"].as_u64()), (Some(5), Some(5)), "{v}");
    assert_eq!(v["tls_verified"], true, "{v}");
    assert_eq!(v["connections"], 1, "{v}");
    let tls = v["phases"].as_array().and_then(|phases| phases.iter().find(|phase| phase["name"] == "tls")).cloned();
    let tls = tls.unwrap_or_else(|| panic!("a tls phase: {v}"));
    assert_eq!(tls["count"], 1, "only the new connection has a handshake: {tls}");
    assert!(tls["median_ns"].as_u64().is_some_and(|ns| ns > 0), "{tls}");

    // Mozilla's roots alone do not know this certificate: classified, with a hint; nothing
    // succeeded, so the exit status is 1 (the report is printed all the same).
    let untrusted = proctor(&["probe", &url, "-n", "2", "--format", "json"]);
    assert_eq!(untrusted.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&untrusted.stdout).expect("a JSON report on stdout");
    assert_eq!(v["errors"]["tls"], 2, "{v}");
    assert!(v["error_examples"]["tls"].as_str().is_some_and(|text| text.contains("UnknownIssuer")), "{v}");
    assert!(String::from_utf8_lossy(&untrusted.stderr).contains("--cacert"));

    let insecure = proctor(&["probe", &url, "-k", "-n", "2"]);
    assert!(insecure.status.success());
    let text = String::from_utf8_lossy(&insecure.stdout);
    assert!(text.contains("2 ok") && text.contains("certificates NOT verified"), "{text}");
    assert!(String::from_utf8_lossy(&insecure.stderr).contains("not verified"));
    let v = json(&proctor(&["probe", &url, "--insecure", "-n", "2", "--format", "json"]));
    assert_eq!((v["ok"].as_u64(), &v["tls_verified"]), (Some(2), &serde_json::Value::Bool(false)), "{v}");

    // Bad input is refused before the run.
    let missing = proctor(&["probe", &url, "--cacert", "/nonexistent/ca.pem"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read /nonexistent/ca.pem"));
    let not_pem = dir.path().join("empty.pem");
    std::fs::write(&not_pem, "nothing here\n").expect("write");
    let empty = proctor(&["probe", &url, "--cacert", not_pem.to_str().expect("utf-8")]);
    assert_eq!(empty.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("no certificate in it"));
    let plain = proctor(&["probe", &format!("http://127.0.0.1:{port}/"), "--insecure"]);
    assert_eq!(plain.status.code(), Some(1));
    assert_eq!(proctor(&["probe", &url, "-k", "--cacert", ca_text]).status.code(), Some(2), "conflicting flags");
}

/// Ctrl-C (SIGINT) mid-run: the report of what was measured is printed, and the exit is 130.
#[test]
fn probe_interrupted_prints_the_report_of_what_it_measured() {
    let port = probe_server();
    let url = format!("http://127.0.0.1:{port}/");
    let child = proctor_command()
        .args(["probe", &url, "--duration", "60s", "--rate", "50", "--format", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start probe");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: SIGINT to the pid we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("probe exits");
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report on stdout");
    let n = v["requests"].as_u64().unwrap_or(0);
    assert!((10..=200).contains(&n), "about 1.5 s at 50/s was measured, not 60 s: {n}");
    assert_eq!(v["ok"].as_u64(), Some(n), "{v}");
}

/// A reader that closes stdout early (`| head -1`) stops proctor quietly: exit 0, nothing on
/// stderr, for text and for JSON (which serde_json writes, wrapping the broken pipe in its own
/// error) (issue 14 item 14).
#[test]
fn a_closed_stdout_ends_quietly() {
    for args in [&["snapshot", "--interval", "0"][..], &["snapshot", "--interval", "0", "--format", "json"][..]] {
        let mut child = proctor_command()
            .args(args)
            .args(["--top", "1000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // Close our end before proctor writes (it samples first): its first write gets EPIPE.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        assert!(out.status.success(), "{args:?}: {:?}", out.status);
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{args:?}");
    }
}

#[test]
fn bench_refuses_zero_samples_and_doctor_gives_root_root_advice() {
    let out = proctor(&["bench", "-n", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let d = json(&proctor(&["doctor", "--format", "json"]));
        let warnings = d["warnings"].as_array().expect("warnings");
        assert!(!warnings.iter().any(|w| w.as_str().is_some_and(|w| w.contains("run as their user or root"))), "{d}");
    }
}

#[test]
fn probe_refuses_two_limits_rather_than_ignoring_one() {
    for args in [
        &["-n", "5", "--duration", "2s"][..],
        &["--duration", "2s", "-n", "5"][..],
        &["-n", "0"][..],
        &["--every", "1s", "--burst", "2", "--duration", "3s"][..],
        &["--every", "1s", "--burst", "2", "-n", "3"][..],
    ] {
        let mut all = vec!["probe", "http://127.0.0.1:9/"];
        all.extend_from_slice(args);
        let out = proctor(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("error:"), "{args:?}");
    }
}

#[test]
fn plots_to_an_unknown_format_are_refused_before_any_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pdf = dir.path().join("plot.pdf");
    let pdf = pdf.to_str().expect("utf-8");
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../proctor-strace/tests/fixtures/f_tt_T.log");
    for args in [
        &["strace", "--plot", pdf, fixture][..],
        &["probe", "http://127.0.0.1:9/", "-n", "1", "--plot", pdf][..],
        &["report", "--dir", dir.path().to_str().expect("utf-8"), "--out", pdf][..],
    ] {
        let out = proctor(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains("plots are written as .svg or .png"), "{args:?}: {stderr}");
        assert!(!std::path::Path::new(pdf).exists(), "{args:?} wrote {pdf}");
    }
}

/// `doctor` says what the stall ledger measures (issue 34 item 1: wall time, an upper bound on
/// the hold) and, as item 2 asks, whether the targets' own waits are measured from the kernel's
/// mmap_lock tracepoints, or why not: as the filesystem says (the tracepoints, and whether this
/// test may make a tracing instance of its own).
#[test]
fn doctor_says_what_the_stall_ledger_measures_and_whether_the_tracepoints_are_there() {
    let d = json(&proctor(&["doctor", "--format", "json"]));
    let line = d["stall_ledger"].as_str().unwrap_or_else(|| panic!("no stall_ledger line: {d}"));
    assert!(line.contains("upper bound on the hold"), "{line}");
    let tracefs = std::path::Path::new("/sys/kernel/tracing");
    let present = tracefs.join("events/mmap_lock/mmap_lock_start_locking").is_dir();
    let instance = tracefs.join(format!("instances/proctor-doctor-test-{}", std::process::id()));
    let usable = present && std::fs::create_dir(&instance).is_ok();
    if usable {
        std::fs::remove_dir(&instance).expect("remove the test's tracing instance");
    }
    assert_eq!(line.contains("traced with the kernel's mmap_lock tracepoints"), usable, "{line}");
    assert_eq!(line.contains("is not measured: "), !usable, "{line}");
    if !present {
        assert!(line.contains("tracefs") || line.contains("tracepoint"), "says which is missing: {line}");
    }
}

/// `doctor` says whether the PSS worker's thread gets the slice `--pss-slice` asks (as the
/// kernel answers a thread of this test), or why not, and that `0` keeps the kernel's.
#[test]
fn doctor_says_which_slice_the_pss_worker_runs_on() {
    let here = std::thread::spawn(|| proctor_procfs::system::set_thread_slice(100_000)).join().expect("joins");
    let line = |args: &[&str]| {
        let d = json(&proctor(&[&["doctor", "--format", "json"], args].concat()));
        d["stall_ledger"].as_str().unwrap_or_else(|| panic!("no stall_ledger line: {d}")).to_string()
    };
    let default = line(&[]);
    match &here {
        Ok(_) => assert!(default.contains("runs on a slice of its own (0.10 ms, --pss-slice)"), "{default}"),
        Err(why) => assert!(default.contains(&format!("keeps the kernel's slice ({why})")), "{default}"),
    }
    let longer = line(&["--pss-slice", "2ms"]);
    if here.is_ok() {
        assert!(longer.contains("runs on a slice of its own (2.00 ms, --pss-slice)"), "{longer}");
    }
    let kernels = line(&["--pss-slice", "0"]);
    assert!(kernels.contains("keeps the kernel's slice (--pss-slice 0)"), "{kernels}");
}

/// A running `serve`'s sampling thread (`proctor-agent`) has the slice `--sampling-slice` asks,
/// as the kernel reports it for that thread, or the kernel's own by default (`0`); and `doctor`
/// says which, or why not.
#[test]
fn the_sampling_thread_runs_on_the_slice_it_was_given() {
    let here = std::thread::spawn(|| proctor_procfs::system::set_thread_slice(100_000)).join().expect("joins");
    let kernels = std::thread::spawn(|| proctor_procfs::system::thread_slice_ns(0)).join().expect("joins");
    let doctor = |args: &[&str]| {
        let d = json(&proctor(&[&["doctor", "--format", "json"], args].concat()));
        d["sampling_slice"].as_str().unwrap_or_else(|| panic!("no sampling_slice line: {d}")).to_string()
    };
    assert!(doctor(&[]).contains("keeps the kernel's slice (--sampling-slice 0)"), "the default");
    let said = doctor(&["--sampling-slice", "100us"]);
    let asked = match here {
        Ok(ns) => ns,
        Err(why) => {
            assert!(said.contains(&format!("keeps the kernel's slice ({why})")), "{said}");
            eprintln!("SKIP: the sampling thread's slice: this kernel gives none of its own");
            return;
        }
    };
    assert_eq!(asked, 100_000);
    assert!(said.contains("runs on a slice of its own (0.10 ms, --sampling-slice)"), "{said}");
    let kernels = kernels.expect("a thread's slice reads back");
    // The sampling thread's slice, once it has sampled (it asks before its first cycle).
    let slice_of = |extra: &[&str]| {
        let (mut serve, addr) = flood::serve(proctor_command(), "100ms", extra);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while flood::body_json(&http_get(&addr, "/api/v1/agent"))["samples_total"].as_u64().unwrap_or(0) < 2 {
            assert!(std::time::Instant::now() < deadline, "two samples within 60 s");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let pid = serve.0.id();
        let tid = std::fs::read_dir(format!("/proc/{pid}/task"))
            .expect("its threads")
            .filter_map(|t| t.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|t| {
                std::fs::read_to_string(format!("/proc/{pid}/task/{t}/comm")).is_ok_and(|c| c.trim() == "proctor-agent")
            })
            .expect("a thread named proctor-agent");
        let slice = proctor_procfs::system::thread_slice_ns(tid).expect("its slice reads back");
        assert!(bounded::terminate(&mut serve.0, "serve").success());
        slice
    };
    assert_eq!(slice_of(&["--sampling-slice", "100us"]), 100_000);
    assert_eq!(slice_of(&["--sampling-slice", "2ms"]), 2_000_000);
    assert_eq!(slice_of(&[]), kernels, "the kernel's own, by default");
}

/// Where the PSS worker may walk `pagemap` (`pagemap_reads` present), the agent's API also
/// counts the reads of big targets that wanted a walk and did not get one because it would not
/// have fit the budget's savings, and the walks stopped at the savings; where it may not,
/// neither is there.
#[test]
fn the_agent_counts_the_walks_its_budget_could_not_pay() {
    let mut command = proctor_command();
    command.args(["serve", "--listen", "127.0.0.1:0", "--interval", "200ms", "--no-record"]);
    let (_serve, addr) = flood::started(command);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let worker = loop {
        let agent = flood::body_json(&http_get(&addr, "/api/v1/agent"));
        if agent["pss_worker"].is_object() {
            break agent["pss_worker"].clone();
        }
        assert!(std::time::Instant::now() < deadline, "no pss_worker in 20 s: {agent}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let walks = worker["pagemap_reads"].as_u64();
    let unaffordable = worker["reads_walk_unaffordable"].as_u64();
    let stopped = worker["walks_stopped"].as_u64();
    assert_eq!(unaffordable.is_some(), walks.is_some(), "{worker}");
    assert_eq!(stopped.is_some(), walks.is_some(), "{worker}");
    if walks.is_none() {
        eprintln!(
            "SKIP: the count of walks that did not fit: this agent may not read pagemap (`proctor doctor` says why)"
        );
    }
}

/// Where the agent may run on fewer CPUs than the host has online (here `taskset` pins it to
/// one), its PSS worker also asks whether those CPUs are crowded before a big read, and the
/// agent's API says on how many; where it may run on all of them, the host's run queue alone
/// is asked and the field is absent.
#[test]
fn a_pinned_agent_weighs_the_crowd_on_its_own_cpus() {
    let online = proctor_procfs::system::online_cpus(&proctor_procfs::Root::default()).map_or(0, |c| c.len());
    let own = proctor_procfs::system::affinity(0).unwrap_or_default();
    let taskset = Command::new("taskset").arg("--version").output().is_ok_and(|o| o.status.success());
    let (Some(&cpu), true, true) = (own.first(), online >= 2, taskset) else {
        eprintln!(
            "SKIP: a pinned agent's crowd: needs two online CPUs and taskset ({online} online, taskset {taskset})"
        );
        return;
    };
    let crowd_cpus = |mut command: Command| {
        command.args(["serve", "--listen", "127.0.0.1:0", "--interval", "200ms", "--no-record"]);
        let (_serve, addr) = flood::started(command);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let agent = flood::body_json(&http_get(&addr, "/api/v1/agent"));
            if agent["pss_worker"].is_object() {
                return agent["pss_worker"]["crowd_cpus"].as_u64();
            }
            assert!(std::time::Instant::now() < deadline, "no pss_worker in 20 s: {agent}");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    let mut pinned = Command::new("taskset");
    pinned.args(["-c", &cpu.to_string()]).args(proctor_argv());
    assert_eq!(crowd_cpus(pinned), Some(1), "pinned to CPU {cpu} of {online}");
    let free = proctor_command();
    let want = (own.len() < online).then_some(own.len() as u64);
    assert_eq!(crowd_cpus(free), want, "on this test's own {} of {online} CPUs", own.len());
}
