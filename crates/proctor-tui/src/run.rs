//! The screen's loop: one thread that owns the terminal and the [`App`], reading one channel
//! that the input thread, the sources and the workers write to. It draws, waits on that
//! channel and hands store questions, signals and slow-log lines to their workers; it never
//! reads `/proc` or the store itself. The terminal is restored on `q`, Ctrl-C, SIGTERM and panic.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proctor_agent::{Reads, Shared};
use proctor_procfs::Root;
use ratatui::backend::{CrosstermBackend, TestBackend};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::Terminal;

use crate::app::{read_users, App, Effect, Mode};
use crate::frame::{Frame, Origin};
use crate::slow::Slow;
use crate::source::{self, Action, Ask, Bounded, Msg, Remote};
use crate::view::{column, default_descending, Needs, ViewState};

/// Where the screen's frames come from.
#[derive(Debug)]
pub enum Source {
    /// An in-process agent the caller started (and stops after [`run`]), sampling at the
    /// screen's interval under `root`; back-steps beyond the ring read `store` (a data
    /// directory). Its optional reads follow the columns as `reads` says.
    Live {
        shared: Arc<Shared>,
        root: Root,
        store: Option<PathBuf>,
        reads: ReadsRule,
    },
    /// A recording, shown from `at` (unix ms; newest when `None`).
    Recording {
        dir: PathBuf,
        at: Option<u64>,
    },
    Remote {
        url: String,
        token: Option<String>,
    },
}

/// The PSS worker's share of one CPU while a PSS column is shown, as `proctor serve`'s.
pub const PSS_BUDGET: f64 = 0.005;

/// The most rows on screen whose PSS `top` asks for at once ([`App::unread_pss_on_screen`]):
/// half of the 32 asks the agent and the PSS worker queue, so the Enter pane's ask has room.
const SCREEN_PSS_ASKS: usize = 16;

/// How the live sampler's optional reads follow the columns, as htop reads only what its
/// columns show: a flag fixes one, otherwise it runs while a column (or the sort) needs it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ReadsRule {
    /// `--pss-budget`: this budget whatever is shown. `None`: [`PSS_BUDGET`] while a PSS, USS,
    /// SwapPSS or PSS age column is shown, and no worker otherwise.
    pub pss_budget: Option<f64>,
    /// `--io`: `/proc/PID/io` read whatever is shown; otherwise while Read/s, Write/s or IO/s is.
    pub io: bool,
}

impl ReadsRule {
    /// What the sampler should read for columns that need `needs`.
    pub fn wanted(&self, needs: Needs) -> Reads {
        Reads {
            pss_budget: self.pss_budget.unwrap_or(if needs.pss { PSS_BUDGET } else { 0.0 }),
            process_io: self.io || needs.io,
            threads: needs.threads,
        }
    }
}

#[derive(Debug)]
pub struct TopConfig {
    pub source: Source,
    pub interval: Duration,
    /// Frames kept in memory for stepping back without a store.
    pub keep: usize,
    /// `--slow`, compiled into alert rules.
    pub slow: Option<proctor_alerts::slow::SlowRules>,
    pub slow_log: Option<PathBuf>,
    /// Print one screen of this size and exit.
    pub once: Option<(u16, u16)>,
    /// Where the chosen columns are kept.
    pub config_file: Option<PathBuf>,
    pub color: bool,
    pub tree: bool,
    /// `--net`: the network columns are shown ([`crate::view::show_network`]).
    pub net: bool,
    pub sort: Option<String>,
    pub filter: Option<String>,
    /// Alert rules evaluated on the live agent's snapshots for the header (`--rules`).
    pub rules: Option<PathBuf>,
}

/// The rules of `--rules`, ready to evaluate; a mistake in the file is an error.
fn alerting(config: &TopConfig) -> Result<Option<proctor_alerts::engine::Alerting>, String> {
    let Some(path) = &config.rules else { return Ok(None) };
    let set = proctor_alerts::engine::load_rules(path)?;
    Ok(Some(proctor_alerts::engine::Alerting::new(set, proctor_alerts::state::AlertState::default())))
}

/// The column configuration: `columns = pid,uid,…`, `sort = cpu_percent`, `descending = true`.
pub fn load_view(path: Option<&Path>, notes: &mut Vec<String>) -> ViewState {
    let mut view = ViewState::default();
    let Some(path) = path else { return view };
    // A column list is a few hundred bytes; a larger file is not ours and is not read whole.
    let mut text = String::new();
    let read = std::fs::File::open(path)
        .and_then(|f| std::io::Read::read_to_string(&mut std::io::Read::take(f, 64 * 1024), &mut text));
    if read.is_err() {
        return view;
    }
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let Some((key, value)) = line.split_once('=') else {
            notes.push(format!("{}: '{line}' is not KEY = VALUE; skipped", path.display()));
            continue;
        };
        match key.trim() {
            "columns" => {
                let mut cols = Vec::new();
                for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    match column(name) {
                        Some(f) => cols.push(f),
                        None => notes.push(format!("{}: unknown column '{name}' skipped", path.display())),
                    }
                }
                if !cols.is_empty() {
                    view.columns = cols;
                }
            }
            "sort" => match column(value.trim()) {
                Some(f) => view.sort = f,
                None => notes.push(format!("{}: unknown sort column '{}' skipped", path.display(), value.trim())),
            },
            "descending" => view.descending = value.trim() != "false",
            other => notes.push(format!("{}: unknown setting '{other}' skipped", path.display())),
        }
    }
    view
}

fn save_view(path: &Path, view: &ViewState) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let columns: Vec<&str> = view.columns.iter().map(|f| f.name).collect();
    let text = format!(
        "# proctor top's columns (F2), by the public field names of `proctor dump process --fields list`\ncolumns = {}\nsort = {}\ndescending = {}\n",
        columns.join(","),
        view.sort.name,
        view.descending
    );
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The default place of the column configuration.
pub fn default_config_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("proctor").join("top.conf"))
}

fn new_app(config: &mut TopConfig, mode: Mode) -> (App, Vec<String>) {
    let mut notes = Vec::new();
    let mut view = load_view(config.config_file.as_deref(), &mut notes);
    view.tree = config.tree;
    if config.net {
        crate::view::show_network(&mut view);
    }
    if let Some(sort) = &config.sort {
        if let Some(f) = column(sort) {
            view.sort = f;
            view.descending = default_descending(f);
        }
    }
    if let Some(filter) = &config.filter {
        view.filter = filter.clone();
    }
    let mut app = App::new(mode, config.interval, config.keep, view, Slow::new(config.slow.take()));
    app.users = read_users(Path::new("/etc/passwd"));
    app.color = config.color;
    if let Some(n) = notes.first() {
        app.say(n.clone());
    }
    (app, notes)
}

fn mode_of(source: &Source) -> Mode {
    match source {
        Source::Live { store, .. } => Mode::Live { store: store.clone() },
        Source::Recording { dir, .. } => Mode::Recording { dir: dir.clone() },
        Source::Remote { url, .. } => Mode::Remote { url: url.clone() },
    }
}

/// `--once`: one screen, as text, to stdout.
fn once(mut config: TopConfig, size: (u16, u16)) -> Result<(), String> {
    let mode = mode_of(&config.source);
    let (mut app, _) = new_app(&mut config, mode);
    let (frame, previous): (Frame, Option<Frame>) = match &config.source {
        Source::Live { shared, .. } => {
            let first = shared.latest();
            let next = shared
                .wait_newer(first.sample.seq, config.interval * 3 + Duration::from_secs(2))
                .ok_or("the agent published no second sample")?;
            let mut frame = Frame::from_snapshot(&next, Origin::Live);
            if let Some(mut a) = alerting(&config)? {
                a.evaluate(&first);
                a.evaluate(&next);
                frame.alerts = Some(crate::frame::AlertLine::of(&a));
            }
            let prev = Frame::from_snapshot(&first, Origin::Live);
            (frame, Some(prev))
        }
        Source::Recording { dir, at } => {
            let (tx, rx) = mpsc::channel();
            let (qtx, qrx) = mpsc::channel();
            let dir = dir.clone();
            let worker = std::thread::spawn(move || source::store_worker(dir, qrx, tx));
            let ask = at.map_or(Ask::Newest, Ask::AtOrBefore);
            qtx.send((1, ask)).map_err(|_| "the store worker ended")?;
            drop(qtx);
            let reply = rx.recv().map_err(|_| "the store worker ended")?;
            let _ = worker.join();
            match reply {
                Msg::Stored { frame: Some(f), note, .. } => {
                    if let Some(n) = note {
                        eprintln!("proctor top: {n}");
                    }
                    ((*f).clone(), None)
                }
                Msg::Stored { note, .. } => return Err(note.unwrap_or_else(|| "no sample found".into())),
                _ => return Err("the store worker said nothing".into()),
            }
        }
        Source::Remote { url, token } => (Remote::parse(url, token.clone())?.frame()?, None),
    };
    if let Some(p) = previous {
        app.message(Msg::Newest(Arc::new(p)));
    }
    if matches!(config.source, Source::Recording { .. }) {
        app.shown = Some(Arc::new(frame));
        app.refresh();
    } else {
        app.message(Msg::Newest(Arc::new(frame)));
    }
    let mut terminal = Terminal::new(TestBackend::new(size.0, size.1)).map_err(|e| e.to_string())?;
    terminal.draw(|f| crate::draw::draw(f, &mut app)).map_err(|e| e.to_string())?;
    let buffer = terminal.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..buffer.area.height {
        let mut line = String::new();
        for x in 0..buffer.area.width {
            line.push_str(buffer[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes()).map_err(|e| e.to_string())?;
    Ok(())
}

/// Says on the status line what a column turned on or off in the sampler.
fn say_reads(app: &mut App, before: Reads, now: Reads) {
    let mut said = Vec::new();
    if before.pss_budget == 0.0 && now.pss_budget > 0.0 {
        said.push(format!(
            "PSS read in the background ({}% of one CPU), - until each process's first reading",
            proctor_vocab::units::percent(now.pss_budget * 100.0)
        ));
    } else if before.pss_budget > 0.0 && now.pss_budget == 0.0 {
        said.push("PSS no longer read".to_string());
    }
    if !before.process_io && now.process_io {
        said.push("/proc/PID/io read from now on, rates from the second reading".to_string());
    } else if before.process_io && !now.process_io {
        said.push("/proc/PID/io no longer read".to_string());
    }
    if !before.threads && now.threads {
        said.push("threads read from the next sample, CPU% from the second".to_string());
    } else if before.threads && !now.threads {
        said.push("threads no longer read".to_string());
    }
    if !said.is_empty() {
        app.say(said.join("; "));
    }
}

fn restore_terminal() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(std::io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
}

/// Runs `proctor top` until the user quits. `register_stop` is given a function that ends the
/// loop as `q` does (the caller wires it to SIGTERM).
pub fn run(mut config: TopConfig, register_stop: impl FnOnce(Box<dyn FnOnce() + Send>)) -> Result<(), String> {
    if let Some(size) = config.once {
        return once(config, size);
    }
    let (tx, rx) = mpsc::channel::<Msg>();
    let stop_tx = tx.clone();
    register_stop(Box::new(move || {
        let _ = stop_tx.send(Msg::Stop);
    }));
    let mode = mode_of(&config.source);
    let (mut app, _) = new_app(&mut config, mode);

    // Workers: the source, the store, actions, the slow log.
    let store_dir = match &config.source {
        Source::Live { store, .. } => store.clone(),
        Source::Recording { dir, .. } => Some(dir.clone()),
        Source::Remote { .. } => None,
    };
    let store_tx = store_dir.map(|dir| {
        let (qtx, qrx) = mpsc::channel::<(u64, Ask)>();
        let tx = tx.clone();
        std::thread::Builder::new()
            .name("top-store".into())
            .spawn(move || source::store_worker(dir, qrx, tx))
            .map(|_| qtx)
    });
    let store_tx = store_tx.transpose().map_err(|e| format!("cannot start the store worker: {e}"))?;
    let mut boot_time = None;
    match &config.source {
        Source::Live { shared, .. } => {
            let shared = Arc::clone(shared);
            boot_time = shared.latest().host.boot_time_unix_secs;
            let tx = tx.clone();
            let interval = config.interval;
            let rules = alerting(&config)?;
            std::thread::Builder::new()
                .name("top-live".into())
                .spawn(move || source::live(shared, interval, tx, rules))
                .map_err(|e| format!("cannot start a thread: {e}"))?;
        }
        Source::Remote { url, token } => {
            let remote = Remote::parse(url, token.clone())?;
            let tx = tx.clone();
            let interval = config.interval;
            std::thread::Builder::new()
                .name("top-remote".into())
                .spawn(move || source::remote(remote, interval, tx))
                .map_err(|e| format!("cannot start a thread: {e}"))?;
        }
        Source::Recording { at, .. } => {
            let ask = at.map_or(Ask::Newest, Ask::AtOrBefore);
            if at.is_some() {
                app.cursor = crate::travel::Cursor::At { time_unix_ms: at.unwrap_or(0) };
            }
            if let (Effect::Ask(ask), Some(q)) = (app.ask(ask), &store_tx) {
                let _ = q.send((app.pending_id().unwrap_or(0), ask));
            }
        }
    }
    // Per-cgroup pressure for the `z` view, read under the agent's root, live only.
    let pressure_tx = match &config.source {
        Source::Live { root, .. } => {
            let (ptx, prx) = mpsc::channel::<Vec<(String, u32)>>();
            let (tx, root) = (tx.clone(), root.clone());
            std::thread::Builder::new()
                .name("top-pressure".into())
                .spawn(move || source::pressure_worker(root, prx, tx))
                .map_err(|e| format!("cannot start a thread: {e}"))?;
            Some(ptx)
        }
        _ => None,
    };
    // What the sampler was last asked to read, for the columns (F2) it follows.
    let mut asked: Option<Reads> = None;
    // The selected process whose PSS the Enter pane last asked for, and when.
    let mut asked_pss: Option<(u32, Instant)> = None;
    let mut asked_screen_pss: Option<Instant> = None;
    let (act_tx, act_rx) = mpsc::channel::<Action>();
    {
        let tx = tx.clone();
        std::thread::Builder::new()
            .name("top-actions".into())
            .spawn(move || source::actions_worker(act_rx, boot_time, tx))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
    }
    let mut slow_log = match &config.slow_log {
        Some(path) => {
            let (ltx, lrx) = mpsc::sync_channel::<String>(1024);
            let tx = tx.clone();
            let path = path.clone();
            std::thread::Builder::new()
                .name("top-slowlog".into())
                .spawn(move || source::slow_log_writer(path, lrx, tx))
                .map_err(|e| format!("cannot start a thread: {e}"))?;
            Some(Bounded { tx: ltx, dropped: 0 })
        }
        None => None,
    };
    {
        let tx = tx.clone();
        std::thread::Builder::new()
            .name("top-input".into())
            .spawn(move || source::input(tx))
            .map_err(|e| e.to_string())?;
    }

    // The terminal, restored however the loop ends.
    terminal::enable_raw_mode().map_err(|e| format!("cannot put the terminal in raw mode: {e}"))?;
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous_hook(info);
    }));
    let mut stdout = std::io::stdout();
    let _ = execute!(stdout, terminal::EnterAlternateScreen, cursor::Hide);
    let result = (|| -> Result<(), String> {
        let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout())).map_err(|e| e.to_string())?;
        let mut last_poll = Instant::now();
        loop {
            terminal.draw(|f| crate::draw::draw(f, &mut app)).map_err(|e| format!("cannot draw: {e}"))?;
            let wait = if matches!(app.mode, Mode::Recording { .. }) {
                config.interval.saturating_sub(last_poll.elapsed()).max(Duration::from_millis(20))
            } else {
                Duration::from_secs(1)
            };
            let mut effects = Vec::new();
            match rx.recv_timeout(wait) {
                Ok(msg) => {
                    effects.push(app.message(msg));
                    // Take what else is waiting before drawing again.
                    while let Ok(msg) = rx.try_recv() {
                        effects.push(app.message(msg));
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            }
            if app.message.as_ref().is_some_and(|(_, at)| at.elapsed() > Duration::from_secs(6)) {
                app.message = None;
            }
            for effect in effects {
                match effect {
                    Effect::None => {}
                    Effect::Quit => return Ok(()),
                    Effect::Ask(ask) => {
                        if let (Some(q), Some(id)) = (&store_tx, app.pending_id()) {
                            let _ = q.send((id, ask));
                        }
                    }
                    Effect::Act(a) => {
                        let _ = act_tx.send(a.0);
                    }
                    Effect::Pressure(asked) => {
                        if let Some(p) = &pressure_tx {
                            let _ = p.send(asked);
                        }
                    }
                    Effect::SaveConfig => {
                        if let Some(path) = &config.config_file {
                            match save_view(path, &app.view) {
                                Ok(()) => app.say(format!("columns kept in {}", path.display())),
                                Err(e) => app.say(e),
                            }
                        }
                    }
                }
            }
            if let Source::Live { shared, reads, .. } = &config.source {
                let wanted = reads.wanted(Needs::of_view(&app.view));
                // A full queue (the sampling thread behind) is asked again on the next turn.
                if asked != Some(wanted) && shared.ask_reads(wanted) {
                    if let Some(before) = asked {
                        say_reads(&mut app, before, wanted);
                    }
                    asked = Some(wanted);
                }
                // The Enter pane shows the selected process's PSS: where it has none yet, the
                // PSS worker (when one runs) reads it first, asked at most once a second.
                let unread = |pid: u32| {
                    let p = app.shown.as_ref().and_then(|f| f.process(pid));
                    p.is_some_and(|p| p.pss_bytes.is_none() || p.pss_estimated_from.is_some())
                };
                if let Some(pid) = app.view.selected.filter(|&pid| app.detail && unread(pid)) {
                    if asked_pss.is_none_or(|(p, at)| p != pid || at.elapsed() >= Duration::from_secs(1)) {
                        shared.ask_pss(pid);
                        asked_pss = Some((pid, Instant::now()));
                    }
                }
                // A PSS column shown: the rows on screen without a reading go next, asked once
                // a second (the worker's budgets hold as for any read).
                if asked_screen_pss.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                    for pid in app.unread_pss_on_screen(SCREEN_PSS_ASKS) {
                        shared.ask_pss(pid);
                    }
                    asked_screen_pss = Some(Instant::now());
                }
            }
            for line in std::mem::take(&mut app.crossings) {
                if let Some(log) = slow_log.as_mut() {
                    log.send(line);
                }
            }
            // A recording being followed: ask for its newest frame once per interval.
            if matches!(app.mode, Mode::Recording { .. })
                && app.cursor == crate::travel::Cursor::Live
                && app.pending.is_none()
                && last_poll.elapsed() >= config.interval
            {
                last_poll = Instant::now();
                if let (Effect::Ask(ask), Some(q)) = (app.ask(Ask::Newest), &store_tx) {
                    let _ = q.send((app.pending_id().unwrap_or(0), ask));
                }
            }
        }
    })();
    restore_terminal();
    if let Some(log) = &slow_log {
        if log.dropped > 0 {
            eprintln!("proctor top: {} slow-log lines dropped (the log could not keep up)", log.dropped);
        }
    }
    result
}
