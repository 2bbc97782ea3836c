//! Container truth: how many CPUs and how much memory a process really has.
//!
//! `os.cpu_count()` and `nproc --all` report the host's CPUs. What a process can use is the
//! smallest of: the CPUs its affinity mask allows (which the kernel already intersects with its
//! cpuset), and the CPU bandwidth quota (quota/period) of its own cgroup and of every ancestor.
//! Memory is capped by the smallest limit on the cgroup path, else by the host's total.

use serde::Serialize;

use crate::Sample;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContainerTruth {
    /// What the host has online (what `os.cpu_count()` reports).
    pub host_online_cpus: Option<usize>,
    pub affinity_cpus: Option<usize>,
    pub cpuset_cpus: Option<usize>,
    /// The tightest quota over the cgroup and its ancestors, in CPUs.
    pub quota_cpus: Option<f64>,
    /// Which cgroup level set that quota.
    pub quota_path: Option<String>,
    /// min(affinity, quota); the host's online CPUs when neither is known.
    pub effective_cpus: Option<f64>,
    /// `effective_cpus` rounded up: the count to size thread pools by.
    pub effective_cpus_ceil: Option<u32>,
    pub memory_limit_bytes: Option<u64>,
    /// `cgroup:<path>` when a cgroup limit applies, `host` when it is the host's memory.
    pub memory_limit_source: Option<String>,
    pub memory_current_bytes: Option<u64>,
    pub cgroup_version: Option<&'static str>,
    pub cgroup_path: Option<String>,
    /// Set when effective and host CPU counts differ: the 96-vs-64 case.
    pub warnings: Vec<String>,
}

pub fn container_truth(sample: &Sample) -> ContainerTruth {
    let host_online_cpus = sample.host.online_cpus.as_ref().map(Vec::len).filter(|&n| n > 0);
    let host_memory = sample.host.meminfo.and_then(|m| m.total_bytes);
    let c = sample.container.as_ref();
    let affinity_cpus = c.and_then(|c| c.affinity.as_ref()).map(|a| a.len()).filter(|&n| n > 0);
    let limits = c.map(|c| c.limits.as_ref());
    let cpuset_cpus = limits.and_then(|l| l.cpuset_cpus()).map(<[u32]>::len);
    let quota = limits.and_then(|l| {
        l.levels
            .iter()
            .filter_map(|level| level.cpu_quota.map(|q| (q.cpus(), level.path.clone())))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    });
    let quota_cpus = quota.as_ref().map(|q| q.0);
    // Affinity already reflects the cpuset; without it (another user's process), the cpuset
    // is the next best bound, then the host.
    let cpu_bound = affinity_cpus.or(cpuset_cpus).or(host_online_cpus).map(|n| n as f64);
    let effective_cpus = match (cpu_bound, quota_cpus) {
        (Some(a), Some(q)) => Some(a.min(q)),
        (a, q) => a.or(q),
    };
    let cgroup_limit = limits.and_then(|l| {
        l.levels
            .iter()
            .filter_map(|level| level.memory_limit_bytes.map(|b| (b, level.path.clone())))
            .min_by_key(|(b, _)| *b)
    });
    let (memory_limit_bytes, memory_limit_source) = match (cgroup_limit, host_memory) {
        (Some((limit, path)), Some(host)) if limit < host => (Some(limit), Some(format!("cgroup:{path}"))),
        (Some((limit, path)), None) => (Some(limit), Some(format!("cgroup:{path}"))),
        (_, Some(host)) => (Some(host), Some("host".to_string())),
        (None, None) => (None, None),
    };
    let effective_cpus_ceil = effective_cpus.map(|e| e.ceil().max(1.0) as u32);
    let mut warnings = Vec::new();
    if let (Some(host), Some(eff)) = (host_online_cpus, effective_cpus_ceil) {
        if eff as usize != host {
            warnings.push(format!(
                "this process can use {} CPUs but the host has {host} online: tools that size \
                 pools by os.cpu_count() or nproc --all will oversubscribe",
                effective_cpus.map_or(String::new(), format_cpus)
            ));
        }
    }
    ContainerTruth {
        host_online_cpus,
        affinity_cpus,
        cpuset_cpus,
        quota_cpus,
        quota_path: quota.map(|q| q.1),
        effective_cpus,
        effective_cpus_ceil,
        memory_limit_bytes,
        memory_limit_source,
        memory_current_bytes: c.and_then(|c| c.counters.memory_current_bytes),
        cgroup_version: c.map(|c| match c.paths.version {
            proctor_procfs::cgroup::CgroupVersion::V1 => "v1",
            proctor_procfs::cgroup::CgroupVersion::V2 => "v2",
            proctor_procfs::cgroup::CgroupVersion::Hybrid => "hybrid",
        }),
        cgroup_path: c.and_then(|c| c.paths.display_path().map(str::to_string)),
        warnings,
    }
}

/// `2`, `1.5`: CPU counts without noise digits.
pub fn format_cpus(cpus: f64) -> String {
    if (cpus - cpus.round()).abs() < 1e-9 {
        format!("{}", cpus.round() as i64)
    } else {
        format!("{cpus:.2}")
    }
}
