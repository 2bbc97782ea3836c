//! Frames and processes for tests, built through the vocabulary's JSON shapes.

use proctor_vocab::process::ProcessOut;
use proctor_vocab::snapshot::{ContainerOut, HostOut};
use std::sync::Arc;

use crate::frame::{Frame, Origin, SharedFrame};

pub(crate) fn proc_out(pid: u32, ppid: u32, name: &str, cpu: f64, rss_mib: u64) -> ProcessOut {
    serde_json::from_value(serde_json::json!({
        "pid": pid, "ppid": ppid, "name": name, "cmdline": [name, "--flag"], "state": "S", "uid": 1000,
        "cpu_percent": cpu, "cpu_percent_of_effective": null, "cpu_seconds_total": cpu / 10.0,
        "start_time_unix_secs": 1000.0 + pid as f64, "rss_bytes": rss_mib << 20, "anon_bytes": null,
        "file_bytes": null, "shmem_bytes": null, "swap_bytes": null, "vsize_bytes": rss_mib << 21,
        "threads": 1, "major_faults_per_sec": null, "read_bytes_per_sec": null, "write_bytes_per_sec": null,
        "pss_bytes": null, "uss_bytes": null, "swap_pss_bytes": null, "pss_age_secs": null,
        "cgroup": format!("/app{}", pid % 2)
    }))
    .expect("a ProcessOut")
}

pub(crate) fn frame_of(processes: Vec<ProcessOut>) -> Frame {
    let host: HostOut = serde_json::from_value(serde_json::json!({
        "online_cpus": 2, "cpu": null, "per_cpu": [], "memory": {"total_bytes": null, "available_bytes": null,
        "used_bytes": null, "swap_total_bytes": null, "swap_used_bytes": null}, "load": null,
        "pressure_cpu": null, "pressure_memory": null, "pressure_io": null, "context_switches_per_sec": null,
        "forks_per_sec": null, "page_faults_per_sec": null, "major_faults_per_sec": null,
        "swap_in_pages_per_sec": null, "swap_out_pages_per_sec": null, "disks": [], "nets": [],
        "uptime_secs": null, "boot_time_unix_secs": null
    }))
    .expect("a HostOut");
    let container: ContainerOut = serde_json::from_value(serde_json::json!({
        "pid": null, "cgroup_version": null, "cgroup_path": null, "host_online_cpus": null, "affinity_cpus": null,
        "cpuset_cpus": null, "quota_cpus": null, "quota_path": null, "effective_cpus": null,
        "effective_cpus_ceil": null, "memory_limit_bytes": null, "memory_limit_source": null,
        "memory_current_bytes": null, "memory_peak_bytes": null, "cpu_used_cpus": null,
        "cpu_throttled_periods_total": null, "cpu_throttled_seconds_total": null, "pids_current": null,
        "pressure_cpu": null, "pressure_memory": null, "pressure_io": null, "levels": [], "limits_age_secs": null,
        "warnings": [], "error": null
    }))
    .expect("a ContainerOut");
    let mut processes = processes;
    processes.sort_by_key(|p| p.pid);
    Frame {
        origin: Origin::Stored,
        seq: 1,
        time_unix_ms: 0,
        interval_secs: Some(1.0),
        host,
        container,
        processes,
        agent: None,
        alerts: None,
        exited: Vec::new(),
        events: false,
        net_unavailable: None,
    }
}

pub(crate) fn frame_at(time_unix_ms: u64) -> SharedFrame {
    let mut f = frame_of(vec![proc_out(1, 0, "init", 0.0, 1)]);
    f.time_unix_ms = time_unix_ms;
    Arc::new(f)
}
