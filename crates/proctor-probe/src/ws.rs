//! WebSocket echo latency: one connection, messages sent on a schedule, each timed until its
//! echo comes back.
//!
//! The connection is the probe's own ([`crate::client::open`]: dns, connect and tls timed),
//! and the HTTP/1.1 upgrade and RFC 6455 framing are tungstenite's, run over that stream and
//! timed as the `upgrade` phase. Then, on this module's one thread:
//!
//! - **closed loop**: the next message goes when the last one's echo arrived (or timed out);
//! - **open loop** (`--rate`, or holding a key at `--key-rate`): message `i` is due at
//!   `i / rate` from the start, sent when due whatever is outstanding, and its latency runs
//!   from the intended send time (coordinated omission corrected, as for HTTP);
//!
//! and each message becomes one [`RequestRecord`]: `write` (the frame into the socket), `wait`
//! (to its echo), `queue` (open loop's lateness). Echoes are matched by content: numbered
//! messages (`proctor-probe 17`) by equality, so a server that answers out of order is still
//! matched right; a held key by counting the key in what comes back, oldest message first,
//! because a terminal echoes `jjj` in whatever pieces it likes. Jupyter's terminal protocol
//! (`["stdin", "j"]` out, `["stdout", "jj"]` back) is a framing on top of the same matcher.
//!
//! What a bad server gets: a non-101 answer fails that message as `protocol` (with the status
//! kept); a close frame, a reset or a protocol error fails every outstanding message as `io`
//! or `protocol`, and the next message due opens a new connection (its record then carries the
//! connection phases and is not `reused`); a message not echoed within `--timeout` is a
//! `timeout`; pings are answered (tungstenite queues the pong) and counted; fragmented messages
//! are reassembled; echoes that match nothing sent (a greeting, a late echo of a message that
//! already timed out) are counted, never matched to a later message by mistake.
//!
//! The first connection is opened (and for a Jupyter terminal, its first prompt drained)
//! before the schedule's clock starts, as in the Netflix method where the terminal was open
//! before the key was held: its phases are in the first message's record, not in its total.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tungstenite::client::IntoClientRequest;
use tungstenite::handshake::HandshakeError;
use tungstenite::http::{HeaderName, HeaderValue};
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, WebSocket};

use crate::client::{self, classify_io, nanos, Failure, Stream};
use crate::record::{ErrorClass, Phases, RequestRecord};
use crate::runner::{Clock, RunHandle, CHANNEL_CAPACITY};
use crate::schedule::Limit;
use crate::tls::TlsConfig;
use crate::url::Target;

/// What each message carries, and so how its echo is recognized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// `proctor-probe SEQ`: unique, matched by equality.
    Numbered,
    /// The same text every time (a held key), matched by counting it in what comes back.
    Key(String),
}

/// How messages are wrapped on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// The payload is the message (text).
    Plain,
    /// Jupyter's terminal (terminado) protocol: `["stdin", text]` out, `["stdout", text]` back.
    JupyterTerminal,
}

/// When messages go.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WsPacing {
    Closed,
    Open { rate_per_second: f64 },
}

/// A WebSocket probe's settings.
#[derive(Debug)]
pub struct WsConfig {
    pub target: Target,
    /// Extra handshake headers (`Authorization`, `Origin`, …).
    pub headers: Vec<(String, String)>,
    pub tls: Option<TlsConfig>,
    /// Deadline for opening a connection (dns to 101), and for each message's echo.
    pub timeout: Duration,
    pub pacing: WsPacing,
    pub limit: Limit,
    pub payload: Payload,
    pub framing: Framing,
    pub run_id: String,
    /// Written into every record as its `url`.
    pub url: Option<String>,
}

/// What happened on the wire besides matched echoes; read while and after the run.
#[derive(Debug, Default)]
pub struct WsCounters {
    pub connections: AtomicU64,
    pub pings: AtomicU64,
    pub closes: AtomicU64,
    /// Data messages (or echoed keys) that matched no outstanding message.
    pub unmatched: AtomicU64,
    /// Jupyter framing: messages that were not `stdout` (`setup`, `disconnect`, …).
    pub other: AtomicU64,
    /// The last close frame's code and reason, or the last connection error, in words.
    pub last_close: std::sync::Mutex<Option<String>>,
}

/// [`WsCounters`] read out, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WsSummary {
    pub connections: u64,
    pub pings: u64,
    pub closes: u64,
    pub unmatched: u64,
    pub other: u64,
    pub last_close: Option<String>,
}

impl WsCounters {
    pub fn summary(&self) -> WsSummary {
        WsSummary {
            connections: self.connections.load(Ordering::Relaxed),
            pings: self.pings.load(Ordering::Relaxed),
            closes: self.closes.load(Ordering::Relaxed),
            unmatched: self.unmatched.load(Ordering::Relaxed),
            other: self.other.load(Ordering::Relaxed),
            last_close: self.last_close.lock().map(|last| last.clone()).unwrap_or_default(),
        }
    }
}

/// Starts the run on a thread of its own; records arrive on the handle as echoes do.
pub fn start(config: WsConfig) -> std::io::Result<(RunHandle, Arc<WsCounters>)> {
    let (sender, records) = sync_channel(CHANNEL_CAPACITY);
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(WsCounters::default());
    let (stop_for_thread, counters_for_thread) = (Arc::clone(&stop), Arc::clone(&counters));
    let thread = std::thread::Builder::new().name("probe-ws".into()).spawn(move || {
        Session::new(&config, sender, &stop_for_thread, &counters_for_thread).run();
    })?;
    Ok((RunHandle::from_parts(records, stop, thread), counters))
}

/// A message sent and not yet echoed.
#[derive(Debug)]
struct Pending {
    seq: u64,
    intended: Instant,
    written: Instant,
    deadline: Instant,
    phases: Phases,
    reused: bool,
    /// Numbered payloads: the exact bytes the echo must have.
    payload: Vec<u8>,
}

struct Connection {
    socket: WebSocket<Stream>,
    /// Phases of opening it, for the first message sent on it.
    opened: Option<Phases>,
}

struct Session<'a> {
    config: &'a WsConfig,
    sender: SyncSender<RequestRecord>,
    stop: &'a AtomicBool,
    counters: &'a WsCounters,
    clock: Clock,
    connection: Option<Connection>,
    pending: VecDeque<Pending>,
    /// The key's bytes (empty for numbered payloads).
    key: Vec<u8>,
    tls_verified: Option<bool>,
    /// The config's run and URL, shared by every record.
    run: Arc<str>,
    url: Option<Arc<str>>,
    /// False once the caller hung up.
    listening: bool,
}

/// A read that finds nothing waits at least this long (socket timeouts of 0 mean "forever").
const MIN_WAIT: Duration = Duration::from_millis(1);
/// Largest message accepted from the server (a terminal's burst of output is far smaller).
const MAX_MESSAGE: usize = 16 << 20;

/// Bytes waiting to be written on one connection, at most (tungstenite's write buffer is 128 KiB).
const MAX_UNSENT: usize = 1 << 20;
/// Jupyter: the first prompt is drained until the terminal has been quiet this long …
const SETTLE_QUIET: Duration = Duration::from_millis(500);
/// … or for at most this long.
const SETTLE_MAX: Duration = Duration::from_secs(5);

impl<'a> Session<'a> {
    fn new(
        config: &'a WsConfig,
        sender: SyncSender<RequestRecord>,
        stop: &'a AtomicBool,
        counters: &'a WsCounters,
    ) -> Self {
        let key = match &config.payload {
            Payload::Key(key) => key.as_bytes().to_vec(),
            Payload::Numbered => Vec::new(),
        };
        let tls_verified = config.tls.as_ref().filter(|_| config.target.tls).map(|tls| tls.verifies_certificates);
        Self {
            config,
            sender,
            stop,
            counters,
            clock: Clock::now(),
            connection: None,
            pending: VecDeque::new(),
            key,
            tls_verified,
            run: config.run_id.as_str().into(),
            url: config.url.as_deref().map(Arc::from),
            listening: true,
        }
    }

    fn run(mut self) {
        // The first connection is opened before the clock starts (see the module's docs); a
        // failure here is the first message's record, sent below when it is due.
        let mut first_failure = None;
        let mut phases = Phases::default();
        match self.open(&mut phases, Instant::now() + self.config.timeout) {
            Ok(socket) => self.connection = Some(Connection { socket, opened: Some(phases) }),
            Err(failed) => first_failure = Some((phases, failed)),
        }
        self.clock = Clock::now();
        let start = self.clock.start;
        let mut index = 0u64;
        while self.listening && !self.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let due = match self.config.pacing {
                WsPacing::Closed => {
                    (self.pending.is_empty() && self.config.limit.allows(index, now - start)).then_some(now)
                }
                WsPacing::Open { rate_per_second } => {
                    let offset = Duration::from_secs_f64(index as f64 / rate_per_second);
                    self.config.limit.allows(index, offset).then_some(start + offset)
                }
            };
            if due.is_none() && self.pending.is_empty() {
                break;
            }
            if let Some(due) = due.filter(|&due| due <= now) {
                if let Some((phases, failed)) = first_failure.take() {
                    self.fail_one(index, due, phases, false, &failed);
                } else {
                    self.send(index, due);
                }
                index += 1;
                continue;
            }
            let wake = self.pending.iter().map(|pending| pending.deadline).chain(due).min().unwrap_or(now + MIN_WAIT);
            self.receive_until(wake);
            self.expire(Instant::now());
        }
        self.close();
    }

    /// Sends message `seq`, due at `intended`, opening a connection first when there is none.
    fn send(&mut self, seq: u64, intended: Instant) {
        let started = Instant::now();
        let mut phases = Phases::default();
        if matches!(self.config.pacing, WsPacing::Open { .. }) {
            phases.queue_ns = Some(nanos(started.saturating_duration_since(intended)));
        }
        let mut reused = true;
        if self.connection.is_none() {
            match self.open(&mut phases, started + self.config.timeout) {
                Ok(socket) => self.connection = Some(Connection { socket, opened: None }),
                Err(failed) => return self.fail_one(seq, intended, phases, false, &failed),
            }
            reused = false;
        }
        let Some(connection) = self.connection.as_mut() else { return };
        if let Some(opened) = connection.opened.take() {
            phases.dns_ns = opened.dns_ns;
            phases.connect_ns = opened.connect_ns;
            phases.tls_ns = opened.tls_ns;
            phases.upgrade_ns = opened.upgrade_ns;
            reused = false;
        }
        let payload = match &self.config.payload {
            Payload::Numbered => format!("proctor-probe {seq}"),
            Payload::Key(key) => key.clone(),
        };
        let message = match self.config.framing {
            Framing::Plain => Message::text(payload.clone()),
            Framing::JupyterTerminal => Message::text(serde_json::json!(["stdin", payload]).to_string()),
        };
        let write_start = Instant::now();
        // Blocking (with a timeout) for the write, non-blocking again for the reads.
        let tcp = connection.socket.get_ref().tcp();
        let _ = tcp.set_nonblocking(false);
        let _ = tcp.set_write_timeout(Some(self.config.timeout));
        let sent = connection.socket.send(message);
        let written = Instant::now();
        let _ = connection.socket.get_ref().tcp().set_nonblocking(true);
        phases.write_ns = Some(nanos(written - write_start));
        if let Err(err) = sent {
            let failed = describe_ws_error(&err, "sending");
            self.fail_one(seq, intended, phases, reused, &failed);
            self.lost_connection(&failed);
            return;
        }
        let payload = if self.key.is_empty() { payload.into_bytes() } else { Vec::new() };
        self.pending.push_back(Pending {
            seq,
            intended,
            written,
            deadline: written + self.config.timeout,
            phases,
            reused,
            payload,
        });
    }

    /// Reads what arrives until `wake` (at least once), matching echoes as they come; returns
    /// after each data message, so the schedule is looked at again.
    ///
    /// The socket is non-blocking here: tungstenite may hold a whole next message in its
    /// buffer, so it is asked first, and only when it would block does the thread wait in
    /// `ppoll` for the socket, with a timeout as fine as the schedule needs.
    fn receive_until(&mut self, wake: Instant) {
        loop {
            let Some(connection) = self.connection.as_mut() else {
                // Nothing to read from: wait for the next due message (in slices, for stop).
                let left = wake.saturating_duration_since(Instant::now()).min(Duration::from_millis(50));
                std::thread::sleep(left.max(MIN_WAIT));
                return;
            };
            let read = connection.socket.read();
            let arrived = Instant::now();
            match read {
                Ok(Message::Text(text)) => return self.echo(text.as_bytes(), arrived),
                Ok(Message::Binary(bytes)) => return self.echo(&bytes, arrived),
                Ok(Message::Ping(_)) => {
                    self.counters.pings.fetch_add(1, Ordering::Relaxed);
                    // The pong tungstenite queued goes out now, not with the next message.
                    let _ = connection.socket.flush();
                    // A server that does nothing but ping must not hold the run past its
                    // schedule and timeouts: they are looked at again once `wake` is past.
                    if Instant::now() >= wake || self.stop.load(Ordering::Relaxed) {
                        return;
                    }
                }
                Ok(Message::Pong(_) | Message::Frame(_)) => {
                    if Instant::now() >= wake || self.stop.load(Ordering::Relaxed) {
                        return;
                    }
                }
                Ok(Message::Close(frame)) => {
                    self.counters.closes.fetch_add(1, Ordering::Relaxed);
                    let why = match frame {
                        Some(frame) if frame.reason.is_empty() => {
                            format!("the server closed the WebSocket (code {})", u16::from(frame.code))
                        }
                        Some(frame) => {
                            format!(
                                "the server closed the WebSocket (code {}: {})",
                                u16::from(frame.code),
                                frame.reason
                            )
                        }
                        None => "the server closed the WebSocket (no code)".to_string(),
                    };
                    // Answer the close (tungstenite queued the reply), then let the connection go.
                    let _ = connection.socket.flush();
                    self.lost_connection(&client::failure(ErrorClass::Io, why));
                    return;
                }
                Err(tungstenite::Error::Io(err)) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    if self.stop.load(Ordering::Relaxed) || !self.listening {
                        return;
                    }
                    let left = wake.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return;
                    }
                    // In slices of at most 50 ms, so a stop is noticed.
                    let readable =
                        wait_readable(connection.socket.get_ref().tcp(), left.min(Duration::from_millis(50)));
                    if !readable && Instant::now() >= wake {
                        return;
                    }
                }
                Err(tungstenite::Error::Io(err)) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => {
                    let failed = describe_ws_error(&err, "reading");
                    self.lost_connection(&failed);
                    return;
                }
            }
        }
    }

    /// A data message arrived: match it to what was sent.
    fn echo(&mut self, data: &[u8], arrived: Instant) {
        let text: std::borrow::Cow<'_, [u8]> = match self.config.framing {
            Framing::Plain => data.into(),
            Framing::JupyterTerminal => match jupyter_stdout(data) {
                Some(text) => text.into_bytes().into(),
                None => {
                    self.counters.other.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            },
        };
        if self.key.is_empty() {
            match self.pending.iter().position(|pending| pending.payload == *text) {
                Some(at) => {
                    let pending = self.pending.remove(at).expect("position is in range");
                    self.matched(pending, arrived, text.len() as u64);
                }
                None => {
                    self.counters.unmatched.fetch_add(1, Ordering::Relaxed);
                }
            }
            return;
        }
        let keys = count_occurrences(&text, &self.key);
        for _ in 0..keys {
            match self.pending.pop_front() {
                Some(pending) => self.matched(pending, arrived, self.key.len() as u64),
                None => {
                    self.counters.unmatched.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn matched(&mut self, pending: Pending, arrived: Instant, bytes: u64) {
        let mut phases = pending.phases;
        phases.wait_ns = Some(nanos(arrived.saturating_duration_since(pending.written)));
        let record = RequestRecord {
            run: Arc::clone(&self.run),
            seq: pending.seq,
            burst: None,
            sent_unix_ns: self.clock.unix_ns(pending.intended),
            total_ns: nanos(arrived.saturating_duration_since(pending.intended)),
            phases,
            reused: pending.reused,
            tls_verified: self.tls_verified,
            status: Some(101),
            body_bytes: bytes,
            error: None,
            error_detail: None,
            url: self.url.clone(),
            server_timing: Vec::new(),
            server_timing_dropped: 0,
        };
        self.emit(record);
    }

    /// Messages whose echo is overdue become `timeout` records.
    fn expire(&mut self, now: Instant) {
        while let Some(at) = self.pending.iter().position(|pending| pending.deadline <= now) {
            let pending = self.pending.remove(at).expect("position is in range");
            let failed = client::failure(ErrorClass::Timeout, format!("no echo within {:?}", self.config.timeout));
            self.fail_pending(pending, now, &failed);
        }
    }

    /// The connection is gone: every outstanding message fails with `failed`.
    fn lost_connection(&mut self, failed: &Failure) {
        if let Ok(mut last) = self.counters.last_close.lock() {
            *last = Some(failed.detail.clone());
        }
        self.connection = None;
        let now = Instant::now();
        while let Some(pending) = self.pending.pop_front() {
            let failed = client::failure(failed.class, format!("{} before its echo", failed.detail));
            self.fail_pending(pending, now, &failed);
        }
    }

    fn fail_pending(&mut self, pending: Pending, now: Instant, failed: &Failure) {
        let record = self.failure_record(pending.seq, pending.intended, now, pending.phases, pending.reused, failed);
        self.emit(record);
    }

    fn fail_one(&mut self, seq: u64, intended: Instant, phases: Phases, reused: bool, failed: &Failure) {
        let record = self.failure_record(seq, intended, Instant::now(), phases, reused, failed);
        self.emit(record);
    }

    fn failure_record(
        &self,
        seq: u64,
        intended: Instant,
        now: Instant,
        phases: Phases,
        reused: bool,
        failed: &Failure,
    ) -> RequestRecord {
        RequestRecord {
            run: Arc::clone(&self.run),
            seq,
            burst: None,
            sent_unix_ns: self.clock.unix_ns(intended),
            total_ns: nanos(now.saturating_duration_since(intended)),
            phases,
            reused,
            tls_verified: self.tls_verified,
            status: failed.response.map(|(status, _)| status),
            body_bytes: 0,
            error: Some(failed.class),
            error_detail: Some(failed.detail.clone()),
            url: self.url.clone(),
            server_timing: Vec::new(),
            server_timing_dropped: 0,
        }
    }

    fn emit(&mut self, record: RequestRecord) {
        if self.listening && self.sender.send(record).is_err() {
            self.listening = false;
        }
    }

    /// Opens a connection: dns, connect, tls, then the upgrade; for a Jupyter terminal, also
    /// drains its first prompt.
    fn open(&mut self, phases: &mut Phases, deadline: Instant) -> Result<WebSocket<Stream>, Failure> {
        let target = &self.config.target;
        let stream = client::open(target, self.config.tls.as_ref(), phases, deadline)?;
        let upgrade_start = Instant::now();
        let url = crate::url::ws_url(target);
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|err| client::failure(ErrorClass::Protocol, format!("cannot build the upgrade: {err}")))?;
        for (name, value) in &self.config.headers {
            let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) else {
                return Err(client::failure(ErrorClass::Protocol, format!("invalid header {name:?}")));
            };
            request.headers_mut().insert(name, value);
        }
        let left = client::remaining(deadline)?;
        let _ = stream.tcp().set_read_timeout(Some(left));
        let _ = stream.tcp().set_write_timeout(Some(left));
        // Our messages are small; what can pile up unsent is the pongs to a server that pings
        // and never reads: bounded, past it a pong waits (only the newest is kept).
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE))
            .max_write_buffer_size(MAX_UNSENT);
        let mut attempt = tungstenite::client::client_with_config(request, stream, Some(config));
        let socket = loop {
            match attempt {
                Ok((socket, _response)) => break socket,
                Err(HandshakeError::Interrupted(mid)) => {
                    // SO_RCVTIMEO can fire a little early: go on until the deadline really passed.
                    let left = match client::remaining(deadline) {
                        Ok(left) => left,
                        Err(failed) => {
                            phases.upgrade_ns = Some(nanos(upgrade_start.elapsed()));
                            return Err(client::failure(failed.class, "no answer to the WebSocket upgrade in time"));
                        }
                    };
                    let _ = mid.get_ref().get_ref().tcp().set_read_timeout(Some(left));
                    attempt = mid.handshake();
                }
                Err(HandshakeError::Failure(err)) => {
                    phases.upgrade_ns = Some(nanos(upgrade_start.elapsed()));
                    return Err(describe_ws_error(&err, "upgrading"));
                }
            }
        };
        phases.upgrade_ns = Some(nanos(upgrade_start.elapsed()));
        self.counters.connections.fetch_add(1, Ordering::Relaxed);
        let mut socket = socket;
        if self.config.framing == Framing::JupyterTerminal {
            self.settle(&mut socket);
        }
        socket
            .get_ref()
            .tcp()
            .set_nonblocking(true)
            .map_err(|err| client::failure(classify_io(&err), err.to_string()))?;
        Ok(socket)
    }

    /// A new terminal prints its prompt (and `setup`): read until it has been quiet for
    /// [`SETTLE_QUIET`], so none of it is taken for an echo. The terminal is made wide, so a
    /// held key never wraps the line (readline would redraw it).
    fn settle(&self, socket: &mut WebSocket<Stream>) {
        let _ = socket.send(Message::text(serde_json::json!(["set_size", 50, 4000]).to_string()));
        let end = Instant::now() + SETTLE_MAX;
        let mut quiet_since = Instant::now();
        while Instant::now() < end && quiet_since.elapsed() < SETTLE_QUIET && !self.stop.load(Ordering::Relaxed) {
            let _ = socket.get_ref().tcp().set_read_timeout(Some(Duration::from_millis(50)));
            match socket.read() {
                Ok(Message::Text(_) | Message::Binary(_)) => quiet_since = Instant::now(),
                Ok(_) => {}
                Err(tungstenite::Error::Io(err))
                    if matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return,
            }
        }
    }

    /// Says goodbye: a close frame, and up to a second for the server's.
    fn close(&mut self) {
        let Some(mut connection) = self.connection.take() else { return };
        let _ = connection.socket.get_ref().tcp().set_nonblocking(false);
        let _ = connection.socket.close(None);
        let end = Instant::now() + Duration::from_secs(1);
        while Instant::now() < end {
            let _ = connection.socket.get_ref().tcp().set_read_timeout(Some(Duration::from_millis(100)));
            match connection.socket.read() {
                Ok(_) => {}
                Err(tungstenite::Error::Io(err))
                    if matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
    }
}

/// Waits up to `timeout` for `tcp` to have something to read (or an error, or its end);
/// false when the time ran out.
fn wait_readable(tcp: &std::net::TcpStream, timeout: Duration) -> bool {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd { fd: tcp.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let timespec = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(i32::try_from(timeout.subsec_nanos()).unwrap_or(0)),
    };
    // SAFETY: `poll` is one valid pollfd for the duration of the call, `timespec` a valid
    // timeout, and no signal mask is passed.
    let ready = unsafe { libc::ppoll(&mut poll, 1, &timespec, std::ptr::null()) };
    ready > 0
}

/// A tungstenite error as a probe failure: its class, and words naming what was being done.
fn describe_ws_error(err: &tungstenite::Error, doing: &str) -> Failure {
    match err {
        tungstenite::Error::Http(response) => {
            let status = response.status().as_u16();
            let mut failed = client::failure(
                ErrorClass::Protocol,
                format!(
                    "the server answered the WebSocket upgrade with HTTP {status} {}, not 101",
                    response.status().canonical_reason().unwrap_or("")
                )
                .trim_end()
                .replace(" , not", ", not"),
            );
            failed.response = Some((status, 0));
            failed
        }
        tungstenite::Error::Io(io) => client::failure(classify_io(io), format!("{doing}: {io}")),
        tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => {
            client::failure(ErrorClass::Io, format!("{doing}: the connection is closed"))
        }
        tungstenite::Error::Tls(tls) => client::failure(ErrorClass::Tls, format!("{doing}: {tls}")),
        other => client::failure(ErrorClass::Protocol, format!("{doing}: {other}")),
    }
}

/// `["stdout", "text"]` → `text`; anything else (`setup`, `disconnect`, not JSON) → `None`.
fn jupyter_stdout(data: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(data).ok()?;
    let array = value.as_array()?;
    (array.first()?.as_str()? == "stdout").then(|| array.get(1)?.as_str().map(str::to_string))?
}

/// Non-overlapping occurrences of `needle` in `haystack`.
fn count_occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    if needle.is_empty() {
        return 0;
    }
    let (mut count, mut at) = (0, 0);
    while at + needle.len() <= haystack.len() {
        if &haystack[at..at + needle.len()] == needle {
            count += 1;
            at += needle.len();
        } else {
            at += 1;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jupyter_messages() {
        assert_eq!(jupyter_stdout(br#"["stdout", "jj"]"#).as_deref(), Some("jj"));
        assert_eq!(jupyter_stdout(br#"["setup", {}]"#), None);
        assert_eq!(jupyter_stdout(br#"["stdout"]"#), None);
        assert_eq!(jupyter_stdout(b"not json"), None);
    }

    #[test]
    fn counting_keys() {
        assert_eq!(count_occurrences(b"jjj", b"j"), 3);
        assert_eq!(count_occurrences(b"\x1b[Kj\rj", b"j"), 2);
        assert_eq!(count_occurrences(b"abab", b"ab"), 2);
        assert_eq!(count_occurrences(b"aaa", b"aa"), 1);
        assert_eq!(count_occurrences(b"x", b""), 0);
    }
}
