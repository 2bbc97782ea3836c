//! Where a store's bytes go: re-writes every sample of a store DIR through `Writer` into
//! scratch stores, each with one part of the sample left out, and prints bytes per sample of
//! each next to the store as re-written whole.
//! `cargo run --release -p proctor-store --example store_split -- DIR [SKIP]` (SKIP: the first
//! samples left out of the figures, default 10: the first key and the workers' first pass).
//! `STORE_SPLIT_COVERAGE=1` also prints, every 10th sample, how many processes have a PSS
//! reading and a command line: two stores compare only where the workers had covered as much.

use std::path::Path;

use proctor_model::Sample;
use proctor_store::{Reader, StoreConfig, Writer};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: store_split DIR [SKIP]");
    let skip: usize = args.next().map_or(10, |s| s.parse().expect("SKIP is a number"));
    let mut reader = Reader::open(Path::new(&dir)).expect("open store");
    let frames = reader.all_frames().expect("frames");
    let samples: Vec<Sample> = frames.iter().filter_map(|f| reader.read(f)).collect();
    assert!(samples.len() > skip + 1, "need more than {skip} samples");
    if std::env::var_os("STORE_SPLIT_COVERAGE").is_some() {
        for (i, s) in samples.iter().enumerate().step_by(10) {
            let pss = s.processes.iter().filter(|p| p.pss.is_some()).count();
            let cmd = s.processes.iter().filter(|p| p.cmdline.is_some()).count();
            println!("sample {i}: {} processes, {pss} with pss, {cmd} with a command line", s.processes.len());
        }
    }
    println!("{} samples, {} processes in the last", samples.len(), samples.last().map_or(0, |s| s.processes.len()));
    type Strip = fn(&mut Sample);
    let variants: [(&str, Strip); 7] = [
        ("whole", |_| {}),
        ("without the stall ledger (processes)", |s| s.processes.iter_mut().for_each(|p| p.stall = None)),
        ("without the cost's target_lock", |s| {
            s.cost.target_lock = Default::default();
            s.cost.target_lock_worst_pid = 0;
        }),
        ("without tasks", |s| s.processes.iter_mut().for_each(|p| p.tasks.clear())),
        ("without the cost", |s| s.cost = Default::default()),
        ("without pss", |s| s.processes.iter_mut().for_each(|p| p.pss = None)),
        ("without the ledger and the cost's target_lock", |s| {
            s.processes.iter_mut().for_each(|p| p.stall = None);
            s.cost.target_lock = Default::default();
            s.cost.target_lock_worst_pid = 0;
        }),
    ];
    let levels: Vec<i32> = std::env::var("STORE_SPLIT_LEVELS")
        .map(|v| v.split(',').map(|l| l.parse().expect("STORE_SPLIT_LEVELS: numbers")).collect())
        .unwrap_or_default();
    let runs = variants.into_iter().map(|v| (v, StoreConfig::default())).chain(levels.iter().map(|&level| {
        let whole: (&str, Strip) = ("whole", |_| {});
        (whole, StoreConfig { level, ..StoreConfig::default() })
    }));
    for (k, ((name, strip), config)) in runs.enumerate() {
        let out = tempdir(k);
        let level = config.level;
        let (mut writer, _) = Writer::open(&out, config).expect("open scratch store");
        let (mut bytes, mut keys, mut key_bytes) = (0u64, 0u64, 0u64);
        let (mut key_ns, mut delta_ns) = (0u64, 0u64);
        for (i, sample) in samples.iter().enumerate() {
            let mut s = sample.clone();
            strip(&mut s);
            let cost = writer.append(&s).expect("append");
            if i >= skip {
                bytes += cost.frame_bytes;
                if cost.key_frame {
                    keys += 1;
                    key_bytes += cost.frame_bytes;
                    key_ns += cost.compress_ns;
                } else {
                    delta_ns += cost.compress_ns;
                }
            }
        }
        drop(writer);
        let _ = std::fs::remove_dir_all(&out);
        let n = (samples.len() - skip) as u64;
        println!(
            "{:>8.1} bytes/sample ({keys} keys of {:.0} bytes in {:.2} ms, deltas {:.0} in {:.3} ms)  {name}, zstd -{level}",
            bytes as f64 / n as f64,
            key_bytes as f64 / keys.max(1) as f64,
            key_ns as f64 / keys.max(1) as f64 / 1e6,
            (bytes - key_bytes) as f64 / (n - keys).max(1) as f64,
            delta_ns as f64 / (n - keys).max(1) as f64 / 1e6
        );
    }
}

fn tempdir(k: usize) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("store_split.{}.{k}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).expect("scratch directory");
    p
}
