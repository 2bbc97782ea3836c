//! The view model: which processes a frame shows and in what order — sort column and
//! direction, filter, user, kernel threads, tree folding, tags and the selection. Pure: no
//! terminal, no clock, no I/O; the screen and the tests both ask it.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use proctor_groups::GroupRow;
use proctor_vocab::fields::{self, Field, Reading, PROCESS};
use proctor_vocab::process::ProcessOut;
use proctor_vocab::select::{is_kernel_thread, matches_parts};
use proctor_vocab::units::Unit;

use crate::frame::Frame;

/// The value of public field `name` (or an alias) for `p`, read through the field table;
/// nothing known for a name that is no field.
pub fn value<'a>(p: &'a ProcessOut, name: &str) -> Reading<'a> {
    fields::process_reader(name).map_or(Reading::Missing, |f| (f.out)(p))
}

/// Ascending order of two processes by one field, as the field table orders them (unknown
/// values smallest; CPU percent ties broken by CPU seconds).
pub fn compare(a: &ProcessOut, b: &ProcessOut, field: &Field) -> Ordering {
    fields::process_reader(field.name).map_or(Ordering::Equal, |f| f.order_outs(a, b))
}

/// The columns shown when no configuration says otherwise: htop's, in the vocabulary's names.
/// PSS is one F2 away: showing it starts the budgeted `smaps_rollup` reader, which htop's
/// default screen does not pay for either. No Name (`comm`) column either, as htop: the
/// Command column highlights the program's basename instead, and at 80 columns a Name would
/// take 16 of the 25 cells left for the command.
pub const DEFAULT_COLUMNS: [&str; 8] =
    ["pid", "uid", "state", "cpu_percent", "rss_bytes", "threads", "cpu_seconds_total", "cmdline"];

/// With `--net`: NetRx/s and NetTx/s before the command, unless the columns already show some
/// of the network (F2 keeps what the user chose; this is not saved unless F2 saves it).
pub fn show_network(view: &mut ViewState) {
    if view.columns.iter().any(|f| f.name.starts_with("net_")) {
        return;
    }
    let at = view.columns.iter().position(|f| f.name == "cmdline").unwrap_or(view.columns.len());
    let net = ["net_rx_bytes_per_sec", "net_tx_bytes_per_sec"].into_iter().filter_map(column);
    view.columns.splice(at..at, net);
}

/// What the live sampler must read for some columns: the PSS worker (`smaps_rollup`) and
/// `/proc/PID/io`; and for `H`, each process's threads. None is read while nothing shown (nor
/// the sort) needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    pub pss: bool,
    pub io: bool,
    pub threads: bool,
}

impl Needs {
    /// What `fields` (the shown columns, the one sorted by) need read.
    pub fn of<'a>(fields: impl IntoIterator<Item = &'a Field>) -> Needs {
        let mut needs = Needs::default();
        for f in fields {
            match f.name {
                "pss_bytes" | "uss_bytes" | "swap_pss_bytes" | "pss_age_secs" => needs.pss = true,
                "read_bytes_per_sec" | "write_bytes_per_sec" | "io_bytes_per_sec" => needs.io = true,
                _ => {}
            }
        }
        needs
    }

    /// What the view's columns, sort and thread rows need.
    pub fn of_view(view: &ViewState) -> Needs {
        Needs { threads: view.show_threads, ..Needs::of(view.columns.iter().copied().chain([view.sort])) }
    }
}

/// Biggest first for numbers, smallest first for ids and text: the order a first press of a
/// sort key gives.
pub fn default_descending(field: &Field) -> bool {
    field.unit.is_numeric() && !matches!(field.name, "pid" | "ppid" | "uid")
}

/// A field of the process table by name or by an alias of the one table (`cpu`, `mem`).
pub fn column(name: &str) -> Option<&'static Field> {
    fields::process_field(name)
}

/// Everything the user chose about the table.
#[derive(Debug, Clone)]
pub struct ViewState {
    pub columns: Vec<&'static Field>,
    pub sort: &'static Field,
    pub descending: bool,
    /// F4: only processes that match (the one filter rule: name, arguments, exact pid).
    pub filter: String,
    /// `u`: only this user's processes.
    pub user: Option<u32>,
    /// `z` zoomed into one cgroup: only its processes.
    pub cgroup: Option<String>,
    /// F5: parents before their children, indented.
    pub tree: bool,
    /// Tree nodes whose children are hidden.
    pub collapsed: BTreeSet<u32>,
    /// `K`: kernel threads are hidden unless this is set.
    pub show_kernel: bool,
    /// `H`: each process's userland threads as rows under it (read only while this is set).
    pub show_threads: bool,
    /// Space: tagged processes (by pid), for signals and nice.
    pub tagged: BTreeSet<u32>,
    /// The selected process; it follows its pid across frames.
    pub selected: Option<u32>,
}

impl Default for ViewState {
    fn default() -> Self {
        let columns = DEFAULT_COLUMNS.iter().filter_map(|n| column(n)).collect();
        ViewState {
            columns,
            sort: column("cpu_percent").unwrap_or(&PROCESS[0]),
            descending: true,
            filter: String::new(),
            user: None,
            cgroup: None,
            tree: false,
            collapsed: BTreeSet::new(),
            show_kernel: false,
            show_threads: false,
            tagged: BTreeSet::new(),
            selected: None,
        }
    }
}

impl ViewState {
    /// Sorts by `field`, biggest first for numbers (smallest first for pid and text), as a
    /// first press of htop's sort keys does; pressing the current key again inverts.
    pub fn sort_by(&mut self, field: &'static Field) {
        if std::ptr::eq(self.sort, field) || self.sort.name == field.name {
            self.descending = !self.descending;
        } else {
            self.sort = field;
            self.descending = default_descending(field);
        }
    }

    /// The next (`+1`) or previous (`-1`) sortable column after the current sort column, among
    /// those shown; with neither shown, the first shown.
    pub fn cycle_sort(&mut self, step: i32) {
        let shown: Vec<&'static Field> = self.columns.clone();
        if shown.is_empty() {
            return;
        }
        let at = shown.iter().position(|f| f.name == self.sort.name);
        let next = match at {
            None => 0,
            Some(i) => (i as i32 + step).rem_euclid(shown.len() as i32) as usize,
        };
        let field = shown[next];
        self.sort = field;
        self.descending = default_descending(field);
    }

    fn passes(&self, p: &ProcessOut, needle: &str) -> bool {
        (self.show_kernel || !is_kernel_thread(p.pid, p.ppid, p.cmdline.as_deref()))
            && self.user.is_none_or(|u| p.uid == Some(u))
            && self.cgroup.as_deref().is_none_or(|c| p.cgroup.as_deref() == Some(c))
            && matches_parts(p.pid, &p.name, p.cmdline.as_deref(), needle)
    }

    /// The order the table is sorted in; the sort field's reader is found once per sort, not
    /// once per comparison.
    fn order(&self) -> impl Fn(&ProcessOut, &ProcessOut) -> Ordering + '_ {
        let reader = fields::process_reader(self.sort.name);
        move |a, b| {
            let ord = reader.map_or(Ordering::Equal, |f| f.order_outs(a, b));
            let ord = if self.descending { ord.reverse() } else { ord };
            ord.then(a.pid.cmp(&b.pid))
        }
    }
}

/// One table line: a process of the frame, with its place in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Index into the frame's processes.
    pub index: usize,
    pub pid: u32,
    pub depth: usize,
    /// Tree glyphs before the command (`├─ `, `└─ `, `│  `); empty outside tree mode.
    pub prefix: String,
    /// In tree mode: it has children that are shown (or folded away).
    pub has_children: bool,
    pub folded: bool,
    /// A thread row (`H`): index into the process's `thread_rows`; `pid` is then its tid.
    pub thread: Option<usize>,
}

/// What the table shows of `frame` under `view`, top to bottom; and how many processes passed
/// each stage, for the status line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub lines: Vec<Line>,
    /// Processes in the frame.
    pub total: usize,
    /// Kernel threads left out (`K` shows them).
    pub kernel_hidden: usize,
    /// Processes that passed the filters (in tree mode ancestors shown for context are extra).
    pub matched: usize,
}

pub fn table(frame: &Frame, view: &ViewState) -> Table {
    let needle = view.filter.trim().to_lowercase();
    let procs = &frame.processes;
    let kernel_hidden = if view.show_kernel {
        0
    } else {
        procs.iter().filter(|p| is_kernel_thread(p.pid, p.ppid, p.cmdline.as_deref())).count()
    };
    let pass: Vec<bool> = procs.iter().map(|p| view.passes(p, &needle)).collect();
    let matched = pass.iter().filter(|&&b| b).count();
    let lines = if view.tree { tree_lines(frame, view, &pass) } else { flat_lines(frame, view, &pass) };
    Table { lines, total: procs.len(), kernel_hidden, matched }
}

fn flat_lines(frame: &Frame, view: &ViewState, pass: &[bool]) -> Vec<Line> {
    let procs = &frame.processes;
    let mut idx: Vec<usize> = (0..procs.len()).filter(|&i| pass[i]).collect();
    let order = view.order();
    idx.sort_by(|&a, &b| order(&procs[a], &procs[b]));
    let mut lines = Vec::with_capacity(idx.len());
    for i in idx {
        lines.push(Line {
            index: i,
            pid: procs[i].pid,
            depth: 0,
            prefix: String::new(),
            has_children: false,
            folded: false,
            thread: None,
        });
        if view.show_threads {
            thread_lines(&mut lines, frame, i, 0, "", 0);
        }
    }
    lines
}

/// The rows of process `i`'s threads (`H`), after its own row, in tid order: at `depth`, with
/// tree glyphs after `below` where `below` is set (tree mode), the last one closing the branch
/// unless `kids` child processes follow.
fn thread_lines(lines: &mut Vec<Line>, frame: &Frame, i: usize, depth: usize, below: &str, kids: usize) {
    let threads = &frame.processes[i].thread_rows;
    for (k, t) in threads.iter().enumerate() {
        let prefix = if depth == 0 {
            String::new()
        } else {
            format!("{below}{}", if k + 1 == threads.len() && kids == 0 { "└─ " } else { "├─ " })
        };
        lines.push(Line { index: i, pid: t.tid, depth, prefix, has_children: false, folded: false, thread: Some(k) });
    }
}

/// A thread row as a process row, for the table's cells: the thread's id, name (as its
/// command), state and CPU; the rest is its process's (threads share its memory, user and
/// cgroup, as htop shows them), except the per-process rates not read per thread (I/O, major
/// faults, GPU), unknown.
pub fn thread_out(p: &ProcessOut, thread: usize) -> Option<ProcessOut> {
    let t = p.thread_rows.get(thread)?;
    Some(ProcessOut {
        pid: t.tid,
        ppid: p.pid,
        name: t.name.clone(),
        cmdline: Some(std::sync::Arc::from(vec![t.name.to_string()])),
        state: t.state,
        cpu_percent: t.cpu_percent,
        cpu_percent_of_effective: None,
        cpu_seconds_total: t.cpu_seconds_total,
        major_faults_per_sec: None,
        read_bytes_per_sec: None,
        write_bytes_per_sec: None,
        io_bytes_per_sec: None,
        gpu_percent: None,
        gpu_memory_bytes: None,
        thread_rows: Vec::new(),
        ..p.clone()
    })
}

fn tree_lines(frame: &Frame, view: &ViewState, pass: &[bool]) -> Vec<Line> {
    let procs = &frame.processes;
    let by_pid: HashMap<u32, usize> = procs.iter().enumerate().map(|(i, p)| (p.pid, i)).collect();
    // A process is shown when it passes, or when a descendant passes (its path stays visible).
    let mut shown = pass.to_vec();
    for i in 0..procs.len() {
        if !pass[i] {
            continue;
        }
        let mut at = procs[i].ppid;
        let mut steps = 0;
        while let Some(&j) = by_pid.get(&at) {
            if shown[j] || steps > procs.len() {
                break;
            }
            shown[j] = true;
            at = procs[j].ppid;
            steps += 1;
        }
    }
    let mut children: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut roots = Vec::new();
    for (i, p) in procs.iter().enumerate() {
        if !shown[i] {
            continue;
        }
        match by_pid.get(&p.ppid) {
            Some(&j) if shown[j] && p.ppid != p.pid => children.entry(p.ppid).or_default().push(i),
            _ => roots.push(i),
        }
    }
    let order = view.order();
    for kids in children.values_mut() {
        kids.sort_by(|&a, &b| order(&procs[a], &procs[b]));
    }
    roots.sort_by(|&a, &b| order(&procs[a], &procs[b]));
    let mut lines = Vec::new();
    let mut visited = vec![false; procs.len()];
    // Depth-first with an explicit stack: (index, depth, glyph columns above, last sibling).
    let mut stack: Vec<(usize, usize, String, bool)> =
        roots.iter().rev().map(|&i| (i, 0, String::new(), true)).collect();
    while let Some((i, depth, above, last)) = stack.pop() {
        if std::mem::replace(&mut visited[i], true) {
            continue;
        }
        let pid = procs[i].pid;
        let kids = children.get(&pid).map(Vec::as_slice).unwrap_or(&[]);
        let prefix =
            if depth == 0 { String::new() } else { format!("{above}{}", if last { "└─ " } else { "├─ " }) };
        let has_threads = view.show_threads && !procs[i].thread_rows.is_empty();
        let folded = view.collapsed.contains(&pid) && (!kids.is_empty() || has_threads);
        lines.push(Line {
            index: i,
            pid,
            depth,
            prefix,
            has_children: !kids.is_empty() || has_threads,
            folded,
            thread: None,
        });
        if folded {
            continue;
        }
        let below = if depth == 0 { String::new() } else { format!("{above}{}", if last { "   " } else { "│  " }) };
        if has_threads {
            thread_lines(&mut lines, frame, i, depth + 1, &below, kids.len());
        }
        for (k, &child) in kids.iter().enumerate().rev() {
            stack.push((child, depth + 1, below.clone(), k + 1 == kids.len()));
        }
    }
    lines
}

/// Where the selection is in `lines`: the selected pid's line, else the first.
pub fn selected_line(lines: &[Line], selected: Option<u32>) -> Option<usize> {
    if lines.is_empty() {
        return None;
    }
    Some(selected.and_then(|pid| lines.iter().position(|l| l.pid == pid)).unwrap_or(0))
}

/// Processes grouped by cgroup for the `z` view: proctor-groups' one sum over the frame's
/// processes (a group's name is the cgroup's path), biggest CPU first (ties by RSS, then path).
/// Kernel threads count where the view shows them.
pub fn cgroups(frame: &Frame, view: &ViewState) -> Vec<GroupRow> {
    proctor_groups::sum(
        frame
            .processes
            .iter()
            .filter(|p| view.show_kernel || !is_kernel_thread(p.pid, p.ppid, p.cmdline.as_deref()))
            .map(|p| (p.cgroup.as_deref().unwrap_or("(unknown)"), proctor_vocab::process::share(p))),
    )
}

/// A column's text for one process: the vocabulary's formats; `uid` as the user's name when
/// `users` knows it; `cmdline` falls back to `[name]` as top shows a process whose arguments
/// are not known (kernel threads, zombies, not read yet).
pub fn cell(p: &ProcessOut, field: &Field, users: &BTreeMap<u32, String>) -> String {
    match field.name {
        "uid" => p.uid.map_or_else(|| "-".to_string(), |u| users.get(&u).cloned().unwrap_or_else(|| u.to_string())),
        "cmdline" => match &p.cmdline {
            Some(c) if !c.is_empty() => c.join(" "),
            _ => format!("[{}]", p.name),
        },
        "cpu_percent" | "cpu_percent_of_effective" => proctor_vocab::units::opt_pct(value(p, field.name).num()),
        "start_time_unix_secs" => p.start_time_unix_secs.map_or_else(|| "-".to_string(), clock_time),
        // htop's TIME+: `1:25.00`.
        "cpu_seconds_total" => proctor_vocab::units::cpu_time(p.cpu_seconds_total),
        // A clone's reading standing in for this process's own (the Enter pane says whose).
        "pss_bytes" | "uss_bytes" | "swap_pss_bytes" if p.pss_estimated_from.is_some() => {
            format!("~{}", field.unit.format(value(p, field.name).num()))
        }
        _ => match value(p, field.name) {
            Reading::Text(t) => t.into_owned(),
            Reading::Missing if !field.unit.is_numeric() => "-".to_string(),
            v => match field.unit {
                Unit::Count => v.num().map_or_else(|| "-".to_string(), |v| format!("{v:.0}")),
                unit => unit.format(v.num()),
            },
        },
    }
}

/// The Command column of one process in three parts, as htop draws it: the program's
/// directory, its basename (highlighted) and the rest (arguments). Where the column is too
/// narrow for all of it the directory is left out, so the basename and arguments stay in
/// sight (htop's "shorten paths"); the detail pane has the whole line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Command {
    pub dir: String,
    pub base: String,
    pub rest: String,
}

impl Command {
    /// Of `p`: the program is `argv[0]` up to its first space (a process that wrote its title
    /// over its arguments, `sshd: alice [priv]`, has it all in `argv[0]`). A process whose
    /// arguments are not known is `[name]`, with no basename to highlight.
    pub fn of(p: &ProcessOut) -> Command {
        let args = match &p.cmdline {
            Some(c) if !c.is_empty() => c,
            _ => return Command { rest: format!("[{}]", p.name), ..Command::default() },
        };
        let argv0 = args[0].as_str();
        let (program, title) = argv0.split_at(argv0.find(' ').unwrap_or(argv0.len()));
        let (dir, base) = program.split_at(program.rfind('/').map_or(0, |i| i + 1));
        let mut rest = title.to_string();
        for arg in &args[1..] {
            rest.push(' ');
            rest.push_str(arg);
        }
        Command { dir: dir.to_string(), base: base.to_string(), rest }
    }

    /// The parts shown in `room` characters: all of them, or without the directory when they
    /// do not fit (then cut at the end by the screen, as any long line).
    pub fn fitted(&self, room: usize) -> (&str, &str, &str) {
        let len = |s: &str| s.chars().count();
        if len(&self.dir) + len(&self.base) + len(&self.rest) <= room {
            (&self.dir, &self.base, &self.rest)
        } else {
            ("", &self.base, &self.rest)
        }
    }
}

/// `HH:MM:SS` UTC of a unix time (what the store and `--at` speak).
pub fn clock_time(unix_secs: f64) -> String {
    let s = unix_secs.max(0.0) as u64 % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{frame_of, proc_out};

    /// `--net` puts NetRx/s and NetTx/s before the command, once; columns that already show
    /// some network are left as the user chose them.
    #[test]
    fn net_shows_the_network_columns_before_the_command_unless_chosen() {
        let names = |v: &ViewState| v.columns.iter().map(|f| f.name).collect::<Vec<_>>();
        let mut view = ViewState::default();
        show_network(&mut view);
        show_network(&mut view);
        let shown = names(&view);
        assert_eq!(&shown[shown.len() - 3..], ["net_rx_bytes_per_sec", "net_tx_bytes_per_sec", "cmdline"]);
        assert_eq!(shown.len(), DEFAULT_COLUMNS.len() + 2);
        let mut chosen = ViewState {
            columns: ["pid", "net_retransmits_per_sec"].into_iter().filter_map(column).collect(),
            ..ViewState::default()
        };
        show_network(&mut chosen);
        assert_eq!(names(&chosen), ["pid", "net_retransmits_per_sec"]);
    }

    fn family() -> Frame {
        let mut kthread = proc_out(40, 2, "kworker/0:1", 0.0, 0);
        kthread.cmdline = Some(Vec::new().into());
        let mut kthreadd = proc_out(2, 0, "kthreadd", 0.0, 0);
        kthreadd.cmdline = Some(Vec::new().into());
        frame_of(vec![
            proc_out(1, 0, "init", 0.1, 10),
            kthreadd,
            kthread,
            proc_out(100, 1, "shell", 0.5, 5),
            proc_out(200, 100, "worker", 30.0, 20),
            proc_out(201, 100, "hog", 1.0, 200),
            proc_out(300, 1, "daemon", 2.0, 50),
        ])
    }

    fn pids(t: &Table) -> Vec<u32> {
        t.lines.iter().map(|l| l.pid).collect()
    }

    #[test]
    fn every_public_process_field_has_a_value_and_a_cell() {
        let p = proc_out(7, 1, "x", 1.0, 1);
        for f in PROCESS {
            assert!(fields::process_reader(f.name).is_some(), "{} has no reader", f.name);
            let _ = cell(&p, f, &BTreeMap::new());
        }
        let field = column("cgroup").expect("cgroup");
        assert_eq!(cell(&p, field, &BTreeMap::new()), "/app1");
    }

    #[test]
    fn pss_and_io_columns_need_their_readers_and_others_need_none() {
        let needs = |names: &[&str]| Needs::of(names.iter().filter_map(|n| column(n)));
        assert_eq!(Needs::of_view(&ViewState::default()), Needs::default(), "the default screen reads neither");
        assert_eq!(needs(&["pid", "pss_bytes"]), Needs { pss: true, io: false, threads: false });
        for name in ["uss_bytes", "swap_pss_bytes", "pss_age_secs"] {
            assert!(needs(&[name]).pss, "{name}");
        }
        for name in ["read_bytes_per_sec", "write_bytes_per_sec", "io_bytes_per_sec"] {
            assert_eq!(needs(&[name]), Needs { pss: false, io: true, threads: false }, "{name}");
        }
        let view = ViewState { sort: column("pss_bytes").expect("pss"), ..ViewState::default() };
        assert!(Needs::of_view(&view).pss, "sorted by a PSS column that is not shown: still read");
    }

    #[test]
    fn a_command_splits_into_directory_basename_and_arguments() {
        let mut p = proc_out(7, 1, "sleeper", 0.0, 1);
        let parts = |p: &ProcessOut| {
            let c = Command::of(p);
            (c.dir, c.base, c.rest)
        };
        p.cmdline = Some(vec!["/opt/a/b/bin/sleeper".into(), "999".into(), "--x".into()].into());
        assert_eq!(parts(&p), ("/opt/a/b/bin/".into(), "sleeper".into(), " 999 --x".into()));
        let c = Command::of(&p);
        assert_eq!(c.fitted(100), ("/opt/a/b/bin/", "sleeper", " 999 --x"));
        assert_eq!(c.fitted(20), ("", "sleeper", " 999 --x"), "narrow: the directory goes first");
        p.cmdline = Some(vec!["sshd: alice@pts/0".into()].into());
        assert_eq!(parts(&p), ("".into(), "sshd:".into(), " alice@pts/0".into()), "a title written over argv");
        p.cmdline = Some(vec!["./run".into()].into());
        assert_eq!(parts(&p), ("./".into(), "run".into(), "".into()));
        p.cmdline = Some(Vec::new().into());
        assert_eq!(parts(&p), ("".into(), "".into(), "[sleeper]".into()), "a kernel thread: its name, nothing lit");
        p.cmdline = None;
        assert_eq!(parts(&p), ("".into(), "".into(), "[sleeper]".into()));
    }

    #[test]
    fn sorts_by_memory_cpu_and_time_and_inverts() {
        let f = family();
        let mut v = ViewState::default();
        assert_eq!(pids(&table(&f, &v))[..3], [200, 300, 201], "CPU first by default");
        v.sort_by(column("rss_bytes").expect("rss"));
        assert_eq!(pids(&table(&f, &v))[0], 201, "the 200 MiB process first");
        v.sort_by(column("rss_bytes").expect("rss"));
        assert!(!v.descending);
        assert_eq!(*pids(&table(&f, &v)).last().expect("rows"), 201, "inverted: smallest first");
        v.sort_by(column("pid").expect("pid"));
        assert_eq!(pids(&table(&f, &v)), [1, 100, 200, 201, 300]);
        v.cycle_sort(1);
        assert_eq!(v.sort.name, "uid");
    }

    #[test]
    fn kernel_threads_are_hidden_until_asked_for() {
        let f = family();
        let mut v = ViewState::default();
        let t = table(&f, &v);
        assert_eq!((t.total, t.kernel_hidden, t.matched), (7, 2, 5));
        assert!(!pids(&t).contains(&40));
        v.show_kernel = true;
        let t = table(&f, &v);
        assert!(pids(&t).contains(&40) && pids(&t).contains(&2));
        assert_eq!(t.kernel_hidden, 0);
    }

    #[test]
    fn filter_narrows_by_name_command_line_or_pid_and_user() {
        let f = family();
        let mut v = ViewState { filter: "HOG".into(), ..ViewState::default() };
        assert_eq!(pids(&table(&f, &v)), [201]);
        v.filter = "--flag".into();
        assert_eq!(table(&f, &v).matched, 5);
        v.filter = "300".into();
        assert_eq!(pids(&table(&f, &v)), [300]);
        // Words typed as the Command column shows them match across arguments, as htop's F4.
        v.filter = "HOG --flag".into();
        assert_eq!(pids(&table(&f, &v)), [201]);
        v.filter = "zzznomatch".into();
        assert!(table(&f, &v).lines.is_empty());
        v.filter.clear();
        v.user = Some(0);
        assert!(table(&f, &v).lines.is_empty());
        v.user = None;
        v.cgroup = Some("/app0".into());
        assert_eq!(pids(&table(&f, &v)), [200, 300, 100]);
    }

    #[test]
    fn tree_puts_children_under_parents_and_folds() {
        let f = family();
        let mut v = ViewState { tree: true, ..ViewState::default() };
        let t = table(&f, &v);
        assert_eq!(pids(&t), [1, 300, 100, 200, 201]);
        let glyphs: Vec<&str> = t.lines.iter().map(|l| l.prefix.as_str()).collect();
        assert_eq!(glyphs, ["", "├─ ", "└─ ", "   ├─ ", "   └─ "]);
        assert_eq!(t.lines[3].depth, 2);
        // A filter keeps the path to what matches.
        v.filter = "hog".into();
        assert_eq!(pids(&table(&f, &v)), [1, 100, 201]);
        v.filter.clear();
        v.collapsed.insert(100);
        let t = table(&f, &v);
        assert_eq!(pids(&t), [1, 300, 100]);
        assert!(t.lines[2].folded && t.lines[2].has_children);
    }

    #[test]
    fn a_parent_cycle_in_hostile_data_ends() {
        let f = frame_of(vec![proc_out(10, 11, "a", 0.0, 1), proc_out(11, 10, "b", 0.0, 1)]);
        let v = ViewState { tree: true, ..ViewState::default() };
        let t = table(&f, &v);
        assert!(t.lines.len() <= 2);
        assert!(f.parents(10).len() <= 64);
    }

    #[test]
    fn cgroups_sum_their_processes() {
        let f = family();
        let rows = cgroups(&f, &ViewState::default());
        assert_eq!(rows[0].name, "/app0");
        assert_eq!(rows[0].processes, 3);
        assert!((rows[0].cpu_percent - 32.5).abs() < 1e-9);
        assert_eq!(rows[1].rss_bytes, (10 + 200) << 20);
    }

    #[test]
    fn selection_follows_its_pid() {
        let f = family();
        let v = ViewState { selected: Some(201), ..ViewState::default() };
        let t = table(&f, &v);
        assert_eq!(t.lines[selected_line(&t.lines, v.selected).expect("a line")].pid, 201);
        assert_eq!(selected_line(&t.lines, Some(99_999)), Some(0));
    }
}
