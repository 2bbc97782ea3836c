//! Writes a day of synthetic 1 s samples through `Writer`, for measuring readers over a day
//! (`bench/report/run.sh`): `cargo run --release -p proctor-store --example day_store -- SEED
//! OUT [SAMPLES]`.
//!
//! The samples are derived from the last real sample in SEED (a store `proctor record` wrote on
//! this host, so its processes, command lines and files are real): each step adds 1 s to the
//! wall and monotonic clocks, `seq` and uptime, and advances the cumulative counters the way a
//! lightly loaded host does — host CPU ticks split over user/system/iowait/idle with a busy
//! stretch every 10 minutes, PSI totals, whole-disk sectors and I/O time, network bytes, and
//! CPU ticks and RSS of a tenth of the processes (a few busy ones every step). Every 10 s one
//! short-lived process is replaced by a new pid with a new start time (a day has 8,640 of
//! them), so the readers' per-process state meets realistic churn. Every 10 s a statsd flush
//! goes into `OUT/statsd` with one timer, `api.latency`, slow (~200 ms) in the busy stretches
//! and ~20 ms otherwise. A fixed xorshift seed makes every run write the same store.

use std::path::Path;
use std::sync::Arc;

use proctor_model::{StatsdFlush, StatsdTimer};
use proctor_store::{stream_dir, Event, Reader, StoreConfig, Writer, STATSD_STREAM};

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: day_store SEED_DIR OUT_DIR [SAMPLES]";
    let seed_dir = args.next().expect(usage);
    let out_dir = args.next().expect(usage);
    let samples: u64 = args.next().map_or(86_400, |n| n.parse().expect("SAMPLES is a number"));
    let mut reader = Reader::open(Path::new(&seed_dir)).expect("open the seed store");
    let frames = reader.all_frames().expect("seed frames");
    let seed = frames.iter().rev().find_map(|f| reader.read(f)).expect("a sample in the seed store");
    eprintln!("seed: {} processes, writing {samples} samples", seed.processes.len());

    let (mut writer, _) = Writer::open(Path::new(&out_dir), StoreConfig::default()).expect("open the output store");
    let statsd_dir = stream_dir(Path::new(&out_dir), STATSD_STREAM).expect("statsd stream");
    let (mut statsd, _) = Writer::open(&statsd_dir, StoreConfig::default()).expect("open the statsd stream");
    let mut sample = seed.clone();
    // The day ends at the seed's time.
    sample.unix_ns = seed.unix_ns.saturating_sub(samples * 1_000_000_000);
    sample.seq = 0;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |bound: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % bound.max(1)
    };
    let cpus = seed.host.stat.as_ref().map_or(2, |s| s.per_cpu.len().max(1)) as u64;
    let ticks = seed.clock_ticks_per_sec * cpus;
    let mut next_pid = seed.processes.iter().map(|p| p.pid).max().unwrap_or(1000) + 1;
    let mut written_bytes = 0u64;
    for i in 0..samples {
        sample.seq += 1;
        sample.unix_ns += 1_000_000_000;
        sample.mono_ns += 1_000_000_000;
        let busy = (i / 60) % 10 == 0;
        if let Some(up) = sample.host.uptime.as_mut() {
            up.up_secs += 1.0;
        }
        if let Some(stat) = sample.host.stat.as_mut() {
            let user = if busy { ticks * 6 / 10 } else { next(ticks / 10) + 2 };
            let system = next(ticks / 20) + 1;
            let iowait = next(3);
            let t = &mut stat.total;
            t.user += user;
            t.system += system;
            t.iowait += iowait;
            t.softirq += next(2);
            t.idle += ticks.saturating_sub(user + system + iowait);
        }
        for pressure in [&mut sample.host.pressure_cpu, &mut sample.host.pressure_io, &mut sample.host.pressure_memory]
        {
            if let Some(p) = pressure.as_mut() {
                let stalled = if busy { 300_000 } else { next(20_000) };
                if let Some(some) = p.some.as_mut() {
                    some.total_usec += stalled;
                }
                if let Some(full) = p.full.as_mut() {
                    full.total_usec += stalled / 3;
                }
            }
        }
        for disk in &mut sample.host.disks {
            let writes = next(40);
            disk.writes += writes;
            disk.write_sectors += writes * 8;
            disk.reads += next(3);
            disk.read_sectors += next(3) * 8;
            disk.io_ms += next(30);
        }
        for net in &mut sample.host.nets {
            net.rx_bytes += next(20_000);
            net.tx_bytes += next(10_000);
        }
        let n = sample.processes.len() as u64;
        for _ in 0..n / 10 {
            let p = &mut sample.processes[next(n) as usize];
            p.utime_ticks += next(3);
            p.stime_ticks += next(2);
            p.minflt += next(50);
            if let Some(rss) = p.resident_bytes.as_mut() {
                *rss = (*rss + next(64) * 4096).saturating_sub(next(64) * 4096);
            }
        }
        for p in sample.processes.iter_mut().take(3) {
            p.utime_ticks += next(20);
        }
        if i % 10 == 0 && n > 1 {
            // The last process exits; a new one starts now (start time = uptime in ticks).
            let last = sample.processes.len() - 1;
            let p = &mut sample.processes[last];
            p.pid = next_pid;
            next_pid += 1;
            p.start_ticks = sample
                .host
                .uptime
                .map_or(p.start_ticks + 1000, |u| (u.up_secs * seed.clock_ticks_per_sec as f64) as u64);
            p.utime_ticks = next(5);
            p.stime_ticks = next(5);
            p.comm = Arc::from(format!("job{}", i % 97));
            p.cmdline = Some(Arc::from(vec![format!("/usr/bin/job{}", i % 97), format!("--run={i}")]));
        }
        if i % 10 == 9 {
            let ms = if busy { 200.0 } else { 20.0 } + next(10) as f64;
            let stats =
                vec![("count".to_string(), 500.0), ("mean".to_string(), ms / 2.0), ("upper_90".to_string(), ms)];
            let flush = StatsdFlush {
                unix_ns: sample.unix_ns,
                interval_ms: 10_000,
                timers: vec![StatsdTimer { key: "api.latency".to_string(), stats }],
                counters: vec![("api.requests".to_string(), 500.0, 50.0)],
                gauges: Vec::new(),
            };
            statsd.append_event(sample.unix_ns, &Event::Statsd(flush)).expect("append a flush");
        }
        let cost = writer.append(&sample).expect("append");
        written_bytes += cost.frame_bytes;
        if i % 10_000 == 0 {
            eprintln!("{i} samples, {written_bytes} bytes");
        }
    }
    let first = sample.unix_ns - (samples - 1) * 1_000_000_000;
    println!(
        "from @{:.3} to @{:.3}: {samples} samples, {written_bytes} bytes",
        first as f64 / 1e9,
        sample.unix_ns as f64 / 1e9
    );
}
