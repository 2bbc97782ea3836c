//! The analyzer: a state machine fed one line at a time, finished into a [`Tally`].
//!
//! It pairs `<unfinished ...>` halves with their `<... resumed>` halves per pid, turns
//! timestamps into one time axis (adding a day when `-t`/`-tt` wraps at midnight, summing
//! `-r` deltas), and accumulates per-syscall histograms, the slowest calls, per-pid and
//! per-path totals and a timeline of slow calls. Memory is bounded: histograms instead of
//! durations, a fixed-size heap of slow calls, a fixed number of examples, a capped path
//! table and a timeline that coarsens itself. It reads no files and no clock, and derives
//! nothing for display: peaks, percentiles and orders by time are `report`'s, from the tally.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, BufRead};

use memchr::{memchr, memchr_iter};
use proctor_modes::ModeConfig;

use crate::parse::{parse_line_then, BadLine, Call, CallResult, Event, Line, Parsed, Part, TimeKind, Timestamp};
use crate::tally::{Capped, Caps, Example, PathStats, PidStats, SlowCall, SourceStats, SyscallStats, Tally};

/// Knobs of the analysis; [`Default`] is what `proctor strace` uses.
#[derive(Debug, Clone)]
pub struct AnalyzerConfig {
    /// How many of the slowest calls to keep.
    pub slowest: usize,
    /// Calls at least this long go into the timeline.
    pub slow_threshold_ns: u64,
    /// How many bad lines and orphans to keep as examples.
    pub examples: usize,
    /// Distinct `-y` paths tracked; later ones are counted as "other".
    pub max_paths: usize,
    /// Timeline buckets kept before they are merged pairwise into wider ones.
    pub max_timeline_buckets: usize,
    /// Distinct syscall names tracked (Linux has about 450); calls under later names are
    /// counted under [`OTHER_NAMES`].
    pub max_syscalls: usize,
    /// Distinct errno names tracked per syscall (Linux has about 135); later ones are counted
    /// under [`OTHER_NAMES`].
    pub max_errnos: usize,
    /// Distinct signal names tracked (64 on Linux, with strace's `SIGRT_n`).
    pub max_signals: usize,
    /// Processes with their own totals; later pids are summed under one row.
    pub max_pids: usize,
    pub modes: ModeConfig,
}

/// The name under which calls, errnos and signals beyond a cap are counted.
pub const OTHER_NAMES: &str = "(other names)";

impl Default for AnalyzerConfig {
    fn default() -> Self {
        Self {
            slowest: 20,
            slow_threshold_ns: 100_000_000,
            examples: 10,
            max_paths: 10_000,
            max_timeline_buckets: 4096,
            max_syscalls: 1024,
            max_errnos: 160,
            max_signals: 128,
            max_pids: 1_000_000,
            // `-T` prints whole microseconds. Wall times are durations: a rare cluster that
            // holds much of a syscall's time is a peak too.
            modes: ModeConfig { resolution: Some(1_000.0), ..ModeConfig::durations() },
        }
    }
}

/// Lines longer than this are cut (the rest of the line is skipped) so one giant line
/// cannot take unbounded memory.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Feeds every line of `reader` to `analyzer`. Lines that lie whole in the reader's buffer
/// are parsed in place; only a line straddling two buffer fills is copied. Returns the
/// number of bytes read.
pub fn feed_reader<R: BufRead>(analyzer: &mut Analyzer, mut reader: R) -> io::Result<u64> {
    let mut carry: Vec<u8> = Vec::new();
    // Whether the line in `carry` lost bytes to the cap.
    let mut cut = false;
    let mut bytes = 0u64;
    loop {
        let buffer = match reader.fill_buf() {
            Ok([]) => break,
            Ok(buffer) => buffer,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        let filled = buffer.len();
        let mut start = 0;
        if !carry.is_empty() {
            let Some(newline) = memchr(b'\n', buffer) else {
                cut |= extend_capped(&mut carry, buffer);
                reader.consume(filled);
                bytes += filled as u64;
                continue;
            };
            cut |= extend_capped(&mut carry, &buffer[..newline]);
            analyzer.lines_cut += u64::from(cut);
            analyzer.feed_line(&carry);
            carry.clear();
            cut = false;
            start = newline + 1;
        }
        let whole = &buffer[start..];
        // One `memchr` over the whole buffer replaces a NUL check per line (see
        // `parse_line_without_nul`); a buffer with a NUL takes the checking path.
        let nul_free = memchr(0, whole).is_none();
        let mut line_start = 0;
        for newline in memchr_iter(b'\n', whole) {
            analyzer.feed_line_checked(&whole[line_start..newline], nul_free);
            line_start = newline + 1;
        }
        cut |= extend_capped(&mut carry, &whole[line_start..]);
        reader.consume(filled);
        bytes += filled as u64;
    }
    if !carry.is_empty() {
        analyzer.lines_cut += u64::from(cut);
        analyzer.feed_line(&carry);
    }
    Ok(bytes)
}

/// Appends what fits under [`MAX_LINE_BYTES`]; returns whether anything did not.
fn extend_capped(carry: &mut Vec<u8>, more: &[u8]) -> bool {
    let room = MAX_LINE_BYTES.saturating_sub(carry.len());
    carry.extend_from_slice(&more[..more.len().min(room)]);
    more.len() > room
}

/// A word-at-a-time multiplicative hash (the FxHash idea) for syscall names, paths and pids.
/// These keys are short and come from one trusted log, so HashDoS resistance buys nothing,
/// while SipHash (or byte-at-a-time FNV) costs a measurable share of the per-line budget.
#[derive(Default)]
struct WordHash(u64);

const HASH_MULTIPLIER: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl WordHash {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(HASH_MULTIPLIER);
    }
}

impl Hasher for WordHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
    }
    fn write_u32(&mut self, value: u32) {
        self.add(u64::from(value));
    }
    fn write_u64(&mut self, value: u64) {
        self.add(value);
    }
    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHash>>;

/// One slow call in the bounded heap, ordered by duration; `sequence` (arrival order) breaks
/// ties so that earlier calls win.
#[derive(Debug)]
struct Ranked {
    sequence: u64,
    call: SlowCall,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.call.duration_ns.cmp(&other.call.duration_ns).then_with(|| other.sequence.cmp(&self.sequence))
    }
}

/// The unfinished half of a call, waiting for its resumption on the same pid. A pid's slot
/// stays in the map until its process exits, and its buffers are reused by the pid's next
/// unfinished half:
/// on a busy log one line in twelve is a half, and two allocations for each were a visible
/// share of the time.
#[derive(Debug, Default)]
struct Pending {
    /// Whether the slot holds a half; resuming or writing off a half only clears this.
    active: bool,
    syscall: usize,
    start_seconds: Option<f64>,
    /// Whether the start line had a timestamp (its text is in `time`).
    has_time: bool,
    time: Vec<u8>,
    line: u64,
    source: usize,
    args: Vec<u8>,
}

/// Turns per-line timestamps into one axis for the current source.
#[derive(Debug, Default)]
struct Clock {
    last_clock: Option<f64>,
    day_offset: f64,
    relative_total: f64,
}

const DAY_SECONDS: f64 = 86_400.0;

impl Clock {
    fn absolute(&mut self, timestamp: &Timestamp<'_>) -> f64 {
        match timestamp.kind {
            TimeKind::Epoch => timestamp.seconds,
            TimeKind::Relative => {
                self.relative_total += timestamp.seconds;
                self.relative_total
            }
            TimeKind::Clock => {
                // Lines are written in order, so a jump back of more than half a day is the
                // clock passing midnight, not time going backwards.
                if let Some(last) = self.last_clock {
                    if timestamp.seconds < last - DAY_SECONDS / 2.0 {
                        self.day_offset += DAY_SECONDS;
                    }
                }
                self.last_clock = Some(timestamp.seconds);
                timestamp.seconds + self.day_offset
            }
        }
    }
}

/// Feed lines with [`Analyzer::feed_line`] (or a reader with [`feed_reader`]), call
/// [`Analyzer::begin_source`] between files, then [`Analyzer::finish`].
#[derive(Debug)]
pub struct Analyzer {
    config: AnalyzerConfig,
    sources: Vec<SourceStats>,
    /// Pid for lines without one: from a `-ff` file name, else unknown.
    source_pid: Option<u32>,
    clock: Clock,
    time_kind: Option<TimeKind>,
    /// Indices into `syscalls` of names up to 16 bytes long (all real ones): an
    /// open-addressing table (linear probing, at most half full) of [`NameKey`]s, so a line
    /// finds its syscall by comparing three words, without a `memcmp` call or a miss.
    syscall_keys: Vec<(NameKey, usize)>,
    /// Indices of longer names.
    long_syscall_names: FastMap<Box<[u8]>, usize>,
    syscalls: Vec<SyscallStats>,
    /// The index in `syscalls` of [`OTHER_NAMES`], made when the first name over the cap comes.
    other_syscall: Option<usize>,
    /// Calls, errnos and signals counted under [`OTHER_NAMES`] because of a cap.
    capped: Capped,
    /// Keyed by pid; 0 for lines that name no pid. A thread is in at most one call. An entry
    /// goes when its process exits; at most `max_pids` are kept.
    pending: FastMap<u32, Pending>,
    /// A resumed call's arguments (both halves) and its start time, kept to reuse their
    /// buffers: they are swapped with the pending half's while the call is accounted.
    joined_args: Vec<u8>,
    start_time: Vec<u8>,
    slowest: BinaryHeap<Reverse<Ranked>>,
    sequence: u64,
    /// Slow calls per timeline bucket, keyed by bucket start (seconds / bucket width).
    timeline: BTreeMap<i64, (u64, u128)>,
    timeline_bucket_seconds: f64,
    pids: FastMap<u32, PidStats>,
    /// Processes beyond `max_pids`, summed.
    pids_other: PidStats,
    paths_table: PathTable,
    paths_other: PathStats,
    signals: BTreeMap<String, u64>,
    lines: u64,
    /// Lines cut to [`MAX_LINE_BYTES`] (set by [`feed_reader`]).
    lines_cut: u64,
    notes: u64,
    bad_by_reason: BTreeMap<BadLine, u64>,
    bad_examples: Vec<Example>,
    orphan_unfinished: u64,
    orphan_resumed: u64,
    unfinished_at_exit: u64,
    orphan_examples: Vec<Example>,
    without_duration: u64,
}

impl Analyzer {
    pub fn new(config: AnalyzerConfig) -> Self {
        Self {
            config,
            sources: Vec::new(),
            source_pid: None,
            clock: Clock::default(),
            time_kind: None,
            syscall_keys: vec![(NameKey::NONE, 0); 64],
            long_syscall_names: FastMap::default(),
            syscalls: Vec::new(),
            other_syscall: None,
            capped: Capped::default(),
            pending: FastMap::default(),
            joined_args: Vec::new(),
            start_time: Vec::new(),
            slowest: BinaryHeap::new(),
            sequence: 0,
            timeline: BTreeMap::new(),
            timeline_bucket_seconds: 1.0,
            pids: FastMap::default(),
            pids_other: PidStats::default(),
            paths_table: PathTable::default(),
            paths_other: PathStats::default(),
            signals: BTreeMap::new(),
            lines: 0,
            lines_cut: 0,
            notes: 0,
            bad_by_reason: BTreeMap::new(),
            bad_examples: Vec::new(),
            orphan_unfinished: 0,
            orphan_resumed: 0,
            unfinished_at_exit: 0,
            orphan_examples: Vec::new(),
            without_duration: 0,
        }
    }

    /// Starts a new input. `pid` is the pid of every line without one (from `-ff`'s
    /// `FILE.PID` names). Halves still pending from an earlier source stay pending: with
    /// `-ff` each pid has its own file, so they cannot be resumed elsewhere, and they are
    /// reported as orphans at the end.
    pub fn begin_source(&mut self, name: &str, pid: Option<u32>) {
        self.sources.push(SourceStats { name: name.to_string(), ..SourceStats::default() });
        self.source_pid = pid;
        self.clock = Clock::default();
    }

    /// Lines read and lines understood in the current source.
    pub fn current_source_counts(&self) -> (u64, u64) {
        self.sources.last().map_or((0, 0), |source| (source.lines, source.events))
    }

    /// Parses and accounts one line (without its newline).
    pub fn feed_line(&mut self, text: &[u8]) {
        self.feed_line_checked(text, false);
    }

    /// [`Analyzer::feed_line`] for a line the caller may already know holds no NUL byte.
    #[inline]
    fn feed_line_checked(&mut self, text: &[u8], nul_free: bool) {
        if self.sources.is_empty() {
            self.begin_source("-", None);
        }
        let source = self.sources.len() - 1;
        self.lines += 1;
        self.sources[source].lines += 1;
        let line_number = self.sources[source].lines;
        // What `parse_line` does, with its NUL check skipped when the caller has done it.
        if !nul_free && memchr(0, text).is_some() {
            self.bad_line(source, line_number, BadLine::Binary, text);
            return;
        }
        parse_line_then(text, |parsed| match parsed {
            Parsed::Call { pid, timestamp, call } => {
                let here = self.locate(source, line_number, pid, timestamp.as_ref());
                self.call(call, here);
            }
            Parsed::Other(Ok(line)) => self.other_event(source, line_number, line),
            Parsed::Other(Err(reason)) => self.bad_line(source, line_number, reason, text),
        });
    }

    /// Counts an event and places it: its pid (else the source's) and time on one axis.
    #[inline]
    fn locate<'t>(
        &mut self,
        source: usize,
        line_number: u64,
        pid: Option<u32>,
        timestamp: Option<&Timestamp<'t>>,
    ) -> Here<'t> {
        self.sources[source].events += 1;
        let pid = pid.or(self.source_pid);
        let seconds = timestamp.map(|timestamp| {
            self.time_kind.get_or_insert(timestamp.kind);
            self.clock.absolute(timestamp)
        });
        let time_text = timestamp.map(|timestamp| timestamp.text);
        Here { pid, seconds, time_text, source, line: line_number }
    }

    /// Notes, signals and exits (and calls, should a caller pass one here).
    #[inline(never)]
    fn other_event(&mut self, source: usize, line_number: u64, line: Line<'_>) {
        if matches!(line.event, Event::Note) {
            self.notes += 1;
            return;
        }
        let here = self.locate(source, line_number, line.pid, line.timestamp.as_ref());
        let pid = here.pid;
        match line.event {
            Event::Call(ref call) => self.call(call, here),
            Event::Signal { name } => {
                let name = lossy(name);
                if let Some(count) = self.signals.get_mut(&name) {
                    *count += 1;
                } else if self.signals.len() < self.config.max_signals {
                    self.signals.insert(name, 1);
                } else {
                    self.capped.signals += 1;
                    *self.signals.entry(OTHER_NAMES.to_string()).or_default() += 1;
                }
                if let Some(pid) = pid {
                    let max = self.config.max_pids;
                    pid_entry(&mut self.pids, &mut self.pids_other, &mut self.capped, max, pid).signals += 1;
                }
            }
            Event::Exited { code } => self.exit(here, format!("exited with {code}")),
            Event::Killed { signal } => self.exit(here, format!("killed by {}", lossy(signal))),
            Event::Note => {}
        }
    }

    #[cold]
    fn bad_line(&mut self, source: usize, line_number: u64, reason: BadLine, text: &[u8]) {
        self.sources[source].bad += 1;
        *self.bad_by_reason.entry(reason).or_default() += 1;
        if self.bad_examples.len() < self.config.examples {
            self.bad_examples.push(Example {
                source,
                line: line_number,
                what: reason.as_str().to_string(),
                text: excerpt(text, 160),
            });
        }
    }

    fn exit(&mut self, here: Here<'_>, status: String) {
        let key = here.pid.unwrap_or(0);
        if let Some(pending) = self.pending.remove(&key) {
            if pending.active {
                // The call never returned because its process ended: expected, not an orphan.
                self.unfinished_at_exit += 1;
                self.syscalls[pending.syscall].unfinished += 1;
            }
        }
        if let Some(pid) = here.pid {
            let max = self.config.max_pids;
            pid_entry(&mut self.pids, &mut self.pids_other, &mut self.capped, max, pid).exit = Some(status);
        }
    }

    fn call(&mut self, call: &Call<'_>, here: Here<'_>) {
        let syscall = self.syscall(call.name);
        let key = here.pid.unwrap_or(0);
        match call.part {
            Part::Unfinished => {
                if self.pending.len() >= self.config.max_pids && !self.pending.contains_key(&key) {
                    // More calls pending at once than processes tracked: written off now
                    // rather than held (a log this wide is not one strace wrote).
                    self.capped.pending += 1;
                    let what = "unfinished, with more calls pending at once than the cap";
                    let half = Pending {
                        active: true,
                        syscall,
                        line: here.line,
                        source: here.source,
                        args: call.args[..call.args.len().min(ARGS_KEPT)].to_vec(),
                        ..Pending::default()
                    };
                    let examples = self.config.examples;
                    write_off(
                        &mut self.orphan_unfinished,
                        &mut self.syscalls,
                        &mut self.orphan_examples,
                        examples,
                        &half,
                        what,
                    );
                    return;
                }
                let pending = self.pending.entry(key).or_default();
                if pending.active {
                    let what = "unfinished, then another call on the same pid";
                    write_off(
                        &mut self.orphan_unfinished,
                        &mut self.syscalls,
                        &mut self.orphan_examples,
                        self.config.examples,
                        pending,
                        what,
                    );
                }
                pending.active = true;
                pending.syscall = syscall;
                pending.start_seconds = here.seconds;
                pending.has_time = here.time_text.is_some();
                pending.time.clear();
                pending.time.extend_from_slice(here.time_text.unwrap_or_default());
                pending.line = here.line;
                pending.source = here.source;
                pending.args.clear();
                pending.args.extend_from_slice(&call.args[..call.args.len().min(ARGS_KEPT)]);
            }
            Part::Resumed => {
                if let Some(pending) = self.pending.get_mut(&key).filter(|pending| pending.active) {
                    pending.active = false;
                    if pending.syscall == syscall {
                        // Take the half's buffers (leaving the spare ones in the slot for its
                        // next half), so that `complete` can borrow the analyzer.
                        std::mem::swap(&mut pending.args, &mut self.joined_args);
                        std::mem::swap(&mut pending.time, &mut self.start_time);
                        let (seconds, has_time) = (pending.start_seconds, pending.has_time);
                        let (source, line) = (pending.source, pending.line);
                        let mut args = std::mem::take(&mut self.joined_args);
                        let time = std::mem::take(&mut self.start_time);
                        args.extend_from_slice(b" ...");
                        args.extend_from_slice(call.args);
                        let time_text = has_time.then_some(&time[..]);
                        let start = Here { pid: here.pid, seconds, time_text, source, line };
                        self.complete(syscall, call, &args, start);
                        self.joined_args = args;
                        self.start_time = time;
                        return;
                    }
                    write_off(
                        &mut self.orphan_unfinished,
                        &mut self.syscalls,
                        &mut self.orphan_examples,
                        self.config.examples,
                        pending,
                        "unfinished, then a different call resumed",
                    );
                }
                self.orphan_resumed += 1;
                self.keep_orphan_example(here.source, here.line, "resumed without its start", call.args);
                self.complete(syscall, call, call.args, here);
            }
            Part::Whole => self.complete(syscall, call, call.args, here),
        }
    }

    fn keep_orphan_example(&mut self, source: usize, line: u64, what: &str, args: &[u8]) {
        if self.orphan_examples.len() < self.config.examples {
            self.orphan_examples.push(Example { source, line, what: what.to_string(), text: excerpt(args, 160) });
        }
    }

    #[inline]
    fn syscall(&mut self, name: &[u8]) -> usize {
        let Some(key) = NameKey::new(name) else {
            return self.long_syscall(name);
        };
        let mask = self.syscall_keys.len() - 1;
        let mut at = key.slot() & mask;
        loop {
            let (slot_key, index) = self.syscall_keys[at];
            if slot_key == key {
                return index;
            }
            if slot_key == NameKey::NONE {
                break;
            }
            at = (at + 1) & mask;
        }
        if self.syscalls_full() {
            return self.other_syscall();
        }
        let index = self.new_syscall(name);
        self.syscall_keys[at] = (key, index);
        if self.syscalls.len() * 2 > self.syscall_keys.len() {
            let doubled = vec![(NameKey::NONE, 0); self.syscall_keys.len() * 2];
            let old = std::mem::replace(&mut self.syscall_keys, doubled);
            let mask = self.syscall_keys.len() - 1;
            for (key, index) in old.into_iter().filter(|(key, _)| *key != NameKey::NONE) {
                let mut at = key.slot() & mask;
                while self.syscall_keys[at].0 != NameKey::NONE {
                    at = (at + 1) & mask;
                }
                self.syscall_keys[at] = (key, index);
            }
        }
        index
    }

    fn long_syscall(&mut self, name: &[u8]) -> usize {
        if let Some(&index) = self.long_syscall_names.get(name) {
            return index;
        }
        if self.syscalls_full() {
            return self.other_syscall();
        }
        let index = self.new_syscall(name);
        self.long_syscall_names.insert(name.into(), index);
        index
    }

    /// Whether `max_syscalls` names are tracked already (the other-names entry not counted).
    fn syscalls_full(&self) -> bool {
        self.syscalls.len() - usize::from(self.other_syscall.is_some()) >= self.config.max_syscalls
    }

    /// The entry calls under names beyond the cap are counted in (not looked up by name, so a
    /// log whose syscall is really called that is not mixed into it).
    #[cold]
    fn other_syscall(&mut self) -> usize {
        self.capped.syscall_lines += 1;
        match self.other_syscall {
            Some(index) => index,
            None => {
                let index = self.new_syscall(OTHER_NAMES.as_bytes());
                self.other_syscall = Some(index);
                index
            }
        }
    }

    fn new_syscall(&mut self, name: &[u8]) -> usize {
        let stats = SyscallStats { name: lossy(name), moves_bytes: moves_bytes(name), ..SyscallStats::default() };
        self.syscalls.push(stats);
        self.syscalls.len() - 1
    }

    /// Accounts a call that has its result. `here` is where it started.
    fn complete(&mut self, syscall: usize, call: &Call<'_>, args: &[u8], here: Here<'_>) {
        let stats = &mut self.syscalls[syscall];
        stats.count += 1;
        let failed = match call.result {
            Some(CallResult::Error { errno }) => {
                stats.errors += 1;
                self.capped.errnos += u64::from(count_errno(&mut stats.errnos, errno, self.config.max_errnos));
                true
            }
            Some(CallResult::Interrupted { errno }) => {
                stats.interrupted += 1;
                self.capped.errnos += u64::from(count_errno(&mut stats.errnos, errno, self.config.max_errnos));
                false
            }
            _ => false,
        };
        match call.duration_ns {
            Some(ns) => stats.durations.record(ns),
            None => self.without_duration += 1,
        }
        let duration_ns = call.duration_ns.unwrap_or(0);
        if let Some(pid) = here.pid {
            let pid_stats =
                pid_entry(&mut self.pids, &mut self.pids_other, &mut self.capped, self.config.max_pids, pid);
            pid_stats.calls += 1;
            pid_stats.errors += u64::from(failed);
            pid_stats.wall_ns += u128::from(duration_ns);
            pid_stats.slowest_ns = pid_stats.slowest_ns.max(duration_ns);
        }
        if let Some(path) = decorated_first_fd(args) {
            let bytes = match call.result {
                Some(CallResult::Value(value)) if value > 0 && self.syscalls[syscall].moves_bytes => value as u64,
                _ => 0,
            };
            let path_stats = match self.paths_table.get_or_insert(path, self.config.max_paths) {
                Some(stats) => stats,
                None => &mut self.paths_other,
            };
            path_stats.calls += 1;
            path_stats.errors += u64::from(failed);
            path_stats.wall_ns += u128::from(duration_ns);
            path_stats.bytes += bytes;
        }
        if call.duration_ns.is_none() {
            return;
        }
        if duration_ns >= self.config.slow_threshold_ns {
            if let Some(seconds) = here.seconds {
                self.add_to_timeline(seconds, duration_ns);
            }
        }
        self.sequence += 1;
        let qualifies = self.slowest.len() < self.config.slowest
            || self.slowest.peek().is_some_and(|Reverse(fastest)| duration_ns > fastest.call.duration_ns);
        if qualifies && self.config.slowest > 0 {
            let name = self.syscalls[syscall].name.clone();
            self.slowest.push(Reverse(Ranked {
                sequence: self.sequence,
                call: SlowCall {
                    duration_ns,
                    name,
                    pid: here.pid,
                    source: here.source,
                    line: here.line,
                    time: here.time_text.map(lossy),
                    args: excerpt(args, ARGS_KEPT),
                    result: call.result.map(|result| result_text(&result)).unwrap_or_default(),
                },
            }));
            if self.slowest.len() > self.config.slowest {
                self.slowest.pop();
            }
        }
    }

    fn add_to_timeline(&mut self, seconds: f64, duration_ns: u64) {
        let key = (seconds / self.timeline_bucket_seconds).floor() as i64;
        let entry = self.timeline.entry(key).or_default();
        entry.0 += 1;
        entry.1 += u128::from(duration_ns);
        if self.timeline.len() > self.config.max_timeline_buckets {
            // Too many buckets for the time span: halve the resolution.
            self.timeline_bucket_seconds *= 2.0;
            let old = std::mem::take(&mut self.timeline);
            for (key, (count, total)) in old {
                let merged = self.timeline.entry(key.div_euclid(2)).or_default();
                merged.0 += count;
                merged.1 += total;
            }
        }
    }

    /// Ends the analysis: leftover unfinished halves become orphans, and everything found is
    /// handed over as a [`Tally`] (for `report::build`).
    pub fn finish(mut self) -> Tally {
        let mut leftovers: Vec<Pending> =
            self.pending.drain().map(|(_, pending)| pending).filter(|pending| pending.active).collect();
        leftovers.sort_by_key(|pending| (pending.source, pending.line));
        for pending in &leftovers {
            write_off(
                &mut self.orphan_unfinished,
                &mut self.syscalls,
                &mut self.orphan_examples,
                self.config.examples,
                pending,
                "unfinished, never resumed",
            );
        }
        Tally {
            sources: self.sources,
            lines: self.lines,
            lines_cut: self.lines_cut,
            notes: self.notes,
            time_kind: self.time_kind,
            syscalls: self.syscalls,
            without_duration: self.without_duration,
            // Ascending order of `Reverse`: the slowest first, of equal ones the earliest.
            slowest: self.slowest.into_sorted_vec().into_iter().map(|Reverse(ranked)| ranked.call).collect(),
            pids: self.pids.into_iter().collect(),
            pids_other: self.pids_other,
            capped: self.capped,
            caps: Caps {
                syscalls: self.config.max_syscalls,
                errnos: self.config.max_errnos,
                signals: self.config.max_signals,
                pids: self.config.max_pids,
            },
            paths: self.paths_table.entries.into_iter().map(|(path, stats)| (lossy(&path), stats)).collect(),
            paths_other: self.paths_other,
            signals: self.signals,
            timeline: self.timeline,
            timeline_bucket_seconds: self.timeline_bucket_seconds,
            orphan_unfinished: self.orphan_unfinished,
            orphan_resumed: self.orphan_resumed,
            unfinished_at_exit: self.unfinished_at_exit,
            orphan_examples: self.orphan_examples,
            bad_by_reason: self.bad_by_reason,
            bad_examples: self.bad_examples,
            slow_threshold_ns: self.config.slow_threshold_ns,
            modes: self.config.modes,
        }
    }
}

/// Counts `pending` as an orphan half and keeps it as an example. A function of the fields it
/// touches rather than a method, so callers can hold a borrow into the pending map.
fn write_off(
    orphan_unfinished: &mut u64,
    syscalls: &mut [SyscallStats],
    examples: &mut Vec<Example>,
    limit: usize,
    pending: &Pending,
    what: &str,
) {
    *orphan_unfinished += 1;
    syscalls[pending.syscall].unfinished += 1;
    if examples.len() < limit {
        let text = excerpt(&pending.args, 160);
        examples.push(Example { source: pending.source, line: pending.line, what: what.to_string(), text });
    }
}

/// Where and when a line (or the start of a split call) happened.
#[derive(Debug, Clone, Copy)]
struct Here<'a> {
    pid: Option<u32>,
    seconds: Option<f64>,
    time_text: Option<&'a [u8]>,
    source: usize,
    line: u64,
}

/// A name of up to 16 bytes as two words plus its length, read with fixed-size (and for most
/// lengths overlapping) loads that together cover every byte. For one length the words are a
/// function of the bytes and the bytes of the words, so equal keys mean equal names, and
/// a lookup compares names without a `memcmp` or `memcpy` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NameKey {
    words: [u64; 2],
    len: usize,
}

impl NameKey {
    /// Matches no name: no name has this length.
    const NONE: NameKey = NameKey { words: [0, 0], len: usize::MAX };

    #[inline]
    fn new(name: &[u8]) -> Option<NameKey> {
        let len = name.len();
        let words = match len {
            0..=7 => [short_word(name), 0],
            8..=16 => [load8(name, 0), load8(name, len - 8)],
            _ => return None,
        };
        Some(NameKey { words, len })
    }

    /// Where to start probing: the key's words and length, mixed (the caller masks it).
    #[inline]
    fn slot(&self) -> usize {
        let mixed = (self.words[0] ^ self.words[1].rotate_left(29) ^ self.len as u64).wrapping_mul(HASH_MULTIPLIER);
        (mixed >> 32) as usize
    }
}

/// Bytes `at..at + 8` as a little-endian word: one load, no `memcpy` call.
#[inline]
fn load8(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[inline]
fn load4(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u64::from(u32::from_le_bytes(word))
}

/// A word that holds every byte of a slice shorter than 8 bytes (given its length): two
/// overlapping 4-byte loads from 4 bytes up, else the first, middle and last byte.
#[inline]
fn short_word(bytes: &[u8]) -> u64 {
    let len = bytes.len();
    match len {
        0 => 0,
        1..=3 => u64::from(bytes[0]) | u64::from(bytes[len / 2]) << 8 | u64::from(bytes[len - 1]) << 16,
        _ => load4(bytes, 0) | load4(bytes, len - 4) << 32,
    }
}

/// [`WordHash`] over a whole slice, read with 8-byte loads (the last one overlapping) rather
/// than through the `Hasher` interface, which copies the tail through a `memcpy` call.
#[inline]
fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut hash = WordHash(0);
    hash.add(bytes.len() as u64);
    if bytes.len() < 8 {
        hash.add(short_word(bytes));
        return hash.0;
    }
    let mut at = 0;
    while at + 8 < bytes.len() {
        hash.add(load8(bytes, at));
        at += 8;
    }
    hash.add(load8(bytes, bytes.len() - 8));
    hash.0
}

/// Whether `a` and `b` are equal, compared a word at a time in line: for the short paths
/// compared once per call this is cheaper than a call to `memcmp`.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let len = a.len();
    if len != b.len() {
        return false;
    }
    if len < 8 {
        return short_word(a) == short_word(b);
    }
    let mut at = 0;
    while at + 8 < len {
        if load8(a, at) != load8(b, at) {
            return false;
        }
        at += 8;
    }
    load8(a, len - 8) == load8(b, len - 8)
}

/// The `-y` path totals: a small open-addressing table (linear probing, at most half full)
/// of indices into `entries`. A lookup hashes the path once with [`hash_bytes`] and compares
/// bytes only when the whole 64-bit hash matches, which is cheaper per call than the
/// general-purpose map this replaced. Paths are only added (up to a cap), never removed.
#[derive(Debug, Default)]
struct PathTable {
    /// A power of two many `(hash, index + 1)` pairs; 0 marks an empty slot.
    slots: Vec<(u64, usize)>,
    entries: Vec<(Box<[u8]>, PathStats)>,
}

impl PathTable {
    /// The totals of `path`, added if new and the table holds fewer than `cap` paths.
    fn get_or_insert(&mut self, path: &[u8], cap: usize) -> Option<&mut PathStats> {
        if self.slots.is_empty() {
            self.slots = vec![(0, 0); 64];
        }
        let hash = hash_bytes(path);
        let mask = self.slots.len() - 1;
        // The high half: the final multiply mixes every input bit into it.
        let mut at = (hash >> 32) as usize & mask;
        let found = loop {
            let (slot_hash, slot_entry) = self.slots[at];
            if slot_entry == 0 {
                break None;
            }
            if slot_hash == hash && same_bytes(&self.entries[slot_entry - 1].0, path) {
                break Some(slot_entry - 1);
            }
            at = (at + 1) & mask;
        };
        if let Some(index) = found {
            return Some(&mut self.entries[index].1);
        }
        if self.entries.len() >= cap {
            return None;
        }
        self.entries.push((path.into(), PathStats::default()));
        let index = self.entries.len() - 1;
        self.slots[at] = (hash, index + 1);
        if self.entries.len() * 2 > self.slots.len() {
            self.grow();
        }
        Some(&mut self.entries[index].1)
    }

    fn grow(&mut self) {
        let doubled = vec![(0, 0); self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        let mask = self.slots.len() - 1;
        for (hash, entry) in old.into_iter().filter(|&(_, entry)| entry != 0) {
            let mut at = (hash >> 32) as usize & mask;
            while self.slots[at].1 != 0 {
                at = (at + 1) & mask;
            }
            self.slots[at] = (hash, entry);
        }
    }
}

/// Argument bytes kept per unfinished half and per slow call.
const ARGS_KEPT: usize = 200;

/// Counts `errno` in `errnos`, or under [`OTHER_NAMES`] once `max` names are there (so the
/// search stays bounded: no log makes it quadratic). Returns whether it went to the other names.
fn count_errno(errnos: &mut Vec<(String, u64)>, errno: &[u8], max: usize) -> bool {
    if let Some((_, count)) = errnos.iter_mut().take(max).find(|(name, _)| name.as_bytes() == errno) {
        *count += 1;
        return false;
    }
    if errnos.len() < max {
        errnos.push((lossy(errno), 1));
        return false;
    }
    match errnos.get_mut(max) {
        Some((_, count)) => *count += 1,
        None => errnos.push((OTHER_NAMES.to_string(), 1)),
    }
    true
}

/// The totals of `pid`, or of every pid beyond the cap summed.
fn pid_entry<'a>(
    pids: &'a mut FastMap<u32, PidStats>,
    other: &'a mut PidStats,
    capped: &mut Capped,
    max: usize,
    pid: u32,
) -> &'a mut PidStats {
    if pids.len() >= max && !pids.contains_key(&pid) {
        capped.pid_events += 1;
        return other;
    }
    pids.entry(pid).or_default()
}

/// Calls whose positive result is a byte count.
fn moves_bytes(name: &[u8]) -> bool {
    matches!(
        name,
        b"read"
            | b"write"
            | b"pread64"
            | b"pwrite64"
            | b"readv"
            | b"writev"
            | b"preadv"
            | b"pwritev"
            | b"preadv2"
            | b"pwritev2"
            | b"recvfrom"
            | b"sendto"
            | b"recvmsg"
            | b"sendmsg"
            | b"sendfile"
            | b"splice"
            | b"copy_file_range"
    )
}

/// With `-y`, a first argument `3</etc/passwd>` (or `-yy`'s `5<TCP:[a->b]>`) names what
/// the fd is. The decoration ends at the `>` that ends the argument, not at the `>` inside
/// `->`.
fn decorated_first_fd(args: &[u8]) -> Option<&[u8]> {
    let digits = args.iter().take_while(|byte| byte.is_ascii_digit()).count();
    if digits == 0 || args.get(digits) != Some(&b'<') {
        return None;
    }
    let inner = &args[digits + 1..];
    let end = find_decoration_end(inner).or_else(|| inner.strip_suffix(b">").map(<[u8]>::len))?;
    Some(&inner[..end])
}

/// The first `>, ` in `text` (see [`decorated_first_fd`]); a hand loop over `memchr`
/// because building a `memmem` finder per line costs more than this search.
fn find_decoration_end(text: &[u8]) -> Option<usize> {
    let mut start = 0;
    while let Some(offset) = memchr(b'>', &text[start..]) {
        let at = start + offset;
        if text.get(at + 1) == Some(&b',') && text.get(at + 2) == Some(&b' ') {
            return Some(at);
        }
        start = at + 1;
    }
    None
}

fn result_text(result: &CallResult<'_>) -> String {
    match result {
        CallResult::Value(value) => value.to_string(),
        CallResult::Error { errno } => format!("-1 {}", lossy(errno)),
        CallResult::Interrupted { errno } => format!("? {}", lossy(errno)),
        CallResult::Unknown => "?".to_string(),
        CallResult::Other(text) => excerpt(text, 40),
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// At most `limit` bytes of `bytes` as text, with `…` when cut.
fn excerpt(bytes: &[u8], limit: usize) -> String {
    if bytes.len() <= limit {
        return lossy(bytes);
    }
    let mut text = lossy(&bytes[..limit]);
    text.push('…');
    text
}

#[cfg(test)]
mod tests;
