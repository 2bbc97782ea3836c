//! What a fleet imports and how it behaves, against the real parts (issue 37 items 4 and 5;
//! scripts/test.d/69-fleet.sh names them in PROCTOR_PROMETHEUS, PROCTOR_PROMTOOL and
//! PROCTOR_VICTORIA_METRICS, else a SKIP):
//! - every query of packaging/grafana's dashboard and packaging/prometheus's rules returns data
//!   from a real Prometheus fed by proctor (scraped and remote-written), the rules load healthy,
//!   and promtool checks and unit-tests them;
//! - three agents write into one Prometheus and one VictoriaMetrics; one is killed with -9 and
//!   restarted: every sample each agent stored is in both, at its time with its value.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::flood::body_json;
use super::remote_write::{
    assert_all_stored, free_port, raw, start_agent, start_prometheus, start_victoria, stored_samples, wait_until, Agent,
};
use super::{http_get, Guard};

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `text` percent-encoded for a query string.
pub(super) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A GET's JSON body, chunked or not (Prometheus chunks its larger answers).
pub(super) fn get_json(addr: &str, path: &str) -> serde_json::Value {
    let reply = http_get(addr, path);
    let (head, body) =
        reply.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no HTTP reply from {addr}{path}: {reply}"));
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        String::from_utf8_lossy(&proctor_client::http::dechunk(body.as_bytes()).0).into_owned()
    } else {
        body.to_string()
    };
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{addr}{path}: not JSON ({e}): {body}"))
}

/// An instant query's answer: `Err` with Prometheus's error, else the result's series.
fn query(prom: &str, expr: &str) -> Result<Vec<serde_json::Value>, String> {
    let v = get_json(prom, &format!("/api/v1/query?query={}", encode(expr)));
    if v["status"] != "success" {
        return Err(format!("{}: {}", v["errorType"], v["error"]));
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

/// Every query of the Grafana dashboard: (panel title, PromQL), panels inside rows included.
fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    fn walk(panels: &[serde_json::Value], out: &mut Vec<(String, String)>) {
        for p in panels {
            for t in p["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"].as_str().expect("a target's expr").to_string();
                out.push((p["title"].as_str().unwrap_or("?").to_string(), expr));
            }
            walk(p["panels"].as_array().map_or(&[], Vec::as_slice), out);
        }
    }
    let mut out = Vec::new();
    walk(dashboard["panels"].as_array().expect("panels"), &mut out);
    out
}

#[test]
fn every_grafana_panel_and_rule_returns_data_from_a_prometheus_fed_by_proctor() {
    let (Ok(prometheus), Ok(promtool)) = (std::env::var("PROCTOR_PROMETHEUS"), std::env::var("PROCTOR_PROMTOOL"))
    else {
        eprintln!("SKIP: the fleet's dashboard and rules: PROCTOR_PROMETHEUS or PROCTOR_PROMTOOL is unset (scripts/test.d/69-fleet.sh sets them)");
        return;
    };
    let rules = repo().join("packaging/prometheus/proctor-rules.yml");
    for args in [vec!["check", "rules"], vec!["test", "rules"]] {
        let file = if args[0] == "test" { rules.with_file_name("proctor-rules.test.yml") } else { rules.clone() };
        let out = Command::new(&promtool).args(&args).arg(&file).output().expect("promtool");
        assert!(
            out.status.success(),
            "promtool {} {}: {}{}",
            args.join(" "),
            file.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    let statsd_port = free_port();
    let prom_port = free_port();
    let prom = format!("127.0.0.1:{prom_port}");
    // The agent is remote-written from (instance fleet-rw) and scraped (instance its address).
    let agent = start_agent(
        &data,
        &format!("http://{prom}/api/v1/write"),
        "fleet-rw",
        &["--groups", "user", "--statsd", "--udp", &format!("127.0.0.1:{statsd_port}")],
    );
    let prom_dir = dir.path().join("prom");
    std::fs::create_dir(&prom_dir).expect("prom dir");
    std::fs::write(
        prom_dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n\
             scrape_configs:\n  - job_name: proctor\n    static_configs:\n      - targets: ['{}']\n",
            rules.display(),
            agent.addr
        ),
    )
    .expect("config");
    let child = Command::new(&prometheus)
        .arg(format!("--config.file={}", prom_dir.join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", prom_dir.join("tsdb").display()))
        .arg(format!("--web.listen-address={prom}"))
        .arg("--web.enable-remote-write-receiver")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(prom_dir.join("prometheus.log")).expect("log"))
        .spawn()
        .expect("start prometheus");
    let _prometheus = Guard(child);
    wait_until("prometheus ready", Duration::from_secs(30), || {
        std::net::TcpStream::connect(&prom).is_ok() && http_get(&prom, "/-/ready").starts_with("HTTP/1.1 200")
    });

    // Probe results recorded beside the agent's samples, for the probe latency panel: 10
    // requests a second to the agent's own API, for as long as the test runs (ended by pid).
    let mut probe = super::proctor_command()
        .args([
            "probe",
            &format!("http://{}/api/v1/agent", agent.addr),
            "--rate",
            "10/s",
            "--duration",
            "150s",
            "--data-dir",
        ])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start proctor probe --record");
    // statsd timers for the latency panel, until the test ends.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let _ = socket.send_to(format!("api.latency:{}|ms", 5 + n % 20).as_bytes(), ("127.0.0.1", statsd_port));
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("packaging/grafana/proctor-fleet.json")).expect("the dashboard"),
    )
    .expect("the dashboard is JSON");
    let queries: Vec<(String, String)> = dashboard_queries(&dashboard)
        .into_iter()
        .map(|(title, expr)| (title, expr.replace("$instance", ".+").replace("$__rate_interval", "20s")))
        .collect();
    assert!(queries.len() >= 20, "{} queries", queries.len());
    let pressure = Path::new("/proc/pressure/cpu").exists();
    let wanted: Vec<&(String, String)> = queries
        .iter()
        .filter(|(title, _)| {
            if title.starts_with("Pressure") && !pressure {
                eprintln!("SKIP: the dashboard's {title:?} panel: this kernel has no /proc/pressure, so it has no data to check");
                return false;
            }
            true
        })
        .collect();
    let rule_groups = || get_json(&prom, "/api/v1/rules")["data"]["groups"].clone();
    let records: Vec<String> = rule_groups()
        .as_array()
        .expect("rule groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter(|r| r["type"] == "recording")
        .map(|r| r["name"].as_str().expect("name").to_string())
        .collect();
    assert_eq!(records.len(), 4, "{records:?}");
    // Wait until every panel's query and every recorded series has data; say which lack it.
    let mut lacking = Vec::new();
    let ok = (0..360).any(|_| {
        lacking.clear();
        for (title, expr) in &wanted {
            match query(&prom, expr) {
                Ok(r) if !r.is_empty() => {}
                Ok(_) => lacking.push(format!("{title}: {expr}: no data")),
                Err(e) => lacking.push(format!("{title}: {expr}: {e}")),
            }
        }
        for name in &records {
            if query(&prom, name).map_or(true, |r| r.is_empty()) {
                lacking.push(format!("recording rule {name}: no data"));
            }
        }
        std::thread::sleep(Duration::from_millis(250));
        lacking.is_empty()
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    sender.join().expect("statsd sender");
    let _ = probe.kill();
    let _ = probe.wait();
    assert!(ok, "after 90 s, queries without data:\n{}", lacking.join("\n"));

    // Every rule loaded healthy and has been evaluated; every alert's expression parses.
    for g in rule_groups().as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            assert_eq!(r["health"], "ok", "{r}");
            if r["type"] == "alerting" {
                query(&prom, r["query"].as_str().expect("query")).unwrap_or_else(|e| panic!("{}: {e}", r["name"]));
            }
        }
    }
    // The dashboard's instance variable lists both ways the agent came in.
    let var = &dashboard["templating"]["list"][1];
    assert_eq!(var["name"], "instance");
    let values = get_json(&prom, "/api/v1/label/instance/values?match%5B%5D=proctor_host_load1");
    let values: Vec<&str> = values["data"].as_array().expect("values").iter().filter_map(|v| v.as_str()).collect();
    assert!(values.contains(&"fleet-rw") && values.contains(&agent.addr.as_str()), "{values:?}");
    agent.stop();
}

#[test]
fn three_agents_into_prometheus_and_victoria_metrics_one_killed_and_restarted_lose_nothing() {
    let (Ok(prometheus), Ok(victoria)) =
        (std::env::var("PROCTOR_PROMETHEUS"), std::env::var("PROCTOR_VICTORIA_METRICS"))
    else {
        eprintln!("SKIP: a fleet on one machine: PROCTOR_PROMETHEUS or PROCTOR_VICTORIA_METRICS is unset (scripts/test.d/69-fleet.sh sets them)");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let sub = |name: &str| {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).expect("dir");
        d
    };
    let (prom_port, vm_port) = (free_port(), free_port());
    let (prom, vm) = (format!("127.0.0.1:{prom_port}"), format!("127.0.0.1:{vm_port}"));
    let _prometheus = start_prometheus(&prometheus, &sub("prom"), prom_port);
    let _victoria = start_victoria(&victoria, &sub("vm"), vm_port);
    let vm_url = format!("http://{vm}/api/v1/write");
    let names = ["fleet-a", "fleet-b", "fleet-c"];
    let datas: Vec<_> = names.iter().map(|n| sub(n)).collect();
    let start = |i: usize| {
        start_agent(&datas[i], &format!("http://{prom}/api/v1/write"), names[i], &["--remote-write", &vm_url])
    };
    let mut agents: Vec<Option<Agent>> = (0..3).map(|i| Some(start(i))).collect();
    let delivered = |a: &Agent, q: usize| {
        body_json(&http_get(&a.addr, "/api/v1/agent"))["remote_write"][q]["samples_sent_total"].as_u64()
    };
    wait_until("every agent delivered 5 samples to both", Duration::from_secs(60), || {
        agents.iter().flatten().all(|a| delivered(a, 0) >= Some(5) && delivered(a, 1) >= Some(5))
    });
    // Queries per instance in both.
    for receiver in [&prom, &vm] {
        wait_until(&format!("three instances queryable in {receiver}"), Duration::from_secs(30), || {
            let result = query(receiver, "count by (instance) (proctor_host_load1)").expect("a query");
            let instances: Vec<&str> = result.iter().filter_map(|r| r["metric"]["instance"].as_str()).collect();
            names.iter().all(|n| instances.contains(n))
        });
    }

    // fleet-b is killed with -9 (whatever it had in flight is lost from memory, not from its
    // store), stays down 10 s, and starts again on the same data directory.
    let mut b = agents[1].take().expect("b");
    b.child.0.kill().expect("kill -9");
    let _ = b.child.0.wait();
    drop(b);
    std::thread::sleep(Duration::from_secs(10));
    agents[1] = Some(start(1));
    wait_until("fleet-b caught up with both receivers", Duration::from_secs(90), || {
        let v = body_json(&http_get(&agents[1].as_ref().expect("b").addr, "/api/v1/agent"));
        v["remote_write"].as_array().is_some_and(|qs| {
            qs.len() == 2
                && qs.iter().all(|q| {
                    q["backfilling"] == false
                        && q["samples_sent_total"].as_u64() > Some(0)
                        && q["lag_secs"].as_f64().is_some_and(|l| l < 6.0)
                })
        })
    });
    // And both took fleet-b's samples of at least 5 s past its restart, so that each agent has
    // ten or more to check (one had 9 once beside two busy loops: fleet-b caught up at its
    // fourth sample after the restart, and its count since then includes the backfill).
    let after =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis() as u64 + 5_000;
    wait_until("both receivers took fleet-b's samples 5 s past its catch-up", Duration::from_secs(60), || {
        let v = body_json(&http_get(&agents[1].as_ref().expect("b").addr, "/api/v1/agent"));
        v["remote_write"]
            .as_array()
            .is_some_and(|qs| qs.iter().all(|q| q["delivered_until_unix_ms"].as_u64() >= Some(after)))
    });
    // What both receivers took, per agent: the older of its two queues' deliveries.
    let mut upto = Vec::new();
    for a in agents.into_iter().flatten() {
        let qs = body_json(&http_get(&a.addr, "/api/v1/agent"))["remote_write"].clone();
        let qs = qs.as_array().expect("queues").clone();
        for q in &qs {
            assert_eq!(q["samples_dropped_total"], 0, "{q}");
        }
        upto.push(qs.iter().map(|q| q["delivered_until_unix_ms"].as_u64().expect("delivered")).min().expect("two"));
        a.stop();
    }
    // Every sample each agent stored, up to what both receivers took, is in both.
    for (i, n) in names.iter().enumerate() {
        let upto = upto[i];
        let stored = stored_samples(&datas[i], "load.avg1", upto, 10);
        let newest = stored.last().and_then(|v| v["time_unix_ms"].as_u64()).expect("a sample");
        for (receiver, what) in [(&prom, "prometheus"), (&vm, "victoria-metrics")] {
            let selector = format!("proctor_host_load1{{instance=\"{n}\"}}");
            let mut got: BTreeMap<u64, f64> = BTreeMap::new();
            wait_until(&format!("{n}'s last sample searchable in {what}"), Duration::from_secs(30), || {
                got = raw(receiver, &selector).into_iter().collect();
                got.contains_key(&newest)
            });
            assert_all_stored(&format!("{n} in {what}"), &stored, "load.avg1", &got);
        }
    }
}
