//! `proctor probe` end to end for the server's own substeps (`Server-Timing`), HAR import and
//! the request filters of `probe analyze` and `dump probe`: loopback servers run by the test
//! (threads bound to `127.0.0.1:0`), files written into a temporary directory.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{json, proctor};

/// What the test server answers to its `index`-th request: a delay it really sleeps, a status
/// and the `Server-Timing` header value (if any).
pub(crate) struct Reply {
    pub(crate) delay: Duration,
    pub(crate) status: u16,
    pub(crate) server_timing: Option<String>,
}

/// A keep-alive loopback server answering every request with `reply(index)` (index counted
/// over all connections). Its threads end when their clients close (the accept thread with
/// the test binary).
pub(crate) fn server(reply: impl Fn(u64) -> Reply + Send + Sync + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    let reply = Arc::new(reply);
    let counter = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_nodelay(true);
            let (reply, counter) = (Arc::clone(&reply), Arc::clone(&counter));
            std::thread::spawn(move || {
                let mut pending = Vec::new();
                let mut chunk = [0u8; 2048];
                loop {
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        let answer = reply(counter.fetch_add(1, Ordering::Relaxed));
                        std::thread::sleep(answer.delay);
                        let mut head = format!("HTTP/1.1 {} X\r\nContent-Length: 2\r\n", answer.status);
                        if let Some(value) = &answer.server_timing {
                            head.push_str(&format!("Server-Timing: {value}\r\n"));
                        }
                        head.push_str("\r\nok");
                        if stream.write_all(head.as_bytes()).is_err() {
                            return;
                        }
                    }
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(read) => pending.extend_from_slice(&chunk[..read]),
                    }
                }
            });
        }
    });
    port
}

/// The issue's test: every response carries `Server-Timing` with three substeps; `render` is
/// 40 ms slower (and the server really sleeps that long) on every 5th request. That substep,
/// and no other, carries the slow mode; the report lists all three beside the phases, in text,
/// JSON, `--out` files re-read by `analyze`, and the plot.
#[test]
fn probe_names_the_server_substep_that_carries_the_slow_mode() {
    let port = server(|index| {
        let slow = index % 5 == 4;
        let render_ms = if slow { 41.0 } else { 1.0 };
        Reply {
            delay: Duration::from_millis(if slow { 40 } else { 0 }),
            status: 200,
            server_timing: Some(format!("db;dur=2.5, render;dur={render_ms};desc=\"tmpl\", auth;dur=0.3")),
        }
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run.jsonl");
    let out_text = out.to_str().expect("utf-8");
    let url = format!("http://127.0.0.1:{port}/page");
    let v = json(&proctor(&["probe", &url, "-n", "50", "--out", out_text, "--format", "json"]));
    assert_eq!(v["ok"], 50, "{v}");
    let names: Vec<&str> =
        v["substeps"].as_array().expect("substeps").iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["server:db", "server:render", "server:auth"], "{v}");
    let render = &v["substeps"][1];
    assert_eq!((render["median_ns"].as_u64(), render["p99_ns"].as_u64()), (Some(1_000_000), Some(41_000_000)));
    assert_eq!(render["slow_probability"], 0.2, "{render}");
    assert_eq!(render["desc"], "tmpl");
    for other in [&v["substeps"][0], &v["substeps"][2]] {
        assert_eq!(other["slow_probability"], 0.0, "{other}");
    }
    // The 40 ms mode is render's; jitter among the fast requests (a loaded machine) may make
    // small modes of its own, which no substep carries.
    let attribution = v["attribution"].as_array().expect("attribution");
    let slow: Vec<&serde_json::Value> =
        attribution.iter().filter(|blame| blame["mode_ns"].as_f64().is_some_and(|ns| ns > 30e6)).collect();
    assert!(!slow.is_empty(), "a slow mode: {v}");
    for blame in slow {
        assert_eq!((&blame["phase"], &blame["substep"]), (&"wait".into(), &"server:render".into()), "{blame}");
    }
    for blame in attribution {
        assert!(blame["substep"].is_null() || blame["substep"] == "server:render", "{blame}");
    }

    // The records carry the substeps and the URL; analyze reads them back to the same verdict.
    let first: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&out).expect("out").lines().next().expect("a line"))
            .expect("a JSON line");
    assert_eq!(first["url"], url.as_str());
    assert_eq!(first["server_timing"][0], serde_json::json!({"name": "db", "dur_ns": 2_500_000}));
    let plot = dir.path().join("plot.svg");
    let analyze = proctor(&["probe", "analyze", out_text, "--plot", plot.to_str().expect("utf-8")]);
    let text = String::from_utf8_lossy(&analyze.stdout);
    assert!(analyze.status.success(), "{}", String::from_utf8_lossy(&analyze.stderr));
    assert!(text.contains("phases, then the server's own (Server-Timing)"), "{text}");
    assert!(text.contains("in the server: server:render 1.00 ms → 41.0 ms"), "{text}");
    assert!(!text.contains("in the server: server:db") && !text.contains("in the server: server:auth"), "{text}");
    let svg = std::fs::read_to_string(&plot).expect("plot written");
    assert!(svg.contains(">server:render</text>") && svg.contains(">server:db</text>"), "{svg}");
}

const CHROME_HAR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../proctor-probe/tests/fixtures/chrome.har");

fn phase<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    let phases = v["phases"].as_array().expect("phases");
    phases.iter().find(|phase| phase["name"] == name).unwrap_or_else(|| panic!("no {name} phase: {v}"))
}

/// A Chrome export (fixture) in the same report as a probe run: HTTP timings mapped onto the
/// phases, the WebSocket's message pairs as requests. Found by its content under any name.
#[test]
fn probe_analyze_reads_a_har_into_the_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let renamed = dir.path().join("capture.json");
    std::fs::copy(CHROME_HAR, &renamed).expect("copy");
    for path in [CHROME_HAR, renamed.to_str().expect("utf-8")] {
        let out = proctor(&["probe", "analyze", path, "--format", "json"]);
        let v = json(&out);
        assert_eq!((v["requests"].as_u64(), v["responses"].as_u64(), v["ok"].as_u64()), (Some(6), Some(5), Some(4)));
        assert_eq!((v["errors"]["refused"].as_u64(), v["errors"]["http_4xx"].as_u64()), (Some(1), Some(1)), "{v}");
        assert_eq!(
            (phase(&v, "tls")["count"].as_u64(), phase(&v, "tls")["median_ns"].as_u64()),
            (Some(1), Some(20_000_000))
        );
        assert_eq!(phase(&v, "connect")["median_ns"], 15_000_000, "HAR's connect includes ssl");
        assert_eq!(phase(&v, "dns")["count"], 1);
        assert_eq!(phase(&v, "wait")["count"], 5, "3 HTTP responses and 2 WebSocket pairs");
        assert_eq!(phase(&v, "queue")["count"], 3, "HTTP responses' blocked; none for WebSocket pairs");
        assert_eq!(v["substeps"][0]["name"], "server:db");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(
                "4 HTTP entries, 1 WebSocket entry (2 message pairs; 1 send unanswered; 1 receive with no send before)"
            ),
            "{stderr}"
        );
    }
    let listed = proctor(&["probe", "analyze", CHROME_HAR, "--list", "--url", "^wss:"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.lines()
            .all(|line| line.starts_with("2024-05-01T12:00:0") && line.contains("  wss://example.test/socket  101  ")),
        "{text}"
    );
}

/// Each way a HAR can be wrong is an error naming the file and the JSON path.
#[test]
fn probe_analyze_names_the_json_path_of_a_malformed_har() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = std::fs::read_to_string(CHROME_HAR).expect("fixture");
    let cases = [
        (
            good.replace("\"wait\": 20.0", "\"wait\": \"abc\""),
            "log.entries[1].timings.wait: invalid type: string \"abc\", expected a number",
        ),
        (
            good.replace("\"startedDateTime\": \"2024-05-01T12:00:00.260Z\"", "\"startedDateTime\": \"noon\""),
            "log.entries[2].startedDateTime: not an ISO 8601 date-time",
        ),
        (
            good.replace("\"url\": \"https://example.test/app.js\"", "\"url\": 7"),
            "log.entries[1].request.url: invalid type: integer `7`, expected a string",
        ),
        (
            good.replace("\"time\": 1714564802.04", "\"time\": null"),
            "log.entries[4]._webSocketMessages[4].time: invalid type: null, expected a number",
        ),
        (good[..good.len() / 2].to_string(), "EOF while parsing"),
    ];
    for (index, (text, expected)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{index}.har"));
        std::fs::write(&path, text).expect("write");
        let out = proctor(&["probe", "analyze", path.to_str().expect("utf-8")]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.starts_with(&format!("proctor: {}: ", path.display())) && stderr.contains(expected),
            "{expected}: {stderr}"
        );
    }
    // Too large to read: refused from its size alone (a sparse file: no disk written).
    let huge = dir.path().join("huge.har");
    std::fs::File::create(&huge).expect("create").set_len((1 << 30) + 1).expect("set_len");
    let out = proctor(&["probe", "analyze", huge.to_str().expect("utf-8")]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is more than the 1073741824 read (1 GiB)"), "{:?}", out);
}

/// Regression (issue 33 item 16): `probe analyze` of a 322 MB HAR of 3 million WebSocket
/// messages took 1 GB: the whole document was parsed first, every pair carried its own copies
/// of the run and URL, and the records were copied once more into the list to report. Here
/// 520,000 messages (33 MB, 260,000 pairs) needed a 226 MiB address space and now need 125 MiB;
/// under 176 MiB the report is made.
#[test]
fn probe_analyze_reads_a_large_websocket_har_within_a_small_address_space() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("socket.har");
    let mut text = String::from(r#"{"log":{"entries":[{"_webSocketMessages":["#);
    for ms in 0..520_000u64 {
        let (kind, data) = if ms % 2 == 0 { ("send", "ping") } else { ("receive", "pong") };
        let separator = if ms == 0 { "" } else { "," };
        text.push_str(&format!(
            r#"{separator}{{"type":"{kind}","time":{}.{:03},"opcode":1,"data":"{data}"}}"#,
            1_714_564_800 + ms / 1000,
            ms % 1000
        ));
    }
    text.push_str(
        r#"],"startedDateTime":"2024-05-01T12:00:00Z","time":1,"request":{"url":"wss://example.test/socket"},"response":{"status":101},"timings":{"send":0,"wait":0,"receive":0}}]}}"#,
    );
    std::fs::write(&path, text).expect("write");
    let out = std::process::Command::new("prlimit")
        .arg(format!("--as={}", 176u64 << 20))
        .args(super::proctor_argv())
        .args(["probe", "analyze", path.to_str().expect("utf-8"), "--format", "json"])
        .output()
        .expect("prlimit (util-linux)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.contains("0 HTTP entries, 1 WebSocket entry (260000 message pairs)"), "{stderr}");
    let v = json(&out);
    assert_eq!((v["requests"].as_u64(), v["ok"].as_u64()), (Some(260_000), Some(260_000)), "{v}");
    assert_eq!(phase(&v, "wait")["count"], 260_000);
}

/// 40 requests, one worker: every 4th answers 503, every 5th is 60 ms slow with `db` 55 ms.
fn filter_server() -> u16 {
    server(|index| {
        let slow = index % 5 == 4;
        Reply {
            delay: Duration::from_millis(if slow { 60 } else { 0 }),
            status: if index % 4 == 3 { 503 } else { 200 },
            server_timing: Some(format!("db;dur={}", if slow { 55 } else { 1 })),
        }
    })
}

fn matched(args: &[&str]) -> (u64, u64) {
    let v = json(&proctor(args));
    (v["selection"]["matched"].as_u64().unwrap_or(u64::MAX), v["selection"]["of"].as_u64().unwrap_or(u64::MAX))
}

#[test]
fn probe_analyze_filters_combine_and_list_the_matches() {
    let port = filter_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run.jsonl");
    let file = out.to_str().expect("utf-8");
    let url = format!("http://127.0.0.1:{port}/shop/cart");
    let run = proctor(&["probe", &url, "-n", "40", "--out", file]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let analyze = |filters: &[&str]| {
        let mut args = vec!["probe", "analyze", file, "--format", "json"];
        args.extend_from_slice(filters);
        matched(&args)
    };
    assert_eq!(analyze(&["--status", "5xx"]), (10, 40));
    assert_eq!(analyze(&["--status", "503"]), (10, 40));
    assert_eq!(analyze(&["--status", "200", "--status", "503"]), (40, 40), "one kind: either");
    assert_eq!(analyze(&["--status", "404"]), (0, 40));
    assert_eq!(analyze(&["--error", "http_5xx"]), (10, 40));
    assert_eq!(analyze(&["--error", "any"]), (10, 40));
    assert_eq!(analyze(&["--slow", "50ms"]), (8, 40));
    assert_eq!(analyze(&["--phase", "server:db>50ms"]), (8, 40));
    assert_eq!(analyze(&["--phase", "server:db<2ms"]), (32, 40));
    assert_eq!(analyze(&["--phase", "wait>50ms"]), (8, 40));
    assert_eq!(analyze(&["--phase", "server:nothing>0ms"]), (0, 40), "a request without the phase does not match");
    assert_eq!(analyze(&["--url", "/shop/"]), (40, 40));
    assert_eq!(analyze(&["--url", "^https:", "--url", "/nowhere"]), (0, 40));
    assert_eq!(analyze(&["--status", "5xx", "--slow", "50ms"]), (2, 40), "two kinds: both");
    assert_eq!(analyze(&["--status", "5xx", "--slow", "50ms", "--url", "cart"]), (2, 40));
    assert_eq!(analyze(&["--from", "@4000000000"]), (0, 40));
    assert_eq!(analyze(&["--from", "1 hour ago", "--to", "now"]), (40, 40));

    // The report is over the matches, and says so.
    let v = json(&proctor(&["probe", "analyze", file, "--format", "json", "--status", "5xx"]));
    assert_eq!((v["requests"].as_u64(), v["ok"].as_u64()), (Some(10), Some(0)));
    assert_eq!(v["selection"]["filters"], serde_json::json!(["--status 5xx"]));
    let text = String::from_utf8_lossy(&proctor(&["probe", "analyze", file, "--slow", "50ms"]).stdout).into_owned();
    assert!(text.contains("matched 8 of 40 requests (--slow 50ms)"), "{text}");
    assert!(text.contains("8 requests"), "{text}");

    let listed = proctor(&["probe", "analyze", file, "--list", "--status", "5xx", "--slow", "50ms"]);
    let lines = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert_eq!(lines.lines().count(), 2, "{lines}");
    for line in lines.lines() {
        assert!(
            line.contains(&format!("  {url}  503  ")) && line.contains(" wait ") && line.contains(" server:db 55.0 ms"),
            "{line}"
        );
    }
    assert!(String::from_utf8_lossy(&listed.stderr).contains("matched 2 of 40 requests"));
    let json_lines = proctor(&["probe", "analyze", file, "--list", "--format", "json", "--slow", "50ms"]);
    let records: Vec<serde_json::Value> = String::from_utf8_lossy(&json_lines.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a record"))
        .collect();
    assert_eq!(records.len(), 8);
    assert!(records.iter().all(|record| record["total_ns"].as_u64().is_some_and(|ns| ns >= 50_000_000)));
}

/// A bad filter is refused (exit 2) before any file is read: the file named does not exist.
#[test]
fn probe_filters_refuse_bad_input_before_reading() {
    for (filter, said) in [
        (&["--status", "6xx"][..], "not a status"),
        (&["--phase", "bogus>1ms"], "no phase \"bogus\""),
        (&["--phase", "wait>soon"], "wait>soon"),
        (&["--phase", "wait"], "not a phase condition"),
        (&["--url", "("], "not a regular expression"),
        (&["--error", "boom"], "no error class \"boom\""),
        (&["--slow", "fast"], "--slow"),
        (&["--from", "yesterday"], "not a time"),
    ] {
        let mut args = vec!["probe", "analyze", "/nonexistent/run.jsonl"];
        args.extend_from_slice(filter);
        let out = proctor(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{filter:?}: {stderr}");
        assert!(stderr.contains(said) && !stderr.contains("cannot open"), "{filter:?}: {stderr}");
    }
    let out = proctor(&["dump", "host", "--dir", "/nonexistent", "--status", "5xx"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("are for `dump probe`"));
}

/// `dump probe` reads what `probe --record` stored, through the same filters and report.
#[test]
fn dump_probe_reports_and_lists_recorded_results_through_the_filters() {
    let port = filter_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("utf-8");
    let url = format!("http://127.0.0.1:{port}/recorded");
    let run = proctor(&["probe", &url, "-n", "40", "--data-dir", data]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let v = json(&proctor(&["dump", "probe", "--dir", data, "--format", "json"]));
    assert_eq!((v["requests"].as_u64(), v["errors"]["http_5xx"].as_u64()), (Some(40), Some(10)), "{v}");
    assert!(v.get("selection").is_none());
    assert_eq!(
        matched(&["dump", "probe", "--dir", data, "--format", "json", "--status", "5xx", "--slow", "50ms"]),
        (2, 40)
    );
    assert_eq!(matched(&["dump", "probe", "--dir", data, "--format", "json", "--phase", "wait>50ms"]), (8, 40));
    assert_eq!(matched(&["dump", "probe", "--dir", data, "--format", "json", "--url", "recorded$"]), (40, 40));
    let listed = proctor(&["dump", "probe", "--dir", data, "--list", "--error", "http_5xx"]);
    let lines = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert_eq!(lines.lines().count(), 10, "{lines}");
    assert!(lines.lines().all(|line| line.contains(&format!("  {url}  503  "))), "{lines}");
    let empty = tempfile::tempdir().expect("tempdir");
    let none = proctor(&["dump", "probe", "--dir", empty.path().to_str().expect("utf-8")]);
    assert!(String::from_utf8_lossy(&none.stderr).contains("no probe results in"), "{none:?}");
}

/// A hostile Jupyter server's error text reaches the terminal without its escapes (issue 33
/// item 14): a title-setting OSC and a clear-screen CSI in a 500's body are printed as `?`.
#[test]
fn probe_jupyter_prints_a_hostile_error_body_without_escapes() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        // Every request the probe makes (a bounded few) gets the hostile 500.
        for stream in listener.incoming().take(8).flatten() {
            let mut stream = stream;
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = [0u8; 65536];
            let _ = stream.read(&mut head);
            let body = b"{\"message\": \"\x1b]0;PWNED\x07 bad \x1b[2J\"}";
            let head = format!(
                "HTTP/1.1 500 Oops\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body));
        }
    });
    let out = proctor(&["probe", "jupyter", &format!("http://127.0.0.1:{port}/")]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("HTTP 500") && said.contains("PWNED"), "the error is said: {said:?}");
    assert!(!said.chars().any(|c| c.is_control() && c != '\n'), "no control characters: {said:?}");
}

/// `proctor probe --record` into a serving agent's store: `/metrics` counts every result once
/// (the store is read every 5 s over an overlapping window), per URL and outcome, and the
/// latency histogram holds every one that got a response.
#[test]
fn recorded_probe_results_reach_serves_metrics_each_once() {
    use super::bounded::{terminate, StderrLines};
    let data = tempfile::tempdir().expect("tempdir");
    let mut serve = super::proctor_command()
        .args(["serve", "--listen", "127.0.0.1:0", "--interval", "1s", "--pss-budget", "0", "--data-dir"])
        .arg(data.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("serve");
    let mut stderr = StderrLines::take(&mut serve);
    let addr = stderr.address();
    let url = format!("http://{addr}/api/v1/agent");
    let probe = proctor(&["probe", &url, "-n", "40", "-c", "4", "--data-dir", data.path().to_str().expect("utf-8")]);
    assert!(probe.status.success(), "{}", String::from_utf8_lossy(&probe.stderr));
    let value = |body: &str, series: &str| {
        body.lines()
            .find(|l| l.starts_with(series))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let ok = format!("proctor_probe_requests_total{{url=\"{url}\",outcome=\"ok\"}} ");
    let count = format!("proctor_probe_request_duration_seconds_count{{url=\"{url}\"}} ");
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let mut body = String::new();
    while std::time::Instant::now() < until {
        body = super::http_get(&addr, "/metrics");
        if value(&body, &ok) == Some(40.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(
        value(&body, &ok),
        Some(40.0),
        "{}",
        body.lines().filter(|l| l.contains("proctor_probe")).collect::<Vec<_>>().join("\n")
    );
    // Read again over the same window: still each once.
    std::thread::sleep(Duration::from_secs(6));
    let body = super::http_get(&addr, "/metrics");
    assert_eq!((value(&body, &ok), value(&body, &count)), (Some(40.0), Some(40.0)));
    assert!(terminate(&mut serve, "serve").success());
}
