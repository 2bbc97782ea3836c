//! The statsd server: threads, bounded channels between them, the flush clock, and the data
//! `proctor serve` will read (self metrics, the last flush).
//!
//! ```text
//!  UDP socket ─► reader thread ─┐ (bounded, drops counted)
//!  UDP socket ─► reader thread ─┼─► parser thread per reader ─► shard threads (by key hash)
//!  Unix dgram ─► reader thread ─┤                                   ▲
//!  TCP conns  ─► conn threads  ─┘                     flush thread ─┘─► backends
//! ```
//!
//! A reader thread only receives: it copies a `recvmmsg` batch and hands it on. When its
//! parser is behind and the queue is full it waits, leaving the backlog in the socket's receive
//! buffer (8 MiB requested), whose overflow the kernel counts; the reader never parses. Each parser owns one reader's
//! stream, which keeps lines from one sender in order (gauge deltas depend on order), and routes
//! each metric to the shard that owns its key. Shards own disjoint keys; the flush thread asks
//! each for its window over the same channel, so a flush sees everything queued before it.
//!
//! The server takes sockets already bound and a [`Shutdown`]; it binds nothing itself and does
//! not install signal handlers, so a host process (`proctor serve`) can embed it.

use std::io::{self, BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::admin;
use crate::aggregate::{Aggregator, AggregatorConfig, AggregatorDrops, DumpValue, MetricType, ShardWindow};
use crate::backend::Backend;
use crate::flush::{self, FlushConfig, FlushData};
use crate::graphite::GraphiteCounters;
use crate::net::{self, BatchReader, RawBatch, RcvbufOutcome};
use crate::parse::{BadLine, LineParser, Metric, MetricSink, MetricValue, ParseOptions};

/// A shutdown signal shared by the server's threads and its owner.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    inner: Arc<(Mutex<bool>, Condvar)>,
}

impl Shutdown {
    pub fn new() -> Self {
        Shutdown::default()
    }

    pub fn trigger(&self) {
        let (lock, condvar) = &*self.inner;
        *lock.lock().unwrap_or_else(PoisonError::into_inner) = true;
        condvar.notify_all();
    }

    pub fn is_triggered(&self) -> bool {
        *self.inner.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits up to `timeout`; true when shutdown was triggered.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let (lock, condvar) = &*self.inner;
        let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let (guard, _) =
            condvar.wait_timeout_while(guard, timeout, |triggered| !*triggered).unwrap_or_else(PoisonError::into_inner);
        *guard
    }
}

/// Sockets the server reads, bound by the caller.
#[derive(Debug, Default)]
pub struct Listeners {
    /// One or more UDP sockets (several share a port with `SO_REUSEPORT`).
    pub udp: Vec<UdpSocket>,
    pub tcp: Option<TcpListener>,
    pub unix: Option<UnixDatagram>,
    pub admin: Option<TcpListener>,
}

/// How the server runs; see the field docs for defaults.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub flush: FlushConfig,
    /// Limits over the whole server; each shard gets an equal share.
    pub limits: AggregatorConfig,
    /// Aggregator threads; keys are spread over them by hash. Default 1.
    pub shards: usize,
    pub parse: ParseOptions,
    /// Etsy's `prefixStats`: the namespace of `packets_received` and friends.
    pub prefix_stats: String,
    /// Batches a reader may queue ahead of its parser before dropping. Default 1024.
    pub ingress_queue_batches: usize,
    /// Bytes of received datagrams queued ahead of the parsers, over all readers; past it a
    /// reader drops (and counts) instead of queueing. Default 64 MiB. This, not the batch
    /// count, bounds the receive path's memory.
    pub ingress_max_bytes: usize,
    /// A busy reader keeps reading without waiting until a batch holds this many datagrams or
    /// 256 KiB, so it hands on fewer, larger batches (fewer thread wake-ups). Default 512.
    pub batch_max_packets: usize,
    /// Batches a parser may queue ahead of a shard before dropping. Default 1024.
    pub shard_queue_batches: usize,
    /// Datagrams per `recvmmsg` and bytes per datagram slot. Defaults 64 and 65,536.
    pub batch_slots: usize,
    pub slot_bytes: usize,
    pub health_up: bool,
    /// Lines for the admin `config` command.
    pub describe: Vec<(String, String)>,
    /// `SO_RCVBUF` outcomes of the UDP sockets, for `stats` and self metrics.
    pub rcvbuf: Vec<RcvbufOutcome>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            flush: FlushConfig::default(),
            limits: AggregatorConfig::default(),
            shards: 1,
            parse: ParseOptions::default(),
            prefix_stats: "statsd".to_owned(),
            ingress_queue_batches: 1024,
            ingress_max_bytes: 64 << 20,
            batch_max_packets: 512,
            shard_queue_batches: 1024,
            batch_slots: 64,
            slot_bytes: 65_536,
            health_up: true,
            describe: Vec::new(),
            rcvbuf: Vec::new(),
        }
    }
}

/// Cumulative counters shared by all threads (raw counters; rates are derived by readers).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    pub lines: AtomicU64,
    pub metrics: AtomicU64,
    pub bad: [AtomicU64; BadLine::ALL.len()],
    pub truncated_packets: AtomicU64,
    pub ingress_dropped_packets: AtomicU64,
    pub shard_dropped_metrics: AtomicU64,
    pub tcp_connections: AtomicU64,
    pub last_msg_seen: AtomicU64,
    pub flushes: AtomicU64,
    pub last_flush_micros: AtomicU64,
    pub backend_errors: AtomicU64,
    pub keys: AtomicU64,
    pub key_limit_dropped_metrics: AtomicU64,
    pub timer_samples_not_kept: AtomicU64,
    pub set_members_dropped: AtomicU64,
}

/// State shared by the server's threads and its handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub counters: Counters,
    /// Inodes of the UDP sockets, to find their kernel drop counters in `/proc/net/udp`.
    pub udp_inodes: Vec<u64>,
    /// Bytes handed to parsers and not yet parsed (see `ServerConfig::ingress_max_bytes`).
    pub ingress_bytes: AtomicU64,
    pub ingress_max_bytes: u64,
    pub rcvbuf: Vec<RcvbufOutcome>,
    pub shards: Vec<SyncSender<ShardMsg>>,
    pub health_up: AtomicBool,
    pub last_flush: Mutex<Option<Arc<FlushData>>>,
    pub started: Instant,
    pub started_unix: u64,
    pub describe: Vec<(String, String)>,
    pub prefix_stats: String,
    pub graphite: Vec<Arc<GraphiteCounters>>,
    /// Internal counters as of the last flush, for Etsy's per-window `statsd.*` counters.
    pub flushed_internal: Mutex<[u64; 3]>,
}

pub(crate) enum ShardMsg {
    Batch(ShardBatch),
    Flush(SyncSender<ShardReport>),
    Dump(MetricType, SyncSender<Vec<(Box<str>, DumpValue)>>),
    Delete(MetricType, Vec<String>, SyncSender<Vec<Vec<Box<str>>>>),
    Stop,
}

pub(crate) struct ShardReport {
    window: ShardWindow,
    keys: usize,
    drops: AggregatorDrops,
}

/// Parsed metrics for one shard, keys and set members stored in one string.
#[derive(Default)]
pub(crate) struct ShardBatch {
    text: String,
    items: Vec<Item>,
}

struct Item {
    key: (u32, u32),
    value: ItemValue,
}

enum ItemValue {
    Counter { value: f64, sample_rate: f64 },
    Gauge { value: f64, delta: bool },
    Timer { value: f64, sample_rate: f64 },
    Set((u32, u32)),
}

impl ShardBatch {
    fn push_text(&mut self, text: &str) -> (u32, u32) {
        let start = self.text.len() as u32;
        self.text.push_str(text);
        (start, self.text.len() as u32)
    }
}

/// Routes parsed metrics to per-shard batches by key hash.
struct Router {
    batches: Vec<ShardBatch>,
}

impl MetricSink for Router {
    fn metric(&mut self, metric: Metric<'_>) {
        let shard = if self.batches.len() == 1 { 0 } else { shard_of(metric.key, self.batches.len()) };
        let batch = &mut self.batches[shard];
        let key = batch.push_text(metric.key);
        let value = match metric.value {
            MetricValue::Counter { value, sample_rate } => ItemValue::Counter { value, sample_rate },
            MetricValue::Gauge { value, delta } => ItemValue::Gauge { value, delta },
            MetricValue::Timer { value, sample_rate } => ItemValue::Timer { value, sample_rate },
            MetricValue::Set { member } => ItemValue::Set(batch.push_text(member)),
        };
        batch.items.push(Item { key, value });
    }

    fn bad_line(&mut self, _reason: BadLine, _line: &str) {}
}

fn shard_of(key: &str, shards: usize) -> usize {
    // FNV-1a; only spreading matters here, the maps themselves use SipHash.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % shards as u64) as usize
}

fn unix_seconds() -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    // JavaScript's Math.round(Date.now() / 1000), which Etsy uses for every timestamp.
    (now.as_millis() as u64 + 500) / 1000
}

/// A running server. Dropping it does not stop it: trigger the [`Shutdown`] and call
/// [`Server::join`].
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    /// Clones of the sockets, used only to wake their blocked readers at shutdown.
    wake: Vec<OwnedFd>,
    receivers: Vec<JoinHandle<()>>,
    parsers: Vec<JoinHandle<()>>,
    shard_threads: Vec<JoinHandle<()>>,
    admin: Option<JoinHandle<()>>,
    flusher: Option<JoinHandle<Flusher>>,
}

/// A cheap, cloneable view of a running server for embedding (`proctor serve`).
#[derive(Debug, Clone)]
pub struct ServerHandle {
    shared: Arc<Shared>,
}

impl ServerHandle {
    pub fn self_metrics(&self) -> SelfMetrics {
        SelfMetrics::read(&self.shared)
    }

    pub fn last_flush(&self) -> Option<Arc<FlushData>> {
        self.shared.last_flush.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Server {
    /// Starts every thread and returns at once.
    pub fn start(
        listeners: Listeners,
        config: ServerConfig,
        backends: Vec<Box<dyn Backend>>,
        graphite: Vec<Arc<GraphiteCounters>>,
        shutdown: Shutdown,
    ) -> io::Result<Server> {
        let shard_count = config.shards.max(1);
        let mut shard_limits = config.limits;
        shard_limits.max_keys = shard_limits.max_keys.div_ceil(shard_count);
        shard_limits.max_samples_total = shard_limits.max_samples_total.div_ceil(shard_count);
        let mut shard_senders = Vec::new();
        let mut shard_threads = Vec::new();
        for index in 0..shard_count {
            let (sender, receiver) = mpsc::sync_channel(config.shard_queue_batches.max(1));
            shard_senders.push(sender);
            let limits = shard_limits;
            shard_threads.push(
                thread::Builder::new()
                    .name(format!("statsd-shard-{index}"))
                    .spawn(move || shard_loop(receiver, Aggregator::new(limits)))?,
            );
        }
        let shared = Arc::new(Shared {
            counters: Counters::default(),
            udp_inodes: listeners.udp.iter().filter_map(|socket| net::socket_inode(socket).ok()).collect(),
            ingress_bytes: AtomicU64::new(0),
            ingress_max_bytes: config.ingress_max_bytes as u64,
            rcvbuf: config.rcvbuf.clone(),
            shards: shard_senders,
            health_up: AtomicBool::new(config.health_up),
            last_flush: Mutex::new(None),
            started: Instant::now(),
            started_unix: unix_seconds(),
            describe: config.describe.clone(),
            prefix_stats: config.prefix_stats.clone(),
            graphite,
            flushed_internal: Mutex::new([0; 3]),
        });
        let mut server = Server {
            shared: Arc::clone(&shared),
            wake: Vec::new(),
            receivers: Vec::new(),
            parsers: Vec::new(),
            shard_threads,
            admin: None,
            flusher: None,
        };
        let mut spawn_parser = |name: String| -> io::Result<SyncSender<RawBatch>> {
            let (sender, receiver) = mpsc::sync_channel(config.ingress_queue_batches.max(1));
            let shared = Arc::clone(&shared);
            let options = config.parse;
            server
                .parsers
                .push(thread::Builder::new().name(name).spawn(move || parser_loop(receiver, &shared, options))?);
            Ok(sender)
        };
        let mut udp_ingress = Vec::new();
        for index in 0..listeners.udp.len() {
            udp_ingress.push(spawn_parser(format!("statsd-parse-udp{index}"))?);
        }
        let stream_ingress = if listeners.tcp.is_some() || listeners.unix.is_some() {
            Some(spawn_parser("statsd-parse-stream".to_owned())?)
        } else {
            None
        };
        for (index, (socket, ingress)) in listeners.udp.into_iter().zip(udp_ingress).enumerate() {
            server.wake.push(OwnedFd::from(socket.try_clone()?));
            let (shared, shutdown) = (Arc::clone(&shared), shutdown.clone());
            let limits = BatchLimits::from(&config);
            server.receivers.push(
                thread::Builder::new()
                    .name(format!("statsd-udp{index}"))
                    .spawn(move || datagram_loop(&socket, limits, &ingress, &shared, &shutdown))?,
            );
        }
        if let (Some(socket), Some(ingress)) = (listeners.unix, stream_ingress.clone()) {
            server.wake.push(OwnedFd::from(socket.try_clone()?));
            let (shared, shutdown) = (Arc::clone(&shared), shutdown.clone());
            let limits = BatchLimits::from(&config);
            server.receivers.push(
                thread::Builder::new()
                    .name("statsd-unix".to_owned())
                    .spawn(move || datagram_loop(&socket, limits, &ingress, &shared, &shutdown))?,
            );
        }
        if let (Some(listener), Some(ingress)) = (listeners.tcp, stream_ingress) {
            server.wake.push(OwnedFd::from(listener.try_clone()?));
            let (shared, shutdown) = (Arc::clone(&shared), shutdown.clone());
            server.receivers.push(
                thread::Builder::new()
                    .name("statsd-tcp".to_owned())
                    .spawn(move || tcp_accept_loop(&listener, &ingress, shared, &shutdown))?,
            );
        }
        if let Some(listener) = listeners.admin {
            server.wake.push(OwnedFd::from(listener.try_clone()?));
            let (shared, shutdown) = (Arc::clone(&shared), shutdown.clone());
            server.admin = Some(
                thread::Builder::new()
                    .name("statsd-admin".to_owned())
                    .spawn(move || admin::accept_loop(&listener, &shared, &shutdown))?,
            );
        }
        let flusher = Flusher { shared: Arc::clone(&shared), config: config.flush, backends, previous_timestamp: 0 };
        let shutdown_for_flush = shutdown;
        server.flusher = Some(
            thread::Builder::new().name("statsd-flush".to_owned()).spawn(move || flusher.run(&shutdown_for_flush))?,
        );
        Ok(server)
    }

    pub fn handle(&self) -> ServerHandle {
        ServerHandle { shared: Arc::clone(&self.shared) }
    }

    /// Waits for the shutdown signal, then stops in data-flow order: receivers, parsers, a last
    /// flush of everything received, shards.
    pub fn join(mut self) {
        let flusher = self.flusher.take().and_then(|thread| thread.join().ok());
        for socket in &self.wake {
            net::shutdown_read(socket);
        }
        for thread in self.receivers.drain(..).chain(self.admin.take()) {
            let _ = thread.join();
        }
        for thread in self.parsers.drain(..) {
            let _ = thread.join();
        }
        if let Some(mut flusher) = flusher {
            flusher.flush_once();
        }
        for shard in &self.shared.shards {
            let _ = shard.send(ShardMsg::Stop);
        }
        for thread in self.shard_threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Starts the server and blocks until `shutdown` is triggered and everything has stopped
/// (mini-redis's `run(listener, shutdown)`).
pub fn run(
    listeners: Listeners,
    config: ServerConfig,
    backends: Vec<Box<dyn Backend>>,
    shutdown: Shutdown,
) -> io::Result<()> {
    Server::start(listeners, config, backends, Vec::new(), shutdown)?.join();
    Ok(())
}

#[derive(Debug, Clone, Copy)]
struct BatchLimits {
    slots: usize,
    slot_bytes: usize,
    max_packets: usize,
}

impl From<&ServerConfig> for BatchLimits {
    fn from(config: &ServerConfig) -> Self {
        BatchLimits { slots: config.batch_slots, slot_bytes: config.slot_bytes, max_packets: config.batch_max_packets }
    }
}

/// Past this many bytes a busy reader hands its batch on even if more datagrams are queued.
const BATCH_MAX_BYTES: usize = 256 << 10;

fn datagram_loop(
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

fn parser_loop(receiver: Receiver<RawBatch>, shared: &Shared, options: ParseOptions) {
    let mut parser = LineParser::new(options);
    let mut pending = Pending {
        router: Router { batches: (0..shared.shards.len()).map(|_| ShardBatch::default()).collect() },
        counts: crate::parse::PacketCounts::default(),
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
        if pending.router.batches.iter().any(|b| b.items.len() >= SHARD_BATCH_ITEMS) {
            pending.hand_on(shared);
        }
    }
    pending.hand_on(shared);
}

/// What a parser has parsed but not yet handed to the shards, with the tallies of the packets
/// it came from.
struct Pending {
    router: Router,
    counts: crate::parse::PacketCounts,
    packets: u64,
    bytes: u64,
}

impl Pending {
    /// Sends the pending shard batches, then publishes the counts of the packets they came from.
    fn hand_on(&mut self, shared: &Shared) {
        let counters = &shared.counters;
        for (shard, pending) in self.router.batches.iter_mut().enumerate() {
            if pending.items.is_empty() {
                continue;
            }
            let full = std::mem::take(pending);
            let items = full.items.len() as u64;
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
        self.counts = crate::parse::PacketCounts::default();
        self.packets = 0;
        self.bytes = 0;
    }
}

fn shard_loop(receiver: Receiver<ShardMsg>, mut aggregator: Aggregator) {
    while let Ok(message) = receiver.recv() {
        match message {
            ShardMsg::Batch(batch) => {
                for item in &batch.items {
                    let text = |(start, end): (u32, u32)| &batch.text[start as usize..end as usize];
                    let value = match item.value {
                        ItemValue::Counter { value, sample_rate } => MetricValue::Counter { value, sample_rate },
                        ItemValue::Gauge { value, delta } => MetricValue::Gauge { value, delta },
                        ItemValue::Timer { value, sample_rate } => MetricValue::Timer { value, sample_rate },
                        ItemValue::Set(range) => MetricValue::Set { member: text(range) },
                    };
                    aggregator.apply(&Metric { key: text(item.key), value });
                }
            }
            ShardMsg::Flush(reply) => {
                let window = aggregator.flush();
                let report = ShardReport { window, keys: aggregator.key_count(), drops: aggregator.drops() };
                let _ = reply.send(report);
            }
            ShardMsg::Dump(kind, reply) => {
                let _ = reply.send(aggregator.dump(kind));
            }
            ShardMsg::Delete(kind, patterns, reply) => {
                let _ = reply.send(aggregator.delete(kind, &patterns));
            }
            ShardMsg::Stop => return,
        }
    }
}

/// Accepts connections until shutdown, starting one thread per connection with `spawn`, and
/// joins those threads before returning. Shutdown wakes `accept` by shutting the listener down.
pub(crate) fn accept_connections(
    listener: &TcpListener,
    shutdown: &Shutdown,
    mut spawn: impl FnMut(TcpStream) -> io::Result<JoinHandle<()>>,
) {
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    loop {
        let accepted = listener.accept();
        if shutdown.is_triggered() {
            break;
        }
        let Ok((stream, _peer)) = accepted else {
            continue;
        };
        connections.retain(|thread| !thread.is_finished());
        if let Ok(thread) = spawn(stream) {
            connections.push(thread);
        }
    }
    for thread in connections {
        let _ = thread.join();
    }
}

fn tcp_accept_loop(listener: &TcpListener, ingress: &SyncSender<RawBatch>, shared: Arc<Shared>, shutdown: &Shutdown) {
    accept_connections(listener, shutdown, |stream| {
        shared.counters.tcp_connections.fetch_add(1, Ordering::Relaxed);
        let (ingress, shutdown, shared) = (ingress.clone(), shutdown.clone(), Arc::clone(&shared));
        thread::Builder::new()
            .name("statsd-tcp-conn".to_owned())
            .spawn(move || tcp_connection(stream, &ingress, &shared, &shutdown))
    });
}

/// A read timeout (`SO_RCVTIMEO`) expired: the moment to check for shutdown.
fn is_read_timeout(err: &io::Error) -> bool {
    matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// The longest partial line kept while waiting for its newline; a client that sends more is
/// broken or hostile, and its partial line is dropped.
const MAX_PENDING_LINE_BYTES: usize = 1 << 20;

fn tcp_connection(mut stream: TcpStream, ingress: &SyncSender<RawBatch>, shared: &Shared, shutdown: &Shutdown) {
    // TCP has flow control: block rather than drop, and the client slows down. The bytes are
    // accounted like datagrams' because the parser subtracts whatever it parses.
    let send = |packet: &[u8]| {
        let mut batch = RawBatch::default();
        batch.push(packet);
        shared.ingress_bytes.fetch_add(packet.len() as u64, Ordering::Relaxed);
        ingress.send(batch).is_ok()
    };
    // A read timeout lets the thread notice shutdown while a client idles.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => {
                pending.extend_from_slice(&chunk[..read]);
                // Like Etsy, everything up to the last newline is one packet.
                if let Some(last) = pending.iter().rposition(|b| *b == b'\n') {
                    let rest = pending.split_off(last + 1);
                    if !send(&pending) {
                        return;
                    }
                    pending = rest;
                } else if pending.len() > MAX_PENDING_LINE_BYTES {
                    pending.clear();
                }
            }
            Err(err) if is_read_timeout(&err) => {
                if shutdown.is_triggered() {
                    break;
                }
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    // Unlike Etsy, a last line without its newline is still used when the client closes.
    if !pending.is_empty() {
        send(&pending);
    }
}

/// Owns the backends and the flush clock.
#[derive(Debug)]
struct Flusher {
    shared: Arc<Shared>,
    config: FlushConfig,
    backends: Vec<Box<dyn Backend>>,
    previous_timestamp: u64,
}

impl Flusher {
    fn run(mut self, shutdown: &Shutdown) -> Flusher {
        let interval = Duration::from_millis(self.config.interval_ms.max(1));
        let started = self.shared.started;
        let mut tick: u32 = 1;
        loop {
            // Ticks are fixed points after start, so a slow flush does not shift later ones.
            let due = started + interval * tick;
            let wait = due.saturating_duration_since(Instant::now());
            if shutdown.wait_timeout(wait) {
                return self;
            }
            self.flush_once();
            let elapsed = started.elapsed();
            tick = (elapsed.as_millis() / interval.as_millis()).max(u128::from(tick)) as u32 + 1;
        }
    }

    fn flush_once(&mut self) {
        let started = Instant::now();
        let timestamp = unix_seconds();
        let mut windows = Vec::with_capacity(self.shared.shards.len() + 1);
        let mut keys = 0;
        let mut drops = AggregatorDrops::default();
        for shard in &self.shared.shards {
            let (reply, answer) = mpsc::sync_channel(1);
            if shard.send(ShardMsg::Flush(reply)).is_err() {
                continue;
            }
            if let Ok(report) = answer.recv() {
                keys += report.keys;
                drops.key_limit_metrics += report.drops.key_limit_metrics;
                drops.timer_samples_not_kept += report.drops.timer_samples_not_kept;
                drops.set_members += report.drops.set_members;
                windows.push(report.window);
            }
        }
        windows.push(self.internal_window(timestamp));
        let mut data = flush::compute(windows, timestamp, &self.config);
        data.processing_time_ms = started.elapsed().as_millis() as f64;
        let counters = &self.shared.counters;
        counters.keys.store(keys as u64, Ordering::Relaxed);
        counters.key_limit_dropped_metrics.store(drops.key_limit_metrics, Ordering::Relaxed);
        counters.timer_samples_not_kept.store(drops.timer_samples_not_kept, Ordering::Relaxed);
        counters.set_members_dropped.store(drops.set_members, Ordering::Relaxed);
        for backend in &mut self.backends {
            if let Err(err) = backend.flush(&data, timestamp) {
                // Counted every time; logged every time too, since flushes are seconds apart.
                counters.backend_errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("proctor statsd: flush failed: {}", error_chain(&err));
            }
        }
        counters.flushes.fetch_add(1, Ordering::Relaxed);
        counters.last_flush_micros.store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        *self.shared.last_flush.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(data));
    }

    /// Etsy's own counters (`statsd.packets_received`, `metrics_received`, `bad_lines_seen`,
    /// per window) and its `timestamp_lag` gauge (from the second flush on).
    fn internal_window(&mut self, timestamp: u64) -> ShardWindow {
        let current = internal_totals(&self.shared);
        let mut flushed = self.shared.flushed_internal.lock().unwrap_or_else(PoisonError::into_inner);
        let prefix = &self.shared.prefix_stats;
        let names = ["packets_received", "metrics_received", "bad_lines_seen"];
        let mut window = ShardWindow::default();
        for ((name, now), before) in names.iter().zip(current).zip(flushed.iter()) {
            window.counters.push((format!("{prefix}.{name}").into(), now.saturating_sub(*before) as f64));
        }
        *flushed = current;
        if self.previous_timestamp > 0 {
            let lag = timestamp as f64 - self.previous_timestamp as f64 - self.config.interval_ms as f64 / 1000.0;
            window.gauges.push((format!("{prefix}.timestamp_lag").into(), lag));
        }
        self.previous_timestamp = timestamp;
        window
    }
}

pub(crate) fn internal_totals(shared: &Shared) -> [u64; 3] {
    let counters = &shared.counters;
    let bad: u64 = counters.bad.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    [counters.packets.load(Ordering::Relaxed), counters.lines.load(Ordering::Relaxed), bad]
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// One self-metric series: `proctor_statsd_<name>_<unit>[_total]`, optional labels, a value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
    /// True for counters (cumulative since start), false for gauges.
    pub counter: bool,
}

/// The server's own figures, cumulative since start: what `proctor serve` will expose on
/// `/metrics` and what the admin `stats` command prints.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelfMetrics {
    pub uptime_seconds: f64,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub lines_received: u64,
    pub metrics_received: u64,
    pub bad_lines: Vec<(BadLine, u64)>,
    /// Sum over UDP sockets of the kernel's drop counter (`/proc/net/udp`, `drops`).
    pub kernel_dropped_packets: u64,
    pub truncated_packets: u64,
    pub ingress_dropped_packets: u64,
    pub shard_dropped_metrics: u64,
    pub key_limit_dropped_metrics: u64,
    pub timer_samples_not_kept: u64,
    pub set_members_dropped: u64,
    pub keys: u64,
    pub tcp_connections: u64,
    pub flushes: u64,
    pub last_flush_seconds: f64,
    pub backend_errors: u64,
    pub graphite_sent_lines: u64,
    pub graphite_dropped_lines: u64,
    pub graphite_failed_sends: u64,
    pub graphite_pending_bytes: u64,
    /// Applied `SO_RCVBUF` of each UDP socket as the kernel reports it.
    pub rcvbuf_bytes: Vec<u64>,
    pub last_msg_seen_unix: u64,
}

impl SelfMetrics {
    pub(crate) fn read(shared: &Shared) -> SelfMetrics {
        let c = &shared.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let graphite_sum =
            |f: fn(&GraphiteCounters) -> &AtomicU64| -> u64 { shared.graphite.iter().map(|g| load(f(g))).sum() };
        SelfMetrics {
            uptime_seconds: shared.started.elapsed().as_secs_f64(),
            packets_received: load(&c.packets),
            bytes_received: load(&c.bytes),
            lines_received: load(&c.lines),
            metrics_received: load(&c.metrics),
            bad_lines: BadLine::ALL.iter().map(|r| (*r, load(&c.bad[r.index()]))).collect(),
            kernel_dropped_packets: net::udp_drops(&shared.udp_inodes).into_iter().flatten().sum(),
            truncated_packets: load(&c.truncated_packets),
            ingress_dropped_packets: load(&c.ingress_dropped_packets),
            shard_dropped_metrics: load(&c.shard_dropped_metrics),
            key_limit_dropped_metrics: load(&c.key_limit_dropped_metrics),
            timer_samples_not_kept: load(&c.timer_samples_not_kept),
            set_members_dropped: load(&c.set_members_dropped),
            keys: load(&c.keys),
            tcp_connections: load(&c.tcp_connections),
            flushes: load(&c.flushes),
            last_flush_seconds: load(&c.last_flush_micros) as f64 / 1e6,
            backend_errors: load(&c.backend_errors),
            graphite_sent_lines: graphite_sum(|g| &g.sent_lines),
            graphite_dropped_lines: graphite_sum(|g| &g.dropped_lines),
            graphite_failed_sends: graphite_sum(|g| &g.failed_sends),
            graphite_pending_bytes: graphite_sum(|g| &g.pending_bytes),
            rcvbuf_bytes: shared.rcvbuf.iter().map(|r| r.applied_bytes as u64).collect(),
            last_msg_seen_unix: load(&c.last_msg_seen),
        }
    }

    /// The figures as named series, ready for a Prometheus renderer.
    pub fn series(&self) -> Vec<Series> {
        let counter = |name, value: u64| Series { name, labels: Vec::new(), value: value as f64, counter: true };
        let gauge = |name, value: f64| Series { name, labels: Vec::new(), value, counter: false };
        let mut out = vec![
            gauge("proctor_statsd_uptime_seconds", self.uptime_seconds),
            counter("proctor_statsd_packets_received_total", self.packets_received),
            counter("proctor_statsd_received_bytes_total", self.bytes_received),
            counter("proctor_statsd_lines_received_total", self.lines_received),
            counter("proctor_statsd_metrics_received_total", self.metrics_received),
            counter("proctor_statsd_kernel_dropped_packets_total", self.kernel_dropped_packets),
            counter("proctor_statsd_truncated_packets_total", self.truncated_packets),
            counter("proctor_statsd_queue_dropped_packets_total", self.ingress_dropped_packets),
            counter("proctor_statsd_shard_queue_dropped_metrics_total", self.shard_dropped_metrics),
            counter("proctor_statsd_key_limit_dropped_metrics_total", self.key_limit_dropped_metrics),
            counter("proctor_statsd_timer_samples_not_kept_total", self.timer_samples_not_kept),
            counter("proctor_statsd_set_members_dropped_total", self.set_members_dropped),
            gauge("proctor_statsd_keys", self.keys as f64),
            counter("proctor_statsd_tcp_connections_total", self.tcp_connections),
            counter("proctor_statsd_flushes_total", self.flushes),
            gauge("proctor_statsd_last_flush_duration_seconds", self.last_flush_seconds),
            counter("proctor_statsd_backend_errors_total", self.backend_errors),
            counter("proctor_statsd_graphite_sent_lines_total", self.graphite_sent_lines),
            counter("proctor_statsd_graphite_dropped_lines_total", self.graphite_dropped_lines),
            counter("proctor_statsd_graphite_failed_sends_total", self.graphite_failed_sends),
            gauge("proctor_statsd_graphite_pending_bytes", self.graphite_pending_bytes as f64),
        ];
        for (reason, count) in &self.bad_lines {
            out.push(Series {
                name: "proctor_statsd_bad_lines_total",
                labels: vec![("reason", reason.as_str().to_owned())],
                value: *count as f64,
                counter: true,
            });
        }
        for (socket, bytes) in self.rcvbuf_bytes.iter().enumerate() {
            out.push(Series {
                name: "proctor_statsd_socket_receive_buffer_bytes",
                labels: vec![("socket", socket.to_string())],
                value: *bytes as f64,
                counter: false,
            });
        }
        out
    }
}

/// For the admin thread: a read of every shard (`counters`, `gauges`, …).
pub(crate) fn dump_all(shared: &Shared, kind: MetricType) -> Vec<(Box<str>, DumpValue)> {
    let mut all = Vec::new();
    for shard in &shared.shards {
        let (reply, answer) = mpsc::sync_channel(1);
        if shard.send(ShardMsg::Dump(kind, reply)).is_ok() {
            all.extend(answer.recv().unwrap_or_default());
        }
    }
    all
}

/// For the admin thread: delete keys in every shard; per pattern, the keys deleted.
pub(crate) fn delete_all(shared: &Shared, kind: MetricType, patterns: &[String]) -> Vec<Vec<Box<str>>> {
    let mut all: Vec<Vec<Box<str>>> = patterns.iter().map(|_| Vec::new()).collect();
    for shard in &shared.shards {
        let (reply, answer) = mpsc::sync_channel(1);
        if shard.send(ShardMsg::Delete(kind, patterns.to_vec(), reply)).is_ok() {
            for (mine, theirs) in all.iter_mut().zip(answer.recv().unwrap_or_default()) {
                mine.extend(theirs);
            }
        }
    }
    all
}

/// Reads admin command lines; used by the admin module, kept here beside the other I/O loops.
pub(crate) fn read_command(reader: &mut BufReader<TcpStream>, line: &mut String, shutdown: &Shutdown) -> Option<()> {
    loop {
        match reader.read_line(line) {
            Ok(0) => return None,
            Ok(_) => return Some(()),
            Err(err) if is_read_timeout(&err) => {
                if shutdown.is_triggered() {
                    return None;
                }
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}
