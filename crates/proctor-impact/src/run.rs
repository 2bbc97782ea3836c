//! The driver: starts the workload once, then runs the rounds, each arm in turn (no monitor,
//! each agent setting, the psutil loop; each round starting one arm later), while a collector
//! thread files every operation the workload reports into the window of the round it was meant
//! to start in. Operations meant to start between windows (a monitor starting up is inside its
//! window; one being read and stopped is not) are dropped and counted.
//!
//! With turns (`--switch`), each monitor is started once, runs alone for a warm-up outside any
//! window, and is then stopped (SIGSTOP) except in its own windows: every round the arms take
//! turns of that length, each cycle of turns starting one arm later, and the intervals resample
//! whole cycles, so a slow minute of the host falls on both sides of a difference.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use proctor_units::duration::format_duration;

use crate::arms::{self, Ledger, Monitor};
use crate::report::{ArmReport, Attributed, ImpactReport, RoundReport, StatReport};
use crate::stats::{self, Block, BlockBuilder};
use crate::trace::{self, Attributor, Delays, Instance};
use crate::workload::{monotonic_ns, WorkloadConfig, FAILED};

/// Blocks are this long: the unit the bootstrap resamples (see [`crate::stats`]).
pub const BLOCK_NS: u64 = 1_000_000_000;

/// One arm of the comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Arm {
    None,
    /// `proctor` with these words (`serve --interval 1s`).
    Agent(Vec<String>),
    /// The psutil loop with this Python, pausing this long between passes; `Err` says why it
    /// cannot run (and how to make it able to).
    Psutil {
        python: PathBuf,
        pause: Duration,
        unavailable: Option<String>,
    },
}

impl Arm {
    pub fn name(&self) -> String {
        match self {
            Arm::None => "none".into(),
            Arm::Agent(words) => format!("proctor {}", words.join(" ")),
            Arm::Psutil { .. } => "psutil".into(),
        }
    }
}

/// Everything a run needs, decided before it starts.
#[derive(Debug, Clone)]
pub struct ImpactConfig {
    pub workload: WorkloadConfig,
    /// The program and arguments that run the workload (`proctor impact-workload …`).
    pub workload_command: Vec<OsString>,
    /// The `proctor` the agent arms run.
    pub exe: PathBuf,
    pub arms: Vec<Arm>,
    pub duration: Duration,
    pub rounds: u32,
    pub resamples: usize,
    pub seed: u64,
    /// The tree the monitors' figures are read for: the workload's own when `None`.
    pub target: Option<u32>,
    /// Turns: each arm's `duration` in a round is taken in windows this long, the arms
    /// alternating, each monitor started once and stopped outside its windows. `None`: one
    /// window an arm a round, each monitor started afresh in it.
    pub switch: Option<Duration>,
    /// With turns, how long each monitor runs alone, outside any window, before the first;
    /// with rounds, how long the workload runs alone before the first round.
    pub warmup: Duration,
    /// With turns: trace the run (tracefs) and charge each monitor what it delayed its
    /// windows' operations by ([`crate::trace`]).
    pub attribute: bool,
}

/// What the collector files for one window (one arm in one round).
#[derive(Debug, Default)]
struct Window {
    arm: usize,
    round: u32,
    /// With turns, the cycle of turns it belongs to (the unit the intervals resample).
    cycle: Option<usize>,
    start_ns: u64,
    end_ns: Option<u64>,
    /// One per second of the window, by intended start.
    blocks: Vec<BlockBuilder>,
    /// The operations' service times (start to end), for the target-side wait.
    service: BlockBuilder,
    failed: u64,
    /// Operations that slept (see `record::Op::slept`), and their service time in all.
    slept: u64,
    slept_ns: u64,
    /// With `--attribute`, a monitor's window keeps each operation: (pid, intended start,
    /// latency, its block).
    ops: Vec<(u32, u64, u64, u32)>,
}

#[derive(Debug, Default)]
struct Collected {
    senders: BTreeSet<u32>,
    /// The latest intended start each sender has reported.
    latest_ns: BTreeMap<u32, u64>,
    windows: Vec<Window>,
    dropped_between_windows: u64,
    ended: Option<String>,
    /// Whether monitors' windows keep their operations (`--attribute`).
    keep_ops: bool,
}

type Shared = Arc<(Mutex<Collected>, Condvar)>;

fn collect(mut stdout: impl Read, shared: Shared) {
    let mut decoder = crate::record::Decoder::default();
    let mut buffer = vec![0u8; 64 * 1024];
    let (lock, changed) = &*shared;
    let ended = loop {
        let read = match stdout.read(&mut buffer) {
            Ok(0) => break "the workload closed its output".to_string(),
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break format!("reading the workload: {e}"),
        };
        let mut state = lock.lock().expect("collector lock");
        let state = &mut *state;
        let keep_ops = state.keep_ops;
        let fed = decoder.feed(&buffer[..read], |pid, ops| {
            state.senders.insert(pid);
            for op in ops {
                let latest = state.latest_ns.entry(pid).or_default();
                *latest = (*latest).max(op.intended_ns);
                // The newest window first: that is where nearly every operation goes.
                let window = state
                    .windows
                    .iter_mut()
                    .rev()
                    .find(|w| op.intended_ns >= w.start_ns && w.end_ns.is_none_or(|end| op.intended_ns < end));
                let Some(window) = window else {
                    state.dropped_between_windows += 1;
                    continue;
                };
                if op.service_ns == FAILED {
                    window.failed += 1;
                    continue;
                }
                let block = ((op.intended_ns - window.start_ns) / BLOCK_NS) as usize;
                if window.blocks.len() <= block {
                    window.blocks.resize_with(block + 1, BlockBuilder::default);
                }
                window.blocks[block].add(op.latency_ns);
                if keep_ops && window.arm != 0 {
                    window.ops.push((pid, op.intended_ns, op.latency_ns, block as u32));
                }
                window.service.add(op.service_ns);
                if op.slept {
                    window.slept += 1;
                    window.slept_ns += op.service_ns;
                }
            }
        });
        changed.notify_all();
        if let Err(e) = fed {
            break format!("the workload's output is not operation batches: {e}");
        }
    };
    lock.lock().expect("collector lock").ended = Some(ended);
    changed.notify_all();
}

/// Waits, up to `within`, until `ready` holds of what was collected; false if it never did.
fn wait_for(shared: &Shared, within: Duration, ready: impl Fn(&Collected) -> bool) -> bool {
    let (lock, changed) = &**shared;
    let deadline = Instant::now() + within;
    let mut state = lock.lock().expect("collector lock");
    loop {
        if ready(&state) {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || state.ended.is_some() {
            return false;
        }
        state = changed.wait_timeout(state, left).expect("collector lock").0;
    }
}

/// The workload process; killed and reaped when dropped, whatever happened.
struct WorkloadProcess(Child);

impl Drop for WorkloadProcess {
    fn drop(&mut self) {
        // SAFETY: signals our own child, not reaped yet (the pid is still ours).
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

/// What a monitor left after its window: its CPU, its ledger.
#[derive(Debug, Default)]
struct Reading {
    cpu_seconds: Option<f64>,
    ledger: Option<Ledger>,
    problem: Option<String>,
}

/// Runs the whole comparison. `progress` is told what is happening (a line at a time).
pub fn run(config: &ImpactConfig, progress: &mut dyn FnMut(&str)) -> Result<ImpactReport, String> {
    let (program, args) = config.workload_command.split_first().ok_or("no workload command")?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the workload: {e}"))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let workload = WorkloadProcess(child);
    let root = config.target.unwrap_or(workload.0.id());
    let shared: Shared = Arc::default();
    shared.0.lock().expect("collector lock").keep_ops = config.attribute && config.switch.is_some();
    let collector = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || collect(stdout, shared))
    };
    let senders = config.workload.senders() as usize;
    // Filling the region is the slow part of starting: about a second a GiB, more when busy.
    let start_within = Duration::from_secs(30 + config.workload.size_bytes / (1 << 30) * 10);
    if !wait_for(&shared, start_within, |c| c.senders.len() >= senders) {
        let state = shared.0.lock().expect("collector lock");
        return Err(format!(
            "the workload did not start: {} of {senders} processes reported within {start_within:?} ({})",
            state.senders.len(),
            state.ended.as_deref().unwrap_or("still running")
        ));
    }
    let timed: Vec<u32> = shared.0.lock().expect("collector lock").senders.iter().copied().collect();
    progress(&format!("workload running: pid {}, {} timed processes", workload.0.id(), timed.len()));

    let mut readings: BTreeMap<usize, Reading> = BTreeMap::new();
    let turns = match config.switch {
        None => {
            alternate_rounds(config, &shared, root, &timed, &mut readings, progress)?;
            None
        }
        Some(turn) => Some(take_turns(config, turn, &shared, root, &timed, &mut readings, progress)?),
    };
    // Every timed process's operations up to the last window's end must have arrived.
    let last_end = shared.0.lock().expect("collector lock").windows.last().and_then(|w| w.end_ns).unwrap_or(0);
    let complete = wait_for(&shared, Duration::from_secs(10), |c| {
        timed.iter().all(|pid| c.latest_ns.get(pid).is_some_and(|&t| t >= last_end))
    });
    if !complete {
        progress("the workload's last operations did not all arrive; the last round may be short");
    }
    drop(workload);
    let _ = collector.join();
    let state = std::mem::take(&mut *shared.0.lock().expect("collector lock"));
    let delays = turns.as_ref().and_then(|t| t.delays.as_ref());
    let mut report = build_report(config, state, &readings, root, timed.len(), delays);
    report.pauses_let_finish_a_traced_read = turns.as_ref().map(|t| t.let_finish);
    Ok(report)
}

/// Opens a window for `arm` now; an error once the workload has ended.
fn open_window(shared: &Shared, arm: usize, round: u32, cycle: Option<usize>) -> Result<usize, String> {
    let mut state = shared.0.lock().expect("collector lock");
    if let Some(ended) = &state.ended {
        return Err(format!("the workload stopped: {ended}"));
    }
    state.windows.push(Window { arm, round, cycle, start_ns: monotonic_ns(), ..Window::default() });
    Ok(state.windows.len() - 1)
}

/// Keeps window `window` open until `length` from its start, then closes it.
fn hold_window(shared: &Shared, window: usize, length: Duration) {
    let window_start = shared.0.lock().expect("collector lock").windows[window].start_ns;
    let window_end = window_start + length.as_nanos() as u64;
    let left = Duration::from_nanos(window_end.saturating_sub(monotonic_ns()));
    // Waiting on the collector wakes early only if the workload ends.
    let _ = wait_for(shared, left, |c| c.ended.is_some());
    wait_until_ns(window_end);
    shared.0.lock().expect("collector lock").windows[window].end_ns = Some(monotonic_ns());
}

/// Whether the arm runs at all (a psutil arm without psutil does not).
fn runs(arm: &Arm) -> bool {
    !matches!(arm, Arm::Psutil { unavailable: Some(_), .. })
}

/// Starts the monitor an arm runs; `None` for no monitor.
fn start_monitor(config: &ImpactConfig, arm: &Arm, root: u32) -> Result<Option<Monitor>, String> {
    Ok(match arm {
        Arm::None => None,
        Arm::Agent(words) => Some(arms::start_agent(&config.exe, words, Duration::from_secs(60))?),
        Arm::Psutil { python, pause, .. } => Some(arms::start_psutil(python, root, *pause)?),
    })
}

/// Why a monitor ended early, in words.
fn ended_early(arm: &Arm, status: &str) -> String {
    match arm {
        Arm::Psutil { .. } => format!("the psutil loop ended early ({status}): {}", arms::PSUTIL_HOWTO),
        _ => format!("the agent ended early ({status})"),
    }
}

/// One window an arm a round, each monitor started afresh inside its window and read and
/// stopped after it.
fn alternate_rounds(
    config: &ImpactConfig,
    shared: &Shared,
    root: u32,
    timed: &[u32],
    readings: &mut BTreeMap<usize, Reading>,
    progress: &mut dyn FnMut(&str),
) -> Result<(), String> {
    // The first round's first window is the no-monitor arm's: the workload's own start (its
    // children's first faults, the host settling after filling the region) is kept out of it.
    if !config.warmup.is_zero() {
        progress(&format!("letting the workload settle for {}, outside any window", format_duration(config.warmup)));
        let _ = wait_for(shared, config.warmup, |c| c.ended.is_some());
    }
    for round in 0..config.rounds {
        // Each round starts one arm later than the one before: a drift over a round's minutes
        // (measured: the no-monitor arm's p99.9 rose 95 → 106 µs over three rounds) lands on
        // every arm alike instead of on the last ones.
        let n = config.arms.len();
        for index in (0..n).map(|k| (k + round as usize) % n) {
            let arm = &config.arms[index];
            if !runs(arm) {
                continue;
            }
            progress(&format!("round {}/{}: {}", round + 1, config.rounds, arm.name()));
            let window = open_window(shared, index, round, None)?;
            // The monitor's own start is inside its window.
            let mut monitor = start_monitor(config, arm, root)?;
            hold_window(shared, window, config.duration);
            let reading = match monitor.take() {
                None => Reading::default(),
                Some(mut running) => {
                    let mut reading = Reading { cpu_seconds: running.cpu_seconds(), ..Reading::default() };
                    if let Some(status) = running.exited() {
                        reading.problem = Some(ended_early(arm, &status));
                    } else if let Some(api) = running.api {
                        match arms::read_ledger(api, root, timed, Duration::from_secs(30)) {
                            Ok(ledger) => reading.ledger = Some(ledger),
                            Err(e) => reading.problem = Some(e),
                        }
                    }
                    stop(running);
                    reading
                }
            };
            if let Some(problem) = &reading.problem {
                progress(&format!("round {}: {}: {problem}", round + 1, arm.name()));
            }
            readings.insert(window, reading);
        }
    }
    Ok(())
}

/// The monitors of a run with turns, each with its ledger at the end of its warm-up; stopped
/// for good (let run, then ended) when dropped, whatever happened.
#[derive(Default)]
struct Started(Vec<(usize, Monitor, WarmLedger)>);

/// An agent's ledger read at the end of its warm-up; `None` for a monitor without an API.
type WarmLedger = Option<Result<Ledger, String>>;

impl Drop for Started {
    fn drop(&mut self) {
        for (_, monitor, _) in self.0.drain(..) {
            stop(monitor);
        }
    }
}

/// Each monitor started once and warmed up alone; then, every round, the arms take turns of
/// `turn` until each has had the round's `duration`, a monitor stopped (SIGSTOP) outside its
/// turns. Its CPU is what it used in its windows; its ledger what was added after its warm-up.
/// With `--attribute`, the run is traced from the first window to the last.
fn take_turns(
    config: &ImpactConfig,
    turn: Duration,
    shared: &Shared,
    root: u32,
    timed: &[u32],
    readings: &mut BTreeMap<usize, Reading>,
    progress: &mut dyn FnMut(&str),
) -> Result<Turns, String> {
    let mut started = Started::default();
    let mut let_finish = 0;
    for (index, arm) in config.arms.iter().enumerate() {
        if !runs(arm) {
            continue;
        }
        let Some(mut monitor) = start_monitor(config, arm, root)? else { continue };
        progress(&format!("warming up {} for {}, outside any window", arm.name(), format_duration(config.warmup)));
        std::thread::sleep(config.warmup);
        if let Some(status) = monitor.exited() {
            return Err(ended_early(arm, &status));
        }
        let ledger = monitor.api.map(|api| arms::read_ledger(api, root, timed, Duration::from_secs(30)));
        let_finish += monitor.pause(Duration::from_secs(10))?;
        started.0.push((index, monitor, ledger));
    }
    let tracer = config.attribute.then(|| {
        let monitors: Vec<(u32, usize)> = started.0.iter().map(|(arm, m, _)| (m.pid(), *arm)).collect();
        let tracer = Tracer::start(timed, &monitors);
        if let Err(why) = &tracer {
            progress(&format!("not attributing: {why}"));
        }
        tracer
    });
    let order: Vec<usize> = (0..config.arms.len()).filter(|&i| runs(&config.arms[i])).collect();
    let turns = (config.duration.as_nanos() / turn.as_nanos()).max(1) as usize;
    let mut cycle = 0;
    for round in 0..config.rounds {
        progress(&format!(
            "round {}/{}: {} turns of {} each, arms alternating",
            round + 1,
            config.rounds,
            turns,
            format_duration(turn)
        ));
        for _ in 0..turns {
            // Each cycle starts one arm later than the one before, as rounds do.
            for k in 0..order.len() {
                let index = order[(k + cycle) % order.len()];
                let arm = &config.arms[index];
                let window = open_window(shared, index, round, Some(cycle))?;
                let monitor = started.0.iter_mut().find(|(i, _, _)| *i == index).map(|(_, m, _)| m);
                let before = monitor.as_ref().and_then(|m| {
                    m.resume();
                    m.cpu_seconds()
                });
                hold_window(shared, window, turn);
                let mut reading = Reading::default();
                if let Some(monitor) = monitor {
                    if let Some(status) = monitor.exited() {
                        return Err(ended_early(arm, &status));
                    }
                    let_finish += monitor.pause(Duration::from_secs(10))?;
                    reading.cpu_seconds = monitor.cpu_seconds().zip(before).map(|(after, before)| after - before);
                }
                readings.insert(window, reading);
            }
            cycle += 1;
        }
    }
    let delays = tracer.map(|tracer| tracer.and_then(Tracer::finish));
    // The ledgers, each agent let run to publish a sample, outside any window: what was added
    // since its warm-up, on its last window's reading.
    let last_window = |arm: usize| {
        let state = shared.0.lock().expect("collector lock");
        state.windows.iter().rposition(|w| w.arm == arm)
    };
    for (index, monitor, warm) in std::mem::take(&mut started.0) {
        if let (Some(api), Some(last)) = (monitor.api, last_window(index)) {
            monitor.resume();
            let now = arms::read_ledger(api, root, timed, Duration::from_secs(30));
            let reading = readings.entry(last).or_default();
            match (now, warm) {
                (Ok(now), Some(Ok(warm))) => reading.ledger = Some(now.since(&warm)),
                (Err(e), _) | (_, Some(Err(e))) => reading.problem = Some(e),
                (Ok(now), None) => reading.ledger = Some(now),
            }
            if let Some(problem) = &reading.problem {
                progress(&format!("{}: {problem}", config.arms[index].name()));
            }
        }
        stop(monitor);
    }
    Ok(Turns { let_finish, delays })
}

/// What a run with turns adds to its readings.
struct Turns {
    /// Pauses that let an agent finish a traced read first ([`Monitor::pause`]).
    let_finish: u32,
    /// With `--attribute`, the delays the trace charged to the monitors, or why there are none.
    delays: Option<Result<Delays, String>>,
}

/// The trace of a run with `--attribute`: an instance recording, and a thread reading it into
/// an [`Attributor`] as it goes (a busy host's trace outgrows any buffer in minutes). Dropped
/// unfinished (a run that failed midway), it stops recording and its instance is removed.
struct Tracer {
    instance: Arc<Mutex<Instance>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    reader: Option<std::thread::JoinHandle<Result<Attributor, String>>>,
}

impl Tracer {
    fn start(targets: &[u32], monitors: &[(u32, usize)]) -> Result<Tracer, String> {
        let mut attributor = Attributor::new(targets.iter().copied());
        for &(pid, arm) in monitors {
            attributor.add_monitor(pid, arm, trace::threads(pid));
        }
        let instance = Arc::new(Mutex::new(Instance::open()?));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (instance, stop) = (Arc::clone(&instance), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                loop {
                    let stopping = stop.load(std::sync::atomic::Ordering::Acquire);
                    let read = instance
                        .lock()
                        .expect("trace lock")
                        .read(&mut buf)
                        .map_err(|e| format!("reading the trace: {e}"))?;
                    let complete = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                    for line in buf[..complete].split(|&b| b == b'\n') {
                        attributor.feed_line(&String::from_utf8_lossy(line));
                    }
                    buf.drain(..complete);
                    if read == 0 {
                        if stopping {
                            return Ok(attributor);
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            })
        };
        Ok(Tracer { instance, stop, reader: Some(reader) })
    }

    /// Stops recording, reads the rest, and gives the delays.
    fn finish(mut self) -> Result<Delays, String> {
        self.end().map(Attributor::into_delays)
    }

    fn end(&mut self) -> Result<Attributor, String> {
        self.instance.lock().expect("trace lock").stop();
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        let reader = self.reader.take().ok_or("the trace was already read")?;
        reader.join().map_err(|_| "the trace's reader panicked".to_string())?
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        // The reader ends once the stopped trace is read to its end; the instance goes with the
        // last reference to it.
        if self.reader.is_some() {
            let _ = self.end();
        }
    }
}

fn stop(monitor: Monitor) {
    monitor.stop(Duration::from_secs(5));
}

/// Sleeps until the monotonic clock reads `ns`; a round's end is a time, not a sleep's length.
fn wait_until_ns(ns: u64) {
    loop {
        let now = monotonic_ns();
        if now >= ns {
            return;
        }
        std::thread::sleep(Duration::from_nanos(ns - now));
    }
}

/// Each arm's percentiles, the differences from the first arm (no monitor) with their
/// intervals, the monitors' CPU and the ledger.
fn build_report(
    config: &ImpactConfig,
    mut state: Collected,
    readings: &BTreeMap<usize, Reading>,
    root: u32,
    timed: usize,
    delays: Option<&Result<Delays, String>>,
) -> ImpactReport {
    let arm_count = config.arms.len();
    let traced = match delays {
        Some(Ok(delays)) => Some(delays),
        _ => None,
    };
    // With `--attribute`: each monitor's windows' blocks with every operation less what the
    // trace charged to the monitor, beside the blocks as they were; the delays in all.
    // Both ways of charging CPU: direct (a monitor on the waiting thread's CPU) and broad (on
    // any CPU).
    let mut attributed: Vec<[Charged; 2]> = (0..arm_count).map(|_| Default::default()).collect();
    let mut arm_blocks: Vec<Vec<Block>> = vec![Vec::new(); arm_count];
    let mut arm_service: Vec<Vec<Block>> = vec![Vec::new(); arm_count];
    // Each arm's rounds, by round number: windows of one round (one, or its turns) together.
    let mut rounds: Vec<BTreeMap<u32, RoundParts>> = (0..arm_count).map(|_| BTreeMap::new()).collect();
    let mut failed = vec![0u64; arm_count];
    let mut seconds = vec![0f64; arm_count];
    let mut slept = vec![(0u64, 0f64); arm_count];
    // With turns, each cycle's blocks per arm: what the intervals resample.
    let mut cycles: BTreeMap<usize, Vec<Vec<Block>>> = BTreeMap::new();
    for (index, window) in state.windows.drain(..).enumerate() {
        let blocks: Vec<Block> = window.blocks.into_iter().map(BlockBuilder::build).collect();
        if let (Some(delays), true) = (traced, window.arm != 0) {
            for (broad, charged) in attributed[window.arm].iter_mut().enumerate() {
                let mut builders = vec![BlockBuilder::default(); blocks.len()];
                for &(pid, intended, latency, block) in &window.ops {
                    let (start, end) = (intended, intended + latency);
                    let (cpu, lock) = if broad == 1 {
                        delays.within_broad(pid, window.arm, start, end)
                    } else {
                        delays.within(pid, window.arm, start, end)
                    };
                    charged.operations_ns += cpu + lock;
                    charged.operations += u64::from(cpu + lock > 0);
                    if let Some(builder) = builders.get_mut(block as usize) {
                        builder.add(latency - (cpu + lock).min(latency));
                    }
                }
                // What the threads themselves waited, each delay once, within the window.
                let window_end = window.end_ns.unwrap_or(window.start_ns);
                for &tid in delays.by_tid.keys() {
                    let (cpu, lock) = if broad == 1 {
                        delays.within_broad(tid, window.arm, window.start_ns, window_end)
                    } else {
                        delays.within(tid, window.arm, window.start_ns, window_end)
                    };
                    charged.cpu_ns += cpu;
                    charged.lock_ns += lock;
                }
                let without: Vec<Block> = builders.into_iter().map(BlockBuilder::build).collect();
                charged.without.extend(without.iter().cloned());
                charged.units.push((without, blocks.clone()));
            }
        }
        let length = window.end_ns.unwrap_or(window.start_ns).saturating_sub(window.start_ns) as f64 / 1e9;
        let parts = rounds[window.arm].entry(window.round).or_default();
        parts.seconds += length;
        parts.failed += window.failed;
        parts.blocks.extend(blocks.iter().cloned());
        if let Some(reading) = readings.get(&index) {
            parts.windows_with_monitor += 1;
            if let Some(cpu) = reading.cpu_seconds {
                parts.cpu_readings += 1;
                parts.cpu_seconds += cpu;
            }
            if let Some(ledger) = &reading.ledger {
                parts.ledger = Some(ledger.clone());
            }
            if let (None, Some(problem)) = (&parts.problem, &reading.problem) {
                parts.problem = Some(problem.clone());
            }
        }
        failed[window.arm] += window.failed;
        slept[window.arm].0 += window.slept;
        slept[window.arm].1 += window.slept_ns as f64 / 1e9;
        seconds[window.arm] += length;
        if let Some(cycle) = window.cycle {
            cycles.entry(cycle).or_insert_with(|| vec![Vec::new(); arm_count])[window.arm]
                .extend(blocks.iter().cloned());
        }
        arm_blocks[window.arm].extend(blocks);
        arm_service[window.arm].push(window.service.build());
    }
    let mut rounds: Vec<Vec<RoundReport>> = rounds
        .into_iter()
        .map(|by_round| {
            by_round
                .into_values()
                .enumerate()
                .map(|(i, parts)| RoundReport {
                    round: i as u32 + 1,
                    seconds: parts.seconds,
                    latency: stats::percentiles(&parts.blocks).map(StatReport::from),
                    failed: parts.failed,
                    // Every window's CPU read, or unknown.
                    monitor_cpu_seconds: (parts.windows_with_monitor > 0
                        && parts.cpu_readings == parts.windows_with_monitor)
                        .then_some(parts.cpu_seconds),
                    ledger: parts.ledger,
                    problem: parts.problem,
                })
                .collect()
        })
        .collect();
    // The target-side wait: service time beyond the no-monitor arm's median, summed.
    let base_service = stats::percentiles(&arm_service[0]).map_or(0.0, |p| p.p50);
    let excess: Vec<f64> = arm_service.iter().map(|blocks| excess_seconds(blocks, base_service)).collect();
    let base_excess_rate = if seconds[0] > 0.0 { excess[0] / seconds[0] } else { 0.0 };
    let arms = config
        .arms
        .iter()
        .enumerate()
        .map(|(index, arm)| {
            let skipped = match arm {
                Arm::Psutil { unavailable: Some(why), .. } => Some(why.clone()),
                _ => None,
            };
            let ran = skipped.is_none();
            let latency = stats::percentiles(&arm_blocks[index]);
            let intervals = if index == 0 {
                None
            } else if config.switch.is_some() {
                let units: Vec<(&[Block], &[Block])> =
                    cycles.values().map(|arms| (arms[0].as_slice(), arms[index].as_slice())).collect();
                stats::paired_difference_intervals(&units, config.resamples, config.seed)
            } else {
                stats::difference_intervals(&arm_blocks[0], &arm_blocks[index], config.resamples, config.seed)
            };
            let base = stats::percentiles(&arm_blocks[0]);
            let monitor_cpu: Option<f64> = if matches!(arm, Arm::None) {
                None
            } else {
                rounds[index].iter().map(|r| r.monitor_cpu_seconds).sum::<Option<f64>>()
            };
            let ledgers: Vec<&Ledger> = rounds[index].iter().filter_map(|r| r.ledger.as_ref()).collect();
            // The longest read of all the rounds, with whose it was.
            let longest =
                ledgers.iter().copied().reduce(|a, b| if b.stall_max_seconds > a.stall_max_seconds { b } else { a });
            let ledger = longest.filter(|_| matches!(arm, Arm::Agent(_))).map(|longest| Ledger {
                processes: ledgers.iter().map(|l| l.processes).max().unwrap_or(0),
                pss_read_processes: ledgers.iter().map(|l| l.pss_read_processes).max().unwrap_or(0),
                stall_seconds_total: ledgers.iter().map(|l| l.stall_seconds_total).sum(),
                stall_max_seconds: longest.stall_max_seconds,
                stall_max_pid: longest.stall_max_pid,
                stall_max_name: longest.stall_max_name.clone(),
                stall_max_timed: longest.stall_max_timed,
                timed_stall_seconds_total: ledgers.iter().map(|l| l.timed_stall_seconds_total).sum(),
                target_waited_seconds_total: ledgers
                    .iter()
                    .filter_map(|l| l.target_waited_seconds_total)
                    .reduce(|a, b| a + b),
            });
            let wait_beyond =
                (index > 0 && skipped.is_none()).then(|| excess[index] - base_excess_rate * seconds[index]);
            let attributed = (traced.is_some() && index > 0 && ran).then(|| {
                let [direct, broad] = std::mem::take(&mut attributed[index]).map(|c| c.report(latency, config));
                Attributed { direct, broad }
            });
            let mut arm_report = ArmReport::new(
                index == 0,
                arm.name(),
                skipped,
                latency,
                base,
                intervals,
                failed[index],
                seconds[index],
                monitor_cpu,
                ledger,
                excess[index],
                wait_beyond,
                (config.workload.workload == crate::workload::Workload::Pagefault && ran).then_some(slept[index]),
                std::mem::take(&mut rounds[index]),
            );
            arm_report.attributed = attributed;
            arm_report
        })
        .collect();
    ImpactReport {
        workload: crate::report::WorkloadReport::new(&config.workload, root, timed),
        rounds: config.rounds,
        duration_seconds: config.duration.as_secs_f64(),
        turn_seconds: config.switch.map(|turn| turn.as_secs_f64()),
        warmup_seconds: Some(config.warmup.as_secs_f64()),
        block_seconds: BLOCK_NS as f64 / 1e9,
        resamples: config.resamples,
        seed: config.seed,
        dropped_between_rounds: state.dropped_between_windows,
        pauses_let_finish_a_traced_read: None,
        attribution: delays.map(|d| match d {
            Ok(d) => crate::report::Attribution {
                events: d.events,
                lost_events: d.lost,
                unread_lines: d.unread,
                problem: None,
            },
            Err(why) => crate::report::Attribution { problem: Some(why.clone()), ..Default::default() },
        }),
        arms,
        blocks: arm_blocks,
    }
}

/// What the trace charged a monitor with over its windows, one way of charging CPU.
#[derive(Debug, Default)]
struct Charged {
    /// The target's threads' delays, each once.
    cpu_ns: u64,
    lock_ns: u64,
    /// What was taken off the operations, summed: a delay counts in every operation it held up.
    operations_ns: u64,
    operations: u64,
    /// Every window's blocks, each operation less its charge.
    without: Vec<Block>,
    /// Per window: those blocks, and the blocks as they were (what the intervals resample).
    units: Vec<(Vec<Block>, Vec<Block>)>,
}

impl Charged {
    fn report(self, latency: Option<stats::Percentiles>, config: &ImpactConfig) -> crate::report::Charged {
        let units: Vec<(&[Block], &[Block])> = self.units.iter().map(|(w, a)| (w.as_slice(), a.as_slice())).collect();
        let without = stats::percentiles(&self.without);
        let intervals = stats::paired_difference_intervals(&units, config.resamples, config.seed);
        crate::report::Charged {
            cpu_delay_seconds: self.cpu_ns as f64 / 1e9,
            lock_delay_seconds: self.lock_ns as f64 / 1e9,
            operations_delayed: self.operations,
            operations_delay_seconds: self.operations_ns as f64 / 1e9,
            without: without.map(StatReport::from),
            differences: latency.zip(without).map(|(l, w)| crate::report::differences(&l, &w, intervals)),
        }
    }
}

/// What the windows of one arm in one round add up to.
#[derive(Debug, Default)]
struct RoundParts {
    seconds: f64,
    failed: u64,
    blocks: Vec<Block>,
    windows_with_monitor: u32,
    cpu_readings: u32,
    cpu_seconds: f64,
    ledger: Option<Ledger>,
    problem: Option<String>,
}

/// Seconds of service beyond `base_ns` per operation, summed over `blocks`' operations.
fn excess_seconds(blocks: &[Block], base_ns: f64) -> f64 {
    blocks
        .iter()
        .flat_map(|b| b.buckets.iter())
        .map(|&(bucket, count)| (stats::bucket_value(bucket) - base_ns).max(0.0) * count as f64)
        .sum::<f64>()
        / 1e9
}
