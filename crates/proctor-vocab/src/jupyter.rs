//! `/api/metrics/v1`: the JSON that jupyter-resource-usage 1.3.0 serves, key for key, for the
//! tree under a configured root pid, but with container-true limits.
//!
//! jupyter-resource-usage walks the tree with psutil on every request (PSS through
//! `smaps_rollup`, which stalls each child) and takes its limits from `MEM_LIMIT` and
//! `CPU_LIMIT`. Here the figures come from the latest snapshot, the memory limit is the
//! smallest cgroup limit on the path (else the host's memory), the CPU limit and `cpu_count`
//! are the effective CPUs, and `warn` compares like with like (see [`jupyter_metrics`]).
//! [`kernel_usage`] answers the kernel panel's request the same way, from the snapshot.
//! Nothing here reads a file: the module only derives JSON shapes from a [`Snapshot`] and the
//! last disk usage a `proctor_agent::disk::DiskWatch` read off the sampling thread.

use proctor_model::build_tree;
use serde::Serialize;

use proctor_agent::Snapshot;
use proctor_procfs::system::DiskUsage;

#[derive(Debug, Clone, Copy)]
pub struct JupyterConfig {
    /// Root of the tree (the Jupyter server's pid).
    pub pid: u32,
    /// Memory limit shown, in bytes (their `mem_limit`); `None`: the container's (the smallest
    /// cgroup limit on the path, else the host's memory).
    pub mem_limit_bytes: Option<u64>,
    /// CPU limit shown, in CPUs (their `cpu_limit`); `None`: the effective CPUs.
    pub cpu_limit: Option<f64>,
    /// Their `track_cpu_percent`: adds `cpu_percent`, `cpu_count` and `limits.cpu`.
    pub track_cpu_percent: bool,
    /// Their `track_disk_usage`: adds `disk_used`, `disk_total` and `limits.disk`.
    pub track_disk_usage: bool,
    /// Warn when free memory under the limit falls below this share of it (their default 0.1).
    pub mem_warning_threshold: f64,
    pub cpu_warning_threshold: f64,
    pub disk_warning_threshold: f64,
}

impl JupyterConfig {
    /// What `proctor serve` answers: container-true limits, CPU and disk tracked.
    pub fn new(pid: u32) -> Self {
        Self {
            pid,
            mem_limit_bytes: None,
            cpu_limit: None,
            track_cpu_percent: true,
            track_disk_usage: true,
            mem_warning_threshold: 0.1,
            cpu_warning_threshold: 0.1,
            disk_warning_threshold: 0.1,
        }
    }
}

/// Field order follows theirs: `rss`, `limits`, `pss`, `cpu_percent`, `cpu_count`, `disk_used`,
/// `disk_total`. Optional fields are left out exactly when theirs leaves them out.
#[derive(Debug, Serialize, PartialEq)]
pub struct JupyterMetrics {
    pub rss: u64,
    pub limits: Limits,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pss: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_used: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_total: Option<u64>,
    /// proctor's GPU keys (jupyter-resource-usage has none), after theirs and only where the
    /// host has a GPU, so a GPU-less host answers key for key as theirs does. The tree's
    /// busiest member's GPU share, in percent like `cpu_percent`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_percent: Option<f64>,
    /// GPU memory the tree holds, in bytes like `rss`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_memory: Option<u64>,
    /// The host's GPUs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<JupyterGpu>,
}

/// One GPU in the Jupyter document.
#[derive(Debug, Serialize, PartialEq)]
pub struct JupyterGpu {
    pub id: String,
    pub name: String,
    /// Busy percent; `null` until two readings exist.
    pub utilization: Option<f64>,
    /// Bytes.
    pub memory_used: Option<u64>,
    pub memory_total: Option<u64>,
    /// Watts.
    pub power: Option<f64>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Limits {
    pub memory: MemoryLimit,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuLimit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskLimit>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct MemoryLimit {
    pub rss: u64,
    pub pss: u64,
    /// Theirs leaves it out when the limit is 0 or the threshold is 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warn: Option<bool>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct CpuLimit {
    /// In CPUs, as their `cpu_limit` (1.5 = one and a half CPUs).
    pub cpu: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warn: Option<bool>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct DiskLimit {
    pub disk: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warn: Option<bool>,
}

/// `None` when the root pid is not in the snapshot (it exited).
///
/// How `warn` is decided, where theirs differs:
/// - memory: the tree's PSS when every member's is known and none is stale (else its RSS, which counts shared
///   pages once per process and so overstates) is within `mem_warning_threshold` of the limit;
/// - CPU: `cpu_percent` (percent of one CPU) is within the threshold of `100 × limit`. Theirs
///   subtracts a percent from a CPU count, which warns at about 1 % of one CPU for a 2-CPU
///   limit;
/// - disk: as theirs, free space under the threshold share of the total.
pub fn jupyter_metrics(s: &Snapshot, config: &JupyterConfig, disk: Option<DiskUsage>) -> Option<JupyterMetrics> {
    let tree = build_tree(&s.rows, config.pid)?;
    let rss: u64 = tree.total.rss_bytes;
    // It may count clones' readings standing in for members not read themselves yet (the
    // tree's `pss_estimated`): no key of theirs says so, and one of ours would break key for key
    // on any tree of like workers.
    let pss = tree.total.pss_complete();
    let cpu_percent = tree.total.cpu_percent.unwrap_or(0.0);
    let truth = &s.truth;
    let effective = config.cpu_limit.or(truth.effective_cpus).unwrap_or(1.0);
    let cpu_count = truth.effective_cpus_ceil.unwrap_or(1);
    let memory_limit = config.mem_limit_bytes.or(truth.memory_limit_bytes).unwrap_or(0);
    let used = pss.unwrap_or(rss);
    let mem_warn = (memory_limit > 0 && config.mem_warning_threshold != 0.0)
        .then_some((memory_limit as f64 - used as f64) < memory_limit as f64 * config.mem_warning_threshold);
    let cpu = (config.track_cpu_percent && effective != 0.0).then(|| {
        let capacity = effective * 100.0;
        CpuLimit {
            cpu: effective,
            warn: (config.cpu_warning_threshold != 0.0)
                .then_some((capacity - cpu_percent) < capacity * config.cpu_warning_threshold),
        }
    });
    let disk = disk.filter(|_| config.track_disk_usage);
    Some(JupyterMetrics {
        rss,
        limits: Limits {
            memory: MemoryLimit { rss: memory_limit, pss: memory_limit, warn: mem_warn },
            cpu,
            disk: disk.map(|d| DiskLimit {
                disk: d.total_bytes,
                warn: (config.disk_warning_threshold != 0.0).then(|| {
                    ((d.total_bytes - d.used_bytes.min(d.total_bytes)) as f64)
                        < d.total_bytes as f64 * config.disk_warning_threshold
                }),
            }),
        },
        pss,
        cpu_percent: config.track_cpu_percent.then_some(cpu_percent),
        cpu_count: config.track_cpu_percent.then_some(cpu_count),
        disk_used: disk.map(|d| d.used_bytes),
        disk_total: disk.map(|d| d.total_bytes),
        gpu_percent: (!s.host.gpus.is_empty())
            .then(|| tree.rows.iter().filter_map(|r| r.row.gpu.as_ref()?.busy_percent).fold(0.0, f64::max)),
        gpu_memory: (!s.host.gpus.is_empty())
            .then(|| tree.rows.iter().filter_map(|r| r.row.gpu.as_ref()?.memory_bytes).sum()),
        gpus: s
            .host
            .gpus
            .iter()
            .map(|g| JupyterGpu {
                id: g.id.clone(),
                name: g.name.clone(),
                utilization: g.busy_percent,
                memory_used: g.memory_used_bytes,
                memory_total: g.memory_total_bytes,
                power: g.power_watts,
            })
            .collect(),
    })
}

/// The `content` of ipykernel's `usage_reply`, which jupyter-resource-usage's kernel panel
/// shows (`/api/metrics/v1/kernel_usage/get_usage/<id>`), answered for the kernel's process
/// tree from the snapshot instead of by asking the kernel over its control channel.
/// Field order follows ipykernel 6/7's reply; `host_usage_flag` is added by the caller, as
/// jupyter-resource-usage adds it.
#[derive(Debug, Serialize, PartialEq)]
pub struct KernelUsage {
    pub hostname: String,
    pub pid: u32,
    /// Percent of one CPU, summed over the kernel's tree (psutil's `cpu_percent()` sum).
    pub kernel_cpu: f64,
    /// PSS of the tree when every member's is known, else its RSS (ipykernel sums PSS).
    pub kernel_memory: u64,
    /// Left out when unknown, as ipykernel leaves out psutil's first 0.0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_cpu_percent: Option<f64>,
    /// Effective CPUs rounded up (ipykernel reports the host's logical CPUs).
    pub cpu_count: u32,
    pub host_virtual_memory: HostVirtualMemory,
}

/// psutil's `virtual_memory()` on Linux, from `/proc/meminfo` as psutil derives it.
#[derive(Debug, Serialize, PartialEq)]
pub struct HostVirtualMemory {
    pub total: u64,
    pub available: u64,
    pub percent: f64,
    pub used: u64,
    pub free: u64,
    pub active: u64,
    pub inactive: u64,
    pub buffers: u64,
    pub cached: u64,
    pub shared: u64,
    pub slab: u64,
}

/// `None` when `pid` is not in the snapshot.
pub fn kernel_usage(s: &Snapshot, pid: u32, hostname: &str) -> Option<KernelUsage> {
    let tree = build_tree(&s.rows, pid)?;
    let kernel_memory = tree.total.pss_complete().unwrap_or(tree.total.rss_bytes);
    let m = s.sample.host.meminfo.unwrap_or_default();
    let total = m.total_bytes.unwrap_or(0);
    let free = m.free_bytes.unwrap_or(0);
    let available = m.available_bytes.unwrap_or(free);
    let buffers = m.buffers_bytes.unwrap_or(0);
    // psutil: cached = Cached + SReclaimable; used = total - free - buffers - cached.
    let cached = m.cached_bytes.unwrap_or(0) + m.sreclaimable_bytes.unwrap_or(0);
    let used = total.saturating_sub(free).saturating_sub(buffers).saturating_sub(cached);
    let percent =
        if total > 0 { ((total - available.min(total)) as f64 / total as f64 * 1000.0).round() / 10.0 } else { 0.0 };
    Some(KernelUsage {
        hostname: hostname.to_string(),
        pid,
        kernel_cpu: tree.total.cpu_percent.unwrap_or(0.0),
        kernel_memory,
        host_cpu_percent: s.host.cpu.map(|c| c.busy).filter(|&b| b != 0.0),
        cpu_count: s.truth.effective_cpus_ceil.unwrap_or(1),
        host_virtual_memory: HostVirtualMemory {
            total,
            available,
            percent,
            used,
            free,
            active: m.active_bytes.unwrap_or(0),
            inactive: m.inactive_bytes.unwrap_or(0),
            buffers,
            cached,
            shared: m.shmem_bytes.unwrap_or(0),
            slab: m.slab_bytes.unwrap_or(0),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DISK: Option<DiskUsage> = Some(DiskUsage { total_bytes: 1000, used_bytes: 950, available_bytes: 50 });

    /// A snapshot of this machine with processes, this test process among them.
    fn snapshot() -> Snapshot {
        let mut sampler = proctor_sampler::Sampler::new(proctor_sampler::SamplerConfig {
            pss_budget: 0.0,
            cmdline: false,
            ..proctor_sampler::SamplerConfig::default()
        });
        let sample = sampler.sample();
        Snapshot::derive(sample, None)
    }

    fn json(m: &JupyterMetrics) -> String {
        serde_json::to_string(m).expect("serializable")
    }

    /// The keys of a JSON text in the order they are written, at any depth (serde_json's
    /// `Value` would sort them).
    fn keys(text: &str) -> Vec<&str> {
        text.match_indices("\":")
            .filter_map(|(end, _)| text[..end].rfind('"').map(|start| &text[start + 1..end]))
            .collect()
    }

    #[test]
    fn with_jupyter_resource_usages_defaults_only_memory_is_reported() {
        let s = snapshot();
        let config = JupyterConfig {
            track_cpu_percent: false,
            track_disk_usage: false,
            ..JupyterConfig::new(std::process::id())
        };
        let m = jupyter_metrics(&s, &config, DISK).expect("our own pid is in the sample");
        let text = json(&m);
        let keys = keys(&text);
        let mut want = vec!["rss", "limits", "memory", "rss", "pss", "warn"];
        if m.pss.is_some() {
            want.push("pss");
        }
        assert_eq!(keys, want);
        // The container's limit, not 0.
        assert_eq!(Some(m.limits.memory.rss), s.truth.memory_limit_bytes);
    }

    #[test]
    fn tracking_cpu_and_disk_adds_their_keys_in_their_order() {
        let s = snapshot();
        let config = JupyterConfig {
            mem_limit_bytes: Some(8 << 30),
            cpu_limit: Some(1.5),
            ..JupyterConfig::new(std::process::id())
        };
        let m = jupyter_metrics(&s, &config, DISK).expect("our own pid is in the sample");
        let text = json(&m);
        let mut want =
            vec!["rss", "limits", "memory", "rss", "pss", "warn", "cpu", "cpu", "warn", "disk", "disk", "warn"];
        if m.pss.is_some() {
            want.push("pss");
        }
        want.extend(["cpu_percent", "cpu_count", "disk_used", "disk_total"]);
        assert_eq!(keys(&text), want);
        assert_eq!(m.limits.memory.rss, 8 << 30);
        assert_eq!(m.limits.cpu.as_ref().map(|c| c.cpu), Some(1.5));
        // 50 of 1000 free is under the 10 % threshold.
        assert_eq!(m.limits.disk.as_ref().and_then(|d| d.warn), Some(true));
    }

    /// A `pss` may count a clone's reading standing in for a member's own (the tree says how
    /// many), with the same keys as theirs.
    #[test]
    fn a_pss_may_count_clones_readings_with_their_keys() {
        let mut s = snapshot();
        let me = std::process::id();
        let config = JupyterConfig { track_cpu_percent: false, track_disk_usage: false, ..JupyterConfig::new(me) };
        let tree: Vec<u32> = build_tree(&s.rows, me).expect("own tree").rows.iter().map(|t| t.row.pid).collect();
        let rows: Vec<usize> = (0..s.rows.len()).filter(|&i| tree.contains(&s.rows[i].pid)).collect();
        let age = |from| proctor_model::MemoryAge {
            pss_bytes: Some(1 << 20),
            uss_bytes: Some(1 << 19),
            swap_pss_bytes: None,
            age_secs: 1.0,
            stale: false,
            estimated_from: from,
        };
        for &i in &rows {
            s.rows[i].pss = Some(age(None));
        }
        let own = jupyter_metrics(&s, &config, None).expect("own pid");
        assert_eq!(own.pss, Some(rows.len() as u64 * (1 << 20)));
        s.rows[rows[0]].pss = Some(age(Some(1)));
        let estimated = jupyter_metrics(&s, &config, None).expect("own pid");
        assert_eq!(estimated.pss, own.pss);
        assert_eq!(keys(&json(&estimated)), keys(&json(&own)));
        assert_eq!(build_tree(&s.rows, me).expect("own tree").total.pss_estimated, 1);
    }

    #[test]
    fn a_gpu_on_the_host_adds_proctors_gpu_keys_after_theirs() {
        use proctor_model::gpu::{GpuClient, GpuSample};
        use proctor_procfs::drm::DrmEngine;
        let mut sampler = proctor_sampler::Sampler::new(proctor_sampler::SamplerConfig {
            pss_budget: 0.0,
            cmdline: false,
            gpu: false,
            ..proctor_sampler::SamplerConfig::default()
        });
        let me = std::process::id();
        let start = |s: &proctor_model::Sample| s.process(me).expect("our own row").start_ticks;
        let client = |start_ticks: u64, busy_ns: u64, at: u64| GpuClient {
            pid: me,
            start_ticks,
            driver: "amdgpu".into(),
            pdev: Some("0000:03:00.0".into()),
            client_id: Some(1),
            engines: vec![DrmEngine {
                name: "gfx".into(),
                busy_ns: Some(busy_ns),
                capacity: 1,
                ..DrmEngine::default()
            }],
            held_bytes: Some(64 << 20),
            read_mono_ns: at,
        };
        let mut before = sampler.sample();
        before.gpu = Some(std::sync::Arc::new(GpuSample {
            clients: vec![client(start(&before), 0, 1_000_000_000)].into(),
            ..GpuSample::default()
        }));
        let mut now = sampler.sample();
        now.gpu = Some(std::sync::Arc::new(GpuSample {
            clients: vec![client(start(&now), 250_000_000, 2_000_000_000)].into(),
            ..GpuSample::default()
        }));
        let s = Snapshot::derive(now, Some(&before));
        let m = jupyter_metrics(&s, &JupyterConfig::new(me), None).expect("our own pid is in the sample");
        assert_eq!((m.gpu_percent, m.gpu_memory), (Some(25.0), Some(64 << 20)));
        let text = json(&m);
        let k = keys(&text);
        let at = k.iter().position(|k| *k == "gpu_percent").expect("gpu_percent");
        assert_eq!(&k[at..at + 3], ["gpu_percent", "gpu_memory", "gpus"], "{text}");
        assert!(k[..at].iter().all(|k| !k.starts_with("gpu")), "their keys come first: {text}");
        assert_eq!(m.gpus[0].utilization, Some(25.0));
        // Without a GPU on the host, none of these keys (the other tests hold theirs exactly).
        let plain = jupyter_metrics(&snapshot(), &JupyterConfig::new(me), None).expect("our own pid");
        assert!(!json(&plain).contains("gpu"));
    }

    #[test]
    fn a_zero_threshold_leaves_warn_out() {
        let s = snapshot();
        let config = JupyterConfig {
            mem_warning_threshold: 0.0,
            cpu_warning_threshold: 0.0,
            disk_warning_threshold: 0.0,
            ..JupyterConfig::new(std::process::id())
        };
        let text = json(&jupyter_metrics(&s, &config, DISK).expect("our own pid is in the sample"));
        assert!(!text.contains("warn"), "{text}");
    }

    #[test]
    fn a_root_that_is_not_in_the_sample_has_no_metrics_and_no_kernel_usage() {
        let s = snapshot();
        assert!(jupyter_metrics(&s, &JupyterConfig::new(u32::MAX), DISK).is_none());
        assert!(kernel_usage(&s, u32::MAX, "h").is_none());
    }

    #[test]
    fn kernel_usage_has_ipykernels_keys_and_the_hosts_memory() {
        let s = snapshot();
        let k = kernel_usage(&s, std::process::id(), "host-a").expect("our own pid is in the sample");
        let text = serde_json::to_string(&k).expect("serializable");
        let keys: Vec<&str> = keys(&text).into_iter().filter(|k| *k != "host_cpu_percent").collect();
        assert_eq!(
            keys,
            [
                "hostname",
                "pid",
                "kernel_cpu",
                "kernel_memory",
                "cpu_count",
                "host_virtual_memory",
                "total",
                "available",
                "percent",
                "used",
                "free",
                "active",
                "inactive",
                "buffers",
                "cached",
                "shared",
                "slab",
            ]
        );
        assert_eq!(k.hostname, "host-a");
        assert!(k.kernel_memory > 0);
        assert_eq!(Some(k.host_virtual_memory.total), s.sample.host.meminfo.and_then(|m| m.total_bytes));
        assert!(k.host_virtual_memory.used <= k.host_virtual_memory.total);
    }
}
