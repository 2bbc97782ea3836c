//! What other layouts of the rollup record would weigh, on real blocks:
//! `cargo run --release -p proctor-store --example rollup_whatif -- DIR [EVERY]`.
//!
//! DIR is a data directory with a minute tier (`bench/rollup/run.sh` leaves its synthetic year
//! in `/tmp/proctor-rollup-bench.*/year`); every EVERY-th block (default 40) is decoded and
//! encoded again in each layout, compressed at the tiers' zstd level, and the mean compressed
//! bytes per block printed. Layouts: the record as written (`rollup::encode_block`); the same
//! values with each kind of stream (min, mean, max, last) gathered and compressed as a section
//! of its own; that with the means as offsets from the column's median where that is shorter
//! than deltas; and that with 3 significant digits instead of 4; and 6 or 24 consecutive hours'
//! blocks as one block (when their names are the same). Sizes only: nothing here is a format the
//! store reads.

use proctor_model::{RollupBlock, Stat};
use proctor_store::rollup::{encode_block, varint, zigzag};
use proctor_store::{codec::compress_alone, stream_dir, Event, Reader, MINUTE_TIER};

/// The tiers' zstd level (proctor-stored's `RollupConfig`).
const LEVEL: i32 = 19;

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: rollup_whatif DIR [EVERY]";
    let dir = std::path::PathBuf::from(args.next().expect(usage));
    let every: usize = args.next().map_or(40, |s| s.parse().expect("EVERY"));
    let mut reader = Reader::open(&stream_dir(&dir, MINUTE_TIER).expect("minute tier")).expect("open the tier");
    let frames = reader.event_frames(0, u64::MAX).expect("frames");
    let layouts =
        ["as written", "streams in sections", "sections, means from the median", "sections, median, 3 digits"];
    let mut totals = [0usize; 4];
    let mut blocks = 0usize;
    for frame in frames.iter().step_by(every.max(1)) {
        let Some(Event::Rollup(block)) = reader.read_event(frame) else { continue };
        blocks += 1;
        totals[0] += compressed(&encode_block(&block));
        totals[1] += sections(&block, 4, false).iter().map(|s| compressed(s)).sum::<usize>();
        totals[2] += sections(&block, 4, true).iter().map(|s| compressed(s)).sum::<usize>();
        totals[3] += sections(&block, 3, true).iter().map(|s| compressed(s)).sum::<usize>();
    }
    assert!(blocks > 0, "no rollup block in {}", dir.display());
    println!("{blocks} blocks of {}, zstd level {LEVEL}, mean compressed bytes per block:", frames.len());
    for (name, total) in layouts.iter().zip(totals) {
        println!(
            "  {name:<34} {:>8.0}  ({:.3} of as written)",
            total as f64 / blocks as f64,
            total as f64 / totals[0] as f64
        );
    }
    // Longer blocks: HOURS consecutive blocks with the same names as one record (the encoder
    // as written), per hour, against the same hours as written.
    for hours in [6usize, 24] {
        let (mut alone, mut joined, mut concatenated, mut runs) = (0usize, 0usize, 0usize, 0usize);
        for start in (0..frames.len().saturating_sub(hours)).step_by(every.max(hours)) {
            let run: Vec<RollupBlock> = frames[start..start + hours]
                .iter()
                .filter_map(|f| match reader.read_event(f) {
                    Some(Event::Rollup(block)) => Some(block),
                    _ => None,
                })
                .collect();
            if run.len() != hours || run.iter().any(|b| b.names != run[0].names) {
                continue;
            }
            runs += 1;
            alone += run.iter().map(|b| compressed(&encode_block(b))).sum::<usize>();
            let mut records = Vec::new();
            for b in &run {
                let record = encode_block(b);
                varint(&mut records, record.len() as u64);
                records.extend_from_slice(&record);
            }
            concatenated += compressed(&records);
            let mut long = run[0].clone();
            long.rows = run.into_iter().flat_map(|b| b.rows).collect();
            joined += compressed(&encode_block(&long));
        }
        if runs > 0 {
            println!(
                "  {:<34} {:>8.0}  ({:.3} of the same hours as written, {runs} runs)",
                format!("{hours} hours as one block"),
                joined as f64 / (runs * hours) as f64,
                joined as f64 / alone as f64
            );
            println!(
                "  {:<34} {:>8.0}  ({:.3} of the same hours as written)",
                format!("{hours} hours' records in one frame"),
                concatenated as f64 / (runs * hours) as f64,
                concatenated as f64 / alone as f64
            );
        }
    }
}

fn compressed(bytes: &[u8]) -> usize {
    if bytes.is_empty() {
        return 0;
    }
    compress_alone(LEVEL, bytes).expect("zstd").len()
}

/// The block as a head (names, rows, per column its flags, exponent and base) and one section
/// per kind of stream, values quantized as the store does to `digits` significant digits.
fn sections(block: &RollupBlock, digits: i32, median: bool) -> [Vec<u8>; 5] {
    let mut out: [Vec<u8>; 5] = Default::default();
    let head = &mut Vec::new();
    varint(head, block.names.len() as u64);
    for name in &block.names {
        varint(head, name.len() as u64);
        head.extend_from_slice(name.as_bytes());
    }
    for row in &block.rows {
        varint(head, row.start_unix_s);
        varint(head, u64::from(row.samples));
    }
    for col in 0..block.names.len() {
        let cells: Vec<&Stat> = block.rows.iter().filter_map(|r| r.values.get(col).and_then(Option::as_ref)).collect();
        let largest = cells.iter().map(|s| s.min.abs().max(s.max.abs()).max(s.last.abs())).fold(0.0, f64::max);
        let exponent = if largest > 0.0 { (largest.log10().floor() as i32 + 1 - digits).clamp(-12, 15) } else { 0 };
        let scale = 10f64.powi(exponent);
        let q = |v: f64| (v / scale).round() as i64;
        let means: Vec<i64> = cells.iter().map(|s| q(s.mean)).collect();
        let first = means.first().copied().unwrap_or(0);
        let deltas: Vec<i64> = means.iter().scan(first, |prev, m| Some(m - std::mem::replace(prev, *m))).collect();
        let mut sorted = means.clone();
        sorted.sort_unstable();
        let mid = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
        let offsets: Vec<i64> = means.iter().map(|m| m - mid).collect();
        let cost = |v: &[i64]| v.iter().map(|x| zigzag_len(*x)).sum::<usize>();
        let from_median = median && cost(&offsets) < cost(&deltas);
        let streams = [
            cells.iter().map(|s| q(s.mean) - q(s.min)).collect(),
            if from_median { offsets } else { deltas },
            cells.iter().map(|s| q(s.max) - q(s.mean)).collect(),
            cells.iter().map(|s| q(s.last) - q(s.mean)).collect::<Vec<i64>>(),
        ];
        let mut flags = u8::from(from_median) << 6;
        for (k, stream) in streams.iter().enumerate() {
            if stream.iter().all(|v| *v == 0) {
                flags |= 2 << k;
            } else {
                stream.iter().for_each(|v| zigzag(&mut out[k + 1], *v));
            }
        }
        head.push(flags);
        zigzag(head, i64::from(exponent));
        zigzag(head, if from_median { mid } else { first });
    }
    out[0] = std::mem::take(head);
    out
}

fn zigzag_len(v: i64) -> usize {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    (64 - z.leading_zeros() as usize).max(1).div_ceil(7)
}
