//! The receive path: a thread per datagram socket (and per TCP connection) that receives,
//! parses and aggregates its own input, with no queue and no other thread in between.
//!
//! `recvmmsg` leaves up to `batch_slots` datagrams in the reader's buffers; [`Ingest`] parses
//! them into per-shard batches (no allocation per line once its buffers have grown) and applies
//! each batch under its shard's lock, then publishes the tallies. While a thread parses, new
//! datagrams wait in the socket's receive buffer, whose overflow the kernel counts
//! (`kernel_dropped_packets`): that buffer is the only queue on the path. Lines from one socket or
//! connection are applied in order (gauge deltas depend on it).
//!
//! Why no hand-off: with a reader → parser → shard pipeline, 55 % of the server's CPU on a
//! 2-core host went to waking threads and switching between them (futex wake-ups and context
//! switches, `perf record` in `bench/statsd/README.md`), several times the cost of parsing and
//! aggregating; the hand-offs cost more than the parallelism they bought. More cores are used
//! with more UDP sockets on one port (`SO_REUSEPORT`, one thread each) and more shards.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use crate::net::BatchReader;
use crate::parse::{LineParser, PacketCounts, ParseOptions};
use crate::server::shard::Router;
use crate::server::state::{unix_seconds, Shared};
use crate::shutdown::Shutdown;

/// Datagrams per `recvmmsg` and bytes per datagram slot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchLimits {
    pub(crate) slots: usize,
    pub(crate) slot_bytes: usize,
}

/// One ingest thread's parser, its per-shard batches, and the tallies of what it parsed but
/// has not applied yet.
#[derive(Debug)]
pub(crate) struct Ingest {
    parser: LineParser,
    router: Router,
    counts: PacketCounts,
    packets: u64,
    bytes: u64,
}

impl Ingest {
    pub(crate) fn new(options: ParseOptions, shards: usize) -> Self {
        Ingest {
            parser: LineParser::new(options),
            router: Router::new(shards),
            counts: PacketCounts::default(),
            packets: 0,
            bytes: 0,
        }
    }

    /// Parses one packet (a datagram, or a TCP client's complete lines).
    pub(crate) fn packet(&mut self, packet: &[u8]) {
        let counts = self.parser.parse_packet(packet, &mut self.router);
        self.counts.add(&counts);
        self.packets += 1;
        self.bytes += packet.len() as u64;
    }

    /// Applies what was parsed to the shards, then publishes the tallies of the packets it came
    /// from.
    pub(crate) fn commit(&mut self, shared: &Shared) {
        self.router.apply(&shared.shards);
        if self.packets == 0 {
            return;
        }
        // Counted after the metrics were applied, so whoever sees these counts finds the metrics
        // in the shards' current window.
        let counters = &shared.counters;
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

/// Receives, parses and aggregates one datagram socket's traffic until shutdown.
pub(crate) fn datagram_loop(
    socket: &impl AsRawFd,
    limits: BatchLimits,
    options: ParseOptions,
    shared: &Shared,
    shutdown: &Shutdown,
) {
    let mut reader = BatchReader::new(socket.as_raw_fd(), limits.slots, limits.slot_bytes);
    let mut ingest = Ingest::new(options, shared.shards.len());
    let counters = &shared.counters;
    loop {
        let info = match reader.receive(true) {
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
        if info.truncated > 0 {
            counters.truncated_packets.fetch_add(info.truncated as u64, Ordering::Relaxed);
        }
        for packet in reader.packets() {
            ingest.packet(packet);
        }
        ingest.commit(shared);
        // Datagrams still queued in the kernel at shutdown are not read (a restart loses them,
        // as it would with any server).
        if shutdown.is_triggered() {
            return;
        }
    }
}
