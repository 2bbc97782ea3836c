//! Energy and power counters in `/sys`: RAPL zones under `/sys/class/powercap` (`energy_uj`,
//! cumulative microjoules that wrap to 0 past `max_energy_range_uj`) and hwmon chips under
//! `/sys/class/hwmon` (`power*_input` or `power*_average` in microwatts, `energy*_input` in
//! cumulative microjoules). [`discover`] lists what a root has and which of it this process may
//! read; the caller keeps the readable files open and re-reads them.
//!
//! Which zones make the host's total: RAPL's `psys` zone, where there is one, is the whole
//! platform, so it alone is the total. Otherwise the total is every package (`intel-rapl:N`)
//! plus the `dram` subzones, which RAPL keeps outside the package; the other subzones (`core`,
//! `uncore`) are parts of their package and are shown but not added. hwmon sensors are shown
//! and never added: they may measure the same rails as RAPL.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::ErrorKind;
use crate::file::Root;
use crate::parse::{trim, u64_dec};

/// At most this many sources are kept: a machine has a few RAPL zones and a few hwmon sensors.
pub const MAX_SOURCES: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// A cumulative counter in microjoules.
    EnergyMicrojoules,
    /// An instantaneous reading in microwatts.
    PowerMicrowatts,
}

/// One file that reports energy or power.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerSource {
    /// What a person reads: `rapl:package-0`, `rapl:package-0/dram`, `hwmon:amdgpu/PPT`.
    pub domain: String,
    /// The file, as an absolute system path (map it through the root to read it).
    pub path: PathBuf,
    pub unit: Unit,
    /// Where a RAPL counter wraps to 0.
    pub max_energy_range_uj: Option<u64>,
    /// Part of the host's total (see the module's note).
    pub in_host_total: bool,
}

/// A source that exists but could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    pub domain: String,
    pub path: PathBuf,
    pub kind: ErrorKind,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Discovery {
    pub sources: Vec<PowerSource>,
    pub unreadable: Vec<Unreadable>,
    /// Sources past [`MAX_SOURCES`], not kept.
    pub skipped: usize,
}

/// One counter value (`energy_uj`, `power1_input`): a decimal and a newline.
pub fn parse_counter(bytes: &[u8]) -> Option<u64> {
    u64_dec(trim(bytes))
}

/// Microjoules used between two readings of one counter. A RAPL counter wraps to 0 once past
/// `max_range_uj`, so a later value below the earlier one is a wrap when the range is known
/// (at most one wrap: readers sample far more often than a counter can wrap twice, about every
/// 40 minutes at 100 W for a 2^38 µJ range), and `None` (a reset: no figure) when it is not.
pub fn energy_delta_uj(earlier: u64, later: u64, max_range_uj: Option<u64>) -> Option<u64> {
    if later >= earlier {
        return Some(later - earlier);
    }
    let max = max_range_uj?;
    if earlier > max {
        return None;
    }
    // The counter ran from `earlier` up to `max`, wrapped to 0, then ran up to `later`.
    Some(max - earlier + later + 1)
}

fn read_text(root: &Root, path: &Path) -> Result<String, ErrorKind> {
    match root.read(path) {
        Ok(bytes) => Ok(String::from_utf8_lossy(trim(&bytes)).into_owned()),
        Err(e) => Err(e.kind),
    }
}

/// Sorted directory entries of an absolute system directory; none when it does not exist.
fn entries(root: &Root, dir: &str) -> Vec<String> {
    let Ok(read) = std::fs::read_dir(root.path(dir)) else { return Vec::new() };
    let mut names: Vec<String> = read.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
    names.sort_by_key(|n| natural(n));
    names
}

/// `hwmon10` after `hwmon9`, `power10_input` after `power2_input`.
fn natural(name: &str) -> (String, u64, String) {
    let start = name.find(|c: char| c.is_ascii_digit()).unwrap_or(name.len());
    let end = name[start..].find(|c: char| !c.is_ascii_digit()).map_or(name.len(), |e| start + e);
    (name[..start].to_string(), name[start..end].parse().unwrap_or(0), name[end..].to_string())
}

/// Tries one read of a counter file: a source if it reads as a number, unreadable otherwise.
fn probe(root: &Root, source: PowerSource, out: &mut Discovery) {
    if out.sources.len() + out.unreadable.len() >= MAX_SOURCES {
        out.skipped += 1;
        return;
    }
    match root.read(&source.path) {
        Ok(bytes) if parse_counter(&bytes).is_some() => out.sources.push(source),
        Ok(_) => out.unreadable.push(Unreadable { domain: source.domain, path: source.path, kind: ErrorKind::Parse }),
        Err(e) => out.unreadable.push(Unreadable { domain: source.domain, path: source.path, kind: e.kind }),
    }
}

/// Lists the root's RAPL zones and hwmon sensors, reading each counter once to learn whether
/// this process may read it.
pub fn discover(root: &Root) -> Discovery {
    let mut out = Discovery::default();
    rapl(root, &mut out);
    hwmon(root, &mut out);
    out
}

fn rapl(root: &Root, out: &mut Discovery) {
    const DIR: &str = "/sys/class/powercap";
    let zones: Vec<String> = entries(root, DIR).into_iter().filter(|z| z.starts_with("intel-rapl:")).collect();
    let name_of = |zone: &str| read_text(root, &Path::new(DIR).join(zone).join("name")).ok();
    let has_psys = zones.iter().any(|z| name_of(z).as_deref() == Some("psys"));
    for zone in &zones {
        let dir = Path::new(DIR).join(zone);
        let name = name_of(zone).unwrap_or_else(|| zone.clone());
        // `intel-rapl:0` is a package (or psys); `intel-rapl:0:1` a subzone of package 0.
        let parent = zone.rsplit_once(':').filter(|(head, _)| head.contains(':')).map(|(head, _)| head);
        let (domain, in_host_total) = match parent {
            None => (format!("rapl:{name}"), if has_psys { name == "psys" } else { true }),
            Some(parent) => {
                let parent_name = name_of(parent).unwrap_or_else(|| parent.to_string());
                (format!("rapl:{parent_name}/{name}"), !has_psys && name == "dram")
            }
        };
        let max = read_text(root, &dir.join("max_energy_range_uj")).ok().and_then(|t| t.parse().ok());
        let source = PowerSource {
            domain,
            path: dir.join("energy_uj"),
            unit: Unit::EnergyMicrojoules,
            max_energy_range_uj: max,
            in_host_total,
        };
        probe(root, source, out);
    }
}

fn hwmon(root: &Root, out: &mut Discovery) {
    const DIR: &str = "/sys/class/hwmon";
    for chip in entries(root, DIR) {
        let dir = Path::new(DIR).join(&chip);
        let chip_name = read_text(root, &dir.join("name")).unwrap_or_else(|_| chip.clone());
        let files = entries(root, dir.to_str().unwrap_or(DIR));
        for file in &files {
            let (unit, channel) = if let Some(ch) = file.strip_prefix("energy").and_then(|r| r.strip_suffix("_input")) {
                (Unit::EnergyMicrojoules, ch)
            } else if let Some(ch) = file.strip_prefix("power").and_then(|r| r.strip_suffix("_input")) {
                (Unit::PowerMicrowatts, ch)
            } else if let Some(ch) = file.strip_prefix("power").and_then(|r| r.strip_suffix("_average")) {
                // amdgpu's older name for its reading: used only where there is no `_input`.
                if files.iter().any(|f| *f == format!("power{ch}_input")) {
                    continue;
                }
                (Unit::PowerMicrowatts, ch)
            } else {
                continue;
            };
            if channel.is_empty() || !channel.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let kind = if unit == Unit::EnergyMicrojoules { "energy" } else { "power" };
            let label = read_text(root, &dir.join(format!("{kind}{channel}_label")))
                .ok()
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| format!("{kind}{channel}"));
            let source = PowerSource {
                domain: format!("hwmon:{chip_name}/{label}"),
                path: dir.join(file),
                unit,
                max_energy_range_uj: None,
                in_host_total: false,
            };
            probe(root, source, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let p = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().expect("test fixture")).expect("test fixture");
        std::fs::write(p, text).expect("test fixture");
    }

    /// A two-package server's RAPL tree (packages, core, dram) and a desktop's hwmon chips
    /// (amdgpu with `power1_average` only, a meter with energy and labelled power).
    pub(crate) fn server_tree(root: &Path) {
        for (zone, name, uj) in [
            ("intel-rapl:0", "package-0", "1000000"),
            ("intel-rapl:0:0", "core", "600000"),
            ("intel-rapl:0:1", "dram", "200000"),
            ("intel-rapl:1", "package-1", "2000000"),
        ] {
            write(root, &format!("/sys/class/powercap/{zone}/name"), &format!("{name}\n"));
            write(root, &format!("/sys/class/powercap/{zone}/energy_uj"), &format!("{uj}\n"));
            write(root, &format!("/sys/class/powercap/{zone}/max_energy_range_uj"), "262143328850\n");
        }
        // The control type directory has no counter.
        write(root, "/sys/class/powercap/intel-rapl/enabled", "1\n");
        write(root, "/sys/class/hwmon/hwmon0/name", "k10temp\n");
        write(root, "/sys/class/hwmon/hwmon0/temp1_input", "45000\n");
        write(root, "/sys/class/hwmon/hwmon2/name", "amdgpu\n");
        write(root, "/sys/class/hwmon/hwmon2/power1_average", "35000000\n");
        write(root, "/sys/class/hwmon/hwmon2/power1_cap", "200000000\n");
        write(root, "/sys/class/hwmon/hwmon10/name", "meter\n");
        write(root, "/sys/class/hwmon/hwmon10/energy1_input", "5000000\n");
        write(root, "/sys/class/hwmon/hwmon10/power1_input", "80000000\n");
        write(root, "/sys/class/hwmon/hwmon10/power1_label", "PSU\n");
        write(root, "/proc/stat", "cpu  0 0 0 0 0 0 0 0 0 0\n");
    }

    #[test]
    fn a_servers_rapl_and_hwmon_sources() {
        let dir = tempfile::tempdir().expect("test fixture");
        server_tree(dir.path());
        let found = discover(&Root::new(dir.path()));
        let names: Vec<_> = found.sources.iter().map(|s| (s.domain.as_str(), s.in_host_total)).collect();
        assert_eq!(
            names,
            [
                ("rapl:package-0", true),
                ("rapl:package-0/core", false),
                ("rapl:package-0/dram", true),
                ("rapl:package-1", true),
                ("hwmon:amdgpu/power1", false),
                ("hwmon:meter/energy1", false),
                ("hwmon:meter/PSU", false),
            ]
        );
        assert_eq!(found.sources[0].path, Path::new("/sys/class/powercap/intel-rapl:0/energy_uj"));
        assert_eq!(found.sources[0].max_energy_range_uj, Some(262_143_328_850));
        assert_eq!(found.sources[4].unit, Unit::PowerMicrowatts);
        assert_eq!(found.sources[5].unit, Unit::EnergyMicrojoules);
        assert!(found.unreadable.is_empty());
    }

    #[test]
    fn psys_alone_is_the_total() {
        let dir = tempfile::tempdir().expect("test fixture");
        server_tree(dir.path());
        write(dir.path(), "/sys/class/powercap/intel-rapl:2/name", "psys\n");
        write(dir.path(), "/sys/class/powercap/intel-rapl:2/energy_uj", "9\n");
        let found = discover(&Root::new(dir.path()));
        let total: Vec<_> = found.sources.iter().filter(|s| s.in_host_total).map(|s| s.domain.as_str()).collect();
        assert_eq!(total, ["rapl:psys"]);
    }

    #[test]
    fn absent_and_unreadable_sources() {
        let empty = tempfile::tempdir().expect("test fixture");
        assert_eq!(discover(&Root::new(empty.path())), Discovery::default());
        let dir = tempfile::tempdir().expect("test fixture");
        server_tree(dir.path());
        write(dir.path(), "/sys/class/powercap/intel-rapl:1/energy_uj", "not a number\n");
        let locked = dir.path().join("sys/class/powercap/intel-rapl:0/energy_uj");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).expect("test fixture");
        let found = discover(&Root::new(dir.path()));
        let unreadable: Vec<_> = found.unreadable.iter().map(|u| (u.domain.as_str(), u.kind)).collect();
        // Root reads a mode-000 file anyway; everyone else is refused, as with RAPL since 5.10.
        let is_root = unsafe { libc::geteuid() } == 0;
        let mut want = vec![("rapl:package-1", ErrorKind::Parse)];
        if !is_root {
            want.insert(0, ("rapl:package-0", ErrorKind::Permission));
        }
        assert_eq!(unreadable, want);
        assert!(!found.sources.iter().any(|s| s.domain == "rapl:package-1"));
    }

    #[test]
    fn deltas_wrap_at_the_range() {
        assert_eq!(energy_delta_uj(100, 250, Some(1000)), Some(150));
        // 990 → 1000 is 10, the wrap to 0 is 1, then 0 → 5 is 5.
        assert_eq!(energy_delta_uj(990, 5, Some(1000)), Some(16));
        assert_eq!(energy_delta_uj(990, 5, None), None);
        assert_eq!(energy_delta_uj(2000, 5, Some(1000)), None);
        assert_eq!(energy_delta_uj(7, 7, Some(1000)), Some(0));
        assert_eq!(parse_counter(b"262143328850\n"), Some(262_143_328_850));
        assert_eq!(parse_counter(b"-1\n"), None);
        assert_eq!(parse_counter(b""), None);
    }
}
