//! Rasterizing a plot: its SVG document drawn by resvg into an RGB canvas, encoded as a PNG.
//! The PNG is the SVG's picture, pixel for pixel as resvg sees it; nothing here draws on its
//! own. It does not filter rows or interlace: plots are flat colour and deflate well as is.

use std::io::Write as _;
use std::sync::{Arc, OnceLock};

use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg::{fontdb, ImageHrefResolver, Options, Tree};

use crate::{font, svg, Shape};

/// The shapes as a PNG image `width` × `height` pixels (RGB, 8 bits per channel): the
/// document [`svg`] writes, rendered with the embedded font. The same shapes always give the
/// same bytes.
pub fn png(width: u32, height: u32, shapes: &[Shape]) -> Vec<u8> {
    let (width, height) = (width.max(1), height.max(1));
    let document = svg(width, height, shapes);
    // The document is ours: escaped text, numbers and fixed attributes. One that does not
    // parse is a bug in `svg`, which the tests here would show first.
    let tree = Tree::from_str(&document, &options()).expect("proctor-plot's SVG parses");
    let mut pixmap = Pixmap::new(width, height).expect("a picture of at least one pixel");
    resvg::render(&tree, Transform::identity(), &mut pixmap.as_mut());
    // Premultiplied RGBA over white. The document paints a white background first, so every
    // alpha is 255 and this is a copy; composing keeps it right even if that changed.
    let rgb: Vec<u8> = pixmap
        .data()
        .chunks_exact(4)
        .flat_map(|rgba| {
            let cover = 255 - rgba[3];
            [rgba[0].saturating_add(cover), rgba[1].saturating_add(cover), rgba[2].saturating_add(cover)]
        })
        .collect();
    encode(width as usize, height as usize, &rgb)
}

/// What usvg may use: the embedded font and nothing else. No system fonts, and no `<image>`
/// reference resolved (the default would read a file an SVG names; ours name none).
fn options() -> Options<'static> {
    static FONTS: OnceLock<Arc<fontdb::Database>> = OnceLock::new();
    let fonts = FONTS.get_or_init(|| {
        let mut fonts = fontdb::Database::new();
        fonts.load_font_source(fontdb::Source::Binary(Arc::new(font::DATA)));
        // Every generic family is the one font, so no label can ask for another.
        fonts.set_sans_serif_family(font::FAMILY);
        fonts.set_serif_family(font::FAMILY);
        fonts.set_monospace_family(font::FAMILY);
        Arc::new(fonts)
    });
    Options {
        font_family: font::FAMILY.to_string(),
        fontdb: Arc::clone(fonts),
        image_href_resolver: ImageHrefResolver {
            resolve_data: Box::new(|_, _, _| None),
            resolve_string: Box::new(|_, _| None),
        },
        ..Options::default()
    }
}

/// PNG: signature, IHDR, one zlib-compressed IDAT (filter 0 on every row), IEND. `rgb` holds
/// `width * height` pixels, row by row from the top left, 3 bytes each.
fn encode(width: usize, height: usize, rgb: &[u8]) -> Vec<u8> {
    let mut raw = Vec::with_capacity((width * 3 + 1) * height);
    for row in rgb.chunks(width * 3) {
        raw.push(0);
        raw.extend_from_slice(row);
    }
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = zlib.write_all(&raw);
    let compressed = zlib.finish().unwrap_or_default();

    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::with_capacity(13);
    header.extend_from_slice(&(width as u32).to_be_bytes());
    header.extend_from_slice(&(height as u32).to_be_bytes());
    // 8 bits per channel, colour type 2 (RGB), deflate, no filter method, no interlace.
    header.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &header);
    chunk(&mut out, b"IDAT", &compressed);
    chunk(&mut out, b"IEND", &[]);
    out
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
    use crate::label::{text_box, width};
    use crate::{Anchor, BLUE, INK, VERMILLION, WHITE};

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
        let mut png = png(7, 5, &[Shape::rect(1.0, 1.0, 2.0, 2.0, VERMILLION)]);
        assert!(decode(&png).is_ok());
        // The last byte of IDAT's data sits just before its CRC and IEND's 12 bytes.
        let last_idat_byte = png.len() - 12 - 4 - 1;
        png[last_idat_byte] ^= 1;
        let error = decode(&png).err().expect("corruption detected");
        assert!(error.starts_with("IDAT: stored CRC"), "{error}");
    }

    /// The bounding box of the pixels that are not white: (left, top, right, bottom), right
    /// and bottom exclusive.
    fn ink(png: &[u8]) -> Option<(usize, usize, usize, usize)> {
        let image = decode(png).expect("valid PNG");
        let mut found: Option<(usize, usize, usize, usize)> = None;
        for row in 0..image.height {
            for column in 0..image.width {
                if image.pixels[row * image.width + column] != [0xff; 3] {
                    let (l, t, r, b) = found.unwrap_or((column, row, column + 1, row + 1));
                    found = Some((l.min(column), t.min(row), r.max(column + 1), b.max(row + 1)));
                }
            }
        }
        found
    }

    #[test]
    fn text_is_drawn_inside_the_box_it_is_measured_to() {
        for (text, anchor) in [
            ("10 µs", Anchor::Start),
            ("/var/lib/Proctor/Data", Anchor::Middle),
            ("Жq|ÅgÉ", Anchor::End),
            ("futex: 103 calls, 1.51 s total, p50 42.8 µs", Anchor::Start),
        ] {
            let shape = Shape::text(300.0, 30.0, text, INK, anchor);
            let expected = text_box(&shape).expect("a text box");
            let (left, top, right, bottom) = ink(&png(600, 50, &[shape])).expect("text is drawn");
            // Anti-aliasing may touch the pixel a box edge falls in.
            assert!(left as f64 >= expected.left.floor() && right as f64 <= expected.right.ceil(), "{text}");
            assert!(top as f64 >= expected.top.floor() && bottom as f64 <= expected.bottom.ceil(), "{text}");
            // And most of the box's width is used: the measure is not merely generous.
            assert!((right - left) as f64 > 0.8 * (expected.right - expected.left), "{text}");
        }
    }

    /// How much wider usvg lays each text out than [`width`] measures it: its text bounding
    /// box is the layout box (advances after shaping and kerning).
    fn excess(texts: &[String]) -> Vec<(String, f64)> {
        // Many labels to a document, one per 20 px line, told apart by where they sit.
        let mut excess = Vec::new();
        for chunk in texts.chunks(500) {
            let shapes: Vec<Shape> = chunk
                .iter()
                .enumerate()
                .map(|(i, text)| Shape::text(10.0, 20.0 * (i + 1) as f64, text.as_str(), INK, Anchor::Start))
                .collect();
            let document = svg(1000, 20 * (chunk.len() as u32 + 1), &shapes);
            let tree = Tree::from_str(&document, &options()).expect("parses");
            for node in tree.root().children() {
                if let resvg::usvg::Node::Text(laid_out) = node {
                    let line = (f64::from(laid_out.bounding_box().bottom()) / 20.0).floor() as usize;
                    let text = &chunk[line - 1];
                    excess.push((text.clone(), f64::from(laid_out.bounding_box().width()) - width(text, 11.0)));
                }
            }
        }
        excess
    }

    #[test]
    fn measured_widths_agree_with_the_renderers_layout() {
        // Kerning moves a few of DejaVu Sans's pairs apart ("-J" by 0.6 px at 11 px): every pair
        // of the characters labels are made of stays within the pixel a text box adds per side.
        let characters: Vec<char> = (' '..='~').chain(['µ', '…', '×', '≈', '–']).collect();
        // (Two spaces draw nothing and lay out no box.)
        let pairs: Vec<String> = characters
            .iter()
            .flat_map(|a| characters.iter().map(move |b| format!("{a}{b}")))
            .filter(|pair| pair != "  ")
            .collect();
        let count = pairs.len();
        let pairs = excess(&pairs);
        assert_eq!(pairs.len(), count, "every pair laid out");
        let worst =
            pairs.iter().fold(("", f64::MIN), |worst, (text, by)| if *by > worst.1 { (text, *by) } else { worst });
        assert!(worst.1 < crate::label::KERNING_ALLOWANCE, "{worst:?}");
        // Whole labels: as wide as drawn, give or take the kerning.
        let labels: Vec<String> = ["futex: 103 calls, 1.51 s total, p50 42.8 µs", "mode 64.0 ms (35%)", "Тест 中"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for (text, by) in excess(&labels) {
            assert!(by.abs() < 2.0 * crate::label::KERNING_ALLOWANCE, "{text:?}: {by}");
        }
    }

    #[test]
    fn case_and_the_micro_sign_are_drawn_as_written() {
        let draw = |label: &str| png(60, 20, &[Shape::text(2.0, 15.0, label, INK, Anchor::Start)]);
        assert_ne!(draw("ms"), draw("MS"));
        assert_ne!(draw("µs"), draw("VS"));
        assert_ne!(draw("µs"), draw("us"));
    }

    #[test]
    fn the_same_shapes_give_the_same_bytes() {
        let shapes = [
            Shape::rect(3.0, 4.0, 20.0, 10.0, BLUE),
            Shape::dashed(0.0, 20.0, 100.0, 20.0, INK),
            Shape::dot(50.0, 20.0, 2.5, VERMILLION, Some(WHITE)),
            Shape::text(10.0, 40.0, "250 ms (n=5)", VERMILLION, Anchor::Start),
        ];
        let first = png(120, 50, &shapes);
        assert_eq!(first, png(120, 50, &shapes));
        // From another thread, with the font database already built: still the same.
        let copy = shapes.to_vec();
        let other = std::thread::spawn(move || png(120, 50, &copy)).join().expect("thread");
        assert_eq!(first, other);
    }

    #[test]
    fn rectangles_cover_their_pixels_with_crisp_edges() {
        let image = decode(&png(8, 8, &[Shape::rect(1.0, 2.0, 3.0, 4.0, BLUE)])).expect("valid PNG");
        for row in 0..8 {
            for column in 0..8 {
                let inside = (1..4).contains(&column) && (2..6).contains(&row);
                let expected = if inside { BLUE } else { WHITE };
                assert_eq!(image.pixels[row * 8 + column], expected, "pixel ({column}, {row})");
            }
        }
    }

    #[test]
    fn a_dot_with_an_outline_stays_visible_on_a_line_of_its_colour() {
        // A vermillion dot on a vermillion line: the white ring separates the two.
        let shapes =
            [Shape::line(0.0, 10.5, 40.0, 10.5, VERMILLION), Shape::dot(20.0, 10.5, 3.0, VERMILLION, Some(WHITE))];
        let image = decode(&png(40, 20, &shapes)).expect("valid PNG");
        let row = &image.pixels[10 * 40..11 * 40];
        assert_eq!(row[5], VERMILLION, "the line");
        assert_eq!(row[20], VERMILLION, "the dot's middle");
        // Vermillion's green is 0x5e: the ring is much lighter, on both sides of the dot.
        let ring = |pixels: &[[u8; 3]]| pixels.iter().any(|pixel| pixel[1] > 0xc0);
        assert!(ring(&row[15..19]) && ring(&row[21..25]), "a light ring between line and dot: {row:?}");
    }

    #[test]
    fn hostile_text_still_renders() {
        let text = "<svg> & \"quotes\" \u{0} \u{1b}[31m \u{202e}rtl 中文 🦀 \u{fffd}";
        let png = png(400, 30, &[Shape::text(2.0, 20.0, text, INK, Anchor::Start)]);
        assert!(decode(&png).is_ok());
    }
}
