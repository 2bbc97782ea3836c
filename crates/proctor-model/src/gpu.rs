//! GPUs and energy: what the sampler's GPU readers and power counters recorded, and the rates
//! derived from two samples (engine busy %, watts per domain).
//!
//! DRM clients come from `/proc/PID/fdinfo` (any driver that prints `drm-usage-stats`), read by
//! the sampler's DRM worker; NVIDIA devices and their processes from NVML, read on its own
//! thread. Both arrive with the monotonic time of their own read: a rate spans two reads of
//! the same client, not two samples.

use std::collections::BTreeMap;
use std::sync::Arc;

use proctor_procfs::drm::DrmEngine;
use proctor_procfs::power::{energy_delta_uj, Unit};
use serde::{Deserialize, Serialize};

use crate::Sample;

/// One energy or power counter as read in one cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerReading {
    /// `rapl:package-0`, `hwmon:amdgpu/PPT`, `nvml:0`.
    pub domain: Arc<str>,
    pub unit: Unit,
    /// Microjoules (cumulative) or microwatts, as `unit` says.
    pub value: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_energy_range_uj: Option<u64>,
    pub in_host_total: bool,
}

/// One DRM client (one open GPU file, however many fds and processes share it), credited to
/// the lowest pid that holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuClient {
    pub pid: u32,
    pub start_ticks: u64,
    pub driver: Arc<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdev: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<u64>,
    pub engines: Vec<DrmEngine>,
    /// Memory held over all regions (resident, else total).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_bytes: Option<u64>,
    /// Monotonic time of the fdinfo read, on the sampler's clock.
    pub read_mono_ns: u64,
}

impl GpuClient {
    /// Same client in two readings: same process (pid and start) and same device and id.
    fn same(&self, other: &GpuClient) -> bool {
        self.pid == other.pid
            && self.start_ticks == other.start_ticks
            && self.pdev == other.pdev
            && self.client_id == other.client_id
            && self.driver == other.driver
    }
}

/// One NVIDIA device as NVML reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlDevice {
    pub index: u32,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    /// Percent of the last sample period a kernel ran (`utilization.gpu`).
    pub utilization_percent: Option<u32>,
    pub memory_utilization_percent: Option<u32>,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub power_milliwatts: Option<u32>,
    /// Energy since the driver loaded (Volta and later).
    pub energy_millijoules: Option<u64>,
    pub temperature_celsius: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
}

/// One process on an NVIDIA device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlProcess {
    pub pid: u32,
    pub device: u32,
    pub used_memory_bytes: Option<u64>,
    /// From NVML's process utilization samples, where the driver offers them.
    pub sm_percent: Option<u32>,
    pub memory_percent: Option<u32>,
}

/// The GPU side of one sample.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuSample {
    /// Sorted by pid. Shared with the DRM worker's round that read them: a sample copies the
    /// pointer, not the clients.
    #[serde(default, skip_serializing_if = "no_clients")]
    pub clients: Arc<Vec<GpuClient>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvml_devices: Vec<NvmlDevice>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvml_processes: Vec<NvmlProcess>,
}

fn no_clients(clients: &Arc<Vec<GpuClient>>) -> bool {
    clients.is_empty()
}

/// An engine's busy share over the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineBusy {
    pub name: String,
    pub busy_percent: f64,
}

/// What one process used of the GPUs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcessGpu {
    /// The busiest engine's busy percent (DRM), or NVML's SM share, whichever is higher.
    pub busy_percent: Option<f64>,
    /// DRM memory held plus NVML used memory.
    pub memory_bytes: Option<u64>,
    /// Per engine (DRM), summed over the process's clients.
    pub engines: Vec<EngineBusy>,
}

/// One GPU: an NVML device, or a DRM device (`drm-pdev`, or the driver where there is none)
/// with its clients' use summed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GpuDeviceView {
    /// `nvml:0`, or `drm:0000:03:00.0`, or `drm:msm`.
    pub id: String,
    /// NVML's product name, or the DRM driver.
    pub name: String,
    pub busy_percent: Option<f64>,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub power_watts: Option<f64>,
    pub temperature_celsius: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    /// DRM clients (each counted once) or NVML processes on the device.
    pub clients: usize,
    pub engines: Vec<EngineBusy>,
}

/// One power domain's use over the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerRate {
    pub domain: Arc<str>,
    /// Energy over the interval divided by its length, or the sensor's own reading.
    pub watts: Option<f64>,
    pub in_host_total: bool,
}

/// Busy percent of one engine between two readings of one client: nanoseconds busy over
/// nanoseconds elapsed, or (xe) busy cycles over the GPU's elapsed cycles; divided by the
/// engines behind the counter. `None` when a counter went backwards or no time passed.
pub fn engine_busy_percent(later: &DrmEngine, earlier: &DrmEngine, elapsed_ns: u64) -> Option<f64> {
    let capacity = f64::from(later.capacity.max(1));
    let share = match (later.busy_ns, earlier.busy_ns) {
        (Some(l), Some(e)) if elapsed_ns > 0 => l.checked_sub(e)? as f64 / elapsed_ns as f64,
        _ => {
            let busy = later.cycles?.checked_sub(earlier.cycles?)?;
            let total = later.total_cycles?.checked_sub(earlier.total_cycles?)?;
            if total == 0 {
                return None;
            }
            busy as f64 / total as f64
        }
    };
    Some((100.0 * share / capacity).min(100.0))
}

fn add_engine(engines: &mut Vec<EngineBusy>, name: &str, percent: f64) {
    match engines.iter_mut().find(|e| e.name == name) {
        Some(e) => e.busy_percent = (e.busy_percent + percent).min(100.0),
        None => engines.push(EngineBusy { name: name.to_string(), busy_percent: percent }),
    }
}

fn add(total: &mut Option<u64>, value: Option<u64>) {
    if let Some(v) = value {
        *total = Some(total.unwrap_or(0).saturating_add(v));
    }
}

/// Per-process GPU use and per-device views from `cur` and, for rates, `prev`.
pub fn gpu_view(cur: &Sample, prev: Option<&Sample>) -> (BTreeMap<u32, ProcessGpu>, Vec<GpuDeviceView>) {
    let mut by_pid: BTreeMap<u32, ProcessGpu> = BTreeMap::new();
    let mut devices: Vec<GpuDeviceView> = Vec::new();
    let Some(gpu) = cur.gpu.as_deref() else { return (by_pid, devices) };
    let before = prev.and_then(|p| p.gpu.as_deref());
    for c in gpu.clients.iter() {
        let id = match &c.pdev {
            Some(pdev) => format!("drm:{pdev}"),
            None => format!("drm:{}", c.driver),
        };
        let device = match devices.iter().position(|d| d.id == id) {
            Some(i) => &mut devices[i],
            None => {
                devices.push(GpuDeviceView { id, name: c.driver.to_string(), ..GpuDeviceView::default() });
                devices.last_mut().expect("just pushed")
            }
        };
        device.clients += 1;
        add(&mut device.memory_used_bytes, c.held_bytes);
        let process = by_pid.entry(c.pid).or_default();
        add(&mut process.memory_bytes, c.held_bytes);
        let Some(earlier) = before.and_then(|b| b.clients.iter().find(|e| e.same(c))) else { continue };
        let Some(elapsed) = c.read_mono_ns.checked_sub(earlier.read_mono_ns).filter(|e| *e > 0) else { continue };
        for engine in &c.engines {
            let Some(old) = earlier.engines.iter().find(|e| e.name == engine.name) else { continue };
            let Some(percent) = engine_busy_percent(engine, old, elapsed) else { continue };
            add_engine(&mut process.engines, &engine.name, percent);
            add_engine(&mut device.engines, &engine.name, percent);
        }
    }
    for d in devices.iter_mut() {
        d.busy_percent = d.engines.iter().map(|e| e.busy_percent).reduce(f64::max);
    }
    for p in by_pid.values_mut() {
        p.busy_percent = p.engines.iter().map(|e| e.busy_percent).reduce(f64::max);
    }
    for d in &gpu.nvml_devices {
        let clients = gpu.nvml_processes.iter().filter(|p| p.device == d.index).count();
        devices.push(GpuDeviceView {
            id: format!("nvml:{}", d.index),
            name: d.name.clone(),
            busy_percent: d.utilization_percent.map(f64::from),
            memory_used_bytes: d.memory_used_bytes,
            memory_total_bytes: d.memory_total_bytes,
            power_watts: d.power_milliwatts.map(|mw| f64::from(mw) / 1000.0),
            temperature_celsius: d.temperature_celsius,
            sm_clock_mhz: d.sm_clock_mhz,
            memory_clock_mhz: d.memory_clock_mhz,
            clients,
            engines: Vec::new(),
        });
    }
    for p in &gpu.nvml_processes {
        let process = by_pid.entry(p.pid).or_default();
        add(&mut process.memory_bytes, p.used_memory_bytes);
        if let Some(sm) = p.sm_percent {
            let sm = f64::from(sm);
            process.busy_percent = Some(process.busy_percent.map_or(sm, |b| b.max(sm)));
        }
    }
    (by_pid, devices)
}

/// Watts per power domain over the interval between `prev` and `cur`, and the host's total
/// (the domains marked `in_host_total`; `None` unless every one of them has a figure).
pub fn power_view(cur: &Sample, prev: Option<&Sample>) -> (Vec<PowerRate>, Option<f64>) {
    let secs = prev.and_then(|p| cur.mono_ns.checked_sub(p.mono_ns)).map(|ns| ns as f64 / 1e9).filter(|s| *s > 0.0);
    let mut rates = Vec::with_capacity(cur.host.power.len());
    let mut total: Option<f64> = None;
    let mut total_complete = true;
    for r in &cur.host.power {
        let watts = match r.unit {
            Unit::PowerMicrowatts => Some(r.value as f64 / 1e6),
            Unit::EnergyMicrojoules => (|| {
                let earlier = prev?.host.power.iter().find(|p| p.domain == r.domain && p.unit == r.unit)?;
                let uj = energy_delta_uj(earlier.value, r.value, r.max_energy_range_uj)?;
                Some(uj as f64 / 1e6 / secs?)
            })(),
        };
        if r.in_host_total {
            match watts {
                Some(w) => total = Some(total.unwrap_or(0.0) + w),
                None => total_complete = false,
            }
        }
        rates.push(PowerRate { domain: Arc::clone(&r.domain), watts, in_host_total: r.in_host_total });
    }
    (rates, total.filter(|_| total_complete))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostSample;

    fn sample(mono_ns: u64, power: Vec<PowerReading>, gpu: Option<GpuSample>) -> Sample {
        Sample {
            mono_ns,
            clock_ticks_per_sec: 100,
            page_size: 4096,
            host: HostSample { power, ..HostSample::default() },
            gpu: gpu.map(Arc::new),
            ..Sample::default()
        }
    }

    fn rapl(domain: &str, uj: u64, total: bool) -> PowerReading {
        PowerReading {
            domain: domain.into(),
            unit: Unit::EnergyMicrojoules,
            value: uj,
            max_energy_range_uj: Some(262_143_328_850),
            in_host_total: total,
        }
    }

    fn engine(name: &str, ns: u64, capacity: u32) -> DrmEngine {
        DrmEngine { name: name.into(), busy_ns: Some(ns), capacity, ..DrmEngine::default() }
    }

    fn client(pid: u32, id: u64, engines: Vec<DrmEngine>, held: u64, at: u64) -> GpuClient {
        GpuClient {
            pid,
            start_ticks: 7,
            driver: "amdgpu".into(),
            pdev: Some("0000:03:00.0".into()),
            client_id: Some(id),
            engines,
            held_bytes: Some(held),
            read_mono_ns: at,
        }
    }

    #[test]
    fn watts_from_energy_with_a_wrap_and_from_power_sensors() {
        let before = sample(
            1_000_000_000,
            vec![rapl("rapl:package-0", 262_143_328_850 - 10_000_000, true), rapl("rapl:package-0/dram", 0, true)],
            None,
        );
        let mut later = sample(
            3_000_000_000,
            vec![rapl("rapl:package-0", 29_999_999, true), rapl("rapl:package-0/dram", 4_000_000, true)],
            None,
        );
        later.host.power.push(PowerReading {
            domain: "hwmon:amdgpu/power1".into(),
            unit: Unit::PowerMicrowatts,
            value: 35_000_000,
            max_energy_range_uj: None,
            in_host_total: false,
        });
        let (rates, total) = power_view(&later, Some(&before));
        let watts: Vec<_> = rates.iter().map(|r| (r.domain.as_ref(), r.watts)).collect();
        // 10 J up to the wrap, 1 µJ for the wrap itself, 29.999999 J after: 40 J over 2 s.
        assert_eq!(
            watts,
            [("rapl:package-0", Some(20.0)), ("rapl:package-0/dram", Some(2.0)), ("hwmon:amdgpu/power1", Some(35.0))]
        );
        assert_eq!(total, Some(22.0));
        // Without a previous sample an energy counter has no figure, and neither has the total.
        let (rates, total) = power_view(&later, None);
        assert_eq!(rates[0].watts, None);
        assert_eq!(total, None);
    }

    #[test]
    fn engine_rates_dedupe_and_capacity() {
        let s0 = GpuSample {
            clients: Arc::new(vec![
                client(10, 1, vec![engine("gfx", 0, 1), engine("video", 0, 2)], 1 << 20, 1_000_000_000),
                client(12, 2, vec![engine("gfx", 0, 1)], 2 << 20, 1_000_000_000),
            ]),
            ..GpuSample::default()
        };
        let s1 = GpuSample {
            clients: vec![
                // 0.5 s busy of 1 s on gfx; 1 s on two video engines is half of them.
                client(
                    10,
                    1,
                    vec![engine("gfx", 500_000_000, 1), engine("video", 1_000_000_000, 2)],
                    1 << 20,
                    2_000_000_000,
                ),
                client(12, 2, vec![engine("gfx", 250_000_000, 1)], 2 << 20, 2_000_000_000),
            ]
            .into(),
            ..GpuSample::default()
        };
        let (procs, devices) = gpu_view(&sample(2, vec![], Some(s1.clone())), Some(&sample(1, vec![], Some(s0))));
        assert_eq!(procs[&10].busy_percent, Some(50.0));
        assert_eq!(procs[&10].engines.iter().find(|e| e.name == "video").expect("test fixture").busy_percent, 50.0);
        assert_eq!(procs[&12].busy_percent, Some(25.0));
        assert_eq!(procs[&12].memory_bytes, Some(2 << 20));
        assert_eq!(devices.len(), 1);
        assert_eq!((devices[0].id.as_str(), devices[0].clients), ("drm:0000:03:00.0", 2));
        assert_eq!(devices[0].engines.iter().find(|e| e.name == "gfx").expect("test fixture").busy_percent, 75.0);
        assert_eq!(devices[0].memory_used_bytes, Some(3 << 20));
        // No earlier reading: memory, no busy figure.
        let (procs, _) = gpu_view(&sample(2, vec![], Some(s1)), None);
        assert_eq!((procs[&10].busy_percent, procs[&10].memory_bytes), (None, Some(1 << 20)));
    }

    #[test]
    fn xe_cycles_and_a_reused_pid() {
        let cycles = |busy: u64, total: u64| DrmEngine {
            name: "rcs".into(),
            cycles: Some(busy),
            total_cycles: Some(total),
            capacity: 1,
            ..DrmEngine::default()
        };
        assert_eq!(engine_busy_percent(&cycles(300, 2000), &cycles(100, 1000), 1), Some(20.0));
        assert_eq!(engine_busy_percent(&cycles(300, 1000), &cycles(100, 1000), 1), None);
        assert_eq!(engine_busy_percent(&engine("gfx", 5, 1), &engine("gfx", 9, 1), 10), None);
        let earlier =
            GpuSample { clients: vec![client(10, 1, vec![engine("gfx", 0, 1)], 0, 1)].into(), ..GpuSample::default() };
        let mut reused = client(10, 1, vec![engine("gfx", 900, 1)], 0, 1001);
        reused.start_ticks = 99;
        let later = GpuSample { clients: vec![reused].into(), ..GpuSample::default() };
        let (procs, _) = gpu_view(&sample(2, vec![], Some(later)), Some(&sample(1, vec![], Some(earlier))));
        assert_eq!(procs[&10].busy_percent, None);
    }

    #[test]
    fn nvml_devices_and_processes() {
        let g = GpuSample {
            nvml_devices: vec![NvmlDevice {
                index: 0,
                name: "NVIDIA H100".into(),
                utilization_percent: Some(97),
                memory_used_bytes: Some(3 << 30),
                power_milliwatts: Some(312_500),
                ..NvmlDevice::default()
            }],
            nvml_processes: vec![NvmlProcess {
                pid: 42,
                device: 0,
                used_memory_bytes: Some(1 << 30),
                sm_percent: Some(93),
                memory_percent: None,
            }],
            ..GpuSample::default()
        };
        let (procs, devices) = gpu_view(&sample(1, vec![], Some(g)), None);
        assert_eq!((procs[&42].busy_percent, procs[&42].memory_bytes), (Some(93.0), Some(1 << 30)));
        assert_eq!(devices[0].power_watts, Some(312.5));
        assert_eq!((devices[0].id.as_str(), devices[0].clients, devices[0].busy_percent), ("nvml:0", 1, Some(97.0)));
    }
}
