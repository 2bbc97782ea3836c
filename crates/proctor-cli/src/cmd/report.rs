//! `proctor report`: a recorded time range as plots (CPU, memory, PSI, disk, network), the top
//! processes by CPU and memory over it, and — given probe results or statsd timers of the same
//! period — which system series moved together with the slow requests.
//!
//! This module is the I/O around the range fold: the samples are read and folded by
//! `proctor_stored::range::fold_range` (the function `/api/v1/report` uses, with the same frame
//! budget, so the dashboard and this command agree), the report is the vocabulary's
//! `ReportOut`; here the latencies are read from the probe or statsd stream (or a `proctor
//! probe --out` file), correlated, and the files written.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use proctor_model::ProbeResult;
use proctor_report::{
    correlate, plot, Correlation, CorrelationConfig, GroupSelect, GroupSummary, LatencyPoint, RangeSummary, Series,
    SlowRule, Unit,
};
use proctor_store::{Event, Reader, PROBE_STREAM, STATSD_STREAM};
use proctor_stored::range::{fold_tiered, FoldConfig, DEFAULT_FRAMES};
use proctor_vocab::report::ReportOut;
use serde::Serialize;

use super::common::now_unix_ns;
use crate::output::Format;
use proctor_vocab::{duration_arg, format_utc, parse_when, When};

/// Arguments of `proctor report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The data directory `proctor record` or `proctor serve` wrote (default: where `proctor serve` records).
    #[arg(long, value_name = "DIR", default_value_os_t = crate::datadir::default_for_flags())]
    pub dir: PathBuf,
    /// From this time ("1h ago", "2024-05-01T12:00:00" UTC, "@UNIX_SECONDS"; default 1h ago).
    #[arg(long, value_parser = parse_when, conflicts_with = "at")]
    pub from: Option<When>,
    /// Up to this time (default: now).
    #[arg(long, value_parser = parse_when, conflicts_with = "at")]
    pub to: Option<When>,
    /// Around this time instead: --around before and after it.
    #[arg(long, value_parser = parse_when)]
    pub at: Option<When>,
    /// With --at: how far either side.
    #[arg(long, value_parser = duration_arg, default_value = "5m")]
    pub around: std::time::Duration,
    /// Write plots: FILE.svg or FILE.png (the correlation plot, if any, beside it as
    /// FILE-latency.svg/.png), or an existing directory (report.svg, report.png, latency.svg,
    /// latency.png in it).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Correlate with these `proctor probe --out` files instead of the store's probe stream.
    #[arg(long = "probe", value_name = "FILE")]
    pub probe_files: Vec<PathBuf>,
    /// Correlate with this statsd timer from the store's statsd stream (one point per flush).
    #[arg(long, value_name = "KEY", conflicts_with = "probe_files")]
    pub timer: Option<String>,
    /// Which statistic of the timer is its latency (Etsy's names: mean, upper, upper_90, …).
    #[arg(long, default_value = "upper_90")]
    pub timer_stat: String,
    /// Points per series in the plots (buckets keep each one's mean and max).
    #[arg(long, default_value_t = 600)]
    pub points: usize,
    /// Read at most this many samples of the range, spread evenly by sample (every one when
    /// the range holds no more): the same budget `/api/v1/report` uses, so both agree. Process
    /// CPU between read samples is the counters' difference: exact for processes that lived
    /// through them, but one that started and ended between two is missed, and peaks are over
    /// the read samples. The report says when this applied. 0 reads every sample (a day at 1 s
    /// with ~600 processes then takes a minute or more; see bench/report/run.sh).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_FRAMES, alias = "process-samples")]
    pub frames: usize,
    /// Processes in each top list.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Also report this process group (repeat for more), from the groups stored with each
    /// sample by `record --groups` or `serve --groups`: its CPU (reaped children included),
    /// memory, page faults and processes over the range, and with `--out` a plot of its own.
    #[arg(long = "group", value_name = "NAME")]
    pub groups: Vec<String>,
    /// Report every stored group (the 64 seen first; the rest are counted).
    #[arg(long, conflicts_with = "groups")]
    pub all_groups: bool,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// What `--format json` prints: the range's report (the document `/api/v1/report` answers),
/// the plotted series, and the latency correlation when there were latencies.
#[derive(Debug, Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    report: &'a ReportOut,
    /// Each host series in `--points` buckets (each bucket's mean and max).
    series: &'a [Series],
    /// Where the latencies came from, when there were any.
    latency_source: Option<String>,
    correlation: Option<&'a Correlation>,
    /// The groups asked for (`--group`, `--all-groups`), each series in `--points` buckets.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    groups: &'a [GroupSummary],
    #[serde(skip_serializing_if = "is_zero")]
    groups_left_out: usize,
    /// Alert transitions in the range (firing, resolved, flapping), from `DATA/alerts`.
    alerts: &'a AlertsInRange,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A clear error when groups were asked for and the range has none, or not the ones named.
fn check_groups(args: &Args, summary: &RangeSummary) -> anyhow::Result<()> {
    if summary.group_samples == 0 {
        bail!(
            "no sample in the range says which group its processes were in: record with `proctor record --groups` \
             or `proctor serve --groups` (cgroup, user or a rules file)"
        );
    }
    let missing: Vec<&String> = args.groups.iter().filter(|n| !summary.groups.iter().any(|g| &g.name == *n)).collect();
    if !missing.is_empty() {
        let seen: Vec<&str> = summary.groups_not_asked.iter().map(String::as_str).collect();
        bail!(
            "no group {} in the range; the groups recorded there: {}",
            missing.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", "),
            if seen.is_empty() { "none other".to_string() } else { seen.join(", ") }
        );
    }
    Ok(())
}

/// Rows of a group's time table in the text report.
const GROUP_ROWS: usize = 12;

/// Each group's figures over the range, then its series in at most [`GROUP_ROWS`] rows of time
/// (each row the mean over its buckets' samples; a max would hide a flat line behind one spike).
fn print_groups(summary: &RangeSummary) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for g in &summary.groups {
        writeln!(out, "\ngroup {} ({} samples)", clean(&g.name), g.samples)?;
        for h in &g.headline {
            writeln!(
                out,
                "  {:<14} mean {:>12}  max {:>12}",
                h.name,
                plot::human(h.mean, h.unit),
                plot::human(h.max, h.unit)
            )?;
        }
        const COLUMNS: [&str; 7] = ["processes", "cpu", "rss", "pss", "swap", "faults.minor", "faults.major"];
        let series: Vec<Option<&Series>> = COLUMNS.iter().map(|c| g.series.iter().find(|s| s.name == *c)).collect();
        let buckets: Vec<u32> = {
            let mut all: Vec<u32> = g.series.iter().flat_map(|s| s.points.iter().map(|p| p.bucket)).collect();
            all.sort_unstable();
            all.dedup();
            all
        };
        if buckets.is_empty() {
            continue;
        }
        writeln!(
            out,
            "  {:<20} {:>9} {:>7} {:>10} {:>10} {:>10} {:>12} {:>12}",
            "FROM (UTC)", "PROCS", "CPU", "RSS", "PSS", "SWAP", "MINFLT/S", "MAJFLT/S"
        )?;
        let per_row = buckets.len().div_ceil(GROUP_ROWS);
        for chunk in buckets.chunks(per_row) {
            let (first, last) = (chunk[0], chunk[chunk.len() - 1]);
            let cell = |s: &Option<&Series>, unit: Unit| -> String {
                let Some(s) = s else { return "-".into() };
                let (sum, n) = s
                    .points
                    .iter()
                    .filter(|p| p.bucket >= first && p.bucket <= last)
                    .fold((0.0, 0u32), |(sum, n), p| (sum + p.mean * f64::from(p.count), n + p.count));
                if n == 0 {
                    "-".into()
                } else {
                    plot::human(sum / f64::from(n), unit)
                }
            };
            let start =
                g.series.iter().flat_map(|s| s.points.iter()).find(|p| p.bucket == first).map_or(0, |p| p.start_ns);
            writeln!(
                out,
                "  {:<20} {:>9} {:>7} {:>10} {:>10} {:>10} {:>12} {:>12}",
                format_utc(start).chars().take(19).collect::<String>(),
                cell(&series[0], Unit::Count),
                cell(&series[1], Unit::Percent),
                cell(&series[2], Unit::Bytes),
                cell(&series[3], Unit::Bytes),
                cell(&series[4], Unit::Bytes),
                cell(&series[5], Unit::PerSecond),
                cell(&series[6], Unit::PerSecond),
            )?;
        }
    }
    if summary.groups_left_out > 0 {
        writeln!(out, "\n{} more groups not reported (at most 64)", summary.groups_left_out)?;
    }
    out.flush()?;
    Ok(())
}

/// A group's name as part of a file name: anything but letters, digits, `.`, `_` and `-`
/// becomes `_` (a group may be named after a path or a command line).
fn file_part(name: &str) -> String {
    let cleaned: String =
        name.chars().take(80).map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    if cleaned.trim_matches('.').is_empty() {
        "_".to_string()
    } else {
        cleaned
    }
}

/// One plot per reported group: `DIR/group-NAME.svg` and `.png`, or beside a named file as
/// `STEM-group-NAME.EXT`. The overlay's `--at` marker is drawn on them too (alert bands are
/// the host plot's).
fn write_group_plots(out: &Path, summary: &RangeSummary, title: &str, overlay: &plot::Overlay) -> anyhow::Result<()> {
    for g in &summary.groups {
        let group_title = format!("group {}: {title}", g.name);
        let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
        if out.is_dir() {
            let base = format!("group-{}", file_part(&g.name));
            files.push((
                out.join(format!("{base}.svg")),
                plot::group_svg(summary, g, &group_title, overlay).into_bytes(),
            ));
            files.push((out.join(format!("{base}.png")), plot::group_png(summary, g, &group_title, overlay)));
        } else {
            let png = plot::Format::from_path(out)? == plot::Format::Png;
            let stem = out.file_stem().map_or("report".into(), |s| s.to_string_lossy().into_owned());
            let ext = if png { "png" } else { "svg" };
            let path = out.with_file_name(format!("{stem}-group-{}.{ext}", file_part(&g.name)));
            let bytes = if png {
                plot::group_png(summary, g, &group_title, overlay)
            } else {
                plot::group_svg(summary, g, &group_title, overlay).into_bytes()
            };
            files.push((path, bytes));
        }
        for (path, bytes) in files {
            std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("proctor report: wrote {}", path.display());
        }
    }
    Ok(())
}

/// Keeps up to 64 MiB of freed heap in this short-lived process instead of handing it back to
/// the kernel after every block: a 90-day report decodes 2,160 rollup blocks of ~1.5 MB of
/// rows each, and glibc's default (trim past 128 KiB) refaulted them all, 748,000 page faults
/// and 1.3 s of system time of its 2.6 s (`bench/rollup/run.sh`). Not done in `serve`, whose
/// resident size is a goal of its own.
fn keep_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before any threads start.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    keep_freed_heap();
    let now = now_unix_ns();
    let at_ns = args.at.map(|at| at.resolve(now));
    let (from, to) = match at_ns {
        Some(at) => {
            let around = args.around.as_nanos() as u64;
            (at.saturating_sub(around), at.saturating_add(around))
        }
        None => (
            args.from.map_or(now.saturating_sub(3600 * 1_000_000_000), |w| w.resolve(now)),
            args.to.map_or(now, |w| w.resolve(now)),
        ),
    };
    if from >= to {
        bail!("--from {} is not before --to {}", format_utc(from), format_utc(to));
    }
    // A plot file's name (not a directory) is checked before the store is read.
    if let Some(out) = args.out.as_deref().filter(|out| !out.is_dir()) {
        plot::Format::from_path(out)?;
    }
    let mut reader = Reader::open(crate::datadir::for_reading(&args.dir)?).context("cannot report")?;
    // Latencies first: each sample's values are kept only when there is something to line
    // them up with (a day at 1 s is 86,400 points of 23 values).
    let mut stream_bad_frames = 0;
    let (latencies, source) = latencies(&args, from, to, &mut stream_bad_frames)?;
    let config = FoldConfig {
        budget: args.frames,
        max_points: args.points.max(1),
        keep_points: !latencies.is_empty(),
        max_span: None,
        groups: if args.all_groups {
            Some(GroupSelect::All { max: 64 })
        } else {
            (!args.groups.is_empty()).then(|| GroupSelect::Named(args.groups.clone()))
        },
    };
    let data = crate::datadir::for_reading(&args.dir)?;
    let (fold, tier) = fold_tiered(data, &mut reader, from, to, config).context("cannot report")?;
    // All of it here; the JSON answer's `problems` carries the first few, as /api/v1/report's.
    crate::datadir::report_read("proctor report", reader.report());
    if fold.stats.frames_in_range == 0 && tier.as_ref().is_none_or(|t| t.rows == 0) {
        bail!("no samples between {} and {} in {}", format_utc(from), format_utc(to), args.dir.display());
    }
    if args.all_groups || !args.groups.is_empty() {
        check_groups(&args, &fold.summary)?;
    }
    let mut report = proctor_vocab::report::report(&fold, &args.dir.display().to_string(), args.top, "the store");
    if let Some(t) = &tier {
        let span = |s: Option<u64>| s.map_or("-".to_string(), |s| format_utc(s.saturating_mul(1_000_000_000)));
        report.note = format!(
            "{} {} rollup rows ({} to {}; each row's mean and max, no processes), then raw samples: {}",
            t.rows,
            if t.tier == "1h" { "hour" } else { "minute" },
            span(t.first_unix_s),
            span(t.end_unix_s),
            report.note
        );
    }
    report.bad_frames += stream_bad_frames;
    let summary = fold.summary;
    let correlation =
        (!latencies.is_empty()).then(|| correlate(&latencies, &summary.points, &CorrelationConfig::default()));

    let alerts = alerts_in_range(&args.dir, from, to);
    let title = format!("proctor report {} to {} ({})", format_utc(from), format_utc(to), args.dir.display());
    // The files first: a reader that closes stdout early (`| head`) must not cost the plots.
    if let Some(out) = &args.out {
        let overlay = plot::Overlay { alerts: &alerts.spans, at_ns };
        write_plots(out, &summary, correlation.as_ref(), &title, source.as_deref(), &overlay)?;
        write_group_plots(out, &summary, &title, &overlay)?;
    }
    match args.format {
        Format::Text => {
            print_text(&report, correlation.as_ref(), source.as_deref())?;
            print_groups(&summary)?;
            print_alerts(&alerts)?;
        }
        Format::Json => {
            // Buffered: stdout is line-buffered, and pretty JSON is a line per value (a
            // 90-day report's series were 110,000 writes).
            let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
            let output = Output {
                report: &report,
                series: &summary.series,
                latency_source: source.clone(),
                correlation: correlation.as_ref(),
                groups: &summary.groups,
                groups_left_out: summary.groups_left_out,
                alerts: &alerts,
            };
            serde_json::to_writer_pretty(&mut stdout, &output)?;
            stdout.write_all(b"\n")?;
            stdout.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The requests to correlate with, and where they came from: `--probe` files, `--timer`, or
/// else the probe stream when it has results in the range.
fn latencies(
    args: &Args,
    from: u64,
    to: u64,
    bad_frames: &mut usize,
) -> anyhow::Result<(Vec<LatencyPoint>, Option<String>)> {
    let in_range = |t: u64| (from..=to).contains(&t);
    if !args.probe_files.is_empty() {
        let mut points = Vec::new();
        for path in &args.probe_files {
            points.extend(read_probe_file(path)?.iter().filter_map(latency_of).filter(|p| in_range(p.unix_ns)));
        }
        let names: Vec<String> = args.probe_files.iter().map(|p| p.display().to_string()).collect();
        return Ok((points, Some(format!("probe results from {}", names.join(", ")))));
    }
    if let Some(key) = &args.timer {
        return timer_latencies(args, key, from, to, bad_frames);
    }
    let dir = args.dir.join(PROBE_STREAM);
    if !dir.is_dir() {
        return Ok((Vec::new(), None));
    }
    let mut reader = Reader::open(&dir)?;
    // A batch's frame carries its earliest send time; one may start up to its age (1 s) early.
    let mut points = Vec::new();
    for frame in reader.event_frames(from.saturating_sub(2_000_000_000), to)? {
        let Some(Event::Probe(batch)) = reader.read_event(&frame) else { continue };
        points.extend(batch.results.iter().filter_map(latency_of_result).filter(|p| in_range(p.unix_ns)));
    }
    crate::datadir::report_read("proctor report", reader.report());
    *bad_frames += usize::try_from(reader.report().samples_lost()).unwrap_or(usize::MAX);
    points.sort_by_key(|p| p.unix_ns);
    let source = (!points.is_empty()).then(|| format!("probe results recorded in {}", dir.display()));
    Ok((points, source))
}

/// One point per statsd flush that has `key` with values: the chosen statistic (else the mean)
/// as the latency. A key the stream never had in the range is an error naming the keys it did
/// have, not an empty report.
fn timer_latencies(
    args: &Args,
    key: &str,
    from: u64,
    to: u64,
    bad_frames: &mut usize,
) -> anyhow::Result<(Vec<LatencyPoint>, Option<String>)> {
    let dir = args.dir.join(STATSD_STREAM);
    if !dir.is_dir() {
        bail!(
            "--timer: no statsd stream in {} (record one with `proctor statsd --record` or `proctor serve --statsd`)",
            args.dir.display()
        );
    }
    let mut reader = Reader::open(&dir)?;
    // A flush's frame carries its time, the end of the interval it covers.
    let frames = reader.event_frames(from, to.saturating_add(FLUSH_LOOKAHEAD_NS))?;
    let mut points = Vec::new();
    let (mut flushes, mut fell_back) = (0u64, 0u64);
    let mut other_keys = std::collections::BTreeSet::new();
    for frame in &frames {
        let Some(Event::Statsd(flush)) = reader.read_event(frame) else { continue };
        flushes += 1;
        let Some(timer) = flush.timers.iter().find(|t| t.key == key) else {
            if other_keys.len() < 20 {
                other_keys.extend(flush.timers.iter().take(20).map(|t| t.key.clone()));
            }
            continue;
        };
        let ms = match timer.stat(&args.timer_stat) {
            Some(ms) => ms,
            None => match timer.stat("mean") {
                Some(ms) => {
                    fell_back += 1;
                    ms
                }
                // An idle timer is flushed with its count only: no latency in that interval.
                None => continue,
            },
        };
        // The values arrived during the interval before the flush, each when its operation
        // ended (statsd clients send a timing when it is done): the operations' midpoints sit
        // about half a latency before the interval's middle, which is what the correlation
        // matches (a point's midpoint is its start plus half its latency).
        let middle = flush.unix_ns.saturating_sub(flush.interval_ms.saturating_mul(500_000));
        let latency_ns = ms * 1e6;
        if !latency_ns.is_finite() || latency_ns < 0.0 {
            continue;
        }
        let unix_ns = middle.saturating_sub(latency_ns as u64);
        if (from..=to).contains(&middle) {
            points.push(LatencyPoint { unix_ns, latency_ns });
        }
    }
    crate::datadir::report_read("proctor report", reader.report());
    *bad_frames += usize::try_from(reader.report().samples_lost()).unwrap_or(usize::MAX);
    if points.is_empty() {
        let keys: Vec<String> = other_keys.into_iter().take(20).collect();
        bail!(
            "--timer {key}: no flush between {} and {} in {} has values for it ({flushes} flushes read; timers in them: {})",
            format_utc(from),
            format_utc(to),
            dir.display(),
            if keys.is_empty() { "none".to_string() } else { keys.join(", ") }
        );
    }
    let stat = if fell_back == 0 {
        args.timer_stat.clone()
    } else {
        format!("{} ({} of {} flushes had none: their mean)", args.timer_stat, fell_back, points.len())
    };
    let source = format!("statsd timer {key}, {stat} per flush, {} flushes", points.len());
    Ok((points, Some(source)))
}

/// How far past `--to` flushes are read: a flush is stamped at the end of its interval, so one
/// whose interval's middle is in the range may come later (statsd flushes every 10 s by default;
/// an interval over two minutes long may lose its last flush).
const FLUSH_LOOKAHEAD_NS: u64 = 60 * 1_000_000_000;

fn latency_of(record: &proctor_probe::RequestRecord) -> Option<LatencyPoint> {
    record.has_response().then_some(LatencyPoint { unix_ns: record.sent_unix_ns, latency_ns: record.total_ns as f64 })
}

/// Failed requests have no latency to correlate (their time is a timeout or an error's).
fn latency_of_result(result: &ProbeResult) -> Option<LatencyPoint> {
    result.has_response.then_some(LatencyPoint { unix_ns: result.sent_unix_ns, latency_ns: result.total_ns as f64 })
}

fn read_probe_file(path: &Path) -> anyhow::Result<Vec<proctor_probe::RequestRecord>> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut records = Vec::new();
    let mut bad = 0u64;
    for (number, line) in BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("cannot read {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(&line) {
            Ok(record) => records.push(record),
            Err(err) => {
                bad += 1;
                if bad <= 10 {
                    eprintln!("proctor report: {}:{}: not a probe record: {err}", path.display(), number + 1);
                }
            }
        }
    }
    Ok(records)
}

fn print_text(report: &ReportOut, correlation: Option<&Correlation>, source: Option<&str>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let interval = report.median_interval_ms.map_or("-".to_string(), |ms| format!("{:.2} s", ms / 1e3));
    writeln!(
        out,
        "range      {} to {}\nsamples    {} ({} with rates, {} recorder run{}), median interval {interval}, {} processes seen",
        format_utc(report.from_unix_ms.saturating_mul(1_000_000)),
        format_utc(report.to_unix_ms.saturating_mul(1_000_000)),
        report.samples,
        report.samples_with_rates,
        report.runs,
        if report.runs == 1 { "" } else { "s" },
        report.processes_seen
    )?;
    writeln!(out, "read       {}", report.note)?;
    const SHOWN: [&str; 9] = [
        "host.cpu.busy_percent",
        "host.cpu.iowait_percent",
        "host.memory.used_bytes",
        "host.pressure_cpu.some.avg10",
        "host.pressure_io.some.avg10",
        "host.disk.read_bytes_per_sec",
        "host.disk.write_bytes_per_sec",
        "host.net.rx_bytes_per_sec",
        "host.net.tx_bytes_per_sec",
    ];
    for h in report.headline.iter().filter(|h| SHOWN.contains(&h.name)) {
        writeln!(
            out,
            "{:<30} mean {:>12}  max {:>12}",
            h.name,
            plot::human(h.mean, h.unit),
            plot::human(h.max, h.unit)
        )?;
    }
    let command =
        |p: &proctor_vocab::report::ProcessUsageOut| clean(&p.cmdline.as_deref().unwrap_or_default().join(" "));
    writeln!(out, "\ntop processes by CPU time inside the range")?;
    writeln!(out, "{:>8} {:>10} {:>8} {:<16} COMMAND", "PID", "CPU_S", "SAMPLES", "NAME")?;
    for p in &report.top_cpu {
        writeln!(out, "{:>8} {:>10.2} {:>8} {:<16} {}", p.pid, p.cpu_seconds, p.samples, clean(&p.name), command(p))?;
    }
    writeln!(out, "\ntop processes by resident memory (peak)")?;
    writeln!(out, "{:>8} {:>12} {:>12} {:<16} COMMAND", "PID", "RSS_PEAK", "RSS_MEAN", "NAME")?;
    for p in &report.top_rss_peak {
        writeln!(
            out,
            "{:>8} {:>12} {:>12} {:<16} {}",
            p.pid,
            p.rss_peak_bytes.map_or("-".into(), |b| plot::human(b as f64, Unit::Bytes)),
            p.rss_mean_bytes.map_or("-".into(), |b| plot::human(b, Unit::Bytes)),
            clean(&p.name),
            command(p)
        )?;
    }
    if report.top_network.is_empty() {
        writeln!(out, "\nno process network in the samples read (recorded without --net, or none used it)")?;
    } else {
        writeln!(out, "\ntop processes by network inside the range (IP bytes received + sent)")?;
        writeln!(out, "{:>8} {:>12} {:>12} {:>8} {:<16} COMMAND", "PID", "RX", "TX", "RETRANS", "NAME")?;
        for p in &report.top_network {
            let bytes = |b: Option<u64>| b.map_or("-".into(), |b| plot::human(b as f64, Unit::Bytes));
            writeln!(
                out,
                "{:>8} {:>12} {:>12} {:>8} {:<16} {}",
                p.pid,
                bytes(p.net_rx_bytes),
                bytes(p.net_tx_bytes),
                p.net_retransmits.map_or("-".into(), |r| r.to_string()),
                clean(&p.name),
                command(p)
            )?;
        }
    }
    let e = &report.exited;
    if e.samples_listing == 0 {
        writeln!(
            out,
            "\nno ended processes listed in the {} samples read (the recording agent had no BPF process events, or none ended)",
            e.samples
        )?;
    } else {
        writeln!(
            out,
            "\nprocesses that ended: {} ({} of them between two samples), {:.2} CPU s{}",
            e.count,
            e.unseen,
            e.cpu_seconds,
            if e.untold > 0 { format!("; {} more counted but not listed", e.untold) } else { String::new() }
        )?;
        writeln!(
            out,
            "{:<16} {:>8} {:>8} {:>7} {:>10} {:>12} {:>10}",
            "NAME", "COUNT", "UNSEEN", "FAILED", "CPU_S", "PEAK_RSS", "LIVED_AVG"
        )?;
        for r in &e.by_name {
            writeln!(
                out,
                "{:<16} {:>8} {:>8} {:>7} {:>10.2} {:>12} {:>10}",
                clean(&r.name),
                r.count,
                r.unseen,
                r.failed,
                r.cpu_seconds,
                plot::human(r.peak_rss_max_bytes as f64, Unit::Bytes),
                proctor_vocab::units::seconds(r.lifetime_mean_seconds)
            )?;
        }
    }
    let Some(c) = correlation else {
        writeln!(
            out,
            "\nno latencies to correlate (record `proctor probe --record`, or give --probe FILE or --timer KEY)"
        )?;
        return Ok(());
    };
    writeln!(out, "\nlatency: {}", source.unwrap_or("-"))?;
    let rule = match c.rule {
        Some(SlowRule::Quantile { quantile, threshold_ns }) => {
            format!("above the {:.0}th percentile, {:.2} ms", quantile * 100.0, threshold_ns / 1e6)
        }
        Some(SlowRule::SlowestMode { modes, mode_ns, threshold_ns }) => {
            format!("in the slowest of {modes} modes (at {:.2} ms, from {:.2} ms)", mode_ns / 1e6, threshold_ns / 1e6)
        }
        None => "-".into(),
    };
    writeln!(
        out,
        "{} requests, {} inside sample intervals; slow: {} ({} matched), {rule}",
        c.requests, c.matched, c.slow, c.slow_matched
    )?;
    writeln!(out, "series that moved with latency (Spearman's rho over n requests; medians over sample intervals with slow requests vs the others; no significance computed)")?;
    writeln!(
        out,
        "{:<16} {:>6} {:>7} {:>13} {:>13} {:>7} {:>11}",
        "SERIES", "N", "RHO", "MEDIAN_SLOW", "MEDIAN_OTHER", "RATIO", "WINDOWS"
    )?;
    for s in &c.series {
        let Some(rho) = s.spearman else { continue };
        writeln!(
            out,
            "{:<16} {:>6} {:>7.3} {:>13} {:>13} {:>7} {:>11}",
            s.name,
            s.n,
            rho,
            s.median_slow.map_or("-".into(), |v| plot::human(v, s.unit)),
            s.median_other.map_or("-".into(), |v| plot::human(v, s.unit)),
            s.ratio.map_or("-".into(), |r| format!("{r:.2}")),
            format!("{}/{}", s.slow_windows, s.other_windows)
        )?;
    }
    out.flush()?;
    Ok(())
}

/// Control characters in process names and command lines are replaced before printing, and
/// command lines cut at 100 characters (the JSON output has them whole).
fn clean(text: &str) -> String {
    let mut out: String = text.chars().take(100).map(|c| if c.is_control() { '?' } else { c }).collect();
    if text.chars().count() > 100 {
        out.push('…');
    }
    out
}

fn write_plots(
    out: &Path,
    summary: &RangeSummary,
    correlation: Option<&Correlation>,
    title: &str,
    source: Option<&str>,
    overlay: &plot::Overlay,
) -> anyhow::Result<()> {
    let latency_title = format!("latency vs system, {}", source.unwrap_or("-"));
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    if out.is_dir() {
        files.push((out.join("report.svg"), plot::host_svg(summary, title, overlay).into_bytes()));
        files.push((out.join("report.png"), plot::host_png(summary, title, overlay)));
        if let Some(c) = correlation {
            files.push((
                out.join("latency.svg"),
                plot::correlation_svg(summary, c, &latency_title, overlay).into_bytes(),
            ));
            files.push((out.join("latency.png"), plot::correlation_png(summary, c, &latency_title, overlay)));
        }
    } else {
        let png = plot::Format::from_path(out)? == plot::Format::Png;
        let host = if png {
            plot::host_png(summary, title, overlay)
        } else {
            plot::host_svg(summary, title, overlay).into_bytes()
        };
        files.push((out.to_owned(), host));
        if let Some(c) = correlation {
            let stem = out.file_stem().map_or("report".into(), |s| s.to_string_lossy().into_owned());
            let ext = if png { "png" } else { "svg" };
            let path = out.with_file_name(format!("{stem}-latency.{ext}"));
            let bytes = if png {
                plot::correlation_png(summary, c, &latency_title, overlay)
            } else {
                plot::correlation_svg(summary, c, &latency_title, overlay).into_bytes()
            };
            files.push((path, bytes));
        }
    }
    for (path, bytes) in files {
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("proctor report: wrote {}", path.display());
    }
    Ok(())
}

/// The alert transitions a recording's `serve --rules` logged (`DATA/alerts/events.jsonl` and
/// its cut `.1`) that fall in a report's range, and the stretches each instance fired.
#[derive(Debug, Default, Serialize)]
struct AlertsInRange {
    events: Vec<AlertEventOut>,
    /// Events in the range past the listed ones.
    more: usize,
    /// Log lines that were not an alert event (counted, not read).
    unreadable_lines: usize,
    #[serde(skip)]
    spans: Vec<plot::AlertSpan>,
}

#[derive(Debug, Serialize)]
struct AlertEventOut {
    time: String,
    rule: String,
    state: String,
    labels: std::collections::BTreeMap<String, String>,
    summary: Option<String>,
    reason: Option<String>,
}

/// At most this many events are listed; the log read is at most 64 MiB (two cut files).
const MAX_ALERT_EVENTS: usize = 200;

fn alerts_in_range(dir: &Path, from: u64, to: u64) -> AlertsInRange {
    let mut out = AlertsInRange::default();
    let mut open: std::collections::BTreeMap<(String, String), u64> = std::collections::BTreeMap::new();
    for name in ["events.jsonl.1", "events.jsonl"] {
        // Opened as every data-directory file is: a FIFO here would hold `report` for ever.
        let Ok(file) = proctor_procfs::regular::open_for_reading(&dir.join("alerts").join(name)) else { continue };
        for line in BufReader::new(std::io::Read::take(file, 32 << 20)).lines() {
            let Ok(line) = line else {
                out.unreadable_lines += 1;
                continue;
            };
            let Ok(e) = serde_json::from_str::<serde_json::Value>(&line) else {
                out.unreadable_lines += 1;
                continue;
            };
            let (Some(at), Some(rule), Some(state)) = (e["at"].as_f64(), e["rule"].as_str(), e["state"].as_str())
            else {
                out.unreadable_lines += 1;
                continue;
            };
            let at_ns = (at * 1e9).max(0.0) as u64;
            let key = (rule.to_string(), e["instance"].as_str().unwrap_or("").to_string());
            match state {
                "firing" if e["reason"].as_str() != Some("repeat") => {
                    open.entry(key).or_insert(at_ns);
                }
                "resolved" => {
                    if let Some(start) = open.remove(&key) {
                        if at_ns >= from && start <= to {
                            out.spans.push(plot::AlertSpan { rule: key.0.clone(), from_ns: start, to_ns: at_ns });
                        }
                    }
                }
                _ => {}
            }
            if !(from..=to).contains(&at_ns) || !matches!(state, "firing" | "resolved" | "flapping") {
                continue;
            }
            if out.events.len() >= MAX_ALERT_EVENTS {
                out.more += 1;
                continue;
            }
            let labels = e["labels"]
                .as_object()
                .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
                .unwrap_or_default();
            out.events.push(AlertEventOut {
                time: format_utc(at_ns),
                rule: rule.to_string(),
                state: state.to_string(),
                labels,
                summary: e["annotations"]["summary"].as_str().map(str::to_string),
                reason: e["reason"].as_str().map(str::to_string),
            });
        }
    }
    // Still firing at the end of the log: up to the range's end.
    for ((rule, _), start) in open {
        if start <= to {
            out.spans.push(plot::AlertSpan { rule, from_ns: start, to_ns: to });
        }
    }
    out
}

fn print_alerts(alerts: &AlertsInRange) -> anyhow::Result<()> {
    if alerts.events.is_empty() && alerts.spans.is_empty() {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "\nalerts in the range (serve --rules' log)")?;
    for e in &alerts.events {
        let labels: Vec<String> = e
            .labels
            .iter()
            .filter(|(k, _)| *k != "alertname" && *k != "severity")
            .map(|(k, v)| format!("{k}={}", clean(v)))
            .collect();
        writeln!(
            out,
            "  {} {:<9} {} {}{}{}",
            e.time,
            e.state,
            clean(&e.rule),
            labels.join(" "),
            e.summary.as_deref().map(|s| format!(": {}", clean(s))).unwrap_or_default(),
            e.reason.as_deref().map(|r| format!(" [{r}]")).unwrap_or_default()
        )?;
    }
    if alerts.more > 0 {
        writeln!(out, "  … and {} more (--format json lists the first {MAX_ALERT_EVENTS})", alerts.more)?;
    }
    if alerts.unreadable_lines > 0 {
        writeln!(out, "  {} lines of the alerts log were not alert events and were skipped", alerts.unreadable_lines)?;
    }
    Ok(())
}
