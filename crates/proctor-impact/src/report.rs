//! What `proctor impact` reports, as one serializable shape (`--format json`) and as text:
//! per arm the target's p50, p99, p99.9 and max, each arm's difference from the arm with no
//! monitor and its bootstrap 95 % interval, the monitor's CPU, the stall ledger and the
//! target-side wait beside it. Units are in the names; unknown is `null`.
//!
//! Pure: numbers in, a document or text out.

use std::fmt::Write as _;

use proctor_units::units::duration_secs;
use serde::Serialize;

use crate::arms::Ledger;
use crate::stats::{Block, Interval, Percentiles, STATISTICS};
use crate::workload::{Workload, WorkloadConfig};

#[derive(Debug, Clone, Serialize)]
pub struct ImpactReport {
    pub workload: WorkloadReport,
    pub rounds: u32,
    /// Each arm's time in each round.
    pub duration_seconds: f64,
    /// With turns (`--switch`): the length of each turn, the arms alternating within a round,
    /// each monitor started once and stopped outside its turns; the intervals then resample
    /// whole cycles of turns, not blocks. `null`: one window an arm a round.
    pub turn_seconds: Option<f64>,
    /// Before the first window, not measured: with turns, how long each monitor ran alone;
    /// with rounds, how long the workload ran alone (its operations then are among those
    /// dropped between rounds). `null` in reports of builds before rounds had one.
    pub warmup_seconds: Option<f64>,
    /// The length of a block (see `stats`): the unit resampled without turns.
    pub block_seconds: f64,
    pub resamples: usize,
    pub seed: u64,
    /// Operations meant to start while no round was open (a monitor being read and stopped).
    pub dropped_between_rounds: u64,
    /// With turns: the pauses that found an agent stopped inside a traced read (its tracing
    /// instance recording every mmap lock operation on the host) and let it finish the read
    /// before stopping it again, so no other arm's turn runs beside a recording instance.
    /// `null` without turns.
    pub pauses_let_finish_a_traced_read: Option<u32>,
    /// With `--attribute`, the trace the arms' `attributed` figures come from.
    pub attribution: Option<Attribution>,
    pub arms: Vec<ArmReport>,
    /// Each arm's blocks, for the plot.
    #[serde(skip)]
    pub blocks: Vec<Vec<Block>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkloadReport {
    /// `pagefault`, `http`, `url` or `command`.
    pub kind: &'static str,
    /// The URL or the command line, for those kinds.
    pub detail: Option<String>,
    pub children: Option<u32>,
    pub size_bytes: Option<u64>,
    /// Per child for pagefault, in all for the others.
    pub rate_per_second: f64,
    /// The root of the tree the monitors' figures are read for.
    pub target_pid: u32,
    /// Processes timing operations.
    pub timed_processes: usize,
}

impl WorkloadReport {
    pub fn new(config: &WorkloadConfig, target_pid: u32, timed_processes: usize) -> WorkloadReport {
        let tree = matches!(config.workload, Workload::Pagefault | Workload::Http);
        let (kind, detail) = match &config.workload {
            Workload::Pagefault => ("pagefault", None),
            Workload::Http => ("http", None),
            Workload::Url(url) => ("url", Some(url.clone())),
            Workload::Command(argv) => ("command", Some(argv.join(" "))),
        };
        WorkloadReport {
            kind,
            detail,
            children: tree.then_some(config.children),
            size_bytes: tree.then_some(config.size_bytes),
            rate_per_second: config.rate_per_sec,
            target_pid,
            timed_processes,
        }
    }
}

/// p50, p99, p99.9 and max, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StatReport {
    pub operations: u64,
    pub p50_seconds: f64,
    pub p99_seconds: f64,
    pub p999_seconds: f64,
    pub max_seconds: f64,
}

impl From<Percentiles> for StatReport {
    fn from(p: Percentiles) -> StatReport {
        StatReport {
            operations: p.count,
            p50_seconds: p.p50 / 1e9,
            p99_seconds: p.p99 / 1e9,
            p999_seconds: p.p999 / 1e9,
            max_seconds: p.max / 1e9,
        }
    }
}

/// One statistic's difference from the no-monitor arm.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    /// `p50`, `p99`, `p99.9` or `max`.
    pub statistic: &'static str,
    pub seconds: f64,
    /// The bootstrap 95 % interval of the difference; `null` when an arm has fewer than two
    /// blocks (seconds) of operations to resample.
    pub low_seconds: Option<f64>,
    pub high_seconds: Option<f64>,
    /// The difference as a percentage of the no-monitor arm's value.
    pub percent: Option<f64>,
    /// Whether the interval includes 0; `null` without one.
    pub includes_zero: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RoundReport {
    pub round: u32,
    pub seconds: f64,
    pub latency: Option<StatReport>,
    pub failed: u64,
    pub monitor_cpu_seconds: Option<f64>,
    pub ledger: Option<Ledger>,
    /// What went wrong with the monitor this round (it ended early, its ledger could not be read).
    pub problem: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ArmReport {
    /// `none`, `proctor ARGS…` or `psutil`.
    pub name: String,
    /// Why the arm did not run (and how to make it able to); `null` when it ran.
    pub skipped: Option<String>,
    pub seconds: f64,
    pub latency: Option<StatReport>,
    /// `null` for the no-monitor arm itself and for an arm that did not run.
    pub differences: Option<Vec<Difference>>,
    pub failed_operations: u64,
    /// The monitor's CPU over its windows (startup included), user and system.
    pub monitor_cpu_seconds: Option<f64>,
    pub monitor_cpu_percent_of_one_cpu: Option<f64>,
    /// proctor's stall ledger for the tree, summed over rounds (max: the longest read).
    pub ledger: Option<Ledger>,
    /// The timed processes' service time beyond the no-monitor arm's median, summed.
    pub target_wait_seconds: f64,
    /// That wait less what the no-monitor arm had in as much time: the part this arm's monitor
    /// caused. `null` for the no-monitor arm.
    pub target_wait_beyond_none_seconds: Option<f64>,
    /// `target_wait_beyond_none_seconds` over the ledger's total for the timed processes.
    pub wait_over_ledger: Option<f64>,
    /// pagefault only: operations that went to sleep (waited for the mmap lock, not merely
    /// preempted), and their service time in all: the target-side wait a busy machine does not
    /// add to.
    pub slept_operations: Option<u64>,
    pub slept_seconds: Option<f64>,
    pub rounds: Vec<RoundReport>,
    /// With `--attribute`: what this arm's monitor itself delayed its windows' operations by
    /// (see [`crate::trace`]), and those operations' percentiles without it. `null` otherwise.
    pub attributed: Option<Attributed>,
}

/// What a monitor delayed the operations of its own windows by, from the kernel's trace of the
/// same run ([`crate::trace`]), charged two ways: `direct` counts its CPU where it ran on the
/// CPU a target's thread was queued on, `broad` where it ran on any CPU while the thread was
/// queued; both count its holds of a target's mmap lock while the target waited for it.
#[derive(Debug, Clone, Serialize)]
pub struct Attributed {
    pub direct: Charged,
    pub broad: Charged,
}

#[derive(Debug, Clone, Serialize)]
pub struct Charged {
    /// What the target's threads waited on the monitor in its windows, each delay once.
    pub cpu_delay_seconds: f64,
    pub lock_delay_seconds: f64,
    /// Operations with any such delay.
    pub operations_delayed: u64,
    /// What was taken off those operations, summed: more than the threads' delays, since
    /// latency counts from each operation's intended start, so one delay counts again in every
    /// operation it made start late.
    pub operations_delay_seconds: f64,
    /// The same operations, each less its delays: the tail without what the trace charges to
    /// the monitor.
    pub without: Option<StatReport>,
    /// The arm's percentiles less `without`'s (what those delays added), each with a bootstrap
    /// interval over the arm's windows (both sides of a draw from the same operations).
    pub differences: Option<Vec<Difference>>,
}

/// The trace `--attribute` read: its events, what it lost, lines it could not read.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Attribution {
    pub events: u64,
    /// Events the kernel dropped (a per-CPU buffer full): delays in them are not charged.
    pub lost_events: u64,
    pub unread_lines: u64,
    /// Why the attribution could not be made; `null` when it was.
    pub problem: Option<String>,
}

impl ArmReport {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        is_base: bool,
        name: String,
        skipped: Option<String>,
        latency: Option<Percentiles>,
        base: Option<Percentiles>,
        intervals: Option<[Interval; 4]>,
        failed_operations: u64,
        seconds: f64,
        monitor_cpu_seconds: Option<f64>,
        ledger: Option<Ledger>,
        target_wait_seconds: f64,
        target_wait_beyond_none_seconds: Option<f64>,
        slept: Option<(u64, f64)>,
        rounds: Vec<RoundReport>,
    ) -> ArmReport {
        let differences = match (latency, base, is_base) {
            (Some(latency), Some(base), false) => Some(differences(&latency, &base, intervals)),
            _ => None,
        };
        let wait_over_ledger = match (&ledger, target_wait_beyond_none_seconds) {
            (Some(l), Some(wait)) if l.timed_stall_seconds_total > 0.0 => Some(wait / l.timed_stall_seconds_total),
            _ => None,
        };
        ArmReport {
            name,
            skipped,
            seconds,
            latency: latency.map(StatReport::from),
            differences,
            failed_operations,
            monitor_cpu_percent_of_one_cpu: monitor_cpu_seconds
                .and_then(|cpu| (seconds > 0.0).then(|| 100.0 * cpu / seconds)),
            monitor_cpu_seconds,
            ledger,
            target_wait_seconds,
            target_wait_beyond_none_seconds,
            wait_over_ledger,
            slept_operations: slept.map(|s| s.0),
            slept_seconds: slept.map(|s| s.1),
            rounds,
            attributed: None,
        }
    }
}

/// Each statistic of `latency` less `base`'s, with the intervals of the differences.
pub fn differences(latency: &Percentiles, base: &Percentiles, intervals: Option<[Interval; 4]>) -> Vec<Difference> {
    STATISTICS
        .iter()
        .zip(latency.values().iter().zip(base.values()))
        .enumerate()
        .map(|(i, (statistic, (value, base)))| {
            let interval = intervals.map(|all| all[i]);
            Difference {
                statistic,
                seconds: (value - base) / 1e9,
                low_seconds: interval.map(|x| x.low / 1e9),
                high_seconds: interval.map(|x| x.high / 1e9),
                percent: (base > 0.0).then(|| 100.0 * (value - base) / base),
                includes_zero: interval.map(|x| x.low <= 0.0 && x.high >= 0.0),
            }
        })
        .collect()
}

fn signed(seconds: f64) -> String {
    if seconds < 0.0 {
        format!("-{}", duration_secs(-seconds))
    } else {
        format!("+{}", duration_secs(seconds))
    }
}

/// Whose the ledger's longest read was, in words (its name, which the target chose, made
/// printable): " of pid 12 `python3`, which times no operations". Empty where unknown.
fn whose_longest(l: &Ledger) -> String {
    let Some(pid) = l.stall_max_pid else { return String::new() };
    let name =
        l.stall_max_name.as_deref().map(|n| format!(" `{}`", proctor_units::units::printable(n))).unwrap_or_default();
    let timed = match l.stall_max_timed {
        Some(true) => ", which times operations",
        Some(false) => ", which times no operations",
        None => "",
    };
    format!(" of pid {pid}{name}{timed}")
}

/// The report for people.
pub fn render_text(report: &ImpactReport) -> String {
    let mut out = String::new();
    let w = &report.workload;
    let what = match (w.kind, &w.detail) {
        ("pagefault" | "http", _) => format!(
            "{} tree: {} children sharing {}, {}/s {}",
            w.kind,
            w.children.unwrap_or(0),
            proctor_units::units::bytes(w.size_bytes.unwrap_or(0)),
            w.rate_per_second,
            if w.kind == "pagefault" { "each" } else { "in all" }
        ),
        (kind, detail) => format!("{kind} {}: {}/s", detail.as_deref().unwrap_or(""), w.rate_per_second),
    };
    let _ = writeln!(out, "target   {what} (root pid {}, {} timed)", w.target_pid, w.timed_processes);
    match (report.turn_seconds, report.warmup_seconds) {
        (Some(turn), warmup) => {
            let _ = writeln!(
                out,
                "rounds   {} × {} per arm in turns of {}, arms alternating; each monitor started once, run alone {} first, stopped outside its turns; intervals: bootstrap 95 %, {} resamples of whole cycles of turns, seed {}",
                report.rounds,
                duration_secs(report.duration_seconds),
                duration_secs(turn),
                duration_secs(warmup.unwrap_or(0.0)),
                report.resamples,
                report.seed
            );
        }
        (None, _) => {
            let _ = writeln!(
                out,
                "rounds   {} × {} per arm, after {} of the workload alone, arms alternating; intervals: bootstrap 95 %, {} resamples of {} s blocks, seed {}",
                report.rounds,
                duration_secs(report.duration_seconds),
                duration_secs(report.warmup_seconds.unwrap_or(0.0)),
                report.resamples,
                report.block_seconds,
                report.seed
            );
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "{:<28} {:>10} {:>10} {:>10} {:>10} {:>10}", "arm", "ops", "p50", "p99", "p99.9", "max");
    for arm in &report.arms {
        match (&arm.skipped, &arm.latency) {
            (Some(why), _) => {
                let _ = writeln!(out, "{:<28} SKIPPED: {why}", arm.name);
            }
            (None, None) => {
                let _ = writeln!(out, "{:<28} no operations", arm.name);
            }
            (None, Some(l)) => {
                let _ = writeln!(
                    out,
                    "{:<28} {:>10} {:>10} {:>10} {:>10} {:>10}",
                    proctor_units::units::printable(&arm.name),
                    l.operations,
                    duration_secs(l.p50_seconds),
                    duration_secs(l.p99_seconds),
                    duration_secs(l.p999_seconds),
                    duration_secs(l.max_seconds)
                );
            }
        }
        if let Some(differences) = &arm.differences {
            let _ = write!(out, "{:<28} {:>10}", "  difference from none", "");
            for d in differences {
                let _ = write!(out, " {:>10}", signed(d.seconds));
            }
            let _ = writeln!(out);
            if differences.iter().any(|d| d.low_seconds.is_none()) {
                let unit = if report.turn_seconds.is_some() { "cycles of turns" } else { "seconds" };
                let _ = writeln!(out, "  (no interval: an arm has fewer than two {unit} of operations to resample)");
                continue;
            }
            let _ = write!(out, "{:<28} {:>10}", "  95 % interval", "");
            for d in differences {
                let mark = if d.includes_zero == Some(false) { "*" } else { "" };
                let _ = write!(out, " {:>10}", format!("{mark}{}", signed(d.low_seconds.unwrap_or(0.0))));
            }
            let _ = writeln!(out);
            let _ = write!(out, "{:<28} {:>10}", "", "");
            for d in differences {
                let _ = write!(out, " {:>10}", signed(d.high_seconds.unwrap_or(0.0)));
            }
            let _ = writeln!(out);
        }
    }
    let _ = writeln!(out, "(* an interval that excludes 0)");
    let _ = writeln!(out);
    for arm in report.arms.iter().filter(|a| a.slept_operations.is_some()) {
        let _ = writeln!(
            out,
            "{}: {} operations slept (waited for the mmap lock), {} in all",
            proctor_units::units::printable(&arm.name),
            arm.slept_operations.unwrap_or(0),
            duration_secs(arm.slept_seconds.unwrap_or(0.0))
        );
    }
    for arm in report.arms.iter().skip(1).filter(|a| a.skipped.is_none()) {
        let _ = write!(out, "{}: ", proctor_units::units::printable(&arm.name));
        match (arm.monitor_cpu_seconds, arm.monitor_cpu_percent_of_one_cpu) {
            (Some(cpu), Some(pct)) => {
                let _ = write!(out, "CPU {} ({pct:.2} % of one CPU)", proctor_units::units::cpu_time(cpu));
            }
            _ => {
                let _ = write!(out, "CPU unknown");
            }
        }
        if let Some(l) = &arm.ledger {
            let _ = write!(
                out,
                "; ledger {} over {} processes (longest read {}{}), {} on the timed ones",
                duration_secs(l.stall_seconds_total),
                l.processes,
                duration_secs(l.stall_max_seconds),
                whose_longest(l),
                duration_secs(l.timed_stall_seconds_total)
            );
            match l.target_waited_seconds_total {
                Some(waited) => {
                    let _ = write!(out, "; the tree's threads waited {} on those reads", duration_secs(waited));
                }
                None => {
                    let _ = write!(out, "; the tree's own wait on them not traced (see proctor doctor)");
                }
            }
        }
        if let Some(wait) = arm.target_wait_beyond_none_seconds {
            let _ = write!(out, "; target-side wait beyond none {}", signed(wait));
        }
        // Beside the noise of the machine the wait may be negative; a ratio then says nothing.
        if let Some(ratio) = arm.wait_over_ledger.filter(|r| *r > 0.0) {
            let _ = write!(out, " ({:.0} % of the ledger)", ratio * 100.0);
        }
        if arm.failed_operations > 0 {
            let _ = write!(out, "; {} operations failed", arm.failed_operations);
        }
        let _ = writeln!(out);
        for round in arm.rounds.iter().filter_map(|r| r.problem.as_ref().map(|p| (r.round, p))) {
            let _ = writeln!(out, "  round {}: {}", round.0, proctor_units::units::printable(round.1));
        }
    }
    for arm in report.arms.iter().filter(|a| a.attributed.is_some()) {
        let a = arm.attributed.as_ref().expect("filtered");
        for (how, c) in [("direct", &a.direct), ("broad", &a.broad)] {
            let _ = write!(
                out,
                "{} by the trace ({how}): its CPU delayed the target's threads {}, its mmap lock holds {}; {} operations by {} in all; without:",
                proctor_units::units::printable(&arm.name),
                duration_secs(c.cpu_delay_seconds),
                duration_secs(c.lock_delay_seconds),
                c.operations_delayed,
                duration_secs(c.operations_delay_seconds)
            );
            if let (Some(without), Some(differences)) = (&c.without, &c.differences) {
                let _ = write!(
                    out,
                    " p99 {}, p99.9 {}; it added",
                    duration_secs(without.p99_seconds),
                    duration_secs(without.p999_seconds)
                );
                for d in differences.iter().filter(|d| matches!(d.statistic, "p99" | "p99.9")) {
                    let _ = write!(out, " {} {}", d.statistic, signed(d.seconds));
                    if let Some(pct) = d.percent {
                        let _ = write!(out, " ({pct:+.2} %)");
                    }
                    if let (Some(low), Some(high)) = (d.low_seconds, d.high_seconds) {
                        let _ = write!(out, " [{}, {}]", signed(low), signed(high));
                    }
                }
            }
            let _ = writeln!(out);
        }
    }
    if let Some(a) = &report.attribution {
        match &a.problem {
            Some(why) => {
                let _ = writeln!(out, "attribution: not made: {why}");
            }
            None => {
                let _ = writeln!(
                    out,
                    "attribution: {} trace events, {} lost, {} lines unread",
                    a.events, a.lost_events, a.unread_lines
                );
            }
        }
    }
    if let Some(n @ 1..) = report.pauses_let_finish_a_traced_read {
        let _ = writeln!(out, "{n} pauses found an agent inside a traced read and let it finish the read first");
    }
    if report.dropped_between_rounds > 0 {
        let _ = writeln!(out, "{} operations fell between rounds and are not counted", report.dropped_between_rounds);
    }
    out
}
