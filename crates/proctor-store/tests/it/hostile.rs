//! Hostile files (issue 15, and issue 33's rollup frame): hand-built frames with valid CRCs, files that are not segments,
//! unreadable and damaged segments, and a full disk. Each attack is bounded in time, and the
//! ones that used to cost gigabytes run in a child process under an address-space limit, so a
//! regression fails the test instead of taking the machine's memory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use proctor_store::codec::{compress_alone, Chained, RECORD_VERSION, RECORD_VERSION_2};
use proctor_store::frame::{encode_header, FrameKind};
use proctor_store::rollup::ROLLUP_VERSION_1;
use proctor_store::{Reader, StoreConfig, Writer};

use super::{sample, seqs, small_config, T0};

/// Set in the child process [`in_child`] starts; a directory prepared for it, when there is one.
const CHILD_ENV: &str = "PROCTOR_STORE_TEST_CHILD";

/// Runs the test `name` of this binary again in a child process (whose test body then caps its
/// memory, or reads what the parent prepared), and fails unless the child passes within a
/// minute. Returns `false` in the child (the caller then runs the attack itself), `true` in the
/// parent.
fn in_child_under_memory_limit(name: &str) -> bool {
    in_child(name, None, false)
}

/// [`in_child`] for a test that reads `dir` as a user who is not root, so that a file of mode
/// 000 is unreadable (when this runs as root, the child is `nobody`, as `setpriv` makes it;
/// otherwise the test is unprivileged already and runs in this process). Returns the directory
/// where the caller reads, or `None` in a parent whose child passed.
fn read_unprivileged(name: &str, dir: &Path) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        return Some(PathBuf::from(dir));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(dir.to_owned());
    }
    in_child(name, Some(dir), true);
    None
}

fn in_child(name: &str, dir: Option<&Path>, unprivileged: bool) -> bool {
    if std::env::var_os(CHILD_ENV).is_some() {
        return false;
    }
    let exe = std::env::current_exe().expect("test binary");
    let mut command = if unprivileged {
        let mut setpriv = Command::new("setpriv");
        setpriv.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(exe);
        setpriv
    } else {
        Command::new(exe)
    };
    let mut child = command
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir.map_or_else(|| "1".into(), |d| d.as_os_str().to_owned()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the child");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{name}: the child took over a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("output");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(status.success(), "{name} in a child under a memory limit: {status:?}\n{text}");
    assert!(text.contains("1 passed"), "{name}: the child ran no test\n{text}");
    true
}

/// Caps this process's address space at what it maps now plus `extra` bytes: an allocation
/// past it fails (and Rust aborts) instead of succeeding.
fn limit_address_space(extra: u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let vm_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmSize");
    let limit = vm_kb * 1024 + extra;
    let rlimit = libc::rlimit { rlim_cur: limit, rlim_max: limit };
    // SAFETY: setrlimit with a valid pointer to an initialized struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &rlimit) }, 0, "setrlimit");
}

/// The segment of a store of one chunk's key frame (`rows` processes) and nothing else.
fn store_with_a_key(dir: &Path, rows: u32) -> PathBuf {
    let (mut writer, _) = Writer::open(dir, small_config()).expect("open");
    writer.append(&sample(0, rows)).expect("key");
    writer.active_segment().expect("a segment").to_owned()
}

/// Appends a frame with a valid CRC to `segment`: `payload` as given, at time `unix_ns`.
/// Returns the frame's size.
fn append_frame(segment: &Path, unix_ns: u64, kind: FrameKind, version: u8, payload: &[u8]) -> usize {
    use std::io::Write;
    let mut frame = encode_header(unix_ns, kind, version, payload).to_vec();
    frame.extend_from_slice(payload);
    let mut file = std::fs::OpenOptions::new().append(true).open(segment).expect("open segment");
    file.write_all(&frame).expect("append");
    frame.len()
}

/// Regression (issue 15 item 2): a version-2 delta may keep each of its base's rows once. A
/// 3 KB delta that keeps the key's 20 rows 150,000 times over decoded into 3 million rows
/// (~1.6 GB), and `dump` aborted (the was 647 bytes; this one carries noise to get past
/// the bound on how far a record may expand, which alone refuses the 647-byte one). Now taking more rows than the base has fails while the rows
/// are parsed, reported like any bad frame, and the frames around it still read. The child
/// runs with 512 MiB of address space to spare.
#[test]
fn a_delta_that_keeps_its_base_rows_again_and_again_is_refused_cheaply() {
    if in_child_under_memory_limit("hostile::a_delta_that_keeps_its_base_rows_again_and_again_is_refused_cheaply") {
        return;
    }
    // 2 KB of noise in the rest patch, so that the frame gets past the bound on how far a
    // record may expand (`codec::MAX_EXPANSION`) and only the rows bound stands in the way.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let noise: String = (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from_digit((state % 16) as u32, 16).expect("a hex digit")
        })
        .collect();
    limit_address_space(512 << 20);
    // As a version-2 delta (compressed alone) and as a version-3 one (behind its chain prefix).
    for version in [RECORD_VERSION_2, RECORD_VERSION] {
        let dir = tempfile::tempdir().expect("tempdir");
        let segment = store_with_a_key(dir.path(), 20);
        let at = std::fs::metadata(&segment).expect("meta").len();
        // The key is the segment's first frame, after its 8-byte magic.
        let mut record = format!("{{\"base\":{},\"rest\":{{\"noise\":[\"{noise}\"]}},\"rows\":[", at - 8);
        for i in 0..150_000 {
            record.push_str(if i == 0 { "{\"k\":[0,20]}" } else { ",{\"k\":[0,20]}" });
        }
        record.push_str("]}");
        let mut payload = compress_alone(3, record.as_bytes()).expect("compress");
        if version == RECORD_VERSION {
            payload = Chained::encode((at - 8) as u32, false, &payload);
        }
        let frame_bytes = append_frame(&segment, T0 + 1_000_000_000, FrameKind::Delta, version, &payload);
        assert!(frame_bytes < 4096, "the hostile frame is small: {frame_bytes} bytes");

        let mut reader = Reader::open(dir.path()).expect("reader");
        let frames = reader.all_frames().expect("frames");
        assert_eq!(frames.len(), 2);
        assert_eq!(reader.read(&frames[0]).map(|s| s.processes.len()), Some(20));
        for read in [Reader::read, Reader::read_lean, Reader::read_host] {
            assert!(read(&mut reader, &frames[1]).is_none(), "the hostile version-{version} delta decoded");
        }
        let why = &reader.report().bad_frames[0].2;
        assert!(why.contains("more rows than its base has"), "version {version}: {why}");
    }
}

/// A version-3 delta finds the frames before it by the distance its payload starts with. A
/// distance of 0, one that leaves its chunk or lands inside a frame, a frame before it that is
/// not a version-3 delta, a prefix it says it was compressed with that is not there (after the
/// key), and flags no writer sets: each is refused with the frame, reported, and the key still
/// reads. Nothing loops: every step back is a positive distance.
#[test]
fn a_chained_delta_whose_way_back_is_wrong_is_refused() {
    // (case, payload from the delta's offset, the frame's before it and the compressed record,
    // what the report says); the key is at 8, after the segment's magic.
    type Payload = fn(u64, u64, &[u8]) -> Vec<u8>;
    let cases: [(&str, Payload, &str); 6] = [
        ("no distance", |_, _, z| Chained::encode(0, false, z), "does not start with where"),
        (
            "back past the key",
            |at, _, z| Chained::encode((at - 7) as u32, false, z),
            "not an earlier frame of its chunk",
        ),
        ("back into the key", |at, _, z| Chained::encode((at - 11) as u32, false, z), "bad base frame header"),
        ("a prefix after the key", |at, _, z| Chained::encode((at - 8) as u32, true, z), "previous record is missing"),
        (
            "unknown flags",
            |at, _, z| [&((at - 8) as u32).to_le_bytes()[..], &[2], z].concat(),
            "does not start with where",
        ),
        (
            "a statsd frame before it",
            |at, before, z| Chained::encode((at - before) as u32, false, z),
            "not a version-3 delta",
        ),
    ];
    for (name, payload, expected) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let segment = store_with_a_key(dir.path(), 20);
        let mut before = 8;
        if name == "a statsd frame before it" {
            before = std::fs::metadata(&segment).expect("meta").len();
            let event = compress_alone(3, b"{}").expect("compress");
            append_frame(&segment, T0 + 500_000_000, FrameKind::Statsd, 1, &event);
        }
        let at = std::fs::metadata(&segment).expect("meta").len();
        let record = format!("{{\"base\":{},\"rest\":{{}},\"rows\":[{{\"k\":[0,20]}}]}}", at - 8);
        let z = compress_alone(3, record.as_bytes()).expect("compress");
        append_frame(&segment, T0 + 1_000_000_000, FrameKind::Delta, RECORD_VERSION, &payload(at, before, &z));
        let mut reader = Reader::open(dir.path()).expect("reader");
        let frames = reader.all_frames().expect("frames");
        let samples: Vec<_> = frames.iter().filter(|f| f.frame.header.kind.is_sample()).collect();
        assert_eq!(samples.len(), 2, "{name}");
        assert!(reader.read(samples[1]).is_none(), "{name}: the delta decoded");
        let why = &reader.report().bad_frames[0].2;
        assert!(why.contains(expected), "{name}: {why}");
        assert_eq!(reader.read(samples[0]).map(|s| s.processes.len()), Some(20), "{name}");
    }
}

/// A zstd frame says how large it decompresses, and the decompressor allocated what it said (up
/// to 1 GiB) before finding out: a 17-byte payload claiming 900 MiB cost 900 MiB of address
/// space per read. A claim is now checked against what the compressed bytes can hold first.
#[test]
fn a_compressed_record_that_claims_a_huge_size_is_refused_before_allocating() {
    if in_child_under_memory_limit("hostile::a_compressed_record_that_claims_a_huge_size_is_refused_before_allocating")
    {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let segment = store_with_a_key(dir.path(), 20);
    // A zstd frame: magic, a descriptor for "single segment, 8-byte content size", the size,
    // then one empty raw block marked last.
    let mut payload = 0xFD2F_B528u32.to_le_bytes().to_vec();
    payload.push(0b1110_0000);
    payload.extend_from_slice(&(900u64 << 20).to_le_bytes());
    payload.extend_from_slice(&[1, 0, 0]);
    append_frame(&segment, T0 + 1_000_000_000, FrameKind::Key, RECORD_VERSION, &payload);
    append_frame(&segment, T0 + 2_000_000_000, FrameKind::Statsd, 1, &payload);

    limit_address_space(512 << 20);
    let mut reader = Reader::open(dir.path()).expect("reader");
    let frames = reader.all_frames().expect("frames");
    assert_eq!(frames.len(), 2);
    assert!(reader.read(&frames[1]).is_none());
    let events = reader.event_frames(0, u64::MAX).expect("events");
    assert!(reader.read_event(&events[0]).is_none());
    let why = &reader.report().bad_frames[0].2;
    assert!(why.contains("claims"), "{why}");
    assert_eq!(seqs(&frames.iter().filter_map(|f| reader.read(f)).collect::<Vec<_>>()), vec![0]);
}

/// The writer's side of the same bound: a record that compresses past `codec::MAX_EXPANSION`
/// (3000 processes alike even in their pid: 1,237×) would be refused by every reader, so it is
/// refused when written, said as an error, instead of stored unreadable.
#[test]
fn a_record_no_reader_would_decompress_is_not_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut writer, _) = Writer::open(dir.path(), small_config()).expect("open");
    let mut alike = sample(0, 3000);
    for p in &mut alike.processes {
        *p = alike_row(p);
    }
    let err = writer.append(&alike).expect_err("refused");
    assert!(err.to_string().contains("too large to be read back"), "{err}");
    writer.append(&sample(1, 20)).expect("the next sample is written");
    drop(writer);
    assert_eq!(seqs(&super::read_all(dir.path())), vec![1]);
}

/// A version-1 rollup record (still read) of `names` empty names over `rows` minute rows, every column idle: flags
/// saying every row holds it and its streams are all zero, an exponent and a base (3 bytes, the
/// same whatever the rows).
fn idle_rollup_record(names: u64, rows: u64) -> Vec<u8> {
    use proctor_store::rollup::varint;
    let mut record = Vec::new();
    varint(&mut record, 60);
    varint(&mut record, names);
    record.extend(std::iter::repeat_n(0u8, names as usize));
    varint(&mut record, rows);
    for i in 0..rows {
        varint(&mut record, if i == 0 { T0 / 1_000_000_000 } else { 60 });
        varint(&mut record, 60);
    }
    for _ in 0..names {
        record.extend_from_slice(&[0x3f, 0, 0]);
    }
    record
}

/// A minute block of two series over an hour, as the roller writes one.
fn real_block(start_s: u64) -> proctor_model::RollupBlock {
    let stat = |v: f64| Some(proctor_model::Stat { min: v, mean: v, max: v + 1.0, last: v, n: 60 });
    proctor_model::RollupBlock {
        span_s: 60,
        names: vec!["host.cpu.user".into(), "group.web.rss".into()],
        rows: (0..60)
            .map(|m| proctor_model::RollupRow {
                start_unix_s: start_s + m * 60,
                span_s: 60,
                samples: 60,
                values: vec![stat(m as f64), stat(1e8)],
            })
            .collect(),
    }
}

/// Regression (issue 33 item 5): a rollup record of idle columns costs 3 bytes a column however
/// many rows it claims, so a 76-byte `rollup-1m` frame claiming 1,024 names × 16,384 rows
/// decoded into 16.7 million cells (~800 MB; `dump rollup` took 92 s, and `record`'s roller
/// decoded it unasked). The claim is now held to what the record's bytes can hold before a row
/// is built: the frame is a bad frame, said like any other, and the block before it reads. The
/// child runs with 128 MiB of address space to spare.
#[test]
fn a_rollup_frame_claiming_more_cells_than_its_bytes_hold_is_refused_cheaply() {
    if in_child_under_memory_limit("hostile::a_rollup_frame_claiming_more_cells_than_its_bytes_hold_is_refused_cheaply")
    {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let start_s = T0 / 1_000_000_000;
    let (mut writer, _) = Writer::open(dir.path(), small_config()).expect("open");
    writer.append_event(T0, &proctor_store::Event::Rollup(real_block(start_s))).expect("a real block");
    let segment = writer.active_segment().expect("a segment").to_owned();
    drop(writer);
    let payload = compress_alone(3, &idle_rollup_record(1024, 16_384)).expect("compress");
    let frame_bytes = append_frame(&segment, T0 + 3600 * 1_000_000_000, FrameKind::Rollup, ROLLUP_VERSION_1, &payload);
    assert!(frame_bytes < 128, "the hostile frame is small: {frame_bytes} bytes");

    limit_address_space(128 << 20);
    let mut reader = Reader::open(dir.path()).expect("reader");
    let frames = reader.event_frames(0, u64::MAX).expect("frames");
    assert_eq!(frames.len(), 2);
    match reader.read_event(&frames[0]) {
        Some(proctor_store::Event::Rollup(block)) => {
            assert_eq!((block.names, block.rows.len()), (real_block(start_s).names, 60));
        }
        other => panic!("the real block: {other:?}"),
    }
    assert!(reader.read_event(&frames[1]).is_none(), "the hostile block decoded");
    let err = reader.try_read_event(&frames[1]).expect_err("refused");
    assert!(err.to_string().contains("more cells (names × rows) than the record's bytes can hold"), "{err}");
    let bad = &reader.report().bad_frames;
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].2.contains("more cells"), "{bad:?}");
}

/// The writer's side: a block no reader would decode is refused when written, said as an
/// error, instead of stored unreadable (the tiers' blocks, 60 or 24 rows, always fit).
#[test]
fn a_rollup_block_no_reader_would_decode_is_not_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut writer, _) = Writer::open(dir.path(), small_config()).expect("open");
    let idle = Some(proctor_model::Stat { min: 0.0, mean: 0.0, max: 0.0, last: 0.0, n: 60 });
    let dense = proctor_model::RollupBlock {
        span_s: 60,
        names: vec![String::new(); 64],
        rows: (0..1024)
            .map(|m| proctor_model::RollupRow { start_unix_s: m * 60, span_s: 60, samples: 60, values: vec![idle; 64] })
            .collect(),
    };
    let err = writer.append_event(T0, &proctor_store::Event::Rollup(dense)).expect_err("refused");
    assert!(err.to_string().contains("more cells than a reader would decode"), "{err}");
    let start_s = T0 / 1_000_000_000;
    writer.append_event(T0 + 1, &proctor_store::Event::Rollup(real_block(start_s))).expect("the next block is written");
    drop(writer);
    let mut reader = Reader::open(dir.path()).expect("reader");
    let frames = reader.event_frames(0, u64::MAX).expect("frames");
    assert_eq!(frames.len(), 1);
}

fn alike_row(p: &proctor_model::ProcessSample) -> proctor_model::ProcessSample {
    proctor_model::ProcessSample {
        pid: 7,
        ppid: 0,
        start_ticks: 0,
        utime_ticks: 0,
        stime_ticks: 0,
        cutime_ticks: None,
        cstime_ticks: None,
        minflt: 0,
        resident_bytes: Some(0),
        comm: std::sync::Arc::from("x"),
        cmdline: Some(std::sync::Arc::from(vec!["x".to_string()])),
        ..p.clone()
    }
}

/// Runs `f` on a thread and waits at most 10 s for it: a store call that waits on a FIFO fails
/// the test instead of hanging it. On a timeout, the FIFOs in `fifos` are opened for writing
/// (which wakes an `open()` waiting to read them) before the test fails.
fn promptly<T: Send + 'static>(what: &str, fifos: &[PathBuf], f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(f());
    });
    match result.recv_timeout(Duration::from_secs(10)) {
        Ok(value) => value,
        Err(_) => {
            for fifo in fifos {
                use std::os::unix::fs::OpenOptionsExt;
                let _ = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(fifo);
            }
            panic!("{what} did not return within 10 s");
        }
    }
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL");
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// Regression (issue 15 item 4): a FIFO named like a segment made `Writer::open` (and so
/// `record` and `serve`) and every reader wait in `open()` for a writer that never came. Now
/// store files are opened non-blocking and only regular files are accepted: the FIFO (and a
/// directory, and a FIFO named like a set-aside segment) is skipped, left alone, and said.
#[test]
fn a_fifo_or_a_directory_named_like_a_segment_is_skipped_and_said_without_waiting() {
    let dir = tempfile::tempdir().expect("tempdir");
    super::write(dir.path(), small_config(), 0..3);
    let fifo = dir.path().join(proctor_store::segment::segment_name(T0 + 10 * 1_000_000_000));
    let corrupt_fifo = dir.path().join(format!("{}.corrupt", proctor_store::segment::segment_name(T0 + 1)));
    let directory = dir.path().join(proctor_store::segment::segment_name(T0 + 20 * 1_000_000_000));
    mkfifo(&fifo);
    mkfifo(&corrupt_fifo);
    std::fs::create_dir(&directory).expect("mkdir");
    let fifos = vec![fifo.clone(), corrupt_fifo.clone()];

    let path = dir.path().to_owned();
    let (report, seqs_written) = promptly("Writer::open", &fifos, move || {
        let (mut writer, report) = Writer::open(&path, small_config()).expect("open");
        let seqs_written: Vec<u64> = (3..5).filter(|&seq| writer.append(&sample(seq, 20)).is_ok()).collect();
        (report, seqs_written)
    });
    assert_eq!(seqs_written, vec![3, 4], "recording goes on");
    let skipped: Vec<&PathBuf> = report.skipped.iter().map(|(p, _)| p).collect();
    assert_eq!(skipped, vec![&corrupt_fifo, &fifo, &directory], "{report:?}");
    assert!(report.skipped[1].1.contains("a FIFO"), "{report:?}");
    assert!(report.skipped[2].1.contains("a directory"), "{report:?}");

    let path = dir.path().to_owned();
    let (got, problems) = promptly("Reader", &fifos, move || {
        let mut reader = Reader::open(&path).expect("reader");
        let frames = reader.all_frames().expect("frames");
        let got: Vec<u64> = frames.iter().filter_map(|f| reader.read(f)).map(|s| s.seq).collect();
        (got, reader.report().problems())
    });
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems.contains(&format!("skipped {}: a FIFO, not a segment file", fifo.display())), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains(&directory.display().to_string()) && p.contains("a directory")));

    // A FIFO named `lock` is refused at once, with what it is.
    let locked = tempfile::tempdir().expect("tempdir");
    let lock = locked.path().join("lock");
    mkfifo(&lock);
    let path = locked.path().to_owned();
    let err = promptly("Writer::open on a FIFO lock", std::slice::from_ref(&lock), move || {
        Writer::open(&path, small_config()).expect_err("a FIFO is no lock file").to_string()
    });
    assert_eq!(err, format!("{} is a FIFO, not a regular file", lock.display()));
}

/// Regression (issue 15 item 7): one segment the reader may not open made `dump` and `replay`
/// fail with no rows. Now it is skipped, said with its size and about how many samples that is,
/// and the rest is read.
#[test]
fn an_unreadable_segment_is_skipped_said_and_the_rest_is_read() {
    use std::os::unix::fs::PermissionsExt;
    const NAME: &str = "hostile::an_unreadable_segment_is_skipped_said_and_the_rest_is_read";
    let prepared = if std::env::var_os(CHILD_ENV).is_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        for seqs in [0..3, 3..6, 6..9] {
            super::write(dir.path(), small_config(), seqs);
        }
        let middle = super::segments(dir.path())[1].clone();
        // Readable by `nobody` but for the middle segment.
        for entry in std::fs::read_dir(dir.path()).expect("list") {
            let path = entry.expect("entry").path();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::set_permissions(&middle, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        Some(dir)
    } else {
        None
    };
    let Some(dir) = read_unprivileged(NAME, prepared.as_ref().map_or(Path::new("."), |d| d.path())) else { return };
    let mut reader = Reader::open(&dir).expect("reader");
    let frames = reader.all_frames().expect("frames");
    let got: Vec<u64> = frames.iter().filter_map(|f| reader.read(f)).map(|s| s.seq).collect();
    assert_eq!(got, vec![0, 1, 2, 6, 7, 8]);
    let report = reader.report();
    let middle = super::segments(&dir)[1].clone();
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert_eq!(report.skipped[0].path, middle);
    let problems = report.problems();
    assert!(
        problems[0]
            .starts_with(&format!("skipped {}: cannot open: Permission denied (os error 13); its ", middle.display()))
            && problems[0].ends_with("bytes (about 3 samples) are not read"),
        "{problems:?}"
    );
    assert_eq!(report.summary().as_deref(), Some("about 3 samples are in 1 skipped file"));
}

/// Regression (issue 15 item 7): a sealed segment whose magic was overwritten (60 samples) was
/// dropped whole with no word, by readers and, once set aside by the next writer, for good.
/// Now a reader reads on from the first intact frame: all 60 are read, before and after it is
/// set aside, and the damage is said (no sample lost).
#[test]
fn a_segment_with_bad_magic_is_read_from_its_first_intact_frame_before_and_after_it_is_set_aside() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StoreConfig { chunk_frames: 8, anchor_frames: 3, ..StoreConfig::default() };
    super::write(dir.path(), config.clone(), 0..60);
    super::write(dir.path(), config.clone(), 60..62);
    let first = super::segments(dir.path())[0].clone();
    let mut bytes = std::fs::read(&first).expect("read");
    bytes[..8].copy_from_slice(b"garbage!");
    std::fs::write(&first, &bytes).expect("write");

    let read = |dir: &Path| {
        let mut reader = Reader::open(dir).expect("reader");
        let frames = reader.all_frames().expect("frames");
        let got: Vec<u64> = frames.iter().filter_map(|f| reader.read(f)).map(|s| s.seq).collect();
        (got, reader.report().clone())
    };
    let (got, report) = read(dir.path());
    assert_eq!(got, (0..62).collect::<Vec<_>>());
    assert_eq!(report.damaged_segments.len(), 1, "{report:?}");
    assert_eq!(
        report.problems(),
        vec![format!(
            "{}: bad segment magic at offset 0: skipped 8 bytes (no sample lost) and read on after them",
            first.display()
        )]
    );

    let (_, opened) = Writer::open(dir.path(), config).expect("open");
    assert_eq!(opened.set_aside.len(), 1, "{opened:?}");
    let (got, report) = read(dir.path());
    assert_eq!(got, (0..62).collect::<Vec<_>>(), "the set-aside file's frames are still read");
    assert_eq!(report.set_aside_read, vec![opened.set_aside[0].moved_to.clone()]);
    assert!(report.problems().iter().any(|p| p.ends_with("was set aside as damaged; its intact frames were read")));
}

/// Regression (issue 15 item 7): an older segment cut short (inside its 8th frame) lost the
/// samples after the cut with exit 0 and no word. They are gone; now the reader says so.
#[test]
fn a_sealed_segment_cut_short_says_what_it_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    super::write(dir.path(), small_config(), 0..10);
    super::write(dir.path(), small_config(), 10..12);
    let first = super::segments(dir.path())[0].clone();
    let walk = proctor_store::segment::walk(&first, proctor_store::segment::Check::Headers).expect("walk");
    let cut = walk.frames[7].offset + 30;
    let file = std::fs::OpenOptions::new().write(true).open(&first).expect("open");
    file.set_len(cut).expect("truncate");
    let mut reader = Reader::open(dir.path()).expect("reader");
    let frames = reader.all_frames().expect("frames");
    let got: Vec<u64> = frames.iter().filter_map(|f| reader.read(f)).map(|s| s.seq).collect();
    assert_eq!(got, vec![0, 1, 2, 3, 4, 5, 6, 10, 11]);
    assert_eq!(
        reader.report().problems(),
        vec![format!(
            "{}: a frame cut short at offset {}: the last 30 bytes hold no whole frame (1 sample lost)",
            first.display(),
            walk.frames[7].offset
        )]
    );
    assert_eq!(reader.report().summary().as_deref(), Some("1 sample could not be read"));
    // The newest segment's torn tail is a write in flight, not a loss.
    let newest = super::segments(dir.path())[1].clone();
    let len = std::fs::metadata(&newest).expect("meta").len();
    std::fs::OpenOptions::new().write(true).open(&newest).expect("open").set_len(len - 5).expect("truncate");
    let mut reader = Reader::open(dir.path()).expect("reader");
    let frames = reader.all_frames().expect("frames");
    assert_eq!(frames.len(), 7 + 1);
    assert_eq!(reader.report().damaged_segments.len(), 1, "{:?}", reader.report());
}

/// A reader meets the same bad frame and damaged segment once per range it reads; the report
/// holds each once (the history's `bad_frames` said 104 for a store with 52).
#[test]
fn each_problem_is_noted_once_however_often_it_is_met() {
    let dir = tempfile::tempdir().expect("tempdir");
    super::write(dir.path(), small_config(), 0..4);
    super::write(dir.path(), small_config(), 4..6);
    let first = super::segments(dir.path())[0].clone();
    let walk = proctor_store::segment::walk(&first, proctor_store::segment::Check::Headers).expect("walk");
    let mut bytes = std::fs::read(&first).expect("read");
    bytes[walk.frames[2].offset as usize + 30] ^= 1;
    let len = bytes.len();
    std::fs::write(&first, &bytes[..len - 3]).expect("write");
    let mut reader = Reader::open(dir.path()).expect("reader");
    for _ in 0..3 {
        let frames = reader.all_frames().expect("frames");
        for f in &frames {
            let _ = (reader.read(f), reader.read_lean(f), reader.read_host(f));
        }
    }
    let report = reader.report();
    assert_eq!((report.bad_frames.len(), report.damaged_segments.len()), (1, 1), "{report:?}");
    assert_eq!(report.samples_lost(), 2);
}

/// A tmpfs of `kib` KiB on a temporary directory, unmounted when dropped; `None` unless this
/// runs as root and `mount` works (and `PROCTOR_STORE_TEST_NO_MOUNT` is unset).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(kib: u64) -> Option<Tmpfs> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || std::env::var_os("PROCTOR_STORE_TEST_NO_MOUNT").is_some() {
            return None;
        }
        let dir = tempfile::tempdir().ok()?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k,mode=0700"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then_some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// Fills the filesystem of `dir` with `name` until a write fails for want of space.
fn fill(dir: &Path, name: &str) -> PathBuf {
    use std::io::Write;
    let path = dir.join(name);
    let mut file = std::fs::File::create(&path).expect("filler");
    let block = vec![0x5au8; 4096];
    while file.write_all(&block).is_ok() {}
    let _ = file.sync_all();
    path
}

fn seg_files(dir: &Path) -> Vec<(PathBuf, u64)> {
    super::segments(dir).into_iter().map(|p| (p.clone(), std::fs::metadata(&p).expect("meta").len())).collect()
}

/// 40 s apart: past the longest backoff, so each append tries the disk.
const APART: u64 = 40 * 1_000_000_000;

fn at(seq: u64) -> proctor_model::Sample {
    let mut s = sample(seq, 20);
    s.unix_ns = T0 + seq * APART;
    s
}

/// Regression (issue 15 item 8): on a full disk every failed write left a 0-byte `.seg` behind
/// (`serve` made 28 in 5.6 s at 200 ms). A segment file is now created by the write of its first
/// frame and removed if that fails; a failed write to a segment is cut back and the next one
/// goes into the same segment; and after a failure the writer waits (1 s, doubling to 32 s, in
/// the samples' time) before it tries the disk again.
#[test]
fn a_full_disk_leaves_no_trail_and_writing_resumes_in_the_same_segment() {
    const NAME: &str = "hostile::a_full_disk_leaves_no_trail_and_writing_resumes_in_the_same_segment";
    if std::env::var_os(CHILD_ENV).is_some() {
        return full_file_size_limit_leaves_no_trail();
    }
    let Some(fs) = Tmpfs::mount(256) else {
        // Not root (or no mount): a file size limit makes every write fail instead, in a child.
        in_child(NAME, None, false);
        return;
    };
    let store = fs.path().join("store");
    std::fs::create_dir(&store).expect("mkdir");
    let filler = fill(fs.path(), "filler");
    let (mut writer, _) = Writer::open(&store, small_config()).expect("a writer opens on a full disk");
    // Full from the start: 30 samples, 30 failed writes, no file.
    for seq in 0..30 {
        let err = writer.append(&at(seq)).expect_err("the disk is full");
        assert!(err.to_string().contains("No space left on device"), "{err}");
    }
    assert_eq!(seg_files(&store), vec![], "no segment without a frame");
    // Within the backoff, the disk is not tried: the error says why and when.
    let mut soon = at(29);
    soon.unix_ns += 1_000_000;
    let err = writer.append(&soon).expect_err("backing off").to_string();
    assert!(err.contains("the next try is in 32.0 s") && err.contains("No space left"), "{err}");

    // Space again: the next sample makes the segment.
    std::fs::remove_file(&filler).expect("free");
    writer.append(&at(30)).expect("written");
    let filler = fill(fs.path(), "filler");
    // Full in the middle of a segment: the page the segment ends in may take a frame or two.
    let mut written = vec![30];
    let mut failed = 0;
    for seq in 31..100 {
        match writer.append(&at(seq)) {
            Ok(_) if failed == 0 => written.push(seq),
            Ok(_) => panic!("sample {seq} written on a full disk"),
            Err(e) => {
                assert!(e.to_string().contains("No space left on device"), "{e}");
                failed += 1;
                if failed == 30 {
                    break;
                }
            }
        }
    }
    assert_eq!(failed, 30);
    let files = seg_files(&store);
    assert_eq!(files.len(), 1, "one segment after 30 failed writes: {files:?}");
    std::fs::remove_file(&filler).expect("free");
    let next = written.last().expect("one") + 31;
    writer.append(&at(next)).expect("written again");
    written.push(next);
    assert_eq!(writer.stats().segments_created, 1);
    drop(writer);
    assert_eq!(seg_files(&store).len(), 1, "the same segment");
    let mut reader = Reader::open(&store).expect("reader");
    let frames = reader.all_frames().expect("frames");
    let got: Vec<u64> = frames.iter().filter_map(|f| reader.read(f)).map(|s| s.seq).collect();
    assert_eq!(got, written, "{:?}", reader.report());
    assert!(reader.report().is_empty(), "{:?}", reader.report());
    let (_, opened) = Writer::open(&store, small_config()).expect("reopens");
    assert!(opened.repaired.is_empty() && opened.set_aside.is_empty(), "{opened:?}");
}

/// The same attack without a tmpfs: a file size limit of 0 (SIGXFSZ ignored) fails every write
/// with EFBIG; 30 samples must leave no file.
fn full_file_size_limit_leaves_no_trail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut writer, _) = Writer::open(dir.path(), small_config()).expect("open");
    let limit = libc::rlimit { rlim_cur: 0, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: plain libc calls with valid arguments; this child process runs one test.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    for seq in 0..30 {
        let err = writer.append(&at(seq)).expect_err("no write may grow a file");
        assert!(err.to_string().contains("File too large"), "{err}");
    }
    assert_eq!(seg_files(dir.path()), vec![], "no segment without a frame");
    let limit = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: as above.
    unsafe { assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0) };
    writer.append(&at(30)).expect("written");
    assert_eq!(seg_files(dir.path()).len(), 1);
}

/// Damage in the middle of a segment costs the frames it hit, not the rest of the file: the
/// reader reads on from the next intact frame and counts what the stretch held.
#[test]
fn damage_in_the_middle_of_a_segment_costs_only_the_frames_it_hit() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Version 2, whose deltas need only their anchors: what is lost here is what the walk
    // lost. (A version-3 delta needs every frame before it in its chunk: see
    // `damage_in_a_chained_delta_loses_the_rest_of_its_chunk_only`.)
    let config = StoreConfig { record_version: RECORD_VERSION_2, ..small_config() };
    super::write(dir.path(), config.clone(), 0..8);
    super::write(dir.path(), config, 8..9);
    let first = super::segments(dir.path())[0].clone();
    let walk = proctor_store::segment::walk(&first, proctor_store::segment::Check::Headers).expect("walk");
    let mut bytes = std::fs::read(&first).expect("read");
    // Frame 5's header overwritten (a delta: only it is lost), and 12 bytes inserted before
    // frame 2 (no frame lost, but the walk must find frame 2 again).
    let five = walk.frames[5].offset as usize;
    bytes[five..five + 8].copy_from_slice(b"garbage!");
    let two = walk.frames[2].offset as usize;
    bytes.splice(two..two, *b"JUNKJUNKJUNK");
    std::fs::write(&first, &bytes).expect("write");
    let mut reader = Reader::open(dir.path()).expect("reader");
    let frames = reader.all_frames().expect("frames");
    let got: Vec<u64> = frames.iter().filter_map(|f| reader.read(f)).map(|s| s.seq).collect();
    // Frames 2 and 3 are deltas whose base distance now spans the 12 inserted bytes: they name
    // no frame and are skipped as bad frames, said with why.
    assert_eq!(got, vec![0, 1, 4, 6, 7, 8], "{:?}", reader.report());
    let report = reader.report();
    let lost: Vec<(u64, u64)> =
        report.damaged_segments.iter().map(|d| (d.damage.offset, d.damage.frames_lost)).collect();
    assert_eq!(lost, vec![(two as u64, 0), (five as u64 + 12, 1)], "{report:?}");
    assert_eq!(report.bad_frames.len(), 2, "{report:?}");
    assert_eq!(report.summary().as_deref(), Some("3 samples could not be read"));
}
