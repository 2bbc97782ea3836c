//! The on-disk frame: a fixed 24-byte header with a CRC, then the payload. Pure: bytes in,
//! bytes out; files live in `segment`.
//!
//! ```text
//! segment file = SEGMENT_MAGIC (8 bytes) frame*
//! frame        = magic u32 | payload_len u32 | unix_ns u64 | kind u8 | version u8 | 0 u16
//!                | crc32 u32 (over the 20 header bytes before it and the payload) | payload
//! ```
//! All integers little-endian. The header carries the sample's wall time so that a time query
//! can skip frames by reading headers only, and the CRC covers the header too, so a torn or
//! bit-flipped length is caught before it is trusted.

/// First bytes of every segment file; the digit is the layout version of the file itself.
pub const SEGMENT_MAGIC: &[u8; 8] = b"PRCTSEG1";
/// First bytes of every frame ("PRFR").
pub const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"PRFR");
pub const HEADER_LEN: usize = 24;
/// No sample is anywhere near this; a larger length is corruption, not a frame.
pub const MAX_PAYLOAD_LEN: u32 = 256 << 20;

/// What the payload holds and how it was compressed. Kinds 0 and 1 are samples (record
/// version 1 in the first store, then 2, now 3; see `codec`); later kinds are other records, each compressed on its
/// own and versioned by the header's version byte. A build that does not know a kind treats
/// the frame as corrupt, so new kinds go into streams of their own (see `lib.rs`), where older
/// builds never look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// A sample compressed on its own; starts a chunk.
    Key = 0,
    /// A sample as a difference: version 1, its whole record compressed with the chunk's key
    /// record as the dictionary; version 2, a `delta` record against its base, compressed alone;
    /// version 3, the same record compressed with the previous delta's as prefix (`codec`).
    Delta = 1,
    /// A batch of probe results (`proctor_model::ProbeBatch`), compressed on its own.
    Probe = 2,
    /// One statsd flush (`proctor_model::StatsdFlush`), compressed on its own.
    Statsd = 3,
    /// A block of rollup rows (`proctor_model::RollupBlock`, `crate::rollup`), compressed on
    /// its own.
    Rollup = 4,
}

impl FrameKind {
    /// A sample (key or delta), as opposed to an event record.
    pub fn is_sample(self) -> bool {
        matches!(self, FrameKind::Key | FrameKind::Delta)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub payload_len: u32,
    pub unix_ns: u64,
    pub kind: FrameKind,
    /// The record format version (see `codec`).
    pub version: u8,
    pub crc: u32,
}

/// Why the bytes at an offset are not a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameDefect {
    /// The file ends inside the header or the payload: a write that did not finish.
    Torn,
    /// Wrong magic, an impossible length or kind, or a CRC mismatch.
    Corrupt(&'static str),
}

pub fn encode_header(unix_ns: u64, kind: FrameKind, version: u8, payload: &[u8]) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[0..4].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
    // Payloads are bounded by MAX_PAYLOAD_LEN well before u32 runs out; the writer checks.
    header[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[8..16].copy_from_slice(&unix_ns.to_le_bytes());
    header[16] = kind as u8;
    header[17] = version;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header[0..20]);
    hasher.update(payload);
    header[20..24].copy_from_slice(&hasher.finalize().to_le_bytes());
    header
}

/// Parses a header without looking at the payload (the CRC is checked by [`check_payload`]).
pub fn decode_header(bytes: &[u8]) -> Result<FrameHeader, FrameDefect> {
    if bytes.len() < HEADER_LEN {
        return Err(FrameDefect::Torn);
    }
    let u32_at = |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    if u32_at(0) != FRAME_MAGIC {
        return Err(FrameDefect::Corrupt("bad frame magic"));
    }
    let payload_len = u32_at(4);
    if payload_len > MAX_PAYLOAD_LEN {
        return Err(FrameDefect::Corrupt("impossible frame length"));
    }
    let mut ns = [0u8; 8];
    ns.copy_from_slice(&bytes[8..16]);
    let kind = match bytes[16] {
        0 => FrameKind::Key,
        1 => FrameKind::Delta,
        2 => FrameKind::Probe,
        3 => FrameKind::Statsd,
        4 => FrameKind::Rollup,
        _ => return Err(FrameDefect::Corrupt("unknown frame kind")),
    };
    Ok(FrameHeader { payload_len, unix_ns: u64::from_le_bytes(ns), kind, version: bytes[17], crc: u32_at(20) })
}

/// Checks the CRC of a whole frame (`header_bytes` as read, the payload that followed).
pub fn check_payload(header_bytes: &[u8], header: &FrameHeader, payload: &[u8]) -> Result<(), FrameDefect> {
    if payload.len() < header.payload_len as usize {
        return Err(FrameDefect::Torn);
    }
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header_bytes[0..20]);
    hasher.update(&payload[..header.payload_len as usize]);
    if hasher.finalize() != header.crc {
        return Err(FrameDefect::Corrupt("crc mismatch"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut bytes = encode_header(42, FrameKind::Delta, 1, payload).to_vec();
        bytes.extend_from_slice(payload);
        bytes
    }

    #[test]
    fn header_round_trips() {
        let bytes = frame(b"hello");
        let header = decode_header(&bytes).expect("header");
        assert_eq!(header.payload_len, 5);
        assert_eq!(header.unix_ns, 42);
        assert_eq!(header.kind, FrameKind::Delta);
        assert_eq!(header.version, 1);
        assert_eq!(check_payload(&bytes, &header, &bytes[HEADER_LEN..]), Ok(()));
    }

    #[test]
    fn every_single_bit_flip_is_caught() {
        let bytes = frame(b"some payload bytes");
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let verdict = decode_header(&flipped).and_then(|h| check_payload(&flipped, &h, &flipped[HEADER_LEN..]));
            assert!(verdict.is_err(), "flip of bit {bit} went unnoticed");
        }
    }

    #[test]
    fn every_truncation_is_torn_or_corrupt() {
        let bytes = frame(b"payload");
        for len in 0..bytes.len() {
            let cut = &bytes[..len];
            let verdict = decode_header(cut).and_then(|h| check_payload(cut, &h, cut.get(HEADER_LEN..).unwrap_or(&[])));
            assert_eq!(verdict, Err(FrameDefect::Torn), "cut at {len}");
        }
    }
}
