//! The receive path for datagrams: a reader thread per socket copies `recvmmsg` batches and
//! hands them to its parser thread, which parses them and routes each metric to its shard.
//!
//! The reader never parses: when its parser is behind it waits, leaving the backlog in the
//! socket's receive buffer, whose overflow the kernel counts. The parser never aggregates: it
//! sends per-shard batches and counts what a full shard queue refused.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread;
use std::time::Duration;

use crate::net::{BatchReader, RawBatch};
use crate::parse::{LineParser, PacketCounts, ParseOptions};
use crate::server::shard::{Router, ShardBatch, ShardMsg};
use crate::server::state::{unix_seconds, Shared};
use crate::shutdown::Shutdown;

#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchLimits {
    pub(crate) slots: usize,
    pub(crate) slot_bytes: usize,
    pub(crate) max_packets: usize,
}

/// Past this many bytes a busy reader hands its batch on even if more datagrams are queued.
const BATCH_MAX_BYTES: usize = 256 << 10;

pub(crate) fn datagram_loop(
    socket: &impl AsRawFd,
    limits: BatchLimits,
    ingress: &SyncSender<RawBatch>,
    shared: &Shared,
    shutdown: &Shutdown,
) {
    let mut reader = BatchReader::new(socket.as_raw_fd(), limits.slots, limits.slot_bytes);
    let counters = &shared.counters;
    loop {
        let mut batch = RawBatch::with_capacity(16 << 10, limits.slots);
        let mut info = match reader.read(&mut batch, true) {
            Ok(info) => info,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                if shutdown.is_triggered() {
                    return;
                }
                // A transient error (ENOMEM): do not spin.
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if info.packets == 0 {
            // Zero datagrams means the socket was shut down for reading.
            if shutdown.is_triggered() {
                return;
            }
            continue;
        }
        // While more is already queued, keep reading without waiting: under load this hands
        // the parser a few large batches instead of many small ones, each of which would wake it.
        while batch.len() < limits.max_packets && batch.data.len() < BATCH_MAX_BYTES {
            match reader.read(&mut batch, false) {
                Ok(more) if more.packets > 0 => info.truncated += more.truncated,
                _ => break,
            }
        }
        if info.truncated > 0 {
            counters.truncated_packets.fetch_add(info.truncated as u64, Ordering::Relaxed);
        }
        let bytes = batch.data.len() as u64;
        let queued = shared.ingress_bytes.load(Ordering::Relaxed);
        if queued + bytes > shared.ingress_max_bytes {
            // Only huge datagrams in a long queue get here: the byte bound is the memory bound.
            counters.ingress_dropped_packets.fetch_add(batch.len() as u64, Ordering::Relaxed);
        } else {
            shared.ingress_bytes.fetch_add(bytes, Ordering::Relaxed);
            // A full queue makes the reader wait rather than drop: the socket's receive buffer
            // then absorbs the burst, and what overflows it is counted by the kernel
            // (`kernel_dropped_packets`). Dropping here instead would throw that buffer away.
            if ingress.send(batch).is_err() {
                shared.ingress_bytes.fetch_sub(bytes, Ordering::Relaxed);
                return;
            }
        }
        // The batch in hand is handed on first; datagrams still queued in the kernel at
        // shutdown are not read (a restart loses them, as it would with any server).
        if shutdown.is_triggered() {
            return;
        }
    }
}

/// Parsed metrics wait in per-shard batches until this many are pending, or until the parser
/// runs out of input; fewer, larger hand-offs mean fewer shard wake-ups.
const SHARD_BATCH_ITEMS: usize = 4096;

pub(crate) fn parser_loop(receiver: Receiver<RawBatch>, shared: &Shared, options: ParseOptions) {
    let mut parser = LineParser::new(options);
    let mut pending = Pending {
        router: Router { batches: (0..shared.shards.len()).map(|_| ShardBatch::default()).collect() },
        counts: PacketCounts::default(),
        packets: 0,
        bytes: 0,
    };
    loop {
        let batch = match receiver.try_recv() {
            Ok(batch) => batch,
            Err(mpsc::TryRecvError::Empty) => {
                // Idle: hand everything on before blocking, so nothing waits on more traffic.
                pending.hand_on(shared);
                match receiver.recv() {
                    Ok(batch) => batch,
                    // Every reader holding a sender has ended.
                    Err(_) => break,
                }
            }
            Err(mpsc::TryRecvError::Disconnected) => break,
        };
        for packet in batch.packets() {
            let counts = parser.parse_packet(packet, &mut pending.router);
            pending.counts.add(&counts);
        }
        let bytes = batch.data.len() as u64;
        shared.ingress_bytes.fetch_sub(bytes, Ordering::Relaxed);
        pending.packets += batch.len() as u64;
        pending.bytes += bytes;
        if pending.router.batches.iter().any(|b| b.len() >= SHARD_BATCH_ITEMS) {
            pending.hand_on(shared);
        }
    }
    pending.hand_on(shared);
}

/// What a parser has parsed but not yet handed to the shards, with the tallies of the packets
/// it came from.
struct Pending {
    router: Router,
    counts: PacketCounts,
    packets: u64,
    bytes: u64,
}

impl Pending {
    /// Sends the pending shard batches, then publishes the counts of the packets they came from.
    fn hand_on(&mut self, shared: &Shared) {
        let counters = &shared.counters;
        for (shard, pending) in self.router.batches.iter_mut().enumerate() {
            if pending.is_empty() {
                continue;
            }
            let full = std::mem::take(pending);
            let items = full.len() as u64;
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
                shared.shards[shard].try_send(ShardMsg::Batch(full))
            {
                counters.shard_dropped_metrics.fetch_add(items, Ordering::Relaxed);
            }
        }
        if self.packets == 0 {
            return;
        }
        // Counted after the metrics were queued, so whoever sees these counts will find the
        // metrics in the shards' next window.
        counters.packets.fetch_add(self.packets, Ordering::Relaxed);
        counters.bytes.fetch_add(self.bytes, Ordering::Relaxed);
        counters.lines.fetch_add(self.counts.lines, Ordering::Relaxed);
        counters.metrics.fetch_add(self.counts.metrics, Ordering::Relaxed);
        for (slot, count) in self.counts.bad.iter().enumerate() {
            if *count > 0 {
                counters.bad[slot].fetch_add(*count, Ordering::Relaxed);
            }
        }
        counters.last_msg_seen.store(unix_seconds(), Ordering::Relaxed);
        self.counts = PacketCounts::default();
        self.packets = 0;
        self.bytes = 0;
    }
}
