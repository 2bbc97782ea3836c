//! `/api/v1/report` over real HTTP: a real agent whose data directory already holds an older
//! recorder run with synthetic processes of known CPU and memory use.

use std::path::Path;
use std::sync::Arc;

use proctor_model::ProcessSample;

use crate::harness::{now_ms, small_ring_server, write_host_run, Server};

const GIB: u64 = 1 << 30;

fn process(pid: u32, comm: &str, ticks: u64, rss: u64) -> ProcessSample {
    ProcessSample {
        pid,
        ppid: 1,
        start_ticks: 1_000 + u64::from(pid),
        comm: Arc::from(comm),
        state: 'R',
        utime_ticks: ticks,
        num_threads: 1,
        resident_bytes: Some(rss),
        cmdline: Some(Arc::from(vec![format!("/opt/{comm}"), "--synthetic".to_string()])),
        ..ProcessSample::default()
    }
}

/// Appends samples at the given wall times, one real host sample of this machine moved on by
/// 1 s of monotonic time per step (10 user and 30 idle ticks: busy 25 %), carrying three
/// synthetic processes: `burner` uses 50 ticks a second (0.5 CPU seconds per second of the
/// sample clock's 100 ticks), `hog` holds 1 GiB with one 5 GiB spike at the fifth sample,
/// `steady` holds 3 GiB and uses nothing.
fn write_run(dir: &Path, times_ms: &[u64]) {
    write_host_run(dir, times_ms, |i, sample| {
        sample.clock_ticks_per_sec = 100;
        let uptime = sample.host.uptime.as_mut().expect("/proc/uptime");
        uptime.up_secs += i as f64;
        sample.processes = vec![
            process(4_000_001, "burner", 50 * i, 64 << 20),
            process(4_000_002, "hog", 0, if i == 4 { 5 * GIB } else { GIB }),
            process(4_000_003, "steady", 0, 3 * GIB),
        ];
    });
}

fn server(record: Option<&Path>) -> Server {
    small_ring_server(record, 3)
}

fn names(list: &serde_json::Value) -> Vec<&str> {
    list.as_array().expect("list").iter().map(|p| p["name"].as_str().expect("name")).collect()
}

#[test]
fn report_ranks_the_process_that_used_the_cpu_first_with_its_cpu_seconds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let end = now_ms() - 120_000;
    let times: Vec<u64> = (0..20).map(|i| end - (19 - i) * 1000).collect();
    write_run(dir.path(), &times);
    let server = server(Some(dir.path()));
    let r = server.get(&format!("/api/v1/report?from={}&to={}", times[0], times[19]));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["available"], true, "{v}");
    assert_eq!(v["source"], "store");
    assert_eq!(
        (v["frames_in_range"].as_u64(), v["frames_read"].as_u64(), v["stride_frames"].as_u64()),
        (Some(20), Some(20), Some(1)),
        "{v}"
    );
    assert_eq!(v["samples"].as_u64(), Some(20));
    assert!(v["problems"].as_array().is_some_and(Vec::is_empty), "{v}");
    // 19 intervals of 50 ticks at 100 ticks a second.
    let top_cpu = &v["top_cpu"];
    assert_eq!(names(top_cpu), ["burner"], "only the burner used CPU inside the range: {top_cpu}");
    assert!((top_cpu[0]["cpu_seconds"].as_f64().expect("cpu") - 9.5).abs() < 1e-9, "{top_cpu}");
    assert_eq!(top_cpu[0]["pid"].as_u64(), Some(4_000_001));
    assert_eq!(top_cpu[0]["cmdline"], serde_json::json!(["/opt/burner", "--synthetic"]));
    // Peak and mean rank differently: the hog's one spike against the steady 3 GiB.
    assert_eq!(names(&v["top_rss_peak"]), ["hog", "steady", "burner"]);
    assert_eq!(v["top_rss_peak"][0]["rss_peak_bytes"].as_u64(), Some(5 * GIB));
    assert_eq!(names(&v["top_rss_mean"]), ["steady", "hog", "burner"]);
    let hog_mean = v["top_rss_mean"][1]["rss_mean_bytes"].as_f64().expect("mean");
    assert!((hog_mean - (19.0 * GIB as f64 + 5.0 * GIB as f64) / 20.0).abs() < 1.0, "{hog_mean}");
    // The headline: busy 25 % over every interval, memory as read.
    let busy = v["headline"]
        .as_array()
        .expect("headline")
        .iter()
        .find(|h| h["name"] == "host.cpu.busy_percent")
        .expect("host.cpu.busy_percent");
    assert!((busy["mean"].as_f64().expect("mean") - 25.0).abs() < 1e-9, "{busy}");
    assert_eq!(busy["count"].as_u64(), Some(19));
    assert!(v["note"].as_str().is_some_and(|n| n.starts_with("all 20 samples")), "{v}");
    // `top` cuts the lists; the answer counts the read.
    let one = server.get(&format!("/api/v1/report?from={}&to={}&top=1", times[0], times[19])).json();
    assert_eq!(names(&one["top_rss_peak"]), ["hog"]);
    let agent = server.get("/api/v1/agent").json();
    assert!(agent["http"]["report_store_requests_total"].as_u64() >= Some(2), "{agent}");
    assert!(agent["http"]["report_store_frames_decoded_total"].as_u64() >= Some(40), "{agent}");
}

#[test]
fn a_range_with_more_frames_than_the_budget_is_spread_by_frames_and_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let end = now_ms() - 600_000;
    let times: Vec<u64> = (0..400).map(|i| end - (399 - i) * 1000).collect();
    write_run(dir.path(), &times);
    let server = server(Some(dir.path()));
    // Fewer frames than the default budget: every one is read.
    let all = server.get(&format!("/api/v1/report?from={}&to={}", times[0], times[399])).json();
    assert_eq!((all["frames_read"].as_u64(), all["stride_frames"].as_u64()), (Some(400), Some(1)), "{all}");
    assert!(
        all["note"].as_str().is_some_and(|n| n == "all 400 samples in the range read from the agent's store"),
        "{all}"
    );
    // A budget of 100: one frame in every 4.
    let v = server.get(&format!("/api/v1/report?from={}&to={}&frames=100", times[0], times[399])).json();
    assert_eq!(v["frames_in_range"].as_u64(), Some(400), "{v}");
    assert_eq!((v["frames_read"].as_u64(), v["stride_frames"].as_u64()), (Some(100), Some(4)), "{v}");
    // CPU telescopes between the read frames: exact from the first read frame to the last,
    // which are at most one stride in from the range's ends.
    let cpu = v["top_cpu"][0]["cpu_seconds"].as_f64().expect("cpu");
    let whole = 0.5 * 399.0;
    assert!(cpu <= whole && cpu >= whole - 0.5 * 4.0, "cpu {cpu} against {whole} (stride 4 frames of 1 s)");
    assert_eq!(v["top_cpu"][0]["name"], "burner");
    let note = v["note"].as_str().expect("note");
    assert!(
        note.starts_with("100 of the 400 samples") && note.contains("one in every 4") && note.contains("missed"),
        "{note}"
    );
    assert!(!note.contains("could not be read"), "no frame was bad: {note}");
}

#[test]
fn without_a_store_the_report_says_so_and_is_no_error() {
    let off = server(None);
    let r = off.get("/api/v1/report?since=1h");
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["available"], false, "{v}");
    assert!(v["reason"].as_str().is_some_and(|r| r.contains("recording is off")), "{v}");
    assert!(v["top_cpu"].as_array().is_some_and(Vec::is_empty));
    // A directory that is not a store: still an answer, with the reason.
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = server(Some(dir.path()));
    drop(dir);
    let v = missing.get("/api/v1/report?since=1h").json();
    assert_eq!(v["available"], false, "{v}");
    assert!(v["reason"].as_str().is_some_and(|r| r.contains("cannot read the store")), "{v}");
}

#[test]
fn bad_report_queries_are_400_with_a_message() {
    let server = server(None);
    for (query, says) in [
        ("since=yesterday", "'since' must be a span"),
        ("from=5&to=1", "'from' is after 'to'"),
        ("since=1h&from=1", "not both"),
        ("top=0", "'top' must be between 1 and 50"),
        ("top=51", "'top' must be between 1 and 50"),
        ("top=many", "'top' must be a non-negative integer"),
        ("series=cpu", "unknown query parameter 'series'"),
        ("frames=0", "'frames' must be between 1 and 20000"),
    ] {
        let r = server.get(&format!("/api/v1/report?{query}"));
        assert_eq!(r.status, 400, "{query}: {}", r.body);
        let v = r.json();
        assert_eq!(v["error"]["code"], "bad_request");
        assert!(v["error"]["message"].as_str().is_some_and(|m| m.contains(says)), "{query}: {v}");
    }
}
