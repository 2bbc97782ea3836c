//! `proctor record`: samples on a drift-corrected schedule into a store directory until SIGINT
//! or SIGTERM (or `--count`), then prints what recording cost. Does not derive anything: the
//! store keeps raw samples, and `replay`/`dump` derive views from them.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use proctor_procfs::system::{process_cpu_ns, self_max_rss_bytes, thread_cpu_ns};
use proctor_sampler::{Sampler, Schedule};
use proctor_store::{StoreConfig, Writer, WriterStats};
use serde::Serialize;

use super::common::ReadArgs;
use crate::datadir::report_open;
use crate::output::{bytes, print_json, Format};
use crate::signals;
use proctor_vocab::duration_arg;

/// Arguments of `proctor record`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The data directory (must exist). One recorder per directory at a time.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Time between samples.
    #[arg(long, default_value = "1s", value_parser = duration_arg)]
    pub interval: Duration,
    /// Stop after this many samples (default: until SIGINT or SIGTERM).
    #[arg(long)]
    pub count: Option<u64>,
    /// Drop data older than this (whole segments; `7d`, `36h`, `90m`).
    #[arg(long, default_value = "7d", value_parser = duration_arg)]
    pub retain_age: Duration,
    /// Drop the oldest data while the store exceeds this many MiB (whole segments).
    #[arg(long, default_value_t = 2048)]
    pub retain_mib: u64,
    /// fdatasync after every sample, so a power loss (not only a crash) loses at most the
    /// sample in flight.
    #[arg(long)]
    pub sync: bool,
    /// After each sample is written, print `appended SEQ UNIX_NS` to stderr (for the crash
    /// tests: every announced sample must survive a SIGKILL).
    #[arg(long, hide = true)]
    pub progress: bool,
    /// Format of the cost summary printed at the end.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub read: ReadArgs,
}

/// What recording cost, printed at the end.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub dir: PathBuf,
    pub samples: u64,
    pub interval_seconds: f64,
    pub elapsed_seconds: f64,
    pub missed_ticks: u64,
    pub processes_last_sample: usize,
    pub frame_bytes_per_sample: f64,
    pub key_frames: u64,
    pub record_bytes_per_sample: f64,
    /// Sampling (the sampler's own measure of its cycle), per sample.
    pub sample_cpu_seconds_per_sample: f64,
    /// Encoding, compressing and writing, per sample (wall time on the recording thread).
    pub store_encode_seconds_per_sample: f64,
    pub store_compress_seconds_per_sample: f64,
    pub store_write_seconds_per_sample: f64,
    /// CPU of the recording thread (sampling and storing), per sample.
    pub recorder_thread_cpu_seconds_per_sample: f64,
    /// CPU of the whole process (workers included) over the run, as a share of one core.
    pub process_cpu_percent_of_one_core: f64,
    pub max_rss_bytes: u64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.interval.is_zero() {
        anyhow::bail!("--interval must be more than zero");
    }
    let config = StoreConfig {
        retain_age: args.retain_age,
        retain_bytes: args.retain_mib.saturating_mul(1 << 20),
        sync_every_frame: args.sync,
        ..StoreConfig::default()
    };
    // Block SIGINT and SIGTERM before the sampler starts its worker threads, so they inherit
    // the mask and only the waiter below receives the signals.
    let signals = signals::block()?;
    let (mut writer, report) = Writer::open(&args.dir, config).context("cannot record")?;
    report_open("proctor record", &args.dir, &report);

    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    signals.on_signal("record-signals", move || {
        // The receiver is gone only once recording has already stopped.
        let _ = stop_tx.send(());
    })?;

    let started = Instant::now();
    let process_cpu_start = process_cpu_ns();
    let thread_cpu_start = thread_cpu_ns();
    let mut sampler = Sampler::new(args.read.config());
    let mut schedule = Schedule::new(started, args.interval);
    let mut samples = 0u64;
    let mut sample_cpu_ns = 0u64;
    let mut processes_last_sample;
    loop {
        let sample = sampler.sample();
        sample_cpu_ns += sample.cost.cpu_ns;
        processes_last_sample = sample.processes.len();
        writer.append(&sample).with_context(|| format!("cannot write to {}", args.dir.display()))?;
        samples += 1;
        if args.progress {
            eprintln!("appended {} {}", sample.seq, sample.unix_ns);
        }
        if args.count.is_some_and(|count| samples >= count) {
            break;
        }
        match stop_rx.recv_timeout(schedule.next_delay(Instant::now())) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let elapsed = started.elapsed();
    let thread_cpu = thread_cpu_ns().saturating_sub(thread_cpu_start);
    let process_cpu = process_cpu_ns().saturating_sub(process_cpu_start);
    let stats = writer.stats();
    let summary = summary(
        &args,
        &stats,
        samples,
        elapsed,
        schedule.missed(),
        processes_last_sample,
        sample_cpu_ns,
        thread_cpu,
        process_cpu,
    );
    match args.format {
        Format::Json => print_json(&summary)?,
        Format::Text => print_text(&summary)?,
    }
    Ok(ExitCode::SUCCESS)
}

#[allow(clippy::too_many_arguments)]
fn summary(
    args: &Args,
    stats: &WriterStats,
    samples: u64,
    elapsed: Duration,
    missed: u64,
    processes_last_sample: usize,
    sample_cpu_ns: u64,
    thread_cpu_ns: u64,
    process_cpu_ns: u64,
) -> Summary {
    let per = |total: u64| if samples == 0 { 0.0 } else { total as f64 / samples as f64 };
    Summary {
        dir: args.dir.clone(),
        samples,
        interval_seconds: args.interval.as_secs_f64(),
        elapsed_seconds: elapsed.as_secs_f64(),
        missed_ticks: missed,
        processes_last_sample,
        frame_bytes_per_sample: per(stats.frame_bytes),
        key_frames: stats.key_frames,
        record_bytes_per_sample: per(stats.record_bytes),
        sample_cpu_seconds_per_sample: per(sample_cpu_ns) / 1e9,
        store_encode_seconds_per_sample: per(stats.encode_ns) / 1e9,
        store_compress_seconds_per_sample: per(stats.compress_ns) / 1e9,
        store_write_seconds_per_sample: per(stats.write_ns) / 1e9,
        recorder_thread_cpu_seconds_per_sample: per(thread_cpu_ns) / 1e9,
        process_cpu_percent_of_one_core: if elapsed.is_zero() {
            0.0
        } else {
            process_cpu_ns as f64 / elapsed.as_nanos() as f64 * 100.0
        },
        max_rss_bytes: self_max_rss_bytes(),
    }
}

fn print_text(s: &Summary) -> anyhow::Result<()> {
    let mut w = std::io::stdout().lock();
    let ms = |seconds: f64| format!("{:.3} ms", seconds * 1e3);
    writeln!(
        w,
        "recorded   {} samples into {} over {:.1} s (every {} s, {} ticks missed), {} processes in the last",
        s.samples,
        s.dir.display(),
        s.elapsed_seconds,
        s.interval_seconds,
        s.missed_ticks,
        s.processes_last_sample
    )?;
    writeln!(
        w,
        "store      {} per sample on disk ({} key frames), {} of JSON before compression",
        bytes(s.frame_bytes_per_sample as u64),
        s.key_frames,
        bytes(s.record_bytes_per_sample as u64)
    )?;
    writeln!(
        w,
        "cost       per sample: sampling {} CPU; storing {} encode + {} compress + {} write (wall); recording thread {} CPU",
        ms(s.sample_cpu_seconds_per_sample),
        ms(s.store_encode_seconds_per_sample),
        ms(s.store_compress_seconds_per_sample),
        ms(s.store_write_seconds_per_sample),
        ms(s.recorder_thread_cpu_seconds_per_sample)
    )?;
    writeln!(
        w,
        "process    {:.2} % of one core over the run (workers included), max RSS {}",
        s.process_cpu_percent_of_one_core,
        bytes(s.max_rss_bytes)
    )?;
    Ok(())
}
