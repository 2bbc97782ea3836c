//! statsd flushes recorded and correlated end to end: real UDP packets on loopback into a real
//! `proctor statsd --record` (beside a real `proctor record`) and a real `proctor serve
//! --statsd`, read back by `proctor report --timer`. The timer is made slow in a window the
//! test chooses; the report must place its slow flushes there. `serve --statsd --no-record`
//! must write nothing.

use std::net::UdpSocket;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proctor_store::{Event, Reader, STATSD_STREAM};

use super::serve_record::serve;
use super::Guard;

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs_f64()
}

/// A free loopback UDP port (bound and released; nothing else here binds ports by number).
fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn report(args: &[&str]) -> std::process::Output {
    super::proctor_command().arg("report").args(args).output().expect("run report")
}

/// Statsd flushes stored in `DATA/statsd`, read with the store's own reader.
fn stored_flushes(data: &Path) -> Vec<proctor_model::StatsdFlush> {
    let Ok(mut reader) = Reader::open(&data.join(STATSD_STREAM)) else { return Vec::new() };
    let frames = reader.event_frames(0, u64::MAX).expect("frames");
    frames
        .iter()
        .filter_map(|f| match reader.read_event(f) {
            Some(Event::Statsd(flush)) => Some(flush),
            _ => None,
        })
        .collect()
}

/// `api.latency` at ~10 ms for 3 s, ~300 ms for 4 s, ~10 ms for 3 s, 50 values a second (500
/// packets, each also carrying a `db.query` value); returns the slow window's Unix seconds.
fn send_timers(to: &str) -> (f64, f64) {
    let sender = UdpSocket::bind("127.0.0.1:0").expect("sender");
    let start = Instant::now();
    let mut slow_window = (0.0, 0.0);
    let mut slow_since: Option<f64> = None;
    for i in 0..500u32 {
        let due = Duration::from_millis(20 * u64::from(i));
        if let Some(rest) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(rest);
        }
        let elapsed = start.elapsed().as_secs_f64();
        let slow = (3.0..7.0).contains(&elapsed);
        let ms = if slow { 300 + (i % 7) * 5 } else { 10 + i % 5 };
        match (slow, slow_since) {
            (true, None) => slow_since = Some(now_s()),
            (false, Some(since)) => {
                slow_window = (since, now_s());
                slow_since = None;
            }
            _ => {}
        }
        sender.send_to(format!("api.latency:{ms}|ms\ndb.query:5|ms").as_bytes(), to).expect("send");
    }
    assert!(slow_window.1 > slow_window.0, "the slow window ended while sending");
    slow_window
}

/// Sample frames stored in `dir` so far (0 before the first segment).
fn stored_samples(dir: &Path) -> usize {
    Reader::open(dir).and_then(|mut r| r.all_frames()).map_or(0, |f| f.len())
}

#[test]
fn statsd_record_then_report_timer_places_the_slow_flushes_in_the_slow_window() {
    let data = tempfile::tempdir().expect("tempdir");
    let plots = tempfile::tempdir().expect("tempdir");
    let begin = now_s();
    let mut recorder = super::proctor_command();
    recorder.args(["record", "--dir"]).arg(data.path()).args(["--interval", "200ms"]).stderr(Stdio::null());
    let recorder = Guard(recorder.spawn().expect("record"));

    let udp = format!("127.0.0.1:{}", free_udp_port());
    let mut statsd = super::proctor_command()
        .args(["statsd", "--record", "--data-dir"])
        .arg(data.path())
        .args(["--udp", &udp, "--admin", "off", "--flush-interval", "500ms"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start statsd");
    let mut stderr = super::bounded::StderrLines::take(&mut statsd);
    let mut statsd = Guard(statsd);
    // The udp line is printed once the socket is bound: packets sent after it are received.
    let bound = format!("udp {udp}");
    stderr.until("statsd's udp line", super::bounded::STARTUP, |line| line.contains(&bound).then_some(()));
    let early = stderr.seen.clone();
    // The recorder's first samples stored before the first flush, so every flush falls in a
    // sample interval (800 ms of sleep here was too few for a loaded host: the recorder starts
    // its BPF parts first, and the first flush fell before any sample).
    let waited = Instant::now();
    while stored_samples(data.path()) < 2 {
        assert!(waited.elapsed() < super::bounded::STARTUP, "the recorder stored no two samples");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (slow_from, slow_to) = send_timers(&udp);
    // SIGTERM: statsd flushes once more and the recorder thread drains before it exits.
    let status = super::bounded::terminate(&mut statsd.0, "statsd");
    let rest = stderr.rest(super::bounded::STARTUP);
    assert!(status.success(), "{status:?}: {early}{rest}");
    assert!(rest.contains("0 dropped at a full queue, 0 failed writes"), "{rest}");
    std::thread::sleep(Duration::from_millis(800));
    drop(recorder);
    let end = now_s();

    // What the stream holds, independently of the report: flushes with values for the key.
    let flushes = stored_flushes(data.path());
    let with_values = flushes
        .iter()
        .filter(|f| f.timers.iter().any(|t| t.key == "api.latency" && t.stat("upper_90").is_some()))
        .count();
    assert!(with_values >= 16, "about 20 flushes of 500 ms had values: {with_values} of {}", flushes.len());

    let range = ["--from".to_string(), format!("@{begin:.3}"), "--to".to_string(), format!("@{end:.3}")];
    let range: Vec<&str> = range.iter().map(String::as_str).collect();
    let mut args = vec!["--dir", data.path().to_str().expect("utf-8")];
    args.extend(&range);
    args.extend(["--timer", "api.latency", "--format", "json", "--out", plots.path().to_str().expect("utf-8")]);
    let out = report(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        v["latency_source"].as_str().is_some_and(|s| s.starts_with("statsd timer api.latency, upper_90 per flush")),
        "{}",
        v["latency_source"]
    );
    let c = &v["correlation"];
    // One point per flush with values, every one inside a sample interval, and each series'
    // n counts them all.
    assert_eq!(c["requests"].as_u64(), Some(with_values as u64), "{c}");
    assert_eq!(c["matched"].as_u64(), Some(with_values as u64), "{c}");
    for name in ["host.cpu.busy_percent", "host.memory.used_bytes"] {
        let s = c["series"].as_array().expect("series").iter().find(|s| s["name"] == name).expect("series");
        assert_eq!(s["n"].as_u64(), Some(with_values as u64), "{s}");
    }
    // The timer over time: slow where it was made slow, fast well away from it. A point is
    // matched at its midpoint (start + half its latency).
    let points = c["points"].as_array().expect("points");
    let midpoint =
        |p: &serde_json::Value| (p["unix_ns"].as_f64().expect("t") + p["latency_ns"].as_f64().expect("l") / 2.0) / 1e9;
    let latency_ms = |p: &serde_json::Value| p["latency_ns"].as_f64().expect("l") / 1e6;
    let mut inside = 0;
    for p in points {
        let t = midpoint(p);
        if t > slow_from + 1.0 && t < slow_to - 1.0 {
            inside += 1;
            assert!(
                latency_ms(p) >= 250.0,
                "a flush well inside the slow window is slow: {p} ({slow_from:.3}..{slow_to:.3})"
            );
        }
        if t < slow_from - 1.0 || t > slow_to + 1.0 {
            assert!(
                latency_ms(p) < 50.0,
                "a flush well outside the slow window is fast: {p} ({slow_from:.3}..{slow_to:.3})"
            );
        }
        if p["slow"] == true {
            assert!(
                t > slow_from - 1.0 && t < slow_to + 1.0,
                "slow points lie in the slow window: {p} ({slow_from:.3}..{slow_to:.3})"
            );
        }
    }
    assert!(inside >= 2, "flushes well inside the 4 s slow window: {inside}");
    let slow = c["slow"].as_u64().expect("slow");
    assert!(slow >= 1, "{c}");
    let png = std::fs::read(plots.path().join("latency.png")).expect("latency plot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    // Text: the table with its n.
    let mut args = vec!["--dir", data.path().to_str().expect("utf-8")];
    args.extend(&range);
    args.extend(["--timer", "api.latency"]);
    let text = report(&args);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(&format!("{with_values} requests, {with_values} inside sample intervals")), "{text}");
    // Every series the table lists counts every flush in its n. Which series are listed depends
    // on what moved (on a busy machine cpu.busy sits at 100 % and has no rank correlation), so
    // the rows are whichever the table shows, and there must be some.
    let rows: Vec<&str> =
        text.lines().skip_while(|l| !l.starts_with("SERIES ")).skip(1).take_while(|l| !l.trim().is_empty()).collect();
    assert!(!rows.is_empty(), "no series in the correlation table: {text}");
    for row in rows {
        assert_eq!(row.split_whitespace().nth(1), Some(with_values.to_string().as_str()), "{row}\n{text}");
    }

    // A key the stream never had is an error that names the keys it has.
    let mut args = vec!["--dir", data.path().to_str().expect("utf-8")];
    args.extend(&range);
    args.extend(["--timer", "api.latancy"]);
    let wrong = report(&args);
    assert_eq!(wrong.status.code(), Some(1), "{}", String::from_utf8_lossy(&wrong.stdout));
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        err.contains("--timer api.latancy: no flush") && err.contains("api.latency") && err.contains("db.query"),
        "{err}"
    );
    assert!(wrong.stdout.is_empty());
}

#[test]
fn serve_statsd_records_flushes_for_report_and_no_record_writes_nothing() {
    let home = tempfile::tempdir().expect("tempdir");
    let data = home.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    let begin = now_s();
    let udp = format!("127.0.0.1:{}", free_udp_port());
    let statsd_args = ["--statsd", "--udp", &udp, "--admin", "off", "--flush-interval", "300ms"];
    let mut extra = vec!["--data-dir", data.to_str().expect("utf-8")];
    extra.extend(statsd_args);
    let served = serve(home.path(), None, &extra, |_| {});
    let sender = UdpSocket::bind("127.0.0.1:0").expect("sender");
    // Bounded: at most 15 s of 20 packets a second, until three flushes with values are stored.
    let deadline = Instant::now() + Duration::from_secs(15);
    let stored_with_values = || {
        stored_flushes(&data)
            .iter()
            .filter(|f| f.timers.iter().any(|t| t.key == "job.time" && t.stat("upper").is_some()))
            .count()
    };
    while Instant::now() < deadline && stored_with_values() < 3 {
        sender.send_to(b"job.time:42|ms", &udp).expect("send");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, stderr) = served.stop();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("0 dropped at a full queue, 0 failed writes"), "{stderr}");
    let stored = stored_with_values();
    assert!(stored >= 3, "flushes stored: {stored}; {stderr}");
    let end = now_s();
    let out = report(&[
        "--dir",
        data.to_str().expect("utf-8"),
        "--from",
        &format!("@{begin:.3}"),
        "--to",
        &format!("@{end:.3}"),
        "--timer",
        "job.time",
        "--timer-stat",
        "upper",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let points = v["correlation"]["points"].as_array().expect("points");
    // Every stored flush with values is one point (serve's own samples are in the same range).
    assert_eq!(points.len(), stored, "{v}");
    assert!(points.iter().all(|p| p["latency_ns"].as_f64() == Some(42e6)), "{v}");

    // --no-record: flushes happen (they reach /metrics) but nothing is written anywhere.
    let quiet = tempfile::tempdir().expect("tempdir");
    let state = quiet.path().join("state");
    let udp = format!("127.0.0.1:{}", free_udp_port());
    let statsd_args = ["--no-record", "--statsd", "--udp", &udp, "--admin", "off", "--flush-interval", "300ms"];
    let served = serve(quiet.path(), Some(&state), &statsd_args, |_| {});
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut flushed = false;
    while Instant::now() < deadline && !flushed {
        sender.send_to(b"job.time:42|ms", &udp).expect("send");
        std::thread::sleep(Duration::from_millis(100));
        flushed = super::http_get(&served.addr, "/metrics")
            .contains("proctor_statsd_timer_seconds{key=\"job.time\",stat=\"upper\"} 0.042");
    }
    let (status, stderr) = served.stop();
    assert!(status.success(), "{stderr}");
    assert!(flushed, "the timer reached /metrics: {stderr}");
    assert!(!stderr.contains("recorded"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(quiet.path()).expect("list").collect();
    assert!(left.is_empty(), "--no-record wrote {left:?}");
}
