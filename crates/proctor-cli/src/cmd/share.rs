//! `proctor share PID`: what a preforked family shares, who copies it, how fast, and what.
//!
//! Live, each round reads every member's `smaps_rollup` once, on `proctor_share::read`'s
//! worker thread under `--budget`, and says what the reads cost and how long each target was
//! held. From a recording (`--dir`/`--from`) the rounds are made of the agent's stored PSS
//! readings and nothing is read from `/proc`. The analysis is `proctor_share`'s.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use proctor_share::family::{members, Role, Spec};
use proctor_share::maps::{areas, Areas};
use proctor_share::read::{table, Worker};
use proctor_share::recording::Rounds;
use proctor_share::round::{mib, MemberRead, Round, RoundCost, Summary};
use proctor_share::watch::{Report, Tracker};
use proctor_share::{bytes, plot, span};
use proctor_store::Reader;
use proctor_vocab::{format_utc, parse_when, When};
use regex::Regex;
use serde::Serialize;

use super::common::now_unix_ns;
use crate::output::{print_json, Format};

/// Arguments of `proctor share`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The master of the family: its descendants are the workers.
    pub pid: u32,
    /// Count the master as a member (it maps what it preloaded too).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "true|false")]
    pub include_self: bool,
    /// Only members whose command line (or name, when it cannot be read) matches: picks a
    /// family out of a bigger tree (`proctor share 1 --match gunicorn`).
    #[arg(long = "match", value_name = "REGEX")]
    pub matching: Option<String>,
    /// Read a round every INTERVAL until Ctrl-C (or --count): who copies, how fast.
    #[arg(long, value_name = "INTERVAL", value_parser = proctor_vocab::duration_arg)]
    pub watch: Option<Duration>,
    /// With --watch, stop after this many rounds.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Also read the top grower's /proc/PID/smaps once: which mappings it copied.
    #[arg(long)]
    pub maps: bool,
    /// How many areas --maps lists (the rest are summed).
    #[arg(long, default_value_t = 12)]
    pub top: usize,
    /// The share of one core the reads may use (0.1 = 10 %): after each read the reader rests.
    #[arg(long, default_value_t = 0.1)]
    pub budget: f64,
    /// Per-worker private growth over time and the family's PSS against its RSS (.png or .svg).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Read the rounds from this recording (the agent's PSS readings) instead of /proc.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// From a recording: the range's start (default: 1 hour before its end).
    #[arg(long, value_parser = parse_when)]
    pub from: Option<When>,
    /// From a recording: the range's end (default: now).
    #[arg(long, value_parser = parse_when)]
    pub to: Option<When>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Read the host's /proc under DIR (a container with the host's / mounted there).
    #[arg(long, value_name = "DIR", conflicts_with = "root")]
    pub host_root: Option<PathBuf>,
    /// Read /proc under this directory instead of / (captured trees).
    #[arg(long, hide = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
}

/// What the reads cost over the whole run.
#[derive(Debug, Default, Serialize)]
struct Cost {
    rounds: usize,
    reads: usize,
    failed: usize,
    cpu_ms: f64,
    wall_ms: f64,
    longest_held_ms: f64,
    longest_held_pid: Option<u32>,
    /// The share of one core the reads were allowed; `None` from a recording.
    budget: Option<f64>,
    /// Rounds that took longer than the --watch interval (the budget or a slow read).
    late_rounds: usize,
}

impl Cost {
    fn add(&mut self, c: &RoundCost) {
        self.rounds += 1;
        self.reads += c.reads;
        self.failed += c.failed;
        self.cpu_ms += c.cpu_ns as f64 / 1e6;
        let held = c.longest_held_ns as f64 / 1e6;
        if held >= self.longest_held_ms && c.longest_held_pid.is_some() {
            self.longest_held_ms = held;
            self.longest_held_pid = c.longest_held_pid;
        }
    }
}

#[derive(Debug, Serialize)]
struct MapsOut {
    pid: u32,
    /// Why this process: the top grower, or the worker with the most private dirty.
    why: String,
    #[serde(flatten)]
    areas: Areas,
    cpu_ms: f64,
    held_ms: f64,
}

#[derive(Debug, Serialize)]
struct ShareOut {
    source: &'static str,
    master: u32,
    /// The last round's members.
    members: Vec<MemberRead>,
    summary: Summary,
    cost: Cost,
    watch: Option<Report>,
    maps: Option<MapsOut>,
    notes: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.budget.is_nan() || args.budget <= 0.0 || args.budget > 1.0 {
        bail!("--budget {} is not a share of one core between 0 and 1 (0.1 = 10 %)", args.budget);
    }
    if args.watch.is_some_and(|w| w.is_zero()) {
        bail!("--watch needs an interval above zero (10s, 500ms)");
    }
    if let Some(path) = &args.plot {
        plot::Format::from_path(path)?;
        let recording = args.dir.is_some() || args.from.is_some() || args.to.is_some();
        if args.watch.is_none() && !recording {
            bail!("--plot draws rounds over time: add --watch INTERVAL, or read a recording with --dir");
        }
    }
    let matching = match &args.matching {
        Some(text) => Some(Regex::new(text).with_context(|| format!("--match {text:?} is not a regular expression"))?),
        None => None,
    };
    let spec = Spec { master: args.pid, include_self: args.include_self, matching };
    let out = if args.dir.is_some() || args.from.is_some() || args.to.is_some() {
        if args.watch.is_some() || args.maps {
            bail!("--watch and --maps read /proc; a recording is read with --dir/--from/--to alone");
        }
        recorded(&args, &spec)?
    } else {
        live(&args, &spec)?
    };
    let Some(out) = out else { return Ok(ExitCode::FAILURE) };
    if let (Some(path), Some(report)) = (&args.plot, &out.watch) {
        let title = format!("proctor share {}: {}", out.master, out.summary.sentence());
        let data = match plot::Format::from_path(path)? {
            plot::Format::Png => plot::png(report, &title),
            plot::Format::Svg => plot::svg(report, &title).into_bytes(),
        };
        std::fs::write(path, data).with_context(|| format!("cannot write {}", path.display()))?;
    }
    match args.format {
        Format::Json => print_json(&out)?,
        Format::Text => print_text(&out)?,
    }
    if let Some(path) = &args.plot {
        eprintln!("proctor share: wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn live(args: &Args, spec: &Spec) -> anyhow::Result<Option<ShareOut>> {
    let root = super::common::root_of(args.root.as_deref(), args.host_root.as_deref())?;
    // Signals first, so the reading thread inherits the mask and Ctrl-C ends a watch cleanly.
    let signals = crate::signals::block()?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_for_signal = Arc::clone(&stop);
    signals.on_signal(move || stop_for_signal.store(true, Ordering::Relaxed));
    let worker = Worker::start(root.clone(), args.budget).context("cannot start the reading thread")?;
    let mut tracker = Tracker::new();
    let mut cost = Cost { budget: Some(worker.budget()), ..Cost::default() };
    let mut notes = Vec::new();
    let started = Instant::now();
    let mut last: Option<Round> = None;
    let rounds_wanted = if args.watch.is_some() { args.count.unwrap_or(u64::MAX) } else { 1 };
    let mut round_no = 0u64;
    while round_no < rounds_wanted && !stop.load(Ordering::Relaxed) {
        let round_started = Instant::now();
        let mut procs = table(&root).context("cannot list processes")?;
        if spec.matching.is_some() {
            let family = members(&procs, &Spec { matching: None, ..spec.clone() });
            let pids: Vec<u32> = family.iter().map(|m| m.proc.pid).collect();
            let lines = worker.cmdlines(pids.clone());
            for (pid, line) in pids.iter().zip(lines) {
                if let Some(p) = procs.iter_mut().find(|p| p.pid == *pid) {
                    p.cmdline = line;
                }
            }
        }
        let family = members(&procs, spec);
        if family.is_empty() {
            if round_no == 0 {
                if procs.iter().any(|p| p.pid == spec.master) {
                    eprintln!("proctor share: pid {} has no member matching --match", spec.master);
                } else {
                    eprintln!("proctor share: no process with pid {}", spec.master);
                }
                return Ok(None);
            }
            notes.push(format!(
                "the master (pid {}) exited {} into the watch",
                spec.master,
                span(started.elapsed().as_secs_f64())
            ));
            break;
        }
        let reads = worker.rollups(family.iter().map(|m| m.proc.pid).collect());
        let members = family
            .into_iter()
            .zip(reads)
            .map(|(m, read)| MemberRead {
                pid: m.proc.pid,
                ppid: m.proc.ppid,
                start_ticks: m.proc.start_ticks,
                comm: m.proc.comm,
                role: m.role,
                counters: read.result.as_ref().ok().copied(),
                anonymous_known: true,
                error: read.result.err(),
                cost: Some(read.cost),
            })
            .collect();
        let round = Round {
            at_secs: round_started.duration_since(started).as_secs_f64(),
            unix_ms: now_unix_ns() / 1_000_000,
            members,
        };
        let round_cost = RoundCost::of(&round);
        cost.add(&round_cost);
        tracker.push(&round);
        if args.watch.is_some() && args.format == Format::Text {
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "{} {}; reads {:.1} ms CPU, longest hold {:.1} ms",
                format_utc(round.unix_ms * 1_000_000),
                Summary::of(&round).sentence(),
                round_cost.cpu_ns as f64 / 1e6,
                round_cost.longest_held_ns as f64 / 1e6
            )?;
            out.flush()?;
        }
        last = Some(round);
        round_no += 1;
        let Some(interval) = args.watch else { break };
        if round_no >= rounds_wanted {
            break;
        }
        let took = round_started.elapsed();
        if took > interval {
            cost.late_rounds += 1;
        }
        let wake = round_started + interval;
        while !stop.load(Ordering::Relaxed) && Instant::now() < wake {
            std::thread::sleep((wake - Instant::now()).min(Duration::from_millis(100)));
        }
    }
    cost.wall_ms = started.elapsed().as_secs_f64() * 1e3;
    if cost.late_rounds > 0 {
        notes.push(format!(
            "{} rounds took longer than the --watch interval: the reads' budget ({:.0} % of a core) paces them",
            cost.late_rounds,
            args.budget * 100.0
        ));
    }
    let Some(last) = last else { bail!("interrupted before the first round") };
    let report = tracker.report();
    let maps = if args.maps { read_maps(&worker, &last, &report) } else { None };
    Ok(Some(finish("live", spec.master, last, cost, args.watch.is_some().then_some(report), maps, notes)))
}

/// `--maps`: the top grower, else the worker with the most private dirty (else the master).
fn read_maps(worker: &Worker, last: &Round, report: &Report) -> Option<MapsOut> {
    let read = |m: &&MemberRead| m.counters.map_or(0, |c| c.private_dirty_bytes);
    let (pid, why) = match report.top_grower_pid {
        Some(pid) => (pid, format!("the top grower (worker {})", report.top_grower.unwrap_or(0))),
        None => {
            let worker_max =
                last.members.iter().filter(|m| m.role == Role::Worker && m.counters.is_some()).max_by_key(read);
            match worker_max.or_else(|| last.members.first()) {
                Some(m) if m.role == Role::Worker => (m.pid, "the worker with the most private dirty memory".into()),
                Some(m) => (m.pid, "the master: there are no workers".into()),
                None => return None,
            }
        }
    };
    let rss = last.members.iter().find(|m| m.pid == pid).and_then(|m| m.counters).map_or(0, |c| c.rss_bytes);
    if rss >= 1 << 30 {
        eprintln!(
            "proctor share: reading /proc/{pid}/smaps: {} resident, so about {:.0} ms holding its mmap lock (~13 ms per GiB)",
            bytes(rss as f64),
            rss as f64 / (1u64 << 30) as f64 * 13.0
        );
    }
    let (result, cost) = worker.smaps(pid);
    match result {
        Ok(mappings) => Some(MapsOut {
            pid,
            why,
            areas: areas(&mappings, 12),
            cpu_ms: cost.cpu_ns as f64 / 1e6,
            held_ms: cost.held_ns as f64 / 1e6,
        }),
        Err(e) => {
            eprintln!("proctor share: cannot read /proc/{pid}/smaps: {e}");
            None
        }
    }
}

fn finish(
    source: &'static str,
    master: u32,
    last: Round,
    cost: Cost,
    watch: Option<Report>,
    maps: Option<MapsOut>,
    notes: Vec<String>,
) -> ShareOut {
    ShareOut { source, master, summary: Summary::of(&last), members: last.members, cost, watch, maps, notes }
}

fn recorded(args: &Args, spec: &Spec) -> anyhow::Result<Option<ShareOut>> {
    let given = args.dir.clone().unwrap_or_else(crate::datadir::default_for_flags);
    let dir = crate::datadir::for_reading(&given)?.to_path_buf();
    let mut reader = Reader::open(&dir).context("cannot read the recording")?;
    let now = now_unix_ns();
    let to = args.to.map_or(now, |w| w.resolve(now));
    let from = match args.from {
        Some(w) => w.resolve(now),
        None => to.saturating_sub(3600 * 1_000_000_000),
    };
    if from > to {
        bail!("--from {} is after --to {}", format_utc(from), format_utc(to));
    }
    let frames = reader.frames(from, to)?;
    let mut rounds = Rounds::new();
    let mut tracker = Tracker::new();
    let mut cost = Cost::default();
    let mut last = None;
    for frame in &frames {
        let Some(sample) = reader.read(frame) else { continue };
        if let Some(round) = rounds.push(&sample, spec) {
            cost.rounds += 1;
            tracker.push(&round);
            last = Some(round);
        }
    }
    crate::datadir::report_read("proctor share", reader.report());
    let Some(last) = last else {
        eprintln!(
            "proctor share: pid {} is in none of the {} samples between {} and {} in {}",
            spec.master,
            rounds.samples,
            format_utc(from),
            format_utc(to),
            dir.display()
        );
        return Ok(None);
    };
    let mut notes = vec![format!(
        "from {}: {} samples between {} and {}, the family in {}, {} rounds (a round per change of members or readings); no /proc reads",
        dir.display(),
        rounds.samples,
        format_utc(from),
        format_utc(to),
        rounds.samples_with_family,
        cost.rounds
    )];
    if rounds.unread > 0 {
        notes.push(format!(
            "{} member readings were missing (the agent's PSS worker had not read them yet): sums are over the members read",
            rounds.unread
        ));
    }
    notes.push("the recording stores no Anonymous counter: anon and file columns are unknown".into());
    Ok(Some(finish("recording", spec.master, last, cost, Some(tracker.report()), None, notes)))
}

fn print_text(out: &ShareOut) -> std::io::Result<()> {
    let mut w = std::io::stdout().lock();
    let workers = out.members.iter().filter(|m| m.role == Role::Worker).count();
    let master_name = out.members.iter().find(|m| m.role == Role::Master).map_or("", |m| m.comm.as_str());
    writeln!(
        w,
        "proctor share {}{}: {} members ({} workers), {}; sizes in MiB",
        out.master,
        if master_name.is_empty() { String::new() } else { format!(" ({master_name})") },
        out.members.len(),
        workers,
        if out.source == "live" { "read now" } else { "from a recording" }
    )?;
    writeln!(
        w,
        "{:>7} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}  name",
        "pid", "role", "RSS", "PSS", "USS", "shr.clean", "shr.dirty", "prv.clean", "prv.dirty", "anon", "file", "swap"
    )?;
    for m in &out.members {
        let role = match m.role {
            Role::Master => "master",
            Role::Worker => "worker",
        };
        match m.counters {
            Some(c) => {
                let (anon, file) = if m.anonymous_known {
                    (format!("{:.1}", mib(c.anonymous_bytes)), format!("{:.1}", mib(c.file_bytes())))
                } else {
                    ("-".into(), "-".into())
                };
                writeln!(
                    w,
                    "{:>7} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9} {:>9} {:>8.1}  {}",
                    m.pid,
                    role,
                    mib(c.rss_bytes),
                    mib(c.pss_bytes),
                    mib(c.uss_bytes()),
                    mib(c.shared_clean_bytes),
                    mib(c.shared_dirty_bytes),
                    mib(c.private_clean_bytes),
                    mib(c.private_dirty_bytes),
                    anon,
                    file,
                    mib(c.swap_bytes),
                    m.comm
                )?;
            }
            None => writeln!(
                w,
                "{:>7} {:>8}  not read: {}  {}",
                m.pid,
                role,
                m.error.as_deref().unwrap_or("unknown"),
                m.comm
            )?,
        }
    }
    writeln!(w, "{}", out.summary.sentence())?;
    if let Some(report) = &out.watch {
        writeln!(w)?;
        writeln!(w, "over {} ({} rounds): private dirty per member", span(report.watched_secs), report.rounds)?;
        writeln!(
            w,
            "{:>7} {:>8} {:>12} {:>12} {:>10} {:>12} {:>14}  ",
            "pid", "member", "prv.dirty", "growth", "MiB/min", "still shared", "full copy in"
        )?;
        for g in &report.members {
            let member = match g.role {
                Role::Master => "master".to_string(),
                Role::Worker => format!("worker {}", g.number),
            };
            let since = if g.started_during_watch { " (since it started)" } else { "" };
            writeln!(
                w,
                "{:>7} {:>8} {:>12} {:>12} {:>10} {:>12} {:>14}  {}{}",
                g.pid,
                member,
                bytes(g.private_dirty_bytes as f64),
                format!("{:+.1} MiB", g.growth_bytes as f64 / proctor_share::MIB),
                g.rate_bytes_per_min.map_or("-".into(), |r| format!("{:.2}", r / proctor_share::MIB)),
                bytes(g.shared_bytes as f64),
                g.full_copy_after_secs.map_or("-".into(), |s| format!("~{}", span(s))),
                if g.alive { "" } else { "gone" },
                since
            )?;
        }
        writeln!(w, "{}", report.verdict)?;
        if report.forgotten > 0 || report.recycled_not_listed > 0 {
            writeln!(
                w,
                "({} members gone longest ago are no longer listed, {} recyclings past the first 1000 not listed)",
                report.forgotten, report.recycled_not_listed
            )?;
        }
    } else {
        writeln!(w, "one round: --watch 10s shows who copies the shared pages and how fast")?;
    }
    if let Some(maps) = &out.maps {
        writeln!(w)?;
        writeln!(
            w,
            "mappings of pid {} ({}): {} mappings read in {:.1} ms of CPU, held {:.1} ms",
            maps.pid, maps.why, maps.areas.mappings, maps.cpu_ms, maps.held_ms
        )?;
        writeln!(
            w,
            "{:>12} {:>12} {:>12} {:>12} {:>9}  area",
            "prv.dirty", "anon", "still shared", "size", "mappings"
        )?;
        for a in &maps.areas.areas {
            writeln!(
                w,
                "{:>12} {:>12} {:>12} {:>12} {:>9}  {}",
                bytes(a.counters.private_dirty_bytes as f64),
                bytes(a.counters.anonymous_bytes as f64),
                bytes(a.counters.shared_bytes() as f64),
                bytes(a.size_bytes as f64),
                a.mappings,
                a.name
            )?;
        }
        if maps.areas.more_areas > 0 {
            writeln!(
                w,
                "{:>12} in {} more areas",
                bytes(maps.areas.more_private_dirty_bytes as f64),
                maps.areas.more_areas
            )?;
        }
        writeln!(w, "private dirty in a worker's mapping is what it copied or wrote there since it was forked")?;
    }
    let c = &out.cost;
    writeln!(w)?;
    match c.budget {
        Some(budget) => writeln!(
            w,
            "cost: {} smaps_rollup reads in {} rounds, {:.1} ms of CPU at a budget of {:.0} % of a core; the longest hold {:.1} ms{}; {} failed",
            c.reads,
            c.rounds,
            c.cpu_ms,
            budget * 100.0,
            c.longest_held_ms,
            c.longest_held_pid.map_or(String::new(), |p| format!(" (pid {p})")),
            c.failed
        )?,
        None => writeln!(w, "cost: none here; the agent's PSS worker made these readings within its own budget")?,
    }
    for note in &out.notes {
        writeln!(w, "note: {note}")?;
    }
    Ok(())
}
