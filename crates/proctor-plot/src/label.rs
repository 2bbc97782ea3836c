//! Labels as boxes: how wide a label is in the embedded font, the box a [`Shape::Text`] covers,
//! and what makes a picture unreadable — a label past the canvas edge, two labels on top of
//! each other ([`problems`]). Two helpers keep layouts clear of both: [`elide_end`] and
//! [`elide_middle`] cut a label to a width, [`Lanes`] stacks labels that want the same place.
//!
//! It does not move anything by itself: each plot lays itself out with these, and its tests
//! hold the result to [`problems`].

use crate::{font, Anchor, Shape};

/// Space kept between two labels side by side, in pixels.
pub const GAP: f64 = 6.0;

/// What a text box adds on either side of the sum of its advances, for the kerning the
/// renderer applies: of the ~10,000 pairs of characters labels are made of, DejaVu Sans kerns
/// eleven apart ("-J", "AA", "LA", …), by at most 0.6 px at 11 px (a test in `png` checks
/// every pair against resvg's own layout).
pub const KERNING_ALLOWANCE: f64 = 1.0;

/// How wide `text` is at `size` pixels in the font the plots are drawn with.
pub fn width(text: &str, size: f64) -> f64 {
    font::width(text, size)
}

/// How far text of `size` pixels reaches above its baseline.
pub fn ascent(size: f64) -> f64 {
    font::ascent(size)
}

/// How far text of `size` pixels reaches below its baseline.
pub fn descent(size: f64) -> f64 {
    font::descent(size)
}

/// The box a label covers: its advances from side to side and [`KERNING_ALLOWANCE`] either
/// side of them, the font's ascent and descent from top to bottom. Every glyph's ink lies
/// inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct TextBox {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
    pub text: String,
}

impl TextBox {
    /// Whether the two boxes share more than an edge.
    pub fn overlaps(&self, other: &TextBox) -> bool {
        self.left < other.right && other.left < self.right && self.top < other.bottom && other.top < self.bottom
    }
}

/// The box of a text shape; `None` for other shapes and for empty text.
pub fn text_box(shape: &Shape) -> Option<TextBox> {
    let Shape::Text { x, y, text, anchor, size, .. } = shape else {
        return None;
    };
    if text.is_empty() {
        return None;
    }
    let width = width(text, *size);
    let left = match anchor {
        Anchor::Start => *x,
        Anchor::Middle => x - width / 2.0,
        Anchor::End => x - width,
    };
    Some(TextBox {
        left: left - KERNING_ALLOWANCE,
        top: y - ascent(*size),
        right: left + width + KERNING_ALLOWANCE,
        bottom: y + descent(*size),
        text: text.clone(),
    })
}

/// Everything that keeps a person from reading the labels of a `width` × `height` picture: a
/// label that does not fit inside the canvas, and each pair of labels that overlap. Empty
/// when every label can be read.
pub fn problems(width: f64, height: f64, shapes: &[Shape]) -> Vec<String> {
    let boxes: Vec<TextBox> = shapes.iter().filter_map(text_box).collect();
    let mut problems = Vec::new();
    for b in &boxes {
        if b.left < 0.0 || b.top < 0.0 || b.right > width || b.bottom > height {
            problems.push(format!(
                "{:?} at x {:.1}..{:.1}, y {:.1}..{:.1} leaves the {width}×{height} canvas",
                b.text, b.left, b.right, b.top, b.bottom
            ));
        }
    }
    for (i, a) in boxes.iter().enumerate() {
        for b in &boxes[i + 1..] {
            if a.overlaps(b) {
                problems.push(format!(
                    "{:?} (x {:.1}..{:.1}, y {:.1}..{:.1}) overlaps {:?} (x {:.1}..{:.1}, y {:.1}..{:.1})",
                    a.text, a.left, a.right, a.top, a.bottom, b.text, b.left, b.right, b.top, b.bottom
                ));
            }
        }
    }
    problems
}

/// How wide a label's box is: its advances and the kerning allowance on both sides.
pub fn box_width(text: &str, size: f64) -> f64 {
    width(text, size) + 2.0 * KERNING_ALLOWANCE
}

/// Where to centre a label that wants to be centred at `x` so that its box stays between
/// `left` and `right`: `x` itself when it fits, else as close to it as the edges allow (the
/// last tick label of an axis that ends near the canvas edge).
pub fn centre_inside(x: f64, text: &str, size: f64, left: f64, right: f64) -> f64 {
    let half = box_width(text, size) / 2.0;
    x.min(right - half).max(left + half)
}

const ELLIPSIS: char = '…';

/// `text` cut at the end to at most `max_width` pixels, with an ellipsis where it was cut.
pub fn elide_end(text: &str, size: f64, max_width: f64) -> String {
    if width(text, size) <= max_width {
        return text.to_string();
    }
    let mut kept: Vec<char> = text.chars().collect();
    while !kept.is_empty() {
        kept.pop();
        let candidate: String = kept.iter().chain(std::iter::once(&ELLIPSIS)).collect();
        if width(&candidate, size) <= max_width {
            return candidate;
        }
    }
    String::new()
}

/// `text` cut in the middle to at most `max_width` pixels, keeping its start and its end (a
/// path's last components, a title's closing parenthesis).
pub fn elide_middle(text: &str, size: f64, max_width: f64) -> String {
    if width(text, size) <= max_width {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    // Drop more and more characters around the middle until it fits.
    for dropped in 1..=chars.len() {
        let keep = chars.len() - dropped;
        let head = keep.div_ceil(2);
        let tail = keep - head;
        let candidate: String =
            chars[..head].iter().chain(std::iter::once(&ELLIPSIS)).chain(&chars[chars.len() - tail..]).collect();
        if width(&candidate, size) <= max_width {
            return candidate;
        }
    }
    String::new()
}

/// `text` in lines of at most `max_width` pixels, broken at spaces, at most `max_lines` of
/// them; what does not fit in the last line is cut with an ellipsis. A word wider than a line
/// is cut too.
pub fn wrap(text: &str, size: f64, max_width: f64, max_lines: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() && lines.len() < max_lines {
        if lines.len() + 1 == max_lines || width(rest, size) <= max_width {
            lines.push(elide_end(rest, size, max_width));
            break;
        }
        // The longest run of words that fits; at least one word.
        let mut end = rest.find(' ').unwrap_or(rest.len());
        for (at, _) in rest.match_indices(' ') {
            if width(&rest[..at], size) > max_width {
                break;
            }
            end = at;
        }
        lines.push(elide_end(&rest[..end], size, max_width));
        rest = rest[end..].trim_start();
    }
    lines
}

/// Rows of labels that would otherwise overlap, such as the marks of nearby peaks: each label
/// goes as near its wanted centre as the edges allow, into the first lane (0, 1, …) where it
/// overlaps nothing already placed. The caller decides where each lane is drawn.
#[derive(Debug, Clone)]
pub struct Lanes {
    left: f64,
    right: f64,
    taken: Vec<Vec<(f64, f64)>>,
}

impl Lanes {
    /// Lanes for labels between `left` and `right`.
    pub fn new(left: f64, right: f64) -> Self {
        Self { left, right, taken: Vec::new() }
    }

    /// Marks `from..to` of `lane` as taken, say by a title that shares the lane.
    pub fn reserve(&mut self, lane: usize, from: f64, to: f64) {
        if self.taken.len() <= lane {
            self.taken.resize(lane + 1, Vec::new());
        }
        self.taken[lane].push((from, to));
    }

    /// Places a label `width` pixels wide that wants to be centred at `x`: its left edge and
    /// its lane. A label wider than the lanes starts at their left edge.
    pub fn place(&mut self, x: f64, width: f64) -> (f64, usize) {
        let left = (x - width / 2.0).min(self.right - width).max(self.left);
        let right = left + width;
        let clear = |taken: &Vec<(f64, f64)>| taken.iter().all(|(from, to)| right + GAP <= *from || *to + GAP <= left);
        let lane = self.taken.iter().position(clear).unwrap_or(self.taken.len());
        self.reserve(lane, left, right);
        (left, lane)
    }

    /// How many lanes hold something.
    pub fn len(&self) -> usize {
        self.taken.iter().rposition(|lane| !lane.is_empty()).map_or(0, |last| last + 1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::INK;

    fn label(x: f64, y: f64, text: &str, anchor: Anchor) -> Shape {
        Shape::Text { x, y, text: text.to_string(), color: INK, anchor, size: 11.0 }
    }

    #[test]
    fn a_box_spans_the_advance_and_the_font_height_from_its_anchor() {
        let w = width("10 ms", 11.0);
        let pad = KERNING_ALLOWANCE;
        let start = text_box(&label(100.0, 50.0, "10 ms", Anchor::Start)).expect("text");
        assert_eq!((start.left, start.right), (100.0 - pad, 100.0 + w + pad));
        assert!(start.top < 50.0 - 9.0 && start.bottom > 52.0, "{start:?}");
        let middle = text_box(&label(100.0, 50.0, "10 ms", Anchor::Middle)).expect("text");
        assert!((middle.left - (100.0 - w / 2.0 - pad)).abs() < 1e-9);
        let end = text_box(&label(100.0, 50.0, "10 ms", Anchor::End)).expect("text");
        assert!((end.right - 100.0 - pad).abs() < 1e-9);
        assert!(text_box(&label(1.0, 1.0, "", Anchor::Start)).is_none());
        assert!(text_box(&Shape::rect(0.0, 0.0, 1.0, 1.0, INK)).is_none());
    }

    #[test]
    fn problems_name_labels_off_the_canvas_and_labels_that_overlap() {
        let fine = [label(10.0, 20.0, "a", Anchor::Start), label(10.0, 40.0, "b", Anchor::Start)];
        assert!(problems(100.0, 100.0, &fine).is_empty());
        let clipped = [label(100.0, 20.0, "right edge", Anchor::Middle)];
        let found = problems(100.0, 100.0, &clipped);
        assert_eq!(found.len(), 1);
        assert!(found[0].starts_with("\"right edge\"") && found[0].contains("leaves"), "{found:?}");
        let overlapping = [label(10.0, 20.0, "first", Anchor::Start), label(20.0, 25.0, "second", Anchor::Start)];
        let found = problems(200.0, 100.0, &overlapping);
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("overlaps"), "{found:?}");
        // Labels one line apart at 14 px do not overlap.
        let stacked = [label(10.0, 20.0, "first", Anchor::Start), label(10.0, 34.0, "second", Anchor::Start)];
        assert!(problems(200.0, 100.0, &stacked).is_empty());
    }

    #[test]
    fn a_label_centred_inside_keeps_its_box_between_the_edges() {
        let half = box_width("100 ms", 11.0) / 2.0;
        assert_eq!(centre_inside(400.0, "100 ms", 11.0, 0.0, 760.0), 400.0);
        assert_eq!(centre_inside(755.0, "100 ms", 11.0, 0.0, 760.0), 760.0 - half);
        assert_eq!(centre_inside(3.0, "100 ms", 11.0, 0.0, 760.0), half);
        let moved = label(centre_inside(755.0, "100 ms", 11.0, 0.0, 760.0), 20.0, "100 ms", Anchor::Middle);
        assert!(problems(760.0, 100.0, &[moved]).is_empty());
    }

    #[test]
    fn eliding_keeps_what_fits_and_marks_the_cut() {
        let text = "proctor report (/var/lib/proctor/a/very/long/data/directory)";
        assert_eq!(elide_end(text, 11.0, 1000.0), text);
        let end = elide_end(text, 11.0, 120.0);
        assert!(end.ends_with('…') && end.starts_with("proctor") && width(&end, 11.0) <= 120.0, "{end}");
        let middle = elide_middle(text, 11.0, 160.0);
        assert!(middle.starts_with("proctor") && middle.ends_with("directory)"), "{middle}");
        assert!(middle.contains('…') && width(&middle, 11.0) <= 160.0, "{middle}");
        assert_eq!(elide_end(text, 11.0, 1.0), "");
    }

    #[test]
    fn wrapping_breaks_at_spaces_and_cuts_what_is_left() {
        let text = "6 modes: 59.9 ms (17 %), 63.9 ms (17 %), 68.2 ms (17 %); 132 ms ≈ 2 × 63.9 ms";
        assert_eq!(wrap(text, 11.0, 2000.0, 2), [text]);
        let lines = wrap(text, 11.0, 200.0, 2);
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("6 modes:") && !lines[0].ends_with(' '), "{lines:?}");
        assert!(lines[1].ends_with('…'), "{lines:?}");
        assert!(lines.iter().all(|line| width(line, 11.0) <= 200.0), "{lines:?}");
        let three = wrap(text, 11.0, 200.0, 5);
        assert!(three.len() >= 3 && three.iter().all(|line| !line.contains('…')), "{three:?}");
        assert_eq!(three.join(" "), text);
        assert!(wrap("", 11.0, 100.0, 2).is_empty());
        assert_eq!(wrap("/a/very/long/path/without/spaces", 11.0, 60.0, 2).len(), 1);
    }

    #[test]
    fn lanes_stack_labels_that_would_overlap_and_keep_them_inside() {
        let mut lanes = Lanes::new(0.0, 300.0);
        lanes.reserve(0, 0.0, 100.0);
        // Clear of the reservation: lane 0.
        assert_eq!(lanes.place(200.0, 40.0), (180.0, 0));
        // On top of the first: lane 1; on top of both: lane 2.
        assert_eq!(lanes.place(205.0, 40.0), (185.0, 1));
        assert_eq!(lanes.place(210.0, 40.0), (190.0, 2));
        // Past the right edge: pulled in, where lane 0 is clear again (220 + GAP < 260).
        assert_eq!(lanes.place(299.0, 40.0), (260.0, 0));
        // On the reservation: the next lane that is free there.
        assert_eq!(lanes.place(50.0, 40.0), (30.0, 1));
        assert_eq!(lanes.len(), 3);
        assert!(Lanes::new(0.0, 1.0).is_empty());
    }
}
