//! Per-syscall wall-time histograms as SVG or PNG. Pure: returns the file's bytes.
//!
//! `layout` turns a report into `proctor_plot` shapes once; `proctor_plot` writes them as
//! SVG and renders that SVG as a PNG. Bars regroup the log-scale buckets into 20 per decade;
//! peaks are marked in vermillion with their value, their labels stacked in as many rows as
//! they need to stay apart. This module does the layout only: no drawing.

use proctor_plot::axis::{log_ticks, seconds_label};
use proctor_plot::label::{box_width, centre_inside, elide_end, Lanes, GAP};
use proctor_plot::{Anchor, Shape, BLUE, INK, LABEL_SIZE, VERMILLION};

use crate::report::{duration_secs, Report, SyscallReport};

/// The file formats this plot is written in, by file name (`.svg`, `.png`).
pub use proctor_plot::{Format, UnknownFormat};

const WIDTH: f64 = 760.0;
/// A panel whose peak labels fit in one row; each further row adds a [`LANE`].
const PANEL_HEIGHT: f64 = 170.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 30.0;
/// The panel's title line, from the panel's top.
const TITLE_BASELINE: f64 = 16.0;
/// One row of peak labels.
const LANE: f64 = 14.0;
/// From the title's baseline to the baseline of the highest row of peak labels.
const FIRST_LANE: f64 = 14.0;
/// From the lowest row of peak labels' baseline to the bars' top.
const LANE_TO_PLOT: f64 = 6.0;
/// Below the bars: ticks and their labels.
const BOTTOM: f64 = 30.0;
const PLOT_HEIGHT: f64 = PANEL_HEIGHT - TITLE_BASELINE - FIRST_LANE - LANE_TO_PLOT - BOTTOM;
const BARS_PER_DECADE: f64 = 20.0;

/// The shapes of one panel per syscall (the `panels` with the most total wall time), and
/// the picture's height.
fn layout(report: &Report, panels: usize) -> (Vec<Shape>, f64) {
    let chosen: Vec<&SyscallReport> = report.syscalls.iter().filter(|syscall| syscall.timed > 0).take(panels).collect();
    let mut shapes = Vec::new();
    if chosen.is_empty() {
        shapes.push(Shape::text(20.0, 40.0, "no timed calls (was strace run with -T?)", INK, Anchor::Start));
        return (shapes, PANEL_HEIGHT);
    }
    let mut y0 = 0.0;
    for syscall in chosen {
        y0 += panel(&mut shapes, syscall, y0);
    }
    (shapes, y0)
}

/// The plot as an SVG document.
pub fn svg(report: &Report, panels: usize) -> String {
    let (shapes, height) = layout(report, panels);
    proctor_plot::svg(WIDTH as u32, height as u32, &shapes)
}

/// The plot as a PNG image (RGB, 8 bits per channel): the SVG's picture.
pub fn png(report: &Report, panels: usize) -> Vec<u8> {
    let (shapes, height) = layout(report, panels);
    proctor_plot::png(WIDTH as u32, height as u32, &shapes)
}

/// Counts regrouped on a log10 axis: `(decade position, count)`.
fn bars(syscall: &SyscallReport) -> Vec<(f64, u64)> {
    let mut bars: Vec<(f64, u64)> = Vec::new();
    for bucket in &syscall.histogram_ns {
        // Zero-length calls (`<0.000000>`) sit at half strace's resolution, 0.5 µs.
        let middle_seconds = ((bucket.low as f64 + bucket.high as f64) / 2.0 / 1e9).max(0.5e-6);
        let slot = (middle_seconds.log10() * BARS_PER_DECADE).floor() / BARS_PER_DECADE;
        match bars.last_mut() {
            Some(last) if last.0 == slot => last.1 += bucket.count,
            _ => bars.push((slot, bucket.count)),
        }
    }
    bars
}

/// One syscall's panel from `y0` down; returns its height.
fn panel(shapes: &mut Vec<Shape>, syscall: &SyscallReport, y0: f64) -> f64 {
    let bars = bars(syscall);
    let (Some(first), Some(last)) = (bars.first(), bars.last()) else {
        return 0.0;
    };
    let low = first.0.floor();
    let high = (last.0 + 1.0 / BARS_PER_DECADE).ceil().max(low + 1.0);
    let plot_width = WIDTH - LEFT - RIGHT;
    let x_of = |decade: f64| LEFT + (decade - low) / (high - low) * plot_width;

    // Peak labels first: how many rows they need decides where the bars start. The biggest
    // peaks are placed first, so they get the row nearest the bars.
    let mut peaks: Vec<_> = syscall.peaks.iter().collect();
    peaks.sort_by_key(|peak| std::cmp::Reverse(peak.count));
    let mut lanes = Lanes::new(2.0, WIDTH - 2.0);
    let placed: Vec<(f64, String, f64, usize)> = peaks
        .iter()
        .map(|peak| {
            let x = x_of(peak.seconds.max(0.5e-6).log10());
            let label = format!("{} (n={})", duration_secs(peak.seconds), peak.count);
            let width = box_width(&label, LABEL_SIZE);
            let (left, lane) = lanes.place(x, width);
            (x, label, left + width / 2.0, lane)
        })
        .collect();
    let rows = lanes.len().max(1) as f64;
    let lane_baseline = |lane: usize| y0 + TITLE_BASELINE + FIRST_LANE + (rows - 1.0 - lane as f64) * LANE;
    let top = lane_baseline(0) + LANE_TO_PLOT;
    let base = top + PLOT_HEIGHT;

    let title = format!(
        "{}: {} calls, {} total, p50 {}",
        syscall.name,
        syscall.count,
        duration_secs(syscall.total_seconds),
        syscall.p50_seconds.map_or_else(|| "-".to_string(), duration_secs)
    );
    let title = elide_end(&title, LABEL_SIZE, WIDTH - LEFT - 4.0);
    shapes.push(Shape::text(LEFT, y0 + TITLE_BASELINE, title, INK, Anchor::Start));

    let most = bars.iter().map(|bar| bar.1).max().unwrap_or(1).max(1) as f64;
    let bar_width = plot_width / ((high - low) * BARS_PER_DECADE);
    for (decade, count) in &bars {
        // At least a pixel: a bar of one call among thousands still shows.
        let height = ((*count as f64 / most) * PLOT_HEIGHT).max(1.0);
        shapes.push(Shape::rect(x_of(*decade), base - height, (bar_width - 0.5).max(0.5), height, BLUE));
    }
    shapes.push(Shape::line(LEFT, base, LEFT + plot_width, base, INK));
    // Decade ticks, labelled while the labels have room; 2× and 5× too when they do.
    let min_spacing = box_width("100 µs", LABEL_SIZE) + GAP;
    for (decade, labelled) in log_ticks(low, high, plot_width / (high - low), min_spacing) {
        let x = x_of(decade);
        shapes.push(Shape::line(x, base, x, base + 4.0, INK));
        if labelled {
            let label = seconds_label(10f64.powf(decade));
            let centre = centre_inside(x, &label, LABEL_SIZE, 0.0, WIDTH);
            shapes.push(Shape::text(centre, base + 16.0, label, INK, Anchor::Middle));
        }
    }
    for (x, label, centre, lane) in placed {
        shapes.push(Shape::line(x, top, x, base, VERMILLION));
        shapes.push(Shape::text(centre, lane_baseline(lane), label, VERMILLION, Anchor::Middle));
    }
    base + BOTTOM - y0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::{feed_reader, Analyzer, AnalyzerConfig};
    use crate::report::{self, Peak};

    fn report() -> Report {
        let mut text = String::new();
        for index in 0..60 {
            let seconds = if index % 2 == 0 { 0.25 } else { 0.5 };
            text.push_str(&format!("futex(0x1, FUTEX_WAIT, 0, NULL) = -1 ETIMEDOUT (x) <{seconds:.6}>\n"));
        }
        let mut analyzer = Analyzer::new(AnalyzerConfig::default());
        feed_reader(&mut analyzer, text.as_bytes()).expect("in-memory read");
        report::build(analyzer.finish())
    }

    #[test]
    fn svg_marks_the_peaks() {
        let svg = svg(&report(), 5);
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains(">250 ms (n=30)</text>"), "{svg}");
        assert!(svg.contains(">500 ms (n=30)</text>"), "{svg}");
    }

    /// A real capture (tests/fixtures/capture.sh): futex's four peaks from 4 µs to 1 s.
    fn capture() -> Report {
        let text = include_bytes!("../tests/fixtures/f_tt_T.log");
        let mut analyzer = Analyzer::new(AnalyzerConfig::default());
        feed_reader(&mut analyzer, &text[..]).expect("in-memory read");
        report::build(analyzer.finish())
    }

    /// What keeps the labels from being read at the size the CLI draws (`--top` panels, 15 by
    /// default; see `proctor_plot::label::problems`), after checking the PNG has that size.
    fn unreadable(report: &Report, panels: usize) -> Vec<String> {
        let (shapes, height) = layout(report, panels);
        let png = png(report, panels);
        let size = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
        assert_eq!((size(16), size(20)), (WIDTH as u32, height as u32));
        proctor_plot::label::problems(WIDTH, height, &shapes)
    }

    #[test]
    fn labels_stay_inside_the_picture_and_apart() {
        let mut problems = unreadable(&capture(), 15);
        problems.extend(unreadable(&report(), 5));
        // Peaks crowded together, and at both ends of the axis (100 ms and 1 s).
        let mut crowded = report();
        let futex = &mut crowded.syscalls[0];
        let template = futex.peaks[0];
        futex.peaks =
            [0.1, 0.25, 0.26, 0.27, 0.5, 0.999].iter().map(|seconds| Peak { seconds: *seconds, ..template }).collect();
        problems.extend(unreadable(&crowded, 5));
        // No timed calls: the one line that says so.
        let mut untimed = report();
        untimed.syscalls.clear();
        problems.extend(unreadable(&untimed, 5));
        assert!(problems.is_empty(), "{} label problems:\n{}", problems.len(), problems.join("\n"));
    }

    #[test]
    fn png_has_valid_structure() {
        let png = png(&report(), 5);
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(u32::from_be_bytes([png[16], png[17], png[18], png[19]]), 760);
        assert_eq!(&png[png.len() - 8..png.len() - 4], b"IEND");
        // The IDAT must inflate back to height × (1 + width × 3) bytes.
        let length = u32::from_be_bytes([png[33], png[34], png[35], png[36]]) as usize;
        assert_eq!(&png[37..41], b"IDAT");
        let mut inflated = Vec::new();
        let mut decoder = flate2::read::ZlibDecoder::new(&png[41..41 + length]);
        std::io::Read::read_to_end(&mut decoder, &mut inflated).expect("valid zlib");
        assert_eq!(inflated.len(), 170 * (1 + 760 * 3));
    }
}
