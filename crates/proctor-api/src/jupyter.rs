//! `/api/metrics/v1`: the JSON that jupyter-resource-usage 1.3.0 serves, key for key, for the
//! tree under a configured root pid, but with container-true limits.
//!
//! jupyter-resource-usage walks the tree with psutil on every request (PSS through
//! `smaps_rollup`, which stalls each child) and takes its limits from `MEM_LIMIT` and
//! `CPU_LIMIT`. Here the figures come from the latest snapshot, the memory limit is the
//! smallest cgroup limit on the path (else the host's memory), the CPU limit and `cpu_count`
//! are the effective CPUs, and `warn` compares like with like (see [`jupyter_metrics`]).

use proctor_model::build_tree;
use serde::Serialize;

use crate::agent::Snapshot;

#[derive(Debug, Clone, Copy)]
pub struct JupyterConfig {
    /// Root of the tree (the Jupyter server's pid).
    pub pid: u32,
    /// Warn when free memory under the limit falls below this share of it (their default 0.1).
    pub mem_warning_threshold: f64,
    pub cpu_warning_threshold: f64,
    pub disk_warning_threshold: f64,
}

impl JupyterConfig {
    pub fn new(pid: u32) -> Self {
        Self { pid, mem_warning_threshold: 0.1, cpu_warning_threshold: 0.1, disk_warning_threshold: 0.1 }
    }
}

/// Field order follows theirs: `rss`, `limits`, `pss`, `cpu_percent`, `cpu_count`, `disk_used`,
/// `disk_total`.
#[derive(Debug, Serialize, PartialEq)]
pub struct JupyterMetrics {
    pub rss: u64,
    pub limits: Limits,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pss: Option<u64>,
    pub cpu_percent: f64,
    pub cpu_count: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_used: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_total: Option<u64>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Limits {
    pub memory: MemoryLimit,
    pub cpu: CpuLimit,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskLimit>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct MemoryLimit {
    pub rss: u64,
    pub pss: u64,
    pub warn: bool,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct CpuLimit {
    /// In CPUs, as their `cpu_limit` (1.5 = one and a half CPUs).
    pub cpu: f64,
    pub warn: bool,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct DiskLimit {
    pub disk: u64,
    pub warn: bool,
}

/// `None` when the root pid is not in the snapshot (it exited).
///
/// How `warn` is decided, where theirs differs:
/// - memory: the tree's PSS when every member's is known (else its RSS, which counts shared
///   pages once per process and so overstates) is within `mem_warning_threshold` of the limit;
/// - CPU: `cpu_percent` (percent of one CPU) is within the threshold of `100 × limit`. Theirs
///   subtracts a percent from a CPU count, which warns at about 1 % of one CPU for a 2-CPU
///   limit;
/// - disk: as theirs, free space under the threshold share of the total.
pub fn jupyter_metrics(s: &Snapshot, config: &JupyterConfig) -> Option<JupyterMetrics> {
    let tree = build_tree(&s.rows, config.pid)?;
    let rss: u64 = tree.total.rss_bytes;
    let all_pss_known = tree.total.pss_known == tree.total.processes;
    let pss = tree.total.pss_bytes.filter(|_| all_pss_known);
    let cpu_percent = tree.total.cpu_percent.unwrap_or(0.0);
    let truth = &s.truth;
    let effective = truth.effective_cpus.unwrap_or(1.0);
    let cpu_count = truth.effective_cpus_ceil.unwrap_or(1);
    let memory_limit = truth.memory_limit_bytes.unwrap_or(0);
    let used = pss.unwrap_or(rss);
    let mem_warn = memory_limit > 0
        && config.mem_warning_threshold != 0.0
        && (memory_limit as f64 - used as f64) < memory_limit as f64 * config.mem_warning_threshold;
    let cpu_capacity = effective * 100.0;
    let cpu_warn =
        config.cpu_warning_threshold != 0.0 && (cpu_capacity - cpu_percent) < cpu_capacity * config.cpu_warning_threshold;
    let disk = s.disk.map(|d| DiskLimit {
        disk: d.total_bytes,
        warn: config.disk_warning_threshold != 0.0
            && ((d.total_bytes - d.used_bytes.min(d.total_bytes)) as f64) < d.total_bytes as f64 * config.disk_warning_threshold,
    });
    Some(JupyterMetrics {
        rss,
        limits: Limits {
            memory: MemoryLimit { rss: memory_limit, pss: memory_limit, warn: mem_warn },
            cpu: CpuLimit { cpu: effective, warn: cpu_warn },
            disk,
        },
        pss,
        cpu_percent,
        cpu_count,
        disk_used: s.disk.map(|d| d.used_bytes),
        disk_total: s.disk.map(|d| d.total_bytes),
    })
}
