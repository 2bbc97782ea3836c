//! The PSS worker: refreshes `smaps_rollup` round-robin under a CPU budget, off the sampling
//! thread; a target of [`PAGEMAP_FROM_BYTES`] or more whose threads waited on a read through
//! `pagemap` ([`crate::pagemap`], [`how_to_read`]) where this process may, which holds its
//! lock a 2 MiB walk at a time.
//!
//! `smaps_rollup` walks every resident page of the target while holding its mmap lock: it
//! costs about 13–16 ms per GiB resident here, and the target cannot mmap, munmap or fault in
//! new memory meanwhile. So this worker reads one process at a time, charges each read its
//! thread's CPU time since the last (`CLOCK_THREAD_CPUTIME_ID`: the read, and the picks and
//! wakeups before it), and sleeps long enough afterwards that its
//! share of one core stays within the budget. Processes whose cheap counters (rss and fault
//! counts from `stat`) have not changed since their last reading are skipped, and their
//! reading keeps its age so consumers can tell — but only up to a maximum age: PSS divides
//! each shared page among its sharers, so when another sharer exits (or a new one maps the
//! pages) the target's PSS moves while its own counters stay still. A reading older than the
//! maximum age is refreshed like a changed one, still within the budget. A process that had
//! lived less than [`YOUNG`] when listed is read from the next list on: most that young are
//! gone before a reading would be looked at.
//!
//! Sharers come and go in families: a process that forks without exec shares its pages with
//! its children, who keep its name. So when a process appears, exits, execs or changes parent,
//! the readings of its family (the processes of its name under its parent, and that parent if
//! it has the name too) are *stale*: read before the change, they may be off by the change's
//! whole share (half a tree exiting doubles the others' PSS). A process counts as a member from
//! the list where it has outlived [`YOUNG`]: a fork storm's children come and go without
//! sending the worker back to their parent every sample, and while a process has such young
//! children its faults alone do not count as a change (their copy-on-write moves them). A stale
//! reading is still given out, marked (`ProcessSample::pss_stale`), so a sum over a tree can
//! refuse to call itself complete, and it is read again before anything whose only reason is
//! its counters or its age. What no family watch sees: file pages (a program's own binary and
//! libraries) are shared with every other process mapping them, so an unrelated python starting
//! moves every python's file PSS (by megabytes here) unmarked until the reading ages out; the
//! anonymous part is the family's. A member younger than [`SETTLE`] is not read while its family
//! has a young process: that one joining would make its reading stale at once.
//!
//! A family's members are often clones: a server's idle workers, forked from one parent and
//! doing nothing since, have the same resident size and faults (to a few pages: a parent grows
//! a little with its first forks) and the same PSS to the page. So a member with no reading (or
//! a stale one) whose counters are near those a member of its family had when read
//! ([`CLONE_NEAR_BYTES`]) shows that reading meanwhile, marked ([`State::estimate`]), and is
//! read after the others: a tree of clones has a figure for every member after a read or two,
//! not after a read of each (96 workers sharing 2 GiB: ~4 s of CPU, over three minutes at 2 %).
//! Each stand-in is checked when its member is read itself, and a family whose stand-in was off
//! gets none.
//!
//! The budget is an average: unspent budget is saved, up to [`BURST_SAVED`] of it, and spent
//! at up to [`BURST_RATE`] times the budget. A worker that starts on a big tree (or sees one
//! appear) reads it that much sooner, and over any window of `w` seconds it spends at most
//! `budget · (w + BURST_SAVED)` of CPU.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proctor_model::{PssReading, Stall};
use proctor_procfs::process::{parse_smaps_rollup, PidMap};
use proctor_procfs::system::thread_cpu_ns;
use proctor_procfs::{Error, ErrorKind, Root};
use serde::Serialize;

use crate::pagemap::{Holds, PageCounter};

/// What bounds the worker's holds of one target's mmap lock, beside its own CPU budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetLimits {
    /// Age past which a reading of an unchanged process is refreshed.
    pub max_age: Duration,
    /// Share of wall time one target's lock may be held by these reads: after a read that held
    /// it `h`, that target is not read again for `h / share` (at 1 ms per second, a 20 ms read
    /// waits 20 s), however its counters move; its PSS age shows it.
    pub share: f64,
    /// A target that one read held longer than this is not read again: its reading keeps its
    /// age, and its ledger says it was capped.
    pub max_hold: Duration,
    /// Also measure what each target's own threads waited on these reads, from the kernel's
    /// mmap_lock tracepoints where proctor may use them ([`crate::lockwait`]).
    pub trace_waits: bool,
    /// Read this process itself again by age or staleness only, not when its counters move
    /// ([`State::unchanged`]): right for an agent watching others (`serve`, `record`, `top`),
    /// not where its own process is what is watched (an agent inside a Jupyter server).
    pub own_by_age: bool,
    /// The worker thread's own slice (Linux 6.12+; [`proctor_procfs::system::set_thread_slice`];
    /// zero: the kernel's). One `smaps_rollup` of a big target runs 10–50 ms in the kernel
    /// without sleeping, on a CPU the target's threads may want: past its slice, the worker
    /// yields to a task that wakes on that CPU at its next preemption point (every 2 MiB of
    /// page tables), where at the kernel's slice (0.7 ms × 1 + log2 of the CPUs, up to 3 ms)
    /// that woken task waited for the rest of the worker's slice or the next tick.
    pub slice: Duration,
}

impl Default for TargetLimits {
    fn default() -> Self {
        TargetLimits {
            max_age: DEFAULT_MAX_AGE,
            share: 0.001,
            max_hold: Duration::from_millis(50),
            trace_waits: true,
            own_by_age: true,
            slice: DEFAULT_SLICE,
        }
    }
}

/// The PSS worker's own slice by default ([`TargetLimits::slice`]): the shortest the kernel
/// takes.
pub const DEFAULT_SLICE: Duration = Duration::from_micros(100);

/// A process the worker may read, with the cheap counters that decide whether it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub pid: u32,
    pub start_ticks: u64,
    /// Its parent and a hash of its name ([`family_name`]): its family, for staleness.
    pub ppid: u32,
    pub name: u64,
    pub resident_bytes: u64,
    /// Minor + major faults: any page mapped in since the last reading moves this.
    pub faults: u64,
}

/// What the worker has done so far.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PssStats {
    pub reads: u64,
    pub skipped_unchanged: u64,
    /// Passes over a process younger than [`YOUNG`] when listed (read from the next list on).
    pub skipped_young: u64,
    /// Passes over a member younger than [`SETTLE`] while its family had a young process.
    pub skipped_settling: u64,
    pub errors: u64,
    /// The thread's CPU charged to the budget so far: all of it, up to the last read.
    pub cpu_ns: u64,
    /// The most expensive single read so far, in CPU nanoseconds.
    pub max_read_cpu_ns: u64,
    pub budget: f64,
    /// The stall ledger's share of this reader.
    #[serde(flatten)]
    pub lock: crate::worker::LockTotals,
    /// Reads put off because their target's share of lock time was spent, and targets no
    /// longer read because one read held the lock past the cap.
    pub skipped_target_budget: u64,
    pub capped_targets: u64,
    /// Times a target's threads waited on a read, so that it is read half as often from then
    /// ([`MAX_BACKOFF`]).
    pub backoffs: u64,
    /// Reads put first because someone asked for that process ([`PssWorker::ask`]).
    pub asked_reads: u64,
    /// Reads put off for [`PUT_OFF`] while the host was busy ([`How::PutOff`]).
    pub put_off_busy: u64,
    /// Reads of big targets that wanted a `pagemap` walk (short holds) and went through
    /// `smaps_rollup` (one hold of the whole mapping) or were put off, because the last walk's
    /// CPU per byte said this one would cost more than [`WALK_OVERDRAFT`] times the savings
    /// ([`how_to_read`]).
    pub walks_unaffordable: u64,
    /// Walks stopped at their CPU limit, [`WALK_OVERDRAFT`] times the savings
    /// ([`PageCounter::limit_cpu`]): the target was read
    /// through `smaps_rollup` that time, and the walk's CPU spent for nothing but its rate.
    pub walks_stopped: u64,
    /// The CPUs the worker may run on where they are fewer than the host's, whose busy share
    /// also counts as a crowd ([`Crowd`]); 0: the host's run queue alone is asked.
    pub crowd_cpus: u32,
    /// The worker thread's own EEVDF slice ([`TargetLimits::slice`]): the one asked (0: the
    /// kernel's), and the one the kernel reports after (0: not taken; `proctor doctor` says why).
    pub slice_asked_ns: u64,
    pub slice_ns: u64,
    /// The targets' side, from the mmap_lock tracepoints (`false`: not measured; `proctor
    /// doctor` says why): reads traced, what the targets' threads waited on them, and traces
    /// that lost events (their waits may be short).
    pub waits_traced: bool,
    pub traced_reads: u64,
    pub target_waited_ns: u64,
    pub traces_lost: u64,
    /// Whether big targets are read through `pagemap` ([`PAGEMAP_FROM_BYTES`]; `proctor
    /// doctor` says why not), how many reads went that way, and their share of the ledger
    /// (`lock` is the `smaps_rollup` reads').
    pub pagemap: bool,
    pub pagemap_reads: u64,
    pub pagemap_lock: crate::worker::LockTotals,
    /// Clones' readings standing in for a process's own ([`State::estimate`]): how many were
    /// checked against the process's own reading when it came, how many of those were more than
    /// [`CLONE_TOLERANCE`] off (their family gets no more), and the largest error seen, as a
    /// share of the own reading's anonymous and shmem PSS ([`family_part`]).
    pub estimates_checked: u64,
    pub estimates_off: u64,
    pub estimate_worst_error: f64,
    /// How much longer the worker rests after its last read to keep to its budget, when these
    /// stats were taken (0: not resting). An asked-for process waits for it too: a client
    /// showing a process without PSS says so rather than only "not read yet".
    pub resting_ns: u64,
}

/// Targets with at least this much resident are read through `pagemap` where this process
/// may ([`crate::pagemap`]) when they wait on reads ([`how_to_read`]): above it one
/// `smaps_rollup` hold passes ~0.75 ms here (12 ms per GiB), and `pagemap` holds a target's
/// lock for one 2 MiB walk at a time, whatever its size. Below it `smaps_rollup`'s hold is short
/// and it gives every counter exactly (the clean/dirty split, SwapPss), which `pagemap` cannot.
pub const PAGEMAP_FROM_BYTES: u64 = 64 << 20;

/// How the worker reads one target ([`how_to_read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// `smaps_rollup`: one hold of the target's lock, every counter exactly.
    Rollup,
    /// A walk of its page tables through `pagemap`, 2 MiB a hold ([`crate::pagemap`]).
    Pages,
    /// Not now ([`PUT_OFF`]): the host is busy, `smaps_rollup` would likely hold the lock past
    /// the cap, and a walk costs more than the savings may be overdrawn to.
    PutOff,
}

/// How to read `c`. Through `pagemap` a big target whose threads waited on an earlier read
/// where waits are traced (from then on, for as long as it lives: a walk nobody waited on says
/// nothing of what the next single-hold read would cost it, and a target read one way and then
/// the other paid a `smaps_rollup` hold at every other read), or whose family's threads did (a
/// tree of like workers: each paid a hold of its own first, one of ~10-40 ms for each of 24
/// children of 1 GiB at every agent start), or, where waits are not traced, one that faulted
/// since the sample before (it is mapping or touching memory, so its threads may want their
/// mmap lock). Any other is
/// read through `smaps_rollup`, at a third of the CPU or less: a hold nobody waits on costs
/// nobody (a notebook's idle kernels, a compiler), and on a busy host the budget buys three
/// times the readings (faults alone sent every busy compiler through `pagemap` and starved the
/// loaded suite's share test of readings).
///
/// Also one whose `smaps_rollup` would hold its lock past [`TargetLimits::max_hold`] at the
/// highest hold per resident byte of the last [`ROLLUP_RATES`] such reads ([`HOLD_MARGIN`]):
/// that read would cap it (never read again), where a walk holds the lock 2 MiB at a time. The
/// hold is the read's wall time, and a read preempted while it holds the lock holds it longer:
/// while [`Crowd`] says the CPUs the read may run on are crowded, each of those
/// reads that began without such a crowd counts at [`BUSY_FACTOR`] times its rate (one that
/// began with one carries its stretch already). The host is asked only where its answer
/// matters.
///
/// Only while the walk costs at most [`WALK_OVERDRAFT`] times the worker's savings
/// ([`BURST_SAVED`] of its budget): the last
/// walk's CPU per resident byte times the target's resident size, that rate forgotten
/// [`WALK_RETRY`] after the walk that gave it, so that one dear walk does not rule walks out
/// for the agent's life. A walk costs ~3× the CPU of
/// `smaps_rollup` on a quiet machine, and 0.22 s for a busy 1.5 GiB process here (0.55 s in a
/// debug build), and one far past the savings makes the worker rest for minutes after it,
/// every other process's reading waiting too (CI, `top`'s PSS column beside a build's
/// compilers). Such a target is read through `smaps_rollup`: one longer hold, which the target
/// budget and [`TargetLimits::max_hold`] bound, but not while the host is busy and that hold
/// would likely pass the cap: the read is put off ([`How::PutOff`]) for at most
/// [`PUT_OFF_LIMIT`] in a row at `now_ns` (a host that stays busy gets its read, and the rate
/// of a read begun in a crowd), and the row says so. A walk that passes its limit anyway
/// stops there ([`State::walk_limit_ns`]: the first, before any was measured, may spend the
/// savings only) and the target is read through `smaps_rollup` that time.
///
/// Returns with the way whether the target wanted a walk that did not fit that limit
/// ([`PssStats::walks_unaffordable`]).
fn how_to_read(state: &State, c: &Candidate, now_ns: u64, mut host_busy: impl FnMut() -> bool) -> (How, bool) {
    if c.resident_bytes < PAGEMAP_FROM_BYTES {
        return (How::Rollup, false);
    }
    let waited = || {
        state.results.get(&c.pid).is_some_and(|e| e.seen.start_ticks == c.start_ticks && (e.waited || e.backoff > 0))
            || state.waited_families.contains(&(c.ppid, c.name))
    };
    // Where `pagemap` cannot be read (`proctor doctor` says why), no walk is.
    let affordable = || {
        let limit = Savings::walk_limit(state.stats.budget);
        state.stats.pagemap && state.walk_rate(now_ns).is_none_or(|rate| rate * c.resident_bytes as f64 <= limit)
    };
    // One `smaps_rollup` hold would pass the cap on a single hold, at the recent reads' hold
    // per resident byte and [`HOLD_MARGIN`] (a worker of 2 GiB held ~40-80 ms here, where the
    // cap is 50 ms), those begun without a crowd at [`BUSY_FACTOR`] × in a crowd.
    let past_cap = |crowded: bool| {
        let (Some(rate), Some(cap)) = (state.rollup_rate(crowded), state.max_hold_ns) else { return false };
        rate * HOLD_MARGIN * c.resident_bytes as f64 > cap as f64
    };
    let plain = past_cap(false);
    let mut asked = None;
    let mut crowd = || *asked.get_or_insert_with(&mut host_busy);
    let for_crowd = !plain && past_cap(true) && crowd();
    let put_off_long = || {
        state
            .results
            .get(&c.pid)
            .and_then(|e| e.put_off_since_ns.filter(|_| e.seen.start_ticks == c.start_ticks))
            .is_some_and(|since| {
                now_ns.saturating_sub(since) >= u64::try_from(PUT_OFF_LIMIT.as_nanos()).unwrap_or(u64::MAX)
            })
    };
    let wanted = waited() || (!state.traced && state.busy.contains(&c.pid)) || plain || for_crowd;
    if wanted && affordable() {
        return (How::Pages, false);
    }
    let unaffordable = wanted && state.stats.pagemap;
    if (for_crowd || (plain && crowd())) && !put_off_long() {
        (How::PutOff, unaffordable)
    } else {
        (How::Rollup, unaffordable)
    }
}

/// How long a walk's CPU per byte rules walks out ([`how_to_read`]): after it, the next big
/// target that wants a walk gets one (stopped at its limit, as the first is, if it costs
/// more), and its rate decides again. A 1 GiB child's walk cost 29 ms of CPU in one session
/// here and 55-146 ms in another, where the savings are 150 ms at the default budget: what a
/// walk costs moves with the host's memory and with how its frames lie (`kpagecount` is read
/// through the gaps between them), and one walk a little past the savings, stopped there, sent
/// every busy 1 GiB child through `smaps_rollup` (holds of ~30 ms) until the agent stopped
/// (walks whose rate is known may now cost [`WALK_OVERDRAFT`] times the savings). At most one
/// walk stopped at its limit per this long, and that one at the savings
/// ([`State::walk_limit_ns`]): a fifth of the default budget where no walk ever fits.
pub const WALK_RETRY: Duration = Duration::from_secs(150);
const WALK_RETRY_NS: u64 = WALK_RETRY.as_nanos() as u64;

/// A walk's CPU per resident byte ([`how_to_read`]): over the target's resident size when
/// it finished, over what it met when it did not (stopped at its CPU limit, or refused). A
/// stopped walk's CPU over the whole size was a fraction of the true rate: the next big target
/// looked affordable, was walked to the limit again and then read through `smaps_rollup`
/// anyway, each time spending all the savings and leaving the worker resting for tens of
/// seconds.
fn walk_ns_per_byte(ns: u64, met_if_unfinished: Option<u64>, resident_bytes: u64) -> f64 {
    let bytes = met_if_unfinished.map_or(resident_bytes, |met| met.max(4096));
    ns as f64 / bytes as f64
}

/// How much longer than the recent reads' rate says a `smaps_rollup` hold may be
/// ([`how_to_read`]): one worker of a 2 GiB tree held 40 ms and its clone, next, 56 ms on a
/// loaded machine (the hold is the read's wall time where the trace does not give it).
pub const HOLD_MARGIN: f64 = 1.5;

/// How many recent `smaps_rollup` reads of big targets the hold is predicted from, at the
/// highest of their rates ([`how_to_read`]). The last read's alone let holds past the cap
/// through where the load comes and goes (one read of 90 ms against the 50 ms cap in a traced
/// impact run): a 1 GiB target read whole past 50 ms in 20 of 434 reads beside two loops that
/// ran and slept by turns, 7 at the highest of the last 8, which walked 81 % of the reads
/// rather than 35 % (`python3 bench/pss/hold_prediction.py`, docs/performance.md). A walk costs
/// about 3× the CPU, inside the same budget; a hold past the cap stops the target's reads for
/// good.
pub const ROLLUP_RATES: usize = 8;

/// How much longer a `smaps_rollup` hold begun while the host has more runnable tasks than
/// CPUs may be than one begun without ([`how_to_read`]): beside two busy loops on this 2-CPU
/// machine a 768 MiB child's holds went from a median of 29.3 ms to 58.3 ms (2.0×), the longest
/// from 44.3 to 94.9 ms (2.1×). Where the load came and went, its reads held whole past the 50
/// ms cap went from 18 in 435 at the last 8 reads' rate to 1 with the crowd counted, for 6.7 %
/// more reads walked or put off (`python3 bench/pss/hold_prediction.py`, docs/performance.md).
pub const BUSY_FACTOR: f64 = 2.0;

/// How long a read put off while the host is busy waits before it is weighed again
/// ([`How::PutOff`]): a load that comes and goes runs in spells of seconds (a build's
/// compilers, a test's bursts).
pub const PUT_OFF: Duration = Duration::from_secs(1);

/// The longest a target's read is put off in a row ([`how_to_read`]): then it is read whole,
/// crowd or not. A host busy for hours (a build) would otherwise leave it unread for as long,
/// and its rates from a quiet spell would never give way to one begun in the crowd.
pub const PUT_OFF_LIMIT: Duration = Duration::from_secs(10);

/// Whether more tasks are runnable on the host now than it has online CPUs (`/proc/loadavg`'s
/// fourth field, the asking thread among them: one more would wait for a CPU). Both are the
/// host's, whatever cgroup the agent runs in: a read's hold stretches when the CPU it runs on
/// is shared. `false` where the file cannot be read or parsed (a captured tree without one).
/// Where the worker may run on fewer CPUs than the host has, [`Crowd`] also asks about those.
fn host_busy(root: &Root, cpus: u64) -> bool {
    root.read("/proc/loadavg")
        .ok()
        .and_then(|b| proctor_procfs::host::parse_loadavg(&b))
        .is_some_and(|l| l.runnable > cpus)
}

/// The host's online CPUs (`/sys/devices/system/cpu/online`), at least 1 (where it cannot be
/// read: then any other runnable task counts as a crowd).
fn online_cpus(root: &Root) -> u64 {
    proctor_procfs::system::online_cpus(root).map_or(1, |c| c.len() as u64).max(1)
}

/// The share of their time the CPUs the worker may run on must have been busy over the last
/// second or so for them to count as crowded ([`Crowd`]): one more task would wait. The
/// worker's own reads are in that time (at its default budget, 2 % of one CPU), so it is not
/// 100 %.
pub const CPUSET_BUSY: f64 = 0.9;

/// [`Crowd`]'s readings of `/proc/stat` (10 ms ticks): a new one is taken where the last is
/// this old, and the share is judged over at least the first and at most the second.
const CPUSET_EVERY_NS: u64 = 1_000_000_000;
const CPUSET_WINDOW_NS: (u64, u64) = (250_000_000, 5_000_000_000);

/// Whether a read begun now would share its CPU ([`how_to_read`]): the host's crowd
/// ([`host_busy`]) and, where the worker may run on fewer CPUs than the host has online (a
/// container's cpuset, `taskset`), those CPUs' own: all of them busy [`CPUSET_BUSY`] of the
/// time over the last second or so (`/proc/stat`'s per-CPU lines, read by [`Crowd::tick`]
/// about once a second, by the worker, and only where the question is asked). A host of 64
/// CPUs with 10 tasks running is no crowd, yet both CPUs of a container's cpuset may be taken.
#[derive(Debug)]
struct Crowd {
    cpus: u64,
    /// The CPUs the worker may run on, where fewer than online (else no second question).
    allowed: Option<Vec<u32>>,
    /// The last two readings of `allowed`'s ticks: (when, busy, all), newer last.
    readings: [Option<(u64, u64, u64)>; 2],
}

impl Crowd {
    /// `allowed`: the worker thread's CPUs (`sched_getaffinity`), for a live root only.
    fn new(root: &Root, allowed: Option<Vec<u32>>) -> Crowd {
        let cpus = online_cpus(root);
        let allowed = allowed.filter(|a| !a.is_empty() && (a.len() as u64) < cpus);
        Crowd { cpus, allowed, readings: [None, None] }
    }

    /// Whether the CPUs the worker may run on are asked about at all.
    fn narrower(&self) -> bool {
        self.allowed.is_some()
    }

    fn busy(&mut self, root: &Root, now_ns: u64) -> bool {
        host_busy(root, self.cpus) || self.cpuset_busy(root, now_ns)
    }

    /// Keeps the readings about a second apart: called at each turn of the worker's loop.
    fn tick(&mut self, root: &Root, now_ns: u64) {
        if !self.narrower()
            || self.readings[1].is_some_and(|(then, _, _)| now_ns.saturating_sub(then) < CPUSET_EVERY_NS)
        {
            return;
        }
        if let Some(now) = self.read(root, now_ns) {
            self.readings = [self.readings[1], Some(now)];
        }
    }

    fn read(&self, root: &Root, now_ns: u64) -> Option<(u64, u64, u64)> {
        let allowed = self.allowed.as_deref()?;
        let stat = root.read("/proc/stat").ok().and_then(|b| proctor_procfs::host::parse_stat(&b))?;
        let (mut busy, mut all) = (0, 0);
        for (id, ticks) in stat.cpu_ids.iter().zip(&stat.per_cpu) {
            if allowed.contains(id) {
                busy += ticks.busy();
                all += ticks.total();
            }
        }
        Some((now_ns, busy, all))
    }

    fn cpuset_busy(&mut self, root: &Root, now_ns: u64) -> bool {
        let Some((_, busy, all)) = self.read(root, now_ns) else { return false };
        // The newest reading at least the shortest window old.
        let old_enough = |r: &&(u64, u64, u64)| now_ns.saturating_sub(r.0) >= CPUSET_WINDOW_NS.0;
        let Some(&(then, busy_then, all_then)) = self.readings.iter().rev().flatten().find(old_enough) else {
            return false;
        };
        if now_ns.saturating_sub(then) > CPUSET_WINDOW_NS.1 {
            return false;
        }
        let (busy, all) = (busy.saturating_sub(busy_then), all.saturating_sub(all_then));
        all > 0 && busy as f64 >= CPUSET_BUSY * all as f64
    }
}

/// When each family last changed, by its key (parent pid, name hash), and how many changes
/// were marked so far: [`FirstPass`] is worked out again when that count moves.
#[derive(Debug, Default)]
struct Families {
    times: HashMap<(u32, u64), u64>,
    changes: u64,
}

impl Families {
    fn insert(&mut self, key: (u32, u64), at_ns: u64) {
        self.times.insert(key, at_ns);
        self.changes += 1;
    }

    fn get(&self, key: &(u32, u64)) -> Option<&u64> {
        self.times.get(key)
    }

    fn len(&self) -> usize {
        self.times.len()
    }

    fn retain(&mut self, keep: impl FnMut(&(u32, u64), &mut u64) -> bool) {
        self.times.retain(keep);
        self.changes += 1;
    }
}

/// The first part of [`pick_next`]'s choice (the processes never read, or whose reading is
/// stale, smallest first), worked out in one pass over the candidates and kept while nothing it
/// depends on moved: a new list that marked a family or has a big process seen once
/// ([`State::set_candidates`] clears it), a family marked ([`Families::changes`]), or the time
/// a stale reading's target budget frees. Worked out for every pick, that pass (two hash
/// lookups a candidate for the family test) was more than half of the worker's CPU at ~5,000
/// processes, over four times the reads' own, and outside the budget, which pays for reads.
#[derive(Debug, Default)]
struct FirstPass {
    /// Pids to read first, the next one last; each is checked again when its turn comes.
    queue: Vec<u32>,
    /// [`Families::changes`] when it was worked out; `None`: to be worked out.
    changes: Option<u64>,
    /// When the first stale reading left out for its target budget may be read.
    until_ns: u64,
    /// Passes worked out so far (a test counts them).
    passes: u64,
    /// Pids passed over because a clone's reading stands in for theirs ([`State::estimate`]),
    /// in the order they came: read once the queue is empty, when `late` is set.
    later: Vec<u32>,
    late: bool,
}

/// Pids, hashed as the sampler's table hashes them ([`PidMap`]): every pick looks each candidate
/// up in these (the picks, SipHash inlined, were ~40 % of an idle worker's samples at ~600
/// processes). A family key holds a name a process chooses, so [`Families`] keeps the std hasher.
type PidSet = std::collections::HashSet<u32, std::hash::BuildHasherDefault<proctor_procfs::process::PidHasher>>;

#[derive(Debug, Default)]
struct State {
    candidates: Vec<Candidate>,
    cursor: usize,
    /// (parent, name) → when a member of that family last appeared, left, exec'd or moved (the
    /// sampler's monotonic clock): readings of its members made before then are stale.
    changed: Families,
    /// pid → what was read of it: `reading` is `None` if the read failed ([`Failed`]).
    results: PidMap<Entry>,
    /// Pids whose faults moved between the last two candidate lists: they are using their
    /// memory now, so a read's hold may be waited on ([`how_to_read`]).
    busy: PidSet,
    /// Pids new in the last list: whether a big one is busy is known from the next, so it is
    /// read from then (one sample later), the right way.
    first_seen: PidSet,
    /// Pids that had lived less than [`YOUNG`] when last listed: not read before the next list.
    young: PidSet,
    /// Members younger than [`SETTLE`] with a young process in their family: not read before a
    /// list where the family has none ([`State::set_settling`]).
    settling: PidSet,
    /// The parents of those: what moves their faults alone is mostly their young children's
    /// copy-on-write ([`Entry::unchanged`]).
    forking: PidSet,
    /// Whether the worker traces waits ([`how_to_read`] asks the trace then, not the faults).
    traced: bool,
    /// The worker thread's id (its slice is its own: [`TargetLimits::slice`]).
    thread_id: i32,
    /// This process's own pid as the root's `/proc` numbers it (`/proc/self`): its counters
    /// move with the agent's own work, so it is read again by age or staleness alone
    /// ([`State::unchanged`]).
    own_pid: Option<u32>,
    /// Families (parent pid, name hash) a member of which waited on a read: their big members
    /// are read through `pagemap` from their first read ([`how_to_read`]).
    waited_families: std::collections::HashSet<(u32, u64)>,
    /// CPU nanoseconds per resident byte of the last `pagemap` walk, and when it ended
    /// ([`how_to_read`]).
    pagemap_ns_per_byte: Option<f64>,
    pagemap_rate_at_ns: u64,
    /// Hold nanoseconds per resident byte of the last [`ROLLUP_RATES`] `smaps_rollup` reads of
    /// big targets, newest last, and the cap on one hold ([`TargetLimits::max_hold`]): a read
    /// predicted past it at the highest of them goes through `pagemap` ([`how_to_read`]).
    /// Each with whether its read began in a crowd ([`host_busy`]).
    rollup_rates: std::collections::VecDeque<(f64, bool)>,
    max_hold_ns: Option<u64>,
    /// For each family (parent, name hash), the last processes read with different counters
    /// (at most [`CLONE_SHAPES`], newest last), each with its counters then and its reading: it
    /// stands in for a clone's own until that is read ([`State::estimate`]), one shared value
    /// for all of them.
    clones: HashMap<(u32, u64), Vec<StandIn>>,
    /// Families one of whose clones' readings was more than [`CLONE_TOLERANCE`] off the
    /// member's own: no estimates for them.
    unlike: std::collections::HashSet<(u32, u64)>,
    /// Pids someone is looking at ([`PssWorker::ask`]), oldest first: each is read before
    /// anything else where it needs a reading, within its target budget.
    asked: std::collections::VecDeque<u32>,
    /// When each ask was last made (the sampler's monotonic clock), for [`ASK_TTL`]; an ask
    /// without one (a test's) does not lapse.
    asked_at: HashMap<u32, u64>,
    /// When [`pick_next`] last found nothing to read: the earliest time (the sampler's
    /// monotonic clock) a candidate becomes due with no new list or ask (its reading ages past
    /// the maximum, or its target budget lets it be read again); `u64::MAX` if none will.
    due_ns: u64,
    /// Until when (the sampler's monotonic clock) the worker rests after its last read; 0
    /// before the first.
    rest_until_ns: u64,
    first: FirstPass,
    stats: PssStats,
    interval: crate::worker::Interval,
}

#[derive(Debug)]
struct Entry {
    /// The candidate as it was when read.
    seen: Candidate,
    reading: Option<PssReading>,
    /// Every read of this process (this start time) so far.
    stall: Stall,
    /// Not read again before this (the sampler's monotonic clock): its share of lock time.
    not_before_ns: u64,
    /// Its share of lock time is divided by 2^backoff: raised by a read its threads waited on
    /// (traced), lowered by one they did not.
    backoff: u8,
    /// Its threads waited on a read (traced): read through `pagemap` from then on where it is
    /// big ([`how_to_read`]).
    waited: bool,
    /// The last read failed ([`Failed`]); `reading` is then `None`.
    failed: Option<Failed>,
    /// Since when its read has been put off while the host was busy ([`How::PutOff`]), if it
    /// has not been read since: due again at `not_before_ns`.
    put_off_since_ns: Option<u64>,
}

/// A failed read: when (the sampler's monotonic clock), and whether it was refused (no
/// permission: another user namespace, a security module). A failure is retried when the
/// process's counters move, like any change; one that was not a refusal also when it is as old
/// as a reading may grow (a passing error must not leave an idle process without PSS for
/// good), and when someone asks for it. A refusal is not retried for an ask: it would be
/// refused again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Failed {
    at_ns: u64,
    refused: bool,
}

type Shared = crate::worker::Shared<State>;

/// What the worker knows of one process ([`PssWorker::with_readings`]): its own latest
/// reading, whether that is stale, the ledger of its reads, and a clone's reading with the
/// clone's pid where that stands in for a missing or stale own one ([`State::estimate`]).
pub type Lookup = (Option<PssReading>, bool, Option<Stall>, Option<Arc<(u32, PssReading)>>);

/// The counters that say whether two members of a family are clones ([`State::estimate`]):
/// resident bytes and faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counters {
    resident_bytes: u64,
    faults: u64,
}

impl Counters {
    fn of(c: &Candidate) -> Self {
        Counters { resident_bytes: c.resident_bytes, faults: c.faults }
    }

    /// How far apart two members' counters are, in bytes: the difference in resident size and
    /// a page for each fault one made that the other did not (a copy-on-write fault turns a
    /// shared page into a private one without moving the resident size).
    fn distance(self, other: Counters) -> u64 {
        self.resident_bytes.abs_diff(other.resident_bytes) + self.faults.abs_diff(other.faults) * PAGE_BYTES
    }
}

/// A member's counters when it was read, its pid and that reading ([`State::estimate`]).
type StandIn = (Counters, Arc<(u32, PssReading)>);

/// How near two members' counters must be for one's reading to stand in for the other's
/// ([`Counters::distance`]): 16 pages, and at most 1/256 of the member's resident size (0.4 %:
/// a few pages of a small process are a large part of it). A parent grows by pages between its
/// forks (most with its first few), so children forked at different times are pages apart
/// (`bench/pss/clone_census.py`); were all those pages one's own, the two PSS would differ by
/// them, inside [`CLONE_SLACK_BYTES`], and each stand-in is checked still.
pub const CLONE_NEAR_BYTES: u64 = 64 << 10;

/// At most this many readings with different counters are kept per family for
/// [`State::estimate`]: a family of clones needs one, a family forked in a few waves a few.
const CLONE_SHAPES: usize = 8;

/// The page size that [`Counters::distance`] charges a fault at.
const PAGE_BYTES: u64 = 4096;

/// How far a clone's PSS may be from a member's own, as a share of the own and in bytes (both
/// must be passed), before its family gets no more estimates ([`State::note_clone`]): the 1 % a
/// tree's sum must be true to, and 16 pages, so a process of a few hundred KiB is not judged by
/// one page.
pub const CLONE_TOLERANCE: f64 = 0.01;
pub const CLONE_SLACK_BYTES: u64 = 64 << 10;

/// The part of a reading's PSS its family decides, compared between clones
/// ([`State::note_clone`]): anonymous and shmem pages. Its file pages are shared with every
/// process mapping the same files (an unrelated python starting moves every python's file PSS
/// by hundreds of KiB), so they drift between two readings as any reading's do while it ages;
/// a kernel without the split gives the whole.
fn family_part(r: &PssReading) -> u64 {
    match (r.rollup.pss_anon_bytes, r.rollup.pss_shmem_bytes) {
        (Some(anon), shmem) => anon + shmem.unwrap_or(0),
        _ => r.rollup.pss_bytes.unwrap_or(0),
    }
}

/// A hash of a process's name (its `comm`), for its family key: the same on every call.
pub fn family_name(comm: &str) -> u64 {
    // FNV-1a: short names, no adversary to fear (a collision only costs a read).
    comm.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// A process that had lived less than this when listed is read from the next list on, not at
/// once: most processes that young are gone within the interval (a build's compilers, a shell's
/// pipelines, a fork storm), and a read of one costs a walk of its memory that nobody will look
/// at. The processes already running when the agent starts are read at once.
pub const YOUNG: Duration = Duration::from_secs(1);

/// The candidates that had lived less than `age` ([`YOUNG`], [`SETTLE`]) at `boot_ns` (the
/// boot-time clock, which stamps a process's start in `stat`'s clock ticks, `ticks` a second).
fn young(candidates: &[Candidate], boot_ns: u64, ticks: u64, age: Duration) -> PidSet {
    let now_ticks = boot_ns / (1_000_000_000 / ticks.max(1));
    let born_after = now_ticks.saturating_sub(age.as_millis() as u64 * ticks / 1000);
    candidates.iter().filter(|c| c.start_ticks > born_after).map(|c| c.pid).collect()
}

/// A member younger than this whose family has a [`YOUNG`] process in it is read from a list
/// where it has none, or once it is this old: a server forks its workers over seconds (96
/// sharing 2 GiB: over 2 s here, each fork copying 4 MiB of page tables), and a worker read before
/// its last sibling outlived [`YOUNG`] is stale at once (the sibling joining moves its share),
/// to be read again only when its target budget frees (a 2 GiB worker's 60 ms hold: a minute).
/// The tree had no complete PSS for that minute. The bound keeps a family that forks without
/// end (a shell's subshells) from holding its long-lived members' readings back for longer.
pub const SETTLE: Duration = Duration::from_secs(10);

/// Unspent budget the worker saves, in seconds of its budget (30: at 2 % of a core, 0.6 s of
/// CPU), and how many times its budget it may spend the savings at.
pub const BURST_SAVED: Duration = Duration::from_secs(30);
pub const BURST_RATE: f64 = 4.0;

/// How many times the savings one walk may cost ([`how_to_read`], [`PageCounter::limit_cpu`]):
/// full savings overdrawn by as much again, which a rest of at most [`BURST_SAVED`] repays, so
/// the budget stays an average. A 1 GiB child's walk cost 55-146 ms of CPU here within an
/// hour, against savings of 150 ms at the default budget: at once the savings, walks sat at
/// their edge, one a little past them was stopped, and every busy child was read whole (holds
/// of ~30 ms) until [`WALK_RETRY`]. Only a walk whose rate is known may overdraw them
/// ([`State::walk_limit_ns`]).
pub const WALK_OVERDRAFT: f64 = 2.0;

impl State {
    /// The last walk's CPU per resident byte, until [`WALK_RETRY`] after it.
    fn walk_rate(&self, now_ns: u64) -> Option<f64> {
        self.pagemap_ns_per_byte.filter(|_| now_ns < self.pagemap_rate_at_ns.saturating_add(WALK_RETRY_NS))
    }

    /// The CPU a walk begun at `now_ns` may spend ([`PageCounter::limit_cpu`]): where a walk's
    /// rate is known (and said it fits), [`WALK_OVERDRAFT`] times the savings; where none is
    /// (the first walk, or one [`WALK_RETRY`] after the last), the savings only, so that a walk
    /// that would never fit (a busy compiler in a debug build, 0.55 s) costs no more than it did
    /// before walks could overdraw them, nor a rest of 30 s after it.
    fn walk_limit_ns(&self, now_ns: u64) -> u64 {
        let savings = Savings::cap(self.stats.budget);
        let limit = if self.walk_rate(now_ns).is_some() { savings * WALK_OVERDRAFT } else { savings };
        limit as u64
    }

    /// The hold per resident byte a `smaps_rollup` read of a big target is predicted at: the
    /// highest of the last [`ROLLUP_RATES`] reads', for a read begun in a crowd (`crowded`) or
    /// not: in one, a rate from a read begun without counts [`BUSY_FACTOR`] ×.
    fn rollup_rate(&self, crowded: bool) -> Option<f64> {
        let scaled = |&(rate, then): &(f64, bool)| if crowded && !then { rate * BUSY_FACTOR } else { rate };
        self.rollup_rates.iter().map(scaled).reduce(f64::max)
    }

    fn note_rollup_rate(&mut self, rate: f64, crowded: bool) {
        if self.rollup_rates.len() >= ROLLUP_RATES {
            self.rollup_rates.pop_front();
        }
        self.rollup_rates.push_back((rate, crowded));
    }

    /// Whether a new reading of `c` would show nothing `e` does not ([`Entry::unchanged`]), for
    /// the round-robin. The agent's own process counts as unchanged while it is the same
    /// process: its resident size and faults move with the agent's own work (a fork storm's
    /// exit rows grew its heap every sample), and reading its `smaps_rollup` for that took its
    /// own mmap lock every sample, ~0.7 ms each, to report a figure the agent changes itself.
    /// Its reading ages and goes stale like any other, and an ask still reads it.
    fn unchanged(&self, e: &Entry, c: &Candidate) -> bool {
        e.unchanged(c, &self.forking) || (self.own_pid == Some(c.pid) && e.seen.start_ticks == c.start_ticks)
    }

    /// A process's latest reading if it is still the same process, whether that reading is
    /// stale, the ledger of this worker's reads of it (`refused` when its last read was), and,
    /// where it has no reading or a stale one, a clone's that stands in for it
    /// ([`State::estimate`]).
    fn lookup(&self, pid: u32, start_ticks: u64) -> Lookup {
        let own = self.results.get(&pid).filter(|e| e.seen.start_ticks == start_ticks);
        let (reading, stale, stall) = match own {
            Some(e) => {
                let stall = Stall { refused: e.refused(), put_off: e.put_off_since_ns.is_some(), ..e.stall };
                (e.reading, e.stale(&self.changed), Some(stall))
            }
            None => (None, false, None),
        };
        let estimate = if (reading.is_none() || stale) && !own.is_some_and(Entry::refused) {
            self.candidate(pid, start_ticks).and_then(|c| self.estimate(&c))
        } else {
            None
        };
        (reading, stale, stall, estimate)
    }

    /// The listed candidate `pid`, if it is still the process started at `start_ticks`.
    fn candidate(&self, pid: u32, start_ticks: u64) -> Option<Candidate> {
        let i = self.candidates.binary_search_by_key(&pid, |c| c.pid).ok()?;
        Some(self.candidates[i]).filter(|c| c.start_ticks == start_ticks)
    }

    /// The reading of `c`'s clone, with its pid: another process of its family (parent and
    /// name) whose resident size and faults, when it was read, were near `c`'s now (the
    /// nearest, the newest among equals; [`CLONE_NEAR_BYTES`]), and whose reading is not stale.
    /// Such clones are what a server's idle workers are, forked from one parent and sharing its
    /// pages copy-on-write: their PSS is the same to the page, so one read stands for the
    /// others until each is read itself, checked then
    /// ([`PssStats::estimates_checked`]). A young process is no member yet, and a family one of
    /// whose estimates was off ([`CLONE_TOLERANCE`]) gets none.
    fn estimate(&self, c: &Candidate) -> Option<Arc<(u32, PssReading)>> {
        if self.clones.is_empty() || self.young.contains(&c.pid) || self.unlike.contains(&(c.ppid, c.name)) {
            return None;
        }
        let mine = Counters::of(c);
        let near = CLONE_NEAR_BYTES.min(c.resident_bytes / 256);
        let mut best: Option<(u64, &Arc<(u32, PssReading)>)> = None;
        for (counters, clone) in self.clones.get(&(c.ppid, c.name))?.iter().rev() {
            let (from, reading) = **clone;
            let distance = counters.distance(mine);
            if from == c.pid || distance > near || best.is_some_and(|(d, _)| d <= distance) {
                continue;
            }
            // Still that process's latest reading, of those counters, and not stale.
            let e = self
                .results
                .get(&from)
                .filter(|e| (e.seen.ppid, e.seen.name) == (c.ppid, c.name) && Counters::of(&e.seen) == *counters);
            if e.is_some_and(|e| e.reading == Some(reading) && !e.stale(&self.changed)) {
                best = Some((distance, clone));
            }
        }
        best.map(|(_, clone)| Arc::clone(clone))
    }

    /// After `c` was read: checks the clone's reading that stood in for it, if one did, and
    /// makes this reading the one that stands in for its clones.
    fn note_clone(&mut self, c: &Candidate, reading: &PssReading) {
        if let Some(estimate) = self.estimate(c) {
            let (own, theirs) = (family_part(reading), family_part(&estimate.1));
            let off = (theirs as f64 - own as f64).abs();
            let error = off / (own as f64).max(1.0);
            self.stats.estimates_checked += 1;
            self.stats.estimate_worst_error = self.stats.estimate_worst_error.max(error);
            if error > CLONE_TOLERANCE && off > CLONE_SLACK_BYTES as f64 {
                self.stats.estimates_off += 1;
                self.unlike.insert((c.ppid, c.name));
            }
        }
        let counters = Counters::of(c);
        let family = self.clones.entry((c.ppid, c.name)).or_default();
        // This process's earlier reading, and another's of the same counters, are replaced.
        family.retain(|(k, clone)| clone.0 != c.pid && *k != counters);
        if family.len() == CLONE_SHAPES {
            family.remove(0);
        }
        family.push((counters, Arc::new((c.pid, *reading))));
    }

    /// Puts `c`'s read off at `now_ns` for [`PUT_OFF`] ([`How::PutOff`]): weighed again then,
    /// its reading (if any) kept meanwhile, and its row says why.
    fn put_off(&mut self, c: &Candidate, now_ns: u64) {
        let e = self.results.entry(c.pid).or_insert_with(|| Entry::unread(*c));
        if e.seen.start_ticks != c.start_ticks {
            *e = Entry::unread(*c);
        }
        e.put_off_since_ns.get_or_insert(now_ns);
        let until_ns = now_ns.saturating_add(u64::try_from(PUT_OFF.as_nanos()).unwrap_or(u64::MAX));
        e.not_before_ns = e.not_before_ns.max(until_ns);
        self.stats.put_off_busy += 1;
    }

    /// After a read of `c` that its threads waited `waited_ns` on (traced): where it waited at
    /// all, it and its family are read through `pagemap` from then on where big
    /// ([`how_to_read`]).
    fn note_wait(&mut self, c: &Candidate, waited_ns: Option<u64>) {
        if waited_ns.is_some_and(|w| w > 0) {
            if let Some(e) = self.results.get_mut(&c.pid).filter(|e| e.seen.start_ticks == c.start_ticks) {
                e.waited = true;
            }
            self.waited_families.insert((c.ppid, c.name));
        }
    }

    /// After [`State::set_candidates`]: of the list's processes younger than [`SETTLE`]
    /// (`recent`), the members whose family (parent and name) has a young process in it.
    fn set_settling(&mut self, recent: PidSet) {
        let had = !self.settling.is_empty();
        self.settling.clear();
        if !self.young.is_empty() && !recent.is_empty() {
            let family = |pid: &u32| {
                let i = self.candidates.binary_search_by_key(pid, |c| c.pid).ok()?;
                Some((self.candidates[i].ppid, self.candidates[i].name))
            };
            let joining: std::collections::HashSet<(u32, u64)> = self.young.iter().filter_map(family).collect();
            let settling = recent
                .iter()
                .filter(|pid| !self.young.contains(pid) && family(pid).is_some_and(|f| joining.contains(&f)));
            self.settling = settling.copied().collect();
        }
        // The first pass left them out, or would now: worked out again.
        if had || !self.settling.is_empty() {
            self.first.changes = None;
        }
    }

    /// `young`: the new list's processes that had lived less than [`YOUNG`].
    fn set_candidates(&mut self, candidates: Vec<Candidate>, young: PidSet, now_ns: u64) {
        mark_changed(&mut self.changed, (&self.candidates, &self.young), (&candidates, &young), now_ns);
        // A list that marked no family brings no process that needs reading first: a new one
        // is young or marks its family; one that left or moved marked its own. Unless a big
        // one seen once ([`how_to_read`]) was left out of the last pass.
        if !self.first_seen.is_empty() {
            self.first.changes = None;
        }
        // From the young pids (few), not a lookup per candidate: this runs on the sampler's hold.
        self.forking = young
            .iter()
            .filter_map(|pid| candidates.binary_search_by_key(pid, |c| c.pid).ok().map(|i| candidates[i].ppid))
            .collect();
        self.young = young;
        self.busy.clear();
        self.first_seen.clear();
        // Only [`how_to_read`] and the first-list wait ask these, and only of big processes
        // where waits are not traced: no work on the sampler's lock hold otherwise.
        let old = &self.candidates;
        let asked = |c: &&Candidate| !self.traced && c.resident_bytes >= PAGEMAP_FROM_BYTES;
        for c in candidates.iter().filter(asked) {
            match old.binary_search_by_key(&c.pid, |o| o.pid).ok().map(|i| &old[i]) {
                Some(before) if before.start_ticks == c.start_ticks => {
                    if before.faults != c.faults {
                        self.busy.insert(c.pid);
                    }
                }
                _ => {
                    self.first_seen.insert(c.pid);
                }
            }
        }
        if !self.first_seen.is_empty() {
            self.first.changes = None;
        }
        self.results.retain(|pid, e| {
            candidates
                .binary_search_by_key(pid, |x| x.pid)
                .is_ok_and(|i| candidates[i].start_ticks == e.seen.start_ticks)
        });
        // Forget families none of whose members is listed, once they outnumber the candidates.
        if self.waited_families.len() + self.unlike.len() > candidates.len() + 64 {
            let live: std::collections::HashSet<(u32, u64)> = candidates.iter().map(|c| (c.ppid, c.name)).collect();
            self.waited_families.retain(|k| live.contains(k));
            self.unlike.retain(|k| live.contains(k));
        }
        if self.clones.len() > self.results.len() + 64 {
            let results = &self.results;
            self.clones.retain(|_, family| {
                family.retain(|(_, clone)| results.contains_key(&clone.0));
                !family.is_empty()
            });
        }
        self.candidates = candidates;
    }
}

/// At most this many halvings of a target's share of lock time (16×: at 1 ms per second, a
/// 10 ms read that the target waited on four times in a row is not repeated for 160 s).
pub const MAX_BACKOFF: u8 = 4;

impl Entry {
    /// A process not read yet.
    fn unread(seen: Candidate) -> Self {
        Entry {
            seen,
            reading: None,
            stall: Stall::default(),
            not_before_ns: 0,
            backoff: 0,
            waited: false,
            failed: None,
            put_off_since_ns: None,
        }
    }

    /// After a read that held the target's lock `held_ns` at `now_ns`: when it may be read
    /// again, at `share` of wall time divided by 2^backoff. A target whose threads waited on
    /// the read (`waited`: traced) is read half as often from here, one that was traced and
    /// waited nothing twice as often, down to its plain share: the monitor steps back from a
    /// process that feels it, and the PSS age shows it. Returns whether it stepped back.
    fn after_read(&mut self, held_ns: u64, share: f64, waited: Option<u64>, now_ns: u64) -> bool {
        let before = self.backoff;
        match waited {
            Some(0) => self.backoff = self.backoff.saturating_sub(1),
            Some(_) => self.backoff = (self.backoff + 1).min(MAX_BACKOFF),
            None => {}
        }
        let wait = held_ns as f64 / share * f64::from(1u32 << self.backoff);
        self.not_before_ns = now_ns.saturating_add(wait as u64);
        self.backoff > before
    }

    /// Whether a new reading would show nothing this one does not: its counters stand, or only
    /// its faults moved while it has children younger than [`YOUNG`] (`forking`). After a fork
    /// each page its parent writes first is copied (a fault, no change in resident size), and
    /// its PSS then moves with the sharing of children that are gone in milliseconds and have no
    /// reading of their own: a fork storm's driver was read at every turn of its target budget
    /// for that. Its faults are compared again once it has no young children (one more read),
    /// and its reading ages like any other.
    fn unchanged(&self, c: &Candidate, forking: &PidSet) -> bool {
        self.seen == *c || (forking.contains(&c.pid) && Candidate { faults: c.faults, ..self.seen } == *c)
    }

    /// Whether its last read was refused.
    fn refused(&self) -> bool {
        self.failed.is_some_and(|f| f.refused)
    }

    /// Whether the reading was made before its family last changed.
    fn stale(&self, changed: &Families) -> bool {
        let Some(r) = &self.reading else { return false };
        let after = |key| changed.get(&key).is_some_and(|&t| t > r.read_mono_ns);
        after((self.seen.ppid, self.seen.name)) || after((self.seen.pid, self.seen.name))
    }
}

/// Marks the families whose members changed between two candidate lists (both sorted by pid,
/// each with its [`YOUNG`] pids): a process that appeared or left marks its siblings' family
/// (and its parent's, if the parent has its name); one that exec'd or moved marks its old and
/// new families. A young process is no member yet: it marks its family when it outlives
/// [`YOUNG`], and one that leaves (or execs) young marks nothing. A fork storm's children, each
/// gone in milliseconds, would otherwise make their parent's reading stale every sample and
/// send the worker back to it every time, for a figure that changed only while they lived (and
/// that no sum counts complete while they live: they have no reading).
fn mark_changed(
    changed: &mut Families,
    (old, old_young): (&[Candidate], &PidSet),
    (new, new_young): (&[Candidate], &PidSet),
    now_ns: u64,
) {
    let mut mark = |c: &Candidate| {
        changed.insert((c.ppid, c.name), now_ns);
        // Its own children of its name lose (or gain) the sharer it was.
        changed.insert((c.pid, c.name), now_ns);
    };
    let was_member = |c: &Candidate| !old_young.contains(&c.pid);
    let is_member = |c: &Candidate| !new_young.contains(&c.pid);
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) if o.pid == n.pid => {
                let moved = o.start_ticks != n.start_ticks || o.ppid != n.ppid || o.name != n.name;
                if moved && was_member(o) {
                    mark(o);
                }
                // It moved, or (the same process) it has just outlived [`YOUNG`].
                if is_member(n) && (moved || !was_member(o)) {
                    mark(n);
                }
                i += 1;
                j += 1;
            }
            (Some(o), n) if n.is_none_or(|n| o.pid < n.pid) => {
                if was_member(o) {
                    mark(o);
                }
                i += 1;
            }
            (_, Some(n)) => {
                if is_member(n) {
                    mark(n);
                }
                j += 1;
            }
            _ => unreachable!("one list has an element left"),
        }
    }
    // Forget families no candidate belongs to, once they outnumber the candidates.
    if changed.len() > 2 * new.len() + 64 {
        let live: std::collections::HashSet<(u32, u64)> =
            new.iter().flat_map(|c| [(c.ppid, c.name), (c.pid, c.name)]).collect();
        changed.retain(|k, _| live.contains(k));
    }
}

/// Handle to the worker thread; dropping it stops the thread.
#[derive(Debug)]
pub struct PssWorker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    epoch: Instant,
    /// Whether the root is this kernel's (its processes' start times are on this machine's boot
    /// clock, so their age is known): a captured tree's processes are never [`YOUNG`].
    live: bool,
}

impl PssWorker {
    /// Starts the worker. `budget` is the share of one core it may use (0.02 = 2 %); `epoch`
    /// is the sampler's monotonic zero, so reading times line up with sample times.
    pub fn start(root: Root, budget: f64, epoch: Instant) -> std::io::Result<Self> {
        Self::start_with_limits(root, budget, TargetLimits::default(), epoch)
    }

    /// [`PssWorker::start`] with the age past which an unchanged process is read again.
    pub fn start_with_max_age(root: Root, budget: f64, max_age: Duration, epoch: Instant) -> std::io::Result<Self> {
        Self::start_with_limits(root, budget, TargetLimits { max_age, ..TargetLimits::default() }, epoch)
    }

    /// [`PssWorker::start`] with the limits on each target's reads.
    pub fn start_with_limits(root: Root, budget: f64, limits: TargetLimits, epoch: Instant) -> std::io::Result<Self> {
        let budget = budget.clamp(0.0001, 1.0);
        let limits = TargetLimits { share: limits.share.clamp(1e-6, 1.0), ..limits };
        let live = root.is_real();
        // Its pid in the pid namespace of the root's `/proc` (under `--host-root`, the host's).
        let own_pid = (live && limits.own_by_age).then(|| root.self_pid()).flatten();
        let shared =
            Shared::new(State { stats: PssStats { budget, ..PssStats::default() }, own_pid, ..State::default() });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("proctor-pss".into())
            .spawn(move || worker_loop(&thread_shared, &root, budget, limits, epoch))?;
        Ok(Self { shared, thread: Some(thread), epoch, live })
    }

    /// Replaces the candidate list (called by the sampler after each cycle, sorted by pid),
    /// drops readings of processes no longer listed and marks the families that changed.
    pub fn set_candidates(&self, candidates: Vec<Candidate>) {
        let now_ns = self.epoch.elapsed().as_nanos() as u64;
        let (young, recent) = if self.live {
            let (boot_ns, ticks) = (crate::net::boot_ns(), proctor_procfs::system::clock_ticks_per_sec());
            (young(&candidates, boot_ns, ticks, YOUNG), young(&candidates, boot_ns, ticks, SETTLE))
        } else {
            (PidSet::default(), PidSet::default())
        };
        let mut state = self.shared.lock();
        state.set_candidates(candidates, young, now_ns);
        state.set_settling(recent);
        drop(state);
        self.shared.wake.notify_one();
    }

    /// The latest reading for a process, if it is still the same process, whether it is
    /// stale (its family changed since), the stall ledger of this reader's reads of it
    /// (`refused` when its last read was), and a clone's reading that stands in for a missing
    /// or stale one ([`Lookup`]).
    pub fn with_readings<R>(&self, f: impl FnOnce(&dyn Fn(u32, u64) -> Lookup) -> R) -> R {
        let state = self.shared.lock();
        f(&|pid, start_ticks| state.lookup(pid, start_ticks))
    }

    pub fn stats(&self) -> PssStats {
        let now_ns = self.epoch.elapsed().as_nanos() as u64;
        let state = self.shared.lock();
        PssStats { resting_ns: state.rest_until_ns.saturating_sub(now_ns), ..state.stats }
    }

    /// Puts `pid` first: someone is looking at it (a dashboard's detail, `top`'s Enter pane).
    /// The worker reads it next, if it has no reading, a stale one or one its counters moved
    /// past, and its target budget allows; otherwise the ask is dropped. Reordering only: the
    /// worker's CPU budget and the target's share of lock time hold as for any read. At most
    /// [`MAX_ASKED`] asks wait; past that the oldest is dropped. An ask not made again within
    /// [`ASK_TTL`] lapses.
    pub fn ask(&self, pid: u32) {
        let now_ns = self.epoch.elapsed().as_nanos() as u64;
        let mut state = self.shared.lock();
        if !state.asked.contains(&pid) {
            if state.asked.len() >= MAX_ASKED {
                if let Some(oldest) = state.asked.pop_front() {
                    state.asked_at.remove(&oldest);
                }
            }
            state.asked.push_back(pid);
        }
        state.asked_at.insert(pid, now_ns);
        drop(state);
        // Ends a wait for work, never the rest after a read (that keeps the budget).
        self.shared.wake.notify_one();
    }

    /// The ledger of the reads since the last call (every target together) and the target of
    /// the longest of them; starts the next interval.
    pub fn take_interval(&self) -> (Stall, u32) {
        std::mem::take(&mut self.shared.lock().interval)
    }
}

impl Drop for PssWorker {
    fn drop(&mut self) {
        crate::worker::stop_and_join(&self.shared, &mut self.thread);
    }
}

/// [`read_pss`], with its hold (its wall time: an upper bound).
fn read_pss_timed(root: &Root, pid: u32, epoch: Instant, buf: &mut Vec<u8>) -> (Result<PssReading, Error>, Holds) {
    let started = Instant::now();
    let result = read_pss(root, pid, epoch, buf);
    let ns = crate::worker::held_ns(started.elapsed());
    (result, Holds { count: 1, total_ns: ns, longest_ns: ns })
}

/// One process's PSS through `pagemap` ([`crate::pagemap`]), on the calling thread.
fn read_pss_by_pages(
    counter: &mut PageCounter,
    root: &Root,
    pid: u32,
    epoch: Instant,
) -> (Result<PssReading, Error>, Holds) {
    let cpu_before = thread_cpu_ns();
    let read_mono_ns = epoch.elapsed().as_nanos() as u64;
    let (result, holds) = counter.read(root, pid);
    let reading = result.map(|rollup| PssReading {
        rollup,
        read_mono_ns,
        cost_cpu_ns: thread_cpu_ns().saturating_sub(cpu_before),
    });
    (reading, holds)
}

/// Reads one process's `smaps_rollup` now, on the calling thread, timing it.
pub fn read_pss(root: &Root, pid: u32, epoch: Instant, buf: &mut Vec<u8>) -> Result<PssReading, Error> {
    let cpu_before = thread_cpu_ns();
    // A reading is as old as its start: a sharer that leaves during the read may or may not
    // be in it, so a change marked after the start makes it stale.
    let read_mono_ns = epoch.elapsed().as_nanos() as u64;
    let path = format!("/proc/{pid}/smaps_rollup");
    root.read_into(&path, buf)?;
    let rollup = parse_smaps_rollup(buf).ok_or_else(|| Error::parse(root.path(&path), "not a smaps_rollup file"))?;
    Ok(PssReading { rollup, read_mono_ns, cost_cpu_ns: thread_cpu_ns().saturating_sub(cpu_before) })
}

fn worker_loop(shared: &Shared, root: &Root, budget: f64, limits: TargetLimits, epoch: Instant) {
    let max_age_ns = u64::try_from(limits.max_age.as_nanos()).unwrap_or(u64::MAX);
    let max_hold_ns = u64::try_from(limits.max_hold.as_nanos()).unwrap_or(u64::MAX);
    let slice_asked_ns = u64::try_from(limits.slice.as_nanos()).unwrap_or(u64::MAX);
    // Refused (a real-time agent, a kernel before 6.12): 0, and `proctor doctor` says why.
    let slice_ns = proctor_procfs::system::ask_thread_slice(limits.slice).and_then(Result::ok).unwrap_or(0);
    let mut buf = Vec::new();
    let mut pages = crate::pagemap::PageCounter::open(root).ok();
    let mut crowd_gauge = Crowd::new(root, root.is_real().then(|| proctor_procfs::system::affinity(0).ok()).flatten());
    {
        let mut state = shared.lock();
        state.stats.pagemap = pages.is_some();
        // SAFETY: gettid has no preconditions.
        state.thread_id = unsafe { libc::gettid() };
        state.stats.slice_asked_ns = slice_asked_ns;
        state.stats.slice_ns = slice_ns;
        state.stats.crowd_cpus = crowd_gauge.allowed.as_ref().map_or(0, |a| u32::try_from(a.len()).unwrap_or(u32::MAX));
        state.max_hold_ns = Some(max_hold_ns);
    }
    let mut tracer = limits.trace_waits.then(|| crate::lockwait::LockWaits::open(root).ok()).flatten();
    let mut savings = Savings::new(budget, epoch.elapsed().as_nanos() as u64);
    // The thread's CPU up to the last read's charge: the next read pays for everything since,
    // its pick and the idle wakeups before it included.
    let mut charged_cpu = thread_cpu_ns();
    {
        let mut state = shared.lock();
        state.stats.waits_traced = tracer.is_some();
        state.traced = tracer.is_some();
    }
    while !shared.stopped() {
        crowd_gauge.tick(root, epoch.elapsed().as_nanos() as u64);
        let next = {
            let mut state = shared.lock();
            let now_ns = epoch.elapsed().as_nanos() as u64;
            match pick_next(&mut state, now_ns, max_age_ns) {
                Some(c) => {
                    // The host's crowd, asked once at most for this read.
                    let mut crowd = None;
                    let (how, unaffordable) = how_to_read(&state, &c, now_ns, || {
                        *crowd.get_or_insert_with(|| crowd_gauge.busy(root, now_ns))
                    });
                    state.stats.walks_unaffordable += u64::from(unaffordable);
                    match how {
                        How::PutOff => {
                            // No read, no rest: the next candidate at once.
                            state.put_off(&c, now_ns);
                            None
                        }
                        How::Pages => {
                            // No walk costs more than the savings may be overdrawn to.
                            if let Some(counter) = pages.as_mut() {
                                counter.limit_cpu(Some(state.walk_limit_ns(now_ns)));
                            }
                            Some((c, true, crowd))
                        }
                        How::Rollup => Some((c, false, crowd)),
                    }
                }
                None => {
                    // Nothing to read: wait for a new list or ask, or until the first reading
                    // ages or budget frees (at most IDLE_WAIT). The pick, the stop's check and
                    // the wait hold the lock throughout, so no notice between them is missed.
                    let wait = state.due_ns.saturating_sub(now_ns).clamp(1, IDLE_WAIT_NS);
                    if !shared.stopped() {
                        let _ = shared.wake.wait_timeout(state, Duration::from_nanos(wait));
                    }
                    None
                }
            }
        };
        let Some((candidate, by_pages, crowd)) = next else { continue };
        // Whether a big target's `smaps_rollup` read began in a crowd, for its rate.
        let crowded = crowd.or_else(|| {
            (candidate.resident_bytes >= PAGEMAP_FROM_BYTES && !by_pages)
                .then(|| crowd_gauge.busy(root, epoch.elapsed().as_nanos() as u64))
        });
        // The CPU of a walk, finished or not, and what an unfinished one met, for what the
        // next one will cost.
        let mut walked = None;
        let mut stopped = false;
        let mut read = || match pages.as_mut().filter(|_| by_pages) {
            Some(counter) => {
                let walk_cpu = thread_cpu_ns();
                let (result, holds) = read_pss_by_pages(counter, root, candidate.pid, epoch);
                let ns = thread_cpu_ns().saturating_sub(walk_cpu);
                walked = Some((ns, result.is_err().then(|| counter.met_bytes())));
                stopped = matches!(&result, Err(e) if e.detail == Some(crate::pagemap::OVER_CPU_LIMIT));
                match result {
                    // Refused (its frame numbers hidden, say): smaps_rollup this time.
                    Err(e) if e.kind != ErrorKind::Gone => {
                        let (result, more) = read_pss_timed(root, candidate.pid, epoch, &mut buf);
                        let holds = Holds {
                            count: holds.count + 1,
                            total_ns: holds.total_ns + more.total_ns,
                            longest_ns: holds.longest_ns.max(more.longest_ns),
                        };
                        (result, holds, false)
                    }
                    result => (result, holds, true),
                }
            }
            None => {
                let (result, holds) = read_pss_timed(root, candidate.pid, epoch, &mut buf);
                (result, holds, false)
            }
        };
        let (result, holds, paged, waited) = match tracer.as_mut() {
            Some(t) => {
                let ((result, timed, paged), waited) = t.around(candidate.pid, read);
                // The holds as the kernel saw them, where the trace has them whole: the wall
                // time also counts the read's waits for the lock, and smaps_rollup lets the
                // lock go while the target's threads want it.
                let traced = waited.filter(|w| !w.lost && w.held_ns > 0);
                let ns = |ns| crate::worker::held_ns(Duration::from_nanos(ns));
                let holds = match traced {
                    Some(w) => Holds {
                        total_ns: ns(w.held_ns).min(timed.total_ns),
                        longest_ns: ns(w.longest_ns).min(timed.longest_ns),
                        ..timed
                    },
                    None => timed,
                };
                (result, holds, paged, waited)
            }
            None => {
                let (result, holds, paged) = read();
                (result, holds, paged, None)
            }
        };
        let held_ns = holds.total_ns;
        // The budget pays for the trace too: turning it on and off, reading and parsing it.
        // And for a walk that stopped at its limit before the `smaps_rollup` read that
        // replaced it, and for the picks and wakeups since the last read: the thread's whole
        // CPU since that read's charge.
        let now_cpu = thread_cpu_ns();
        let spent_ns = now_cpu.saturating_sub(charged_cpu);
        charged_cpu = now_cpu;
        {
            let mut state = shared.lock();
            let gone = matches!(&result, Err(e) if e.kind == ErrorKind::Gone);
            let failed = match &result {
                Err(e) if e.kind != ErrorKind::Gone => {
                    Some(Failed { at_ns: epoch.elapsed().as_nanos() as u64, refused: e.kind == ErrorKind::Permission })
                }
                _ => None,
            };
            if let Some((ns, met)) = walked.filter(|_| !gone && candidate.resident_bytes > 0) {
                state.pagemap_ns_per_byte = Some(walk_ns_per_byte(ns, met, candidate.resident_bytes));
                state.pagemap_rate_at_ns = epoch.elapsed().as_nanos() as u64;
            }
            if !paged && result.is_ok() && candidate.resident_bytes >= PAGEMAP_FROM_BYTES {
                state
                    .note_rollup_rate(holds.longest_ns as f64 / candidate.resident_bytes as f64, crowded == Some(true));
            }
            state.stats.cpu_ns += spent_ns;
            state.stats.walks_stopped += u64::from(stopped);
            let reading = match result {
                Ok(reading) => {
                    state.stats.reads += 1;
                    state.stats.max_read_cpu_ns = state.stats.max_read_cpu_ns.max(reading.cost_cpu_ns);
                    state.note_clone(&candidate, &reading);
                    Some(reading)
                }
                Err(_) => {
                    if !gone {
                        state.stats.errors += 1;
                    }
                    // Remember the failure so the pass moves on to other processes.
                    None
                }
            };
            if !gone {
                // A read of a gone process held no one's lock.
                let st = &mut *state;
                let totals = if paged { &mut st.stats.pagemap_lock } else { &mut st.stats.lock };
                crate::worker::charge_holds(totals, &mut st.interval, candidate.pid, held_ns, holds.longest_ns);
                st.stats.pagemap_reads += u64::from(paged);
            }
            let entry = state.results.entry(candidate.pid).or_insert_with(|| Entry::unread(candidate));
            if entry.seen.start_ticks != candidate.start_ticks {
                // The pid was reused: the ledger and the step back are the new process's.
                entry.stall = Stall::default();
                entry.backoff = 0;
                entry.waited = false;
            }
            entry.seen = candidate;
            entry.reading = reading;
            entry.failed = failed;
            entry.put_off_since_ns = None;
            let (mut capped, mut backed_off) = (false, false);
            if !gone {
                entry.stall.add_holds(held_ns, holds.longest_ns);
                if let Some(w) = waited {
                    let waited_ns = crate::worker::held_ns(Duration::from_nanos(w.waited_ns));
                    entry.stall.waited_ns = Some(entry.stall.waited_ns.unwrap_or(0).saturating_add(waited_ns));
                }
                let now_ns = epoch.elapsed().as_nanos() as u64;
                let waited_ns = waited.filter(|w| !w.lost).map(|w| w.waited_ns);
                backed_off = entry.after_read(held_ns, limits.share, waited_ns, now_ns);
                capped = holds.longest_ns > max_hold_ns && !entry.stall.capped;
                entry.stall.capped |= capped;
            }
            if capped {
                state.stats.capped_targets += 1;
            }
            state.stats.backoffs += u64::from(backed_off);
            if !gone {
                state.note_wait(&candidate, waited.filter(|w| !w.lost).map(|w| w.waited_ns));
            }
            if let Some(w) = waited.filter(|_| !gone) {
                state.stats.traced_reads += 1;
                state.stats.target_waited_ns = state.stats.target_waited_ns.saturating_add(w.waited_ns);
                state.stats.traces_lost += u64::from(w.lost);
            }
        }
        // Keep the share of one core at `budget` on average: after spending `c` CPU, rest
        // c·(1/b − 1), less what the savings pay for, but never under c·(1/(4b) − 1).
        let rest_ns = savings.rest_after(spent_ns.max(20_000), epoch.elapsed().as_nanos() as u64);
        let mut state = shared.lock();
        state.rest_until_ns = (epoch.elapsed().as_nanos() as u64).saturating_add(rest_ns);
        if !shared.stopped() {
            let _ = shared.wake.wait_timeout_while(state, Duration::from_nanos(rest_ns), |_| !shared.stopped());
        }
    }
}

/// The worker's unspent budget: earned at `budget` per second of wall time, up to
/// [`BURST_SAVED`] of it, spent by reads.
#[derive(Debug, Clone, Copy)]
struct Savings {
    budget: f64,
    /// CPU nanoseconds saved (negative: owed), and when they were last brought up to date.
    saved_ns: f64,
    at_ns: u64,
}

impl Savings {
    /// Starts with full savings: a worker that starts on a big tree reads it sooner.
    fn new(budget: f64, now_ns: u64) -> Self {
        Savings { budget, saved_ns: Self::cap(budget), at_ns: now_ns }
    }

    fn cap(budget: f64) -> f64 {
        budget * BURST_SAVED.as_nanos() as f64
    }

    /// The most CPU one walk may cost ([`WALK_OVERDRAFT`] times the savings).
    fn walk_limit(budget: f64) -> f64 {
        Self::cap(budget) * WALK_OVERDRAFT
    }

    /// How long to rest after a read that cost `spent_ns` of CPU and ended at `now_ns`: as
    /// long as the budget takes to earn it back, less what was saved, but at least long enough
    /// to keep to [`BURST_RATE`] times the budget.
    fn rest_after(&mut self, spent_ns: u64, now_ns: u64) -> u64 {
        let earned = now_ns.saturating_sub(self.at_ns) as f64 * self.budget;
        self.saved_ns = (self.saved_ns + earned).min(Self::cap(self.budget)) - spent_ns as f64;
        let fastest = spent_ns as f64 * (1.0 / (BURST_RATE * self.budget).min(1.0) - 1.0);
        let owed = (-self.saved_ns / self.budget).max(0.0);
        let rest = fastest.max(owed);
        // The rest earns too: account for it when it is over, from here.
        self.at_ns = now_ns;
        rest as u64
    }
}

/// The most asks ([`PssWorker::ask`]) that wait at once.
pub const MAX_ASKED: usize = 32;

/// How long an ask ([`PssWorker::ask`]) waits without being made again. The dashboard and
/// `top` ask every second (the dashboard every sample, if slower) for the rows they show without
/// a PSS; a row no longer shown (a filter typed, a page scrolled) is not asked for again, and
/// its ask lapses instead of keeping the rows now shown waiting: at a low budget a read costs
/// seconds of rest, so up to 32 asks of a page left behind can hold a row now shown for minutes
/// (the likely reason a loaded suite's browser test saw a big process alone on screen unread
/// for over a minute, after 5 asked reads of smaller ones).
pub const ASK_TTL: Duration = Duration::from_secs(10);

/// The smallest asked process ([`PssWorker::ask`]) that needs a reading and may be read at
/// `now_ns` (the oldest ask among equals): a page of `top`'s rows is asked at once, and a big
/// one's read and the rest after it would hold back all the others. Asks that need none (read
/// and unchanged since), whose process is not listed, or whose target is capped are dropped,
/// and one whose target's share is spent waits for it.
fn pick_asked(state: &mut State, now_ns: u64) -> Option<Candidate> {
    let mut k = 0;
    let mut best: Option<(usize, Candidate)> = None;
    let lapsed = |at: &u64| now_ns > at.saturating_add(ASK_TTL.as_nanos() as u64);
    while k < state.asked.len() {
        let pid = state.asked[k];
        let Ok(i) = state.candidates.binary_search_by_key(&pid, |c| c.pid) else {
            state.asked.remove(k);
            continue;
        };
        if state.asked_at.get(&pid).is_some_and(lapsed) {
            state.asked.remove(k);
            continue;
        }
        let c = state.candidates[i];
        // A big process seen in one list only: the next says how to read it.
        let unsettled = !state.traced && c.resident_bytes >= PAGEMAP_FROM_BYTES && state.first_seen.contains(&pid);
        match state.results.get(&pid).filter(|e| e.seen.start_ticks == c.start_ticks) {
            // Capped, or refused while its counters stand: a read would be refused again.
            Some(e) if e.stall.capped || (e.refused() && e.seen == c) => {
                state.asked.remove(k);
                continue;
            }
            Some(e) if e.reading.is_some() && e.unchanged(&c, &state.forking) && !e.stale(&state.changed) => {
                state.asked.remove(k);
                continue;
            }
            Some(e) if now_ns < e.not_before_ns => {}
            _ if unsettled => {}
            _ => {
                if best.is_none_or(|(_, b)| c.resident_bytes < b.resident_bytes) {
                    best = Some((k, c));
                }
            }
        }
        k += 1;
    }
    let picked = best.map(|(k, c)| {
        state.asked.remove(k);
        c
    });
    // The times of asks dropped above, or read now, go with them.
    let asked = &state.asked;
    state.asked_at.retain(|pid, _| asked.contains(pid));
    picked
}

/// How old a reading of an unchanged process may grow before it is read again.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(60);

/// The longest an idle worker waits with nothing due: a bound, not a period (each sample's
/// list wakes it, and [`State::due_ns`] says when a reading ages). It polled every second.
const IDLE_WAIT_NS: u64 = 10_000_000_000;

/// The next candidate to read: an asked one ([`pick_asked`]), else round-robin: first the
/// smallest never read or whose reading is stale, then one whose cheap counters changed since its
/// reading, or whose reading is at least `max_age_ns` old at `now_ns` (both on the sampler's
/// monotonic clock); never one whose share of lock time is spent. A failed read is retried as
/// [`Failed`] says.
fn pick_next(state: &mut State, now_ns: u64, max_age_ns: u64) -> Option<Candidate> {
    if let Some(c) = pick_asked(state, now_ns) {
        state.stats.asked_reads += 1;
        return Some(c);
    }
    let n = state.candidates.len();
    // A big process seen in one list only: the next says how to read it ([`how_to_read`]).
    let unsettled = |state: &State, c: &Candidate| {
        !state.traced && c.resident_bytes >= PAGEMAP_FROM_BYTES && state.first_seen.contains(&c.pid)
    };
    // The smallest first (a read's cost grows with what it walks), from the cursor on among
    // equals: a big target's read, whose rest holds the worker back, waits until the small
    // ones have readings.
    // `Some(until)`: it does, or will once its target budget frees at `until`.
    let needs_reading = |state: &State, c: &Candidate| -> Option<u64> {
        if unsettled(state, c) || state.young.contains(&c.pid) || state.settling.contains(&c.pid) {
            return None;
        }
        match state.results.get(&c.pid) {
            Some(e) if e.seen.start_ticks == c.start_ticks => {
                let unread = e.put_off_since_ns.is_some() && e.reading.is_none() && e.failed.is_none();
                (!e.stall.capped && (unread || e.stale(&state.changed))).then_some(e.not_before_ns)
            }
            _ => Some(0),
        }
    };
    if state.first.changes != Some(state.changed.changes) || now_ns >= state.first.until_ns {
        let mut until_ns = u64::MAX;
        let mut first: Vec<(u64, usize, u32)> = Vec::new();
        for k in 0..n {
            let c = &state.candidates[(state.cursor + k) % n];
            match needs_reading(state, c) {
                Some(at) if now_ns < at => until_ns = until_ns.min(at),
                Some(_) => first.push((c.resident_bytes, k, c.pid)),
                None => {}
            }
        }
        // Popped from the end: the smallest, from the cursor on among equals.
        first.sort_unstable_by_key(|&(bytes, k, _)| std::cmp::Reverse((bytes, k)));
        state.first = FirstPass {
            queue: first.into_iter().map(|(_, _, pid)| pid).collect(),
            changes: Some(state.changed.changes),
            until_ns,
            passes: state.first.passes + 1,
            later: Vec::new(),
            late: false,
        };
    }
    loop {
        while let Some(pid) = state.first.queue.pop() {
            let Ok(i) = state.candidates.binary_search_by_key(&pid, |c| c.pid) else { continue };
            let c = state.candidates[i];
            match needs_reading(state, &c) {
                // A clone's reading stands in for it: the others first, so that every member
                // of a tree of clones has a figure after a read or two ([`State::estimate`]).
                Some(at) if now_ns >= at && !state.first.late && state.estimate(&c).is_some() => {
                    state.first.later.push(pid);
                }
                Some(at) if now_ns >= at => {
                    state.cursor = i + 1;
                    return Some(c);
                }
                // Its target budget was spent since the pass was worked out: the pass is worked
                // out again when it frees.
                Some(at) => state.first.until_ns = state.first.until_ns.min(at),
                None => {}
            }
        }
        if state.first.late || state.first.later.is_empty() {
            break;
        }
        // Then those, in the order they were passed over, each checked again.
        state.first.late = true;
        state.first.queue = std::mem::take(&mut state.first.later);
        state.first.queue.reverse();
    }
    // Nothing due now: when the first will be, for the worker's wait. Unsettled, young and
    // settling candidates wait for the next list, a capped one for good.
    let mut due = u64::MAX;
    for _ in 0..n {
        let i = state.cursor % n;
        state.cursor = i + 1;
        let c = state.candidates[i];
        if unsettled(state, &c) {
            continue;
        }
        if state.young.contains(&c.pid) {
            state.stats.skipped_young += 1;
            continue;
        }
        if state.settling.contains(&c.pid) {
            state.stats.skipped_settling += 1;
            continue;
        }
        // Read (or failed) less than the maximum age ago, and when it ages; a refusal stays
        // fresh.
        let ages_at = |e: &Entry| match (&e.reading, e.failed) {
            _ if e.put_off_since_ns.is_some() => e.not_before_ns,
            (Some(r), _) => r.read_mono_ns.saturating_add(max_age_ns),
            (None, Some(f)) if !f.refused => f.at_ns.saturating_add(max_age_ns),
            _ => u64::MAX,
        };
        match state.results.get(&c.pid) {
            // Its share of lock time is spent, or one read held it past the cap.
            Some(e) if e.seen.start_ticks == c.start_ticks && (e.stall.capped || now_ns < e.not_before_ns) => {
                // Due when its budget frees, if it changed or its family did; else only once
                // its reading has aged too.
                if !e.stall.capped {
                    let unchanged = state.unchanged(e, &c) && !e.stale(&state.changed);
                    due = due.min(if unchanged { e.not_before_ns.max(ages_at(e)) } else { e.not_before_ns });
                }
                state.stats.skipped_target_budget += 1
            }
            Some(e) if state.unchanged(e, &c) && now_ns < ages_at(e) => {
                due = due.min(ages_at(e));
                state.stats.skipped_unchanged += 1
            }
            _ => return Some(c),
        }
    }
    state.due_ns = due;
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`how_to_read`]'s way alone.
    fn how_only(state: &State, c: &Candidate, now_ns: u64, host_busy: impl FnMut() -> bool) -> How {
        how_to_read(state, c, now_ns, host_busy).0
    }

    fn cand(pid: u32, rss: u64) -> Candidate {
        Candidate { pid, start_ticks: 1, ppid: 1, name: 0, resident_bytes: rss, faults: 0 }
    }

    /// A process of `name` under `ppid`.
    fn member(pid: u32, ppid: u32, name: &str) -> Candidate {
        Candidate { ppid, name: family_name(name), ..cand(pid, 10) }
    }

    /// What the worker keeps of a process read (`Some`) or failed (`None`), nothing else set.
    fn entry(seen: Candidate, reading: Option<PssReading>) -> Entry {
        Entry { reading, ..Entry::unread(seen) }
    }

    /// The candidates read through `pagemap` on a quiet host.
    fn by_pages(state: &State) -> Vec<u32> {
        state.candidates.iter().filter(|c| how_only(state, c, 0, || false) == How::Pages).map(|c| c.pid).collect()
    }

    /// A reading made at `at_ns`.
    fn read_at(at_ns: u64) -> PssReading {
        PssReading { rollup: Default::default(), read_mono_ns: at_ns, cost_cpu_ns: 0 }
    }

    /// Every candidate read at `at_ns`.
    fn read_all(state: &mut State, at_ns: u64) {
        for c in &state.candidates {
            let entry = entry(*c, Some(read_at(at_ns)));
            state.results.insert(c.pid, entry);
        }
    }

    fn stale_pids(state: &State) -> Vec<u32> {
        let mut pids: Vec<u32> =
            state.results.iter().filter(|(_, e)| e.stale(&state.changed)).map(|(&pid, _)| pid).collect();
        pids.sort_unstable();
        pids
    }

    /// A forking server (10) with three workers of its name (11–13), a helper it exec'd (14)
    /// and an unrelated daemon (20): when a worker leaves, the readings of its siblings and of
    /// the server, who shared pages with it, are stale; the helper's and the daemon's are not.
    /// Readings made after the change are not; an exec marks its children.
    #[test]
    fn a_sharer_leaving_or_execing_makes_its_familys_readings_stale() {
        let before = vec![
            member(10, 1, "gunicorn"),
            member(11, 10, "gunicorn"),
            member(12, 10, "gunicorn"),
            member(13, 10, "gunicorn"),
            member(14, 10, "sh"),
            member(20, 1, "sshd"),
        ];
        let mut state = State::default();
        state.set_candidates(before.clone(), Default::default(), 0);
        read_all(&mut state, 100);
        let mut after = before.clone();
        after.retain(|c| c.pid != 13);
        state.set_candidates(after.clone(), Default::default(), 200);
        assert_eq!(stale_pids(&state), [10, 11, 12]);
        read_all(&mut state, 300);
        assert_eq!(stale_pids(&state), Vec::<u32>::new(), "read after the change");
        // The server execs: its workers lose the sharer it was; the daemon is untouched.
        let mut exec = after.clone();
        exec[0].name = family_name("python3");
        state.set_candidates(exec.clone(), Default::default(), 400);
        assert_eq!(stale_pids(&state), [10, 11, 12]);
        // A worker appears: its siblings and the server share with it.
        read_all(&mut state, 500);
        let mut forked = exec.clone();
        forked.push(member(15, 10, "gunicorn"));
        state.set_candidates(forked, Default::default(), 600);
        assert_eq!(stale_pids(&state), [11, 12], "the server is python3 now, its own family");
    }

    /// A fork storm's children, each young and gone by the next list, leave their parent's
    /// reading fresh; a child that outlives [`YOUNG`] joins the family then (its reading and its
    /// siblings' are stale), and one that leaves after that marks it again.
    #[test]
    fn young_children_join_their_family_when_they_outlive_young() {
        let parent = member(10, 1, "python3");
        let set = |pids: &[u32]| pids.iter().copied().collect::<PidSet>();
        let mut state = State::default();
        state.set_candidates(vec![parent], set(&[]), 0);
        read_all(&mut state, 100);
        // A child appears young, then is gone; another appears young.
        state.set_candidates(vec![parent, member(11, 10, "python3")], set(&[11]), 200);
        state.set_candidates(vec![parent, member(12, 10, "python3")], set(&[12]), 300);
        assert_eq!(stale_pids(&state), Vec::<u32>::new(), "young children are no members yet");
        // 12 outlives YOUNG: it is a member from this list on.
        state.set_candidates(vec![parent, member(12, 10, "python3")], set(&[]), 400);
        assert_eq!(stale_pids(&state), [10]);
        read_all(&mut state, 500);
        // A young child that exec'd leaves nothing stale; the old member leaving does.
        let exec = Candidate { name: family_name("true"), ..member(13, 10, "python3") };
        state.set_candidates(vec![parent, member(12, 10, "python3"), member(13, 10, "python3")], set(&[13]), 600);
        state.set_candidates(vec![parent, member(12, 10, "python3"), exec], set(&[13]), 700);
        assert_eq!(stale_pids(&state), Vec::<u32>::new());
        state.set_candidates(vec![parent, exec], set(&[13]), 800);
        assert_eq!(stale_pids(&state), [10]);
    }

    /// A target that waited on a read is read half as often from then, down to 1/16 of its
    /// share; a traced read it did not wait on brings it a step back; an untraced read leaves
    /// the step as it was.
    #[test]
    fn a_target_that_waits_on_reads_is_read_less_often() {
        let mut e = entry(cand(1, 10), None);
        let (ms, share) = (1_000_000u64, 0.001);
        // A 10 ms hold at 1 ms per second: 10 s before the next read.
        assert!(!e.after_read(10 * ms, share, Some(0), 0));
        assert_eq!(e.not_before_ns, 10_000 * ms);
        let steps: Vec<(bool, u64)> =
            (0..6).map(|_| (e.after_read(10 * ms, share, Some(ms), 0), e.not_before_ns / (1_000 * ms))).collect();
        assert_eq!(steps, [(true, 20), (true, 40), (true, 80), (true, 160), (false, 160), (false, 160)]);
        assert!(!e.after_read(10 * ms, share, None, 0), "untraced: no step either way");
        assert_eq!(e.not_before_ns, 160_000 * ms);
        assert!(!e.after_read(10 * ms, share, Some(0), 5));
        assert_eq!((e.backoff, e.not_before_ns), (3, 80_000 * ms + 5));
    }

    /// A process listed younger than [`YOUNG`] is not read from that list; it is from the next,
    /// where it is older. One started a second or more before the list is read at once.
    #[test]
    fn young_processes_wait_for_the_next_list() {
        // 100 ticks a second; the boot clock at 50 s: 5,000 ticks.
        let (old, fresh) =
            (Candidate { start_ticks: 4_899, ..cand(1, 10) }, Candidate { start_ticks: 4_950, ..cand(2, 10) });
        assert_eq!(young(&[old, fresh], 50_000_000_000, 100, YOUNG), [2].into_iter().collect());
        let mut state = State { candidates: vec![old, fresh], young: [2].into_iter().collect(), ..State::default() };
        assert_eq!(pick_next(&mut state, 0, u64::MAX).map(|c| c.pid), Some(1));
        let reading = PssReading { rollup: Default::default(), read_mono_ns: 0, cost_cpu_ns: 0 };
        let entry = entry(old, Some(reading));
        state.results.insert(1, entry);
        assert_eq!(pick_next(&mut state, 0, u64::MAX).map(|c| c.pid), None, "the young one waits");
        assert!(state.stats.skipped_young > 0);
        state.set_candidates(vec![old, fresh], young(&[old, fresh], 51_000_000_000, 100, YOUNG), 1);
        assert_eq!(pick_next(&mut state, 1, u64::MAX).map(|c| c.pid), Some(2), "read from the next list");
    }

    /// Stale readings are read first, before a changed or aged one, but still not before their
    /// target's share of lock time allows.
    /// With nothing to read, the pick says when something will be due without a new list:
    /// the first reading to age past the maximum, or a target whose budget frees first; a
    /// capped one and a refused read never come due by time, and the worker waits for them.
    #[test]
    fn an_idle_pick_says_when_the_first_reading_comes_due() {
        let mut state = State { candidates: vec![cand(1, 10), cand(2, 20), cand(3, 30)], ..State::default() };
        read_all(&mut state, 100);
        state.results.get_mut(&2).expect("read").reading.as_mut().expect("a reading").read_mono_ns = 50;
        assert_eq!(pick_next(&mut state, 200, 1_000).map(|c| c.pid), None, "all fresh");
        assert_eq!(state.due_ns, 1_050, "2's reading ages first");
        state.results.get_mut(&3).expect("read").not_before_ns = 2_000;
        assert_eq!(pick_next(&mut state, 200, 1_000), None);
        assert_eq!(state.due_ns, 1_050, "3 unchanged: due when its budget frees and its reading aged");
        state.results.get_mut(&3).expect("read").not_before_ns = 700;
        state.candidates[2].faults += 1;
        assert_eq!(pick_next(&mut state, 200, 1_000), None);
        assert_eq!(state.due_ns, 700, "3 changed: due when its budget frees");
        state.results.get_mut(&3).expect("read").stall.capped = true;
        assert_eq!(pick_next(&mut state, 200, 1_000), None);
        assert!(state.stats.skipped_target_budget > 0);
        assert_eq!(state.due_ns, 1_050, "a capped target never comes due");
        assert_eq!(pick_next(&mut state, 1_050, 1_000).map(|c| c.pid), Some(2), "due when said");
        let mut refused = State { candidates: vec![cand(1, 10)], ..State::default() };
        let mut e = entry(cand(1, 10), None);
        e.failed = Some(Failed { at_ns: 100, refused: true });
        refused.results.insert(1, e);
        assert_eq!(pick_next(&mut refused, 200, 1_000), None);
        assert_eq!(refused.due_ns, u64::MAX, "a refusal stands until its counters move");
    }

    #[test]
    fn stale_readings_are_read_first_within_the_target_budget() {
        let (a, b, c) = (member(1, 9, "w"), member(2, 8, "x"), member(3, 9, "w"));
        let mut state = State { candidates: vec![a, b, c], ..State::default() };
        read_all(&mut state, 100);
        state.candidates[1].faults += 1;
        state.changed.insert((9, family_name("w")), 200);
        state.results.get_mut(&3).expect("read").not_before_ns = 1_000;
        assert_eq!(pick_next(&mut state, 500, u64::MAX).map(|c| c.pid), Some(1), "stale beats changed");
        state.results.get_mut(&1).expect("read").reading.as_mut().expect("a reading").read_mono_ns = 550;
        assert_eq!(pick_next(&mut state, 500, u64::MAX).map(|c| c.pid), Some(2), "3 must wait its turn");
        state.cursor = 0;
        read_all(&mut state, 600);
        state.changed.insert((9, family_name("w")), 700);
        state.results.get_mut(&3).expect("read").not_before_ns = 0;
        state.cursor = 1;
        assert_eq!(pick_next(&mut state, 800, u64::MAX).map(|c| c.pid), Some(3), "round-robin from the cursor");
    }

    /// A stale reading left out for its target budget is read first once the budget frees,
    /// with no new list in between.
    #[test]
    fn a_stale_reading_is_read_first_when_its_budget_frees() {
        let (a, b, c) = (member(1, 9, "w"), member(2, 8, "x"), member(3, 9, "w"));
        let mut state = State { candidates: vec![a, b, c], ..State::default() };
        read_all(&mut state, 100);
        state.changed.insert((9, family_name("w")), 200);
        for pid in [1, 3] {
            state.results.get_mut(&pid).expect("read").not_before_ns = 1_000;
        }
        state.candidates[1].faults += 1;
        assert_eq!(pick_next(&mut state, 500, u64::MAX).map(|c| c.pid), Some(2), "the stale ones wait");
        state.results.insert(2, entry(state.candidates[1], Some(read_at(500))));
        assert_eq!(pick_next(&mut state, 600, u64::MAX), None);
        assert_eq!(state.due_ns, 1_000);
        // Both stale, the same size: from the cursor on (after 2).
        assert_eq!(pick_next(&mut state, 1_000, u64::MAX).map(|c| c.pid), Some(3), "stale, and its budget freed");
        state.results.get_mut(&3).expect("read").reading = Some(read_at(1_000));
        assert_eq!(pick_next(&mut state, 1_000, u64::MAX).map(|c| c.pid), Some(1));
    }

    /// The first round over a new list (every process never read) is one pass over the
    /// candidates, not one a pick: smallest first, each once.
    #[test]
    fn one_pass_over_the_candidates_serves_a_whole_first_round() {
        let n = 1_000u32;
        let candidates: Vec<Candidate> = (1..=n).map(|pid| cand(pid, u64::from((pid * 7919) % n))).collect();
        let mut state = State { candidates, ..State::default() };
        let mut picked = Vec::new();
        while let Some(c) = pick_next(&mut state, 0, u64::MAX) {
            state.results.insert(c.pid, entry(c, Some(read_at(0))));
            picked.push(c.resident_bytes);
            assert!(picked.len() <= n as usize, "a process picked twice");
        }
        assert_eq!(picked.len(), n as usize);
        assert!(picked.windows(2).all(|w| w[0] <= w[1]), "smallest first");
        assert_eq!(state.first.passes, 1, "one pass over the candidates for the whole round");
    }

    /// The budget is an average: with savings the worker reads at four times it, without it
    /// rests as before (c·(1/b − 1)), and savings stop growing at 30 s of budget.
    #[test]
    fn savings_buy_a_burst_and_no_more() {
        let (b, ms) = (0.02, 1_000_000u64);
        // `n` reads of 10 ms from `now`, each followed by the rest it is given: the rests.
        let run = |s: &mut Savings, now: &mut u64, n: usize| -> Vec<u64> {
            (0..n)
                .map(|_| {
                    *now += 10 * ms;
                    let rest = s.rest_after(10 * ms, *now);
                    *now += rest;
                    rest
                })
                .collect()
        };
        let mut s = Savings::new(b, 0);
        let mut now = 0;
        let rests = run(&mut s, &mut now, 200);
        // Full savings (0.6 s of CPU) spent at 4× the budget, i.e. 3× faster than they are
        // earned: 10 ms reads rest 10·(1/0.08 − 1) = 115 ms, for about 10 s.
        let fast = rests.iter().take_while(|&&r| r == 115 * ms).count();
        assert!((75..=82).contains(&fast), "{fast} reads at 4× the budget: {rests:?}");
        // Then as without savings: 10·(1/0.02 − 1) = 490 ms after each 10 ms read.
        assert!(rests[fast + 2..].iter().all(|r| r.abs_diff(490 * ms) <= ms), "{rests:?}");
        // An hour idle saves no more than 30 s of budget.
        now += 3_600_000 * ms;
        let rests = run(&mut s, &mut now, 200);
        let again = rests.iter().take_while(|&&r| r == 115 * ms).count();
        assert_eq!(again, fast, "{rests:?}");
    }

    #[test]
    fn round_robin_skips_unchanged() {
        let mut state = State { candidates: vec![cand(1, 10), cand(2, 20)], ..State::default() };
        let reading = PssReading { rollup: Default::default(), read_mono_ns: 0, cost_cpu_ns: 0 };
        let max_age = u64::MAX;
        assert_eq!(pick_next(&mut state, 0, max_age).map(|c| c.pid), Some(1));
        state.results.insert(1, entry(cand(1, 10), Some(reading)));
        assert_eq!(pick_next(&mut state, 0, max_age).map(|c| c.pid), Some(2));
        state.results.insert(2, entry(cand(2, 20), None));
        assert_eq!(pick_next(&mut state, 0, max_age), None, "nothing changed, failures included");
        state.candidates[0] = cand(1, 11);
        assert_eq!(pick_next(&mut state, 0, max_age).map(|c| c.pid), Some(1), "rss moved");
    }

    /// A process forking short-lived children: while a child younger than [`YOUNG`] is listed,
    /// its parent's faults moving alone (copy-on-write after the fork) does not send the worker
    /// back to it; its resident size moving does, and so do its faults once no young child is
    /// listed. Another process's faults count as always.
    #[test]
    fn a_forking_parents_faults_alone_wait_for_its_young_children() {
        let reading = PssReading { rollup: Default::default(), read_mono_ns: 0, cost_cpu_ns: 0 };
        let max_age = u64::MAX;
        let parent = Candidate { faults: 100, ..cand(10, 1000) };
        let other = Candidate { faults: 5, ..cand(20, 500) };
        let child = Candidate { ppid: 10, start_ticks: 9, ..cand(11, 100) };
        let mut state = State::default();
        state.set_candidates(vec![parent, child, other], [11].into_iter().collect(), 0);
        state.results.insert(10, entry(parent, Some(reading)));
        state.results.insert(20, entry(other, Some(reading)));
        assert_eq!(pick_next(&mut state, 1, max_age), None, "nothing moved; the child is young");
        let copied = Candidate { faults: 160, ..parent };
        let touched = Candidate { faults: 6, ..other };
        state.set_candidates(vec![copied, child, touched], [11].into_iter().collect(), 2);
        assert_eq!(pick_next(&mut state, 3, max_age).map(|c| c.pid), Some(20), "another's faults count");
        state.results.insert(20, entry(touched, Some(reading)));
        assert_eq!(pick_next(&mut state, 3, max_age), None, "the parent's faults alone, a young child listed");
        let grown = Candidate { resident_bytes: 1100, ..copied };
        state.set_candidates(vec![grown, child, touched], [11].into_iter().collect(), 4);
        assert_eq!(pick_next(&mut state, 5, max_age).map(|c| c.pid), Some(10), "its resident size moved");
        state.results.insert(10, entry(grown, Some(reading)));
        let copied_more = Candidate { faults: 200, ..grown };
        state.set_candidates(vec![copied_more, child, touched], [11].into_iter().collect(), 6);
        assert_eq!(pick_next(&mut state, 7, max_age), None);
        // The child has gone: the faults count again.
        state.set_candidates(vec![copied_more, touched], PidSet::default(), 8);
        assert_eq!(pick_next(&mut state, 9, max_age).map(|c| c.pid), Some(10), "no young child listed");
    }

    /// A sharer exiting moves the target's PSS but not its own counters: a reading of an
    /// unchanged process is refreshed once it reaches the maximum age, and not before. So is a
    /// failed read, unless it was refused.
    #[test]
    fn unchanged_readings_and_failures_are_retried_at_the_maximum_age() {
        let max_age = 60_000_000_000;
        let read_at = 5_000_000_000;
        let reading = PssReading { rollup: Default::default(), read_mono_ns: read_at, cost_cpu_ns: 0 };
        let mut state = State { candidates: vec![cand(1, 10), cand(2, 20), cand(3, 30)], ..State::default() };
        let entry = |c: Candidate, reading, failed| Entry { failed, ..entry(c, reading) };
        state.results.insert(1, entry(cand(1, 10), Some(reading), None));
        let refused = Failed { at_ns: read_at, refused: true };
        state.results.insert(2, entry(cand(2, 20), None, Some(refused)));
        let failed = Failed { at_ns: read_at, refused: false };
        state.results.insert(3, entry(cand(3, 30), None, Some(failed)));
        assert_eq!(pick_next(&mut state, read_at + max_age - 1, max_age), None, "young enough");
        assert_eq!(pick_next(&mut state, read_at + max_age, max_age).map(|c| c.pid), Some(1), "aged out");
        assert_eq!(pick_next(&mut state, read_at + max_age, max_age).map(|c| c.pid), Some(3), "failed, not refused");
        // Both read again: the refusal of pid 2 is not retried by age, however old.
        let again = PssReading { read_mono_ns: read_at + max_age, ..reading };
        state.results.insert(1, entry(cand(1, 10), Some(again), None));
        state.results.insert(3, entry(cand(3, 30), Some(again), None));
        assert_eq!(pick_next(&mut state, read_at + max_age, max_age), None);
        assert_eq!(pick_next(&mut state, u64::MAX, max_age).map(|c| c.pid), Some(1));
        // Nor for an ask, while its counters stand; once they move it is.
        state.asked.push_back(2);
        assert_ne!(pick_asked(&mut state, u64::MAX).map(|c| c.pid), Some(2));
        assert!(state.asked.is_empty());
        state.candidates[1].faults += 1;
        state.asked.push_back(2);
        assert_eq!(pick_asked(&mut state, u64::MAX).map(|c| c.pid), Some(2));
    }

    /// The agent's own process: its counters moving (its own work) does not send the worker
    /// back to it; its reading ages out like any other, and an ask still reads it.
    #[test]
    fn the_agents_own_process_is_read_again_by_age_not_by_its_counters() {
        let max_age = 60_000_000_000;
        let read_at = 5_000_000_000;
        let reading = PssReading { rollup: Default::default(), read_mono_ns: read_at, cost_cpu_ns: 0 };
        let mut state = State { candidates: vec![cand(1, 10), cand(2, 20)], own_pid: Some(2), ..State::default() };
        state.results.insert(1, entry(cand(1, 10), Some(reading)));
        state.results.insert(2, entry(cand(2, 20), Some(reading)));
        let now = read_at + 1_000_000_000;
        assert_eq!(pick_next(&mut state, now, max_age), None, "nothing moved");
        // Both grew: another process is read again at once, the agent itself is not.
        state.candidates = vec![Candidate { faults: 7, ..cand(1, 30) }, Candidate { faults: 7, ..cand(2, 40) }];
        assert_eq!(pick_next(&mut state, now, max_age).map(|c| c.pid), Some(1));
        state.results.insert(1, entry(state.candidates[0], Some(PssReading { read_mono_ns: now, ..reading })));
        assert_eq!(pick_next(&mut state, now, max_age), None, "its own counters alone");
        assert_eq!(state.due_ns, read_at + max_age, "due when its reading ages");
        assert_eq!(pick_next(&mut state, read_at + max_age, max_age).map(|c| c.pid), Some(2), "aged out");
        // Someone looking at it gets a fresh one.
        state.asked.push_back(2);
        assert_eq!(pick_asked(&mut state, now).map(|c| c.pid), Some(2));
        // Another process under its pid (a host root's pid reused) is read as new.
        let mut state = State { candidates: vec![cand(2, 20)], own_pid: Some(2), ..State::default() };
        state.results.insert(2, entry(Candidate { start_ticks: 9, ..cand(2, 20) }, Some(reading)));
        assert_eq!(pick_next(&mut state, now, max_age).map(|c| c.pid), Some(2));
    }

    /// The agent knows its own pid as `/proc` numbers it, unless it is told its own process is
    /// what it watches (the Jupyter drop-in), where its counters count as anyone's.
    #[test]
    fn the_own_pid_rule_is_on_unless_the_agent_watches_itself() {
        for own_by_age in [true, false] {
            let limits = TargetLimits { own_by_age, ..TargetLimits::default() };
            let worker = PssWorker::start_with_limits(Root::default(), 0.0001, limits, Instant::now()).expect("starts");
            let own = worker.shared.lock().own_pid;
            assert_eq!(own, own_by_age.then(std::process::id), "own_by_age {own_by_age}");
        }
    }

    /// A target whose share of lock time is spent is not read before its time, however its
    /// counters move, and a capped one never again; another process under the same pid is.
    /// The sampler learns from the ledger that a process's read was refused (its row then says
    /// why it has no PSS), and only while its last read was: a later read that works clears it.
    #[test]
    fn a_refused_read_is_in_the_ledger_until_a_read_works() {
        let mut state = State::default();
        let refused = Failed { at_ns: 10, refused: true };
        state.results.insert(2, Entry { failed: Some(refused), ..entry(cand(2, 20), None) });
        state
            .results
            .insert(3, Entry { failed: Some(Failed { refused: false, ..refused }), ..entry(cand(3, 20), None) });
        let (reading, _, stall, _) = state.lookup(2, 1);
        assert!(reading.is_none() && stall.is_some_and(|s| s.refused), "{stall:?}");
        assert!(state.lookup(3, 1).2.is_some_and(|s| !s.refused), "failed, not refused");
        assert_eq!(state.lookup(2, 7), (None, false, None, None), "another process with pid 2");
        let reading = PssReading { rollup: Default::default(), read_mono_ns: 20, cost_cpu_ns: 0 };
        state.results.insert(2, entry(cand(2, 20), Some(reading)));
        assert!(state.lookup(2, 1).2.is_some_and(|s| !s.refused), "read since");
    }

    #[test]
    fn the_target_budget_holds_reads_back() {
        let mut state = State { candidates: vec![cand(1, 10), cand(2, 20)], ..State::default() };
        let reading = PssReading { rollup: Default::default(), read_mono_ns: 0, cost_cpu_ns: 0 };
        let capped = Stall { capped: true, ..Stall::default() };
        state.results.insert(1, Entry { not_before_ns: 5_000, ..entry(cand(1, 10), Some(reading)) });
        state.results.insert(2, Entry { stall: capped, ..entry(cand(2, 20), Some(reading)) });
        // Both changed since their readings.
        state.candidates = vec![cand(1, 11), cand(2, 21)];
        assert_eq!(pick_next(&mut state, 4_999, u64::MAX), None, "pid 1's time has not come; pid 2 is capped");
        assert_eq!(state.stats.skipped_target_budget, 2);
        assert_eq!(pick_next(&mut state, 5_000, u64::MAX).map(|c| c.pid), Some(1));
        assert_eq!(pick_next(&mut state, u64::MAX, u64::MAX).map(|c| c.pid), Some(1), "never pid 2");
        // A new process under pid 2 starts with a clean ledger.
        state.candidates[1] = Candidate { start_ticks: 99, ..cand(2, 21) };
        state.cursor = 1;
        assert_eq!(pick_next(&mut state, 0, u64::MAX).map(|c| c.pid), Some(2));
    }

    /// A process someone looks at is read before the round-robin's next, stale ones included,
    /// if it needs a reading; one that does not is dropped, one whose target budget is spent
    /// waits for it, a capped or unlisted one is dropped, and the list is bounded.
    #[test]
    fn asked_processes_are_read_first_within_their_target_budget() {
        let cands: Vec<Candidate> = (1..=5).map(|pid| cand(pid, 10)).collect();
        let mut state = State { candidates: cands.clone(), ..State::default() };
        // Never read: the round-robin would take 1, 2, 3 … first.
        state.asked.extend([4, 9]);
        assert_eq!(pick_next(&mut state, 0, u64::MAX).map(|c| c.pid), Some(4));
        assert_eq!(state.stats.asked_reads, 1);
        assert!(state.asked.is_empty(), "9 is not listed: dropped");
        assert_eq!(pick_next(&mut state, 0, u64::MAX).map(|c| c.pid), Some(1), "round-robin");

        // The smallest ask first, the oldest among equals: 3 (20) after 5 and 4 (10 each).
        state.candidates[2].resident_bytes = 20;
        state.asked.extend([3, 5, 4]);
        let picked: Vec<u32> = std::iter::from_fn(|| pick_asked(&mut state, 0).map(|c| c.pid)).collect();
        assert_eq!(picked, [5, 4, 3]);
        state.candidates[2].resident_bytes = 10;

        // Everything read; 2's family changes (stale), 3's counters move, 5 is unchanged.
        state.candidates[1].ppid = 7;
        read_all(&mut state, 100);
        state.changed.insert((7, 0), 200);
        state.candidates[2].faults = 7;
        state.asked.extend([5, 2, 3]);
        assert_eq!(pick_next(&mut state, 300, u64::MAX).map(|c| c.pid), Some(2), "5 needs no reading; 2 is stale");
        assert_eq!(pick_next(&mut state, 300, u64::MAX).map(|c| c.pid), Some(3), "3's counters moved");
        assert!(state.asked.is_empty());
        assert_eq!(state.stats.asked_reads, 3);

        // Its target's share is spent: it waits for it, then goes first.
        state.results.get_mut(&4).expect("read above").not_before_ns = 1_000;
        state.results.get_mut(&4).expect("read above").reading = None;
        state.asked.push_back(4);
        let next = pick_next(&mut state, 500, u64::MAX).map(|c| c.pid);
        assert_ne!(next, Some(4));
        assert_eq!(state.asked, [4]);
        assert_eq!(pick_next(&mut state, 1_000, u64::MAX).map(|c| c.pid), Some(4));

        // A capped target is never read for an ask.
        state.results.get_mut(&2).expect("read above").stall.capped = true;
        state.results.get_mut(&2).expect("read above").reading = None;
        state.asked.push_back(2);
        assert_ne!(pick_asked(&mut state, u64::MAX).map(|c| c.pid), Some(2));
        assert!(state.asked.is_empty());
    }

    /// [`PssWorker::ask`] keeps at most [`MAX_ASKED`] asks, the newest, each once.
    #[test]
    fn asks_are_bounded_and_kept_once() {
        let worker = PssWorker::start(Root::default(), 0.0001, Instant::now()).expect("the worker starts");
        for pid in 0..(MAX_ASKED as u32 + 10) {
            worker.ask(pid);
            worker.ask(pid);
        }
        let asked = worker.shared.lock().asked.clone();
        assert_eq!(asked.len(), MAX_ASKED);
        assert_eq!(asked.front(), Some(&10));
        assert_eq!(worker.shared.lock().asked_at.len(), MAX_ASKED, "one time for each ask kept");
    }

    /// The worker's thread runs on the slice asked, and the stats say so; asked for none, on the
    /// kernel's. SKIP where the kernel gives no thread a slice of its own (before 6.12).
    #[test]
    fn the_worker_thread_runs_on_the_slice_asked() {
        let probe = std::thread::spawn(|| proctor_procfs::system::set_thread_slice(200_000)).join().expect("joins");
        if let Err(why) = probe {
            eprintln!("SKIP: no slice of its own for a thread here: {why}");
            return;
        }
        let kernels = proctor_procfs::system::thread_slice_ns(0).expect("this thread's slice");
        for (asked, want) in [(DEFAULT_SLICE, 100_000), (Duration::ZERO, kernels)] {
            let limits = TargetLimits { slice: asked, ..TargetLimits::default() };
            let worker = PssWorker::start_with_limits(Root::default(), 0.0001, limits, Instant::now()).expect("starts");
            let deadline = Instant::now() + Duration::from_secs(30);
            while worker.shared.lock().thread_id == 0 {
                assert!(Instant::now() < deadline, "the worker did not start within 30 s");
                std::thread::sleep(Duration::from_millis(5));
            }
            let tid = worker.shared.lock().thread_id;
            let slice = proctor_procfs::system::thread_slice_ns(tid as u32).expect("the worker's slice");
            assert_eq!(slice, want, "asked {asked:?}: the kernel says the worker's thread runs on {slice} ns");
            let stats = worker.stats();
            assert_eq!(stats.slice_asked_ns, asked.as_nanos() as u64);
            assert_eq!(stats.slice_ns, if asked.is_zero() { 0 } else { want });
        }
    }

    /// The stats say how much longer the worker rests after its last read, and 0 once that
    /// rest is over.
    #[test]
    fn the_stats_say_how_long_the_worker_still_rests() {
        let worker = PssWorker::start(Root::default(), 0.0001, Instant::now()).expect("the worker starts");
        let now_ns = worker.epoch.elapsed().as_nanos() as u64;
        worker.shared.lock().rest_until_ns = now_ns + 60_000_000_000;
        let left = worker.stats().resting_ns;
        assert!(left > 50_000_000_000 && left <= 60_000_000_000, "{left}");
        worker.shared.lock().rest_until_ns = now_ns;
        assert_eq!(worker.stats().resting_ns, 0);
    }

    /// An ask not made again within [`ASK_TTL`] lapses (the page that made it shows other rows
    /// now), so it no longer goes before the asks still made; one made again does not.
    #[test]
    fn an_ask_not_made_again_lapses() {
        let ttl = ASK_TTL.as_nanos() as u64;
        let cands: Vec<Candidate> = (1..=3).map(|pid| cand(pid, 10 * u64::from(pid))).collect();
        let mut state = State { candidates: cands, ..State::default() };
        // 1 and 2 asked at 0 (a page before its filter), 3 at 0 and again at ttl.
        state.asked.extend([1, 2, 3]);
        state.asked_at.extend([(1, 0), (2, 0), (3, ttl)]);
        // Within the time, the smallest first.
        assert_eq!(pick_asked(&mut state, ttl).map(|c| c.pid), Some(1));
        // Past it, 2 lapsed and goes (its time too); 3, asked again, is read.
        assert_eq!(pick_asked(&mut state, ttl + 1).map(|c| c.pid), Some(3));
        assert!(state.asked.is_empty() && state.asked_at.is_empty(), "{:?} {:?}", state.asked, state.asked_at);
    }

    /// Where waits are traced, a big target whose threads waited on a read stays on pagemap
    /// after walks nobody waited on (its step back undone), and its family's big members start
    /// there; another family's, and a small member, do not; a wait of nothing changes nothing.
    #[test]
    fn a_target_that_waited_and_its_family_stay_on_pagemap() {
        let big = PAGEMAP_FROM_BYTES;
        let worker = |pid, rss| Candidate { ppid: 1, name: family_name("python3"), ..cand(pid, rss) };
        let other = Candidate { ppid: 1, name: family_name("java"), ..cand(9, big) };
        let mut state = State { traced: true, ..State::default() };
        state.stats.pagemap = true;
        let list = vec![worker(2, big), worker(3, big), worker(4, 10), other];
        state.set_candidates(list.clone(), Default::default(), 0);
        state.set_candidates(list, Default::default(), 1);
        assert_eq!(by_pages(&state), Vec::<u32>::new());
        state.results.insert(9, entry(other, None));
        state.note_wait(&other, Some(0));
        assert_eq!(by_pages(&state), Vec::<u32>::new(), "waited nothing");
        let share = 0.001;
        let mut first = entry(worker(2, big), None);
        first.after_read(10_000_000, share, Some(3_000_000), 0);
        state.results.insert(2, first);
        state.note_wait(&worker(2, big), Some(3_000_000));
        assert_eq!(by_pages(&state), [2, 3], "it and its big sibling, never read yet");
        // A walk nobody waited on takes the step back away, not the way of reading.
        let e = state.results.get_mut(&2).expect("read");
        e.after_read(100_000, share, Some(0), 1);
        assert_eq!(e.backoff, 0);
        assert_eq!(by_pages(&state), [2, 3]);
    }

    /// A big target whose threads waited on a read, or (untraced) that faulted between the last
    /// two lists, is read through pagemap; a quiet or small one through smaps_rollup.
    #[test]
    fn busy_big_targets_are_read_by_pages() {
        let big = PAGEMAP_FROM_BYTES;
        let at = |pid, rss, faults| Candidate { faults, ..cand(pid, rss) };
        let mut state = State::default();
        state.stats.pagemap = true;
        state.set_candidates(vec![at(1, big, 5), at(2, big, 5), at(3, 10, 5), at(4, big, 5)], Default::default(), 0);
        assert_eq!(by_pages(&state), Vec::<u32>::new(), "one list tells nobody busy");
        state.set_candidates(vec![at(1, big, 9), at(2, big, 5), at(3, 10, 9), at(4, big, 5)], Default::default(), 1);
        let waited = Entry { backoff: 1, ..entry(at(4, big, 5), None) };
        state.results.insert(4, waited);
        assert_eq!(by_pages(&state), [1, 4]);
        // Quiet again: only the one that waited.
        state.set_candidates(vec![at(1, big, 9), at(2, big, 5), at(3, 10, 9), at(4, big, 5)], Default::default(), 2);
        assert_eq!(by_pages(&state), [4]);
        // Where waits are traced, faults alone do not choose pagemap.
        state.set_candidates(vec![at(1, big, 12), at(2, big, 5), at(3, 10, 9), at(4, big, 5)], Default::default(), 3);
        state.traced = true;
        assert_eq!(by_pages(&state), [4]);
        state.traced = false;
        // A big process is read from its second list on; a small one at once.
        state.set_candidates(vec![at(1, big, 9), at(5, big, 0), at(6, 10, 0)], Default::default(), 4);
        state.results.clear();
        let picked: Vec<u32> =
            std::iter::from_fn(|| pick_next(&mut state, 0, u64::MAX).map(|c| c.pid)).take(2).collect();
        assert!(!picked.contains(&5) && picked.contains(&6), "{picked:?}");
        state.set_candidates(vec![at(1, big, 9), at(5, big, 0)], Default::default(), 5);
        state.cursor = 1;
        assert_eq!(pick_next(&mut state, 0, u64::MAX).map(|c| c.pid), Some(5));

        // A busy big target whose walk the savings could not pay is read through smaps_rollup.
        state.stats.budget = 0.005;
        state.set_candidates(vec![at(1, big, 10), at(7, 16 * big, 0)], Default::default(), 6);
        state.set_candidates(vec![at(1, big, 11), at(7, 16 * big, 1)], Default::default(), 7);
        assert_eq!(by_pages(&state), [1, 7], "no walk measured yet");
        let cap = Savings::cap(0.005);
        // The last walk: 2.5 × the savings for a target of 16 × big (past the overdraft), so
        // 0.15625 × for one of big.
        state.pagemap_ns_per_byte = Some(2.5 * cap / (16 * big) as f64);
        assert_eq!(by_pages(&state), [1]);
        // 1.5 × the savings for 16 × big: within what they may be overdrawn to.
        state.pagemap_ns_per_byte = Some(1.5 * cap / (16 * big) as f64);
        assert_eq!(by_pages(&state), [1, 7], "a walk may overdraw the savings");
        state.pagemap_ns_per_byte = Some(2.5 * cap / (16 * big) as f64);

        // A quiet big target whose smaps_rollup would hold its lock past the cap, at the last
        // read's rate, is walked, if the savings can pay; a smaller one is not.
        state.set_candidates(vec![at(8, 2 * big, 0), at(9, 8 * big, 0), at(10, 32 * big, 0)], Default::default(), 8);
        state.set_candidates(vec![at(8, 2 * big, 0), at(9, 8 * big, 0), at(10, 32 * big, 0)], Default::default(), 9);
        assert_eq!(by_pages(&state), Vec::<u32>::new(), "no cap known");
        state.max_hold_ns = Some(50_000_000);
        assert_eq!(by_pages(&state), Vec::<u32>::new(), "no rate known");
        // 20 ms for a target of 2 × big: 30 ms with the margin, 120 ms for 8 × big.
        state.note_rollup_rate(20_000_000.0 / (2 * big) as f64, false);
        assert_eq!(by_pages(&state), [9], "32 × big: a walk past the overdraft");
        // 30 ms: 45 ms with the margin for 2 × big, under the cap; 40 ms: 60 ms, past it.
        state.note_rollup_rate(30_000_000.0 / (2 * big) as f64, false);
        assert_eq!(by_pages(&state), [9]);
        state.note_rollup_rate(40_000_000.0 / (2 * big) as f64, false);
        assert_eq!(by_pages(&state), [8, 9]);
        // The slow read stays in the prediction for the next ROLLUP_RATES - 1 reads at 20 ms
        // (the machine is as busy as it was a few reads ago), and leaves with the next.
        for _ in 1..ROLLUP_RATES {
            state.note_rollup_rate(20_000_000.0 / (2 * big) as f64, false);
            assert_eq!(by_pages(&state), [8, 9], "{:?}", state.rollup_rates);
        }
        state.note_rollup_rate(20_000_000.0 / (2 * big) as f64, false);
        assert_eq!(by_pages(&state), [9]);
        // Slow again, for what follows.
        state.note_rollup_rate(40_000_000.0 / (2 * big) as f64, false);

        // A walk of 32 × big stopped at its limit after meeting 4 × big of it: charged per byte
        // it met, 8 × big would cost twice the limit and is not walked. Over the whole size, as
        // before, every one looked affordable, 32 × big itself included.
        let limit = Savings::walk_limit(0.005) as u64;
        state.pagemap_ns_per_byte = Some(walk_ns_per_byte(limit, Some(4 * big), 32 * big));
        assert_eq!(by_pages(&state), [8]);
        state.pagemap_ns_per_byte = Some(walk_ns_per_byte(limit, None, 32 * big));
        assert_eq!(by_pages(&state), [8, 9, 10], "a finished walk's rate is over the whole size");
        // One that met nothing before it stopped is charged as if it met a page.
        assert_eq!(walk_ns_per_byte(limit, Some(0), 32 * big), limit as f64 / 4096.0);
    }

    /// A walk's rate that rules walks out is forgotten WALK_RETRY after the walk that gave it:
    /// the next busy big target is walked again (one walk a little past the savings, stopped
    /// there, sent every busy 1 GiB child through smaps_rollup until the agent stopped), and
    /// until then each read that wanted a walk and did not get one says so.
    #[test]
    fn a_walk_too_dear_rules_walks_out_for_a_while_and_says_so() {
        let big = PAGEMAP_FROM_BYTES;
        let at = |pid, resident, faults| Candidate { faults, ..cand(pid, resident) };
        let mut state = State::default();
        state.stats.budget = 0.005;
        state.stats.pagemap = true;
        state.set_candidates(vec![at(1, 16 * big, 0), at(2, 16 * big, 0)], Default::default(), 0);
        state.set_candidates(vec![at(1, 16 * big, 1), at(2, 16 * big, 0)], Default::default(), 1);
        let (busy, quiet) = (state.candidates[0], state.candidates[1]);
        let never = || -> bool { panic!("the host asked where its answer does not matter") };
        assert_eq!(how_to_read(&state, &busy, 0, never), (How::Pages, false), "no walk measured yet");
        // With no rate known, a walk may spend the savings only.
        let savings = Savings::cap(0.005);
        assert_eq!(state.walk_limit_ns(0), savings as u64);
        // The last walk, ended at 10 s: 1.9 × the savings for a target this size, within what
        // they may be overdrawn to, and walked with that overdraft; then 2.1 ×, past it.
        let s = 1_000_000_000u64;
        state.pagemap_ns_per_byte = Some(1.9 * savings / (16 * big) as f64);
        state.pagemap_rate_at_ns = 10 * s;
        assert_eq!(how_to_read(&state, &busy, 10 * s, never), (How::Pages, false));
        assert_eq!(state.walk_limit_ns(10 * s), (savings * WALK_OVERDRAFT) as u64);
        assert_eq!(state.walk_limit_ns(10 * s + WALK_RETRY_NS), savings as u64, "the rate forgotten");
        state.pagemap_ns_per_byte = Some(2.1 * savings / (16 * big) as f64);
        assert_eq!(how_to_read(&state, &busy, 10 * s, never), (How::Rollup, true));
        assert_eq!(how_to_read(&state, &busy, 10 * s + WALK_RETRY_NS - 1, never), (How::Rollup, true));
        // A quiet one wanted no walk: read whole, and not counted.
        assert_eq!(how_to_read(&state, &quiet, 10 * s, never), (How::Rollup, false));
        assert_eq!(
            how_to_read(&state, &busy, 10 * s + WALK_RETRY_NS, never),
            (How::Pages, false),
            "the rate forgotten"
        );
        // Where pagemap cannot be read there is no walk to want.
        state.stats.pagemap = false;
        assert_eq!(how_to_read(&state, &busy, 10 * s, never), (How::Rollup, false));
    }

    /// Where the worker may run on fewer CPUs than the host has, those CPUs count as a crowd
    /// when all of them were busy 90 % of the last second, whatever the host's run queue
    /// says; where it may run on all of them, only the host's run queue counts.
    #[test]
    fn a_cpuset_whose_cpus_are_all_busy_is_a_crowd() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Root::new(dir.path());
        std::fs::create_dir_all(dir.path().join("proc")).expect("proc");
        std::fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).expect("sys");
        std::fs::write(dir.path().join("sys/devices/system/cpu/online"), "0-3\n").expect("online");
        // One task runnable on a host of four CPUs: no crowd there.
        std::fs::write(dir.path().join("proc/loadavg"), "0.50 0.40 0.30 1/200 4000\n").expect("loadavg");
        // Each CPU's (busy, idle) ticks.
        let stat = |cpus: [(u64, u64); 4]| {
            let mut text = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
            for (i, (busy, idle)) in cpus.iter().enumerate() {
                text += &format!("cpu{i} {busy} 0 0 {idle} 0 0 0 0 0 0\n");
            }
            std::fs::write(dir.path().join("proc/stat"), text).expect("stat");
        };
        const S: u64 = 1_000_000_000;
        let mut pinned = Crowd::new(&root, Some(vec![0, 1]));
        let mut everywhere = Crowd::new(&root, Some(vec![0, 1, 2, 3]));
        assert!(pinned.narrower() && !everywhere.narrower());
        stat([(1000, 1000), (1000, 1000), (0, 2000), (0, 2000)]);
        pinned.tick(&root, 0);
        everywhere.tick(&root, 0);
        assert!(!pinned.busy(&root, 0), "no reading a window old yet");
        // The next second: CPUs 0 and 1 busy 95 of 100 ticks each, 2 and 3 idle.
        stat([(1095, 1005), (1095, 1005), (0, 2100), (0, 2100)]);
        assert!(pinned.busy(&root, S), "both CPUs of the set busy 95 %");
        assert!(!everywhere.busy(&root, S), "the host's run queue alone: one task on four CPUs");
        // One of the two CPUs idle half of the next second: the set has room.
        pinned.tick(&root, S);
        stat([(1195, 1005), (1145, 1055), (0, 2200), (0, 2200)]);
        assert!(!pinned.busy(&root, 2 * S), "75 % busy over the set");
        // Both busy 95 % again over the next second.
        pinned.tick(&root, 2 * S);
        stat([(1290, 1010), (1240, 1060), (0, 2300), (0, 2300)]);
        assert!(pinned.busy(&root, 3 * S));
        // Asked 0.1 s after a reading: judged over the reading before it.
        pinned.tick(&root, 3 * S);
        assert!(pinned.busy(&root, 3 * S + S / 10), "over the reading a second before the last");
        // Busy all along since, but the last reading is six seconds old: no answer from it.
        stat([(1890, 1010), (1840, 1060), (0, 2900), (0, 2900)]);
        assert!(!pinned.busy(&root, 9 * S), "the last reading is 6 s old");
        // The host's own crowd counts for both.
        std::fs::write(dir.path().join("proc/loadavg"), "5.00 4.00 3.00 6/200 4000\n").expect("loadavg");
        assert!(pinned.busy(&root, 8 * S) && everywhere.busy(&root, 8 * S));
    }

    /// While the host has more runnable tasks than CPUs, a recent rate from a read begun without
    /// that crowd counts BUSY_FACTOR ×: a big target whose `smaps_rollup` would pass the cap only
    /// so is walked where the savings can pay, else put off, as is one past it at the plain rate,
    /// for PUT_OFF at a time and PUT_OFF_LIMIT in a row. The host is asked only where that
    /// matters. A put-off target is not picked again before PUT_OFF, its row says why until it
    /// is read, and it is read once due.
    #[test]
    fn a_read_likely_past_the_cap_in_a_crowd_is_walked_or_put_off() {
        let big = PAGEMAP_FROM_BYTES;
        let mut state = State { max_hold_ns: Some(50_000_000), ..State::default() };
        state.stats.budget = 0.005;
        state.stats.pagemap = true;
        let list = vec![cand(1, 10), cand(2, 2 * big)];
        state.set_candidates(list.clone(), Default::default(), 0);
        state.set_candidates(list, Default::default(), 1);
        let (small, target) = (state.candidates[0], state.candidates[1]);
        let never = || -> bool { panic!("the host asked where its answer does not matter") };
        let how = |state: &State, crowded: bool| how_only(state, &target, 0, || crowded);
        assert_eq!(how_only(&state, &small, 0, never), How::Rollup);
        assert_eq!(how_only(&state, &target, 0, never), How::Rollup, "no rate known");
        // 20 ms for 2 × big, begun without a crowd: 30 ms with the margin, under the 50 ms cap;
        // 60 ms in a crowd.
        state.note_rollup_rate(20_000_000.0 / (2 * big) as f64, false);
        assert_eq!(how(&state, false), How::Rollup, "a quiet host");
        assert_eq!(how(&state, true), How::Pages, "a crowd, and no walk measured yet");
        // A walk of it would cost three times the savings, past what they may be overdrawn to.
        state.pagemap_ns_per_byte = Some(3.0 * Savings::cap(0.005) / (2 * big) as f64);
        assert_eq!(how(&state, true), How::PutOff);
        assert_eq!(how(&state, false), How::Rollup);
        // Where pagemap cannot be read, as where no walk fits.
        state.pagemap_ns_per_byte = None;
        state.stats.pagemap = false;
        assert_eq!(how(&state, true), How::PutOff);
        // 25 ms begun in a crowd carries its stretch: 37.5 ms in a crowd, with the quiet 20 ms
        // read gone from the window.
        state.rollup_rates.clear();
        state.note_rollup_rate(25_000_000.0 / (2 * big) as f64, true);
        assert_eq!(how_only(&state, &target, 0, never), How::Rollup);
        // 10 ms begun without: 30 ms in a crowd, even so.
        state.rollup_rates.clear();
        state.note_rollup_rate(10_000_000.0 / (2 * big) as f64, false);
        assert_eq!(how(&state, true), How::Rollup);
        // Past the cap at the plain rate: read whole on a quiet host (that read brings a new
        // rate), put off in a crowd.
        state.note_rollup_rate(40_000_000.0 / (2 * big) as f64, false);
        assert_eq!(how(&state, false), How::Rollup);
        assert_eq!(how(&state, true), How::PutOff);

        // Put off at 5 s: the small one is read, the target waits, says why, and is due at 6 s.
        let s = 1_000_000_000;
        state.put_off(&target, 5 * s);
        assert_eq!(state.stats.put_off_busy, 1);
        let stall = state.lookup(2, 1).2;
        assert!(stall.is_some_and(|s| s.put_off && s.reads == 0), "{stall:?}");
        assert_eq!(pick_next(&mut state, 5 * s, u64::MAX).map(|c| c.pid), Some(1));
        state.results.insert(1, entry(small, Some(read_at(5 * s))));
        assert_eq!(pick_next(&mut state, 5 * s + s / 2, u64::MAX), None);
        assert_eq!(state.due_ns, 5 * s + PUT_OFF.as_nanos() as u64, "due when the put-off ends");
        assert_eq!(pick_next(&mut state, 6 * s, u64::MAX).map(|c| c.pid), Some(2));
        // Put off again and again in a crowd, until PUT_OFF_LIMIT after the first.
        let limit = PUT_OFF_LIMIT.as_nanos() as u64;
        assert_eq!(how_only(&state, &target, 5 * s + limit - 1, || true), How::PutOff);
        assert_eq!(how_only(&state, &target, 5 * s + limit, || true), How::Rollup);
        state.put_off(&target, 6 * s);
        assert_eq!(state.results.get(&2).and_then(|e| e.put_off_since_ns), Some(5 * s), "in a row");
        // An old reading is kept while a read is put off; a read clears the note.
        state.results.insert(2, entry(target, Some(read_at(16 * s))));
        state.put_off(&target, 17 * s);
        let (reading, _, stall, _) = state.lookup(2, 1);
        assert!(reading.is_some() && stall.is_some_and(|s| s.put_off), "{stall:?}");
        assert_eq!(how_only(&state, &target, 17 * s + limit - 1, || true), How::PutOff, "a new row");
        state.results.get_mut(&2).expect("entry").put_off_since_ns = None;
        assert!(state.lookup(2, 1).2.is_some_and(|s| !s.put_off));
    }

    /// The first pass reads the smallest processes first (among equals, from the cursor on),
    /// so one big target's read and the rest after it do not hold back everyone's first reading.
    #[test]
    fn the_first_pass_reads_the_smallest_first() {
        let mut state = State {
            candidates: vec![cand(1, 900), cand(2, 10), cand(3, 500), cand(4, 10), cand(5, 20)],
            cursor: 3,
            ..State::default()
        };
        let mut order = Vec::new();
        while let Some(c) = pick_next(&mut state, 0, u64::MAX) {
            order.push(c.pid);
            let reading = PssReading { rollup: Default::default(), read_mono_ns: 0, cost_cpu_ns: 0 };
            let entry = entry(c, Some(reading));
            state.results.insert(c.pid, entry);
        }
        assert_eq!(order, [4, 2, 5, 3, 1]);
    }

    /// A server (10) forking workers of its name: while one (13) is young, a worker younger than
    /// [`SETTLE`] (11) waits, as its reading would be stale once 13 joins; one older (12) and
    /// an unrelated process (20) are read. In the next list, with 13 a member, 11 and 13 are.
    #[test]
    fn a_young_workers_siblings_wait_for_it_to_join() {
        let set = |pids: &[u32]| pids.iter().copied().collect::<PidSet>();
        let list = vec![
            member(11, 10, "gunicorn"),
            member(12, 10, "gunicorn"),
            member(13, 10, "gunicorn"),
            member(20, 1, "sshd"),
        ];
        let mut state = State::default();
        state.set_candidates(list.clone(), set(&[13]), 0);
        state.set_settling(set(&[11, 13, 20]));
        let mut order = Vec::new();
        while let Some(c) = pick_next(&mut state, 1, u64::MAX) {
            order.push(c.pid);
            state.results.insert(c.pid, entry(c, Some(read_at(1))));
        }
        assert_eq!(order, [12, 20]);
        assert!(state.stats.skipped_settling > 0 && state.stats.skipped_young > 0);
        state.set_candidates(list, set(&[]), 2);
        state.set_settling(set(&[11, 13]));
        let mut order = Vec::new();
        while let Some(c) = pick_next(&mut state, 3, u64::MAX) {
            order.push(c.pid);
            state.results.insert(c.pid, entry(c, Some(read_at(3))));
        }
        // 12's reading went stale when 13 joined: read again, with the two new.
        order.sort_unstable();
        assert_eq!(order, [11, 12, 13]);
    }

    /// A server (10) with five workers forked from it: four clones (same resident size and
    /// faults: 11–14) and one that did more (15); and an unrelated process of their name and
    /// counters under another parent (20). Once one clone is read, its reading stands in for
    /// the other three, who are read last, each checked then; never for 15 or 20. A reading
    /// more than [`CLONE_TOLERANCE`] off its stand-in's ends the family's estimates.
    #[test]
    fn a_clones_reading_stands_in_for_the_others_until_each_is_read() {
        let worker = |pid, faults| Candidate { resident_bytes: 1 << 30, faults, ..member(pid, 10, "gunicorn") };
        let server = Candidate { resident_bytes: 1 << 20, ..member(10, 1, "gunicorn") };
        let stranger = Candidate { ppid: 1, ..worker(20, 700) };
        let list =
            vec![server, worker(11, 700), worker(12, 700), worker(13, 700), worker(14, 700), worker(15, 900), stranger];
        // Traced, so big processes are read from their first list.
        let mut state = State { traced: true, ..State::default() };
        state.set_candidates(list, Default::default(), 0);
        // `anon` MiB of anonymous PSS and `file` MiB of file PSS, which moves with unrelated
        // processes mapping the same files and is not held against a clone.
        let with_file = |anon: u64, file: u64, at: u64| PssReading {
            rollup: proctor_procfs::process::SmapsRollup {
                pss_bytes: Some((anon + file) << 20),
                pss_anon_bytes: Some(anon << 20),
                pss_file_bytes: Some(file << 20),
                ..Default::default()
            },
            read_mono_ns: at,
            cost_cpu_ns: 0,
        };
        let pss = |anon: u64, at: u64| with_file(anon, 1, at);
        let read = |state: &mut State, c: Candidate, mib: u64| {
            // 13's file part moved by a MiB since 11 was read: not a difference between clones.
            let reading = with_file(mib, if c.pid == 13 { 2 } else { 1 }, 10);
            state.note_clone(&c, &reading);
            state.results.insert(c.pid, entry(c, Some(reading)));
        };
        let mut order = Vec::new();
        while let Some(c) = pick_next(&mut state, 20, u64::MAX) {
            order.push(c.pid);
            if order.len() == 3 {
                // 11 stands in for 13 while it is not read: its lookup says so.
                let (own, stale, _, estimate) = state.lookup(13, 1);
                assert_eq!(
                    (own, stale, estimate.map(|e| (e.0, e.1.rollup.pss_anon_bytes))),
                    (None, false, Some((11, Some(100 << 20))))
                );
                assert!(state.lookup(15, 1).3.is_none() && state.lookup(20, 1).3.is_none(), "not clones");
            }
            read(&mut state, c, if c.pid == 14 { 103 } else { 100 });
        }
        // The server first (smallest), one clone, the two that are not its clones, then the
        // clones it stood in for, in the order they were passed over.
        assert_eq!(order[..2], [10, 11]);
        assert_eq!(order[2..4].iter().copied().collect::<std::collections::BTreeSet<_>>(), [15, 20].into());
        assert_eq!(order[4..], [12, 13, 14]);
        assert_eq!((state.stats.estimates_checked, state.stats.estimates_off), (3, 1));
        assert!((state.stats.estimate_worst_error - 3.0 / 103.0).abs() < 1e-9);
        assert!(state.unlike.contains(&(10, family_name("gunicorn"))));
        // Read since, nobody needs a stand-in; a family whose stand-in was off gets none.
        state.results.remove(&13);
        assert!(state.lookup(13, 1).3.is_none(), "the family is unlike");
        // A stale own reading takes a fresh clone's stand-in; a stale clone stands in for none.
        state.unlike.clear();
        state.results.get_mut(&12).expect("read").reading = Some(pss(100, 0));
        state.changed.insert((10, family_name("gunicorn")), 5);
        assert!(state.lookup(12, 1).1, "read before its family changed");
        let (_, _, _, estimate) = state.lookup(12, 1);
        assert_eq!(estimate.map(|e| e.0), Some(14), "14 was read last, after the change");
        state.results.get_mut(&14).expect("read").reading = Some(pss(103, 0));
        assert!(state.lookup(12, 1).3.is_none() && state.lookup(13, 1).3.is_none(), "the clone's is stale too");
    }

    /// Workers forked while their server still grew are a few pages apart in resident size (a
    /// fault or two in faults): clones, within [`CLONE_NEAR_BYTES`], and the nearest reading
    /// stands in. 17 pages apart they are not; nor a small process 2 pages from its sibling
    /// (1/256 of its 1 MiB is one page).
    #[test]
    fn clones_may_be_a_few_pages_apart() {
        let page = 4096;
        let worker = |pid, pages: u64, faults| Candidate {
            resident_bytes: (1 << 30) + pages * page,
            faults,
            ..member(pid, 10, "gunicorn")
        };
        let small = |pid, pages: u64| Candidate { resident_bytes: (256 + pages) * page, ..member(pid, 30, "sh") };
        let list = vec![
            worker(11, 0, 700),
            worker(12, 8, 701),
            worker(13, 12, 700),
            worker(14, 17, 700),
            worker(15, 4, 704),
            worker(16, 10, 707),
            small(31, 0),
            small(32, 0),
            small(33, 2),
        ];
        let mut state = State { traced: true, ..State::default() };
        state.set_candidates(list.clone(), Default::default(), 0);
        let read = |state: &mut State, pid: u32| {
            let c = *list.iter().find(|c| c.pid == pid).expect("listed");
            let reading = read_at(u64::from(pid));
            state.note_clone(&c, &reading);
            state.results.insert(pid, entry(c, Some(reading)));
        };
        let from = |state: &State, pid| state.lookup(pid, 1).3.map(|e| e.0);
        read(&mut state, 11);
        read(&mut state, 31);
        let stood_in: Vec<_> = [12, 13, 14, 15, 16, 32, 33].into_iter().map(|pid| (pid, from(&state, pid))).collect();
        assert_eq!(
            stood_in,
            [(12, Some(11)), (13, Some(11)), (14, None), (15, Some(11)), (16, None), (32, Some(31)), (33, None)],
            "8 pages and a fault, 12 pages, 4 pages and 4 faults are near; 17 pages, 10 and 7 faults, or 2 of a small one's are not"
        );
        // 14 read: the nearer reading stands in for 13 (5 pages from 14's, 12 from 11's).
        read(&mut state, 14);
        assert_eq!((from(&state, 13), from(&state, 12), from(&state, 14)), (Some(14), Some(11), None));
        // A reading checked against its stand-in within the tolerance keeps the family's.
        read(&mut state, 13);
        assert_eq!((state.stats.estimates_checked, state.stats.estimates_off), (1, 0));
        assert_eq!(from(&state, 16), Some(13), "10 and 7 faults from 11's, 2 pages and 7 faults from 13's");
    }
}
