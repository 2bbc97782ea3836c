//! DRM client usage from `/proc/PID/fdinfo/FD` (the kernel's `drm-usage-stats`): one open DRM
//! file is one client of one GPU, and the drivers that implement `show_fdinfo` print what that
//! client used in `drm-` keys. Pure parsing; which fds to read is the caller's business.
//!
//! The keys read here:
//! - `drm-driver` (every DRM fdinfo has it: its absence means "not a DRM fd"),
//!   `drm-pdev` (the PCI device), `drm-client-id` (unique per device, or system-wide when there
//!   is no `drm-pdev`): together they name a client, so that one client reached through several
//!   fds or processes is counted once.
//! - `drm-engine-<e>: N ns` (busy time), with `drm-engine-capacity-<e>` (how many engines of
//!   that class share the counter; 1 when absent); `drm-cycles-<e>` and `drm-total-cycles-<e>`
//!   (xe reports busy cycles against the GPU's elapsed cycles instead of nanoseconds).
//! - `drm-total-<r>`, `drm-resident-<r>` and the older `drm-memory-<r>` (an alias of resident):
//!   memory by region, in bytes with an optional `KiB` or `MiB`.
//!
//! Anything else (`pos:`, `flags:`, `amd-*`, `drm-shared-*`, `drm-maxfreq-*`) is skipped.

use serde::{Deserialize, Serialize};

use crate::parse::{key_value, lines, trim, u64_dec};

/// At most this many engines and regions are kept per fdinfo: a driver has a handful of each;
/// a hostile or corrupt file cannot grow a client without bound.
pub const MAX_KEYS: usize = 32;

/// One engine class's counters, as one fdinfo gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrmEngine {
    pub name: String,
    /// `drm-engine-<e>`: cumulative busy time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_ns: Option<u64>,
    /// `drm-cycles-<e>`: cumulative busy cycles (xe, msm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles: Option<u64>,
    /// `drm-total-cycles-<e>`: the GPU's elapsed cycles on the same clock (xe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_cycles: Option<u64>,
    /// `drm-engine-capacity-<e>`: engines of this class behind the counter (1 when absent).
    pub capacity: u32,
}

/// One memory region's sizes, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrmRegion {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<u64>,
    /// `drm-resident-<r>`, or `drm-memory-<r>` where only the older key is printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident_bytes: Option<u64>,
}

impl DrmRegion {
    /// What the client holds in the region: resident where the driver says, else total.
    pub fn held_bytes(&self) -> Option<u64> {
        self.resident_bytes.or(self.total_bytes)
    }
}

/// One DRM fd's fdinfo.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrmFdinfo {
    pub driver: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdev: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<u64>,
    /// Sorted by name.
    pub engines: Vec<DrmEngine>,
    /// Sorted by name.
    pub regions: Vec<DrmRegion>,
    /// Engine or region keys past [`MAX_KEYS`], and `drm-` keys whose value did not parse.
    pub skipped_keys: u32,
}

impl DrmFdinfo {
    /// Bytes held over all regions (`None` when the driver reports no memory).
    pub fn held_bytes(&self) -> Option<u64> {
        self.regions.iter().filter_map(DrmRegion::held_bytes).reduce(u64::saturating_add)
    }

    fn engine(&mut self, name: &[u8]) -> Option<&mut DrmEngine> {
        let name = std::str::from_utf8(name).ok().filter(|n| !n.is_empty())?;
        match self.engines.binary_search_by(|e| e.name.as_str().cmp(name)) {
            Ok(i) => Some(&mut self.engines[i]),
            Err(_) if self.engines.len() >= MAX_KEYS => None,
            Err(i) => {
                self.engines.insert(i, DrmEngine { name: name.to_string(), capacity: 1, ..DrmEngine::default() });
                Some(&mut self.engines[i])
            }
        }
    }

    fn region(&mut self, name: &[u8]) -> Option<&mut DrmRegion> {
        let name = std::str::from_utf8(name).ok().filter(|n| !n.is_empty())?;
        match self.regions.binary_search_by(|r| r.name.as_str().cmp(name)) {
            Ok(i) => Some(&mut self.regions[i]),
            Err(_) if self.regions.len() >= MAX_KEYS => None,
            Err(i) => {
                self.regions.insert(i, DrmRegion { name: name.to_string(), ..DrmRegion::default() });
                Some(&mut self.regions[i])
            }
        }
    }
}

/// `123`, `123 KiB`, `123 MiB` → bytes.
fn memory_bytes(value: &[u8]) -> Option<u64> {
    let value = trim(value);
    let (number, unit) = match value.iter().position(|b| *b == b' ' || *b == b'\t') {
        Some(i) => (&value[..i], trim(&value[i..])),
        None => (value, &b""[..]),
    };
    let n = u64_dec(number)?;
    match unit {
        b"" | b"B" => Some(n),
        b"KiB" => n.checked_mul(1 << 10),
        b"MiB" => n.checked_mul(1 << 20),
        b"GiB" => n.checked_mul(1 << 30),
        _ => None,
    }
}

/// `123 ns` (or a bare number, as cycles are printed) → the number.
fn counter(value: &[u8], unit: &[u8]) -> Option<u64> {
    let value = trim(value);
    let number = value.strip_suffix(unit).map_or(value, trim);
    u64_dec(number)
}

/// Parses one fdinfo file. `None` when it is not a DRM client's (no `drm-driver` key).
pub fn parse_fdinfo(bytes: &[u8]) -> Option<DrmFdinfo> {
    let mut out = DrmFdinfo::default();
    let mut driver = None;
    for line in lines(bytes) {
        let Some((key, value)) = key_value(line) else { continue };
        let Some(key) = key.strip_prefix(b"drm-") else { continue };
        let ok = if key == b"driver" {
            driver = std::str::from_utf8(value).ok().filter(|d| !d.is_empty()).map(str::to_string);
            driver.is_some()
        } else if key == b"pdev" {
            out.pdev = std::str::from_utf8(value).ok().filter(|d| !d.is_empty()).map(str::to_string);
            out.pdev.is_some()
        } else if key == b"client-id" {
            out.client_id = u64_dec(value);
            out.client_id.is_some()
        } else if let Some(name) = key.strip_prefix(b"engine-capacity-") {
            match u64_dec(value).and_then(|c| u32::try_from(c).ok()).filter(|c| *c > 0) {
                Some(c) => out.engine(name).map(|e| e.capacity = c).is_some(),
                None => false,
            }
        } else if let Some(name) = key.strip_prefix(b"engine-") {
            match counter(value, b"ns") {
                Some(ns) => out.engine(name).map(|e| e.busy_ns = Some(ns)).is_some(),
                None => false,
            }
        } else if let Some(name) = key.strip_prefix(b"total-cycles-") {
            match counter(value, b"") {
                Some(c) => out.engine(name).map(|e| e.total_cycles = Some(c)).is_some(),
                None => false,
            }
        } else if let Some(name) = key.strip_prefix(b"cycles-") {
            match counter(value, b"") {
                Some(c) => out.engine(name).map(|e| e.cycles = Some(c)).is_some(),
                None => false,
            }
        } else if let Some(name) = key.strip_prefix(b"total-") {
            match memory_bytes(value) {
                Some(b) => out.region(name).map(|r| r.total_bytes = Some(b)).is_some(),
                None => false,
            }
        } else if let Some(name) = key.strip_prefix(b"resident-") {
            match memory_bytes(value) {
                Some(b) => out.region(name).map(|r| r.resident_bytes = Some(b)).is_some(),
                None => false,
            }
        } else if let Some(name) = key.strip_prefix(b"memory-") {
            // The older alias of resident: it never overrides a `drm-resident-` line.
            match memory_bytes(value) {
                Some(b) => out.region(name).map(|r| r.resident_bytes = r.resident_bytes.or(Some(b))).is_some(),
                None => false,
            }
        } else {
            true
        };
        if !ok {
            out.skipped_keys = out.skipped_keys.saturating_add(1);
        }
    }
    out.driver = driver?;
    Some(out)
}

/// Whether a `/proc/PID/fd/N` link target is a DRM device node (`/dev/dri/card0`,
/// `/dev/dri/renderD128`; also as a path under a host root).
pub fn is_drm_node(target: &[u8]) -> bool {
    let name = match target.iter().rposition(|b| *b == b'/') {
        Some(slash) if target[..slash].ends_with(b"/dev/dri") => &target[slash + 1..],
        _ => return false,
    };
    name.starts_with(b"card") || name.starts_with(b"renderD")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each fixture is the shape its driver's `show_fdinfo` prints (keys, order, units), written
    /// from the kernel's drm-usage-stats document and the drivers' sources; no GPU was at hand
    /// to capture them on this machine.
    pub(crate) const AMDGPU: &str = "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1115\n\
drm-driver:\tamdgpu\ndrm-client-id:\t42\ndrm-pdev:\t0000:03:00.0\npasid:\t32771\n\
drm-total-cpu:\t0\ndrm-shared-cpu:\t0\ndrm-active-cpu:\t0\ndrm-resident-cpu:\t0\ndrm-purgeable-cpu:\t0\n\
drm-total-gtt:\t2392 KiB\ndrm-shared-gtt:\t0\ndrm-active-gtt:\t0\ndrm-resident-gtt:\t2392 KiB\ndrm-purgeable-gtt:\t0\n\
drm-total-vram:\t44564 KiB\ndrm-shared-vram:\t31952 KiB\ndrm-active-vram:\t0\ndrm-resident-vram:\t44564 KiB\n\
drm-purgeable-vram:\t0\ndrm-memory-vram:\t44564 KiB\ndrm-memory-gtt:\t2392 KiB\ndrm-memory-cpu:\t0 KiB\n\
amd-memory-visible-vram:\t44512 KiB\namd-evicted-vram:\t0 KiB\n\
drm-engine-gfx:\t1787498 ns\ndrm-engine-compute:\t0 ns\ndrm-engine-dec:\t0 ns\ndrm-engine-enc:\t0 ns\n";

    pub(crate) const I915: &str = "pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t795\n\
drm-driver:\ti915\ndrm-client-id:\t7\ndrm-pdev:\t0000:00:02.0\n\
drm-total-system0:\t17408 KiB\ndrm-shared-system0:\t0\ndrm-active-system0:\t0\ndrm-resident-system0:\t17408 KiB\n\
drm-purgeable-system0:\t0\ndrm-total-stolen-system0:\t0\ndrm-shared-stolen-system0:\t0\n\
drm-active-stolen-system0:\t0\ndrm-resident-stolen-system0:\t0\ndrm-purgeable-stolen-system0:\t0\n\
drm-engine-render:\t1402386584 ns\ndrm-engine-copy:\t0 ns\ndrm-engine-video:\t0 ns\n\
drm-engine-capacity-video:\t2\ndrm-engine-video-enhance:\t0 ns\n";

    pub(crate) const XE: &str = "pos:\t0\nflags:\t0100002\nmnt_id:\t25\nino:\t1043\n\
drm-driver:\txe\ndrm-client-id:\t49\ndrm-pdev:\t0000:03:00.0\n\
drm-total-system:\t0\ndrm-shared-system:\t0\ndrm-active-system:\t0\ndrm-resident-system:\t0\ndrm-purgeable-system:\t0\n\
drm-total-gtt:\t4 KiB\ndrm-shared-gtt:\t0\ndrm-active-gtt:\t0\ndrm-resident-gtt:\t4 KiB\n\
drm-total-vram0:\t22376 KiB\ndrm-shared-vram0:\t0\ndrm-active-vram0:\t0\ndrm-resident-vram0:\t22376 KiB\n\
drm-cycles-rcs:\t28257900\ndrm-total-cycles-rcs:\t7655183225\ndrm-cycles-bcs:\t0\ndrm-total-cycles-bcs:\t7655183225\n\
drm-cycles-vcs:\t0\ndrm-total-cycles-vcs:\t7655183225\ndrm-engine-capacity-vcs:\t2\n\
drm-cycles-vecs:\t0\ndrm-total-cycles-vecs:\t7655183225\ndrm-engine-capacity-vecs:\t2\n\
drm-cycles-ccs:\t0\ndrm-total-cycles-ccs:\t7655183225\ndrm-engine-capacity-ccs:\t4\n";

    /// msm is a platform device: no `drm-pdev`, a system-wide client id.
    pub(crate) const MSM: &str = "pos:\t0\nflags:\t02400002\nmnt_id:\t23\nino:\t376\n\
drm-driver:\tmsm\ndrm-client-id:\t3\ndrm-engine-gpu:\t2161637520 ns\ndrm-cycles-gpu:\t1565716893\n\
drm-maxfreq-gpu:\t710000000 Hz\ndrm-total-memory:\t11632 KiB\ndrm-shared-memory:\t0\n\
drm-active-memory:\t0\ndrm-resident-memory:\t11632 KiB\ndrm-purgeable-memory:\t0\n";

    /// NVIDIA's `nvidia-drm` files carry the common keys only: no engine or memory keys, which is
    /// why NVIDIA GPUs are read through NVML. (The common keys are the spec's; not a capture.)
    pub(crate) const NVIDIA_DRM: &str =
        "pos:\t0\nflags:\t02100002\nmnt_id:\t25\nino:\t1200\ndrm-driver:\tnvidia-drm\ndrm-pdev:\t0000:01:00.0\ndrm-client-id:\t5\n";

    #[test]
    fn amdgpu_engines_and_memory() {
        let f = parse_fdinfo(AMDGPU.as_bytes()).expect("test fixture");
        assert_eq!(f.driver, "amdgpu");
        assert_eq!(f.pdev.as_deref(), Some("0000:03:00.0"));
        assert_eq!(f.client_id, Some(42));
        let names: Vec<_> = f.engines.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["compute", "dec", "enc", "gfx"]);
        assert_eq!(f.engines[3].busy_ns, Some(1_787_498));
        assert_eq!(f.engines[3].capacity, 1);
        // vram and gtt resident, and the cpu region's 0: the older drm-memory- lines agree.
        let vram = f.regions.iter().find(|r| r.name == "vram").expect("test fixture");
        assert_eq!(vram.resident_bytes, Some(44_564 * 1024));
        assert_eq!(vram.total_bytes, Some(44_564 * 1024));
        assert_eq!(f.held_bytes(), Some((44_564 + 2392) * 1024));
        assert_eq!(f.skipped_keys, 0);
    }

    #[test]
    fn i915_capacity_and_regions() {
        let f = parse_fdinfo(I915.as_bytes()).expect("test fixture");
        let video = f.engines.iter().find(|e| e.name == "video").expect("test fixture");
        assert_eq!(video.capacity, 2);
        let render = f.engines.iter().find(|e| e.name == "render").expect("test fixture");
        assert_eq!((render.busy_ns, render.capacity), (Some(1_402_386_584), 1));
        assert!(f.engines.iter().any(|e| e.name == "video-enhance"));
        assert_eq!(f.held_bytes(), Some(17_408 * 1024));
    }

    #[test]
    fn xe_reports_cycles_not_nanoseconds() {
        let f = parse_fdinfo(XE.as_bytes()).expect("test fixture");
        let rcs = f.engines.iter().find(|e| e.name == "rcs").expect("test fixture");
        assert_eq!((rcs.busy_ns, rcs.cycles, rcs.total_cycles), (None, Some(28_257_900), Some(7_655_183_225)));
        assert_eq!(f.engines.iter().find(|e| e.name == "ccs").expect("test fixture").capacity, 4);
        assert_eq!(f.held_bytes(), Some((4 + 22_376) * 1024));
    }

    #[test]
    fn msm_has_no_pdev_and_nvidia_drm_no_usage() {
        let f = parse_fdinfo(MSM.as_bytes()).expect("test fixture");
        assert_eq!((f.pdev.as_deref(), f.client_id), (None, Some(3)));
        let gpu = &f.engines[0];
        assert_eq!((gpu.busy_ns, gpu.cycles), (Some(2_161_637_520), Some(1_565_716_893)));
        assert_eq!(f.held_bytes(), Some(11_632 * 1024));
        let n = parse_fdinfo(NVIDIA_DRM.as_bytes()).expect("test fixture");
        assert_eq!((n.driver.as_str(), n.engines.len(), n.held_bytes()), ("nvidia-drm", 0, None));
    }

    #[test]
    fn not_drm_and_garbage() {
        // An ordinary file's fdinfo, an eventfd's, empty bytes, and drm keys with no driver.
        assert_eq!(parse_fdinfo(b"pos:\t0\nflags:\t02\nmnt_id:\t3\nino:\t4\n"), None);
        assert_eq!(parse_fdinfo(b"pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t1\neventfd-count: 0\neventfd-id: 3\n"), None);
        assert_eq!(parse_fdinfo(b""), None);
        assert_eq!(parse_fdinfo(b"drm-engine-gfx:\t5 ns\n"), None);
        // Bad values are counted, never panics; a later good line still counts.
        let f = parse_fdinfo(b"drm-driver:\tx\ndrm-engine-gfx:\tlots ns\ndrm-total-vram:\t1 TiB\ndrm-client-id:\t-1\ndrm-engine-capacity-gfx:\t0\ndrm-engine-rcs:\t7 ns\n").expect("test fixture");
        assert_eq!(f.skipped_keys, 4);
        assert_eq!(f.engines.len(), 1);
        assert_eq!(f.engines[0].busy_ns, Some(7));
        // A file of a thousand engines keeps MAX_KEYS of them and counts the rest.
        let mut many = String::from("drm-driver:\tx\n");
        for i in 0..1000 {
            many.push_str(&format!("drm-engine-e{i}:\t{i} ns\n"));
        }
        let f = parse_fdinfo(many.as_bytes()).expect("test fixture");
        assert_eq!((f.engines.len(), f.skipped_keys), (MAX_KEYS, 1000 - MAX_KEYS as u32));
    }

    #[test]
    fn drm_nodes() {
        assert!(is_drm_node(b"/dev/dri/renderD128"));
        assert!(is_drm_node(b"/dev/dri/card1"));
        assert!(!is_drm_node(b"/dev/accel/accel0"));
        assert!(is_drm_node(b"/host/dev/dri/card0"));
        assert!(!is_drm_node(b"/dev/null"));
        assert!(!is_drm_node(b"socket:[1234]"));
        assert!(!is_drm_node(b"/tmp/dev/dri-card0"));
    }
}
