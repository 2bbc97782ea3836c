//! strace log parser and analyzer: `BufRead` in, [`Report`] out.
//!
//! `strace -c` sums CPU time inside the kernel, so a thread that sleeps 1 s in `futex` shows
//! up as microseconds. This crate measures **wall time** (`-T`) per call instead, keeps it
//! in log-scale histograms (memory bounded by the number of distinct syscalls, pids and
//! paths, never by the number of lines) and names the peaks of each histogram with
//! [`proctor_modes`], so "futex: peaks at 250 ms, 500 ms, 1 s" is printed without asking.
//!
//! Layers, bottom up:
//! - [`parse`]: one line → one event; pure, allocation-free, never panics.
//! - [`tally`]: the [`Tally`], plain data: per-syscall histograms, per-pid and per-path
//!   totals, the slowest calls, the timeline, orphans and bad lines.
//! - [`analyze`]: the [`Analyzer`] state machine: pairs unfinished/resumed halves per pid,
//!   unwraps timestamps, fills histograms; [`analyze::feed_reader`] drives it from any
//!   `BufRead` without copying lines that fit in the reader's buffer. [`Analyzer::finish`]
//!   hands over a [`Tally`].
//! - [`report`]: [`report::build`] turns a [`Tally`] into the [`Report`] (serde, peaks
//!   computed) and renders it as text. It never sees the [`Analyzer`].
//! - [`plot`]: per-syscall histograms as SVG or PNG bytes.
//! - [`input`]: the only file-system code: opening files, `-ff` directories, gzip.
//!
//! # JSON output
//!
//! `proctor strace --format json` prints the [`Report`]. Every duration in it is in seconds
//! and named `<what>_seconds`: strace writes seconds (`<0.250085>`, `-tt` clocks) to the
//! microsecond, which a double holds exactly, and the report's time axis is the log's own.
//! Counts, shares (`fraction` of calls, `time_fraction` of time) and indices carry no unit.
//!
//! Renamed in issue 14, so that no duration hides its unit (or uses another one):
//!
//! | before | now |
//! |---|---|
//! | `syscalls[].histogram_ns[].low` (nanoseconds) | `syscalls[].histogram[].low_seconds` |
//! | `syscalls[].histogram_ns[].high` (nanoseconds) | `syscalls[].histogram[].high_seconds` |
//! | `syscalls[].histogram_ns[].mean` (nanoseconds) | `syscalls[].histogram[].mean_seconds` |
//! | `syscalls[].peaks[].seconds` | `syscalls[].peaks[].value_seconds` |
//! | `slowest[].seconds` | `slowest[].duration_seconds` |
//!
//! New then: `syscalls[].peaks[].total_seconds` and `.time_fraction` (a peak's share of the
//! syscall's time beside its share of the calls), `syscalls[].fine_structure[]`.

pub mod analyze;
pub mod input;
pub mod parse;
pub mod plot;
pub mod report;
pub mod tally;

pub use analyze::{feed_reader, Analyzer, AnalyzerConfig};
pub use report::Report;
pub use tally::Tally;
