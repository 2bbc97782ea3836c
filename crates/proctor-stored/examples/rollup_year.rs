//! Synthetic months of rollups from a real capture, for bench/rollup/run.sh:
//! `cargo run --release -p proctor-agent --example rollup_year -- CAPTURE OUT [DAYS] [SEED] [ORDER]
//! [COMPACT_HOURS] [later]`.
//!
//! CAPTURE is a recording (`proctor record --groups …`); its samples are rolled into minute
//! rows exactly as the agent rolls them. OUT gets DAYS (default 365) of minute blocks ending
//! at the last whole hour. ORDER `random` (the default): each synthetic minute a captured minute
//! drawn at random (seeded): no run of minutes repeats for zstd to find, and every
//! minute-to-minute change is as large as the capture's spread, which is harder on the delta
//! coding than a real day's slow drift. ORDER `sequence`: the captured minutes in the order
//! they were captured, over and over, each hour starting at a random one: a minute follows
//! from the one before as it did on the box, except where the capture wraps around.
//! Segments are sealed where a window of COMPACT_HOURS (default the agent's, 6; 0: a segment a
//! day, as before compaction) starts, and the windows are compacted by the agent's own
//! `compact` (`later`: left for `proctor rollup` to compact, to time it on its own). Then the
//! hour tier is rolled from them, and the sizes are printed as JSON (`hour_blocks_bytes`: the
//! minute tier before compaction).
//!
//! The minute tier is written with the agent's own tier settings but a year's retention and
//! no size cap, so the whole year is measured (the agent keeps 90 days by default).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proctor_store::{stream_dir, Event, Reader, Writer, HOUR_TIER, MINUTE_TIER};
use proctor_stored::rollup::{block_of, compact, minute_stats, roll, Minutes, RollReport, RollupConfig, COMPACT_HOURS};

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: rollup_year CAPTURE OUT [DAYS] [SEED] [random|sequence] [COMPACT_HOURS] [later]";
    let capture = PathBuf::from(args.next().expect(usage));
    let out = PathBuf::from(args.next().expect(usage));
    let days: u64 = args.next().map_or(365, |s| s.parse().expect("DAYS"));
    let mut seed: u64 = args.next().map_or(0x9e37_79b9_7f4a_7c15, |s| s.parse().expect("SEED"));
    let sequence = match args.next().as_deref() {
        None | Some("random") => false,
        Some("sequence") => true,
        Some(other) => panic!("ORDER is random or sequence, not {other:?}"),
    };
    // Hours per compacted block (0: a segment a day and no compaction, as before compaction).
    let window_h: u64 = args.next().map_or(COMPACT_HOURS, |s| s.parse().expect("COMPACT_HOURS"));
    // `later`: segments sealed per window but not compacted, for `proctor rollup` to compact.
    let compact_now = args.next().as_deref() != Some("later");

    let mut raw = Reader::open(&capture).expect("open CAPTURE");
    let frames = raw.frames(0, u64::MAX).expect("frames");
    let (first, last) = (frames[0].unix_ns() / 1_000_000_000, frames[frames.len() - 1].unix_ns() / 1_000_000_000);
    // Whole minutes only (the first and last are partial), unless the capture is shorter than
    // one whole minute (a test's few samples): then its minutes as they are.
    let (mut from, mut to) = (first - first % 60 + 60, last - last % 60);
    if to <= from {
        (from, to) = (first - first % 60, last + 1);
    }
    let mut report = RollReport::default();
    let captured: Vec<(u32, std::collections::BTreeMap<String, proctor_model::Stat>)> =
        minute_stats(&mut raw, from, to, &mut report).expect("roll the capture").into_values().collect();
    assert!(!captured.is_empty(), "the capture holds no whole minute");
    let groups: std::collections::BTreeSet<&str> = captured
        .iter()
        .flat_map(|(_, s)| s.keys())
        .filter_map(|k| k.strip_prefix("group.").and_then(|g| g.rsplit_once(".processes")).map(|(g, _)| g))
        .collect();
    let series: std::collections::BTreeSet<&String> = captured.iter().flat_map(|(_, s)| s.keys()).collect();

    std::fs::create_dir_all(&out).expect("create OUT");
    let config = RollupConfig {
        minute_age: Duration::from_secs((days + 30) * 86_400),
        hour_age: Duration::from_secs((days + 30) * 86_400),
        max_bytes: u64::MAX / 2,
    };
    let minute_dir = stream_dir(&out, MINUTE_TIER).expect("minute tier");
    let (mut writer, _) = Writer::open(&minute_dir, config.tier(false)).expect("open the minute tier");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
    let end = now - now % 3600;
    let start = end - days * 86_400;
    let started = Instant::now();
    let mut rows = 0u64;
    for hour in (start..end).step_by(3600) {
        let mut block = Minutes::new();
        // xorshift64*: a fixed, seeded sequence.
        let mut next = || {
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            (seed.wrapping_mul(0x2545_f491_4f6c_dd1d) % captured.len() as u64) as usize
        };
        let offset = next();
        // As the roller writes them: a segment never holds hours of two windows.
        if window_h > 0 && hour % (window_h * 3600) == 0 {
            writer.seal().expect("seal");
        }
        for m in 0..60 {
            let pick = if sequence { (offset + m as usize) % captured.len() } else { next() };
            block.insert(hour + m * 60, captured[pick].clone());
            rows += 1;
        }
        writer.append_event(hour * 1_000_000_000, &Event::Rollup(block_of(60, block))).expect("append");
    }
    let write_s = started.elapsed().as_secs_f64();
    let stats = writer.stats();
    let hour_blocks_bytes = dir_bytes(&minute_dir);
    // The agent's own compaction, all windows in one call.
    let started = Instant::now();
    let mut compacted = RollReport::default();
    if window_h > 0 && compact_now {
        compact(&mut writer, window_h * 3600, end, u64::MAX, &mut compacted).expect("compact");
    }
    let compact_s = started.elapsed().as_secs_f64();
    drop(writer);
    let started = Instant::now();
    let rolled = roll(&out, &config).expect("roll the hour tier");
    let hour_s = started.elapsed().as_secs_f64();
    println!(
        "{{\"order\":\"{}\",\"captured_minutes\":{},\"groups\":{},\"series\":{},\"days\":{days},\"minute_rows\":{rows},\
         \"minute_tier_bytes\":{},\"hour_tier_bytes\":{},\"record_bytes\":{},\"hour_blocks\":{},\
         \"write_seconds\":{write_s:.1},\"hour_roll_seconds\":{hour_s:.1},\"first_unix_s\":{start},\"end_unix_s\":{end},\
         \"compact_hours\":{window_h},\"hour_blocks_bytes\":{hour_blocks_bytes},\"compacted_windows\":{},\
         \"windows_left\":{},\"compact_seconds\":{compact_s:.1}}}",
        if sequence { "sequence" } else { "random" },
        captured.len(),
        groups.len(),
        series.len(),
        dir_bytes(&minute_dir),
        dir_bytes(&out.join(HOUR_TIER)),
        stats.record_bytes,
        rolled.hour_blocks,
        compacted.compacted_windows,
        compacted.windows_left,
    );
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries.filter_map(Result::ok).filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum()
    })
}
