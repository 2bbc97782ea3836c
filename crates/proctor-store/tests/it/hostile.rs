//! Hostile files (issue 15): hand-built frames with valid CRCs, files that are not segments,
//! unreadable and damaged segments, and a full disk. Each attack is bounded in time, and the
//! ones that used to cost gigabytes run in a child process under an address-space limit, so a
//! regression fails the test instead of taking the machine's memory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use proctor_store::codec::{compress_alone, RECORD_VERSION};
use proctor_store::frame::{encode_header, FrameKind};
use proctor_store::{Reader, Writer};

use super::{sample, seqs, small_config, T0};

/// Set in the child process [`in_child_under_memory_limit`] starts.
const CHILD_ENV: &str = "PROCTOR_STORE_TEST_CHILD";

/// Runs the test `name` of this binary again in a child process, where
/// [`limit_address_space`] caps it, and fails unless the child passes within a minute. Returns
/// `false` in the child (the caller then runs the attack itself), `true` in the parent.
fn in_child_under_memory_limit(name: &str) -> bool {
    if std::env::var_os(CHILD_ENV).is_some() {
        return false;
    }
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
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
    let dir = tempfile::tempdir().expect("tempdir");
    let segment = store_with_a_key(dir.path(), 20);
    let at = std::fs::metadata(&segment).expect("meta").len();
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
    let mut record = format!("{{\"base\":{},\"rest\":{{\"noise\":[\"{noise}\"]}},\"rows\":[", at - 8);
    for i in 0..150_000 {
        record.push_str(if i == 0 { "{\"k\":[0,20]}" } else { ",{\"k\":[0,20]}" });
    }
    record.push_str("]}");
    let payload = compress_alone(3, record.as_bytes()).expect("compress");
    let frame_bytes = append_frame(&segment, T0 + 1_000_000_000, FrameKind::Delta, RECORD_VERSION, &payload);
    assert!(frame_bytes < 4096, "the hostile frame is small: {frame_bytes} bytes");

    limit_address_space(512 << 20);
    let mut reader = Reader::open(dir.path()).expect("reader");
    let frames = reader.all_frames().expect("frames");
    assert_eq!(frames.len(), 2);
    assert_eq!(reader.read(&frames[0]).map(|s| s.processes.len()), Some(20));
    for read in [Reader::read, Reader::read_lean, Reader::read_host] {
        assert!(read(&mut reader, &frames[1]).is_none(), "the hostile delta decoded");
    }
    let why = &reader.report().bad_frames[0].2;
    assert!(why.contains("more rows than its base has"), "{why}");
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

fn alike_row(p: &proctor_model::ProcessSample) -> proctor_model::ProcessSample {
    proctor_model::ProcessSample {
        pid: 7,
        ppid: 0,
        start_ticks: 0,
        utime_ticks: 0,
        stime_ticks: 0,
        minflt: 0,
        resident_bytes: Some(0),
        comm: std::sync::Arc::from("x"),
        cmdline: Some(std::sync::Arc::from(vec!["x".to_string()])),
        ..p.clone()
    }
}
