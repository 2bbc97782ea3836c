//! The host series every surface keeps under the catalog's names (`proctor_units::series`):
//! the history ring and `/api/v1/history`, the dashboard, the host fields of alerts and `dump`,
//! `report` and the rollup tiers all take a host total from [`host_values`], so one name has
//! one computation (the ring once summed partitions with their disks where `report` did not).
//! Pure: one sample and the one before it (of the same run) in, values out.

use proctor_procfs::host::{CpuTicks, Pressure, PressureLine};

use crate::Sample;

/// The host series [`host_values`] computes, in its order (new series go at the end).
pub const HOST_SERIES: [&str; N] = [
    "host.cpu.user_percent",
    "host.cpu.nice_percent",
    "host.cpu.system_percent",
    "host.cpu.iowait_percent",
    "host.cpu.irq_percent",
    "host.cpu.steal_percent",
    "host.cpu.busy_percent",
    "host.memory.used_bytes",
    "host.memory.available_bytes",
    "host.memory.cached_bytes",
    "host.memory.swap_used_bytes",
    "host.pressure_cpu.some.avg10",
    "host.pressure_cpu.full.avg10",
    "host.pressure_io.some.avg10",
    "host.pressure_io.full.avg10",
    "host.pressure_memory.some.avg10",
    "host.pressure_memory.full.avg10",
    "host.disk.read_bytes_per_sec",
    "host.disk.write_bytes_per_sec",
    "host.disk.busy_percent",
    "host.disk.io_time_percent",
    "host.net.rx_bytes_per_sec",
    "host.net.tx_bytes_per_sec",
    "host.cpu.softirq_percent",
    "host.load.avg1",
    "host.context_switches_per_sec",
    "host.procs_running",
    "host.procs_blocked",
];

/// Loop and RAM disks are pseudo-devices whose traffic is already counted on a real device or
/// is memory traffic; they are left out of the disk view (they stay in the raw sample).
pub fn is_interesting_disk(name: &str) -> bool {
    !(name.starts_with("loop") || name.starts_with("ram"))
}

/// How many host series there are.
pub const N: usize = 28;

/// The index of a host series by its catalog name or an alias the catalog keeps for it.
pub fn index(name: &str) -> Option<usize> {
    let name = proctor_units::series::canonical(name);
    HOST_SERIES.iter().position(|n| *n == name)
}

/// Whether `name` is a partition of another device in `names` (`sda1` of `sda`, `nvme0n1p2`
/// of `nvme0n1`): its bytes are already counted on the whole disk.
fn is_partition<'a>(name: &str, mut names: impl Iterator<Item = &'a str>) -> bool {
    names.any(|disk| {
        disk != name
            && name.strip_prefix(disk).is_some_and(|rest| {
                let digits = rest.strip_prefix('p').unwrap_or(rest);
                !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
            })
    })
}

/// Every host series' value at `cur` (rates against `prev`, which must be of the same run).
pub fn host_values(cur: &Sample, prev: Option<&Sample>) -> [Option<f64>; N] {
    let mut v = [None; N];
    let h = &cur.host;
    if let Some(m) = h.meminfo {
        v[7] = m.total_bytes.zip(m.available_bytes).and_then(|(t, a)| t.checked_sub(a)).map(|b| b as f64);
        v[8] = m.available_bytes.map(|b| b as f64);
        v[9] = m.cached_bytes.map(|b| b as f64);
        v[10] = m.swap_total_bytes.zip(m.swap_free_bytes).and_then(|(t, f)| t.checked_sub(f)).map(|b| b as f64);
    }
    // Pressure is the kernel's 10 s average at each sample, the number the live ring, the
    // fields and alerts show under the same name (a bucket's mean of it lags the bucket's exact
    // stall share by up to ~10 s).
    let avg10 = |p: Option<Pressure>, line: fn(&Pressure) -> Option<PressureLine>| Some(line(&p?)?.avg10);
    v[11] = avg10(h.pressure_cpu, |p| p.some);
    v[12] = avg10(h.pressure_cpu, |p| p.full);
    v[13] = avg10(h.pressure_io, |p| p.some);
    v[14] = avg10(h.pressure_io, |p| p.full);
    v[15] = avg10(h.pressure_memory, |p| p.some);
    v[16] = avg10(h.pressure_memory, |p| p.full);
    v[24] = h.loadavg.map(|l| l.one);
    v[26] = h.stat.as_ref().and_then(|s| s.procs_running).map(|n| n as f64);
    v[27] = h.stat.as_ref().and_then(|s| s.procs_blocked).map(|n| n as f64);
    let Some(prev) = prev else { return v };
    let secs = cur.mono_ns.saturating_sub(prev.mono_ns) as f64 / 1e9;
    if secs <= 0.0 {
        return v;
    }
    let ph = &prev.host;
    if let (Some(s), Some(ps)) = (&h.stat, &ph.stat) {
        if let Some(shares) = cpu_shares(&s.total, &ps.total) {
            for (slot, share) in v.iter_mut().zip(&shares[..7]) {
                *slot = Some(*share);
            }
            v[23] = Some(shares[7]);
        }
        v[25] =
            s.context_switches.zip(ps.context_switches).and_then(|(c, p)| c.checked_sub(p)).map(|d| d as f64 / secs);
    }
    // Only an interesting disk can hold one (`loop0p1` and `ram0…` are left out by name
    // anyway): this runs on every sample, and a host with hundreds of snap loops would make
    // the partition test quadratic in them.
    let names = || h.disks.iter().map(|d| &*d.name).filter(|n| is_interesting_disk(n));
    let whole = h.disks.iter().filter(|d| is_interesting_disk(&d.name) && !is_partition(&d.name, names()));
    let (mut read, mut write, mut busiest, mut io_ms, mut any) = (0.0, 0.0, 0.0f64, 0.0, false);
    for d in whole {
        let Some(p) = ph.disks.iter().find(|p| p.name == d.name) else { continue };
        let (Some(r), Some(w), Some(t)) = (
            d.read_sectors.checked_sub(p.read_sectors),
            d.write_sectors.checked_sub(p.write_sectors),
            d.io_ms.checked_sub(p.io_ms),
        ) else {
            continue;
        };
        any = true;
        // diskstats counts 512-byte sectors whatever the device's block size.
        read += r as f64 * 512.0 / secs;
        write += w as f64 * 512.0 / secs;
        let ms = t as f64;
        busiest = busiest.max(ms / secs / 10.0);
        io_ms += ms;
    }
    if any {
        v[17] = Some(read);
        v[18] = Some(write);
        v[19] = Some(busiest.min(100.0));
        v[20] = Some(io_ms / secs / 10.0);
    }
    let (mut rx, mut tx, mut any) = (0.0, 0.0, false);
    for n in h.nets.iter().filter(|n| &*n.name != "lo") {
        let Some(p) = ph.nets.iter().find(|p| p.name == n.name) else { continue };
        let (Some(r), Some(t)) = (n.rx_bytes.checked_sub(p.rx_bytes), n.tx_bytes.checked_sub(p.tx_bytes)) else {
            continue;
        };
        any = true;
        rx += r as f64 / secs;
        tx += t as f64 / secs;
    }
    if any {
        v[21] = Some(rx);
        v[22] = Some(tx);
    }
    v
}

/// user, nice, system, iowait, irq+softirq, steal, busy as percent of all CPU ticks.
/// user, nice, system, iowait, irq, steal, busy, softirq: `SERIES`' order of the first seven,
/// then softirq (index 23).
fn cpu_shares(later: &CpuTicks, earlier: &CpuTicks) -> Option<[f64; 8]> {
    let total = later.total().checked_sub(earlier.total())? as f64;
    if total <= 0.0 {
        return None;
    }
    let pct = |l: u64, e: u64| l.checked_sub(e).map(|d| 100.0 * d as f64 / total);
    Some([
        pct(later.user, earlier.user)?,
        pct(later.nice, earlier.nice)?,
        pct(later.system, earlier.system)?,
        pct(later.iowait, earlier.iowait)?,
        pct(later.irq, earlier.irq)?,
        pct(later.steal, earlier.steal)?,
        pct(later.busy(), earlier.busy())?,
        pct(later.softirq, earlier.softirq)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_view;
    use proctor_procfs::host::DiskStat;

    fn disk(name: &str, read_sectors: u64, io_ms: u64) -> DiskStat {
        DiskStat { name: name.into(), read_sectors, io_ms, ..DiskStat::default() }
    }

    fn sample(mono_s: u64, disks: Vec<DiskStat>) -> Sample {
        let mut s = Sample { mono_ns: mono_s * 1_000_000_000, clock_ticks_per_sec: 100, ..Sample::default() };
        s.host.disks = disks;
        s
    }

    /// A partition's bytes are its disk's: the total counts the whole disks alone, and the
    /// host view every surface reads carries that same total.
    #[test]
    fn partitions_are_not_counted_twice_and_the_view_carries_the_one_total() {
        let before = sample(
            10,
            vec![
                disk("sda", 0, 0),
                disk("sda1", 0, 0),
                disk("nvme0n1", 0, 0),
                disk("nvme0n1p2", 0, 0),
                disk("loop0", 0, 0),
            ],
        );
        let after = sample(
            11,
            vec![
                disk("sda", 1000, 300),
                disk("sda1", 1000, 300),
                disk("nvme0n1", 500, 100),
                disk("nvme0n1p2", 500, 100),
                disk("loop0", 9000, 900),
            ],
        );
        let v = host_values(&after, Some(&before));
        let read = index("host.disk.read_bytes_per_sec").expect("a series");
        assert_eq!(v[read], Some(1500.0 * 512.0));
        assert_eq!(v[index("host.disk.busy_percent").expect("a series")], Some(30.0));
        assert_eq!(v[index("host.disk.io_time_percent").expect("a series")], Some(40.0));
        assert_eq!(host_view(&after, Some(&before)).series, v);
        assert!(is_partition("sda1", ["sda", "sda1"].into_iter()));
        assert!(is_partition("nvme0n1p2", ["nvme0n1"].into_iter()));
        assert!(!is_partition("nvme0n1", ["nvme0n1", "nvme0n1p2"].into_iter()));
        assert!(!is_partition("sdb", ["sda", "sdb"].into_iter()));
        // Every name is the catalog's, and the catalog's stored host rows are these.
        let mut ours: Vec<&str> = HOST_SERIES.to_vec();
        let mut catalog: Vec<&str> = proctor_units::series::CATALOG
            .iter()
            .filter(|s| s.stored && s.name.starts_with("host."))
            .map(|s| s.name)
            .collect();
        ours.sort_unstable();
        catalog.sort_unstable();
        assert_eq!(ours, catalog);
    }
}
