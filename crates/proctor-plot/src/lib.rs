//! The drawing primitives behind `proctor strace --plot` and `proctor probe --plot`: a list
//! of [`Shape`]s written as an SVG document ([`svg`]) or rasterized into an RGB PNG ([`png`]).
//!
//! Drawn by hand rather than with a plotting crate: a few hundred rectangles, lines and
//! labels do not justify a font stack and an image pipeline. The SVG leaves fonts to the
//! viewer; the PNG draws text with a built-in 3×5 pixel font (no system fonts, no font files)
//! and compresses with flate2, which the workspace already carries for gzip input.
//!
//! Pure: shapes in, the file's bytes out. No I/O, no clock. This crate does not lay anything
//! out (panels, scales): each caller turns its own report into shapes; [`axis`] only picks
//! round tick values and time labels, which every multi-panel plot needs alike, and [`label`]
//! measures labels in DejaVu Sans (embedded) and says where a layout lets them clip or collide.

pub mod axis;
mod font;
pub mod label;
mod pixel_font;
mod png;

use std::fmt::Write as _;

pub use crate::png::png;

/// The palette both plots share: bars, marks (peaks, failures) and ink (axes, labels).
pub const BLUE: [u8; 3] = [0x4a, 0x7a, 0xb5];
pub const RED: [u8; 3] = [0xc0, 0x39, 0x2b];
pub const INK: [u8; 3] = [0x33, 0x33, 0x33];

/// What a plot is made of, in pixels from the top left; colours are RGB.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Rect {
        x: f64,
        y: f64,
        width: f64,
        height: f64,
        color: [u8; 3],
    },
    /// Only axis-parallel lines: the PNG draws a line as a thin rectangle.
    Line {
        x1: f64,
        y1: f64,
        x2: f64,
        y2: f64,
        color: [u8; 3],
    },
    /// `y` is the baseline; `anchor` says which part of the text sits at `x`; `size` is the
    /// font size in pixels.
    Text {
        x: f64,
        y: f64,
        text: String,
        color: [u8; 3],
        anchor: Anchor,
        size: f64,
    },
}

/// Which part of a label sits at its `x`, as SVG's `text-anchor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

/// The size of axis labels, legends and marks, in pixels.
pub const LABEL_SIZE: f64 = 11.0;

impl Shape {
    pub fn rect(x: f64, y: f64, width: f64, height: f64, color: [u8; 3]) -> Shape {
        Shape::Rect { x, y, width, height, color }
    }

    pub fn line(x1: f64, y1: f64, x2: f64, y2: f64, color: [u8; 3]) -> Shape {
        Shape::Line { x1, y1, x2, y2, color }
    }

    /// A label of [`LABEL_SIZE`].
    pub fn text(x: f64, y: f64, text: impl Into<String>, color: [u8; 3], anchor: Anchor) -> Shape {
        Shape::Text { x, y, text: text.into(), color, anchor, size: LABEL_SIZE }
    }
}

/// The shapes as an SVG document `width` × `height` pixels on a white background.
pub fn svg(width: u32, height: u32, shapes: &[Shape]) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail, here and below.
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let hex = |[r, g, b]: [u8; 3]| format!("#{r:02x}{g:02x}{b:02x}");
    for shape in shapes {
        let _ = match shape {
            Shape::Rect { x, y, width, height, color } => writeln!(
                out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{width:.1}" height="{height:.1}" fill="{}"/>"#,
                hex(*color)
            ),
            Shape::Line { x1, y1, x2, y2, color } => {
                writeln!(out, r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{}"/>"#, hex(*color))
            }
            Shape::Text { x, y, text, color, anchor, size } => writeln!(
                out,
                r#"<text x="{x:.1}" y="{y:.1}" fill="{}"{}{}>{}</text>"#,
                hex(*color),
                match anchor {
                    Anchor::Start => "",
                    Anchor::Middle => r#" text-anchor="middle""#,
                    Anchor::End => r#" text-anchor="end""#,
                },
                if *size == LABEL_SIZE { String::new() } else { format!(r#" font-size="{size}""#) },
                escape(text)
            ),
        };
    }
    out.push_str("</svg>\n");
    out
}

/// Text content escaped for XML: labels carry syscall names, URLs and file names.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_writes_each_shape_on_its_own_line() {
        let shapes = [
            Shape::Rect { x: 1.0, y: 2.26, width: 3.0, height: 4.0, color: BLUE },
            Shape::Line { x1: 0.0, y1: 5.0, x2: 10.0, y2: 5.0, color: INK },
            Shape::text(7.0, 8.0, "a<b & c>d", RED, Anchor::Middle),
            Shape::text(7.0, 8.0, "left", INK, Anchor::Start),
        ];
        let expected = concat!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30" viewBox="0 0 40 30" font-family="sans-serif" font-size="11">"#,
            "\n",
            r#"<rect width="100%" height="100%" fill="white"/>"#,
            "\n",
            r##"<rect x="1.0" y="2.3" width="3.0" height="4.0" fill="#4a7ab5"/>"##,
            "\n",
            r##"<line x1="0.0" y1="5.0" x2="10.0" y2="5.0" stroke="#333333"/>"##,
            "\n",
            r##"<text x="7.0" y="8.0" fill="#c0392b" text-anchor="middle">a&lt;b &amp; c&gt;d</text>"##,
            "\n",
            r##"<text x="7.0" y="8.0" fill="#333333">left</text>"##,
            "\n",
            "</svg>\n",
        );
        assert_eq!(svg(40, 30, &shapes), expected);
    }
}
