//! Per-syscall wall-time histograms as SVG or PNG. Pure: returns the file's bytes.
//!
//! `layout` turns a report into `proctor_plot` shapes once; `proctor_plot` writes them as
//! SVG or rasterizes them into a PNG. Bars regroup the log-scale buckets into 20 per decade;
//! peaks are marked in red with their value. This module does the layout only: no drawing.

use proctor_plot::{Anchor, Shape, BLUE, INK, VERMILLION};

use crate::report::{human_seconds, Report, SyscallReport};

const WIDTH: f64 = 760.0;
const PANEL_HEIGHT: f64 = 170.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 30.0;
const BARS_PER_DECADE: f64 = 20.0;

/// The shapes of one panel per syscall (the `panels` with the most total wall time), and
/// the picture's height.
fn layout(report: &Report, panels: usize) -> (Vec<Shape>, f64) {
    let chosen: Vec<&SyscallReport> = report.syscalls.iter().filter(|syscall| syscall.timed > 0).take(panels).collect();
    let height = (chosen.len().max(1) as f64) * PANEL_HEIGHT;
    let mut shapes = Vec::new();
    if chosen.is_empty() {
        shapes.push(Shape::text(20.0, 40.0, "no timed calls (was strace run with -T?)", INK, Anchor::Start));
    }
    for (index, syscall) in chosen.iter().enumerate() {
        panel(&mut shapes, syscall, index as f64 * PANEL_HEIGHT);
    }
    (shapes, height)
}

/// The plot as an SVG document.
pub fn svg(report: &Report, panels: usize) -> String {
    let (shapes, height) = layout(report, panels);
    proctor_plot::svg(WIDTH as u32, height as u32, &shapes)
}

/// The plot as a PNG image (RGB, 8 bits per channel).
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

fn panel(shapes: &mut Vec<Shape>, syscall: &SyscallReport, y0: f64) {
    let bars = bars(syscall);
    let (Some(first), Some(last)) = (bars.first(), bars.last()) else {
        return;
    };
    let low = first.0.floor();
    let high = (last.0 + 1.0 / BARS_PER_DECADE).ceil().max(low + 1.0);
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_height = PANEL_HEIGHT - TOP - BOTTOM;
    let x_of = |decade: f64| LEFT + (decade - low) / (high - low) * plot_width;
    let base = y0 + TOP + plot_height;
    let most = bars.iter().map(|bar| bar.1).max().unwrap_or(1).max(1) as f64;

    let title = format!(
        "{}: {} calls, {} total, p50 {}",
        syscall.name,
        syscall.count,
        human_seconds(syscall.total_seconds),
        syscall.p50_seconds.map_or_else(|| "-".to_string(), human_seconds)
    );
    shapes.push(Shape::text(LEFT, y0 + 16.0, title, INK, Anchor::Start));
    let bar_width = plot_width / ((high - low) * BARS_PER_DECADE);
    for (decade, count) in &bars {
        let height = (*count as f64 / most) * plot_height;
        shapes.push(Shape::Rect {
            x: x_of(*decade),
            y: base - height,
            width: (bar_width - 0.5).max(0.5),
            height,
            color: BLUE,
        });
    }
    shapes.push(Shape::line(LEFT, base, LEFT + plot_width, base, INK));
    let mut decade = low;
    while decade <= high {
        let x = x_of(decade);
        shapes.push(Shape::line(x, base, x, base + 4.0, INK));
        shapes.push(Shape::text(x, base + 16.0, human_seconds(10f64.powf(decade)), INK, Anchor::Middle));
        decade += 1.0;
    }
    for peak in &syscall.peaks {
        let x = x_of(peak.seconds.max(0.5e-6).log10());
        shapes.push(Shape::line(x, y0 + TOP, x, base, VERMILLION));
        let label = format!("{} (n={})", human_seconds(peak.seconds), peak.count);
        shapes.push(Shape::text(x, y0 + TOP - 2.0, label, VERMILLION, Anchor::Middle));
    }
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
