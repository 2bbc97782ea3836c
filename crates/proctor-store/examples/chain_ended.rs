//! Whether a version-3 delta should be compressed after the previous delta's record or alone,
//! for records that list many ended processes (a fork storm's) and for the others, side by
//! side in one run: each sample of a store is encoded as a delta against the store's first
//! sample, and each record compressed after the one before it of its kind and alone, at zstd
//! levels 1 and 3, 5 times, and alone in the writer's kept context ([`AloneCompressor`]); the
//! figures are the mean bytes and µs per record.
//! `cargo run --release -p proctor-store --example chain_ended -- DIR` on a store written
//! beside a storm (`STORM_KEEP_DATA=1 python3 bench/bpf/storm.py`, which prints where it is).

use std::time::Instant;

use proctor_store::codec::{compress_after, compress_alone, AloneCompressor, KEEP_CONTEXT_FROM};
use proctor_store::delta::{encode_delta, KeySample};
use proctor_store::CHAIN_MAX_ENDED;

fn main() {
    let dir = std::env::args().nth(1).expect("usage: chain_ended DIR");
    let mut reader = proctor_store::Reader::open(std::path::Path::new(&dir)).expect("open store");
    let frames = reader.all_frames().expect("frames");
    let samples: Vec<_> = frames.iter().filter_map(|f| reader.read(f)).collect();
    let Some(first) = samples.first() else { panic!("the store has no samples") };
    let key = KeySample::new(first);
    let records = |storm: bool| -> Vec<Vec<u8>> {
        samples[1..]
            .iter()
            .filter(|s| (s.exited.len() >= CHAIN_MAX_ENDED) == storm)
            .map(|s| encode_delta(&key, s, 8, false, 1 << 16))
            .collect()
    };
    for (what, recs) in [("listing ended processes past the limit", records(true)), ("the others", records(false))] {
        if recs.len() < 2 {
            println!("{what}: fewer than two records");
            continue;
        }
        let n = recs.len() - 1;
        println!(
            "{what}: {} records, {} bytes each on average",
            recs.len(),
            recs.iter().map(Vec::len).sum::<usize>() / recs.len()
        );
        for level in [1, 3] {
            let (chained, chained_us) =
                measure(n, |i| compress_after(level, &recs[i], &recs[i + 1]).expect("zstd").len());
            let (alone, alone_us) = measure(n, |i| compress_alone(level, &recs[i + 1]).expect("zstd").len());
            let mut kept = AloneCompressor::default();
            let (_, kept_us) = measure(n, |i| kept.compress(level, &recs[i + 1]).expect("zstd").len());
            println!(
                "  level {level}: after the previous {chained} B in {chained_us} µs; alone {alone} B in {alone_us} µs \
                 (in a kept context where {KEEP_CONTEXT_FROM} B or more: {kept_us} µs; the context kept {} B)",
                kept.context_bytes()
            );
        }
    }
}

/// Mean bytes and µs per record of `f` over records 0..n, the mean of 5 passes.
fn measure(n: usize, mut f: impl FnMut(usize) -> usize) -> (usize, u128) {
    let started = Instant::now();
    let mut bytes = 0;
    for _ in 0..5 {
        bytes = (0..n).map(&mut f).sum::<usize>();
    }
    (bytes / n, started.elapsed().as_micros() / 5 / n as u128)
}
