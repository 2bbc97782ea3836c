//! Drawing the screen from the app's state: header (per-CPU bars, memory, load, pressure, the
//! container, the agent's own cost), the process table, the detail pane, the status and key
//! lines, and the overlays. Every value is written by the vocabulary's formats; every text
//! that came from a process goes through `printable` first, so no name reaches the terminal
//! as a control sequence.

use proctor_vocab::fields::{Field, PROCESS};
use proctor_vocab::snapshot::{CpuOut, PressureOut};
use proctor_vocab::units::{bytes, opt_bytes, percent, printable, seconds};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use crate::app::{App, Mode, Overlay, SIGNALS};
use crate::frame::{Frame, Origin};
use crate::travel::Cursor;
use crate::view::{cell, cgroups, clock_time, selected_line, Command};

use ratatui::style::Color;

/// Width of a column; the command line takes what is left.
fn width(field: &Field) -> usize {
    match field.name {
        "pid" | "ppid" => 7,
        "uid" => 9,
        "state" => 1,
        "name" => 15,
        "cpu_percent" | "cpu_percent_of_effective" => 7,
        "threads" => 4,
        "cpu_seconds_total" => 11,
        "start_time_unix_secs" => 8,
        "cgroup" => 28,
        "pss_age_secs" => 9,
        "major_faults_per_sec" => 9,
        "read_bytes_per_sec" | "write_bytes_per_sec" | "io_bytes_per_sec" => 11,
        _ => 9,
    }
}

fn right_aligned(field: &Field) -> bool {
    field.unit.is_numeric() && field.name != "uid"
}

struct Styles {
    color: bool,
}

impl Styles {
    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }
    fn bold(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
    /// The program's basename in the Command column (htop's PROCESS_BASENAME): bold, cyan
    /// where colours are on.
    fn basename(&self) -> Style {
        let bold = Style::default().add_modifier(Modifier::BOLD);
        if self.color {
            bold.fg(Color::Cyan)
        } else {
            bold
        }
    }
    fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    fn header_row(&self) -> Style {
        if self.color {
            Style::default().fg(Color::Black).bg(Color::Green)
        } else {
            Style::default().add_modifier(Modifier::REVERSED)
        }
    }
}

/// Draws the whole screen.
pub fn draw(f: &mut ratatui::Frame, app: &mut App) {
    let area = f.area();
    let st = Styles { color: app.color };
    let Some(frame) = app.shown.clone() else {
        let text = match (&app.problem, app.pending) {
            (Some(p), _) => format!("proctor top: {}", printable(p)),
            (None, Some(_)) => "proctor top: loading…".to_string(),
            _ => "proctor top: waiting for the first sample…".to_string(),
        };
        f.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
        return;
    };
    let header = header_lines(&frame, app, &st, area.width as usize);
    let header_h = (header.len() as u16).min(area.height.saturating_sub(4));
    let detail_h: u16 = if app.detail { 9.min(area.height.saturating_sub(header_h + 6)) } else { 0 };
    let foot_h: u16 = 2;
    let table_h = area.height.saturating_sub(header_h + detail_h + foot_h);
    let mut y = area.y;
    f.render_widget(Paragraph::new(header), Rect { x: area.x, y, width: area.width, height: header_h });
    y += header_h;
    let table_area = Rect { x: area.x, y, width: area.width, height: table_h };
    if let Overlay::Cgroups(at) = app.overlay {
        draw_cgroups(f, app, &frame, table_area, at, &st);
    } else if let Overlay::Exited(at) = app.overlay {
        draw_exited(f, app, &frame, table_area, at, &st);
    } else {
        draw_table(f, app, &frame, table_area, &st);
    }
    y += table_h;
    if detail_h > 0 {
        let area = Rect { x: area.x, y, width: area.width, height: detail_h };
        draw_detail(f, app, &frame, area);
        y += detail_h;
    }
    let status = status_line(app, &frame);
    f.render_widget(Paragraph::new(status), Rect { x: area.x, y, width: area.width, height: 1 });
    let keys = "F1Help F2Setup F3Search F4Filter F5Tree F6Sort F9Kill F10Quit [ ]Step { }Jump gGoto ZPause lLive";
    f.render_widget(
        Paragraph::new(Span::styled(keys, st.header_row())),
        Rect { x: area.x, y: y + 1, width: area.width, height: 1 },
    );
    match &app.overlay {
        Overlay::Help => draw_help(f, area),
        Overlay::Signals(i) => draw_signals(f, area, *i, app),
        Overlay::Confirm(i) => draw_confirm(f, area, *i, app),
        Overlay::Setup(i) => draw_setup(f, area, *i, app),
        Overlay::SortBy(i) => draw_sort_by(f, area, *i, app),
        _ => {}
    }
}

fn header_lines(frame: &Frame, app: &App, st: &Styles, width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let h = &frame.host;
    // Title: where this comes from and when. In the past, to the millisecond: frames a sample
    // apart under a second would otherwise read alike as `[` steps through them.
    let when = match app.cursor {
        Cursor::Live => clock_time(frame.time_unix_ms as f64 / 1e3),
        Cursor::At { .. } => {
            format!("{}.{:03}", clock_time(frame.time_unix_ms as f64 / 1e3), frame.time_unix_ms % 1000)
        }
    };
    let source = match (&app.mode, app.cursor) {
        (Mode::Live { .. }, Cursor::Live) => format!("live, every {}", proctor_vocab::format_duration(app.interval)),
        (Mode::Remote { url }, Cursor::Live) => format!("live from {}", printable(url)),
        (Mode::Recording { dir }, Cursor::Live) => {
            format!("recording {} (following)", printable(&dir.display().to_string()))
        }
        (_, Cursor::At { .. }) => {
            let ago = app.ring.newest().map(|n| n.time_unix_ms.saturating_sub(frame.time_unix_ms));
            let ago = ago
                .filter(|a| *a > 0)
                .map(|a| format!(", {} before live", seconds(a as f64 / 1e3)))
                .unwrap_or_default();
            let from = if frame.origin == Origin::Stored { " from the store" } else { "" };
            format!("PAUSED in the past{from}{ago}")
        }
    };
    let loading = if app.pending.is_some() { "  loading…" } else { "" };
    lines.push(Line::from(vec![
        Span::styled(format!("proctor top  {when} UTC  "), st.bold()),
        Span::styled(
            source,
            if app.cursor == Cursor::Live {
                st.fg(Color::Green)
            } else {
                st.fg(Color::Yellow).add_modifier(Modifier::BOLD)
            },
        ),
        Span::raw(loading),
    ]));
    // Per-CPU bars, as many columns as fit.
    let cols = (width / 26).clamp(1, 4);
    let bar_w = width / cols;
    let cpus: Vec<(String, &CpuOut)> = if h.per_cpu.is_empty() {
        h.cpu.iter().map(|c| ("CPU".to_string(), c)).collect()
    } else {
        h.per_cpu.iter().map(|c| (format!("{:<3}", c.cpu), &c.shares)).collect()
    };
    for chunk in cpus.chunks(cols) {
        let mut spans = Vec::new();
        for (label, c) in chunk {
            spans.extend(cpu_bar(label, c, bar_w, st));
        }
        lines.push(Line::from(spans));
    }
    if cpus.is_empty() {
        lines.push(Line::raw("CPU: needs two samples"));
    }
    // Memory and swap.
    let m = &h.memory;
    let mut spans = vec![Span::styled("Mem ", st.bold())];
    spans.extend(usage_bar(m.used_bytes, m.total_bytes, (width / 2).saturating_sub(6), st, Color::Green));
    spans.push(Span::styled("  Swp ", st.bold()));
    spans.extend(usage_bar(m.swap_used_bytes, m.swap_total_bytes, (width / 2).saturating_sub(8), st, Color::Red));
    lines.push(Line::from(spans));
    // Load and pressure.
    let load = h.load.as_ref().map_or("-".to_string(), |l| format!("{:.2} {:.2} {:.2}", l.avg1, l.avg5, l.avg15));
    let psi = |p: &Option<PressureOut>| {
        p.as_ref().and_then(|p| p.some.as_ref()).map_or("-".to_string(), |s| format!("{}%", percent(s.avg10)))
    };
    let counts = task_counts(frame);
    let mut load_line = vec![
        Span::styled("Load ", st.bold()),
        Span::raw(format!("{load}   ")),
        Span::styled("PSI some 10s ", st.bold()),
        Span::raw(format!(
            "cpu {} mem {} io {}   ",
            psi(&h.pressure_cpu),
            psi(&h.pressure_memory),
            psi(&h.pressure_io)
        )),
    ];
    let tasks = vec![Span::styled("Tasks ", st.bold()), Span::raw(counts)];
    // On a narrow screen the task counts get a line of their own rather than being cut off.
    let width_of = |spans: &[Span]| spans.iter().map(|s| s.content.chars().count()).sum::<usize>();
    if width_of(&load_line) + width_of(&tasks) <= width {
        load_line.extend(tasks);
        lines.push(Line::from(load_line));
    } else {
        lines.push(Line::from(load_line));
        lines.push(Line::from(tasks));
    }
    // Power and GPUs, where the host has them.
    if !h.power.is_empty() || !h.gpus.is_empty() {
        let mut spans = Vec::new();
        if !h.power.is_empty() {
            let watts = |w: Option<f64>| w.map_or("-".to_string(), |w| format!("{w:.1} W"));
            let domains: Vec<String> =
                h.power.iter().map(|p| format!("{} {}", printable(&p.domain), watts(p.watts))).collect();
            spans.push(Span::styled("Power ", st.bold()));
            spans.push(Span::raw(format!("{} host ({})   ", watts(h.power_host_watts), domains.join(", "))));
        }
        for g in &h.gpus {
            let busy = g.busy_percent.map_or("-".to_string(), |b| format!("{}%", percent(b)));
            let mem = match (g.memory_used_bytes, g.memory_total_bytes) {
                (Some(u), Some(t)) => format!(" mem {} of {}", bytes(u), bytes(t)),
                (Some(u), None) => format!(" mem {}", bytes(u)),
                _ => String::new(),
            };
            let power = g.power_watts.map(|w| format!(" {w:.0} W")).unwrap_or_default();
            spans.push(Span::styled("GPU ", st.bold()));
            spans.push(Span::raw(format!("{} {} {busy}{mem}{power}   ", printable(&g.id), printable(&g.name))));
        }
        lines.push(Line::from(spans));
    }
    // With --net: all the IP traffic the network programs counted, and the part no process's
    // socket owned (the rows' network columns and it add up to the devices').
    if let Some(n) = &h.process_net {
        let rate = |v: f64| format!("{}/s", bytes(v.max(0.0) as u64));
        lines.push(Line::from(vec![
            Span::styled("Net ", st.bold()),
            Span::raw(format!(
                "IP rx {} tx {} (every device, lo too); no process's: rx {} tx {}{}",
                rate(n.rx_bytes_per_sec),
                rate(n.tx_bytes_per_sec),
                rate(n.unowned_rx_bytes_per_sec),
                rate(n.unowned_tx_bytes_per_sec),
                if n.table_full > 0 {
                    format!("; {} processes found the table full", n.table_full)
                } else {
                    String::new()
                },
            )),
        ]));
    } else if let Some(why) = &frame.net_unavailable {
        // Asked for and refused: the network columns stay empty, and this says why.
        let text: String = format!("per-process network not counted: {}", printable(why))
            .chars()
            .take(width.saturating_sub(4))
            .collect();
        lines.push(Line::from(vec![Span::styled("Net ", st.bold()), Span::raw(text)]));
    }
    // The container: usage against its limits, host vs effective CPUs.
    let c = &frame.container;
    let container = match (&c.error, &c.cgroup_path) {
        (Some(e), _) => format!("no cgroup view: {}", printable(e)),
        (None, path) => {
            let cpus = match (c.cpu_used_cpus, c.effective_cpus) {
                (Some(u), Some(e)) => format!("CPU {u:.2} of {e:.2} effective"),
                (None, Some(e)) => format!("{e:.2} effective CPUs"),
                _ => "CPU -".to_string(),
            };
            let host_cpus = c.host_online_cpus.map(|n| format!(" (host {n})")).unwrap_or_default();
            let mem = match (c.memory_current_bytes, c.memory_limit_bytes) {
                (Some(cur), Some(lim)) => {
                    format!(
                        "mem {} of {} ({}%)",
                        bytes(cur),
                        bytes(lim),
                        percent(cur as f64 * 100.0 / lim.max(1) as f64)
                    )
                }
                (Some(cur), None) => format!("mem {} (no limit)", bytes(cur)),
                _ => "mem -".to_string(),
            };
            let throttled = c
                .cpu_throttled_seconds_total
                .filter(|t| *t > 0.0)
                .map(|t| format!(", throttled {}", seconds(t)))
                .unwrap_or_default();
            let rest = format!(" {cpus}{host_cpus}, {mem}{throttled}");
            // A long path gives way (its middle elided) so the figures stay on screen.
            let path = printable(path.as_deref().unwrap_or("?"));
            let room = width.saturating_sub(rest.chars().count() + 7).max(12);
            format!("{}{rest}", elide_middle(&path, room))
        }
    };
    lines.push(Line::from(vec![Span::styled("Cgroup ", st.bold()), Span::raw(container)]));
    if let Some(agent) = agent_line(frame, app) {
        lines.push(Line::from(vec![Span::styled("proctor ", st.bold()), Span::raw(agent)]));
    }
    if let Some(alerts) = &frame.alerts {
        // Rule names come from a rules file: printable, and cut to the width.
        let text: String = printable(&alerts.text()).chars().take(width.saturating_sub(8)).collect();
        let style =
            if alerts.firing.is_empty() { Style::default() } else { st.fg(Color::Red).add_modifier(Modifier::BOLD) };
        lines.push(Line::from(vec![Span::styled("Alerts ", st.bold()), Span::styled(text, style)]));
    }
    lines
}

/// `text` in at most `room` characters, its middle replaced by `…` when it is longer.
fn elide_middle(text: &str, room: usize) -> String {
    let n = text.chars().count();
    if n <= room {
        return text.to_string();
    }
    let head = room / 3;
    let tail = room.saturating_sub(head + 1);
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

fn task_counts(frame: &Frame) -> String {
    let running = frame.processes.iter().filter(|p| p.state == 'R').count();
    let blocked = frame.processes.iter().filter(|p| p.state == 'D').count();
    let threads: u64 = frame.processes.iter().map(|p| p.threads).sum();
    format!("{}, {} thr; {running} running, {blocked} in D", frame.processes.len(), threads)
}

fn agent_line(frame: &Frame, app: &App) -> Option<String> {
    let a = frame.agent?;
    let prev = app.previous_live.as_ref().and_then(|p| p.agent.map(|pa| (pa, p.time_unix_ms)));
    let cpu = prev
        .filter(|(_, t)| frame.time_unix_ms > *t)
        .map(|(pa, t)| {
            let secs = (frame.time_unix_ms - t) as f64 / 1e3;
            format!("{}% CPU", percent((a.cpu_seconds_total - pa.cpu_seconds_total).max(0.0) * 100.0 / secs))
        })
        .unwrap_or_else(|| "CPU -".to_string());
    let who = if frame.origin == Origin::Live { "this process" } else { "the remote agent" };
    Some(format!("{cpu} ({who}), sample {} CPU, RSS {}", seconds(a.last_sample_cpu_seconds), bytes(a.resident_bytes)))
}

/// `0  [||||||##w     23.4%]`: user, system, iowait, steal (and the rest of busy) in order.
fn cpu_bar(label: &str, c: &CpuOut, width: usize, st: &Styles) -> Vec<Span<'static>> {
    let inner = width.saturating_sub(label.len() + 4).max(6);
    let text = format!("{}%", percent(c.busy_percent));
    let bar_w = inner.saturating_sub(text.len() + 1);
    let cells = |p: f64| ((p / 100.0) * bar_w as f64).round().max(0.0) as usize;
    let user = cells(c.user_percent + c.nice_percent);
    let system = cells(c.system_percent + c.irq_percent + c.softirq_percent);
    let iowait = cells(c.iowait_percent);
    let steal = cells(c.steal_percent);
    let mut parts: Vec<(usize, char, Color)> = vec![
        (user, '|', Color::Green),
        (system, '#', Color::Red),
        (iowait, 'w', Color::DarkGray),
        (steal, '~', Color::Cyan),
    ];
    // Never wider than the bar.
    let mut left = bar_w;
    for p in &mut parts {
        p.0 = p.0.min(left);
        left -= p.0;
    }
    let mut spans = vec![Span::styled(label.to_string(), st.bold()), Span::raw("[")];
    for (n, ch, color) in parts {
        if n > 0 {
            let ch = if st.color { '|' } else { ch };
            spans.push(Span::styled(ch.to_string().repeat(n), st.fg(color)));
        }
    }
    spans.push(Span::raw(" ".repeat(left)));
    spans.push(Span::raw(format!("{text:>w$}] ", w = text.len() + 1)));
    spans
}

fn usage_bar(used: Option<u64>, total: Option<u64>, width: usize, st: &Styles, color: Color) -> Vec<Span<'static>> {
    let text = format!("{}/{}", opt_bytes(used), opt_bytes(total));
    let bar_w = width.saturating_sub(text.len() + 3).max(1);
    let n = match (used, total) {
        (Some(u), Some(t)) if t > 0 => ((u as f64 / t as f64) * bar_w as f64).round() as usize,
        _ => 0,
    }
    .min(bar_w);
    vec![
        Span::raw("["),
        Span::styled("|".repeat(n), st.fg(color)),
        Span::raw(" ".repeat(bar_w - n)),
        Span::raw(format!(" {text}]")),
    ]
}

fn draw_table(f: &mut ratatui::Frame, app: &mut App, frame: &Frame, area: Rect, st: &Styles) {
    if area.height == 0 {
        return;
    }
    let columns = app.view.columns.clone();
    let total_w = area.width as usize;
    // Heading.
    let mut head = String::new();
    for field in &columns {
        let mark = if field.name == app.view.sort.name {
            if app.view.descending {
                "▼"
            } else {
                "▲"
            }
        } else {
            ""
        };
        let title = format!("{}{mark}", if field.name == "uid" { "USER" } else { field.title });
        if field.name == "cmdline" {
            head.push_str(&title);
        } else if right_aligned(field) {
            head.push_str(&format!("{title:>w$} ", w = width(field)));
        } else {
            head.push_str(&format!("{title:<w$} ", w = width(field)));
        }
    }
    let head = format!("{head:<total_w$}");
    f.render_widget(Paragraph::new(Span::styled(head, st.header_row())), Rect { height: 1, ..area });
    let rows_h = area.height.saturating_sub(1) as usize;
    app.page = rows_h;
    let lines = &app.table.lines;
    let sel = selected_line(lines, app.view.selected);
    if let Some(sel) = sel {
        if sel < app.scroll {
            app.scroll = sel;
        } else if sel >= app.scroll + rows_h {
            app.scroll = sel + 1 - rows_h.max(1);
        }
    }
    app.scroll = app.scroll.min(lines.len().saturating_sub(rows_h.max(1)));
    let mut out: Vec<Line> = Vec::with_capacity(rows_h);
    for (i, line) in lines.iter().enumerate().skip(app.scroll).take(rows_h) {
        let process = &frame.processes[line.index];
        // A thread row (`H`) is drawn from its process's row with the thread's own figures.
        let thread = line.thread.and_then(|t| crate::view::thread_out(process, t));
        let p = thread.as_ref().unwrap_or(process);
        let flags = if thread.is_some() { Vec::new() } else { app.slow.flags(p) };
        let mut style = Style::default();
        if thread.is_some() {
            // htop draws thread rows in their own colour; dim where there is no colour.
            style = if st.color { style.fg(Color::Green) } else { style.add_modifier(Modifier::DIM) };
        }
        if app.view.tagged.contains(&p.pid) {
            style = if st.color {
                style.fg(Color::Yellow).add_modifier(Modifier::BOLD)
            } else {
                style.add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
            };
        }
        if !flags.is_empty() {
            style = if st.color { style.fg(Color::White).bg(Color::Red) } else { style.add_modifier(Modifier::BOLD) };
        }
        if Some(i) == sel {
            style = style.add_modifier(Modifier::REVERSED);
        }
        // htop's highlighted basename: bold, and in colour where the row has none of its own.
        let base_style =
            if style.fg.is_some() { style.add_modifier(Modifier::BOLD) } else { style.patch(st.basename()) };
        let mut pieces: Vec<(String, Style)> = Vec::new();
        let mut text = String::new();
        for field in &columns {
            if field.name == "cmdline" {
                let fold = if line.folded { "+" } else { "" };
                // Past a --slow rule: said before the command, where it is never cut off.
                let slow = if flags.is_empty() { String::new() } else { format!("!{} ", flags.join(",")) };
                text.push_str(&format!("{}{fold}{slow}", line.prefix));
                let command = Command::of(p);
                let room = total_w.saturating_sub(text.chars().count());
                let (dir, base, rest) = command.fitted(room);
                text.push_str(&printable(dir));
                pieces.push((std::mem::take(&mut text), style));
                pieces.push((printable(base), base_style));
                text.push_str(&printable(rest));
            } else {
                let value = printable(&cell(p, field, &app.users));
                let w = width(field);
                let value: String = value.chars().take(w).collect();
                if right_aligned(field) {
                    text.push_str(&format!("{value:>w$} "));
                } else {
                    text.push_str(&format!("{value:<w$} "));
                }
            }
        }
        pieces.push((text, style));
        out.push(fit(pieces, total_w, style));
    }
    f.render_widget(Paragraph::new(out), Rect { y: area.y + 1, height: area.height - 1, ..area });
}

/// One line of styled pieces, cut to `width` characters and padded to it in `pad`'s style.
fn fit(pieces: Vec<(String, Style)>, width: usize, pad: Style) -> Line<'static> {
    let mut left = width;
    let mut spans = Vec::new();
    for (text, style) in pieces {
        let n = text.chars().count();
        if n <= left {
            left -= n;
            spans.push(Span::styled(text, style));
        } else {
            spans.push(Span::styled(text.chars().take(left).collect::<String>(), style));
            left = 0;
        }
    }
    spans.push(Span::styled(" ".repeat(left), pad));
    Line::from(spans)
}

fn draw_cgroups(f: &mut ratatui::Frame, app: &App, frame: &Frame, area: Rect, at: usize, st: &Styles) {
    let rows = cgroups(frame, &app.view);
    let live = app.is_live_mode() && app.cursor == Cursor::Live;
    let head = format!(
        "{:>7} {:>5} {:>6} {:>9} {:>14} {:>17}  {}",
        "CPU%",
        "Procs",
        "Thr",
        "RSS",
        "PSS (known)",
        if live { "PSI cpu/mem/io" } else { "PSI (live only)" },
        "Cgroup (Enter: its processes, Esc: back)"
    );
    let mut lines = vec![Line::from(Span::styled(format!("{head:<w$}", w = area.width as usize), st.header_row()))];
    let rows_h = area.height.saturating_sub(1) as usize;
    let first = at.saturating_sub(rows_h.saturating_sub(1));
    for (i, r) in rows.iter().enumerate().skip(first).take(rows_h) {
        let pss = if r.pss_known > 0 {
            format!("{} ({}/{})", bytes(r.pss_bytes), r.pss_known, r.processes)
        } else {
            "-".into()
        };
        let psi = match app.pressure.get(&r.name).filter(|_| live) {
            Some(p) => {
                let one = |v: Option<f64>| v.map_or("-".to_string(), percent);
                format!("{}/{}/{}", one(p.cpu), one(p.memory), one(p.io))
            }
            None => "-".into(),
        };
        let text = format!(
            "{:>7} {:>5} {:>6} {:>9} {:>14} {:>17}  {}",
            format!("{:.1}", r.cpu_percent),
            r.processes,
            r.threads,
            bytes(r.rss_bytes),
            pss,
            psi,
            printable(&r.name)
        );
        let style = if i == at { st.selected() } else { Style::default() };
        lines.push(Line::from(Span::styled(text, style)));
    }
    f.render_widget(Paragraph::new(lines), area);
}

/// `X`: processes that ended, the latest first (below's exited view): when, how long they lived,
/// their CPU and peak memory, how they ended, and whether any sample listed them alive.
/// With `--net`, each one's bytes received and sent over its life (its exit record's counters),
/// in columns shown only when some row has them.
fn draw_exited(f: &mut ratatui::Frame, app: &App, frame: &Frame, area: Rect, at: usize, st: &Styles) {
    let rows = app.ended();
    let net = rows.iter().any(|x| x.net_rx_bytes.is_some() || x.net_tx_bytes.is_some());
    let net_cols = |rx: &str, tx: &str| if net { format!(" {rx:>8} {tx:>8}") } else { String::new() };
    let head = format!(
        "{:>8} {:>7} {:>7} {:>10} {:>10} {:>8}{} {:>6} {:>5}  {}",
        "Ended",
        "PID",
        "PPID",
        "Lived",
        "CPU",
        "PeakRSS",
        net_cols("NetRx", "NetTx"),
        "Exit",
        "Seen",
        "Command (Esc: back)"
    );
    let mut lines = vec![Line::from(Span::styled(format!("{head:<w$}", w = area.width as usize), st.header_row()))];
    if rows.is_empty() {
        let why = if frame.events {
            "No process has ended in the frames held here."
        } else {
            "No ended processes: the source has no BPF process events (proctor doctor says why); only processes \
             listed alive are seen."
        };
        lines.push(Line::from(why));
    }
    let rows_h = area.height.saturating_sub(1) as usize;
    let first = at.saturating_sub(rows_h.saturating_sub(1));
    for (i, x) in rows.iter().enumerate().skip(first).take(rows_h) {
        let how = match (x.exit_code, x.signal) {
            (Some(code), _) => code.to_string(),
            (None, Some(sig)) => format!("sig{sig}"),
            _ => "-".into(),
        };
        let command = match &x.cmdline {
            Some(c) if !c.is_empty() => c.join(" "),
            _ => x.name.clone(),
        };
        let text = format!(
            "{:>8} {:>7} {:>7} {:>10} {:>10} {:>8}{} {:>6} {:>5}  {}",
            clock_time(x.end_time_unix_secs),
            x.pid,
            x.ppid,
            seconds(x.lifetime_seconds),
            seconds(x.cpu_seconds),
            bytes(x.peak_rss_bytes),
            net_cols(&opt_bytes(x.net_rx_bytes), &opt_bytes(x.net_tx_bytes)),
            how,
            if x.seen { "yes" } else { "no" },
            printable(&command)
        );
        let style = if i == at { st.selected() } else { Style::default() };
        lines.push(Line::from(Span::styled(text, style)));
    }
    f.render_widget(Paragraph::new(lines), area);
}

fn draw_detail(f: &mut ratatui::Frame, app: &App, frame: &Frame, area: Rect) {
    let Some(p) = app.view.selected.and_then(|pid| frame.process(pid)) else { return };
    // At most two lines of command, so the lines below it stay on screen.
    let room = (area.width as usize * 2).saturating_sub(12).max(20);
    let cmd = match &p.cmdline {
        Some(c) if !c.is_empty() => {
            let full = printable(&c.join(" "));
            if full.chars().count() > room {
                format!("{}…", full.chars().take(room - 1).collect::<String>())
            } else {
                full
            }
        }
        Some(_) => "(none: kernel thread or zombie)".into(),
        None => "(not read yet)".into(),
    };
    let chain: Vec<String> = frame.parents(p.pid).iter().map(|q| format!("{} {}", q.pid, printable(&q.name))).collect();
    let pss = match (p.pss_bytes, p.pss_age_secs) {
        (Some(pss), Some(age)) => match p.pss_estimated_from {
            Some(from) => format!(
                "PSS {} USS {} (its clone {from}'s, read {} ago: not read itself yet)",
                bytes(pss),
                opt_bytes(p.uss_bytes),
                seconds(age)
            ),
            None => format!("PSS {} USS {} (read {} ago)", bytes(pss), opt_bytes(p.uss_bytes), seconds(age)),
        },
        // Why not, on its own line below.
        _ if p.pss_note.is_some() => "PSS -".into(),
        _ => match frame.agent.and_then(|a| a.pss_rest).filter(|(rest, _)| *rest >= 1.0) {
            // The worker rests after a read to keep to its budget; this process is read after.
            Some((rest, budget)) => format!(
                "PSS not read yet: the worker rests {} more to keep to its budget ({} % of one CPU)",
                seconds(rest),
                // To its first digits: 0.5, 0.01.
                (budget * 100.0 * 1000.0).round() / 1000.0
            ),
            None => {
                "PSS not read yet (read in the background while a PSS column is shown, or with --pss-budget)".into()
            }
        },
    };
    let io = match (p.read_bytes_per_sec, p.write_bytes_per_sec) {
        (Some(r), Some(w)) => format!("io read {}/s write {}/s", bytes(r as u64), bytes(w as u64)),
        _ => "io - (read while a Read/s, Write/s or IO/s column is shown, or with --io)".into(),
    };
    let started = p.start_time_unix_secs.map_or("-".into(), |s| format!("{} UTC", clock_time(s)));
    let mut text = vec![
        Line::raw(format!(
            "pid {}  {}  state {}  started {started}  CPU time {}",
            p.pid,
            printable(&p.name),
            printable(&p.state.to_string()),
            seconds(p.cpu_seconds_total)
        )),
        Line::raw(format!("command: {cmd}")),
        Line::raw(format!("cgroup: {}", printable(p.cgroup.as_deref().unwrap_or("-")))),
        Line::raw(format!(
            "RSS {} (anon {}, file {}, shmem {})  swap {}  {pss}",
            opt_bytes(p.rss_bytes),
            opt_bytes(p.anon_bytes),
            opt_bytes(p.file_bytes),
            opt_bytes(p.shmem_bytes),
            opt_bytes(p.swap_bytes)
        )),
        Line::raw(format!(
            "{io}  major faults {}/s  {}",
            p.major_faults_per_sec.map_or("-".into(), |v| format!("{v:.1}")),
            match (p.stall_by_proctor_seconds_total, p.stall_by_proctor_max_seconds) {
                (Some(total), Some(max)) => format!(
                    "mmap lock held by proctor {} at most (longest {}){}",
                    seconds(total),
                    seconds(max),
                    p.stall_target_waited_seconds_total
                        .map_or(String::new(), |w| format!(", its threads waited {}", seconds(w)))
                ),
                _ => "mmap lock never held by proctor".into(),
            }
        )),
        Line::raw(format!("parents: {}", if chain.is_empty() { "-".into() } else { chain.join(" ← ") })),
    ];
    if let Some(note) = &p.pss_note {
        text.insert(4, Line::raw(format!("PSS {}", printable(note))));
    }
    let block = Block::default().borders(Borders::TOP).title(" Detail (Enter closes) ");
    f.render_widget(Paragraph::new(text).block(block).wrap(Wrap { trim: false }), area);
}

fn status_line(app: &App, frame: &Frame) -> Line<'static> {
    if let Overlay::Prompt(p, text) = &app.overlay {
        return Line::raw(format!("{}{}_", p.label(), printable(text)));
    }
    let t = &app.table;
    let processes = t.lines.iter().filter(|l| l.thread.is_none()).count();
    let mut parts = vec![format!("{processes} of {} shown", t.total)];
    if app.view.show_threads {
        parts.push(format!("{} threads (H)", t.lines.len() - processes));
    }
    if t.kernel_hidden > 0 {
        parts.push(format!("{} kernel threads hidden (K)", t.kernel_hidden));
    }
    if !app.view.filter.is_empty() {
        parts.push(format!("filter '{}'", printable(&app.view.filter)));
    }
    if let Some(u) = app.view.user {
        parts.push(format!("user {}", app.users.get(&u).cloned().unwrap_or_else(|| u.to_string())));
    }
    if let Some(c) = &app.view.cgroup {
        parts.push(format!("cgroup {}", printable(c)));
    }
    if !app.view.tagged.is_empty() {
        parts.push(format!("{} tagged", app.view.tagged.len()));
    }
    let _ = frame;
    let mut text = parts.join(", ");
    // What a key just did is said even while a problem stands (the answer to a key press must
    // not hide behind a slow sampler's warning); the problem comes first.
    if let Some((m, _)) = &app.message {
        text = format!("{}  |  {text}", printable(m));
    }
    if let Some(problem) = &app.problem {
        text = format!("{}  |  {text}", printable(problem));
    }
    Line::raw(text)
}

fn popup(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h }
}

pub const HELP: &str = "\
proctor top: keys (htop's where htop has one)
 F1 h ?  this help                   q F10 Ctrl-C  quit
 F2 S    columns (kept in top.conf)  F3 /   search (F3 again: next)
 F4 \\    filter                      F5 t   tree; + - fold, * unfold all
 F6      sort by (a menu)            > <    sort by next / previous column
 P M T N by CPU, memory, time, pid   I      invert the sort
 u       one user's processes        K      kernel threads
 H       threads as rows under their process (read only while shown)
 Space   tag; U untags all           F9 k   send a signal (menu, confirm)
 F7 F8   nice -1 / +1                Enter  detail: command, cgroup, PSS
 z       cgroups (CPU, memory, PSI); Enter zooms into one, Esc leaves
 X       processes that ended (BPF events: those between samples too)
 ~ before a PSS: a clone's reading (same parent and name, near size, faults)
Time travel
 [ ]     one sample back / forward   { }    back / forward by a span
 j       set the span                g      go to a time (10 min ago, @UNIX)
 Z p     pause / resume              l      live again
CPU bars: user | system # iowait w steal ~ (in colour unless NO_COLOR)
Rows past a --slow rule say !RULE before the command. Any key closes this.";

fn draw_help(f: &mut ratatui::Frame, area: Rect) {
    let r = popup(area, 78, 21);
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(HELP).block(Block::default().borders(Borders::ALL).title(" Help ")), r);
}

fn draw_signals(f: &mut ratatui::Frame, area: Rect, at: usize, app: &App) {
    let r = Rect {
        x: area.x,
        y: area.y + area.height.saturating_sub(SIGNALS.len() as u16 + 4),
        width: 34.min(area.width),
        height: (SIGNALS.len() as u16 + 2).min(area.height),
    };
    let lines: Vec<Line> = SIGNALS
        .iter()
        .enumerate()
        .map(|(i, (n, name))| {
            let style = if i == at { Style::default().add_modifier(Modifier::REVERSED) } else { Style::default() };
            Line::from(Span::styled(format!("{} {name:<8} ({n})", i + 1), style))
        })
        .collect();
    let who = targets_text(app);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(format!(" Send to {who} "))),
        r,
    );
}

/// F6's menu down the left, as htop's "Sort by" panel: the shown columns, the cursor's reversed,
/// the one sorted by marked with its direction.
fn draw_sort_by(f: &mut ratatui::Frame, area: Rect, at: usize, app: &App) {
    let columns = &app.view.columns;
    let height = (columns.len() as u16 + 2).min(area.height.saturating_sub(2));
    let r = Rect { x: area.x, y: area.y + area.height.saturating_sub(height + 2), width: 24.min(area.width), height };
    // The cursor's row stays in sight when the list is taller than the box.
    let inside = usize::from(height.saturating_sub(2)).max(1);
    let first = at.saturating_sub(inside - 1);
    let lines: Vec<Line> = columns
        .iter()
        .enumerate()
        .skip(first)
        .take(inside)
        .map(|(i, c)| {
            let mark = match (c.name == app.view.sort.name, app.view.descending) {
                (true, true) => "▼",
                (true, false) => "▲",
                (false, _) => " ",
            };
            let style = if i == at { Style::default().add_modifier(Modifier::REVERSED) } else { Style::default() };
            Line::from(Span::styled(format!("{mark} {}", c.title), style))
        })
        .collect();
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" Sort by ")), r);
}

fn targets_text(app: &App) -> String {
    if app.view.tagged.is_empty() {
        app.view.selected.map_or("nothing".into(), |p| format!("pid {p}"))
    } else {
        format!("{} tagged", app.view.tagged.len())
    }
}

fn draw_confirm(f: &mut ratatui::Frame, area: Rect, i: usize, app: &App) {
    let r = popup(area, 60, 3);
    let (_, name) = SIGNALS[i];
    let who = if app.view.tagged.is_empty() {
        app.view
            .selected
            .and_then(|pid| {
                app.shown.as_ref().and_then(|f| f.process(pid)).map(|p| format!("pid {pid} ({})", printable(&p.name)))
            })
            .unwrap_or_else(|| "nothing".into())
    } else {
        format!("{} tagged processes", app.view.tagged.len())
    };
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(format!("Send {name} to {who}? y/n"))
            .block(Block::default().borders(Borders::ALL).title(" Confirm ")),
        r,
    );
}

fn draw_setup(f: &mut ratatui::Frame, area: Rect, at: usize, app: &App) {
    let h = (PROCESS.len() as u16 + 2).min(area.height);
    let r = popup(area, 70, h);
    let inner = h.saturating_sub(2) as usize;
    let first = at.saturating_sub(inner.saturating_sub(1));
    let lines: Vec<Line> = PROCESS
        .iter()
        .enumerate()
        .skip(first)
        .take(inner)
        .map(|(i, field)| {
            let on = app.view.columns.iter().any(|c| c.name == field.name);
            let style = if i == at { Style::default().add_modifier(Modifier::REVERSED) } else { Style::default() };
            Line::from(Span::styled(
                format!("[{}] {:<26} {}", if on { 'x' } else { ' ' }, field.name, field.title),
                style,
            ))
        })
        .collect();
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .block(Block::default().borders(Borders::ALL).title(" Columns: Space toggles, Esc saves ")),
        r,
    );
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    use super::*;
    use crate::app::Mode;
    use crate::slow::Slow;
    use crate::source::Msg;
    use crate::test_support::{frame_of, proc_out};
    use crate::view::ViewState;

    fn screen(app: &mut App, w: u16, h: u16) -> Vec<String> {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("a test terminal");
        terminal.draw(|f| draw(f, app)).expect("drawn");
        let buffer = terminal.backend().buffer().clone();
        (0..h).map(|y| (0..w).map(|x| buffer[(x, y)].symbol().to_string()).collect::<String>()).collect()
    }

    /// A live app showing `init` (pid 1) and `p`, with Enter's detail pane open on `p`.
    fn detail_of(p: proctor_vocab::process::ProcessOut) -> App {
        use ratatui::crossterm::event::{KeyCode, KeyEvent};
        let pid = p.pid;
        let mut app =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, ViewState::default(), Slow::default());
        app.message(Msg::Newest(Arc::new(frame_of(vec![proc_out(1, 0, "init", 0.0, 1), p]))));
        let _ = screen(&mut app, 120, 30);
        app.view.selected = Some(pid);
        app.key(KeyEvent::from(KeyCode::Enter));
        app
    }

    /// Enter's detail pane says how long proctor's reads held the process's mmap lock (the
    /// stall ledger, issue 34 item 1), or that they never did.
    #[test]
    fn the_detail_pane_shows_the_stall_ledger() {
        let mut big = proc_out(50, 1, "big", 40.0, 30);
        (big.stall_by_proctor_seconds_total, big.stall_by_proctor_max_seconds) = (Some(0.0123), Some(0.004));
        let mut app = detail_of(big);
        let text = screen(&mut app, 200, 30).join("\n");
        assert!(text.contains("mmap lock held by proctor 12.3 ms at most (longest 4.0 ms)"), "{text}");
        app.view.selected = Some(1);
        let text = screen(&mut app, 200, 30).join("\n");
        assert!(text.contains("mmap lock never held by proctor"), "{text}");
    }

    /// A process with no PSS says why in the detail pane when proctor knows (its read was
    /// refused), and "not read yet" when it does not.
    #[test]
    fn the_detail_pane_says_why_a_process_has_no_pss() {
        let mut refused = proc_out(50, 1, "other-ns", 1.0, 30);
        refused.pss_note = Some(Arc::from(proctor_vocab::process::PSS_REFUSED));
        let mut app = detail_of(refused);
        let lines = screen(&mut app, 240, 30);
        assert!(lines.iter().any(|l| l.contains("swap") && l.trim_end().ends_with("PSS -")), "{}", lines.join("\n"));
        assert!(
            lines.iter().any(|l| l.starts_with("PSS not read: the kernel refused proctor its smaps_rollup")),
            "{}",
            lines.join("\n")
        );
        app.view.selected = Some(1);
        let text = screen(&mut app, 240, 30).join("\n");
        assert!(text.contains("PSS not read yet (read in the background") && !text.contains("refused"), "{text}");
        // While the worker rests to keep to its budget, the pane says so, and for how long.
        let mut resting = |rest: f64| {
            let mut frame = frame_of(vec![proc_out(1, 0, "init", 0.0, 1)]);
            frame.agent = Some(crate::frame::AgentLine {
                cpu_seconds_total: 1.0,
                last_sample_cpu_seconds: 0.001,
                resident_bytes: 1 << 20,
                pss_rest: Some((rest, 0.005)),
            });
            app.message(Msg::Newest(Arc::new(frame)));
            screen(&mut app, 240, 30).join("\n")
        };
        let text = resting(87.0);
        assert!(
            text.contains(
                "PSS not read yet: the worker rests 1 min 27 s more to keep to its budget (0.5 % of one CPU)"
            ),
            "{text}"
        );
        // A rest under a second is left unsaid.
        let text = resting(0.4);
        assert!(text.contains("PSS not read yet (read in the background") && !text.contains("rests"), "{text}");
    }

    /// F1's help fits an 80×24 terminal whole: its first line and its last are on the screen.
    #[test]
    fn the_help_fits_a_small_terminal() {
        use ratatui::crossterm::event::{KeyCode, KeyEvent};
        let mut app = detail_of(proc_out(51, 1, "gunicorn", 1.0, 30));
        app.key(KeyEvent::from(KeyCode::F(1)));
        let text = screen(&mut app, 80, 24).join("\n");
        for line in [HELP.lines().next(), HELP.lines().last()].into_iter().flatten() {
            assert!(text.contains(line.trim()), "{line:?} not on screen:\n{text}");
        }
        assert!(text.contains("~ before a PSS"), "{text}");
    }

    /// A process whose PSS is its clone's reading standing in for its own says whose in the
    /// detail pane, and its PSS cell is marked `~`.
    #[test]
    fn the_detail_pane_says_when_pss_is_a_clones() {
        let mut worker = proc_out(51, 1, "gunicorn", 1.0, 30);
        (worker.pss_bytes, worker.uss_bytes, worker.pss_age_secs) = (Some(3 << 20), Some(1 << 20), Some(2.0));
        let pss_row = |app: &mut App| {
            let pss = crate::view::column("pss_bytes").expect("a PSS column");
            app.view.columns.insert(app.view.columns.len() - 1, pss);
            let lines = screen(app, 240, 30);
            app.view.columns.retain(|f| f.name != "pss_bytes");
            lines.into_iter().find(|l| l.trim_start().starts_with("51 ")).expect("the worker's row")
        };
        let mut app = detail_of(worker.clone());
        let own = screen(&mut app, 240, 30).join("\n");
        assert!(own.contains("PSS 3.0 MiB USS 1.0 MiB (read 2.0 s ago)") && !own.contains("clone"), "{own}");
        let row = pss_row(&mut app);
        assert!(row.contains(" 3.0 MiB") && !row.contains('~'), "{row}");
        worker.pss_estimated_from = Some(50);
        let mut app = detail_of(worker);
        let row = pss_row(&mut app);
        assert!(row.contains("~3.0 MiB"), "{row}");
        let text = screen(&mut app, 240, 30).join("\n");
        assert!(
            text.contains("PSS 3.0 MiB USS 1.0 MiB (its clone 50's, read 2.0 s ago: not read itself yet)"),
            "{text}"
        );
    }

    /// With --net the header says what the network programs counted and the part no process
    /// owned; without, no such line.
    #[test]
    fn the_header_has_a_net_line_only_with_the_network_programs() {
        let mut f = frame_of(vec![proc_out(1, 0, "init", 0.0, 1)]);
        let mut app =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, ViewState::default(), Slow::default());
        app.message(Msg::Newest(Arc::new(f.clone())));
        assert!(!screen(&mut app, 160, 30).iter().any(|l| l.starts_with("Net ")));
        f.host.process_net = Some(proctor_vocab::snapshot::ProcessNetOut {
            rx_bytes_per_sec: 2.0 * 1048576.0,
            tx_bytes_per_sec: 1048576.0,
            unowned_rx_bytes_per_sec: 3072.0,
            unowned_tx_bytes_per_sec: 512.0,
            table_full: 0,
        });
        f.time_unix_ms += 1000;
        app.message(Msg::Newest(Arc::new(f)));
        let text = screen(&mut app, 160, 30);
        let line = text.iter().find(|l| l.starts_with("Net ")).expect("a Net line");
        assert!(
            line.contains("IP rx 2.0 MiB/s tx 1.0 MiB/s (every device, lo too); no process's: rx 3.0 KiB/s tx 512 B/s"),
            "{line}"
        );
        // Asked for and refused: the line says why.
        let mut refused = frame_of(vec![proc_out(1, 0, "init", 0.0, 1)]);
        refused.net_unavailable = Some("proctor needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (or root)".into());
        refused.time_unix_ms += 5000;
        app.message(Msg::Newest(Arc::new(refused)));
        let text = screen(&mut app, 160, 30);
        let line = text.iter().find(|l| l.starts_with("Net ")).expect("a Net line");
        assert!(line.contains("per-process network not counted: proctor needs CAP_BPF"), "{line}");
    }

    /// A key's answer ("sorted by PID") is shown while a problem stands, after the problem: a
    /// slow sampler's warning once hid it (CI, 78-top).
    #[test]
    fn a_keys_answer_shows_beside_a_standing_problem() {
        use ratatui::crossterm::event::{KeyCode, KeyEvent};
        let mut app =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, ViewState::default(), Slow::default());
        app.message(Msg::Newest(Arc::new(frame_of(vec![proc_out(1, 0, "init", 0.0, 1)]))));
        app.message(Msg::Problem("the sampling thread has not published a sample for a while".into()));
        app.key(KeyEvent::from(KeyCode::F(6)));
        app.key(KeyEvent::from(KeyCode::Home));
        app.key(KeyEvent::from(KeyCode::Enter));
        let text = screen(&mut app, 200, 30).join("\n");
        let problem = text.find("has not published a sample").expect(&text);
        let answer = text.find("sorted by PID").expect(&text);
        assert!(problem < answer, "{text}");
    }

    /// `X` lists the processes that ended across the frames held, the latest first, with how
    /// they ended and whether a sample listed them; without events it says why it is empty.
    #[test]
    fn x_lists_ended_processes_latest_first_and_says_when_there_are_none() {
        use ratatui::crossterm::event::{KeyCode, KeyEvent};
        let ended = |pid: u32, end: f64, cmd: &str, wait: (Option<u32>, Option<u32>), seen: bool| {
            proctor_vocab::exited::ExitedOut {
                pid,
                ppid: 1,
                name: cmd.split(' ').next().unwrap_or_default().to_string(),
                cmdline: Some(cmd.split(' ').map(str::to_string).collect()),
                exe: None,
                cgroup: None,
                start_time_unix_secs: end - 0.25,
                end_time_unix_secs: end,
                lifetime_seconds: 0.25,
                exit_code: wait.0,
                signal: wait.1,
                cpu_seconds: 0.125,
                cpu_user_seconds: 0.1,
                cpu_system_seconds: 0.025,
                children_cpu_seconds: 0.0,
                minor_faults: 10,
                major_faults: 0,
                peak_rss_bytes: 3 << 20,
                seen,
                net_rx_bytes: None,
                net_tx_bytes: None,
            }
        };
        let mut app =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, ViewState::default(), Slow::default());
        let mut first = frame_of(vec![proc_out(1, 0, "init", 0.0, 1)]);
        first.time_unix_ms = 1_000;
        first.events = true;
        first.exited = vec![ended(70, 0.5, "cc1 a.c", (Some(0), None), false)];
        let mut second = first.clone();
        second.time_unix_ms = 2_000;
        second.exited =
            vec![ended(71, 1.2, "ld -o a", (Some(1), None), false), ended(72, 1.5, "sleep 9", (None, Some(9)), true)];
        app.message(Msg::Newest(Arc::new(first)));
        app.message(Msg::Newest(Arc::new(second)));
        app.key(KeyEvent::from(KeyCode::Char('X')));
        let lines = screen(&mut app, 120, 30);
        let text = lines.join("\n");
        let row = |what: &str| lines.iter().position(|l| l.contains(what)).unwrap_or_else(|| panic!("{what}: {text}"));
        assert!(row("sleep 9") < row("ld -o a") && row("ld -o a") < row("cc1 a.c"), "latest first: {text}");
        assert!(lines[row("sleep 9")].contains("sig9") && lines[row("sleep 9")].contains("yes"), "{text}");
        assert!(lines[row("ld -o a")].contains(" 1 ") && lines[row("ld -o a")].contains(" no "), "{text}");
        assert!(lines[row("cc1 a.c")].contains("250.0 ms") && lines[row("cc1 a.c")].contains("3.0 MiB"), "{text}");
        assert!(!text.contains("NetRx"), "no network columns when no ended process has network: {text}");
        app.key(KeyEvent::from(KeyCode::Esc));
        assert!(!screen(&mut app, 120, 30).join("\n").contains("cc1 a.c"), "Esc: back to the processes");

        let mut bare =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, ViewState::default(), Slow::default());
        bare.message(Msg::Newest(Arc::new(frame_of(vec![proc_out(1, 0, "init", 0.0, 1)]))));
        bare.key(KeyEvent::from(KeyCode::Char('X')));
        let text = screen(&mut bare, 160, 30).join("\n");
        assert!(text.contains("the source has no BPF process events"), "{text}");

        // With --net: each one's bytes over its life, in columns of their own.
        let mut third = frame_of(vec![proc_out(1, 0, "init", 0.0, 1)]);
        third.time_unix_ms = 3_000;
        third.events = true;
        let mut curl = ended(80, 2.5, "curl -O x", (Some(0), None), false);
        (curl.net_rx_bytes, curl.net_tx_bytes) = (Some(5 << 20), Some(2048));
        third.exited = vec![curl, ended(81, 2.6, "true", (Some(0), None), false)];
        let mut net =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, ViewState::default(), Slow::default());
        net.message(Msg::Newest(Arc::new(third)));
        net.key(KeyEvent::from(KeyCode::Char('X')));
        let lines = screen(&mut net, 140, 30);
        let text = lines.join("\n");
        let head = &lines[lines.iter().position(|l| l.contains("Ended")).expect("the heading")];
        assert!(head.contains("PeakRSS    NetRx    NetTx   Exit"), "{text}");
        let curl = lines.iter().find(|l| l.contains("curl -O x")).expect("curl's row");
        assert!(curl.contains("5.0 MiB") && curl.contains("2.0 KiB"), "{text}");
        let quiet = lines.iter().find(|l| l.ends_with("true") || l.contains(" true")).expect("true's row");
        assert!(quiet.contains(" - "), "no network for a process that used none: {text}");
    }

    #[test]
    fn h_shows_each_thread_as_a_row_under_its_process_and_hides_them_again() {
        use ratatui::crossterm::event::{KeyCode, KeyEvent};
        let mut server = proc_out(50, 1, "server", 40.0, 30);
        server.thread_rows = ["worker-a", "worker-b"]
            .iter()
            .enumerate()
            .map(|(k, name)| proctor_vocab::process::ThreadOut {
                tid: 51 + k as u32,
                name: Arc::from(*name),
                state: 'R',
                cpu_percent: Some(12.5),
                cpu_seconds_total: 3.0,
            })
            .collect();
        let mut app =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, ViewState::default(), Slow::default());
        app.message(Msg::Newest(Arc::new(frame_of(vec![
            proc_out(1, 0, "init", 0.0, 1),
            server,
            proc_out(60, 1, "other", 5.0, 2),
        ]))));
        let row = |lines: &[String], what: &str| lines.iter().position(|l| l.contains(what));
        let before = screen(&mut app, 100, 30);
        assert!(row(&before, "worker-a").is_none(), "{}", before.join("\n"));

        app.key(KeyEvent::from(KeyCode::Char('H')));
        assert!(crate::view::Needs::of_view(&app.view).threads, "H asks the sampler for threads");
        let shown = screen(&mut app, 100, 30);
        let text = shown.join("\n");
        let at = row(&shown, "server --flag").expect("the process's row");
        for (k, (tid, name)) in [("51", "worker-a"), ("52", "worker-b")].into_iter().enumerate() {
            let line = &shown[at + 1 + k];
            assert!(line.trim_start().starts_with(tid) && line.contains(name), "{name} under its process:\n{text}");
            assert!(line.contains(" R ") && line.contains("12.5") && line.contains("0:03.00"), "{line}");
        }
        assert!(shown[at + 3].contains("other"), "the next process after the threads:\n{text}");

        // In tree view the threads hang under their process with its branch glyphs.
        app.key(KeyEvent::from(KeyCode::Char('t')));
        let tree = screen(&mut app, 100, 30);
        let text = tree.join("\n");
        let at = row(&tree, "server --flag").expect("the process's row");
        assert!(tree[at + 1].contains("├─ worker-a") && tree[at + 2].contains("└─ worker-b"), "{text}");
        app.key(KeyEvent::from(KeyCode::Char('t')));

        app.key(KeyEvent::from(KeyCode::Char('H')));
        assert!(!crate::view::Needs::of_view(&app.view).threads, "and stops asking");
        let hidden = screen(&mut app, 100, 30);
        assert!(row(&hidden, "worker-").is_none(), "{}", hidden.join("\n"));
    }

    #[test]
    fn a_hostile_name_is_drawn_without_its_control_characters_at_80_by_24() {
        let mut evil = proc_out(66, 1, "x", 50.0, 3);
        evil.name = "\u{1b}[31mEVIL\u{202e}".into();
        evil.cmdline = Some(vec!["\u{1b}]0;pwned\u{7}run".to_string()].into());
        let mut app =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, ViewState::default(), Slow::default());
        app.message(Msg::Newest(Arc::new(frame_of(vec![proc_out(1, 0, "init", 0.0, 1), evil]))));
        app.view.selected = Some(66);
        app.detail = true;
        let lines = screen(&mut app, 80, 24);
        let text = lines.join("\n");
        assert!(lines.iter().all(|l| l.chars().count() == 80), "every line is the screen's width");
        assert!(lines[0].starts_with("proctor top"), "{text}");
        assert!(text.contains("?]0;pwned?run"), "{text}");
        assert!(text.contains("?[31mEVIL?"), "{text}");
        assert!(!text.contains('\u{1b}') && !text.contains('\u{202e}') && !text.contains('\u{7}'), "{text}");
        assert!(text.contains("PID") && text.contains("2 of 2 shown"), "{text}");
    }

    /// F6 opens htop's "Sort by" menu of the shown columns with the cursor on the one sorted by;
    /// arrows and Enter sort by another, which the table's heading then marks; Enter on the one
    /// sorted by turns it round; Esc leaves the sort as it was.
    #[test]
    fn f6_picks_the_sort_column_from_a_menu() {
        use ratatui::crossterm::event::{KeyCode, KeyEvent};
        let mut app =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, ViewState::default(), Slow::default());
        app.message(Msg::Newest(Arc::new(frame_of(vec![
            proc_out(1, 0, "init", 0.0, 1),
            proc_out(10, 1, "big", 1.0, 200),
            proc_out(11, 1, "busy", 50.0, 2),
        ]))));
        let titles: Vec<&str> = app.view.columns.iter().map(|c| c.title).collect();
        let sorted = app.view.columns.iter().position(|c| c.name == app.view.sort.name).expect("sorted by a shown one");
        app.key(KeyEvent::from(KeyCode::F(6)));
        let lines = screen(&mut app, 100, 40);
        let text = lines.join("\n");
        assert!(text.contains("Sort by"), "{text}");
        // Every shown column is listed, in order, the sorted one marked.
        let listed: Vec<String> = lines
            .iter()
            .filter_map(|l| l.strip_prefix('│').and_then(|l| l.split('│').next()))
            .map(|cell| cell.trim_start_matches(['▼', '▲', ' ']).trim_end().to_string())
            .filter(|t| !t.is_empty())
            .collect();
        assert_eq!(listed, titles, "{text}");
        assert!(text.contains(&format!("▼ {}", titles[sorted])), "{text}");
        // Down to the next column and Enter: sorted by it, the heading says so.
        let next = (sorted + 1).min(titles.len() - 1);
        app.key(KeyEvent::from(KeyCode::Down));
        app.key(KeyEvent::from(KeyCode::Enter));
        assert_eq!(app.view.sort.title, titles[next]);
        let text = screen(&mut app, 100, 40).join("\n");
        assert!(!text.contains("Sort by"), "the menu is closed: {text}");
        assert!(text.contains(&format!("sorted by {}", titles[next])), "{text}");
        // Enter on the column sorted by: the other way round.
        let before = app.view.descending;
        app.key(KeyEvent::from(KeyCode::F(6)));
        app.key(KeyEvent::from(KeyCode::Enter));
        assert_eq!((app.view.sort.title, app.view.descending), (titles[next], !before));
        // Esc: nothing changes.
        app.key(KeyEvent::from(KeyCode::F(6)));
        app.key(KeyEvent::from(KeyCode::Up));
        app.key(KeyEvent::from(KeyCode::Esc));
        assert_eq!((app.view.sort.title, app.view.descending), (titles[next], !before));
    }

    /// htop's Command column at 80 columns: a program installed under a long path shows its
    /// basename (bold, cyan in colour) and its arguments, its directory left out; a wide screen
    /// shows the whole path. NO_COLOR: bold and no colour.
    #[test]
    fn a_long_install_path_leaves_the_basename_and_arguments_on_screen_at_80_columns() {
        let long = "/tmp/proctor-e2e/a/very/long/install/path/bin/proctor-long-sleeper";
        let mut sleeper = proc_out(4321, 1, "proctor-long-s", 90.0, 1);
        sleeper.cmdline = Some(vec![long.to_string(), "999".to_string()].into());
        for color in [true, false] {
            let mut app =
                App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, ViewState::default(), Slow::default());
            app.color = color;
            app.message(Msg::Newest(Arc::new(frame_of(vec![proc_out(1, 0, "init", 0.0, 1), sleeper.clone()]))));
            app.view.selected = Some(1);
            let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("a test terminal");
            terminal.draw(|f| draw(f, &mut app)).expect("drawn");
            let buffer = terminal.backend().buffer().clone();
            let row = (0..24)
                .find(|&y| {
                    (0..80).map(|x| buffer[(x, y)].symbol()).collect::<String>().trim_start().starts_with("4321 ")
                })
                .expect("the sleeper's row");
            let line: String = (0..80).map(|x| buffer[(x, row)].symbol()).collect();
            assert!(line.trim_end().ends_with(" proctor-long-sleeper 999"), "{line}");
            assert!(!line.contains("/tmp/"), "the directory gives way: {line}");
            let at = line.find("proctor-long-sleeper").expect("the basename") as u16;
            let lit = &buffer[(at, row)];
            assert!(lit.modifier.contains(Modifier::BOLD), "the basename is bold");
            assert_eq!(lit.fg, if color { Color::Cyan } else { Color::Reset }, "cyan only in colour");
            let arg = &buffer[(at + 21, row)];
            assert_eq!(arg.symbol(), "9");
            assert!(!arg.modifier.contains(Modifier::BOLD), "the arguments are not");
            // Wide enough: the whole path.
            let wide = screen(&mut app, 200, 24).join("\n");
            assert!(wide.contains(&format!("{long} 999")), "{wide}");
        }
    }

    #[test]
    fn power_and_gpus_have_a_header_line_and_gpu_columns_exist() {
        let mut app =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, ViewState::default(), Slow::default());
        let mut p = proc_out(4242, 1, "trainer", 10.0, 100);
        p.gpu_percent = Some(48.5);
        p.gpu_memory_bytes = Some(64 << 20);
        let mut f = frame_of(vec![proc_out(1, 0, "init", 0.0, 1), p]);
        f.host.power = vec![proctor_vocab::snapshot::PowerOut {
            domain: "rapl:package-0".into(),
            watts: Some(21.5),
            in_host_total: true,
        }];
        f.host.power_host_watts = Some(21.5);
        f.host.gpus = vec![serde_json::from_value(serde_json::json!({
            "id": "drm:0000:03:00.0", "name": "amdgpu", "busy_percent": 48.5, "memory_used_bytes": 67108864,
            "memory_total_bytes": null, "power_watts": null, "temperature_celsius": null, "sm_clock_mhz": null,
            "memory_clock_mhz": null, "clients": 1, "engines": []
        }))
        .expect("a GpuOut")];
        app.message(Msg::Newest(Arc::new(f)));
        let text = screen(&mut app, 140, 24).join("\n");
        assert!(text.contains("Power 21.5 W host (rapl:package-0 21.5 W)"), "{text}");
        assert!(text.contains("GPU drm:0000:03:00.0 amdgpu 48% mem 64.0 MiB"), "{text}");
        assert!(proctor_vocab::fields::find(proctor_vocab::fields::PROCESS, "gpu_percent").is_some());
    }

    #[test]
    fn the_past_is_marked_and_the_help_lists_the_time_keys() {
        let mut app =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 4, ViewState::default(), Slow::default());
        for t in [1_000, 2_000, 3_000] {
            let mut f = frame_of(vec![proc_out(1, 0, "init", 0.0, 1)]);
            f.time_unix_ms = t;
            f.origin = Origin::Live;
            app.message(Msg::Newest(Arc::new(f)));
        }
        let text = screen(&mut app, 100, 30).join("\n");
        assert!(text.contains("proctor top  00:00:03 UTC  live"), "{text}");
        app.key(ratatui::crossterm::event::KeyEvent::from(ratatui::crossterm::event::KeyCode::Char('[')));
        let text = screen(&mut app, 100, 30).join("\n");
        assert!(text.contains("proctor top  00:00:02.000 UTC  PAUSED in the past, 1.0 s before live"), "{text}");
        app.key(ratatui::crossterm::event::KeyEvent::from(ratatui::crossterm::event::KeyCode::F(1)));
        let text = screen(&mut app, 100, 30).join("\n");
        assert!(text.contains("one sample back / forward") && text.contains("go to a time"), "{text}");
    }

    #[test]
    fn the_header_says_what_fires_when_the_source_runs_rules() {
        let mut app =
            App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, ViewState::default(), Slow::default());
        let mut f = frame_of(vec![proc_out(1, 0, "init", 0.0, 1)]);
        f.alerts = Some(crate::frame::AlertLine {
            firing: vec![("HostCpuBusy".into(), 1), ("Burner\u{1b}[31m".into(), 3)],
            pending: 2,
            rules: 5,
            note: None,
        });
        app.message(Msg::Newest(Arc::new(f)));
        let text = screen(&mut app, 100, 24).join("\n");
        assert!(text.contains("Alerts 4 firing: HostCpuBusy, Burner?[31m ×3; 2 pending (5 rules)"), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
        // Without rules there is no such line.
        app.message(Msg::Newest(Arc::new(frame_of(vec![proc_out(1, 0, "init", 0.0, 1)]))));
        assert!(!screen(&mut app, 100, 24).join("\n").contains("Alerts "));
    }

    /// With a PSS column shown, `top` asks first for the rows a person sees that have no PSS
    /// yet: those on screen at the last draw, top first, and none of those scrolled away or
    /// already read. Without a PSS column it asks for none.
    #[test]
    fn the_rows_on_screen_without_pss_are_the_ones_asked_for() {
        let mut view = ViewState::default();
        let pss = crate::view::column("pss_bytes").expect("a PSS column");
        view.columns.insert(view.columns.len() - 1, pss);
        view.sort_by(crate::view::column("pid").expect("a pid column"));
        let mut app = App::new(Mode::Live { store: None }, Duration::from_secs(1), 2, view, Slow::default());
        let processes = (1..=60u32)
            .map(|pid| {
                let mut p = proc_out(pid, 0, "p", 0.0, 1);
                // Every third process is read already, and pid 3's figure is its clone's.
                p.pss_bytes = (pid % 3 == 0).then_some(1 << 20);
                p.pss_estimated_from = (pid == 3).then_some(6);
                p
            })
            .collect();
        app.message(Msg::Newest(Arc::new(frame_of(processes))));
        let text = screen(&mut app, 160, 24);
        // The pids whose PSS cell reads `-`, from the screen.
        let head = text.iter().find(|l| l.trim_start().starts_with("PID")).expect("the heading");
        // In characters: the heading's sort mark is one, of three bytes.
        let at = head[..head.find("PSS").expect("a PSS heading")].chars().count() + 3;
        let unread: Vec<u32> = text
            .iter()
            .filter_map(|l| {
                Some((l.split_whitespace().next()?.parse::<u32>().ok()?, l.chars().take(at).collect::<String>()))
            })
            .filter(|(_, before)| before.trim_end().ends_with('-'))
            .map(|(pid, _)| pid)
            .collect();
        assert!(unread.len() > 10 && unread.len() < 40, "{unread:?}\n{}", text.join("\n"));
        assert!(unread.iter().all(|pid| pid % 3 != 0));
        // Pid 3 shows a figure, its clone's: asked for too, in its place.
        let with_clones: Vec<u32> = [1, 2, 3].into_iter().chain(unread[2..].iter().copied()).collect();
        assert_eq!(unread[..2], [1, 2]);
        assert_eq!(app.unread_pss_on_screen(64), with_clones);
        assert_eq!(app.unread_pss_on_screen(4), with_clones[..4]);
        // A process further down selected, the table scrolled to it: the rows now on screen.
        app.view.selected = Some(50);
        let text = screen(&mut app, 160, 24).join("\n");
        let asked = app.unread_pss_on_screen(64);
        assert!(asked.iter().all(|pid| !unread.contains(pid) && text.contains(&format!(" {pid} "))), "{asked:?}");
        assert!(!asked.is_empty());
        // No PSS column, nothing asked.
        app.view.columns.retain(|f| f.name != "pss_bytes");
        let _ = screen(&mut app, 160, 24);
        assert!(app.unread_pss_on_screen(64).is_empty());
    }
}
