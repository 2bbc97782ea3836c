//! Reading a store: which frames fall in a time range (headers only), and decoding them.
//! Never writes, repairs or locks: it reads alongside a live writer, and a frame that fails its
//! CRC or does not decode is skipped and counted, not fatal.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use proctor_model::Sample;

use crate::codec::{decode_event, decode_record, decode_record_host, decode_record_lean, decompress_key, CodecError, Decompressor, Event};
use crate::frame::{check_payload, FrameKind, HEADER_LEN};
use crate::segment::{list_segments, walk, Check, FrameRef, SegmentInfo};
use crate::{check_dir, StoreError};

/// A frame found by [`Reader::frames`]: its segment and position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredFrame {
    pub segment: usize,
    pub frame: FrameRef,
}

impl StoredFrame {
    pub fn unix_ns(&self) -> u64 {
        self.frame.header.unix_ns
    }
}

/// Problems met while reading, kept rather than raised.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// Segments whose walk stopped early (a torn tail being written, or damage), with why.
    pub damaged_segments: Vec<(PathBuf, String)>,
    /// Frames skipped because their CRC failed or they did not decode, with why.
    pub bad_frames: Vec<(PathBuf, u64, String)>,
}

/// Reads samples from a store directory.
pub struct Reader {
    segments: Vec<SegmentInfo>,
    report: ReadReport,
    /// zstd's context and the key record last decompressed, prepared for the deltas of its
    /// chunk (created at the first sample read).
    decompressor: Option<Decompressor>,
    /// The segment last read from, kept open (reads go through it in order).
    file: Option<(usize, File)>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("segments", &self.segments.len()).field("report", &self.report).finish()
    }
}

impl Reader {
    pub fn open(dir: &Path) -> Result<Reader, StoreError> {
        check_dir(dir)?;
        Ok(Reader { segments: list_segments(dir)?, report: ReadReport::default(), decompressor: None, file: None })
    }

    pub fn segments(&self) -> &[SegmentInfo] {
        &self.segments
    }

    pub fn report(&self) -> &ReadReport {
        &self.report
    }

    /// Sample frames whose time is within `[from_ns, to_ns]`, in order. Only segments that can
    /// hold such frames are walked (a segment ends where the next one starts), headers only.
    pub fn frames(&mut self, from_ns: u64, to_ns: u64) -> Result<Vec<StoredFrame>, StoreError> {
        let mut frames = self.any_frames(from_ns, to_ns)?;
        frames.retain(|f| f.frame.header.kind.is_sample());
        Ok(frames)
    }

    /// Event frames (probe results, statsd flushes) whose time is within `[from_ns, to_ns]`.
    pub fn event_frames(&mut self, from_ns: u64, to_ns: u64) -> Result<Vec<StoredFrame>, StoreError> {
        let mut frames = self.any_frames(from_ns, to_ns)?;
        frames.retain(|f| !f.frame.header.kind.is_sample());
        Ok(frames)
    }

    fn any_frames(&mut self, from_ns: u64, to_ns: u64) -> Result<Vec<StoredFrame>, StoreError> {
        let mut out = Vec::new();
        for i in 0..self.segments.len() {
            let starts = self.segments[i].start_ns;
            let next_starts = self.segments.get(i + 1).map_or(u64::MAX, |s| s.start_ns);
            if starts > to_ns || next_starts < from_ns {
                continue;
            }
            let path = self.segments[i].path.clone();
            let walked = match walk(&path, Check::Headers) {
                Ok(w) => w,
                // Retention may have removed it since the listing.
                Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if let Some((offset, defect)) = walked.defect {
                self.report.damaged_segments.push((path.clone(), format!("{defect:?} at offset {offset}")));
            }
            out.extend(
                walked
                    .frames
                    .into_iter()
                    .filter(|f| (from_ns..=to_ns).contains(&f.header.unix_ns))
                    .map(|frame| StoredFrame { segment: i, frame }),
            );
        }
        Ok(out)
    }

    /// Every frame, in order.
    pub fn all_frames(&mut self) -> Result<Vec<StoredFrame>, StoreError> {
        self.frames(0, u64::MAX)
    }

    /// Decodes one frame; `None` (and a line in the report) if it fails its CRC or decoding.
    pub fn read(&mut self, frame: &StoredFrame) -> Option<Sample> {
        self.read_with(frame, decode_record)
    }

    /// Decodes one frame for a summary over many samples: without the container part, the
    /// processes' `status`, `io`, PSS and cgroup readings, and the cycle's cost (see
    /// [`decode_record_lean`]); `None` (and a line in the report) if it fails.
    pub fn read_lean(&mut self, frame: &StoredFrame) -> Option<Sample> {
        self.read_with(frame, decode_record_lean)
    }

    /// Decodes only a frame's clocks and host part (see [`decode_record_host`]): the sample
    /// has no processes. `None` (and a line in the report) if it fails.
    pub fn read_host(&mut self, frame: &StoredFrame) -> Option<Sample> {
        self.read_with(frame, decode_record_host)
    }

    fn read_with(&mut self, frame: &StoredFrame, decode: fn(u8, &[u8]) -> Result<Sample, CodecError>) -> Option<Sample> {
        match self.try_read_with(frame, decode) {
            Ok(sample) => Some(sample),
            Err(err) => {
                let path = self.segments[frame.segment].path.clone();
                self.report.bad_frames.push((path, frame.frame.offset, err.to_string()));
                None
            }
        }
    }

    /// Decodes one event frame; `None` (and a line in the report) if it fails.
    pub fn read_event(&mut self, frame: &StoredFrame) -> Option<Event> {
        let path = self.segments[frame.segment].path.clone();
        match self.try_read_event(frame) {
            Ok(event) => Some(event),
            Err(err) => {
                self.report.bad_frames.push((path, frame.frame.offset, err.to_string()));
                None
            }
        }
    }

    /// Decodes one event frame, with the error.
    pub fn try_read_event(&mut self, frame: &StoredFrame) -> Result<Event, StoreError> {
        let path = self.segments[frame.segment].path.clone();
        let f = frame.frame;
        let codec = |source| StoreError::Codec { path: path.clone(), offset: f.offset, source };
        if f.header.kind.is_sample() {
            return Err(codec(CodecError::NotAnEvent));
        }
        let file = File::open(&path).map_err(|e| StoreError::io(&path, e))?;
        let payload = read_checked(&file, &path, &f)?;
        let record = decompress_key(&payload).map_err(codec)?;
        decode_event(f.header.kind, f.header.version, &record).map_err(codec)
    }

    /// Decodes one sample frame, with the error.
    pub fn try_read(&mut self, frame: &StoredFrame) -> Result<Sample, StoreError> {
        self.try_read_with(frame, decode_record)
    }

    fn try_read_with(&mut self, frame: &StoredFrame, decode: fn(u8, &[u8]) -> Result<Sample, CodecError>) -> Result<Sample, StoreError> {
        let segment = frame.segment;
        let path = self.segments[segment].path.clone();
        let f = frame.frame;
        if !f.header.kind.is_sample() {
            return Err(StoreError::BadFrame { path, offset: f.offset, reason: "an event frame read as a sample" });
        }
        let codec = |source| StoreError::Codec { path: path.clone(), offset: f.offset, source };
        if self.file.as_ref().is_none_or(|(s, _)| *s != segment) {
            self.file = None;
            let file = File::open(&path).map_err(|e| StoreError::io(&path, e))?;
            self.file = Some((segment, file));
        }
        let file = &self.file.as_ref().expect("opened above").1;
        let payload = read_checked(file, &path, &f)?;
        if self.decompressor.is_none() {
            self.decompressor = Some(Decompressor::new().map_err(codec)?);
        }
        let decompressor = self.decompressor.as_mut().expect("created above");
        let record = match f.header.kind {
            FrameKind::Key => {
                let record = decompressor.key(&payload).map_err(codec)?;
                decompressor.set_key((segment, f.offset), &record).map_err(codec)?;
                record
            }
            FrameKind::Delta => {
                if !decompressor.has_key((segment, f.key_offset)) {
                    let key = walk_key(file, &path, f.key_offset)?;
                    decompressor.set_key((segment, f.key_offset), &key).map_err(codec)?;
                }
                decompressor.delta(&payload).map_err(codec)?
            }
            FrameKind::Probe | FrameKind::Statsd => unreachable!("checked above"),
        };
        decode(f.header.version, &record).map_err(codec)
    }

    /// The last sample at or before `unix_ns`, and the sample before it when both come from
    /// the same sampler run (so rates can be derived); `None` when nothing is that old.
    pub fn at_or_before(&mut self, unix_ns: u64) -> Result<Option<(Sample, Option<Sample>)>, StoreError> {
        let frames = self.frames(0, unix_ns)?;
        let mut picked: Vec<Sample> = Vec::new();
        for frame in frames.iter().rev() {
            if let Some(sample) = self.read(frame) {
                picked.push(sample);
                if picked.len() == 2 {
                    break;
                }
            }
        }
        let mut picked = picked.into_iter();
        let Some(cur) = picked.next() else { return Ok(None) };
        let prev = picked.next().filter(|prev| same_run(prev, &cur));
        Ok(Some((cur, prev)))
    }
}

/// Whether `prev` and `cur` come from one sampler, in that order: its `seq` and monotonic clock
/// only count up, and both restart with a new recorder, so a rate across two runs is refused.
pub fn same_run(prev: &Sample, cur: &Sample) -> bool {
    prev.seq < cur.seq && prev.mono_ns < cur.mono_ns && prev.unix_ns < cur.unix_ns
}

fn read_checked(file: &File, path: &Path, f: &FrameRef) -> Result<Vec<u8>, StoreError> {
    // Header and payload in one pread: the CRC covers both.
    let mut frame = vec![0u8; HEADER_LEN + f.header.payload_len as usize];
    file.read_exact_at(&mut frame, f.offset).map_err(|e| StoreError::io(path, e))?;
    let bad = |reason| StoreError::BadFrame { path: path.to_owned(), offset: f.offset, reason };
    let header = crate::frame::decode_header(&frame).map_err(|_| bad("bad frame header"))?;
    if header != f.header {
        return Err(bad("frame header changed since the walk"));
    }
    check_payload(&frame, &header, &frame[HEADER_LEN..]).map_err(|_| bad("crc mismatch"))?;
    frame.drain(..HEADER_LEN);
    Ok(frame)
}

fn walk_key(file: &File, path: &Path, key_offset: u64) -> Result<Vec<u8>, StoreError> {
    let mut header_bytes = [0u8; HEADER_LEN];
    file.read_exact_at(&mut header_bytes, key_offset).map_err(|e| StoreError::io(path, e))?;
    let header = crate::frame::decode_header(&header_bytes)
        .map_err(|_| StoreError::BadFrame { path: path.to_owned(), offset: key_offset, reason: "bad key frame header" })?;
    let key = FrameRef { offset: key_offset, header, key_offset };
    let payload = read_checked(file, path, &key)?;
    decompress_key(&payload).map_err(|source| StoreError::Codec { path: path.to_owned(), offset: key_offset, source })
}
