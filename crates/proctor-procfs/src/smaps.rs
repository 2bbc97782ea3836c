//! `/proc/PID/smaps` and `/proc/PID/smaps_rollup` with every memory counter, per mapping.
//!
//! Both files have one shape: a header line per mapping (`start-end perms offset dev inode
//! [path]`) followed by `Key: N kB` lines. `smaps_rollup` is that shape with a single mapping
//! named `[rollup]` whose counters are the sums. [`crate::process::parse_smaps_rollup`] keeps
//! the few counters the sampler stores with every sample; this module keeps them all, for
//! `proctor share`. Reading either file walks the target's pages under its mmap lock; this
//! module only parses.

use serde::Serialize;

use crate::parse::{find_byte, kb_value, key_value, lines, trim};

/// A mapping's (or a whole process's) memory, in bytes. A counter the kernel did not print is
/// 0; [`Mapping::complete`] says whether the ones proctor relies on were all there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub rss_bytes: u64,
    pub pss_bytes: u64,
    pub pss_anon_bytes: u64,
    pub pss_file_bytes: u64,
    pub pss_shmem_bytes: u64,
    pub shared_clean_bytes: u64,
    pub shared_dirty_bytes: u64,
    pub private_clean_bytes: u64,
    pub private_dirty_bytes: u64,
    /// Resident anonymous pages (`Anonymous`): copied-on-write pages of a forked worker are
    /// anonymous even inside a file's private mapping.
    pub anonymous_bytes: u64,
    pub swap_bytes: u64,
    pub swap_pss_bytes: u64,
}

const SEEN_ALL: u8 = 0b11_1111;

impl Counters {
    /// Memory only this process maps: private clean and dirty (psutil's definition).
    pub fn uss_bytes(&self) -> u64 {
        self.private_clean_bytes + self.private_dirty_bytes
    }

    /// Pages still shared with another process, clean or dirty.
    pub fn shared_bytes(&self) -> u64 {
        self.shared_clean_bytes + self.shared_dirty_bytes
    }

    /// Resident pages that are not anonymous: file-backed and shmem.
    pub fn file_bytes(&self) -> u64 {
        self.rss_bytes.saturating_sub(self.anonymous_bytes)
    }

    /// Adds another mapping's counters (a total over mappings).
    pub fn add(&mut self, other: &Counters) {
        self.rss_bytes += other.rss_bytes;
        self.pss_bytes += other.pss_bytes;
        self.pss_anon_bytes += other.pss_anon_bytes;
        self.pss_file_bytes += other.pss_file_bytes;
        self.pss_shmem_bytes += other.pss_shmem_bytes;
        self.shared_clean_bytes += other.shared_clean_bytes;
        self.shared_dirty_bytes += other.shared_dirty_bytes;
        self.private_clean_bytes += other.private_clean_bytes;
        self.private_dirty_bytes += other.private_dirty_bytes;
        self.anonymous_bytes += other.anonymous_bytes;
        self.swap_bytes += other.swap_bytes;
        self.swap_pss_bytes += other.swap_pss_bytes;
    }

    /// Records one `Key: value` line; returns the bit of the counters [`Mapping::complete`]
    /// needs (0 for the others, and for a key this struct does not keep).
    fn set(&mut self, key: &[u8], value: u64) -> u8 {
        let (slot, bit) = match key {
            b"Rss" => (&mut self.rss_bytes, 1),
            b"Pss" => (&mut self.pss_bytes, 2),
            b"Shared_Clean" => (&mut self.shared_clean_bytes, 4),
            b"Shared_Dirty" => (&mut self.shared_dirty_bytes, 8),
            b"Private_Clean" => (&mut self.private_clean_bytes, 16),
            b"Private_Dirty" => (&mut self.private_dirty_bytes, 32),
            b"Pss_Anon" => (&mut self.pss_anon_bytes, 0),
            b"Pss_File" => (&mut self.pss_file_bytes, 0),
            b"Pss_Shmem" => (&mut self.pss_shmem_bytes, 0),
            b"Anonymous" => (&mut self.anonymous_bytes, 0),
            b"Swap" => (&mut self.swap_bytes, 0),
            b"SwapPss" => (&mut self.swap_pss_bytes, 0),
            _ => return 0,
        };
        *slot = value;
        bit
    }
}

/// One mapping: its header line and its counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// `rw-p`: read, write, execute, and `p` private (copy-on-write) or `s` shared.
    pub perms: String,
    pub offset: u64,
    pub inode: u64,
    /// The file, `[heap]`, `[stack]`, `[anon:NAME]`, `[rollup]`, or empty for anonymous memory.
    pub path: String,
    pub counters: Counters,
    /// Whether `Rss`, `Pss` and the four shared/private counters were all printed.
    pub complete: bool,
}

impl Mapping {
    pub fn size_bytes(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// Parses `smaps` (every mapping) or `smaps_rollup` (one `[rollup]` mapping). `None` when no
/// mapping header is found or a mapping lacks `Rss` or `Pss`: not an smaps file. Lines it does
/// not know (`VmFlags`, `THPeligible`, new counters) are skipped.
pub fn parse_smaps(bytes: &[u8]) -> Option<Vec<Mapping>> {
    let mut out: Vec<Mapping> = Vec::new();
    let mut seen: Vec<u8> = Vec::new();
    for line in lines(bytes) {
        if let Some(mapping) = parse_header(line) {
            out.push(mapping);
            seen.push(0);
            continue;
        }
        let current = out.last_mut()?;
        let Some((key, value)) = key_value(line) else { continue };
        if let (Some(v), Some(bits)) = (kb_value(value), seen.last_mut()) {
            *bits |= current.counters.set(key, v);
        }
    }
    for (m, bits) in out.iter_mut().zip(&seen) {
        if bits & 0b11 != 0b11 {
            return None;
        }
        m.complete = *bits == SEEN_ALL;
    }
    (!out.is_empty()).then_some(out)
}

/// The sum of every mapping's counters (what `smaps_rollup` prints for the same process).
pub fn total(mappings: &[Mapping]) -> Counters {
    let mut sum = Counters::default();
    for m in mappings {
        sum.add(&m.counters);
    }
    sum
}

/// `start-end perms offset dev inode [path]`. A counter line has a colon right after its key,
/// which a header's first field never has.
fn parse_header(line: &[u8]) -> Option<Mapping> {
    let mut rest = line;
    let mut next = || {
        let text = trim_start(rest);
        let end = find_byte(text, b' ').unwrap_or(text.len());
        rest = &text[end..];
        (end > 0).then(|| &text[..end])
    };
    let range = next()?;
    if range.last() == Some(&b':') {
        return None;
    }
    let dash = find_byte(range, b'-')?;
    let start = hex(&range[..dash])?;
    let end = hex(&range[dash + 1..])?;
    let perms = next()?;
    if perms.len() != 4 {
        return None;
    }
    let offset = hex(next()?)?;
    let dev = next()?;
    find_byte(dev, b':')?;
    let inode = next().and_then(dec)?;
    let path = String::from_utf8_lossy(trim(rest)).into_owned();
    Some(Mapping {
        start,
        end,
        perms: String::from_utf8_lossy(perms).into_owned(),
        offset,
        inode,
        path,
        counters: Counters::default(),
        complete: false,
    })
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(bytes.len());
    &bytes[start..]
}

fn hex(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    u64::from_str_radix(text, 16).ok()
}

fn dec(bytes: &[u8]) -> Option<u64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &[u8] = b"55e0c4a00000-55e0c4a2c000 r--p 00000000 08:01 1835014                    /usr/bin/python3.11
Size:                176 kB
KernelPageSize:        4 kB
Rss:                 176 kB
Pss:                  44 kB
Pss_Dirty:             0 kB
Shared_Clean:        176 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:         0 kB
Referenced:          176 kB
Anonymous:             0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:    0
VmFlags: rd mr mw me sd
55e0c6b8e000-55e0d2b8e000 rw-p 00000000 00:00 0                          [heap]
Size:             196608 kB
Rss:              196608 kB
Pss:              106496 kB
Shared_Clean:          0 kB
Shared_Dirty:     184320 kB
Private_Clean:         0 kB
Private_Dirty:     12288 kB
Anonymous:        196608 kB
Swap:                  0 kB
SwapPss:               0 kB
VmFlags: rd wr mr mw me ac sd
7f3c00000000-7f3c00021000 rw-p 00000000 00:00 0 
Rss:                   8 kB
Pss:                   8 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:         8 kB
Anonymous:             8 kB
7f3c10000000-7f3c10400000 rw-p 00000000 fd:00 42                         /srv/model weights (deleted)
Rss:                4096 kB
Pss:                2048 kB
Shared_Clean:       2048 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:      2048 kB
Anonymous:          2048 kB
";

    #[test]
    fn every_mapping_with_its_counters() {
        let maps = parse_smaps(SMAPS).expect("parses");
        assert_eq!(maps.len(), 4);
        assert_eq!(maps[0].path, "/usr/bin/python3.11");
        assert_eq!(maps[0].inode, 1_835_014);
        assert_eq!(maps[0].counters.shared_clean_bytes, 176 * 1024);
        assert!(maps[0].complete);
        let heap = &maps[1];
        assert_eq!((heap.path.as_str(), heap.perms.as_str()), ("[heap]", "rw-p"));
        assert_eq!(heap.size_bytes(), 196_608 * 1024);
        assert_eq!(heap.counters.private_dirty_bytes, 12_288 * 1024);
        assert_eq!(heap.counters.shared_bytes(), 184_320 * 1024);
        assert_eq!(heap.counters.anonymous_bytes, 196_608 * 1024);
        assert_eq!(maps[2].path, "", "anonymous: no path, trailing space dropped");
        assert_eq!(maps[3].path, "/srv/model weights (deleted)", "spaces in a path are kept");
        assert_eq!(maps[3].counters.file_bytes(), 2048 * 1024);
        let sum = total(&maps);
        assert_eq!(sum.rss_bytes, (176 + 196_608 + 8 + 4096) * 1024);
        assert_eq!(sum.uss_bytes(), (12_288 + 8 + 2048) * 1024);
    }

    #[test]
    fn the_rollup_is_one_mapping() {
        let rollup = b"55e0c4a00000-7ffd0a3f1000 ---p 00000000 00:00 0                          [rollup]
Rss:              201000 kB
Pss:              110000 kB
Pss_Anon:         105000 kB
Pss_File:           5000 kB
Pss_Shmem:             0 kB
Shared_Clean:       4000 kB
Shared_Dirty:     184000 kB
Private_Clean:         0 kB
Private_Dirty:     13000 kB
Referenced:       201000 kB
Anonymous:        197000 kB
Swap:                 12 kB
SwapPss:               6 kB
";
        let maps = parse_smaps(rollup).expect("parses");
        assert_eq!(maps.len(), 1);
        assert_eq!(maps[0].path, "[rollup]");
        let c = maps[0].counters;
        assert_eq!((c.pss_anon_bytes, c.swap_pss_bytes), (105_000 * 1024, 6 * 1024));
        assert_eq!(c.file_bytes(), 4000 * 1024);
        assert!(maps[0].complete);
    }

    #[test]
    fn not_smaps() {
        assert_eq!(parse_smaps(b""), None);
        assert_eq!(parse_smaps(b"Rss: 4 kB\nPss: 4 kB\n"), None, "counters before any header");
        assert_eq!(parse_smaps(b"0-1000 rw-p 00000000 00:00 0\nSize: 4 kB\n"), None, "no Rss or Pss");
        assert_eq!(parse_smaps(b"zz-1000 rw-p 00000000 00:00 0\nRss: 4 kB\nPss: 4 kB\n"), None);
        // A rollup missing the shared/private split parses but says it is incomplete.
        let partial = parse_smaps(b"0-1000 ---p 00000000 00:00 0 [rollup]\nRss: 4 kB\nPss: 4 kB\n").expect("parses");
        assert!(!partial[0].complete);
    }

    #[test]
    fn garbage_never_panics() {
        let mut next = crate::parse::xorshift(7);
        let alphabet = b"0123456789abcdef-: kBRsPrw\n[]/";
        for round in 0..20_000 {
            let mut bytes = SMAPS.to_vec();
            for _ in 0..(next() % 12) {
                let at = (next() % bytes.len() as u64) as usize;
                bytes[at] = alphabet[(next() % alphabet.len() as u64) as usize];
            }
            if round % 3 == 0 {
                bytes.truncate((next() % (bytes.len() as u64 + 1)) as usize);
            }
            let _ = parse_smaps(&bytes).map(|m| total(&m));
        }
    }
}
