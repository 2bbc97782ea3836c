//! Writes a synthetic store: one real sample of this host, appended again and again at a fixed
//! step with its times and counters moved on, as a recorder running that long would have.
//! `cargo run --release -p proctor-agent --example store_day -- DIR [SECONDS] [STEP_MS] [END_UNIX_MS]`
//! (defaults: a day, 1 s, ending now). With `HISTORY_COST=1` it then times what
//! `/api/v1/history` does for the store's part of a day view (`SECONDS` 0: only that, on an
//! existing store). With `REPORT_COST=1` it times what `/api/v1/report` does over the whole
//! store instead (with `SECONDS` 0 too). With `BURNER=NAME` every sample also carries a
//! synthetic process NAME (pid 4000000) that uses 90 % of one CPU and holds 48 GiB, which a
//! report over the range must rank first. The dashboard test (web/test) fills a store with
//! older samples with it.

use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use proctor_sampler::{Sampler, SamplerConfig};
use proctor_store::{StoreConfig, Writer};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("usage: store_day DIR [SECONDS] [STEP_MS] [END_UNIX_MS]"));
    let seconds: u64 = args.next().map_or(86_400, |s| s.parse().expect("SECONDS"));
    if seconds == 0 {
        // Measure an existing store only.
        if std::env::var_os("REPORT_COST").is_some() {
            report_cost(&dir);
        } else {
            history_cost(&dir);
        }
        return;
    }
    let step_ms: u64 = args.next().map_or(1000, |s| s.parse().expect("STEP_MS"));
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis() as u64;
    let end_ms: u64 = args.next().map_or(now_ms, |s| s.parse().expect("END_UNIX_MS"));
    std::fs::create_dir_all(&dir).expect("create DIR");
    let (mut writer, _) = Writer::open(
        &dir,
        StoreConfig { retain_age: std::time::Duration::from_secs(30 * 86_400), ..StoreConfig::default() },
    )
    .expect("open store");
    let mut sampler = Sampler::new(SamplerConfig { pss_budget: 0.0, ..SamplerConfig::default() });
    let mut sample = sampler.sample();
    let burner = std::env::var("BURNER").ok().map(|name| {
        let mut p = sample.processes.first().cloned().expect("a process to copy");
        p.pid = 4_000_000;
        p.ppid = 1;
        p.start_ticks = 1;
        p.comm = std::sync::Arc::from(name.as_str());
        p.cmdline = Some(std::sync::Arc::from(vec![name.clone(), "--synthetic-burner".to_string()]));
        p.utime_ticks = 0;
        p.stime_ticks = 0;
        p.resident_bytes = Some(48 << 30);
        sample.processes.push(p);
        sample.processes.len() - 1
    });
    let count = seconds * 1000 / step_ms;
    let start_ns = (end_ms - seconds * 1000) * 1_000_000;
    let started = Instant::now();
    let mut bytes = 0;
    for i in 0..count {
        sample.seq = i;
        sample.unix_ns = start_ns + i * step_ms * 1_000_000;
        sample.mono_ns = i * step_ms * 1_000_000;
        if let Some(stat) = sample.host.stat.as_mut() {
            // Busy for a varying share of each step, so the CPU series moves, with one spike
            // every 10 minutes that a downsampled day view must keep.
            let ticks = step_ms / 10;
            let busy = if i % 600 == 300 { ticks } else { ticks * (i % 7) / 20 };
            stat.total.user += busy;
            stat.total.idle += ticks - busy;
        }
        if let Some(i) = burner {
            // 90 % of one CPU per step, in the sample's own clock ticks.
            sample.processes[i].utime_ticks += step_ms * sample.clock_ticks_per_sec * 9 / 10_000;
        }
        bytes += writer.append(&sample).expect("append").frame_bytes;
    }
    eprintln!(
        "{count} samples every {step_ms} ms, {bytes} bytes, {} processes each, written in {:.1} s",
        sample.processes.len(),
        started.elapsed().as_secs_f64()
    );
    if std::env::var_os("DECODE_COST").is_some() {
        decode_cost(&dir);
    }
    if std::env::var_os("HISTORY_COST").is_some() {
        history_cost(&dir);
    }
    if std::env::var_os("REPORT_COST").is_some() {
        report_cost(&dir);
    }
}

/// Times what `/api/v1/report` and `proctor report` do (the one range fold) over the whole
/// store, twice (the second with the files in the page cache), and the same over its last
/// hour, with the frame budget `FRAMES` (default: the one both surfaces use).
fn report_cost(dir: &std::path::Path) {
    use proctor_stored::range::{fold_range, FoldConfig, DEFAULT_FRAMES};
    let budget: usize = std::env::var("FRAMES").ok().and_then(|b| b.parse().ok()).unwrap_or(DEFAULT_FRAMES);
    let mut reader = proctor_store::Reader::open(dir).expect("open");
    let frames = reader.all_frames().expect("frames");
    let (from, to) = (frames[0].unix_ns(), frames[frames.len() - 1].unix_ns());
    for (round, from) in [
        ("whole store", from),
        ("whole store again", from),
        ("last hour", to.saturating_sub(3_600_000_000_000).max(from)),
    ] {
        let mut reader = proctor_store::Reader::open(dir).expect("open");
        let config = FoldConfig { budget, max_span: None, ..FoldConfig::default() };
        let fold = fold_range(&mut reader, from, to, config).expect("fold");
        let top = fold.summary.top_cpu.first().map(|p| (p.comm.clone(), p.cpu_seconds));
        eprintln!(
            "{round}: {} frames in range, {} read (budget {budget}, one in {}), {} processes seen, top cpu {top:?}: {:.0} ms",
            fold.stats.frames_in_range,
            fold.stats.frames_read,
            fold.stats.stride,
            fold.summary.processes_seen,
            fold.stats.elapsed_ms
        );
    }
}

/// Times what `/api/v1/history` does for the store's part of a day view: `read_points` over the
/// whole store with the dashboard's budget, cold and then again with the cache of the first.
fn history_cost(dir: &std::path::Path) {
    use proctor_stored::store_history::{read_points, PointCache};
    let mut sampler = Sampler::new(SamplerConfig { pss_budget: 0.0, ..SamplerConfig::default() });
    let first = proctor_agent::Snapshot::derive(sampler.sample(), None);
    let maker = proctor_agent::history::History::new(&first, 10, 10).maker().clone();
    let budget: usize = std::env::var("BUDGET").ok().and_then(|b| b.parse().ok()).unwrap_or(1500);
    let mut reader = proctor_store::Reader::open(dir).expect("open");
    let frames = reader.all_frames().expect("frames");
    let (from, to) = (frames[0].unix_ns() / 1_000_000, frames[frames.len() - 1].unix_ns() / 1_000_000);
    let mut cache = PointCache::default();
    for round in ["cold", "cached", "cached, window moved 1 min"] {
        let shift = if round.ends_with("1 min") { 60_000 } else { 0 };
        let (points, report) = read_points(dir, &maker, from + shift, to + shift, budget, &mut cache);
        eprintln!(
            "{round}: {} points from {} frames in range, {} decoded, {} cached, one in {}: {:.0} ms; cache {} points, {} bytes",
            points.len(),
            report.stats.frames_in_range,
            report.frames_decoded,
            report.points_cached,
            report.stats.stride,
            report.stats.elapsed_ms,
            cache.len(),
            cache.bytes()
        );
    }
}

fn decode_cost(dir: &std::path::Path) {
    let mut reader = proctor_store::Reader::open(dir).expect("open");
    let frames = reader.all_frames().expect("frames");
    let started = Instant::now();
    let n = frames.len().min(3000);
    for f in &frames[..n] {
        reader.read(f).expect("decode");
    }
    eprintln!("decoded {n} frames: {:.3} ms each", started.elapsed().as_secs_f64() * 1e3 / n as f64);
}
