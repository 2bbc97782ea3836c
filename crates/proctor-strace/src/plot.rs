//! Per-syscall wall-time histograms as SVG or PNG. Pure: returns the file's bytes.
//!
//! Drawn by hand rather than with a plotting crate: a few rectangles, lines and labels do
//! not justify a font stack and an image pipeline. [`layout`] turns a report into shapes
//! once; [`svg`] writes them as SVG (fonts left to the viewer) and [`png`] rasterizes them
//! with a built-in 3×5 pixel font (no system fonts, no font files). Bars regroup the
//! log-scale buckets into 20 per decade; peaks are marked in red with their value.

use std::fmt::Write as _;
use std::io::Write as _;

use crate::report::{human_seconds, Report, SyscallReport};

const WIDTH: f64 = 760.0;
const PANEL_HEIGHT: f64 = 170.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 30.0;
const BARS_PER_DECADE: f64 = 20.0;

const BLUE: [u8; 3] = [0x4a, 0x7a, 0xb5];
const RED: [u8; 3] = [0xc0, 0x39, 0x2b];
const INK: [u8; 3] = [0x33, 0x33, 0x33];

/// What a plot is made of, in pixels from the top left.
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    Rect { x: f64, y: f64, width: f64, height: f64, color: [u8; 3] },
    Line { x1: f64, y1: f64, x2: f64, y2: f64, color: [u8; 3] },
    /// `y` is the baseline; `centered` anchors the middle of the text at `x`.
    Text { x: f64, y: f64, text: String, color: [u8; 3], centered: bool },
}

/// The shapes of one panel per syscall (the `panels` with the most total wall time), and
/// the picture's height.
fn layout(report: &Report, panels: usize) -> (Vec<Shape>, f64) {
    let chosen: Vec<&SyscallReport> =
        report.syscalls.iter().filter(|syscall| syscall.timed > 0).take(panels).collect();
    let height = (chosen.len().max(1) as f64) * PANEL_HEIGHT;
    let mut shapes = Vec::new();
    if chosen.is_empty() {
        shapes.push(Shape::Text {
            x: 20.0,
            y: 40.0,
            text: "no timed calls (was strace run with -T?)".to_string(),
            color: INK,
            centered: false,
        });
    }
    for (index, syscall) in chosen.iter().enumerate() {
        panel(&mut shapes, syscall, index as f64 * PANEL_HEIGHT);
    }
    (shapes, height)
}

/// The plot as an SVG document.
pub fn svg(report: &Report, panels: usize) -> String {
    let (shapes, height) = layout(report, panels);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let hex = |[r, g, b]: [u8; 3]| format!("#{r:02x}{g:02x}{b:02x}");
    for shape in shapes {
        let _ = match shape {
            Shape::Rect { x, y, width, height, color } => writeln!(
                out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{width:.1}" height="{height:.1}" fill="{}"/>"#,
                hex(color)
            ),
            Shape::Line { x1, y1, x2, y2, color } => writeln!(
                out,
                r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{}"/>"#,
                hex(color)
            ),
            Shape::Text { x, y, text, color, centered } => writeln!(
                out,
                r#"<text x="{x:.1}" y="{y:.1}" fill="{}"{}>{}</text>"#,
                hex(color),
                if centered { r#" text-anchor="middle""# } else { "" },
                escape(&text)
            ),
        };
    }
    out.push_str("</svg>\n");
    out
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

    shapes.push(Shape::Text {
        x: LEFT,
        y: y0 + 16.0,
        text: format!(
            "{}: {} calls, {} total, p50 {}",
            syscall.name,
            syscall.count,
            human_seconds(syscall.total_seconds),
            syscall.p50_seconds.map_or_else(|| "-".to_string(), human_seconds)
        ),
        color: INK,
        centered: false,
    });
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
    shapes.push(Shape::Line { x1: LEFT, y1: base, x2: LEFT + plot_width, y2: base, color: INK });
    let mut decade = low;
    while decade <= high {
        let x = x_of(decade);
        shapes.push(Shape::Line { x1: x, y1: base, x2: x, y2: base + 4.0, color: INK });
        shapes.push(Shape::Text {
            x,
            y: base + 16.0,
            text: human_seconds(10f64.powf(decade)),
            color: INK,
            centered: true,
        });
        decade += 1.0;
    }
    for peak in &syscall.peaks {
        let x = x_of(peak.seconds.max(0.5e-6).log10());
        shapes.push(Shape::Line { x1: x, y1: y0 + TOP, x2: x, y2: base, color: RED });
        shapes.push(Shape::Text {
            x,
            y: y0 + TOP - 2.0,
            text: format!("{} (n={})", human_seconds(peak.seconds), peak.count),
            color: RED,
            centered: true,
        });
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The plot as a PNG image (RGB, 8 bits per channel).
pub fn png(report: &Report, panels: usize) -> Vec<u8> {
    let (shapes, height) = layout(report, panels);
    let mut canvas = Canvas::new(WIDTH as usize, height as usize);
    for shape in &shapes {
        match shape {
            Shape::Rect { x, y, width, height, color } => {
                canvas.fill(*x, *y, width.max(1.0), height.max(1.0), *color);
            }
            Shape::Line { x1, y1, x2, y2, color } => {
                // Only axis-parallel lines are drawn, so a thin rectangle is exact.
                canvas.fill(x1.min(*x2), y1.min(*y2), (x2 - x1).abs().max(1.0), (y2 - y1).abs().max(1.0), *color);
            }
            Shape::Text { x, y, text, color, centered } => {
                let width = text.chars().count() as f64 * GLYPH_ADVANCE;
                let left = if *centered { x - width / 2.0 } else { *x };
                canvas.text(left, y - GLYPH_HEIGHT, text, *color);
            }
        }
    }
    canvas.encode()
}

/// Font scale: each font pixel is drawn as a SCALE × SCALE square.
const SCALE: usize = 2;
const GLYPH_ADVANCE: f64 = (4 * SCALE) as f64;
const GLYPH_HEIGHT: f64 = (5 * SCALE) as f64;

/// A 3×5 pixel font: five rows of three bits per glyph, most significant bit on the left.
/// Lowercase is drawn as uppercase; `µ` as a u with a tail; unknown characters as a box.
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
        'X' => [5, 5, 2, 5, 5],
        'Y' => [5, 5, 2, 2, 2],
        'Z' => [7, 1, 2, 4, 7],
        'µ' => [5, 5, 5, 7, 4],
        '_' => [0, 0, 0, 0, 7],
        '.' => [0, 0, 0, 0, 2],
        ',' => [0, 0, 0, 2, 4],
        ':' => [0, 2, 0, 2, 0],
        '(' => [2, 4, 4, 4, 2],
        ')' => [2, 1, 1, 1, 2],
        '=' => [0, 7, 0, 7, 0],
        '-' => [0, 0, 7, 0, 0],
        '%' => [4, 1, 2, 4, 1],
        '?' => [7, 1, 2, 0, 2],
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
        let clamp_x = |value: f64| (value.round().max(0.0) as usize).min(self.width);
        let clamp_y = |value: f64| (value.round().max(0.0) as usize).min(self.height);
        let (left, right) = (clamp_x(x), clamp_x(x + width).max(clamp_x(x) + 1).min(self.width));
        let (top, bottom) = (clamp_y(y), clamp_y(y + height).max(clamp_y(y) + 1).min(self.height));
        for row in top..bottom {
            for column in left..right {
                let at = (row * self.width + column) * 3;
                self.pixels[at..at + 3].copy_from_slice(&color);
            }
        }
    }

    fn text(&mut self, x: f64, y: f64, text: &str, color: [u8; 3]) {
        for (index, character) in text.chars().enumerate() {
            let left = x + index as f64 * GLYPH_ADVANCE;
            for (row, bits) in glyph(character).iter().enumerate() {
                for column in 0..3 {
                    if bits & (4 >> column) != 0 {
                        let size = SCALE as f64;
                        self.fill(left + column as f64 * size, y + row as f64 * size, size, size, color);
                    }
                }
            }
        }
    }

    /// PNG: signature, IHDR, one zlib-compressed IDAT (filter 0 on every row), IEND.
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
        // 8 bits per channel, colour type 2 (RGB), deflate, no filter method, no interlace.
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
    // PNG's CRC-32 is the same polynomial as gzip's, which flate2 already carries.
    let mut crc = flate2::Crc::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.sum().to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::{feed_reader, Analyzer, AnalyzerConfig};

    fn report() -> Report {
        let mut text = String::new();
        for index in 0..60 {
            let seconds = if index % 2 == 0 { 0.25 } else { 0.5 };
            text.push_str(&format!("futex(0x1, FUTEX_WAIT, 0, NULL) = -1 ETIMEDOUT (x) <{seconds:.6}>\n"));
        }
        let mut analyzer = Analyzer::new(AnalyzerConfig::default());
        feed_reader(&mut analyzer, text.as_bytes()).expect("in-memory read");
        analyzer.finish()
    }

    #[test]
    fn svg_marks_the_peaks() {
        let svg = svg(&report(), 5);
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains(">250 ms (n=30)</text>"), "{svg}");
        assert!(svg.contains(">500 ms (n=30)</text>"), "{svg}");
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
