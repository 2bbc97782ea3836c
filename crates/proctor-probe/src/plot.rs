//! A recorded run as a picture: latency of every request over time (log scale, failures
//! as red ticks on top) above the log-scale histogram with the modes marked. SVG or PNG.
//!
//! Pure: records and report in, the file's bytes out. Drawn by hand like `proctor strace`'s
//! plots (shapes laid out once, then written as SVG or rasterized with a 3×5 pixel font and
//! deflate from flate2), because a few hundred rectangles do not justify a plotting crate.
//! The canvas and font duplicate `proctor-strace::plot`'s small ones: crates do not depend
//! on each other sideways, and a shared drawing crate is a follow-up.

use std::fmt::Write as _;
use std::io::Write as _;

use crate::record::RequestRecord;
use crate::report::{human_ns, Report};

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 530.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const PANEL: f64 = 190.0;
const TOP_A: f64 = 50.0;
const TOP_B: f64 = 300.0;

const BLUE: [u8; 3] = [0x4a, 0x7a, 0xb5];
const RED: [u8; 3] = [0xc0, 0x39, 0x2b];
const INK: [u8; 3] = [0x33, 0x33, 0x33];
const GRID: [u8; 3] = [0xdd, 0xdd, 0xdd];

#[derive(Debug, Clone, PartialEq)]
enum Shape {
    Rect { x: f64, y: f64, width: f64, height: f64, color: [u8; 3] },
    Text { x: f64, y: f64, text: String, color: [u8; 3], centered: bool },
}

fn rect(x: f64, y: f64, width: f64, height: f64, color: [u8; 3]) -> Shape {
    Shape::Rect { x, y, width, height, color }
}

fn text(x: f64, y: f64, text: String, color: [u8; 3], centered: bool) -> Shape {
    Shape::Text { x, y, text, color, centered }
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
            shapes.push(rect(x, TOP_A - 6.0, 1.0, 6.0, RED));
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
            shapes.push(rect(x, TOP_B, 1.0, PANEL, RED));
            // Neighbouring modes' labels would overlap: alternate between two rows.
            shapes.push(text(
                x,
                TOP_B - 4.0 - 14.0 * (index % 2) as f64,
                format!("{} ({:.0}%)", human_ns(mode.value), mode.fraction * 100.0),
                RED,
                true,
            ));
        }
    }
    shapes
}

/// The plot as an SVG document.
pub fn svg(records: &[RequestRecord], report: &Report, title: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let hex = |[r, g, b]: [u8; 3]| format!("#{r:02x}{g:02x}{b:02x}");
    for shape in layout(records, report, title) {
        let _ = match shape {
            Shape::Rect { x, y, width, height, color } => writeln!(
                out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{width:.1}" height="{height:.1}" fill="{}"/>"#,
                hex(color)
            ),
            Shape::Text { x, y, text, color, centered } => writeln!(
                out,
                r#"<text x="{x:.1}" y="{y:.1}" fill="{}"{}>{}</text>"#,
                hex(color),
                if centered { r#" text-anchor="middle""# } else { "" },
                text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
            ),
        };
    }
    out.push_str("</svg>\n");
    out
}

/// The plot as a PNG image (RGB, 8 bits per channel).
pub fn png(records: &[RequestRecord], report: &Report, title: &str) -> Vec<u8> {
    let mut canvas = Canvas::new(WIDTH as usize, HEIGHT as usize);
    for shape in layout(records, report, title) {
        match shape {
            Shape::Rect { x, y, width, height, color } => canvas.fill(x, y, width.max(1.0), height.max(1.0), color),
            Shape::Text { x, y, text, color, centered } => {
                let width = text.chars().count() as f64 * GLYPH_ADVANCE;
                let left = if centered { x - width / 2.0 } else { x };
                canvas.text(left, y - GLYPH_HEIGHT, &text, color);
            }
        }
    }
    canvas.encode()
}

const SCALE: usize = 2;
const GLYPH_ADVANCE: f64 = (4 * SCALE) as f64;
const GLYPH_HEIGHT: f64 = (5 * SCALE) as f64;

/// A 3×5 pixel font: five rows of three bits, most significant bit on the left.
fn glyph(character: char) -> [u8; 5] {
    match character.to_ascii_uppercase() {
        '0' | 'O' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 7, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' | 'S' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 1, 1],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        'A' => [2, 5, 7, 5, 5],
        'B' => [6, 5, 6, 5, 6],
        'C' => [7, 4, 4, 4, 7],
        'D' => [6, 5, 5, 5, 6],
        'E' => [7, 4, 6, 4, 7],
        'F' => [7, 4, 6, 4, 4],
        'G' => [7, 4, 5, 5, 7],
        'H' => [5, 5, 7, 5, 5],
        'I' => [7, 2, 2, 2, 7],
        'J' => [1, 1, 1, 5, 7],
        'K' => [5, 5, 6, 5, 5],
        'L' => [4, 4, 4, 4, 7],
        'M' => [5, 7, 7, 5, 5],
        'N' => [6, 5, 5, 5, 5],
        'P' => [7, 5, 7, 4, 4],
        'Q' => [7, 5, 5, 7, 1],
        'R' => [6, 5, 6, 5, 5],
        'T' => [7, 2, 2, 2, 2],
        'U' => [5, 5, 5, 5, 7],
        'V' => [5, 5, 5, 5, 2],
        'W' => [5, 5, 7, 7, 5],
        'X' | '×' => [5, 5, 2, 5, 5],
        'Y' => [5, 5, 2, 2, 2],
        'Z' => [7, 1, 2, 4, 7],
        'µ' => [5, 5, 5, 7, 4],
        '.' => [0, 0, 0, 0, 2],
        ',' | ';' => [0, 0, 0, 2, 4],
        ':' => [0, 2, 0, 2, 0],
        '/' => [1, 1, 2, 4, 4],
        '(' => [2, 4, 4, 4, 2],
        ')' => [2, 1, 1, 1, 2],
        '=' | '≈' => [0, 7, 0, 7, 0],
        '-' => [0, 0, 7, 0, 0],
        '%' => [4, 1, 2, 4, 1],
        ' ' => [0; 5],
        _ => [7, 5, 5, 5, 7],
    }
}

struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: usize, height: usize) -> Self {
        Self { width, height, pixels: vec![0xff; width * height * 3] }
    }

    fn fill(&mut self, x: f64, y: f64, width: f64, height: f64, color: [u8; 3]) {
        let clamp = |value: f64, limit: usize| (value.round().max(0.0) as usize).min(limit);
        let (left, top) = (clamp(x, self.width), clamp(y, self.height));
        let right = clamp(x + width, self.width).max(left + 1).min(self.width);
        let bottom = clamp(y + height, self.height).max(top + 1).min(self.height);
        for row in top..bottom {
            for column in left..right {
                let at = (row * self.width + column) * 3;
                self.pixels[at..at + 3].copy_from_slice(&color);
            }
        }
    }

    fn text(&mut self, x: f64, y: f64, text: &str, color: [u8; 3]) {
        let size = SCALE as f64;
        for (index, character) in text.chars().enumerate() {
            let left = x + index as f64 * GLYPH_ADVANCE;
            for (row, bits) in glyph(character).iter().enumerate() {
                for column in 0..3 {
                    if bits & (4 >> column) != 0 {
                        self.fill(left + column as f64 * size, y + row as f64 * size, size, size, color);
                    }
                }
            }
        }
    }

    /// PNG: signature, IHDR, one zlib IDAT (filter 0 on every row), IEND.
    fn encode(&self) -> Vec<u8> {
        let mut raw = Vec::with_capacity((self.width * 3 + 1) * self.height);
        for row in self.pixels.chunks(self.width * 3) {
            raw.push(0);
            raw.extend_from_slice(row);
        }
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        // Writing into a Vec cannot fail.
        let _ = zlib.write_all(&raw);
        let compressed = zlib.finish().unwrap_or_default();
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut header = Vec::with_capacity(13);
        header.extend_from_slice(&(self.width as u32).to_be_bytes());
        header.extend_from_slice(&(self.height as u32).to_be_bytes());
        header.extend_from_slice(&[8, 2, 0, 0, 0]);
        chunk(&mut out, b"IHDR", &header);
        chunk(&mut out, b"IDAT", &compressed);
        chunk(&mut out, b"IEND", &[]);
        out
    }
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = flate2::Crc::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.sum().to_be_bytes());
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
