//! Records: a `Sample` as versioned, self-describing bytes, and their compression. Pure apart
//! from zstd's own allocations; no files.
//!
//! A record is the sample as JSON (format version [`RECORD_VERSION`], carried in the frame
//! header). JSON rather than a positional encoding because it names every field: a build that
//! added a field reads old records (new fields must be `Option` or `#[serde(default)]`), and an
//! old build reading new records ignores fields it does not know. The names cost nothing after
//! compression, because of how frames are compressed:
//!
//! Frames come in chunks. The first frame of a chunk (a *key* frame) is compressed on its own;
//! every later frame is compressed with the key frame's raw record as a zstd raw-content
//! dictionary. Consecutive samples of the same host are nearly identical text (the same pids,
//! names, command lines, most counters unchanged), so a delta frame costs roughly what changed.
//! Decoding any frame needs at most two decompressions (its key, then itself), never a chain.
//! The writer starts a new chunk early when a delta comes out larger than a quarter of its key:
//! a run's first sample has no command lines yet (the cmdline worker reads them after), and a
//! key without them makes every delta of its chunk ~20× larger.

use proctor_model::Sample;

/// The record format this build writes. Version 1: the JSON serialization of `Sample`.
pub const RECORD_VERSION: u8 = 1;

/// Errors turning bytes back into a sample.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("record version {0} is newer than this build reads ({RECORD_VERSION})")]
    UnknownVersion(u8),
    #[error("decompression failed: {0}")]
    Decompress(std::io::Error),
    #[error("record does not parse: {0}")]
    Parse(serde_json::Error),
}

pub fn encode_record(sample: &Sample) -> Vec<u8> {
    // Serializing plain structs and maps with string keys cannot fail.
    serde_json::to_vec(sample).expect("a Sample always serializes to JSON")
}

pub fn decode_record(version: u8, bytes: &[u8]) -> Result<Sample, CodecError> {
    if version != RECORD_VERSION {
        return Err(CodecError::UnknownVersion(version));
    }
    serde_json::from_slice(bytes).map_err(CodecError::Parse)
}

/// zstd level: 3 is zstd's default; measured in `examples/frame_cost.rs`.
pub const DEFAULT_LEVEL: i32 = 3;

/// Compresses records, keeping the current chunk's dictionary loaded between frames (loading a
/// few hundred kilobytes of dictionary is most of the cost of a small frame).
pub struct Compressor {
    level: i32,
    /// Compressor loaded with the current key record, or `None` before the first key frame.
    delta: Option<zstd::bulk::Compressor<'static>>,
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor").field("level", &self.level).field("has_key", &self.delta.is_some()).finish()
    }
}

impl Compressor {
    pub fn new(level: i32) -> Self {
        Compressor { level, delta: None }
    }

    /// Compresses `record` as a key frame and makes it the dictionary for following deltas.
    pub fn key(&mut self, record: &[u8]) -> std::io::Result<Vec<u8>> {
        let compressed = zstd::bulk::compress(record, self.level)?;
        self.delta = Some(zstd::bulk::Compressor::with_dictionary(self.level, record)?);
        Ok(compressed)
    }

    /// Compresses `record` against the current key; `None` when there is no key yet.
    pub fn delta(&mut self, record: &[u8]) -> Option<std::io::Result<Vec<u8>>> {
        self.delta.as_mut().map(|c| c.compress(record))
    }

    /// Forgets the key, so the next frame must be a key frame (a new segment or chunk).
    pub fn reset(&mut self) {
        self.delta = None;
    }
}

/// Upper bound on a decompressed record; a corrupt size cannot make us allocate more.
pub const MAX_RECORD_LEN: usize = 1 << 30;

pub fn decompress_key(payload: &[u8]) -> Result<Vec<u8>, CodecError> {
    decompress(payload, None)
}

pub fn decompress_delta(payload: &[u8], key_record: &[u8]) -> Result<Vec<u8>, CodecError> {
    decompress(payload, Some(key_record))
}

fn decompress(payload: &[u8], dictionary: Option<&[u8]>) -> Result<Vec<u8>, CodecError> {
    let mut decompressor = match dictionary {
        Some(dict) => zstd::bulk::Decompressor::with_dictionary(dict),
        None => zstd::bulk::Decompressor::new(),
    }
    .map_err(CodecError::Decompress)?;
    // zstd::bulk::compress records the content size in the frame header.
    let capacity = zstd::zstd_safe::get_frame_content_size(payload)
        .ok()
        .flatten()
        .map_or(MAX_RECORD_LEN, |n| (n as usize).min(MAX_RECORD_LEN));
    decompressor.decompress(payload, capacity).map_err(CodecError::Decompress)
}
