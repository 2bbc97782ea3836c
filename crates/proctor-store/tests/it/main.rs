//! proctor-store integration tests: round trips, repair, set-aside, retention, locking, and
//! reading the committed store of an older build (`tests/data/v1-store`); `hostile` has the
//! attacks of issue 15.

mod hostile;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proctor_model::{HostSample, ProcessSample, Sample, SampleCost};
use proctor_procfs::host::{CpuTicks, Stat};
use proctor_store::codec::{RECORD_VERSION, RECORD_VERSION_2};
use proctor_store::{Reader, StoreConfig, StoreError, Writer};

const SECOND: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * SECOND;

/// A deterministic sample: `processes` processes whose CPU counters grow with `seq`.
fn sample(seq: u64, processes: u32) -> Sample {
    let mut reader_wall_ns = BTreeMap::new();
    reader_wall_ns.insert("host", 1000 + seq);
    let mut errors = BTreeMap::new();
    errors.insert(("process.io", "permission"), seq);
    Sample {
        seq,
        unix_ns: T0 + seq * SECOND,
        mono_ns: 5 * SECOND + seq * SECOND,
        clock_ticks_per_sec: 100,
        page_size: 4096,
        host: HostSample {
            stat: Some(Stat {
                total: CpuTicks { user: 100 * seq, system: 20 * seq, idle: 500 * seq, ..CpuTicks::default() },
                ..Stat::default()
            }),
            ..HostSample::default()
        },
        container: None,
        processes: (1..=processes)
            .map(|pid| ProcessSample {
                pid,
                ppid: pid / 2,
                start_ticks: u64::from(pid) * 7,
                comm: Arc::from(format!("proc-{pid}")),
                state: 'S',
                utime_ticks: u64::from(pid % 5) * seq,
                stime_ticks: seq,
                num_threads: 1,
                minflt: 10 * seq,
                vsize_bytes: 1 << 20,
                resident_bytes: Some(4096 * u64::from(pid)),
                cmdline: Some(Arc::from(vec![format!("/usr/bin/proc-{pid}"), "--flag".to_string()])),
                cgroup: Some(Arc::from("/system.slice/x.service")),
                ..ProcessSample::default()
            })
            .collect(),
        cost: SampleCost { cpu_ns: seq, wall_ns: 2 * seq, reader_wall_ns, errors, ..SampleCost::default() },
        groups: None,
        gpu: None,
        exited: Vec::new(),
    }
}

fn json(sample: &Sample) -> serde_json::Value {
    serde_json::to_value(sample).expect("serializes")
}

fn small_config() -> StoreConfig {
    StoreConfig { chunk_frames: 4, ..StoreConfig::default() }
}

fn write(dir: &Path, config: StoreConfig, seqs: std::ops::Range<u64>) {
    let (mut writer, _) = Writer::open(dir, config).expect("open");
    for seq in seqs {
        writer.append(&sample(seq, 20)).expect("append");
    }
}

fn read_all(dir: &Path) -> Vec<Sample> {
    let mut reader = Reader::open(dir).expect("open reader");
    let frames = reader.all_frames().expect("frames");
    frames.iter().filter_map(|f| reader.read(f)).collect()
}

fn seqs(samples: &[Sample]) -> Vec<u64> {
    samples.iter().map(|s| s.seq).collect()
}

fn segments(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn samples_round_trip_through_key_and_delta_frames() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), small_config(), 0..10);
    let back = read_all(dir.path());
    assert_eq!(seqs(&back), (0..10).collect::<Vec<_>>());
    for (seq, got) in back.iter().enumerate() {
        assert_eq!(json(got), json(&sample(seq as u64, 20)), "sample {seq}");
    }
    // The cost's static names survive the trip.
    assert_eq!(back[3].cost.errors.get(&("process.io", "permission")), Some(&3));
}

/// A lean read keeps the clocks, the host part and each process's `stat` fields and command
/// line exactly, and builds none of what a range summary does not read.
#[test]
fn lean_reads_keep_stat_fields_and_command_lines_and_leave_the_rest_out() {
    let full = |seq: u64| {
        let mut s = sample(seq, 20);
        for p in &mut s.processes {
            p.status = Some(proctor_model::StatusReading { rss_anon_bytes: Some(4096 * seq), ..Default::default() });
        }
        s
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut writer, _) = Writer::open(dir.path(), small_config()).expect("open");
    for seq in 0..10 {
        writer.append(&full(seq)).expect("append");
    }
    drop(writer);
    let mut reader = Reader::open(dir.path()).expect("open reader");
    let frames = reader.all_frames().expect("frames");
    assert_eq!(frames.len(), 10);
    for (seq, frame) in frames.iter().enumerate() {
        let lean = reader.read_lean(frame).expect("lean read");
        let mut expected = full(seq as u64);
        for p in &mut expected.processes {
            p.status = None;
            p.cgroup = None;
        }
        expected.cost = SampleCost::default();
        assert_eq!(json(&lean), json(&expected), "sample {seq}");
        // The full read of the same frame still has everything.
        assert_eq!(json(&reader.read(frame).expect("read")), json(&full(seq as u64)), "sample {seq}");
        // A host read: the clocks and host part alone.
        let host = reader.read_host(frame).expect("host read");
        expected.processes.clear();
        assert_eq!(json(&host), json(&expected), "sample {seq}");
    }
    assert!(reader.report().bad_frames.is_empty());
    // And the committed version-1 store reads lean too.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1-store");
    let mut reader = Reader::open(&dir).expect("open v1");
    let frames = reader.all_frames().expect("frames");
    let lean: Vec<Sample> = frames.iter().filter_map(|f| reader.read_lean(f)).collect();
    assert_eq!(seqs(&lean), (0..6).collect::<Vec<_>>());
    assert!(lean
        .iter()
        .all(|s| s.processes.len() == 20 && s.processes.iter().all(|p| p.cmdline.is_some() && p.cgroup.is_none())));
}

#[test]
fn delta_frames_are_much_smaller_than_key_frames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut writer, _) = Writer::open(dir.path(), small_config()).expect("open");
    let key = writer.append(&sample(0, 300)).expect("append");
    let delta = writer.append(&sample(1, 300)).expect("append");
    assert!(key.key_frame && !delta.key_frame);
    assert!(delta.frame_bytes * 2 < key.frame_bytes, "key {} delta {}", key.frame_bytes, delta.frame_bytes);
}

#[test]
fn each_writer_starts_a_new_segment_and_rotation_by_age_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), small_config(), 0..3);
    write(dir.path(), small_config(), 3..6);
    assert_eq!(segments(dir.path()).len(), 2);
    let config = StoreConfig { segment_max_age: Duration::from_secs(2), ..small_config() };
    write(dir.path(), config, 6..12);
    assert_eq!(segments(dir.path()).len(), 2 + 3);
    assert_eq!(seqs(&read_all(dir.path())), (0..12).collect::<Vec<_>>());
}

#[test]
fn torn_tail_is_cut_off_on_open_at_every_length() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), small_config(), 0..3);
    let seg = segments(dir.path())[0].clone();
    let full = std::fs::read(&seg).expect("read");
    let walk = proctor_store::segment::walk(&seg, proctor_store::segment::Check::Full).expect("walk");
    let last = walk.frames[2].offset as usize;
    for cut in (last + 1..full.len()).step_by(7) {
        std::fs::write(&seg, &full[..cut]).expect("write");
        let (_writer, report) = Writer::open(dir.path(), small_config()).expect("open");
        assert_eq!(report.repaired.len(), 1, "cut at {cut}");
        assert!(report.set_aside.is_empty());
        assert_eq!(std::fs::metadata(&seg).expect("meta").len(), last as u64);
        drop(_writer);
        assert_eq!(seqs(&read_all(dir.path())), vec![0, 1]);
    }
}

#[test]
fn corrupt_last_frame_is_repaired() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), small_config(), 0..3);
    let seg = segments(dir.path())[0].clone();
    let mut bytes = std::fs::read(&seg).expect("read");
    let n = bytes.len();
    bytes[n - 3] ^= 0x40;
    std::fs::write(&seg, &bytes).expect("write");
    let (_writer, report) = Writer::open(dir.path(), small_config()).expect("open");
    assert_eq!(report.repaired.len(), 1);
    assert!(report.repaired[0].reason.contains("crc"), "{:?}", report.repaired);
    assert_eq!(seqs(&read_all(dir.path())), vec![0, 1]);
}

/// Damage in the second frame of a middle segment (a delta). Version 2 loses that frame; version 3
/// loses the rest of its chunk too, whose deltas are compressed each against the one before.
#[test]
fn damage_in_the_middle_sets_the_file_aside_and_recording_continues() {
    let v2 = StoreConfig { record_version: RECORD_VERSION_2, ..small_config() };
    damage_in_the_middle_sets_the_file_aside(v2, &[0, 1, 2, 3, 4, 6, 7, 8, 9, 10]);
    damage_in_the_middle_sets_the_file_aside(small_config(), &[0, 1, 2, 3, 4, 8, 9, 10]);
}

fn damage_in_the_middle_sets_the_file_aside(config: StoreConfig, expected: &[u64]) {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), config.clone(), 0..4);
    write(dir.path(), config.clone(), 4..8);
    write(dir.path(), config.clone(), 8..10);
    let middle = segments(dir.path())[1].clone();
    let mut bytes = std::fs::read(&middle).expect("read");
    // Overwrite the second frame's header: the header walk stops there, and intact frames follow.
    let walk = proctor_store::segment::walk(&middle, proctor_store::segment::Check::Headers).expect("walk");
    let at = walk.frames[1].offset as usize;
    bytes[at..at + 8].copy_from_slice(b"garbage!");
    std::fs::write(&middle, &bytes).expect("write");

    let (mut writer, report) = Writer::open(dir.path(), config).expect("open");
    assert_eq!(report.set_aside.len(), 1, "{report:?}");
    assert_eq!(report.set_aside[0].path, middle);
    assert!(report.set_aside[0].moved_to.to_string_lossy().ends_with(".seg.corrupt"));
    assert!(report.set_aside[0].moved_to.exists());
    writer.append(&sample(10, 20)).expect("recording continues");
    drop(writer);
    // Readers read the set-aside file's intact frames, around the damaged one (5).
    assert_eq!(seqs(&read_all(dir.path())), expected);
}

/// A bit flipped in a delta's payload (frame 2 of a chunk of 4): version 2 skips that frame;
/// version 3 that frame and the one after it in its chunk, each reported.
#[test]
fn payload_damage_in_a_sealed_segment_skips_that_frame_and_is_reported() {
    let v2 = StoreConfig { record_version: RECORD_VERSION_2, ..small_config() };
    payload_damage_skips(v2, &[0, 1, 3, 4, 5]);
    payload_damage_skips(small_config(), &[0, 1, 4, 5]);
}

fn payload_damage_skips(config: StoreConfig, expected: &[u64]) {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), config.clone(), 0..4);
    write(dir.path(), config, 4..6);
    let first = segments(dir.path())[0].clone();
    let walk = proctor_store::segment::walk(&first, proctor_store::segment::Check::Headers).expect("walk");
    let mut bytes = std::fs::read(&first).expect("read");
    let at = walk.frames[2].offset as usize + 30;
    bytes[at] ^= 1;
    std::fs::write(&first, &bytes).expect("write");
    let mut reader = Reader::open(dir.path()).expect("open");
    let frames = reader.all_frames().expect("frames");
    let got: Vec<u64> = frames.iter().filter_map(|f| reader.read(f)).map(|s| s.seq).collect();
    assert_eq!(got, expected);
    assert_eq!(reader.report().bad_frames.len(), 6 - expected.len());
    assert!(reader.report().bad_frames.iter().all(|(_, _, why)| why.contains("crc")), "{:?}", reader.report());
}

#[test]
fn garbage_segment_is_set_aside() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), small_config(), 0..2);
    // Named inside the stored range, so retention (7 days back from the newest sample) keeps it.
    let garbage = proctor_store::segment::segment_name(T0 + 1);
    std::fs::write(dir.path().join(&garbage), b"not a segment at all").expect("write");
    write(dir.path(), small_config(), 2..3);
    assert_eq!(seqs(&read_all(dir.path())), vec![0, 1, 2]);
    assert!(dir.path().join(format!("{garbage}.corrupt")).exists());
}

#[test]
fn retention_drops_whole_segments_by_size_and_by_age() {
    let dir = tempfile::tempdir().expect("tempdir");
    let by_age = StoreConfig {
        segment_max_age: Duration::from_secs(10),
        retain_age: Duration::from_secs(30),
        retain_bytes: u64::MAX,
        ..small_config()
    };
    write(dir.path(), by_age.clone(), 0..100);
    let kept = read_all(dir.path());
    // Retention runs when a segment starts; the last one started at 90 s, so a segment went
    // once its successor started before 60 s: 0..40 went, 50 (successor at 60) stayed.
    assert_eq!(kept.first().map(|s| s.seq), Some(50));
    assert_eq!(kept.last().map(|s| s.seq), Some(99));

    let dir = tempfile::tempdir().expect("tempdir");
    let by_size = StoreConfig { segment_max_age: Duration::from_secs(10), retain_bytes: 8_000, ..small_config() };
    write(dir.path(), by_size, 0..100);
    let total: u64 = segments(dir.path()).iter().map(|p| std::fs::metadata(p).expect("meta").len()).sum();
    let one_segment = std::fs::metadata(segments(dir.path()).last().expect("a segment")).expect("meta").len();
    assert!(total <= 8_000 + one_segment, "total {total}");
    let kept = read_all(dir.path());
    assert_eq!(kept.last().map(|s| s.seq), Some(99));
    assert!(kept.first().map(|s| s.seq) > Some(0));
}

#[test]
fn set_aside_segments_are_dropped_by_age_and_first_when_over_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StoreConfig {
        segment_max_age: Duration::from_secs(10),
        retain_age: Duration::from_secs(30),
        retain_bytes: u64::MAX,
        ..small_config()
    };
    // An old set-aside segment (0 s + 10 s of content) is past a 30 s window once samples
    // reach 50 s; a young one (at 45 s) is not.
    let set_aside =
        |start_ns: u64| dir.path().join(format!("{}.corrupt", proctor_store::segment::segment_name(start_ns)));
    let old = set_aside(T0);
    let young = set_aside(T0 + 45 * SECOND);
    std::fs::write(&old, vec![0u8; 1000]).expect("write");
    std::fs::write(&young, vec![0u8; 1000]).expect("write");
    write(dir.path(), config.clone(), 40..60);
    assert!(!old.exists(), "a set-aside segment past the retention age stays");
    assert!(young.exists(), "a set-aside segment inside the retention age went");

    // Over the size budget, the set-aside segment goes before any readable one.
    let good: u64 = segments(dir.path()).iter().map(|p| std::fs::metadata(p).expect("meta").len()).sum();
    let first_kept = read_all(dir.path()).first().map(|s| s.seq);
    std::fs::write(&young, vec![0u8; 50_000]).expect("write");
    write(dir.path(), StoreConfig { retain_bytes: good + 10_000, ..config }, 60..62);
    assert!(!young.exists(), "over the size budget the set-aside segment stays");
    assert_eq!(read_all(dir.path()).first().map(|s| s.seq), first_kept);
}

#[test]
fn a_second_writer_is_refused_while_the_first_holds_the_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_first, _) = Writer::open(dir.path(), small_config()).expect("open");
    match Writer::open(dir.path(), small_config()) {
        Err(StoreError::Locked { .. }) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
}

/// Regression (CI, stop 25): a writer dropped while a child forked by another thread still held
/// a copy of its lock fd (between fork and exec) left the store locked, and the next open in this
/// process failed with `Locked`.
#[test]
fn a_dropped_writer_unlocks_even_while_a_forked_child_holds_its_fd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, _) = Writer::open(dir.path(), small_config()).expect("open");
    // SAFETY: the child only sleeps and exits (async-signal-safe calls); no Rust runtime use.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork: {}", std::io::Error::last_os_error());
    if child == 0 {
        // SAFETY: as above.
        unsafe {
            libc::sleep(1);
            libc::_exit(0);
        }
    }
    drop(first);
    let reopened = Writer::open(dir.path(), small_config());
    let mut status = 0;
    // SAFETY: waits for the child this test forked, by its pid.
    unsafe { libc::waitpid(child, &mut status, 0) };
    reopened.expect("a dropped writer's lock is released even while a forked child holds its fd");
}

#[test]
fn missing_or_non_directory_data_dir_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope");
    let err = Writer::open(&missing, small_config()).expect_err("missing");
    assert!(matches!(err, StoreError::Missing { .. }));
    assert!(err.to_string().contains("does not exist"), "{err}");
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").expect("write");
    assert!(matches!(Reader::open(&file), Err(StoreError::NotADirectory { .. })));
}

/// Regression (issue 15 item 10): an I/O error said "data directory <a segment file>: <cause>"
/// and also returned the cause as its `source()`, so `anyhow`'s `{:#}` printed "(os error 13):
/// … (os error 13)". Now it says what was tried on which path, and its cause once.
#[test]
fn an_io_error_says_what_failed_on_which_path_and_its_cause_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").expect("write");
    let err = Reader::open(&file.join("store")).expect_err("a path under a file");
    let text = err.to_string();
    assert_eq!(text, format!("cannot reach {}: Not a directory (os error 20)", file.join("store").display()));
    assert!(std::error::Error::source(&err).is_none(), "the cause is in the text; a source would print it twice");
    assert!(!text.contains("data directory"), "{text}");
}

#[test]
fn at_or_before_pairs_samples_of_one_run_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), small_config(), 0..5);
    let mut reader = Reader::open(dir.path()).expect("open");
    let (cur, prev) = reader.at_or_before(T0 + 3 * SECOND + SECOND / 2).expect("read").expect("found");
    assert_eq!(cur.seq, 3);
    assert_eq!(prev.map(|p| p.seq), Some(2));
    assert!(reader.at_or_before(T0 - 1).expect("read").is_none());
    // A new recorder restarts seq and the monotonic clock: no pair across the restart.
    let (mut writer, _) = Writer::open(dir.path(), small_config()).expect("open");
    let mut restarted = sample(0, 20);
    restarted.unix_ns = T0 + 10 * SECOND;
    writer.append(&restarted).expect("append");
    drop(writer);
    let mut reader = Reader::open(dir.path()).expect("open");
    let (cur, prev) = reader.at_or_before(u64::MAX).expect("read").expect("found");
    assert_eq!(cur.unix_ns, T0 + 10 * SECOND);
    assert!(prev.is_none());
}

/// `tests/data/v1-store` was written by the build that introduced the store (record version 1)
/// with `proctor record`'s code path, from `sample(seq, 20)` for seq 0..6 and a chunk of 4.
/// Future builds must keep reading it: change the reader, not this file. To add a store of a
/// new version, write it beside this one and add a test; never regenerate this one.
#[test]
fn reads_the_store_written_by_record_version_1() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1-store");
    let back = read_all(&dir);
    assert_eq!(seqs(&back), (0..6).collect::<Vec<_>>());
    for got in &back {
        assert_eq!(json(got), json(&sample(got.seq, 20)), "sample {}", got.seq);
    }
}

/// The two minute blocks in `tests/data/rollup-v1-store`, as they were given to the writer.
fn rollup_v1_block(hour: u64) -> proctor_model::RollupBlock {
    use proctor_model::{RollupBlock, RollupRow, Stat};
    let start = 1_700_000_000 - 1_700_000_000 % 3600 + hour * 3600;
    let names = vec!["group.web.cpu".to_string(), "group.web.rss".to_string(), "host.load.avg1".to_string()];
    let rows = (0..60u64)
        .map(|m| {
            let x = (hour * 60 + m) as f64;
            RollupRow {
                start_unix_s: start + m * 60,
                span_s: 60,
                samples: 60,
                values: vec![
                    Some(Stat {
                        min: 0.5 + x / 8.0,
                        mean: 12.25 + x / 4.0,
                        max: 80.0 - x / 10.0,
                        last: 20.0 + x / 16.0,
                        n: 59,
                    }),
                    (m % 7 != 3).then_some(Stat {
                        min: 100e6 + x * 1e5,
                        mean: 101.5e6 + x * 1.5e5,
                        max: 103e6 + x * 2e5,
                        last: 102e6,
                        n: 60,
                    }),
                    Some(Stat { min: 0.25, mean: 0.5 + (x % 5.0) / 100.0, max: 1.5, last: 0.75, n: 60 }),
                ],
            }
        })
        .collect();
    RollupBlock { span_s: 60, names, rows }
}

/// `tests/data/rollup-v1-store` is a minute tier written by the build before rollup record
/// version 2 (7bbb634, rollup record version 1: names whole, all four statistics to 4
/// significant digits) from `rollup_v1_block(0)` and `(1)` through `Writer::append_event` at
/// the tiers' zstd level. This build reads it as it was written: every statistic within half a
/// unit of the 4th significant digit of its column's largest value in the block, names, rows,
/// presence and counts exact. Never regenerate it.
#[test]
fn reads_the_rollup_tier_written_by_rollup_version_1() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/rollup-v1-store");
    let mut reader = Reader::open(&dir).expect("open");
    let frames = reader.event_frames(0, u64::MAX).expect("frames");
    assert_eq!(frames.len(), 2);
    for (hour, frame) in frames.iter().enumerate() {
        assert_eq!(frame.frame.header.version, proctor_store::rollup::ROLLUP_VERSION_1);
        let Some(proctor_store::Event::Rollup(got)) = reader.read_event(frame) else { panic!("block {hour} reads") };
        let want = rollup_v1_block(hour as u64);
        assert_eq!((&got.names, got.span_s, got.rows.len()), (&want.names, 60, 60));
        for col in 0..want.names.len() {
            let largest = want.rows.iter().flat_map(|r| r.values[col]).map(|s| s.max.max(s.last)).fold(0.0, f64::max);
            let half_unit = 0.5 * 10f64.powi(largest.log10().floor() as i32 + 1 - 4);
            for (w, g) in want.rows.iter().zip(&got.rows) {
                assert_eq!((w.start_unix_s, w.samples), (g.start_unix_s, g.samples));
                match (w.values[col], g.values[col]) {
                    (None, None) => {}
                    (Some(w), Some(g)) => {
                        assert_eq!(w.n, g.n);
                        for (a, b) in [(w.min, g.min), (w.mean, g.mean), (w.max, g.max), (w.last, g.last)] {
                            assert!((a - b).abs() <= half_unit * 1.000_001, "column {col}: {a} read as {b}");
                        }
                    }
                    other => panic!("presence differs in column {col}: {other:?}"),
                }
            }
        }
    }
    assert!(reader.report().bad_frames.is_empty(), "{:?}", reader.report().bad_frames);
}

/// Writes the compatibility store; run once by hand with `PROCTOR_WRITE_V1_STORE=DIR`.
#[test]
fn write_v1_store_when_asked() {
    let Some(dir) = std::env::var_os("PROCTOR_WRITE_V1_STORE") else { return };
    write(Path::new(&dir), small_config(), 0..6);
}

/// Regression (record version 1): a run's first sample has no command lines yet, so a chunk
/// keyed on it made every delta ~20× larger (16 KB instead of 0.8 KB with 600 processes). A
/// delta over a quarter of its key's size must start a new chunk with the next frame.
#[test]
fn a_key_unlike_the_samples_after_it_is_replaced_early() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StoreConfig { record_version: proctor_store::codec::RECORD_VERSION_1, ..StoreConfig::default() };
    let (mut writer, _) = Writer::open(dir.path(), config).expect("open");
    let mut first = sample(0, 300);
    for p in &mut first.processes {
        p.cmdline = None;
        p.cgroup = None;
    }
    let kinds: Vec<bool> = std::iter::once(first)
        .chain((1..5).map(|seq| sample(seq, 300)))
        .map(|s| writer.append(&s).expect("append").key_frame)
        .collect();
    assert_eq!(kinds, vec![true, false, true, false, false]);
    drop(writer);
    assert_eq!(seqs(&read_all(dir.path())), (0..5).collect::<Vec<_>>());
}

/// Like [`sample`], but every process's text differs from its neighbours' (names, command
/// lines and sizes from a hash of the pid), as on a real host; with `sample`'s near-identical
/// lines zstd finds a match anywhere, which hides whether it can find the right one.
fn varied_sample(seq: u64, processes: u32) -> Sample {
    let mut s = sample(seq, processes);
    for p in &mut s.processes {
        let h = |salt: u64| (u64::from(p.pid) ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
        p.comm = Arc::from(format!("w{:x}", h(1) % 0xFFFF_FFFF));
        p.cmdline = Some(Arc::from(vec![format!("/opt/{:x}/bin/{:x}", h(2), h(3)), format!("--id={:x}", h(4))]));
        p.resident_bytes = Some(h(5) % (1 << 32));
        p.vsize_bytes = h(6) % (1 << 40);
        p.start_ticks = h(7) % (1 << 24);
    }
    s
}

/// zstd finds a delta's matches in the key only while its tables hold enough of the key's
/// positions; past ~8 input bytes per hash entry, deltas of real records grew 7–10×. The
/// compressor sizes its tables by the record, so at 3000 processes (a record of ~1 MB, past
/// the 2^17 entries zstd itself picks for level 3) a delta must still be a small part of its
/// key: under a quarter (the writer's threshold for a new chunk). Measured: ~24 KB against
/// a ~158 KB key (every process's counters change); 121 KB with tables 4× smaller.
#[test]
fn deltas_of_large_records_stay_small() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut writer, _) = Writer::open(dir.path(), small_config()).expect("open");
    let key = writer.append(&varied_sample(0, 3000)).expect("append");
    let delta = writer.append(&varied_sample(1, 3000)).expect("append");
    assert!(key.key_frame && !delta.key_frame);
    let what =
        format!("record {} bytes, key {} bytes, delta {} bytes", key.record_bytes, key.frame_bytes, delta.frame_bytes);
    assert!(key.record_bytes > 1 << 20, "{what}");
    assert!(delta.frame_bytes * 4 < key.frame_bytes, "{what}");
    drop(writer);
    let back = read_all(dir.path());
    assert_eq!(json(&back[1]), json(&varied_sample(1, 3000)));
}

fn probe_batch(first: u64) -> proctor_model::ProbeBatch {
    proctor_model::ProbeBatch {
        run: "run-1".to_string(),
        target: "http://127.0.0.1:1/".to_string(),
        results: (first..first + 3)
            .map(|seq| proctor_model::ProbeResult {
                seq,
                sent_unix_ns: T0 + seq * SECOND,
                total_ns: 1_000_000 * (seq + 1),
                status: Some(200),
                error: (seq == first + 2).then(|| "timeout".to_string()),
                has_response: seq != first + 2,
                connect_ns: None,
                wait_ns: Some(900_000),
            })
            .collect(),
    }
}

fn statsd_flush(seq: u64) -> proctor_model::StatsdFlush {
    proctor_model::StatsdFlush {
        unix_ns: T0 + seq * SECOND,
        interval_ms: 1000,
        timers: vec![proctor_model::StatsdTimer {
            key: "api.latency".to_string(),
            stats: vec![("count".to_string(), 4.0), ("mean".to_string(), 12.5 + seq as f64)],
        }],
        counters: vec![("hits".to_string(), 4.0, 4.0)],
        gauges: vec![("queue".to_string(), 7.0)],
    }
}

/// Probe results and statsd flushes are records of their own kinds: they round-trip, stay out
/// of the sample frames (a sample reader never trips over them), and sample chunks around them
/// stay decodable.
#[test]
fn events_round_trip_beside_samples() {
    use proctor_store::Event;
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut writer, _) = Writer::open(dir.path(), small_config()).expect("open");
    writer.append(&sample(0, 20)).expect("key");
    writer.append_event(T0, &Event::Probe(probe_batch(0))).expect("probe");
    writer.append(&sample(1, 20)).expect("delta after an event");
    writer.append_event(T0 + SECOND, &Event::Statsd(statsd_flush(1))).expect("statsd");
    writer.append(&sample(2, 20)).expect("delta");
    drop(writer);
    // Reopening walks every frame of the newest segment: no repair, nothing set aside.
    let (_, report) = Writer::open(dir.path(), small_config()).expect("reopen");
    assert!(report.repaired.is_empty() && report.set_aside.is_empty(), "{report:?}");

    let back = read_all(dir.path());
    assert_eq!(seqs(&back), vec![0, 1, 2]);
    for got in &back {
        assert_eq!(json(got), json(&sample(got.seq, 20)));
    }
    let mut reader = Reader::open(dir.path()).expect("reader");
    let events = reader.event_frames(0, u64::MAX).expect("events");
    let events: Vec<Event> = events.iter().filter_map(|f| reader.read_event(f)).collect();
    assert_eq!(events, vec![Event::Probe(probe_batch(0)), Event::Statsd(statsd_flush(1))]);
    // Asking for the wrong kind is an error, not a panic or a garbage record.
    let sample_frame = reader.frames(0, u64::MAX).expect("frames")[0];
    assert!(reader.try_read_event(&sample_frame).is_err());
    let event_frame = reader.event_frames(0, u64::MAX).expect("events")[0];
    assert!(reader.try_read(&event_frame).is_err());
    assert!(reader.report().bad_frames.is_empty());
}

/// A stream is a subdirectory with its own lock: it can be written while the data directory's
/// own writer holds the data directory, and the data directory's readers do not see it.
#[test]
fn a_stream_has_its_own_writer_and_stays_out_of_the_samples() {
    use proctor_store::{stream_dir, Event, PROBE_STREAM};
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut samples, _) = Writer::open(dir.path(), small_config()).expect("samples");
    samples.append(&sample(0, 5)).expect("append");
    let probe_dir = stream_dir(dir.path(), PROBE_STREAM).expect("stream dir");
    let (mut probes, _) = Writer::open(&probe_dir, small_config()).expect("a second writer on the stream");
    for i in 0..3 {
        probes.append_event(T0 + i * 3 * SECOND, &Event::Probe(probe_batch(i * 3))).expect("append");
    }
    drop(probes);
    assert_eq!(seqs(&read_all(dir.path())), vec![0]);
    let mut reader = Reader::open(&probe_dir).expect("reader");
    let frames = reader.event_frames(T0 + 3 * SECOND, u64::MAX).expect("frames");
    assert_eq!(frames.len(), 2, "a time range applies to events too");
    assert!(reader.frames(0, u64::MAX).expect("frames").is_empty());
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&probe_dir).expect("meta").permissions());
    assert_eq!(mode & 0o777, 0o700);
    assert!(matches!(stream_dir(&dir.path().join("missing"), PROBE_STREAM), Err(StoreError::Missing { .. })));
}

/// A store written before events existed has none, and still reads (the v1 store).
#[test]
fn a_store_with_only_samples_has_no_events() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1-store");
    let mut reader = Reader::open(&dir).expect("reader");
    assert!(reader.event_frames(0, u64::MAX).expect("events").is_empty());
    assert_eq!(reader.frames(0, u64::MAX).expect("frames").len(), 6);
}

/// Record version 2, the same start: the deltas before the first anchor carry the command lines
/// the key lacks, and the anchor makes the deltas after it small again (each against it).
#[test]
fn a_key_without_command_lines_costs_only_until_the_first_anchor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut writer, _) = Writer::open(dir.path(), StoreConfig::default()).expect("open");
    let mut first = varied_sample(0, 300);
    for p in &mut first.processes {
        p.cmdline = None;
        p.cgroup = None;
    }
    let anchor = u64::from(StoreConfig::default().anchor_frames);
    let costs: Vec<_> = std::iter::once(first)
        .chain((1..anchor + 4).map(|seq| varied_sample(seq, 300)))
        .map(|s| writer.append(&s).expect("append"))
        .collect();
    let key = costs[0].frame_bytes;
    let early = costs[1].frame_bytes;
    let late = &costs[anchor as usize + 1..];
    assert!(costs.iter().skip(1).all(|c| !c.key_frame));
    for c in late {
        assert!(c.frame_bytes * 2 < early, "after the anchor {} B, before it {early} B (key {key} B)", c.frame_bytes);
    }
    drop(writer);
    let back = read_all(dir.path());
    assert_eq!(seqs(&back), (0..anchor + 4).collect::<Vec<_>>());
    assert_eq!(json(&back[anchor as usize + 2]), json(&varied_sample(anchor + 2, 300)));
}

/// A sample whose processes and host parts change with `seq` in every way a delta must carry:
/// processes come (pids 100+seq) and go (pid seq % 20 + 1 is missing), some change (odd pids'
/// counters, every third one's memory readings and command line), most stay as they were,
/// and the order is not the pid order (the first two rows swap on odd seqs); the host gains a
/// disk, loses its meminfo and changes its pressure.
fn churning_sample(seq: u64) -> Sample {
    use proctor_procfs::host::{DiskStat, MemInfo, Pressure, PressureLine};
    let mut s = sample(seq, 20);
    let base = sample(0, 20);
    for (p, b) in s.processes.iter_mut().zip(&base.processes) {
        if p.pid % 2 == 0 {
            // Even pids idle: exactly as in the first sample.
            *p = b.clone();
        }
        if p.pid % 3 == 0 && seq % 2 == 1 {
            p.resident_bytes = None;
            p.status = Some(proctor_model::StatusReading {
                rss_anon_bytes: Some(seq),
                read_mono_ns: seq,
                ..Default::default()
            });
            p.cmdline = Some(Arc::from(vec![format!("/bin/changed-{seq}")]));
            p.comm = Arc::from(format!("renamed{seq}"));
        }
    }
    s.processes.retain(|p| u64::from(p.pid) != seq % 20 + 1);
    for extra in 0..seq % 3 {
        let mut p = sample(seq, 1).processes.remove(0);
        p.pid = 100 + (seq + extra) as u32;
        p.start_ticks = seq;
        s.processes.push(p);
    }
    if seq % 2 == 1 {
        s.processes.swap(0, 1);
    }
    s.host.meminfo = seq.is_multiple_of(2).then(|| MemInfo { free_bytes: Some(seq), ..MemInfo::default() });
    s.host.pressure_io = Some(Pressure {
        some: Some(PressureLine { avg10: seq as f64 / 3.0, total_usec: seq * 7, ..PressureLine::default() }),
        full: None,
    });
    s.host.disks = (0..1 + seq % 2)
        .map(|i| DiskStat {
            name: Arc::from(format!("vd{i}")),
            reads: seq * (i + 1),
            read_sectors: 0,
            read_ms: 0,
            writes: i,
            write_sectors: 0,
            write_ms: 0,
            in_flight: 0,
            io_ms: 0,
            weighted_io_ms: 0,
        })
        .collect();
    s.host.online_cpus = (!seq.is_multiple_of(3)).then(|| vec![0, seq as u32 % 4]);
    s
}

fn v2_config() -> StoreConfig {
    StoreConfig { record_version: RECORD_VERSION_2, ..v3_config() }
}

fn v3_config() -> StoreConfig {
    StoreConfig { chunk_frames: 7, anchor_frames: 2, ..StoreConfig::default() }
}

/// Version-2 keys, anchors and deltas give back exactly what was written: rows added, removed,
/// changed and the same, in their order, and host parts added, changed and gone; read in order,
/// backwards, and each frame by a reader that holds nothing (which decodes the anchors first).
#[test]
fn version_2_deltas_round_trip_every_kind_of_change() {
    deltas_round_trip_every_kind_of_change(v2_config());
}

/// The same for version 3, whose deltas are also compressed against the frame before them: a
/// frame read cold walks its chunk from the key, and reading backwards walks it again each time.
#[test]
fn version_3_deltas_round_trip_every_kind_of_change() {
    deltas_round_trip_every_kind_of_change(v3_config());
}

fn deltas_round_trip_every_kind_of_change(config: StoreConfig) {
    let version = config.record_version;
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut writer, _) = Writer::open(dir.path(), config).expect("open");
    let kinds: Vec<bool> = (0..16).map(|seq| writer.append(&churning_sample(seq)).expect("append").key_frame).collect();
    assert_eq!(kinds.iter().filter(|k| **k).count(), 3, "{kinds:?}");
    drop(writer);
    let mut reader = Reader::open(dir.path()).expect("open");
    let frames = reader.all_frames().expect("frames");
    assert!(frames.iter().all(|f| f.frame.header.version == version));
    let check = |got: &Sample| assert_eq!(json(got), json(&churning_sample(got.seq)), "sample {}", got.seq);
    let forward: Vec<Sample> = frames.iter().map(|f| reader.try_read(f).expect("decode")).collect();
    assert_eq!(seqs(&forward), (0..16).collect::<Vec<_>>());
    forward.iter().for_each(check);
    for f in frames.iter().rev() {
        check(&reader.try_read(f).expect("decode backwards"));
    }
    for f in &frames {
        check(&Reader::open(dir.path()).expect("open").try_read(f).expect("decode cold"));
    }
    // Every other frame, then the ones between, as a thinned range and its refinement read.
    for f in frames.iter().step_by(2).chain(frames.iter().skip(1).step_by(2)) {
        check(&reader.try_read(f).expect("decode out of order"));
    }
    // The order is the sample's, not the pid order.
    assert_eq!(forward[1].processes[0].pid, 3);
    assert!(reader.report().bad_frames.is_empty());
}

/// A store written by a version-1 writer, then a version-2 one, then a version-3 one (upgrades)
/// and a version-1 one again reads back whole, and so does the committed version-1 store with
/// version-3 segments after it.
#[test]
fn a_store_mixing_version_1_2_and_3_frames_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v1 = StoreConfig { record_version: proctor_store::codec::RECORD_VERSION_1, ..small_config() };
    write(dir.path(), v1.clone(), 0..5);
    write(dir.path(), StoreConfig { record_version: RECORD_VERSION_2, ..small_config() }, 5..10);
    write(dir.path(), small_config(), 10..15);
    write(dir.path(), v1, 15..18);
    let mut reader = Reader::open(dir.path()).expect("open");
    let versions: Vec<u8> = reader.all_frames().expect("frames").iter().map(|f| f.frame.header.version).collect();
    assert_eq!(versions, [[1; 5].as_slice(), &[2; 5], &[3; 5], &[1; 3]].concat());
    let back = read_all(dir.path());
    assert_eq!(seqs(&back), (0..18).collect::<Vec<_>>());
    for got in &back {
        assert_eq!(json(got), json(&sample(got.seq, 20)), "sample {}", got.seq);
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1-store/01700000000000000000.seg");
    std::fs::copy(&committed, dir.path().join("01700000000000000000.seg")).expect("copy");
    write(dir.path(), small_config(), 6..12);
    let back = read_all(dir.path());
    assert_eq!(seqs(&back), (0..12).collect::<Vec<_>>());
    for got in &back {
        assert_eq!(json(got), json(&sample(got.seq, 20)), "sample {}", got.seq);
    }
}

/// Damage in a version-2 delta that is no anchor loses that frame only; damage in an anchor
/// loses it and the frames of its chunk that are taken against it or a later anchor (as damage
/// in a key loses its chunk). Each loss is reported, none is fatal.
#[test]
fn damage_in_an_anchor_loses_the_frames_after_it_in_its_chunk_only() {
    let config =
        StoreConfig { chunk_frames: 8, anchor_frames: 3, record_version: RECORD_VERSION_2, ..StoreConfig::default() };
    // Chunk 0..8: key 0, anchors 3 and 6; chunk 8..16: key 8, anchors 11 and 14.
    damage_loses(config, &[(4, &[4]), (3, &[3, 4, 5, 6, 7]), (6, &[6, 7])]);
}

/// Version 3: a delta is compressed against the frame before it, so damage in any delta loses
/// it and the rest of its chunk (and damage in a key its whole chunk), never a frame of another
/// chunk. Each loss is reported, none is fatal.
#[test]
fn damage_in_a_chained_delta_loses_the_rest_of_its_chunk_only() {
    let config = StoreConfig { chunk_frames: 8, anchor_frames: 3, ..StoreConfig::default() };
    assert_eq!(config.record_version, RECORD_VERSION);
    damage_loses(
        config,
        &[
            (4, &[4, 5, 6, 7]),
            (1, &[1, 2, 3, 4, 5, 6, 7]),
            (7, &[7]),
            (8, &[8, 9, 10, 11, 12, 13, 14, 15]),
            (10, &[10, 11, 12, 13, 14, 15]),
        ],
    );
}

/// Writes samples 0..16 and 16 with `config` (two writers), flips a bit in the payload of frame
/// `damaged` of the first segment, and checks that exactly `lost` are lost, each said as a CRC
/// failure.
fn damage_loses(config: StoreConfig, cases: &[(usize, &[u64])]) {
    for &(damaged, lost) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), config.clone(), 0..16);
        write(dir.path(), config.clone(), 16..17);
        let first = segments(dir.path())[0].clone();
        let walk = proctor_store::segment::walk(&first, proctor_store::segment::Check::Headers).expect("walk");
        let mut bytes = std::fs::read(&first).expect("read");
        bytes[walk.frames[damaged].offset as usize + 30] ^= 1;
        std::fs::write(&first, &bytes).expect("write");
        let mut reader = Reader::open(dir.path()).expect("open");
        let frames = reader.all_frames().expect("frames");
        let got: Vec<u64> = frames.iter().filter_map(|f| reader.read(f)).map(|s| s.seq).collect();
        let expected: Vec<u64> = (0..17).filter(|s| !lost.contains(s)).collect();
        assert_eq!(got, expected, "damage in frame {damaged}");
        assert_eq!(reader.report().bad_frames.len(), lost.len(), "{:?}", reader.report());
        assert!(reader.report().bad_frames.iter().all(|(_, _, why)| why.contains("crc")), "{:?}", reader.report());
    }
}

/// `tests/data/v2-store` was written by the build that introduced record version 2, from
/// `churning_sample(seq)` for seq 0..12 with `v2_config()` (chunks of 7, an anchor every 2).
/// Future builds must keep reading it: change the reader, not this file (nor
/// `churning_sample`); never regenerate it.
#[test]
fn reads_the_store_written_by_record_version_2() {
    reads_the_committed_store("tests/data/v2-store", 2);
}

/// `tests/data/v3-store` was written by the build that introduced record version 3 (chained
/// deltas), from `churning_sample(seq)` for seq 0..12 with `v3_config()`; the same rules.
#[test]
fn reads_the_store_written_by_record_version_3() {
    reads_the_committed_store("tests/data/v3-store", 3);
}

fn reads_the_committed_store(dir: &str, version: u8) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut reader = Reader::open(&dir).expect("open");
    let frames = reader.all_frames().expect("frames");
    assert_eq!(frames.len(), 12);
    assert!(frames.iter().all(|f| f.frame.header.version == version));
    let back = read_all(&dir);
    assert_eq!(seqs(&back), (0..12).collect::<Vec<_>>());
    for got in &back {
        assert_eq!(json(got), json(&churning_sample(got.seq)), "sample {}", got.seq);
    }
}

/// Writes a compatibility store; run once by hand with `PROCTOR_WRITE_STORE=VERSION:DIR`
/// (`2` with `v2_config()`, `3` with `v3_config()`).
#[test]
fn write_compatibility_store_when_asked() {
    let Some(asked) = std::env::var("PROCTOR_WRITE_STORE").ok() else { return };
    let (version, dir) = asked.split_once(':').expect("PROCTOR_WRITE_STORE=VERSION:DIR");
    let config = match version {
        "2" => v2_config(),
        "3" => v3_config(),
        _ => panic!("no compatibility store of version {version}"),
    };
    let (mut writer, _) = Writer::open(Path::new(dir), config).expect("open");
    for seq in 0..12 {
        writer.append(&churning_sample(seq)).expect("append");
    }
}

/// Three segments of one rollup block each (three writers, as the roller writes an hour a
/// call), replaced by one segment holding one record: it takes the first one's name and the
/// others are gone. A rewrite cut short before its rename (its `.seg.new` file left) changes
/// nothing a reader sees, and the next writer removes the file.
#[test]
fn replacing_segments_leaves_one_segment_and_an_unfinished_rewrite_is_removed() {
    use proctor_store::frame::FrameKind;
    use proctor_store::rollup::{encode_block, ROLLUP_VERSION};
    use proctor_store::{Event, NewFrame};
    let dir = tempfile::tempdir().expect("tempdir");
    for hour in 0..3u64 {
        let (mut writer, _) = Writer::open(dir.path(), small_config()).expect("open");
        writer.append_event(T0 + hour * 3600 * SECOND, &Event::Rollup(rollup_v1_block(hour))).expect("append");
    }
    let old = proctor_store::segment::list_segments(dir.path()).expect("list");
    assert_eq!(old.len(), 3);
    // A crash before the rename: the `.new` file is there, the old segments read as before.
    let mut unfinished = old[0].path.as_os_str().to_owned();
    unfinished.push(".new");
    let unfinished = std::path::PathBuf::from(unfinished);
    std::fs::write(&unfinished, b"PRCTSEG1 half a frame").expect("write");
    let mut reader = Reader::open(dir.path()).expect("reader");
    assert_eq!(reader.event_frames(0, u64::MAX).expect("frames").len(), 3);
    let (mut writer, report) = Writer::open(dir.path(), small_config()).expect("open");
    assert!(!unfinished.exists(), "{report:?}");
    assert_eq!(report.repaired.len(), 1);

    let merged = rollup_v1_block(7);
    let record = encode_block(&merged);
    let frame = NewFrame { unix_ns: T0, kind: FrameKind::Rollup, version: ROLLUP_VERSION, record: &record };
    writer.replace_segments(&old, &[frame]).expect("replace");
    let now = proctor_store::segment::list_segments(dir.path()).expect("list");
    assert_eq!(now.iter().map(|s| &s.path).collect::<Vec<_>>(), vec![&old[0].path]);
    let mut reader = Reader::open(dir.path()).expect("reader");
    let frames = reader.event_frames(0, u64::MAX).expect("frames");
    assert_eq!(frames.len(), 1);
    let Some(Event::Rollup(got)) = reader.read_event(&frames[0]) else { panic!("the new block reads") };
    assert_eq!(encode_block(&got), record);
}

/// A fork storm's deltas, mostly ended processes, are compressed alone: the previous record as
/// zstd's prefix costs its indexing and buys nothing there (`CHAIN_MAX_ENDED`). The others
/// are still compressed after the delta before them, and everything reads back.
#[test]
fn a_delta_listing_many_ended_processes_is_compressed_alone_and_the_others_after_the_one_before() {
    use proctor_model::ExitedProcess;
    use proctor_store::frame::{FrameKind, HEADER_LEN};
    use proctor_store::CHAIN_MAX_ENDED;

    let dir = tempfile::tempdir().expect("tempdir");
    let (mut writer, _) = Writer::open(dir.path(), StoreConfig::default()).expect("open");
    let cmdline: Arc<[String]> = Arc::from(vec!["make".to_string(), "-j2".to_string()]);
    let ended = |seq: u64, n: usize| -> Vec<ExitedProcess> {
        (0..n as u32)
            .map(|i| ExitedProcess {
                pid: 10_000 + i,
                ppid: 1,
                start_ticks: seq * 100 + u64::from(i),
                lifetime_ns: 3_000_000 + u64::from(i),
                comm: Arc::from("cc1"),
                cmdline: Some(Arc::clone(&cmdline)),
                user_ns: seq * 1_000 + u64::from(i),
                seen: false,
                ..ExitedProcess::default()
            })
            .collect()
    };
    let counts = [0, 3, 3, CHAIN_MAX_ENDED, 5, CHAIN_MAX_ENDED - 1];
    let mut written = Vec::new();
    for (seq, &n) in counts.iter().enumerate() {
        let mut s = sample(seq as u64 + 1, 20);
        s.exited = ended(seq as u64, n);
        writer.append(&s).expect("append");
        written.push(json(&s));
    }
    drop(writer);
    let mut reader = Reader::open(dir.path()).expect("open");
    let frames = reader.all_frames().expect("frames");
    let read: Vec<_> = frames.iter().map(|f| json(&reader.read(f).expect("reads"))).collect();
    assert_eq!(read, written);
    // Each delta's payload starts with where its previous frame is (4 bytes), then whether it
    // was compressed after that frame's record.
    let segment = std::fs::read(&reader.segments()[0].path).expect("segment");
    let after_previous: Vec<Option<bool>> = frames
        .iter()
        .map(|f| {
            let at = f.frame.offset as usize + HEADER_LEN;
            (f.frame.header.kind == FrameKind::Delta).then(|| segment[at + 4] == 1)
        })
        .collect();
    // The key; the first delta has no delta before it; then 3, 128 (alone), 5, 127 ended.
    assert_eq!(after_previous, [None, Some(false), Some(true), Some(false), Some(true), Some(true)]);
}

/// A storm's deltas (1,000 ended processes, ~100 KB a record) share one zstd context; the
/// first frame compressed another way (a delta after the one before) drops it, and everything
/// reads back as written.
#[test]
fn a_storms_deltas_share_a_zstd_context_until_the_storm_is_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut writer, _) = Writer::open(dir.path(), StoreConfig::default()).expect("open");
    let mut written = Vec::new();
    let mut held = Vec::new();
    for (seq, n) in [0, 3, 1_000, 1_000, 3, 1_000].into_iter().enumerate() {
        let mut s = sample(seq as u64 + 1, 20);
        s.exited = storm_ended(seq as u64, n);
        writer.append(&s).expect("append");
        held.push(writer.holds_zstd_context());
        written.push(json(&s));
    }
    // The key, a delta after the one before it, two storm deltas, a delta after the one before
    // it again, a storm delta.
    assert_eq!(held, [false, false, true, true, false, true]);
    drop(writer);
    let mut reader = Reader::open(dir.path()).expect("open");
    let frames = reader.all_frames().expect("frames");
    let read: Vec<_> = frames.iter().map(|f| json(&reader.read(f).expect("reads"))).collect();
    assert_eq!(read, written);
}

#[test]
fn a_storms_record_buffers_are_reused_and_let_go_when_it_is_over() {
    // What the writer holds between frames (`key_bytes`: its base, the previous delta's record,
    // and the buffer the next delta is encoded into) through a storm and after it, against a
    // writer that never saw one: during the storm two records' worth (~100 KB each: the
    // previous record and the spare), a few quiet frames later no more than the quiet one's.
    let held_through = |storm: u32| {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut writer, _) = Writer::open(dir.path(), StoreConfig::default()).expect("open");
        let mut held = Vec::new();
        let mut written = Vec::new();
        for (seq, n) in [0, 3, storm, storm, storm, 3, 0, 0].into_iter().enumerate() {
            let mut s = sample(seq as u64 + 1, 20);
            s.exited = storm_ended(seq as u64, n);
            writer.append(&s).expect("append");
            held.push(writer.key_bytes());
            written.push(json(&s));
        }
        drop(writer);
        let mut reader = Reader::open(dir.path()).expect("open");
        let frames = reader.all_frames().expect("frames");
        let read: Vec<_> = frames.iter().map(|f| json(&reader.read(f).expect("reads"))).collect();
        assert_eq!(read, written);
        held
    };
    let stormy = held_through(1_000);
    let quiet = held_through(3);
    // One storm record alone is ~100 KB: the writer holds the last one and the one before.
    assert!(stormy[4] > quiet[4] + 150_000, "through the storm: {stormy:?} against {quiet:?}");
    assert!(stormy[7] <= quiet[7] + 1_000, "after it: {stormy:?} against {quiet:?}");
}

/// `n` ended processes of a storm's sample `seq`, alike but for their numbers.
fn storm_ended(seq: u64, n: u32) -> Vec<proctor_model::ExitedProcess> {
    (0..n)
        .map(|i| proctor_model::ExitedProcess {
            pid: 20_000 + i,
            ppid: 1,
            start_ticks: seq * 10_000 + u64::from(i),
            lifetime_ns: 1_000_000 + u64::from(i) * 977,
            comm: Arc::from("python3"),
            user_ns: seq * 7_919 + u64::from(i) * 131,
            minflt: u64::from(i % 97),
            seen: false,
            ..proctor_model::ExitedProcess::default()
        })
        .collect()
}

#[test]
fn a_storms_deltas_are_compressed_at_the_storm_level_and_the_others_are_not() {
    // The same samples through two writers that differ only in `storm_level`: the storm's
    // frame differs in size, the frames before it do not (the one after names how far back
    // its prefix starts, which the storm's size moves), and both stores read back alike.
    let mut sizes = Vec::new();
    let mut read = Vec::new();
    for storm_level in [1, 19] {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = StoreConfig { storm_level, ..StoreConfig::default() };
        let (mut writer, _) = Writer::open(dir.path(), config).expect("open");
        let mut frame_bytes = Vec::new();
        for (seq, n) in [0, 3, 1_000, 3].into_iter().enumerate() {
            let mut s = sample(seq as u64 + 1, 20);
            s.exited = storm_ended(seq as u64, n);
            frame_bytes.push(writer.append(&s).expect("append").frame_bytes);
        }
        drop(writer);
        let mut reader = Reader::open(dir.path()).expect("open");
        let frames = reader.all_frames().expect("frames");
        read.push(frames.iter().map(|f| json(&reader.read(f).expect("reads"))).collect::<Vec<_>>());
        sizes.push(frame_bytes);
    }
    assert_eq!(read[0], read[1]);
    let (fast, slow) = (&sizes[0], &sizes[1]);
    assert_ne!(fast[2], slow[2], "the storm's frame at levels 1 and 19: {fast:?} {slow:?}");
    for i in [0, 1] {
        assert_eq!(fast[i], slow[i], "frame {i} is not a storm's: {fast:?} {slow:?}");
    }
}

#[test]
fn a_storms_key_is_compressed_at_the_storm_level() {
    // A key frame that lists a storm's ended processes, through writers that differ in
    // `storm_level`: it differs in size, and a quiet key does not.
    let mut sizes = Vec::new();
    for storm_level in [1, 19] {
        let dir = tempfile::tempdir().expect("tempdir");
        // A chunk of one frame: every frame is a key.
        let config = StoreConfig { storm_level, chunk_frames: 1, ..StoreConfig::default() };
        let (mut writer, _) = Writer::open(dir.path(), config).expect("open");
        let mut quiet = sample(1, 20);
        quiet.exited = storm_ended(0, 3);
        let mut storm = sample(2, 20);
        storm.exited = storm_ended(1, 1_000);
        let quiet_key = writer.append(&quiet).expect("append");
        let storm_key = writer.append(&storm).expect("append");
        assert!(quiet_key.key_frame && storm_key.key_frame);
        sizes.push((quiet_key.frame_bytes, storm_key.frame_bytes));
    }
    assert_eq!(sizes[0].0, sizes[1].0, "{sizes:?}");
    assert_ne!(sizes[0].1, sizes[1].1, "{sizes:?}");
}
