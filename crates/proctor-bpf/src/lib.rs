//! Below the `/proc` floor (issue 35): the BPF task iterator.
//!
//! `/proc/PID/stat` costs an open, a read and a close per process, and the kernel formats every
//! number as text that the reader parses back. A task iterator (Linux 5.8+) is a BPF program the
//! kernel runs for every task while user space reads one file: [`TaskIter::scan`] gets, in a
//! handful of `read`s, a fixed-size binary record per task (bpf/task_iter.bpf.c) and sums each
//! process's threads into the [`PidStat`] the stat parser gives, in the same units (clock
//! ticks, pages, bytes), computed the way the kernel computes them for `stat`.
//!
//! The program is C, built by clang into `bpf/task_iter.bpf.o`, which is checked in: a build
//! without clang works, and `bpf/build.sh` rebuilds it (the test command rebuilds and compares).
//! aya loads it, fitting its field offsets to the running kernel's BTF (CO-RE).
//!
//! [`TaskIter::open`] says why it cannot be used, in words a person can act on: no kernel BTF,
//! no CAP_BPF/CAP_PERFMON, a kernel whose layout the program does not fit, another pid
//! namespace (the iterator sees the reader's namespace, its records carry the root's pids).

use std::fmt;
use std::io::Read;
use std::sync::{Arc, Mutex, OnceLock};

use aya::programs::Iter;
use aya::{Btf, Ebpf, EbpfLoader};
use proctor_procfs::process::PidMap;
pub use proctor_procfs::process::PidStat;

pub mod events;
pub mod net;
mod scan;
pub use events::{Counts, Event, ExecEvent, ExitEvent, FinalEvent, Subscription};
pub use net::NetTable;
pub use scan::{SLOT_BYTES, TASK_SCAN_OBJECT};

/// The iterator program, as clang built it from `bpf/task_iter.bpf.c` (`bpf/build.sh`).
pub static TASK_ITER_OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/task_iter.bpf.o");

/// The program's name in the object (its function name).
const PROGRAM: &str = "proctor_tasks";

/// One task's record, as `struct record` in bpf/task_record.h lays it out: 36 eight-byte
/// words, the comm's 16 bytes, a kernel thread's full name (64) and a worker's description (32).
const WORDS: usize = 36;
pub const RECORD_BYTES: usize = WORDS * 8 + 16 + 64 + 32;
/// A user process's record: `struct record` up to its kernel-thread names.
pub const PROCESS_BYTES: usize = WORDS * 8 + 16;
/// A thread's record (`struct thread_record`): 8 words.
pub const THREAD_BYTES: usize = 8 * 8;
/// `stat` prints a name of at most this many bytes (its buffer of 64, with the NUL).
const NAME_MAX: usize = 63;

/// Why the iterator cannot be used here; the agent reads `/proc` instead and says this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// A record that does not have the size this reader was built for, or output that ends inside
/// a record: the object and the reader disagree, or the read was cut. The scan is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadOutput(pub String);

/// What one scan cost and covered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanCost {
    /// Tasks (threads) the kernel gave a record for.
    pub tasks: u64,
    /// Processes returned (thread groups whose leader was seen).
    pub processes: u64,
    /// `read` calls on the iterator's file, the last one returning 0.
    pub reads: u64,
    pub bytes: u64,
    /// CPU time of the calling thread during the scan (the kernel's work in `read` included).
    pub cpu_ns: u64,
    /// The part of `cpu_ns` before the records were summed: the program's runs (the kernel's
    /// walk) or the file's reads; the rest is this reader's.
    pub kernel_cpu_ns: u64,
}

/// How [`TaskIter`] reads the tasks.
enum Reader {
    /// The open-coded task iterator (6.7+): one program run writes every record into a slot
    /// of a mapped map (`scan.rs`).
    Scan(Arc<Mutex<scan::Scanner>>),
    /// The `iter/task` program: each scan attaches it (one link), makes an iterator file from
    /// it and reads that to its end, into `buffer` (zeroed once when it grows, not before
    /// every read); `filled` is how much of it the last scan filled.
    File { bpf: Arc<Mutex<Ebpf>>, buffer: Vec<u8>, filled: usize },
}

/// The loaded task reader: the open-coded scan where the kernel has it, else the task
/// iterator's file. [`how`](TaskIter::how) says which, and why not the first.
pub struct TaskIter {
    reader: Reader,
    summer: Summer,
    /// Whether the open-coded scan counts each process's open fds ([`TaskIter::count_fds`]).
    fds: bool,
    /// Why the open-coded scan is not used, when the file is read.
    no_scan: Option<String>,
}

impl fmt::Debug for TaskIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskIter").field("how", &self.how()).finish_non_exhaustive()
    }
}

/// Which way [`TaskIter::open_with`] reads the tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// The open-coded scan where the kernel has it (6.7+), else the iterator's file.
    Best,
    /// The `iter/task` program's file, even where the open-coded scan would serve (tests and
    /// `bench/bpf` compare the two).
    File,
}

impl TaskIter {
    /// Loads the reader and checks it here: a first scan must find this process under its own
    /// pid. `Err` says why no BPF reader can be used, for `doctor` and the agent's status.
    pub fn open() -> Result<TaskIter, Unavailable> {
        TaskIter::open_with(Way::Best)
    }

    pub fn open_with(way: Way) -> Result<TaskIter, Unavailable> {
        // Asked first, so that a process without them does not parse the kernel's BTF (some MB)
        // only to be refused.
        if !may_load_tracing() {
            return Err(Unavailable(
                "this process may not load BPF tracing programs: proctor needs CAP_BPF and CAP_PERFMON (or root)"
                    .to_string(),
            ));
        }
        let (reader, no_scan) = match way {
            Way::Best => {
                load_parts(true, false, false);
                let parts = parts().lock().unwrap_or_else(|e| e.into_inner());
                match (parts.scan.clone().expect("loaded above"), &parts.iter) {
                    (Ok(scanner), _) => (Reader::Scan(scanner), None),
                    (Err(why), Some(file)) => (file_reader(file.clone()?), Some(why.0)),
                    (Err(why), None) => return Err(why),
                }
            }
            Way::File => {
                load_file();
                let parts = parts().lock().unwrap_or_else(|e| e.into_inner());
                (file_reader(parts.iter.clone().expect("loaded above")?), Some("asked for the file".to_string()))
            }
        };
        // SAFETY: sysconf has no preconditions.
        let (page, tick) = unsafe { (libc::sysconf(libc::_SC_PAGESIZE), libc::sysconf(libc::_SC_CLK_TCK)) };
        let units = Units {
            page_bytes: u64::try_from(page).unwrap_or(4096).max(1),
            ns_per_tick: 1_000_000_000 / u64::try_from(tick).unwrap_or(100).max(1),
        };
        let mut iter = TaskIter { reader, summer: Summer::new(units), fds: false, no_scan };
        let mut out = Vec::new();
        if let Err(e) = iter.scan(&mut out) {
            if !iter.open_coded() {
                return Err(Unavailable(format!("the first scan failed: {e}")));
            }
            // A kernel that loads the program but will not run it: the file, if it loads.
            load_file();
            let file = parts().lock().unwrap_or_else(|e| e.into_inner()).iter.clone().expect("loaded above")?;
            iter.reader = file_reader(file);
            iter.no_scan = Some(format!("its first run failed: {e}"));
            iter.scan(&mut out).map_err(|e| Unavailable(format!("the first scan failed: {e}")))?;
        }
        let me = std::process::id();
        if !out.iter().any(|p| p.pid == me) {
            return Err(Unavailable(format!(
                "this process (pid {me}) is not in the iterator's records under its own pid: proctor runs in another pid \
                 namespace than the one the records number tasks in"
            )));
        }
        Ok(iter)
    }

    /// Which reader runs, in words: the open-coded scan, or the iterator's file and why not
    /// the scan.
    pub fn how(&self) -> String {
        match (&self.reader, &self.no_scan) {
            (Reader::Scan(_), _) => "the open-coded task iterator, one program run per scan".to_string(),
            (Reader::File { .. }, Some(why)) => format!("the task iterator's file (not the open-coded scan: {why})"),
            (Reader::File { .. }, None) => "the task iterator's file".to_string(),
        }
    }

    /// Whether the open-coded scan runs (else the iterator's file is read).
    pub fn open_coded(&self) -> bool {
        matches!(self.reader, Reader::Scan(_))
    }

    /// Every process's stat fields, into `out` (cleared first), by pid, threads summed into
    /// their process. The name is the leader's, as `stat` prints it.
    pub fn scan(&mut self, out: &mut Vec<PidStat>) -> Result<ScanCost, Box<dyn std::error::Error + Send + Sync>> {
        self.summer.place = true;
        self.read_and_sum(out)
    }

    /// [`scan`](TaskIter::scan) as the agent runs it: `out` is left in the order the kernel
    /// gave the processes (the open-coded walk gives them as they were made, which pid reuse
    /// scrambles), and [`by_pid`](TaskIter::by_pid) reads it by pid through an index, so no
    /// process is moved (putting 5,000 in place moved ~1 MB a scan, most of them shifted by a
    /// few early ones out of place). A group whose leader was not seen stays in `out`, and
    /// `by_pid` leaves it out.
    pub fn scan_by_pid(
        &mut self,
        out: &mut Vec<PidStat>,
    ) -> Result<ScanCost, Box<dyn std::error::Error + Send + Sync>> {
        self.summer.place = false;
        self.read_and_sum(out)
    }

    /// Has the scans count each process's open fds (`PidStat::open_fds`, as `stat` of
    /// `/proc/PID/fd` gives them) where the open-coded scan runs: a few cache misses a process,
    /// so off unless asked. The iterator's file never counts them (`None`).
    pub fn count_fds(&mut self, fds: bool) {
        self.fds = fds;
    }

    /// The last scan's processes by pid, `out` being what it filled.
    pub fn by_pid<'a>(&'a self, out: &'a [PidStat]) -> ByPid<'a> {
        ByPid { stats: out, order: &self.summer.order }
    }

    fn read_and_sum(&mut self, out: &mut Vec<PidStat>) -> Result<ScanCost, Box<dyn std::error::Error + Send + Sync>> {
        let started = thread_cpu_ns();
        let (tasks, reads, bytes, read) = match &mut self.reader {
            Reader::Scan(scanner) => {
                let mut scanner = scanner.lock().map_err(|_| "another scan panicked")?;
                let (slots, runs) = scanner.run(self.fds)?;
                let read = thread_cpu_ns();
                (self.summer.sum_slots(slots, out)?, runs, slots.len(), read)
            }
            Reader::File { bpf, buffer, filled } => {
                let reads = read_file(bpf, buffer, filled)?;
                let read = thread_cpu_ns();
                (self.summer.sum(&buffer[..*filled], out)?, reads, *filled, read)
            }
        };
        Ok(ScanCost {
            tasks,
            processes: self.summer.order.len() as u64,
            reads,
            bytes: bytes as u64,
            cpu_ns: thread_cpu_ns().saturating_sub(started),
            kernel_cpu_ns: read.saturating_sub(started),
        })
    }
}

/// A scan's processes by pid ([`TaskIter::by_pid`]).
#[derive(Debug, Clone, Copy)]
pub struct ByPid<'a> {
    stats: &'a [PidStat],
    /// `pid << 32 | index into stats`, by pid.
    order: &'a [u64],
}

impl<'a> ByPid<'a> {
    /// Processes whose leader was seen.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The `j`th process by pid.
    pub fn get(&self, j: usize) -> Option<&'a PidStat> {
        self.order.get(j).and_then(|&key| self.stats.get((key & u64::from(u32::MAX)) as usize))
    }

    /// Every process, by pid.
    pub fn iter(&self) -> impl Iterator<Item = &'a PidStat> + '_ {
        (0..self.len()).filter_map(|j| self.get(j))
    }
}

fn file_reader(bpf: Arc<Mutex<Ebpf>>) -> Reader {
    Reader::File { bpf, buffer: vec![0; 64 << 10], filled: 0 }
}

/// Attaches the iterator program, reads its file to the end into `buffer` (grown as needed)
/// and returns the `read` calls made.
fn read_file(
    bpf: &Mutex<Ebpf>,
    buffer: &mut Vec<u8>,
    filled: &mut usize,
) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
    let mut file = {
        let mut bpf = bpf.lock().map_err(|_| "another scan panicked while attaching")?;
        let program: &mut Iter = bpf.program_mut(PROGRAM).ok_or("program gone")?.try_into()?;
        let link = program.attach()?;
        program.take_link(link)?.into_file()?
    };
    *filled = 0;
    let mut reads = 0u64;
    loop {
        if buffer.len() - *filled < 16 << 10 {
            buffer.resize(buffer.len() * 2, 0);
        }
        let n = file.read(&mut buffer[*filled..]);
        reads += 1;
        match n {
            Ok(0) => break,
            Ok(n) => *filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(reads)
}

/// What this process has loaded: each part once, its outcome kept (a kernel that refused once
/// is not asked again), shared by every sampler (a test binary or the Python package starts
/// many), so the kernel's BTF is parsed once per load for all the parts, and once more by each
/// aya loader, one parse held at a time ([`loader`]: ~15 MB of small allocations each, handed
/// back after with `malloc_trim`; the peak stays in VmHWM).
#[derive(Default)]
pub(crate) struct Parts {
    pub(crate) scan: Option<Result<Arc<Mutex<scan::Scanner>>, Unavailable>>,
    pub(crate) iter: Option<Result<Arc<Mutex<Ebpf>>, Unavailable>>,
    pub(crate) events: Option<Result<Arc<events::Hub>, Unavailable>>,
    pub(crate) net: Option<Result<Arc<net::Loaded>, Unavailable>>,
}

pub(crate) fn parts() -> &'static Mutex<Parts> {
    static PARTS: OnceLock<Mutex<Parts>> = OnceLock::new();
    PARTS.get_or_init(Mutex::default)
}

/// Loads the parts asked for that are not loaded yet, parsing the kernel's BTF once for all of
/// them: [`open`] asks for all at once. `tasks`: a task reader, the open-coded scan or, where
/// it cannot load, the iterator's file.
pub(crate) fn load_parts(tasks: bool, events: bool, net: bool) {
    load_with(tasks, false, events, net);
}

/// Loads the iterator's file program, whether or not the open-coded scan serves.
fn load_file() {
    load_with(false, true, false, false);
}

fn load_with(tasks: bool, file: bool, events: bool, net: bool) {
    let mut parts = parts().lock().unwrap_or_else(|e| e.into_inner());
    let want_scan = tasks && parts.scan.is_none();
    let want_events = events && parts.events.is_none();
    let want_net = net && parts.net.is_none();
    // The file where asked, or where the scan is refused (known only after trying it).
    let file_needed =
        |parts: &Parts| parts.iter.is_none() && (file || (tasks && parts.scan.as_ref().is_some_and(|s| s.is_err())));
    if !want_scan && !want_events && !want_net && !file_needed(&parts) {
        return;
    }
    // The loaders first, each without the BTF it parsed ([`loader`]), then ours, set on each:
    // one parse held at a time.
    let events_loader = want_events.then(loader);
    let net_loader = want_net.then(loader);
    let mut file_loader = file_needed(&parts).then(loader);
    let btf = Btf::from_sys_fs().map_err(|e| {
        Unavailable(format!("no kernel BTF (/sys/kernel/btf/vmlinux: {e}); the kernel needs CONFIG_DEBUG_INFO_BTF"))
    });
    if want_scan {
        parts.scan = Some(match &btf {
            Ok(btf) => scan::prepare(btf).and_then(scan::Scanner::load).map(|s| Arc::new(Mutex::new(s))),
            Err(e) => Err(e.clone()),
        });
    }
    if file_needed(&parts) {
        parts.iter = Some(match &btf {
            // Made now where only the scan's refusal asks for the file: two parses held for
            // the moment it takes.
            Ok(btf) => load(file_loader.take().unwrap_or_else(loader), btf).map(|bpf| Arc::new(Mutex::new(bpf))),
            Err(e) => Err(e.clone()),
        });
    }
    if let Some(l) = events_loader {
        parts.events = Some(match &btf {
            Ok(btf) => events::Hub::load(l, btf).map(Arc::new),
            Err(e) => Err(e.clone()),
        });
    }
    if let Some(l) = net_loader {
        parts.net = Some(match &btf {
            Ok(btf) => net::Loaded::load(l, btf).map(Arc::new),
            Err(e) => Err(e.clone()),
        });
    }
    drop(btf);
    proctor_procfs::system::trim_heap();
}

/// What [`open`] was asked for, each `Err` with its reason.
#[derive(Debug, Default)]
pub struct Opened {
    pub iter: Option<Result<TaskIter, Unavailable>>,
    pub events: Option<Result<Subscription, Unavailable>>,
    pub net: Option<Result<NetTable, Unavailable>>,
}

/// Opens what BPF gives the sampler, parsing the kernel's BTF once: the task iterator (when
/// `iter`), the process events (when `events`) and the network table (when `net`).
pub fn open(iter: bool, events: bool, net: bool) -> Opened {
    if (iter || events || net) && may_load_tracing() {
        load_parts(iter, events, net);
    }
    Opened { iter: iter.then(TaskIter::open), events: events.then(Subscription::open), net: net.then(NetTable::open) }
}

/// Why a part that numbers processes as the host does cannot serve this process: it runs in a
/// pid namespace of its own (its /proc numbers them otherwise). `None` in the host's. `what`:
/// "the events number processes", say.
pub(crate) fn other_pid_namespace(what: &str) -> Option<String> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    (link.to_str() != Some("pid:[4026531836]")).then(|| {
        format!(
            "proctor runs in a pid namespace of its own ({}): {what} as the host does, its /proc does not (run \
             with the host's pid namespace: --pid=host, hostPID)",
            link.display()
        )
    })
}

/// A loader without a BTF of its own: aya's `EbpfLoader::new` parses the kernel's BTF (a 5.5 MB
/// file here, ~15 MB of allocations while it parses), which is dropped here at once; the
/// caller sets the one it parsed for all the parts. Made before that one is parsed, no two are
/// held at once: held together, they took `serve`'s peak resident size (VmHWM) to 42 MB.
pub(crate) fn loader<'a>() -> EbpfLoader<'a> {
    let mut loader = EbpfLoader::new();
    loader.btf(None);
    loader
}

/// Fits the iterator object to the kernel's BTF and loads the program.
fn load<'a>(mut loader: EbpfLoader<'a>, btf: &'a Btf) -> Result<Ebpf, Unavailable> {
    let mut bpf = loader.btf(Some(btf)).load(TASK_ITER_OBJECT).map_err(|e| {
        Unavailable(refused(&e, "the iterator program does not fit this kernel (Linux 6.2 or later is needed)"))
    })?;
    let program: &mut Iter = bpf
        .program_mut(PROGRAM)
        .ok_or_else(|| Unavailable(format!("the object has no program {PROGRAM}")))?
        .try_into()
        .map_err(|e| Unavailable(format!("{PROGRAM} is not an iterator program: {e}")))?;
    program.load("task", btf).map_err(|e| Unavailable(load_error(&e)))?;
    Ok(bpf)
}

/// What the kernel said refusing an object (its maps or programs), in words a person can act
/// on: a refusal for want of privilege says what is needed.
pub(crate) fn refused(e: &(dyn std::error::Error + 'static), otherwise: &str) -> String {
    let mut chain = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        chain.push_str(": ");
        chain.push_str(&s.to_string());
        source = s.source();
    }
    if chain.contains("Operation not permitted") || chain.contains("Permission denied") || chain.contains("EPERM") {
        format!("the kernel refused it ({chain}): {NEEDS}")
    } else {
        format!("{otherwise}: {chain}")
    }
}

/// What loading needs, said with every refusal for want of privilege.
const NEEDS: &str = "proctor needs CAP_BPF and CAP_PERFMON (or root), and in a container a seccomp profile that lets \
                     bpf(2) through";

pub(crate) fn load_error(e: &aya::programs::ProgramError) -> String {
    // EACCES to a process that may load it is the verifier's no, not a missing capability.
    if let aya::programs::ProgramError::LoadError { io_error, verifier_log } = e {
        if io_error.raw_os_error() == Some(libc::EACCES) && may_load_tracing() {
            return format!(
                "the kernel's verifier rejected it ({io_error}): {}",
                verifier_reason(&verifier_log.to_string())
            );
        }
    }
    let text = e.to_string();
    let mut source = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    if detail.contains("Operation not permitted") || detail.contains("Permission denied") || text.contains("EPERM") {
        format!("the kernel refused to load it ({detail}): {}", refused_why(may_load_tracing()))
    } else {
        format!(
            "the kernel refused to load it: {text}{}",
            if detail.is_empty() { String::new() } else { format!(": {detail}") }
        )
    }
}

/// Why a load was refused with EPERM: the capabilities where this process lacks them; where it
/// has them, a policy (a kernel locked down, as this project's machines boot, refuses some
/// program types on some boots and not others; a security module or seccomp may too).
fn refused_why(capable: bool) -> String {
    if capable {
        "this process has CAP_BPF and CAP_PERFMON, so a kernel policy refused it (lockdown, a security module, \
         or a seccomp profile)"
            .to_string()
    } else {
        NEEDS.to_string()
    }
}

/// What a verifier log says was wrong: its last line before the closing statistics (the
/// instruction and the register it refused), at most 200 characters.
fn verifier_reason(log: &str) -> String {
    let statistics = ["verification time", "stack depth", "processed ", "-- END PROG LOAD LOG --"];
    let line = log
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty() && !statistics.iter().any(|s| l.starts_with(s)))
        .unwrap_or("the kernel gave no log");
    line.chars().take(200).collect()
}

/// Whether this process's effective capabilities include CAP_SYS_ADMIN, or CAP_BPF and
/// CAP_PERFMON: what loading a tracing program (an iterator) takes. Unknown reads as yes (the
/// load then says).
pub(crate) fn may_load_tracing() -> bool {
    has_capability(21) || (has_capability(38) && has_capability(39))
}

/// Whether this process's effective capabilities include capability number `bit`. Unknown
/// reads as yes (what needs it then says).
pub(crate) fn has_capability(bit: u32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return true };
    let Some(caps) = status.lines().find_map(|l| l.strip_prefix("CapEff:")) else { return true };
    let Ok(caps) = u64::from_str_radix(caps.trim(), 16) else { return true };
    caps & (1 << bit) != 0
}

pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// How the kernel's units become `stat`'s.
#[derive(Debug, Clone, Copy)]
pub struct Units {
    pub page_bytes: u64,
    pub ns_per_tick: u64,
}

/// One record's words after its size, tid and tgid, by name (the order of `struct record`).
#[derive(Debug, Default, Clone, Copy)]
struct Record {
    ppid: u64,
    pgrp: u64,
    session: u64,
    state: u64,
    exit_state: u64,
    flags: u64,
    prio: i64,
    static_prio: i64,
    cpu: u64,
    nr_threads: u64,
    utime: u64,
    stime: u64,
    runtime: u64,
    min_flt: u64,
    maj_flt: u64,
    start_boottime: u64,
    sig_utime: u64,
    sig_stime: u64,
    sig_runtime: u64,
    sig_min_flt: u64,
    sig_maj_flt: u64,
    cutime: u64,
    cstime: u64,
    cmin_flt: u64,
    cmaj_flt: u64,
    total_vm: u64,
    rss: [i64; 3],
    open_fds: u64,
    cgroup_ids: [u64; 2],
    euid: u64,
}

/// A record's length from its first word, which must be one of the three sizes this reader
/// reads.
fn record_len(size: u64) -> Result<usize, BadOutput> {
    match usize::try_from(size) {
        Ok(len @ (RECORD_BYTES | PROCESS_BYTES | THREAD_BYTES)) => Ok(len),
        _ => Err(BadOutput(format!(
            "a record says it is {size} bytes, this reader reads {RECORD_BYTES}, {PROCESS_BYTES} and {THREAD_BYTES}: \
             the object and the reader disagree"
        ))),
    }
}

/// Word `i` of a record (the caller knows it has one).
#[inline(always)]
fn word(bytes: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

#[inline(always)]
fn record(bytes: &[u8]) -> (Record, &[u8]) {
    // One bounds check for all the words.
    let words: &[u8; WORDS * 8] = bytes[..WORDS * 8].try_into().expect("a record's words");
    let word = |i: usize| word(words, i);
    let r = Record {
        ppid: word(3),
        pgrp: word(4),
        session: word(5),
        state: word(6),
        exit_state: word(7),
        flags: word(8),
        prio: word(9) as i64,
        static_prio: word(10) as i64,
        cpu: word(11),
        nr_threads: word(12),
        utime: word(13),
        stime: word(14),
        runtime: word(15),
        min_flt: word(16),
        maj_flt: word(17),
        start_boottime: word(18),
        sig_utime: word(19),
        sig_stime: word(20),
        sig_runtime: word(21),
        sig_min_flt: word(22),
        sig_maj_flt: word(23),
        cutime: word(24),
        cstime: word(25),
        cmin_flt: word(26),
        cmaj_flt: word(27),
        total_vm: word(28),
        rss: [word(29) as i64, word(30) as i64, word(31) as i64],
        open_fds: word(32),
        cgroup_ids: [word(33), word(34)],
        euid: word(35),
    };
    (r, &bytes[WORDS * 8..])
}

/// A name field of the record, empty where the record stops before it.
fn field(names: &[u8], from: usize, to: usize) -> &[u8] {
    c_str(names.get(from..to).unwrap_or_default())
}

#[inline(always)]
fn thread_record(bytes: &[u8]) -> Record {
    let words: &[u8; THREAD_BYTES] = bytes[..THREAD_BYTES].try_into().expect("a thread record's words");
    let word = |i: usize| word(words, i);
    Record { utime: word(3), stime: word(4), runtime: word(5), min_flt: word(6), maj_flt: word(7), ..Record::default() }
}

pub(crate) fn c_str(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())]
}

/// The name `stat` prints for a task, from the record's names (`names`: comm, full name,
/// description, as the record lays them out): a workqueue worker's name (full, where it is
/// longer than a comm), then `+` (running a work item) or `-` and what it last ran; another
/// kernel thread's full name; else the comm.
fn stat_name(flags: u64, names: &[u8], out: &mut String) {
    const PF_WQ_WORKER: u64 = 0x20;
    const PF_KTHREAD: u64 = 0x0020_0000;
    const RUNNING_WORK: u64 = 1 << 32;
    let comm = field(names, 0, 16);
    let is_kthread = flags & PF_KTHREAD != 0;
    if !is_kthread {
        // A user process: its comm, at most 15 bytes.
        set_name(comm, out);
        return;
    }
    let full = field(names, 16, 80);
    let desc = field(names, 80, 112);
    // On the stack (at most 64 + 1 + 32 bytes), and into `out`, whose buffer the last scan
    // left: no allocation per process and scan.
    let mut name = [0u8; 128];
    let mut len = 0;
    let mut push = |bytes: &[u8]| {
        name[len..len + bytes.len()].copy_from_slice(bytes);
        len += bytes.len();
    };
    if flags & PF_WQ_WORKER != 0 {
        // A rescuer's name ("kworker/R-" and its queue's) is longer than a comm.
        push(if full.is_empty() { comm } else { full });
        if !desc.is_empty() {
            push(if flags & RUNNING_WORK != 0 { b"+" } else { b"-" });
            push(desc);
        }
    } else if !full.is_empty() {
        push(full);
    } else {
        push(comm);
    }
    set_name(&name[..len.min(NAME_MAX)], out);
}

/// Makes `out` read `name` (lossily where it is not UTF-8), copying nothing where it already
/// does: mostly it holds the name of the same process, from the last scan.
fn set_name(name: &[u8], out: &mut String) {
    // Byte by byte: for names this short a call to memcmp costs more than the comparison.
    if out.len() == name.len() && out.bytes().zip(name).all(|(a, &b)| a == b) {
        return;
    }
    out.clear();
    match std::str::from_utf8(name) {
        Ok(name) => out.push_str(name),
        Err(_) => out.push_str(&String::from_utf8_lossy(name)),
    }
}

/// A process being summed: the threads' counters added up.
#[derive(Debug, Default, Clone, Copy)]
struct Sums {
    utime: u64,
    stime: u64,
    runtime: u64,
    min_flt: u64,
    maj_flt: u64,
    start_boottime: u64,
    leader: bool,
}

/// Sums the iterator's output into processes, remembering between scans what each process's
/// user/system split was, as the kernel does for `stat` (so neither part ever goes back).
#[derive(Debug)]
pub struct Summer {
    units: Units,
    /// tgid → index into the output and the sums.
    index: PidMap<usize>,
    sums: Vec<Sums>,
    /// (pid, its start, the (user, system) nanoseconds last given), by pid; `next` is the
    /// scan's own, swapped in at its end.
    prev: Vec<(u32, u64, (u64, u64))>,
    /// Name buffers of entries the output dropped (it had more processes before), reused.
    names: Vec<String>,
    next: Vec<(u32, u64, (u64, u64))>,
    /// The output's pids and indexes (`pid << 32 | index`) in pid order, kept between scans;
    /// when the output is put in that order ([`Summer::place`]), each position's index.
    order: Vec<u64>,
    /// Whether the output is put in pid order (else it stays in the records' order and
    /// `order` says where each process is: [`TaskIter::scan_by_pid`]).
    place: bool,
}

impl Summer {
    pub fn new(units: Units) -> Self {
        Self {
            units,
            index: PidMap::default(),
            sums: Vec::new(),
            prev: Vec::new(),
            next: Vec::new(),
            names: Vec::new(),
            order: Vec::new(),
            place: true,
        }
    }

    /// Sums `bytes` (records one after the other, as the iterator's file gives them) into one
    /// [`PidStat`] per process, into `out` (cleared first). Returns the number of tasks.
    pub fn sum(&mut self, bytes: &[u8], out: &mut Vec<PidStat>) -> Result<u64, BadOutput> {
        let mut at = 0;
        let records = std::iter::from_fn(|| {
            (at < bytes.len()).then(|| {
                let cut = || BadOutput(format!("the iterator's output ends inside a record ({} bytes)", bytes.len()));
                let size = bytes.get(at..at + 8).ok_or_else(cut)?;
                let len = record_len(u64::from_ne_bytes(size.try_into().expect("8 bytes")))?;
                let chunk = bytes.get(at..at + len).ok_or_else(cut)?;
                at += len;
                Ok(chunk)
            })
        });
        self.sum_records(records, false, out)
    }

    /// Sums `slots` (a record per `SLOT_BYTES`, as the open-coded scan writes them) as
    /// [`sum`](Summer::sum) does.
    pub fn sum_slots(&mut self, slots: &[u8], out: &mut Vec<PidStat>) -> Result<u64, BadOutput> {
        if !slots.len().is_multiple_of(SLOT_BYTES) {
            return Err(BadOutput(format!("{} bytes of slots is not a whole number of {SLOT_BYTES}", slots.len())));
        }
        let records = slots.chunks_exact(SLOT_BYTES).map(|slot| {
            let len = record_len(u64::from_ne_bytes(slot[..8].try_into().expect("8 bytes")))?;
            Ok(&slot[..len])
        });
        self.sum_records(records, true, out)
    }

    /// `grouped`: each process's records come together (the open-coded walk), so a process is
    /// never looked up by pid.
    fn sum_records<'a>(
        &mut self,
        records: impl Iterator<Item = Result<&'a [u8], BadOutput>>,
        grouped: bool,
        out: &mut Vec<PidStat>,
    ) -> Result<u64, BadOutput> {
        // Each process takes the entry of `out` at its place in the records, where the last
        // scan's process at that place is (the walk gives processes in the order they were
        // made, so mostly the same one): its fields are written over, and its name is copied
        // only where it differs. Building each entry afresh and pushing it (~230 bytes) and
        // copying every name was a fifth of the reader's CPU at ~5,000 processes.
        let reused = out.len();
        let mut count = 0usize;
        self.index.clear();
        self.sums.clear();
        let units = self.units;
        let mut tasks = 0;
        // Records come a process at a time, its leader first: most lookups are the last one.
        let mut last: Option<(u32, usize)> = None;
        for chunk in records {
            let chunk = chunk?;
            let len = chunk.len();
            tasks += 1;
            // Both kinds start with their size, tid and tgid.
            let (tid, tgid) = (word(chunk, 1), word(chunk, 2));
            let (Ok(tgid), Ok(tid)) = (u32::try_from(tgid), u32::try_from(tid)) else {
                return Err(BadOutput(format!("a record with pid {tgid} tid {tid} out of range")));
            };
            let index = match last {
                Some((pid, index)) if pid == tgid => index,
                // The open-coded walk gives a process's tasks together (its leader, then its
                // other threads): a new tgid is a new process, no lookup needed.
                _ if grouped => {
                    let index = take_entry(out, &mut self.names, &mut count, tgid);
                    self.sums.push(Sums::default());
                    last = Some((tgid, index));
                    index
                }
                _ => {
                    let sums = &mut self.sums;
                    let names = &mut self.names;
                    let count = &mut count;
                    let index = *self.index.entry(tgid).or_insert_with(|| {
                        sums.push(Sums::default());
                        take_entry(out, names, count, tgid)
                    });
                    last = Some((tgid, index));
                    index
                }
            };
            let s = &mut self.sums[index];
            // Each kind read where it is needed: a record picked from two kinds by a branch was
            // built in one place and copied there (288 bytes a task).
            if len == THREAD_BYTES {
                let r = thread_record(chunk);
                s.utime += r.utime;
                s.stime += r.stime;
                s.runtime += r.runtime;
                s.min_flt += r.min_flt;
                s.maj_flt += r.maj_flt;
                continue;
            }
            let (r, names) = record(chunk);
            s.utime += r.utime;
            s.stime += r.stime;
            s.runtime += r.runtime;
            s.min_flt += r.min_flt;
            s.maj_flt += r.maj_flt;
            if tid != tgid {
                continue;
            }
            s.leader = true;
            s.utime += r.sig_utime;
            s.stime += r.sig_stime;
            s.runtime += r.sig_runtime;
            s.min_flt += r.sig_min_flt;
            s.maj_flt += r.sig_maj_flt;
            s.start_boottime = r.start_boottime;
            let p = &mut out[index];
            stat_name(r.flags, names, &mut p.comm);
            p.state = state_char(r.state, r.exit_state);
            p.ppid = u32::try_from(r.ppid).unwrap_or(0);
            p.pgrp = r.pgrp as i64;
            p.session = r.session as i64;
            p.cutime_ticks = r.cutime / units.ns_per_tick;
            p.cstime_ticks = r.cstime / units.ns_per_tick;
            p.cminflt = r.cmin_flt;
            p.cmajflt = r.cmaj_flt;
            // MAX_RT_PRIO and the nice-0 static priority (DEFAULT_PRIO).
            p.priority = r.prio - 100;
            p.nice = r.static_prio - 120;
            p.num_threads = r.nr_threads;
            p.start_ticks = r.start_boottime / units.ns_per_tick;
            p.vsize_bytes = r.total_vm.saturating_mul(units.page_bytes);
            // get_mm_rss: file + anon + shmem, each the shared count read as at least 0.
            p.rss_pages = r.rss.iter().map(|&c| c.max(0) as u64).sum();
            p.processor = u32::try_from(r.cpu).ok();
            // The program's NO_FDS (a table larger than it counts) is not a count.
            p.open_fds = u32::try_from(r.open_fds).ok();
            // Every task is in a cgroup2 cgroup (the root at least), whose id is never 0: a 0 is
            // a chain the program could not read.
            p.cgroup_ids = (r.cgroup_ids[0] != 0).then_some(r.cgroup_ids);
            // The program's NO_UID (a task without credentials) is not a user.
            p.effective_uid = u32::try_from(r.euid).ok();
            // Never read by the scans.
            p.blkio_ticks = None;
        }
        // The last scan's entries past this one's processes: their names' buffers are kept
        // for the next scan's. A group whose leader was not seen is left with its pid alone,
        // nothing of the entry's last process.
        self.names.extend(out.drain(count..).map(|p| p.comm));
        for (p, _) in out[..reused.min(count)].iter_mut().zip(&self.sums).filter(|(_, s)| !s.leader) {
            *p = PidStat { pid: p.pid, comm: std::mem::take(&mut p.comm), ..PidStat::default() };
        }
        // By pid, as /proc lists them, and only groups whose leader was seen (one reaped
        // between the records is left out). The iterator's file gives tasks in tid order, so a
        // process whose thread has a lower tid than its leader (pids wrap) is all that is out
        // of place; the open-coded walk gives them in the order they were made, which pid
        // reuse scrambles. Pids with their indexes are sorted; the agent's scan reads the
        // processes through them where they are (`by_pid`), and `scan` swaps each into its
        // place once, in place: sorting the processes themselves moved each one many times (a
        // fifth of a scan's CPU), and moving them into a second vector kept ~200 bytes a
        // process between scans.
        self.order.clear();
        self.order.extend(
            self.sums
                .iter()
                .zip(out.iter())
                .enumerate()
                .filter(|(_, (s, _))| s.leader)
                .map(|(i, (_, p))| u64::from(p.pid) << 32 | i as u64),
        );
        let in_place = self.order.len() == out.len() && self.order.is_sorted();
        if !in_place {
            // The order is a few ascending runs (one a wrap of the pids since the oldest
            // process began): the stable sort finds runs and merges them, where the unstable
            // one sorts them afresh. The keys are unique, so both give the same order.
            self.order.sort();
        }
        // Times as `stat` gives them: the tick-sampled user/system split scaled to the precise
        // runtime, never going back from the last split given (cputime_adjust), in clock ticks.
        // The last splits are by pid, as the processes now are: one walk finds them all.
        self.next.clear();
        let (prev, next) = (&self.prev, &mut self.next);
        let mut cursor = 0;
        let mut finish = |p: &mut PidStat, s: &Sums| {
            while prev.get(cursor).is_some_and(|&(pid, ..)| pid < p.pid) {
                cursor += 1;
            }
            let last = match prev.get(cursor) {
                Some(&(pid, start, split)) if pid == p.pid && start == s.start_boottime => split,
                _ => (0, 0),
            };
            let (user, system) = adjust(last, s.utime, s.stime, s.runtime);
            next.push((p.pid, s.start_boottime, (user, system)));
            p.utime_ticks = user / units.ns_per_tick;
            p.stime_ticks = system / units.ns_per_tick;
            p.minflt = s.min_flt;
            p.majflt = s.maj_flt;
        };
        if in_place {
            for (p, s) in out.iter_mut().zip(&self.sums) {
                finish(p, s);
            }
        } else if !self.place {
            for &key in &self.order {
                let i = key as u32 as usize;
                finish(&mut out[i], &self.sums[i]);
            }
        } else {
            let kept = self.order.len();
            // Position k takes the process at index order[k]; the groups left out go last.
            for key in &mut self.order {
                *key &= u64::from(u32::MAX);
            }
            let left_out = self.sums.iter().enumerate().filter(|(_, s)| !s.leader).map(|(i, _)| i as u64);
            self.order.extend(left_out);
            permute_in_place(out, &mut self.order);
            // The kept ones only: `next` stays by pid, as the next scan's walk of it needs.
            for (p, &i) in out[..kept].iter_mut().zip(&self.order) {
                finish(p, &self.sums[(i & u64::from(u32::MAX)) as usize]);
            }
            // The names of groups left out are kept for the next scan.
            self.names.extend(out.drain(kept..).map(|p| p.comm).filter(|c| c.capacity() > 0));
            // As `by_pid` reads it: each process where it now is.
            self.order.clear();
            self.order.extend(out.iter().enumerate().map(|(k, p)| u64::from(p.pid) << 32 | k as u64));
        }
        std::mem::swap(&mut self.prev, &mut self.next);
        Ok(tasks)
    }
}

/// The entry of `out` for the scan's next process, `pid`, at `count` (which it advances): the
/// last scan's entry there (every field but the pid is written later), or a new one with a
/// name buffer from `names`.
fn take_entry(out: &mut Vec<PidStat>, names: &mut Vec<String>, count: &mut usize, pid: u32) -> usize {
    let at = *count;
    *count += 1;
    match out.get_mut(at) {
        Some(p) => p.pid = pid,
        None => out.push(PidStat { pid, comm: names.pop().unwrap_or_default(), ..PidStat::default() }),
    }
    at
}

/// Puts `items` in the order `from` gives (position k takes what was at index `from[k]`, a
/// permutation of the indexes), swapping each item into place along the permutation's cycles.
/// `from` keeps its indexes in its low 32 bits; its top bit is used as a mark and left set.
fn permute_in_place<T>(items: &mut [T], from: &mut [u64]) {
    const PLACED: u64 = 1 << 63;
    debug_assert_eq!(items.len(), from.len());
    for start in 0..from.len() {
        let mut k = start;
        while from[k] & PLACED == 0 {
            let src = (from[k] & u64::from(u32::MAX)) as usize;
            from[k] |= PLACED;
            if src == start {
                break;
            }
            // What belongs at k is at src still: the cycle reaches src next.
            items.swap(k, src);
            k = src;
        }
    }
}

/// The kernel's `cputime_adjust`: system time is the runtime's share in the tick-sampled split,
/// user the rest, and neither goes back from `prev`, the split last given; a runtime not past
/// what was given keeps it.
pub fn adjust(prev: (u64, u64), utime: u64, stime: u64, runtime: u64) -> (u64, u64) {
    let (prev_user, prev_system) = prev;
    if prev_user.saturating_add(prev_system) >= runtime {
        return prev;
    }
    let mut system = if stime == 0 {
        0
    } else if utime == 0 {
        runtime
    } else {
        ((u128::from(stime) * u128::from(runtime) / (u128::from(stime) + u128::from(utime))) as u64).min(runtime)
    };
    system = system.max(prev_system);
    let mut user = runtime - system;
    if user < prev_user {
        user = prev_user;
        system = runtime - user;
    }
    (user, system)
}

/// `stat`'s state letter from the task's state and exit state (`task_state_index`).
pub fn state_char(state: u64, exit_state: u64) -> char {
    const REPORT: u64 = 0x7f;
    const IDLE: u64 = 0x402; // TASK_UNINTERRUPTIBLE | TASK_NOLOAD
    const RTLOCK_WAIT: u64 = 0x1000;
    let mut bits = (state | exit_state) & REPORT;
    if state & IDLE == IDLE {
        bits = REPORT + 1;
    }
    if state & RTLOCK_WAIT != 0 {
        bits = 2;
    }
    let index = if bits == 0 { 0 } else { 64 - bits.leading_zeros() as usize };
    b"RSDTtXZPI".get(index).map_or('?', |&c| char::from(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNITS: Units = Units { page_bytes: 4096, ns_per_tick: 10_000_000 };

    #[test]
    fn a_verifier_rejection_is_said_with_the_line_that_says_why() {
        // The end of a real log (this kernel, a program whose NULL check clang had folded away).
        let log = "409: (16) if w1 == 0x0 goto pc+29     ; R1=scalar()\n\
                   410: (61) r1 = *(u32 *)(r2 +0)\n\
                   R2 invalid mem access 'scalar'\n\
                   verification time 84888 usec\n\
                   stack depth 224\n\
                   processed 1875 insns (limit 1000000) max_states_per_insn 5 total_states 119\n";
        assert_eq!(verifier_reason(log), "R2 invalid mem access 'scalar'");
        assert_eq!(verifier_reason(""), "the kernel gave no log");
        assert_eq!(verifier_reason(&"x".repeat(500)).len(), 200);
        assert!(refused_why(false).contains("needs CAP_BPF and CAP_PERFMON"));
        assert!(refused_why(true).contains("has CAP_BPF and CAP_PERFMON, so a kernel policy refused it"));
        let e = aya::programs::ProgramError::LoadError {
            io_error: std::io::Error::from_raw_os_error(libc::EACCES),
            verifier_log: aya_obj::VerifierLog::new(log.to_string()),
        };
        // As root here (the test command runs so); a process without the capabilities is told
        // what it lacks instead.
        if may_load_tracing() {
            let said = load_error(&e);
            assert!(
                said.starts_with("the kernel's verifier rejected it (")
                    && said.ends_with("R2 invalid mem access 'scalar'"),
                "{said}"
            );
        }
    }

    /// A record as the program writes it: `words` by index, the comm after.
    fn raw(words: &[(usize, u64)], comm: &[u8]) -> Vec<u8> {
        let mut w = [0u64; WORDS];
        w[0] = RECORD_BYTES as u64;
        for &(i, v) in words {
            w[i] = v;
        }
        let mut bytes: Vec<u8> = w.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut c = [0u8; 16 + 64 + 32];
        c[..comm.len()].copy_from_slice(comm);
        bytes.extend_from_slice(&c);
        bytes
    }

    /// A thread's record: tid, tgid, utime, stime, runtime, minor faults.
    fn thread(tid: u64, tgid: u64, utime: u64, stime: u64, runtime: u64, min_flt: u64) -> Vec<u8> {
        [THREAD_BYTES as u64, tid, tgid, utime, stime, runtime, min_flt, 0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect()
    }

    fn sum(bytes: &[u8]) -> Result<Vec<PidStat>, BadOutput> {
        let mut out = Vec::new();
        Summer::new(UNITS).sum(bytes, &mut out)?;
        Ok(out)
    }

    #[test]
    fn threads_are_summed_into_their_process_with_the_leaders_fields() {
        // A thread (tid 12) before its leader (pid 10): pid reuse can order them so.
        let mut bytes = thread(12, 10, 30_000_000, 10_000_000, 40_000_000, 5);
        bytes.extend(raw(
            &[
                (1, 10),
                (2, 10),
                (3, 1),
                (4, 10),
                (5, 9),
                (6, 1),
                (9, 120),
                (10, 125),
                (11, 1),
                (12, 2),
                (13, 10_000_000),
                (15, 10_000_000),
                (16, 7),
                (18, 2_500_000_000),
                (19, 0),
                (22, 100),
                (24, 30_000_000),
                (28, 1000),
                (29, 5),
                (30, 7),
                (31, u64::MAX), // a shared count read below 0: stat says at least 0
            ],
            b"server",
        ));
        let out = sum(&bytes).expect("whole records");
        assert_eq!(out.len(), 1);
        let p = &out[0];
        assert_eq!((p.pid, p.comm.as_str(), p.state, p.ppid, p.pgrp, p.session), (10, "server", 'S', 1, 10, 9));
        assert_eq!((p.priority, p.nice, p.num_threads, p.processor), (20, 5, 2, Some(1)));
        // Runtime 50 ms split as the ticks were (40 user : 10 system): 40 and 10 ms, 4 and 1 ticks.
        assert_eq!((p.utime_ticks, p.stime_ticks), (4, 1));
        assert_eq!((p.minflt, p.cutime_ticks, p.start_ticks), (112, 3, 250));
        assert_eq!((p.vsize_bytes, p.rss_pages), (4_096_000, 12));
    }

    #[test]
    fn a_record_of_another_size_or_a_cut_one_is_refused() {
        let mut bytes = raw(&[(1, 1), (2, 1)], b"init");
        bytes[0] = 200;
        assert!(sum(&bytes).expect_err("another size").0.contains("disagree"));
        let bytes = raw(&[(1, 1), (2, 1)], b"init");
        assert!(sum(&bytes[..RECORD_BYTES - 1]).expect_err("cut").0.contains("ends inside a record"));
        assert!(sum(&bytes[..4]).expect_err("cut in the size").0.contains("ends inside a record"));
        let mut two = thread(5, 1, 0, 0, 0, 0);
        two.extend_from_slice(&bytes);
        assert!(sum(&two[..THREAD_BYTES + 8]).expect_err("cut").0.contains("ends inside a record"));
        assert_eq!(sum(&[]).expect("nothing is no processes"), vec![]);
    }

    #[test]
    fn a_user_process_record_stops_before_the_kernel_thread_names() {
        let mut bytes = raw(&[(1, 7), (2, 7), (8, 0x0020_0000)], b"kthread-looking");
        bytes.truncate(PROCESS_BYTES);
        bytes[..8].copy_from_slice(&(PROCESS_BYTES as u64).to_ne_bytes());
        bytes.extend(raw(&[(1, 9), (2, 9)], b"next"));
        let out = sum(&bytes).expect("whole records of two sizes");
        assert_eq!(
            out.iter().map(|p| (p.pid, p.comm.as_str())).collect::<Vec<_>>(),
            [(7, "kthread-looking"), (9, "next")]
        );
    }

    /// The open-coded walk gives processes in the order they were made, which pid reuse
    /// scrambles: the output comes by pid, each process with its own threads' sums and name,
    /// a group whose leader was not seen left out, scan after scan with the same buffers.
    #[test]
    fn scrambled_processes_come_out_by_pid_with_their_own_sums() {
        let slot = |record: Vec<u8>| {
            let mut s = record;
            s.resize(SLOT_BYTES, 0);
            s
        };
        let process = |pid: u64, name: &str, with_thread: bool| {
            let mut s = slot(raw(&[(1, pid), (2, pid)], name.as_bytes()));
            if with_thread {
                s.extend(slot(thread(pid + 1, pid, 0, 0, 0, pid * 10)));
            }
            s
        };
        let mut summer = Summer::new(UNITS);
        let mut out = Vec::new();
        // As the agent runs it: the output left in the records' order, read by pid.
        let mut unplaced_summer = Summer { place: false, ..Summer::new(UNITS) };
        let mut unplaced = Vec::new();
        let scans: [&[(u64, &str, bool)]; 3] = [
            &[(30, "thirty", true), (5, "five", false), (20, "twenty", true), (7, "seven", false)],
            &[(9, "nine", true), (40, "forty", false), (2, "two", true), (30, "thirty", true), (11, "eleven", false)],
            &[(3, "three", false), (1, "one", true)],
        ];
        for processes in scans {
            let mut slots: Vec<u8> = Vec::new();
            for (i, &(pid, name, t)) in processes.iter().enumerate() {
                slots.extend(process(pid, name, t));
                if i == 1 {
                    // A thread whose leader was not seen (it ended between the records),
                    // its pid below the others'.
                    slots.extend(slot(thread(61, 4, 0, 0, 0, 5)));
                }
            }
            summer.sum_slots(&slots, &mut out).expect("whole slots");
            unplaced_summer.sum_slots(&slots, &mut unplaced).expect("whole slots");
            let by_pid = ByPid { stats: &unplaced, order: &unplaced_summer.order };
            assert_eq!(by_pid.iter().cloned().collect::<Vec<_>>(), out, "the same processes, the same fields, by pid");
            assert_eq!(ByPid { stats: &out, order: &summer.order }.iter().cloned().collect::<Vec<_>>(), out);
            // The splits kept for the next scan's walk are by pid, and of the kept only.
            for s in [&summer, &unplaced_summer] {
                let pids: Vec<u32> = s.prev.iter().map(|&(pid, ..)| pid).collect();
                assert_eq!(pids, out.iter().map(|p| p.pid).collect::<Vec<_>>());
            }
            let mut want: Vec<(u32, String, u64)> = processes
                .iter()
                .map(|&(pid, name, t)| (pid as u32, name.to_string(), if t { pid * 10 } else { 0 }))
                .collect();
            want.sort();
            let got: Vec<(u32, String, u64)> = out.iter().map(|p| (p.pid, p.comm.clone(), p.minflt)).collect();
            assert_eq!(got, want);
        }
    }

    /// Each scan writes over the entries the last one filled (other processes at each place,
    /// every field of theirs set): what it gives is what a scan into an empty output gives,
    /// through either reader, in either order.
    #[test]
    fn a_scan_over_the_last_scans_entries_gives_what_one_into_nothing_gives() {
        let slot = |record: Vec<u8>| {
            let mut s = record;
            s.resize(SLOT_BYTES, 0);
            s
        };
        // Every word set (states and flags kept to what `stat` reads), a name of 15 bytes.
        let full = |pid: u64, name: &[u8]| {
            let words: Vec<(usize, u64)> =
                (3..WORDS).map(|i| (i, if (6..=8).contains(&i) { 1 } else { 1000 * i as u64 + pid })).collect();
            raw(&[&[(1, pid), (2, pid)], &words[..]].concat(), name)
        };
        let bare = |pid: u64, name: &[u8]| raw(&[(1, pid), (2, pid)], name);
        let last = [full(10, b"fifteen-bytes-a"), full(20, b"twenty"), full(30, b"thirty"), full(50, b"fifty")];
        let now = [bare(35, b"fifteen-bytes-b"), thread(41, 4, 0, 0, 0, 5), bare(20, b"twenty"), full(40, b"forty")];
        for (slots, place) in [(true, false), (true, true), (false, false), (false, true)] {
            let bytes = |records: &[Vec<u8>]| -> Vec<u8> {
                records.iter().flat_map(|r| if slots { slot(r.clone()) } else { r.clone() }).collect()
            };
            let run = |summer: &mut Summer, records: &[Vec<u8>], out: &mut Vec<PidStat>| {
                if slots {
                    summer.sum_slots(&bytes(records), out).expect("whole slots");
                } else {
                    summer.sum(&bytes(records), out).expect("whole records");
                }
            };
            let (mut reused, mut fresh) =
                (Summer { place, ..Summer::new(UNITS) }, Summer { place, ..Summer::new(UNITS) });
            let (mut over, mut into_nothing) = (Vec::new(), Vec::new());
            run(&mut reused, &last, &mut over);
            run(&mut fresh, &last, &mut Vec::new());
            assert_eq!(over.len(), 4);
            run(&mut reused, &now, &mut over);
            run(&mut fresh, &now, &mut into_nothing);
            let seen = |summer: &Summer, out: &[PidStat]| {
                ByPid { stats: out, order: &summer.order }.iter().cloned().collect::<Vec<_>>()
            };
            let want = seen(&fresh, &into_nothing);
            assert_eq!(want.iter().map(|p| p.pid).collect::<Vec<_>>(), [20, 35, 40], "slots {slots}, place {place}");
            assert_eq!(seen(&reused, &over), want, "slots {slots}, place {place}");
        }
    }

    #[test]
    fn a_group_without_its_leader_is_left_out() {
        let out = sum(&thread(12, 10, 0, 0, 1, 0)).expect("whole");
        assert!(out.is_empty());
    }

    #[test]
    fn kernel_threads_are_named_as_stat_names_them() {
        let names = |comm: &[u8], full: &[u8], desc: &[u8]| {
            let mut n = [0u8; 112];
            n[..comm.len()].copy_from_slice(comm);
            n[16..16 + full.len()].copy_from_slice(full);
            n[80..80 + desc.len()].copy_from_slice(desc);
            n
        };
        let mut out = String::new();
        stat_name(0x0020_0000, &names(b"pool_workqueue_", b"pool_workqueue_release", b""), &mut out);
        assert_eq!(out, "pool_workqueue_release");
        stat_name(0x0020_0020, &names(b"kworker/1:1", b"", b"events"), &mut out);
        assert_eq!(out, "kworker/1:1-events");
        stat_name(0x1_0020_0020, &names(b"kworker/1:1", b"", b"mm_percpu_wq"), &mut out);
        assert_eq!(out, "kworker/1:1+mm_percpu_wq");
        stat_name(0x0020_0020, &names(b"kworker/0:0", b"", b""), &mut out);
        assert_eq!(out, "kworker/0:0");
        stat_name(0x0020_0020, &names(b"kworker/R-rcu_g", b"kworker/R-rcu_gp", b""), &mut out);
        assert_eq!(out, "kworker/R-rcu_gp");
        // A user process's full-name field is never used, whatever is in it.
        stat_name(0, &names(b"bash", b"not mine", b""), &mut out);
        assert_eq!(out, "bash");
    }

    #[test]
    fn the_state_letters_are_the_kernels() {
        assert_eq!(state_char(0, 0), 'R');
        assert_eq!(state_char(1, 0), 'S');
        assert_eq!(state_char(2, 0), 'D');
        assert_eq!(state_char(0x402, 0), 'I');
        assert_eq!(state_char(4, 0), 'T');
        assert_eq!(state_char(8, 0), 't');
        assert_eq!(state_char(0x80, 32), 'Z'); // TASK_DEAD with EXIT_ZOMBIE
        assert_eq!(state_char(0x1000 | 1, 0), 'D');
    }

    #[test]
    fn the_split_follows_the_kernels_rule() {
        assert_eq!(adjust((0, 0), 0, 0, 0), (0, 0));
        assert_eq!(adjust((0, 0), 0, 5, 9), (0, 9));
        assert_eq!(adjust((0, 0), 5, 0, 9), (9, 0));
        assert_eq!(adjust((0, 0), 3, 1, 100), (75, 25));
        assert_eq!(adjust((0, 0), u64::MAX / 2, u64::MAX / 2, u64::MAX), (u64::MAX - u64::MAX / 2, u64::MAX / 2));
        // Neither part goes back: the ticks now say all system, but 75 was given as user.
        assert_eq!(adjust((75, 25), 0, 9, 120), (75, 45));
        assert_eq!(adjust((75, 25), 9, 0, 120), (95, 25));
        // No runtime past what was given: the last split stands.
        assert_eq!(adjust((75, 25), 1, 1, 100), (75, 25));
    }

    #[test]
    fn a_process_split_is_remembered_between_scans_and_forgotten_when_it_goes() {
        let leader = |utime: u64, stime: u64, runtime: u64, start: u64| {
            raw(&[(1, 10), (2, 10), (13, utime), (14, stime), (15, runtime), (18, start)], b"p")
        };
        let mut summer = Summer::new(UNITS);
        let mut out = Vec::new();
        summer.sum(&leader(30, 10, 400_000_000, 1), &mut out).expect("whole");
        assert_eq!((out[0].utime_ticks, out[0].stime_ticks), (30, 10));
        // The sampled ticks swing to system; the user time given stays.
        summer.sum(&leader(30, 90, 500_000_000, 1), &mut out).expect("whole");
        assert_eq!((out[0].utime_ticks, out[0].stime_ticks), (30, 20));
        // A new process under the same pid (another start) starts from nothing.
        summer.sum(&leader(0, 90, 500_000_000, 2), &mut out).expect("whole");
        assert_eq!((out[0].utime_ticks, out[0].stime_ticks), (0, 50));
    }
}
