//! OTLP/HTTP end to end against the real parts (issue 37 item 1): `otlprecv`
//! (crates/proctor-remote/tests/otlprecv, built by scripts/test.d/69-fleet.sh and named in
//! PROCTOR_OTLPRECV, else a SKIP) passes every request through Prometheus 3.5's own OTLP write
//! handler into a Prometheus TSDB, and decodes it with the OpenTelemetry Collector's pdata into
//! the file exporter's JSON. The values Prometheus stores equal what `/metrics` showed for the
//! same sample, under the conventions' names or `/metrics`' own; the headers and the bearer token
//! arrive; a 20 s outage of the receiver leaves no stored sample missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::bounded::{terminate, StderrLines};
use super::flood::body_json;
use super::remote_write::{assert_all_stored, free_port, stored_samples, wait_until};
use super::{http_get, proctor_command, Guard};

fn start_receiver(bin: &str, dir: &Path, port: u16) -> Guard {
    let child = Command::new(bin)
        .arg(format!("127.0.0.1:{port}"))
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(dir.join("recv.log")).expect("log"))
        .spawn()
        .expect("start otlprecv");
    let addr = format!("127.0.0.1:{port}");
    wait_until("otlprecv listening", Duration::from_secs(30), || {
        std::net::TcpStream::connect(&addr).is_ok() && http_get(&addr, "/dump").starts_with("HTTP/1.1 200")
    });
    Guard(child)
}

/// Every series the receiver's TSDB holds: labels (with `__name__`) → (ms → value).
type Stored = BTreeMap<BTreeMap<String, String>, BTreeMap<u64, f64>>;

fn stored(addr: &str) -> Stored {
    let v = body_json(&http_get(addr, "/dump"));
    let mut out = Stored::new();
    for s in v.as_array().expect("series") {
        let labels = s["labels"]
            .as_object()
            .expect("labels")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().expect("label value").to_string()))
            .collect();
        let points = s["samples"]
            .as_array()
            .expect("samples")
            .iter()
            .map(|p| (p["t"].as_u64().expect("t"), p["v"].as_f64().expect("v")))
            .collect();
        out.insert(labels, points);
    }
    out
}

/// A `/metrics` scrape: (sample name, labels) → value.
type Scraped = BTreeMap<(String, BTreeMap<String, String>), f64>;

/// The `/metrics` text's samples, and the sample's time in ms.
fn scrape(agent: &str) -> (Scraped, u64) {
    let text = http_get(agent, "/metrics");
    let body = text.split("\r\n\r\n").nth(1).expect("a body");
    let mut out = BTreeMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (series, value) = line.rsplit_once(' ').expect("name value");
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, parse_labels(rest.trim_end_matches('}'))),
            None => (series, BTreeMap::new()),
        };
        out.insert((name.to_string(), labels), value.parse::<f64>().unwrap_or(f64::NAN));
    }
    // Milliseconds as the queue makes them (truncated), from the text, not through a float.
    let stamp = body
        .lines()
        .find_map(|l| l.strip_prefix("proctor_agent_last_sample_timestamp_seconds "))
        .expect("the sample's time");
    let (secs, frac) = stamp.split_once('.').unwrap_or((stamp, ""));
    let ms_part: String = frac.chars().chain(std::iter::repeat('0')).take(3).collect();
    let at = secs.parse::<u64>().expect("seconds") * 1000 + ms_part.parse::<u64>().expect("milliseconds");
    (out, at)
}

fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some((name, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, e)) = chars.next() {
                        value.push(match e {
                            'n' => '\n',
                            other => other,
                        });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.insert(name.trim_start_matches(',').to_string(), value);
        rest = &after[end..];
    }
    out
}

/// The stored value at `ms` of the one series named `name` whose labels include `want`.
fn at(stored: &Stored, name: &str, want: &[(&str, &str)], ms: u64) -> Option<f64> {
    let matching: Vec<_> = stored
        .iter()
        .filter(|(labels, _)| {
            labels.get("__name__").map(String::as_str) == Some(name)
                && want.iter().all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert!(matching.len() <= 1, "{name} {want:?}: {} series", matching.len());
    matching.first().and_then(|(_, points)| points.get(&ms).copied())
}

struct Agent {
    child: Guard,
    addr: String,
    _stderr: StderrLines,
}

impl Agent {
    fn start(data: &Path, url: &str, token: &Path) -> Agent {
        let mut child = proctor_command()
            .args(["serve", "--listen", "127.0.0.1:0", "--interval", "1s", "--pss-budget", "0", "--data-dir"])
            .arg(data)
            .args(["--otlp", url, "--external-label", "instance=otlp-test", "--external-label", "site=lab"])
            .args(["--otlp-header", "X-Proctor-Test: yes", "--otlp-bearer-token-file"])
            .arg(token)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve");
        let mut stderr = StderrLines::take(&mut child);
        let addr = stderr.address();
        Agent { child: Guard(child), addr, _stderr: stderr }
    }

    fn queue(&self) -> serde_json::Value {
        body_json(&http_get(&self.addr, "/api/v1/agent"))["remote_write"][0].clone()
    }
}

fn receiver_bin() -> Option<String> {
    std::env::var("PROCTOR_OTLPRECV").ok()
}

#[test]
fn prometheus_and_the_collector_take_otlp_with_the_values_of_metrics_across_an_outage() {
    let Some(bin) = receiver_bin() else {
        eprintln!("SKIP: OTLP end to end: PROCTOR_OTLPRECV is unset (scripts/test.d/69-fleet.sh builds and sets it)");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (recv_dir, data): (PathBuf, PathBuf) = (dir.path().join("recv"), dir.path().join("data"));
    std::fs::create_dir(&recv_dir).expect("recv dir");
    std::fs::create_dir(&data).expect("data dir");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").expect("token");
    let port = free_port();
    let recv_addr = format!("127.0.0.1:{port}");
    let mut receiver = start_receiver(&bin, &recv_dir, port);
    // A URL without a path: /v1/metrics is added.
    let agent = Agent::start(&data, &format!("http://{recv_addr}"), &token);
    wait_until("5 samples delivered", Duration::from_secs(60), || {
        agent.queue()["samples_sent_total"].as_u64() >= Some(5)
    });
    let q = agent.queue();
    assert_eq!(
        (q["protocol"].as_str(), q["url"].as_str()),
        (Some("otlp"), Some(&*format!("http://{recv_addr}/v1/metrics")))
    );

    // What /metrics shows for one sample is what Prometheus stored for it.
    let (scraped, ms) = scrape(&agent.addr);
    wait_until("the scraped sample in the receiver", Duration::from_secs(30), || {
        at(&stored(&recv_addr), "proctor_host_load1", &[], ms).is_some()
    });
    let got = stored(&recv_addr);
    let mut compared = 0;
    for ((name, labels), value) in &scraped {
        let want: Vec<(&str, &str)>;
        let stored_name = match name.as_str() {
            "proctor_host_cpu_seconds_total" => {
                let mode = match labels["mode"].as_str() {
                    "irq" => "interrupt",
                    other => other,
                };
                want = vec![("cpu_logical_number", labels["cpu"].as_str()), ("cpu_mode", mode)];
                "system_cpu_time_seconds_total"
            }
            "proctor_host_memory_total_bytes" => {
                want = Vec::new();
                "system_memory_limit_bytes"
            }
            "proctor_host_memory_available_bytes" => {
                want = Vec::new();
                "system_linux_memory_available_bytes"
            }
            "proctor_host_memory_cached_bytes" => {
                want = vec![("system_memory_state", "cached")];
                "system_memory_usage_bytes"
            }
            "proctor_host_network_receive_bytes_total" => {
                want = vec![("network_interface_name", labels["device"].as_str()), ("network_io_direction", "receive")];
                "system_network_io_bytes_total"
            }
            // Every other host series under /metrics' own name and labels.
            n if n.starts_with("proctor_host_") && n != "proctor_host_boot_time_seconds" => {
                if proctor_remote::otlp::convention(n.trim_end_matches("_total")).is_some() {
                    continue;
                }
                want = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                n
            }
            _ => continue,
        };
        let stored_value = at(&got, stored_name, &want, ms);
        assert_eq!(stored_value, Some(*value), "{name}{labels:?} at {ms} stored as {stored_name}{want:?}");
        compared += 1;
    }
    assert!(compared >= 30, "{compared} series compared");
    // The resource: job and instance from service.name and service.instance.id; the rest in
    // target_info.
    let info =
        got.keys().find(|l| l.get("__name__").map(String::as_str) == Some("target_info")).expect("target_info").clone();
    assert_eq!((info["job"].as_str(), info["instance"].as_str()), ("proctor", "otlp-test"), "{info:?}");
    assert_eq!(info.get("site").map(String::as_str), Some("lab"), "{info:?}");
    assert_eq!(info.get("os_type").map(String::as_str), Some("linux"), "{info:?}");
    assert!(info.contains_key("host_name"), "{info:?}");
    // A process series, its identity on the point.
    assert!(
        got.keys().any(|l| l.get("__name__").map(String::as_str) == Some("process_cpu_time_seconds_total")
            && l.contains_key("process_pid")
            && l.contains_key("process_executable_name")),
        "process_cpu_time_seconds_total with process_pid"
    );

    // The Collector's side: every request decoded by pdata, headers and the token came.
    let requests = std::fs::read_to_string(recv_dir.join("requests.jsonl")).expect("requests");
    for line in requests.lines() {
        let r: serde_json::Value = serde_json::from_str(line).expect("json");
        assert_eq!(r["status"], 200, "{r}");
        assert_eq!(r["pdata_error"], "", "{r}");
        assert_eq!(r["content_encoding"], "gzip", "{r}");
        assert_eq!(r["content_type"], "application/x-protobuf", "{r}");
        assert_eq!(r["authorization"], "Bearer s3cret", "{r}");
        assert_eq!(r["x_proctor_test"], "yes", "{r}");
    }
    let first = std::fs::read_to_string(recv_dir.join("otlp.jsonl")).expect("file exporter output");
    let doc: serde_json::Value = serde_json::from_str(first.lines().next().expect("a line")).expect("json");
    let rm = &doc["resourceMetrics"][0];
    let attrs: BTreeMap<String, String> = rm["resource"]["attributes"]
        .as_array()
        .expect("attributes")
        .iter()
        .map(|a| {
            (a["key"].as_str().expect("key").to_string(), a["value"]["stringValue"].as_str().unwrap_or("").to_string())
        })
        .collect();
    assert_eq!(attrs.get("service.name").map(String::as_str), Some("proctor"), "{attrs:?}");
    assert_eq!(attrs.get("service.instance.id").map(String::as_str), Some("otlp-test"), "{attrs:?}");
    let cpu = rm["scopeMetrics"][0]["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .find(|m| m["name"] == "system.cpu.time")
        .expect("system.cpu.time");
    assert_eq!((cpu["unit"].as_str(), cpu["sum"]["isMonotonic"].as_bool()), (Some("s"), Some(true)), "{cpu}");
    assert_eq!(cpu["sum"]["aggregationTemporality"], 2, "cumulative: {cpu}");

    // The receiver goes away for 20 s: the queue fails, counts, keeps the batch, and backfills.
    // (SIGTERM ends a Go program with a signal's status, which is what is wanted here.)
    terminate(&mut receiver.0, "otlprecv");
    std::thread::sleep(Duration::from_secs(20));
    let q = agent.queue();
    assert!(q["failed_total"]["network"].as_u64() >= Some(1), "{q}");
    assert!(q["lag_secs"].as_f64() > Some(10.0), "{q}");
    let receiver = start_receiver(&bin, &recv_dir, port);
    wait_until("caught up after the outage", Duration::from_secs(90), || {
        let q = agent.queue();
        q["backfilling"] == false && q["lag_secs"].as_f64().is_some_and(|l| l < 6.0)
    });
    let mut agent = agent;
    let last = agent.queue();
    assert!(terminate(&mut agent.child.0, "serve --otlp").success());
    let delivered = last["delivered_until_unix_ms"].as_u64().expect("delivered");
    assert_eq!(last["samples_dropped_total"], 0, "{last}");
    assert_eq!(last["points_rejected_total"], 0, "{last}");

    // Every stored sample up to the last delivered one is in the receiver at its time with its
    // value: the load average under its own name.
    let samples = stored_samples(&data, "load.avg1", delivered, 25);
    let got = stored(&recv_addr);
    let load = got
        .iter()
        .find(|(l, _)| l.get("__name__").map(String::as_str) == Some("proctor_host_load1"))
        .map(|(_, p)| p.clone())
        .expect("load1");
    assert_all_stored("the receiver's TSDB", &samples, "load.avg1", &load);
    drop(receiver);
}

/// The points of one OTLP metric in the Collector's file exporter output (pmetric JSON, one
/// document per line): (attributes as text, time in ms, value).
fn collector_points(file: &Path, metric: &str) -> Vec<(BTreeMap<String, String>, u64, f64)> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        for rm in doc["resourceMetrics"].as_array().into_iter().flatten() {
            for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                for m in sm["metrics"].as_array().into_iter().flatten().filter(|m| m["name"] == metric) {
                    let points = m["gauge"]["dataPoints"].as_array().or_else(|| m["sum"]["dataPoints"].as_array());
                    for p in points.into_iter().flatten() {
                        let attrs = p["attributes"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|a| {
                                let v = &a["value"];
                                let text = v["stringValue"].as_str().map(str::to_string).unwrap_or_else(|| {
                                    v["intValue"]
                                        .as_str()
                                        .map(str::to_string)
                                        .unwrap_or_else(|| v["intValue"].to_string())
                                });
                                (a["key"].as_str().unwrap_or("").to_string(), text)
                            })
                            .collect();
                        let ns: u64 = p["timeUnixNano"].as_str().and_then(|t| t.parse().ok()).expect("timeUnixNano");
                        let value = p["asDouble"].as_f64().expect("asDouble");
                        out.push((attrs, ns / 1_000_000, value));
                    }
                }
            }
        }
    }
    out
}

/// The Collector on loopback, its file exporter appending (without `append` a restart truncates
/// the file, and what the first run wrote would look lost).
fn start_collector(bin: &str, dir: &Path, port: u16) -> Guard {
    start_collector_with(bin, dir, port, "")
}

/// The same with more settings for its HTTP receiver (`tls:` …), indented under `http:`.
fn start_collector_with(bin: &str, dir: &Path, port: u16, http: &str) -> Guard {
    let config = dir.join("otelcol.yaml");
    std::fs::write(
        &config,
        format!(
            "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{port}\n{http}\
             exporters:\n  file:\n    path: {}\n    append: true\n    flush_interval: 100ms\n\
             service:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    metrics:\n      \
             receivers: [otlp]\n      exporters: [file]\n",
            dir.join("collector.jsonl").display()
        ),
    )
    .expect("config");
    let child = Command::new(bin)
        .arg(format!("--config={}", config.display()))
        .stdout(Stdio::null())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(dir.join("otelcol.log")).expect("log"))
        .spawn()
        .expect("start otelcol");
    let addr = format!("127.0.0.1:{port}");
    wait_until("the collector listening", Duration::from_secs(30), || std::net::TcpStream::connect(&addr).is_ok());
    Guard(child)
}

/// The OpenTelemetry Collector itself (its OTLP receiver and file exporter, built from their
/// modules at one release, crates/proctor-remote/tests/otelcol; PROCTOR_OTELCOL names it): what
/// `/metrics` showed for a sample is what the Collector wrote for it, under the conventions'
/// names with their attributes; after a 20 s outage of the Collector every stored sample is in
/// its file.
#[test]
fn the_collector_writes_what_metrics_showed_and_every_stored_sample_after_an_outage() {
    let Ok(bin) = std::env::var("PROCTOR_OTELCOL") else {
        eprintln!(
            "SKIP: OTLP into the Collector: PROCTOR_OTELCOL is unset (scripts/test.d/69-fleet.sh builds and sets it)"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (col_dir, data) = (dir.path().join("collector"), dir.path().join("data"));
    std::fs::create_dir(&col_dir).expect("collector dir");
    std::fs::create_dir(&data).expect("data dir");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").expect("token");
    let port = free_port();
    let mut collector = start_collector(&bin, &col_dir, port);
    let file = col_dir.join("collector.jsonl");
    let agent = Agent::start(&data, &format!("http://127.0.0.1:{port}"), &token);
    wait_until("5 samples delivered", Duration::from_secs(60), || {
        agent.queue()["samples_sent_total"].as_u64() >= Some(5)
    });
    let (scraped, ms) = scrape(&agent.addr);
    wait_until("the scraped sample in the collector's file", Duration::from_secs(30), || {
        collector_points(&file, "proctor.host.load1").iter().any(|&(_, t, _)| t == ms)
    });
    let cpu = collector_points(&file, "system.cpu.time");
    let mut compared = 0;
    for ((name, labels), value) in &scraped {
        let got: Vec<f64> = match name.as_str() {
            "proctor_host_cpu_seconds_total" => {
                let mode = if labels["mode"] == "irq" { "interrupt" } else { labels["mode"].as_str() };
                cpu.iter()
                    .filter(|(a, t, _)| {
                        *t == ms
                            && a.get("cpu.mode").map(String::as_str) == Some(mode)
                            && a.get("cpu.logical_number") == labels.get("cpu")
                    })
                    .map(|p| p.2)
                    .collect()
            }
            "proctor_host_load1" | "proctor_host_memory_shmem_bytes" | "proctor_host_procs_running" => {
                let (otel, _) = proctor_remote::otlp::own_name(name);
                collector_points(&file, &otel).iter().filter(|p| p.1 == ms).map(|p| p.2).collect()
            }
            _ => continue,
        };
        assert_eq!(got, [*value], "{name}{labels:?} at {ms}");
        compared += 1;
    }
    assert!(compared >= 5, "{compared} series compared");

    terminate(&mut collector.0, "otelcol");
    std::thread::sleep(Duration::from_secs(20));
    assert!(agent.queue()["failed_total"]["network"].as_u64() >= Some(1), "{}", agent.queue());
    let _collector = start_collector(&bin, &col_dir, port);
    wait_until("caught up after the outage", Duration::from_secs(90), || {
        let q = agent.queue();
        q["backfilling"] == false && q["lag_secs"].as_f64().is_some_and(|l| l < 6.0)
    });
    let mut agent = agent;
    let last = agent.queue();
    assert!(terminate(&mut agent.child.0, "serve --otlp").success());
    let delivered = last["delivered_until_unix_ms"].as_u64().expect("delivered");
    let samples = stored_samples(&data, "load.avg1", delivered, 25);
    let newest = samples.last().and_then(|v| v["time_unix_ms"].as_u64()).expect("a sample");
    let mut load = BTreeMap::new();
    wait_until("the last delivered sample in the collector's file", Duration::from_secs(10), || {
        load = collector_points(&file, "proctor.host.load1").into_iter().map(|(_, t, v)| (t, v)).collect();
        load.contains_key(&newest)
    });
    assert_all_stored("the collector's file", &samples, "load.avg1", &load);
}

/// `--otlp https://…` goes through the one client's TLS: trusting the `--otlp-cacert` given,
/// delivered; without it (Mozilla's roots only), refused as unverified, counted, retried.
#[test]
fn otlp_over_tls_trusts_the_cacert_given_and_nothing_else() {
    let Ok(bin) = std::env::var("PROCTOR_OTELCOL") else {
        eprintln!("SKIP: OTLP over TLS: PROCTOR_OTELCOL is unset (scripts/test.d/69-fleet.sh builds and sets it)");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).expect("certificate");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).expect("cert");
    std::fs::write(&key, certified.signing_key.serialize_pem()).expect("key");
    let col_dir = dir.path().join("collector");
    std::fs::create_dir(&col_dir).expect("collector dir");
    let port = free_port();
    let tls = format!("        tls:\n          cert_file: {}\n          key_file: {}\n", cert.display(), key.display());
    let _collector = start_collector_with(&bin, &col_dir, port, &tls);
    let url = format!("https://127.0.0.1:{port}/v1/metrics");
    let serve = |name: &str, extra: &[&str]| {
        let data = dir.path().join(name);
        std::fs::create_dir(&data).expect("data dir");
        let mut child = proctor_command()
            .args(["serve", "--listen", "127.0.0.1:0", "--interval", "1s", "--pss-budget", "0", "--data-dir"])
            .arg(&data)
            .args(["--otlp", &url])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve");
        let mut stderr = StderrLines::take(&mut child);
        let addr = stderr.address();
        Agent { child: Guard(child), addr, _stderr: stderr }
    };
    let trusted = serve("trusted", &["--otlp-cacert", cert.to_str().expect("utf-8")]);
    let untrusted = serve("untrusted", &[]);
    wait_until("3 samples over TLS, and a refusal", Duration::from_secs(60), || {
        trusted.queue()["samples_sent_total"].as_u64() >= Some(3)
            && untrusted.queue()["failed_total"]["network"].as_u64() >= Some(1)
    });
    let q = untrusted.queue();
    assert_eq!(q["samples_sent_total"], 0, "{q}");
    let why = q["last_error"].as_str().unwrap_or("").to_ascii_lowercase();
    assert!(why.contains("certificate") || why.contains("issuer"), "{q}");
    wait_until("the collector wrote what came over TLS", Duration::from_secs(10), || {
        !collector_points(&col_dir.join("collector.jsonl"), "proctor.host.load1").is_empty()
    });
}
