//! The process table: one entry per live process, holding its kept-open files.
//!
//! Per cycle and per steady process this costs one `pread` (`stat`) and no `open`.
//! `status` is re-read only when the process's memory footprint moved — its resident pages,
//! page-fault counts or virtual size changed since the last read — because the fields it adds
//! (RssAnon/RssFile/RssShmem, VmSwap, uid) cannot change otherwise: a page changes kind only
//! by being faulted in or reclaimed, and swapping moves resident pages.
//!
//! The resident size is `status`'s VmRSS from that read, not `stat`'s rss. Since Linux 6.2 the
//! resident counters are per-CPU counters; `stat` prints the shared count alone
//! (`percpu_counter_read`), short by up to the batch (max(32, 2 × CPUs) pages) per CPU and per
//! counter, while since 6.16 `status` and `statm` (htop's source) add the per-CPU deltas up.
//! Between reads the carried VmRSS misses only what changed the counters without a fault, a
//! move of `stat`'s estimate or of the virtual size (a small `MADV_DONTNEED`, a little
//! reclaim): less than twice the batch per CPU that made the change.
//!
//! A new process's cgroup is read from `/proc/PID/cgroup`, or with the task scan taken from the
//! path learned for its cgroup id pair; with the scan a process whose pair changes (moved) has it
//! taken again.
//! The directory listing of `/proc` is the one unavoidable per-cycle cost that grows with the
//! number of processes besides the per-pid reads.

use std::collections::HashMap;
use std::sync::Arc;

use proctor_model::{ProcessSample, SampleCost, StatusReading, TaskSample};
use proctor_procfs::process::{parse_cgroup, parse_io, parse_stat_borrowed, parse_status, PidMap, PidStat};
use proctor_procfs::{Error, ErrorKind, ProcFile, Root};

/// A per-pid file: kept open after the first read; read with open/read/close when the
/// open-file limit is exhausted, so a huge process table degrades in cost, not in coverage.
#[derive(Debug, Default)]
enum Slot {
    #[default]
    Unopened,
    Kept(ProcFile),
    Transient,
}

#[derive(Debug)]
struct Entry {
    start_ticks: u64,
    stat: Slot,
    status: Slot,
    io: Slot,
    comm: Arc<str>,
    /// The name changed while the process lived (an exec, or prctl/`/proc/PID/comm`): its
    /// command line is to be read again.
    renamed: bool,
    /// The last `stat` line read and what it parsed to. A process that has not run since the
    /// last cycle (most of them) prints a byte-identical line, so comparing ~300 bytes replaces
    /// parsing them; any change at all, in any field, is parsed afresh.
    stat_line: Vec<u8>,
    stat_parsed: Option<PidStat>,
    /// (rss pages, minor faults, major faults, vsize) when `status` was last read.
    status_key: Option<(u64, u64, u64, u64)>,
    status_reading: Option<StatusReading>,
    /// VmRSS from the last `status` read: the exact sum where `stat`'s rss is an estimate.
    /// `None` where `status` has none (a kernel thread, a zombie) or could not be read; the
    /// resident size is then `stat`'s.
    status_resident_bytes: Option<u64>,
    cgroup: Option<Arc<str>>,
    /// The task scan's cgroup id pair for this process when its cgroup was last taken: a
    /// different pair later is a move to another cgroup, and its cgroup is taken again.
    cgroup_ids: Option<[u64; 2]>,
    /// The cgroup was read from `/proc/PID/cgroup` under `cgroup_ids`, and is learned for that
    /// pair once the next scan gives the process the same pair: the read comes after the scan,
    /// and a process moved between the two would have another cgroup's path under its old pair.
    cgroup_unconfirmed: bool,
    /// Counting this process's fds was refused (another user's process): not asked again.
    fds_denied: bool,
    seen_cycle: u64,
}

impl Entry {
    fn new() -> Self {
        Self {
            start_ticks: 0,
            stat: Slot::Unopened,
            status: Slot::Unopened,
            io: Slot::Unopened,
            comm: Arc::from(""),
            renamed: false,
            stat_line: Vec::new(),
            stat_parsed: None,
            status_key: None,
            status_reading: None,
            status_resident_bytes: None,
            cgroup: None,
            cgroup_ids: None,
            cgroup_unconfirmed: false,
            fds_denied: false,
            seen_cycle: 0,
        }
    }

    fn kept_fds(&self) -> u64 {
        [&self.stat, &self.status, &self.io].iter().filter(|s| matches!(s, Slot::Kept(_))).count() as u64
    }
}

/// Buffers and counters reused across cycles.
#[derive(Debug)]
pub(crate) struct ProcessTable {
    entries: PidMap<Entry>,
    pids: Vec<u32>,
    /// Transient (open/read/close) reads.
    scratch: Vec<u8>,
    /// Every kept per-pid file is read into this one buffer: the kernel then writes each
    /// process's `stat` into the same warm cache lines, instead of a cold kilobyte owned by
    /// each file, and the table holds no per-file buffers at all.
    shared: Vec<u8>,
    cycle: u64,
    /// Kept-open files: how many, and how many may be.
    fds: Fds,
    /// Whether `stat` of `/proc/PID/fd` gives the open fd count (Linux 6.2+), learned from
    /// this process's own on the first scan that asks.
    fd_counts: Option<bool>,
    /// `/proc/PID/fd`, written afresh for each process (no allocation per process).
    fd_path: String,
    /// The tids of one process's `task` directory, reused.
    task_tids: Vec<u32>,
    /// With the task scan: the pids `/proc` listed that the scan did not give, by pid, read
    /// directly in the scans between two listings (and dropped once the scan gives them).
    missed: Vec<u32>,
    /// With the task scan: cgroup paths by the scan's id pair (`PidStat::cgroup_ids`), learned
    /// from the `/proc/PID/cgroup` reads of processes that had that pair at two scans, so that a process
    /// started in a cgroup seen before (a build's compilers, a shell's commands) has its cgroup
    /// without a read. The kernel names each cgroup by its pair while it lives, and a cgroup
    /// made later has another; only a cgroup-v1 rename changes the path under a pair, so the
    /// map is forgotten every `CGROUP_PATHS_FORGET` scans.
    cgroup_paths: HashMap<[u64; 2], Option<Arc<str>>>,
}

/// Cgroup paths kept by id pair at most (the map is emptied when full).
const CGROUP_PATHS_MAX: usize = 4096;
/// The cgroup paths by id pair are learned afresh every this many scans.
const CGROUP_PATHS_FORGET: u64 = 64;

/// With the task scan, `/proc` is listed every this many scans; in between, only what the last
/// listing found that the scan did not give is read (a task the kernel keeps from BPF
/// iterators, such as a sandbox's pid 1). The listing was a quarter of an idle sample's CPU
/// (the kernel makes a dentry for each pid it lists), and all it adds is such tasks and a
/// process started after the scan ran, which the next scan gives: a sample's coverage counts
/// only processes that started before its scan (`events`).
const LIST_EVERY: u64 = 10;

/// The table's kept-open files against its budget.
#[derive(Debug, Clone, Copy)]
struct Fds {
    kept: usize,
    budget: usize,
    /// The open-file limit was hit anyway (other threads' fds): new files are read
    /// transiently until entries free fds.
    exhausted: bool,
}

impl Fds {
    fn may_keep(&self) -> bool {
        !self.exhausted && self.kept < self.budget
    }
}

/// What one scan wants besides the defaults.
#[derive(Clone, Copy)]
pub(crate) struct ScanOptions<'a> {
    pub io: bool,
    pub threads: bool,
    pub cgroups: bool,
    pub fds: bool,
    pub mono_ns: u64,
    pub page_size: u64,
    /// Which new processes (pid, start ticks) read their `status` from their next sample on:
    /// young forked children (the events' `Churn::young_fork`), most of which are gone by then.
    /// Only for a process whose effective user the scan gave (the BPF task scan's), which its
    /// first row takes; its resident size there is the scan's, the kernel's shared count, which
    /// leaves out up to a batch of pages per CPU that `status` adds up (its RSS split and swap
    /// wait for the read). `None`: every new process reads its `status` at once.
    pub status_later: Option<&'a dyn Fn(u32, u64) -> bool>,
}

/// The outcome of reading one file of one process.
enum Read<'a> {
    Bytes(&'a [u8]),
    Failed(ErrorKind),
}

#[allow(clippy::too_many_arguments)]
fn read_slot<'a>(
    slot: &'a mut Slot,
    root: &Root,
    pid: u32,
    file: &str,
    scratch: &'a mut Vec<u8>,
    shared: &'a mut Vec<u8>,
    fds: &mut Fds,
    cost: &mut SampleCost,
) -> Read<'a> {
    cost.files_read += 1;
    if matches!(slot, Slot::Unopened) {
        if !fds.may_keep() {
            *slot = Slot::Transient;
        } else {
            // Under `/` one `open`; under a host root also an `fstat` (see `Root::open`).
            match root.open_kept(format!("/proc/{pid}/{file}")) {
                Ok(f) => {
                    cost.files_opened += 1;
                    fds.kept += 1;
                    *slot = Slot::Kept(f);
                }
                Err(e) if is_fd_exhaustion(&e) => {
                    fds.exhausted = true;
                    *slot = Slot::Transient;
                }
                Err(e) => return Read::Failed(e.kind),
            }
        }
    }
    match slot {
        Slot::Kept(f) => match f.read_into(shared) {
            Ok(bytes) => Read::Bytes(bytes),
            Err(e) => Read::Failed(e.kind),
        },
        Slot::Transient => {
            cost.files_opened += 1;
            match root.read_into(format!("/proc/{pid}/{file}"), scratch) {
                Ok(()) => Read::Bytes(scratch),
                Err(e) => Read::Failed(e.kind),
            }
        }
        Slot::Unopened => Read::Failed(ErrorKind::Io),
    }
}

fn is_fd_exhaustion(e: &Error) -> bool {
    e.source.as_ref().and_then(|s| s.raw_os_error()).is_some_and(|c| c == libc::EMFILE || c == libc::ENFILE)
}

fn count(cost: &mut SampleCost, reader: &'static str, kind: ErrorKind) {
    *cost.errors.entry((reader, kind.as_str())).or_default() += 1;
}

impl ProcessTable {
    /// A table that keeps at most `fd_budget` per-pid files open.
    pub(crate) fn new(fd_budget: usize) -> Self {
        Self {
            entries: PidMap::default(),
            pids: Vec::new(),
            scratch: Vec::new(),
            shared: Vec::new(),
            cycle: 0,
            fds: Fds { kept: 0, budget: fd_budget, exhausted: false },
            fd_counts: None,
            fd_path: String::new(),
            task_tids: Vec::new(),
            missed: Vec::new(),
            cgroup_paths: HashMap::new(),
        }
    }

    /// Lists `/proc` and reads every process. Processes that exit mid-read are skipped and
    /// counted in `cost.processes_gone`; `new_pids` receives processes seen for the first time
    /// and those whose name changed since the last scan (an exec), whose command lines are
    /// to be read. With `stats` (the task iterator's scan, by pid) a process it has is not
    /// read from its `stat` file.
    pub(crate) fn scan(
        &mut self,
        root: &Root,
        opts: ScanOptions,
        cost: &mut SampleCost,
        new_pids: &mut Vec<(u32, u64)>,
        stats: Option<proctor_bpf::ByPid<'_>>,
    ) -> Vec<ProcessSample> {
        self.cycle += 1;
        let cycle = self.cycle;
        if cycle.is_multiple_of(CGROUP_PATHS_FORGET) || self.cgroup_paths.len() >= CGROUP_PATHS_MAX {
            self.cgroup_paths.clear();
        }
        if opts.fds && self.fd_counts.is_none() {
            // This process always holds fds (the kept per-pid files, stdio): a size of 0 is a
            // kernel that does not count them. A fake root's directories count nothing.
            let own = std::fs::symlink_metadata("/proc/self/fd").map_or(0, |m| m.len());
            self.fd_counts = Some(root.is_real() && own > 0);
        }
        let opts = ScanOptions { fds: opts.fds && self.fd_counts == Some(true), ..opts };
        if stats.is_none() || self.cycle % LIST_EVERY == 1 {
            if let Err(e) = proctor_procfs::system::list_pids(root, &mut self.pids) {
                count(cost, "process.list", e.kind);
            }
        } else {
            self.pids.clone_from(&self.missed);
        }
        // With the iterator's scan: the union of what it gave and what `/proc` lists (between
        // listings, what the last one found that the scan had not given), both by pid. A
        // process the iterator did not give (a kernel can keep a task from BPF iterators; one
        // started after its read) is read from its `stat`, and counted.
        let given_len = stats.map_or(0, |s| s.len());
        let mut out = Vec::with_capacity(self.pids.len().max(given_len));
        // Kept through a scan that failed (read from /proc alone): the next may not list.
        let remember = given_len > 0;
        if remember {
            self.missed.clear();
        }
        let (mut i, mut j) = (0, 0);
        while i < self.pids.len() || j < given_len {
            let listed = self.pids.get(i).copied();
            let given = stats.and_then(|s| s.get(j));
            let (pid, stat) = match (listed, given) {
                (Some(l), Some(g)) if l == g.pid => {
                    i += 1;
                    j += 1;
                    (l, Some(g))
                }
                (Some(l), Some(g)) if g.pid < l => {
                    j += 1;
                    (g.pid, Some(g))
                }
                (Some(l), _) => {
                    i += 1;
                    if given_len > 0 {
                        cost.task_iter_missed += 1;
                    }
                    (l, None)
                }
                (None, Some(g)) => {
                    j += 1;
                    (g.pid, Some(g))
                }
                (None, None) => break,
            };
            cost.processes_seen += 1;
            let new_before = new_pids.len();
            match self.read_process(root, pid, cycle, opts, cost, new_pids, stat) {
                Some(p) => {
                    if stat.is_none() && remember {
                        self.missed.push(pid);
                    }
                    out.push(p)
                }
                None => {
                    // Gone after its name was read (its `status` read found it reaped): not
                    // new, or it would count twice, new here and among the sample's exits.
                    new_pids.truncate(new_before);
                    self.entries.remove(&pid);
                }
            }
        }
        // Entries not seen this cycle belong to processes that exited: dropping them closes
        // their fds.
        if self.entries.len() > out.len() {
            self.entries.retain(|_, e| e.seen_cycle == cycle);
            self.fds.exhausted = false;
        }
        cost.fds_kept = self.entries.values().map(Entry::kept_fds).sum();
        self.fds.kept = cost.fds_kept as usize;
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn read_process(
        &mut self,
        root: &Root,
        pid: u32,
        cycle: u64,
        opts: ScanOptions,
        cost: &mut SampleCost,
        new_pids: &mut Vec<(u32, u64)>,
        given: Option<&PidStat>,
    ) -> Option<ProcessSample> {
        let fds = &mut self.fds;
        let scratch = &mut self.scratch;
        let shared = &mut self.shared;
        let cgroup_paths = &mut self.cgroup_paths;
        let entry = self.entries.entry(pid).or_insert_with(Entry::new);
        let read = match given {
            Some(stat) => {
                take_name(&mut entry.comm, &mut entry.renamed, stat.comm.as_bytes());
                Ok(without_name(stat))
            }
            None => read_stat(entry, root, pid, scratch, shared, fds, cost),
        };
        let stat = match read {
            Ok(s) => s,
            Err(ErrorKind::Gone) => {
                // A kept fd answers ESRCH once its task has exited, even if the pid was
                // reused since; try once more with a fresh open before calling it gone.
                if matches!(entry.stat, Slot::Kept(_)) {
                    *entry = Entry::new();
                    match read_stat(entry, root, pid, scratch, shared, fds, cost) {
                        Ok(s) => s,
                        Err(ErrorKind::Gone) => {
                            cost.processes_gone += 1;
                            return None;
                        }
                        Err(kind) => {
                            count(cost, "process.stat", kind);
                            return None;
                        }
                    }
                } else {
                    cost.processes_gone += 1;
                    return None;
                }
            }
            Err(kind) => {
                count(cost, "process.stat", kind);
                return None;
            }
        };
        if entry.start_ticks != stat.start_ticks {
            // A different process under a reused pid: nothing carried over applies to it.
            // Its fds were opened for the old task, so they are dropped and reopened lazily;
            // the name just read is its own.
            if entry.start_ticks != 0 {
                let comm = std::mem::replace(&mut entry.comm, Arc::from(""));
                *entry = Entry::new();
                entry.comm = comm;
            }
            entry.start_ticks = stat.start_ticks;
            entry.renamed = false;
            new_pids.push((pid, stat.start_ticks));
            if opts.cgroups {
                take_cgroup(entry, stat.cgroup_ids, cgroup_paths, root, pid, scratch, cost);
            }
        } else if opts.cgroups && stat.cgroup_ids.is_some() && entry.cgroup_ids != stat.cgroup_ids {
            // Moved to another cgroup since its cgroup was taken (a service manager moves a
            // child it forked; `cgexec`; a container runtime), or the scan gives the pair for
            // the first time.
            take_cgroup(entry, stat.cgroup_ids, cgroup_paths, root, pid, scratch, cost);
        } else if entry.cgroup_unconfirmed && stat.cgroup_ids.is_some() {
            // Read at an earlier scan under this pair, and still in it: the path is the pair's.
            // Unless it is exiting now: a task past the start of its exit is shown in the root
            // of every cgroup v1 hierarchy (`/proc/PID/cgroup` reads "/" there) while it keeps
            // its pair, so what was read may be that "/", and every process started under the
            // pair would take it.
            entry.cgroup_unconfirmed = false;
            if let Some(k) = entry.cgroup_ids.filter(|_| !matches!(stat.state, 'Z' | 'X')) {
                cgroup_paths.insert(k, entry.cgroup.clone());
            }
        }
        if entry.renamed {
            // The same process under a new name: it exec'd (a shell's `exec`, an entrypoint's
            // `exec "$@"`, a shim) or renamed itself; its command line is read again.
            entry.renamed = false;
            new_pids.push((pid, stat.start_ticks));
        }
        let key = (stat.rss_pages, stat.minflt, stat.majflt, stat.vsize_bytes);
        let moved = entry.status_key != Some(key);
        if moved
            && entry.status_key.is_none()
            && stat.effective_uid.is_some()
            && opts.status_later.is_some_and(|later| later(pid, stat.start_ticks))
        {
            // A young forked child (see `ScanOptions::status_later`): its user from the scan,
            // its `status` read at its next sample if it is still there (`status_key` unset).
            entry.status_reading = Some(StatusReading {
                effective_uid: stat.effective_uid,
                rss_anon_bytes: None,
                rss_file_bytes: None,
                rss_shmem_bytes: None,
                vm_swap_bytes: None,
                read_mono_ns: opts.mono_ns,
            });
            entry.status_resident_bytes = None;
            cost.status_later += 1;
        } else if moved {
            match read_slot(&mut entry.status, root, pid, "status", scratch, shared, fds, cost) {
                Read::Bytes(b) => match parse_status(b) {
                    Some(s) => {
                        entry.status_reading = Some(StatusReading {
                            effective_uid: s.effective_uid,
                            rss_anon_bytes: s.rss_anon_bytes,
                            rss_file_bytes: s.rss_file_bytes,
                            rss_shmem_bytes: s.rss_shmem_bytes,
                            vm_swap_bytes: s.vm_swap_bytes,
                            read_mono_ns: opts.mono_ns,
                        });
                        entry.status_resident_bytes = s.vm_rss_bytes;
                        entry.status_key = Some(key);
                    }
                    None => {
                        entry.status_resident_bytes = None;
                        count(cost, "process.status", ErrorKind::Parse);
                    }
                },
                Read::Failed(ErrorKind::Gone) => {
                    cost.processes_gone += 1;
                    return None;
                }
                Read::Failed(kind) => {
                    // Not retried every cycle: a denied status stays denied for this process.
                    entry.status_key = Some(key);
                    entry.status_resident_bytes = None;
                    count(cost, "process.status", kind);
                }
            }
        }
        let io = if opts.io {
            match read_slot(&mut entry.io, root, pid, "io", scratch, shared, fds, cost) {
                Read::Bytes(b) => parse_io(b).map(Box::new).or_else(|| {
                    count(cost, "process.io", ErrorKind::Parse);
                    None
                }),
                Read::Failed(ErrorKind::Gone) => None,
                Read::Failed(kind) => {
                    count(cost, "process.io", kind);
                    None
                }
            }
        } else {
            None
        };
        // The task scan counts a process's fds with its other fields (a table of up to 256);
        // else one `statx` of its /proc/PID/fd.
        let open_fds = if !opts.fds {
            None
        } else if let Some(n) = stat.open_fds {
            Some(n)
        } else if !entry.fds_denied {
            open_fds(root, &mut self.fd_path, pid, &mut entry.fds_denied, cost)
        } else {
            None
        };
        // Kernel threads have no userland threads; a single-threaded process's one thread is
        // its own row.
        let tasks = if opts.threads && stat.num_threads > 1 && pid != 2 && stat.ppid != 2 {
            read_tasks(root, pid, &mut self.task_tids, scratch, cost)
        } else {
            Vec::new()
        };
        // Set last: the resets above replace the whole entry.
        entry.seen_cycle = cycle;
        Some(ProcessSample {
            pid,
            ppid: stat.ppid,
            start_ticks: stat.start_ticks,
            comm: entry.comm.clone(),
            state: stat.state,
            utime_ticks: stat.utime_ticks,
            stime_ticks: stat.stime_ticks,
            cutime_ticks: Some(stat.cutime_ticks),
            cstime_ticks: Some(stat.cstime_ticks),
            cminflt: Some(stat.cminflt),
            cmajflt: Some(stat.cmajflt),
            open_fds,
            num_threads: stat.num_threads,
            minflt: stat.minflt,
            majflt: stat.majflt,
            nice: stat.nice,
            vsize_bytes: stat.vsize_bytes,
            resident_bytes: entry.status_resident_bytes.or(Some(stat.rss_pages * opts.page_size)),
            status: entry.status_reading,
            io,
            cmdline: None,
            pss: None,
            pss_stale: false,
            pss_estimate: None,
            cgroup: entry.cgroup.clone(),
            tasks,
            stall: None,
            net: None,
        })
    }

    /// The cgroup paths learned by id pair (`cgroup_paths`), for the exits of processes the
    /// table never listed.
    pub(crate) fn cgroup_paths(&self) -> &HashMap<[u64; 2], Option<Arc<str>>> {
        &self.cgroup_paths
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Closes every kept `/proc/PID/io` (its reads were turned off); the next scan counts the
    /// kept fds afresh.
    pub(crate) fn close_io(&mut self) {
        for entry in self.entries.values_mut() {
            entry.io = Slot::Unopened;
        }
    }
}

/// Takes a process's cgroup: the path learned for its id pair where the scan gave one and a
/// process with that pair was read before, else read from `/proc/PID/cgroup` (and learned).
fn take_cgroup(
    entry: &mut Entry,
    ids: Option<[u64; 2]>,
    paths: &HashMap<[u64; 2], Option<Arc<str>>>,
    root: &Root,
    pid: u32,
    scratch: &mut Vec<u8>,
    cost: &mut SampleCost,
) {
    entry.cgroup_ids = ids;
    entry.cgroup_unconfirmed = false;
    if let Some(known) = ids.and_then(|k| paths.get(&k)) {
        entry.cgroup = known.clone();
        return;
    }
    match root.read_into(format!("/proc/{pid}/cgroup"), scratch) {
        Ok(()) => {
            cost.files_read += 1;
            cost.files_opened += 1;
            entry.cgroup = parse_cgroup(scratch).and_then(|m| {
                let v2 = m.iter().find(|c| c.is_v2());
                let mem = m.iter().find(|c| c.controllers.iter().any(|c| c == "memory"));
                // Prefer the v2 path where v2 holds the memory controller; on hybrid hosts the
                // v1 memory path is the container's identity.
                mem.or(v2).map(|c| Arc::from(c.path.as_str()))
            });
            // Learned at the next scan, if the process is still under this pair.
            entry.cgroup_unconfirmed = ids.is_some();
        }
        Err(e) if e.kind == ErrorKind::Gone => {}
        Err(e) => count(cost, "process.cgroup", e.kind),
    }
}

/// A process's open fds: the size `stat` gives its `/proc/PID/fd` (one `statx`, no directory
/// walk, no lock on its memory; only asked of a live `/proc`, under a host root too). Gone is
/// `None`; denied (another user's process) is counted once and marks the process so it is not
/// asked again.
fn open_fds(root: &Root, path: &mut String, pid: u32, denied: &mut bool, cost: &mut SampleCost) -> Option<u32> {
    use std::fmt::Write;
    path.clear();
    if root.is_host() {
        let _ = write!(path, "{}", root.dir().display());
    }
    let _ = write!(path, "/proc/{pid}/fd");
    cost.files_read += 1;
    match std::fs::symlink_metadata(path.as_str()) {
        Ok(m) => u32::try_from(m.len()).ok(),
        Err(e) => {
            let kind = ErrorKind::of_io(&e);
            if kind != ErrorKind::Gone {
                *denied = kind == ErrorKind::Permission;
                count(cost, "process.fd", kind);
            }
            None
        }
    }
}

/// The threads of `pid` other than its main one, sorted by tid: one listing of
/// `/proc/PID/task` and an open, read and close of each thread's `stat` (threads come and go
/// too fast for kept fds to pay, and this runs only while asked). A thread that exited between
/// listing and reading is skipped; other failures are counted under `process.task`.
fn read_tasks(
    root: &Root,
    pid: u32,
    tids: &mut Vec<u32>,
    scratch: &mut Vec<u8>,
    cost: &mut SampleCost,
) -> Vec<TaskSample> {
    tids.clear();
    cost.files_read += 1;
    cost.files_opened += 1;
    match std::fs::read_dir(root.path(format!("/proc/{pid}/task"))) {
        Ok(dir) => {
            tids.extend(dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()).filter(|&t| t != pid))
        }
        Err(e) => {
            let kind = ErrorKind::of_io(&e);
            if kind != ErrorKind::Gone {
                count(cost, "process.task", kind);
            }
            return Vec::new();
        }
    }
    tids.sort_unstable();
    let mut out = Vec::with_capacity(tids.len());
    for &tid in tids.iter() {
        cost.files_read += 1;
        cost.files_opened += 1;
        match root.read_into(format!("/proc/{pid}/task/{tid}/stat"), scratch) {
            Ok(()) => match parse_stat_borrowed(scratch) {
                Some((stat, comm)) => out.push(TaskSample {
                    tid,
                    start_ticks: stat.start_ticks,
                    comm: Arc::from(String::from_utf8_lossy(comm).as_ref()),
                    state: stat.state,
                    utime_ticks: stat.utime_ticks,
                    stime_ticks: stat.stime_ticks,
                }),
                None => count(cost, "process.task", ErrorKind::Parse),
            },
            Err(e) if e.kind == ErrorKind::Gone => {}
            Err(e) => count(cost, "process.task", e.kind),
        }
    }
    out
}

/// The fields of `stat` but its name (which the entry holds): no allocation per process.
fn without_name(stat: &PidStat) -> PidStat {
    PidStat {
        pid: stat.pid,
        comm: String::new(),
        state: stat.state,
        ppid: stat.ppid,
        pgrp: stat.pgrp,
        session: stat.session,
        minflt: stat.minflt,
        majflt: stat.majflt,
        utime_ticks: stat.utime_ticks,
        stime_ticks: stat.stime_ticks,
        cutime_ticks: stat.cutime_ticks,
        cstime_ticks: stat.cstime_ticks,
        cminflt: stat.cminflt,
        cmajflt: stat.cmajflt,
        priority: stat.priority,
        nice: stat.nice,
        num_threads: stat.num_threads,
        start_ticks: stat.start_ticks,
        vsize_bytes: stat.vsize_bytes,
        rss_pages: stat.rss_pages,
        processor: stat.processor,
        blkio_ticks: stat.blkio_ticks,
        open_fds: stat.open_fds,
        cgroup_ids: stat.cgroup_ids,
        effective_uid: stat.effective_uid,
    }
}

/// Copies the name only when it changed (exec, prctl): nearly never. A process that had a
/// name before was renamed; whether it is the same process (and not a reused pid) is for the
/// caller to tell by its start time.
fn take_name(name: &mut Arc<str>, renamed: &mut bool, comm: &[u8]) {
    if name.as_bytes() != comm {
        *renamed = !name.is_empty();
        *name = Arc::from(String::from_utf8_lossy(comm).as_ref());
    }
}

fn read_stat(
    entry: &mut Entry,
    root: &Root,
    pid: u32,
    scratch: &mut Vec<u8>,
    shared: &mut Vec<u8>,
    fds: &mut Fds,
    cost: &mut SampleCost,
) -> Result<PidStat, ErrorKind> {
    match read_slot(&mut entry.stat, root, pid, "stat", scratch, shared, fds, cost) {
        Read::Bytes(b) => {
            if let Some(stat) = entry.stat_parsed.as_ref().filter(|_| entry.stat_line == b) {
                return Ok(stat.clone());
            }
            entry.stat_parsed = None;
            let (stat, comm) = parse_stat_borrowed(b).ok_or(ErrorKind::Parse)?;
            take_name(&mut entry.comm, &mut entry.renamed, comm);
            entry.stat_line.clear();
            entry.stat_line.extend_from_slice(b);
            entry.stat_parsed = Some(stat.clone());
            Ok(stat)
        }
        Read::Failed(kind) => Err(kind),
    }
}
