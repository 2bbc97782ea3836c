//! What the analysis counts, as plain data: the analyzer fills these types, the report reads them.
//!
//! Everything here is raw: counts, nanoseconds and log-scale histograms, in the order the
//! analyzer met them. Nothing is derived (no peaks, percentiles, seconds or display caps; that
//! is `report`'s job), and this module knows neither the analyzer nor the report.

use proctor_modes::LogHistogram;

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
