//! A hand-built store frame against a real `proctor serve` and `proctor dump` (issue 15 item 2):
//! a small delta with a valid CRC that keeps its base's rows tens of thousands of times decoded
//! into ~1.6 GB, and one `GET /api/v1/report?from=0` aborted serve. Both run under a 4 GiB
//! address-space limit (so a regression fails here instead of taking the machine's memory); the
//! frame must be refused as a bad frame, the rest answered, and serve's peak RSS stay small.

use std::path::{Path, PathBuf};
use std::process::Command;

use proctor_store::codec::{compress_alone, RECORD_VERSION_2};
use proctor_store::frame::{encode_header, FrameKind};
use proctor_store::Reader;

use super::flood::{body_json, serve};
use super::http_get;

/// A store with one real sample, and a hostile delta after it. Returns the directory's segment.
fn hostile_store(dir: &Path) -> PathBuf {
    let out =
        super::proctor_command().args(["record", "--dir"]).arg(dir).args(["--count", "1"]).output().expect("record");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let segment = std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .expect("a segment");
    let mut reader = Reader::open(dir).expect("reader");
    let frames = reader.all_frames().expect("frames");
    let key = reader.read(&frames[0]).expect("the key frame decodes");
    let rows = key.processes.len();
    let at = std::fs::metadata(&segment).expect("meta").len();
    // Noise in the rest patch gets the frame past the bound on how far a record may expand,
    // so only the rows bound stands in the way; 3 million rows were ~1.6 GB.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let noise: String = (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from_digit((state % 16) as u32, 16).expect("a hex digit")
        })
        .collect();
    let keeps = 3_000_000 / rows.max(1);
    let mut record = format!("{{\"base\":{},\"rest\":{{\"noise\":[\"{noise}\"]}},\"rows\":[", at - 8);
    for i in 0..keeps {
        record.push_str(&format!("{}{{\"k\":[0,{rows}]}}", if i == 0 { "" } else { "," }));
    }
    record.push_str("]}");
    let payload = compress_alone(3, record.as_bytes()).expect("compress");
    // A microsecond after its base: inside any range up to now.
    let mut frame = encode_header(key.unix_ns + 1_000, FrameKind::Delta, RECORD_VERSION_2, &payload).to_vec();
    frame.extend_from_slice(&payload);
    let mut file = std::fs::OpenOptions::new().append(true).open(&segment).expect("open segment");
    std::io::Write::write_all(&mut file, &frame).expect("append");
    segment
}

fn vm_hwm_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("VmHWM:")?.trim().strip_suffix(" kB")?.parse::<f64>().ok()))
        .unwrap_or(0.0)
        / 1024.0
}

#[test]
fn a_hand_built_delta_is_a_bad_frame_for_serve_and_dump_not_gigabytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    hostile_store(dir.path());
    let data = dir.path().to_str().expect("utf-8");

    let mut command = Command::new("prlimit");
    command.arg("--as=4294967296").args(super::proctor_argv());
    let (serve, addr) = serve(command, "1s", &["--data-dir", data]);
    let report = body_json(&http_get(&addr, "/api/v1/report?from=0"));
    assert!(report["bad_frames"].as_u64() >= Some(1), "{report}");
    assert!(report["problems"].to_string().contains("more rows than its base has"), "{report}");
    let agent = body_json(&http_get(&addr, "/api/v1/agent"));
    let peak = vm_hwm_mib(serve.0.id());
    eprintln!("serve after GET /api/v1/report?from=0 on the hostile frame: peak RSS {peak:.1} MiB");
    assert!(peak < 256.0, "peak RSS {peak:.1} MiB");
    assert!(agent["samples_total"].as_u64() >= Some(1), "{agent}");
    drop(serve);

    let dump = Command::new("prlimit")
        .arg("--as=4294967296")
        .args(super::proctor_argv())
        .args(["dump", "host", "--dir", data])
        .output()
        .expect("dump");
    let stderr = String::from_utf8_lossy(&dump.stderr);
    assert!(dump.status.success(), "{stderr}");
    assert!(stderr.contains("more rows than its base has"), "{stderr}");
    assert!(!dump.stdout.is_empty(), "the readable samples are dumped");
}
