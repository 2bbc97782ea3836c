//! The statsd server: ingest threads, the shards they aggregate into, the flush clock, and the
//! data `proctor serve` reads (self metrics, the last flush).
//!
//! ```text
//!  UDP socket ─► ingest thread ─┐ receive, parse, aggregate
//!  UDP socket ─► ingest thread ─┼─► shards (by key hash, a lock each) ◄─ flush thread ─► backends
//!  Unix dgram ─► ingest thread ─┤                                    ◄─ admin threads
//!  TCP conns  ─► conn threads  ─┘
//! ```
//!
//! An ingest thread receives a `recvmmsg` batch, parses it and applies the metrics to the shard
//! that owns each key, then receives again; while it works, the socket's receive buffer (8 MiB
//! requested) holds what arrives, and the kernel counts what overflows it. One thread per
//! socket or connection keeps each sender's lines in order (gauge deltas depend on it).
//! Shards own disjoint keys; the flush thread takes each window under that shard's lock, so a
//! flush sees every batch applied before it.
//!
//! The server takes sockets already bound and a [`Shutdown`]; it binds nothing itself and does
//! not install signal handlers, so a host process (`proctor serve`) can embed it.
//!
//! This module wires the threads together and stops them in order; what each thread does lives
//! in `ingest` (datagram sockets), `tcp`, `shard`, `flusher`, and `state` (what they share). The
//! admin interface sees the server only through `admin::AdminView`.

mod flusher;
mod ingest;
mod shard;
pub(crate) mod state;
mod tcp;

use std::io;
use std::net::{TcpListener, UdpSocket};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::admin::{self, AdminView};
use crate::aggregate::{Aggregator, AggregatorConfig};
use crate::backend::Backend;
use crate::flush::{FlushConfig, FlushData};
use crate::graphite::GraphiteCounters;
use crate::net::{self, RcvbufOutcome};
use crate::parse::ParseOptions;
use crate::self_metrics::SelfMetrics;
use crate::shutdown::Shutdown;
use flusher::Flusher;
use ingest::{datagram_loop, BatchLimits};
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
    /// Aggregators, each behind its own lock; keys are spread over them by hash, so ingest
    /// threads of several UDP sockets rarely wait for each other. Default 1.
    pub shards: usize,
    pub parse: ParseOptions,
    /// Etsy's `prefixStats`: the namespace of `packets_received` and friends.
    pub prefix_stats: String,
    /// Datagrams per `recvmmsg` and bytes per datagram slot. Defaults 64 and 65,536 (a slot
    /// holds the largest UDP datagram; only the bytes received are touched).
    pub batch_slots: usize,
    pub slot_bytes: usize,
    /// The longest pause of a UDP ingest thread after a read that drained its socket, so the
    /// next read finds a batch; it is shortened further for small receive buffers (see
    /// `ingest::Pacer`). Zero reads again at once. Default 1 ms, which is also about the longest
    /// a datagram waits before it counts.
    pub max_read_pause: Duration,
    pub health_up: bool,
    /// Lines for the admin `config` command.
    pub describe: Vec<(String, String)>,
    /// `SO_RCVBUF` outcomes of the UDP sockets, for `stats` and self metrics.
    pub rcvbuf: Vec<RcvbufOutcome>,
}

impl ServerConfig {
    fn batch_limits(&self) -> BatchLimits {
        BatchLimits { slots: self.batch_slots, slot_bytes: self.slot_bytes, max_pause: self.max_read_pause }
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
            batch_slots: 64,
            slot_bytes: 65_536,
            max_read_pause: Duration::from_millis(1),
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
    /// Ingest threads (one per datagram socket) and the TCP accept thread, which joins its
    /// connections' threads before it ends.
    receivers: Vec<JoinHandle<()>>,
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

    /// Counts received per counter key since the server started (see [`crate::prom`]).
    pub fn counter_totals(&self) -> Arc<std::collections::BTreeMap<String, f64>> {
        Arc::clone(&self.shared.counter_totals.lock().unwrap_or_else(PoisonError::into_inner))
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
        shard_limits.max_bytes = shard_limits.max_bytes.div_ceil(shard_count);
        shard_limits.max_samples_total = shard_limits.max_samples_total.div_ceil(shard_count);
        let shared = Arc::new(Shared {
            counters: Counters::default(),
            udp_inodes: listeners.udp.iter().filter_map(|socket| net::socket_inode(socket).ok()).collect(),
            rcvbuf: config.rcvbuf.clone(),
            shards: (0..shard_count).map(|_| Mutex::new(Aggregator::new(shard_limits))).collect(),
            health_up: AtomicBool::new(config.health_up),
            last_flush: Mutex::new(None),
            counter_totals: Mutex::new(Arc::default()),
            started: Instant::now(),
            started_unix: unix_seconds(),
            describe: config.describe.clone(),
            prefix_stats: config.prefix_stats.clone(),
            graphite,
            flushed_internal: Mutex::new([0; 3]),
        });
        let mut server =
            Server { shared: Arc::clone(&shared), wake: Vec::new(), receivers: Vec::new(), admin: None, flusher: None };
        // Unix datagram senders are flow-controlled (a full queue blocks them, or fails their
        // non-blocking send where nobody counts it), so only UDP readers pause.
        let datagram_sockets = listeners
            .udp
            .into_iter()
            .enumerate()
            .map(|(index, socket)| (format!("statsd-udp{index}"), OwnedFd::from(socket), true));
        let unix_socket = listeners.unix.map(|socket| ("statsd-unix".to_owned(), OwnedFd::from(socket), false));
        for (name, socket, pace) in datagram_sockets.chain(unix_socket) {
            server.wake.push(socket.try_clone()?);
            let (shared, shutdown) = (Arc::clone(&shared), shutdown.clone());
            let (limits, options) = (config.batch_limits(), config.parse);
            server.receivers.push(
                thread::Builder::new()
                    .name(name)
                    .spawn(move || datagram_loop(&socket, limits, pace, options, &shared, &shutdown))?,
            );
        }
        if let Some(listener) = listeners.tcp {
            server.wake.push(OwnedFd::from(listener.try_clone()?));
            let (shared, shutdown, options) = (Arc::clone(&shared), shutdown.clone(), config.parse);
            server.receivers.push(
                thread::Builder::new()
                    .name("statsd-tcp".to_owned())
                    .spawn(move || tcp::tcp_accept_loop(&listener, options, shared, &shutdown))?,
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

    /// Waits for the shutdown signal, then stops in data-flow order: ingest threads (each
    /// applies what it has received), then a last flush of everything received.
    pub fn join(mut self) {
        let flusher = self.flusher.take().and_then(|thread| thread.join().ok());
        for socket in &self.wake {
            net::shutdown_read(socket);
        }
        for thread in self.receivers.drain(..).chain(self.admin.take()) {
            let _ = thread.join();
        }
        if let Some(mut flusher) = flusher {
            flusher.flush_once();
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
