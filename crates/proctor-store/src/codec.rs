//! Records: a `Sample` as versioned, self-describing bytes, and their compression. Pure apart
//! from zstd's own allocations; no files.
//!
//! Records are JSON rather than a positional encoding because JSON names every field: a build
//! that added a field reads old records (new fields must be `Option` or `#[serde(default)]`),
//! and an old build reading new records ignores fields it does not know. The record format
//! version is the frame header's version byte, and the reader dispatches on it:
//!
//! Frames come in chunks. The first frame of a chunk (a *key* frame) is the sample's JSON,
//! compressed on its own, in both versions. The later frames (*deltas*) differ:
//!
//! - **Version 2** (written since the delta records): a delta is a small JSON record of what
//!   differs from its *base* sample (see `delta`): runs of base rows that are unchanged, the
//!   changed fields of the rows that changed, new rows in full, and a patch of the host,
//!   container and cost parts. The base is the chunk's key or the latest *anchor* (every 4th
//!   delta is one, and takes the previous anchor as its base), so a delta names the rows that
//!   changed in the last few seconds, ~tens with ~600 processes, and is compressed on its own
//!   (no dictionary: nothing to index, the record is small). Decoding a chunk in order parses
//!   its key once and applies each small delta to the cached base.
//! - **Version 1** (the first store): a delta is the sample's whole JSON, compressed with the
//!   key's raw record as a zstd raw-content dictionary (a *prefix* when compressing). It cost
//!   ~0.6 ms to serialize ~430 KB, 0.45–0.9 ms to compress (indexing the prefix again each
//!   frame), and 0.6 ms to decode, per frame. Still read; written only when
//!   `StoreConfig::record_version` asks (comparisons, compatibility tests).
//!
//! - **Version 3** (written since the chained deltas): version 2's delta records, each
//!   compressed with the previous sample frame's record as zstd's *prefix* when that frame is a
//!   delta of the same chunk (the first delta after a key is compressed alone). Consecutive
//!   deltas name mostly the same fields, rows and host parts, so this takes a delta from ~2.1 KB
//!   to ~0.9 KB with ~600 processes (`examples/delta_dict.rs`), and compressing is no slower
//!   (the prefix is ~20 KB, not a 434 KB key). The payload starts with where the previous
//!   sample frame is ([`Chained`]), so a reader finds the chain before it decompresses
//!   anything. The price: a delta needs every sample frame before it in its chunk, so damage
//!   in one delta loses the rest of its chunk (at most `chunk_frames` samples), where in
//!   version 2 it lost that frame alone.
//!
//! Decoding a version-1 frame needs at most its key and itself; a version-2 frame its key, the
//! anchors between, and itself (a chain of at most `chunk_frames / anchor_frames` steps, each
//! a small record). A version-1 writer starts a new chunk early when a delta comes out larger
//! than a quarter of its key: a run's first sample has no command lines yet (the cmdline worker
//! reads them after), and a key without them made every delta of its chunk ~20× larger. In
//! version 2 the first anchor carries them, and the deltas after it are small again.

use proctor_model::{HostSample, ProbeBatch, ProcessSample, RollupBlock, Sample, SampleCost, StatsdFlush};

use crate::frame::FrameKind;

/// The record format this build writes: version 3, key frames the JSON serialization of
/// `Sample` (as in versions 1 and 2), delta frames `delta` records (as in version 2) chained:
/// each compressed with the record before it in its chunk as zstd's prefix ([`Chained`]).
pub const RECORD_VERSION: u8 = 3;
/// Delta frames are `delta` records, each compressed alone. Still read; written only when
/// `StoreConfig::record_version` asks.
pub const RECORD_VERSION_2: u8 = 2;
/// The first record format: every frame the JSON serialization of `Sample`, deltas compressed
/// against their key's record.
pub const RECORD_VERSION_1: u8 = 1;

/// Errors turning bytes back into a sample.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("record version {0} is not one this build reads (a newer build's?)")]
    UnknownVersion(u8),
    #[error("decompression failed: {0}")]
    Decompress(std::io::Error),
    #[error("record does not parse: {0}")]
    Parse(serde_json::Error),
    #[error("a sample frame read as an event")]
    NotAnEvent,
    #[error("delta record does not fit its key: {0}")]
    Delta(&'static str),
    #[error("the compressed record claims {claimed} bytes; {compressed} compressed bytes may hold {cap} at most")]
    Claims { claimed: u64, compressed: usize, cap: usize },
    #[error("the compressed record does not say its size")]
    NoContentSize,
    #[error("the record is not zstd-compressed")]
    NotZstd,
    #[error("rollup record: {0}")]
    Rollup(&'static str),
}

pub fn encode_record(sample: &Sample) -> Vec<u8> {
    encode_record_sized(sample, 0)
}

/// [`encode_record`] into a buffer allocated for `expected` bytes up front (the last record's
/// size, say): a 434 KB record then costs one allocation instead of a dozen doublings, none of
/// them copied (a 512 KiB buffer and the 256 KiB one it grew from, at its last step).
pub fn encode_record_sized(sample: &Sample, expected: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(expected);
    // Serializing plain structs and maps with string keys cannot fail.
    serde_json::to_writer(&mut out, sample).expect("a Sample always serializes to JSON");
    out
}

/// A record that is not a sample: stored in a stream of its own, one compressed frame each.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Probe(ProbeBatch),
    Statsd(StatsdFlush),
    /// A block of rollup rows (the long-term tiers; `crate::rollup`).
    Rollup(RollupBlock),
}

/// The event record format this build writes, per kind. Version 1: the JSON serialization of
/// `ProbeBatch` / `StatsdFlush`.
pub const EVENT_VERSION: u8 = 1;

impl Event {
    pub fn kind(&self) -> FrameKind {
        match self {
            Event::Probe(_) => FrameKind::Probe,
            Event::Statsd(_) => FrameKind::Statsd,
            Event::Rollup(_) => FrameKind::Rollup,
        }
    }

    /// The record format version written for this kind.
    pub fn version(&self) -> u8 {
        match self {
            Event::Probe(_) | Event::Statsd(_) => EVENT_VERSION,
            Event::Rollup(_) => crate::rollup::ROLLUP_VERSION,
        }
    }
}

pub fn encode_event(event: &Event) -> Vec<u8> {
    // Plain structs, vectors and strings always serialize.
    match event {
        Event::Probe(batch) => serde_json::to_vec(batch),
        Event::Statsd(flush) => serde_json::to_vec(flush),
        Event::Rollup(block) => return crate::rollup::encode_block(block),
    }
    .expect("an event always serializes to JSON")
}

pub fn decode_event(kind: FrameKind, version: u8, bytes: &[u8]) -> Result<Event, CodecError> {
    if kind == FrameKind::Rollup {
        if version != crate::rollup::ROLLUP_VERSION && version != crate::rollup::ROLLUP_VERSION_1 {
            return Err(CodecError::UnknownVersion(version));
        }
        return crate::rollup::decode_block_version(version, bytes)
            .map(Event::Rollup)
            .map_err(|e| CodecError::Rollup(e.0));
    }
    if version != EVENT_VERSION {
        return Err(CodecError::UnknownVersion(version));
    }
    match kind {
        FrameKind::Probe => serde_json::from_slice(bytes).map(Event::Probe).map_err(CodecError::Parse),
        FrameKind::Statsd => serde_json::from_slice(bytes).map(Event::Statsd).map_err(CodecError::Parse),
        FrameKind::Key | FrameKind::Delta => Err(CodecError::NotAnEvent),
        FrameKind::Rollup => unreachable!("dispatched above"),
    }
}

/// Decodes a whole-sample record: a key frame of any version, or a version-1 delta frame
/// (decompressed against its key). Version-2 and -3 deltas are `delta::decode_delta`.
pub fn decode_record(version: u8, bytes: &[u8]) -> Result<Sample, CodecError> {
    if version != RECORD_VERSION && version != RECORD_VERSION_2 && version != RECORD_VERSION_1 {
        return Err(CodecError::UnknownVersion(version));
    }
    serde_json::from_slice(bytes).map_err(CodecError::Parse)
}

/// A record decoded for a summary over many samples ([`Reader::read_lean`](crate::Reader::read_lean)):
/// the sample's clocks, its host part and, per process, its `stat` fields and command line.
/// Left out (skipped by the parser, never built): the container part, each process's
/// `status`, `io`, PSS and cgroup readings, and the cycle's cost. Those are most of a record's
/// fields and allocations (measured in `bench/report/run.sh`).
///
/// `bytes` must be a whole sample's JSON: any version-1 record, or a version-2 key record (a
/// version-2 delta is a patch, decoded through the reader's cached base instead).
pub fn decode_record_lean(version: u8, bytes: &[u8]) -> Result<Sample, CodecError> {
    if version != RECORD_VERSION && version != RECORD_VERSION_2 && version != RECORD_VERSION_1 {
        return Err(CodecError::UnknownVersion(version));
    }
    let lean: LeanSample = serde_json::from_slice(bytes).map_err(CodecError::Parse)?;
    Ok(Sample {
        seq: lean.seq,
        unix_ns: lean.unix_ns,
        mono_ns: lean.mono_ns,
        clock_ticks_per_sec: lean.clock_ticks_per_sec,
        page_size: lean.page_size,
        host: lean.host,
        container: None,
        processes: lean
            .processes
            .into_iter()
            .map(|p| ProcessSample {
                pid: p.pid,
                ppid: p.ppid,
                start_ticks: p.start_ticks,
                comm: p.comm,
                state: p.state,
                utime_ticks: p.utime_ticks,
                stime_ticks: p.stime_ticks,
                cutime_ticks: p.cutime_ticks,
                cstime_ticks: p.cstime_ticks,
                cminflt: p.cminflt,
                cmajflt: p.cmajflt,
                // Only groups count fds, and groups are read from full samples.
                open_fds: None,
                num_threads: p.num_threads,
                minflt: p.minflt,
                majflt: p.majflt,
                nice: p.nice,
                vsize_bytes: p.vsize_bytes,
                resident_bytes: p.resident_bytes,
                status: None,
                io: None,
                cmdline: p.cmdline,
                pss: None,
                pss_stale: false,
                pss_estimate: None,
                cgroup: None,
                tasks: Vec::new(),
                stall: None,
                net: None,
            })
            .collect(),
        cost: SampleCost::default(),
        groups: lean.groups,
        gpu: None,
        exited: lean.exited,
    })
}

/// Only the clocks and the host part of a record, for host series
/// ([`Reader::read_host`](crate::Reader::read_host)): the sample comes back with no processes,
/// no container part and a default cost. Serde writes `Sample`'s fields in declaration order, so
/// the host part ends where `,"container":` starts (a JSON string cannot hold that unescaped
/// quote, and no host field has that name); the record is parsed only up to there, which skips
/// parsing the processes (~98 % of a 600-process record). A record not laid out that way (a
/// future build's) is parsed lean in full instead.
pub fn decode_record_host(version: u8, bytes: &[u8]) -> Result<Sample, CodecError> {
    if version != RECORD_VERSION && version != RECORD_VERSION_2 && version != RECORD_VERSION_1 {
        return Err(CodecError::UnknownVersion(version));
    }
    const CUT: &[u8] = b",\"container\":";
    if let Some(at) = bytes.windows(CUT.len()).position(|w| w == CUT) {
        let mut head = Vec::with_capacity(at + 1);
        head.extend_from_slice(&bytes[..at]);
        head.push(b'}');
        if let Ok(h) = serde_json::from_slice::<HostHead>(&head) {
            return Ok(Sample {
                seq: h.seq,
                unix_ns: h.unix_ns,
                mono_ns: h.mono_ns,
                clock_ticks_per_sec: h.clock_ticks_per_sec,
                page_size: h.page_size,
                host: h.host,
                container: None,
                processes: Vec::new(),
                cost: SampleCost::default(),
                groups: None,
                gpu: None,
                exited: Vec::new(),
            });
        }
    }
    let mut sample = decode_record_lean(version, bytes)?;
    sample.processes = Vec::new();
    Ok(sample)
}

/// The fields before `container` in a record.
#[derive(serde::Deserialize)]
struct HostHead {
    seq: u64,
    unix_ns: u64,
    mono_ns: u64,
    clock_ticks_per_sec: u64,
    page_size: u64,
    host: HostSample,
}

/// The fields of `Sample` that [`decode_record_lean`] keeps; serde skips the others.
#[derive(serde::Deserialize)]
struct LeanSample {
    seq: u64,
    unix_ns: u64,
    mono_ns: u64,
    clock_ticks_per_sec: u64,
    page_size: u64,
    host: HostSample,
    processes: Vec<LeanProcess>,
    #[serde(default)]
    groups: Option<std::sync::Arc<proctor_model::SampleGroups>>,
    #[serde(default)]
    exited: Vec<proctor_model::ExitedProcess>,
}

/// The fields of `ProcessSample` that [`decode_record_lean`] keeps.
#[derive(serde::Deserialize)]
struct LeanProcess {
    pid: u32,
    ppid: u32,
    start_ticks: u64,
    comm: std::sync::Arc<str>,
    state: char,
    utime_ticks: u64,
    stime_ticks: u64,
    #[serde(default)]
    cutime_ticks: Option<u64>,
    #[serde(default)]
    cstime_ticks: Option<u64>,
    #[serde(default)]
    cminflt: Option<u64>,
    #[serde(default)]
    cmajflt: Option<u64>,
    num_threads: u64,
    minflt: u64,
    majflt: u64,
    nice: i64,
    vsize_bytes: u64,
    resident_bytes: Option<u64>,
    cmdline: Option<std::sync::Arc<[String]>>,
}

/// The payload of a version-3 delta frame: `back u32 LE | flags u8 | zstd frame`. `back` is
/// the distance in bytes from this frame's start back to the previous sample frame of its chunk
/// (the key, for the first delta), never 0; flag bit 0 says the zstd frame was compressed with
/// that frame's record as prefix (only a delta's record is: the key's is too large to index per
/// frame). Every other flag bit is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chained<'a> {
    pub back: u32,
    pub with_previous: bool,
    pub compressed: &'a [u8],
}

/// The bytes before a version-3 delta's zstd frame.
pub const CHAINED_PREFIX_LEN: usize = 5;

impl<'a> Chained<'a> {
    pub fn parse(payload: &'a [u8]) -> Result<Chained<'a>, CodecError> {
        let bad = || CodecError::Delta("a chained delta's payload does not start with where its previous frame is");
        let (head, compressed) = payload.split_at_checked(CHAINED_PREFIX_LEN).ok_or_else(bad)?;
        let back = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        if back == 0 || head[4] > 1 {
            return Err(bad());
        }
        Ok(Chained { back, with_previous: head[4] == 1, compressed })
    }

    /// The payload: the prefix, then `compressed`.
    pub fn encode(back: u32, with_previous: bool, compressed: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(CHAINED_PREFIX_LEN + compressed.len());
        out.extend_from_slice(&back.to_le_bytes());
        out.push(u8::from(with_previous));
        out.extend_from_slice(compressed);
        out
    }

    /// The record, given the previous frame's record when [`Chained::with_previous`]. What it
    /// may decompress to is [`chained_cap`].
    pub fn decompress(&self, previous: Option<&[u8]>) -> Result<Vec<u8>, CodecError> {
        match (self.with_previous, previous) {
            (false, _) => decompress(self.compressed, None, decompressed_cap(self.compressed.len(), 0)),
            (true, Some(previous)) => {
                decompress(self.compressed, Some(previous), chained_cap(self.compressed.len(), previous.len()))
            }
            (true, None) => Err(CodecError::Delta("a chained delta's previous record is missing")),
        }
    }
}

/// The most a version-3 delta compressed into `compressed` bytes against a previous record of
/// `previous` bytes may decompress to: what it could alone, plus the previous record once. So
/// a chain of records grows by at most what its own bytes could expand to, step by step (a
/// hostile chunk cannot double its records at each frame).
pub fn chained_cap(compressed: usize, previous: usize) -> usize {
    decompressed_cap(compressed, 0).saturating_add(previous).min(MAX_RECORD_LEN)
}

/// Compresses a record with `prefix` (the previous delta's record) as zstd's prefix.
pub fn compress_after(level: i32, prefix: &[u8], record: &[u8]) -> std::io::Result<Vec<u8>> {
    compress(level, Some(prefix), record)
}

/// Compresses a record on its own: a key frame, a version-2 delta, or an event (events are
/// small and varied, so no dictionary).
pub fn compress_alone(level: i32, record: &[u8]) -> std::io::Result<Vec<u8>> {
    compress(level, None, record)
}

/// zstd level: 3 is zstd's default; measured in `examples/frame_cost.rs`.
pub const DEFAULT_LEVEL: i32 = 3;
/// zstd level of key frames (`StoreConfig::key_level`).
pub const KEY_LEVEL: i32 = 9;
/// zstd level of a storm's deltas and keys (`StoreConfig::storm_level`).
pub const STORM_LEVEL: i32 = 1;

/// Compresses version-1 records. Holds the current chunk's key record and nothing of zstd's between
/// frames: each frame gets a fresh zstd context, and a delta references the key record as a
/// *prefix* (`ZSTD_CCtx_refPrefix`: zstd indexes it in place, copying nothing). A prefix is
/// byte-for-byte what a raw-content dictionary is to the decoder, so frames decode exactly as
/// before (`decompress_delta` with the key record).
///
/// Memory, measured with `examples/compressor_mem.rs` on 434 KB records (~600 processes): the
/// first compressor kept a `CDict` of the key (a copy of the record plus its tables) and a
/// context with its own copy of the tables, 2.4 MiB between frames, and built a third context
/// per key frame; this one holds the key record (0.4 MiB) and uses 0.9 MiB of zstd memory
/// while it compresses. Indexing the prefix again for every delta costs ~0.3 ms per frame.
#[derive(Debug)]
pub struct Compressor {
    level: i32,
    /// The current chunk's key record, or `None` before the first key frame.
    key: Option<Vec<u8>>,
}

impl Compressor {
    pub fn new(level: i32) -> Self {
        Compressor { level, key: None }
    }

    /// Compresses `record` as a key frame and keeps it as the prefix of following deltas.
    pub fn key(&mut self, record: Vec<u8>) -> std::io::Result<Vec<u8>> {
        // Dropped first: a key frame never needs the previous key.
        self.key = None;
        let compressed = compress(self.level, None, &record)?;
        self.key = Some(record);
        Ok(compressed)
    }

    /// Compresses `record` against the current key; `None` when there is no key yet.
    pub fn delta(&mut self, record: &[u8]) -> Option<std::io::Result<Vec<u8>>> {
        let key = self.key.as_deref()?;
        Some(compress(self.level, Some(key), record))
    }

    /// Forgets the key, so the next frame must be a key frame (a new segment or chunk).
    pub fn reset(&mut self) {
        self.key = None;
    }

    /// The length of the key record held: a version-1 delta's dictionary.
    pub fn key_len(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len)
    }

    /// The size of the key record held.
    pub fn key_bytes(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::capacity)
    }
}

/// Hash table bits for a record of `len` bytes (and a prefix of about as many): the smallest
/// table with at most 8 input bytes per entry, from 2^14 (zstd's own for level 3 and small
/// inputs; it shrinks tables further for tiny ones). zstd's own choice for a level-3
/// input this large is 2^17 (and half as many chain entries), for any size above 256 KiB.
/// Measured in `examples/compressor_mem.rs` (`COMPRESSOR_MEM_CUT` shortens the records): deltas
/// stay within 1 % of zstd's choice up to 8 bytes per entry and grow 7–10× past it (from 9
/// bytes per entry on), so the bound carries an eighth of headroom for records that grew since
/// their key.
pub fn table_log(len: usize) -> u32 {
    let len = len.saturating_add(len / 8).max(1);
    let ceil_log2 = usize::BITS - (len - 1).leading_zeros();
    ceil_log2.saturating_sub(3).clamp(14, 27)
}

fn zstd_error(code: usize) -> std::io::Error {
    std::io::Error::other(zstd::zstd_safe::get_error_name(code))
}

fn new_context<'a>() -> std::io::Result<zstd::zstd_safe::CCtx<'a>> {
    zstd::zstd_safe::CCtx::try_create().ok_or_else(|| std::io::Error::other("zstd: cannot create a context"))
}

fn compress(level: i32, prefix: Option<&[u8]>, record: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut cctx = new_context()?;
    if let Some(prefix) = prefix {
        cctx.ref_prefix(prefix).map_err(zstd_error)?;
    }
    compress_in(&mut cctx, level, prefix.map_or(0, <[u8]>::len), record)
}

/// Compresses `record` in `cctx`, whose prefix (of `prefix_len` bytes), if any, is set.
fn compress_in(
    cctx: &mut zstd::zstd_safe::CCtx<'_>,
    level: i32,
    prefix_len: usize,
    record: &[u8],
) -> std::io::Result<Vec<u8>> {
    use zstd::zstd_safe::CParameter;
    let tables = table_log(prefix_len.max(record.len()));
    cctx.set_parameter(CParameter::CompressionLevel(level)).map_err(zstd_error)?;
    cctx.set_parameter(CParameter::HashLog(tables)).map_err(zstd_error)?;
    cctx.set_parameter(CParameter::ChainLog(tables - 1)).map_err(zstd_error)?;
    let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(record.len()));
    // compress2 writes the content size into the frame header; `decompress` relies on it.
    cctx.compress2(&mut out, record).map_err(zstd_error)?;
    Ok(out)
}

/// Records at least this long, compressed alone, share one zstd context from frame to frame
/// ([`AloneCompressor`]).
pub const KEEP_CONTEXT_FROM: usize = 64 << 10;

/// Compresses records alone, keeping one zstd context from frame to frame while they are at
/// least [`KEEP_CONTEXT_FROM`] long: a fork storm's deltas, each listing ~1,000 ended
/// processes (~98 KB here), had a context made and freed for each, and its tables and buffers
/// (530 KB by zstd's count at level 3, above the agent's 128 KiB mmap threshold) mapped,
/// faulted in and cleared every second. A kept context's tables are reused. A shorter record
/// drops it and is compressed in a fresh context as before, and the writer drops it at any
/// frame it compresses another way (a key, a delta after the one before), so an agent holds
/// no zstd memory between its ordinary frames. The frames are byte for byte what a fresh
/// context writes (a test says so).
#[derive(Default)]
pub struct AloneCompressor {
    kept: Option<zstd::zstd_safe::CCtx<'static>>,
}

impl std::fmt::Debug for AloneCompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AloneCompressor").field("kept", &self.kept.is_some()).finish()
    }
}

impl AloneCompressor {
    /// [`compress_alone`], in the kept context where `record` is long enough.
    pub fn compress(&mut self, level: i32, record: &[u8]) -> std::io::Result<Vec<u8>> {
        if record.len() < KEEP_CONTEXT_FROM {
            self.kept = None;
            return compress(level, None, record);
        }
        let cctx = match &mut self.kept {
            Some(cctx) => {
                cctx.reset(zstd::zstd_safe::ResetDirective::SessionAndParameters).map_err(zstd_error)?;
                cctx
            }
            none => none.insert(new_context()?),
        };
        let out = compress_in(cctx, level, 0, record);
        if out.is_err() {
            self.kept = None;
        }
        out
    }

    /// Drops the kept context (a frame compressed another way: the storm is over).
    pub fn release(&mut self) {
        self.kept = None;
    }

    /// Whether a context is kept now.
    pub fn holds_context(&self) -> bool {
        self.kept.is_some()
    }

    /// The kept context's size as zstd counts it (its tables and buffers), 0 when none is kept.
    pub fn context_bytes(&self) -> usize {
        self.kept.as_ref().map_or(0, |c| c.sizeof())
    }
}

/// No record decompresses to more than this: ~185,000 processes at the ~720 bytes each that
/// real records take (434 KB for 600). A writer refuses to write a larger one, so every record
/// written can be read.
pub const MAX_RECORD_LEN: usize = 128 << 20;

/// A record compressed on its own may decompress to this many times its compressed size, and
/// always to [`MIN_RECORD_ALLOWANCE`]. The most measured: 158× for 10,000 idle processes alike
/// in everything but their pid (`sample(seq, 3000)` of the tests: 18×; varied processes: 7×),
/// so a real record stays 6× inside it. zstd's own format allows ~32,000× (an RLE block
/// of 128 KiB in 4 bytes), which let a 647-byte frame claim 20 MiB.
pub const MAX_EXPANSION: usize = 1024;

/// What any compressed record may decompress to, however small.
pub const MIN_RECORD_ALLOWANCE: usize = 64 << 10;

/// The most a record compressed into `compressed` bytes may decompress to: [`MAX_EXPANSION`]
/// times its size (at least [`MIN_RECORD_ALLOWANCE`]) plus, for a version-1 delta, four times
/// its dictionary (the key's record: a delta is a whole sample, of about its key's size), and
/// never more than [`MAX_RECORD_LEN`]. The reader checks a frame's claim against it before
/// allocating; the writer refuses a record that would not pass.
pub fn decompressed_cap(compressed: usize, dictionary: usize) -> usize {
    compressed
        .saturating_mul(MAX_EXPANSION)
        .max(MIN_RECORD_ALLOWANCE)
        .saturating_add(dictionary.saturating_mul(4))
        .min(MAX_RECORD_LEN)
}

pub fn decompress_key(payload: &[u8]) -> Result<Vec<u8>, CodecError> {
    decompress(payload, None, decompressed_cap(payload.len(), 0))
}

pub fn decompress_delta(payload: &[u8], key_record: &[u8]) -> Result<Vec<u8>, CodecError> {
    decompress(payload, Some(key_record), decompressed_cap(payload.len(), key_record.len()))
}

/// Decompresses a record into a buffer of the size its zstd frame header states, once that
/// size is known to be possible: the claim is all a hostile payload needs to cost memory, so it
/// is checked against `cap` ([`decompressed_cap`], [`chained_cap`]) first. Every proctor writer
/// states the size (`compress2`, and `zstd::bulk` before it); a payload that does not is not
/// ours.
fn decompress(payload: &[u8], dictionary: Option<&[u8]>, cap: usize) -> Result<Vec<u8>, CodecError> {
    let claimed = match zstd::zstd_safe::get_frame_content_size(payload) {
        Ok(Some(claimed)) => claimed,
        Ok(None) => return Err(CodecError::NoContentSize),
        Err(_) => return Err(CodecError::NotZstd),
    };
    let claimed = usize::try_from(claimed).ok().filter(|&n| n <= cap).ok_or(CodecError::Claims {
        claimed,
        compressed: payload.len(),
        cap,
    })?;
    let io_error = |code: usize| CodecError::Decompress(std::io::Error::other(zstd::zstd_safe::get_error_name(code)));
    let mut dctx = zstd::zstd_safe::DCtx::try_create()
        .ok_or_else(|| CodecError::Decompress(std::io::Error::other("zstd: cannot create a context")))?;
    if let Some(dictionary) = dictionary {
        // Referenced in place, as the compressor referenced it (a raw-content dictionary): a
        // loaded dictionary is copied first, 20–400 KB for every frame.
        dctx.ref_prefix(dictionary).map_err(io_error)?;
    }
    let mut out = Vec::with_capacity(claimed);
    dctx.decompress(&mut out, payload).map_err(io_error)?;
    if out.len() != claimed {
        return Err(CodecError::Decompress(std::io::Error::other("zstd: the record is not the size its frame states")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{compress_alone, decompress_key, table_log, AloneCompressor, KEEP_CONTEXT_FROM};

    /// A record of `len` bytes, varied enough that zstd's tables matter.
    fn record(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.extend_from_slice(format!("[{},{},\"comm{}\"],", x % 100_000, x % 7, x % 13).as_bytes());
        }
        out.truncate(len);
        out
    }

    /// A kept context writes each frame byte for byte as a fresh one does, whatever came before
    /// it (a larger record, another level); it is kept across large records and dropped at the
    /// first small one.
    #[test]
    fn a_kept_context_writes_what_a_fresh_one_does() {
        let mut alone = AloneCompressor::default();
        let sizes = [KEEP_CONTEXT_FROM, 300_000, KEEP_CONTEXT_FROM + 1, 90_000, 2_000_000, 70_000];
        for (i, &len) in sizes.iter().enumerate() {
            let r = record(len, i as u64);
            let level = if i == 3 { 9 } else { 3 };
            let kept = alone.compress(level, &r).expect("compress");
            assert!(alone.holds_context(), "{len}");
            assert_eq!(kept, compress_alone(level, &r).expect("compress"), "record {i} of {len} bytes");
            assert_eq!(decompress_key(&kept).expect("decompress"), r);
        }
        let small = record(KEEP_CONTEXT_FROM - 1, 9);
        assert_eq!(alone.compress(3, &small).expect("compress"), compress_alone(3, &small).expect("compress"));
        assert!(!alone.holds_context(), "a small record drops the context");
    }

    #[test]
    fn tables_hold_at_most_eight_bytes_per_entry_with_an_eighth_to_spare() {
        // 600 processes: 434 KB records, 2^16 entries (zstd's level 3 would take 2^17).
        assert_eq!(table_log(434_000), 16);
        // 466 KB · 9/8 = 524 KB is the most 2^16 entries take; then 2^17.
        assert_eq!(table_log(466_000), 16);
        assert_eq!(table_log(467_000), 17);
        assert_eq!(table_log(1_100_000), 18);
        for len in [0, 1, 1000, 100_000] {
            assert_eq!(table_log(len), 14, "{len}");
        }
        assert_eq!(table_log(usize::MAX), 27);
    }
}
