//! One vocabulary, one reader: the CLI and `proctor serve` answer the same question with the
//! same document. `proctor snapshot --format json` is `GET /api/v1/snapshot`'s shape, and
//! `proctor report --format json` and `GET /api/v1/report` over one stored range give the same
//! top processes and headline figures, whether every frame is read or a budget thins them.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use proctor_store::Reader;
use serde_json::Value;

use super::serve_record::serve;
use super::{http_get, json, Guard};

fn get_json(addr: &str, path: &str) -> Value {
    let reply = http_get(addr, path);
    let body = reply.split_once("\r\n\r\n").map(|(_, body)| body).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {reply}"))
}

/// Objects whose keys are data (state letters, reader names), not fields.
const MAPS: [&str; 4] =
    [".processes.states", ".agent.errors_total", ".agent.last_sample.errors", ".agent.last_sample.reader_wall_seconds"];

/// Walks two documents together: every object has the same keys at every depth (a list's first
/// elements are compared when both have one). Where one side is `null` and the other is not, the
/// path goes into `nulls` instead.
fn same_keys(path: &str, a: &Value, b: &Value, nulls: &mut BTreeSet<String>) {
    match (a, b) {
        (Value::Object(_), Value::Object(_)) if MAPS.contains(&path) => {}
        (Value::Object(x), Value::Object(y)) => {
            let kx: BTreeSet<&String> = x.keys().collect();
            let ky: BTreeSet<&String> = y.keys().collect();
            assert_eq!(kx, ky, "different keys at {path:?}");
            for key in kx {
                same_keys(&format!("{path}.{key}"), &x[key], &y[key], nulls);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if let (Some(x), Some(y)) = (x.first(), y.first()) {
                same_keys(&format!("{path}[0]"), x, y, nulls);
            }
        }
        (Value::Null, Value::Null) => {}
        (Value::Null, _) | (_, Value::Null) => {
            nulls.insert(path.to_string());
        }
        (x, y) => assert_eq!(
            std::mem::discriminant(x),
            std::mem::discriminant(y),
            "different kinds of value at {path:?}: {x} vs {y}"
        ),
    }
}

#[test]
fn snapshot_json_is_the_api_snapshot_document() {
    let home = tempfile::tempdir().expect("tempdir");
    let served = serve(home.path(), None, &["--no-record"], |_| {});
    // Two samples, so the API's host CPU shares exist as the CLI's do.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while get_json(&served.addr, "/api/v1/agent")["samples_total"].as_u64() < Some(3) {
        assert!(std::time::Instant::now() < deadline, "serve took no samples");
        std::thread::sleep(Duration::from_millis(50));
    }
    let api = get_json(&served.addr, "/api/v1/snapshot?top=3");
    let cli = json(
        &super::proctor_command()
            .args(["snapshot", "--interval", "200ms", "--top", "3", "--format", "json"])
            .output()
            .expect("run snapshot"),
    );
    let mut nulls = BTreeSet::new();
    same_keys("", &api, &cli, &mut nulls);
    // The one difference by design: the CLI runs no HTTP server. (A process whose command line
    // was not read yet, or a worker that is off, may also be null on one side only; so may the
    // stall ledger's figures, which wait for a read: of the process, or in the last interval;
    // and the start coverage, which waits for a process to start: none may in 200 ms.)
    assert!(nulls.contains(".agent.http"), "{nulls:?}");
    let waits_for_a_read = |p: &str| {
        [
            ".cmdline",
            "_worker",
            ".stall_by_proctor_seconds_total",
            ".stall_by_proctor_max_seconds",
            ".target_lock_worst_pid",
            "coverage_percent",
        ]
        .iter()
        .any(|end| p.ends_with(end))
    };
    let unexpected: Vec<&String> = nulls.iter().filter(|p| *p != ".agent.http" && !waits_for_a_read(p)).collect();
    assert!(unexpected.is_empty(), "null on one side only: {unexpected:?}");
    assert_eq!(api["processes"]["top"].as_array().map(Vec::len), Some(3));
    assert_eq!(cli["processes"]["top"].as_array().map(Vec::len), Some(3));
    assert_eq!(api["processes"]["sort"], cli["processes"]["sort"]);
    served.stop();
}

/// A Unix-ms time halfway between two stored frames, so a bound written in ms (HTTP) and one
/// written as decimal seconds (`--from @S.mmm`, parsed as a float) pick the same frames.
fn between(a_ns: u64, b_ns: u64) -> u64 {
    (a_ns / 2 + b_ns / 2) / 1_000_000
}

#[test]
fn report_json_and_the_api_report_agree_on_the_same_range() {
    let data = tempfile::tempdir().expect("tempdir");
    // A recording with a CPU burner in it, so the top lists have something to rank.
    let burner =
        Guard(Command::new("sh").args(["-c", "while :; do :; done"]).stdout(Stdio::null()).spawn().expect("burner"));
    let recorded = super::proctor_command()
        .args(["record", "--interval", "100ms", "--count", "60", "--dir"])
        .arg(data.path())
        .output()
        .expect("record");
    assert!(recorded.status.success(), "{}", String::from_utf8_lossy(&recorded.stderr));
    drop(burner);
    let mut reader = Reader::open(data.path()).expect("store");
    let frames = reader.all_frames().expect("frames");
    assert_eq!(frames.len(), 60);
    let (from_ms, to_ms) =
        (between(frames[1].unix_ns(), frames[2].unix_ns()), between(frames[57].unix_ns(), frames[58].unix_ns()));

    // serve reads the same directory (it records on into it, after the range).
    let home = tempfile::tempdir().expect("tempdir");
    let dir = data.path().to_str().expect("utf-8");
    let served = serve(home.path(), None, &["--data-dir", dir], |_| {});
    // 56 frames in the range: every one read, then a budget of 20 (one in every 3).
    for (frames_budget, stride) in [(1000u64, 1u64), (20, 3)] {
        let api =
            get_json(&served.addr, &format!("/api/v1/report?from={from_ms}&to={to_ms}&top=5&frames={frames_budget}"));
        let cli = json(
            &super::proctor_command()
                .args(["report", "--dir", dir, "--format", "json", "--top", "5"])
                .args(["--from", &format!("@{}.{:03}", from_ms / 1000, from_ms % 1000)])
                .args(["--to", &format!("@{}.{:03}", to_ms / 1000, to_ms % 1000)])
                .args(["--frames", &frames_budget.to_string()])
                .output()
                .expect("report"),
        );
        assert_eq!(api["frames_in_range"].as_u64(), Some(56), "{api}");
        assert_eq!(api["stride_frames"].as_u64(), Some(stride), "{api}");
        for key in ["frames_in_range", "frames_read", "stride_frames", "samples", "runs", "processes_seen"] {
            assert_eq!(api[key], cli[key], "{key} with a budget of {frames_budget}");
        }
        for key in ["headline", "top_cpu", "top_rss_peak", "top_rss_mean"] {
            assert_eq!(api[key], cli[key], "{key} with a budget of {frames_budget}");
        }
        assert!(api["headline"].as_array().is_some_and(|h| h.len() > 5), "{api}");
        let top =
            api["top_cpu"][0]["cmdline"].as_array().map(|c| c.iter().filter_map(Value::as_str).collect::<Vec<_>>());
        assert!(
            api["top_cpu"].as_array().is_some_and(|t| t.iter().any(|p| p["name"] == "sh")),
            "the burner is among the top CPU users: {top:?} {}",
            api["top_cpu"]
        );
    }
    served.stop();
}
