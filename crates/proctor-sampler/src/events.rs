//! Process starts and ends in each sample (issue 35): the BPF process events (proctor-bpf's
//! `Subscription`) turned into the sample's `exited` list, and every sample's coverage — the
//! processes the kernel started against those proctor saw — with or without the events.
//!
//! The events are drained before the process scan, so a sample holds every exit up to its own
//! scan. An exit is *seen* when the previous sample's table (or this one's) had the process;
//! else it lived and ended between two samples and only its events tell of it.
//!
//! Coverage is exact with the events: the kernel's fork count is read just before the first
//! drain, and a second drain after the scan takes the exits of processes the scan did not
//! list (they ended while it ran: counted, and not in the table), leaving every other event
//! for the next sample. So each process counted by a sample's forks is in its table or its
//! exits. A process that started after the count and that the sample saw anyway is counted by
//! the next sample's forks: it is carried there (`EventStarts::seen_before`), not lost. Its command
//! line is its exec's (when the event had all of it) or what proctor last read; its cgroup the
//! row's, or the path the table learned for its cgroup id pair, or its cgroup2 id looked up under
//! the cgroup2 mount, or (a hybrid host) its parent's.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use proctor_bpf::{Counts, Event, ExecEvent, Subscription};
use proctor_model::{EventStarts, ExitedProcess, ProcessSample, SampleCost, Starts, MAX_EXITED};
use proctor_procfs::process::ProcessMap;

/// Execs of processes not yet in a sample, kept until their process is listed or ends.
const PENDING_EXECS: usize = 65_536;
/// A cgroup id not found is looked for again (one walk of the cgroup2 mount) at most this often.
const CGROUP_REWALK_NS: u64 = 10_000_000_000;
/// Directories one walk of the cgroup2 mount visits at most.
const CGROUP_WALK_MAX: usize = 100_000;

/// Of `new` ((pid, start ticks)), those younger than [`YOUNG_FORK_NS`] at `now_boot_ns` that
/// started after the events began (`began_boot_ns`) and have no exec (`exec'd`). The events see
/// every exec since they began, so such a process has only forked. One started before they
/// began may have exec'd unseen (a command started just before the agent), and is read at once.
/// A start in ticks is the true start rounded down, so one in the tick the events began in
/// counts as before them.
fn young_forks(
    new: &[(u32, u64)],
    execd: impl Fn(&(u32, u64)) -> bool,
    now_boot_ns: u64,
    began_boot_ns: u64,
    ns_per_tick: u64,
) -> Vec<(u32, u64)> {
    new.iter()
        .filter(|&&(_, start)| young_since(start, now_boot_ns, began_boot_ns, ns_per_tick))
        .filter(|key| !execd(key))
        .copied()
        .collect()
}

/// Whether a process started at `start` ticks began after `began_boot_ns` and is younger than
/// [`YOUNG_FORK_NS`] at `now_boot_ns` ([`young_forks`]).
fn young_since(start: u64, now_boot_ns: u64, began_boot_ns: u64, ns_per_tick: u64) -> bool {
    let start_ns = start.saturating_mul(ns_per_tick);
    start_ns >= began_boot_ns && now_boot_ns.saturating_sub(start_ns) < YOUNG_FORK_NS
}

/// A forked child that has not exec'd, first seen younger than this, has its command line read
/// at the next sample rather than this one ([`ExecCmdlines::young_forks`]).
pub(crate) const YOUNG_FORK_NS: u64 = 100_000_000;

/// Command lines from exec events, for the cmdline worker ([`Churn::exec_cmdlines`]).
#[derive(Debug, Default)]
pub(crate) struct ExecCmdlines {
    pub(crate) known: Vec<(u32, u64, Arc<[String]>)>,
    pub(crate) reread: Vec<(u32, u64)>,
    /// New processes that have not exec'd since the events began and are younger than
    /// [`YOUNG_FORK_NS`]: forked children, whose command line is their parent's copy unless
    /// they rewrite it, and most of which are gone by the next sample (a fork storm's, a
    /// pool's short tasks, a shell's subshells). Their exit is told whole by its events, and
    /// a line read now would reach only the next sample's row; so the read waits for that
    /// sample, if the process is still there.
    pub(crate) young_forks: Vec<(u32, u64)>,
}

/// What a process of the previous sample was, for its exit.
#[derive(Debug, Clone)]
struct Prev {
    pid: u32,
    start_ticks: u64,
    threads: u64,
    cmdline: Option<Arc<[String]>>,
    cgroup: Option<Arc<str>>,
}

#[derive(Debug)]
pub(crate) struct EventsState {
    sub: Subscription,
    counts: Counts,
    /// The counts read just before this sample's first drain.
    counted: Option<Counts>,
    drained: Vec<Arc<Event>>,
    /// Events the drain after the scan took that belong to the next sample.
    early: Vec<Arc<Event>>,
    /// Processes this sample saw that the next sample's fork count has (they started after
    /// this one's count).
    seen_ahead: u64,
    pending_execs: ProcessMap<Arc<Event>>,
    cgroups: CgroupIds,
    /// The boot clock when this state was made, after the events were attached: a process
    /// started later has every exec of its among the events.
    began_boot_ns: u64,
}

impl EventsState {
    pub(crate) fn new(sub: Subscription) -> EventsState {
        let counts = sub.counts();
        EventsState {
            sub,
            counts,
            counted: None,
            drained: Vec::new(),
            early: Vec::new(),
            seen_ahead: 0,
            pending_execs: ProcessMap::default(),
            cgroups: CgroupIds::find(),
            began_boot_ns: crate::net::boot_ns(),
        }
    }
}

/// Starts and ends across samples: the events where they run, and the previous sample's
/// processes in any case (for `/proc`'s own coverage and to know an exit as seen).
#[derive(Debug)]
pub(crate) struct Churn {
    pub(crate) events: Result<EventsState, Option<String>>,
    prev: Option<Vec<Prev>>,
    prev_forks: Option<u64>,
    dropped: u64,
    /// Ended processes waiting one sample for their last thread's final CPU figure.
    held: Vec<(ExitedProcess, Arc<Event>)>,
    ns_per_tick: u64,
    page_size: u64,
    /// The names of recent exits, shared by the rows that have them.
    names: RecentNames,
}

/// The last few distinct names given to ended processes: a storm's thousand exits a sample
/// share a handful of names, each kept once (no allocation a row), and the rows that share a
/// name share its allocation, which later steps can compare by address.
#[derive(Debug, Default)]
struct RecentNames(Vec<Arc<str>>);

impl RecentNames {
    const KEPT: usize = 16;

    fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(i) = self.0.iter().position(|n| &**n == name) {
            // The most used stay near the front.
            if i > 0 {
                self.0.swap(i, i - 1);
            }
            return Arc::clone(&self.0[i.saturating_sub(1)]);
        }
        let new: Arc<str> = Arc::from(name);
        if self.0.len() == Self::KEPT {
            self.0.pop();
        }
        self.0.push(Arc::clone(&new));
        new
    }
}

impl Churn {
    /// `ticks`: the clock tick rate (`stat`'s start times count them).
    pub(crate) fn new(events: Result<EventsState, Option<String>>, ticks: u64, page_size: u64) -> Churn {
        Churn {
            events,
            prev: None,
            prev_forks: None,
            dropped: 0,
            held: Vec::new(),
            ns_per_tick: 1_000_000_000 / ticks.max(1),
            page_size,
            names: RecentNames::default(),
        }
    }

    /// Before the scan: reads the kernel's counts, then takes every event so far (after those
    /// the drain after the last scan left for this sample).
    pub(crate) fn drain(&mut self) {
        if let Ok(state) = self.events.as_mut() {
            state.counted = Some(state.sub.counts());
            state.drained.append(&mut state.early);
            self.dropped += state.sub.drain(&mut state.drained);
        }
    }

    /// After the scan (`processes` sorted by pid): takes the exits of processes the scan did not
    /// list — they ended while it ran, before it reached them — with their other events; the
    /// rest wait for the next sample.
    pub(crate) fn drain_after_scan(&mut self, processes: &[ProcessSample]) {
        let Ok(state) = self.events.as_mut() else { return };
        let mut more = Vec::new();
        self.dropped += state.sub.drain(&mut more);
        if self.prev.is_none() {
            // The first sample counts nothing and lists every process: the next sample counts
            // from here, so that what this one saw is not counted again.
            state.counted = Some(state.sub.counts());
        }
        if more.is_empty() {
            return;
        }
        let tick = self.ns_per_tick.max(1);
        let key = |event: &Event| match event {
            Event::Exec(e) => (e.pid, e.start_boottime_ns / tick),
            Event::Exit(x) => (x.pid, x.start_boottime_ns / tick),
            Event::Final(f) => (f.pid, f.start_boottime_ns / tick),
        };
        let listed = |(pid, start): (u32, u64)| {
            processes.binary_search_by_key(&pid, |p| p.pid).is_ok_and(|i| processes[i].start_ticks == start)
        };
        let unlisted_exits: std::collections::HashSet<(u32, u64)> =
            more.iter().filter(|e| matches!(&***e, Event::Exit(_))).map(|e| key(e)).filter(|&k| !listed(k)).collect();
        for event in more {
            if unlisted_exits.contains(&key(&event)) {
                state.drained.push(event);
            } else {
                state.early.push(event);
            }
        }
    }

    /// Whether the process `key` ((pid, start ticks)) is a young forked child as
    /// [`young_forks`] tells them, by the events drained so far: the scan's test for a new
    /// process, whose `status` such a child reads at its next sample (the table's
    /// `ScanOptions::status_later`). `execd` holds the keys of the execs drained, made at the
    /// first process young enough to ask. Without the events, none is.
    pub(crate) fn young_fork(
        &self,
        key: (u32, u64),
        now_boot_ns: u64,
        execd: &std::cell::OnceCell<std::collections::HashSet<(u32, u64)>>,
    ) -> bool {
        let Ok(state) = self.events.as_ref() else { return false };
        let tick = self.ns_per_tick.max(1);
        if !young_since(key.1, now_boot_ns, state.began_boot_ns, tick) || state.pending_execs.contains_key(&key) {
            return false;
        }
        let execd = execd.get_or_init(|| {
            state
                .drained
                .iter()
                .filter_map(|e| match &**e {
                    Event::Exec(e) => Some((e.pid, e.start_boottime_ns / tick)),
                    _ => None,
                })
                .collect()
        });
        !execd.contains(&key)
    }

    /// After the scan, before the cmdline worker is asked: for each process of `processes` that
    /// exec'd since it was last asked for (new in the table, or exec'd while listed), its
    /// command line from the exec where the event had all of it (`known`: no read needed), else
    /// the process to read again (`reread`: its exec may have kept its name, which the table's
    /// rename check would miss).
    ///
    /// `new`: the processes new in the table this cycle (and renamed ones); `now_boot_ns`: the
    /// boot clock at the scan, for their age.
    pub(crate) fn exec_cmdlines(
        &self,
        processes: &[ProcessSample],
        new: &[(u32, u64)],
        now_boot_ns: u64,
    ) -> ExecCmdlines {
        let mut out = ExecCmdlines::default();
        let Ok(state) = self.events.as_ref() else { return out };
        let ns_per_tick = self.ns_per_tick.max(1);
        // The latest exec of each process, and whether it came since the last sample.
        let mut latest: HashMap<(u32, u64), (&ExecEvent, bool)> = HashMap::new();
        let events = state.pending_execs.values().map(|e| (e, false)).chain(state.drained.iter().map(|e| (e, true)));
        for (event, fresh) in events {
            if let Event::Exec(e) = &**event {
                latest.insert((e.pid, e.start_boottime_ns / ns_per_tick), (e, fresh));
            }
        }
        out.young_forks =
            young_forks(new, |key| latest.contains_key(key), now_boot_ns, state.began_boot_ns, ns_per_tick);
        for ((pid, start), (e, fresh)) in latest {
            let Ok(i) = processes.binary_search_by_key(&pid, |p| p.pid) else { continue };
            if processes[i].start_ticks != start {
                continue;
            }
            if e.args_complete {
                // Given before (its row has that line already): nothing to do.
                if processes[i].cmdline.as_deref() != Some(&e.args[..]) {
                    out.known.push((pid, start, Arc::from(e.args.clone())));
                }
            } else if fresh {
                out.reread.push((pid, start));
            }
        }
        out
    }

    /// After the scan: this sample's ended processes and its coverage. `processes` is sorted by
    /// pid; `new` the pids new in the table this cycle; `forks` the kernel's task count now;
    /// `read_lines` the command line the cmdline worker holds for a process, for one that ended
    /// after its line was read but before a sample carried it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish(
        &mut self,
        processes: &[ProcessSample],
        new: &[(u32, u64)],
        forks: Option<u64>,
        mono_ns: u64,
        learned: &HashMap<[u64; 2], Option<Arc<str>>>,
        read_lines: &dyn Fn(u32, u64) -> Option<Arc<[String]>>,
        cost: &mut SampleCost,
    ) -> Vec<ExitedProcess> {
        let (ns_per_tick, page_size) = (self.ns_per_tick, self.page_size);
        let mut exited = Vec::new();
        let mut event_starts = None;
        if let Ok(state) = self.events.as_mut() {
            let counts = state.counted.take().unwrap_or_else(|| state.sub.counts());
            let before = std::mem::replace(&mut state.counts, counts);
            let mut starts = EventStarts {
                process_forks: counts.process_forks.wrapping_sub(before.process_forks),
                thread_forks: counts.thread_forks.wrapping_sub(before.thread_forks),
                execs: counts.execs.wrapping_sub(before.execs),
                exits: counts.exits.wrapping_sub(before.exits),
                lost: (counts.lost_execs + counts.lost_exits)
                    .wrapping_sub(before.lost_execs + before.lost_exits)
                    .saturating_add(std::mem::take(&mut self.dropped)),
                seen_before: std::mem::take(&mut state.seen_ahead),
                drain_waits: counts.settle_waits.wrapping_sub(before.settle_waits),
                drain_unsettled: counts.settle_unsettled.wrapping_sub(before.settle_unsettled),
                drain_wait_ns: counts.settle_wait_ns.wrapping_sub(before.settle_wait_ns),
                ..EventStarts::default()
            };
            let prev = self.prev.as_deref().unwrap_or_default();
            let boot_unix_ns = boot_unix_ns();
            // Sized once: a fork storm ends ~1,000 processes a sample, and growing these lists
            // a doubling at a time (rows then of ~330 bytes, moved through three lists) was a
            // sixth of the sampling thread's samples under perf.
            let mut drained = std::mem::take(&mut state.drained);
            let ends = drained.iter().filter(|e| matches!(***e, Event::Exit(_))).count();
            // An exit's CPU is completed by its last thread's final switch, which comes µs
            // after it: the finals first, so that each exit's row goes straight to its place
            // (a storm's ~1,000 rows a sample went through a list of their own first: its
            // pages faulted in and its rows copied again, every sample).
            let mut finals: ProcessMap<u64> =
                ProcessMap::with_capacity_and_hasher(drained.len() - ends, Default::default());
            for event in &drained {
                if let Event::Final(f) = &**event {
                    finals.insert((f.pid, f.start_boottime_ns / ns_per_tick.max(1)), f.runtime_ns);
                }
            }
            // One whose final is not in yet waits one sample for it, then is listed as it is.
            // Listed in the order they are ready: the held ones first, then this sample's.
            let held = std::mem::take(&mut self.held);
            exited.reserve((held.len() + ends).min(MAX_EXITED));
            let mut waiting = Vec::new();
            let mut untold = 0;
            let mut place = |mut x: ExitedProcess, event: &Arc<Event>, late: bool| {
                let Event::Exit(e) = &**event else { return };
                let ready = match finals.get(&(x.pid, x.start_ticks)) {
                    Some(runtime) => {
                        let last = proctor_bpf::FinalEvent {
                            pid: x.pid,
                            tid: 0,
                            start_boottime_ns: e.start_boottime_ns,
                            runtime_ns: *runtime,
                        };
                        (x.user_ns, x.system_ns) = split(e, e.runtime_with(&last));
                        x
                    }
                    None if late || waiting.len() >= MAX_EXITED => x,
                    None => {
                        waiting.push((x, Arc::clone(event)));
                        return;
                    }
                };
                if exited.len() >= MAX_EXITED {
                    untold += 1;
                } else {
                    exited.push(ready);
                }
            };
            for (x, event) in held {
                place(x, &event, true);
            }
            let mut last_learned: Option<([u64; 2], Option<Arc<str>>)> = None;
            for event in drained.drain(..) {
                match &*event {
                    Event::Exec(e) => {
                        let key = (e.pid, e.start_boottime_ns / ns_per_tick.max(1));
                        if state.pending_execs.len() < PENDING_EXECS || state.pending_execs.contains_key(&key) {
                            state.pending_execs.insert(key, Arc::clone(&event));
                        }
                    }
                    Event::Exit(x) => {
                        let start_ticks = x.start_boottime_ns / ns_per_tick.max(1);
                        let key = (x.pid, start_ticks);
                        let exec = state.pending_execs.remove(&key);
                        let exec = exec.as_deref().and_then(|e| match e {
                            Event::Exec(e) => Some(e),
                            _ => None,
                        });
                        let known = find(prev, key).map(|p| (p.cmdline.clone(), p.cgroup.clone())).or_else(|| {
                            let i = processes.binary_search_by_key(&x.pid, |p| p.pid).ok()?;
                            let p = &processes[i];
                            (p.start_ticks == start_ticks).then(|| (p.cmdline.clone(), p.cgroup.clone()))
                        });
                        let seen = known.is_some();
                        if !seen {
                            starts.exited_unseen += 1;
                        }
                        let (cmdline, cgroup) = known.unwrap_or_default();
                        // Its exec's whole line, else what a sample carried, else what the
                        // worker read after the last sample (an empty one is a zombie's: none).
                        let cmdline = exec
                            .filter(|e| e.args_complete)
                            .map(|e: &ExecEvent| Arc::from(e.args.clone()))
                            .or(cmdline)
                            .or_else(|| read_lines(x.pid, start_ticks).filter(|l| !l.is_empty()));
                        // The path the table read for a live process with the same cgroup ids;
                        // else the rows' cgroup is the v2 path where v2 holds the memory
                        // controller, else (a hybrid host) the v1 memory path, which the v2 id
                        // alone does not give: there a child takes its parent's (it was forked
                        // into it).
                        let cgroup = cgroup.or_else(|| {
                            // A storm's exits come from one cgroup: the last pair found is
                            // checked first.
                            let ids = [x.cgroup_id, x.memcg_id];
                            if let Some((_, path)) = last_learned.as_ref().filter(|(k, _)| *k == ids) {
                                return path.clone();
                            }
                            if let Some(path) = learned.get(&ids) {
                                last_learned = Some((ids, path.clone()));
                                return path.clone();
                            }
                            if state.cgroups.v2_is_the_rows {
                                state.cgroups.path(x.cgroup_id, mono_ns, cost)
                            } else {
                                parent_cgroup(prev, processes, x.ppid)
                            }
                        });
                        let (user_ns, system_ns) = split(x, x.runtime_ns);
                        place(
                            ExitedProcess {
                                pid: x.pid,
                                ppid: x.ppid,
                                start_ticks,
                                lifetime_ns: x.time_boottime_ns.saturating_sub(x.start_boottime_ns),
                                end_unix_ns: boot_unix_ns.saturating_add(x.time_boottime_ns),
                                comm: self.names.get(&x.comm),
                                cmdline,
                                exe: exec.map(|e| Arc::from(e.filename.as_str())),
                                cgroup,
                                wait_status: x.wait_status,
                                user_ns,
                                system_ns,
                                children_ns: x.cutime_ns.saturating_add(x.cstime_ns),
                                minflt: x.min_flt,
                                majflt: x.maj_flt,
                                peak_rss_bytes: x.maxrss_pages.saturating_mul(page_size),
                                seen,
                                // The network table's last reading, given by the sampler.
                                net: None,
                            },
                            &event,
                            false,
                        );
                    }
                    Event::Final(_) => {}
                }
            }
            // Its allocation kept for the next sample's events.
            state.drained = drained;
            starts.untold += untold;
            self.held = waiting;
            // A child whose parent also ended unseen (it ended first) takes the parent's cgroup.
            if exited.iter().any(|x| x.cgroup.is_none()) {
                let by_pid: HashMap<u32, usize> = exited.iter().enumerate().map(|(i, x)| (x.pid, i)).collect();
                for i in 0..exited.len() {
                    let mut at = i;
                    for _ in 0..64 {
                        if exited[i].cgroup.is_some() {
                            break;
                        }
                        match by_pid.get(&exited[at].ppid) {
                            Some(&p) if p != at => {
                                exited[i].cgroup = exited[p].cgroup.clone();
                                at = p;
                            }
                            _ => break,
                        }
                    }
                }
            }
            // An exec whose process is listed now with its command line read is the table's; the
            // rest wait for their exit (or for the cmdline worker).
            state.pending_execs.retain(|(pid, start), _| {
                processes
                    .binary_search_by_key(pid, |p| p.pid)
                    .map_or(true, |i| processes[i].start_ticks != *start || processes[i].cmdline.is_none())
            });
            event_starts = Some(starts);
        }
        // Coverage from the second sample on: the first has no previous table to be new against.
        // New processes: `new` also has the listed ones that exec'd (their command line is read
        // again), which started no process.
        let processes_new = match self.prev.as_deref() {
            Some(prev) => new.iter().filter(|&&k| find(prev, k).is_none()).count(),
            None => new.len(),
        } as u64;
        if let (Ok(state), Some(e), true) = (self.events.as_mut(), event_starts.as_ref(), self.prev.is_some()) {
            // What this sample saw beyond the processes its count has: counted by the next.
            // (The first sample lists every process as new: nothing to carry from it.)
            let seen = processes_new + e.exited_unseen;
            state.seen_ahead = (seen + e.seen_before).saturating_sub(e.process_forks).min(seen);
        }
        if let (Some(prev), Some(before), Some(now)) = (self.prev.as_deref(), self.prev_forks, forks) {
            let mut threads_new = 0;
            for p in processes {
                let had = find(prev, (p.pid, p.start_ticks)).map(|q| q.threads);
                let threads = p.num_threads.max(1);
                threads_new += match had {
                    Some(t) => threads.saturating_sub(t),
                    None => threads - 1,
                };
            }
            cost.starts =
                Some(Starts { forks: now.saturating_sub(before), processes_new, threads_new, events: event_starts });
        }
        self.prev_forks = forks;
        // The last sample's list, its allocation kept from sample to sample.
        let mut prev = self.prev.take().unwrap_or_default();
        prev.clear();
        prev.extend(processes.iter().map(|p| Prev {
            pid: p.pid,
            start_ticks: p.start_ticks,
            threads: p.num_threads.max(1),
            cmdline: p.cmdline.clone(),
            cgroup: p.cgroup.clone(),
        }));
        self.prev = Some(prev);
        exited
    }
}

/// A process's CPU time `runtime` (ns) as user and system, in the ratio its tick accounting
/// gives (as the kernel splits it for `wait4`).
fn split(x: &proctor_bpf::ExitEvent, runtime: u64) -> (u64, u64) {
    let ticks = x.utime_ns.saturating_add(x.stime_ns);
    let user = if ticks == 0 { runtime } else { (runtime as u128 * x.utime_ns as u128 / ticks as u128) as u64 };
    (user, runtime.saturating_sub(user))
}

/// The previous sample's row of a process (`prev` is sorted by pid).
fn find(prev: &[Prev], (pid, start): (u32, u64)) -> Option<&Prev> {
    let i = prev.binary_search_by_key(&pid, |p| p.pid).ok()?;
    Some(&prev[i]).filter(|p| p.start_ticks == start)
}

/// The cgroup of a live process, this sample's row or the previous one's.
fn parent_cgroup(prev: &[Prev], processes: &[ProcessSample], pid: u32) -> Option<Arc<str>> {
    match processes.binary_search_by_key(&pid, |p| p.pid) {
        Ok(i) => processes[i].cgroup.clone(),
        Err(_) => prev.binary_search_by_key(&pid, |p| p.pid).ok().and_then(|i| prev[i].cgroup.clone()),
    }
}

/// The boot-time clock's zero in Unix time, ns.
fn boot_unix_ns() -> u64 {
    let now = |clock| {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec we own.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
    };
    now(libc::CLOCK_REALTIME).saturating_sub(now(libc::CLOCK_BOOTTIME))
}

/// Cgroup (v2) ids to paths: a cgroup's id is its directory's inode number in the cgroup2
/// mount. Walked when an id is not known, at most every [`CGROUP_REWALK_NS`].
#[derive(Debug)]
struct CgroupIds {
    mount: Option<PathBuf>,
    /// Whether the process rows' cgroup paths are this mount's (v2 holds the memory controller).
    v2_is_the_rows: bool,
    paths: HashMap<u64, Arc<str>>,
    walked_mono_ns: Option<u64>,
}

impl CgroupIds {
    fn find() -> CgroupIds {
        let mount = std::fs::read_to_string("/proc/self/mountinfo").ok().and_then(|m| {
            m.lines().find_map(|l| {
                let (left, right) = l.split_once(" - ")?;
                let mount = left.split(' ').nth(4)?;
                (right.split(' ').next() == Some("cgroup2")).then(|| PathBuf::from(mount))
            })
        });
        let v2_is_the_rows = mount.as_ref().is_some_and(|m| {
            std::fs::read_to_string(m.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
        });
        CgroupIds { mount, v2_is_the_rows, paths: HashMap::new(), walked_mono_ns: None }
    }

    fn path(&mut self, id: u64, mono_ns: u64, cost: &mut SampleCost) -> Option<Arc<str>> {
        if let Some(p) = self.paths.get(&id) {
            return Some(Arc::clone(p));
        }
        let mount = self.mount.clone()?;
        if self.walked_mono_ns.is_some_and(|t| mono_ns.saturating_sub(t) < CGROUP_REWALK_NS) {
            return None;
        }
        self.walked_mono_ns = Some(mono_ns);
        self.paths.clear();
        let mut stack = vec![(mount.clone(), String::from("/"))];
        while let Some((dir, path)) = stack.pop() {
            if self.paths.len() >= CGROUP_WALK_MAX {
                break;
            }
            use std::os::unix::fs::MetadataExt;
            let Ok(meta) = std::fs::metadata(&dir) else { continue };
            cost.files_read += 1;
            self.paths.insert(meta.ino(), Arc::from(path.as_str()));
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    let child = if path == "/" { format!("/{name}") } else { format!("{path}/{name}") };
                    stack.push((entry.path(), child));
                }
            }
        }
        self.paths.get(&id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_names_are_shared_and_a_new_one_pushes_out_the_least_used() {
        let mut names = RecentNames::default();
        let a = names.get("python3");
        assert!(Arc::ptr_eq(&a, &names.get("python3")));
        for i in 0..RecentNames::KEPT - 1 {
            names.get(&format!("n{i}"));
        }
        // Used again, it stays; the newest name is last, and the next new one takes its place.
        assert!(Arc::ptr_eq(&a, &names.get("python3")));
        names.get("late");
        assert_eq!(names.0.len(), RecentNames::KEPT);
        assert!(names.0.iter().any(|n| Arc::ptr_eq(n, &a)));
        let pushed_out = format!("n{}", RecentNames::KEPT - 2);
        assert!(!names.0.iter().any(|n| **n == *pushed_out));
        assert_eq!(&*names.get("sh"), "sh");
    }

    #[test]
    fn only_young_children_without_an_exec_wait_for_the_next_sample() {
        // 100 ticks a second: a tick is 10 ms. Now is 50 s after boot.
        let (tick, now) = (10_000_000, 50_000_000_000);
        let new = [
            (10, 4_995), // 50 ms old, forked only: waits
            (11, 4_995), // 50 ms old, exec'd: read now
            (12, 4_980), // 200 ms old, forked only: read now
            (13, 4_991), // 90 ms old: waits
            (14, 4_990), // 100 ms old: read now
            (15, 5_001), // started "after" now (ticks round up past the clock read): waits
        ];
        // The events began at boot: age alone decides.
        let waits = young_forks(&new, |&(pid, _)| pid == 11, now, 0, tick);
        assert_eq!(waits, [(10, 4_995), (13, 4_991), (15, 5_001)]);
        // The events began 80 ms ago: a young process started before them may have exec'd
        // unseen (a command started just before the agent) and is read now.
        let began = 49_920_000_000;
        let new = [
            (20, 4_995), // started 30 ms after the events began, forked only: waits
            (21, 4_992), // its tick begins as they began: waits
            (22, 4_991), // started 10 ms before them, no exec seen: read now
            (23, 4_995), // after them, exec'd: read now
        ];
        let waits = young_forks(&new, |&(pid, _)| pid == 23, now, began, tick);
        assert_eq!(waits, [(20, 4_995), (21, 4_992)]);
        // Begun 1 ns into that tick, the events may have missed an exec early in it: 21 is read.
        let waits = young_forks(&new, |&(pid, _)| pid == 23, now, began + 1, tick);
        assert_eq!(waits, [(20, 4_995)]);
    }
}
