//! OTLP/HTTP end to end against the real parts (issue 37 item 1), built by
//! scripts/test.d/69-fleet.sh from their published Go modules and named in PROCTOR_PROMETHEUS3
//! and PROCTOR_OTELCOL (else a SKIP): Prometheus 3.5 itself, started with
//! `--web.enable-otlp-receiver` (crates/proctor-remote/tests/prometheus3), and the OpenTelemetry
//! Collector's OTLP receiver with its file exporter (crates/proctor-remote/tests/otelcol). What
//! each stores for a sample equals what `/metrics` showed for it, under the conventions' names or
//! `/metrics`' own; a 20 s outage of either leaves no stored sample missing. The headers, the
//! bearer token and the body are checked on a loopback receiver; TLS against the Collector.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::bounded::terminate;
use super::fleet::{encode, get_json};
use super::remote_write::{
    assert_all_stored, free_port, raw, receiver, start_prometheus_taking, start_serve, stored_samples, wait_until,
    Agent,
};
use super::{http_get, Guard};

/// Prometheus 3 on loopback with its OTLP receiver on, its TSDB in `dir` (a restart keeps it).
fn start_prometheus3(bin: &str, dir: &Path, port: u16) -> Guard {
    start_prometheus_taking(bin, dir, port, "--web.enable-otlp-receiver")
}

/// Series Prometheus holds: labels (with `__name__`) → (ms → value).
type Stored = BTreeMap<BTreeMap<String, String>, BTreeMap<u64, f64>>;

/// Every series with a sample in the 3 s up to `ms`, with those samples.
fn stored(addr: &str, ms: u64) -> Stored {
    let query = encode("{__name__=~\".+\"}[3s]");
    let v = get_json(addr, &format!("/api/v1/query?query={query}&time={}.{:03}", ms / 1000, ms % 1000));
    assert_eq!(v["status"], "success", "{v}");
    let mut out = Stored::new();
    for s in v["data"]["result"].as_array().expect("result") {
        let labels = s["metric"]
            .as_object()
            .expect("labels")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().expect("label value").to_string()))
            .collect();
        let points = s["values"]
            .as_array()
            .expect("values")
            .iter()
            .map(|p| {
                let t = (p[0].as_f64().expect("time") * 1000.0).round() as u64;
                (t, p[1].as_str().expect("value").parse::<f64>().expect("a number"))
            })
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

/// An agent sending OTLP to `url` as the tests here want: an instance and a site, a header and
/// a bearer token.
fn start_otlp_agent(data: &Path, url: &str, token: &Path) -> Agent {
    let token = token.to_str().expect("utf-8");
    start_serve(
        data,
        &[
            "--otlp",
            url,
            "--external-label",
            "instance=otlp-test",
            "--external-label",
            "site=lab",
            "--otlp-header",
            "X-Proctor-Test: yes",
            "--otlp-bearer-token-file",
            token,
        ],
    )
}

/// The receiver goes away for 20 s (the queue fails, counts and keeps its batch) and comes back
/// (`restart`); once the agent has caught up it is stopped. Returns the receiver and the
/// queue's last status. (SIGTERM ends a Go program with a signal's status, as wanted here.)
fn ride_out_an_outage(
    mut agent: Agent,
    mut receiver: Guard,
    what: &str,
    restart: impl FnOnce() -> Guard,
) -> (Guard, serde_json::Value) {
    terminate(&mut receiver.0, what);
    std::thread::sleep(Duration::from_secs(20));
    let q = agent.queue();
    assert!(q["failed_total"]["network"].as_u64() >= Some(1), "{q}");
    assert!(q["lag_secs"].as_f64() > Some(10.0), "{q}");
    let receiver = restart();
    wait_until("caught up after the outage", Duration::from_secs(90), || {
        let q = agent.queue();
        q["backfilling"] == false && q["lag_secs"].as_f64().is_some_and(|l| l < 6.0)
    });
    let last = agent.queue();
    assert!(terminate(&mut agent.child.0, "serve --otlp").success());
    (receiver, last)
}

#[test]
fn prometheus_3_stores_what_metrics_showed_and_every_stored_sample_after_an_outage() {
    let Ok(bin) = std::env::var("PROCTOR_PROMETHEUS3") else {
        eprintln!("SKIP: OTLP into Prometheus 3: PROCTOR_PROMETHEUS3 is unset (scripts/test.d/69-fleet.sh builds and sets it)");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (prom_dir, data): (PathBuf, PathBuf) = (dir.path().join("prom"), dir.path().join("data"));
    std::fs::create_dir(&prom_dir).expect("prom dir");
    std::fs::create_dir(&data).expect("data dir");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").expect("token");
    let port = free_port();
    let prom = format!("127.0.0.1:{port}");
    let prometheus = start_prometheus3(&bin, &prom_dir, port);
    let url = format!("http://{prom}/api/v1/otlp/v1/metrics");
    let agent = start_otlp_agent(&data, &url, &token);
    wait_until("5 samples delivered", Duration::from_secs(60), || {
        agent.queue()["samples_sent_total"].as_u64() >= Some(5)
    });
    let q = agent.queue();
    assert_eq!((q["protocol"].as_str(), q["url"].as_str()), (Some("otlp"), Some(url.as_str())), "{q}");

    // What /metrics shows for one sample is what Prometheus stored for it.
    let (scraped, ms) = scrape(&agent.addr);
    wait_until("the scraped sample in prometheus", Duration::from_secs(30), || {
        at(&stored(&prom, ms), "proctor_host_load1", &[], ms).is_some()
    });
    let got = stored(&prom, ms);
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
    // job and instance from service.name and service.instance.id, every point; the rest of the
    // resource in target_info.
    let load1 = got.keys().find(|l| l["__name__"] == "proctor_host_load1").expect("load1");
    assert_eq!((load1["job"].as_str(), load1["instance"].as_str()), ("proctor", "otlp-test"), "{load1:?}");
    let v = get_json(&prom, &format!("/api/v1/query?query={}", encode("last_over_time(target_info[10m])")));
    let info = &v["data"]["result"][0]["metric"];
    assert_eq!(
        (info["job"].as_str(), info["site"].as_str(), info["os_type"].as_str()),
        (Some("proctor"), Some("lab"), Some("linux")),
        "{v}"
    );
    assert!(info["host_name"].is_string(), "{v}");
    // A process series, its identity on the point.
    assert!(
        got.keys().any(|l| l["__name__"] == "process_cpu_time_seconds_total"
            && l.contains_key("process_pid")
            && l.contains_key("process_executable_name")),
        "process_cpu_time_seconds_total with process_pid"
    );

    // Prometheus goes away for 20 s: the queue fails, counts, keeps the batch, and backfills.
    let (prometheus, last) =
        ride_out_an_outage(agent, prometheus, "prometheus 3", || start_prometheus3(&bin, &prom_dir, port));
    let delivered = last["delivered_until_unix_ms"].as_u64().expect("delivered");
    assert_eq!(last["samples_dropped_total"], 0, "{last}");
    assert_eq!(last["points_rejected_total"], 0, "{last}");

    // Every stored sample up to the last delivered one is in Prometheus at its time with its
    // value: the load average under its own name.
    let samples = stored_samples(&data, "load.avg1", delivered, 25);
    let load: BTreeMap<u64, f64> = raw(&prom, "proctor_host_load1{instance=\"otlp-test\"}").into_iter().collect();
    assert_all_stored("prometheus 3", &samples, "load.avg1", &load);
    drop(prometheus);
}

/// What goes on the wire, on a loopback receiver: gzip protobuf that decodes, the content type,
/// the header and the bearer token given, the resource, cumulative sums.
#[test]
fn an_otlp_request_carries_gzip_protobuf_the_headers_and_the_token() {
    let (url, seen) = receiver(&[]);
    let url = url.replace("/api/v1/write", "/v1/metrics");
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, token) = (dir.path().join("data"), dir.path().join("token"));
    std::fs::create_dir(&data).expect("data dir");
    std::fs::write(&token, "s3cret\n").expect("token");
    let agent = start_otlp_agent(&data, &url, &token);
    wait_until("a request", Duration::from_secs(30), || !seen.lock().expect("lock").is_empty());
    drop(agent);
    let (head, body) = seen.lock().expect("lock")[0].clone();
    let head = format!("{}\r", head.to_ascii_lowercase());
    assert!(head.starts_with("post /v1/metrics http/1.1\r"), "{head}");
    for h in [
        "content-type: application/x-protobuf\r",
        "content-encoding: gzip\r",
        "authorization: bearer s3cret\r",
        "x-proctor-test: yes\r",
    ] {
        assert!(head.contains(h), "{h:?} missing in {head}");
    }
    let request = proctor_remote::otlp::decode(&body).expect("gzip protobuf ExportMetricsServiceRequest");
    let rm = &request.resource_metrics[0];
    let resource: BTreeMap<String, String> = rm
        .resource
        .as_ref()
        .expect("a resource")
        .attributes
        .iter()
        .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
            proctor_remote::otlp::proto::any_value::Value::StringValue(s) => Some((kv.key.clone(), s.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(resource.get("service.name").map(String::as_str), Some("proctor"), "{resource:?}");
    assert_eq!(resource.get("service.instance.id").map(String::as_str), Some("otlp-test"), "{resource:?}");
    assert_eq!(resource.get("site").map(String::as_str), Some("lab"), "{resource:?}");
    let cpu = rm.scope_metrics[0].metrics.iter().find(|m| m.name == "system.cpu.time").expect("system.cpu.time");
    let Some(proctor_remote::otlp::proto::metric::Data::Sum(sum)) = &cpu.data else { panic!("a sum: {cpu:?}") };
    assert!(sum.is_monotonic && sum.aggregation_temporality == proctor_remote::otlp::proto::CUMULATIVE);
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
    let collector = start_collector(&bin, &col_dir, port);
    let file = col_dir.join("collector.jsonl");
    let agent = start_otlp_agent(&data, &format!("http://127.0.0.1:{port}"), &token);
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

    let (_collector, last) = ride_out_an_outage(agent, collector, "otelcol", || start_collector(&bin, &col_dir, port));
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
        let mut args = vec!["--otlp", url.as_str()];
        args.extend(extra);
        start_serve(&data, &args)
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
