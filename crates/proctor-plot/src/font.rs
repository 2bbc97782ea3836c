//! The one font every plot is drawn with, embedded in the binary, and its metrics: advance
//! widths for measuring labels, ascent and descent for their height. It does not shape text
//! (resvg does, with the same font) or look for fonts on the system.
//!
//! DejaVu Sans 2.37, unmodified (`fonts/DejaVuSans.ttf`), under the Bitstream Vera and Arev
//! licences in `fonts/LICENSE-DejaVu`, which allow embedding and redistribution with the notice.
//! It covers Latin, Greek and Cyrillic, so paths, URLs and `µs` print as written.

use std::sync::OnceLock;

use skrifa::instance::{LocationRef, Size};
use skrifa::{FontRef, GlyphId, MetadataProvider as _};

/// The font file's bytes.
pub(crate) const DATA: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
/// The family name inside the font, which the SVG asks for.
#[allow(dead_code)]
pub(crate) const FAMILY: &str = "DejaVu Sans";

/// What the layout needs of the font, read once, in font units (per em).
struct Metrics {
    units_per_em: f64,
    ascent: f64,
    /// Below the baseline, positive.
    descent: f64,
    /// Advances of U+0000–U+00FF, the characters nearly every label is made of.
    latin1: [f64; 256],
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let font = parsed();
        let metrics = font.metrics(Size::unscaled(), LocationRef::default());
        let mut latin1 = [0.0; 256];
        for (code, advance) in latin1.iter_mut().enumerate() {
            *advance = advance_units(&font, char::from(code as u8));
        }
        Metrics {
            units_per_em: f64::from(metrics.units_per_em),
            ascent: f64::from(metrics.ascent),
            descent: -f64::from(metrics.descent),
            latin1,
        }
    })
}

fn parsed() -> FontRef<'static> {
    // The font is ours and fixed at build time: one that does not parse is a broken build,
    // which every test that measures a label would show.
    FontRef::new(DATA).expect("the embedded font parses")
}

/// A character's advance in font units; a character the font lacks takes the advance of the
/// missing-glyph box (glyph 0) that the renderer draws for it.
fn advance_units(font: &FontRef<'_>, character: char) -> f64 {
    let glyph = font.charmap().map(character).unwrap_or(GlyphId::NOTDEF);
    let advances = font.glyph_metrics(Size::unscaled(), LocationRef::default());
    f64::from(advances.advance_width(glyph).unwrap_or(0.0))
}

/// How wide `text` is at `size` pixels: the sum of its glyphs' advances. The renderer also
/// kerns, which only ever narrows DejaVu Sans's pairs, so this errs on the wide side (a test
/// in `png` holds it to the renderer's own layout).
pub(crate) fn width(text: &str, size: f64) -> f64 {
    let metrics = metrics();
    let mut units = 0.0;
    let mut font = None;
    for character in text.chars() {
        // Control characters are written as '?' (see `crate::escape`).
        let character = if character.is_control() { '?' } else { character };
        units += match metrics.latin1.get(character as usize) {
            Some(advance) => *advance,
            None => advance_units(font.get_or_insert_with(parsed), character),
        };
    }
    units / metrics.units_per_em * size
}

/// How far the font reaches above the baseline at `size` pixels.
pub(crate) fn ascent(size: f64) -> f64 {
    metrics().ascent / metrics().units_per_em * size
}

/// How far the font reaches below the baseline at `size` pixels, positive.
pub(crate) fn descent(size: f64) -> f64 {
    metrics().descent / metrics().units_per_em * size
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_font_is_dejavu_sans_with_its_known_metrics() {
        let font = FontRef::new(DATA).expect("parses");
        let metrics = font.metrics(Size::unscaled(), LocationRef::default());
        assert_eq!(metrics.units_per_em, 2048);
        // DejaVu Sans: digits are 1303 units wide (tabular), a space 651.
        assert!((width("0123456789", 2048.0) - 13_030.0).abs() < 1e-9, "{}", width("0123456789", 2048.0));
        assert!((width(" ", 2048.0) - 651.0).abs() < 1e-9, "{}", width(" ", 2048.0));
        // Case matters (it did not in the old pixel font), and µ is a glyph of its own.
        assert!(width("ms", 11.0) < width("MS", 11.0));
        assert!(width("µ", 11.0) > 0.0);
        assert!(ascent(11.0) > 9.0 && ascent(11.0) < 11.0, "{}", ascent(11.0));
        assert!(descent(11.0) > 2.0 && descent(11.0) < 3.0, "{}", descent(11.0));
    }

    #[test]
    fn characters_beyond_latin1_are_measured_too() {
        // Greek and Cyrillic are in the font; Han is not and takes the missing-glyph box.
        assert!(width("Ж", 11.0) > 0.0);
        assert!(width("中", 11.0) > 0.0);
        assert!((width("a\u{1}b", 11.0) - width("a?b", 11.0)).abs() < 1e-9);
    }
}
