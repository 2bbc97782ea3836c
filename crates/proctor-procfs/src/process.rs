//! Parsers for per-process files: `stat`, `statm`, `status`, `io`, `cmdline`, `smaps_rollup`
//! and `cgroup`.
//!
//! Pure functions over bytes. `comm` needs no file of its own: `stat` carries it between the
//! first `(` and the last `)`. Reading `cmdline` and `smaps_rollup` takes the target's mmap
//! lock; this module only parses them — *when* to read them is the sampler's business.

use serde::{Deserialize, Serialize};

use crate::parse::{fields, kb_value, key_value, lines, u64_dec};

/// Pids are small, dense integers chosen by the kernel, not by an attacker who could aim for
/// collisions, so a multiply-shift hash serves; SipHash was a visible share of a scan (the
/// sampler's table, the task iterator's sums).
#[derive(Debug, Default, Clone, Copy)]
pub struct PidHasher(u64);

impl std::hash::Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    /// Mixed into what came before, so a (pid, start time) key hashes both: a pid alone hashes
    /// to pid × the constant, as it always has.
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(23) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by pid, hashed with [`PidHasher`].
pub type PidMap<V> = std::collections::HashMap<u32, V, std::hash::BuildHasherDefault<PidHasher>>;

/// A map keyed by a process, (pid, start time), hashed with [`PidHasher`]: a fork storm's exits
/// are looked up by it several times each.
pub type ProcessMap<V> = std::collections::HashMap<(u32, u64), V, std::hash::BuildHasherDefault<PidHasher>>;

/// `/proc/PID/stat`, the fields proctor uses; times in clock ticks, sizes in bytes or pages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PidStat {
    pub pid: u32,
    pub comm: String,
    pub state: char,
    pub ppid: u32,
    pub pgrp: i64,
    pub session: i64,
    pub minflt: u64,
    pub majflt: u64,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// CPU of children this process waited for (reaped), user and system, cumulative.
    pub cutime_ticks: u64,
    pub cstime_ticks: u64,
    /// Minor and major faults of children this process waited for, cumulative.
    pub cminflt: u64,
    pub cmajflt: u64,
    pub priority: i64,
    pub nice: i64,
    pub num_threads: u64,
    /// Start time in clock ticks after boot: with the pid, it names a process uniquely.
    pub start_ticks: u64,
    pub vsize_bytes: u64,
    /// The shared count of the per-CPU resident counters (`get_mm_rss`) since Linux 6.2: short
    /// of `statm` and `status` (which add the per-CPU deltas up since 6.16) by up to
    /// max(32, 2 × CPUs) pages per CPU and per counter.
    pub rss_pages: u64,
    pub processor: Option<u32>,
    pub blkio_ticks: Option<u64>,
    /// Open fds, where the reader that gave these fields counts them too (the BPF task scan,
    /// as `stat` of `/proc/PID/fd` does); never from the `stat` file, which has no such field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_fds: Option<u32>,
    /// The kernfs ids of the process's cgroup2 cgroup and of its memory controller's cgroup (0
    /// without one), where the reader that gave these fields reads them too (the BPF task
    /// scan): a pair names the cgroup `/proc/PID/cgroup` would, without reading it. Never from
    /// the `stat` file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_ids: Option<[u64; 2]>,
    /// The effective user id as the initial user namespace numbers it, where the reader that
    /// gave these fields reads it too (the BPF task scan; `status` gives it otherwise). Never
    /// from the `stat` file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_uid: Option<u32>,
}

/// Parses `/proc/PID/stat`. The comm field may hold spaces and parentheses, so it is delimited
/// by the first `(` and the *last* `)`. `None` when a required field is missing or malformed.
pub fn parse_stat(bytes: &[u8]) -> Option<PidStat> {
    let (mut stat, comm) = parse_stat_fields(bytes, 42)?;
    stat.comm = String::from_utf8_lossy(comm).into_owned();
    Some(stat)
}

/// The per-cycle form of [`parse_stat`]: leaves `comm` empty and returns its bytes instead (a
/// scanner that already knows the name allocates nothing), and stops after field 24 (rss), so
/// the long tail of addresses is never scanned; `processor` and `blkio_ticks` stay `None`.
pub fn parse_stat_borrowed(bytes: &[u8]) -> Option<(PidStat, &[u8])> {
    parse_stat_fields(bytes, 24)
}

fn parse_stat_fields(bytes: &[u8], last_field: usize) -> Option<(PidStat, &[u8])> {
    // The kernel always ends the line with a newline; without it the read was cut short and
    // the last number may be a prefix of the real one.
    let bytes = bytes.strip_suffix(b"\n")?;
    let open = memchr::memchr(b'(', bytes)?;
    let close = memchr::memrchr(b')', bytes)?;
    if close < open {
        return None;
    }
    let pid = u32::try_from(u64_dec(crate::parse::trim(&bytes[..open]))?).ok()?;
    let comm = &bytes[open + 1..close];
    // One pass over the bytes after the comm, parsing numbers as they are scanned: this runs
    // for every process on every cycle. Field numbers follow proc(5): field 3 (state) is the
    // first after the comm. Fields are separated by single spaces.
    let rest = bytes.get(close + 2..)?;
    let mut values = [0i64; 43];
    let mut valid: u64 = 0;
    let state = *rest.first()?;
    let mut field = 3usize;
    let mut value: u64 = 0;
    let mut digits = 0usize;
    let mut negative = false;
    let mut ok = true;
    let mut finish = |field: usize, value: u64, digits: usize, negative: bool, ok: bool| {
        // 20 digits may not fit in u64; the kernel prints those only for sentinels (rsslim).
        if field > 3 && ok && digits > 0 && digits < 20 && field < values.len() {
            values[field] = if negative { -(value as i64) } else { value as i64 };
            valid |= 1 << field;
        }
    };
    for &b in rest {
        if b == b' ' {
            finish(field, value, digits, negative, ok);
            field += 1;
            if field > last_field {
                break;
            }
            (value, digits, negative, ok) = (0, 0, false, true);
            continue;
        }
        let digit = b.wrapping_sub(b'0');
        if digit <= 9 {
            value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
            digits += 1;
        } else if b == b'-' && digits == 0 && !negative {
            negative = true;
        } else {
            ok = false;
        }
    }
    if field <= last_field {
        finish(field, value, digits, negative, ok);
    }
    // Fields 4..=24 are required (tty_nr, tpgid, flags and itrealvalue are not used).
    const REQUIRED: u64 = ((1u64 << 25) - 1) & !((1 << 4) - 1) & !(1 << 7) & !(1 << 8) & !(1 << 9) & !(1 << 21);
    if !state.is_ascii_alphabetic() || valid & REQUIRED != REQUIRED {
        return None;
    }
    let unsigned = |f: usize| u64::try_from(values[f]).ok();
    let optional = |f: usize| (valid & (1 << f) != 0).then(|| unsigned(f)).flatten();
    let stat = PidStat {
        pid,
        comm: String::new(),
        state: char::from(state),
        ppid: u32::try_from(values[4]).ok()?,
        pgrp: values[5],
        session: values[6],
        minflt: unsigned(10)?,
        majflt: unsigned(12)?,
        utime_ticks: unsigned(14)?,
        stime_ticks: unsigned(15)?,
        cutime_ticks: unsigned(16)?,
        cstime_ticks: unsigned(17)?,
        cminflt: unsigned(11)?,
        cmajflt: unsigned(13)?,
        priority: values[18],
        nice: values[19],
        num_threads: unsigned(20)?,
        start_ticks: unsigned(22)?,
        vsize_bytes: unsigned(23)?,
        rss_pages: unsigned(24)?,
        processor: optional(39).and_then(|v| u32::try_from(v).ok()),
        blkio_ticks: optional(42),
        open_fds: None,
        cgroup_ids: None,
        effective_uid: None,
    };
    Some((stat, comm))
}

/// `/proc/PID/statm`, in pages. `shared_pages` counts file-backed and shmem resident pages,
/// so `resident - shared` is the anonymous resident memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statm {
    pub size_pages: u64,
    pub resident_pages: u64,
    pub shared_pages: u64,
    pub text_pages: u64,
    pub data_pages: u64,
}

pub fn parse_statm(bytes: &[u8]) -> Option<Statm> {
    let mut parts = fields(bytes.strip_suffix(b"\n")?);
    let mut next = || parts.next().and_then(u64_dec);
    let size_pages = next()?;
    let resident_pages = next()?;
    let shared_pages = next()?;
    let text_pages = next()?;
    next()?; // lib, always 0 since Linux 2.6
    let data_pages = next()?;
    Some(Statm { size_pages, resident_pages, shared_pages, text_pages, data_pages })
}

/// `/proc/PID/status`, the fields `stat` and `statm` do not carry; sizes in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub name: Option<String>,
    pub real_uid: Option<u32>,
    pub effective_uid: Option<u32>,
    pub threads: Option<u64>,
    pub vm_rss_bytes: Option<u64>,
    pub vm_hwm_bytes: Option<u64>,
    pub rss_anon_bytes: Option<u64>,
    pub rss_file_bytes: Option<u64>,
    pub rss_shmem_bytes: Option<u64>,
    pub vm_swap_bytes: Option<u64>,
    pub voluntary_ctxt_switches: Option<u64>,
    pub nonvoluntary_ctxt_switches: Option<u64>,
}

/// Parses `/proc/PID/status`. Kernel threads have no Vm* lines: those fields stay `None`.
/// `None` only when the file has no `Name:` line at all (it is not a status file).
pub fn parse_status(bytes: &[u8]) -> Option<Status> {
    let mut status = Status::default();
    for line in lines(bytes) {
        let Some((key, value)) = key_value(line) else { continue };
        match key {
            b"Name" => status.name = Some(String::from_utf8_lossy(value).into_owned()),
            b"Uid" => {
                let mut ids = fields(value).map(|v| u64_dec(v).and_then(|v| u32::try_from(v).ok()));
                status.real_uid = ids.next().flatten();
                status.effective_uid = ids.next().flatten();
            }
            b"Threads" => status.threads = u64_dec(value),
            b"VmRSS" => status.vm_rss_bytes = kb_value(value),
            b"VmHWM" => status.vm_hwm_bytes = kb_value(value),
            b"RssAnon" => status.rss_anon_bytes = kb_value(value),
            b"RssFile" => status.rss_file_bytes = kb_value(value),
            b"RssShmem" => status.rss_shmem_bytes = kb_value(value),
            b"VmSwap" => status.vm_swap_bytes = kb_value(value),
            b"voluntary_ctxt_switches" => status.voluntary_ctxt_switches = u64_dec(value),
            b"nonvoluntary_ctxt_switches" => status.nonvoluntary_ctxt_switches = u64_dec(value),
            _ => {}
        }
    }
    status.name.is_some().then_some(status)
}

/// `/proc/PID/io`, cumulative; readable only with ptrace-read permission on the target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Io {
    pub rchar_bytes: Option<u64>,
    pub wchar_bytes: Option<u64>,
    pub syscr: Option<u64>,
    pub syscw: Option<u64>,
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    pub cancelled_write_bytes: Option<u64>,
}

pub fn parse_io(bytes: &[u8]) -> Option<Io> {
    let mut io = Io::default();
    let mut known = 0;
    for line in lines(bytes) {
        let Some((key, value)) = key_value(line) else { continue };
        let slot = match key {
            b"rchar" => &mut io.rchar_bytes,
            b"wchar" => &mut io.wchar_bytes,
            b"syscr" => &mut io.syscr,
            b"syscw" => &mut io.syscw,
            b"read_bytes" => &mut io.read_bytes,
            b"write_bytes" => &mut io.write_bytes,
            b"cancelled_write_bytes" => &mut io.cancelled_write_bytes,
            _ => continue,
        };
        *slot = u64_dec(value);
        known += 1;
    }
    (known > 0).then_some(io)
}

/// Parses `/proc/PID/cmdline`: NUL-separated arguments. An empty file (kernel threads,
/// zombies) gives an empty list. Invalid UTF-8 is replaced, never an error.
pub fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    let trimmed = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    if trimmed.is_empty() {
        return Vec::new();
    }
    trimmed.split(|&b| b == 0).map(|arg| String::from_utf8_lossy(arg).into_owned()).collect()
}

/// `/proc/PID/smaps_rollup`, in bytes. USS (memory only this process maps) is the private
/// clean and dirty pages, the same definition psutil uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmapsRollup {
    pub rss_bytes: Option<u64>,
    pub pss_bytes: Option<u64>,
    pub pss_anon_bytes: Option<u64>,
    pub pss_file_bytes: Option<u64>,
    pub pss_shmem_bytes: Option<u64>,
    pub shared_clean_bytes: Option<u64>,
    pub shared_dirty_bytes: Option<u64>,
    pub private_clean_bytes: Option<u64>,
    pub private_dirty_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    pub swap_pss_bytes: Option<u64>,
}

impl SmapsRollup {
    pub fn uss_bytes(&self) -> Option<u64> {
        Some(self.private_clean_bytes? + self.private_dirty_bytes?)
    }

    /// What a `pagemap` reading gives ([`crate::pagemap::Tally`]): every counter but SwapPss,
    /// which is 0 where no page is swapped and unknown otherwise.
    pub fn from_tally(t: &crate::pagemap::Tally) -> SmapsRollup {
        let [pss, anon, file, shmem] = t.pss_bytes();
        SmapsRollup {
            rss_bytes: Some(t.rss_bytes),
            pss_bytes: Some(pss),
            pss_anon_bytes: Some(anon),
            pss_file_bytes: Some(file),
            pss_shmem_bytes: Some(shmem),
            shared_clean_bytes: Some(t.shared_clean_bytes),
            shared_dirty_bytes: Some(t.shared_dirty_bytes),
            private_clean_bytes: Some(t.private_clean_bytes),
            private_dirty_bytes: Some(t.private_dirty_bytes),
            swap_bytes: Some(t.swap_bytes),
            swap_pss_bytes: (t.swap_bytes == 0).then_some(0),
        }
    }
}

pub fn parse_smaps_rollup(bytes: &[u8]) -> Option<SmapsRollup> {
    let mut rollup = SmapsRollup::default();
    let mut known = 0;
    for line in lines(bytes) {
        let Some((key, value)) = key_value(line) else { continue };
        let slot = match key {
            b"Rss" => &mut rollup.rss_bytes,
            b"Pss" => &mut rollup.pss_bytes,
            b"Pss_Anon" => &mut rollup.pss_anon_bytes,
            b"Pss_File" => &mut rollup.pss_file_bytes,
            b"Pss_Shmem" => &mut rollup.pss_shmem_bytes,
            b"Shared_Clean" => &mut rollup.shared_clean_bytes,
            b"Shared_Dirty" => &mut rollup.shared_dirty_bytes,
            b"Private_Clean" => &mut rollup.private_clean_bytes,
            b"Private_Dirty" => &mut rollup.private_dirty_bytes,
            b"Swap" => &mut rollup.swap_bytes,
            b"SwapPss" => &mut rollup.swap_pss_bytes,
            _ => continue,
        };
        *slot = kb_value(value);
        known += 1;
    }
    (rollup.pss_bytes.is_some() && known > 1).then_some(rollup)
}

/// One line of `/proc/PID/cgroup`: `hierarchy-id:controllers:path`. On cgroup v2 (and the v2
/// line of a hybrid host) the id is 0 and the controller list is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupMembership {
    pub hierarchy_id: u32,
    pub controllers: Vec<String>,
    pub path: String,
}

impl CgroupMembership {
    pub fn is_v2(&self) -> bool {
        self.hierarchy_id == 0 && self.controllers.is_empty()
    }
}

pub fn parse_cgroup(bytes: &[u8]) -> Option<Vec<CgroupMembership>> {
    let mut out = Vec::new();
    for line in lines(bytes) {
        let mut parts = line.splitn(3, |&b| b == b':');
        let id = u32::try_from(u64_dec(parts.next()?)?).ok()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        out.push(CgroupMembership {
            hierarchy_id: id,
            controllers: if controllers.is_empty() {
                Vec::new()
            } else {
                controllers.split(|&b| b == b',').map(|c| String::from_utf8_lossy(c).into_owned()).collect()
            },
            path: String::from_utf8_lossy(path).into_owned(),
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured on this machine from a `sleep` process, with a comm that needs the last-paren rule.
    const STAT: &[u8] = b"4242 (we ird) (x)) S 1 4242 4242 0 -1 4194560 100 0 3 0 7 5 0 0 20 0 1 0 \
123456 2240512 128 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 9 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn stat_with_parens_in_comm() {
        let stat = parse_stat(STAT).expect("parses");
        assert_eq!(stat.pid, 4242);
        assert_eq!(stat.comm, "we ird) (x)");
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.ppid, 1);
        assert_eq!(stat.minflt, 100);
        assert_eq!(stat.majflt, 3);
        assert_eq!(stat.utime_ticks, 7);
        assert_eq!(stat.stime_ticks, 5);
        assert_eq!((stat.cutime_ticks, stat.cstime_ticks), (0, 0));
        let reaped = String::from_utf8_lossy(STAT).replacen(" 7 5 0 0 ", " 7 5 30 12 ", 1);
        let stat = parse_stat(reaped.as_bytes()).expect("parses");
        assert_eq!((stat.cutime_ticks, stat.cstime_ticks), (30, 12), "children's CPU, fields 16 and 17");
        assert_eq!(stat.num_threads, 1);
        assert_eq!(stat.start_ticks, 123_456);
        assert_eq!(stat.vsize_bytes, 2_240_512);
        assert_eq!(stat.rss_pages, 128);
        assert_eq!(stat.processor, Some(1));
        assert_eq!(stat.blkio_ticks, Some(9));
    }

    #[test]
    fn borrowed_form_agrees_on_the_hot_fields() {
        let (hot, comm) = parse_stat_borrowed(STAT).expect("parses");
        let full = parse_stat(STAT).expect("parses");
        assert_eq!(comm, b"we ird) (x)");
        assert_eq!((hot.processor, hot.blkio_ticks), (None, None), "the tail is not scanned");
        assert_eq!(
            PidStat { comm: full.comm.clone(), processor: full.processor, blkio_ticks: full.blkio_ticks, ..hot },
            full
        );
    }

    #[test]
    fn stat_truncated_or_garbage_is_none() {
        for cut in [0, 5, 20, 60, 90] {
            assert_eq!(parse_stat(&STAT[..cut]), None, "cut at {cut}");
        }
        assert_eq!(parse_stat(b"\x00\x01\x02"), None);
        assert_eq!(parse_stat(b")( S 1"), None);
        // Old kernels stop before field 39: the optional tail is None, the rest parses.
        let short = b"4242 (x) S 1 4242 4242 0 -1 4194560 100 0 3 0 7 5 0 0 20 0 1 0 123456 2240512 128\n";
        let parsed = parse_stat(short).expect("required fields present");
        assert_eq!(parsed.rss_pages, 128);
        assert_eq!(parsed.processor, None);
    }

    /// Random bytes and random mutations of a real line: every parser returns, none panics.
    #[test]
    fn parsers_never_panic_on_garbage() {
        let mut next = crate::parse::xorshift(0x9e37_79b9_7f4a_7c15);
        let alphabet = b"0123456789 ()-:\nkB\x00\xffSRZ";
        for round in 0..20_000 {
            let len = (next() % 400) as usize;
            let mut bytes: Vec<u8> = if round % 2 == 0 {
                (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect()
            } else {
                let mut b = STAT.to_vec();
                for _ in 0..(next() % 8) {
                    let at = (next() % b.len() as u64) as usize;
                    b[at] = alphabet[(next() % alphabet.len() as u64) as usize];
                }
                b.truncate((next() % (b.len() as u64 + 1)) as usize);
                b
            };
            bytes.push(b'\n');
            let _ = parse_stat(&bytes);
            let _ = parse_statm(&bytes);
            let _ = parse_status(&bytes);
            let _ = parse_io(&bytes);
            let _ = parse_smaps_rollup(&bytes);
            let _ = parse_cgroup(&bytes);
            let _ = parse_cmdline(&bytes);
            let _ = crate::host::parse_stat(&bytes);
            let _ = crate::host::parse_meminfo(&bytes);
            let _ = crate::host::parse_vmstat(&bytes);
            let _ = crate::host::parse_diskstats(&bytes);
            let _ = crate::host::parse_net_dev(&bytes);
            let _ = crate::host::parse_pressure(&bytes);
            let _ = crate::cgroup::parse_mountinfo(&bytes);
            let _ = crate::cgroup::parse_cpu_max(&bytes);
        }
    }

    #[test]
    fn statm() {
        let statm = parse_statm(b"547 128 110 5 0 80 0\n").expect("parses");
        assert_eq!(statm.resident_pages, 128);
        assert_eq!(statm.shared_pages, 110);
        assert_eq!(statm.data_pages, 80);
        assert_eq!(parse_statm(b"547 128\n"), None);
        assert_eq!(parse_statm(b"547 128 110 5 0 8"), None, "cut before the newline");
    }

    #[test]
    fn status_of_user_and_kernel_threads() {
        let status = parse_status(
            b"Name:\tpython3\nUid:\t1000\t1001\t1001\t1001\nThreads:\t4\nVmRSS:\t  2048 kB\n\
RssAnon:\t1024 kB\nRssFile:\t 512 kB\nRssShmem:\t 512 kB\nVmSwap:\t0 kB\n",
        )
        .expect("parses");
        assert_eq!(status.real_uid, Some(1000));
        assert_eq!(status.effective_uid, Some(1001));
        assert_eq!(status.threads, Some(4));
        assert_eq!(status.rss_anon_bytes, Some(1024 * 1024));
        assert_eq!(status.vm_swap_bytes, Some(0));
        let kthread = parse_status(b"Name:\tkworker/0:1\nUid:\t0\t0\t0\t0\nThreads:\t1\n").expect("parses");
        assert_eq!(kthread.vm_rss_bytes, None);
        assert_eq!(parse_status(b"junk"), None);
    }

    #[test]
    fn io() {
        let io = parse_io(
            b"rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\n\
write_bytes: 8192\ncancelled_write_bytes: 0\n",
        )
        .expect("parses");
        assert_eq!(io.read_bytes, Some(4096));
        assert_eq!(io.wchar_bytes, Some(20));
    }

    #[test]
    fn cmdline() {
        assert_eq!(parse_cmdline(b"python3\0-m\0x\0"), vec!["python3", "-m", "x"]);
        assert!(parse_cmdline(b"").is_empty());
        assert_eq!(parse_cmdline(b"a\xffb\0"), vec!["a\u{fffd}b"]);
    }

    #[test]
    fn smaps_rollup() {
        let rollup = parse_smaps_rollup(
            b"55d4-7ffd ---p 00000000 00:00 0 [rollup]\nRss: 2048 kB\nPss: 1024 kB\n\
Pss_Anon: 1000 kB\nShared_Clean: 1000 kB\nShared_Dirty: 24 kB\nPrivate_Clean: 4 kB\n\
Private_Dirty: 1020 kB\nSwap: 0 kB\nSwapPss: 0 kB\n",
        )
        .expect("parses");
        assert_eq!(rollup.pss_bytes, Some(1024 * 1024));
        assert_eq!(rollup.uss_bytes(), Some(1024 * 1024));
        assert_eq!(parse_smaps_rollup(b""), None);
    }

    #[test]
    fn cgroup_hybrid() {
        let cg = parse_cgroup(b"4:memory:/a/b\n1:cpu,cpuacct:/\n0::/user.slice\n").expect("parses");
        assert_eq!(cg.len(), 3);
        assert_eq!(cg[0].controllers, vec!["memory"]);
        assert_eq!(cg[1].controllers, vec!["cpu", "cpuacct"]);
        assert!(cg[2].is_v2());
        assert_eq!(cg[2].path, "/user.slice");
        // A path may contain a colon; only the first two separate fields.
        assert_eq!(parse_cgroup(b"0::/a:b\n").expect("parses")[0].path, "/a:b");
        assert_eq!(parse_cgroup(b"x:y\n"), None);
    }
}
