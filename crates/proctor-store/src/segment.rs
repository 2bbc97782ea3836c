//! Segment files: listing a store directory, opening its files, walking a segment's frames,
//! and deciding what a defect means (torn tail → truncate, damage followed by good frames → set
//! the file aside; a reader skips the damage and reads on). Does not compress or decode records.
//!
//! Every store file is opened with `O_NONBLOCK` and accepted only if it is a regular file (then
//! the flag is cleared): a FIFO named `*.seg` made `open()` wait for a writer that never came,
//! with `record`'s and `serve`'s signals blocked. Anything named like a segment that is not a
//! regular file is listed apart, reported, and never opened again.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::frame::{check_payload, decode_header, FrameDefect, FrameHeader, FrameKind, HEADER_LEN, SEGMENT_MAGIC};
use crate::StoreError;

/// Segments are named `<unix_ns of their first frame, 20 digits>.seg`, so name order is time
/// order and a segment covers the time from its name up to the next segment's name.
pub const SEGMENT_SUFFIX: &str = ".seg";
/// A segment set aside gets this appended; it is never written again (readers still read its
/// intact frames, and say so), and retention deletes it
/// once it is past the retention age or the store is over its size budget.
pub const CORRUPT_SUFFIX: &str = ".corrupt";
/// A segment being rewritten (`Writer::replace_segments`) is written as `NAME.seg.new`, which
/// no listing takes for a segment, and renamed to `NAME.seg` once whole; a `.new` file left by a
/// crash is removed by the next writer.
pub const REWRITE_SUFFIX: &str = ".new";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    pub path: PathBuf,
    pub start_ns: u64,
    pub len_bytes: u64,
    /// A segment set aside as `*.seg.corrupt` (see [`CORRUPT_SUFFIX`]).
    pub set_aside: bool,
}

pub fn segment_name(start_ns: u64) -> String {
    format!("{start_ns:020}{SEGMENT_SUFFIX}")
}

/// What a store directory holds under segment names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Segments, in time order.
    pub segments: Vec<SegmentInfo>,
    /// Segments set aside as `<name>.seg.corrupt`, in time order (by the segment's own name).
    pub set_aside: Vec<SegmentInfo>,
    /// Entries named like either that are not regular files (directories, FIFOs, sockets,
    /// devices, dangling links), with what they are: never opened.
    pub not_files: Vec<(PathBuf, String)>,
}

/// Lists `dir`'s segments and set-aside segments; other files (the lock, streams) are ignored.
pub fn list(dir: &Path) -> Result<Listing, StoreError> {
    let entries = std::fs::read_dir(dir).map_err(|e| StoreError::io("cannot list", dir, e))?;
    let set_aside_suffix = format!("{SEGMENT_SUFFIX}{CORRUPT_SUFFIX}");
    let mut listing = Listing::default();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("cannot list", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let (stem, set_aside) = match (name.strip_suffix(SEGMENT_SUFFIX), name.strip_suffix(set_aside_suffix.as_str()))
        {
            (Some(stem), _) => (stem, false),
            (None, Some(stem)) => (stem, true),
            (None, None) => continue,
        };
        let Ok(start_ns) = stem.parse::<u64>() else { continue };
        let path = entry.path();
        // `stat`, following a link: a link to a segment is a segment.
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            // Removed since the listing (retention, a writer's repair).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && std::fs::symlink_metadata(&path).is_err() => continue,
            Err(e) => {
                listing.not_files.push((path, format!("cannot stat: {e}")));
                continue;
            }
        };
        if !meta.is_file() {
            listing.not_files.push((path, format!("{}, not a segment file", file_kind(&meta.file_type()))));
            continue;
        }
        let info = SegmentInfo { path, start_ns, len_bytes: meta.len(), set_aside };
        if set_aside {
            listing.set_aside.push(info);
        } else {
            listing.segments.push(info);
        }
    }
    listing.segments.sort_by_key(|s| s.start_ns);
    listing.set_aside.sort_by_key(|s| s.start_ns);
    listing.not_files.sort();
    Ok(listing)
}

/// Segments in time order (regular files only).
pub fn list_segments(dir: &Path) -> Result<Vec<SegmentInfo>, StoreError> {
    Ok(list(dir)?.segments)
}

/// Segments set aside as `<name>.seg.corrupt`, in time order (regular files only).
pub fn list_set_aside(dir: &Path) -> Result<Vec<SegmentInfo>, StoreError> {
    Ok(list(dir)?.set_aside)
}

pub use proctor_procfs::regular::file_kind;

/// Opens a store file without waiting, and only if it is a regular file: proctor-procfs's
/// [`proctor_procfs::regular::open`], the one opener of every data-directory file (a `stat`
/// first so a device is never opened, `O_NONBLOCK` so a FIFO does not wait, `fstat` on the open
/// file so one swapped in after the `stat` is caught too; the flag cleared again).
pub fn open_regular(path: &Path, options: &mut OpenOptions) -> Result<File, StoreError> {
    use proctor_procfs::regular::{open, FileError};
    open(path, options).map_err(|e| match e {
        FileError::NotRegular { path, what } => StoreError::NotAFile { path, what },
        FileError::Io { action, path, source } => StoreError::Io { action, path, error: source },
        // Not made by `open`, which reads nothing.
        FileError::TooBig { path, .. } => {
            StoreError::Io { action: "cannot read", path, error: std::io::Error::other("over its bound") }
        }
    })
}

/// Opens a store file for reading (see [`open_regular`]).
pub fn open_for_reading(path: &Path) -> Result<File, StoreError> {
    open_regular(path, OpenOptions::new().read(true))
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
    let file = open_for_reading(path)?;
    let file_len = file.metadata().map_err(|e| StoreError::io("cannot stat", path, e))?.len();
    let mut magic = [0u8; 8];
    let got = read_at_up_to(&file, &mut magic, 0).map_err(|e| StoreError::io("cannot read", path, e))?;
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
            FrameKind::Probe | FrameKind::Statsd | FrameKind::Rollup => offset,
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
    let file = open_for_reading(path)?;
    let file_len = file.metadata().map_err(|e| StoreError::io("cannot stat", path, e))?.len();
    Ok(next_intact_frame(&file, path, from + 1, file_len)?.found.is_some())
}

/// What a search for the next intact frame found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resync {
    /// Where the next intact frame starts, if one does.
    pub found: Option<u64>,
    /// Frame headers met on the way (magic, kind and length plausible) whose frames failed
    /// their CRC or ran past the end: frames lost, as far as their headers show.
    pub broken_headers: u64,
}

/// Searches `[from, file_len)` for the next intact frame (its header decodes, it ends within
/// the file, its CRC holds), reading the file in 1 MiB windows. Checking a candidate reads its
/// payload, and a hostile file can claim a long one at every byte: the payload bytes checked
/// are bounded by four times the file plus 64 MiB, past which the search gives up as if
/// nothing intact followed.
pub fn next_intact_frame(file: &File, path: &Path, from: u64, file_len: u64) -> Result<Resync, StoreError> {
    const WINDOW: usize = 1 << 20;
    let read =
        |buf: &mut [u8], at: u64| read_at_up_to(file, buf, at).map_err(|e| StoreError::io("cannot read", path, e));
    let magic = crate::frame::FRAME_MAGIC.to_le_bytes();
    let mut budget = file_len.saturating_mul(4).saturating_add(64 << 20);
    let mut resync = Resync::default();
    let mut window = vec![0u8; WINDOW + HEADER_LEN];
    let mut payload = Vec::new();
    let mut at = from;
    while at < file_len {
        let got = read(&mut window, at)?;
        let searchable = got.min(WINDOW);
        for i in (0..searchable).filter(|&i| window[i..].starts_with(&magic)) {
            let start = at + i as u64;
            let mut header_bytes = [0u8; HEADER_LEN];
            let header_got = read(&mut header_bytes, start)?;
            let Ok(header) = decode_header(&header_bytes[..header_got]) else { continue };
            let end = start + HEADER_LEN as u64 + u64::from(header.payload_len);
            if end > file_len || u64::from(header.payload_len) > budget {
                resync.broken_headers += 1;
                continue;
            }
            budget -= u64::from(header.payload_len);
            payload.resize(header.payload_len as usize, 0);
            read(&mut payload, start + HEADER_LEN as u64)?;
            if check_payload(&header_bytes, &header, &payload).is_ok() {
                resync.found = Some(start);
                return Ok(resync);
            }
            resync.broken_headers += 1;
        }
        if got < window.len() {
            break;
        }
        at += WINDOW as u64;
    }
    Ok(resync)
}

/// A stretch of a segment a reader could not read, and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub offset: u64,
    /// Bytes skipped from `offset`.
    pub bytes: u64,
    /// Why the walk stopped there.
    pub defect: FrameDefect,
    /// Frames lost in it, as far as their headers show (a lower bound), plus the intact
    /// version-1 deltas after it that lost their key frame to it.
    pub frames_lost: u64,
    /// Nothing intact follows: the segment ends in it.
    pub to_end: bool,
}

/// A reader's walk of one segment: every intact frame, and the damage between and after them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Salvage {
    pub frames: Vec<FrameRef>,
    pub damage: Vec<Damage>,
    /// The segment's size when walked.
    pub len_bytes: u64,
}

/// Where a [`salvage_from`] walk of a segment stopped, so that a later walk of the same file
/// goes on from there instead of from its start: the newest segment grows while it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    /// Where the next frame is looked for: after the last intact frame, or where the damage
    /// that ends the file starts (a frame still being written there is read next time).
    pub offset: u64,
    /// The key frame of the chunk the frames at `offset` belong to.
    key_offset: Option<u64>,
    /// Damage was met since that key (version-1 deltas after it are not trusted).
    damaged_since_key: bool,
}

/// Walks a segment's headers as [`walk`] does, but past damage: where the walk finds no frame,
/// it reads on from the next intact frame ([`next_intact_frame`]) and notes the stretch it
/// skipped. A set-aside segment, or one damaged since a writer last checked it, so loses only
/// what is damaged. Deltas after damage keep their chunk's key when they are version 2 (each
/// names its base, and a base that is not an intact frame of the right kind fails to decode);
/// version-1 deltas, which carry no such check, are dropped until the next key frame.
pub fn salvage(path: &Path) -> Result<Salvage, StoreError> {
    Ok(salvage_from(path, None, usize::MAX)?.0)
}

/// [`salvage`] from where an earlier walk of the same file stopped (`None`: from its start),
/// up to `limit` frames: only the frames written since are read, a bounded number at a time.
/// Returns where to go on from next time (`None` when the file does not yet hold a whole
/// segment magic).
pub fn salvage_from(path: &Path, from: Option<Resume>, limit: usize) -> Result<(Salvage, Option<Resume>), StoreError> {
    let file = open_for_reading(path)?;
    let file_len = file.metadata().map_err(|e| StoreError::io("cannot stat", path, e))?.len();
    let mut salvage = Salvage { frames: Vec::new(), damage: Vec::new(), len_bytes: file_len };
    let (mut offset, mut key_offset, mut damaged_since_key) = match from {
        Some(r) => (r.offset, r.key_offset, r.damaged_since_key),
        None => (SEGMENT_MAGIC.len() as u64, None, false),
    };
    if from.is_none() {
        let mut magic = [0u8; 8];
        let got = read_at_up_to(&file, &mut magic, 0).map_err(|e| StoreError::io("cannot read", path, e))?;
        if got < magic.len() || &magic != SEGMENT_MAGIC {
            let torn = got < magic.len() && magic[..got] == SEGMENT_MAGIC[..got];
            let defect = if torn { FrameDefect::Torn } else { FrameDefect::Corrupt("bad segment magic") };
            if !skip_damage(&file, path, 0, defect, file_len, &mut salvage, &mut offset)? {
                return Ok((salvage, None));
            }
        }
    }
    let mut header_bytes = [0u8; HEADER_LEN];
    // Intact version-1 deltas since the last damage that have no key to decode against.
    let mut unkeyed = 0;
    // Where the walk stood before damage that nothing intact follows.
    let mut before_tail_damage = None;
    while offset < file_len && salvage.frames.len() < limit {
        let got =
            read_at_up_to(&file, &mut header_bytes, offset).map_err(|e| StoreError::io("cannot read", path, e))?;
        let defect = match decode_header(&header_bytes[..got]) {
            Ok(h) if offset + HEADER_LEN as u64 + u64::from(h.payload_len) > file_len => Err(FrameDefect::Torn),
            Ok(h) => Ok(h),
            Err(d) => Err(d),
        };
        let header = match defect {
            Ok(header) => header,
            Err(defect) => {
                if let Some(last) = salvage.damage.last_mut() {
                    last.frames_lost += std::mem::take(&mut unkeyed);
                }
                let before = Resume { offset, key_offset, damaged_since_key };
                damaged_since_key = true;
                if !skip_damage(&file, path, offset, defect, file_len, &mut salvage, &mut offset)? {
                    before_tail_damage = Some(before);
                    break;
                }
                continue;
            }
        };
        let key = match header.kind {
            FrameKind::Key => {
                key_offset = Some(offset);
                damaged_since_key = false;
                key_offset
            }
            // Version-1 deltas after damage cannot tell whether the key before it is theirs.
            FrameKind::Delta => key_offset.filter(|_| !damaged_since_key || header.version != 1),
            FrameKind::Probe | FrameKind::Statsd | FrameKind::Rollup => Some(offset),
        };
        match key {
            Some(key) => salvage.frames.push(FrameRef { offset, header, key_offset: key }),
            None => unkeyed += 1,
        }
        offset += HEADER_LEN as u64 + u64::from(header.payload_len);
    }
    if let Some(last) = salvage.damage.last_mut() {
        last.frames_lost += unkeyed;
    } else if unkeyed > 0 && from.is_none() {
        // Deltas at the very start of a segment: a writer never puts them there.
        salvage.damage.push(Damage {
            offset: SEGMENT_MAGIC.len() as u64,
            bytes: 0,
            defect: FrameDefect::Corrupt("delta frame before any key frame"),
            frames_lost: unkeyed,
            to_end: false,
        });
    }
    let resume = before_tail_damage.unwrap_or(Resume { offset, key_offset, damaged_since_key });
    Ok((salvage, Some(resume)))
}

/// Notes damage at `at` and moves `offset` to the next intact frame; `false` when none follows.
fn skip_damage(
    file: &File,
    path: &Path,
    at: u64,
    defect: FrameDefect,
    file_len: u64,
    salvage: &mut Salvage,
    offset: &mut u64,
) -> Result<bool, StoreError> {
    let resync = next_intact_frame(file, path, at + 1, file_len)?;
    let next = resync.found.unwrap_or(file_len);
    salvage.damage.push(Damage {
        offset: at,
        bytes: next - at,
        defect,
        // Besides the broken headers met: the frame whose header was damaged, when the stretch
        // could have held one (bytes inserted, or a segment magic overwritten, lose none), or
        // the frame a stretch that ends the file cut short.
        frames_lost: resync.broken_headers
            + u64::from(match resync.found {
                Some(_) => at >= SEGMENT_MAGIC.len() as u64 && next - at > HEADER_LEN as u64,
                None => next > SEGMENT_MAGIC.len() as u64,
            }),
        to_end: resync.found.is_none(),
    });
    *offset = next;
    Ok(resync.found.is_some())
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
