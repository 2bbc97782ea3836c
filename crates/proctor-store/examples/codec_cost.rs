//! Record versions 1, 2 and 3 on the same samples, side by side in one run: each round
//! writes every sample of a store through a real `Writer` once per version (into a temporary
//! directory, default configuration: chunks of 60), then reads every frame back with a `Reader`,
//! in order (replay, dump, report) and one frame per chunk from a cold reader (the dashboard's
//! day view takes one frame per ~minute). Prints medians over the rounds of the per-frame means.
//! Every decoded sample is compared with the one written (as JSON), so a figure is never of a
//! wrong decoding. The samples' strings are shared between samples, as the sampler's are.
//! `cargo run --release -p proctor-store --example codec_cost -- DIR [ROUNDS]`
//!
//! Memory is the Rust heap (a counting allocator): what the writer holds between frames (its
//! growth from before the first append, samples preloaded), and the most it held during an
//! append. zstd allocates with C `malloc` and is not counted: its contexts are freed after
//! each frame (see `examples/compressor_mem.rs`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use proctor_model::Sample;
use proctor_store::codec::{RECORD_VERSION, RECORD_VERSION_1, RECORD_VERSION_2};
use proctor_store::{Reader, StoreConfig, Writer};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller's layout, as GlobalAlloc requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            let live = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size - layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        // SAFETY: as for `alloc`; `ptr` came from this allocator with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[derive(Default, Clone)]
struct Figures {
    encode_us: f64,
    compress_us: f64,
    write_us: f64,
    /// Per frame, all frames; and per delta frame.
    bytes: f64,
    delta_bytes: f64,
    key_frames: f64,
    held_kib: f64,
    peak_kib: f64,
    decode_us: f64,
    sparse_us: f64,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: codec_cost DIR [ROUNDS]");
    let rounds: usize = args.next().map_or(5, |r| r.parse().expect("ROUNDS is a number"));
    let mut reader = Reader::open(std::path::Path::new(&dir)).expect("open store");
    let frames = reader.all_frames().expect("frames");
    let mut samples: Vec<Sample> = frames.iter().filter_map(|f| reader.read(f)).collect();
    share_strings(&mut samples);
    assert!(samples.len() > 1, "need at least two samples");
    let json: Vec<serde_json::Value> = samples.iter().map(|s| serde_json::to_value(s).expect("json")).collect();
    let processes = samples.iter().map(|s| s.processes.len()).sum::<usize>() / samples.len();
    println!(
        "{} samples, {processes} processes on average, {rounds} rounds; medians of per-frame means",
        samples.len()
    );
    const VERSIONS: [u8; 3] = [RECORD_VERSION_1, RECORD_VERSION_2, RECORD_VERSION];
    let mut results: [Vec<Figures>; 3] = Default::default();
    for _ in 0..rounds {
        for (slot, version) in VERSIONS.into_iter().enumerate() {
            results[slot].push(run(version, &samples, &json));
        }
    }
    println!(
        "{:<10} {:>9} {:>11} {:>9} {:>10} {:>12} {:>5} {:>13} {:>13} {:>12} {:>14}",
        "version",
        "encode µs",
        "compress µs",
        "write µs",
        "B/frame",
        "B/delta",
        "keys",
        "held KiB",
        "peak KiB",
        "decode µs",
        "sparse µs"
    );
    for (slot, version) in VERSIONS.into_iter().enumerate() {
        let m = |pick: fn(&Figures) -> f64| median(results[slot].iter().map(pick).collect());
        println!(
            "{:<10} {:>9.0} {:>11.0} {:>9.0} {:>10.0} {:>12.0} {:>5.0} {:>13.0} {:>13.0} {:>12.0} {:>14.0}",
            format!("v{version}"),
            m(|f| f.encode_us),
            m(|f| f.compress_us),
            m(|f| f.write_us),
            m(|f| f.bytes),
            m(|f| f.delta_bytes),
            m(|f| f.key_frames),
            m(|f| f.held_kib),
            m(|f| f.peak_kib),
            m(|f| f.decode_us),
            m(|f| f.sparse_us),
        );
    }
    println!("decode: every frame in order; sparse: one delta per chunk (its middle), cold reader each.");
}

fn run(version: u8, samples: &[Sample], json: &[serde_json::Value]) -> Figures {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StoreConfig { record_version: version, ..StoreConfig::default() };
    let mut f = Figures::default();
    let (mut held, mut peak) = (0usize, 0usize);
    let (mut delta_bytes, mut deltas) = (0u64, 0u64);
    {
        let base = LIVE.load(Ordering::Relaxed);
        let (mut writer, _) = Writer::open(dir.path(), config).expect("open");
        for sample in samples {
            PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
            let cost = writer.append(sample).expect("append");
            peak = peak.max(PEAK.load(Ordering::Relaxed).saturating_sub(base));
            held = held.max(LIVE.load(Ordering::Relaxed).saturating_sub(base));
            if !cost.key_frame {
                delta_bytes += cost.frame_bytes;
                deltas += 1;
            }
        }
        let s = writer.stats();
        let n = s.frames as f64;
        f.encode_us = s.encode_ns as f64 / n / 1e3;
        f.compress_us = s.compress_ns as f64 / n / 1e3;
        f.write_us = s.write_ns as f64 / n / 1e3;
        f.bytes = s.frame_bytes as f64 / n;
        f.key_frames = s.key_frames as f64;
    }
    f.delta_bytes = delta_bytes as f64 / deltas.max(1) as f64;
    f.held_kib = held as f64 / 1024.0;
    f.peak_kib = peak as f64 / 1024.0;

    let mut reader = Reader::open(dir.path()).expect("reader");
    let frames = reader.all_frames().expect("frames");
    assert_eq!(frames.len(), samples.len());
    let started = Instant::now();
    let back: Vec<Sample> = frames.iter().map(|fr| reader.try_read(fr).expect("decode")).collect();
    f.decode_us = started.elapsed().as_secs_f64() * 1e6 / frames.len() as f64;
    for (i, s) in back.iter().enumerate() {
        assert!(serde_json::to_value(s).expect("json") == json[i], "v{version}: frame {i} decoded differently");
    }
    // One delta per chunk, from the middle of it, each from a reader that holds no key.
    let mut picked = Vec::new();
    let mut chunk_start = 0;
    for i in 1..=frames.len() {
        if i == frames.len() || frames[i].frame.key_offset != frames[chunk_start].frame.key_offset {
            picked.push((chunk_start + i) / 2);
            chunk_start = i;
        }
    }
    let started = Instant::now();
    for &i in &picked {
        let mut cold = Reader::open(dir.path()).expect("reader");
        let got = cold.try_read(&frames[i]).expect("decode");
        assert_eq!(got.seq, samples[i].seq);
    }
    f.sparse_us = started.elapsed().as_secs_f64() * 1e6 / picked.len() as f64;
    f
}

/// The sampler shares a process's strings (`Arc`s) from one sample to the next; samples read
/// back from a store do not. Shared again here, so comparing rows costs what it costs live.
fn share_strings(samples: &mut [Sample]) {
    use std::collections::HashMap;
    use std::sync::Arc;
    let mut names: HashMap<Arc<str>, Arc<str>> = HashMap::new();
    let mut lines: HashMap<Arc<[String]>, Arc<[String]>> = HashMap::new();
    for p in samples.iter_mut().flat_map(|s| s.processes.iter_mut()) {
        p.comm = names.entry(p.comm.clone()).or_insert_with(|| p.comm.clone()).clone();
        if let Some(cgroup) = &p.cgroup {
            p.cgroup = Some(names.entry(cgroup.clone()).or_insert_with(|| cgroup.clone()).clone());
        }
        if let Some(cmdline) = &p.cmdline {
            p.cmdline = Some(lines.entry(cmdline.clone()).or_insert_with(|| cmdline.clone()).clone());
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}
