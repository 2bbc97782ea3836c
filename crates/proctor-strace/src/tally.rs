//! [`Tally`]: everything the analysis found, as plain data. `Analyzer::finish` returns it and
//! `report::build` turns it into a `Report`; the analyzer also counts into its parts.
//!
//! Everything here is raw: counts, nanoseconds and log-scale histograms. Nothing is derived
//! (no peaks, percentiles, seconds, sorting by time or display caps: that is `report`'s job),
//! and this module knows neither the analyzer nor the report.

use std::collections::BTreeMap;

use proctor_modes::{LogHistogram, ModeConfig};

use crate::parse::{BadLine, TimeKind};

/// Everything the analysis found, and the two settings a report needs. Sources are indexed
/// by their position in `sources` (see [`SlowCall::source`] and [`Example::source`]).
#[derive(Debug, Clone)]
pub struct Tally {
    /// One per input, in the order they were begun.
    pub sources: Vec<SourceStats>,
    /// Lines read in all sources.
    pub lines: u64,
    /// Lines longer than `MAX_LINE_BYTES`, analyzed as their first `MAX_LINE_BYTES` only.
    pub lines_cut: u64,
    /// strace's own notes (`strace: Process N attached` and the like), skipped.
    pub notes: u64,
    /// Which timestamp option the log was written with: that of the first timestamped line.
    pub time_kind: Option<TimeKind>,
    /// One per syscall name, in order of first appearance.
    pub syscalls: Vec<SyscallStats>,
    /// Calls with a result but no `-T` duration (strace run without `-T`, or `= ?` exits).
    pub without_duration: u64,
    /// The slowest calls that had a duration, slowest first (of equal ones, the earlier first).
    pub slowest: Vec<SlowCall>,
    /// Per pid, by pid, up to the analyzer's `max_pids`; lines whose pid is unknown count in
    /// no pid.
    pub pids: BTreeMap<u32, PidStats>,
    /// Processes beyond `max_pids`, summed.
    pub pids_other: PidStats,
    /// What the analyzer's caps folded into "other" rows.
    pub capped: Capped,
    /// The caps themselves, for the report to name: syscall names, errnos per syscall,
    /// signal names and pids.
    pub caps: Caps,
    /// `-y` paths and sockets (lossy UTF-8) with their totals, in order of first appearance,
    /// up to the analyzer's `max_paths`.
    pub paths: Vec<(String, PathStats)>,
    /// Calls on paths beyond `max_paths`, summed.
    pub paths_other: PathStats,
    /// Signals delivered, by name.
    pub signals: BTreeMap<String, u64>,
    /// Timestamped calls at least `slow_threshold_ns` long, over time: bucket index (start time
    /// on the log's axis divided by `timeline_bucket_seconds`, floored) → (calls, summed wall ns).
    pub timeline: BTreeMap<i64, (u64, u128)>,
    /// Width of a timeline bucket in seconds: 1 s, doubled each time the buckets grew past
    /// the analyzer's `max_timeline_buckets`.
    pub timeline_bucket_seconds: f64,
    /// Unfinished halves never resumed (and not ended by their process's exit).
    pub orphan_unfinished: u64,
    /// Resumed halves whose start was not seen.
    pub orphan_resumed: u64,
    /// Unfinished calls ended by their process exiting or being killed (expected).
    pub unfinished_at_exit: u64,
    /// The first few orphan halves, in the order they were found.
    pub orphan_examples: Vec<Example>,
    /// Lines not understood, by reason.
    pub bad_by_reason: BTreeMap<BadLine, u64>,
    /// The first few of those lines, in order.
    pub bad_examples: Vec<Example>,
    /// The analyzer's `slow_threshold_ns`: calls this long or longer are in `timeline`.
    pub slow_threshold_ns: u64,
    /// The analyzer's `modes`: how the report finds peaks in the histograms.
    pub modes: ModeConfig,
}

/// Lines and calls counted under "other" because a table was full: a real strace log fills
/// none of these, a hostile or broken one cannot make the analysis grow without bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capped {
    /// Call lines whose syscall name came after `max_syscalls` others.
    pub syscall_lines: u64,
    /// Errors and interruptions whose errno came after `max_errnos` others on that syscall.
    pub errnos: u64,
    /// Signals whose name came after `max_signals` others.
    pub signals: u64,
    /// Calls, signals and exits of processes after `max_pids` others.
    pub pid_events: u64,
    /// Unfinished halves written off because `max_pids` calls were pending already.
    pub pending: u64,
}

/// The analyzer's table caps (see `AnalyzerConfig`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caps {
    pub syscalls: usize,
    pub errnos: usize,
    pub signals: usize,
    pub pids: usize,
}

/// One input (a file, one `-ff` file or stdin).
#[derive(Debug, Clone, Default)]
pub struct SourceStats {
    /// As given to `Analyzer::begin_source` (`-` for stdin).
    pub name: String,
    /// Lines read, understood or not.
    pub lines: u64,
    /// Lines understood as calls, signals or exits.
    pub events: u64,
    /// Lines not understood (see the bad-line counts by reason).
    pub bad: u64,
}

/// Per-syscall accumulators.
#[derive(Debug, Clone, Default)]
pub struct SyscallStats {
    /// The syscall's name as written (lossy UTF-8).
    pub name: String,
    /// Whether a positive result is a byte count (`read`, `write`, `sendto`, …): the analyzer
    /// adds such results to the `-y` path's bytes. Decided once per name rather than by
    /// comparing names on every call.
    pub moves_bytes: bool,
    /// Calls with a result (whole, paired, or orphan resumed halves).
    pub count: u64,
    /// Calls that returned `-1 ERRNO`.
    pub errors: u64,
    /// Calls interrupted by a signal (`? ERESTARTSYS` and friends).
    pub interrupted: u64,
    /// Errno names of errors and interruptions with their counts, in order of first appearance.
    pub errnos: Vec<(String, u64)>,
    /// Unfinished halves that never got a result (orphans and calls cut by exit).
    pub unfinished: u64,
    /// Wall durations (`-T`) in nanoseconds; calls without one are not in it.
    pub durations: LogHistogram,
}

/// Per-pid totals.
#[derive(Debug, Clone, Default)]
pub struct PidStats {
    /// Calls with a result.
    pub calls: u64,
    /// Calls that returned `-1 ERRNO`.
    pub errors: u64,
    /// Summed wall time of its calls, in nanoseconds.
    pub wall_ns: u128,
    /// Its longest call, in nanoseconds.
    pub slowest_ns: u64,
    /// Signals delivered to it.
    pub signals: u64,
    /// How it ended, as `exited with N` or `killed by SIGX`; `None` if the log does not say.
    pub exit: Option<String>,
}

/// Totals of the calls on one `-y` path or socket (or of several, summed).
#[derive(Debug, Clone, Default)]
pub struct PathStats {
    /// Calls whose first argument was this decorated fd.
    pub calls: u64,
    /// Those that returned `-1 ERRNO`.
    pub errors: u64,
    /// Their summed wall time, in nanoseconds.
    pub wall_ns: u128,
    /// Bytes moved by the calls whose positive result is a byte count.
    pub bytes: u64,
}

/// One of the slowest calls.
#[derive(Debug, Clone)]
pub struct SlowCall {
    /// Its wall time (`-T`), in nanoseconds.
    pub duration_ns: u64,
    /// The syscall's name.
    pub name: String,
    /// Its pid: from the line, else from the `-ff` file name; `None` if neither says.
    pub pid: Option<u32>,
    /// Index of its source in the order the sources were begun.
    pub source: usize,
    /// Line number (from 1) within the source where the call started.
    pub line: u64,
    /// The timestamp as written on that line, if any.
    pub time: Option<String>,
    /// The arguments, cut to 200 bytes; a split call's two halves joined by ` ...`.
    pub args: String,
    /// The result as written (`0`, `-1 ETIMEDOUT`, `? ERESTARTSYS`, …).
    pub result: String,
}

/// A line kept as an example of something wrong.
#[derive(Debug, Clone)]
pub struct Example {
    /// Index of its source in the order the sources were begun.
    pub source: usize,
    /// Line number (from 1) within the source.
    pub line: u64,
    /// What is wrong with it.
    pub what: String,
    /// The line (or the call's arguments), cut to 160 bytes.
    pub text: String,
}
