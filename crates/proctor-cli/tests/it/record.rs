//! `proctor record` as a real child process: SIGKILL at random moments, SIGTERM, damage left
//! in the data directory, and a missing directory.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use proctor_store::{Reader, StoreConfig, Writer};

fn record(dir: &Path, extra: &[&str]) -> Command {
    let mut command = super::proctor_command();
    command.args(["record", "--dir"]).arg(dir).args(["--progress"]).args(extra);
    command
}

/// Every sample of the store, as (unix_ns, seq), decoding each frame.
fn stored(dir: &Path) -> Vec<(u64, u64)> {
    let (samples, report) = stored_around_damage(dir);
    assert!(report.bad_frames.is_empty(), "{report:?}");
    samples
}

/// Every sample that decodes, and the reader's report of what did not.
fn stored_around_damage(dir: &Path) -> (Vec<(u64, u64)>, proctor_store::ReadReport) {
    let mut reader = Reader::open(dir).expect("store opens");
    let frames = reader.all_frames().expect("frames");
    let samples: Vec<(u64, u64)> = frames.iter().filter_map(|f| reader.read(f)).map(|s| (s.unix_ns, s.seq)).collect();
    (samples, reader.report().clone())
}

/// xorshift64*, seeded from the clock and printed, so a failing run can be repeated with
/// `PROCTOR_CRASH_SEED`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn sigkill_at_random_moments_loses_at_most_the_sample_in_flight() {
    let seed = std::env::var("PROCTOR_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1
    });
    eprintln!("PROCTOR_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kept: Vec<(u64, u64)> = Vec::new();
    for round in 0..100 {
        let mut child = record(dir.path(), &["--interval", "5ms"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start recorder");
        let mut pipe = child.stderr.take().expect("piped");
        let mut seen = Vec::new();
        // A third of the rounds kill at any moment from spawn on (often before the store is
        // open); the rest first wait for a sample to be written, so that killing mid-run is
        // covered however slow the machine is, then kill up to ~20 samples later.
        if !rng.next().is_multiple_of(3) {
            let mut byte = [0u8; 1];
            while !seen.ends_with(b"\n") || !String::from_utf8_lossy(&seen).contains("appended ") {
                if pipe.read(&mut byte).expect("read stderr") == 0 {
                    break;
                }
                seen.push(byte[0]);
            }
        }
        std::thread::sleep(Duration::from_millis(rng.next() % 100));
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        pipe.read_to_end(&mut seen).expect("read stderr");
        let stderr = String::from_utf8_lossy(&seen);
        let announced: BTreeSet<(u64, u64)> = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("appended "))
            .filter_map(|l| {
                let (seq, ns) = l.split_once(' ')?;
                Some((ns.parse().ok()?, seq.parse().ok()?))
            })
            .collect();

        // Opening for writing repairs; it must always succeed and never set anything aside.
        let (writer, report) = Writer::open(dir.path(), StoreConfig::default())
            .unwrap_or_else(|e| panic!("round {round} (seed {seed}): store does not open: {e}"));
        drop(writer);
        assert!(report.set_aside.is_empty(), "round {round} (seed {seed}): {report:?}");
        // Everything from earlier rounds is still there and first (headers here; every frame
        // is decoded once at the end), and this round's frames all decode.
        let mut reader = Reader::open(dir.path()).expect("store opens");
        let frames = reader.all_frames().expect("frames");
        let times: Vec<u64> = frames.iter().map(|f| f.unix_ns()).collect();
        assert!(times.len() >= kept.len(), "round {round} (seed {seed}): frames lost");
        assert_eq!(
            &times[..kept.len()],
            &kept.iter().map(|k| k.0).collect::<Vec<_>>()[..],
            "round {round} (seed {seed})"
        );
        let new: Vec<(u64, u64)> =
            frames[kept.len()..].iter().filter_map(|f| reader.read(f)).map(|s| (s.unix_ns, s.seq)).collect();
        assert_eq!(new.len(), frames.len() - kept.len(), "round {round} (seed {seed}): {:?}", reader.report());
        // Every sample the recorder announced survived...
        for sample in &announced {
            assert!(new.contains(sample), "round {round} (seed {seed}): announced {sample:?} lost; stored {new:?}");
        }
        // ...and at most one more (written, killed before announcing) is there.
        assert!(
            new.len() <= announced.len() + 1,
            "round {round} (seed {seed}): {} stored, {} announced",
            new.len(),
            announced.len()
        );
        // The run's samples are its seq 0, 1, 2, … with no hole.
        let seqs: Vec<u64> = new.iter().map(|(_, seq)| *seq).collect();
        assert_eq!(seqs, (0..new.len() as u64).collect::<Vec<_>>(), "round {round} (seed {seed})");
        kept.extend(new);
    }
    assert_eq!(stored(dir.path()), kept, "seed {seed}");
    assert!(kept.len() > 100, "the recorder wrote too little to test anything: {}", kept.len());
}

/// `record --interval 10ms --format json` into `dir`, once it has written its first sample;
/// its stderr, the rest unread.
fn recording(dir: &Path) -> (std::process::Child, std::process::ChildStderr) {
    let mut child = record(dir, &["--interval", "10ms", "--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start recorder");
    let mut stderr = child.stderr.take().expect("piped");
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("appended ") {
        assert_eq!(stderr.read(&mut byte).expect("read"), 1, "ended early: {}", String::from_utf8_lossy(&seen));
        seen.push(byte[0]);
    }
    (child, stderr)
}

#[test]
fn sigterm_stops_recording_and_prints_the_cost() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Once the first sample is written, ask it to stop.
    let (child, _stderr) = recording(dir.path());
    // SAFETY: kill(2) with a pid this test spawned and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{:?}", out.status);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("summary is JSON");
    let samples = summary["samples"].as_u64().expect("samples");
    assert!(samples >= 1);
    assert_eq!(stored(dir.path()).len() as u64, samples);
    assert!(summary["frame_bytes_per_sample"].as_f64().expect("bytes") > 24.0);
    assert!(summary["sample_cpu_seconds_per_sample"].as_f64().is_some());
}

/// One SIGTERM delivered twice in a moment, as `timeout 3 proctor record` does (GNU timeout
/// signals the command and then its process group), stops recording once and still prints the
/// summary (issue 33 item 16): it is not "a second SIGTERM".
#[test]
fn the_same_signal_twice_in_a_moment_is_one_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (child, mut stderr) = recording(dir.path());
    // SAFETY: kill(2) with a pid this test spawned and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    std::thread::sleep(std::time::Duration::from_millis(20));
    // SAFETY: as above; the child cannot have been reaped, only this test waits for it.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut rest = String::new();
    let _ = stderr.read_to_string(&mut rest);
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{:?}: {rest}", out.status);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("summary is JSON");
    assert!(summary["samples"].as_u64() >= Some(1), "{summary}");
}

#[test]
fn a_damaged_middle_file_is_set_aside_reported_and_recording_continues() {
    let dir = tempfile::tempdir().expect("tempdir");
    for _ in 0..3 {
        let out = record(dir.path(), &["--interval", "5ms", "--count", "3"]).output().expect("run");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let before = stored(dir.path());
    assert_eq!(before.len(), 9);
    let mut segments: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segments.sort();
    let middle = &segments[1];
    let mut bytes = std::fs::read(middle).expect("read");
    // Garbage over the second frame's header; the third frame stays intact after it.
    let walk = proctor_store::segment::walk(middle, proctor_store::segment::Check::Headers).expect("walk");
    let at = walk.frames[1].offset as usize;
    bytes[at..at + 4].copy_from_slice(b"JUNK");
    std::fs::write(middle, &bytes).expect("write");

    let out = record(dir.path(), &["--interval", "5ms", "--count", "2"]).output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("set aside") && stderr.contains(".seg.corrupt"), "{stderr}");
    // Readers still read the set-aside file's intact frames, around the one damaged. The third
    // frame is intact, but a delta compressed against the damaged one (record version 3): it
    // is lost with it, and said.
    let (after, report) = stored_around_damage(dir.path());
    assert_eq!(after.len(), 9 - 2 + 2);
    assert_eq!(&after[..4], &before[..4]);
    assert_eq!(&after[4..7], &before[6..9]);
    assert_eq!(report.bad_frames.len(), 1, "{report:?}");
    assert_eq!(report.damaged_segments.len(), 1, "{report:?}");
}

/// A missing directory is created (see below); one whose parent is missing too is a clear
/// error rather than a quiet tree of new directories.
#[test]
fn a_missing_data_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("not-there").join("deeper");
    let out = record(&missing, &["--count", "1"]).output().expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not-there") && stderr.contains("does not exist"), "{stderr}");
}

/// `proctor record` creates its directory (mode 0700); without `--dir` it records where `proctor
/// serve` does, and `replay`, `dump` and `report` read from there with no flag (issue 14 item 15).
#[test]
fn record_creates_its_directory_and_the_readers_default_to_serves() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().expect("tempdir");
    let state = home.path().join("state");
    let run = |args: &[&str]| {
        super::proctor_command()
            .args(args)
            .env("HOME", home.path())
            .env("XDG_STATE_HOME", &state)
            .output()
            .expect("run proctor")
    };
    let out = run(&["record", "--interval", "50ms", "--count", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let default = state.join("proctor");
    assert_eq!(std::fs::metadata(&default).expect("created").permissions().mode() & 0o777, 0o700);
    assert_eq!(stored(&default).len(), 3);
    for args in [
        &["replay", "--format", "json"][..],
        &["dump", "host"][..],
        &["report", "--from", "1h ago", "--format", "json"][..],
    ] {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(!out.stdout.is_empty(), "{args:?} printed nothing");
    }
    // An explicit directory is created if its parent exists, and refused with the reason if not.
    let given = home.path().join("given");
    let out = run(&["record", "--dir", given.to_str().expect("utf-8"), "--interval", "50ms", "--count", "1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::metadata(&given).expect("created").permissions().mode() & 0o777, 0o700);
    let deep = home.path().join("no/such/parent");
    let out = run(&["record", "--dir", deep.to_str().expect("utf-8"), "--count", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("its parent") && err.contains("does not exist"), "{err}");
    // A reader pointed at nothing says so.
    let out = run(&["replay", "--dir", home.path().join("nothing").to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing was recorded there"));
}

/// Every flag is decided before record creates its store (issue 31 item 5): a groups rules file
/// with a mistake stops it with the rule's line and leaves no directory behind.
#[test]
fn a_mistaken_groups_file_stops_record_before_it_creates_its_store() {
    let home = tempfile::tempdir().expect("tempdir");
    let rules = home.path().join("groups.yml");
    std::fs::write(&rules, "process_names:\n  - comm: [a]\n    bogus: 1\n").expect("write rules");
    let dir = home.path().join("store");
    let out = record(&dir, &["--count", "1", "--groups", rules.to_str().expect("utf-8")]).output().expect("run record");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "recorded with a bad groups file: {stderr}");
    assert!(stderr.contains("bogus"), "{stderr}");
    assert!(!dir.exists(), "record created its store before refusing the groups file: {stderr}");
}
