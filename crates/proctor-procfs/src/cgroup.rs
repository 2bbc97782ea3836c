//! cgroup v1, v2 and hybrid: where a process's cgroups live, their limits and their counters.
//!
//! A process names its cgroups in `/proc/PID/cgroup` relative to its cgroup namespace; the
//! directories are found through `/proc/self/mountinfo`, whose *root* field says which cgroup
//! a mount shows (inside a container that is often the container's own cgroup, mounted as `/`).
//! Limits are split from counters on purpose: limits need a walk over every ancestor (a quota
//! anywhere above caps everything below it) and change rarely, so callers re-read them
//! periodically; counters are a few O(1) files read every sample.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::file::Root;
use crate::host::{parse_pressure, Pressure};
use crate::parse::{cpu_list, fields, i64_dec, key_space_value, lines, trim, u64_dec};
use crate::process::{parse_cgroup, CgroupMembership};

/// Which cgroup layout the host uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CgroupVersion {
    /// Only v1 hierarchies are mounted.
    V1,
    /// Only the unified v2 hierarchy is mounted.
    V2,
    /// v1 controllers plus a v2 hierarchy (usually at `/sys/fs/cgroup/unified`) without them.
    Hybrid,
}

/// One cgroup filesystem mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupMount {
    /// Where it is mounted (an absolute system path).
    pub mount_point: PathBuf,
    /// Which cgroup of the hierarchy the mount shows (mountinfo's root field).
    pub root: String,
    /// v1 controllers (and `name=…` hierarchies); empty for v2.
    pub controllers: Vec<String>,
    pub v2: bool,
}

/// Parses `/proc/self/mountinfo`, keeping only `cgroup` and `cgroup2` mounts.
pub fn parse_mountinfo(bytes: &[u8]) -> Vec<CgroupMount> {
    let mut mounts = Vec::new();
    for line in lines(bytes) {
        // id parent major:minor root mount_point options [optional fields...] - fstype source super_options
        let parts: Vec<&[u8]> = fields(line).collect();
        let Some(dash) = parts.iter().position(|p| *p == b"-") else { continue };
        if parts.len() < dash + 4 || dash < 5 {
            continue;
        }
        let fstype = parts[dash + 1];
        let v2 = match fstype {
            b"cgroup2" => true,
            b"cgroup" => false,
            _ => continue,
        };
        let controllers = if v2 {
            Vec::new()
        } else {
            parts[dash + 3]
                .split(|&b| b == b',')
                .filter(|o| {
                    !matches!(*o, b"rw" | b"ro") && !o.starts_with(b"relatime") && !o.contains(&b'=')
                        || o.starts_with(b"name=")
                })
                .map(|o| String::from_utf8_lossy(o).into_owned())
                .collect()
        };
        mounts.push(CgroupMount {
            mount_point: PathBuf::from(unescape_octal(parts[4])),
            root: unescape_octal(parts[3]),
            controllers,
            v2,
        });
    }
    mounts
}

/// mountinfo escapes space, tab, newline and backslash as `\NNN` octal.
fn unescape_octal(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b)) {
            let value = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(value);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A cgroup directory and the mount point above which its ancestors are not visible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupDir {
    /// The cgroup as the process names it (`/user.slice/x`).
    pub path: String,
    /// The directory (an absolute system path, mapped through [`Root`] when read).
    pub dir: PathBuf,
    pub mount_point: PathBuf,
}

impl CgroupDir {
    /// This directory and every visible ancestor, own first.
    pub fn ancestors(&self) -> impl Iterator<Item = &Path> {
        let mount_point = self.mount_point.as_path();
        self.dir.ancestors().take_while(move |dir| dir.starts_with(mount_point))
    }
}

/// The cgroup directories that matter for one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupPaths {
    pub version: CgroupVersion,
    /// The unified hierarchy (on hybrid hosts, it holds no controllers but does hold PSI).
    pub unified: Option<CgroupDir>,
    /// v1 `cpu` controller (quota, period, throttling).
    pub cpu_v1: Option<CgroupDir>,
    /// v1 `cpuacct` controller (usage).
    pub cpuacct_v1: Option<CgroupDir>,
    pub cpuset_v1: Option<CgroupDir>,
    pub memory_v1: Option<CgroupDir>,
}

impl CgroupPaths {
    /// The path people know the process's cgroup by: v2's on v2, the memory controller's on v1.
    pub fn display_path(&self) -> Option<&str> {
        match self.version {
            CgroupVersion::V2 => self.unified.as_ref().map(|d| d.path.as_str()),
            _ => self.memory_v1.as_ref().or(self.cpu_v1.as_ref()).or(self.unified.as_ref()).map(|d| d.path.as_str()),
        }
    }
}

/// Resolves a process's cgroup memberships against the host's cgroup mounts. `None` when no
/// cgroup filesystem is mounted at all.
pub fn resolve(mounts: &[CgroupMount], memberships: &[CgroupMembership]) -> Option<CgroupPaths> {
    let has_v1 = mounts.iter().any(|m| !m.v2);
    let v2_mount = mounts.iter().find(|m| m.v2);
    let version = match (has_v1, v2_mount.is_some()) {
        (true, true) => CgroupVersion::Hybrid,
        (true, false) => CgroupVersion::V1,
        (false, true) => CgroupVersion::V2,
        (false, false) => return None,
    };
    let dir_for = |mount: &CgroupMount, path: &str| {
        // Paths outside the mount's root (a process in another namespace) cannot be resolved
        // below it; the mount point itself is the closest visible cgroup.
        let relative = if mount.root == "/" {
            Some(path.trim_start_matches('/'))
        } else {
            path.strip_prefix(mount.root.as_str()).map(|rest| rest.trim_start_matches('/'))
        };
        let dir = match relative {
            Some(rel) if !rel.split('/').any(|c| c == "..") => mount.mount_point.join(rel),
            _ => mount.mount_point.clone(),
        };
        CgroupDir { path: path.to_string(), dir, mount_point: mount.mount_point.clone() }
    };
    let v1 = |controller: &str| {
        let membership = memberships.iter().find(|m| m.controllers.iter().any(|c| c == controller))?;
        let mount = mounts.iter().find(|m| !m.v2 && m.controllers.iter().any(|c| c == controller))?;
        Some(dir_for(mount, &membership.path))
    };
    let unified = v2_mount.and_then(|mount| {
        let membership = memberships.iter().find(|m| m.is_v2())?;
        Some(dir_for(mount, &membership.path))
    });
    Some(CgroupPaths {
        version,
        unified,
        cpu_v1: v1("cpu"),
        cpuacct_v1: v1("cpuacct"),
        cpuset_v1: v1("cpuset"),
        memory_v1: v1("memory"),
    })
}

/// Reads mountinfo and `/proc/PID/cgroup` (`pid` 0 means `self`) and resolves them.
///
/// Under a host root the mounts are the host init's (their mount points are host paths, read
/// under the root), and `self`'s membership is read from this process's own `/proc`: the
/// host's `/proc/self` names this process only where it shares the host's pid namespace, and
/// both files say the same where it does.
pub fn discover(root: &Root, pid: u32) -> Result<Option<CgroupPaths>, Error> {
    let mounts = parse_mountinfo(&root.read(root.mountinfo())?);
    let (bytes, shown) = if pid == 0 && root.is_host() {
        let own = Root::default();
        (own.read("/proc/self/cgroup")?, PathBuf::from("/proc/self/cgroup"))
    } else {
        let cgroup_path = if pid == 0 { "/proc/self/cgroup".to_string() } else { format!("/proc/{pid}/cgroup") };
        (root.read(&cgroup_path)?, root.path(&cgroup_path))
    };
    let memberships = parse_cgroup(&bytes).ok_or_else(|| Error::parse(shown, "not a cgroup membership list"))?;
    Ok(resolve(&mounts, &memberships))
}

/// A CPU bandwidth limit: `quota_usec` of CPU time per `period_usec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuQuota {
    pub quota_usec: u64,
    pub period_usec: u64,
}

impl CpuQuota {
    /// How many CPUs' worth of time the quota allows.
    pub fn cpus(&self) -> f64 {
        self.quota_usec as f64 / self.period_usec as f64
    }
}

/// Parses v2 `cpu.max` (`max 100000` or `200000 100000`); `Some(None)` means unlimited.
pub fn parse_cpu_max(bytes: &[u8]) -> Option<Option<CpuQuota>> {
    let mut parts = fields(bytes);
    let quota = parts.next()?;
    let period_usec = parts.next().map_or(Some(100_000), u64_dec)?;
    if quota == b"max" {
        return Some(None);
    }
    let quota_usec = u64_dec(quota)?;
    (period_usec > 0).then_some(Some(CpuQuota { quota_usec, period_usec }))
}

/// A v1 memory limit at or above this is the kernel's "unlimited" (PAGE_COUNTER_MAX pages).
const V1_UNLIMITED_BYTES: u64 = 1 << 62;

/// The limits set on one cgroup level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CgroupLevel {
    pub path: String,
    /// `None`: no quota at this level (or no cpu controller here).
    pub cpu_quota: Option<CpuQuota>,
    /// `None`: unlimited at this level (or no memory controller here).
    pub memory_limit_bytes: Option<u64>,
    pub memory_high_bytes: Option<u64>,
    /// The cpuset's effective CPUs, where the cpuset controller is visible.
    pub cpuset_cpus: Option<Vec<u32>>,
}

/// Limits over the process's cgroup and every visible ancestor (own level first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CgroupLimits {
    pub levels: Vec<CgroupLevel>,
    /// Files that existed but could not be read or parsed, with the reason.
    pub errors: Vec<String>,
}

impl CgroupLimits {
    /// The tightest CPU quota over all levels, in CPUs.
    pub fn min_quota_cpus(&self) -> Option<f64> {
        self.levels.iter().filter_map(|l| l.cpu_quota.map(|q| q.cpus())).reduce(f64::min)
    }

    /// The smallest memory limit over all levels.
    pub fn min_memory_limit_bytes(&self) -> Option<u64> {
        self.levels.iter().filter_map(|l| l.memory_limit_bytes).min()
    }

    /// The innermost cpuset (the kernel already intersects it with its ancestors).
    pub fn cpuset_cpus(&self) -> Option<&[u32]> {
        self.levels.iter().find_map(|l| l.cpuset_cpus.as_deref())
    }
}

/// Reads an optional file: `Ok(None)` when it does not exist (the controller is not enabled
/// there), `Err` on other failures.
fn read_optional(root: &Root, path: &Path, buf: &mut Vec<u8>) -> Result<bool, Error> {
    match root.read_into(path, buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind == crate::ErrorKind::Gone => Ok(false),
        Err(e) => Err(e),
    }
}

/// Returns the index of the level for cgroup `path`, creating it if needed. Levels are keyed
/// by path, so separately mounted v1 controllers and v2 merge where their paths agree and
/// stay apart where they differ (hybrid hosts often put v1 and v2 in different places).
fn level_at(levels: &mut Vec<CgroupLevel>, path: &str) -> usize {
    if let Some(i) = levels.iter().position(|l| l.path == path) {
        return i;
    }
    levels.push(CgroupLevel {
        path: path.to_string(),
        cpu_quota: None,
        memory_limit_bytes: None,
        memory_high_bytes: None,
        cpuset_cpus: None,
    });
    levels.len() - 1
}

/// A cgroup directory and its visible ancestors as (logical path, directory), own first.
fn walk(dir: &CgroupDir) -> Vec<(String, PathBuf)> {
    let mut logical = dir.path.clone();
    dir.ancestors()
        .map(|d| {
            let entry = (if logical.is_empty() { "/".to_string() } else { logical.clone() }, d.to_path_buf());
            logical = match logical.rfind('/') {
                Some(0) | None => "/".to_string(),
                Some(i) => logical[..i].to_string(),
            };
            entry
        })
        .collect()
}

/// Walks the process's cgroups and their ancestors and reads every limit that applies.
pub fn read_limits(root: &Root, paths: &CgroupPaths) -> CgroupLimits {
    let mut buf = Vec::new();
    let mut errors = Vec::new();
    let mut levels: Vec<CgroupLevel> = Vec::new();
    // Levels are keyed by path (see `level_at`).
    let note = |errors: &mut Vec<String>, e: Error| errors.push(e.to_string());

    if let Some(dir) = paths.unified.as_ref() {
        for (logical, d) in walk(dir) {
            let i = level_at(&mut levels, &logical);
            match read_optional(root, &d.join("cpu.max"), &mut buf) {
                Ok(true) => match parse_cpu_max(&buf) {
                    Some(quota) => levels[i].cpu_quota = quota,
                    None => note(&mut errors, Error::parse(root.path(d.join("cpu.max")), "not a cpu.max value")),
                },
                Ok(false) => {}
                Err(e) => note(&mut errors, e),
            }
            for (file, slot) in [("memory.max", 0), ("memory.high", 1)] {
                match read_optional(root, &d.join(file), &mut buf) {
                    Ok(true) => {
                        let value = trim(&buf);
                        let parsed = if value == b"max" { Some(None) } else { u64_dec(value).map(Some) };
                        match (parsed, slot) {
                            (Some(v), 0) => levels[i].memory_limit_bytes = v,
                            (Some(v), _) => levels[i].memory_high_bytes = v,
                            (None, _) => note(&mut errors, Error::parse(root.path(d.join(file)), "not a byte count")),
                        }
                    }
                    Ok(false) => {}
                    Err(e) => note(&mut errors, e),
                }
            }
            match read_optional(root, &d.join("cpuset.cpus.effective"), &mut buf) {
                Ok(true) => levels[i].cpuset_cpus = cpu_list(&buf).filter(|c| !c.is_empty()),
                Ok(false) => {}
                Err(e) => note(&mut errors, e),
            }
        }
    }
    if let Some(dir) = paths.cpu_v1.as_ref() {
        for (logical, d) in walk(dir) {
            let i = level_at(&mut levels, &logical);
            let quota = read_optional(root, &d.join("cpu.cfs_quota_us"), &mut buf)
                .map(|found| found.then(|| i64_dec(trim(&buf))).flatten());
            let period = read_optional(root, &d.join("cpu.cfs_period_us"), &mut buf)
                .map(|found| found.then(|| u64_dec(trim(&buf))).flatten());
            match (quota, period) {
                (Ok(Some(q)), Ok(Some(p))) if q > 0 && p > 0 => {
                    levels[i].cpu_quota = Some(CpuQuota { quota_usec: q.unsigned_abs(), period_usec: p });
                }
                (Err(e), _) | (_, Err(e)) => note(&mut errors, e),
                _ => {}
            }
        }
    }
    if let Some(dir) = paths.memory_v1.as_ref() {
        for (logical, d) in walk(dir) {
            let i = level_at(&mut levels, &logical);
            match read_optional(root, &d.join("memory.limit_in_bytes"), &mut buf) {
                Ok(true) => match u64_dec(trim(&buf)) {
                    Some(v) if v < V1_UNLIMITED_BYTES => levels[i].memory_limit_bytes = Some(v),
                    Some(_) => {}
                    None => {
                        note(&mut errors, Error::parse(root.path(d.join("memory.limit_in_bytes")), "not a byte count"))
                    }
                },
                Ok(false) => {}
                Err(e) => note(&mut errors, e),
            }
        }
    }
    if let Some(dir) = paths.cpuset_v1.as_ref() {
        // The innermost level's effective list already reflects its ancestors.
        let i = level_at(&mut levels, &dir.path);
        for file in ["cpuset.effective_cpus", "cpuset.cpus"] {
            match read_optional(root, &dir.dir.join(file), &mut buf) {
                Ok(true) => {
                    levels[i].cpuset_cpus = cpu_list(&buf).filter(|c| !c.is_empty());
                    break;
                }
                Ok(false) => {}
                Err(e) => {
                    note(&mut errors, e);
                    break;
                }
            }
        }
    }
    // Own level first: deepest paths first, the root last.
    levels.sort_by_key(|l| std::cmp::Reverse(if l.path == "/" { 0 } else { l.path.matches('/').count() }));
    CgroupLimits { levels, errors }
}

/// Memory charged to a cgroup, by kind, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupMemoryStat {
    pub anon_bytes: Option<u64>,
    pub file_bytes: Option<u64>,
    pub shmem_bytes: Option<u64>,
    pub kernel_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
}

/// Parses `memory.stat` of either version. On v1 the hierarchical `total_*` keys are used,
/// because `memory.usage_in_bytes` is hierarchical too.
pub fn parse_memory_stat(bytes: &[u8], v1: bool) -> CgroupMemoryStat {
    let mut stat = CgroupMemoryStat::default();
    for line in lines(bytes) {
        let Some((key, value)) = key_space_value(line) else { continue };
        // The value is parsed only for the five wanted keys of about forty.
        let slot = match (v1, key) {
            (false, b"anon") | (true, b"total_rss") => &mut stat.anon_bytes,
            (false, b"file") | (true, b"total_cache") => &mut stat.file_bytes,
            (false, b"shmem") | (true, b"total_shmem") => &mut stat.shmem_bytes,
            (false, b"kernel") => &mut stat.kernel_bytes,
            (true, b"total_swap") => &mut stat.swap_bytes,
            _ => continue,
        };
        *slot = u64_dec(value);
    }
    stat
}

/// Counters read every sample: O(1) files of one cgroup.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CgroupCounters {
    pub memory_current_bytes: Option<u64>,
    pub memory_peak_bytes: Option<u64>,
    pub memory_swap_current_bytes: Option<u64>,
    pub memory_stat: Option<CgroupMemoryStat>,
    pub cpu_usage_usec: Option<u64>,
    pub cpu_user_usec: Option<u64>,
    pub cpu_system_usec: Option<u64>,
    pub cpu_nr_periods: Option<u64>,
    pub cpu_nr_throttled: Option<u64>,
    pub cpu_throttled_usec: Option<u64>,
    pub cpu_pressure: Option<Pressure>,
    pub memory_pressure: Option<Pressure>,
    pub io_pressure: Option<Pressure>,
    pub pids_current: Option<u64>,
    /// Files that existed but failed.
    pub errors: Vec<String>,
}

/// Parses `cpu.stat` of either version into the counters.
fn apply_cpu_stat(bytes: &[u8], counters: &mut CgroupCounters) {
    for line in lines(bytes) {
        let mut parts = fields(line);
        let (Some(key), Some(value)) = (parts.next(), parts.next().and_then(u64_dec)) else { continue };
        match key {
            b"usage_usec" => counters.cpu_usage_usec = Some(value),
            b"user_usec" => counters.cpu_user_usec = Some(value),
            b"system_usec" => counters.cpu_system_usec = Some(value),
            b"nr_periods" => counters.cpu_nr_periods = Some(value),
            b"nr_throttled" => counters.cpu_nr_throttled = Some(value),
            b"throttled_usec" => counters.cpu_throttled_usec = Some(value),
            // v1 reports throttled time in nanoseconds.
            b"throttled_time" => counters.cpu_throttled_usec = Some(value / 1000),
            _ => {}
        }
    }
}

/// Which counter a kept-open cgroup file feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counter {
    MemoryCurrent,
    MemoryPeak,
    SwapCurrent,
    MemoryStatV2,
    MemoryStatV1,
    CpuStat,
    CpuacctUsageNs,
    CpuPressure,
    MemoryPressure,
    IoPressure,
    PidsCurrent,
}

/// The per-sample counter files of one process's cgroups, opened once and re-read with
/// `pread`, like the per-pid files: a cgroup's counters are O(1) to produce, so the open and
/// close around them would otherwise be most of their cost.
#[derive(Debug)]
pub struct CounterReader {
    files: Vec<(Counter, crate::ProcFile)>,
    errors: Vec<String>,
}

impl CounterReader {
    /// Opens every counter file that exists for these paths. On hybrid hosts the v2 files
    /// (PSI) and the v1 controller files are both used; v1 wins where both have a value.
    pub fn open(root: &Root, paths: &CgroupPaths) -> Self {
        let mut wanted: Vec<(Counter, PathBuf)> = Vec::new();
        if let Some(u) = paths.unified.as_ref() {
            for (counter, file) in [
                (Counter::MemoryCurrent, "memory.current"),
                (Counter::MemoryPeak, "memory.peak"),
                (Counter::SwapCurrent, "memory.swap.current"),
                (Counter::MemoryStatV2, "memory.stat"),
                (Counter::CpuStat, "cpu.stat"),
                (Counter::CpuPressure, "cpu.pressure"),
                (Counter::MemoryPressure, "memory.pressure"),
                (Counter::IoPressure, "io.pressure"),
                (Counter::PidsCurrent, "pids.current"),
            ] {
                wanted.push((counter, u.dir.join(file)));
            }
        }
        if paths.version != CgroupVersion::V2 {
            if let Some(m) = paths.memory_v1.as_ref() {
                wanted.push((Counter::MemoryCurrent, m.dir.join("memory.usage_in_bytes")));
                wanted.push((Counter::MemoryPeak, m.dir.join("memory.max_usage_in_bytes")));
                wanted.push((Counter::MemoryStatV1, m.dir.join("memory.stat")));
            }
            if let Some(cpu) = paths.cpu_v1.as_ref() {
                wanted.push((Counter::CpuStat, cpu.dir.join("cpu.stat")));
            }
            if let Some(acct) = paths.cpuacct_v1.as_ref() {
                wanted.push((Counter::CpuacctUsageNs, acct.dir.join("cpuacct.usage")));
            }
        }
        let mut files = Vec::new();
        let mut errors = Vec::new();
        for (counter, path) in wanted {
            match root.open_kept(&path) {
                Ok(f) => files.push((counter, f)),
                Err(e) if e.kind == crate::ErrorKind::Gone => {}
                Err(e) => errors.push(e.to_string()),
            }
        }
        Self { files, errors }
    }

    /// The files this reader keeps open, for floor measurements.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(_, f)| f.path())
    }

    /// Re-reads every counter.
    pub fn read(&mut self) -> CgroupCounters {
        let mut c = CgroupCounters { errors: self.errors.clone(), ..CgroupCounters::default() };
        for (counter, file) in &mut self.files {
            let buf = match file.read() {
                Ok(b) => b,
                Err(e) => {
                    c.errors.push(e.to_string());
                    continue;
                }
            };
            let single = || u64_dec(trim(buf));
            match counter {
                Counter::MemoryCurrent => c.memory_current_bytes = single().or(c.memory_current_bytes),
                Counter::MemoryPeak => c.memory_peak_bytes = single().or(c.memory_peak_bytes),
                Counter::SwapCurrent => c.memory_swap_current_bytes = single(),
                Counter::MemoryStatV2 => c.memory_stat = Some(parse_memory_stat(buf, false)),
                Counter::MemoryStatV1 => c.memory_stat = Some(parse_memory_stat(buf, true)),
                Counter::CpuStat => apply_cpu_stat(buf, &mut c),
                Counter::CpuacctUsageNs => c.cpu_usage_usec = single().map(|ns| ns / 1000).or(c.cpu_usage_usec),
                Counter::CpuPressure => c.cpu_pressure = parse_pressure(buf),
                Counter::MemoryPressure => c.memory_pressure = parse_pressure(buf),
                Counter::IoPressure => c.io_pressure = parse_pressure(buf),
                Counter::PidsCurrent => c.pids_current = single(),
            }
        }
        c
    }
}

/// Reads the per-sample counters once (opening and closing the files): for one-off use.
pub fn read_counters(root: &Root, paths: &CgroupPaths) -> CgroupCounters {
    CounterReader::open(root, paths).read()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTINFO: &[u8] = b"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n\
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn mountinfo_keeps_cgroup_mounts_only() {
        let mounts = parse_mountinfo(HYBRID_MOUNTINFO);
        assert_eq!(mounts.len(), 4);
        assert_eq!(mounts[0].controllers, vec!["cpu"]);
        assert_eq!(mounts[2].controllers, vec!["name=systemd"]);
        assert!(mounts[3].v2);
        assert_eq!(mounts[3].mount_point, PathBuf::from("/sys/fs/cgroup/unified"));
    }

    #[test]
    fn resolves_hybrid_paths() {
        let mounts = parse_mountinfo(HYBRID_MOUNTINFO);
        let memberships = parse_cgroup(b"4:memory:/jobs/a\n1:cpu:/\n0::/user.slice\n").expect("parses");
        let paths = resolve(&mounts, &memberships).expect("resolves");
        assert_eq!(paths.version, CgroupVersion::Hybrid);
        assert_eq!(
            paths.memory_v1.as_ref().map(|d| d.dir.clone()),
            Some(PathBuf::from("/sys/fs/cgroup/memory/jobs/a"))
        );
        assert_eq!(
            paths.unified.as_ref().map(|d| d.dir.clone()),
            Some(PathBuf::from("/sys/fs/cgroup/unified/user.slice"))
        );
        assert_eq!(paths.display_path(), Some("/jobs/a"));
        let ancestors: Vec<_> = paths.memory_v1.as_ref().expect("memory").ancestors().map(Path::to_path_buf).collect();
        assert_eq!(ancestors.len(), 3);
    }

    #[test]
    fn resolves_namespaced_mount_root() {
        // Docker without a cgroup namespace: the mount shows the container's own cgroup.
        let mounts = parse_mountinfo(b"1 0 0:1 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n");
        let memberships = parse_cgroup(b"0::/docker/abc\n").expect("parses");
        let paths = resolve(&mounts, &memberships).expect("resolves");
        assert_eq!(paths.version, CgroupVersion::V2);
        assert_eq!(paths.unified.map(|d| d.dir), Some(PathBuf::from("/sys/fs/cgroup/")));
    }

    #[test]
    fn cpu_max() {
        assert_eq!(parse_cpu_max(b"max 100000\n"), Some(None));
        assert_eq!(
            parse_cpu_max(b"150000 100000\n"),
            Some(Some(CpuQuota { quota_usec: 150_000, period_usec: 100_000 }))
        );
        assert_eq!(parse_cpu_max(b"1 0\n"), None);
        assert_eq!(parse_cpu_max(b"junk\n"), None);
    }

    #[test]
    fn escaped_mount_point() {
        assert_eq!(unescape_octal(b"/a\\040b"), "/a b");
    }
}
