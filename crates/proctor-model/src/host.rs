//! Host view: CPU percentages, memory, load, pressure, disk and network rates.

use proctor_procfs::host::{CpuTicks, Pressure};
use serde::Serialize;

use crate::gpu::{gpu_view, power_view, GpuDeviceView, PowerRate};
use crate::series::is_interesting_disk;
use crate::{delta, rate, Sample};

/// Shares of CPU time over an interval, in percent of the CPUs counted (0–100).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuPercent {
    pub user: f64,
    pub nice: f64,
    pub system: f64,
    pub idle: f64,
    pub iowait: f64,
    pub irq: f64,
    pub softirq: f64,
    pub steal: f64,
    /// Everything but idle and iowait.
    pub busy: f64,
}

impl CpuPercent {
    /// `None` when no tick passed or a counter went backwards (a CPU went offline and back).
    pub fn between(later: &CpuTicks, earlier: &CpuTicks) -> Option<Self> {
        let total = delta(later.total(), earlier.total())? as f64;
        if total <= 0.0 {
            return None;
        }
        let pct = |l: u64, e: u64| delta(l, e).map(|d| 100.0 * d as f64 / total);
        Some(Self {
            user: pct(later.user, earlier.user)?,
            nice: pct(later.nice, earlier.nice)?,
            system: pct(later.system, earlier.system)?,
            idle: pct(later.idle, earlier.idle)?,
            iowait: pct(later.iowait, earlier.iowait)?,
            irq: pct(later.irq, earlier.irq)?,
            softirq: pct(later.softirq, earlier.softirq)?,
            steal: pct(later.steal, earlier.steal)?,
            busy: pct(later.busy(), earlier.busy())?,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiskRate {
    pub name: String,
    pub read_bytes_per_sec: f64,
    pub write_bytes_per_sec: f64,
    pub reads_per_sec: f64,
    pub writes_per_sec: f64,
    /// Share of the interval the device had I/O in flight, in percent.
    pub busy_percent: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetRate {
    pub name: String,
    pub rx_bytes_per_sec: f64,
    pub tx_bytes_per_sec: f64,
    pub rx_packets_per_sec: f64,
    pub tx_packets_per_sec: f64,
}

/// The host's IP traffic as the network programs counted it (`--net`), over one interval: every
/// device's, `lo` included, and the part no process's socket owned (kernel-made replies,
/// forwarded packets, sockets already closed), so the process rows and the unowned part add up
/// to the devices' own counts (less their link headers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct HostNetRates {
    pub rx_bytes_per_sec: f64,
    pub tx_bytes_per_sec: f64,
    pub unowned_rx_bytes_per_sec: f64,
    pub unowned_tx_bytes_per_sec: f64,
    /// Processes the kernel's table had no room for since the programs were loaded.
    pub table_full: u64,
}

/// What a person reads about the host at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostView {
    pub interval_secs: Option<f64>,
    pub online_cpus: Option<usize>,
    pub cpu: Option<CpuPercent>,
    /// (CPU number, its shares), where both samples have the CPU.
    pub per_cpu: Vec<(u32, CpuPercent)>,
    pub memory_total_bytes: Option<u64>,
    pub memory_available_bytes: Option<u64>,
    /// total − available: what the kernel could not give back without swapping.
    pub memory_used_bytes: Option<u64>,
    pub swap_used_bytes: Option<u64>,
    pub load: Option<[f64; 3]>,
    pub context_switches_per_sec: Option<f64>,
    pub forks_per_sec: Option<f64>,
    pub page_faults_per_sec: Option<f64>,
    pub major_faults_per_sec: Option<f64>,
    pub swap_in_pages_per_sec: Option<f64>,
    pub swap_out_pages_per_sec: Option<f64>,
    pub pressure_cpu: Option<Pressure>,
    pub pressure_memory: Option<Pressure>,
    pub pressure_io: Option<Pressure>,
    pub disks: Vec<DiskRate>,
    pub nets: Vec<NetRate>,
    pub uptime_secs: Option<f64>,
    pub boot_time_unix_secs: Option<u64>,
    /// Watts per energy or power domain (RAPL, hwmon, NVML boards).
    pub power: Vec<PowerRate>,
    /// The sum of the domains that make the host's total (see `proctor_procfs::power`).
    pub power_host_watts: Option<f64>,
    /// GPUs: NVML devices, and DRM devices with their clients' use summed.
    pub gpus: Vec<GpuDeviceView>,
    /// With `--net`, from the second sample on.
    pub process_net: Option<HostNetRates>,
    /// The host series of the catalog, in [`crate::series::HOST_SERIES`]' order: what every
    /// surface shows under those names.
    #[serde(skip)]
    pub series: [Option<f64>; crate::series::N],
}

/// Derives the host view from `cur` and, for rates, `prev`.
pub fn host_view(cur: &Sample, prev: Option<&Sample>) -> HostView {
    let h = &cur.host;
    let secs = prev.and_then(|p| cur.mono_ns.checked_sub(p.mono_ns)).map(|ns| ns as f64 / 1e9).filter(|s| *s > 0.0);
    let ph = prev.map(|p| &p.host);
    let mut view = HostView {
        interval_secs: secs,
        online_cpus: h.online_cpus.as_ref().map(Vec::len),
        memory_total_bytes: h.meminfo.and_then(|m| m.total_bytes),
        memory_available_bytes: h.meminfo.and_then(|m| m.available_bytes),
        load: h.loadavg.map(|l| [l.one, l.five, l.fifteen]),
        pressure_cpu: h.pressure_cpu,
        pressure_memory: h.pressure_memory,
        pressure_io: h.pressure_io,
        uptime_secs: h.uptime.map(|u| u.up_secs),
        boot_time_unix_secs: h.stat.as_ref().and_then(|s| s.boot_time_secs),
        series: crate::series::host_values(cur, prev),
        ..HostView::default()
    };
    (view.power, view.power_host_watts) = power_view(cur, prev);
    view.gpus = gpu_view(cur, prev).1;
    if let Some(m) = h.meminfo {
        view.memory_used_bytes = m.total_bytes.zip(m.available_bytes).and_then(|(t, a)| t.checked_sub(a));
        view.swap_used_bytes = m.swap_total_bytes.zip(m.swap_free_bytes).and_then(|(t, f)| t.checked_sub(f));
    }
    let (Some(ph), Some(secs)) = (ph, secs) else { return view };
    if let (Some(s), Some(ps)) = (h.stat.as_ref(), ph.stat.as_ref()) {
        view.cpu = CpuPercent::between(&s.total, &ps.total);
        for (i, id) in s.cpu_ids.iter().enumerate() {
            if let Some(j) = ps.cpu_ids.iter().position(|p| p == id) {
                if let Some(pct) = CpuPercent::between(&s.per_cpu[i], &ps.per_cpu[j]) {
                    view.per_cpu.push((*id, pct));
                }
            }
        }
        let r = |l: Option<u64>, e: Option<u64>| rate(l?, e?, secs);
        view.context_switches_per_sec = r(s.context_switches, ps.context_switches);
        view.forks_per_sec = r(s.forks, ps.forks);
    }
    if let (Some(v), Some(pv)) = (h.vmstat, ph.vmstat) {
        let r = |l: Option<u64>, e: Option<u64>| rate(l?, e?, secs);
        view.page_faults_per_sec = r(v.pgfault, pv.pgfault);
        view.major_faults_per_sec = r(v.pgmajfault, pv.pgmajfault);
        view.swap_in_pages_per_sec = r(v.pswpin_pages, pv.pswpin_pages);
        view.swap_out_pages_per_sec = r(v.pswpout_pages, pv.pswpout_pages);
    }
    for d in h.disks.iter().filter(|d| is_interesting_disk(&d.name)) {
        let Some(p) = ph.disks.iter().find(|p| p.name == d.name) else { continue };
        // diskstats counts 512-byte sectors whatever the device's block size.
        let rates = (|| {
            Some(DiskRate {
                name: d.name.to_string(),
                read_bytes_per_sec: rate(d.read_sectors, p.read_sectors, secs)? * 512.0,
                write_bytes_per_sec: rate(d.write_sectors, p.write_sectors, secs)? * 512.0,
                reads_per_sec: rate(d.reads, p.reads, secs)?,
                writes_per_sec: rate(d.writes, p.writes, secs)?,
                busy_percent: (rate(d.io_ms, p.io_ms, secs)? / 10.0).min(100.0),
            })
        })();
        view.disks.extend(rates);
    }
    if let (Some(n), Some(p)) = (h.net, ph.net) {
        view.process_net = (|| {
            Some(HostNetRates {
                rx_bytes_per_sec: rate(n.rx_bytes, p.rx_bytes, secs)?,
                tx_bytes_per_sec: rate(n.tx_bytes, p.tx_bytes, secs)?,
                unowned_rx_bytes_per_sec: rate(n.rx_unowned_bytes, p.rx_unowned_bytes, secs)?,
                unowned_tx_bytes_per_sec: rate(n.tx_unowned_bytes, p.tx_unowned_bytes, secs)?,
                table_full: n.table_full,
            })
        })();
    }
    for n in &h.nets {
        let Some(p) = ph.nets.iter().find(|p| p.name == n.name) else { continue };
        let rates = (|| {
            Some(NetRate {
                name: n.name.to_string(),
                rx_bytes_per_sec: rate(n.rx_bytes, p.rx_bytes, secs)?,
                tx_bytes_per_sec: rate(n.tx_bytes, p.tx_bytes, secs)?,
                rx_packets_per_sec: rate(n.rx_packets, p.rx_packets, secs)?,
                tx_packets_per_sec: rate(n.tx_packets, p.tx_packets, secs)?,
            })
        })();
        view.nets.extend(rates);
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticks(user: u64, idle: u64) -> CpuTicks {
        CpuTicks { user, idle, ..CpuTicks::default() }
    }

    #[test]
    fn cpu_percent_between_samples() {
        let pct = CpuPercent::between(&ticks(150, 250), &ticks(100, 100)).expect("ticks passed");
        assert!((pct.user - 25.0).abs() < 1e-9);
        assert!((pct.busy - 25.0).abs() < 1e-9);
        assert!((pct.idle - 75.0).abs() < 1e-9);
    }

    #[test]
    fn counter_going_backwards_is_none_not_negative() {
        assert_eq!(CpuPercent::between(&ticks(50, 100), &ticks(100, 100)), None);
        assert_eq!(CpuPercent::between(&ticks(100, 100), &ticks(100, 100)), None);
    }
}
