//! The drawing primitives behind every `--plot` and `report --out`: a list of [`Shape`]s
//! written as an SVG document ([`svg`]), and that same document rasterized into an RGB PNG
//! ([`png`]), so the two files are one picture.
//!
//! Laid out by hand rather than with a plotting crate: a few hundred rectangles, lines, dots
//! and labels per plot, placed where each report needs them. Text is set in DejaVu Sans,
//! embedded in the binary (`fonts/`, with its licence): the SVG names it (viewers without it
//! fall back to their sans-serif), the PNG is drawn with it by resvg, which sees no other font.
//!
//! Pure: shapes in, the file's bytes out. No I/O (no system fonts, no files an SVG could
//! name), no clock, and the same shapes give the same bytes. This crate does not lay plots
//! out (panels, scales): each caller turns its own report into shapes; [`axis`] picks round
//! tick values and writes their labels, which every plot needs alike, and [`label`] measures
//! labels in the embedded font, keeps them apart, and says where a layout lets them clip or
//! collide.

pub mod axis;
mod font;
pub mod label;
mod png;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub use crate::png::png;

// The Okabe–Ito palette (Okabe & Ito, "Color Universal Design", 2008): colours that stay
// distinct under the common colour-vision deficiencies and in greyscale print. Blue is the
// data, vermillion marks what the reader should look at (peaks, modes, slow or failed requests).
pub const BLUE: [u8; 3] = [0x00, 0x72, 0xb2];
pub const VERMILLION: [u8; 3] = [0xd5, 0x5e, 0x00];
pub const ORANGE: [u8; 3] = [0xe6, 0x9f, 0x00];
pub const GREEN: [u8; 3] = [0x00, 0x9e, 0x73];
pub const PURPLE: [u8; 3] = [0xcc, 0x79, 0xa7];
pub const SKY_BLUE: [u8; 3] = [0x56, 0xb4, 0xe9];
/// Axes and labels: near black, as the palette's black is meant for text.
pub const INK: [u8; 3] = [0x22, 0x22, 0x22];
/// Grid lines: light enough that data drawn over them wins.
pub const GRID: [u8; 3] = [0xe4, 0xe4, 0xe4];
pub const WHITE: [u8; 3] = [0xff, 0xff, 0xff];

/// `color` moved `amount` (0 to 1) of the way to white: the light versions of the palette.
pub fn tint(color: [u8; 3], amount: f64) -> [u8; 3] {
    color.map(|c| (f64::from(c) + (255.0 - f64::from(c)) * amount.clamp(0.0, 1.0)).round() as u8)
}

/// The size of axis labels, legends and marks, in pixels.
pub const LABEL_SIZE: f64 = 11.0;
/// The size of a plot's title line.
pub const TITLE_SIZE: f64 = 13.0;

/// What a plot is made of, in pixels from the top left; colours are RGB.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// Drawn with crisp edges, so bars and grid bands do not blur into their neighbours.
    Rect { x: f64, y: f64, width: f64, height: f64, color: [u8; 3] },
    /// A straight line `width` pixels wide, dashed when `dashed`; crisp like rectangles.
    Line { x1: f64, y1: f64, x2: f64, y2: f64, color: [u8; 3], width: f64, dashed: bool },
    /// A filled circle, anti-aliased, with an `outline` ring 1.5 px wide when given (a dot
    /// that must stay visible over lines and other dots).
    Dot { x: f64, y: f64, radius: f64, color: [u8; 3], outline: Option<[u8; 3]> },
    /// `y` is the baseline; `anchor` says which part of the text sits at `x`; `size` is the
    /// font size in pixels.
    Text { x: f64, y: f64, text: String, color: [u8; 3], anchor: Anchor, size: f64 },
}

/// Which part of a label sits at its `x`, as SVG's `text-anchor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Shape {
    pub fn rect(x: f64, y: f64, width: f64, height: f64, color: [u8; 3]) -> Shape {
        Shape::Rect { x, y, width, height, color }
    }

    /// A solid line one pixel wide.
    pub fn line(x1: f64, y1: f64, x2: f64, y2: f64, color: [u8; 3]) -> Shape {
        Shape::Line { x1, y1, x2, y2, color, width: 1.0, dashed: false }
    }

    /// A dashed line one pixel wide.
    pub fn dashed(x1: f64, y1: f64, x2: f64, y2: f64, color: [u8; 3]) -> Shape {
        Shape::Line { x1, y1, x2, y2, color, width: 1.0, dashed: true }
    }

    pub fn dot(x: f64, y: f64, radius: f64, color: [u8; 3], outline: Option<[u8; 3]>) -> Shape {
        Shape::Dot { x, y, radius, color, outline }
    }

    /// A label of [`LABEL_SIZE`].
    pub fn text(x: f64, y: f64, text: impl Into<String>, color: [u8; 3], anchor: Anchor) -> Shape {
        Shape::Text { x, y, text: text.into(), color, anchor, size: LABEL_SIZE }
    }

    /// A title of [`TITLE_SIZE`] in ink, starting at `x`.
    pub fn title(x: f64, y: f64, text: impl Into<String>) -> Shape {
        Shape::Text { x, y, text: text.into(), color: INK, anchor: Anchor::Start, size: TITLE_SIZE }
    }
}

/// What a plot file is written as, chosen by its name: `.svg` or `.png`, in any case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    /// The format `path`'s extension names. Anything else is refused, so a `.pdf` never holds
    /// an SVG; commands ask before they do any work.
    pub fn from_path(path: &Path) -> Result<Format, UnknownFormat> {
        match path.extension().and_then(|extension| extension.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("svg") => Ok(Format::Svg),
            Some("png") => Ok(Format::Png),
            _ => Err(UnknownFormat { path: path.to_path_buf() }),
        }
    }
}

/// A plot file name that ends in neither `.svg` nor `.png`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFormat {
    pub path: PathBuf,
}

impl std::fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot plot to {}: plots are written as .svg or .png", self.path.display())
    }
}

impl std::error::Error for UnknownFormat {}

/// The shapes as an SVG document `width` × `height` pixels on a white background.
///
/// Spaces in labels are kept as written (`xml:space="preserve"`), so a label is as wide as
/// [`label::width`] measures it.
pub fn svg(width: u32, height: u32, shapes: &[Shape]) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail, here and below.
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="'{}', sans-serif" font-size="{LABEL_SIZE}" shape-rendering="crispEdges" xml:space="preserve">"#,
        font::FAMILY
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
            Shape::Line { x1, y1, x2, y2, color, width, dashed } => writeln!(
                out,
                r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{}"{}{}/>"#,
                hex(*color),
                if *width == 1.0 { String::new() } else { format!(r#" stroke-width="{width}""#) },
                if *dashed { r#" stroke-dasharray="4 3""# } else { "" },
            ),
            Shape::Dot { x, y, radius, color, outline } => writeln!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="{radius}" fill="{}"{} shape-rendering="geometricPrecision"/>"#,
                hex(*color),
                outline.map_or_else(String::new, |ring| format!(r#" stroke="{}" stroke-width="1.5""#, hex(ring))),
            ),
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

/// Text content escaped for XML: labels carry syscall names, URLs and file names. Control
/// characters, which XML 1.0 does not allow, are written as '?' (and measured so).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_writes_each_shape_on_its_own_line() {
        let shapes = [
            Shape::rect(1.0, 2.26, 3.0, 4.0, BLUE),
            Shape::line(0.0, 5.0, 10.0, 5.0, INK),
            Shape::dashed(0.0, 6.0, 10.0, 6.0, VERMILLION),
            Shape::dot(3.0, 4.0, 2.5, VERMILLION, Some(WHITE)),
            Shape::text(7.0, 8.0, "a<b & c>d\u{7}", VERMILLION, Anchor::Middle),
            Shape::text(7.0, 8.0, "left", INK, Anchor::Start),
            Shape::Text { x: 7.0, y: 8.0, text: "end".into(), color: INK, anchor: Anchor::End, size: 13.0 },
        ];
        let expected = concat!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30" viewBox="0 0 40 30" font-family="'DejaVu Sans', sans-serif" font-size="11" shape-rendering="crispEdges" xml:space="preserve">"#,
            "\n",
            r#"<rect width="100%" height="100%" fill="white"/>"#,
            "\n",
            r##"<rect x="1.0" y="2.3" width="3.0" height="4.0" fill="#0072b2"/>"##,
            "\n",
            r##"<line x1="0.0" y1="5.0" x2="10.0" y2="5.0" stroke="#222222"/>"##,
            "\n",
            r##"<line x1="0.0" y1="6.0" x2="10.0" y2="6.0" stroke="#d55e00" stroke-dasharray="4 3"/>"##,
            "\n",
            r##"<circle cx="3.0" cy="4.0" r="2.5" fill="#d55e00" stroke="#ffffff" stroke-width="1.5" shape-rendering="geometricPrecision"/>"##,
            "\n",
            r##"<text x="7.0" y="8.0" fill="#d55e00" text-anchor="middle">a&lt;b &amp; c&gt;d?</text>"##,
            "\n",
            r##"<text x="7.0" y="8.0" fill="#222222">left</text>"##,
            "\n",
            r##"<text x="7.0" y="8.0" fill="#222222" text-anchor="end" font-size="13">end</text>"##,
            "\n",
            "</svg>\n",
        );
        assert_eq!(svg(40, 30, &shapes), expected);
    }

    #[test]
    fn a_plot_file_is_svg_or_png_and_nothing_else() {
        assert_eq!(Format::from_path(Path::new("a/r.svg")), Ok(Format::Svg));
        assert_eq!(Format::from_path(Path::new("r.PNG")), Ok(Format::Png));
        for refused in ["r.pdf", "r", "r.svg.gz", ".png", "dir/"] {
            let error = Format::from_path(Path::new(refused)).expect_err(refused);
            assert_eq!(error.to_string(), format!("cannot plot to {refused}: plots are written as .svg or .png"));
        }
    }

    #[test]
    fn tints_move_towards_white() {
        assert_eq!(tint(BLUE, 0.0), BLUE);
        assert_eq!(tint(BLUE, 1.0), WHITE);
        assert_eq!(tint([0, 100, 255], 0.5), [128, 178, 255]);
    }
}
