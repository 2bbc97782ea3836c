//! `proctor dump rollup` over a minute tier written here, block by block, as the agent's roller
//! writes it: the rows come back with their figures, filtered and ranked; a store without
//! rollups, or without the tier asked for, is a clear error; a hand-built block claiming more
//! cells than its bytes hold is said and skipped, within a small address space.

use std::time::{SystemTime, UNIX_EPOCH};

use proctor_model::{RollupBlock, RollupRow, Stat};
use proctor_store::{stream_dir, Event, StoreConfig, Writer, MINUTE_TIER};

use super::proctor;

/// Two hours of minute rows ending three hours ago: `host.cpu.user` is the row's index (min
/// one less, max one more, last the index plus a half), `group.web.rss` 100 MiB plus a MiB per
/// row.
fn minute_tier(data: &std::path::Path) -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
    let first_hour = now - now % 3600 - 3 * 3600;
    let dir = stream_dir(data, MINUTE_TIER).expect("minute tier");
    let (mut writer, _) = Writer::open(&dir, StoreConfig::default()).expect("writer");
    for hour in 0..2u64 {
        let start = first_hour + hour * 3600;
        let rows = (0..60u64)
            .map(|m| {
                let k = (hour * 60 + m) as f64;
                let stat = |mean: f64, spread: f64| Stat {
                    min: mean - spread,
                    mean,
                    max: mean + spread,
                    last: mean + 0.5,
                    n: 60,
                };
                RollupRow {
                    start_unix_s: start + m * 60,
                    span_s: 60,
                    samples: 60,
                    values: vec![Some(stat(k, 1.0)), Some(stat(f64::from(100 << 20) + k * f64::from(1 << 20), 0.0))],
                }
            })
            .collect();
        let block = RollupBlock { span_s: 60, names: vec!["host.cpu.user".into(), "group.web.rss".into()], rows };
        writer.append_event(start * 1_000_000_000, &Event::Rollup(block)).expect("append");
    }
    first_hour
}

#[test]
fn dump_rollup_prints_the_minute_rows_of_the_range() {
    let data = tempfile::tempdir().expect("tempdir");
    let first = minute_tier(data.path());
    let dir = data.path().to_str().expect("utf-8");
    let from = format!("@{first}");
    let out = proctor(&[
        "dump",
        "rollup",
        "--dir",
        dir,
        "--from",
        &from,
        "--format",
        "json",
        "--filter",
        "series=host.cpu.user",
        "--fields",
        "time_unix_ms,tier,samples,series,min,mean,max,last,n",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(rows.len(), 120, "a row per minute of two hours");
    for (k, row) in rows.iter().enumerate() {
        let k = k as f64;
        assert_eq!(row["tier"], "1m");
        assert_eq!(row["time_unix_ms"], (first + k as u64 * 60) * 1000);
        // Mean and max to 4 significant digits of the block's largest value (60, then 120:
        // exact here); min and last to 2, a unit of 1 in the first hour and 10 in the second
        // (the min within half a unit, the last within one, inside the row's min and max).
        assert_eq!((row["mean"].as_f64(), row["max"].as_f64()), (Some(k), Some(k + 1.0)), "{row}");
        let unit = if k < 60.0 { 1.0 } else { 10.0 };
        let (min, last) = (row["min"].as_f64().expect("min"), row["last"].as_f64().expect("last"));
        assert!((min - (k - 1.0)).abs() <= unit / 2.0 && min <= k, "{row}");
        assert!((last - (k + 0.5)).abs() <= unit && (min..=k + 1.0).contains(&last), "{row}");
        assert_eq!((row["samples"].as_u64(), row["n"].as_u64()), (Some(60), Some(60)));
    }

    // CSV, the second hour only, each row's one series with the highest max: the group's RSS.
    let from = format!("@{}", first + 3600);
    let out = proctor(&["dump", "rollup", "--dir", dir, "--from", &from, "--top", "1", "--sort", "max"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "time,tier,span_s,samples,series,min,mean,max,last,n");
    assert_eq!(lines.len(), 61, "{text}");
    assert!(lines[1..].iter().all(|l| l.contains(",group.web.rss,")), "{text}");
    // 100 MiB + 60 MiB, to the tier's 4 significant digits.
    let max: f64 = lines[1].split(',').nth(7).expect("max").parse().expect("a number");
    assert!((max - 167_772_160.0).abs() / 167_772_160.0 < 1e-3, "{max}");

    let out = proctor(&["dump", "rollup", "--dir", dir, "--tier", "1h"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no 1h rollup tier"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let empty = tempfile::tempdir().expect("tempdir");
    let out = proctor(&["dump", "rollup", "--dir", empty.path().to_str().expect("utf-8")]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no rollup rows"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Regression (issue 33 item 5): a 76-byte `rollup-1m` frame claiming 1,024 names × 16,384
/// rows of idle columns (3 bytes each, whatever the rows) made `dump rollup` take 797 MB and
/// 92 s. Under a 512 MiB address-space limit (so a regression fails here instead of taking the
/// machine's memory) dump now says why the block was skipped and dumps the real rows.
#[test]
fn dump_rollup_skips_a_block_that_claims_more_cells_than_its_bytes_hold() {
    use proctor_store::codec::compress_alone;
    use proctor_store::frame::{encode_header, FrameKind};
    use proctor_store::rollup::{varint, ROLLUP_VERSION_1};

    let data = tempfile::tempdir().expect("tempdir");
    let first = minute_tier(data.path());
    let after = first + 2 * 3600;
    let mut record = Vec::new();
    varint(&mut record, 60);
    varint(&mut record, 1024);
    record.extend(std::iter::repeat_n(0u8, 1024));
    varint(&mut record, 16_384);
    for i in 0..16_384 {
        varint(&mut record, if i == 0 { after } else { 60 });
        varint(&mut record, 60);
    }
    for _ in 0..1024 {
        record.extend_from_slice(&[0x3f, 0, 0]);
    }
    let payload = compress_alone(3, &record).expect("compress");
    let mut frame = encode_header(after * 1_000_000_000, FrameKind::Rollup, ROLLUP_VERSION_1, &payload).to_vec();
    frame.extend_from_slice(&payload);
    assert!(frame.len() < 128, "the hostile frame is small: {} bytes", frame.len());
    let tier = stream_dir(data.path(), MINUTE_TIER).expect("minute tier");
    let segment = std::fs::read_dir(&tier)
        .expect("list")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .expect("a segment");
    let mut file = std::fs::OpenOptions::new().append(true).open(&segment).expect("open segment");
    std::io::Write::write_all(&mut file, &frame).expect("append");

    let from = format!("@{first}");
    let out = std::process::Command::new("prlimit")
        .arg("--as=536870912")
        .args(super::proctor_argv())
        .args(["dump", "rollup", "--dir", data.path().to_str().expect("utf-8"), "--from", &from])
        .args(["--filter", "series=host.cpu.user", "--fields", "series,mean"])
        .output()
        .expect("dump");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.contains("more cells (names × rows) than the record's bytes can hold"), "{stderr}");
    assert!(stderr.contains("1 rollup block(s) could not be read and were skipped"), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1 + 120, "the header and the real blocks' rows: {text}");
}
