//! proctor-store: an embedded, crash-safe store of raw samples, needing no server.
//!
//! A store is a directory of *segments*, append-only files of CRC'd frames, one sample per
//! frame (see `frame` for the layout and `codec` for what a frame holds and why it is small).
//! One [`Writer`] at a time holds the directory's `lock` (an `flock`, which the kernel drops
//! when the process dies, so a SIGKILLed recorder never leaves a stale lock); any number of
//! [`Reader`]s read alongside it without locking.
//!
//! Crash safety comes from the layout, not from a journal: a frame is written with a single
//! `write` at the end of the newest segment, so a crash can only leave a torn frame at the end
//! of that segment. `Writer::open` checks the newest segment's every CRC and cuts a torn or
//! corrupt tail off; damage in the middle of a file (an intact frame after the bad one) sets
//! the whole file aside as `*.corrupt` and reports it, and recording goes on in a new segment.
//! Each writer starts a new segment, so it never appends to a file a crash may have damaged.
//! Readers read a set-aside file's intact frames, before and after its damage, and say so.
//!
//! Hostile files: every store file is opened non-blocking and accepted only if it is a regular
//! file; a FIFO, directory or device named like a segment is listed apart and left alone. A
//! reader skips what it cannot open, reads around damage, and keeps each problem once in its
//! [`ReadReport`] with the samples it cost, which every command and answer says.
//!
//! Retention drops whole segments (oldest first) by age and by total size: an `unlink`, never a
//! rewrite. The one rewrite is a rollup tier's compaction ([`Writer::replace_segments`]): a new
//! segment written whole under another name, synced, renamed over the first of the segments it
//! replaces, then the others unlinked; a frame is never changed in place.
//!
//! Full disks: a segment file is created by the write of its first frame (and removed if that
//! fails), a failed write is cut back and the next goes into the same segment, and after a
//! failure the writer waits a backoff (in the samples' time) before it tries the disk again.
//!
//! Streams: samples live in the data directory itself; other producers write their records
//! (probe results, statsd flushes: [`codec::Event`]) into a subdirectory each ([`PROBE_STREAM`],
//! [`STATSD_STREAM`]), a store of its own with its own writer lock and retention, because one
//! directory has one writer and a `proctor probe` runs beside a recording `proctor serve`.
//! A reader of the data directory never sees them (segments are files, streams directories),
//! so older builds keep reading samples; `proctor report` opens the streams beside it.
//!
//! Reading forward: a [`ForwardReader`] keeps its place between batches (remote write's
//! backfill), so a batch costs its own frames, not the ones stored after them.
//!
//! What it does not do: keep a separate index file (segment names are the time index, frame
//! headers carry each frame's time, and a walk reads headers only), verify sealed segments'
//! payloads at open (a reader checks each frame's CRC when it reads it), or delete set-aside
//! files (they are evidence; their sizes are reported).

pub mod codec;
pub mod delta;
mod forward;
pub mod frame;
mod reader;
pub mod recorder;
mod report;
pub mod rollup;
pub mod segment;
mod writer;

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use codec::Event;
pub use forward::{ForwardReader, ForwardStats, WALK_FRAMES};
pub use reader::{same_run, Reader, StoredFrame};
pub use recorder::{Recorder, RecorderSender, RecorderStats, Sink};
pub use report::{DamagedSegment, ReadReport, SkippedFile};
pub use writer::{AppendCost, NewFrame, OpenReport, Repair, SetAside, Writer, WriterStats, CHAIN_MAX_ENDED};

/// The subdirectory of a data directory that `proctor probe --record` writes.
pub const PROBE_STREAM: &str = "probe";
/// The subdirectory of a data directory that statsd flushes are recorded into.
pub const STATSD_STREAM: &str = "statsd";
/// The rollup tiers: a row per minute and a row per hour (`proctor_stored::rollup` writes them).
pub const MINUTE_TIER: &str = "rollup-1m";
pub const HOUR_TIER: &str = "rollup-1h";

/// `DATA/NAME`, created (mode 0700, like the data directory) when `DATA` exists and it does
/// not. A missing `DATA` is the same clear error as for samples.
pub fn stream_dir(data_dir: &Path, name: &str) -> Result<PathBuf, StoreError> {
    check_dir(data_dir)?;
    let dir = data_dir.join(name);
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(StoreError::io("cannot create", &dir, e)),
    }
    check_dir(&dir)?;
    Ok(dir)
}

/// How a store is written and trimmed.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Start a new segment once the current one spans this much time...
    pub segment_max_age: Duration,
    /// ...or holds this many bytes.
    pub segment_max_bytes: u64,
    /// Frames per chunk (one key frame, then deltas against it).
    pub chunk_frames: u32,
    /// Record version 2: every this many frames of a chunk a delta is an *anchor*, the base of
    /// the deltas after it (anchors chain back to the key); 0 takes every delta against the key.
    /// Against an older base a delta carries every row that changed since (PSS readings are
    /// refreshed once a minute, so against a 60-frame key ~half the rows differ).
    pub anchor_frames: u32,
    /// Drop segments whose newest sample is older than this (relative to the newest sample).
    pub retain_age: Duration,
    /// Drop the oldest segments while all segments together exceed this.
    pub retain_bytes: u64,
    /// zstd level of deltas and events.
    pub level: i32,
    /// zstd level of key frames (versions 2 and 3). A key is one frame in `chunk_frames`, so a
    /// slower level costs little: with ~600 processes, level 9 takes a key from ~38 to ~29 KB
    /// for ~5 ms more a minute (`examples/store_split.rs` with `STORE_SPLIT_LEVELS`).
    pub key_level: i32,
    /// zstd level of a version-3 delta or a key that lists [`CHAIN_MAX_ENDED`] ended processes
    /// or more (a fork storm's, compressed alone). Such a record is mostly its table of ended
    /// processes; on a storm's records (~625 ended, ~88 KB each) level 1 made them no larger
    /// than level 3 (19,075 against 19,670 bytes) in 0.7× the time (288 against 404 µs;
    /// `examples/chain_ended.rs`), the writer's largest cost in a storm.
    pub storm_level: i32,
    /// `fdatasync` after every frame, so a power loss (not only a crash) loses at most the
    /// sample in flight. Off, the page cache holds the frame and a process crash still loses
    /// nothing written.
    pub sync_every_frame: bool,
    /// The record format written: [`codec::RECORD_VERSION`] (3) unless a comparison or a
    /// compatibility test asks for [`codec::RECORD_VERSION_2`] or [`codec::RECORD_VERSION_1`].
    pub record_version: u8,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            segment_max_age: Duration::from_secs(3600),
            segment_max_bytes: 64 << 20,
            chunk_frames: 60,
            anchor_frames: 4,
            // A week: at the ~1–2 KiB per frame measured with ~600 processes at 1 s (record
            // version 3 writes ~0.9–1.6 KiB; docs/performance.md, "The store"), a week is
            // 0.5–1.2 GiB, under the 2 GiB size cap.
            retain_age: Duration::from_secs(7 * 24 * 3600),
            retain_bytes: 2 << 30,
            level: codec::DEFAULT_LEVEL,
            key_level: codec::KEY_LEVEL,
            storm_level: codec::STORM_LEVEL,
            sync_every_frame: false,
            record_version: codec::RECORD_VERSION,
        }
    }
}

/// Errors opening, writing or reading a store.
///
/// Each message says what failed on which path and why, once: the cause is part of the text
/// and not also a `source()`, so `anyhow`'s `{:#}` chain does not print it twice and a caller
/// that keeps only `to_string()` (the recorder's last error) still has it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("data directory {path} does not exist (create it first)")]
    Missing { path: PathBuf },
    #[error("data directory {path} is not a directory")]
    NotADirectory { path: PathBuf },
    /// `action` is what was tried on `path`: "cannot open", "cannot list", "cannot write to", …
    #[error("{action} {path}: {error}")]
    Io { action: &'static str, path: PathBuf, error: std::io::Error },
    #[error("data directory {path} is locked by another recorder")]
    Locked { path: PathBuf },
    #[error("{path} at offset {offset}: {error}")]
    Codec { path: PathBuf, offset: u64, error: codec::CodecError },
    #[error("{path} at offset {offset}: {reason}")]
    BadFrame { path: PathBuf, offset: u64, reason: &'static str },
    /// A store file (a segment, the lock) that is a directory, a FIFO, a socket or a device.
    #[error("{path} is {what}, not a regular file")]
    NotAFile { path: PathBuf, what: &'static str },
    /// Not tried: a write to the store failed a moment ago (see `Writer::append`).
    #[error("not written to {path}: a write failed ({cause}); the next try is in {:.1} s", retry_in.as_secs_f64())]
    BackingOff { path: PathBuf, retry_in: Duration, cause: String },
    #[error("this build writes record versions 1 and 2, not {0}")]
    WriteVersion(u8),
}

impl StoreError {
    pub(crate) fn io(action: &'static str, path: &Path, error: std::io::Error) -> Self {
        StoreError::Io { action, path: path.to_owned(), error }
    }

    /// What went wrong, without the path (for a line that names the file already): "cannot
    /// open: Permission denied (os error 13)", "a FIFO, not a regular file", "crc mismatch".
    pub fn cause(&self) -> String {
        match self {
            StoreError::Io { action, error, .. } => format!("{action}: {error}"),
            StoreError::Codec { error, .. } => error.to_string(),
            StoreError::BadFrame { reason, .. } => reason.to_string(),
            StoreError::NotAFile { what, .. } => format!("{what}, not a regular file"),
            other => other.to_string(),
        }
    }

    /// The I/O error underneath, if that is what this is.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            StoreError::Io { error, .. } => Some(error.kind()),
            _ => None,
        }
    }
}

/// Checks that `dir` exists, is a directory and can be listed: the clear error a missing or
/// unreadable data directory deserves, before anything else is tried.
pub fn check_dir(dir: &Path) -> Result<(), StoreError> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(StoreError::Missing { path: dir.to_owned() }),
        Err(e) => return Err(StoreError::io("cannot reach", dir, e)),
        Ok(meta) if !meta.is_dir() => return Err(StoreError::NotADirectory { path: dir.to_owned() }),
        Ok(_) => {}
    }
    std::fs::read_dir(dir).map_err(|e| StoreError::io("cannot list", dir, e))?;
    Ok(())
}
