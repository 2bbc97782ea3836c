//! A 3×5 pixel font for PNG labels: digits, Latin capitals and the punctuation the plots
//! print. It does not kern, wrap or measure anything but a fixed advance.

/// Font scale: each font pixel is drawn as a `SCALE` × `SCALE` square.
pub(crate) const SCALE: usize = 2;
/// Distance from one character's left edge to the next: three pixels and a one-pixel gap.
pub(crate) const GLYPH_ADVANCE: f64 = (4 * SCALE) as f64;
pub(crate) const GLYPH_HEIGHT: f64 = (5 * SCALE) as f64;

/// Five rows of three bits per glyph, most significant bit on the left.
///
/// Lowercase is drawn as uppercase; `µ` as a u with a tail; `×` and `≈` (in mode summaries)
/// as `X` and `=`; any other character as a box, so a missing glyph is visible, not blank.
pub(crate) fn glyph(character: char) -> [u8; 5] {
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
        '_' => [0, 0, 0, 0, 7],
        '.' => [0, 0, 0, 0, 2],
        ',' | ';' => [0, 0, 0, 2, 4],
        ':' => [0, 2, 0, 2, 0],
        '/' => [1, 1, 2, 4, 4],
        '(' => [2, 4, 4, 4, 2],
        ')' => [2, 1, 1, 1, 2],
        '=' | '≈' => [0, 7, 0, 7, 0],
        '-' => [0, 0, 7, 0, 0],
        '%' => [4, 1, 2, 4, 1],
        '?' => [7, 1, 2, 0, 2],
        ' ' => [0; 5],
        _ => [7, 5, 5, 5, 7],
    }
}
