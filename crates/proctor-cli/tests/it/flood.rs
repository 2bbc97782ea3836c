//! Idle connections must not blind the agent (issue 15 item 1): `proctor serve` under a 1,024-fd
//! limit, 1,100 idle TCP connections held open against it, and still a normal request is
//! answered and every sample taken meanwhile has its processes.

use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{http_get, Guard};

pub(super) fn body_json(reply: &str) -> serde_json::Value {
    let body = reply.split_once("\r\n\r\n").map(|(_, body)| body).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {reply}"))
}

/// Raises this process's soft fd limit to `want` if the hard limit allows; the limit reached.
fn raise_own_fd_limit(want: u64) -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid out-pointer; setrlimit takes a valid in-pointer.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        if limit.rlim_cur < want {
            let raised = libc::rlimit { rlim_cur: want.min(limit.rlim_max), rlim_max: limit.rlim_max };
            libc::setrlimit(libc::RLIMIT_NOFILE, &raised);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    limit.rlim_cur
}

/// `proctor serve` on a free loopback port, started by `command` (proctor itself, or a wrapper
/// that is given proctor's path first), with the address it printed. `--no-record` unless
/// `extra` says where to record.
pub(super) fn serve(mut command: Command, interval: &str, extra: &[&str]) -> (Guard, String) {
    command.args(["serve", "--listen", "127.0.0.1:0", "--interval", interval, "--pss-budget", "0"]);
    if !extra.contains(&"--data-dir") {
        command.arg("--no-record");
    }
    command.args(extra);
    started(command)
}

/// A `proctor serve` command started, with the address it printed.
pub(super) fn started(mut command: Command) -> (Guard, String) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve (prlimit is part of util-linux)");
    // Read on a thread to the end, so serve never blocks on (or writes to) a closed pipe.
    let mut stderr = super::bounded::StderrLines::take(&mut child);
    let guard = Guard(child);
    let addr = stderr.address();
    (guard, addr)
}

#[test]
fn idle_connections_do_not_blind_the_agent() {
    const IDLE: usize = 1100;
    if raise_own_fd_limit(4096) < IDLE as u64 + 64 {
        eprintln!("SKIP: idle-connection flood: this test process may not open {IDLE} sockets (RLIMIT_NOFILE)");
        return;
    }
    let mut command = Command::new("prlimit");
    command.arg("--nofile=1024:1024").args(super::proctor_argv());
    let (_serve, addr) = serve(command, "200ms", &[]);
    let before = body_json(&http_get(&addr, "/api/v1/agent"));
    let flood_started_ms = before["uptime_secs"].as_f64().expect("uptime");
    // The flood: connections opened and left silent.
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        match TcpStream::connect(&addr) {
            Ok(stream) => idle.push(stream),
            Err(e) => panic!("connect #{} failed: {e}", idle.len()),
        }
    }
    // Let the agent sample a few times while they are held.
    std::thread::sleep(Duration::from_millis(1500));
    let asked = Instant::now();
    let agent = body_json(&http_get(&addr, "/api/v1/agent"));
    let took = asked.elapsed();
    eprintln!("a normal request with {IDLE} idle connections held: answered in {took:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let http = &agent["http"];
    assert!(http["connections_open"].as_u64() <= Some(128), "the cap for 1,024 fds: {http}");
    assert!(
        http["connections_evicted_total"].as_u64().unwrap_or(0)
            + http["connections_refused_total"].as_u64().unwrap_or(0)
            >= (IDLE - 128) as u64,
        "{http}"
    );
    // Every sample during the flood listed the processes (the sampler still had fds).
    let history = body_json(&http_get(&addr, "/api/v1/history?series=host.processes&since=10s"));
    let values = history["series"][0]["values"].as_array().expect("values");
    let uptime = agent["uptime_secs"].as_f64().expect("uptime");
    assert!(uptime - flood_started_ms > 1.0 && values.len() >= 5, "{history}");
    assert!(values.iter().all(|v| v.as_f64().is_some_and(|n| n > 1.0)), "a sample without processes: {values:?}");
    assert!(agent["errors_total"].as_object().is_some_and(|e| !e.keys().any(|k| k.contains("emfile"))), "{agent}");
    let metrics = http_get(&addr, "/metrics");
    let evicted = metrics
        .lines()
        .find_map(|l| l.strip_prefix("proctor_agent_http_connections_evicted_total "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(evicted.is_some_and(|n| n > 0.0), "{metrics}");
    drop(idle);
}

/// A GET that may be refused: the reply, empty when the connection was closed unanswered.
fn try_get(addr: &str, path: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(super::bounded::STARTUP))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply)?;
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

/// Slowloris (issue 33 item 2): under a 1,024-fd limit, 140 connections each send a request
/// head a byte every 50 ms and connect again when closed; 30 normal requests made meanwhile are
/// all answered. (Before, a byte read counted as activity: every slot was "busy" and 30 of 30
/// were refused.)
#[test]
fn slow_request_heads_do_not_lock_out_normal_requests() {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    const SLOW: usize = 140;
    if raise_own_fd_limit(4096) < SLOW as u64 + 64 {
        eprintln!("SKIP: slowloris: this test process may not open {SLOW} sockets (RLIMIT_NOFILE)");
        return;
    }
    let mut command = Command::new("prlimit");
    command.arg("--nofile=1024:1024").args(super::proctor_argv());
    let (_serve, addr) = serve(command, "1s", &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let dripper = {
        let (addr, stop, rounds) = (addr.clone(), Arc::clone(&stop), Arc::clone(&rounds));
        std::thread::spawn(move || {
            // A head that never ends: one header line after another.
            let head = format!("GET /api/v1/agent HTTP/1.1\r\nHost: {addr}\r\nX-Slow: {}", "a".repeat(4096));
            let connect = || TcpStream::connect(&addr).ok().map(|s| (s, 0usize));
            let mut slow: Vec<Option<(TcpStream, usize)>> = (0..SLOW).map(|_| connect()).collect();
            let (mut reconnects, deadline) = (0u64, Instant::now() + Duration::from_secs(120));
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                for conn in &mut slow {
                    let sent = conn.as_mut().and_then(|(stream, at)| {
                        let byte = &head.as_bytes()[*at % head.len()..][..1];
                        stream.write_all(byte).ok().map(|()| *at += 1)
                    });
                    if sent.is_none() {
                        *conn = connect();
                        reconnects += 1;
                    }
                }
                rounds.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
            reconnects
        })
    };
    // Every slow connection has dripped for a while (bytes read, no head whole).
    let deadline = Instant::now() + Duration::from_secs(60);
    while rounds.load(Ordering::Relaxed) < 10 {
        assert!(Instant::now() < deadline, "the slow connections within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let replies: Vec<String> =
        (0..30).map(|_| try_get(&addr, "/api/v1/agent").unwrap_or_else(|e| format!("(failed: {e})"))).collect();
    stop.store(true, Ordering::Relaxed);
    let reconnects = dripper.join().expect("the slow client");
    let answered = replies.iter().filter(|r| r.starts_with("HTTP/1.1 200")).count();
    eprintln!(
        "slowloris: {answered} of 30 normal requests answered; the slow client connected again {reconnects} times"
    );
    let failed: Vec<&String> = replies.iter().filter(|r| !r.starts_with("HTTP/1.1 200")).collect();
    assert_eq!(answered, 30, "refused or broken: {:?}", failed.first());
    let agent = body_json(&http_get(&addr, "/api/v1/agent"));
    assert!(agent["http"]["connections_evicted_total"].as_u64() >= Some(30), "{}", agent["http"]);
}

fn vm_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("VmRSS:").map(|v| v.trim().trim_end_matches(" kB").to_string()))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// After a flood of busy connections, the agent gives its buffers back (issue 15 item 9): three
/// floods of 300 connections, each asking for the process list and then holding its connection
/// idle, leave RSS near where it started instead of at the floods' high-water mark.
#[test]
fn memory_returns_after_connection_floods() {
    if raise_own_fd_limit(4096) < 400 {
        eprintln!("SKIP: connection floods: this test process may not open 300 sockets (RLIMIT_NOFILE)");
        return;
    }
    let (serve, addr) = serve(super::proctor_command(), "1s", &[]);
    let pid = serve.0.id();
    // The agent's HTTP counters; `asks` counts these requests of our own, answered too.
    let asks = std::cell::Cell::new(0u64);
    let http = |field: &str| {
        asks.set(asks.get() + 1);
        body_json(&http_get(&addr, "/api/v1/agent"))["http"][field].as_u64().unwrap_or(0)
    };
    // Waits, with a bound, for the agent's HTTP counters to say so (a busy machine answers 300
    // requests in its own time; a fixed sleep measured a flood still being answered).
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "{what} within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait("a second sample", &|| body_json(&http_get(&addr, "/api/v1/agent"))["samples_total"].as_u64() >= Some(2));
    let start = vm_rss_kib(pid);
    let mut after = Vec::new();
    for _ in 0..3 {
        let answered = http("requests_total");
        let asked_before = asks.get();
        let mut held = Vec::new();
        for _ in 0..300 {
            let Ok(mut stream) = TcpStream::connect(&addr) else { continue };
            let request = format!("GET /api/v1/processes HTTP/1.1\r\nHost: {addr}\r\n\r\n");
            if std::io::Write::write_all(&mut stream, request.as_bytes()).is_ok() {
                held.push(stream);
            }
        }
        // Every answer written while the connections are held, then all of them closed.
        let asked = held.len() as u64;
        // Each of our polls is answered before its count is read: it counts itself.
        wait("the flood answered", &|| http("requests_total") >= answered + asked + (asks.get() - asked_before));
        let trims = http("heap_trims_total");
        drop(held);
        // The trim runs once the last connection has closed, which may be one of our own polls,
        // and it is counted when done: RSS is read after that, not while pages go back.
        wait("the heap trimmed after the flood closed", &|| http("heap_trims_total") > trims);
        after.push(vm_rss_kib(pid));
    }
    eprintln!("serve RSS {start} KiB at start, after three floods of 300: {after:?} KiB");
    let last = *after.last().expect("three floods");
    assert!(last < start + 8 * 1024, "RSS stayed up: {start} KiB → {after:?} KiB");
}
