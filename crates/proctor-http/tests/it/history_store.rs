//! `/api/v1/history` over the ring and the agent's own store: a real agent recording into a
//! real store that already holds older samples, over real HTTP.

use std::path::Path;

use proctor_store::Reader;

use crate::harness::{now_ms, small_ring_server, write_host_run, Server};

/// Appends samples with the given wall times as an older recorder run (busy 25 % after the first).
fn write_older(dir: &Path, times_ms: &[u64]) {
    write_host_run(dir, times_ms, |_, _| {});
}

fn server(record: Option<&Path>) -> Server {
    small_ring_server(record, 15)
}

fn times(v: &serde_json::Value) -> Vec<u64> {
    v["times_unix_ms"].as_array().expect("times").iter().map(|t| t.as_u64().expect("time")).collect()
}

#[test]
fn history_before_the_ring_comes_from_the_store_in_time_order_without_a_duplicate_at_the_seam() {
    let dir = tempfile::tempdir().expect("tempdir");
    let end = now_ms() - 120_000;
    let older: Vec<u64> = (0..20).map(|i| end - (19 - i) * 1000).collect();
    write_older(dir.path(), &older);
    let server = server(Some(dir.path()));
    let r = server.get("/api/v1/history?series=host.cpu.busy_percent,host.memory.used_bytes&since=1h");
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let t = times(&v);
    let (store, ring) = (
        v["store_points"].as_u64().expect("store_points") as usize,
        v["ring_points"].as_u64().expect("ring_points") as usize,
    );
    assert_eq!(store + ring, t.len());
    assert_eq!(ring, 10, "the whole ring: {v}");
    assert!(t.windows(2).all(|w| w[0] < w[1]), "strictly ascending, so no point twice: {t:?}");
    assert_eq!(&t[..20], &older[..], "the older run's samples come first, at their own times");
    // The store part is exactly what the store holds before the ring's oldest point: the older
    // run and the live samples that have left the ring.
    let ring_first = t[store];
    let mut reader = Reader::open(dir.path()).expect("reader");
    let stored: Vec<u64> = reader
        .all_frames()
        .expect("frames")
        .iter()
        .map(|f| f.unix_ns() / 1_000_000)
        .filter(|&ms| ms < ring_first && ms >= older[0])
        .collect();
    assert_eq!(&t[..store], &stored[..]);
    assert!(store > 20, "live samples older than the ring are read back too: {store}");
    let report = &v["store"];
    // Read a little past the seam (the ring moves during the read), then cut at the ring.
    assert!(report["frames_in_range"].as_u64() >= Some(store as u64), "{report}");
    assert_eq!(report["bad_frames"].as_u64(), Some(0));
    assert!(report["problems"].as_array().is_some_and(Vec::is_empty), "{report}");
    // Rates from the stored sample before each one; the older run's first has none.
    let busy = v["series"][0]["values"].as_array().expect("values");
    assert!(busy[0].is_null(), "no earlier sample of that run: {busy:?}");
    assert!(busy[1..20].iter().all(|b| b.as_f64().is_some_and(|b| (b - 25.0).abs() < 1e-9)), "{busy:?}");
    let memory = v["series"][1]["values"].as_array().expect("values");
    assert!(memory[..store].iter().all(|m| m.as_f64().is_some_and(|m| m > 0.0)));

    // max_points is shared between the parts; both stay.
    let thin = server.get("/api/v1/history?series=host.cpu.busy_percent&since=1h&max_points=6").json();
    let tt = times(&thin);
    assert!(
        tt.len() <= 6 && thin["store_points"].as_u64() >= Some(1) && thin["ring_points"].as_u64() >= Some(1),
        "{thin}"
    );
    assert!(tt.windows(2).all(|w| w[0] < w[1]));
    // A repeated request is answered from the cache of decoded points.
    let again = server.get("/api/v1/history?series=host.cpu.busy_percent&since=1h&max_points=6").json();
    assert!(again["store"]["points_cached"].as_u64() >= Some(1), "{again}");
    let agent = server.get("/api/v1/agent").json();
    assert!(agent["http"]["history_store_requests_total"].as_u64() >= Some(3));
    assert!(agent["http"]["history_store_frames_decoded_total"].as_u64() >= Some(store as u64));
}

#[test]
fn without_a_store_history_is_the_ring_alone_and_no_error() {
    let server = server(None);
    let r = server.get("/api/v1/history?series=host.cpu.busy_percent&from=0");
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert!(v["store"].is_null(), "{v}");
    assert_eq!(v["store_points"].as_u64(), Some(0));
    assert_eq!(v["ring_points"].as_u64(), Some(times(&v).len() as u64));
    assert_eq!(times(&v).len(), 10);
}

#[test]
fn a_corrupt_store_segment_still_answers_and_reports_the_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let end = now_ms() - 600_000;
    let first: Vec<u64> = (0..20).map(|i| end - 100_000 + i * 1000).collect();
    let second: Vec<u64> = (0..10).map(|i| end + i * 1000).collect();
    write_older(dir.path(), &first);
    write_older(dir.path(), &second);
    let mut segments: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segments.sort();
    // Flip bytes in the middle of the older segment (a frame's payload: its CRC fails).
    let older = &segments[0];
    let mut bytes = std::fs::read(older).expect("read segment");
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 8] {
        *b ^= 0xff;
    }
    std::fs::write(older, &bytes).expect("write segment");
    let server = server(Some(dir.path()));
    let r = server.get(&format!("/api/v1/history?series=host.memory.used_bytes&from={}&to={}", first[0], second[9]));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let report = &v["store"];
    assert!(
        report["bad_frames"].as_u64().unwrap_or(0) + report["damaged_segments"].as_u64().unwrap_or(0) >= 1,
        "{report}"
    );
    let problems = report["problems"].as_array().expect("problems");
    assert!(problems.iter().any(|p| p.as_str().is_some_and(|p| p.contains(older.to_str().expect("utf8")))), "{report}");
    let t = times(&v);
    assert!(t.windows(2).all(|w| w[0] < w[1]));
    assert!(second.iter().all(|s| t.contains(s)), "the intact segment is all there: {t:?}");
    assert!(t.len() < 30, "the damaged frames are left out: {t:?}");
    assert_eq!(v["ring_points"].as_u64(), Some(0), "the range ends before the ring");
}
