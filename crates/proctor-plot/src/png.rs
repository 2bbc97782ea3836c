//! Rasterizing shapes into an RGB canvas and encoding it as a PNG. It does not anti-alias,
//! draw diagonal lines or filter rows: plots are axis-parallel rectangles and pixel text.

use std::io::Write as _;

use crate::pixel_font::{glyph, GLYPH_ADVANCE, GLYPH_HEIGHT, SCALE};
use crate::{Anchor, Shape};

/// The shapes as a PNG image `width` × `height` pixels (RGB, 8 bits per channel) on white.
/// Rectangles and lines are at least one pixel wide and tall, so a zero-count bar or a
/// hairline still shows; anything outside the image is clipped.
pub fn png(width: u32, height: u32, shapes: &[Shape]) -> Vec<u8> {
    let mut canvas = Canvas::new(width as usize, height as usize);
    for shape in shapes {
        match shape {
            Shape::Rect { x, y, width, height, color } => {
                canvas.fill(*x, *y, width.max(1.0), height.max(1.0), *color);
            }
            Shape::Line { x1, y1, x2, y2, color } => {
                // Only axis-parallel lines are drawn, so a thin rectangle is exact.
                canvas.fill(x1.min(*x2), y1.min(*y2), (x2 - x1).abs().max(1.0), (y2 - y1).abs().max(1.0), *color);
            }
            Shape::Text { x, y, text, color, anchor, .. } => {
                let width = text.chars().count() as f64 * GLYPH_ADVANCE;
                let left = match anchor {
                    Anchor::Start => *x,
                    Anchor::Middle => x - width / 2.0,
                    Anchor::End => x - width,
                };
                canvas.text(left, y - GLYPH_HEIGHT, text, *color);
            }
        }
    }
    canvas.encode()
}

/// RGB pixels, row by row from the top left, 3 bytes each.
struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: usize, height: usize) -> Self {
        Self { width, height, pixels: vec![0xff; width * height * 3] }
    }

    /// Fills the pixels whose rounded edges fall inside the rectangle, at least one column
    /// and one row of them unless the rectangle lies wholly past the right or bottom edge.
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

    /// Draws `text` with its glyphs' top left corner at (`x`, `y`).
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

/// One PNG chunk: length, type, data, then the CRC-32 of type and data.
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
    use crate::{BLUE, INK, RED};

    /// CRC-32 as the PNG specification's sample code computes it, bit by bit: independent of
    /// the table-driven one in flate2 that the encoder uses.
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for byte in bytes {
            crc ^= u32::from(*byte);
            for _ in 0..8 {
                crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    struct Decoded {
        width: usize,
        height: usize,
        /// `width * height` RGB pixels.
        pixels: Vec<[u8; 3]>,
    }

    /// Reads back what `png` writes, checking every byte of structure on the way: the
    /// signature, the chunk sequence IHDR, IDAT, IEND with nothing after, each chunk's CRC,
    /// the header's format fields and filter type 0 on every row.
    fn decode(png: &[u8]) -> Result<Decoded, String> {
        let rest = png.strip_prefix(b"\x89PNG\r\n\x1a\n").ok_or("no PNG signature")?;
        let mut chunks = Vec::new();
        let mut at = 0;
        while at < rest.len() {
            let field = |from: usize| -> Result<u32, String> {
                let bytes = rest.get(from..from + 4).ok_or("truncated chunk")?;
                Ok(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
            };
            let length = field(at)? as usize;
            let kind_and_data = rest.get(at + 4..at + 8 + length).ok_or("truncated chunk")?;
            let stored = field(at + 8 + length)?;
            let computed = crc32(kind_and_data);
            let kind = String::from_utf8_lossy(&kind_and_data[..4]).into_owned();
            if stored != computed {
                return Err(format!("{kind}: stored CRC {stored:08x}, computed {computed:08x}"));
            }
            chunks.push((kind, kind_and_data[4..].to_vec()));
            at += 12 + length;
        }
        let kinds: Vec<&str> = chunks.iter().map(|(kind, _)| kind.as_str()).collect();
        if kinds != ["IHDR", "IDAT", "IEND"] {
            return Err(format!("chunks {kinds:?}"));
        }
        let header = &chunks[0].1;
        if header.len() != 13 || header[8..] != [8, 2, 0, 0, 0] {
            return Err(format!("IHDR {header:?}"));
        }
        if !chunks[2].1.is_empty() {
            return Err("IEND carries data".to_string());
        }
        let width = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let height = u32::from_be_bytes([header[4], header[5], header[6], header[7]]) as usize;
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(&chunks[1].1[..]), &mut raw)
            .map_err(|error| format!("IDAT: {error}"))?;
        if raw.len() != height * (1 + width * 3) {
            return Err(format!("IDAT inflates to {} bytes", raw.len()));
        }
        let mut pixels = Vec::with_capacity(width * height);
        for row in raw.chunks(1 + width * 3) {
            if row[0] != 0 {
                return Err(format!("filter type {}", row[0]));
            }
            pixels.extend(row[1..].chunks(3).map(|rgb| [rgb[0], rgb[1], rgb[2]]));
        }
        Ok(Decoded { width, height, pixels })
    }

    /// The picture as rows of `#` (any colour) and `.` (white).
    fn mask(png: &[u8]) -> Vec<String> {
        let image = decode(png).expect("valid PNG");
        (0..image.height)
            .map(|row| {
                (0..image.width)
                    .map(|column| if image.pixels[row * image.width + column] == [0xff; 3] { '.' } else { '#' })
                    .collect()
            })
            .collect()
    }

    fn text(x: f64, baseline: f64, text: &str, centered: bool) -> Shape {
        Shape::text(x, baseline, text, INK, if centered { Anchor::Middle } else { Anchor::Start })
    }

    #[test]
    fn the_crc_checker_agrees_with_the_specification() {
        // Check values: CRC-32's "123456789", and the CRC every PNG's empty IEND ends with.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b"IEND"), 0xae42_6082);
    }

    #[test]
    fn an_empty_picture_is_a_valid_white_png_of_its_size() {
        let png = png(7, 5, &[]);
        let image = decode(&png).expect("valid PNG");
        assert_eq!((image.width, image.height), (7, 5));
        assert!(image.pixels.iter().all(|pixel| *pixel == [0xff; 3]));
        assert_eq!(&png[png.len() - 12..], b"\0\0\0\0IEND\xae\x42\x60\x82");
    }

    #[test]
    fn a_changed_byte_fails_the_crc_check() {
        let mut png = png(7, 5, &[Shape::Rect { x: 1.0, y: 1.0, width: 2.0, height: 2.0, color: RED }]);
        assert!(decode(&png).is_ok());
        // The last byte of IDAT's data sits just before its CRC and IEND's 12 bytes.
        let last_idat_byte = png.len() - 12 - 4 - 1;
        png[last_idat_byte] ^= 1;
        let error = decode(&png).err().expect("corruption detected");
        assert!(error.starts_with("IDAT: stored CRC"), "{error}");
    }

    #[test]
    fn a_glyph_renders_its_known_pixels() {
        // '1' is rows 010 110 010 010 111, each font pixel a 2×2 square; the baseline at
        // y = 11 puts the glyph's top at 11 − 10 = 1.
        let expected = [
            "..........",
            "...##.....",
            "...##.....",
            ".####.....",
            ".####.....",
            "...##.....",
            "...##.....",
            "...##.....",
            "...##.....",
            ".######...",
            ".######...",
            "..........",
        ];
        assert_eq!(mask(&png(10, 12, &[text(1.0, 11.0, "1", false)])), expected);
        // Centred at x = 5: the glyph's 8-pixel advance starts at 5 − 4 = 1, the same place.
        assert_eq!(mask(&png(10, 12, &[text(5.0, 11.0, "1", true)])), expected);
        // The colour is the shape's.
        let image = decode(&png(10, 12, &[text(1.0, 11.0, "1", false)])).expect("valid PNG");
        assert_eq!(image.pixels[image.width + 3], INK);
    }

    #[test]
    fn characters_advance_and_fall_back_to_uppercase_or_a_box() {
        let draw = |label: &str| mask(&png(20, 12, &[text(0.0, 10.0, label, false)]));
        // '-' is the middle row only: two glyphs, 8 pixels apart.
        let dashes = draw("--");
        assert_eq!(dashes[4], "######..######......");
        assert_eq!(dashes.iter().filter(|row| row.contains('#')).count(), 2);
        assert_eq!(draw("ms"), draw("MS"));
        // A character without a glyph is a box, like 'O'.
        assert_eq!(draw("\u{2603}"), draw("O"));
        assert_ne!(draw("?"), draw("O"));
    }

    #[test]
    fn rectangles_and_lines_cover_rounded_pixels_clipped_to_the_image() {
        let shapes = [
            // Columns round(1.4)..round(3.4) = 1..3, rows round(0.6)..round(1.6) = 1..2.
            Shape::Rect { x: 1.4, y: 0.6, width: 2.0, height: 1.0, color: BLUE },
            // A zero-height bar still shows one row.
            Shape::Rect { x: 0.0, y: 4.0, width: 2.0, height: 0.0, color: BLUE },
            // Half outside on the left and bottom: clipped, no panic.
            Shape::Rect { x: -3.0, y: 5.0, width: 4.0, height: 9.0, color: BLUE },
            // Lines may be given in either direction.
            Shape::Line { x1: 6.0, y1: 3.0, x2: 6.0, y2: 0.0, color: INK },
            Shape::Line { x1: 7.0, y1: 6.0, x2: 4.0, y2: 6.0, color: INK },
        ];
        let expected = ["......#.", ".##...#.", "......#.", "........", "##......", "#.......", "#...###.", "#......."];
        assert_eq!(mask(&png(8, 8, &shapes)), expected);
    }
}
