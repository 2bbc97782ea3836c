//! One language under every surface (issue 31), seen from the binary: one quantity grammar
//! (proctor-units) behind every place a person types a number — the same sizes, durations,
//! rates and times are taken by an alert rule, a flag and a filter, and the same mistakes are
//! refused (the values each form parses to are checked where they are parsed: proctor-units'
//! own tests, the alert lexer's and `--slow`'s) — and one bounded reader behind every secret
//! file.

use crate::proctor;

#[test]
fn an_alert_rule_takes_sizes_and_durations_as_a_flag_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rules.yml");
    let rules = [
        "process{name=\"x\"}.rss > 2G for 1h30m",
        "process{name=\"x\"}.rss > 2 GiB for 5 minutes",
        "process{name=\"x\"}.rss > 2GiB for 90s",
        "process{name=\"x\"}.rss > 1.5e9",
    ];
    let mut body = String::from("groups:\n  - name: g\n    rules:\n");
    for (i, expr) in rules.iter().enumerate() {
        body.push_str(&format!("      - alert: A{i}\n        expr: {expr}\n"));
    }
    std::fs::write(&path, body).expect("write rules");
    let out = proctor(&["alerts", "check", path.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok: 4 rules"), "{}", String::from_utf8_lossy(&out.stdout));

    std::fs::write(
        &path,
        "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: process{name=\"x\"}.rss > 2 parsecs\n",
    )
    .expect("write rules");
    let out = proctor(&["alerts", "check", path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn every_time_form_is_taken_where_a_time_is_typed() {
    for when in [
        "18:47:15",
        "18:47",
        "yesterday 14:00",
        "today 09:30",
        "2026-11-23T18:47",
        "10 min ago",
        "1700000000",
        "@1700000000",
    ] {
        let out = proctor(&["probe", "analyze", "/nonexistent/run.jsonl", "--from", when]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("not a time") && stderr.contains("/nonexistent/run.jsonl"), "{when}: {stderr}");
    }
    for (when, says) in [("yesterday", "give the time of day too"), ("90", "90s ago"), ("25:00", "not a time")] {
        let out = proctor(&["probe", "analyze", "/nonexistent/run.jsonl", "--from", when]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{when}: {stderr}");
        assert!(stderr.contains(says), "{when}: {stderr}");
    }
}

#[test]
fn rates_are_typed_alike_for_requests_and_keystrokes() {
    // Port 9 on loopback: nothing listens, so the one request fails fast; what matters is
    // that the flag was taken.
    for rate in ["50", "50/s", "3000/min"] {
        let out = proctor(&["probe", "http://127.0.0.1:9/", "-n", "1", "--rate", rate]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("invalid value"), "--rate {rate}: {stderr}");
    }
    for flag in ["--rate", "--key-rate"] {
        let out = proctor(&["probe", "ws://127.0.0.1:9/", "-n", "1", flag, "50/fortnight"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains("invalid value"), "{flag}: {stderr}");
    }
}

/// Every `--token-file` goes through the one bounded secret reader: a file that never ends is
/// refused at 64 KiB, before anything listens or connects, instead of being read until memory
/// runs out.
#[test]
fn every_token_file_is_read_bounded() {
    for args in [
        &["serve", "--no-record", "--listen", "127.0.0.1:0", "--token-file", "/dev/zero"][..],
        &["top", "--connect", "http://127.0.0.1:9/", "--token-file", "/dev/zero"],
        &["alerts", "status", "--url", "http://127.0.0.1:9/", "--token-file", "/dev/zero"],
        &["probe", "jupyter", "http://127.0.0.1:9/", "--token-file", "/dev/zero"],
    ] {
        let mut child = crate::proctor_command()
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run proctor");
        // Bounded: an unbounded reader would still be reading /dev/zero when this gives up.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{args:?}: still running after 60 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr).expect("stderr");
        assert!(!status.success(), "{args:?}: {stderr}");
        assert!(stderr.contains("over 64 KiB, not a token"), "{args:?}: {stderr}");
    }
}

/// One alias table (proctor_vocab::fields::ALIASES): a short name people type for a process
/// field is taken wherever a process field is named — a sort key, an alert rule — and so is the
/// field's own name.
#[test]
fn a_fields_alias_is_taken_wherever_a_process_field_is_named() {
    for key in ["mem", "rss", "rss_bytes", "time", "cpu_seconds_total"] {
        let out = proctor(&["snapshot", "--sort", key, "--top", "1", "--format", "json"]);
        assert!(out.status.success(), "--sort {key}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let out = proctor(&["snapshot", "--sort", "majestic"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rules.yml");
    std::fs::write(
        &path,
        "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: process.mem > 2G\n      - alert: B\n        expr: process.majflt > 10/s\n",
    )
    .expect("write rules");
    let out = proctor(&["alerts", "check", path.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
