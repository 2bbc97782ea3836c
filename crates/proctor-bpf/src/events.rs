//! Every exec and every process exit (issue 35): tracepoint programs (bpf/events.bpf.c) write
//! an event per exec and per process exit into a ring buffer, and count every fork. `/proc`
//! cannot see a process that lived less than a sample; these events do, with its parent, name
//! and command line at exec and its CPU time, faults and peak resident size at exit.
//!
//! One [`Hub`] per process (loaded with the task iterator, one BTF parse): its programs are
//! attached when the first [`Subscription`] opens, and stay. The ring is drained by a reader
//! thread every [`DRAIN_EVERY`], or sooner when the kernel wakes it (a quarter of the ring
//! full), and by any subscriber that calls [`Subscription::drain`] (the sampler, at the start
//! of each sample, so a sample holds every event up to its own start). Each subscriber has its
//! own bounded queue; events past its bound are dropped and counted.
//!
//! A subscriber's drain holds every event written before it began: a drain ends at a record
//! another CPU has reserved and not yet submitted (the ring is read in order), so it waits for
//! that record, up to [`SETTLE_WAIT`], and counts the wait; and the ring's lock is held until
//! a drained batch is in every queue, so a drain cannot find the ring empty while another
//! thread's batch is still on its way to the queues.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use aya::maps::{MapData, PerCpuArray, RingBuf};
use aya::programs::BtfTracePoint;
use aya::{Btf, Ebpf, EbpfLoader};

use crate::{c_str, load_error, may_load_tracing, thread_cpu_ns, Unavailable};

/// The programs, as clang built them from `bpf/events.bpf.c` (`bpf/build.sh`).
pub static EVENTS_OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/events.bpf.o");

/// (program, tracepoint) in the object.
const PROGRAMS: [(&str, &str); 4] = [
    ("proctor_fork", "sched_process_fork"),
    ("proctor_exec", "sched_process_exec"),
    ("proctor_exit", "sched_process_exit"),
    ("proctor_switch", "sched_switch"),
];

/// How often the reader thread drains the ring when the kernel does not wake it. The sampler
/// drains it at each sample and the kernel wakes the thread once a quarter of the ring is full,
/// so this only bounds how long a trickle waits between samples; at 100 ms its wakeups were
/// ~0.5 ms of CPU a second on an idle agent here (bench/serve/idle_threads.py).
pub const DRAIN_EVERY: Duration = Duration::from_secs(1);
/// Events a subscriber's queue holds before it drops (and counts) new ones: a sampler drains
/// it every sample, so this is ~65,000 processes started and ended within one sample.
pub const QUEUE_EVENTS: usize = 65_536;
/// The longest a subscriber's drain waits for a record another CPU is still writing. A program
/// holds its reservation only for the field copies between its reserve and its submit (the
/// sched tracepoints run with preemption off; not timed here), unless an interrupt lands in
/// them; past this the drain returns without the record and counts it unsettled (the next
/// drain has it).
pub const SETTLE_WAIT: Duration = Duration::from_millis(1);

const KIND_EXEC: u64 = 1;
const KIND_EXIT: u64 = 2;
const KIND_FINAL: u64 = 3;
/// `struct exec_event` up to its arguments: 7 words, comm 16, filename 128. A record is this
/// and the arguments copied (`args_len` bytes, at most [`ARGS_BYTES`]).
pub const EXEC_HEAD_BYTES: usize = 7 * 8 + 16 + 128;
/// The longest exec record.
pub const EXEC_BYTES: usize = EXEC_HEAD_BYTES + ARGS_BYTES;
/// `struct exit_event`: 19 words and comm 16.
pub const EXIT_BYTES: usize = 19 * 8 + 16;
/// `struct final_event`: 5 words.
pub const FINAL_BYTES: usize = 5 * 8;
pub const ARGS_BYTES: usize = 256;

/// A process exec'd a new program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecEvent {
    pub pid: u32,
    pub ppid: u32,
    /// When the process started (the kernel's boot-time clock, ns), as `stat`'s start time.
    pub start_boottime_ns: u64,
    /// When it exec'd.
    pub time_boottime_ns: u64,
    /// Its cgroup (v2) id: the inode number of its directory in the cgroup2 mount.
    pub cgroup_id: u64,
    /// Its new name (the program's file name, at most 15 bytes).
    pub comm: String,
    /// The path it exec'd, as given to exec (at most 127 bytes).
    pub filename: String,
    /// Its command line's arguments, from its new memory (the first 256 bytes).
    pub args: Vec<String>,
    /// Whether `args` is the whole command line (false: it was longer than 256 bytes, or
    /// could not be read, and `/proc/PID/cmdline` has the rest while the process lives).
    pub args_complete: bool,
}

/// A process ended: its last thread exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitEvent {
    pub pid: u32,
    pub ppid: u32,
    pub start_boottime_ns: u64,
    pub time_boottime_ns: u64,
    pub cgroup_id: u64,
    /// The exit code as `wait` reports it (`status >> 8` the code, the low 7 bits a signal).
    pub wait_status: u32,
    /// The process's CPU time (its threads', those that exited before included), ns: user
    /// and system as the tick accounting split them, and the scheduler's total as it last
    /// accounted it (at its last tick or switch): short of what `wait4` reports by about a tick
    /// and the exit's last steps (2–5 ms here, HZ=250; tests/events.rs) until the thread's
    /// [`FinalEvent`] completes it ([`ExitEvent::runtime_with`]).
    pub utime_ns: u64,
    pub stime_ns: u64,
    pub runtime_ns: u64,
    pub min_flt: u64,
    pub maj_flt: u64,
    /// Its children's that it waited for.
    pub cutime_ns: u64,
    pub cstime_ns: u64,
    pub cmin_flt: u64,
    pub cmaj_flt: u64,
    /// The most it had resident at once, pages (what `getrusage` reports as `ru_maxrss`).
    pub maxrss_pages: u64,
    /// The exiting thread's own part of `runtime_ns`.
    pub thread_runtime_ns: u64,
    /// Its memory controller's cgroup id (0 without the controller): with `cgroup_id`, the
    /// pair the task scan gives (`PidStat::cgroup_ids`).
    pub memcg_id: u64,
    /// Its name when it ended (its leader's).
    pub comm: String,
}

impl ExitEvent {
    /// The process's whole CPU time, ns, with its last thread's final figure from `last`.
    pub fn runtime_with(&self, last: &FinalEvent) -> u64 {
        self.runtime_ns.saturating_sub(self.thread_runtime_ns).saturating_add(last.runtime_ns).max(self.runtime_ns)
    }
}

/// A process's last thread switched away for the last time: its CPU time as the scheduler
/// finally charged it (the exit event's figure lacks the time since its last tick or switch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalEvent {
    pub pid: u32,
    pub tid: u32,
    pub start_boottime_ns: u64,
    pub runtime_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Exec(ExecEvent),
    Exit(ExitEvent),
    Final(FinalEvent),
}

/// The kernel's counters (summed over CPUs) and the reader's, since the programs were attached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// New processes (tasks that lead a thread group) and new threads, as `/proc/stat`'s
    /// `processes` counts them together.
    pub process_forks: u64,
    pub thread_forks: u64,
    pub execs: u64,
    pub exits: u64,
    /// Events the ring had no room for.
    pub lost_execs: u64,
    pub lost_exits: u64,
    /// Records in the ring that did not parse (an object and a reader that disagree).
    pub bad_records: u64,
    /// Events read from the ring.
    pub read: u64,
    /// CPU time spent draining the ring and parsing events, ns (any thread's).
    pub drain_cpu_ns: u64,
    /// Subscribers' drains that found a record written before they began still being written
    /// (reserved, not yet submitted, on another CPU) and waited for it; of those, the ones
    /// whose wait ran past [`SETTLE_WAIT`]; and the time waited, ns.
    pub settle_waits: u64,
    pub settle_unsettled: u64,
    pub settle_wait_ns: u64,
}

/// The per-CPU counters, as `struct counts` lays them out.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct RawCounts([u64; 6]);

// SAFETY: six u64s, no padding, any bit pattern valid.
unsafe impl aya::Pod for RawCounts {}

type Queue = Mutex<Pending>;

#[derive(Debug, Default)]
struct Pending {
    events: Vec<Arc<Event>>,
    dropped: u64,
}

/// The loaded programs and their maps, one per process.
pub struct Hub {
    bpf: Mutex<Ebpf>,
    ring: Mutex<RingBuf<MapData>>,
    counts: Mutex<PerCpuArray<MapData, RawCounts>>,
    subscribers: Mutex<Vec<Weak<Queue>>>,
    /// `Some` once attached: the outcome of attaching (kept, so a refusal is said, not retried).
    attached: Mutex<Option<Result<(), Unavailable>>>,
    /// The reader's own counters: (bad records, events read, CPU ns).
    stats: Mutex<(u64, u64, u64)>,
    /// The ring's positions (`None` where they could not be mapped: drains then do not wait).
    positions: Option<Positions>,
    /// Settling: (waits, unsettled, ns waited).
    settles: Mutex<(u64, u64, u64)>,
}

/// The ring's consumer and producer positions, from a read-only mapping of its first two
/// pages (the consumer's page, then the producer's: the kernel's layout), which aya reads
/// but does not show.
struct Positions {
    base: std::ptr::NonNull<u8>,
    page: usize,
}

// SAFETY: a read-only shared mapping, read only through atomics; unmapped once, on drop.
unsafe impl Send for Positions {}
unsafe impl Sync for Positions {}

impl Positions {
    fn map(fd: std::os::fd::RawFd) -> Option<Positions> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok().filter(|p| *p > 0)?;
        // SAFETY: a new read-only shared mapping of the ring's fd (the kernel allows any
        // read-only mapping of it); nothing else is touched.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), 2 * page, libc::PROT_READ, libc::MAP_SHARED, fd, 0) };
        if base == libc::MAP_FAILED {
            return None;
        }
        Some(Positions { base: std::ptr::NonNull::new(base.cast())?, page })
    }

    fn at(&self, offset: usize) -> u64 {
        // SAFETY: offset is 0 or one page, inside the two mapped pages, 8-byte aligned; the
        // kernel writes these words with release stores.
        unsafe { (*self.base.as_ptr().add(offset).cast::<std::sync::atomic::AtomicU64>()).load(Ordering::Acquire) }
    }

    fn consumer(&self) -> u64 {
        self.at(0)
    }

    fn producer(&self) -> u64 {
        self.at(self.page)
    }
}

impl Drop for Positions {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.base.as_ptr().cast(), 2 * self.page) };
    }
}

/// Whether position `pos` has reached `target` (positions only grow, and may wrap).
fn reached(pos: u64, target: u64) -> bool {
    pos.wrapping_sub(target) as i64 >= 0
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl Hub {
    /// Fits the object to the kernel's BTF and loads its programs and maps; attaches nothing.
    /// `loader`: one without a BTF of its own ([`crate::loader`]).
    pub(crate) fn load<'a>(mut loader: EbpfLoader<'a>, btf: &'a Btf) -> Result<Hub, Unavailable> {
        let mut bpf = loader.btf(Some(btf)).load(EVENTS_OBJECT).map_err(|e| {
            Unavailable(crate::refused(&e, "the event programs do not fit this kernel (Linux 5.8 or later is needed)"))
        })?;
        for (name, tracepoint) in PROGRAMS {
            let program: &mut BtfTracePoint = bpf
                .program_mut(name)
                .ok_or_else(|| Unavailable(format!("the object has no program {name}")))?
                .try_into()
                .map_err(|e| Unavailable(format!("{name} is not a BTF tracepoint program: {e}")))?;
            program.load(tracepoint, btf).map_err(|e| Unavailable(load_error(&e)))?;
        }
        let ring = bpf.take_map("proctor_events").ok_or_else(|| Unavailable("the object has no ring".into()))?;
        let ring = RingBuf::try_from(ring).map_err(|e| Unavailable(format!("the ring: {e}")))?;
        let counts = bpf.take_map("proctor_counts").ok_or_else(|| Unavailable("the object has no counters".into()))?;
        let counts = PerCpuArray::try_from(counts).map_err(|e| Unavailable(format!("the counters: {e}")))?;
        let positions = Positions::map(ring.as_raw_fd());
        Ok(Hub {
            bpf: Mutex::new(bpf),
            ring: Mutex::new(ring),
            counts: Mutex::new(counts),
            subscribers: Mutex::new(Vec::new()),
            attached: Mutex::new(None),
            stats: Mutex::new((0, 0, 0)),
            positions,
            settles: Mutex::new((0, 0, 0)),
        })
    }

    /// Attaches the programs, once, and starts the reader thread.
    fn attach(self: &Arc<Hub>) -> Result<(), Unavailable> {
        let mut attached = self.attached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(outcome) = &*attached {
            return outcome.clone();
        }
        let outcome = (|| {
            let mut bpf = self.bpf.lock().unwrap_or_else(|e| e.into_inner());
            for (name, _) in PROGRAMS {
                let program: &mut BtfTracePoint = bpf
                    .program_mut(name)
                    .and_then(|p| p.try_into().ok())
                    .ok_or_else(|| Unavailable(format!("{name} is gone")))?;
                program.attach().map_err(|e| Unavailable(format!("attaching {name}: {}", load_error(&e))))?;
            }
            let hub = Arc::downgrade(self);
            std::thread::Builder::new()
                .name("proctor-events".into())
                .spawn(move || reader(hub))
                .map_err(|e| Unavailable(format!("starting the reader thread: {e}")))?;
            Ok(())
        })();
        *attached = Some(outcome.clone());
        outcome
    }

    /// Drains the ring into every subscriber's queue. Returns whether the ring's consumer
    /// position has reached `target` (read while the ring is still held, so every record
    /// before it is in the queues); `true` without a target.
    fn pump(&self, target: Option<u64>) -> bool {
        let started = thread_cpu_ns();
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let mut batch = Vec::new();
        let mut bad = 0;
        while let Some(item) = ring.next() {
            match parse(&item) {
                Some(event) => batch.push(Arc::new(event)),
                None => bad += 1,
            }
        }
        // The ring stays held until the batch is in the queues: a subscriber's drain that
        // found it empty must also find this batch in its queue.
        if !batch.is_empty() {
            let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
            subscribers.retain(|s| s.strong_count() > 0);
            for queue in subscribers.iter().filter_map(Weak::upgrade) {
                let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
                let room = QUEUE_EVENTS.saturating_sub(q.events.len());
                let take = room.min(batch.len());
                q.events.extend(batch[..take].iter().cloned());
                q.dropped += (batch.len() - take) as u64;
            }
        }
        let done = match (target, &self.positions) {
            (Some(target), Some(p)) => reached(p.consumer(), target),
            _ => true,
        };
        drop(ring);
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        stats.0 += bad;
        stats.1 += batch.len() as u64;
        stats.2 += thread_cpu_ns().saturating_sub(started);
        done
    }

    /// Drains every record written before this call into the queues: a drain that stops at
    /// a record another CPU is still writing drains again until it is past it, for at most
    /// [`SETTLE_WAIT`], and counts the wait.
    fn pump_settled(&self) {
        let target = self.positions.as_ref().map(Positions::producer);
        if self.pump(target) {
            return;
        }
        let waited = std::time::Instant::now();
        let settled = loop {
            std::hint::spin_loop();
            if self.pump(target) {
                break true;
            }
            if waited.elapsed() >= SETTLE_WAIT {
                break false;
            }
            std::thread::yield_now();
        };
        let mut settles = self.settles.lock().unwrap_or_else(|e| e.into_inner());
        settles.0 += 1;
        settles.1 += u64::from(!settled);
        settles.2 += u64::try_from(waited.elapsed().as_nanos()).unwrap_or(u64::MAX);
    }

    fn counts(&self) -> Counts {
        let raw = self.counts.lock().unwrap_or_else(|e| e.into_inner()).get(&0, 0).ok();
        let mut sum = [0u64; 6];
        for cpu in raw.iter().flat_map(|v| v.iter()) {
            for (s, v) in sum.iter_mut().zip(cpu.0) {
                *s = s.wrapping_add(v);
            }
        }
        let (bad_records, read, drain_cpu_ns) = *self.stats.lock().unwrap_or_else(|e| e.into_inner());
        let (settle_waits, settle_unsettled, settle_wait_ns) = *self.settles.lock().unwrap_or_else(|e| e.into_inner());
        Counts {
            process_forks: sum[0],
            thread_forks: sum[1],
            execs: sum[2],
            exits: sum[3],
            lost_execs: sum[4],
            lost_exits: sum[5],
            bad_records,
            read,
            drain_cpu_ns,
            settle_waits,
            settle_unsettled,
            settle_wait_ns,
        }
    }
}

/// The reader thread: waits for the ring's fd (the kernel wakes it when a quarter is full) or
/// `DRAIN_EVERY`, and drains. Ends when the hub is gone.
fn reader(hub: Weak<Hub>) {
    let fd = match hub.upgrade() {
        Some(h) => h.ring.lock().unwrap_or_else(|e| e.into_inner()).as_raw_fd(),
        None => return,
    };
    loop {
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd we own; the fd stays open while the hub (and its ring) lives, and
        // the hub is checked right after.
        unsafe { libc::poll(&mut pfd, 1, DRAIN_EVERY.as_millis() as libc::c_int) };
        match hub.upgrade() {
            Some(h) => {
                h.pump(None);
            }
            None => return,
        }
    }
}

/// One subscriber's view of the events: every event from when it opened, in its own queue.
#[derive(Debug)]
pub struct Subscription {
    hub: Arc<Hub>,
    queue: Arc<Queue>,
}

impl Subscription {
    /// Attaches the programs (the first time in this process) and subscribes. `Err` says why
    /// events cannot be had here.
    pub fn open() -> Result<Subscription, Unavailable> {
        if !may_load_tracing() {
            return Err(Unavailable(
                "this process may not load BPF tracing programs: proctor needs CAP_BPF and CAP_PERFMON (or root)"
                    .to_string(),
            ));
        }
        // The events carry the kernel's own pids (the initial pid namespace's): in another
        // namespace they would name other processes than /proc does.
        if let Some(why) = crate::other_pid_namespace("the events number processes") {
            return Err(Unavailable(why));
        }
        crate::load_parts(false, true, false);
        let hub = crate::parts().lock().unwrap_or_else(|e| e.into_inner()).events.clone().expect("loaded above")?;
        hub.attach()?;
        let queue = Arc::new(Queue::default());
        hub.subscribers.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::downgrade(&queue));
        Ok(Subscription { hub, queue })
    }

    /// Moves every event so far into `out` (appended, oldest first), draining the ring first
    /// (every record written before this call: see [`SETTLE_WAIT`]); returns how many were
    /// dropped since the last call because the queue was full.
    pub fn drain(&self, out: &mut Vec<Arc<Event>>) -> u64 {
        self.hub.pump_settled();
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        out.append(&mut q.events);
        std::mem::take(&mut q.dropped)
    }

    /// The counters since the programs were attached (shared by every subscriber).
    pub fn counts(&self) -> Counts {
        self.hub.counts()
    }
}

fn word(bytes: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(c_str(bytes)).into_owned()
}

/// One ring record as an event; `None` for a record of a size or kind this reader does not know.
pub fn parse(bytes: &[u8]) -> Option<Event> {
    if bytes.len() < 8 {
        return None;
    }
    let u32_of = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    match word(bytes, 0) {
        KIND_EXEC if (EXEC_HEAD_BYTES..=EXEC_BYTES).contains(&bytes.len()) => {
            let names = &bytes[7 * 8..];
            let args_len = usize::try_from(word(bytes, 6)).unwrap_or(usize::MAX);
            let copied = args_len.min(ARGS_BYTES);
            if bytes.len() != EXEC_HEAD_BYTES + copied {
                return None;
            }
            let raw = &bytes[EXEC_HEAD_BYTES..];
            // The arguments end in a NUL each; a cut one has none.
            let mut args: Vec<String> = raw
                .strip_suffix(&[0])
                .unwrap_or(raw)
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if copied == 0 {
                args.clear();
            }
            Some(Event::Exec(ExecEvent {
                pid: u32_of(word(bytes, 1)),
                ppid: u32_of(word(bytes, 2)),
                start_boottime_ns: word(bytes, 3),
                time_boottime_ns: word(bytes, 4),
                cgroup_id: word(bytes, 5),
                comm: text(&names[..16]),
                filename: text(&names[16..16 + 128]),
                args,
                args_complete: args_len > 0 && args_len <= ARGS_BYTES,
            }))
        }
        KIND_EXIT if bytes.len() == EXIT_BYTES => Some(Event::Exit(ExitEvent {
            pid: u32_of(word(bytes, 1)),
            ppid: u32_of(word(bytes, 2)),
            start_boottime_ns: word(bytes, 3),
            time_boottime_ns: word(bytes, 4),
            cgroup_id: word(bytes, 5),
            wait_status: word(bytes, 6) as u32,
            utime_ns: word(bytes, 7),
            stime_ns: word(bytes, 8),
            runtime_ns: word(bytes, 9),
            min_flt: word(bytes, 10),
            maj_flt: word(bytes, 11),
            cutime_ns: word(bytes, 12),
            cstime_ns: word(bytes, 13),
            cmin_flt: word(bytes, 14),
            cmaj_flt: word(bytes, 15),
            maxrss_pages: word(bytes, 16),
            thread_runtime_ns: word(bytes, 17),
            memcg_id: word(bytes, 18),
            comm: text(&bytes[19 * 8..]),
        })),
        KIND_FINAL if bytes.len() == FINAL_BYTES => Some(Event::Final(FinalEvent {
            pid: u32_of(word(bytes, 1)),
            tid: u32_of(word(bytes, 2)),
            start_boottime_ns: word(bytes, 3),
            runtime_ns: word(bytes, 4),
        })),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_has_reached_its_target_across_the_wrap() {
        assert!(reached(100, 100));
        assert!(reached(108, 100));
        assert!(!reached(92, 100));
        // The producer's position wrapped past zero; the consumer has not yet.
        assert!(!reached(u64::MAX - 7, 16));
        assert!(reached(16, u64::MAX - 7));
    }

    fn exec_record(args: &[u8], args_len: u64) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [KIND_EXEC, 42, 1, 100, 200, 7, args_len] {
            b.extend_from_slice(&w.to_ne_bytes());
        }
        let mut comm = [0u8; 16];
        comm[..4].copy_from_slice(b"make");
        b.extend_from_slice(&comm);
        let mut file = [0u8; 128];
        file[..13].copy_from_slice(b"/usr/bin/make");
        b.extend_from_slice(&file);
        // The bytes the program copied: the command line up to 256 bytes.
        b.extend_from_slice(&args[..(args_len as usize).min(args.len())]);
        b
    }

    #[test]
    fn an_exec_record_gives_its_arguments_and_says_whether_they_are_whole() {
        let whole = b"make\0-j\x004\0";
        let Some(Event::Exec(e)) = parse(&exec_record(whole, whole.len() as u64)) else { panic!("no exec") };
        assert_eq!((e.pid, e.ppid, e.comm.as_str(), e.filename.as_str()), (42, 1, "make", "/usr/bin/make"));
        assert_eq!(e.args, ["make", "-j", "4"]);
        assert!(e.args_complete);
        // A command line of 300 bytes: 256 copied, the last argument cut, and said.
        let long = [b'x'; 256];
        let Some(Event::Exec(e)) = parse(&exec_record(&long, 300)) else { panic!("no exec") };
        assert_eq!(e.args.len(), 1);
        assert_eq!(e.args[0].len(), 256);
        assert!(!e.args_complete);
        // No memory to read (args_len 0): no arguments, not whole.
        let Some(Event::Exec(e)) = parse(&exec_record(b"", 0)) else { panic!("no exec") };
        assert!(e.args.is_empty() && !e.args_complete);
    }

    #[test]
    fn records_of_other_sizes_or_kinds_are_refused() {
        let rec = exec_record(b"a\0", 2);
        assert!(parse(&rec).is_some());
        // Shorter or longer than its arguments say.
        assert!(parse(&rec[..rec.len() - 1]).is_none());
        assert!(parse(&[rec.as_slice(), &[0]].concat()).is_none());
        assert!(parse(&rec[..EXEC_HEAD_BYTES - 1]).is_none());
        assert!(parse(&[]).is_none());
        let mut other = rec.clone();
        other[0] = 9;
        assert!(parse(&other).is_none());
        let mut exit = vec![0u8; EXIT_BYTES];
        exit[..8].copy_from_slice(&KIND_EXIT.to_ne_bytes());
        exit[16 * 8..17 * 8].copy_from_slice(&5u64.to_ne_bytes());
        let Some(Event::Exit(e)) = parse(&exit) else { panic!("no exit") };
        assert_eq!(e.maxrss_pages, 5);
        assert!(parse(&exit[..EXIT_BYTES - 1]).is_none());
    }
}
