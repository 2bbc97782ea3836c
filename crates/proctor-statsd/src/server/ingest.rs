//! The receive path: a thread per datagram socket (and per TCP connection) that receives,
//! parses and aggregates its own input, with no queue and no other thread in between.
//!
//! `recvmmsg` leaves up to `batch_slots` datagrams in the reader's buffers; [`Ingest`] parses
//! them into per-shard batches (no allocation per line once its buffers have grown) and applies
//! each batch under its shard's lock, then publishes the tallies. While a thread parses, new
//! datagrams wait in the socket's receive buffer, whose overflow the kernel counts
//! (`kernel_dropped_packets`): that buffer is the only queue on the path. Lines from one socket
//! or connection are applied in order (gauge deltas depend on it). A UDP thread that drained its
//! socket pauses briefly before reading again ([`Pacer`]), so it wakes once per batch rather
//! than once per datagram or two.
//!
//! Why no hand-off: with a reader → parser → shard pipeline, most of the server's CPU on a
//! 2-core host went to waking threads and switching between them (futex wake-ups and context
//! switches; the profile is in `bench/statsd/README.md`), several times the cost of parsing and
//! aggregating: the hand-offs cost more than the parallelism they bought. More cores are used
//! with more UDP sockets on one port (`SO_REUSEPORT`, one thread each) and more shards.
//!
//! It does not bind, flush or decide what a line means (`parse` and `aggregate` do).

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use crate::net::{self, BatchReader};
use crate::parse::{LineParser, PacketCounts, ParseOptions};
use crate::server::shard::Router;
use crate::server::state::{unix_seconds, Shared};
use crate::shutdown::Shutdown;

/// Datagrams per `recvmmsg`, bytes per datagram slot, and the longest pause after draining.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchLimits {
    pub(crate) slots: usize,
    pub(crate) slot_bytes: usize,
    pub(crate) max_pause: Duration,
}

/// The arrival rate a pause must survive without filling more than a quarter of the receive
/// buffer, in the kernel's accounting: 1 GiB/s is 1.3 M small datagrams a second at 832 bytes
/// of true size each (loopback), more than one sending core produces.
const BURST_BYTES_PER_SECOND: f64 = (1u64 << 30) as f64;

/// Below this a pause saves too little to be worth a timer (the default timer slack is 50 µs).
const MIN_PAUSE: Duration = Duration::from_micros(50);

/// How much longer than asked a short sleep lasts: the 50 µs default timer slack plus the
/// wake-up, ~80 µs at the median on the 2-core VM the benchmark runs on.
const SLEEP_OVERSHOOT: Duration = Duration::from_micros(100);

/// How long an ingest thread pauses after a read that drained its socket.
///
/// Waking a thread costs more than receiving a datagram (several µs on a virtual machine):
/// without a pause, a reader faster than its senders wakes for every datagram or two. With one,
/// datagrams gather in the receive buffer and each wake-up reads full batches. The pause is
/// bounded twice: by the buffer, so a burst at `BURST_BYTES_PER_SECOND` fills at most a quarter
/// of it even if the sleep overshoots by `SLEEP_OVERSHOOT`, and by what the last pause found: a
/// quarter full halves the next pause, less than a sixteenth lets it grow back. A buffer too
/// small for `MIN_PAUSE` (below ~640 KiB of kernel charge, e.g. `net.core.rmem_max` at its
/// usual 208 KiB) turns pausing off. Pure: the caller sleeps and reads the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pacer {
    pause: Duration,
    max: Duration,
}

impl Pacer {
    /// For a socket whose receive buffer holds `limit_bytes` (the kernel's charge), pausing at
    /// most `max_pause`.
    pub(crate) fn new(limit_bytes: u64, max_pause: Duration) -> Pacer {
        let quarter = Duration::from_secs_f64(limit_bytes as f64 / 4.0 / BURST_BYTES_PER_SECOND);
        let max = max_pause.min(quarter.saturating_sub(SLEEP_OVERSHOOT));
        if max < MIN_PAUSE {
            return Pacer::off();
        }
        Pacer { pause: max, max }
    }

    /// Never pauses.
    pub(crate) fn off() -> Pacer {
        Pacer { pause: Duration::ZERO, max: Duration::ZERO }
    }

    pub(crate) fn pause(&self) -> Duration {
        self.pause
    }

    /// After a pause, the receive queue was charged `used_bytes` of `limit_bytes`.
    pub(crate) fn observe(&mut self, used_bytes: u64, limit_bytes: u64) {
        if self.max.is_zero() {
            return;
        }
        if used_bytes.saturating_mul(4) > limit_bytes {
            self.pause = (self.pause / 2).max(MIN_PAUSE);
        } else if used_bytes.saturating_mul(16) < limit_bytes {
            self.pause = (self.pause * 2).min(self.max);
        }
    }
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

/// Receives, parses and aggregates one datagram socket's traffic until shutdown; with `pace`,
/// pauses after draining the socket (see [`Pacer`]).
pub(crate) fn datagram_loop(
    socket: &impl AsRawFd,
    limits: BatchLimits,
    pace: bool,
    options: ParseOptions,
    shared: &Shared,
    shutdown: &Shutdown,
) {
    let fd = socket.as_raw_fd();
    let mut reader = BatchReader::new(fd, limits.slots, limits.slot_bytes);
    let mut pacer = match net::receive_queue(fd) {
        Ok(queue) if pace => Pacer::new(queue.limit_bytes, limits.max_pause),
        _ => Pacer::off(),
    };
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
        // A read that did not fill every slot drained the queue: pause so the next read finds a
        // batch, rather than wake for every datagram or two.
        if info.packets < limits.slots && !pacer.pause().is_zero() {
            thread::sleep(pacer.pause());
            if let Ok(queue) = net::receive_queue(fd) {
                pacer.observe(queue.used_bytes, queue.limit_bytes);
            }
        }
        // Datagrams still queued in the kernel at shutdown are not read (a restart loses them,
        // as it would with any server).
        if shutdown.is_triggered() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Pacer, MIN_PAUSE};

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_pause_is_bounded_by_the_receive_buffer() {
        // 16 MiB (8 MiB requested, doubled by the kernel): a quarter lasts 4 ms at 1 GiB/s.
        assert_eq!(Pacer::new(16 << 20, MS).pause(), MS);
        // 1 MiB: a quarter lasts 244 µs, less the sleep's overshoot.
        let small = Pacer::new(1 << 20, MS).pause();
        assert!(small > Duration::from_micros(140) && small < Duration::from_micros(150), "{small:?}");
        // 416 KiB (the usual net.core.rmem_max, doubled): a quarter lasts ~100 µs, all of it
        // overshoot: too small to pause at all.
        assert_eq!(Pacer::new(425_984, MS), Pacer::off());
        assert_eq!(Pacer::new(16 << 20, Duration::ZERO), Pacer::off());
    }

    #[test]
    fn a_filling_buffer_halves_the_pause_and_an_empty_one_lets_it_grow_back() {
        let limit = 16 << 20;
        let mut pacer = Pacer::new(limit, MS);
        pacer.observe(limit / 2, limit);
        assert_eq!(pacer.pause(), MS / 2);
        pacer.observe(limit / 8, limit);
        assert_eq!(pacer.pause(), MS / 2, "between a sixteenth and a quarter: unchanged");
        for _ in 0..20 {
            pacer.observe(limit, limit);
        }
        assert_eq!(pacer.pause(), MIN_PAUSE, "never below the minimum while pacing");
        for _ in 0..20 {
            pacer.observe(0, limit);
        }
        assert_eq!(pacer.pause(), MS, "never above the maximum");
        let mut off = Pacer::off();
        off.observe(0, limit);
        assert_eq!(off.pause(), Duration::ZERO);
    }
}
