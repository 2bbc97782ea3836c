//! Samples and what is derived from them: host rates, process rows, trees and container truth.
//!
//! A [`Sample`] holds raw cumulative counters exactly as read. Everything people look at is
//! derived here from the current sample and, for rates, the previous one. This crate does no
//! I/O and never reads the clock: times arrive inside the samples. A counter that went
//! backwards (a reset, a reused pid) yields `None`, never a negative rate.

mod container;
mod event;
pub mod gpu;
mod host;
mod process;
pub mod rollup;
mod sample;
pub mod series;
mod tree;

pub use container::{container_truth, format_cpus, ContainerTruth};
pub use event::{ProbeBatch, ProbeResult, StatsdFlush, StatsdTimer};
pub use gpu::{GpuSample, PowerReading};
pub use host::{host_view, CpuPercent, DiskRate, HostNetRates, HostView, NetRate};
pub use process::{process_rows, MemoryAge, NetRates, ProcessRow, RowContext, ThreadRow};
pub use rollup::{RollupBlock, RollupRow, Stat};
pub use sample::{
    intern_name, ContainerSample, EventStarts, ExitedProcess, HostNet, HostSample, NetCounters, ProcessNet,
    ProcessSample, PssReading, Sample, SampleCost, SampleGroups, Stall, Starts, StatusReading, TaskSample, MAX_EXITED,
};
pub use series::is_interesting_disk;
pub use tree::{build_tree, Tree, TreeRow, TreeTotal};

/// `later - earlier` for cumulative counters; `None` when the counter went backwards.
pub(crate) fn delta(later: u64, earlier: u64) -> Option<u64> {
    later.checked_sub(earlier)
}

/// A per-second rate from a counter delta over `secs`; `None` when either is unusable.
pub(crate) fn rate(later: u64, earlier: u64, secs: f64) -> Option<f64> {
    (secs > 0.0).then_some(())?;
    delta(later, earlier).map(|d| d as f64 / secs)
}
