//! System facts that are not files: page size, clock ticks, CPU affinity, the open-file limit;
//! and the sysfs CPU lists (`online`, `possible`).

use std::io;

use crate::error::Error;
use crate::file::Root;
use crate::parse::cpu_list;

/// Bytes per page, for `statm` and `stat`'s rss. Falls back to 4096 if sysconf fails.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

/// Clock ticks per second (USER_HZ) for `/proc/stat` and `/proc/PID/stat` times.
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
}

/// The CPUs a task may run on (`sched_getaffinity`); `pid` 0 means the caller.
pub fn affinity(pid: u32) -> io::Result<Vec<u32>> {
    // A cpu_set_t holds 1024 CPUs; that covers every machine this runs on today. Larger
    // machines get EINVAL, which is reported rather than guessed around.
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the pointer and size describe `set`, which outlives the call.
    let rc = unsafe { libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let max = u32::try_from(libc::CPU_SETSIZE).unwrap_or(1024);
    // SAFETY: CPU_ISSET reads within the set for every index below CPU_SETSIZE.
    Ok((0..max).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu as usize, &set) }).collect())
}

/// Lists the numeric entries of a directory (`/proc`: the pids) into `out`, sorted. Uses
/// `readdir` directly because std's iterator allocates two strings per entry, and this runs on
/// every cycle over every process.
pub fn list_pids(root: &Root, out: &mut Vec<u32>) -> Result<(), Error> {
    out.clear();
    let path = root.path("/proc");
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::parse(path.clone(), "path holds a NUL byte"))?;
    // SAFETY: `c_path` is a valid NUL-terminated string.
    let dir = unsafe { libc::opendir(c_path.as_ptr()) };
    if dir.is_null() {
        return Err(Error::io(path, io::Error::last_os_error()));
    }
    loop {
        // SAFETY: `dir` is an open directory stream owned by this function.
        let entry = unsafe { libc::readdir64(dir) };
        if entry.is_null() {
            break;
        }
        // SAFETY: readdir returned a valid entry whose d_name is NUL-terminated.
        let name = unsafe { std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
        if let Some(pid) = crate::parse::u64_dec(name).and_then(|p| u32::try_from(p).ok()) {
            out.push(pid);
        }
    }
    // SAFETY: closing the stream opened above, once.
    unsafe { libc::closedir(dir) };
    out.sort_unstable();
    Ok(())
}

/// `/sys/devices/system/cpu/online` as CPU numbers.
pub fn online_cpus(root: &Root) -> Result<Vec<u32>, Error> {
    read_cpu_list(root, "/sys/devices/system/cpu/online")
}

pub fn read_cpu_list(root: &Root, path: &str) -> Result<Vec<u32>, Error> {
    let bytes = root.read(path)?;
    cpu_list(&bytes).ok_or_else(|| Error::parse(root.path(path), "not a cpu list"))
}

/// Raises the soft open-file limit to the hard limit, so the sampler can keep a few fds per
/// process open. Returns the soft limit now in force.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: `raised` is a valid in-pointer.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(raised.rlim_cur);
        }
    }
    Ok(limit.rlim_cur)
}

/// The soft `RLIMIT_NOFILE` now: how many fds this process may have open.
pub fn nofile_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid out-pointer.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0).then_some(limit.rlim_cur)
}

/// CPU time used so far by the calling thread, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`).
/// Used to charge each sample and each budgeted worker with exactly its own cost.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// A thread's scheduling attributes (`sched_getattr`; `tid` 0: the calling thread).
fn sched_attr(tid: u32) -> Result<libc::sched_attr, String> {
    // SAFETY: sched_attr is plain data; the kernel writes at most `size` bytes into it.
    let mut attr: libc::sched_attr = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::sched_attr>() as u32;
    // SAFETY: the pointer and size describe `attr`.
    let r = unsafe { libc::syscall(libc::SYS_sched_getattr, tid, &mut attr as *mut libc::sched_attr, size, 0) };
    if r == 0 {
        Ok(attr)
    } else {
        Err(format!("sched_getattr: {}", std::io::Error::last_os_error()))
    }
}

/// The slice the kernel reports for thread `tid` of the normal classes (0: the calling
/// thread), in nanoseconds: its own where it has one, else the kernel's. 0 before Linux 6.12,
/// which reports none.
pub fn thread_slice_ns(tid: u32) -> Result<u64, String> {
    sched_attr(tid).map(|a| a.sched_runtime)
}

/// Gives the calling thread its own EEVDF slice (`sched_setattr`'s `sched_runtime` in the
/// normal classes, Linux 6.12+), its policy and nice unchanged, and returns the slice the kernel
/// then reports for it (it clamps to 0.1–100 ms; 0 asks for the kernel's own). A thread that has
/// run past its slice yields to a task that wakes on its CPU, at that wakeup. An error says why
/// not: a real-time thread (no slice), or a kernel that keeps its own (before 6.12).
pub fn set_thread_slice(slice_ns: u64) -> Result<u64, String> {
    let mut attr = sched_attr(0)?;
    let policy = attr.sched_policy as i32;
    if ![libc::SCHED_OTHER, libc::SCHED_BATCH, libc::SCHED_IDLE].contains(&policy) {
        return Err(format!("the thread runs under real-time or deadline policy {policy}, which has no slice"));
    }
    attr.size = std::mem::size_of::<libc::sched_attr>() as u32;
    attr.sched_flags = 0;
    attr.sched_runtime = slice_ns;
    // SAFETY: the pointer describes `attr`, which the kernel only reads; pid 0 is this thread.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const libc::sched_attr, 0) };
    if r != 0 {
        return Err(format!("sched_setattr: {}", std::io::Error::last_os_error()));
    }
    match thread_slice_ns(0)? {
        0 => Err("this kernel gives every thread the same slice (one of its own needs Linux 6.12+)".into()),
        now => Ok(now),
    }
}

/// [`set_thread_slice`] for a slice given as a duration, as the agent's threads ask at their
/// start: `None` where none is asked (zero keeps the kernel's), else what the kernel answered.
pub fn ask_thread_slice(slice: std::time::Duration) -> Option<Result<u64, String>> {
    (!slice.is_zero()).then(|| set_thread_slice(u64::try_from(slice.as_nanos()).unwrap_or(u64::MAX)))
}

/// Hands freed heap pages back to the kernel (`malloc_trim`): glibc keeps what a burst freed in
/// its arenas, resident. Walks the allocator's free lists: ~0.1 ms for `serve`'s few MB.
pub fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Lets go of this process's mappings of its own program file, so what stays resident of the
/// binary is the code and constants used from here on: `madvise(MADV_DONTNEED)` over each
/// read-only mapping of `/proc/self/exe` (the text, `r-xp`, and the constants, `r--p`).
/// Start-up's code and data (argument parsing, the BPF loader and the BPF objects it loaded,
/// the configuration) and whatever the kernel mapped around each page it faulted in (64 KiB
/// of fault-around) otherwise stay counted in `VmRSS` for the life of the agent. A page of a
/// private file mapping that was never written is the file's: the next access maps the same
/// page again from the page cache, no disk read (a minor fault). A mapping with a written page
/// (`Anonymous:` above 0: the relocated `RELRO` data, a debugger's breakpoint, a uprobe) is
/// left alone, since dropping the page would drop the change; writable mappings are never
/// touched. Returns the bytes let go (`Rss:` of the mappings advised), or the error that
/// stopped it.
pub fn release_text() -> io::Result<u64> {
    let exe = std::fs::read_link("/proc/self/exe")?;
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let mut released = 0;
    for text in executable_text(&smaps, &exe.to_string_lossy()) {
        let len = usize::try_from(text.end - text.start).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
        // SAFETY: the range is one of this process's own mappings, read a moment ago: a private
        // mapping of the program's file, read-only and not written (no anonymous page in it).
        // MADV_DONTNEED drops its page table entries; the next access maps the file's page
        // again, so no content is lost and no other mapping is touched.
        if unsafe { libc::madvise(text.start as *mut libc::c_void, len, libc::MADV_DONTNEED) } != 0 {
            return Err(io::Error::last_os_error());
        }
        released += text.rss_bytes;
    }
    Ok(released)
}

/// The path of an `smaps` or `maps` header line: what follows its five fields (range,
/// permissions, offset, device, inode); it may hold spaces.
fn path_of(line: &str) -> &str {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        rest = &rest[rest.find(char::is_whitespace).unwrap_or(rest.len())..];
    }
    rest.trim()
}

/// One read-only mapping of the program file, from `smaps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TextMapping {
    start: u64,
    end: u64,
    rss_bytes: u64,
}

/// The private read-only mappings of `exe` (text and constants) in an `smaps` text that
/// hold no anonymous (written) page.
fn executable_text(smaps: &str, exe: &str) -> Vec<TextMapping> {
    let mut out = Vec::new();
    // The mapping whose fields are being read: Some while it is a candidate.
    let mut current: Option<(TextMapping, bool)> = None;
    let finish = |current: &mut Option<(TextMapping, bool)>, out: &mut Vec<TextMapping>| {
        if let Some((m, clean)) = current.take() {
            if clean {
                out.push(m);
            }
        }
    };
    for line in smaps.lines() {
        let mut words = line.split_ascii_whitespace();
        let Some(first) = words.next() else { continue };
        if let Some((lo, hi)) = first.split_once('-') {
            let (Ok(start), Ok(end)) = (u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16)) else { continue };
            finish(&mut current, &mut out);
            let perms = words.next().unwrap_or("");
            if (perms == "r-xp" || perms == "r--p") && path_of(line) == exe && end > start {
                current = Some((TextMapping { start, end, rss_bytes: 0 }, false));
            }
            continue;
        }
        let Some((m, clean)) = current.as_mut() else { continue };
        let kb = || words.clone().next().and_then(|v| v.parse::<u64>().ok());
        match first {
            "Rss:" => m.rss_bytes = kb().unwrap_or(0) * 1024,
            // Anonymous comes after Rss; only a mapping that says 0 is taken.
            "Anonymous:" => *clean = kb() == Some(0),
            _ => {}
        }
    }
    finish(&mut current, &mut out);
    out
}

/// CPU time used so far by the whole process, in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// Peak resident set of this process image, in bytes: `VmHWM` from `/proc/self/status` (the
/// high-water mark of this process's own address space, which starts afresh at `exec`), else
/// `getrusage`'s maxrss. maxrss survives `exec`: under `cargo run`, it is cargo's peak, not ours.
/// Opens and reads one file; a caller that asks every cycle keeps a [`SelfPeak`] instead.
pub fn self_max_rss_bytes() -> u64 {
    let mut buf = Vec::new();
    crate::Root::default()
        .read_into("/proc/self/status", &mut buf)
        .ok()
        .and_then(|()| crate::process::parse_status(&buf)?.vm_hwm_bytes)
        .unwrap_or_else(rusage_max_rss_bytes)
}

/// [`self_max_rss_bytes`] through a kept-open `/proc/self/status` (one `pread` per call).
#[derive(Debug)]
pub struct SelfPeak {
    status: Option<crate::file::ProcFile>,
}

impl SelfPeak {
    pub fn open() -> SelfPeak {
        SelfPeak { status: crate::file::ProcFile::open("/proc/self/status".into()).ok() }
    }

    pub fn bytes(&mut self) -> u64 {
        let hwm = self.status.as_mut().and_then(|f| crate::process::parse_status(f.read().ok()?)?.vm_hwm_bytes);
        hwm.unwrap_or_else(rusage_max_rss_bytes)
    }
}

/// `getrusage(RUSAGE_SELF)` maxrss, in bytes: the fallback where `/proc/self/status` is unreadable.
fn rusage_max_rss_bytes() -> u64 {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024
}

/// Space on the filesystem holding `path`, as `df` and psutil's `disk_usage` count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DiskUsage {
    pub total_bytes: u64,
    /// total − free (blocks reserved for root count as used, as in `df`).
    pub used_bytes: u64,
    /// What an unprivileged user can still write.
    pub available_bytes: u64,
}

/// `statvfs(path)`: one syscall, no file read.
pub fn disk_usage(path: &std::path::Path) -> io::Result<DiskUsage> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: statvfs is plain data; the call fills it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is a valid C string and `st` a valid out-pointer.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let frsize = st.f_frsize as u64;
    let total_bytes = (st.f_blocks as u64).saturating_mul(frsize);
    let free_bytes = (st.f_bfree as u64).saturating_mul(frsize);
    Ok(DiskUsage {
        total_bytes,
        used_bytes: total_bytes.saturating_sub(free_bytes),
        available_bytes: (st.f_bavail as u64).saturating_mul(frsize),
    })
}

/// User names by uid, from a passwd file (`/etc/passwd`); empty when it cannot be read. Names
/// are as the file has them: callers that print them pass them through their printable rule.
pub fn read_users(path: &std::path::Path) -> std::collections::BTreeMap<u32, String> {
    let Ok(text) = std::fs::read_to_string(path) else { return std::collections::BTreeMap::new() };
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split(':');
            let name = parts.next()?;
            let uid = parts.nth(1)?.parse().ok()?;
            Some((uid, name.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c9800000-55d0c9a00000 r--p 00000000 08:01 1234 /opt/my proctor/bin/proctor
Rss:                 512 kB
Anonymous:             0 kB
55d0c97ff000-55d0c9800000 r--s 00000000 08:01 1234 /opt/my proctor/bin/proctor
Rss:                   4 kB
Anonymous:             0 kB
55d0c9a00000-55d0ca000000 r-xp 00200000 08:01 1234 /opt/my proctor/bin/proctor
Size:               6144 kB
Rss:                4096 kB
Pss:                4096 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me dw
55d0ca000000-55d0ca100000 r-xp 00800000 08:01 1234 /opt/my proctor/bin/proctor
Rss:                  64 kB
Anonymous:             4 kB
55d0ca100000-55d0ca180000 r--p 00900000 08:01 1234 /opt/my proctor/bin/proctor
Rss:                  64 kB
Anonymous:            60 kB
55d0ca180000-55d0ca200000 rw-p 00980000 08:01 1234 /opt/my proctor/bin/proctor
Rss:                   8 kB
Anonymous:             0 kB
7f0000000000-7f0000100000 r-xp 00000000 08:01 99   /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 900 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 r-xp 00000000 08:01 1234 /opt/my proctor/bin/proctor
Rss:                   8 kB
Anonymous:             0 kB
";

    #[test]
    fn only_the_programs_unwritten_text_is_chosen() {
        let chosen = executable_text(SMAPS, "/opt/my proctor/bin/proctor");
        assert_eq!(
            chosen,
            vec![
                TextMapping { start: 0x55d0c9800000, end: 0x55d0c9a00000, rss_bytes: 512 * 1024 },
                TextMapping { start: 0x55d0c9a00000, end: 0x55d0ca000000, rss_bytes: 4096 * 1024 },
                // The last mapping in the text: its fields end the file, not a next header.
                TextMapping { start: 0x7f0000200000, end: 0x7f0000300000, rss_bytes: 8 * 1024 },
            ],
            "a shared mapping, the written text, the relocated (written) constants, the writable data \
             and another file's text are left alone"
        );
        assert!(executable_text(SMAPS, "/opt/my").is_empty(), "a path is matched whole");
        assert!(executable_text("", "/x").is_empty());
        assert!(executable_text("garbage-line r-xp\nRss: x kB\n\n", "/x").is_empty());
    }

    /// The test binary's own text, resident in `smaps` before and after.
    fn own_text_rss_kb() -> u64 {
        let exe = std::fs::read_link("/proc/self/exe").expect("our own exe");
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("our own smaps");
        executable_text(&smaps, &exe.to_string_lossy()).iter().map(|m| m.rss_bytes / 1024).sum()
    }

    #[test]
    fn releasing_the_text_lowers_its_resident_size_and_the_code_still_runs() {
        let before = own_text_rss_kb();
        assert!(before > 0, "the test binary's text is resident while it runs");
        let released = release_text().expect("madvise on our own text");
        assert_eq!(released / 1024, before, "it lets go of what smaps said was resident");
        // Code runs after it (this very function, the parser, the allocator), mapped again.
        let after = own_text_rss_kb();
        assert!(after < before, "resident text {after} kB after the release, {before} kB before");
    }
}
