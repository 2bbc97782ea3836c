//! Host files, each kept open and re-read with `pread` every cycle.

use proctor_model::{HostSample, SampleCost};
use proctor_procfs::host::{
    parse_diskstats_with, parse_loadavg, parse_meminfo, parse_net_dev_with, parse_pressure, parse_stat, parse_uptime,
    parse_vmstat, Names,
};
use proctor_procfs::{Error, ProcFile, Root};

/// One host file: kept open once it opened; a file that does not exist here (no PSI on this
/// kernel, no NUMA) is remembered as absent and not retried every cycle.
#[derive(Debug)]
enum Slot {
    Open(ProcFile),
    Absent,
}

#[derive(Debug)]
struct HostFile {
    name: &'static str,
    slot: Slot,
}

impl HostFile {
    fn open(root: &Root, name: &'static str, path: &str, cost: &mut SampleCost) -> Self {
        let slot = match root.open_kept(path) {
            Ok(file) => {
                cost.files_opened += 1;
                Slot::Open(file)
            }
            Err(e) => {
                if e.kind != proctor_procfs::ErrorKind::Gone {
                    *cost.errors.entry((name, e.kind.as_str())).or_default() += 1;
                }
                Slot::Absent
            }
        };
        Self { name, slot }
    }

    /// Reads the file and parses it; failures are counted under the file's name. Not timed one
    /// by one: two clock reads and a map entry per file were a visible share of a host sample,
    /// so the sampler times the host files together (`reader_wall_ns["host"]`).
    fn read<T>(&mut self, cost: &mut SampleCost, parse: impl FnOnce(&[u8]) -> Option<T>) -> Option<T> {
        let Slot::Open(file) = &mut self.slot else { return None };
        cost.files_read += 1;
        let result = match file.read() {
            Ok(bytes) => match parse(bytes) {
                Some(v) => Some(v),
                None => {
                    *cost.errors.entry((self.name, "parse")).or_default() += 1;
                    None
                }
            },
            Err(Error { kind, .. }) => {
                *cost.errors.entry((self.name, kind.as_str())).or_default() += 1;
                None
            }
        };
        result
    }
}

/// The host's files, opened once.
#[derive(Debug)]
pub(crate) struct HostReader {
    stat: HostFile,
    meminfo: HostFile,
    loadavg: HostFile,
    vmstat: HostFile,
    diskstats: HostFile,
    net_dev: HostFile,
    pressure_cpu: HostFile,
    pressure_memory: HostFile,
    pressure_io: HostFile,
    uptime: HostFile,
    online: HostFile,
    numa: Vec<(u32, HostFile)>,
    /// Disk and interface names, shared between samples instead of allocated every cycle.
    disk_names: Names,
    net_names: Names,
}

impl HostReader {
    pub(crate) fn open(root: &Root, files: crate::HostFiles, cost: &mut SampleCost) -> Self {
        let all = files == crate::HostFiles::All;
        let mut open = |name, path| {
            if all || matches!(name, "host.stat" | "host.loadavg") {
                HostFile::open(root, name, path, cost)
            } else {
                HostFile { name, slot: Slot::Absent }
            }
        };
        let mut reader = Self {
            stat: open("host.stat", "/proc/stat"),
            meminfo: open("host.meminfo", "/proc/meminfo"),
            loadavg: open("host.loadavg", "/proc/loadavg"),
            vmstat: open("host.vmstat", "/proc/vmstat"),
            diskstats: open("host.diskstats", "/proc/diskstats"),
            net_dev: open("host.net_dev", root.net_dev()),
            pressure_cpu: open("host.pressure", "/proc/pressure/cpu"),
            pressure_memory: open("host.pressure", "/proc/pressure/memory"),
            pressure_io: open("host.pressure", "/proc/pressure/io"),
            uptime: open("host.uptime", "/proc/uptime"),
            online: open("host.online_cpus", "/sys/devices/system/cpu/online"),
            numa: Vec::new(),
            disk_names: Names::default(),
            net_names: Names::default(),
        };
        // NUMA nodes are fixed for the life of the machine: list them once.
        if !all {
            return reader;
        }
        if let Ok(entries) = std::fs::read_dir(root.path("/sys/devices/system/node")) {
            let mut nodes: Vec<u32> =
                entries.filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("node")?.parse().ok()).collect();
            nodes.sort_unstable();
            for node in nodes {
                let path = format!("/sys/devices/system/node/node{node}/meminfo");
                reader.numa.push((node, HostFile::open(root, "host.numa_meminfo", &path, cost)));
            }
        }
        reader
    }

    pub(crate) fn read(&mut self, cost: &mut SampleCost) -> HostSample {
        let mut diskstats_bad = 0;
        let mut net_bad = 0;
        let sample = HostSample {
            stat: self.stat.read(cost, parse_stat),
            meminfo: self.meminfo.read(cost, parse_meminfo),
            loadavg: self.loadavg.read(cost, parse_loadavg),
            vmstat: self.vmstat.read(cost, parse_vmstat),
            disks: self
                .diskstats
                .read(cost, |b| {
                    self.disk_names.rewind();
                    let (disks, bad) = parse_diskstats_with(b, &mut self.disk_names);
                    diskstats_bad = bad;
                    Some(disks)
                })
                .unwrap_or_default(),
            nets: self
                .net_dev
                .read(cost, |b| {
                    self.net_names.rewind();
                    let (devs, bad) = parse_net_dev_with(b, &mut self.net_names);
                    net_bad = bad;
                    Some(devs)
                })
                .unwrap_or_default(),
            pressure_cpu: self.pressure_cpu.read(cost, parse_pressure),
            pressure_memory: self.pressure_memory.read(cost, parse_pressure),
            pressure_io: self.pressure_io.read(cost, parse_pressure),
            numa: self
                .numa
                .iter_mut()
                .filter_map(|(node, file)| Some((*node, file.read(cost, parse_meminfo)?)))
                .collect(),
            uptime: self.uptime.read(cost, parse_uptime),
            online_cpus: self.online.read(cost, proctor_procfs::cpu_list),
            power: Vec::new(),
            net: None,
        };
        if diskstats_bad > 0 {
            *cost.errors.entry(("host.diskstats", "parse")).or_default() += diskstats_bad as u64;
        }
        if net_bad > 0 {
            *cost.errors.entry(("host.net_dev", "parse")).or_default() += net_bad as u64;
        }
        sample
    }
}
