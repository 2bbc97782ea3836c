//! Reading a store: which frames fall in a time range (headers only), and decoding them.
//! Never writes, repairs or locks: it reads alongside a live writer. Nothing a file holds is
//! fatal: a file named like a segment that is not a regular file or cannot be opened is
//! skipped, damage inside a segment is read around (see `segment::salvage`), a frame that fails
//! its CRC or does not decode is skipped, and each is noted once in the [`ReadReport`].
//!
//! Set-aside segments (`*.seg.corrupt`, which a writer moved out of its way because they were
//! damaged in the middle) are read too, in their place in time: the writer must not append after
//! damage, but the frames around it are as good as any, and hiding them lost samples without a
//! word. Each one read is said in the report.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use proctor_model::Sample;

use crate::codec::{
    decode_event, decode_record, decode_record_host, decode_record_lean, decompress_delta, decompress_key, Chained,
    CodecError, Event, CHAINED_PREFIX_LEN, RECORD_VERSION, RECORD_VERSION_1, RECORD_VERSION_2,
};
use crate::delta::{decode_delta, DeltaRecord, KeySample};
use crate::frame::{check_payload, FrameDefect, FrameKind, HEADER_LEN};
use crate::report::ReadReport;
use crate::segment::{list, open_for_reading, salvage, FrameRef, SegmentInfo};
use crate::{check_dir, StoreError};

/// A frame found by [`Reader::frames`]: its segment and position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredFrame {
    pub segment: usize,
    /// The frame's place in its segment (0 for the first frame, counting frames of every
    /// kind). Segments only grow, so it stays the same while the store is written: readers
    /// that thin a range align on it to pick the same frames again as the range moves.
    pub ordinal: u64,
    pub frame: FrameRef,
}

impl StoredFrame {
    pub fn unix_ns(&self) -> u64 {
        self.frame.header.unix_ns
    }
}

/// Reads samples from a store directory.
pub struct Reader {
    /// Segments and set-aside segments, in time order.
    segments: Vec<SegmentInfo>,
    /// The newest segment that is not set aside: the one a writer may be appending to, whose
    /// torn tail is a write in flight.
    live: Option<usize>,
    /// Segments whose frames were counted into the report's walked totals.
    measured: std::collections::HashSet<usize>,
    report: ReadReport,
    /// The key frame last read: (segment, offset, key), reused by the deltas of its chunk.
    key_cache: Option<(usize, u64, CachedKey)>,
    /// Where the last version-3 read stopped in its chunk; when set, `key_cache` holds the base
    /// as of that frame (the chunk's key or its latest anchor up to it).
    chain: Option<ChainAt>,
}

/// A version-3 chunk walked up to `at`: what the next frame's decoding starts from.
#[derive(Debug)]
struct ChainAt {
    segment: usize,
    key_offset: u64,
    /// The last frame walked: the key, or a delta.
    at: u64,
    /// That frame's record when it is a delta: the next delta's zstd prefix.
    record: Option<Vec<u8>>,
}

/// What the deltas of a chunk are decoded against.
enum CachedKey {
    /// Version 1: the key's raw record, the dictionary its deltas were compressed with.
    V1(Vec<u8>),
    /// Version 2: the key sample, which its deltas patch.
    V2(Box<KeySample>),
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("segments", &self.segments.len()).field("report", &self.report).finish()
    }
}

impl Reader {
    /// Lists `dir`'s segments; files named like segments that are not regular files are noted
    /// in the report now and never opened.
    pub fn open(dir: &Path) -> Result<Reader, StoreError> {
        check_dir(dir)?;
        let listing = list(dir)?;
        let mut report = ReadReport::default();
        for (path, what) in listing.not_files {
            report.note_skipped(&path, what, None);
        }
        let live = listing.segments.last().map(|s| s.path.clone());
        let mut segments = listing.segments;
        segments.extend(listing.set_aside);
        // Stable: a segment and a set-aside one of the same name stay in that order.
        segments.sort_by_key(|s| s.start_ns);
        let live = live.and_then(|live| segments.iter().position(|s| s.path == live));
        Ok(Reader { segments, live, measured: Default::default(), report, key_cache: None, chain: None })
    }

    /// Lists `dir` again (a segment started or removed since), keeping the report and the
    /// cached key of the segment being read (its index may change; it is found by path).
    pub(crate) fn relist(&mut self, dir: &Path) -> Result<(), StoreError> {
        let fresh = Reader::open(dir)?;
        for skipped in fresh.report.skipped {
            self.report.note_skipped(&skipped.path, skipped.reason, skipped.bytes);
        }
        let key_cache = self.key_cache.take().and_then(|(segment, offset, key)| {
            let path = &self.segments.get(segment)?.path;
            fresh.segments.iter().position(|s| &s.path == path).map(|i| (i, offset, key))
        });
        self.segments = fresh.segments;
        self.live = fresh.live;
        self.measured.clear();
        self.key_cache = key_cache;
        Ok(())
    }

    /// Whether segment `i` is the newest one that is not set aside (the one a writer may be
    /// appending to).
    pub(crate) fn is_live(&self, i: usize) -> bool {
        self.live == Some(i)
    }

    pub(crate) fn report_mut(&mut self) -> &mut ReadReport {
        &mut self.report
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
            let walked = match salvage(&path) {
                Ok(w) => w,
                // Retention may have removed it since the listing.
                Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => continue,
                Err(e) => {
                    let bytes = self.segments[i].len_bytes;
                    self.report.note_skipped(&path, e.cause(), Some(bytes));
                    continue;
                }
            };
            for damage in walked.damage {
                let in_flight = Some(i) == self.live && damage.to_end && damage.defect == FrameDefect::Torn;
                if !in_flight {
                    self.report.note_damage(&path, damage);
                }
            }
            if self.segments[i].set_aside && !walked.frames.is_empty() {
                self.report.note_set_aside_read(&path);
            }
            if self.measured.insert(i) {
                self.report.frames_walked += walked.frames.len() as u64;
                self.report.bytes_walked += walked
                    .frames
                    .iter()
                    .map(|f| crate::frame::HEADER_LEN as u64 + u64::from(f.header.payload_len))
                    .sum::<u64>();
            }
            out.extend(
                (0u64..)
                    .zip(walked.frames)
                    .filter(|(_, f)| (from_ns..=to_ns).contains(&f.header.unix_ns))
                    .map(|(ordinal, frame)| StoredFrame { segment: i, ordinal, frame }),
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
        self.read_shaped(frame, Shape::Full)
    }

    /// Decodes one frame for a summary over many samples: without the container part, the
    /// processes' `status`, `io`, PSS and cgroup readings, and the cycle's cost (see
    /// [`decode_record_lean`]); `None` (and a line in the report) if it fails. A version-1
    /// frame skips parsing what is left out; a version-2 frame is decoded whole (its key must
    /// be whole to be the base of the deltas after it, and a delta is small) and then trimmed.
    pub fn read_lean(&mut self, frame: &StoredFrame) -> Option<Sample> {
        self.read_shaped(frame, Shape::Lean)
    }

    /// Decodes only a frame's clocks and host part (see [`decode_record_host`]): the sample
    /// has no processes. `None` (and a line in the report) if it fails.
    pub fn read_host(&mut self, frame: &StoredFrame) -> Option<Sample> {
        self.read_shaped(frame, Shape::Host)
    }

    fn read_shaped(&mut self, frame: &StoredFrame, shape: Shape) -> Option<Sample> {
        match self.try_read_shaped(frame, shape) {
            Ok(sample) => Some(sample),
            Err(err) => {
                let path = self.segments[frame.segment].path.clone();
                self.report.note_bad_frame(&path, frame.frame.offset, err.cause());
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
                self.report.note_bad_frame(&path, frame.frame.offset, err.cause());
                None
            }
        }
    }

    /// Decodes one event frame, with the error.
    pub fn try_read_event(&mut self, frame: &StoredFrame) -> Result<Event, StoreError> {
        let path = self.segments[frame.segment].path.clone();
        let f = frame.frame;
        let codec = |source| StoreError::Codec { path: path.clone(), offset: f.offset, error: source };
        if f.header.kind.is_sample() {
            return Err(codec(CodecError::NotAnEvent));
        }
        let file = open_for_reading(&path)?;
        let payload = read_checked(&file, &path, &f)?;
        let record = decompress_key(&payload).map_err(codec)?;
        decode_event(f.header.kind, f.header.version, &record).map_err(codec)
    }

    /// Decodes one sample frame, with the error.
    pub fn try_read(&mut self, frame: &StoredFrame) -> Result<Sample, StoreError> {
        self.try_read_shaped(frame, Shape::Full)
    }

    fn try_read_shaped(&mut self, frame: &StoredFrame, shape: Shape) -> Result<Sample, StoreError> {
        let segment = frame.segment;
        let path = self.segments[segment].path.clone();
        let f = frame.frame;
        let codec = |source| StoreError::Codec { path: path.clone(), offset: f.offset, error: source };
        if !f.header.kind.is_sample() {
            return Err(StoreError::BadFrame { path, offset: f.offset, reason: "an event frame read as a sample" });
        }
        let file = open_for_reading(&path)?;
        let payload = read_checked(&file, &path, &f)?;
        if !(f.header.kind == FrameKind::Delta && f.header.version == RECORD_VERSION) {
            // Every other read moves `key_cache` on its own terms.
            self.chain = None;
        }
        match f.header.kind {
            FrameKind::Key => {
                // Dropped first: a reader holds one chunk's key at a time.
                self.key_cache = None;
                let record = decompress_key(&payload).map_err(codec)?;
                if f.header.version == RECORD_VERSION_1 {
                    let sample = shape.decode(f.header.version, &record).map_err(codec)?;
                    self.key_cache = Some((segment, f.offset, CachedKey::V1(record)));
                    return Ok(sample);
                }
                let sample = decode_record(f.header.version, &record).map_err(codec)?;
                self.key_cache =
                    Some((segment, f.offset, CachedKey::V2(Box::new(KeySample::from_sample(sample.clone())))));
                if f.header.version == RECORD_VERSION {
                    self.chain = Some(ChainAt { segment, key_offset: f.offset, at: f.offset, record: None });
                }
                Ok(shape.trim(sample))
            }
            FrameKind::Delta if f.header.version == RECORD_VERSION => {
                let sample = self.read_chained(&file, &path, segment, f, &payload);
                if sample.is_err() {
                    // Half a walk is no base for the next read.
                    self.chain = None;
                    self.key_cache = None;
                }
                Ok(shape.trim(sample?))
            }
            FrameKind::Delta if f.header.version == RECORD_VERSION_2 => {
                let record = decompress_key(&payload).map_err(codec)?;
                let delta = DeltaRecord::parse(&record).map_err(codec)?;
                let sample = self.read_delta(&file, &path, segment, f, delta)?;
                Ok(shape.trim(sample))
            }
            FrameKind::Delta if f.header.version == RECORD_VERSION_1 => {
                let cached =
                    matches!(&self.key_cache, Some((s, o, CachedKey::V1(_))) if *s == segment && *o == f.key_offset);
                if !cached {
                    self.key_cache = None;
                    let key = read_key(&file, &path, f.key_offset)?;
                    self.key_cache = Some((segment, f.key_offset, key));
                }
                let Some((_, _, CachedKey::V1(key))) = &self.key_cache else {
                    return Err(codec(CodecError::Delta("the key frame is of another version")));
                };
                let record = decompress_delta(&payload, key).map_err(codec)?;
                shape.decode(f.header.version, &record).map_err(codec)
            }
            FrameKind::Delta => Err(codec(CodecError::UnknownVersion(f.header.version))),
            FrameKind::Probe | FrameKind::Statsd | FrameKind::Rollup => unreachable!("checked above"),
        }
    }

    /// Decodes a version-2 delta: its base is the cached one (the chunk's key or an anchor),
    /// or the anchors back to one are decoded first, oldest first, each becoming the cached base.
    /// The cache holds one base at a time, so a reader holds at most one chunk's key sample.
    ///
    /// The chain is found by offsets, reading only where each record's base is; then each
    /// anchor is read again and applied in order, so one record is held at a time (a chain of
    /// up to [`MAX_CHAIN`] hostile anchors costs no more memory than one).
    fn read_delta(
        &mut self,
        file: &File,
        path: &Path,
        segment: usize,
        f: FrameRef,
        delta: DeltaRecord<'_>,
    ) -> Result<Sample, StoreError> {
        let codec = |offset, source| StoreError::Codec { path: path.to_owned(), offset, error: source };
        let cached = |cache: &Option<(usize, u64, CachedKey)>, offset: u64| matches!(cache, Some((s, o, CachedKey::V2(_))) if *s == segment && *o == offset);
        // The anchors between the cached base (or the key) and this frame, newest first.
        let mut anchors: Vec<FrameRef> = Vec::new();
        let (mut offset, mut distance) = (f.offset, delta.base);
        loop {
            let base = offset
                .checked_sub(distance)
                .filter(|b| distance > 0 && *b >= f.key_offset)
                .ok_or_else(|| codec(offset, CodecError::Delta("its base is not an earlier frame of its chunk")))?;
            if cached(&self.key_cache, base) || base == f.key_offset {
                break;
            }
            if anchors.len() >= MAX_CHAIN {
                return Err(codec(f.offset, CodecError::Delta("too many anchors before it")));
            }
            let header = read_header(file, path, base)?;
            if header.kind != FrameKind::Delta || header.version != RECORD_VERSION_2 {
                return Err(codec(base, CodecError::Delta("its base is not a version-2 frame of its chunk")));
            }
            let anchor = FrameRef { offset: base, header, key_offset: f.key_offset };
            let bytes = decompress_key(&read_checked(file, path, &anchor)?).map_err(|e| codec(base, e))?;
            let record = DeltaRecord::parse(&bytes).map_err(|e| codec(base, e))?;
            if !record.anchor {
                return Err(codec(base, CodecError::Delta("its base is not an anchor")));
            }
            anchors.push(anchor);
            (offset, distance) = (base, record.base);
        }
        // The loop checked that this does not underflow.
        let root = offset - distance;
        if !cached(&self.key_cache, root) {
            self.key_cache = None;
            self.key_cache = Some((segment, f.key_offset, read_key(file, path, f.key_offset)?));
        }
        while let Some(anchor) = anchors.pop() {
            let bytes = decompress_key(&read_checked(file, path, &anchor)?).map_err(|e| codec(anchor.offset, e))?;
            let record = DeltaRecord::parse(&bytes).map_err(|e| codec(anchor.offset, e))?;
            self.advance_cached(segment, anchor.offset, &record).map_err(|e| codec(anchor.offset, e))?;
        }
        if !delta.anchor {
            let Some((_, _, CachedKey::V2(key))) = &self.key_cache else {
                return Err(codec(f.offset, CodecError::Delta("the key frame is of another version")));
            };
            return decode_delta(key, &delta).map_err(|e| codec(f.offset, e));
        }
        // An anchor: the base of the frames after it, made from the cached base in place.
        self.advance_cached(segment, f.offset, &delta).map_err(|e| codec(f.offset, e))?;
        let Some((_, _, CachedKey::V2(anchor))) = &self.key_cache else { unreachable!("advanced above") };
        anchor.sample().map_err(|e| codec(f.offset, e))
    }

    /// Decodes a version-3 delta. Its record is compressed against the sample frame before it
    /// and its base is the latest anchor before it, so the chunk is walked forward from where
    /// the last read stopped (when that is before this frame in its chunk) or from its key:
    /// each frame between is decompressed, and each anchor applied to the cached base. Reading
    /// a chunk in order decompresses each frame once; a frame read cold costs the frames before
    /// it in its chunk (at most `chunk_frames`).
    ///
    /// The frames between are found back from this one by each payload's [`Chained::back`]
    /// (headers and five bytes each), at most [`MAX_CHAIN`]; the forward walk then checks each
    /// frame's CRC and that its `back` is the frame walked before it.
    fn read_chained(
        &mut self,
        file: &File,
        path: &Path,
        segment: usize,
        f: FrameRef,
        payload: &[u8],
    ) -> Result<Sample, StoreError> {
        let codec = |offset, source| StoreError::Codec { path: path.to_owned(), offset, error: source };
        let resume = self
            .chain
            .as_ref()
            .filter(|c| c.segment == segment && c.key_offset == f.key_offset && c.at < f.offset)
            .map(|c| c.at);
        let mut stop = resume.unwrap_or(f.key_offset);
        // The frames between `stop` and this one, newest first.
        let mut between: Vec<FrameRef> = Vec::new();
        let (mut offset, mut back) = (f.offset, Chained::parse(payload).map_err(|e| codec(f.offset, e))?.back);
        loop {
            let previous = offset.checked_sub(u64::from(back)).filter(|p| *p >= f.key_offset).ok_or_else(|| {
                codec(offset, CodecError::Delta("its previous frame is not an earlier frame of its chunk"))
            })?;
            if previous < stop {
                // The last read's frame is not on this frame's way back: walk from the key.
                stop = f.key_offset;
            }
            if previous == stop {
                break;
            }
            if between.len() >= MAX_CHAIN {
                return Err(codec(f.offset, CodecError::Delta("too many frames before it in its chunk")));
            }
            let header = read_header(file, path, previous)?;
            if header.kind != FrameKind::Delta
                || header.version != RECORD_VERSION
                || (header.payload_len as usize) < CHAINED_PREFIX_LEN
            {
                return Err(codec(
                    previous,
                    CodecError::Delta("its previous frame is not a version-3 delta of its chunk"),
                ));
            }
            let mut head = [0u8; CHAINED_PREFIX_LEN];
            file.read_exact_at(&mut head, previous + HEADER_LEN as u64)
                .map_err(|e| StoreError::io("cannot read", path, e))?;
            back = Chained::parse(&head).map_err(|e| codec(previous, e))?.back;
            between.push(FrameRef { offset: previous, header, key_offset: f.key_offset });
            offset = previous;
        }
        if stop == f.key_offset {
            self.chain = None;
            self.key_cache = None;
            let key = read_key(file, path, f.key_offset)?;
            if !matches!(key, CachedKey::V2(_)) {
                return Err(codec(f.offset, CodecError::Delta("the key frame is of another version")));
            }
            self.key_cache = Some((segment, f.key_offset, key));
            self.chain = Some(ChainAt { segment, key_offset: f.key_offset, at: f.key_offset, record: None });
        }
        while let Some(frame) = between.pop() {
            let payload = read_checked(file, path, &frame)?;
            self.step_chain(segment, frame.offset, &payload, false).map_err(|e| codec(frame.offset, e))?;
        }
        let sample = self.step_chain(segment, f.offset, payload, true).map_err(|e| codec(f.offset, e))?;
        sample.ok_or_else(|| codec(f.offset, CodecError::Delta("no sample decoded")))
    }

    /// One version-3 delta at `offset`, the frame after the chain's: decompressed against the
    /// chain's record, and applied to the cached base when it is an anchor. Returns its sample
    /// when `last`.
    fn step_chain(
        &mut self,
        segment: usize,
        offset: u64,
        payload: &[u8],
        last: bool,
    ) -> Result<Option<Sample>, CodecError> {
        let chain = self.chain.as_ref().ok_or(CodecError::Delta("a chained delta without its chunk walked"))?;
        let chained = Chained::parse(payload)?;
        if Some(u64::from(chained.back)) != offset.checked_sub(chain.at) {
            return Err(CodecError::Delta("its previous frame is not the one before it in its chunk"));
        }
        let record = chained.decompress(chain.record.as_deref())?;
        let sample = {
            let delta = DeltaRecord::parse(&record)?;
            let Some((_, base_at, CachedKey::V2(base))) = &self.key_cache else {
                return Err(CodecError::Delta("the key frame is of another version"));
            };
            if offset.checked_sub(delta.base) != Some(*base_at) {
                return Err(CodecError::Delta("its base is not its chunk's latest anchor"));
            }
            if delta.anchor {
                self.advance_cached(segment, offset, &delta)?;
                match (&self.key_cache, last) {
                    (Some((_, _, CachedKey::V2(anchor))), true) => Some(anchor.sample()?),
                    _ => None,
                }
            } else if last {
                Some(decode_delta(base, &delta)?)
            } else {
                None
            }
        };
        let key_offset = self.chain.as_ref().map_or(0, |c| c.key_offset);
        self.chain = Some(ChainAt { segment, key_offset, at: offset, record: Some(record) });
        Ok(sample)
    }

    /// Replaces the cached version-2 base with the base after `record`, the anchor at `offset`.
    /// The cache is empty if that fails.
    fn advance_cached(&mut self, segment: usize, offset: u64, record: &DeltaRecord<'_>) -> Result<(), CodecError> {
        let Some((_, _, CachedKey::V2(key))) = self.key_cache.take() else {
            return Err(CodecError::Delta("the key frame is of another version"));
        };
        self.key_cache = Some((segment, offset, CachedKey::V2(Box::new(key.advance(record)?))));
        Ok(())
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
    file.read_exact_at(&mut frame, f.offset).map_err(|e| StoreError::io("cannot read", path, e))?;
    let bad = |reason| StoreError::BadFrame { path: path.to_owned(), offset: f.offset, reason };
    let header = crate::frame::decode_header(&frame).map_err(|_| bad("bad frame header"))?;
    if header != f.header {
        return Err(bad("frame header changed since the walk"));
    }
    check_payload(&frame, &header, &frame[HEADER_LEN..]).map_err(|_| bad("crc mismatch"))?;
    frame.drain(..HEADER_LEN);
    Ok(frame)
}

/// The most frames a delta's decoding goes back through (anchors chain back to their key;
/// a chunk of 60 frames with an anchor every 4 has 14): a bound against a hostile file.
const MAX_CHAIN: usize = 4096;

fn read_header(file: &File, path: &Path, offset: u64) -> Result<crate::frame::FrameHeader, StoreError> {
    let mut header_bytes = [0u8; HEADER_LEN];
    file.read_exact_at(&mut header_bytes, offset).map_err(|e| StoreError::io("cannot read", path, e))?;
    crate::frame::decode_header(&header_bytes).map_err(|_| StoreError::BadFrame {
        path: path.to_owned(),
        offset,
        reason: "bad base frame header",
    })
}

/// Reads and decodes the key frame at `key_offset`, for the deltas of its chunk.
fn read_key(file: &File, path: &Path, key_offset: u64) -> Result<CachedKey, StoreError> {
    let header = read_header(file, path, key_offset)?;
    if header.kind != FrameKind::Key {
        return Err(StoreError::BadFrame { path: path.to_owned(), offset: key_offset, reason: "not a key frame" });
    }
    let key = FrameRef { offset: key_offset, header, key_offset };
    let payload = read_checked(file, path, &key)?;
    let codec = |source| StoreError::Codec { path: path.to_owned(), offset: key_offset, error: source };
    let record = decompress_key(&payload).map_err(codec)?;
    if header.version == RECORD_VERSION_1 {
        return Ok(CachedKey::V1(record));
    }
    let sample = decode_record(header.version, &record).map_err(codec)?;
    Ok(CachedKey::V2(Box::new(KeySample::from_sample(sample))))
}

/// How much of a sample a read decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Full,
    /// [`decode_record_lean`]'s fields.
    Lean,
    /// [`decode_record_host`]'s fields.
    Host,
}

impl Shape {
    /// Decodes a whole-sample record (version 1, or a version-2 key) to this shape.
    fn decode(self, version: u8, record: &[u8]) -> Result<Sample, CodecError> {
        match self {
            Shape::Full => decode_record(version, record),
            Shape::Lean => decode_record_lean(version, record),
            Shape::Host => decode_record_host(version, record),
        }
    }

    /// Cuts a whole sample down to this shape (what [`Shape::decode`] would have left out).
    fn trim(self, mut sample: Sample) -> Sample {
        match self {
            Shape::Full => return sample,
            Shape::Lean => {
                for p in &mut sample.processes {
                    p.status = None;
                    p.io = None;
                    p.pss = None;
                    p.cgroup = None;
                }
            }
            Shape::Host => sample.processes = Vec::new(),
        }
        sample.container = None;
        sample.cost = proctor_model::SampleCost::default();
        sample
    }
}
