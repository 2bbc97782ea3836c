//! The workload's operations as they cross the pipe to the driver: batches of fixed-size
//! records, each batch written in one `write` of at most `PIPE_BUF` bytes, so batches from many
//! children sharing one pipe never interleave (POSIX makes such writes atomic).
//!
//! Pure: bytes in, operations out, and back. No clock and no I/O; the workload writes the
//! bytes, the driver reads them.

/// What a pipe write may hold and stay atomic (Linux's `PIPE_BUF`).
pub const PIPE_BUF: usize = 4096;
const HEADER: usize = 8;
const RECORD: usize = 32;
/// Records in a full batch: (4096 − 8) / 32.
pub const BATCH_MAX: usize = (PIPE_BUF - HEADER) / RECORD;

/// One timed operation of the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    /// When the fixed-rate schedule meant it to start, `CLOCK_MONOTONIC` nanoseconds (the same
    /// clock in every process of the host, so the driver can place it in a round).
    pub intended_ns: u64,
    /// From the intended start to its end: what the target's user waits, a late start included,
    /// so a stall is not hidden by the operations it kept from starting.
    pub latency_ns: u64,
    /// From its actual start to its end: the time the operation itself was blocked or busy.
    pub service_ns: u64,
    /// Whether the operation went to sleep (a voluntary context switch, `ru_nvcsw`): a
    /// pagefault operation sleeps when it waits for its mmap lock, never when it is merely
    /// preempted (that switch is involuntary), so this tells lock waits from a busy machine.
    /// `false` where the workload cannot tell (http, a URL, a command).
    pub slept: bool,
}

/// Appends a batch of `ops` (at most [`BATCH_MAX`]) from process `pid` to `out`. A batch
/// of no operations says "this process is running" (children send one when they start).
pub fn encode(pid: u32, ops: &[Op], out: &mut Vec<u8>) {
    debug_assert!(ops.len() <= BATCH_MAX);
    out.extend_from_slice(&pid.to_le_bytes());
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        out.extend_from_slice(&op.intended_ns.to_le_bytes());
        out.extend_from_slice(&op.latency_ns.to_le_bytes());
        out.extend_from_slice(&op.service_ns.to_le_bytes());
        out.extend_from_slice(&u64::from(op.slept).to_le_bytes());
    }
}

/// Reads batches out of a byte stream that arrives in pieces of any size.
#[derive(Debug, Default)]
pub struct Decoder {
    pending: Vec<u8>,
}

/// A stream that cannot be batches: a count larger than a batch holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadBatch {
    pub count: u32,
}

impl std::fmt::Display for BadBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a batch of {} operations (at most {BATCH_MAX} fit one)", self.count)
    }
}

impl std::error::Error for BadBatch {}

impl Decoder {
    /// Adds `bytes` and calls `each(pid, ops)` for every batch now complete.
    pub fn feed(&mut self, bytes: &[u8], mut each: impl FnMut(u32, &[Op])) -> Result<(), BadBatch> {
        self.pending.extend_from_slice(bytes);
        let mut at = 0;
        let mut ops = Vec::with_capacity(BATCH_MAX);
        while self.pending.len() - at >= HEADER {
            let word = |i: usize| u32::from_le_bytes(self.pending[i..i + 4].try_into().expect("four bytes"));
            let (pid, count) = (word(at), word(at + 4));
            if count as usize > BATCH_MAX {
                return Err(BadBatch { count });
            }
            let size = HEADER + count as usize * RECORD;
            if self.pending.len() - at < size {
                break;
            }
            ops.clear();
            for record in self.pending[at + HEADER..at + size].chunks_exact(RECORD) {
                let field = |i: usize| u64::from_le_bytes(record[i..i + 8].try_into().expect("eight bytes"));
                ops.push(Op {
                    intended_ns: field(0),
                    latency_ns: field(8),
                    service_ns: field(16),
                    slept: field(24) != 0,
                });
            }
            each(pid, &ops);
            at += size;
        }
        self.pending.drain(..at);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_batch_fits_one_atomic_write() {
        let ops: Vec<Op> = (0..BATCH_MAX as u64)
            .map(|i| Op { intended_ns: i, latency_ns: i * 2, service_ns: i * 3, slept: i % 2 == 0 })
            .collect();
        let mut bytes = Vec::new();
        encode(7, &ops, &mut bytes);
        assert!(bytes.len() <= PIPE_BUF, "{}", bytes.len());
        assert!(bytes.len() + RECORD > PIPE_BUF);
    }

    #[test]
    fn batches_come_back_whatever_the_pieces() {
        let first = [Op { intended_ns: 1, latency_ns: 2, service_ns: 3, slept: true }];
        let second = [Op { intended_ns: u64::MAX, latency_ns: 5, service_ns: 6, slept: false }; 3];
        let mut bytes = Vec::new();
        encode(10, &first, &mut bytes);
        encode(11, &[], &mut bytes);
        encode(12, &second, &mut bytes);
        for piece in [1, 5, 7, 100, bytes.len()] {
            let mut decoder = Decoder::default();
            let mut got = Vec::new();
            for chunk in bytes.chunks(piece) {
                decoder.feed(chunk, |pid, ops| got.push((pid, ops.to_vec()))).expect("batches");
            }
            assert_eq!(got, vec![(10, first.to_vec()), (11, vec![]), (12, second.to_vec())], "pieces of {piece}");
        }
    }

    #[test]
    fn a_count_no_batch_can_hold_is_refused() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&10_000u32.to_le_bytes());
        let error = Decoder::default().feed(&bytes, |_, _| {}).expect_err("bad");
        assert_eq!(error, BadBatch { count: 10_000 });
    }
}
