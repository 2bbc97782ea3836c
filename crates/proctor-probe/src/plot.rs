//! A recorded run as a picture: latency of every request over time (log scale; responses
//! with an error status as crosses at their latency, vermillion for 5xx and orange for 4xx,
//! failures without a response as vermillion ticks above the panel, each kind counted in the
//! legend under it) above the log-scale histogram with the modes marked,
//! above each phase's and each `Server-Timing` substep's median and p99 (the ones carrying a
//! slow mode in vermillion). SVG or PNG.
//!
//! Pure: records and report in, the file's bytes out. This module only lays the run out as
//! `proctor_plot` shapes; `proctor_plot` writes the SVG and renders the PNG from it, as it
//! does for `proctor strace`'s plots. The picture is 800 px wide; its height grows when the
//! modes' labels need more than two rows or the modes line wraps.

use proctor_plot::axis::{elapsed_label, elapsed_ticks, log_ticks, seconds_label};
use proctor_plot::label::{
    ascent, box_width, centre_inside, descent, elide_end, elide_middle, wrap, Lanes, GAP, KERNING_ALLOWANCE,
};
use proctor_plot::{Anchor, Shape, BLUE, GRID, INK, LABEL_SIZE, ORANGE, SKY_BLUE, TITLE_SIZE, VERMILLION};

use crate::record::RequestRecord;
use crate::report::{duration_ns, Report};

/// The file formats this plot is written in, by file name (`.svg`, `.png`).
pub use proctor_plot::{Format, UnknownFormat};

const WIDTH: f64 = 800.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 30.0;
const PANEL: f64 = 190.0;
/// One line of labels.
const LINE: f64 = 14.0;

fn text(x: f64, y: f64, text: String, color: [u8; 3], anchor: Anchor) -> Shape {
    Shape::text(x, y, text, color, anchor)
}

/// Decades (log10 of ns) spanning the responses, at least one.
fn decades(report: &Report) -> Option<(f64, f64)> {
    let latency = report.latency.as_ref()?;
    let low = (latency.min_ns.max(1) as f64).log10().floor();
    let high = (latency.max_ns.max(1) as f64).log10().ceil().max(low + 1.0);
    Some((low, high))
}

/// The shapes and the picture's height.
fn layout(records: &[RequestRecord], report: &Report, title: &str) -> (Vec<Shape>, f64) {
    let plot_width = WIDTH - LEFT - RIGHT;
    let mut shapes = vec![Shape::title(10.0, 18.0, elide_middle(title, TITLE_SIZE, WIDTH - 20.0))];
    // The modes line: up to two lines, then cut.
    let mut y = 18.0;
    for line in wrap(&report.modes_summary, LABEL_SIZE, WIDTH - 20.0, 2) {
        y += 16.0;
        shapes.push(text(10.0, y, line, INK, Anchor::Start));
    }
    let Some((low, high)) = decades(report) else {
        shapes.push(text(LEFT, y + 26.0, "no complete responses".to_string(), INK, Anchor::Start));
        return (shapes, y + 60.0);
    };
    let label_height = ascent(LABEL_SIZE) + descent(LABEL_SIZE);

    // Panel A: every request's total over time, y on a log scale.
    let top_a = y + 16.0;
    let first = records.iter().map(|r| r.sent_unix_ns).min().unwrap_or(0);
    let span_seconds = report.span_seconds.max(1e-9);
    let x_of_time = |seconds: f64| LEFT + (seconds / span_seconds).clamp(0.0, 1.0) * plot_width;
    let y_of = |ns: f64| top_a + PANEL - ((ns.max(1.0).log10() - low) / (high - low)) * PANEL;
    for (decade, labelled) in log_ticks(low, high, PANEL / (high - low), label_height + 2.0) {
        let y = y_of(10f64.powf(decade));
        if decade.fract() == 0.0 {
            shapes.push(Shape::rect(LEFT, y, plot_width, 1.0, GRID));
        }
        if labelled {
            shapes.push(text(LEFT - 6.0, y + 4.0, seconds_label(10f64.powf(decade) * 1e-9), INK, Anchor::End));
        }
    }
    // Failures without a response first (above the panel: they have no latency), then the
    // good responses, then the error statuses as crosses over them, so none hides under a dot.
    let x_of_record = |record: &RequestRecord| x_of_time(record.sent_unix_ns.saturating_sub(first) as f64 / 1e9);
    let mut counts = [0usize; 4];
    for record in records {
        counts[Kind::of(record) as usize] += 1;
    }
    for record in records.iter().filter(|r| Kind::of(r) == Kind::NoResponse) {
        shapes.push(Shape::rect(x_of_record(record) - 0.75, top_a - 7.0, 1.5, 6.0, VERMILLION));
    }
    for record in records.iter().filter(|r| Kind::of(r) == Kind::Good) {
        shapes.push(Shape::dot(x_of_record(record), y_of(record.total_ns as f64), 1.5, BLUE, None));
    }
    for kind in [Kind::ClientError, Kind::ServerError] {
        for record in records.iter().filter(|r| Kind::of(r) == kind) {
            shapes.extend(cross(x_of_record(record), y_of(record.total_ns as f64), kind.color()));
        }
    }
    let bottom_a = top_a + PANEL;
    shapes.push(Shape::rect(LEFT, bottom_a, plot_width, 1.0, INK));
    // Elapsed-time ticks, 1-2-5 seconds (or minutes, hours), labelled while they have room.
    let ticks: Vec<f64> = elapsed_ticks(span_seconds, 9).into_iter().filter(|t| *t <= span_seconds * 1.0001).collect();
    let step = ticks.get(1).copied().unwrap_or(span_seconds);
    let mut last_right = f64::MIN;
    for t in &ticks {
        let x = x_of_time(*t);
        shapes.push(Shape::rect(x, bottom_a, 1.0, 4.0, INK));
        let label = elapsed_label(*t, step);
        let centre = centre_inside(x, &label, LABEL_SIZE, 0.0, WIDTH);
        let half = box_width(&label, LABEL_SIZE) / 2.0;
        if centre - half >= last_right + GAP {
            last_right = centre + half;
            // Two pixels lower than a label's line, to clear the lowest latency label.
            shapes.push(text(centre, bottom_a + 18.0, label, INK, Anchor::Middle));
        }
    }
    legend(&mut shapes, bottom_a + 18.0 + LINE + 2.0, &counts);

    // Panel B: the log-scale histogram with the modes, their labels in rows above it (the
    // biggest modes first, nearest the bars).
    let x_of = |ns: f64| LEFT + ((ns.max(1.0).log10() - low) / (high - low)) * plot_width;
    let mut modes: Vec<&proctor_modes::Mode> = report.modes.iter().flat_map(|m| &m.modes).collect();
    modes.sort_by(|a, b| b.fraction.total_cmp(&a.fraction));
    let mut lanes = Lanes::new(KERNING_ALLOWANCE, WIDTH - KERNING_ALLOWANCE);
    let placed: Vec<(f64, String, f64, usize)> = modes
        .iter()
        .map(|mode| {
            let label = format!("{} ({:.0}%)", duration_ns(mode.value), mode.fraction * 100.0);
            let width = box_width(&label, LABEL_SIZE);
            let (left, lane) = lanes.place(x_of(mode.value), width);
            (x_of(mode.value), label, left + width / 2.0, lane)
        })
        .collect();
    // Two rows are always kept, so most pictures are the same size.
    let rows = lanes.len().max(2) as f64;
    let top_b = bottom_a + 18.0 + LINE + 2.0 + 8.0 + rows * LINE;
    let base = top_b + PANEL;
    let most = report.histogram.iter().map(|row| row.count).max().unwrap_or(1).max(1) as f64;
    // Empty rows draw nothing; a row of one request is at least a pixel tall.
    for row in report.histogram.iter().filter(|row| row.count > 0) {
        let x = x_of(row.low_ns as f64);
        let width = (x_of(row.high_ns as f64) - x - 0.5).max(0.5);
        let height = (row.count as f64 / most * PANEL).max(1.0);
        shapes.push(Shape::rect(x, base - height, width, height, BLUE));
    }
    shapes.push(Shape::rect(LEFT, base, plot_width, 1.0, INK));
    let min_spacing = box_width("100 µs", LABEL_SIZE) + GAP;
    for (decade, labelled) in log_ticks(low, high, plot_width / (high - low), min_spacing) {
        let x = x_of(10f64.powf(decade));
        shapes.push(Shape::rect(x, base, 1.0, 4.0, INK));
        if labelled {
            let label = seconds_label(10f64.powf(decade) * 1e-9);
            let centre = centre_inside(x, &label, LABEL_SIZE, 0.0, WIDTH);
            shapes.push(text(centre, base + 16.0, label, INK, Anchor::Middle));
        }
    }
    for (x, label, centre, lane) in placed {
        shapes.push(Shape::rect(x, top_b, 1.0, PANEL, VERMILLION));
        shapes.push(text(centre, top_b - 4.0 - lane as f64 * LINE, label, VERMILLION, Anchor::Middle));
    }
    let bottom = phases_panel(&mut shapes, report, base + 38.0);
    (shapes, bottom)
}

/// How a request is drawn in the latency panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A 1xx–3xx response: a blue dot at its latency.
    Good = 0,
    /// A complete 4xx response: an orange cross at its latency.
    ClientError = 1,
    /// A complete 5xx response: a vermillion cross at its latency.
    ServerError = 2,
    /// No complete response (refused, timed out, cut short): a vermillion tick above the
    /// panel, as its `total_ns` is how long it took to fail, not a latency.
    NoResponse = 3,
}

impl Kind {
    fn of(record: &RequestRecord) -> Kind {
        match record.status {
            _ if !record.has_response() => Kind::NoResponse,
            Some(status) if status >= 500 => Kind::ServerError,
            Some(status) if status >= 400 => Kind::ClientError,
            _ => Kind::Good,
        }
    }

    fn color(self) -> [u8; 3] {
        match self {
            Kind::Good => BLUE,
            Kind::ClientError => ORANGE,
            Kind::ServerError | Kind::NoResponse => VERMILLION,
        }
    }
}

/// Half the width of a cross.
const CROSS: f64 = 3.0;

/// An × centred at (`x`, `y`): two diagonal strokes 1.5 px wide.
fn cross(x: f64, y: f64, color: [u8; 3]) -> [Shape; 2] {
    let stroke = |x1: f64, y1: f64, x2: f64, y2: f64| Shape::Line { x1, y1, x2, y2, color, width: 1.5, dashed: false };
    [stroke(x - CROSS, y - CROSS, x + CROSS, y + CROSS), stroke(x - CROSS, y + CROSS, x + CROSS, y - CROSS)]
}

/// The latency panel's caption at baseline `y`: what the x axis is, then each kind of request
/// that occurred, its mark and its count (`counts` by [`Kind`]).
fn legend(shapes: &mut Vec<Shape>, y: f64, counts: &[usize; 4]) {
    let caption = "time since the first request";
    shapes.push(text(LEFT, y, caption.to_string(), INK, Anchor::Start));
    let mut x = LEFT + box_width(caption, LABEL_SIZE) + 3.0 * GAP;
    let entries = [
        (Kind::Good, "response"),
        (Kind::ClientError, "HTTP 4xx"),
        (Kind::ServerError, "HTTP 5xx"),
        (Kind::NoResponse, "no response (above the panel)"),
    ];
    let middle = y - ascent(LABEL_SIZE) / 2.0 + 1.0;
    for (kind, name) in entries {
        let count = counts[kind as usize];
        if count == 0 {
            continue;
        }
        match kind {
            Kind::Good => shapes.push(Shape::dot(x + CROSS, middle, 1.5, BLUE, None)),
            Kind::ClientError | Kind::ServerError => shapes.extend(cross(x + CROSS, middle, kind.color())),
            Kind::NoResponse => shapes.push(Shape::rect(x + CROSS - 0.75, middle - 3.0, 1.5, 6.0, VERMILLION)),
        }
        let label = format!("{name}: {count}");
        // Orange is too light for text; the 4xx entry's cross carries its colour.
        let color = if kind == Kind::ServerError || kind == Kind::NoResponse { VERMILLION } else { INK };
        shapes.push(text(x + 2.0 * CROSS + 4.0, y, label.clone(), color, Anchor::Start));
        x += 2.0 * CROSS + 4.0 + box_width(&label, LABEL_SIZE) + 2.0 * GAP;
    }
}

/// Substeps drawn at most; the rest are said in the panel's caption.
const PLOTTED_SUBSTEPS: usize = 16;
/// Where panel C's bars start: names sit left of it.
const PHASE_LEFT: f64 = 160.0;
const PHASE_ROW: f64 = 16.0;

/// Panel C, below the histogram from `top`: each phase, then each of the server's substeps
/// (`Server-Timing`), as a bar to its median and a tick at its p99 on a log scale; the phase
/// and substep that carry a slow mode are vermillion. Returns the picture's new bottom.
fn phases_panel(shapes: &mut Vec<Shape>, report: &Report, top: f64) -> f64 {
    let carriers: Vec<&str> = report
        .attribution
        .iter()
        .flat_map(|blame| std::iter::once(blame.phase).chain(blame.substep.as_deref()))
        .collect();
    let mut rows: Vec<(&str, u64, u64, bool)> =
        report.phases.iter().map(|phase| (phase.name, phase.median_ns, phase.p99_ns, false)).collect();
    rows.extend(
        report
            .substeps
            .iter()
            .take(PLOTTED_SUBSTEPS)
            .map(|step| (step.name.as_str(), step.median_ns, step.p99_ns, true)),
    );
    let positive = rows.iter().flat_map(|row| [row.1, row.2]).filter(|&value| value > 0);
    let (Some(smallest), Some(largest)) = (positive.clone().min(), positive.max()) else {
        return top;
    };
    let low = (smallest as f64).log10().floor();
    let high = (largest as f64).log10().ceil().max(low + 1.0);
    let width = WIDTH - PHASE_LEFT - RIGHT;
    let x_of = |ns: u64| PHASE_LEFT + (((ns.max(1) as f64).log10() - low) / (high - low)).clamp(0.0, 1.0) * width;
    let left_out = report.substeps.len().saturating_sub(PLOTTED_SUBSTEPS);
    let mut caption = if report.substeps.is_empty() {
        "phases: bar to the median, tick at p99".to_string()
    } else {
        "phases, then the server's substeps (Server-Timing): bar to the median, tick at p99".to_string()
    };
    if !report.attribution.is_empty() {
        caption.push_str("; vermillion: carries a slow mode");
    }
    if left_out > 0 {
        caption.push_str(&format!("; {left_out} more substeps not drawn"));
    }
    let mut y = top + 8.0;
    for line in wrap(&caption, LABEL_SIZE, WIDTH - 20.0, 2) {
        y += LINE + 2.0;
        shapes.push(text(10.0, y, line, INK, Anchor::Start));
    }
    let first_row = y + 8.0;
    for (index, &(name, median_ns, p99_ns, substep)) in rows.iter().enumerate() {
        let row_top = first_row + index as f64 * PHASE_ROW;
        let color = match (carriers.contains(&name), substep) {
            (true, _) => VERMILLION,
            (false, true) => SKY_BLUE,
            (false, false) => BLUE,
        };
        let label = elide_end(name, LABEL_SIZE, PHASE_LEFT - 16.0);
        shapes.push(text(PHASE_LEFT - 6.0, row_top + 11.0, label, INK, Anchor::End));
        if median_ns > 0 {
            shapes.push(Shape::rect(PHASE_LEFT, row_top + 3.0, (x_of(median_ns) - PHASE_LEFT).max(1.0), 9.0, color));
        }
        if p99_ns > 0 {
            shapes.push(Shape::rect(x_of(p99_ns) - 0.75, row_top + 1.0, 1.5, 13.0, INK));
        }
    }
    let axis = first_row + rows.len() as f64 * PHASE_ROW + 2.0;
    shapes.push(Shape::rect(PHASE_LEFT, axis, width, 1.0, INK));
    let min_spacing = box_width("100 µs", LABEL_SIZE) + GAP;
    for (decade, labelled) in log_ticks(low, high, width / (high - low), min_spacing) {
        let x = x_of(10f64.powf(decade).round() as u64);
        shapes.push(Shape::rect(x, axis, 1.0, 4.0, INK));
        if labelled {
            let label = seconds_label(10f64.powf(decade) * 1e-9);
            let centre = centre_inside(x, &label, LABEL_SIZE, 0.0, WIDTH);
            shapes.push(text(centre, axis + 16.0, label, INK, Anchor::Middle));
        }
    }
    axis + 30.0
}

/// The plot as an SVG document.
pub fn svg(records: &[RequestRecord], report: &Report, title: &str) -> String {
    let (shapes, height) = layout(records, report, title);
    proctor_plot::svg(WIDTH as u32, height as u32, &shapes)
}

/// The plot as a PNG image (RGB, 8 bits per channel): the SVG's picture.
pub fn png(records: &[RequestRecord], report: &Report, title: &str) -> Vec<u8> {
    let (shapes, height) = layout(records, report, title);
    proctor_plot::png(WIDTH as u32, height as u32, &shapes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Phases;
    use crate::report::{build, ReportConfig};

    fn records() -> Vec<RequestRecord> {
        (0..60u64)
            .map(|seq| RequestRecord {
                run: "r".into(),
                seq,
                burst: None,
                sent_unix_ns: seq * 10_000_000,
                total_ns: if seq % 2 == 0 { 20_000_000 } else { 80_000_000 } + seq * 1000,
                phases: Phases::default(),
                reused: true,
                tls_verified: None,
                status: Some(200),
                body_bytes: 2,
                error: None,
                error_detail: None,
                url: None,
                server_timing: Vec::new(),
                server_timing_dropped: 0,
            })
            .collect()
    }

    /// What keeps the labels from being read (see `proctor_plot::label::problems`), after
    /// checking that the PNG has the layout's size.
    fn unreadable(records: &[RequestRecord], report: &Report, title: &str) -> Vec<String> {
        let (shapes, height) = layout(records, report, title);
        let png = png(records, report, title);
        let size = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
        assert_eq!((size(16), size(20)), (WIDTH as u32, height as u32));
        proctor_plot::label::problems(WIDTH, height, &shapes)
    }

    #[test]
    fn labels_stay_inside_the_picture_and_apart() {
        let records = records();
        let report = build(&records, &ReportConfig::default());
        let mut problems = unreadable(&records, &report, "proctor probe http://127.0.0.1:8080/");

        // The issue's run: six modes, four of them within 13 ms of each other, a failure, a
        // span of latencies from 40 µs to 12 s, and a title naming many files.
        let mut wide = records.clone();
        wide[0].total_ns = 40_000;
        wide[1].total_ns = 12_000_000_000;
        wide[2].status = None;
        wide[2].error = Some(crate::ErrorClass::Timeout);
        let mut report = build(&wide, &ReportConfig::default());
        let modes = report.modes.as_mut().expect("modes");
        let template = modes.modes[0];
        modes.modes = [59.9e6, 63.9e6, 68.2e6, 72.0e6, 132e6, 224e6]
            .iter()
            .map(|value| proctor_modes::Mode { value: *value, fraction: 1.0 / 6.0, ..template })
            .collect();
        report.modes_summary = "6 modes: 59.9 ms (17 %), 63.9 ms (17 %), 68.2 ms (17 %), 72.0 ms (17 %), 132 ms \
                                (17 %), 224 ms (17 %); 132 ms ≈ 2 × 63.9 ms; 224 ms ≈ 3 × 72.0 ms; the 64 ms mode is \
                                quantized in 4 ms steps"
            .to_string();
        let files: Vec<String> = (0..12).map(|i| format!("/var/tmp/probe-runs/run-{i:02}.jsonl")).collect();
        problems.extend(unreadable(&wide, &report, &format!("proctor probe analyze {}", files.join(" "))));

        // Nothing answered: the one line that says so.
        let failed: Vec<RequestRecord> = records
            .iter()
            .map(|r| RequestRecord { status: None, error: Some(crate::ErrorClass::Refused), ..r.clone() })
            .collect();
        problems.extend(unreadable(&failed, &build(&failed, &ReportConfig::default()), "t"));
        assert!(problems.is_empty(), "{} label problems:\n{}", problems.len(), problems.join("\n"));
    }

    /// Phases, then the server's substeps, the slow mode's carriers in vermillion, every label
    /// readable; a long substep name is cut to its column.
    #[test]
    fn phases_and_server_substeps_are_drawn_with_the_carriers_marked() {
        let records: Vec<RequestRecord> = records()
            .into_iter()
            .map(|mut record| {
                let slow = record.total_ns >= 80_000_000;
                record.phases.write_ns = Some(20_000);
                record.phases.wait_ns = Some(record.total_ns - 100_000);
                record.phases.transfer_ns = Some(80_000);
                let step = |name: &str, ms: u64| crate::Substep {
                    name: name.to_string(),
                    dur_ns: Some(ms * 1_000_000),
                    desc: None,
                };
                record.server_timing = vec![
                    step("db", 3),
                    step("render", if slow { 70 } else { 10 }),
                    step(&"a-very-long-substep-name-".repeat(2), 1),
                ];
                record
            })
            .collect();
        let report = build(&records, &ReportConfig::default());
        assert_eq!(report.attribution[0].substep.as_deref(), Some("server:render"));
        let (shapes, height) = layout(&records, &report, "t");
        let labelled = |wanted: &str| {
            shapes.iter().any(|shape| matches!(shape, Shape::Text { text, .. } if text.as_str() == wanted))
        };
        for name in ["write", "wait", "transfer", "server:db", "server:render"] {
            assert!(labelled(name), "{name}");
        }
        // Bars: 3 phases, 3 substeps; vermillion for wait and server:render (beside the
        // histogram's mode lines, which are 1 px wide).
        let bars = |color: [u8; 3]| {
            shapes
                .iter()
                .filter(|shape| matches!(shape, Shape::Rect { color: c, height, .. } if *c == color && *height == 9.0))
                .count()
        };
        assert_eq!((bars(BLUE), bars(SKY_BLUE), bars(VERMILLION)), (2, 2, 2));
        assert_eq!(proctor_plot::label::problems(WIDTH, height, &shapes), Vec::<String>::new());
        if let Some(path) = std::env::var_os("PROCTOR_PLOT_SAMPLE") {
            std::fs::write(path, png(&records, &report, "proctor probe http://127.0.0.1:8080/ (sample)"))
                .expect("write");
        }
    }

    /// The centres of the crosses of `color`: one per pair of strokes.
    fn crosses(shapes: &[Shape], color: [u8; 3]) -> Vec<(f64, f64)> {
        shapes
            .iter()
            .filter_map(|shape| match shape {
                Shape::Line { x1, y1, x2, y2, color: c, .. } if *c == color && y2 > y1 && x2 > x1 => {
                    Some(((x1 + x2) / 2.0, (y1 + y2) / 2.0))
                }
                _ => None,
            })
            .collect()
    }

    /// An HTTP 500 is a failed request, not a success: a vermillion cross at its latency, and
    /// the legend under the panel counts it (it was a blue dot like every 200).
    #[test]
    fn server_errors_are_crosses_and_counted_in_the_legend() {
        let mut records = records();
        for seq in [5, 6, 7] {
            records[seq].status = Some(500);
            records[seq].error = Some(crate::ErrorClass::Http5xx);
        }
        records[9].status = Some(404);
        records[9].error = Some(crate::ErrorClass::Http4xx);
        records[11].status = None;
        records[11].error = Some(crate::ErrorClass::Refused);
        let report = build(&records, &ReportConfig::default());
        let (shapes, height) = layout(&records, &report, "t");
        let dots = shapes.iter().filter(|s| matches!(s, Shape::Dot { color, .. } if *color == BLUE)).count();
        // 55 good responses, and the legend's dot.
        assert_eq!(dots, 55 + 1);
        // The panel's axis: every mark of a request lies above it, the legend's below.
        let axis = shapes
            .iter()
            .find_map(|s| match s {
                Shape::Rect { y, width, color, .. } if *color == INK && *width == WIDTH - LEFT - RIGHT => Some(*y),
                _ => None,
            })
            .expect("the latency panel's axis");
        let (in_panel, in_legend): (Vec<_>, Vec<_>) =
            crosses(&shapes, VERMILLION).into_iter().partition(|(_, y)| *y < axis);
        assert_eq!((in_panel.len(), in_legend.len()), (3, 1), "{in_panel:?} {in_legend:?}");
        // At each one's time (requests are sent 10 ms apart).
        let x_of = |seq: f64| LEFT + seq * 0.01 / report.span_seconds * (WIDTH - LEFT - RIGHT);
        for ((x, _), seq) in in_panel.iter().zip([5.0, 6.0, 7.0]) {
            assert!((x - x_of(seq)).abs() < 0.01, "{x} vs {}", x_of(seq));
        }
        assert_eq!(crosses(&shapes, ORANGE).len(), 1 + 1);
        let legend: Vec<(&str, [u8; 3])> = shapes
            .iter()
            .filter_map(|s| match s {
                Shape::Text { text, color, y, .. } if *y > axis + 20.0 && *y < axis + 40.0 => {
                    Some((text.as_str(), *color))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            legend,
            [
                ("time since the first request", INK),
                ("response: 55", INK),
                ("HTTP 4xx: 1", INK),
                ("HTTP 5xx: 3", VERMILLION),
                ("no response (above the panel): 1", VERMILLION),
            ]
        );
        assert_eq!(proctor_plot::label::problems(WIDTH, height, &shapes), Vec::<String>::new());
        if let Some(path) = std::env::var_os("PROCTOR_PROBE_PLOT_SAMPLE") {
            std::fs::write(path, png(&records, &report, "proctor probe http://127.0.0.1:8080/ (5xx sample)"))
                .expect("write");
        }
    }

    #[test]
    fn empty_histogram_rows_draw_no_bar() {
        // Between 20 and 80 ms most rows are empty; a 1 px floor once drew them all as a line.
        let records = records();
        let report = build(&records, &ReportConfig::default());
        let rows = report.histogram.iter().filter(|row| row.count > 0).count();
        assert!(rows < report.histogram.len(), "the fixture has empty rows");
        let (shapes, _) = layout(&records, &report, "t");
        let bars = shapes.iter().filter(|s| matches!(s, Shape::Rect { color, .. } if *color == BLUE)).count();
        assert_eq!(bars, rows);
    }

    #[test]
    fn svg_marks_the_modes_and_png_is_well_formed() {
        let records = records();
        let report = build(&records, &ReportConfig::default());
        let svg = svg(&records, &report, "t");
        assert_eq!(svg.matches(" ms (50%)</text>").count(), 2, "two mode labels: {svg}");
        assert!(svg.contains(">20.") && svg.contains(">80."), "{svg}");
        let png = png(&records, &report, "t");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let length = u32::from_be_bytes([png[33], png[34], png[35], png[36]]) as usize;
        let mut inflated = Vec::new();
        let mut decoder = flate2::read::ZlibDecoder::new(&png[41..41 + length]);
        std::io::Read::read_to_end(&mut decoder, &mut inflated).expect("valid zlib");
        let height = layout(&records, &report, "t").1;
        assert_eq!(inflated.len(), height as usize * (1 + WIDTH as usize * 3));
    }
}
