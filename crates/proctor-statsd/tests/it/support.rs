//! Test support: a server on ephemeral loopback ports, a Graphite plaintext sink, an admin
//! client, and a bounded wait for a condition.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use proctor_statsd::flush::{CounterData, FlushData};
use proctor_statsd::graphite::{GraphiteBackend, GraphiteConfig, GraphiteNaming};
use proctor_statsd::{Backend, FlushConfig, Listeners, Server, ServerConfig, ServerHandle, Shutdown};

/// Waits for `condition`, checking every few milliseconds, and fails the test after 20 s.
/// The deadline only turns a hang into a failure; no assertion depends on timing.
pub fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// A loopback Graphite: every connection's bytes, read to EOF, become one payload.
pub struct GraphiteSink {
    address: SocketAddr,
    payloads: Receiver<String>,
    /// Payloads taken off the channel by `has_payload`, oldest first.
    early: std::sync::Mutex<Vec<String>>,
}

impl GraphiteSink {
    pub fn start() -> Self {
        Self::start_on("127.0.0.1:0".parse().expect("addr"))
    }

    pub fn start_on(address: SocketAddr) -> Self {
        let listener = TcpListener::bind(address).expect("bind sink");
        let address = listener.local_addr().expect("sink addr");
        let (sender, payloads) = mpsc::channel();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut text = String::new();
                let _ = stream.read_to_string(&mut text);
                if sender.send(text).is_err() {
                    return;
                }
            }
        });
        GraphiteSink { address, payloads, early: std::sync::Mutex::new(Vec::new()) }
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub fn next_payload(&self) -> String {
        let mut early = self.early.lock().expect("lock");
        if !early.is_empty() {
            return early.remove(0);
        }
        drop(early);
        self.payloads.recv_timeout(Duration::from_secs(30)).expect("a graphite payload")
    }

    /// True when a payload is waiting; it stays queued.
    pub fn has_payload(&self) -> bool {
        match self.payloads.try_recv() {
            Ok(payload) => {
                self.early.lock().expect("lock").push(payload);
                true
            }
            Err(_) => !self.early.lock().expect("lock").is_empty(),
        }
    }

    pub fn drain(&self) {
        self.early.lock().expect("lock").clear();
        while self.payloads.try_recv().is_ok() {}
    }
}

pub struct TestServerBuilder {
    config: ServerConfig,
    graphite: Option<(SocketAddr, GraphiteNaming)>,
    unix: Option<PathBuf>,
}

impl TestServerBuilder {
    pub fn graphite(mut self, address: SocketAddr) -> Self {
        self.graphite = Some((address, GraphiteNaming::default()));
        self
    }

    pub fn graphite_named(mut self, address: SocketAddr, naming: GraphiteNaming) -> Self {
        self.graphite = Some((address, naming));
        self
    }

    pub fn unix(mut self, path: &Path) -> Self {
        self.unix = Some(path.to_owned());
        self
    }

    pub fn max_keys(mut self, keys: usize) -> Self {
        self.config.limits.max_keys = keys;
        self
    }

    pub fn prefix_stats(mut self, prefix: &str) -> Self {
        self.config.prefix_stats = prefix.to_owned();
        self
    }

    pub fn idle(mut self, idle: proctor_statsd::IdlePolicy) -> Self {
        self.config.limits.idle = idle;
        self
    }

    pub fn flush(mut self, flush: FlushConfig) -> Self {
        self.config.flush = flush;
        self
    }

    pub fn start(self) -> TestServer {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        let tcp = TcpListener::bind("127.0.0.1:0").expect("bind tcp");
        let admin = TcpListener::bind("127.0.0.1:0").expect("bind admin");
        let addresses =
            (udp.local_addr().expect("addr"), tcp.local_addr().expect("addr"), admin.local_addr().expect("addr"));
        let unix = self.unix.as_ref().map(|path| UnixDatagram::bind(path).expect("bind unix"));
        let listeners = Listeners { udp: vec![udp], tcp: Some(tcp), unix, admin: Some(admin) };
        let mut backends: Vec<Box<dyn Backend>> = Vec::new();
        let mut counters = Vec::new();
        if let Some((address, naming)) = self.graphite {
            let mut config = GraphiteConfig::new(address.to_string());
            config.naming = naming;
            let backend = GraphiteBackend::new(config, 0);
            counters.push(backend.counters());
            backends.push(Box::new(backend));
        }
        let shutdown = Shutdown::new();
        let server = Server::start(listeners, self.config, backends, counters, shutdown.clone()).expect("start");
        TestServer {
            udp: addresses.0,
            tcp: addresses.1,
            admin: addresses.2,
            handle: server.handle(),
            shutdown,
            server: Some(server),
        }
    }
}

pub struct TestServer {
    pub udp: SocketAddr,
    pub tcp: SocketAddr,
    pub admin: SocketAddr,
    pub handle: ServerHandle,
    shutdown: Shutdown,
    server: Option<Server>,
}

impl TestServer {
    pub fn builder() -> TestServerBuilder {
        let config = ServerConfig {
            // Long enough that only the final flush at shutdown happens in a test.
            flush: FlushConfig { interval_ms: 3_600_000, ..FlushConfig::default() },
            ..ServerConfig::default()
        };
        TestServerBuilder { config, graphite: None, unix: None }
    }

    /// Waits until the server has parsed `lines` non-empty lines (Etsy's metrics_received).
    pub fn wait_metrics(&self, lines: u64) {
        wait_for(&format!("{lines} lines"), || self.handle.self_metrics().lines_received >= lines);
    }

    pub fn stop(mut self) {
        self.shutdown.trigger();
        if let Some(server) = self.server.take() {
            server.join();
        }
    }

    /// Stops the server (which flushes once more) and returns that flush's Graphite lines
    /// without their timestamps.
    pub fn stop_and_take_flush(self, sink: &GraphiteSink) -> Vec<String> {
        self.stop();
        strip_timestamps(&sink.next_payload())
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.trigger();
        if let Some(server) = self.server.take() {
            server.join();
        }
    }
}

pub fn strip_timestamps(payload: &str) -> Vec<String> {
    payload
        .lines()
        .map(|line| match line.rsplit_once(' ') {
            Some((rest, _timestamp)) => rest.to_owned(),
            None => line.to_owned(),
        })
        .collect()
}

pub fn send_tcp(address: SocketAddr, bytes: &[u8]) {
    let mut stream = TcpStream::connect(address).expect("connect tcp");
    stream.write_all(bytes).expect("write tcp");
}

/// Sends one admin command followed by `quit`, and returns everything before the close.
pub fn admin(address: SocketAddr, command: &str) -> String {
    let mut stream = TcpStream::connect(address).expect("connect admin");
    stream.write_all(format!("{command}\nquit\n").as_bytes()).expect("write admin");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("read admin");
    reply
}

/// Sends one list command (`counters`, `stats`, …) and reads up to its `END` line. Etsy reads
/// each TCP chunk as one command, so `quit` cannot ride along in the same write.
pub fn admin_list(address: SocketAddr, command: &str) -> String {
    let mut stream = TcpStream::connect(address).expect("connect admin");
    stream.write_all(format!("{command}\n").as_bytes()).expect("write admin");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    while !reply.ends_with(b"END\n\n") {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(read) => reply.extend_from_slice(&chunk[..read]),
        }
    }
    String::from_utf8_lossy(&reply).into_owned()
}

pub fn flush_with_counter(key: &str, count: f64, timestamp: u64) -> FlushData {
    FlushData {
        timestamp_seconds: timestamp,
        interval_ms: 10_000,
        counters: vec![CounterData { key: key.to_owned(), count, rate_per_second: count / 10.0 }],
        timers: Vec::new(),
        gauges: Vec::new(),
        sets: Vec::new(),
        processing_time_ms: 0.0,
    }
}
