//! `--attribute`: what a monitor itself delayed each of the target's operations by, from the
//! kernel's own record of the same run, so the tail with the monitor can be set beside the tail
//! of the same operations without those delays (no second sample, no sampling noise between
//! arms).
//!
//! Two ways a monitor delays a target's thread are measured, from a tracing instance of this
//! process's own (tracefs, `trace_clock` mono: the workload's clock):
//!
//! - **its CPU**: the thread was runnable, queued on a CPU (woken there, preempted there, or
//!   moved there), while a monitor's thread ran on that CPU (`sched_wakeup`, `sched_switch`,
//!   `sched_migrate_task`): the direct delay. Without the monitor another runnable task might
//!   have run there first, so it may be more than the monitor cost; and a thread the kernel put
//!   on another CPU's queue because the monitor held this one is not in it, so it may be less.
//!   Hence a second, broad figure: the thread queued anywhere while a monitor's thread ran on
//!   any CPU (on a host whose every CPU was busy, one would have been free without it).
//! - **its holds of the target's mmap lock**: the thread waited for its mmap lock (from
//!   `mmap_lock_start_locking` to `mmap_lock_acquire_returned`) while a monitor's thread held
//!   that lock (from its `acquire_returned` to its `released` on the same `mm`).
//!
//! Not measured, so not removed: the caches and TLBs a monitor's reads leave cold, memory
//! bandwidth, kernel locks other than the mmap lock, interrupts, and knock-on delays (another
//! child delayed holds a CPU longer). The workload's children are single-threaded processes,
//! so a child's operations are its thread's.
//!
//! Pure but for [`Instance`]: lines in, delays out.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What one trace line says, of the events read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `prev_pid` left the CPU (still runnable when its state begins with `R`), `next_pid` took it.
    Switch { prev: u32, prev_runnable: bool, next: u32 },
    /// `pid` was woken, to run on `cpu`.
    Wakeup { pid: u32, cpu: u32 },
    /// `pid` was moved from one CPU's queue to another's.
    Migrate { pid: u32, from: u32, to: u32 },
    /// The emitting thread asked for the mmap lock of `mm` (the trace's hashed pointer).
    LockStart { mm: u64 },
    /// The emitting thread's ask for `mm`'s lock returned (`success`: it holds it).
    LockAcquired { mm: u64, success: bool },
    /// The emitting thread let `mm`'s lock go.
    LockReleased { mm: u64 },
}

/// One event: the emitting thread (`tid`, its process `tgid` where the trace recorded it), the
/// CPU and the time (nanoseconds of the trace's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub tid: u32,
    pub tgid: Option<u32>,
    pub cpu: u32,
    pub ns: u64,
    pub kind: Kind,
}

/// What a line of `trace_pipe` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    Event(Event),
    /// `CPU:N [LOST K EVENTS]`: the per-CPU buffer overflowed.
    Lost(u64),
    /// Another event, or a line this does not read.
    Other,
}

/// Reads one line of an instance's `trace_pipe` with `record-tgid` on:
/// `COMM-TID (TGID) [CPU] FLAGS SECONDS.MICROS: EVENT: FIELDS`. A command may hold spaces,
/// dashes and brackets, so the header is taken at the first `) [` after which the rest reads
/// as a header, and each event's numbers from the end of its fields (where no command is).
pub fn parse(line: &str) -> Line {
    let line = line.trim_end();
    if let Some(rest) = line.trim_start().strip_prefix("CPU:") {
        if let Some(lost) =
            rest.split_once("[LOST ").and_then(|(_, r)| r.split_once(' ')).and_then(|(n, _)| n.parse().ok())
        {
            return Line::Lost(lost);
        }
    }
    let mut from = 0;
    while let Some(at) = line[from..].find(") [").map(|i| i + from) {
        from = at + 1;
        if let Some(event) = header_at(line, at) {
            return event.map_or(Line::Other, Line::Event);
        }
    }
    Line::Other
}

/// The event whose header's `(TGID)` closes at `close`; `None` if the line does not read as a
/// header there; `Some(None)` for a header of an event not read here.
fn header_at(line: &str, close: usize) -> Option<Option<Event>> {
    let open = line[..close].rfind('(')?;
    let tgid = line[open + 1..close].trim();
    let tgid = if tgid.bytes().all(|b| b == b'-') { None } else { Some(tgid.parse().ok()?) };
    let task = line[..open].trim_end();
    let tid: u32 = task[task.rfind('-')? + 1..].parse().ok()?;
    let rest = &line[close + 3..];
    let (cpu, rest) = rest.split_once("] ")?;
    let cpu: u32 = cpu.parse().ok()?;
    let (_flags, rest) = rest.trim_start().split_once(' ')?;
    let (stamp, rest) = rest.trim_start().split_once(": ")?;
    let ns = stamp_ns(stamp)?;
    let (name, fields) = rest.split_once(": ").unwrap_or((rest, ""));
    let kind = match name {
        "sched_switch" => switch(fields),
        "sched_wakeup" => {
            let [cpu, _prio, pid] = last_fields(fields, ["target_cpu", "prio", "pid"])?;
            Some(Kind::Wakeup { pid: pid.parse().ok()?, cpu: cpu.parse().ok()? })
        }
        "sched_migrate_task" => {
            let [to, from, _prio, pid] = last_fields(fields, ["dest_cpu", "orig_cpu", "prio", "pid"])?;
            Some(Kind::Migrate { pid: pid.parse().ok()?, from: from.parse().ok()?, to: to.parse().ok()? })
        }
        "mmap_lock_start_locking" => Some(Kind::LockStart { mm: mm(fields)? }),
        "mmap_lock_acquire_returned" => {
            let success = fields.split(' ').any(|f| f == "success=true");
            Some(Kind::LockAcquired { mm: mm(fields)?, success })
        }
        "mmap_lock_released" => Some(Kind::LockReleased { mm: mm(fields)? }),
        _ => return Some(None),
    };
    Some(kind.map(|kind| Event { tid, tgid, cpu, ns, kind }))
}

/// `SECONDS.FRACTION` as nanoseconds.
fn stamp_ns(stamp: &str) -> Option<u64> {
    let (seconds, fraction) = stamp.split_once('.')?;
    if fraction.is_empty() || fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let scale = 10u64.pow(9 - fraction.len() as u32);
    seconds.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(fraction.parse::<u64>().ok()? * scale)
}

/// The values of the last fields, right to left, each checked for its name.
fn last_fields<'a, const N: usize>(fields: &'a str, names: [&str; N]) -> Option<[&'a str; N]> {
    let mut words = fields.rsplit(' ');
    let mut out = [""; N];
    for (slot, name) in out.iter_mut().zip(names) {
        *slot = words.next()?.strip_prefix(name)?.strip_prefix('=')?;
    }
    Some(out)
}

/// `sched_switch`'s fields: `prev_comm=… prev_pid=N prev_prio=P prev_state=S ==> next_comm=…
/// next_pid=M next_prio=Q`.
fn switch(fields: &str) -> Option<Kind> {
    let (prev, next) = fields.rsplit_once(" ==> ")?;
    let [state, _prio, prev_pid] = last_fields(prev, ["prev_state", "prev_prio", "prev_pid"])?;
    let [_prio, next_pid] = last_fields(next, ["next_prio", "next_pid"])?;
    Some(Kind::Switch {
        prev: prev_pid.parse().ok()?,
        prev_runnable: state.starts_with('R'),
        next: next_pid.parse().ok()?,
    })
}

/// The `mm=HEX` that opens the mmap lock events' fields.
fn mm(fields: &str) -> Option<u64> {
    u64::from_str_radix(fields.split(' ').next()?.strip_prefix("mm=")?, 16).ok()
}

/// Which way a monitor delayed a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Cpu,
    Lock,
}

/// A stretch of time in which a target's thread was kept waiting by a monitor (of `arm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delay {
    pub start: u64,
    pub end: u64,
    pub arm: usize,
    pub channel: Channel,
}

/// More CPUs than any host this runs on has (Linux's largest configuration).
const MAX_CPUS: u32 = 8192;

/// How long the monitors' runs and holds are kept to be set against waits that close later.
const KEEP_NS: u64 = 30_000_000_000;

#[derive(Debug, Default)]
struct Cpu {
    /// The task on it since a time, from the last switch seen there.
    current: Option<(u32, u64)>,
    /// Monitors' runs on it, oldest first: (start, end, arm).
    runs: VecDeque<(u64, u64, usize)>,
}

/// Turns events into the delays each target thread had from the monitors.
#[derive(Debug, Default)]
pub struct Attributor {
    /// Monitors' processes, and the arm each is.
    monitors: HashMap<u32, usize>,
    /// Monitors' threads, as learned (listed at the start, or seen emitting an event).
    monitor_tids: HashMap<u32, usize>,
    /// The target's threads.
    targets: BTreeSet<u32>,
    cpus: Vec<Cpu>,
    /// A target thread runnable and not running: on which CPU's queue, since when.
    queued: HashMap<u32, (u32, u64)>,
    /// Monitors' holds of an mmap lock, open: (thread, mm) → since, arm.
    holds: HashMap<(u32, u64), (u64, usize)>,
    /// Monitors' holds, closed, by mm: (start, end, arm).
    held: HashMap<u64, VecDeque<(u64, u64, usize)>>,
    /// A target thread asking for an mmap lock: its mm, since when.
    asking: HashMap<u32, (u64, u64)>,
    delays: BTreeMap<u32, Vec<Delay>>,
    /// The broad delays: CPU anywhere, and the lock's as above.
    broad: BTreeMap<u32, Vec<Delay>>,
    pub events: u64,
    pub lost: u64,
    pub unread: u64,
}

impl Attributor {
    pub fn new(targets: impl IntoIterator<Item = u32>) -> Attributor {
        Attributor { targets: targets.into_iter().collect(), ..Attributor::default() }
    }

    /// A monitor of `arm`, process `pid`, with the threads it has now (others are learned as
    /// they emit events).
    pub fn add_monitor(&mut self, pid: u32, arm: usize, threads: impl IntoIterator<Item = u32>) {
        self.monitors.insert(pid, arm);
        self.monitor_tids.insert(pid, arm);
        for tid in threads {
            self.monitor_tids.insert(tid, arm);
        }
    }

    pub fn feed_line(&mut self, line: &str) {
        match parse(line) {
            Line::Event(event) => self.feed(&event),
            Line::Lost(n) => self.lost += n,
            Line::Other => self.unread += u64::from(!line.trim().is_empty() && !line.starts_with('#')),
        }
    }

    pub fn feed(&mut self, e: &Event) {
        // A CPU number is an index into per-CPU state: one past any machine's is not a line of
        // this kernel's, and is counted as unread rather than grown into.
        if e.cpu >= MAX_CPUS {
            self.unread += 1;
            return;
        }
        self.events += 1;
        if let Some(&arm) = e.tgid.and_then(|tgid| self.monitors.get(&tgid)) {
            self.monitor_tids.insert(e.tid, arm);
        }
        let emitter_arm = self.monitor_tids.get(&e.tid).copied();
        match e.kind {
            Kind::Switch { prev, prev_runnable, next } => {
                let cpu = self.cpu(e.cpu);
                if let (Some((tid, since)), Some(arm)) = (cpu.current, emitter_arm) {
                    if tid == prev || tid == e.tid {
                        cpu.runs.push_back((since, e.ns, arm));
                    }
                }
                while cpu.runs.front().is_some_and(|&(_, end, _)| end + KEEP_NS < e.ns) {
                    cpu.runs.pop_front();
                }
                cpu.current = Some((next, e.ns));
                if prev_runnable && self.targets.contains(&prev) {
                    self.queued.insert(prev, (e.cpu, e.ns));
                }
                if let Some((on, since)) = self.queued.remove(&next) {
                    self.close_queued(next, on, since, e.ns);
                }
            }
            Kind::Wakeup { pid, cpu } => {
                if self.targets.contains(&pid) {
                    self.queued.entry(pid).or_insert((cpu, e.ns));
                }
            }
            Kind::Migrate { pid, from, to } => {
                if let Some((on, since)) = self.queued.remove(&pid) {
                    self.close_queued(pid, if on == from { on } else { from }, since, e.ns);
                    self.queued.insert(pid, (to, e.ns));
                }
            }
            Kind::LockStart { mm } => {
                if self.targets.contains(&e.tid) {
                    self.asking.insert(e.tid, (mm, e.ns));
                }
            }
            Kind::LockAcquired { mm, success } => {
                if let Some(arm) = emitter_arm {
                    if success {
                        self.holds.insert((e.tid, mm), (e.ns, arm));
                    }
                } else if let Some((asked, since)) = self.asking.remove(&e.tid) {
                    if asked == mm {
                        self.close_asking(e.tid, mm, since, e.ns);
                    }
                }
            }
            Kind::LockReleased { mm } => {
                if let Some((since, arm)) = self.holds.remove(&(e.tid, mm)) {
                    let held = self.held.entry(mm).or_default();
                    held.push_back((since, e.ns, arm));
                    while held.front().is_some_and(|&(_, end, _)| end + KEEP_NS < e.ns) {
                        held.pop_front();
                    }
                }
            }
        }
    }

    fn cpu(&mut self, cpu: u32) -> &mut Cpu {
        let i = cpu as usize;
        if self.cpus.len() <= i {
            self.cpus.resize_with(i + 1, Cpu::default);
        }
        &mut self.cpus[i]
    }

    /// `tid` waited on `cpu`'s queue from `since` to `until`: the monitors' runs there then
    /// (direct), and on any CPU (broad).
    fn close_queued(&mut self, tid: u32, cpu: u32, since: u64, until: u64) {
        let monitor_tids = &self.monitor_tids;
        // Only the runs that overlap the wait: each CPU keeps many seconds of them, in the
        // order they ended, and those that ended before the wait began are skipped by halving.
        let runs = |state: &Cpu| -> Vec<(u64, u64, usize)> {
            let first = state.runs.partition_point(|&(_, end, _)| end <= since);
            let mut runs: Vec<(u64, u64, usize)> =
                state.runs.range(first..).filter(|&&(start, _, _)| start < until).copied().collect();
            // The task on that CPU now, if a monitor's: its run so far.
            if let Some((current, from)) = state.current {
                if let Some(&arm) = monitor_tids.get(&current) {
                    runs.push((from, until, arm));
                }
            }
            runs
        };
        let direct = self.cpus.get(cpu as usize).map(runs).unwrap_or_default();
        let anywhere = union(self.cpus.iter().flat_map(runs).collect());
        let (mut direct_delays, mut broad_delays) = (Vec::new(), Vec::new());
        overlaps(since, until, &direct, Channel::Cpu, &mut direct_delays);
        overlaps(since, until, &anywhere, Channel::Cpu, &mut broad_delays);
        self.delays.entry(tid).or_default().extend(direct_delays);
        self.broad.entry(tid).or_default().extend(broad_delays);
    }

    /// `tid` asked for `mm`'s lock from `since` and got it at `until`: the monitors' holds then.
    fn close_asking(&mut self, tid: u32, mm: u64, since: u64, until: u64) {
        let mut holds: Vec<(u64, u64, usize)> = self
            .held
            .get(&mm)
            .map(|h| {
                let first = h.partition_point(|&(_, end, _)| end <= since);
                h.range(first..).filter(|&&(start, _, _)| start < until).copied().collect()
            })
            .unwrap_or_default();
        holds.extend(self.holds.iter().filter(|((_, m), _)| *m == mm).map(|(_, &(from, arm))| (from, until, arm)));
        let mut found = Vec::new();
        overlaps(since, until, &union(holds), Channel::Lock, &mut found);
        self.broad.entry(tid).or_default().extend(found.iter().copied());
        self.delays.entry(tid).or_default().extend(found);
    }

    /// Every thread's delays, each thread's in time order.
    pub fn into_delays(mut self) -> Delays {
        for delays in self.delays.values_mut().chain(self.broad.values_mut()) {
            delays.sort_by_key(|d| (d.start, d.end));
        }
        Delays { by_tid: self.delays, broad: self.broad, events: self.events, lost: self.lost, unread: self.unread }
    }
}

/// Spans merged where they overlap, per arm, in time order (two threads of a monitor running
/// at once on two CPUs, or holding a lock at once, delay a waiting thread once).
fn union(mut spans: Vec<(u64, u64, usize)>) -> Vec<(u64, u64, usize)> {
    spans.sort_by_key(|&(start, end, arm)| (arm, start, end));
    let mut out: Vec<(u64, u64, usize)> = Vec::with_capacity(spans.len());
    for (start, end, arm) in spans {
        match out.last_mut() {
            Some(last) if last.2 == arm && start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end, arm)),
        }
    }
    out
}

/// The parts of `spans` within `since..until`, as delays.
fn overlaps(since: u64, until: u64, spans: &[(u64, u64, usize)], channel: Channel, out: &mut Vec<Delay>) {
    for &(start, end, arm) in spans {
        let (start, end) = (start.max(since), end.min(until));
        if start < end {
            out.push(Delay { start, end, arm, channel });
        }
    }
}

/// The delays found, by target thread.
#[derive(Debug, Default)]
pub struct Delays {
    /// CPU where the thread was queued, and locks.
    pub by_tid: BTreeMap<u32, Vec<Delay>>,
    /// CPU anywhere, and locks.
    pub broad: BTreeMap<u32, Vec<Delay>>,
    pub events: u64,
    pub lost: u64,
    pub unread: u64,
}

impl Delays {
    /// What `arm`'s monitor delayed `tid` by between `start` and `end`, by CPU and by lock,
    /// in nanoseconds: the direct delays.
    pub fn within(&self, tid: u32, arm: usize, start: u64, end: u64) -> (u64, u64) {
        within(&self.by_tid, tid, arm, start, end)
    }

    /// The same with the broad CPU figure (a monitor running on any CPU).
    pub fn within_broad(&self, tid: u32, arm: usize, start: u64, end: u64) -> (u64, u64) {
        within(&self.broad, tid, arm, start, end)
    }
}

fn within(by_tid: &BTreeMap<u32, Vec<Delay>>, tid: u32, arm: usize, start: u64, end: u64) -> (u64, u64) {
    let Some(delays) = by_tid.get(&tid) else { return (0, 0) };
    // Delays of one thread do not overlap (a thread waits one way at a time), so they end
    // in the order they start.
    let first = delays.partition_point(|d| d.end <= start);
    let (mut cpu, mut lock) = (0, 0);
    for d in delays[first..].iter().take_while(|d| d.start < end).filter(|d| d.arm == arm) {
        let overlap = d.end.min(end) - d.start.max(start);
        match d.channel {
            Channel::Cpu => cpu += overlap,
            Channel::Lock => lock += overlap,
        }
    }
    (cpu, lock)
}

/// The events enabled, under `events/`.
const EVENTS: [&str; 6] = [
    "sched/sched_switch",
    "sched/sched_wakeup",
    "sched/sched_migrate_task",
    "mmap_lock/mmap_lock_start_locking",
    "mmap_lock/mmap_lock_acquire_returned",
    "mmap_lock/mmap_lock_released",
];

/// A tracing instance of this process's own with the events above, recording from
/// [`Instance::open`] until dropped (then removed).
#[derive(Debug)]
pub struct Instance {
    dir: PathBuf,
    pipe: Option<File>,
}

impl Instance {
    /// Makes the instance (`instances/proctor-impact-PID` under tracefs), or says why not.
    pub fn open() -> Result<Instance, String> {
        let tracefs = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.join("instances").is_dir())
            .ok_or("no tracefs mounted (/sys/kernel/tracing; root mounts it with `mount -t tracefs nodev /sys/kernel/tracing`)")?;
        if let Some(missing) = EVENTS.iter().find(|e| !tracefs.join("events").join(e).is_dir()) {
            return Err(format!("this kernel has no {missing} tracepoint"));
        }
        remove_stale(&tracefs.join("instances"));
        let dir = tracefs.join("instances").join(format!("proctor-impact-{}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create a tracing instance {}: {e}", dir.display())),
        }
        let mut instance = Instance { dir, pipe: None };
        let set = |dir: &Path, path: &str, value: &str| -> Result<(), String> {
            std::fs::write(dir.join(path), value).map_err(|e| format!("cannot set {}: {e}", dir.join(path).display()))
        };
        set(&instance.dir, "tracing_on", "0")?;
        set(&instance.dir, "trace_clock", "mono")?;
        set(&instance.dir, "buffer_size_kb", "16384")?;
        set(&instance.dir, "options/record-tgid", "1")?;
        for e in EVENTS {
            set(&instance.dir, &format!("events/{e}/enable"), "1")?;
        }
        let pipe = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(instance.dir.join("trace_pipe"))
            .map_err(|e| format!("cannot open {}: {e}", instance.dir.join("trace_pipe").display()))?;
        instance.pipe = Some(pipe);
        set(&instance.dir, "tracing_on", "1")?;
        Ok(instance)
    }

    /// Reads what is there into `buf` (appended); `Ok(0)` when nothing is.
    pub fn read(&mut self, buf: &mut Vec<u8>) -> std::io::Result<usize> {
        let Some(pipe) = self.pipe.as_mut() else { return Ok(0) };
        let mut chunk = [0u8; 64 * 1024];
        match pipe.read(&mut chunk) {
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                Ok(n)
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Stops recording (what was recorded can still be read).
    pub fn stop(&self) {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.stop();
        for e in EVENTS {
            let _ = std::fs::write(self.dir.join(format!("events/{e}/enable")), "0");
        }
        // An instance with open files cannot be removed.
        self.pipe = None;
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Takes down the instances of impact runs that ended without removing theirs (killed): each
/// records every event it has enabled, for nobody, until removed.
fn remove_stale(instances: &Path) {
    let Ok(entries) = std::fs::read_dir(instances) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) =
            name.to_str().and_then(|n| n.strip_prefix("proctor-impact-")).and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::write(entry.path().join("tracing_on"), "0");
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// The threads `pid` has now.
pub fn threads(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|entries| entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_this_kernel_read_as_their_events() {
        let read = |line: &str| match parse(line) {
            Line::Event(e) => e,
            other => panic!("{line}: {other:?}"),
        };
        let e = read("            bash-11850   (  11850) [000] d..2. 53165.415994: sched_switch: prev_comm=bash prev_pid=11850 prev_prio=120 prev_state=R ==> next_comm=bash next_pid=11857 next_prio=120");
        assert_eq!((e.tid, e.tgid, e.cpu, e.ns), (11850, Some(11850), 0, 53_165_415_994_000));
        assert_eq!(e.kind, Kind::Switch { prev: 11850, prev_runnable: true, next: 11857 });
        let e = read("           sleep-11857   (  11857) [000] d..2. 53165.416259: sched_switch: prev_comm=bash prev_pid=11857 prev_prio=120 prev_state=S ==> next_comm=migration/0 next_pid=18 next_prio=0");
        assert_eq!(e.kind, Kind::Switch { prev: 11857, prev_runnable: false, next: 18 });
        let e = read("          <idle>-0       (-------) [001] dNs5. 53165.417032: sched_wakeup: comm=bash pid=11857 prio=120 target_cpu=001");
        assert_eq!((e.tid, e.tgid, e.cpu), (0, None, 1));
        assert_eq!(e.kind, Kind::Wakeup { pid: 11857, cpu: 1 });
        let e = read("     migration/0-18      (     18) [000] d..3. 53165.416266: sched_migrate_task: comm=bash pid=11857 prio=120 orig_cpu=0 dest_cpu=1");
        assert_eq!(e.kind, Kind::Migrate { pid: 11857, from: 0, to: 1 });
        let e = read("            bash-11850   (  11850) [000] ..... 53165.415740: mmap_lock_acquire_returned: mm=000000005485683e memcg_id=32540 write=true success=true");
        assert_eq!(e.kind, Kind::LockAcquired { mm: 0x5485683e, success: true });
        let e = read("            bash-11850   (  11850) [000] ..... 53165.415741: mmap_lock_start_locking: mm=000000009f16cebb memcg_id=1 write=true");
        assert_eq!(e.kind, Kind::LockStart { mm: 0x9f16cebb });
        // A command with spaces, a dash, brackets and the switch's own words in it.
        let e = read(" a -b) [1] x ==> y-4242 (  4240) [001] d..2. 7.000001: sched_switch: prev_comm=a ==> prev_pid=1 prev_pid=4242 prev_prio=120 prev_state=R+ ==> next_comm=x next_pid=7 next_prio=120");
        assert_eq!((e.tid, e.tgid, e.ns), (4242, Some(4240), 7_000_001_000));
        assert_eq!(e.kind, Kind::Switch { prev: 4242, prev_runnable: true, next: 7 });
        assert_eq!(parse("CPU:1 [LOST 312 EVENTS]"), Line::Lost(312));
        assert_eq!(parse("# tracer: nop"), Line::Other);
        assert_eq!(parse("bash-1 (1) [000] ..... 1.5: sys_enter: NR 0"), Line::Other);
        assert_eq!(parse("bash-1 (1) [000] ..... 1.5: sched_wakeup: comm=x pid=oops prio=1 target_cpu=0"), Line::Other);
        assert_eq!(parse(") [ ) [ (((] : : ==> "), Line::Other);
        let mut a = Attributor::new([1]);
        a.feed_line("x-1 (1) [4294967295] d..2. 1.000001: sched_wakeup: comm=x pid=1 prio=120 target_cpu=000");
        assert_eq!((a.events, a.unread, a.cpus.len()), (0, 1, 0), "a CPU past any machine's is not grown into");
    }

    /// A line of the trace's form.
    fn line(tid: u32, tgid: u32, cpu: u32, us: u64, event: &str) -> String {
        format!("x-{tid} ({tgid:>7}) [{cpu:03}] d..2. {}.{:06}: {event}", us / 1_000_000, us % 1_000_000)
    }

    fn switch(prev: u32, state: &str, next: u32) -> String {
        format!("sched_switch: prev_comm=x prev_pid={prev} prev_prio=120 prev_state={state} ==> next_comm=y next_pid={next} next_prio=120")
    }

    #[test]
    fn a_monitors_cpu_and_holds_are_charged_where_a_target_waited_on_them_and_nothing_else_is() {
        // Monitor: process 100, threads 100 and 101 (101 listed at the start, 102 learned).
        // Target thread 200. Another process, 300. Times in microseconds.
        let mut a = Attributor::new([200]);
        a.add_monitor(100, 1, [100, 101]);
        for l in [
            // CPU 0: the monitor's 101 runs from 0; 200 woken onto CPU 0 at 10; runs at 30.
            line(0, 0, 0, 0, &switch(0, "R", 101)),
            line(5, 5, 1, 10, "sched_wakeup: comm=t pid=200 prio=120 target_cpu=000"),
            line(101, 100, 0, 30, &switch(101, "S", 200)),
            // 200 preempted at 40 by 300, which runs to 60: not a monitor, no delay.
            line(200, 200, 0, 40, &switch(200, "R+", 300)),
            line(300, 300, 0, 60, &switch(300, "S", 200)),
            // The monitor holds mm 0xa from 100 to 120; 200 asks at 105, gets it at 121.
            line(
                101,
                100,
                1,
                100,
                "mmap_lock_acquire_returned: mm=000000000000000a memcg_id=1 write=false success=true",
            ),
            line(200, 200, 0, 105, "mmap_lock_start_locking: mm=000000000000000a memcg_id=1 write=true"),
            line(101, 100, 1, 120, "mmap_lock_released: mm=000000000000000a memcg_id=1 write=false"),
            line(
                200,
                200,
                0,
                121,
                "mmap_lock_acquire_returned: mm=000000000000000a memcg_id=1 write=true success=true",
            ),
            // A wait on another mm while the monitor holds 0xa: not the monitor's.
            line(
                101,
                100,
                1,
                130,
                "mmap_lock_acquire_returned: mm=000000000000000a memcg_id=1 write=false success=true",
            ),
            line(200, 200, 0, 131, "mmap_lock_start_locking: mm=000000000000000b memcg_id=1 write=true"),
            line(
                200,
                200,
                0,
                140,
                "mmap_lock_acquire_returned: mm=000000000000000b memcg_id=1 write=true success=true",
            ),
            line(101, 100, 1, 150, "mmap_lock_released: mm=000000000000000a memcg_id=1 write=false"),
            // A thread of the monitor not listed (102) runs on CPU 1 from 200 to 260, learned as it
            // leaves; 200, queued on CPU 0 at 210, moved to CPU 1 at 220, runs there at 260.
            line(0, 0, 1, 200, &switch(0, "R", 102)),
            line(200, 200, 0, 210, &switch(200, "R", 300)),
            line(18, 18, 0, 220, "sched_migrate_task: comm=t pid=200 prio=120 orig_cpu=0 dest_cpu=1"),
            line(102, 100, 1, 260, &switch(102, "S", 200)),
            // 101 runs on CPU 0 from 300; 200, preempted on CPU 1 by 300 at 310, runs at 330:
            // no monitor on its CPU (direct 0), one on the other (broad 20).
            line(0, 0, 0, 300, &switch(0, "R", 101)),
            line(200, 200, 1, 310, &switch(200, "R", 300)),
            line(300, 300, 1, 330, &switch(300, "S", 200)),
        ] {
            a.feed_line(&l);
        }
        assert_eq!((a.events, a.unread), (20, 0));
        let d = a.into_delays();
        let us = |(cpu, lock): (u64, u64)| (cpu / 1000, lock / 1000);
        assert_eq!(
            us(d.within(200, 1, 0, 100_000)),
            (20, 0),
            "CPU 10..30 (300's run is not a monitor's); {:?}",
            d.by_tid
        );
        assert_eq!(
            us(d.within(200, 1, 100_000, 200_000)),
            (0, 15),
            "lock 105..120; the wait on mm b is not the monitor's"
        );
        // 102's run on CPU 1 (200..260), told as it left, against 200's wait there from its move
        // at 220; its wait on CPU 0 (210..220) had no monitor beside it.
        assert_eq!(us(d.within(200, 1, 200_000, 300_000)), (40, 0), "{:?}", d.by_tid);
        assert_eq!(us(d.within(200, 1, 225_000, 235_000)), (10, 0), "clipped to the operation");
        assert_eq!(us(d.within(200, 2, 0, 1_000_000)), (0, 0), "another arm's monitor delayed nothing");
        assert_eq!(us(d.within(200, 1, 300_000, 400_000)), (0, 0));
        assert_eq!(us(d.within_broad(200, 1, 300_000, 400_000)), (20, 0), "{:?}", d.broad);
        assert_eq!(
            us(d.within_broad(200, 1, 0, 300_000)),
            (60, 15),
            "where the monitor was on its CPU, broad is direct"
        );
    }
}
