//! Every route, bad input, auth, escaping and sampler errors, over real HTTP.

use std::process::{Child, Command};
use std::time::Duration;

use proctor_agent::AgentConfig;
use proctor_http::prom::MetricsConfig;
use proctor_procfs::Root;
use proctor_sampler::SamplerConfig;

use crate::harness::{Options, Server};

/// A child we started, killed by its pid when dropped.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sleeper() -> Kid {
    Kid(Command::new("sleep").arg("60").spawn().expect("spawn sleep"))
}

/// A process with several children of one name heads a family: its detail carries the sharing
/// summary from the PSS worker's readings (the sleepers share libc's pages with each other), and
/// a process with no such children has none.
#[test]
fn a_family_head_gets_a_sharing_summary_from_the_pss_readings() {
    let server = Server::start(Options::default());
    let kids = [sleeper(), sleeper(), sleeper()];
    let me = std::process::id();
    let r = server.wait_for(&format!("/api/v1/processes/{me}"), |r| {
        let s = &r.json()["sharing"];
        s["workers"].as_u64().is_some_and(|n| n >= 3) && s["members_read"] == s["members"]
    });
    let s = &r.json()["sharing"];
    assert_eq!(s["worker_name"], "sleep", "{}", r.body);
    assert!(s["members_read"] == s["members"], "every member read within 10 s: {}", r.body);
    let (rss, pss, saving) = (
        s["rss_sum_bytes"].as_u64().expect("rss"),
        s["pss_sum_bytes"].as_u64().expect("pss"),
        s["saving_bytes"].as_u64().expect("saving"),
    );
    assert!(pss > 0 && pss < rss, "shared libc pages: PSS below RSS: {}", r.body);
    assert_eq!(saving, rss - pss);
    assert!(s["oldest_reading_age_secs"].as_f64().is_some_and(|a| a >= 0.0));
    let kid = server.get(&format!("/api/v1/processes/{}", kids[0].0.id())).json();
    assert!(kid["sharing"].is_null(), "a sleeper heads no family: {kid}");
    assert_eq!(kid["name"], "sleep", "the process's own fields are still at the top level");
}

#[test]
fn every_route_answers_json_from_the_snapshot() {
    let server = Server::start(Options::default());
    // Rates need two samples; history needs a few points.
    let snap = server.wait_for("/api/v1/snapshot", |r| r.json()["host"]["cpu"].is_object());
    assert_eq!(snap.status, 200);
    assert_eq!(snap.header("content-type"), Some("application/json"));
    let s = snap.json();
    assert_eq!(s["api_version"], "v1");
    assert!(s["host"]["online_cpus"].as_u64().is_some_and(|n| n >= 1));
    assert!(s["host"]["memory"]["total_bytes"].as_u64().is_some_and(|n| n > 0));
    assert!(s["processes"]["count"].as_u64().is_some_and(|n| n > 1));
    assert!(s["container"]["effective_cpus"].as_f64().is_some_and(|n| n > 0.0));
    assert!(s["agent"]["samples_total"].as_u64().is_some_and(|n| n >= 2));

    let me = std::process::id();
    let agent = server.get("/api/v1/agent").json();
    assert_eq!(agent["pid"].as_u64(), Some(u64::from(me)));
    assert!(agent["resident_bytes"].as_u64().is_some_and(|n| n > 0));
    assert!(agent["last_sample"]["files_read"].as_u64().is_some_and(|n| n > 0));
    assert!(agent["history"]["max_bytes"].as_u64().is_some_and(|n| n > 0));
    assert!(agent["last_sample_age_secs"].as_f64().is_some_and(|a| (0.0..5.0).contains(&a)), "{agent}");

    // Without rules: a plain answer, not a failed request (a page that asks logs no error).
    let alerts = server.get("/api/v1/alerts");
    assert_eq!(alerts.status, 200, "{}", alerts.body);
    assert_eq!(alerts.json()["enabled"], false, "{}", alerts.body);

    let own = server.get(&format!("/api/v1/processes/{me}"));
    assert_eq!(own.status, 200, "{}", own.body);
    assert_eq!(own.json()["pid"].as_u64(), Some(u64::from(me)));

    let kid = sleeper();
    let kid_pid = kid.0.id();
    let tree =
        server.wait_for(&format!("/api/v1/processes/{me}/tree"), |r| r.body.contains(&format!("\"pid\":{kid_pid}")));
    let t = tree.json();
    assert_eq!(t["root_pid"].as_u64(), Some(u64::from(me)));
    let members: Vec<u64> = t["processes"].as_array().expect("rows").iter().filter_map(|p| p["pid"].as_u64()).collect();
    assert!(members.contains(&u64::from(kid_pid)), "{members:?}");
    assert_eq!(t["processes"][0]["depth"].as_u64(), Some(0));

    let c = server.get("/api/v1/container").json();
    assert!(c["host_online_cpus"].as_u64().is_some());

    let list = server.get("/api/v1/history/series").json();
    let names: Vec<&str> = list["series"].as_array().expect("names").iter().filter_map(|n| n.as_str()).collect();
    for expected in
        ["host.cpu.busy_percent", "host.cpu0.busy_percent", "host.memory.used_bytes", "agent.resident_bytes"]
    {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    let h = server.get("/api/v1/history?series=host.memory.used_bytes,agent.resident_bytes&since=1h").json();
    let times = h["times_unix_ms"].as_array().expect("times");
    assert!(times.len() >= 2);
    assert!(times.windows(2).all(|w| w[0].as_u64() < w[1].as_u64()), "times ascend");
    for series in h["series"].as_array().expect("series") {
        assert_eq!(series["values"].as_array().expect("values").len(), times.len());
    }
    let thin = server.get("/api/v1/history?series=host.load1&max_points=1").json();
    assert_eq!(thin["times_unix_ms"].as_array().map(Vec::len), Some(1), "max_points keeps only the newest");

    // The Jupyter endpoint, for this test process's tree.
    let j = server.get("/api/metrics/v1").json();
    for key in ["rss", "limits", "cpu_percent", "cpu_count", "disk_used", "disk_total"] {
        assert!(j.get(key).is_some(), "{key} missing: {j}");
    }
    assert!(j["limits"]["memory"]["rss"].as_u64().is_some_and(|n| n > 0));
    assert!(j["limits"]["memory"]["warn"].is_boolean());
    assert!(j["limits"]["cpu"]["cpu"].as_f64().is_some_and(|n| n > 0.0));
    assert!(j["limits"]["disk"]["warn"].is_boolean());
    drop(kid);
}

/// The rows a page shows without PSS, named in `pss_first`, are read first: a big process,
/// which the worker's first pass (smallest first, at a budget of 0.01 % of a core) would reach
/// after minutes, is read because the page named it.
#[test]
fn the_processes_a_page_names_in_pss_first_are_read_first() {
    let sampler = SamplerConfig { pss_budget: 0.0001, ..SamplerConfig::default() };
    let server = Server::start(Options { sampler, ..Options::default() });
    let big = "import sys, time; x = bytearray(256 << 20); print(flush=True); time.sleep(60)";
    let mut kid =
        Kid(Command::new("python3").args(["-c", big]).stdout(std::process::Stdio::piped()).spawn().expect("python3"));
    // Its line comes once the 256 MiB are resident.
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(kid.0.stdout.as_mut().expect("stdout")), &mut line)
        .expect("the child's line");
    let pid = kid.0.id();
    let asked = |server: &Server| server.get("/api/v1/agent").json()["pss_worker"]["asked_reads"].as_u64();
    let before = asked(&server).expect("a PSS worker");
    let r = server.wait_for(&format!("/api/v1/processes?filter={pid}&pss_first={pid}"), |r| {
        r.json()["processes"].as_array().is_some_and(|p| p.iter().any(|p| p["pid"] == pid && p["pss_bytes"].is_u64()))
    });
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(asked(&server).is_some_and(|n| n > before), "read because it was asked: {}", r.body);
    drop(kid);
}

#[test]
fn processes_sort_filter_and_page() {
    let server = Server::start(Options::default());
    let all = server.get("/api/v1/processes?sort=pid&order=asc").json();
    let pids: Vec<u64> = all["processes"].as_array().expect("rows").iter().filter_map(|p| p["pid"].as_u64()).collect();
    assert!(pids.len() > 2);
    assert!(pids.windows(2).all(|w| w[0] < w[1]), "ascending pids");
    assert_eq!(all["matched"], all["total"]);

    let by_rss = server.get("/api/v1/processes?sort=rss&limit=5").json();
    let rss: Vec<u64> =
        by_rss["processes"].as_array().expect("rows").iter().map(|p| p["rss_bytes"].as_u64().unwrap_or(0)).collect();
    assert_eq!(rss.len(), 5);
    assert!(rss.windows(2).all(|w| w[0] >= w[1]), "descending rss: {rss:?}");

    let page = server.get("/api/v1/processes?sort=pid&order=asc&offset=1&limit=2").json();
    let page_pids: Vec<u64> =
        page["processes"].as_array().expect("rows").iter().filter_map(|p| p["pid"].as_u64()).collect();
    assert_eq!(page_pids, pids[1..3].to_vec());

    let me = std::process::id();
    let comm = std::fs::read_to_string(format!("/proc/{me}/comm")).expect("own comm");
    let filtered = server.get(&format!("/api/v1/processes?filter={}", comm.trim().to_uppercase())).json();
    let matched: Vec<u64> =
        filtered["processes"].as_array().expect("rows").iter().filter_map(|p| p["pid"].as_u64()).collect();
    assert!(matched.contains(&u64::from(me)), "case-insensitive filter finds us");
    assert!(matched.len() < pids.len());
}

#[test]
fn bad_input_gets_json_errors() {
    let server = Server::start(Options::default());
    let cases: &[(&str, u16, &str)] = &[
        ("/nope", 404, "not_found"),
        ("/api/v1/nope", 404, "not_found"),
        ("/api/v1/processes?sort=bogus", 400, "'sort' must be one of"),
        ("/api/v1/processes?limit=abc", 400, "'limit' must be a non-negative integer"),
        ("/api/v1/processes?limit=-1", 400, "'limit'"),
        ("/api/v1/processes?colour=red", 400, "unknown query parameter 'colour'"),
        ("/api/v1/processes?sort=pid&sort=rss", 400, "given twice"),
        ("/api/v1/processes?pss_first=1,x", 400, "'pss_first' must be pids separated by commas, got '1,x'"),
        ("/api/v1/processes?pss_first=0", 400, "'pss_first' must be pids"),
        ("/api/v1/processes?pss_first=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", 400, "at most 16 pids, got 17"),
        ("/api/v1/processes?filter=%zz", 400, "percent-encoded"),
        ("/api/v1/processes/abc", 400, "'abc' is not a pid"),
        ("/api/v1/processes/0/tree", 400, "not a pid"),
        ("/api/v1/processes/4294967295", 404, "no process"),
        ("/api/v1/history", 400, "'series' is required"),
        ("/api/v1/history?series=no.such", 400, "unknown series 'no.such'"),
        ("/api/v1/history?series=host.load1&since=5x", 400, "'since' must be a span"),
        ("/api/v1/history?series=host.load1&from=10&to=5", 400, "after"),
        ("/api/v1/snapshot?x=1", 400, "unknown query parameter 'x'; this endpoint takes: top, sort"),
        ("/api/v1/snapshot?sort=comm", 400, "'sort' must be one of"),
        ("/api/v1/container?x=1", 400, "takes: none"),
        // Percent-escapes that are not UTF-8, in a path segment axum extracts.
        ("/%ff%fe", 400, "Invalid UTF-8"),
        ("/api/v1/processes/%ff%fe", 400, "Invalid UTF-8"),
        ("/api/v1/processes/%ff/tree", 400, "Invalid UTF-8"),
    ];
    for (path, status, needle) in cases {
        let r = server.get(path);
        assert_eq!(r.status, *status, "{path}: {}", r.body);
        assert_eq!(r.header("content-type"), Some("application/json"), "{path}");
        let j = r.json();
        let message = j["error"]["message"].as_str().unwrap_or_default();
        let code = j["error"]["code"].as_str().unwrap_or_default();
        assert!(message.contains(needle) || code == *needle, "{path}: {}", r.body);
    }
    let post = server.request("POST", "/api/v1/snapshot", &[("Content-Length", "0")]);
    assert_eq!(post.status, 405, "{}", post.body);
    assert_eq!(post.json()["error"]["code"], "method_not_allowed");
}

/// A body past the bound is refused in the JSON error shape (issue 33 item 16): a declared length
/// past it before a byte of the body is sent (axum's own limit waited for the body, then answered
/// in text), and a chunked body as soon as it passes it.
#[test]
fn a_body_past_the_bound_gets_a_json_413() {
    use std::io::{Read, Write};
    let server = Server::start(Options::default());
    let json = ("Content-Type", "application/json");
    let declared = server.request("POST", "/api/v1/alerts/silences", &[json, ("Content-Length", "3000000")]);
    assert_eq!(declared.status, 413, "{}", declared.body);
    assert_eq!(declared.json()["error"]["code"], "too_large", "{}", declared.body);

    let mut stream = std::net::TcpStream::connect(server.addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let head = format!(
        "POST /api/v1/alerts/silences HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        server.addr
    );
    stream.write_all(head.as_bytes()).expect("head");
    let chunk = format!("1000\r\n{}\r\n", " ".repeat(0x1000));
    for _ in 0..5 {
        stream.write_all(chunk.as_bytes()).expect("a chunk");
    }
    stream.write_all(b"0\r\n\r\n").expect("the last chunk");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("the answer");
    assert!(raw.starts_with("HTTP/1.1 413"), "{raw}");
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    assert!(body.contains("\"too_large\""), "{raw}");
}

#[test]
fn a_vanished_pid_is_404() {
    let server = Server::start(Options::default());
    let kid = sleeper();
    let pid = kid.0.id();
    let path = format!("/api/v1/processes/{pid}");
    assert_eq!(server.wait_for(&path, |r| r.status == 200).status, 200, "the sleeper is seen");
    drop(kid);
    let gone = server.wait_for(&path, |r| r.status == 404);
    assert_eq!(gone.status, 404, "{}", gone.body);
    assert_eq!(gone.json()["error"]["code"], "not_found");
    assert_eq!(server.get(&format!("{path}/tree")).status, 404);
}

#[test]
fn a_token_guards_every_route() {
    let server = Server::start(Options { token: Some("s3cret"), ..Options::default() });
    for path in ["/api/v1/snapshot", "/metrics", "/api/metrics/v1", "/", "/nope"] {
        let r = server.get(path);
        assert_eq!(r.status, 401, "{path}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer realm=\"proctor\""), "{path}");
        assert!(!r.body.contains("proctor_host"), "{path} leaks nothing");
        let wrong = server.request("GET", path, &[("Authorization", "Bearer s3cre")]);
        assert_eq!(wrong.status, 401, "{path} with a wrong token");
    }
    assert_eq!(server.get("/api/v1/snapshot").json()["error"]["code"], "unauthorized");
    let ok = server.request("GET", "/api/v1/snapshot", &[("Authorization", "Bearer s3cret")]);
    assert_eq!(ok.status, 200);
    let cookie = server.request("GET", "/metrics", &[("Cookie", "theme=dark; proctor_token=s3cret")]);
    assert_eq!(cookie.status, 200);
    let page = server.request("GET", "/", &[("Accept", "text/html")]);
    assert_eq!(page.status, 401);
    assert!(page.body.contains("<form"), "the dashboard asks for the token: {}", page.body);
}

#[test]
fn metrics_escape_hostile_process_names() {
    // A process whose comm has a quote, a backslash, a line feed and markup.
    let dir = tempfile::tempdir().expect("tempdir");
    let name = "a\"b\\c\nd<img>";
    let exe = dir.path().join(name);
    std::fs::copy("/bin/sleep", &exe).expect("copy sleep");
    let kid = Kid(Command::new(&exe).arg("60").spawn().expect("spawn hostile"));
    let pid = kid.0.id();
    let server = Server::start(Options {
        metrics: MetricsConfig { top: 100_000, ..MetricsConfig::default() },
        ..Options::default()
    });
    let needle = format!("proctor_process_resident_bytes{{pid=\"{pid}\",name=\"a\\\"b\\\\c\\nd<img>\"");
    let r = server.wait_for("/metrics", |r| r.body.contains(&needle));
    assert!(r.body.contains(&needle), "escaped series for pid {pid} missing");
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    // Every sample line is one line: no raw line feed splits a label value.
    for line in r.body.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        assert!(line.starts_with("proctor_"), "stray line: {line:?}");
    }
    if let Ok(promtool) = std::env::var("PROCTOR_PROMTOOL") {
        let mut child = Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run promtool");
        use std::io::Write;
        child.stdin.take().expect("stdin").write_all(r.body.as_bytes()).expect("feed promtool");
        let out = child.wait_with_output().expect("promtool finishes");
        assert!(
            out.status.success(),
            "promtool: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        eprintln!(
            "note: PROCTOR_PROMTOOL unset, promtool check skipped here (scripts/test.d/65-prometheus.sh runs it)"
        );
    }
    let om =
        server.request("GET", "/metrics", &[("Accept", "application/openmetrics-text;version=1.0.0,text/plain;q=0.5")]);
    assert_eq!(om.header("content-type"), Some("application/openmetrics-text; version=1.0.0; charset=utf-8"));
    assert!(om.body.ends_with("# EOF\n"));
    assert!(om.body.contains("# TYPE proctor_agent_samples counter\n"));
    assert!(om.body.contains("proctor_agent_samples_total "));
    drop(kid);
}

/// A fake /proc with a garbage `stat` for one pid: the agent counts it and keeps serving.
#[test]
fn sampler_errors_are_counted_while_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = |path: &str, contents: &str| {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, contents).expect("write");
    };
    file("sys/devices/system/cpu/online", "0-1\n");
    file("proc/meminfo", "MemTotal:       16777216 kB\nMemAvailable:    8388608 kB\n");
    file("proc/stat", "cpu  100 0 50 1000 0 0 0 0 0 0\ncpu0 100 0 50 1000 0 0 0 0 0 0\nbtime 1700000000\n");
    file("proc/loadavg", "\u{1}\u{2} garbage\n");
    file("proc/100/stat", "100 (ok) S 1 100 100 0 -1 4194560 10 0 0 0 30 20 0 0 20 0 1 0 99 1000000 25 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n");
    file("proc/100/status", "Name:\tok\nUid:\t1000\t1000\t1000\t1000\nRssAnon:\t60 kB\nRssFile:\t40 kB\n");
    file("proc/101/stat", "\u{0}\u{1} not a stat file");
    let sampler =
        SamplerConfig { root: Root::new(dir.path()), cmdline: false, pss_budget: 0.0, ..SamplerConfig::default() };
    let agent = AgentConfig { interval: Duration::from_millis(100), ..AgentConfig::default() };
    let server = Server::start(Options { sampler, agent, jupyter_pid: 100, ..Options::default() });
    let a = server.wait_for("/api/v1/agent", |r| r.json()["samples_total"].as_u64().is_some_and(|n| n >= 3)).json();
    let errors = &a["errors_total"];
    assert!(errors["process.stat:parse"].as_u64().is_some_and(|n| n >= 3), "{a}");
    assert!(errors.as_object().is_some_and(|m| m.keys().any(|k| k.starts_with("host.loadavg"))), "{a}");
    let m = server.get("/metrics");
    assert_eq!(m.status, 200);
    assert!(
        m.body.contains("proctor_agent_read_errors_total{reader=\"process.stat\",reason=\"parse\"} "),
        "{}",
        m.body
    );
    let list = server.get("/api/v1/processes").json();
    assert_eq!(list["total"].as_u64(), Some(1), "the good process is listed: {list}");
    let j = server.get("/api/metrics/v1");
    assert_eq!(j.status, 200, "{}", j.body);
    assert_eq!(server.get("/api/v1/snapshot").status, 200);
}

#[test]
fn history_memory_is_bounded_and_reported() {
    let agent = AgentConfig {
        interval: Duration::from_millis(50),
        history: Duration::from_millis(500),
        ..AgentConfig::default()
    };
    let sampler = SamplerConfig { processes: false, ..SamplerConfig::default() };
    let server = Server::start(Options { agent, sampler, ..Options::default() });
    let a = server.wait_for("/api/v1/agent", |r| r.json()["samples_total"].as_u64().is_some_and(|n| n >= 15)).json();
    let h = &a["history"];
    assert_eq!(h["capacity"].as_u64(), Some(10));
    assert_eq!(h["points"].as_u64(), Some(10), "{a}");
    assert_eq!(h["bytes"], h["max_bytes"], "a full ring holds exactly its bound");
    let series = server.get("/api/v1/history?series=host.cpu.busy_percent").json();
    let times: Vec<u64> =
        series["times_unix_ms"].as_array().expect("times").iter().filter_map(|t| t.as_u64()).collect();
    assert_eq!(times.len(), 10);
    assert!(times.windows(2).all(|w| w[0] < w[1]), "oldest first after wrapping: {times:?}");
    let newest = server.get("/api/v1/history/series").json()["newest_unix_ms"].as_u64().expect("newest");
    assert!(newest >= *times.last().expect("a point"), "the newest point is kept");
}

/// DNS rebinding: a tokenless loopback agent answers loopback `Host`s (and `--allow-host`
/// names) only, and no agent answers a browser page from another origin (issue 15 item 6).
#[test]
fn requests_for_another_site_are_refused() {
    let server = Server::start(Options {
        hosts: proctor_http::HostRule::Loopback { also: vec!["proctor.internal".into()] },
        ..Options::default()
    });
    let port = server.addr.port();
    let get = |headers: &[(&str, &str)]| server.request("GET", "/api/v1/processes?limit=1", headers);
    for host in [format!("attacker.example:{port}"), "attacker.example".into(), format!("10.0.0.1:{port}")] {
        let r = get(&[("Host", &host)]);
        assert_eq!(r.status, 403, "{host}: {}", r.body);
        assert_eq!(r.json()["error"]["code"], "forbidden");
        assert!(!r.body.contains("\"pid\""), "no process data for {host}");
    }
    for host in [format!("localhost:{port}"), format!("[::1]:{port}"), "127.0.0.2".into(), "proctor.internal:1".into()]
    {
        assert_eq!(get(&[("Host", &host)]).status, 200, "{host}");
    }
    let same = format!("http://127.0.0.1:{port}");
    assert_eq!(get(&[("Origin", &same)]).status, 200, "same origin");
    assert_eq!(get(&[("Origin", "http://attacker.example")]).status, 403);
    assert_eq!(get(&[("Sec-Fetch-Site", "cross-site")]).status, 403);
    assert_eq!(get(&[("Sec-Fetch-Site", "same-origin")]).status, 200);
    let agent = server.get("/api/v1/agent").json();
    assert!(agent["http"]["foreign_host_refused_total"].as_u64() >= Some(5), "{agent}");
    // A public bind with a token answers any Host (the token guards it), but still no page
    // from another origin.
    let public =
        Server::start(Options { token: Some("t0ken"), hosts: proctor_http::HostRule::Any, ..Options::default() });
    let auth = [("Authorization", "Bearer t0ken"), ("Host", "proctor.example.com")];
    assert_eq!(public.request("GET", "/api/v1/container", &auth).status, 200);
    let cross = [("Authorization", "Bearer t0ken"), ("Origin", "http://attacker.example")];
    assert_eq!(public.request("GET", "/api/v1/container", &cross).status, 403);
}

/// With `--net` (as root where the kernel allows), a process's loopback transfer shows in
/// `/metrics` as its own counters, the host's IP counters split by owner (the `process` part at
/// least what the processes sent), and `/api/v1/snapshot`'s `host.process_net`.
#[test]
fn network_use_reaches_metrics_and_the_snapshot() {
    let server = Server::start(Options {
        sampler: SamplerConfig { pss_budget: 0.0, process_net: true, ..SamplerConfig::default() },
        metrics: MetricsConfig { top: 100_000, ..MetricsConfig::default() },
        ..Options::default()
    });
    let agent = server.get("/api/v1/agent").json();
    if agent["process_net_from"] != "bpf" {
        eprintln!("SKIP: per-process network: {}", agent["process_net_unavailable"]);
        return;
    }
    // How the connections are found, and with the TCP tables why.
    let walk = &agent["process_net_walk"];
    match walk["how"].as_str() {
        Some("owned_sockets") => assert!(walk["tcp_tables_why"].is_null(), "{walk}"),
        Some("tcp_tables") => assert!(walk["tcp_tables_why"].as_str().is_some_and(|w| !w.is_empty()), "{walk}"),
        _ => panic!("process_net_walk: {walk}"),
    }
    // A child that sends 2 MB to itself over loopback, then waits.
    let script = "import socket, sys\n\
                  s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n\
                  c = socket.create_connection(s.getsockname()); a, _ = s.accept()\n\
                  c.sendall(b'z' * 2000000); n = 0\n\
                  while n < 2000000: n += len(a.recv(1 << 16))\n\
                  sys.stdin.readline()";
    let kid =
        Kid(Command::new("python3").args(["-c", script]).stdin(std::process::Stdio::piped()).spawn().expect("python3"));
    let pid = kid.0.id();
    let value = |body: &str, series: &str| -> Option<f64> {
        body.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
    };
    let mine = format!("proctor_process_network_transmit_bytes_total{{pid=\"{pid}\"");
    let r = server.wait_for("/metrics", |r| {
        r.body
            .lines()
            .any(|l| l.starts_with(&mine) && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) >= Some(2e6))
    });
    let sent: f64 = r
        .body
        .lines()
        .find(|l| l.starts_with(&mine))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {mine}… series:\n{}", r.body));
    // Payload plus one IP and TCP header per segment: a little over 2 MB, far under 3.
    assert!((2e6..3e6).contains(&sent), "{sent}");
    let owned = value(&r.body, "proctor_host_ip_transmit_bytes_total{owner=\"process\"}").expect("owned tx");
    let unowned = value(&r.body, "proctor_host_ip_transmit_bytes_total{owner=\"none\"}").expect("unowned tx");
    assert!(owned >= sent && unowned >= 0.0, "owned {owned}, the child alone {sent}");
    assert!(value(&r.body, "proctor_agent_net_table_full_total").is_some());
    let snap = server.wait_for("/api/v1/snapshot", |r| r.json()["host"]["process_net"]["tx_bytes_per_sec"].is_number());
    let net = &snap.json()["host"]["process_net"];
    for key in ["rx_bytes_per_sec", "tx_bytes_per_sec", "unowned_rx_bytes_per_sec", "unowned_tx_bytes_per_sec"] {
        assert!(net[key].as_f64().is_some_and(|v| v >= 0.0), "{key}: {net}");
    }
    // The first sample walked; a walk of the TCP tables put off is counted, the other never is.
    let walk = server.get("/api/v1/agent").json()["process_net_walk"].clone();
    assert!(walk["walks_total"].as_u64() >= Some(1), "{walk}");
    let put_off = walk["walks_skipped_quiet_total"].as_u64().expect("walks_skipped_quiet_total");
    assert!(walk["how"] == "tcp_tables" || put_off == 0, "{walk}");
    drop(kid);
}
