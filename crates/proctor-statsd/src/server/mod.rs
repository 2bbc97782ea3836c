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
//!
//! This module wires the threads together and stops them in order; what each thread does lives
//! in `ingest` (datagram readers and parsers), `tcp`, `shard`, `flusher`, and `state` (what they
//! share). The admin interface sees the server only through `admin::AdminView`.

mod flusher;
mod ingest;
mod shard;
pub(crate) mod state;
mod tcp;

use std::io;
use std::net::{TcpListener, UdpSocket};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use crate::admin::{self, AdminView};
use crate::aggregate::{Aggregator, AggregatorConfig};
use crate::backend::Backend;
use crate::flush::{FlushConfig, FlushData};
use crate::graphite::GraphiteCounters;
use crate::net::{self, RawBatch, RcvbufOutcome};
use crate::parse::ParseOptions;
use crate::self_metrics::SelfMetrics;
use crate::shutdown::Shutdown;
use flusher::Flusher;
use ingest::{datagram_loop, parser_loop, BatchLimits};
use shard::{shard_loop, ShardMsg};
use state::{unix_seconds, Counters, Shared};

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

impl ServerConfig {
    fn batch_limits(&self) -> BatchLimits {
        BatchLimits { slots: self.batch_slots, slot_bytes: self.slot_bytes, max_packets: self.batch_max_packets }
    }
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
        self.shared.self_metrics()
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
            let limits = config.batch_limits();
            server.receivers.push(
                thread::Builder::new()
                    .name(format!("statsd-udp{index}"))
                    .spawn(move || datagram_loop(&socket, limits, &ingress, &shared, &shutdown))?,
            );
        }
        if let (Some(socket), Some(ingress)) = (listeners.unix, stream_ingress.clone()) {
            server.wake.push(OwnedFd::from(socket.try_clone()?));
            let (shared, shutdown) = (Arc::clone(&shared), shutdown.clone());
            let limits = config.batch_limits();
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
                    .spawn(move || tcp::tcp_accept_loop(&listener, &ingress, shared, &shutdown))?,
            );
        }
        if let Some(listener) = listeners.admin {
            server.wake.push(OwnedFd::from(listener.try_clone()?));
            let (view, shutdown) = (Arc::clone(&shared) as Arc<dyn AdminView>, shutdown.clone());
            server.admin = Some(
                thread::Builder::new()
                    .name("statsd-admin".to_owned())
                    .spawn(move || admin::accept_loop(&listener, &view, &shutdown))?,
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
