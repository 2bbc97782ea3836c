//! The series catalog (issue 31, `proctor_units::series`) from the binary: every series answers
//! under its one name wherever its row says it does — an alert rule takes it, `dump host` has its
//! column, the history API serves it and `/metrics` has the samples it is made from — and its
//! earlier names still answer. (That `report` and the rollup tiers keep every stored series is
//! held where they are made: proctor-report's and proctor-agent's own tests.)

use std::time::{Duration, Instant};

use proctor_vocab::series::CATALOG;

use crate::{http_get, proctor};

fn body(reply: &str) -> &str {
    reply.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default()
}

#[test]
fn every_series_answers_by_its_name_and_its_earlier_names_on_every_surface_it_names() {
    // Alert rules: one per series (a host series outside the host shape too, read from the
    // model's host series), and one per earlier name of it that had its scope (`cpu.busy`, a
    // report's name, never named a rule).
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rules.yml");
    let mut rules = String::from("groups:\n  - name: g\n    rules:\n");
    let mut count = 0;
    for s in CATALOG {
        let scope = s.name.split('.').next().unwrap_or_default();
        let scoped = s.aliases.iter().filter(|a| a.split('.').next() == Some(scope));
        for name in std::iter::once(&s.name).chain(scoped) {
            rules.push_str(&format!("      - alert: A{count}\n        expr: {name} >= 0\n"));
            count += 1;
        }
    }
    std::fs::write(&path, rules).expect("write rules");
    let out = proctor(&["alerts", "check", path.to_str().expect("utf-8")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("ok: {count} rules")), "{stdout}");

    // `dump host`'s columns: every host series.
    let out = proctor(&["dump", "host", "--fields", "list"]);
    let columns = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for s in CATALOG {
        if let Some(field) = s.name.strip_prefix("host.") {
            assert!(columns.lines().any(|l| l.split_whitespace().next() == Some(field)), "dump host lacks {field}");
        }
    }

    // A running agent: the history API and /metrics.
    let home = tempfile::tempdir().expect("tempdir");
    let served = crate::serve_record::serve(home.path(), None, &["--no-record"], |_| {});
    let deadline = Instant::now() + Duration::from_secs(20);
    let listed: Vec<String> = loop {
        let v: serde_json::Value =
            serde_json::from_str(body(&http_get(&served.addr, "/api/v1/history/series"))).expect("JSON");
        let names: Vec<String> =
            v["series"].as_array().into_iter().flatten().filter_map(|n| n.as_str().map(String::from)).collect();
        if !names.is_empty() || Instant::now() > deadline {
            break names;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for s in CATALOG.iter().filter(|s| s.live) {
        assert!(listed.iter().any(|n| n == s.name), "/api/v1/history/series lacks {}: {listed:?}", s.name);
        let scoped = s.aliases.iter().filter(|a| ["host.", "container.", "agent."].iter().any(|p| a.starts_with(p)));
        for name in std::iter::once(&s.name).chain(scoped) {
            let reply = http_get(&served.addr, &format!("/api/v1/history?series={name}&since=1h"));
            assert!(reply.starts_with("HTTP/1.1 200"), "{name}: {reply}");
            let v: serde_json::Value = serde_json::from_str(body(&reply)).expect("JSON");
            assert_eq!(v["series"][0]["name"], *name, "answered under the name asked");
        }
    }
    // The catalog is the whole list of totals: what else the ring lists is per CPU or device.
    for n in &listed {
        let per_device = n.starts_with("host.cpu") && n.ends_with(".busy_percent") && n != "host.cpu.busy_percent"
            || n.starts_with("host.disk.") && n.matches('.').count() == 3
            || n.starts_with("host.net.") && n.matches('.').count() == 3;
        assert!(per_device || CATALOG.iter().any(|s| s.name == n), "{n} is listed but not in the catalog");
    }

    let metrics = http_get(&served.addr, "/metrics");
    for s in CATALOG {
        for sample in s.prometheus {
            let (metric, labels) = sample.split_once('{').unwrap_or((sample, ""));
            let labels: Vec<&str> = labels.trim_end_matches('}').split(',').filter(|l| !l.is_empty()).collect();
            let found = metrics.lines().any(|l| {
                l.strip_prefix(metric).is_some_and(|rest| rest.starts_with([' ', '{']))
                    && labels.iter().all(|want| l.contains(want))
            });
            // Pressure needs a kernel with PSI, the container's figures a cgroup it can read.
            let optional = metric.contains("pressure") || metric.starts_with("proctor_container_");
            assert!(found || optional, "/metrics lacks {sample} (for {})", s.name);
        }
    }
    served.stop();
}
