//! What the store's compressor holds in memory, and what each choice costs in bytes per frame,
//! on the records of a real store: zstd's own figures (`ZSTD_sizeof_CCtx`, `ZSTD_sizeof_CDict`)
//! for a dictionary loaded into a `CDict` (the store's first compressor) and for one context
//! that references the key record as a prefix, at several levels and table sizes.
//! `cargo run --release -p proctor-store --example compressor_mem -- DIR`
//!
//! Frames are chunked as the writer does: a key every `CHUNK` frames, and a new key after a
//! delta larger than a quarter of its key.

use std::time::Instant;

use zstd::zstd_safe::{CCtx, CDict, CParameter};

const CHUNK: usize = 60;

fn main() {
    let dir = std::env::args().nth(1).expect("usage: compressor_mem DIR");
    let mut reader = proctor_store::Reader::open(std::path::Path::new(&dir)).expect("open store");
    let frames = reader.all_frames().expect("frames");
    let records: Vec<Vec<u8>> =
        frames.iter().filter_map(|f| reader.read(f)).map(|s| proctor_store::codec::encode_record(&s)).collect();
    // COMPRESSOR_MEM_CUT=N: the first N bytes of every record, to see how table sizes scale.
    let records: Vec<Vec<u8>> = match std::env::var("COMPRESSOR_MEM_CUT").ok().and_then(|v| v.parse::<usize>().ok()) {
        Some(cut) => records
            .into_iter()
            .map(|mut r| {
                r.truncate(cut);
                r
            })
            .collect(),
        None => records,
    };
    let n = records.len();
    assert!(n > 1, "need at least two samples");
    println!("{n} records, {} bytes of JSON each on average", records.iter().map(Vec::len).sum::<usize>() / n);

    // The store's first compressor: a fresh context per key frame, the key loaded into a CDict.
    for level in [3, 1] {
        let mut peak = 0;
        let (bytes, us) = run(&records, |key, i| {
            let (key, record) = (key.map(|k| records[k].as_slice()), records[i].as_slice());
            let mut cctx = CCtx::create();
            let out = match key {
                None => compress(&mut cctx, record, |c| c.set_parameter(CParameter::CompressionLevel(level))),
                Some(key) => {
                    let cdict = CDict::create(key, level);
                    cctx.ref_cdict(&cdict).expect("cdict");
                    let out = compress(&mut cctx, record, |_| Ok(0));
                    peak = peak.max(cctx.sizeof() + cdict.sizeof());
                    out
                }
            };
            peak = peak.max(cctx.sizeof());
            out
        });
        println!(
            "CDict, level {level}: {bytes} B/frame, {us} µs/frame (CDict rebuilt per frame here), zstd memory {} KiB",
            peak / 1024
        );
    }

    // One context, the key record referenced as a prefix (nothing copied, nothing kept).
    let configs: &[(&str, &[CParameter])] = &[
        ("level 3", &[CParameter::CompressionLevel(3)]),
        ("level 1", &[CParameter::CompressionLevel(1)]),
        (
            "level 3, hashLog 16 chainLog 15",
            &[CParameter::CompressionLevel(3), CParameter::HashLog(16), CParameter::ChainLog(15)],
        ),
        (
            "level 3, hashLog 15 chainLog 14",
            &[CParameter::CompressionLevel(3), CParameter::HashLog(15), CParameter::ChainLog(14)],
        ),
        (
            "level 3, hashLog 14 chainLog 13",
            &[CParameter::CompressionLevel(3), CParameter::HashLog(14), CParameter::ChainLog(13)],
        ),
        ("level 1, hashLog 15", &[CParameter::CompressionLevel(1), CParameter::HashLog(15)]),
        ("level 1, hashLog 14", &[CParameter::CompressionLevel(1), CParameter::HashLog(14)]),
        ("level 1, hashLog 13", &[CParameter::CompressionLevel(1), CParameter::HashLog(13)]),
    ];
    for (fresh, (name, params)) in
        configs.iter().map(|c| (false, c)).chain(configs.iter().take(1).chain(&configs[2..3]).map(|c| (true, c)))
    {
        let mut cctx = CCtx::create();
        let mut peak = 0;
        let (bytes, us) = run(&records, |key, i| {
            let (key, record) = (key.map(|k| records[k].as_slice()), records[i].as_slice());
            if fresh {
                cctx = CCtx::create();
            }
            let out = compress(&mut cctx, record, |c| {
                c.reset(zstd::zstd_safe::ResetDirective::Parameters)?;
                for p in params.iter() {
                    c.set_parameter(*p)?;
                }
                if let Some(key) = key {
                    c.ref_prefix(key)?;
                }
                Ok(0)
            });
            peak = peak.max(cctx.sizeof());
            out
        });
        let name = if fresh { format!("{name}, a new context per frame") } else { name.to_string() };
        println!("prefix, {name}: {bytes} B/frame, {us} µs/frame, zstd memory {} KiB", peak / 1024);
    }
}

fn compress<'a>(
    cctx: &mut CCtx<'a>,
    record: &[u8],
    setup: impl FnOnce(&mut CCtx<'a>) -> zstd::zstd_safe::SafeResult,
) -> Vec<u8> {
    setup(cctx).expect("parameters");
    let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(record.len()));
    cctx.compress2(&mut out, record).expect("compress");
    out
}

/// Mean frame bytes (key and delta frames) and mean µs per frame, chunked like the writer.
fn run(records: &[Vec<u8>], mut compress: impl FnMut(Option<usize>, usize) -> Vec<u8>) -> (usize, u128) {
    let started = Instant::now();
    let mut total = 0;
    let mut key: Option<(usize, usize)> = None; // (record index, key payload bytes)
    let mut in_chunk = 0;
    let mut rekey = false;
    for i in 0..records.len() {
        let is_key = key.is_none() || in_chunk >= CHUNK || rekey;
        let out = compress(if is_key { None } else { Some(key.expect("key").0) }, i);
        total += out.len();
        if is_key {
            key = Some((i, out.len()));
            in_chunk = 1;
            rekey = false;
        } else {
            in_chunk += 1;
            rekey = out.len() * 4 > key.expect("key").1;
        }
    }
    (total / records.len(), started.elapsed().as_micros() / records.len() as u128)
}
