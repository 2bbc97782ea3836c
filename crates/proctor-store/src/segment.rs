//! Segment files: listing a store directory, walking a segment's frames, and deciding what a
//! defect means (torn tail → truncate, damage followed by good frames → set the file aside).
//! Does not compress or decode records.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::frame::{check_payload, decode_header, FrameDefect, FrameHeader, FrameKind, HEADER_LEN, SEGMENT_MAGIC};
use crate::StoreError;

/// Segments are named `<unix_ns of their first frame, 20 digits>.seg`, so name order is time
/// order and a segment covers the time from its name up to the next segment's name.
pub const SEGMENT_SUFFIX: &str = ".seg";
/// A segment set aside gets this appended; it is never read again, and retention deletes it
/// once it is past the retention age or the store is over its size budget.
pub const CORRUPT_SUFFIX: &str = ".corrupt";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    pub path: PathBuf,
    pub start_ns: u64,
    pub len_bytes: u64,
}

pub fn segment_name(start_ns: u64) -> String {
    format!("{start_ns:020}{SEGMENT_SUFFIX}")
}

/// Segments in time order; other files (the lock, set-aside segments) are ignored.
pub fn list_segments(dir: &Path) -> Result<Vec<SegmentInfo>, StoreError> {
    list_by_suffix(dir, SEGMENT_SUFFIX)
}

/// Segments set aside as `<name>.seg.corrupt`, in time order (by the segment's own name).
pub fn list_set_aside(dir: &Path) -> Result<Vec<SegmentInfo>, StoreError> {
    let suffix = format!("{SEGMENT_SUFFIX}{CORRUPT_SUFFIX}");
    list_by_suffix(dir, &suffix)
}

fn list_by_suffix(dir: &Path, suffix: &str) -> Result<Vec<SegmentInfo>, StoreError> {
    let entries = std::fs::read_dir(dir).map_err(|e| StoreError::io("cannot list", dir, e))?;
    let mut segments = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("cannot list", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_suffix(suffix) else { continue };
        let Ok(start_ns) = stem.parse::<u64>() else { continue };
        let len_bytes = entry.metadata().map_err(|e| StoreError::io("cannot stat", &entry.path(), e))?.len();
        segments.push(SegmentInfo { path: entry.path(), start_ns, len_bytes });
    }
    segments.sort_by_key(|s| s.start_ns);
    Ok(segments)
}

/// Where one frame is, as found by a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRef {
    pub offset: u64,
    pub header: FrameHeader,
    /// Offset of the key frame this frame's chunk starts with (its own offset for a key frame).
    pub key_offset: u64,
}

/// The outcome of walking one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    pub frames: Vec<FrameRef>,
    /// Where the good frames end.
    pub good_len: u64,
    /// The first defect, if any, and what it was.
    pub defect: Option<(u64, FrameDefect)>,
}

/// How thoroughly to walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Read every payload and check its CRC (the segment a crash may have torn).
    Full,
    /// Read headers only (sealed segments; payload CRCs are checked when a frame is read).
    Headers,
}

pub fn walk(path: &Path, check: Check) -> Result<Walk, StoreError> {
    let mut file = File::open(path).map_err(|e| StoreError::io("cannot open", path, e))?;
    let file_len = file.metadata().map_err(|e| StoreError::io("cannot stat", path, e))?.len();
    let mut magic = [0u8; 8];
    let got = read_up_to(&mut file, &mut magic).map_err(|e| StoreError::io("cannot read", path, e))?;
    if got < magic.len() || &magic != SEGMENT_MAGIC {
        let defect = if got < magic.len() && magic[..got] == SEGMENT_MAGIC[..got] {
            FrameDefect::Torn
        } else {
            FrameDefect::Corrupt("bad segment magic")
        };
        return Ok(Walk { frames: Vec::new(), good_len: 0, defect: Some((0, defect)) });
    }
    let mut frames = Vec::new();
    let mut offset = SEGMENT_MAGIC.len() as u64;
    let mut key_offset = None;
    let mut header_bytes = [0u8; HEADER_LEN];
    let mut payload = Vec::new();
    let defect = loop {
        if offset == file_len {
            break None;
        }
        let got =
            read_at_up_to(&file, &mut header_bytes, offset).map_err(|e| StoreError::io("cannot read", path, e))?;
        let header = match decode_header(&header_bytes[..got]) {
            Ok(h) => h,
            Err(d) => break Some((offset, d)),
        };
        let end = offset + HEADER_LEN as u64 + u64::from(header.payload_len);
        if end > file_len {
            break Some((offset, FrameDefect::Torn));
        }
        if check == Check::Full {
            payload.resize(header.payload_len as usize, 0);
            file.read_exact_at(&mut payload, offset + HEADER_LEN as u64)
                .map_err(|e| StoreError::io("cannot read", path, e))?;
            if let Err(d) = check_payload(&header_bytes, &header, &payload) {
                break Some((offset, d));
            }
        }
        let key = match header.kind {
            FrameKind::Key => offset,
            FrameKind::Delta => match key_offset {
                Some(k) => k,
                None => break Some((offset, FrameDefect::Corrupt("delta frame before any key frame"))),
            },
            // Events stand alone and do not end a sample chunk.
            FrameKind::Probe | FrameKind::Statsd => offset,
        };
        if header.kind.is_sample() {
            key_offset = Some(key);
        }
        frames.push(FrameRef { offset, header, key_offset: key });
        offset = end;
    };
    Ok(Walk { frames, good_len: offset, defect })
}

/// Whether any intact frame starts after `from`: if so, the defect at `from` is damage in the
/// middle of the file, not a write that a crash cut short.
pub fn intact_frame_after(path: &Path, from: u64) -> Result<bool, StoreError> {
    let mut file = File::open(path).map_err(|e| StoreError::io("cannot open", path, e))?;
    file.seek(SeekFrom::Start(from + 1)).map_err(|e| StoreError::io("cannot read", path, e))?;
    let mut rest = Vec::new();
    file.read_to_end(&mut rest).map_err(|e| StoreError::io("cannot read", path, e))?;
    let magic = crate::frame::FRAME_MAGIC.to_le_bytes();
    for start in memchr_magic(&rest, &magic) {
        let candidate = &rest[start..];
        if let Ok(header) = decode_header(candidate) {
            if check_payload(candidate, &header, candidate.get(HEADER_LEN..).unwrap_or(&[])).is_ok() {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

fn memchr_magic<'a>(haystack: &'a [u8], magic: &'a [u8; 4]) -> impl Iterator<Item = usize> + 'a {
    haystack.windows(4).enumerate().filter(move |(_, w)| *w == magic).map(|(i, _)| i)
}

fn read_up_to(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

fn read_at_up_to(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], offset + filled as u64)? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}
