//! Measures how the records of a real store compress under other choices than the store's:
//! zstd levels, the key record vs the previous record as the dictionary, and gzip (flate2).
//! `cargo run --release -p proctor-store --example frame_cost -- DIR` on a store written by
//! `proctor record` (see bench/record/run.sh for a 600-process one).

use std::io::Write;
use std::time::Instant;

fn main() {
    let dir = std::env::args().nth(1).expect("usage: frame_cost DIR");
    let mut reader = proctor_store::Reader::open(std::path::Path::new(&dir)).expect("open store");
    let frames = reader.all_frames().expect("frames");
    let records: Vec<Vec<u8>> =
        frames.iter().filter_map(|f| reader.read(f)).map(|s| proctor_store::codec::encode_record(&s)).collect();
    let n = records.len();
    assert!(n > 1, "need at least two samples");
    let raw: usize = records.iter().map(Vec::len).sum();
    println!("{n} records, {} bytes of JSON each on average", raw / n);
    for level in [1, 3, 9] {
        let alone = measure(&records, |i, r| zstd::bulk::compress(r, level).expect("zstd").len() * usize::from(i > 0));
        let vs_key = measure(&records, |i, r| if i == 0 { 0 } else { delta(level, &records[0], r) });
        let vs_later_key = measure(&records, |i, r| if i < 3 { 0 } else { delta(level, &records[2], r) });
        println!("zstd -{level}: against a key record that has the command lines (record 2) {vs_later_key}");
        let vs_prev = measure(&records, |i, r| if i == 0 { 0 } else { delta(level, &records[i - 1], r) });
        println!("zstd -{level}: alone {alone}, against the chunk's key record {vs_key}, against the previous record {vs_prev}");
    }
    let gzip = measure(&records, |i, r| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(r).expect("gzip");
        e.finish().expect("gzip").len() * usize::from(i > 0)
    });
    println!("gzip -6 (flate2) alone: {gzip}");
}

fn delta(level: i32, dict: &[u8], record: &[u8]) -> usize {
    let mut c = zstd::bulk::Compressor::with_dictionary(level, dict).expect("dict");
    c.compress(record).expect("zstd").len()
}

/// Mean bytes and mean µs per record over records 1.. (record 0 is the key).
fn measure(records: &[Vec<u8>], mut f: impl FnMut(usize, &[u8]) -> usize) -> String {
    let started = Instant::now();
    let total: usize = records.iter().enumerate().map(|(i, r)| f(i, r)).sum();
    let us = started.elapsed().as_micros() as usize / records.len();
    format!("{} B/frame ({us} µs incl. dictionary load)", total / (records.len() - 1))
}
