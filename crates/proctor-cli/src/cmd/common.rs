//! Options and steps shared by the data commands: the fake-root switch, two-sample reads.

use std::path::PathBuf;
use std::time::Duration;

use proctor_model::{container_truth, process_rows, ContainerTruth, ProcessRow, RowContext, Sample};
use proctor_procfs::Root;
use proctor_sampler::{Sampler, SamplerConfig};

/// Options every reading command shares.
#[derive(Debug, Clone, clap::Args)]
pub struct ReadArgs {
    /// Read /proc, /sys and cgroups under this directory instead of / (for captured trees).
    #[arg(long, hide = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Whose cgroup counts as "the container" (default: proctor's own).
    #[arg(long, value_name = "PID", default_value_t = 0)]
    pub container_pid: u32,
    /// Also read /proc/PID/io every sample (a third file per process; per-process disk rates).
    #[arg(long)]
    pub io: bool,
}

impl ReadArgs {
    pub fn config(&self) -> SamplerConfig {
        SamplerConfig {
            root: self.root.clone().map(Root::new).unwrap_or_default(),
            container_pid: self.container_pid,
            process_io: self.io,
            ..SamplerConfig::default()
        }
    }
}

/// Two samples `interval` apart (one when the interval is zero) and what derives from them.
pub struct TwoSamples {
    pub prev: Option<Sample>,
    pub cur: Sample,
    pub truth: ContainerTruth,
    pub rows: Vec<ProcessRow>,
}

pub fn two_samples(sampler: &mut Sampler, interval: Duration) -> TwoSamples {
    let first = sampler.sample();
    let (prev, cur) = if interval.is_zero() {
        (None, first)
    } else {
        std::thread::sleep(interval);
        (Some(first), sampler.sample())
    };
    let truth = container_truth(&cur);
    let ctx = RowContext { effective_cpus: truth.effective_cpus };
    let rows = process_rows(&cur, prev.as_ref(), ctx);
    TwoSamples { prev, cur, truth, rows }
}

/// The row's command line if read, else its comm in brackets (as ps shows kernel threads).
pub fn command_of(row: &ProcessRow) -> String {
    match row.cmdline.as_deref() {
        Some(args) if !args.is_empty() => args.join(" "),
        _ => format!("[{}]", row.comm),
    }
}

/// Strips control characters so a hostile process name cannot drive the terminal.
pub fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}
