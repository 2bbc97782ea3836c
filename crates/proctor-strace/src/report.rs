//! The finished analysis ([`Report`], serializable as JSON) and its text rendering.
//!
//! [`build`] turns a [`Tally`] into a report: this is where peaks are computed, once per
//! syscall, from the histograms, and where nanoseconds become seconds and tables are sorted and
//! capped. It reads only the tally, never the analyzer. Rendering returns a `String`; writing
//! it anywhere is the caller's business.

use std::fmt::Write as _;

use proctor_modes::{find_modes_in_histogram, Bucket};
pub use proctor_units::units::duration_secs;
use serde::Serialize;

use crate::parse::TimeKind;
use crate::tally::{Example, PathStats, PidStats, Tally};

/// Everything `proctor strace` prints.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub sources: Vec<SourceReport>,
    pub lines: u64,
    /// Lines over 1 MiB, analyzed as their first MiB (the rest of such a line is skipped).
    pub lines_cut: u64,
    /// Calls with a result (including orphan resumed halves).
    pub calls: u64,
    /// Calls without a `-T` duration (strace run without `-T`, or `= ?` exits).
    pub calls_without_duration: u64,
    /// Which timestamp option the log was written with, if any.
    pub timestamps: Option<TimeKind>,
    /// By total wall time, largest first.
    pub syscalls: Vec<SyscallReport>,
    /// Slowest first.
    pub slowest: Vec<SlowCallReport>,
    pub pids: Vec<PidReport>,
    pub timeline: TimelineReport,
    /// Files and sockets named by `-y`, by total wall time, largest first (at most 50).
    pub paths: Vec<PathReport>,
    /// Distinct paths beyond the table's cap or the 50 shown, summed.
    pub paths_other: PathReport,
    pub signals: Vec<NameCount>,
    pub orphans: OrphanReport,
    pub bad_lines: BadLineReport,
    /// What did not fit the analyzer's tables and was counted under "(other names)" (or, for
    /// processes, `pids_other`): all zero for any real strace log.
    pub capped: CappedReport,
}

/// Counts folded into "other" rows by a cap, with the caps.
#[derive(Debug, Clone, Serialize)]
pub struct CappedReport {
    /// Call lines under syscall names beyond the first `max_syscalls`.
    pub syscall_lines: u64,
    pub max_syscalls: usize,
    /// Errors whose errno came after `max_errnos` others on the same syscall.
    pub errnos: u64,
    pub max_errnos: usize,
    /// Signals whose name came after `max_signals` others.
    pub signals: u64,
    pub max_signals: usize,
    /// Calls, signals and exits of processes after the first `max_pids`, summed in
    /// `pids_other`.
    pub pid_events: u64,
    pub max_pids: usize,
    /// Unfinished halves written off at once because `max_pids` calls were already pending.
    pub pending: u64,
    /// The processes beyond `max_pids`, summed (absent when there were none).
    pub pids_other: Option<PidReport>,
}

impl CappedReport {
    pub fn any(&self) -> bool {
        self.syscall_lines + self.errnos + self.signals + self.pid_events + self.pending > 0
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceReport {
    pub name: String,
    pub lines: u64,
    /// Lines understood as calls, signals or exits.
    pub events: u64,
    pub bad_lines: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SyscallReport {
    pub name: String,
    pub count: u64,
    pub errors: u64,
    /// Calls interrupted by a signal (`? ERESTARTSYS` and friends).
    pub interrupted: u64,
    pub errnos: Vec<NameCount>,
    /// Unfinished halves without a result: cut by an exit or orphaned.
    pub unfinished: u64,
    /// Calls that had a duration; the statistics below are over these.
    pub timed: u64,
    pub total_seconds: f64,
    pub mean_seconds: Option<f64>,
    pub p50_seconds: Option<f64>,
    pub p90_seconds: Option<f64>,
    pub p99_seconds: Option<f64>,
    pub max_seconds: Option<f64>,
    /// Peaks of the wall-time distribution, values in seconds: the calls' peaks, rare
    /// clusters that hold a large share of the time, and clusters of identical durations. A
    /// peak's count and shares are those of the calls in its interval: calls past an empty
    /// stretch (three 300 ms reads beside hundreds of 15 µs) are in no peak.
    pub peaks: Vec<Peak>,
    /// `[i, j, k]`: peak j ≈ k × peak i.
    pub near_multiples: Vec<[u64; 3]>,
    /// Peaks made of several spikes closer than ×1.2 (a timer's ticks), by peak.
    pub fine_structure: Vec<FinePeak>,
    /// Non-empty log-scale buckets, in nanoseconds (the plot draws them). The JSON names them
    /// `histogram`, in seconds like every other duration in it (see [`HistogramBucket`]).
    #[serde(rename = "histogram", serialize_with = "buckets_in_seconds")]
    pub histogram_ns: Vec<Bucket>,
}

/// One histogram bucket in the JSON: calls whose wall time was in `[low_seconds, high_seconds)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HistogramBucket {
    pub low_seconds: f64,
    pub high_seconds: f64,
    pub count: u64,
    /// The mean of the calls in the bucket (exact, not the bucket's middle).
    pub mean_seconds: f64,
}

impl From<&Bucket> for HistogramBucket {
    fn from(bucket: &Bucket) -> Self {
        HistogramBucket {
            low_seconds: bucket.low as f64 / 1e9,
            high_seconds: bucket.high as f64 / 1e9,
            count: bucket.count,
            mean_seconds: bucket.mean / 1e9,
        }
    }
}

fn buckets_in_seconds<S: serde::Serializer>(buckets: &[Bucket], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(buckets.iter().map(HistogramBucket::from))
}

/// One peak: where the calls' wall times pile up, and what share of the calls and of the
/// syscall's time its basin holds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Peak {
    /// Where the wall times peak. `value_seconds` in the JSON, like every duration there named
    /// `<what>_seconds`.
    #[serde(rename = "value_seconds")]
    pub seconds: f64,
    /// Calls in the peak's basin.
    pub count: u64,
    /// `count` over the syscall's timed calls.
    pub fraction: f64,
    /// The basin's summed wall time.
    pub total_seconds: f64,
    /// `total_seconds` over the syscall's total wall time.
    pub time_fraction: f64,
}

/// The spikes inside one peak.
#[derive(Debug, Clone, Serialize)]
pub struct FinePeak {
    /// Index into `peaks`.
    pub peak: usize,
    pub spikes_seconds: Vec<f64>,
    /// Their spacing when they are evenly spaced (a timer's tick).
    pub step_seconds: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NameCount {
    pub name: String,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SlowCallReport {
    /// Its wall time (`-T`).
    pub duration_seconds: f64,
    pub syscall: String,
    pub pid: Option<u32>,
    pub source: String,
    pub line: u64,
    pub time: Option<String>,
    pub args: String,
    pub result: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct PidReport {
    pub pid: u32,
    pub calls: u64,
    pub errors: u64,
    pub wall_seconds: f64,
    pub slowest_seconds: f64,
    pub signals: u64,
    pub exit: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TimelineReport {
    pub threshold_seconds: f64,
    pub bucket_seconds: f64,
    pub buckets: Vec<TimelineBucket>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TimelineBucket {
    /// On the log's time axis: seconds since midnight of the first day (`-t`/`-tt`), since
    /// the epoch (`-ttt`) or since the first line (`-r`).
    pub start_seconds: f64,
    pub count: u64,
    pub total_seconds: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct PathReport {
    pub path: String,
    pub calls: u64,
    pub errors: u64,
    pub wall_seconds: f64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct OrphanReport {
    /// Unfinished halves never resumed (and not ended by their process's exit).
    pub unfinished: u64,
    /// Resumed halves whose start was not seen.
    pub resumed: u64,
    /// Unfinished calls ended by their process exiting or being killed (expected).
    pub unfinished_at_exit: u64,
    pub examples: Vec<LineExample>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BadLineReport {
    pub count: u64,
    pub by_reason: Vec<NameCount>,
    pub examples: Vec<LineExample>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LineExample {
    pub source: String,
    pub line: u64,
    pub what: String,
    pub text: String,
}

const PATHS_SHOWN: usize = 50;

fn seconds(ns: u128) -> f64 {
    ns as f64 / 1e9
}

/// The report of a finished analysis: peaks per syscall, and every table in seconds, sorted
/// and capped for display.
pub fn build(tally: Tally) -> Report {
    let source_name = |index: usize| tally.sources.get(index).map(|s| s.name.clone()).unwrap_or_default();
    let example = |example: &Example| LineExample {
        source: source_name(example.source),
        line: example.line,
        what: example.what.clone(),
        text: example.text.clone(),
    };

    let mut syscalls: Vec<SyscallReport> = tally
        .syscalls
        .iter()
        .map(|stats| {
            let histogram = &stats.durations;
            let quantile = |q: f64| histogram.quantile(q).map(|ns| ns as f64 / 1e9);
            // proctor-modes itself reports small samples as one mode without testing, and an
            // empty histogram as no mode.
            let modes = find_modes_in_histogram(histogram, &tally.modes);
            let mut errnos: Vec<NameCount> =
                stats.errnos.iter().map(|(name, count)| NameCount { name: name.clone(), count: *count }).collect();
            errnos.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
            SyscallReport {
                name: stats.name.clone(),
                count: stats.count,
                errors: stats.errors,
                interrupted: stats.interrupted,
                errnos,
                unfinished: stats.unfinished,
                timed: histogram.count(),
                total_seconds: seconds(histogram.sum()),
                mean_seconds: histogram.mean().map(|ns| ns / 1e9),
                p50_seconds: quantile(0.5),
                p90_seconds: quantile(0.9),
                p99_seconds: quantile(0.99),
                max_seconds: histogram.max().map(|ns| ns as f64 / 1e9),
                peaks: modes
                    .modes
                    .iter()
                    .map(|mode| Peak {
                        seconds: mode.value / 1e9,
                        count: mode.count,
                        fraction: mode.fraction,
                        total_seconds: mode.total / 1e9,
                        time_fraction: mode.total_fraction,
                    })
                    .collect(),
                near_multiples: modes
                    .near_multiples
                    .iter()
                    .map(|pair| [pair.lower as u64, pair.upper as u64, u64::from(pair.multiple)])
                    .collect(),
                fine_structure: modes
                    .fine_structure
                    .iter()
                    .map(|fine| FinePeak {
                        peak: fine.mode,
                        spikes_seconds: fine.spikes.iter().map(|spike| spike.value / 1e9).collect(),
                        step_seconds: fine.step.map(|step| step / 1e9),
                    })
                    .collect(),
                histogram_ns: histogram.buckets().collect(),
            }
        })
        .collect();
    syscalls.sort_by(|a, b| {
        b.total_seconds
            .total_cmp(&a.total_seconds)
            .then_with(|| b.count.cmp(&a.count))
            .then_with(|| a.name.cmp(&b.name))
    });

    let mut slowest: Vec<SlowCallReport> = tally
        .slowest
        .into_iter()
        .map(|call| SlowCallReport {
            duration_seconds: call.duration_ns as f64 / 1e9,
            syscall: call.name,
            pid: call.pid,
            source: source_name(call.source),
            line: call.line,
            time: call.time,
            args: call.args,
            result: call.result,
        })
        .collect();
    // The tally lists them slowest first already; keep it explicit (the sort is stable).
    slowest.sort_by(|a, b| b.duration_seconds.total_cmp(&a.duration_seconds));

    let pids = tally.pids.iter().map(|(&pid, stats)| pid_report(pid, stats)).collect();

    let timeline = TimelineReport {
        threshold_seconds: tally.slow_threshold_ns as f64 / 1e9,
        bucket_seconds: tally.timeline_bucket_seconds,
        buckets: tally
            .timeline
            .iter()
            .map(|(&key, &(count, total))| TimelineBucket {
                start_seconds: key as f64 * tally.timeline_bucket_seconds,
                count,
                total_seconds: seconds(total),
            })
            .collect(),
    };

    let mut paths: Vec<PathReport> = tally.paths.into_iter().map(|(path, stats)| path_report(path, &stats)).collect();
    paths.sort_by(|a, b| b.wall_seconds.total_cmp(&a.wall_seconds).then_with(|| a.path.cmp(&b.path)));
    let mut paths_other = path_report("(other)".to_string(), &tally.paths_other);
    for extra in paths.iter().skip(PATHS_SHOWN) {
        paths_other.calls += extra.calls;
        paths_other.errors += extra.errors;
        paths_other.wall_seconds += extra.wall_seconds;
        paths_other.bytes += extra.bytes;
    }
    paths.truncate(PATHS_SHOWN);

    Report {
        sources: tally
            .sources
            .iter()
            .map(|source| SourceReport {
                name: source.name.clone(),
                lines: source.lines,
                events: source.events,
                bad_lines: source.bad,
            })
            .collect(),
        lines: tally.lines,
        lines_cut: tally.lines_cut,
        calls: syscalls.iter().map(|syscall| syscall.count).sum(),
        calls_without_duration: tally.without_duration,
        timestamps: tally.time_kind,
        syscalls,
        slowest,
        pids,
        timeline,
        paths,
        paths_other,
        signals: tally.signals.iter().map(|(name, &count)| NameCount { name: name.clone(), count }).collect(),
        orphans: OrphanReport {
            unfinished: tally.orphan_unfinished,
            resumed: tally.orphan_resumed,
            unfinished_at_exit: tally.unfinished_at_exit,
            examples: tally.orphan_examples.iter().map(example).collect(),
        },
        bad_lines: BadLineReport {
            count: tally.bad_by_reason.values().sum(),
            by_reason: tally
                .bad_by_reason
                .iter()
                .map(|(reason, &count)| NameCount { name: reason.as_str().to_string(), count })
                .collect(),
            examples: tally.bad_examples.iter().map(example).collect(),
        },
        capped: CappedReport {
            syscall_lines: tally.capped.syscall_lines,
            max_syscalls: tally.caps.syscalls,
            errnos: tally.capped.errnos,
            max_errnos: tally.caps.errnos,
            signals: tally.capped.signals,
            max_signals: tally.caps.signals,
            pid_events: tally.capped.pid_events,
            max_pids: tally.caps.pids,
            pending: tally.capped.pending,
            pids_other: (tally.capped.pid_events > 0).then(|| pid_report(0, &tally.pids_other)),
        },
    }
}

fn pid_report(pid: u32, stats: &PidStats) -> PidReport {
    PidReport {
        pid,
        calls: stats.calls,
        errors: stats.errors,
        wall_seconds: seconds(stats.wall_ns),
        slowest_seconds: stats.slowest_ns as f64 / 1e9,
        signals: stats.signals,
        exit: stats.exit.clone(),
    }
}

fn path_report(path: String, stats: &PathStats) -> PathReport {
    PathReport {
        path,
        calls: stats.calls,
        errors: stats.errors,
        wall_seconds: seconds(stats.wall_ns),
        bytes: stats.bytes,
    }
}

/// `futex: peaks at 42.8 µs (103 calls, 95 % of calls, 0 % of time), 250 ms (5 calls, 5 % of
/// calls, 99 % of time)`, then near multiples (`500 ms ≈ 2 × 250 ms`) and fine structure. Both
/// shares, because a peak rare by count can hold most of the time, and one common by count
/// can hold almost none.
pub fn peak_sentence(syscall: &SyscallReport) -> Option<String> {
    if syscall.peaks.is_empty() {
        return None;
    }
    let percent = |fraction: f64| format!("{:.0} %", fraction * 100.0);
    let listed: Vec<String> = syscall
        .peaks
        .iter()
        .map(|peak| {
            format!(
                "{} ({} call{}, {} of calls, {} of time)",
                duration_secs(peak.seconds),
                peak.count,
                if peak.count == 1 { "" } else { "s" },
                percent(peak.fraction),
                percent(peak.time_fraction)
            )
        })
        .collect();
    let word = if syscall.peaks.len() == 1 { "peak" } else { "peaks" };
    let mut sentence = format!("{}: {word} at {}", syscall.name, listed.join(", "));
    for [lower, upper, multiple] in &syscall.near_multiples {
        let (Some(low), Some(high)) = (syscall.peaks.get(*lower as usize), syscall.peaks.get(*upper as usize)) else {
            continue;
        };
        let _ = write!(sentence, "; {} ≈ {multiple} × {}", duration_secs(high.seconds), duration_secs(low.seconds));
    }
    for fine in &syscall.fine_structure {
        let Some(peak) = syscall.peaks.get(fine.peak) else {
            continue;
        };
        let spikes: Vec<String> = fine.spikes_seconds.iter().map(|&seconds| duration_secs(seconds)).collect();
        let _ = match fine.step_seconds {
            Some(step) => write!(
                sentence,
                "; the {} peak is quantized in {} steps ({})",
                duration_secs(peak.seconds),
                duration_secs(step),
                spikes.join(", ")
            ),
            None => write!(sentence, "; the {} peak has spikes at {}", duration_secs(peak.seconds), spikes.join(", ")),
        };
    }
    Some(sentence)
}

/// Formats a position on the log's time axis the way the log wrote it.
fn time_label(kind: Option<TimeKind>, seconds: f64) -> String {
    match kind {
        Some(TimeKind::Clock) => {
            let day = (seconds / 86_400.0).floor();
            let within = seconds - day * 86_400.0;
            let whole = within as u64;
            let label = format!("{:02}:{:02}:{:02}", whole / 3600, whole / 60 % 60, whole % 60);
            if day >= 1.0 {
                format!("{label} (+{day:.0}d)")
            } else {
                label
            }
        }
        Some(TimeKind::Epoch) => format!("{seconds:.0}"),
        Some(TimeKind::Relative) | None => format!("+{seconds:.1}s"),
    }
}

impl Report {
    /// True when no line was understood: the input is not strace output.
    pub fn is_empty(&self) -> bool {
        self.sources.iter().all(|source| source.events == 0)
    }

    /// The human-readable report: summary, peaks, per-syscall table, slowest calls, pids,
    /// timeline, paths, orphans and bad lines. `syscall_rows` bounds the tables.
    pub fn render_text(&self, syscall_rows: usize) -> String {
        let mut out = String::new();
        let _ = self.write_text(&mut out, syscall_rows);
        out
    }

    fn write_text(&self, out: &mut String, rows: usize) -> std::fmt::Result {
        writeln!(
            out,
            "{} lines in {} source{}, {} calls, {} bad lines, timestamps: {}",
            self.lines,
            self.sources.len(),
            if self.sources.len() == 1 { "" } else { "s" },
            self.calls,
            self.bad_lines.count,
            match self.timestamps {
                Some(TimeKind::Clock) => "-t/-tt",
                Some(TimeKind::Epoch) => "-ttt",
                Some(TimeKind::Relative) => "-r",
                None => "none",
            }
        )?;
        if self.lines_cut > 0 {
            let max = crate::analyze::MAX_LINE_BYTES >> 20;
            writeln!(
                out,
                "note: {} lines longer than {max} MiB were cut: only their first {max} MiB was read",
                self.lines_cut
            )?;
        }
        if self.calls > 0 && self.calls_without_duration == self.calls {
            writeln!(out, "note: no call has a -T duration; run strace with -T to get wall times")?;
        }

        // Every syscall with several peaks, then the single-peak ones among the top three by
        // time: those are where the time went even when nothing repeats.
        let sentences: Vec<String> = self
            .syscalls
            .iter()
            .enumerate()
            .filter(|(rank, syscall)| syscall.peaks.len() > 1 || *rank < 3)
            .filter_map(|(_, syscall)| peak_sentence(syscall))
            .take(rows)
            .collect();
        if !sentences.is_empty() {
            writeln!(out, "\nPeaks (wall time per call):")?;
            for sentence in sentences {
                writeln!(out, "  {sentence}")?;
            }
        }

        writeln!(out, "\nSyscalls by total wall time:")?;
        writeln!(
            out,
            "  {:<18} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}  errors",
            "syscall", "calls", "errors", "total", "p50", "p90", "p99", "max"
        )?;
        let show = |value: Option<f64>| value.map_or_else(|| "-".to_string(), duration_secs);
        for syscall in self.syscalls.iter().take(rows) {
            let errnos: Vec<String> =
                syscall.errnos.iter().take(3).map(|errno| format!("{} {}", errno.name, errno.count)).collect();
            writeln!(
                out,
                "  {:<18} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}  {}",
                syscall.name,
                syscall.count,
                syscall.errors + syscall.interrupted,
                if syscall.timed > 0 { duration_secs(syscall.total_seconds) } else { "-".to_string() },
                show(syscall.p50_seconds),
                show(syscall.p90_seconds),
                show(syscall.p99_seconds),
                show(syscall.max_seconds),
                errnos.join(", ")
            )?;
        }
        if self.syscalls.len() > rows {
            writeln!(out, "  … {} more syscalls (--format json has all)", self.syscalls.len() - rows)?;
        }

        if !self.slowest.is_empty() {
            writeln!(out, "\nSlowest calls:")?;
            for call in &self.slowest {
                writeln!(
                    out,
                    "  {:>10}  {}:{}  pid {}  {}  {}({}) = {}",
                    duration_secs(call.duration_seconds),
                    call.source,
                    call.line,
                    call.pid.map_or_else(|| "-".to_string(), |pid| pid.to_string()),
                    call.time.as_deref().unwrap_or("-"),
                    call.syscall,
                    call.args,
                    call.result
                )?;
            }
        }

        if !self.pids.is_empty() {
            writeln!(out, "\nPer pid:")?;
            writeln!(
                out,
                "  {:>8} {:>9} {:>7} {:>10} {:>10} {:>7}  exit",
                "pid", "calls", "errors", "wall", "slowest", "signals"
            )?;
            let mut pids: Vec<&PidReport> = self.pids.iter().collect();
            pids.sort_by(|a, b| b.wall_seconds.total_cmp(&a.wall_seconds).then_with(|| a.pid.cmp(&b.pid)));
            for pid in pids.iter().take(rows) {
                writeln!(
                    out,
                    "  {:>8} {:>9} {:>7} {:>10} {:>10} {:>7}  {}",
                    pid.pid,
                    pid.calls,
                    pid.errors,
                    duration_secs(pid.wall_seconds),
                    duration_secs(pid.slowest_seconds),
                    pid.signals,
                    pid.exit.as_deref().unwrap_or("-")
                )?;
            }
            if pids.len() > rows {
                writeln!(out, "  … {} more pids", pids.len() - rows)?;
            }
        }

        if !self.timeline.buckets.is_empty() {
            self.write_timeline(out)?;
        }

        if !self.paths.is_empty() {
            writeln!(out, "\nFiles and sockets (-y):")?;
            for path in self.paths.iter().take(rows) {
                writeln!(
                    out,
                    "  {:>10} {:>8} calls {:>6} errors {:>12} bytes  {}",
                    duration_secs(path.wall_seconds),
                    path.calls,
                    path.errors,
                    path.bytes,
                    path.path
                )?;
            }
        }

        if !self.signals.is_empty() {
            let listed: Vec<String> = self.signals.iter().map(|s| format!("{} {}", s.name, s.count)).collect();
            writeln!(out, "\nSignals: {}", listed.join(", "))?;
        }
        let orphans = &self.orphans;
        if orphans.unfinished + orphans.resumed + orphans.unfinished_at_exit > 0 {
            writeln!(
                out,
                "\nSplit calls: {} never resumed, {} resumed without a start, {} cut by exit",
                orphans.unfinished, orphans.resumed, orphans.unfinished_at_exit
            )?;
            for example in &orphans.examples {
                writeln!(out, "  {}:{}: {}: {}", example.source, example.line, example.what, example.text)?;
            }
        }
        if self.bad_lines.count > 0 {
            let reasons: Vec<String> =
                self.bad_lines.by_reason.iter().map(|r| format!("{} {}", r.name, r.count)).collect();
            writeln!(out, "\nBad lines: {} ({})", self.bad_lines.count, reasons.join(", "))?;
            for example in &self.bad_lines.examples {
                writeln!(out, "  {}:{}: {}: {}", example.source, example.line, example.what, example.text)?;
            }
        }
        let capped = &self.capped;
        if capped.any() {
            writeln!(out, "\nCapped (no real strace log reaches these; the rest is counted, not listed):")?;
            let other = crate::analyze::OTHER_NAMES;
            if capped.syscall_lines > 0 {
                let (lines, max) = (capped.syscall_lines, capped.max_syscalls);
                writeln!(out, "  {lines} call lines under syscall names beyond the first {max}, as \"{other}\"")?;
            }
            if capped.errnos > 0 {
                let (errors, max) = (capped.errnos, capped.max_errnos);
                writeln!(
                    out,
                    "  {errors} errors under errnos beyond the first {max} of their syscall, as \"{other}\""
                )?;
            }
            if capped.signals > 0 {
                let (signals, max) = (capped.signals, capped.max_signals);
                writeln!(out, "  {signals} signals under names beyond the first {max}, as \"{other}\"")?;
            }
            if let Some(pids) = &capped.pids_other {
                let max = capped.max_pids;
                writeln!(
                    out,
                    "  {} events of processes beyond the first {max}, summed: {} calls, {} errors, {:.3} s",
                    capped.pid_events, pids.calls, pids.errors, pids.wall_seconds
                )?;
            }
            if capped.pending > 0 {
                let pending = capped.pending;
                writeln!(out, "  {pending} unfinished halves written off: more calls pending at once than the cap")?;
            }
        }
        Ok(())
    }

    /// At most 40 rows: buckets are merged into wider ones for display.
    fn write_timeline(&self, out: &mut String) -> std::fmt::Result {
        let timeline = &self.timeline;
        let (Some(first), Some(last)) = (timeline.buckets.first(), timeline.buckets.last()) else {
            return Ok(());
        };
        let span = last.start_seconds - first.start_seconds + timeline.bucket_seconds;
        let mut width = timeline.bucket_seconds;
        while span / width > 40.0 {
            width *= 2.0;
        }
        let mut rows: Vec<(f64, u64, f64)> = Vec::new();
        for bucket in &timeline.buckets {
            let start = (bucket.start_seconds / width).floor() * width;
            match rows.last_mut() {
                Some(row) if row.0 == start => {
                    row.1 += bucket.count;
                    row.2 += bucket.total_seconds;
                }
                _ => rows.push((start, bucket.count, bucket.total_seconds)),
            }
        }
        let most = rows.iter().map(|row| row.1).max().unwrap_or(1).max(1);
        writeln!(
            out,
            "\nTimeline of calls ≥ {} ({} per row):",
            duration_secs(timeline.threshold_seconds),
            duration_secs(width)
        )?;
        for (start, count, total) in rows {
            let bar = "#".repeat(((count * 40).div_ceil(most)) as usize);
            writeln!(
                out,
                "  {:>14} {:>7} {:>10}  {bar}",
                time_label(self.timestamps, start),
                count,
                duration_secs(total)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proctor_modes::{LogHistogram, ModeConfig};

    use super::*;
    use crate::parse::BadLine;
    use crate::tally::{Capped, Caps, SourceStats, SyscallStats};
    use crate::AnalyzerConfig;

    /// A tally of one empty source, with the analyzer's default threshold.
    fn tally() -> Tally {
        Tally {
            sources: vec![SourceStats { name: "x.log".to_string(), ..SourceStats::default() }],
            lines: 0,
            lines_cut: 0,
            notes: 0,
            time_kind: None,
            syscalls: Vec::new(),
            without_duration: 0,
            slowest: Vec::new(),
            pids: BTreeMap::new(),
            pids_other: PidStats::default(),
            capped: Capped::default(),
            caps: Caps::default(),
            paths: Vec::new(),
            paths_other: PathStats::default(),
            signals: BTreeMap::new(),
            timeline: BTreeMap::new(),
            timeline_bucket_seconds: 1.0,
            orphan_unfinished: 0,
            orphan_resumed: 0,
            unfinished_at_exit: 0,
            orphan_examples: Vec::new(),
            bad_by_reason: BTreeMap::new(),
            bad_examples: Vec::new(),
            slow_threshold_ns: 100_000_000,
            modes: ModeConfig::default(),
        }
    }

    /// Paths past the 50 shown are summed into "(other)", with those past the analyzer's cap.
    #[test]
    fn paths_past_the_fifty_shown_fold_into_other() {
        let mut tally = tally();
        tally.paths = (0..60u64)
            .map(|index| {
                let wall_ns = u128::from(index + 1) * 1_000_000;
                (format!("/p{index}"), PathStats { calls: 1, errors: index % 2, wall_ns, bytes: 10 })
            })
            .collect();
        tally.paths_other = PathStats { calls: 7, errors: 1, wall_ns: 0, bytes: 100 };
        let report = build(tally);
        let shown: Vec<&str> = report.paths.iter().map(|path| path.path.as_str()).collect();
        assert_eq!(shown.len(), 50);
        assert_eq!((shown[0], shown[49]), ("/p59", "/p10"), "largest wall time first");
        let other = &report.paths_other;
        assert_eq!(other.path, "(other)");
        assert_eq!((other.calls, other.errors, other.bytes), (7 + 10, 1 + 5, 100 + 10 * 10));
        // /p0 to /p9 took 1 + 2 + … + 10 ms.
        assert!((other.wall_seconds - 0.055).abs() < 1e-12, "{}", other.wall_seconds);
    }

    /// Examples name their source by index into the tally's sources; timeline keys are
    /// bucket numbers of the tally's width.
    #[test]
    fn examples_name_their_source_and_timeline_keys_become_seconds() {
        let mut tally = tally();
        tally.sources.push(SourceStats { name: "trace.42".to_string(), ..SourceStats::default() });
        tally.bad_by_reason.insert(BadLine::NoResult, 2);
        tally.bad_examples.push(Example { source: 1, line: 7, what: "w".to_string(), text: "t".to_string() });
        tally.timeline = BTreeMap::from([(3, (2, 1_500_000_000))]);
        tally.timeline_bucket_seconds = 4.0;
        let report = build(tally);
        assert_eq!(report.bad_lines.count, 2);
        assert_eq!((report.bad_lines.examples[0].source.as_str(), report.bad_lines.examples[0].line), ("trace.42", 7));
        let bucket = &report.timeline.buckets[0];
        assert_eq!((bucket.start_seconds, bucket.count, bucket.total_seconds), (12.0, 2, 1.5));
        assert_eq!((report.timeline.bucket_seconds, report.timeline.threshold_seconds), (4.0, 0.1));
    }

    /// A syscall whose waits end on 4 ms ticks: one 64 ms peak with its spikes named, apart
    /// from a 132 ms peak; every peak gives its share of calls and of time.
    #[test]
    fn a_tick_quantized_peak_is_one_peak_with_its_step() {
        let mut tally = tally();
        let mut durations = LogHistogram::new();
        for (ms, count) in [(60u64, 40u64), (64, 70), (68, 60), (72, 10), (132, 90)] {
            for jitter in 0..count {
                durations.record(ms * 1_000_000 + (jitter % 7) * 3_000);
            }
        }
        tally.syscalls.push(SyscallStats {
            name: "epoll_wait".to_string(),
            count: 270,
            durations,
            ..SyscallStats::default()
        });
        tally.modes = AnalyzerConfig::default().modes;
        let report = build(tally);
        let syscall = &report.syscalls[0];
        let peaks: Vec<(f64, u64)> = syscall.peaks.iter().map(|peak| (peak.seconds, peak.count)).collect();
        assert_eq!(peaks.len(), 2, "{peaks:?}");
        assert!((peaks[0].0 / 0.065 - 1.0).abs() < 0.05 && peaks[0].1 == 180, "{peaks:?}");
        let sentence = peak_sentence(syscall).unwrap_or_default();
        assert!(
            sentence.contains("peak is quantized in 4.00 ms steps (60.0 ms, 64.0 ms, 68.0 ms, 72.0 ms)"),
            "{sentence}"
        );
        assert!(sentence.contains("132 ms (90 calls, 33 % of calls, 50 % of time)"), "{sentence}");
    }
}
