//! Parsers for host-wide files: `/proc/stat`, `meminfo`, `loadavg`, `vmstat`, `diskstats`,
//! `net/dev`, `pressure/*`, per-NUMA-node `meminfo` and `uptime`.
//!
//! Pure functions over bytes; units are the kernel's (ticks, pages, sectors) and named so.
//! Nothing here computes a rate.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::parse::{
    block_at, block_masks, decimal, f64_dec, fields, find_byte, find_either, i64_dec, kb_value, key_value, lines, trim,
    u64_dec, u64_fields,
};

/// One `cpu` line of `/proc/stat`, in clock ticks (USER_HZ).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl CpuTicks {
    /// All ticks, excluding guest time, which the kernel already counts inside user and nice.
    pub fn total(&self) -> u64 {
        self.user + self.nice + self.system + self.idle + self.iowait + self.irq + self.softirq + self.steal
    }

    /// Ticks not spent idle or waiting for I/O.
    pub fn busy(&self) -> u64 {
        self.total() - self.idle - self.iowait
    }
}

/// `/proc/stat`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub total: CpuTicks,
    /// Indexed by position in the file; `cpu_ids` holds the CPU numbers (offline CPUs vanish).
    pub per_cpu: Vec<CpuTicks>,
    pub cpu_ids: Vec<u32>,
    pub context_switches: Option<u64>,
    pub boot_time_secs: Option<u64>,
    pub forks: Option<u64>,
    pub procs_running: Option<u64>,
    pub procs_blocked: Option<u64>,
    pub interrupts: Option<u64>,
}

fn cpu_ticks(values: &[u64]) -> CpuTicks {
    let at = |i: usize| values.get(i).copied().unwrap_or(0);
    CpuTicks {
        user: at(0),
        nice: at(1),
        system: at(2),
        idle: at(3),
        iowait: at(4),
        irq: at(5),
        softirq: at(6),
        steal: at(7),
        guest: at(8),
        guest_nice: at(9),
    }
}

/// Parses `/proc/stat`; `None` when there is no aggregate `cpu` line.
pub fn parse_stat(bytes: &[u8]) -> Option<Stat> {
    let mut stat = Stat::default();
    let mut saw_total = false;
    let mut values = [0u64; 10];
    for line in lines(bytes) {
        let mut parts = fields(line);
        let Some(key) = parts.next() else { continue };
        if let Some(id) = key.strip_prefix(b"cpu") {
            let mut n = 0;
            for part in parts.by_ref().take(10) {
                values[n] = u64_dec(part)?;
                n += 1;
            }
            if n < 4 {
                return None;
            }
            let ticks = cpu_ticks(&values[..n]);
            if id.is_empty() {
                stat.total = ticks;
                saw_total = true;
            } else {
                stat.cpu_ids.push(u32::try_from(u64_dec(id)?).ok()?);
                stat.per_cpu.push(ticks);
            }
            continue;
        }
        let first = parts.next().and_then(u64_dec);
        match key {
            b"ctxt" => stat.context_switches = first,
            b"btime" => stat.boot_time_secs = first,
            b"processes" => stat.forks = first,
            b"procs_running" => stat.procs_running = first,
            b"procs_blocked" => stat.procs_blocked = first,
            b"intr" => stat.interrupts = first,
            _ => {}
        }
    }
    saw_total.then_some(stat)
}

/// `/proc/meminfo` (and per-node meminfo), in bytes. Only the fields proctor uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemInfo {
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    pub available_bytes: Option<u64>,
    pub buffers_bytes: Option<u64>,
    pub cached_bytes: Option<u64>,
    pub swap_cached_bytes: Option<u64>,
    pub active_bytes: Option<u64>,
    pub inactive_bytes: Option<u64>,
    pub swap_total_bytes: Option<u64>,
    pub swap_free_bytes: Option<u64>,
    pub dirty_bytes: Option<u64>,
    pub writeback_bytes: Option<u64>,
    pub anon_pages_bytes: Option<u64>,
    pub mapped_bytes: Option<u64>,
    pub shmem_bytes: Option<u64>,
    pub slab_bytes: Option<u64>,
    pub sreclaimable_bytes: Option<u64>,
    pub page_tables_bytes: Option<u64>,
    pub committed_as_bytes: Option<u64>,
    pub hugepages_total: Option<u64>,
    pub hugepages_free: Option<u64>,
    pub hugepage_size_bytes: Option<u64>,
}

/// Parses `/proc/meminfo` or `/sys/devices/system/node/nodeN/meminfo` (whose lines start with
/// `Node N `). Unknown keys are ignored; a file with no known key gives `None`.
///
/// Read every cycle, twice (host and node), so the work per line is kept small: the key ends
/// at the first colon, found a word at a time; only a wanted key's value is parsed, through
/// [`kb_value`]'s fast path for the kernel's own `   1234 kB` shape.
pub fn parse_meminfo(bytes: &[u8]) -> Option<MemInfo> {
    let mut info = MemInfo::default();
    let mut known = 0;
    for line in lines(bytes) {
        let line = strip_node_prefix(line);
        let Some(colon) = find_byte(line, b':') else { continue };
        let Some(slot) = meminfo_slot(&mut info, &line[..colon]) else { continue };
        *slot = kb_value(&line[colon + 1..]);
        known += 1;
    }
    (known > 0).then_some(info)
}

/// Where a meminfo key's value goes; `None` for keys proctor does not use.
#[inline]
fn meminfo_slot<'a>(info: &'a mut MemInfo, key: &[u8]) -> Option<&'a mut Option<u64>> {
    Some(match key {
        b"MemTotal" => &mut info.total_bytes,
        b"MemFree" => &mut info.free_bytes,
        b"MemAvailable" => &mut info.available_bytes,
        b"Buffers" => &mut info.buffers_bytes,
        b"Cached" | b"FilePages" => &mut info.cached_bytes,
        b"SwapCached" => &mut info.swap_cached_bytes,
        b"Active" => &mut info.active_bytes,
        b"Inactive" => &mut info.inactive_bytes,
        b"SwapTotal" => &mut info.swap_total_bytes,
        b"SwapFree" => &mut info.swap_free_bytes,
        b"Dirty" => &mut info.dirty_bytes,
        b"Writeback" => &mut info.writeback_bytes,
        b"AnonPages" => &mut info.anon_pages_bytes,
        b"Mapped" => &mut info.mapped_bytes,
        b"Shmem" => &mut info.shmem_bytes,
        b"Slab" => &mut info.slab_bytes,
        b"SReclaimable" => &mut info.sreclaimable_bytes,
        b"PageTables" => &mut info.page_tables_bytes,
        b"Committed_AS" => &mut info.committed_as_bytes,
        b"HugePages_Total" => &mut info.hugepages_total,
        b"HugePages_Free" => &mut info.hugepages_free,
        b"Hugepagesize" => &mut info.hugepage_size_bytes,
        _ => return None,
    })
}

/// The straightforward meminfo parser [`parse_meminfo`] must agree with on every input: split
/// at the colon, trim, split the value into fields.
#[cfg(test)]
fn parse_meminfo_general(bytes: &[u8]) -> Option<MemInfo> {
    let mut info = MemInfo::default();
    let mut known = 0;
    for line in lines(bytes) {
        let line = strip_node_prefix(line);
        let Some((key, value)) = key_value(line) else { continue };
        let Some(slot) = meminfo_slot(&mut info, key) else { continue };
        *slot = crate::parse::kb_to_bytes(value);
        known += 1;
    }
    (known > 0).then_some(info)
}

fn strip_node_prefix(line: &[u8]) -> &[u8] {
    if let Some(rest) = line.strip_prefix(b"Node ") {
        if let Some(space) = rest.iter().position(|&b| b == b' ') {
            return &rest[space + 1..];
        }
    }
    line
}

/// `/proc/loadavg`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadAvg {
    pub one: f64,
    pub five: f64,
    pub fifteen: f64,
    pub runnable: u64,
    pub scheduling_entities: u64,
}

pub fn parse_loadavg(bytes: &[u8]) -> Option<LoadAvg> {
    let mut parts = fields(bytes);
    let one = f64_dec(parts.next()?)?;
    let five = f64_dec(parts.next()?)?;
    let fifteen = f64_dec(parts.next()?)?;
    let (runnable, total) = {
        let ratio = parts.next()?;
        let slash = ratio.iter().position(|&b| b == b'/')?;
        (u64_dec(&ratio[..slash])?, u64_dec(&ratio[slash + 1..])?)
    };
    Some(LoadAvg { one, five, fifteen, runnable, scheduling_entities: total })
}

/// The `/proc/vmstat` counters proctor uses (faults, paging, swapping, reclaim), cumulative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmStat {
    pub pgfault: Option<u64>,
    pub pgmajfault: Option<u64>,
    pub pgpgin_kb: Option<u64>,
    pub pgpgout_kb: Option<u64>,
    pub pswpin_pages: Option<u64>,
    pub pswpout_pages: Option<u64>,
    pub pgsteal_pages: Option<u64>,
    pub pgscan_pages: Option<u64>,
    pub oom_kill: Option<u64>,
}

/// Parses `/proc/vmstat` (about 200 `key value` lines, a dozen of them wanted).
///
/// Every wanted key starts with "pg", "ps" or "oo", so only lines whose first byte is `p` or
/// `o` are looked at: each 64-byte block gives masks of its newlines and of its `p` and `o`
/// bytes, and a line start is a `p` or `o` right after a newline (or at the start of the file).
/// The other three quarters of the lines are never visited one by one.
pub fn parse_vmstat(bytes: &[u8]) -> Option<VmStat> {
    let mut vm = VmStat::default();
    let mut known = 0;
    // Bit 0: the byte before this block was a newline (the file's start counts as one).
    let mut carry = 1u64;
    for at in (0..bytes.len()).step_by(64) {
        let [newlines, p, o] = block_masks(&block_at(bytes, at), [b'\n', b'p', b'o']);
        let mut starts = ((newlines << 1) | carry) & (p | o);
        carry = newlines >> 63;
        while starts != 0 {
            let start = at + starts.trailing_zeros() as usize;
            starts &= starts - 1;
            let line = &bytes[start..];
            if !matches!(line.get(..2), Some(b"pg" | b"ps" | b"oo")) {
                continue;
            }
            // The key ends at the first space; a newline first means a line without one.
            let Some(key_end) = find_either(line, b' ', b'\n') else { continue };
            if line[key_end] == b'\n' {
                continue;
            }
            let rest = &line[key_end + 1..];
            let value = || trim(&rest[..find_byte(rest, b'\n').unwrap_or(rest.len())]);
            apply_vmstat(&mut vm, &line[..key_end], value).then(|| known += 1);
        }
    }
    (known > 0).then_some(vm)
}

/// Stores one vmstat value if proctor wants its key; says whether it did.
#[inline]
fn apply_vmstat<'a>(vm: &mut VmStat, key: &[u8], value: impl FnOnce() -> &'a [u8]) -> bool {
    let (slot, sum) = match key {
        b"pgfault" => (&mut vm.pgfault, false),
        b"pgmajfault" => (&mut vm.pgmajfault, false),
        b"pgpgin" => (&mut vm.pgpgin_kb, false),
        b"pgpgout" => (&mut vm.pgpgout_kb, false),
        b"pswpin" => (&mut vm.pswpin_pages, false),
        b"pswpout" => (&mut vm.pswpout_pages, false),
        b"oom_kill" => (&mut vm.oom_kill, false),
        // Reclaim is split by who reclaimed (kswapd, direct, khugepaged); sum them.
        k if k.starts_with(b"pgsteal_") => (&mut vm.pgsteal_pages, true),
        k if k.starts_with(b"pgscan_") && !k.starts_with(b"pgscan_anon") && !k.starts_with(b"pgscan_file") => {
            (&mut vm.pgscan_pages, true)
        }
        _ => return false,
    };
    let value = u64_dec(value());
    // Saturating: only garbage can overflow, and garbage must not panic a debug build.
    *slot = if sum { Some(slot.unwrap_or(0).saturating_add(value.unwrap_or(0))) } else { value };
    true
}

/// The plain vmstat parser [`parse_vmstat`] must agree with: every line split, no early
/// dismissal.
#[cfg(test)]
fn parse_vmstat_general(bytes: &[u8]) -> Option<VmStat> {
    let mut vm = VmStat::default();
    let mut known = 0;
    for line in bytes.split(|&b| b == b'\n') {
        let Some(space) = line.iter().position(|&b| b == b' ') else { continue };
        apply_vmstat(&mut vm, &line[..space], || trim(&line[space + 1..])).then(|| known += 1);
    }
    (known > 0).then_some(vm)
}

/// Device or interface names seen so far, handed out as shared strings: the same dozen names
/// come back every cycle, and allocating each anew was most of a host sample's allocations.
/// Lines usually keep their order, so the name at the same position is tried first. Names are
/// never evicted until there are more than [`Names::MAX`] (devices come and go rarely), then
/// the cache starts over.
#[derive(Debug, Default, Clone)]
pub struct Names {
    names: Vec<Arc<str>>,
    next: usize,
}

impl Names {
    pub const MAX: usize = 4096;

    /// Names in the cache (a good capacity for the next parse).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Call before each file: the positional guess starts again at the first line.
    pub fn rewind(&mut self) {
        self.next = 0;
    }

    /// The shared string for `bytes` (lossy UTF-8, as before).
    pub fn get(&mut self, bytes: &[u8]) -> Arc<str> {
        let at = match self.names.get(self.next) {
            Some(n) if n.as_bytes() == bytes => Some(self.next),
            _ => self.names.iter().position(|n| n.as_bytes() == bytes),
        };
        let name = match at {
            Some(i) => {
                self.next = i + 1;
                Arc::clone(&self.names[i])
            }
            None => {
                if self.names.len() >= Self::MAX {
                    self.names.clear();
                }
                let name: Arc<str> = Arc::from(String::from_utf8_lossy(bytes).as_ref());
                self.names.push(Arc::clone(&name));
                self.next = self.names.len();
                name
            }
        };
        name
    }
}

/// One line of `/proc/diskstats`, cumulative. `Default` is a nameless device with every
/// counter 0: for building one field by field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskStat {
    /// Shared between samples when read through a [`Names`] cache.
    pub name: Arc<str>,
    pub reads: u64,
    pub read_sectors: u64,
    pub read_ms: u64,
    pub writes: u64,
    pub write_sectors: u64,
    pub write_ms: u64,
    pub in_flight: u64,
    pub io_ms: u64,
    pub weighted_io_ms: u64,
}

/// Parses `/proc/diskstats`. Partitions and virtual devices are kept; callers filter by name.
/// Lines with too few fields are skipped and counted in the second value.
pub fn parse_diskstats(bytes: &[u8]) -> (Vec<DiskStat>, usize) {
    parse_diskstats_with(bytes, &mut Names::default())
}

/// [`parse_diskstats`] taking device names from `names`, so a sampler re-reading the file
/// allocates nothing for names it has seen before.
pub fn parse_diskstats_with(bytes: &[u8], names: &mut Names) -> (Vec<DiskStat>, usize) {
    let mut disks = Vec::with_capacity(names.len());
    let mut bad = 0;
    for line in lines(bytes) {
        // major, minor, name, then at least 11 counters (newer kernels print 17 or 18).
        let mut parts = fields(line);
        let (Some(_), Some(_), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            bad += 1;
            continue;
        };
        let mut v = [None; 11];
        let parsed = (u64_fields(parts.rest(), &mut v) == v.len())
            .then(|| {
                Some(DiskStat {
                    name: names.get(name),
                    reads: v[0]?,
                    read_sectors: v[2]?,
                    read_ms: v[3]?,
                    writes: v[4]?,
                    write_sectors: v[6]?,
                    write_ms: v[7]?,
                    in_flight: v[8]?,
                    io_ms: v[9]?,
                    weighted_io_ms: v[10]?,
                })
            })
            .flatten();
        match parsed {
            Some(disk) => disks.push(disk),
            None => bad += 1,
        }
    }
    (disks, bad)
}

/// The field-by-field diskstats parser [`parse_diskstats_with`] must agree with.
#[cfg(test)]
fn parse_diskstats_general(bytes: &[u8]) -> (Vec<DiskStat>, usize) {
    let mut disks = Vec::new();
    let mut bad = 0;
    for line in lines(bytes) {
        let parts: Vec<&[u8]> = fields(line).take(14).collect();
        let n = |i: usize| u64_dec(parts[i]);
        let parsed = (parts.len() == 14)
            .then(|| {
                Some(DiskStat {
                    name: Arc::from(String::from_utf8_lossy(parts[2]).as_ref()),
                    reads: n(3)?,
                    read_sectors: n(5)?,
                    read_ms: n(6)?,
                    writes: n(7)?,
                    write_sectors: n(9)?,
                    write_ms: n(10)?,
                    in_flight: n(11)?,
                    io_ms: n(12)?,
                    weighted_io_ms: n(13)?,
                })
            })
            .flatten();
        match parsed {
            Some(disk) => disks.push(disk),
            None => bad += 1,
        }
    }
    (disks, bad)
}

/// One interface of `/proc/net/dev`, cumulative.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetDev {
    /// Shared between samples when read through a [`Names`] cache.
    pub name: Arc<str>,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_errors: u64,
    pub rx_dropped: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub tx_dropped: u64,
}

/// Parses `/proc/net/dev` (two header lines, then `name: 16 numbers`); bad lines are counted.
pub fn parse_net_dev(bytes: &[u8]) -> (Vec<NetDev>, usize) {
    parse_net_dev_with(bytes, &mut Names::default())
}

/// [`parse_net_dev`] taking interface names from `names` (see [`parse_diskstats_with`]).
pub fn parse_net_dev_with(bytes: &[u8], names: &mut Names) -> (Vec<NetDev>, usize) {
    let mut devs = Vec::with_capacity(names.len());
    let mut bad = 0;
    for line in lines(bytes) {
        let Some((name, rest)) = key_value(line) else { continue };
        if name.contains(&b'|') {
            continue;
        }
        let mut v = [None; 16];
        let count = u64_fields(rest, &mut v);
        let n = v.map(|x| x.unwrap_or(0));
        match count == 16 && v.iter().all(Option::is_some) {
            true => devs.push(NetDev {
                name: names.get(trim(name)),
                rx_bytes: n[0],
                rx_packets: n[1],
                rx_errors: n[2],
                rx_dropped: n[3],
                tx_bytes: n[8],
                tx_packets: n[9],
                tx_errors: n[10],
                tx_dropped: n[11],
            }),
            false => bad += 1,
        }
    }
    (devs, bad)
}

/// The field-by-field net/dev parser [`parse_net_dev_with`] must agree with.
#[cfg(test)]
fn parse_net_dev_general(bytes: &[u8]) -> (Vec<NetDev>, usize) {
    let mut devs = Vec::new();
    let mut bad = 0;
    for line in lines(bytes) {
        let Some((name, rest)) = key_value(line) else { continue };
        if name.contains(&b'|') {
            continue;
        }
        let mut n = [0u64; 16];
        let mut count = 0;
        for (slot, field) in n.iter_mut().zip(fields(rest)) {
            match u64_dec(field) {
                Some(v) => *slot = v,
                None => break,
            }
            count += 1;
        }
        match count {
            16 => devs.push(NetDev {
                name: Arc::from(String::from_utf8_lossy(trim(name)).as_ref()),
                rx_bytes: n[0],
                rx_packets: n[1],
                rx_errors: n[2],
                rx_dropped: n[3],
                tx_bytes: n[8],
                tx_packets: n[9],
                tx_errors: n[10],
                tx_dropped: n[11],
            }),
            _ => bad += 1,
        }
    }
    (devs, bad)
}

/// One line of a PSI file: averages in percent and the cumulative stall time in µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PressureLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    pub total_usec: u64,
}

/// A PSI file (`/proc/pressure/*`, `cpu.pressure`, …). `full` is absent for host CPU on older
/// kernels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Pressure {
    pub some: Option<PressureLine>,
    pub full: Option<PressureLine>,
}

pub fn parse_pressure(bytes: &[u8]) -> Option<Pressure> {
    let mut pressure = Pressure::default();
    for line in lines(bytes) {
        let (full, parsed) = match pressure_line_kernel_shape(line) {
            Some(got) => got,
            None => pressure_line(line)?,
        };
        if full {
            pressure.full = Some(parsed);
        } else {
            pressure.some = Some(parsed);
        }
    }
    (pressure.some.is_some() || pressure.full.is_some()).then_some(pressure)
}

/// One PSI line, any spacing and field order; `None` makes the whole file `None`. Returns
/// whether it is the `full` line.
fn pressure_line(line: &[u8]) -> Option<(bool, PressureLine)> {
    let mut parts = fields(line);
    let full = match parts.next()? {
        b"some" => false,
        b"full" => true,
        _ => return None,
    };
    let mut parsed = PressureLine::default();
    for part in parts {
        let eq = find_byte(part, b'=')?;
        let (key, value) = (&part[..eq], &part[eq + 1..]);
        match key {
            b"avg10" => parsed.avg10 = decimal(value)?,
            b"avg60" => parsed.avg60 = decimal(value)?,
            b"avg300" => parsed.avg300 = decimal(value)?,
            b"total" => parsed.total_usec = u64_dec(value)?,
            _ => {}
        }
    }
    Some((full, parsed))
}

/// The line exactly as the kernel prints it (`some avg10=0.80 avg60=0.37 avg300=0.22
/// total=22018008`), read front to back without splitting it first; anything else (another
/// order, other spacing, an extra field, a value [`decimal`] would not take) is `None`, and
/// [`pressure_line`] decides. Each value is handed to the same [`decimal`] and [`u64_dec`], so
/// both paths give the same bits.
fn pressure_line_kernel_shape(line: &[u8]) -> Option<(bool, PressureLine)> {
    let full = match line.get(..11)? {
        b"some avg10=" => false,
        b"full avg10=" => true,
        _ => return None,
    };
    let (avg10, rest) = psi_decimal(&line[11..])?;
    let (avg60, rest) = psi_decimal(rest.strip_prefix(b" avg60=")?)?;
    let (avg300, rest) = psi_decimal(rest.strip_prefix(b" avg300=")?)?;
    // `u64_dec` takes digits only, so a total with anything after it is left to the general path.
    let total = rest.strip_prefix(b" total=")?;
    Some((full, PressureLine { avg10, avg60, avg300, total_usec: u64_dec(total)? }))
}

/// A PSI average: digits and dots up to the next byte that is neither, through [`decimal`].
#[inline]
fn psi_decimal(bytes: &[u8]) -> Option<(f64, &[u8])> {
    let end = bytes.iter().position(|&b| !(b.is_ascii_digit() || b == b'.')).unwrap_or(bytes.len());
    Some((decimal(&bytes[..end])?, &bytes[end..]))
}

/// The general PSI parser [`parse_pressure`] must agree with on every input.
#[cfg(test)]
fn parse_pressure_general(bytes: &[u8]) -> Option<Pressure> {
    let mut pressure = Pressure::default();
    for line in lines(bytes) {
        match pressure_line(line)? {
            (true, parsed) => pressure.full = Some(parsed),
            (false, parsed) => pressure.some = Some(parsed),
        }
    }
    (pressure.some.is_some() || pressure.full.is_some()).then_some(pressure)
}

/// `/proc/uptime`: seconds since boot, and idle seconds summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Uptime {
    pub up_secs: f64,
    pub idle_secs: f64,
}

pub fn parse_uptime(bytes: &[u8]) -> Option<Uptime> {
    let mut parts = fields(bytes);
    Some(Uptime { up_secs: f64_dec(parts.next()?)?, idle_secs: f64_dec(parts.next()?)? })
}

/// Parses a file holding one signed decimal (many cgroup and sysfs files).
pub fn parse_single_i64(bytes: &[u8]) -> Option<i64> {
    i64_dec(trim(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &[u8] = b"cpu  100 2 50 1000 10 1 3 0 0 0\n\
cpu0 50 1 25 500 5 1 2 0 0 0\ncpu2 50 1 25 500 5 0 1 0 0 0\n\
intr 12345 1 2 3\nctxt 999\nbtime 1700000000\nprocesses 4242\nprocs_running 3\nprocs_blocked 1\n\
softirq 1 2 3\n";

    #[test]
    fn stat_total_and_per_cpu() {
        let stat = parse_stat(STAT).expect("parses");
        assert_eq!(stat.total.user, 100);
        assert_eq!(stat.total.total(), 100 + 2 + 50 + 1000 + 10 + 1 + 3);
        assert_eq!(stat.total.busy(), 156);
        assert_eq!(stat.cpu_ids, vec![0, 2]);
        assert_eq!(stat.context_switches, Some(999));
        assert_eq!(stat.boot_time_secs, Some(1_700_000_000));
        assert_eq!(stat.procs_blocked, Some(1));
    }

    #[test]
    fn stat_garbage_is_none() {
        assert_eq!(parse_stat(b""), None);
        assert_eq!(parse_stat(b"cpu  1 2\n"), None);
        assert_eq!(parse_stat(b"cpu  1 2 x 4\n"), None);
        assert_eq!(parse_stat(b"\xff\xfe garbage"), None);
    }

    #[test]
    fn meminfo_and_node_meminfo() {
        let info = parse_meminfo(b"MemTotal:       16 kB\nMemAvailable:    8 kB\nWeird: 1\n").expect("parses");
        assert_eq!(info.total_bytes, Some(16 * 1024));
        assert_eq!(info.available_bytes, Some(8 * 1024));
        let node = parse_meminfo(b"Node 0 MemTotal:       32 kB\nNode 0 FilePages: 4 kB\n").expect("parses");
        assert_eq!(node.total_bytes, Some(32 * 1024));
        assert_eq!(node.cached_bytes, Some(4 * 1024));
        assert_eq!(parse_meminfo(b"nothing here"), None);
    }

    #[test]
    fn loadavg() {
        let load = parse_loadavg(b"0.50 0.25 0.10 2/345 6789\n").expect("parses");
        assert_eq!(load.one, 0.5);
        assert_eq!(load.runnable, 2);
        assert_eq!(load.scheduling_entities, 345);
        assert_eq!(parse_loadavg(b"0.50 0.25\n"), None);
    }

    #[test]
    fn vmstat_sums_reclaim() {
        let vm = parse_vmstat(
            b"pgfault 10\npgmajfault 2\npgsteal_kswapd 5\npgsteal_direct 6\npgscan_kswapd 7\npgscan_anon 100\npswpin 0\n",
        )
        .expect("parses");
        assert_eq!(vm.pgfault, Some(10));
        assert_eq!(vm.pgsteal_pages, Some(11));
        assert_eq!(vm.pgscan_pages, Some(7));
        assert_eq!(vm.pswpin_pages, Some(0));
    }

    #[test]
    fn diskstats_counts_bad_lines() {
        let (disks, bad) = parse_diskstats(b" 253 0 vda 100 0 800 50 200 0 1600 70 0 90 120 0 0 0 0\n 253 1 vdb 1 2\n");
        assert_eq!(bad, 1);
        assert_eq!(disks.len(), 1);
        assert_eq!(&*disks[0].name, "vda");
        assert_eq!(disks[0].read_sectors, 800);
        assert_eq!(disks[0].weighted_io_ms, 120);
    }

    #[test]
    fn names_are_shared_between_parses_and_follow_reordering() {
        let mut names = Names::default();
        let text = b"   8       0 sda 1 0 2 3 4 0 5 6 0 7 8\n   8       1 sda1 1 0 2 3 4 0 5 6 0 7 8\n";
        let (first, _) = parse_diskstats_with(text, &mut names);
        names.rewind();
        let (second, _) = parse_diskstats_with(text, &mut names);
        assert!(Arc::ptr_eq(&first[0].name, &second[0].name) && Arc::ptr_eq(&first[1].name, &second[1].name));
        names.rewind();
        let swapped = b"   8       1 sda1 1 0 2 3 4 0 5 6 0 7 8\n   8      16 sdb 1 0 2 3 4 0 5 6 0 7 8\n   8       0 sda 1 0 2 3 4 0 5 6 0 7 8\n";
        let (third, _) = parse_diskstats_with(swapped, &mut names);
        let got: Vec<&str> = third.iter().map(|d| &*d.name).collect();
        assert_eq!(got, ["sda1", "sdb", "sda"]);
        assert!(Arc::ptr_eq(&third[0].name, &first[1].name) && Arc::ptr_eq(&third[2].name, &first[0].name));
        assert_eq!(names.len(), 3);
        assert_eq!(&*names.get(b"x\xffy"), "x\u{fffd}y");
    }

    #[test]
    fn net_dev() {
        let (devs, bad) = parse_net_dev(
            b"Inter-|   Receive |  Transmit\n face |bytes    packets|bytes\n  lo: 100 2 0 0 0 0 0 0 300 4 0 0 0 0 0 0\neth0: 1 2\n",
        );
        assert_eq!(bad, 1);
        assert_eq!(&*devs[0].name, "lo");
        assert_eq!(devs[0].rx_bytes, 100);
        assert_eq!(devs[0].tx_bytes, 300);
    }

    #[test]
    fn pressure() {
        let p = parse_pressure(
            b"some avg10=1.50 avg60=0.00 avg300=0.00 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n",
        )
        .expect("parses");
        assert_eq!(p.some.map(|l| l.avg10), Some(1.5));
        assert_eq!(p.full.map(|l| l.total_usec), Some(7));
        assert_eq!(parse_pressure(b"some avg10=x\n"), None);
        assert_eq!(parse_pressure(b""), None);
    }

    /// Files captured on the development machine (kernel 6.18, hybrid cgroups), in
    /// `testdata/`, plus the same files live from this machine where it has them.
    fn real_files(names: &[&str], live: &[&str]) -> Vec<(String, Vec<u8>)> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/");
        let mut files: Vec<(String, Vec<u8>)> = names
            .iter()
            .map(|n| (format!("testdata/{n}"), std::fs::read(format!("{dir}{n}")).expect("fixture")))
            .collect();
        files.extend(live.iter().filter_map(|p| Some((p.to_string(), std::fs::read(p).ok()?))));
        files
    }

    /// Random edits aimed at the fast paths' assumptions: spacing, tabs, carriage returns,
    /// colons, units, dots, digits, NULs, truncation, deleted and duplicated bytes and lines.
    fn mutations(original: &[u8], rounds: usize, mut check: impl FnMut(&[u8])) {
        let mut next = crate::parse::xorshift(0x853c_49e6_748f_ea9b);
        let alphabet = b" \t\r\n:=.0123456789kBNde_ps\x00\xff\x0c";
        check(original);
        for _ in 0..rounds {
            let mut b = original.to_vec();
            for _ in 0..1 + next() % 4 {
                if b.is_empty() {
                    break;
                }
                let at = (next() % b.len() as u64) as usize;
                let byte = alphabet[(next() % alphabet.len() as u64) as usize];
                match next() % 6 {
                    0 | 1 => b[at] = byte,
                    2 => b.insert(at, byte),
                    3 => {
                        b.remove(at);
                    }
                    4 => {
                        // Duplicate the line around `at` (a key seen twice: the last wins).
                        let start = b[..at].iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
                        let end = b[at..].iter().position(|&c| c == b'\n').map_or(b.len(), |i| at + i + 1);
                        let line = b[start..end].to_vec();
                        b.splice(end..end, line);
                    }
                    _ => b.truncate(at),
                }
            }
            check(&b);
        }
    }

    #[test]
    fn meminfo_fast_path_agrees_with_the_general_parser() {
        let files =
            real_files(&["meminfo", "node0-meminfo"], &["/proc/meminfo", "/sys/devices/system/node/node0/meminfo"]);
        for (name, bytes) in &files {
            let parsed = parse_meminfo(bytes).expect("a real meminfo parses");
            assert!(parsed.total_bytes.is_some() && parsed.free_bytes.is_some(), "{name}: {parsed:?}");
            mutations(bytes, 4000, |b| {
                assert_eq!(
                    parse_meminfo(b),
                    parse_meminfo_general(b),
                    "{name}, mutated: {:?}",
                    String::from_utf8_lossy(b)
                );
            });
        }
    }

    #[test]
    fn vmstat_dismissal_agrees_with_the_general_parser() {
        for (name, bytes) in &real_files(&["vmstat"], &["/proc/vmstat"]) {
            let parsed = parse_vmstat(bytes).expect("a real vmstat parses");
            assert!(parsed.pgfault.is_some() && parsed.pgsteal_pages.is_some(), "{name}: {parsed:?}");
            mutations(bytes, 3000, |b| {
                assert_eq!(
                    parse_vmstat(b),
                    parse_vmstat_general(b),
                    "{name}, mutated: {:?}",
                    String::from_utf8_lossy(b)
                );
            });
        }
    }

    #[test]
    fn pressure_fast_path_agrees_with_the_general_parser() {
        let live = [
            "/proc/pressure/cpu",
            "/proc/pressure/memory",
            "/proc/pressure/io",
            "/sys/fs/cgroup/unified/cpu.pressure",
            "/sys/fs/cgroup/cpu.pressure",
        ];
        for (name, bytes) in &real_files(&["pressure-cpu", "pressure-memory", "pressure-io"], &live) {
            let parsed = parse_pressure(bytes).expect("a real PSI file parses");
            assert!(parsed.some.is_some(), "{name}: {parsed:?}");
            // Both paths return the same bits, so `==` on the floats is the right comparison.
            mutations(bytes, 4000, |b| {
                assert_eq!(
                    parse_pressure(b),
                    parse_pressure_general(b),
                    "{name}, mutated: {:?}",
                    String::from_utf8_lossy(b)
                );
            });
        }
        // The reordered and respaced forms the fast path leaves to the general one.
        let odd = b"some total=5 avg300=1.5 avg60=0.25 avg10=2\nfull\tavg10=0.00  avg60=0.00 avg300=0.00 total=1\r\n";
        let p = parse_pressure(odd).expect("parses");
        assert_eq!(p.some, Some(PressureLine { avg10: 2.0, avg60: 0.25, avg300: 1.5, total_usec: 5 }));
        // A carriage return is whitespace to the general parser, so this line still counts.
        assert_eq!(p.full, Some(PressureLine { avg10: 0.0, avg60: 0.0, avg300: 0.0, total_usec: 1 }));
    }

    #[test]
    fn diskstats_and_net_dev_agree_with_the_field_by_field_parsers() {
        for (name, bytes) in &real_files(&["diskstats"], &["/proc/diskstats"]) {
            let (disks, bad) = parse_diskstats(bytes);
            assert!(!disks.is_empty() && bad == 0, "{name}: {bad} bad lines");
            mutations(bytes, 3000, |b| {
                assert_eq!(
                    parse_diskstats(b),
                    parse_diskstats_general(b),
                    "{name}, mutated: {:?}",
                    String::from_utf8_lossy(b)
                );
            });
        }
        for (name, bytes) in &real_files(&["net-dev"], &["/proc/net/dev"]) {
            let (devs, bad) = parse_net_dev(bytes);
            assert!(devs.iter().any(|d| &*d.name == "lo") && bad == 0, "{name}: {bad} bad lines");
            mutations(bytes, 3000, |b| {
                assert_eq!(
                    parse_net_dev(b),
                    parse_net_dev_general(b),
                    "{name}, mutated: {:?}",
                    String::from_utf8_lossy(b)
                );
            });
        }
    }

    #[test]
    fn uptime() {
        let up = parse_uptime(b"350735.47 234388.90\n").expect("parses");
        assert_eq!(up.up_secs, 350_735.47);
    }
}
