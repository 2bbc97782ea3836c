//! `proctor impact`: what a monitor costs, measured from the side that matters — the target's.
//! A target does timed operations at a fixed rate while rounds alternate between no monitor,
//! proctor at the given settings, and (optionally) the psutil loop jupyter-resource-usage
//! runs; the report is the target's latency percentiles per arm, each difference from no
//! monitor with its bootstrap interval, the monitors' CPU, and proctor's stall ledger beside
//! the wait the target saw.
//!
//! Layers, pure first: [`stats`] (bucketed latencies, percentiles, the bootstrap), [`record`]
//! (the workload's pipe format), [`report`] (the shape and its text), [`plot`]; then the I/O:
//! [`workload`] (the target tree), [`arms`] (starting monitors, reading their CPU and ledger)
//! and [`run`] (the rounds); [`trace`] (`--attribute`: the delays a monitor caused, from the
//! kernel's trace of the same run). Timing figures from it belong in docs/performance.md, never in a
//! test's assertion.

pub mod arms;
pub mod plot;
pub mod record;
pub mod report;
pub mod run;
pub mod stats;
pub mod trace;
pub mod workload;
