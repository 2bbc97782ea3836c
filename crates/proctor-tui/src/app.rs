//! The screen's state and what each key does to it. [`App::key`] and [`App::message`] change
//! state and return what to ask of the workers; nothing here waits, reads `/proc` or the store.
//! Drawing is `draw.rs`; the loop that feeds this is `run.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use proctor_vocab::fields::PROCESS;
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::frame::SharedFrame;
use crate::slow::Slow;
use crate::source::{Action, Ask, Msg};
use crate::travel::{Answer, Cursor, Move, Ring};
use crate::view::{cgroups, column, selected_line, table, Table, ViewState};

/// Where frames come from, as the screen says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// An in-process agent; `store` (a data directory) is where back-steps beyond the ring go.
    Live { store: Option<PathBuf> },
    /// A recording in this directory.
    Recording { dir: PathBuf },
    /// A remote agent at this address.
    Remote { url: String },
}

/// A line the user is typing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prompt {
    Search,
    Filter,
    User,
    Goto,
    Span,
}

impl Prompt {
    pub fn label(self) -> &'static str {
        match self {
            Prompt::Search => "Search: ",
            Prompt::Filter => "Filter: ",
            Prompt::User => "User (name or uid, empty for all): ",
            Prompt::Goto => "Go to (10 min ago, 12:00:00, 2024-05-01T12:00:00, @UNIX): ",
            Prompt::Span => "Jump span ({ and }): ",
        }
    }
}

/// What covers the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    None,
    Help,
    Prompt(Prompt, String),
    /// F9: pick a signal.
    Signals(usize),
    /// Confirm sending SIGNALS[i] to the targets.
    Confirm(usize),
    /// F2: columns; the cursor is on PROCESS[i].
    Setup(usize),
    /// `z`: cgroups; the cursor is on row i.
    Cgroups(usize),
    /// `X`: processes that ended (below's exited view); the cursor is on row i.
    Exited(usize),
    /// F6: sort by; the cursor is on the shown column i.
    SortBy(usize),
}

/// Ended processes the `X` view lists at most.
pub const ENDED_SHOWN: usize = 2000;

/// The signals F9 offers, as htop lists the common ones.
pub const SIGNALS: [(i32, &str); 9] = [
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGKILL, "SIGKILL"),
    (libc::SIGINT, "SIGINT"),
    (libc::SIGHUP, "SIGHUP"),
    (libc::SIGQUIT, "SIGQUIT"),
    (libc::SIGSTOP, "SIGSTOP"),
    (libc::SIGCONT, "SIGCONT"),
    (libc::SIGUSR1, "SIGUSR1"),
    (libc::SIGUSR2, "SIGUSR2"),
];

/// What the loop must do after a key or message.
#[derive(Debug, PartialEq)]
pub enum Effect {
    None,
    Quit,
    Ask(Ask),
    Act(ActionEq),
    /// Save the column configuration.
    SaveConfig,
    /// Read these cgroups' pressure (path, one member's pid) for the `z` view.
    Pressure(Vec<(String, u32)>),
}

/// An action, compared by its debug text (for tests).
#[derive(Debug)]
pub struct ActionEq(pub Action);

impl PartialEq for ActionEq {
    fn eq(&self, other: &Self) -> bool {
        format!("{:?}", self.0) == format!("{:?}", other.0)
    }
}

#[derive(Debug)]
pub struct App {
    pub mode: Mode,
    pub interval: Duration,
    pub view: ViewState,
    pub cursor: Cursor,
    /// The frame on screen.
    pub shown: Option<SharedFrame>,
    /// The frame before the newest live one, for the agent's own CPU rate.
    pub previous_live: Option<SharedFrame>,
    pub ring: Ring,
    /// A store request in flight (the screen says "loading").
    pub pending: Option<(u64, Ask)>,
    next_id: u64,
    pub overlay: Overlay,
    /// Enter: the detail pane under the table.
    pub detail: bool,
    pub message: Option<(String, Instant)>,
    /// A source's lasting problem (remote unreachable), until a frame comes.
    pub problem: Option<String>,
    pub slow: Slow,
    pub users: BTreeMap<u32, String>,
    pub color: bool,
    /// First table line on screen.
    pub scroll: usize,
    /// Table lines visible at the last draw (for page keys).
    pub page: usize,
    /// `{` / `}` jump.
    pub span: Duration,
    /// `--slow-log` lines (the alerts' JSON-lines log) for the log writer.
    pub crossings: Vec<String>,
    pub table: Table,
    /// Per-cgroup pressure for the `z` view (live only), as of the last answer.
    pub pressure: BTreeMap<String, crate::source::CgroupPressure>,
}

impl App {
    pub fn new(mode: Mode, interval: Duration, keep: usize, view: ViewState, slow: Slow) -> App {
        App {
            mode,
            interval,
            view,
            cursor: Cursor::Live,
            shown: None,
            previous_live: None,
            ring: Ring::new(keep),
            pending: None,
            next_id: 1,
            overlay: Overlay::None,
            detail: false,
            message: None,
            problem: None,
            slow,
            users: BTreeMap::new(),
            color: true,
            scroll: 0,
            page: 20,
            span: Duration::from_secs(60),
            crossings: Vec::new(),
            table: Table::default(),
            pressure: BTreeMap::new(),
        }
    }

    fn has_store(&self) -> bool {
        match &self.mode {
            Mode::Live { store } => store.is_some(),
            Mode::Recording { .. } => true,
            Mode::Remote { .. } => false,
        }
    }

    /// Processes that ended up to the frame on screen, the latest to end first: the shown
    /// frame's and those of the older frames the ring holds, at most [`ENDED_SHOWN`].
    pub fn ended(&self) -> Vec<&proctor_vocab::exited::ExitedOut> {
        let Some(shown) = self.shown.as_ref() else { return Vec::new() };
        let older = self.ring.iter().rev().filter(|f| f.time_unix_ms < shown.time_unix_ms);
        std::iter::once(shown).chain(older).flat_map(|f| f.exited.iter().rev()).take(ENDED_SHOWN).collect()
    }

    /// The processes on screen at the last draw whose PSS is not read yet (none, or a clone's
    /// standing in), top row first, at
    /// most `max`; none unless a shown column (or the sort) needs PSS. `top` asks the PSS worker
    /// for these first: turning the PSS column on fills the rows a person sees before the
    /// round-robin reaches them, however many processes the host has.
    pub fn unread_pss_on_screen(&self, max: usize) -> Vec<u32> {
        let Some(frame) = self.shown.as_ref().filter(|_| crate::view::Needs::of_view(&self.view).pss) else {
            return Vec::new();
        };
        let lines = self.table.lines.iter().skip(self.scroll).take(self.page);
        lines
            .filter(|l| l.thread.is_none())
            .filter_map(|l| frame.processes.get(l.index))
            .filter(|p| p.pss_bytes.is_none() || p.pss_estimated_from.is_some())
            .map(|p| p.pid)
            .take(max)
            .collect()
    }

    pub fn is_live_mode(&self) -> bool {
        matches!(self.mode, Mode::Live { .. })
    }

    pub fn say(&mut self, text: impl Into<String>) {
        self.message = Some((text.into(), Instant::now()));
    }

    /// Rebuilds the table from the shown frame and the view.
    pub fn refresh(&mut self) {
        self.table = match &self.shown {
            Some(f) => table(f, &self.view),
            None => Table::default(),
        };
        if self.view.selected.is_none_or(|pid| !self.table.lines.iter().any(|l| l.pid == pid)) {
            self.view.selected =
                self.table.lines.get(selected_line(&self.table.lines, None).unwrap_or(0)).map(|l| l.pid);
        }
    }

    /// A store question, numbered; the previous one's answer will be ignored.
    pub fn ask(&mut self, ask: Ask) -> Effect {
        let id = self.next_id;
        self.next_id += 1;
        self.pending = Some((id, ask));
        Effect::Ask(ask)
    }

    pub fn pending_id(&self) -> Option<u64> {
        self.pending.map(|(id, _)| id)
    }

    /// A message from a worker.
    pub fn message(&mut self, msg: Msg) -> Effect {
        match msg {
            Msg::Input(Event::Key(k)) if k.kind != KeyEventKind::Release => return self.key(k),
            Msg::Input(Event::Resize(..)) => {}
            Msg::Input(_) => return Effect::None,
            Msg::Newest(frame) => {
                self.problem = None;
                if !self.slow.is_empty() && frame.time_unix_ms > self.ring.newest().map_or(0, |n| n.time_unix_ms) {
                    let crossings = self.slow.observe(frame.time_unix_ms, &frame.processes);
                    self.crossings.extend(crossings);
                }
                if let Some(old) = self.ring.newest() {
                    self.previous_live = Some(old.clone());
                }
                self.ring.push(frame.clone());
                if self.cursor == Cursor::Live {
                    self.shown = Some(frame);
                    if matches!(self.overlay, Overlay::Cgroups(_)) {
                        self.refresh();
                        return self.pressure_question();
                    }
                }
            }
            Msg::Stored { id, frame, note } => {
                let Some((want, ask)) = self.pending else { return Effect::None };
                if id != want {
                    return Effect::None;
                }
                self.pending = None;
                if let Some(note) = note {
                    self.say(note);
                }
                if let Some(frame) = frame {
                    let follow = ask == Ask::Newest && self.cursor == Cursor::Live;
                    if follow {
                        if self.shown.as_ref().is_some_and(|s| s.time_unix_ms < frame.time_unix_ms) {
                            self.previous_live = self.shown.clone();
                        }
                        if !self.slow.is_empty()
                            && self.shown.as_ref().is_none_or(|s| s.time_unix_ms < frame.time_unix_ms)
                        {
                            let crossings = self.slow.observe(frame.time_unix_ms, &frame.processes);
                            self.crossings.extend(crossings);
                        }
                    } else {
                        self.cursor = Cursor::At { time_unix_ms: frame.time_unix_ms };
                    }
                    self.shown = Some(frame);
                }
            }
            Msg::Pressure(p) => self.pressure = p,
            Msg::Problem(text) => self.problem = Some(text),
            Msg::Done(text) => self.say(text),
            Msg::Stop => return Effect::Quit,
        }
        self.refresh();
        Effect::None
    }

    fn travel(&mut self, mv: Move) -> Effect {
        let shown_ms = self.shown.as_ref().map(|f| f.time_unix_ms);
        let answer = self.ring.answer(shown_ms, self.cursor, mv, self.has_store());
        let effect = match answer {
            Answer::Frame(f) => {
                self.cursor = Cursor::At { time_unix_ms: f.0.time_unix_ms };
                self.shown = Some(f.0);
                Effect::None
            }
            Answer::Live => {
                self.cursor = Cursor::Live;
                match &self.mode {
                    Mode::Recording { .. } => self.ask(Ask::Newest),
                    _ => {
                        self.shown = self.ring.newest().cloned().or(self.shown.take());
                        Effect::None
                    }
                }
            }
            Answer::AtOrBefore(t) => self.ask(Ask::AtOrBefore(t)),
            Answer::After(t) => self.ask(Ask::After(t)),
            Answer::Nothing(why) => {
                self.say(why);
                Effect::None
            }
        };
        self.refresh();
        effect
    }

    /// The `z` view's cgroups with one member each, for the pressure worker: live only (a
    /// recording or a remote host's cgroups are not this machine's now).
    fn pressure_question(&self) -> Effect {
        if !self.is_live_mode() || self.cursor != Cursor::Live {
            return Effect::None;
        }
        let Some(frame) = &self.shown else { return Effect::None };
        let mut members: BTreeMap<&str, u32> = BTreeMap::new();
        for p in &frame.processes {
            if let Some(c) = p.cgroup.as_deref() {
                members.entry(c).or_insert(p.pid);
            }
        }
        Effect::Pressure(members.into_iter().take(256).map(|(c, pid)| (c.to_string(), pid)).collect())
    }

    fn move_selection(&mut self, delta: isize) {
        let lines = &self.table.lines;
        if lines.is_empty() {
            return;
        }
        let at = selected_line(lines, self.view.selected).unwrap_or(0) as isize;
        let to = (at + delta).clamp(0, lines.len() as isize - 1) as usize;
        self.view.selected = Some(lines[to].pid);
    }

    /// Processes an action applies to: the tagged ones, else the selected one; with the start
    /// time each had in the frame.
    fn targets(&self) -> Vec<(u32, Option<f64>)> {
        let Some(frame) = &self.shown else { return Vec::new() };
        let pids: Vec<u32> = if self.view.tagged.is_empty() {
            self.view.selected.into_iter().collect()
        } else {
            self.view.tagged.iter().copied().collect()
        };
        pids.into_iter().filter_map(|pid| frame.process(pid).map(|p| (pid, p.start_time_unix_secs))).collect()
    }

    /// Actions reach live processes only: not a recording, not a remote host, not the past.
    fn can_act(&mut self) -> bool {
        if !self.is_live_mode() {
            self.say("signals and nice act on this machine's live processes only (this screen is not live here)");
            return false;
        }
        if self.cursor != Cursor::Live {
            self.say("this screen shows the past: press l to go live before acting on processes");
            return false;
        }
        true
    }

    pub fn key(&mut self, k: KeyEvent) -> Effect {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && k.code == KeyCode::Char('c') {
            return Effect::Quit;
        }
        let effect = match self.overlay.clone() {
            Overlay::None => self.key_normal(k),
            Overlay::Help => {
                self.overlay = Overlay::None;
                Effect::None
            }
            Overlay::Prompt(p, text) => self.key_prompt(p, text, k),
            Overlay::Signals(i) => {
                match k.code {
                    KeyCode::Up => self.overlay = Overlay::Signals(i.saturating_sub(1)),
                    KeyCode::Down => self.overlay = Overlay::Signals((i + 1).min(SIGNALS.len() - 1)),
                    KeyCode::Char(c @ '1'..='9') => {
                        let n = (c as u8 - b'1') as usize;
                        if n < SIGNALS.len() {
                            self.overlay = Overlay::Confirm(n);
                        }
                    }
                    KeyCode::Enter => self.overlay = Overlay::Confirm(i),
                    _ => self.overlay = Overlay::None,
                }
                Effect::None
            }
            Overlay::Confirm(i) => {
                self.overlay = Overlay::None;
                if matches!(k.code, KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter) {
                    let targets = self.targets();
                    if targets.is_empty() {
                        self.say("no process selected");
                        Effect::None
                    } else {
                        let (signal, name) = SIGNALS[i];
                        Effect::Act(ActionEq(Action::Signal { targets, signal, name }))
                    }
                } else {
                    self.say("nothing sent");
                    Effect::None
                }
            }
            Overlay::SortBy(i) => {
                let last = self.view.columns.len().saturating_sub(1);
                match k.code {
                    KeyCode::Up => self.overlay = Overlay::SortBy(i.saturating_sub(1)),
                    KeyCode::Down => self.overlay = Overlay::SortBy((i + 1).min(last)),
                    KeyCode::Home => self.overlay = Overlay::SortBy(0),
                    KeyCode::End => self.overlay = Overlay::SortBy(last),
                    KeyCode::Enter => {
                        self.overlay = Overlay::None;
                        if let Some(&field) = self.view.columns.get(i) {
                            // The column chosen, in its usual direction; the one sorted by
                            // already, the other way round (as a second click on its heading).
                            self.view.sort_by(field);
                            self.say(format!(
                                "sorted by {} ({})",
                                field.title,
                                if self.view.descending { "biggest first" } else { "smallest first" }
                            ));
                        }
                    }
                    _ => self.overlay = Overlay::None,
                }
                Effect::None
            }
            Overlay::Setup(i) => match k.code {
                KeyCode::Up => {
                    self.overlay = Overlay::Setup(i.saturating_sub(1));
                    Effect::None
                }
                KeyCode::Down => {
                    self.overlay = Overlay::Setup((i + 1).min(PROCESS.len() - 1));
                    Effect::None
                }
                KeyCode::Char(' ') | KeyCode::Enter => {
                    let field = &PROCESS[i];
                    if let Some(at) = self.view.columns.iter().position(|f| f.name == field.name) {
                        if self.view.columns.len() > 1 {
                            self.view.columns.remove(at);
                        }
                    } else {
                        // Shown in the table's order; the command line stays last.
                        self.view.columns.push(field);
                        self.view.columns.sort_by_key(|f| {
                            if f.name == "cmdline" {
                                usize::MAX
                            } else {
                                PROCESS.iter().position(|p| p.name == f.name).unwrap_or(0)
                            }
                        });
                    }
                    Effect::None
                }
                _ => {
                    self.overlay = Overlay::None;
                    Effect::SaveConfig
                }
            },
            Overlay::Exited(i) => {
                let n = self.ended().len();
                match k.code {
                    KeyCode::Up => self.overlay = Overlay::Exited(i.saturating_sub(1)),
                    KeyCode::Down => self.overlay = Overlay::Exited((i + 1).min(n.saturating_sub(1))),
                    KeyCode::PageUp => self.overlay = Overlay::Exited(i.saturating_sub(self.page.max(1))),
                    KeyCode::PageDown => {
                        self.overlay = Overlay::Exited((i + self.page.max(1)).min(n.saturating_sub(1)))
                    }
                    _ => self.overlay = Overlay::None,
                }
                Effect::None
            }
            Overlay::Cgroups(i) => {
                let rows = self.shown.as_ref().map(|f| cgroups(f, &self.view)).unwrap_or_default();
                match k.code {
                    KeyCode::Up => self.overlay = Overlay::Cgroups(i.saturating_sub(1)),
                    KeyCode::Down => self.overlay = Overlay::Cgroups((i + 1).min(rows.len().saturating_sub(1))),
                    KeyCode::Enter => {
                        if let Some(row) = rows.get(i) {
                            self.view.cgroup = Some(row.name.clone());
                            self.say(format!("processes of cgroup {} (z then Esc to leave)", row.name));
                        }
                        self.overlay = Overlay::None;
                    }
                    _ => {
                        self.view.cgroup = None;
                        self.overlay = Overlay::None;
                    }
                }
                Effect::None
            }
        };
        self.refresh();
        effect
    }

    fn key_prompt(&mut self, p: Prompt, mut text: String, k: KeyEvent) -> Effect {
        match k.code {
            KeyCode::Esc => {
                if p == Prompt::Filter {
                    self.view.filter.clear();
                }
                self.overlay = Overlay::None;
            }
            KeyCode::Backspace => {
                text.pop();
                if p == Prompt::Filter {
                    self.view.filter = text.clone();
                }
                self.overlay = Overlay::Prompt(p, text);
            }
            KeyCode::Enter => {
                self.overlay = Overlay::None;
                return self.finish_prompt(p, text);
            }
            KeyCode::Char(c) if !c.is_control() && text.chars().count() < 200 => {
                text.push(c);
                match p {
                    Prompt::Filter => self.view.filter = text.clone(),
                    Prompt::Search => self.search(&text, false),
                    _ => {}
                }
                self.overlay = Overlay::Prompt(p, text);
            }
            KeyCode::F(3) if p == Prompt::Search => {
                self.search(&text, true);
                self.overlay = Overlay::Prompt(p, text);
            }
            _ => {}
        }
        Effect::None
    }

    fn finish_prompt(&mut self, p: Prompt, text: String) -> Effect {
        match p {
            Prompt::Search => {
                self.search(&text, false);
                Effect::None
            }
            Prompt::Filter => {
                self.view.filter = text;
                Effect::None
            }
            Prompt::User => {
                let t = text.trim();
                self.view.user = if t.is_empty() {
                    None
                } else if let Ok(uid) = t.parse::<u32>() {
                    Some(uid)
                } else if let Some((uid, _)) = self.users.iter().find(|(_, n)| n.as_str() == t) {
                    Some(*uid)
                } else {
                    self.say(format!("no user '{t}' in /etc/passwd"));
                    self.view.user
                };
                Effect::None
            }
            Prompt::Goto => match proctor_vocab::parse_when(text.trim()) {
                Ok(when) => {
                    let now_ns = self.shown.as_ref().map_or(0, |_| now_unix_ns());
                    let t = when.resolve(now_ns) / 1_000_000;
                    self.travel(Move::To(t))
                }
                Err(e) => {
                    self.say(format!("'{}': {e}", text.trim()));
                    Effect::None
                }
            },
            Prompt::Span => match proctor_vocab::parse_duration(text.trim()) {
                Ok(d) if !d.is_zero() => {
                    self.span = d;
                    self.say(format!("{{ and }} jump by {}", proctor_vocab::format_duration(d)));
                    Effect::None
                }
                Ok(_) => {
                    self.say("the span must be above 0");
                    Effect::None
                }
                Err(e) => {
                    self.say(format!("'{}': {e}", text.trim()));
                    Effect::None
                }
            },
        }
    }

    /// Moves the selection to the next line whose process matches `text` (after the current
    /// one with `next`), as htop's F3 does; the table is not narrowed.
    fn search(&mut self, text: &str, next: bool) {
        let Some(frame) = &self.shown else { return };
        let needle = text.trim().to_lowercase();
        if needle.is_empty() {
            return;
        }
        let lines = &self.table.lines;
        let from = selected_line(lines, self.view.selected).unwrap_or(0) + usize::from(next);
        let n = lines.len();
        let hit = (0..n).map(|i| (from + i) % n.max(1)).find(|&i| {
            let p = &frame.processes[lines[i].index];
            proctor_vocab::select::matches_parts(p.pid, &p.name, p.cmdline.as_deref(), &needle)
        });
        match hit {
            Some(i) => self.view.selected = Some(lines[i].pid),
            None => self.say(format!("no process matches '{}'", text.trim())),
        }
    }

    fn key_normal(&mut self, k: KeyEvent) -> Effect {
        let sort = |app: &mut App, name: &str| {
            if let Some(f) = column(name) {
                app.view.sort_by(f);
                app.say(format!(
                    "sorted by {} ({})",
                    f.title,
                    if app.view.descending { "biggest first" } else { "smallest first" }
                ));
            }
        };
        match k.code {
            KeyCode::Char('q') | KeyCode::F(10) => return Effect::Quit,
            KeyCode::Esc => {
                self.detail = false;
                self.view.cgroup = None;
            }
            KeyCode::F(1) | KeyCode::Char('h') | KeyCode::Char('?') => self.overlay = Overlay::Help,
            KeyCode::F(2) | KeyCode::Char('S') => self.overlay = Overlay::Setup(0),
            KeyCode::F(3) | KeyCode::Char('/') => self.overlay = Overlay::Prompt(Prompt::Search, String::new()),
            KeyCode::F(4) | KeyCode::Char('\\') => {
                self.overlay = Overlay::Prompt(Prompt::Filter, self.view.filter.clone());
            }
            KeyCode::F(5) | KeyCode::Char('t') => {
                self.view.tree = !self.view.tree;
                self.say(if self.view.tree { "tree view (+/- expand and collapse)" } else { "list view" });
            }
            KeyCode::Char('+') | KeyCode::Char('=') => {
                if let Some(pid) = self.view.selected {
                    self.view.collapsed.remove(&pid);
                }
            }
            KeyCode::Char('-') => {
                if let Some(pid) = self.view.selected {
                    if self.view.tree {
                        self.view.collapsed.insert(pid);
                    }
                }
            }
            KeyCode::Char('*') => self.view.collapsed.clear(),
            KeyCode::F(6) => {
                // As htop: a menu of the shown columns, the cursor on the one sorted by.
                let at = self.view.columns.iter().position(|f| f.name == self.view.sort.name).unwrap_or(0);
                self.overlay = Overlay::SortBy(at);
            }
            KeyCode::Char('>') | KeyCode::Char('.') => {
                self.view.cycle_sort(1);
                self.say(format!("sorted by {}", self.view.sort.title));
            }
            KeyCode::Char('<') | KeyCode::Char(',') => {
                self.view.cycle_sort(-1);
                self.say(format!("sorted by {}", self.view.sort.title));
            }
            KeyCode::Char('P') => sort(self, "cpu_percent"),
            KeyCode::Char('M') => sort(self, "rss_bytes"),
            KeyCode::Char('T') => sort(self, "cpu_seconds_total"),
            KeyCode::Char('N') => sort(self, "pid"),
            KeyCode::Char('I') => {
                self.view.descending = !self.view.descending;
            }
            KeyCode::Char('u') => self.overlay = Overlay::Prompt(Prompt::User, String::new()),
            KeyCode::Char('K') => {
                self.view.show_kernel = !self.view.show_kernel;
                self.say(if self.view.show_kernel { "kernel threads shown" } else { "kernel threads hidden" });
            }
            KeyCode::Char('H') => {
                self.view.show_threads = !self.view.show_threads;
                self.say(match (self.view.show_threads, &self.mode) {
                    (false, _) => "threads hidden",
                    (true, Mode::Live { .. }) => "threads shown under their processes",
                    // Only a live top asks its sampler for threads; a recording or a remote
                    // agent has them only where its own sampler read them.
                    (true, _) => "threads shown where the source read them (only a live top reads them)",
                });
            }
            KeyCode::Char(' ') => {
                if let Some(pid) = self.view.selected {
                    if !self.view.tagged.remove(&pid) {
                        self.view.tagged.insert(pid);
                    }
                }
                self.move_selection(1);
            }
            KeyCode::Char('U') => self.view.tagged.clear(),
            KeyCode::F(9) | KeyCode::Char('k') if self.can_act() => self.overlay = Overlay::Signals(0),
            KeyCode::F(7) if self.can_act() => {
                return Effect::Act(ActionEq(Action::Nice { targets: self.targets(), delta: -1 }));
            }
            KeyCode::F(8) if self.can_act() => {
                return Effect::Act(ActionEq(Action::Nice { targets: self.targets(), delta: 1 }));
            }
            KeyCode::Enter => self.detail = !self.detail,
            KeyCode::Char('z') => {
                self.overlay = Overlay::Cgroups(0);
                return self.pressure_question();
            }
            KeyCode::Char('X') => self.overlay = Overlay::Exited(0),
            KeyCode::Up => self.move_selection(-1),
            KeyCode::Down => self.move_selection(1),
            KeyCode::PageUp => self.move_selection(-(self.page.max(1) as isize)),
            KeyCode::PageDown => self.move_selection(self.page.max(1) as isize),
            KeyCode::Home => self.move_selection(isize::MIN / 2),
            KeyCode::End => self.move_selection(isize::MAX / 2),
            // Time travel.
            KeyCode::Char('[') => return self.travel(Move::Step(-1)),
            KeyCode::Char(']') => return self.travel(Move::Step(1)),
            KeyCode::Char('{') => return self.travel(Move::Span(-(self.span.as_millis() as i64))),
            KeyCode::Char('}') => return self.travel(Move::Span(self.span.as_millis() as i64)),
            KeyCode::Char('g') => self.overlay = Overlay::Prompt(Prompt::Goto, String::new()),
            KeyCode::Char('j') => self.overlay = Overlay::Prompt(Prompt::Span, String::new()),
            KeyCode::Char('l') => return self.travel(Move::Live),
            KeyCode::Char('Z') | KeyCode::Char('p') => {
                if self.cursor == Cursor::Live {
                    if let Some(f) = &self.shown {
                        self.cursor = Cursor::At { time_unix_ms: f.time_unix_ms };
                        self.say("paused (Z or l: live again)");
                    }
                } else {
                    return self.travel(Move::Live);
                }
            }
            _ => {}
        }
        Effect::None
    }
}

pub fn now_unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Users by uid, from `/etc/passwd` (read once at start; not `/proc`), printable.
pub fn read_users(path: &std::path::Path) -> BTreeMap<u32, String> {
    let mut users = proctor_procfs::system::read_users(path);
    for name in users.values_mut() {
        *name = proctor_vocab::units::printable(name);
    }
    users
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{frame_at, frame_of, proc_out};
    use std::sync::Arc;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    fn live_app() -> App {
        let mut app =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 10, ViewState::default(), Slow::default());
        let f = frame_of(vec![
            proc_out(1, 0, "init", 0.0, 1),
            proc_out(10, 1, "big", 1.0, 200),
            proc_out(11, 1, "busy", 50.0, 2),
        ]);
        app.message(Msg::Newest(Arc::new(f)));
        app
    }

    fn shown_pids(app: &App) -> Vec<u32> {
        app.table.lines.iter().map(|l| l.pid).collect()
    }

    #[test]
    fn keys_sort_filter_and_tree() {
        let mut app = live_app();
        assert_eq!(shown_pids(&app)[0], 11);
        app.key(key(KeyCode::Char('M')));
        assert_eq!(shown_pids(&app)[0], 10);
        app.key(key(KeyCode::Char('I')));
        assert_eq!(*shown_pids(&app).last().expect("rows"), 10);
        app.key(key(KeyCode::F(4)));
        for c in "busy".chars() {
            app.key(key(KeyCode::Char(c)));
        }
        assert_eq!(shown_pids(&app), [11], "the filter narrows as it is typed");
        app.key(key(KeyCode::Enter));
        assert_eq!(shown_pids(&app), [11]);
        app.key(key(KeyCode::Char('\\')));
        app.key(key(KeyCode::Esc));
        assert_eq!(shown_pids(&app).len(), 3, "Esc clears the filter");
        app.key(key(KeyCode::Char('t')));
        assert_eq!(shown_pids(&app)[0], 1, "tree: the parent first");
        assert_eq!(app.key(key(KeyCode::Char('q'))), Effect::Quit);
    }

    #[test]
    fn search_moves_the_selection_without_narrowing() {
        let mut app = live_app();
        app.key(key(KeyCode::Char('/')));
        app.key(key(KeyCode::Char('b')));
        app.key(key(KeyCode::Char('i')));
        assert_eq!(app.view.selected, Some(10));
        assert_eq!(shown_pids(&app).len(), 3);
    }

    #[test]
    fn a_signal_needs_a_choice_and_a_confirmation_and_goes_to_the_selected_process() {
        let mut app = live_app();
        app.view.selected = Some(10);
        assert_eq!(app.key(key(KeyCode::F(9))), Effect::None);
        assert_eq!(app.overlay, Overlay::Signals(0));
        app.key(key(KeyCode::Down));
        app.key(key(KeyCode::Enter));
        assert_eq!(app.overlay, Overlay::Confirm(1));
        let e = app.key(key(KeyCode::Char('y')));
        let Effect::Act(ActionEq(Action::Signal { targets, signal, .. })) = e else { panic!("{e:?}") };
        assert_eq!((targets[0].0, signal), (10, libc::SIGKILL));
        // No at the confirmation: nothing.
        app.key(key(KeyCode::Char('k')));
        app.key(key(KeyCode::Enter));
        assert_eq!(app.key(key(KeyCode::Char('n'))), Effect::None);
    }

    #[test]
    fn the_past_and_other_hosts_are_not_signalled() {
        let mut app = live_app();
        app.key(key(KeyCode::Char('Z')));
        app.key(key(KeyCode::Char('k')));
        assert_eq!(app.overlay, Overlay::None);
        assert!(app.message.as_ref().is_some_and(|(m, _)| m.contains("go live")));
        let mut remote = App::new(
            Mode::Remote { url: "http://x".into() },
            Duration::from_secs(1),
            10,
            ViewState::default(),
            Slow::default(),
        );
        remote.message(Msg::Newest(frame_at(5)));
        remote.key(key(KeyCode::F(9)));
        assert_eq!(remote.overlay, Overlay::None);
    }

    #[test]
    fn stepping_back_shows_an_older_frame_and_live_frames_do_not_move_it() {
        let mut app =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 10, ViewState::default(), Slow::default());
        for t in [1000, 2000, 3000] {
            app.message(Msg::Newest(frame_at(t)));
        }
        app.key(key(KeyCode::Char('[')));
        assert_eq!(app.shown.as_ref().map(|f| f.time_unix_ms), Some(2000));
        app.message(Msg::Newest(frame_at(4000)));
        assert_eq!(app.shown.as_ref().map(|f| f.time_unix_ms), Some(2000), "held in the past");
        app.key(key(KeyCode::Char('l')));
        assert_eq!(app.shown.as_ref().map(|f| f.time_unix_ms), Some(4000));
        assert_eq!(app.cursor, Cursor::Live);
    }

    #[test]
    fn u_narrows_to_a_user_by_name_or_uid_and_says_when_there_is_none() {
        let mut app = live_app();
        app.users.insert(1000, "alice".into());
        app.key(key(KeyCode::Char('u')));
        for c in "alice".chars() {
            app.key(key(KeyCode::Char(c)));
        }
        app.key(key(KeyCode::Enter));
        assert_eq!((app.view.user, shown_pids(&app).len()), (Some(1000), 3));
        app.key(key(KeyCode::Char('u')));
        app.key(key(KeyCode::Char('0')));
        app.key(key(KeyCode::Enter));
        assert_eq!((app.view.user, shown_pids(&app).len()), (Some(0), 0));
        app.key(key(KeyCode::Char('u')));
        for c in "nobody-here".chars() {
            app.key(key(KeyCode::Char(c)));
        }
        app.key(key(KeyCode::Enter));
        assert!(app.message.as_ref().is_some_and(|(m, _)| m.contains("no user 'nobody-here'")));
        app.key(key(KeyCode::Char('u')));
        app.key(key(KeyCode::Enter));
        assert_eq!(app.view.user, None, "empty: everyone");
    }

    #[test]
    fn the_cgroup_view_asks_for_pressure_live_only() {
        let mut app = live_app();
        let e = app.key(key(KeyCode::Char('z')));
        let Effect::Pressure(asked) = e else { panic!("{e:?}") };
        assert_eq!(asked, [("/app0".to_string(), 10), ("/app1".to_string(), 1)]);
        app.key(key(KeyCode::Esc));
        app.key(key(KeyCode::Char('Z')));
        assert_eq!(app.key(key(KeyCode::Char('z'))), Effect::None, "the past: not this machine's cgroups now");
    }

    #[test]
    fn a_recording_asks_its_store_and_takes_only_the_answer_it_waits_for() {
        let mut app = App::new(
            Mode::Recording { dir: "/d".into() },
            Duration::from_secs(1),
            0,
            ViewState::default(),
            Slow::default(),
        );
        let e = app.ask(Ask::Newest);
        assert_eq!(e, Effect::Ask(Ask::Newest));
        let id = app.pending_id().expect("pending");
        app.message(Msg::Stored { id, frame: Some(frame_at(50_000)), note: None });
        assert_eq!(app.cursor, Cursor::Live);
        let e = app.key(key(KeyCode::Char('[')));
        assert_eq!(e, Effect::Ask(Ask::AtOrBefore(49_999)));
        let id2 = app.pending_id().expect("pending");
        app.message(Msg::Stored { id: id2 - 1, frame: Some(frame_at(1)), note: None });
        assert_eq!(app.shown.as_ref().map(|f| f.time_unix_ms), Some(50_000), "a stale answer is ignored");
        app.message(Msg::Stored { id: id2, frame: Some(frame_at(49_000)), note: None });
        assert_eq!(app.cursor, Cursor::At { time_unix_ms: 49_000 });
        let e = app.key(key(KeyCode::Char(']')));
        assert_eq!(e, Effect::Ask(Ask::After(49_000)));
    }
}
