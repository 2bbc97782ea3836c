//! What a delta record compresses to with each choice of zstd prefix: alone (record version
//! 2), against its base anchor's record, and against the previous delta's record (version 3).
//! Re-encodes the samples of a store written by `proctor record` or `serve --data-dir` in
//! chunks of 60 from sample 20 on (past the first key and the workers' first pass).
//! `cargo run --release -p proctor-store --example delta_dict -- DIR [ANCHOR_EVERY]` (default
//! 4, the store's); `SHOW=1` prints one record.

use std::path::Path;
use std::time::Instant;

use proctor_store::delta::{encode_delta, KeySample};
use proctor_store::Reader;

fn compressed_len(level: i32, prefix: Option<&[u8]>, record: &[u8]) -> usize {
    match prefix {
        Some(prefix) => proctor_store::codec::compress_after(level, prefix, record),
        None => proctor_store::codec::compress_alone(level, record),
    }
    .expect("zstd")
    .len()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: delta_dict DIR [ANCHOR_EVERY]");
    let anchor_every: usize = args.next().map_or(4, |s| s.parse().expect("ANCHOR_EVERY is a number"));
    let mut reader = Reader::open(Path::new(&dir)).expect("open store");
    let frames = reader.all_frames().expect("frames");
    let samples: Vec<_> = frames.iter().filter_map(|f| reader.read(f)).collect();
    let (mut raw, mut alone, mut vs_base, mut vs_previous, mut n) = (0, 0, 0, 0, 0);
    let (mut alone_ns, mut previous_ns) = (0u128, 0u128);
    let mut shown = std::env::var_os("SHOW").is_none();
    let mut i = 20;
    while i + 60 <= samples.len() {
        let mut base = KeySample::new(&samples[i]);
        let (mut base_record, mut previous): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
        for k in 1..60 {
            let anchor = anchor_every > 0 && k % anchor_every == 0;
            let record = encode_delta(&base, &samples[i + k], 0, anchor, 0);
            raw += record.len();
            let t0 = Instant::now();
            alone += compressed_len(3, None, &record);
            let t1 = Instant::now();
            vs_previous += compressed_len(3, previous.as_deref(), &record);
            let t2 = Instant::now();
            vs_base += compressed_len(3, base_record.as_deref(), &record);
            alone_ns += (t1 - t0).as_nanos();
            previous_ns += (t2 - t1).as_nanos();
            n += 1;
            if !shown && k == 7 {
                println!("{}", String::from_utf8_lossy(&record));
                shown = true;
            }
            if anchor {
                base = KeySample::new(&samples[i + k]);
                base_record = Some(record.clone());
            }
            previous = Some(record);
        }
        i += 60;
    }
    assert!(n > 0, "need at least 80 samples");
    println!(
        "{n} deltas, an anchor every {anchor_every}: record {} bytes; compressed alone {} bytes ({} µs), \
         against the base anchor's record {}, against the previous delta's record {} ({} µs)",
        raw / n,
        alone / n,
        alone_ns / n as u128 / 1000,
        vs_base / n,
        vs_previous / n,
        previous_ns / n as u128 / 1000
    );
}
