//! `proctor record`: the agent without HTTP. It samples on its drift-corrected schedule and its
//! recorder thread appends every raw sample to a store directory, until SIGINT or SIGTERM (or
//! `--count`); then this prints what recording cost. The sampling thread never touches the
//! disk: it hands each sample to the recorder over a bounded queue ([`RECORD_QUEUE`] samples),
//! and a sample that finds the queue full is dropped and counted.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use proctor_agent::{AgentConfig, Recording, RecordingStatus, Snapshot};
use proctor_model::Sample;
use proctor_procfs::system::{process_cpu_ns, self_max_rss_bytes};
use proctor_sampler::SamplerConfig;
use proctor_store::{AppendCost, Sink, StoreConfig, Writer};
use serde::Serialize;

use super::common::ReadArgs;
use crate::daemon::Daemon;
use crate::datadir::report_open;
use crate::output::{print_json, Format};
use crate::signals;
use proctor_vocab::duration_arg;
use proctor_vocab::units::bytes;

/// Arguments of `proctor record`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The data directory, created (mode 0700) if missing; the default is where `proctor serve`
    /// records. One recorder per directory at a time.
    #[arg(long, value_name = "DIR", default_value_os_t = crate::datadir::default_for_flags())]
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
    /// Fold every sample's processes into groups and store which group each process is in
    /// (`cgroup`, `user`, or a process-exporter rules file), for `report --group`, `dump group`
    /// and the rollups.
    #[arg(long, value_name = "cgroup|user|FILE")]
    pub groups: Option<String>,
    /// The long-term tiers, rolled up from the recording every few minutes.
    #[command(flatten)]
    pub tiers: crate::daemon::TierArgs,
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
    /// Samples written to the store.
    pub samples: u64,
    /// Samples taken but not written: the recorder's queue was full.
    pub samples_dropped: u64,
    pub write_errors: u64,
    pub interval_seconds: f64,
    pub elapsed_seconds: f64,
    pub missed_ticks: u64,
    pub processes_last_sample: usize,
    pub frame_bytes_per_sample: f64,
    pub key_frames: u64,
    pub record_bytes_per_sample: f64,
    /// Sampling (the sampler's own measure of its cycle), per sample.
    pub sample_cpu_seconds_per_sample: f64,
    /// Encoding, compressing and writing, per sample (wall time on the recorder thread).
    pub store_encode_seconds_per_sample: f64,
    pub store_compress_seconds_per_sample: f64,
    pub store_write_seconds_per_sample: f64,
    /// CPU of the recorder thread (encoding, compressing, writing), per sample.
    pub recorder_thread_cpu_seconds_per_sample: f64,
    /// CPU of the whole process (workers included) over the run, as a share of one core.
    pub process_cpu_percent_of_one_core: f64,
    pub max_rss_bytes: u64,
}

/// Samples the recorder's queue holds while the disk is slow: recording is all this command
/// does, so it rides out longer stalls than `serve`'s (~16 MiB with ~600 processes).
pub const RECORD_QUEUE: usize = 32;

/// Writes to the store, then announces each written sample on stderr (`--progress`).
struct Announce(Writer);

impl Sink<Sample> for Announce {
    fn append(&mut self, sample: &Sample) -> Result<AppendCost, String> {
        let cost = Sink::append(&mut self.0, sample)?;
        eprintln!("appended {} {}", sample.seq, sample.unix_ns);
        Ok(cost)
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.interval.is_zero() {
        anyhow::bail!("--interval must be more than zero");
    }
    // Every flag is decided before the store is created or a thread starts: a groups rules file
    // or a host root it cannot use stops record with its reason and leaves no directory behind.
    let groups = crate::daemon::groups(args.groups.as_deref())?;
    // Groups count their members' open fds: one statx per process per sample.
    let sampler_config = SamplerConfig { process_fds: groups.is_some(), ..args.read.config()? };
    let config = StoreConfig {
        retain_age: args.retain_age,
        retain_bytes: args.retain_mib.saturating_mul(1 << 20),
        sync_every_frame: args.sync,
        ..StoreConfig::default()
    };
    // Block SIGINT and SIGTERM before the agent starts its threads, so they inherit the mask
    // and only the waiter below receives the signals.
    let signals = signals::block()?;
    crate::datadir::create_for_recording(&args.dir).context("cannot record")?;
    let (writer, report) = Writer::open(&args.dir, config).context("cannot record")?;
    report_open("proctor record", &args.dir, &report);
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    signals.on_signal(move || {
        // The receiver is gone only once recording has already stopped.
        let _ = stop_tx.send(());
    });

    let started = Instant::now();
    let process_cpu_start = process_cpu_ns();
    let sink: Box<dyn Sink<Sample>> = if args.progress { Box::new(Announce(writer)) } else { Box::new(writer) };
    let recording = Recording::On { dir: args.dir.clone(), sink, queue: RECORD_QUEUE };
    let agent_config = AgentConfig { max_samples: args.count, groups, ..AgentConfig::brief(args.interval) };
    let mut daemon = Daemon::start(sampler_config, agent_config, recording)?;
    daemon.add(
        proctor_stored::rollup::Roller::spawn(args.dir.clone(), args.tiers.config(), crate::daemon::ROLL_EVERY)
            .context("cannot start the rollup thread")?,
    );
    let shared = daemon.shared();
    match args.count {
        // Until stopped: this thread sleeps until then (it woke every 100 ms to look).
        None => {
            let _ = stop_rx.recv();
        }
        Some(count) => loop {
            if shared.latest().agent.samples >= count {
                break;
            }
            match stop_rx.recv_timeout(args.interval.min(Duration::from_millis(100))) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        },
    }
    let last = shared.latest();
    // Stops the roller, then sampling, then drains the recorder's queue into the store.
    let recording = daemon.stop();
    let elapsed = started.elapsed();
    let process_cpu = process_cpu_ns().saturating_sub(process_cpu_start);
    let stats = &recording.stats;
    if stats.dropped > 0 || stats.write_errors > 0 {
        eprintln!(
            "proctor record: {} samples dropped at a full queue (the disk fell behind), {} failed writes{}",
            stats.dropped,
            stats.write_errors,
            stats.last_write_error.as_deref().map(|e| format!("; the last: {e}")).unwrap_or_default()
        );
    }
    let summary = summary(&args, &recording, &last, elapsed, process_cpu);
    match args.format {
        Format::Json => print_json(&summary)?,
        Format::Text => print_text(&summary)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn summary(
    args: &Args,
    recording: &RecordingStatus,
    last: &Snapshot,
    elapsed: Duration,
    process_cpu_ns: u64,
) -> Summary {
    let stats = &recording.stats;
    let samples = stats.written;
    let per = |total: u64| if samples == 0 { 0.0 } else { total as f64 / samples as f64 };
    let taken = last.agent.samples.max(1) as f64;
    Summary {
        dir: args.dir.clone(),
        samples,
        samples_dropped: stats.dropped,
        write_errors: stats.write_errors,
        interval_seconds: args.interval.as_secs_f64(),
        elapsed_seconds: elapsed.as_secs_f64(),
        missed_ticks: last.agent.missed_ticks,
        processes_last_sample: last.rows.len(),
        frame_bytes_per_sample: per(stats.frame_bytes),
        key_frames: stats.key_frames,
        record_bytes_per_sample: per(stats.record_bytes),
        sample_cpu_seconds_per_sample: last.agent.sampling_cpu_seconds / taken,
        store_encode_seconds_per_sample: per(stats.encode_ns) / 1e9,
        store_compress_seconds_per_sample: per(stats.compress_ns) / 1e9,
        store_write_seconds_per_sample: per(stats.write_ns) / 1e9,
        recorder_thread_cpu_seconds_per_sample: per(stats.cpu_ns) / 1e9,
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
        "recorded   {} samples into {} ({} dropped) over {:.1} s (every {} s, {} ticks missed), {} processes in the last",
        s.samples,
        s.dir.display(),
        s.samples_dropped,
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
        "cost       per sample: sampling {} CPU; storing {} encode + {} compress + {} write (wall); recorder thread {} CPU",
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
