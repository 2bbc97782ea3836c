//! A recorded run as a picture: latency of every request over time (log scale, failures
//! as red ticks on top) above the log-scale histogram with the modes marked. SVG or PNG.
//!
//! Pure: records and report in, the file's bytes out. This module only lays the run out as
//! `proctor_plot` shapes; `proctor_plot` writes the SVG and rasterizes the PNG, as it does
//! for `proctor strace`'s plots.

use proctor_plot::{Anchor, Shape, BLUE, GRID, INK, VERMILLION};

use crate::record::RequestRecord;
use crate::report::{human_ns, Report};

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 530.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const PANEL: f64 = 190.0;
const TOP_A: f64 = 50.0;
const TOP_B: f64 = 300.0;

fn rect(x: f64, y: f64, width: f64, height: f64, color: [u8; 3]) -> Shape {
    Shape::Rect { x, y, width, height, color }
}

fn text(x: f64, y: f64, text: String, color: [u8; 3], centered: bool) -> Shape {
    Shape::text(x, y, text, color, if centered { Anchor::Middle } else { Anchor::Start })
}

/// Decades (log10 of ns) spanning the responses, at least one.
fn decades(report: &Report) -> Option<(f64, f64)> {
    let latency = report.latency.as_ref()?;
    let low = (latency.min_ns.max(1) as f64).log10().floor();
    let high = (latency.max_ns.max(1) as f64).log10().ceil().max(low + 1.0);
    Some((low, high))
}

fn layout(records: &[RequestRecord], report: &Report, title: &str) -> Vec<Shape> {
    let mut shapes = vec![
        text(10.0, 14.0, title.to_string(), INK, false),
        text(10.0, 28.0, report.modes_summary.clone(), INK, false),
    ];
    let Some((low, high)) = decades(report) else {
        shapes.push(text(LEFT, 60.0, "no complete responses".to_string(), INK, false));
        return shapes;
    };
    let plot_width = WIDTH - LEFT - RIGHT;

    // Panel A: every request's total over time, y on a log scale.
    let first = records.iter().map(|r| r.sent_unix_ns).min().unwrap_or(0);
    let span = (report.span_seconds * 1e9).max(1.0);
    let y_of = |ns: f64| TOP_A + PANEL - ((ns.max(1.0).log10() - low) / (high - low)) * PANEL;
    let mut decade = low;
    while decade <= high {
        let y = y_of(10f64.powf(decade));
        shapes.push(rect(LEFT, y, plot_width, 1.0, GRID));
        shapes.push(text(LEFT - 6.0 - 40.0, y + 4.0, human_ns(10f64.powf(decade)), INK, false));
        decade += 1.0;
    }
    for record in records {
        let x = LEFT + (record.sent_unix_ns.saturating_sub(first) as f64 / span) * plot_width;
        if record.has_response() {
            shapes.push(rect(x - 1.0, y_of(record.total_ns as f64) - 1.0, 2.0, 2.0, BLUE));
        } else {
            shapes.push(rect(x, TOP_A - 6.0, 1.0, 6.0, VERMILLION));
        }
    }
    shapes.push(rect(LEFT, TOP_A + PANEL, plot_width, 1.0, INK));
    shapes.push(text(
        LEFT + plot_width / 2.0,
        TOP_A + PANEL + 16.0,
        format!("time, 0 to {} (red ticks on top: failed requests)", human_ns(report.span_seconds * 1e9)),
        INK,
        true,
    ));

    // Panel B: the log-scale histogram with the modes.
    let x_of = |ns: f64| LEFT + ((ns.max(1.0).log10() - low) / (high - low)) * plot_width;
    let most = report.histogram.iter().map(|row| row.count).max().unwrap_or(1).max(1) as f64;
    let base = TOP_B + PANEL;
    for row in &report.histogram {
        let x = x_of(row.low_ns as f64);
        let width = (x_of(row.high_ns as f64) - x - 0.5).max(0.5);
        let height = row.count as f64 / most * PANEL;
        shapes.push(rect(x, base - height, width, height, BLUE));
    }
    shapes.push(rect(LEFT, base, plot_width, 1.0, INK));
    let mut decade = low;
    while decade <= high {
        let x = x_of(10f64.powf(decade));
        shapes.push(rect(x, base, 1.0, 4.0, INK));
        shapes.push(text(x, base + 16.0, human_ns(10f64.powf(decade)), INK, true));
        decade += 1.0;
    }
    if let Some(modes) = &report.modes {
        for (index, mode) in modes.modes.iter().enumerate() {
            let x = x_of(mode.value);
            shapes.push(rect(x, TOP_B, 1.0, PANEL, VERMILLION));
            // Neighbouring modes' labels would overlap: alternate between two rows.
            shapes.push(text(
                x,
                TOP_B - 4.0 - 14.0 * (index % 2) as f64,
                format!("{} ({:.0}%)", human_ns(mode.value), mode.fraction * 100.0),
                VERMILLION,
                true,
            ));
        }
    }
    shapes
}

/// The plot as an SVG document.
pub fn svg(records: &[RequestRecord], report: &Report, title: &str) -> String {
    proctor_plot::svg(WIDTH as u32, HEIGHT as u32, &layout(records, report, title))
}

/// The plot as a PNG image (RGB, 8 bits per channel).
pub fn png(records: &[RequestRecord], report: &Report, title: &str) -> Vec<u8> {
    proctor_plot::png(WIDTH as u32, HEIGHT as u32, &layout(records, report, title))
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
            })
            .collect()
    }

    /// What keeps the labels from being read (see `proctor_plot::label::problems`), after
    /// checking that the PNG has the layout's size.
    fn unreadable(records: &[RequestRecord], report: &Report, title: &str) -> Vec<String> {
        let shapes = layout(records, report, title);
        let png = png(records, report, title);
        let size = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
        assert_eq!((size(16), size(20)), (WIDTH as u32, HEIGHT as u32));
        proctor_plot::label::problems(WIDTH, HEIGHT, &shapes)
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
        assert_eq!(inflated.len(), HEIGHT as usize * (1 + WIDTH as usize * 3));
    }
}
