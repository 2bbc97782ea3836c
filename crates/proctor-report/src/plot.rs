//! A range summary, and a correlation, as pictures: panels stacked on one time axis.
//!
//! [`host_shapes`] draws CPU, memory used (on an axis fitted to it, so growth of a few hundred
//! MiB on a host using gigabytes is a slope and not a flat line), the resident memory of the
//! processes with the highest peak RSS (one labelled line each), available memory, page cache
//! and swap, PSI, disk and network; [`correlation_shapes`] draws every
//! request's latency (log scale, slow ones as larger vermillion dots above the dashed threshold
//! line) over the CPU, iowait, disk and PSI panels, with the slow requests' times shaded in
//! every panel so a reader's eye can go straight down. Series are step lines of each bucket's
//! mean with a light tick up to the bucket's max, so a spike inside a bucket stays visible.
//! Value axes have round ticks (bytes in binary units); labels are measured in the embedded
//! font and kept apart. An [`Overlay`] adds what a report was asked about: the stretches
//! alerts fired (bands behind the host panels) and the `--at` time (a dashed line through
//! every panel, labelled above them). `proctor_plot` writes the shapes as SVG and renders that
//! as PNG.

use proctor_plot::axis::{
    byte_ticks_between, bytes_label, log_ticks, nice_ticks, percent_label, seconds_label, time_ticks,
};
use proctor_plot::label::{ascent, box_width, centre_inside, descent, elide_end, elide_middle, GAP as LABEL_GAP};
use proctor_plot::{
    tint, Anchor, Shape, BLUE, GREEN, GRID, INK, LABEL_SIZE, ORANGE, PURPLE, TITLE_SIZE, VERMILLION, WHITE,
};

use crate::correlate::Correlation;
use crate::groups::GroupSummary;
use crate::range::{RangeSummary, Series, SeriesPoint, Unit};

/// The file formats this plot is written in, by file name (`.svg`, `.png`).
pub use proctor_plot::{Format, UnknownFormat};

pub const WIDTH: f64 = 960.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 40.0;
const PANEL: f64 = 110.0;
/// Between panels: the panel's title and legend above it.
const GAP: f64 = 34.0;
/// The slow requests' times, shaded through every panel: vermillion 80 % of the way to white.
const SHADE: [u8; 3] = [0xf7, 0xdf, 0xcc];
const COLORS: [[u8; 3]; 4] = [BLUE, ORANGE, GREEN, PURPLE];

/// How a panel's value axis is scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// From zero: shares, rates, and levels read against each other.
    Zero,
    /// Fitted to the values when zero lies farther below them than they spread (memory used
    /// growing by 300 MiB from 8 GiB), else from zero; a fitted panel's title says so.
    Fitted,
}

/// The panels of the host plot: title, the series drawn in it, its scale. The processes'
/// RSS panel ([`RSS_PANEL`]) comes after memory used.
pub const HOST_PANELS: [(&str, &[&str], Scale); 6] = [
    (
        "CPU, % of all CPUs",
        &["host.cpu.user_percent", "host.cpu.system_percent", "host.cpu.iowait_percent"],
        Scale::Zero,
    ),
    ("memory used (total − available)", &["host.memory.used_bytes"], Scale::Fitted),
    (
        "memory",
        &["host.memory.available_bytes", "host.memory.cached_bytes", "host.memory.swap_used_bytes"],
        Scale::Zero,
    ),
    (
        "pressure (PSI some), % of time stalled",
        &["host.pressure_cpu.some.avg10", "host.pressure_io.some.avg10", "host.pressure_memory.some.avg10"],
        Scale::Zero,
    ),
    ("disk, whole disks", &["host.disk.read_bytes_per_sec", "host.disk.write_bytes_per_sec"], Scale::Zero),
    ("network, all interfaces but lo", &["host.net.rx_bytes_per_sec", "host.net.tx_bytes_per_sec"], Scale::Zero),
];

/// The title of the host plot's panel of the processes with the highest peak RSS
/// ([`RangeSummary::top_memory_rss`]), each a line labelled with its name and pid.
pub const RSS_PANEL: &str = "resident memory (RSS), largest processes";
/// The RSS panel goes after this one of [`HOST_PANELS`] (memory used).
const RSS_PANEL_AFTER: usize = 1;
/// A fitted panel's title ends with this when its axis does not start at zero.
pub const NOT_FROM_ZERO: &str = ", axis not from zero";

/// A process group's panels (`report --group`): its series names in [`crate::GROUP_SERIES`].
/// Major faults have a panel of their own: a few per second (pages read back from disk) would
/// be a flat line under thousands of minor ones.
pub const GROUP_PANELS: [(&str, &[&str]); 5] = [
    ("CPU, % of one CPU (reaped children included)", &["cpu"]),
    ("memory", &["rss", "pss", "swap"]),
    ("minor page faults per second (reaped children included)", &["faults.minor"]),
    ("major page faults per second: pages read back from disk", &["faults.major"]),
    ("processes; started and exited since the previous sample", &["processes", "started", "exited"]),
];

/// The system panels under the latency panel of the correlation plot.
pub const CORRELATION_PANELS: [(&str, &[&str]); 4] = [
    ("CPU, % of all CPUs", &["host.cpu.user_percent", "host.cpu.system_percent"]),
    ("iowait, % of all CPUs; disk busy, % of time", &["host.cpu.iowait_percent", "host.disk.busy_percent"]),
    ("disk", &["host.disk.read_bytes_per_sec", "host.disk.write_bytes_per_sec"]),
    (
        "pressure (PSI some), % of time stalled",
        &["host.pressure_cpu.some.avg10", "host.pressure_io.some.avg10", "host.pressure_memory.some.avg10"],
    ),
];

fn rect(x: f64, y: f64, width: f64, height: f64, color: [u8; 3]) -> Shape {
    Shape::Rect { x, y, width, height, color }
}

fn text(x: f64, y: f64, text: impl Into<String>, color: [u8; 3], centered: bool) -> Shape {
    Shape::text(x, y, text, color, if centered { Anchor::Middle } else { Anchor::Start })
}

fn line(x1: f64, y1: f64, x2: f64, y2: f64, color: [u8; 3]) -> Shape {
    Shape::line(x1, y1, x2, y2, color)
}

/// The colour halfway to white: the max ticks of a series.
fn light(color: [u8; 3]) -> [u8; 3] {
    tint(color, 0.5)
}

/// `1.5 GiB`, `3.2 MiB/s`, `45%`: a value for people, in the units the rest of the CLI
/// writes (the report's text tables use it).
pub fn human(value: f64, unit: Unit) -> String {
    match unit {
        Unit::Percent => format!("{value:.0}%"),
        Unit::Bytes => binary(value),
        Unit::BytesPerSecond => format!("{}/s", binary(value)),
        Unit::Count | Unit::Number => count(value),
        Unit::PerSecond => format!("{}/s", count(value)),
    }
}

/// `12`, `3.5`, `1.2k`, `4.8M`: a count or a rate of events.
fn count(value: f64) -> String {
    let a = value.abs();
    if a >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", value / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", value / 1e3)
    } else if a >= 10.0 || value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

fn binary(value: f64) -> String {
    let (v, unit) = proctor_units::units::binary_scaled(value);
    if v.fract() == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

/// A series' name in a legend: without the scope every series of a host panel shares, and
/// without the unit suffix the panel's title and axis already say (`memory.used` for
/// `host.memory.used_bytes`).
fn legend_name(name: &str) -> &str {
    let name = name.strip_prefix("host.").unwrap_or(name);
    [".avg10", "_bytes_per_sec", "_percent", "_bytes"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name)
}

/// A tick's label in a panel's unit: `25%`, `512 MiB`, `1 MiB/s`.
fn tick_label(value: f64, unit: Unit, step: f64) -> String {
    match unit {
        Unit::Percent => percent_label(value, step),
        Unit::Bytes => bytes_label(value),
        Unit::BytesPerSecond => format!("{}/s", bytes_label(value)),
        Unit::Count | Unit::Number => count(value),
        Unit::PerSecond => format!("{}/s", count(value)),
    }
}

/// Round ticks from `low` (or below it) to `high` (or above it): 1-2-5 steps for percentages,
/// binary units for bytes.
fn value_ticks(low: f64, high: f64, unit: Unit) -> Vec<f64> {
    match unit {
        Unit::Percent | Unit::Count | Unit::Number | Unit::PerSecond => nice_ticks(low, high, 4),
        Unit::Bytes | Unit::BytesPerSecond => byte_ticks_between(low, high, 4),
    }
}

/// A label left of the plot, right-aligned to it, level with `y`.
fn y_label(y: f64, label: String, shapes: &mut Vec<Shape>) {
    shapes.push(Shape::text(LEFT - 6.0, y + 4.0, label, INK, Anchor::End));
}

/// The time axis every panel shares.
#[derive(Debug, Clone, Copy)]
struct TimeAxis {
    from_ns: u64,
    to_ns: u64,
}

impl TimeAxis {
    fn x(&self, t: u64) -> f64 {
        let span = self.to_ns.saturating_sub(self.from_ns).max(1) as f64;
        LEFT + (t.saturating_sub(self.from_ns) as f64 / span).min(1.0) * (WIDTH - LEFT - RIGHT)
    }

    /// Vertical grid lines, and their labels when `labels`.
    fn draw(&self, top: f64, shapes: &mut Vec<Shape>, labels: bool) {
        for (t, label) in time_ticks(self.from_ns, self.to_ns, 10) {
            let x = self.x(t);
            shapes.push(line(x, top, x, top + PANEL, GRID));
            if labels {
                shapes.push(line(x, top + PANEL, x, top + PANEL + 4.0, INK));
                // Two pixels lower than a label's line, to clear the lowest value label; the
                // last one kept inside the picture.
                let centre = centre_inside(x, &label, LABEL_SIZE, 0.0, WIDTH);
                shapes.push(text(centre, top + PANEL + 18.0, label, INK, true));
            }
        }
    }
}

/// One line of a panel: its legend label and its buckets.
struct PanelLine<'a> {
    label: String,
    unit: Unit,
    points: &'a [SeriesPoint],
}

/// Series as a panel's lines, named as in the catalog without what the panel says already.
fn series_lines<'a>(series: &[&'a Series]) -> Vec<PanelLine<'a>> {
    series
        .iter()
        .map(|s| {
            let name = legend_name(s.name);
            let label = if s.points.is_empty() { format!("{name} (no data)") } else { name.to_string() };
            PanelLine { label, unit: s.unit, points: &s.points }
        })
        .collect()
}

/// The RSS panel's lines: each of the processes with the highest peak RSS as `comm (pid)`.
fn rss_lines(summary: &RangeSummary) -> Vec<PanelLine<'_>> {
    let lines: Vec<PanelLine> = summary
        .top_memory
        .iter()
        .zip(&summary.top_memory_rss)
        .map(|(process, points)| PanelLine {
            label: format!("{} ({})", elide_end(&process.comm, LABEL_SIZE, 120.0), process.pid),
            unit: Unit::Bytes,
            points,
        })
        .collect();
    if lines.is_empty() {
        return vec![PanelLine { label: "no process samples".to_string(), unit: Unit::Bytes, points: &[] }];
    }
    lines
}

/// One panel of lines sharing a unit: grid, y labels, step lines of the means, max ticks.
///
/// Two non-empty buckets are joined when they are at most `join_ns` apart (buckets narrower
/// than the sample interval are mostly empty); farther apart, the gap stays a gap.
fn series_panel(
    axis: TimeAxis,
    top: f64,
    title: &str,
    lines: &[PanelLine],
    scale: Scale,
    join_ns: u64,
    shapes: &mut Vec<Shape>,
) {
    let unit = lines.first().map_or(Unit::Percent, |s| s.unit);
    let values = || lines.iter().flat_map(|s| s.points.iter());
    let high = values().map(|p| p.max).fold(0.0f64, f64::max);
    let low = values().map(|p| p.mean).fold(f64::INFINITY, f64::min);
    // Fitted only when zero is farther below the values than they spread: what changes then
    // fills the panel, where from zero it would be a flat line along the top.
    let fitted = scale == Scale::Fitted && high > low && low > high - low;
    let ticks = if fitted { value_ticks(low, high, unit) } else { value_ticks(0.0, high.max(1.0), unit) };
    let bottom_value = ticks.first().copied().unwrap_or(0.0);
    let top_value = ticks.last().copied().unwrap_or(high).max(bottom_value + f64::MIN_POSITIVE);
    let step = ticks.get(1).map_or(top_value, |second| second - bottom_value);
    let y = |v: f64| top + PANEL - ((v - bottom_value) / (top_value - bottom_value)).clamp(0.0, 1.0) * PANEL;
    for tick in &ticks {
        shapes.push(line(LEFT, y(*tick), WIDTH - RIGHT, y(*tick), GRID));
        y_label(y(*tick), tick_label(*tick, unit, step), shapes);
    }
    axis.draw(top, shapes, false);
    let entries: Vec<(String, [u8; 3])> =
        lines.iter().enumerate().map(|(i, s)| (s.label.clone(), COLORS[i % COLORS.len()])).collect();
    let title = if bottom_value > 0.0 { format!("{title}{NOT_FROM_ZERO}") } else { title.to_string() };
    title_and_legend(top, &title, &entries, shapes);
    for (i, s) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut last: Option<(u64, f64)> = None;
        for p in s.points {
            let (x1, x2) = (axis.x(p.start_ns), axis.x(p.end_ns).max(axis.x(p.start_ns) + 1.0));
            if p.max > p.mean {
                shapes.push(rect(x1 + (x2 - x1) / 2.0, y(p.max), 1.0, y(p.mean) - y(p.max), light(color)));
            }
            // A step: the previous value runs on to this bucket, then a vertical joins them.
            let mut from_x = x1;
            if let Some((end_ns, value)) = last {
                if p.start_ns.saturating_sub(end_ns) <= join_ns {
                    let end_x = axis.x(end_ns);
                    shapes.push(rect(end_x, y(value) - 0.5, (x1 - end_x).max(0.0), 1.5, color));
                    shapes.push(line(x1, y(value), x1, y(p.mean), color));
                    from_x = x1;
                }
            }
            shapes.push(rect(from_x, y(p.mean) - 0.5, x2 - from_x, 1.5, color));
            last = Some((p.end_ns, p.mean));
        }
    }
    shapes.push(line(LEFT, top + PANEL, WIDTH - RIGHT, top + PANEL, INK));
    shapes.push(line(LEFT, top, LEFT, top + PANEL, INK));
}

/// A panel's title above its top left and, right of it, the legend: a swatch and the name of
/// each series in its colour. When both do not fit on the line, the legend keeps its full
/// width against the right edge and the title is cut before it.
fn title_and_legend(top: f64, title: &str, entries: &[(String, [u8; 3])], shapes: &mut Vec<Shape>) {
    const SWATCH: f64 = 10.0;
    let baseline = top - 8.0;
    let entry_width = |label: &str| SWATCH + 4.0 + box_width(label, LABEL_SIZE);
    let legend_width: f64 = entries.iter().map(|(label, _)| entry_width(label) + 2.0 * LABEL_GAP).sum();
    let right = WIDTH - RIGHT;
    let title_room = right - legend_width - LEFT;
    let title = if box_width(title, LABEL_SIZE) <= title_room {
        title.to_string()
    } else {
        elide_end(title, LABEL_SIZE, title_room - 2.0)
    };
    shapes.push(text(LEFT, baseline, title.clone(), INK, false));
    let mut x = LEFT + box_width(&title, LABEL_SIZE) + 2.0 * LABEL_GAP;
    for (label, color) in entries {
        shapes.push(rect(x, baseline - 8.0, SWATCH, 8.0, *color));
        shapes.push(text(x + SWATCH + 4.0 + 1.0, baseline, label.clone(), *color, false));
        x += entry_width(label) + 2.0 * LABEL_GAP;
    }
}

fn find<'a>(summary: &'a RangeSummary, name: &str) -> Option<&'a Series> {
    summary.series.iter().find(|s| s.name == name)
}

/// The axis: the requested range, narrowed to the samples found in it, but always reaching
/// the marked time (a marker pinned to the edge would point at the wrong time).
fn axis_of(summary: &RangeSummary, overlay: &Overlay) -> TimeAxis {
    let mut from_ns = summary.first_ns.map_or(summary.from_ns, |first| first.max(summary.from_ns));
    let mut to_ns = summary.last_ns.map_or(summary.to_ns, |last| last.min(summary.to_ns)).max(from_ns + 1);
    if let Some(at) = overlay.at_ns {
        (from_ns, to_ns) = (from_ns.min(at), to_ns.max(at));
    }
    TimeAxis { from_ns, to_ns }
}

/// Three sample intervals: a longer gap is one the recorder was not running.
fn join_ns(summary: &RangeSummary) -> u64 {
    summary.median_interval_ns.unwrap_or(1_000_000_000).saturating_mul(3)
}

fn panels_height(panels: usize) -> f64 {
    TOP + panels as f64 * (PANEL + GAP) + 30.0
}

/// A stretch during which an alert fired (`proctor alerts`' log), drawn as a band behind the
/// host panels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertSpan {
    pub rule: String,
    pub from_ns: u64,
    pub to_ns: u64,
}

/// What a plot shows over its series besides the data.
#[derive(Debug, Clone, Copy, Default)]
pub struct Overlay<'a> {
    /// Stretches alerts fired: bands behind the host panels, named under the time axis.
    pub alerts: &'a [AlertSpan],
    /// The time the report is about (`report --at T`): a dashed line through every panel and
    /// its time above the first.
    pub at_ns: Option<u64>,
}

/// The `--at` marker's text: `--at 22:43:20` (UTC, as the time axis).
pub fn at_label(at_ns: u64) -> String {
    let secs = at_ns / 1_000_000_000 % 86_400;
    format!("--at {:02}:{:02}:{:02}", secs / 3600, secs % 3600 / 60, secs % 60)
}

/// The `--at` marker over `panels` stacked panels: a dashed line 1.5 px wide through each
/// (not through the titles between them) and its label centred above the first, between the
/// plot's title and the first panel's. Drawn after the series, so no line hides it.
fn mark_at(axis: TimeAxis, overlay: &Overlay, panels: usize, shapes: &mut Vec<Shape>) {
    let Some(at) = overlay.at_ns else { return };
    let x = axis.x(at);
    for i in 0..panels {
        let top = TOP + GAP - 10.0 + i as f64 * (PANEL + GAP);
        shapes.push(Shape::Line { x1: x, y1: top, x2: x, y2: top + PANEL, color: INK, width: 1.5, dashed: true });
    }
    let label = at_label(at);
    shapes.push(text(centre_inside(x, &label, LABEL_SIZE, 0.0, WIDTH), TOP - 4.0, label, INK, true));
}

/// The alert bands' colour: a light red behind the series.
const ALERT_BAND: [u8; 3] = [0xf6, 0xd5, 0xd5];
const ALERT_INK: [u8; 3] = [0xa8, 0x26, 0x1c];

/// The host plot's shapes and height.
pub fn host_shapes(summary: &RangeSummary, title: &str) -> (Vec<Shape>, f64) {
    host_shapes_with(summary, title, &Overlay::default())
}

/// The host plot with the overlay: the stretches alerts fired as bands behind every panel and
/// a line under the time axis naming them, the `--at` marker.
pub fn host_shapes_with(summary: &RangeSummary, title: &str, overlay: &Overlay) -> (Vec<Shape>, f64) {
    let axis = axis_of(summary, overlay);
    let mut panels: Vec<(&str, Vec<PanelLine>, Scale)> = Vec::new();
    for (i, (panel_title, names, scale)) in HOST_PANELS.iter().enumerate() {
        let series: Vec<&Series> = names.iter().filter_map(|n| find(summary, n)).collect();
        panels.push((panel_title, series_lines(&series), *scale));
        if i == RSS_PANEL_AFTER {
            panels.push((RSS_PANEL, rss_lines(summary), Scale::Fitted));
        }
    }
    let mut shapes = vec![Shape::title(10.0, 16.0, elide_middle(title, TITLE_SIZE, WIDTH - 20.0))];
    let mut shown: Vec<(String, usize)> = Vec::new();
    for a in overlay.alerts {
        let (from, to) = (a.from_ns.max(axis.from_ns), a.to_ns.min(axis.to_ns));
        if to < from {
            continue;
        }
        let (x1, x2) = (axis.x(from), axis.x(to));
        for i in 0..panels.len() {
            let top = TOP + GAP - 10.0 + i as f64 * (PANEL + GAP);
            shapes.push(rect(x1, top, (x2 - x1).max(2.0), PANEL, ALERT_BAND));
        }
        match shown.iter_mut().find(|(r, _)| *r == a.rule) {
            Some((_, n)) => *n += 1,
            None => shown.push((a.rule.clone(), 1)),
        }
    }
    let mut height = panels_height(panels.len()) + 10.0;
    if !shown.is_empty() {
        let names: Vec<String> =
            shown.iter().map(|(r, n)| if *n > 1 { format!("{r} ×{n}") } else { r.clone() }).collect();
        let line = format!("alerts firing (red bands): {}", names.join(", "));
        shapes.push(text(
            LEFT,
            height + 6.0,
            elide_end(&line, LABEL_SIZE, WIDTH - RIGHT - LEFT - 2.0),
            ALERT_INK,
            false,
        ));
        height += 20.0;
    }
    for (i, (panel_title, lines, scale)) in panels.iter().enumerate() {
        let top = TOP + GAP - 10.0 + i as f64 * (PANEL + GAP);
        series_panel(axis, top, panel_title, lines, *scale, join_ns(summary), &mut shapes);
        if i + 1 == panels.len() {
            axis.draw(top, &mut shapes, true);
        }
    }
    mark_at(axis, overlay, panels.len(), &mut shapes);
    (shapes, height)
}

/// The correlation plot's shapes and height: latency on top, system panels below.
pub fn correlation_shapes(
    summary: &RangeSummary,
    correlation: &Correlation,
    title: &str,
    overlay: &Overlay,
) -> (Vec<Shape>, f64) {
    let axis = axis_of(summary, overlay);
    let mut shapes = vec![Shape::title(10.0, 16.0, elide_middle(title, TITLE_SIZE, WIDTH - 20.0))];
    let panels = 1 + CORRELATION_PANELS.len();
    let height = panels_height(panels) + 10.0;
    // Shade the slow requests' times through every panel first, so lines draw over it.
    let first_top = TOP + GAP - 10.0;
    let last_bottom = first_top + (panels - 1) as f64 * (PANEL + GAP) + PANEL;
    for p in correlation.points.iter().filter(|p| p.slow) {
        shapes.push(rect(axis.x(p.unix_ns) - 1.0, first_top, 2.0, last_bottom - first_top, SHADE));
    }
    // Latency panel, log scale.
    let top = first_top;
    let latencies = correlation.points.iter().map(|p| p.latency_ns).filter(|v| *v > 0.0);
    let (low, high) = latencies.fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let label = match correlation.rule {
        Some(rule) => format!(
            "latency, log scale: {} requests, {} slow (vermillion, above the dashed line at {})",
            correlation.requests,
            correlation.slow,
            proctor_units::units::duration_ns(rule.threshold_ns())
        ),
        None => "latency: no requests in the range".to_string(),
    };
    shapes.push(text(LEFT, top - 8.0, elide_end(&label, LABEL_SIZE, WIDTH - RIGHT - LEFT - 2.0), INK, false));
    if high > 0.0 {
        let (lo, hi) = (low.log10().floor(), high.log10().ceil().max(low.log10().floor() + 1.0));
        let y = |ns: f64| top + PANEL - ((ns.max(1.0).log10() - lo) / (hi - lo)).clamp(0.0, 1.0) * PANEL;
        let label_height = ascent(LABEL_SIZE) + descent(LABEL_SIZE);
        for (decade, labelled) in log_ticks(lo, hi, PANEL / (hi - lo), label_height + 2.0) {
            let at = y(10f64.powf(decade));
            if decade.fract() == 0.0 {
                shapes.push(line(LEFT, at, WIDTH - RIGHT, at, GRID));
            }
            if labelled {
                y_label(at, seconds_label(10f64.powf(decade) / 1e9), &mut shapes);
            }
        }
        // The threshold under the dots; slow dots last, bigger and ringed in white, so none
        // disappears on the line or under a fast one.
        if let Some(rule) = correlation.rule {
            let at = y(rule.threshold_ns());
            shapes.push(Shape::dashed(LEFT, at, WIDTH - RIGHT, at, INK));
        }
        for p in correlation.points.iter().filter(|p| !p.slow) {
            shapes.push(Shape::dot(axis.x(p.unix_ns), y(p.latency_ns), 1.5, BLUE, None));
        }
        for p in correlation.points.iter().filter(|p| p.slow) {
            shapes.push(Shape::dot(axis.x(p.unix_ns), y(p.latency_ns), 2.5, VERMILLION, Some(WHITE)));
        }
    }
    axis.draw(top, &mut shapes, false);
    shapes.push(line(LEFT, top + PANEL, WIDTH - RIGHT, top + PANEL, INK));
    shapes.push(line(LEFT, top, LEFT, top + PANEL, INK));
    for (i, (panel_title, names)) in CORRELATION_PANELS.iter().enumerate() {
        let top = first_top + (i + 1) as f64 * (PANEL + GAP);
        let series: Vec<&Series> = names.iter().filter_map(|n| find(summary, n)).collect();
        series_panel(axis, top, panel_title, &series_lines(&series), Scale::Zero, join_ns(summary), &mut shapes);
        if i + 1 == CORRELATION_PANELS.len() {
            axis.draw(top, &mut shapes, true);
        }
    }
    mark_at(axis, overlay, panels, &mut shapes);
    (shapes, height)
}

/// A group's plot: its panels on the range's time axis.
pub fn group_shapes(summary: &RangeSummary, group: &GroupSummary, title: &str, overlay: &Overlay) -> (Vec<Shape>, f64) {
    let axis = axis_of(summary, overlay);
    let mut shapes = vec![Shape::title(10.0, 16.0, elide_middle(title, TITLE_SIZE, WIDTH - 20.0))];
    for (i, (panel_title, names)) in GROUP_PANELS.iter().enumerate() {
        let top = TOP + GAP - 10.0 + i as f64 * (PANEL + GAP);
        let series: Vec<&Series> =
            names.iter().filter_map(|n| group.series.iter().find(|s| s.name == *n && !s.points.is_empty())).collect();
        series_panel(axis, top, panel_title, &series_lines(&series), Scale::Zero, join_ns(summary), &mut shapes);
        if i + 1 == GROUP_PANELS.len() {
            axis.draw(top, &mut shapes, true);
        }
    }
    mark_at(axis, overlay, GROUP_PANELS.len(), &mut shapes);
    (shapes, panels_height(GROUP_PANELS.len()) + 10.0)
}

pub fn group_svg(summary: &RangeSummary, group: &GroupSummary, title: &str, overlay: &Overlay) -> String {
    let (shapes, height) = group_shapes(summary, group, title, overlay);
    proctor_plot::svg(WIDTH as u32, height as u32, &shapes)
}

pub fn group_png(summary: &RangeSummary, group: &GroupSummary, title: &str, overlay: &Overlay) -> Vec<u8> {
    let (shapes, height) = group_shapes(summary, group, title, overlay);
    proctor_plot::png(WIDTH as u32, height as u32, &shapes)
}

pub fn host_svg(summary: &RangeSummary, title: &str, overlay: &Overlay) -> String {
    let (shapes, height) = host_shapes_with(summary, title, overlay);
    proctor_plot::svg(WIDTH as u32, height as u32, &shapes)
}

pub fn host_png(summary: &RangeSummary, title: &str, overlay: &Overlay) -> Vec<u8> {
    let (shapes, height) = host_shapes_with(summary, title, overlay);
    proctor_plot::png(WIDTH as u32, height as u32, &shapes)
}

pub fn correlation_svg(summary: &RangeSummary, correlation: &Correlation, title: &str, overlay: &Overlay) -> String {
    let (shapes, height) = correlation_shapes(summary, correlation, title, overlay);
    proctor_plot::svg(WIDTH as u32, height as u32, &shapes)
}

pub fn correlation_png(summary: &RangeSummary, correlation: &Correlation, title: &str, overlay: &Overlay) -> Vec<u8> {
    let (shapes, height) = correlation_shapes(summary, correlation, title, overlay);
    proctor_plot::png(WIDTH as u32, height as u32, &shapes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::correlate::{correlate, CorrelationConfig, LatencyPoint};
    use crate::range::{series_index, HostPoint, RangeConfig, SeriesPoint};

    fn summary() -> RangeSummary {
        let points: Vec<HostPoint> = (0..60u64)
            .map(|t| {
                let mut values = [None; proctor_model::series::N];
                values[series_index("host.cpu.user_percent").expect("user")] =
                    Some(if (20..30).contains(&t) { 80.0 } else { 10.0 });
                HostPoint { unix_ns: (t + 1) * 1_000_000_000, interval_start_ns: Some(t * 1_000_000_000), values }
            })
            .collect();
        let user = Series {
            name: "host.cpu.user_percent",
            unit: Unit::Percent,
            description: "",
            points: (0..60u32)
                .map(|b| SeriesPoint {
                    bucket: b,
                    start_ns: u64::from(b) * 1_000_000_000,
                    end_ns: u64::from(b + 1) * 1_000_000_000,
                    mean: if (20..30).contains(&b) { 80.0 } else { 10.0 },
                    max: 90.0,
                    count: 1,
                })
                .collect(),
        };
        let mut summary = crate::range::summarize(
            Vec::new(),
            RangeConfig { from_ns: 0, to_ns: 61_000_000_000, ..RangeConfig::default() },
        );
        summary.series[0] = user;
        summary.points = points;
        summary
    }

    /// An hour at 1 s in 600 buckets with every series filled, memory in the tens of GiB and
    /// rates near 1 MB/s: the figures whose labels used to land on 27.9 GiB and 977 KiB/s.
    fn full_hour() -> RangeSummary {
        let from_ns = 1_700_000_000 * 1_000_000_000; // 22:13:20 UTC
        let to_ns = from_ns + 3600 * 1_000_000_000;
        let mut summary = crate::range::summarize(Vec::new(), RangeConfig { from_ns, to_ns, ..RangeConfig::default() });
        for series in &mut summary.series {
            let top = match series.unit {
                Unit::Percent => 100.0,
                Unit::Bytes => 27.9 * (1u64 << 30) as f64,
                Unit::BytesPerSecond => 1e6,
                Unit::Count | Unit::Number | Unit::PerSecond => 1000.0,
            };
            series.points = (0..600u32)
                .map(|b| {
                    let wave = 0.5 + 0.5 * (f64::from(b) / 40.0).sin();
                    SeriesPoint {
                        bucket: b,
                        start_ns: from_ns + u64::from(b) * 6_000_000_000,
                        end_ns: from_ns + u64::from(b + 1) * 6_000_000_000,
                        mean: top * wave * 0.8,
                        max: top * wave,
                        count: 6,
                    }
                })
                .collect();
        }
        summary.first_ns = Some(from_ns);
        summary.last_ns = Some(to_ns);
        summary.median_interval_ns = Some(1_000_000_000);
        // Four processes with names as long as the kernel's (15 bytes) and pids of seven digits.
        let sizes = [2.5e9, 1.2e9, 8e8, 3e8];
        top_processes(&mut summary, &sizes.map(|size| ("kworker/u16:3-e", 4_194_000, size, size * 0.2)));
        summary
    }

    /// Sets the summary's top processes by peak RSS: (comm, pid, RSS at the start, at the end)
    /// each, growing in a straight line over the summary's buckets.
    fn top_processes(summary: &mut RangeSummary, processes: &[(&str, u32, f64, f64)]) {
        let (from, to) = (summary.first_ns.unwrap_or(summary.from_ns), summary.last_ns.unwrap_or(summary.to_ns));
        let buckets = 120u64;
        let bucket_ns = (to - from) / buckets;
        summary.top_memory = processes
            .iter()
            .map(|&(comm, pid, start, end)| crate::ProcessUsage {
                pid,
                start_ticks: 1,
                comm: comm.to_string(),
                cmdline: None,
                cpu_seconds: 0.0,
                rss_peak_bytes: Some(start.max(end) as u64),
                rss_mean_bytes: Some((start + end) / 2.0),
                net_rx_bytes: None,
                net_tx_bytes: None,
                net_retransmits: None,
                samples: buckets,
                first_seen_ns: from,
                last_seen_ns: to,
            })
            .collect();
        summary.top_memory_rss = processes
            .iter()
            .map(|&(_, _, start, end)| {
                (0..buckets)
                    .map(|b| {
                        let value = start + (end - start) * b as f64 / (buckets - 1) as f64;
                        SeriesPoint {
                            bucket: b as u32,
                            start_ns: from + b * bucket_ns,
                            end_ns: from + (b + 1) * bucket_ns,
                            mean: value,
                            max: value,
                            count: 1,
                        }
                    })
                    .collect()
            })
            .collect();
    }

    /// Latencies every 250 ms over the summary's range, from `low_ns` to `high_ns`, the
    /// highest tenth of them slow.
    fn latencies(summary: &RangeSummary, low_ns: f64, high_ns: f64) -> Vec<LatencyPoint> {
        let from = summary.first_ns.unwrap_or(summary.from_ns);
        let to = summary.last_ns.unwrap_or(summary.to_ns);
        let count = (to - from) / 250_000_000;
        (0..count)
            .map(|i| LatencyPoint {
                unix_ns: from + i * 250_000_000,
                latency_ns: low_ns * (high_ns / low_ns).powf((i * 7919 % count) as f64 / count as f64),
            })
            .collect()
    }

    /// What keeps the labels from being read (see `proctor_plot::label::problems`), after
    /// checking that the PNG has the layout's size.
    fn unreadable((shapes, height): (Vec<Shape>, f64), png: &[u8]) -> Vec<String> {
        let size = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
        assert_eq!((size(16), size(20)), (WIDTH as u32, height as u32));
        proctor_plot::label::problems(WIDTH, height, &shapes)
    }

    #[test]
    fn labels_stay_inside_the_picture_and_apart() {
        // The CLI's title, with a data directory long enough to need cutting.
        let title = "proctor report 2023-11-14 22:13:20 to 2023-11-14 23:13:20 (/home/a-person-with-a-long-name\
                     /Projects/Experiments/2023/November/an-experiment-with-a-descriptive-name/run-17/proctor-data)";
        let mut problems = Vec::new();
        for summary in [summary(), full_hour()] {
            let none = Overlay::default();
            problems.extend(unreadable(host_shapes(&summary, title), &host_png(&summary, title, &none)));
            // With alert bands and their line under the axis (many names: it is cut to fit).
            let from = summary.first_ns.unwrap_or(summary.from_ns);
            let alerts: Vec<AlertSpan> = (0..30)
                .map(|i| AlertSpan {
                    rule: format!("AVeryLongAlertRuleName{i}"),
                    from_ns: from + i * 10_000_000_000,
                    to_ns: from + i * 10_000_000_000 + 5_000_000_000,
                })
                .collect();
            // And the --at marker, near the right edge so its label is pulled in.
            let to = summary.last_ns.unwrap_or(summary.to_ns);
            let overlay = Overlay { alerts: &alerts, at_ns: Some(to - 1_000_000_000) };
            problems
                .extend(unreadable(host_shapes_with(&summary, title, &overlay), &host_png(&summary, title, &overlay)));
            // Latencies over two decades, and over nine.
            for (low, high) in [(2e6, 80e6), (1e3, 1e12)] {
                let correlation =
                    correlate(&latencies(&summary, low, high), &summary.points, &CorrelationConfig::default());
                let title = "latency vs system, probe stream (every `proctor probe --record` run in the range)";
                problems.extend(unreadable(
                    correlation_shapes(&summary, &correlation, title, &overlay),
                    &correlation_png(&summary, &correlation, title, &overlay),
                ));
            }
        }
        assert!(problems.is_empty(), "{} label problems:\n{}", problems.len(), problems.join("\n"));
    }

    /// `report --at T --around 5m` is about T: a dashed line at T through every panel of each
    /// plot, and T above them (there was no mark at all).
    #[test]
    fn the_at_time_is_marked_through_every_panel() {
        let summary = summary();
        let at_ns = 30_000_000_000;
        let overlay = Overlay { alerts: &[], at_ns: Some(at_ns) };
        // The fixture's axis runs from 0 to 61 s.
        let x = LEFT + 30.0 / 61.0 * (WIDTH - LEFT - RIGHT);
        let correlation = correlate(&latencies(&summary, 2e6, 80e6), &summary.points, &CorrelationConfig::default());
        let group = GroupSummary { name: "g".into(), samples: 0, series: Vec::new(), headline: Vec::new() };
        let plots = [
            (host_shapes_with(&summary, "h", &overlay), HOST_PANELS.len() + 1),
            (correlation_shapes(&summary, &correlation, "c", &overlay), 1 + CORRELATION_PANELS.len()),
            (group_shapes(&summary, &group, "g", &overlay), GROUP_PANELS.len()),
        ];
        for ((shapes, height), panels) in plots {
            let marks: Vec<(f64, f64, f64)> = shapes
                .iter()
                .filter_map(|s| match s {
                    Shape::Line { x1, y1, x2, y2, dashed: true, width, .. } if x1 == x2 && *width == 1.5 => {
                        Some((*x1, *y1, *y2))
                    }
                    _ => None,
                })
                .collect();
            assert_eq!(marks.len(), panels, "{marks:?}");
            for (i, (at_x, y1, y2)) in marks.iter().enumerate() {
                let top = TOP + GAP - 10.0 + i as f64 * (PANEL + GAP);
                assert!((at_x - x).abs() < 0.01 && (*y1, *y2) == (top, top + PANEL), "{i}: {marks:?}");
            }
            let label = shapes.iter().find_map(|s| match s {
                Shape::Text { x, y, text, anchor: Anchor::Middle, .. } if text == "--at 00:00:30" => Some((*x, *y)),
                _ => None,
            });
            let (label_x, label_y) = label.expect("the marker's label");
            assert!((label_x - x).abs() < 0.01 && label_y < TOP + GAP - 10.0, "{label:?}");
            assert_eq!(proctor_plot::label::problems(WIDTH, height, &shapes), Vec::<String>::new());
        }
        // Without --at, nothing of the kind.
        let (shapes, _) = host_shapes(&summary, "h");
        assert!(!shapes.iter().any(|s| matches!(s, Shape::Line { dashed: true, .. })));
        if let Some(path) = std::env::var_os("PROCTOR_REPORT_PLOT_SAMPLE") {
            std::fs::write(path, host_png(&summary, "proctor report --at (sample)", &overlay)).expect("write");
        }
    }

    /// The vertical extent, in pixels, of the step lines (1.5 px rects) of `color` inside the
    /// panel titled `title` (its title may go on), and the panel's y labels; `None` when there is
    /// no such panel.
    fn panel_marks(shapes: &[Shape], title: &str, color: [u8; 3]) -> Option<(f64, Vec<String>)> {
        let top = shapes.iter().find_map(|s| match s {
            Shape::Text { x, y, text, .. } if *x == LEFT && text.starts_with(title) => Some(y + 8.0),
            _ => None,
        })?;
        let inside = |y: f64| y >= top - 1.0 && y <= top + PANEL + 1.0;
        let ys: Vec<f64> = shapes
            .iter()
            .filter_map(|s| match s {
                Shape::Rect { y, height, color: c, .. } if *c == color && *height == 1.5 && inside(*y) => Some(*y),
                _ => None,
            })
            .collect();
        let extent = ys.iter().copied().fold(f64::MIN, f64::max) - ys.iter().copied().fold(f64::MAX, f64::min);
        let labels = shapes
            .iter()
            .filter_map(|s| match s {
                Shape::Text { x, y, text, anchor: Anchor::End, .. } if *x == LEFT - 6.0 && inside(*y - 4.0) => {
                    Some(text.clone())
                }
                _ => None,
            })
            .collect();
        Some((extent.max(0.0), labels))
    }

    /// The host: ~22 GiB available, memory used growing by 313 MiB from 8 GiB, and a
    /// process growing from 10 to 313 MiB beside one steady at 120 MiB. On one 0–30 GiB axis
    /// both were flat lines; now memory used has its own fitted axis and the processes their
    /// own panel, one labelled line each, and the growth spans most of each panel.
    #[test]
    fn memory_growth_is_visible_in_panels_of_its_own() {
        const MIB: f64 = 1024.0 * 1024.0;
        const GIB: f64 = 1024.0 * MIB;
        let mut summary = full_hour();
        for series in &mut summary.series {
            let (start, end) = match series.name {
                "host.memory.used_bytes" => (8.0 * GIB, 8.0 * GIB + 313.0 * MIB),
                "host.memory.available_bytes" => (22.0 * GIB, 22.0 * GIB - 313.0 * MIB),
                _ => continue,
            };
            let buckets = series.points.len() as f64;
            for (i, point) in series.points.iter_mut().enumerate() {
                point.mean = start + (end - start) * i as f64 / (buckets - 1.0);
                point.max = point.mean;
            }
        }
        top_processes(
            &mut summary,
            &[("grower", 4242, 10.0 * MIB, 313.0 * MIB), ("steady", 77, 120.0 * MIB, 120.0 * MIB)],
        );
        let (shapes, height) = host_shapes(&summary, "report");

        let (used, labels) = panel_marks(&shapes, "memory used (total − available)", BLUE).expect("memory used panel");
        assert!(used >= PANEL * 0.5, "memory used spans {used:.1} px of {PANEL}");
        assert_eq!(labels, ["8 GiB", "8.25 GiB", "8.5 GiB"]);
        let title = format!("memory used (total − available){NOT_FROM_ZERO}");
        assert!(shapes.iter().any(|s| matches!(s, Shape::Text { text, .. } if *text == title)), "{title}");

        // The processes: a line each in the order of the top list, labelled with name and pid.
        let (grower, _) = panel_marks(&shapes, RSS_PANEL, BLUE).expect("RSS panel");
        assert!(grower >= PANEL * 0.5, "the growing process spans {grower:.1} px of {PANEL}");
        let (steady, _) = panel_marks(&shapes, RSS_PANEL, ORANGE).expect("RSS panel");
        assert!(steady < 1.0, "the steady process is flat: {steady}");
        for (label, color) in [("grower (4242)", BLUE), ("steady (77)", ORANGE)] {
            assert!(
                shapes.iter().any(|s| matches!(s, Shape::Text { text, color: c, .. } if text == label && *c == color)),
                "{label}"
            );
        }
        assert_eq!(proctor_plot::label::problems(WIDTH, height, &shapes), Vec::<String>::new());
        if let Some(path) = std::env::var_os("PROCTOR_REPORT_MEMORY_SAMPLE") {
            let overlay = Overlay { alerts: &[], at_ns: Some(summary.from_ns + 1800 * 1_000_000_000) };
            std::fs::write(path, host_png(&summary, "proctor report (memory sample)", &overlay)).expect("write");
        }
    }

    #[test]
    fn host_plot_has_every_panel_and_a_valid_png() {
        let summary = summary();
        let svg = host_svg(&summary, "report", &Overlay::default());
        for title in HOST_PANELS.iter().map(|p| p.0).chain([RSS_PANEL]) {
            assert!(svg.contains(&format!(">{title}</text>")), "{title}");
        }
        assert!(svg.contains(">cpu.user</text>") && svg.contains(">memory.used (no data)</text>"));
        let png = host_png(&summary, "report", &Overlay::default());
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let (width, height) = (
            u32::from_be_bytes([png[16], png[17], png[18], png[19]]),
            u32::from_be_bytes([png[20], png[21], png[22], png[23]]),
        );
        assert_eq!((width, height), (WIDTH as u32, host_shapes(&summary, "report").1 as u32));
    }

    #[test]
    fn correlation_plot_marks_the_slow_requests() {
        let summary = summary();
        let latencies: Vec<LatencyPoint> = (4..240u64)
            .map(|i| LatencyPoint {
                unix_ns: i * 250_000_000,
                latency_ns: if (80..120).contains(&i) { 50e6 } else { 5e6 } * (1.0 + (i % 10) as f64 / 100.0),
            })
            .collect();
        let correlation = correlate(&latencies, &summary.points, &CorrelationConfig::default());
        let (shapes, _) = correlation_shapes(&summary, &correlation, "c", &Overlay::default());
        let slow_dots = shapes.iter().filter(|s| matches!(s, Shape::Dot { color, .. } if *color == VERMILLION)).count();
        assert_eq!(slow_dots as u64, correlation.slow);
        // Drawn after every fast dot and after the threshold line, so none is hidden.
        let last_other = shapes.iter().rposition(|s| matches!(s, Shape::Dot { color, .. } if *color == BLUE));
        let first_slow = shapes.iter().position(|s| matches!(s, Shape::Dot { color, .. } if *color == VERMILLION));
        let threshold = shapes.iter().position(|s| matches!(s, Shape::Line { dashed: true, .. }));
        assert!(threshold < last_other && last_other < first_slow, "{threshold:?} {last_other:?} {first_slow:?}");
        assert!(correlation.slow > 0);
        let svg = correlation_svg(&summary, &correlation, "c", &Overlay::default());
        for (title, _) in CORRELATION_PANELS {
            assert!(svg.contains(&format!(">{title}</text>")), "{title}");
        }
    }
}
