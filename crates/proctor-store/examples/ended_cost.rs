//! What a fork storm's samples cost the recorder, record by record: each sample of a store is
//! encoded as a delta against the sample before it (as the writer does between anchors) and
//! compressed alone in a kept context, a storm's at the storm level and the others at the
//! deltas' level. The figures are µs per record (medians of `PASSES`, at least 9) and bytes,
//! for the records that list many ended processes and for the others.
//! `cargo run --release -p proctor-store --example ended_cost -- DIR` on a store written beside
//! a storm (`STORM_KEEP_DATA=1 python3 bench/bpf/storm.py`, which prints where it is).

use std::time::Instant;

use proctor_store::codec::{AloneCompressor, DEFAULT_LEVEL, STORM_LEVEL};
use proctor_store::delta::{encode_delta, encode_delta_into, KeySample};
use proctor_store::CHAIN_MAX_ENDED;

fn main() {
    let dir = std::env::args().nth(1).expect("usage: ended_cost DIR");
    let mut reader = proctor_store::Reader::open(std::path::Path::new(&dir)).expect("open store");
    let frames = reader.all_frames().expect("frames");
    let samples: Vec<_> = frames.iter().filter_map(|f| reader.read(f)).collect();
    assert!(samples.len() > 1, "the store needs two samples or more");
    // ONLY=storm: the storm's records alone (for a profiler).
    let only_storm = std::env::var("ONLY").is_ok_and(|o| o == "storm");
    for storm in [true, false].into_iter().filter(|s| *s || !only_storm) {
        let pairs: Vec<(KeySample, &proctor_model::Sample)> = samples
            .windows(2)
            .filter(|w| (w[1].exited.len() >= CHAIN_MAX_ENDED) == storm)
            .map(|w| (KeySample::new(&w[0]), &w[1]))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        let ended = pairs.iter().map(|(_, s)| s.exited.len()).sum::<usize>() / pairs.len();
        let mut encode = Vec::new();
        let mut compress = Vec::new();
        let (mut bytes, mut frame) = (0, 0);
        let mut kept = AloneCompressor::default();
        // LEVEL=N: the storm's records at N instead (to compare).
        let level = match std::env::var("LEVEL").ok().and_then(|l| l.parse().ok()) {
            Some(l) if storm => l,
            _ if storm => STORM_LEVEL,
            _ => DEFAULT_LEVEL,
        };
        let passes: usize = std::env::var("PASSES").ok().and_then(|p| p.parse().ok()).unwrap_or(9).max(9);
        // REUSE=1: each record encoded into the buffer the one before it used, as the writer
        // does (`encode_delta_into`), rather than into a fresh one of 64 KiB.
        let reuse = std::env::var("REUSE").is_ok_and(|r| r == "1");
        let mut spare = Vec::new();
        for _ in 0..passes {
            let started = Instant::now();
            let records: Vec<Vec<u8>> = if reuse {
                for (k, s) in &pairs {
                    spare = encode_delta_into(std::mem::take(&mut spare), k, s, 8, false);
                }
                encode.push(started.elapsed().as_nanos() / pairs.len() as u128);
                pairs.iter().map(|(k, s)| encode_delta(k, s, 8, false, 1 << 16)).collect()
            } else {
                let records = pairs.iter().map(|(k, s)| encode_delta(k, s, 8, false, 1 << 16)).collect();
                encode.push(started.elapsed().as_nanos() / pairs.len() as u128);
                records
            };
            let started = Instant::now();
            frame = records.iter().map(|r| kept.compress(level, r).expect("zstd").len()).sum::<usize>();
            compress.push(started.elapsed().as_nanos() / pairs.len() as u128);
            bytes = records.iter().map(Vec::len).sum::<usize>();
        }
        encode.sort_unstable();
        compress.sort_unstable();
        println!(
            "{} records{} (~{ended} ended each): encode {:.1} µs, compress {:.1} µs at level {level}, {} B → {} B a record",
            pairs.len(),
            if storm { " listing many ended processes" } else { ", the others" },
            encode[passes / 2] as f64 / 1e3,
            compress[passes / 2] as f64 / 1e3,
            bytes / pairs.len(),
            frame / pairs.len(),
        );
    }
}
