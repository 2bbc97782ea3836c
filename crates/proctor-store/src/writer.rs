//! The single writer: lock, recovery on open, appending frames, rotation and retention.
//! It never reads a record back and never reads the clock for data: times come from samples.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use proctor_model::Sample;

use crate::codec::{
    chained_cap, compress_after, compress_alone, decompressed_cap, encode_event, encode_record_sized, AloneCompressor,
    Chained, Compressor, Event, RECORD_VERSION, RECORD_VERSION_1, RECORD_VERSION_2,
};
use crate::delta::{encode_delta_into, KeySample};
use crate::frame::{encode_header, FrameDefect, FrameKind, MAX_PAYLOAD_LEN, SEGMENT_MAGIC};
use crate::segment::{
    intact_frame_after, list, list_segments, list_set_aside, open_regular, segment_name, walk, Check, SegmentInfo,
    CORRUPT_SUFFIX, REWRITE_SUFFIX,
};
use crate::{check_dir, StoreConfig, StoreError};

/// A tail cut off on open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    pub path: PathBuf,
    pub kept_bytes: u64,
    pub dropped_bytes: u64,
    pub reason: String,
}

/// A file moved out of the way on open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    pub path: PathBuf,
    pub moved_to: PathBuf,
    pub reason: String,
}

/// What `Writer::open` found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    pub segments: usize,
    pub frames_checked: u64,
    pub repaired: Vec<Repair>,
    pub set_aside: Vec<SetAside>,
    pub removed_by_retention: Vec<PathBuf>,
    /// Files named like segments that were left alone, with why: not regular files (never
    /// opened), or segments that could not be opened or walked. The writer never writes to an
    /// older segment, so one it cannot check is no danger to what it writes; readers skip them
    /// too, and say so.
    pub skipped: Vec<(PathBuf, String)>,
}

/// What one append cost and produced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendCost {
    pub record_bytes: u64,
    /// Header plus compressed payload: what the file grew by.
    pub frame_bytes: u64,
    pub key_frame: bool,
    pub encode_ns: u64,
    pub compress_ns: u64,
    /// The `write` (and `fdatasync` when configured), plus rotation and retention when due.
    pub write_ns: u64,
}

/// Running totals since open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    pub frames: u64,
    pub key_frames: u64,
    pub record_bytes: u64,
    pub frame_bytes: u64,
    pub encode_ns: u64,
    pub compress_ns: u64,
    pub write_ns: u64,
    pub segments_created: u64,
    pub segments_removed: u64,
}

struct Active {
    file: File,
    path: PathBuf,
    start_ns: u64,
    bytes: u64,
    frames_in_chunk: u32,
    /// Compressed size of the chunk's key frame.
    key_payload_bytes: usize,
    /// The last delta came out large against the key: the key no longer resembles the
    /// samples (the first sample of a run has no command lines yet; processes churned), so
    /// the next frame starts a new chunk.
    rekey: bool,
}

/// A sample frame's payload, and for a version-3 delta its record (the next one's prefix).
enum Encoded {
    Whole(Vec<u8>),
    Chained { payload: Vec<u8>, record: Vec<u8> },
}

/// Appends samples to a store directory. Owns the directory's lock until dropped.
pub struct Writer {
    dir: PathBuf,
    config: StoreConfig,
    /// Held for the writer's life and released on drop (see `Drop`); the kernel releases it
    /// too when the process dies.
    lock: File,
    active: Option<Active>,
    /// The chunk's key record, when writing version 1.
    compressor: Compressor,
    /// Version 3's deltas compressed alone, in a context kept while they are large and
    /// compressed alone (a storm's): any other frame drops it.
    alone: AloneCompressor,
    /// The sample the next delta is taken against and its frame's offset in the active
    /// segment, when writing version 2: the chunk's key, or its latest anchor.
    base: Option<(KeySample, u64)>,
    /// The last sample frame written in the active chunk (version 3): its offset, and its
    /// record when it is a delta (the next delta's zstd prefix). `None` before a chunk's key.
    previous: Option<(u64, Option<Vec<u8>>)>,
    /// The allocation of the delta record before the previous one, which the next delta is
    /// encoded into ([`Writer::keep_spare`]).
    spare: Vec<u8>,
    /// Size of the last whole-sample record and of the last delta record, so the next one is
    /// encoded into a buffer of about its size.
    last_record_len: usize,
    last_delta_len: usize,
    /// Set by a failed write (a full disk, an I/O error): no write is tried for items older
    /// than its time, so a full disk costs one failed `write` per backoff, not one per sample.
    backoff: Option<Backoff>,
    /// The last write failed because the active segment may not grow (`EFBIG`: a file size
    /// limit): the next sample starts a new segment at once, without a backoff.
    segment_full: bool,
    stats: WriterStats,
}

/// The first wait after a failed write, doubled after each failure up to [`MAX_BACKOFF_NS`].
pub const FIRST_BACKOFF_NS: u64 = 1_000_000_000;
/// The longest wait between tries: a disk that gets space back is written again within it.
pub const MAX_BACKOFF_NS: u64 = 32_000_000_000;

/// A version-3 delta that lists this many ended processes or more is compressed alone, not
/// after the previous delta's record. Such a record is mostly its table of ended processes,
/// numbers the previous record does not have. On a fork storm's records (~1,000 ended, ~98 KB
/// each; `examples/chain_ended.rs`) the previous one as prefix left them the same size (20,139
/// against 20,180 bytes at level 3) and took 1.67× the time (846 against 507 µs), its indexing
/// of ~98 KB of prefix all cost; the same store's quiet deltas came to 320 bytes after the
/// previous one against 2,010 alone. 128 ended processes are ~12 KB of table, several times a
/// quiet 600-process delta.
pub const CHAIN_MAX_ENDED: usize = 128;

/// A delta record's buffer up to this size is always kept for the next delta
/// ([`Writer::keep_spare`]); a larger one while the deltas are about as large.
const SPARE_KEPT: usize = 64 << 10;

/// When the next write may be tried, in the items' own time (the writer reads no clock: a
/// sample's or event's time says when it is).
#[derive(Debug, Clone)]
struct Backoff {
    /// The time of the item whose write failed.
    failed_ns: u64,
    wait_ns: u64,
    /// What failed, for the error the skipped items get.
    cause: String,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("dir", &self.dir).field("stats", &self.stats).finish_non_exhaustive()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Unlocked explicitly: closing the fd alone does not release the flock while a child
        // forked by another thread still holds a copy of it (until its exec closes it), so a
        // writer opened again right after this one could find the store locked.
        // SAFETY: flock on an fd we own; no memory is passed.
        unsafe { libc::flock(self.lock.as_raw_fd(), libc::LOCK_UN) };
    }
}

impl Writer {
    /// Locks `dir`, repairs or sets aside damaged segments, applies retention, and returns a
    /// writer that will start a new segment with its first sample.
    pub fn open(dir: &Path, config: StoreConfig) -> Result<(Writer, OpenReport), StoreError> {
        if ![RECORD_VERSION, RECORD_VERSION_2, RECORD_VERSION_1].contains(&config.record_version) {
            return Err(StoreError::WriteVersion(config.record_version));
        }
        check_dir(dir)?;
        let lock_path = dir.join("lock");
        // Non-blocking like every store file: a FIFO named `lock` made this wait for ever.
        let lock = open_regular(&lock_path, OpenOptions::new().create(true).truncate(false).write(true))?;
        // SAFETY: flock on an fd we own; no memory is passed.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(StoreError::Locked { path: dir.to_owned() });
            }
            return Err(StoreError::io("cannot lock", &lock_path, err));
        }
        let mut report = OpenReport::default();
        remove_unfinished_rewrites(dir, &mut report)?;
        let listing = list(dir)?;
        report.skipped = listing.not_files;
        let segments = listing.segments;
        let newest = segments.len().checked_sub(1);
        for (i, segment) in segments.iter().enumerate() {
            // Only the newest segment can have been torn by a crash of the last writer; older
            // ones were sealed by a rotation, so their headers are walked, not their payloads.
            let check = if Some(i) == newest { Check::Full } else { Check::Headers };
            match recover_segment(segment, check, &mut report) {
                Ok(()) => {}
                // Gone since the listing.
                Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => {}
                Err(e) => report.skipped.push((segment.path.clone(), e.cause())),
            }
        }
        let mut writer = Writer {
            dir: dir.to_owned(),
            compressor: Compressor::new(config.level),
            alone: AloneCompressor::default(),
            config,
            lock,
            active: None,
            base: None,
            previous: None,
            spare: Vec::new(),
            last_record_len: 0,
            last_delta_len: 0,
            backoff: None,
            segment_full: false,
            stats: WriterStats::default(),
        };
        report.segments = list_segments(dir)?.len();
        if let Some(last) = segments.last() {
            // Retention is relative to the newest data there is, so an idle store is not
            // emptied by the passage of time alone.
            report.removed_by_retention = writer.apply_retention(last.start_ns)?;
        }
        Ok((writer, report))
    }

    pub fn stats(&self) -> WriterStats {
        self.stats
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of the segment being written, once the first sample has been appended.
    pub fn active_segment(&self) -> Option<&Path> {
        self.active.as_ref().map(|a| a.path.as_path())
    }

    /// Appends one sample as one frame (a single `write`).
    ///
    /// After a failed write, a sample less than the backoff younger than the failed one is not
    /// tried ([`StoreError::BackingOff`]); the wait doubles with each failure (1 s to 32 s) and
    /// ends with the first write that succeeds.
    pub fn append(&mut self, sample: &Sample) -> Result<AppendCost, StoreError> {
        self.check_backoff(sample.unix_ns)?;
        let started = Instant::now();
        let rotate = match &self.active {
            None => true,
            Some(a) => {
                sample.unix_ns.saturating_sub(a.start_ns) >= self.config.segment_max_age.as_nanos() as u64
                    || a.bytes >= self.config.segment_max_bytes
            }
        };
        if rotate {
            // A new segment starts a new chunk, so this frame is its key.
            self.rotate(sample.unix_ns).map_err(|e| self.failed(sample.unix_ns, e))?;
        }
        let key = self
            .active
            .as_ref()
            .is_none_or(|a| a.frames_in_chunk == 0 || a.frames_in_chunk >= self.config.chunk_frames || a.rekey);
        let rotated = Instant::now();
        let version_1 = self.config.record_version == RECORD_VERSION_1;
        let (key, base, record_bytes, encoded, payload) =
            if version_1 { self.encode_v1(key, sample) } else { self.encode_v2(key, sample) };
        let (payload, delta_record) = match payload {
            Ok(Encoded::Whole(payload)) => (payload, None),
            Ok(Encoded::Chained { payload, record }) => (payload, Some(record)),
            Err(e) => return Err(StoreError::io("cannot compress a sample for", &self.dir, e)),
        };
        let compressed = Instant::now();
        if payload.len() > MAX_PAYLOAD_LEN as usize {
            return Err(StoreError::BadFrame {
                path: self.dir.clone(),
                offset: 0,
                reason: "sample too large for a frame",
            });
        }
        // What a reader would refuse to decompress is not written (see `decompressed_cap`);
        // a chained delta checked its own (`encode_chained`).
        let dictionary = if version_1 && !key { self.compressor.key_len() } else { 0 };
        if delta_record.is_none() && record_bytes > decompressed_cap(payload.len(), dictionary) as u64 {
            return Err(StoreError::BadFrame {
                path: self.dir.clone(),
                offset: 0,
                reason: "sample record too large to be read back",
            });
        }
        let kind = if key { FrameKind::Key } else { FrameKind::Delta };
        let at = self.next_offset();
        let frame_bytes = match self.write_frame(sample.unix_ns, kind, self.config.record_version, &payload) {
            Ok(bytes) => bytes,
            Err(e) => {
                if key {
                    // The compressor took the unwritten record as its key (version 1), and a
                    // version 2 base was dropped for it: the next frame is a key again.
                    self.compressor.reset();
                    self.base = None;
                    self.previous = None;
                }
                return Err(self.failed(sample.unix_ns, e));
            }
        };
        self.backoff = None;
        let written = Instant::now();
        if base && !version_1 {
            // Kept only once its frame is written: a delta never names a frame that is not
            // there.
            self.base = None;
            self.base = Some((KeySample::for_deltas(sample), at));
        }
        if self.config.record_version == RECORD_VERSION {
            // The next delta's previous frame: only once this one is written.
            let before = self.previous.replace((at, delta_record));
            self.keep_spare(before.and_then(|(_, record)| record));
        }
        let based = Instant::now();
        let active = self.active.as_mut().expect("write_frame opened a segment");
        active.frames_in_chunk = if key { 1 } else { active.frames_in_chunk + 1 };
        if key {
            active.key_payload_bytes = payload.len();
        }
        // Version 1, measured with ~600 processes: a delta against a key without command lines
        // is ~80 % of a standalone frame, against a good key ~4 %. Version 2 needs no such rule:
        // the next anchor (at most `anchor_frames` on) carries what changed, and the deltas
        // after it are taken against it.
        active.rekey = version_1 && !key && payload.len() * 4 > active.key_payload_bytes;
        let cost = AppendCost {
            record_bytes,
            frame_bytes,
            key_frame: key,
            // Keeping the base sample is part of encoding: it is what the next deltas compare.
            encode_ns: (encoded - rotated + (based - written)).as_nanos() as u64,
            compress_ns: (compressed - encoded).as_nanos() as u64,
            write_ns: (written - compressed + (rotated - started)).as_nanos() as u64,
        };
        let s = &mut self.stats;
        s.frames += 1;
        s.key_frames += u64::from(key);
        s.record_bytes += cost.record_bytes;
        s.frame_bytes += cost.frame_bytes;
        s.encode_ns += cost.encode_ns;
        s.compress_ns += cost.compress_ns;
        s.write_ns += cost.write_ns;
        Ok(cost)
    }

    /// Version 2: a key frame is the sample's JSON; a delta is a `delta` record against the
    /// chunk's base sample (the key, or the latest anchor), which the writer keeps. A key is
    /// compressed alone (at `key_level`); a delta alone in version 2, chained to the delta
    /// before it in version 3 ([`Writer::encode_chained`]). Returns whether the frame is a
    /// key, whether it is an anchor, the record's size, when encoding ended, and the payload.
    fn encode_v2(&mut self, key: bool, sample: &Sample) -> (bool, bool, u64, Instant, std::io::Result<Encoded>) {
        let level = self.config.level;
        let at = self.next_offset();
        match self.base.as_ref().filter(|_| !key) {
            Some((base, base_at)) => {
                let in_chunk = self.active.as_ref().map_or(0, |a| a.frames_in_chunk);
                let anchor = self.config.anchor_frames > 0 && in_chunk.is_multiple_of(self.config.anchor_frames);
                let mut out = std::mem::take(&mut self.spare);
                out.clear();
                out.reserve(self.last_delta_len + self.last_delta_len / 2);
                let record = encode_delta_into(out, base, sample, at - base_at, anchor);
                self.last_delta_len = record.len();
                let encoded = Instant::now();
                let record_len = record.len() as u64;
                let payload = if self.config.record_version == RECORD_VERSION {
                    self.encode_chained(at, record, sample.exited.len())
                } else {
                    compress_alone(level, &record).map(Encoded::Whole)
                };
                (false, anchor, record_len, encoded, payload)
            }
            // A key was asked for, or there is no base (a new segment): a frame is labelled a
            // delta only when the base it was taken against is in its chunk.
            None => {
                // Dropped first: a key frame never needs the previous base.
                self.base = None;
                self.previous = None;
                // An eighth more than the last one: records grow and shrink with the processes.
                let record = encode_record_sized(sample, self.last_record_len + self.last_record_len / 8);
                self.last_record_len = record.len();
                let encoded = Instant::now();
                self.alone.release();
                // A storm's key lists its ended processes whole (~300 KB of JSON at 1,000),
                // which took ~2.6 ms at the key level (docs/performance.md): the storm level.
                let level = if sample.exited.len() >= CHAIN_MAX_ENDED {
                    self.config.storm_level
                } else {
                    self.config.key_level
                };
                let payload = compress_alone(level, &record).map(Encoded::Whole);
                (true, true, self.last_record_len as u64, encoded, payload)
            }
        }
    }

    /// Version 3: a delta record at `at`, compressed with the previous delta's record as its
    /// prefix where there is one (the first delta after a key is compressed alone), behind
    /// [`Chained`]'s prefix. A record that would decompress to more than a reader allows
    /// against that prefix ([`chained_cap`]) is compressed alone instead, and so is one that
    /// lists [`CHAIN_MAX_ENDED`] or more ended processes (`ended`), at `storm_level`.
    fn encode_chained(&mut self, at: u64, record: Vec<u8>, ended: usize) -> std::io::Result<Encoded> {
        let Some((previous_at, previous)) = &self.previous else {
            return Err(std::io::Error::other("a delta without its chunk's key before it"));
        };
        let back = u32::try_from(at - previous_at)
            .map_err(|_| std::io::Error::other("a delta more than 4 GiB after the frame before it"))?;
        let level = self.config.level;
        if let Some(previous) = previous.as_ref().filter(|_| ended < CHAIN_MAX_ENDED) {
            let compressed = compress_after(level, previous, &record)?;
            if record.len() <= chained_cap(compressed.len(), previous.len()) {
                self.alone.release();
                return Ok(Encoded::Chained { payload: Chained::encode(back, true, &compressed), record });
            }
        }
        // A storm's record at its own level; one alone only because it was too large to chain
        // at the deltas' level.
        let level = if ended >= CHAIN_MAX_ENDED { self.config.storm_level } else { level };
        let compressed = self.alone.compress(level, &record)?;
        if record.len() > decompressed_cap(compressed.len(), 0) {
            return Err(std::io::Error::other("sample record too large to be read back"));
        }
        Ok(Encoded::Chained { payload: Chained::encode(back, false, &compressed), record })
    }

    /// Version 1: every frame is the sample's JSON, deltas compressed against the key's record.
    fn encode_v1(&mut self, key: bool, sample: &Sample) -> (bool, bool, u64, Instant, std::io::Result<Encoded>) {
        let record = encode_record_sized(sample, self.last_record_len + self.last_record_len / 8);
        self.last_record_len = record.len();
        let record_bytes = record.len() as u64;
        let encoded = Instant::now();
        let (key, payload) = self.compress_v1(key, record);
        (key, key, record_bytes, encoded, payload.map(Encoded::Whole))
    }

    /// Keeps `record`'s allocation for the next delta, unless it is large and the last delta
    /// was not (a storm is over): a storm's records (~100 KB) then reuse two buffers instead of
    /// faulting in a fresh one each frame, and a quiet writer holds no more than its deltas need.
    fn keep_spare(&mut self, record: Option<Vec<u8>>) {
        self.spare = match record {
            Some(r) if r.capacity() <= SPARE_KEPT.max(4 * self.last_delta_len) => r,
            _ => Vec::new(),
        };
    }

    /// Whether a zstd context is kept from the last frame (a storm's; see [`AloneCompressor`]).
    pub fn holds_zstd_context(&self) -> bool {
        self.alone.holds_context()
    }

    /// Bytes the writer holds between frames for the chunk's key: the key record (version 1)
    /// or the key sample's rows and rest (version 2; an estimate, see `KeySample::held_bytes`).
    pub fn key_bytes(&self) -> usize {
        self.compressor.key_bytes()
            + self.base.as_ref().map_or(0, |(b, _)| b.held_bytes())
            + self.previous.as_ref().and_then(|(_, r)| r.as_ref()).map_or(0, Vec::capacity)
            + self.spare.capacity()
    }

    /// Appends one event record (probe results, a statsd flush) as one frame compressed on its
    /// own. It neither starts nor ends a sample chunk.
    pub fn append_event(&mut self, unix_ns: u64, event: &Event) -> Result<AppendCost, StoreError> {
        self.check_backoff(unix_ns)?;
        let started = Instant::now();
        let record = encode_event(event);
        let encoded = Instant::now();
        if let Event::Rollup(block) = event {
            if crate::rollup::check_cells(block.names.len(), block.rows.len(), record.len()).is_err() {
                return Err(StoreError::BadFrame {
                    path: self.dir.clone(),
                    offset: 0,
                    reason: "rollup block with more cells than a reader would decode",
                });
            }
        }
        let rotate = match &self.active {
            None => true,
            Some(a) => {
                unix_ns.saturating_sub(a.start_ns) >= self.config.segment_max_age.as_nanos() as u64
                    || a.bytes >= self.config.segment_max_bytes
            }
        };
        if rotate {
            self.rotate(unix_ns).map_err(|e| self.failed(unix_ns, e))?;
        }
        let payload = compress_alone(self.config.level, &record)
            .map_err(|e| StoreError::io("cannot compress an event for", &self.dir, e))?;
        let compressed = Instant::now();
        if record.len() > decompressed_cap(payload.len(), 0) {
            return Err(StoreError::BadFrame {
                path: self.dir.clone(),
                offset: 0,
                reason: "event record too large to be read back",
            });
        }
        let frame_bytes =
            self.write_frame(unix_ns, event.kind(), event.version(), &payload).map_err(|e| self.failed(unix_ns, e))?;
        self.backoff = None;
        let written = Instant::now();
        let cost = AppendCost {
            record_bytes: record.len() as u64,
            frame_bytes,
            key_frame: false,
            encode_ns: (encoded - started).as_nanos() as u64,
            compress_ns: (compressed - encoded).as_nanos() as u64,
            write_ns: (written - compressed).as_nanos() as u64,
        };
        let s = &mut self.stats;
        s.frames += 1;
        s.record_bytes += cost.record_bytes;
        s.frame_bytes += cost.frame_bytes;
        s.encode_ns += cost.encode_ns;
        s.compress_ns += cost.compress_ns;
        s.write_ns += cost.write_ns;
        Ok(cost)
    }

    /// Seals the active segment (synced), so the next frame starts a new one: a writer of a
    /// rollup tier ends a segment where a compaction window ends, so that a window's blocks
    /// can be rewritten as whole segments.
    pub fn seal(&mut self) -> Result<(), StoreError> {
        if let Some(active) = self.active.take() {
            active.file.sync_data().map_err(|e| StoreError::io("cannot sync", &active.path, e))?;
        }
        self.compressor.reset();
        self.base = None;
        self.previous = None;
        Ok(())
    }

    /// Replaces consecutive segments `old` (in time order, each named and read as
    /// [`crate::segment::list`] gives them) by one segment holding `records` (time, kind,
    /// version, uncompressed record), each compressed on its own: how a rollup tier compacts
    /// its hour blocks. The new segment takes the first old one's name.
    ///
    /// Crash-safe without a journal: the new segment is written in full under a name no
    /// reader lists (`NAME.seg.new`) and synced; then renamed over the first old segment (one
    /// atomic step: a reader finds either the old file or the new, whole); then the other old
    /// segments are removed. A crash before the rename leaves the old segments as they were
    /// (the next [`Writer::open`] removes the `.new` file); one after it leaves the new segment
    /// beside old ones that hold the same records again, which the caller's readers must take
    /// once (the rollup tiers' readers skip a row whose time an earlier block held) and the
    /// caller's next rewrite removes. The active segment, if it is among `old`, is sealed first.
    /// Returns the new segment's size.
    pub fn replace_segments(&mut self, old: &[SegmentInfo], records: &[NewFrame<'_>]) -> Result<u64, StoreError> {
        let Some(first) = old.first() else { return Ok(0) };
        if self.active.as_ref().is_some_and(|a| old.iter().any(|s| s.path == a.path)) {
            self.seal()?;
        }
        let mut bytes = SEGMENT_MAGIC.to_vec();
        for record in records {
            let payload = compress_alone(self.config.level, record.record)
                .map_err(|e| StoreError::io("cannot compress an event for", &self.dir, e))?;
            if payload.len() > MAX_PAYLOAD_LEN as usize || record.record.len() > decompressed_cap(payload.len(), 0) {
                return Err(StoreError::BadFrame {
                    path: self.dir.clone(),
                    offset: 0,
                    reason: "rewritten record too large to be read back",
                });
            }
            bytes.extend_from_slice(&encode_header(record.unix_ns, record.kind, record.version, &payload));
            bytes.extend_from_slice(&payload);
        }
        let mut new_path = first.path.as_os_str().to_owned();
        new_path.push(REWRITE_SUFFIX);
        let new_path = PathBuf::from(new_path);
        let write = |path: &Path| -> std::io::Result<()> {
            let mut file = OpenOptions::new().write(true).create(true).truncate(true).open(path)?;
            file.write_all(&bytes)?;
            file.sync_all()
        };
        if let Err(e) = write(&new_path) {
            let _ = std::fs::remove_file(&new_path);
            return Err(StoreError::io("cannot write", &new_path, e));
        }
        std::fs::rename(&new_path, &first.path).map_err(|e| StoreError::io("cannot rename", &new_path, e))?;
        sync_dir(&self.dir)?;
        for segment in &old[1..] {
            match std::fs::remove_file(&segment.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("cannot remove", &segment.path, e)),
            }
        }
        sync_dir(&self.dir)?;
        self.stats.segments_removed += old.len() as u64 - 1;
        Ok(bytes.len() as u64)
    }

    /// Where the next frame will start: after the active segment's frames, or after the
    /// magic of the segment it will create.
    fn next_offset(&self) -> u64 {
        self.active.as_ref().map_or(SEGMENT_MAGIC.len() as u64, |a| a.bytes)
    }

    /// Writes one frame to the active segment with a single `write`; returns its size. With
    /// no active segment, it creates one whose first `write` is its magic and this frame, so no
    /// segment file exists without a frame: one whose write fails is removed again (a full disk
    /// left a 0-byte segment behind for every sample).
    fn write_frame(&mut self, unix_ns: u64, kind: FrameKind, version: u8, payload: &[u8]) -> Result<u64, StoreError> {
        if payload.len() > MAX_PAYLOAD_LEN as usize {
            return Err(StoreError::BadFrame {
                path: self.dir.clone(),
                offset: 0,
                reason: "record too large for a frame",
            });
        }
        let header = encode_header(unix_ns, kind, version, payload);
        let new_segment = self.active.is_none();
        let mut frame = Vec::with_capacity(SEGMENT_MAGIC.len() + header.len() + payload.len());
        if new_segment {
            frame.extend_from_slice(SEGMENT_MAGIC);
        }
        frame.extend_from_slice(&header);
        frame.extend_from_slice(payload);
        let frame_bytes = (header.len() + payload.len()) as u64;
        if new_segment {
            let (mut file, path, start_ns) = self.create_segment(unix_ns)?;
            if let Err(e) = write_synced(&mut file, &frame, self.config.sync_every_frame) {
                // Nothing of it is worth keeping: it holds no whole frame.
                drop(file);
                let _ = std::fs::remove_file(&path);
                return Err(e.at(&path));
            }
            self.active = Some(Active {
                file,
                path,
                start_ns,
                bytes: frame.len() as u64,
                frames_in_chunk: 0,
                key_payload_bytes: 0,
                rekey: false,
            });
            self.stats.segments_created += 1;
            return Ok(frame_bytes);
        }
        let active = self.active.as_mut().expect("checked above");
        // One write: a crash leaves either nothing or a torn frame at the very end.
        if let Err(e) = write_synced(&mut active.file, &frame, self.config.sync_every_frame) {
            // A failed write (ENOSPC, EIO) may have left part of the frame behind; a failed sync
            // leaves it there undurable. Cut back to the last whole frame and keep writing this
            // segment with the next sample (its chunk state is as before the failed frame), so
            // a full disk costs no new files. If the cut fails, the next sample starts a new
            // segment instead, so good frames never follow a torn one (which would set the
            // whole segment aside on the next open); the torn tail stays last in its file,
            // where `open` cuts it.
            //
            // A file that may not grow (`EFBIG`, past a file size limit) is full, not the disk:
            // the next sample starts a new segment, at once.
            let path = active.path.clone();
            let cut = active.file.set_len(active.bytes).and_then(|()| active.file.metadata());
            self.segment_full = e.error.raw_os_error() == Some(libc::EFBIG);
            if self.segment_full || !cut.is_ok_and(|meta| meta.len() == active.bytes) {
                self.active = None;
            }
            return Err(e.at(&path));
        }
        active.bytes += frame.len() as u64;
        Ok(frame_bytes)
    }

    /// Creates the next segment file, named by `start_ns` unless that is not after the newest
    /// segment's name (a clock that stepped back, two writers in one nanosecond): then the next
    /// free name after the newest.
    fn create_segment(&self, start_ns: u64) -> Result<(File, PathBuf, u64), StoreError> {
        let newest = list_segments(&self.dir)?.last().map(|s| s.start_ns);
        let mut name_ns = match newest {
            Some(n) if n >= start_ns => n.checked_add(1),
            _ => Some(start_ns),
        };
        loop {
            let Some(ns) = name_ns else {
                return Err(StoreError::BadFrame { path: self.dir.clone(), offset: 0, reason: "no segment name left" });
            };
            let path = self.dir.join(segment_name(ns));
            match OpenOptions::new().append(true).create_new(true).open(&path) {
                Ok(file) => return Ok((file, path, ns)),
                // A segment, a set-aside one or a stranger holds the name.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => name_ns = ns.checked_add(1),
                Err(e) => return Err(StoreError::io("cannot create", &path, e)),
            }
        }
    }

    /// Refuses an item less than the backoff younger than the write that failed (an item from
    /// before it, after a clock stepped back, is tried).
    fn check_backoff(&self, unix_ns: u64) -> Result<(), StoreError> {
        let Some(b) = &self.backoff else { return Ok(()) };
        let until = b.failed_ns.saturating_add(b.wait_ns);
        if unix_ns < b.failed_ns || unix_ns >= until {
            return Ok(());
        }
        Err(StoreError::BackingOff {
            path: self.dir.clone(),
            retry_in: std::time::Duration::from_nanos(until - unix_ns),
            cause: b.cause.clone(),
        })
    }

    /// Notes a failed write of the item at `unix_ns` and passes its error on: after an I/O
    /// error the wait before the next try doubles (from 1 s, at most 32 s), unless only the
    /// segment was full.
    fn failed(&mut self, unix_ns: u64, error: StoreError) -> StoreError {
        if std::mem::take(&mut self.segment_full) || !matches!(error, StoreError::Io { .. }) {
            return error;
        }
        let wait_ns = self.backoff.as_ref().map_or(FIRST_BACKOFF_NS, |b| (b.wait_ns * 2).min(MAX_BACKOFF_NS));
        self.backoff = Some(Backoff { failed_ns: unix_ns, wait_ns, cause: error.to_string() });
        error
    }

    /// A version-1 key frame when `key`, else a delta against the chunk's key record. The
    /// record moves into the compressor as the new key, or is freed here, before the frame is
    /// built and written.
    fn compress_v1(&mut self, key: bool, record: Vec<u8>) -> (bool, std::io::Result<Vec<u8>>) {
        match if key { None } else { self.compressor.delta(&record) } {
            Some(result) => (false, result),
            // No key loaded (cannot happen after a key frame in this segment, but a frame
            // compressed without its dictionary must never be labelled a delta).
            None => (true, self.compressor.key(record)),
        }
    }

    /// Seals the active segment, if any, and applies retention, so that the next frame starts
    /// a new segment (and chunk) in a store trimmed first: on a full disk, retention frees what
    /// it may before the new segment's first write needs it.
    fn rotate(&mut self, start_ns: u64) -> Result<(), StoreError> {
        if let Some(old) = self.active.take() {
            // Sealing: the old segment's frames reach the disk before the next one starts, so
            // only the newest segment can ever be torn.
            old.file.sync_data().map_err(|e| StoreError::io("cannot sync", &old.path, e))?;
        }
        self.compressor.reset();
        self.base = None;
        self.previous = None;
        let removed = self.apply_retention(start_ns)?;
        self.stats.segments_removed += removed.len() as u64;
        Ok(())
    }

    /// Removes whole segments, oldest first, while they are older than `retain_age` (their
    /// successor started before `newest_ns − retain_age`) or all together exceed
    /// `retain_bytes`. Never removes the segment being written.
    ///
    /// Segments set aside as corrupt count toward `retain_bytes` and go first: past the
    /// retention age (a set-aside segment has no successor to date its end, so its start plus
    /// `segment_max_age` must be older than the cutoff), or, oldest first, before any readable
    /// segment when the store is over its size budget. Keeping them for ever would let a disk
    /// that keeps damaging files fill up behind the size bound.
    fn apply_retention(&mut self, newest_ns: u64) -> Result<Vec<PathBuf>, StoreError> {
        let segments = list_segments(&self.dir)?;
        let set_aside = list_set_aside(&self.dir)?;
        let active = self.active.as_ref().map(|a| a.path.clone());
        let mut total: u64 = segments.iter().chain(&set_aside).map(|s| s.len_bytes).sum();
        let cutoff = newest_ns.saturating_sub(self.config.retain_age.as_nanos() as u64);
        let max_age_ns = self.config.segment_max_age.as_nanos() as u64;
        let mut removed = Vec::new();
        for segment in &set_aside {
            let too_old = segment.start_ns.saturating_add(max_age_ns) < cutoff;
            if !too_old && total <= self.config.retain_bytes {
                continue;
            }
            std::fs::remove_file(&segment.path).map_err(|e| StoreError::io("cannot remove", &segment.path, e))?;
            total -= segment.len_bytes;
            removed.push(segment.path.clone());
        }
        for (i, segment) in segments.iter().enumerate() {
            if Some(&segment.path) == active.as_ref() {
                break;
            }
            let Some(next) = segments.get(i + 1) else { break };
            let too_old = next.start_ns < cutoff;
            let too_big = total > self.config.retain_bytes;
            if !too_old && !too_big {
                break;
            }
            std::fs::remove_file(&segment.path).map_err(|e| StoreError::io("cannot remove", &segment.path, e))?;
            total -= segment.len_bytes;
            removed.push(segment.path.clone());
        }
        Ok(removed)
    }
}

/// One frame of a segment that [`Writer::replace_segments`] writes.
#[derive(Debug, Clone, Copy)]
pub struct NewFrame<'a> {
    pub unix_ns: u64,
    pub kind: FrameKind,
    pub version: u8,
    /// The record, uncompressed.
    pub record: &'a [u8],
}

/// Removes `NAME.seg.new` files: rewrites a crash cut short before their rename, whose old
/// segments are all still in place ([`Writer::replace_segments`]).
fn remove_unfinished_rewrites(dir: &Path, report: &mut OpenReport) -> Result<(), StoreError> {
    let suffix = format!("{}{REWRITE_SUFFIX}", crate::segment::SEGMENT_SUFFIX);
    let entries = std::fs::read_dir(dir).map_err(|e| StoreError::io("cannot list", dir, e))?;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let unfinished = entry.file_name().to_str().is_some_and(|n| n.ends_with(&suffix));
        if !unfinished || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let dropped_bytes = entry.metadata().map_or(0, |m| m.len());
        std::fs::remove_file(&path).map_err(|e| StoreError::io("cannot remove", &path, e))?;
        report.repaired.push(Repair {
            path,
            kept_bytes: 0,
            dropped_bytes,
            reason: "a rewrite cut short before its rename; the segments it was to replace are kept".to_string(),
        });
    }
    Ok(())
}

/// `fsync` of a directory: a rename or an unlink in it reaches the disk.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| StoreError::io("cannot sync", dir, e))
}

/// A failed write or sync, its path given by [`WriteFailure::at`].
struct WriteFailure {
    action: &'static str,
    error: std::io::Error,
}

impl WriteFailure {
    fn at(self, path: &Path) -> StoreError {
        StoreError::io(self.action, path, self.error)
    }
}

/// One `write_all` of `bytes`, then an `fdatasync` when `sync`.
fn write_synced(file: &mut File, bytes: &[u8], sync: bool) -> Result<(), WriteFailure> {
    file.write_all(bytes).map_err(|error| WriteFailure { action: "cannot write to", error })?;
    if sync {
        file.sync_data().map_err(|error| WriteFailure { action: "cannot sync", error })?;
    }
    Ok(())
}

fn recover_segment(segment: &SegmentInfo, check: Check, report: &mut OpenReport) -> Result<(), StoreError> {
    let walked = walk(&segment.path, check)?;
    report.frames_checked += walked.frames.len() as u64;
    let Some((offset, defect)) = walked.defect else { return Ok(()) };
    let reason = match defect {
        FrameDefect::Torn => "torn frame".to_string(),
        FrameDefect::Corrupt(why) => why.to_string(),
    };
    if offset > 0 && !intact_frame_after(&segment.path, offset)? {
        // Nothing good follows: the tail of an interrupted write (or a damaged last frame).
        let cut = |e| StoreError::io("cannot cut back", &segment.path, e);
        let file = open_regular(&segment.path, OpenOptions::new().write(true))?;
        file.set_len(walked.good_len).map_err(cut)?;
        file.sync_all().map_err(cut)?;
        report.repaired.push(Repair {
            path: segment.path.clone(),
            kept_bytes: walked.good_len,
            dropped_bytes: segment.len_bytes - walked.good_len,
            reason: format!("{reason} at offset {offset}"),
        });
        return Ok(());
    }
    if offset == 0 && defect == FrameDefect::Torn {
        // Created, but the writer died before the segment magic was complete: no frame lost.
        std::fs::remove_file(&segment.path).map_err(|e| StoreError::io("cannot remove", &segment.path, e))?;
        report.repaired.push(Repair {
            path: segment.path.clone(),
            kept_bytes: 0,
            dropped_bytes: segment.len_bytes,
            reason: "segment header incomplete; removed".to_string(),
        });
        return Ok(());
    }
    let mut moved_to = segment.path.as_os_str().to_owned();
    moved_to.push(CORRUPT_SUFFIX);
    let moved_to = PathBuf::from(moved_to);
    std::fs::rename(&segment.path, &moved_to).map_err(|e| StoreError::io("cannot set aside", &segment.path, e))?;
    report.set_aside.push(SetAside {
        path: segment.path.clone(),
        moved_to,
        reason: format!("{reason} at offset {offset}, intact frames after it"),
    });
    Ok(())
}
