//! The HTTP/1.1 client: the only network I/O in this crate.
//!
//! Hand-written on `std::net::TcpStream` (and rustls for HTTPS) so that every phase has its
//! own clock reading: name resolution, connect, TLS handshake, writing the request, waiting
//! for the first response byte, and the transfer of the rest. A library client would hide
//! exactly the boundaries a latency investigation needs.
//!
//! What it deliberately does not do: redirects, compression, pipelining, HTTP/2, proxies,
//! happy eyeballs (addresses are tried in resolver order), or a DNS timeout (`getaddrinfo`
//! cannot be interrupted; a lookup that outlives the deadline is classified `timeout` once
//! it returns). The socket sets `TCP_NODELAY` and the request goes out in one `write`, so
//! any Nagle delay that shows up belongs to the server.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;

use crate::http::{build_request, parse_head, ChunkedDecoder, Framing, RequestSpec};
use crate::outcome::{ErrorClass, Phases, PLAIN_HTTP_DETAIL};
use crate::server_timing::{self, Substep};
use crate::tls::TlsConfig;
use crate::url::Target;

/// Everything a worker's client needs; shared by all workers of a run.
#[derive(Debug)]
pub struct ClientConfig {
    pub target: Target,
    pub request: RequestSpec,
    /// Deadline for one request, from its actual start to the end of the body.
    pub timeout: Duration,
    /// Keep the connection for the next request when the server allows it.
    pub reuse: bool,
    /// Required for `https` targets: whom to trust, see [`crate::tls`].
    pub tls: Option<TlsConfig>,
}

/// What one request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub phases: Phases,
    /// When the response ended or the request failed.
    pub end: Instant,
    pub reused: bool,
    pub status: Option<u16>,
    pub body_bytes: u64,
    pub error: Option<(ErrorClass, String)>,
    /// `https` only: whether the server's certificate was (to be) verified; `Some(false)`
    /// under `--insecure`, on every request of the run whether or not it got that far.
    pub tls_verified: Option<bool>,
    /// The response head's `Server-Timing` substeps (empty, unallocated, when it had none).
    pub server_timing: Vec<Substep>,
    /// Server-Timing metrics not kept (see [`server_timing::Dropped`]).
    pub server_timing_dropped: u32,
}

#[derive(Debug)]
pub struct Failure {
    pub class: ErrorClass,
    pub detail: String,
    /// The status and body bytes that had arrived when a request failed after its response
    /// head (a body cut short, a deadline passed mid-body): kept, not reported as nothing.
    pub response: Option<(u16, u64)>,
}

pub fn failure(class: ErrorClass, detail: impl Into<String>) -> Failure {
    Failure { class, detail: detail.into(), response: None }
}

/// A connection, plain or TLS; also what the WebSocket probe and remote write speak over.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if matches!(self, Stream::Plain(_)) { "plain" } else { "tls" };
        f.debug_struct("Stream").field("kind", &kind).field("peer", &self.tcp().peer_addr().ok()).finish()
    }
}

impl Stream {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(tls) => &tls.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.read(buffer),
            Stream::Tls(tls) => tls.read(buffer),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.write(buffer),
            Stream::Tls(tls) => tls.write(buffer),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(tcp) => tcp.flush(),
            Stream::Tls(tls) => tls.flush(),
        }
    }
}

/// One worker's client: at most one open connection, reused across requests.
pub struct Client {
    config: Arc<ClientConfig>,
    /// The request bytes, built once.
    request: Vec<u8>,
    head_request: bool,
    /// Owned by this client alone; dropped (closed) on any error or when not reusable.
    connection: Option<Stream>,
    /// Response head bytes; reused across requests.
    head: Vec<u8>,
    /// Read buffer for the body.
    scratch: Vec<u8>,
    /// The current response's Server-Timing substeps, handed to its [`Outcome`].
    server_timing: Vec<Substep>,
    server_timing_dropped: server_timing::Dropped,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("target", &self.config.target).finish_non_exhaustive()
    }
}

/// How an exchange on a connection ended.
enum Exchange {
    Done {
        status: u16,
        body_bytes: u64,
        keep: Option<Stream>,
    },
    /// A kept connection turned out closed before any response byte: try a new one.
    Stale,
    Failed(Failure),
}

impl Client {
    pub fn new(config: Arc<ClientConfig>) -> Self {
        let mut spec = config.request.clone();
        spec.close = !config.reuse;
        let request = build_request(&config.target, &spec);
        let head_request = spec.method.eq_ignore_ascii_case("HEAD");
        Self {
            config,
            request,
            head_request,
            connection: None,
            head: Vec::with_capacity(4096),
            scratch: vec![0; 64 * 1024],
            server_timing: Vec::new(),
            server_timing_dropped: server_timing::Dropped::default(),
        }
    }

    /// Sends one request starting now; the deadline is `timeout` from now.
    pub fn request(&mut self) -> Outcome {
        let start = Instant::now();
        let deadline = start + self.config.timeout;
        let mut phases = Phases::default();
        let mut reused = false;
        let mut result = None;
        if let Some(stream) = self.connection.take() {
            match self.exchange(stream, &mut phases, deadline, true) {
                Exchange::Stale => phases = Phases::default(),
                done => {
                    reused = true;
                    result = Some(done);
                }
            }
        }
        let result = match result {
            Some(done) => done,
            None => match self.connect(&mut phases, deadline) {
                Ok(stream) => self.exchange(stream, &mut phases, deadline, false),
                Err(failed) => Exchange::Failed(failed),
            },
        };
        let end = Instant::now();
        let tls_verified =
            self.config.tls.as_ref().filter(|_| self.config.target.tls).map(|tls| tls.verifies_certificates);
        // Taking an empty Vec allocates nothing: a server without Server-Timing costs nothing.
        let server_timing = std::mem::take(&mut self.server_timing);
        let server_timing_dropped = std::mem::take(&mut self.server_timing_dropped).total();
        match result {
            Exchange::Done { status, body_bytes, keep } => {
                self.connection = keep;
                let error = match status {
                    400..=499 => Some((ErrorClass::Http4xx, format!("HTTP {status}"))),
                    500..=599 => Some((ErrorClass::Http5xx, format!("HTTP {status}"))),
                    _ => None,
                };
                Outcome {
                    phases,
                    end,
                    reused,
                    status: Some(status),
                    body_bytes,
                    error,
                    tls_verified,
                    server_timing,
                    server_timing_dropped,
                }
            }
            Exchange::Failed(failed) => Outcome {
                phases,
                end,
                reused,
                status: failed.response.map(|(status, _)| status),
                body_bytes: failed.response.map_or(0, |(_, bytes)| bytes),
                error: Some((failed.class, failed.detail)),
                tls_verified,
                server_timing,
                server_timing_dropped,
            },
            Exchange::Stale => Outcome {
                phases,
                end,
                reused,
                status: None,
                body_bytes: 0,
                error: Some((ErrorClass::Io, "connection closed before the response".into())),
                tls_verified,
                server_timing,
                server_timing_dropped,
            },
        }
    }

    /// DNS, connect and (for https) the TLS handshake, each timed into `phases`.
    fn connect(&self, phases: &mut Phases, deadline: Instant) -> Result<Stream, Failure> {
        open(&self.config.target, self.config.tls.as_ref(), phases, deadline)
    }

    /// Writes the request and reads the response on `stream`.
    fn exchange(&mut self, mut stream: Stream, phases: &mut Phases, deadline: Instant, reused: bool) -> Exchange {
        match self.exchange_inner(&mut stream, phases, deadline, reused) {
            Ok((status, body_bytes, keep_alive)) => {
                let keep = (self.config.reuse && keep_alive).then_some(stream);
                Exchange::Done { status, body_bytes, keep }
            }
            Err(None) => Exchange::Stale,
            Err(Some(failed)) => Exchange::Failed(failed),
        }
    }

    /// `Err(None)`: a reused connection was found closed before any response byte.
    fn exchange_inner(
        &mut self,
        stream: &mut Stream,
        phases: &mut Phases,
        deadline: Instant,
        reused: bool,
    ) -> Result<(u16, u64, bool), Option<Failure>> {
        let write_start = Instant::now();
        let remaining = remaining(deadline)?;
        stream.tcp().set_write_timeout(Some(remaining)).map_err(|err| failure(classify_io(&err), err.to_string()))?;
        if let Err(err) = stream.write_all(&self.request).and_then(|()| stream.flush()) {
            if reused && is_closed(&err) {
                return Err(None);
            }
            return Err(Some(failure(classify_io(&err), format!("writing the request: {err}"))));
        }
        let written = Instant::now();
        phases.write_ns = Some(nanos(written - write_start));

        self.head.clear();
        let mut first_byte: Option<Instant> = None;
        let head = loop {
            match parse_head(&self.head, self.head_request) {
                // An interim response (100 Continue, 103 Early Hints): skip it, keep waiting.
                Ok(Some(head)) if (100..200).contains(&head.status) && head.status != 101 => {
                    self.head.drain(..head.length);
                    continue;
                }
                Ok(Some(head)) => break head,
                Ok(None) => {}
                Err(err) => return Err(Some(failure(ErrorClass::Protocol, err.to_string()))),
            }
            let read = read_some(stream, &mut self.scratch, deadline)?;
            if read == 0 {
                if reused && first_byte.is_none() {
                    return Err(None);
                }
                return Err(Some(failure(ErrorClass::Io, "connection closed before the response head ended")));
            }
            if first_byte.is_none() {
                let now = Instant::now();
                phases.wait_ns = Some(nanos(now - written));
                first_byte = Some(now);
            }
            self.head.extend_from_slice(&self.scratch[..read]);
        };
        let first_byte = first_byte.unwrap_or(written);
        self.server_timing.clear();
        self.server_timing_dropped = server_timing::Dropped::default();
        if head.server_timing {
            for value in crate::http::header_values(&self.head[..head.length], b"server-timing") {
                server_timing::parse_into(value, &mut self.server_timing, &mut self.server_timing_dropped);
            }
        }
        let mut body_bytes = 0u64;
        let read = self.read_body(stream, &head, deadline, &mut body_bytes);
        phases.transfer_ns = Some(nanos(first_byte.elapsed()));
        match read {
            Ok(keep_alive) => Ok((head.status, body_bytes, keep_alive)),
            Err(Some(mut failed)) => {
                failed.response = Some((head.status, body_bytes));
                Err(Some(failed))
            }
            Err(None) => Err(None),
        }
    }

    /// Reads the body `head` announces, counting into `body_bytes` as it arrives (so a failure
    /// part way still tells how much came); `Ok` says whether the connection can be reused.
    fn read_body(
        &mut self,
        stream: &mut Stream,
        head: &crate::http::Head,
        deadline: Instant,
        body_bytes: &mut u64,
    ) -> Result<bool, Option<Failure>> {
        let already = &self.head[head.length..];
        let mut keep_alive = head.keep_alive;
        match head.framing {
            Framing::Empty => keep_alive &= already.is_empty(),
            Framing::Length(length) => {
                *body_bytes = (already.len() as u64).min(length);
                keep_alive &= already.len() as u64 <= length;
                while *body_bytes < length {
                    let read = read_some(stream, &mut self.scratch, deadline)?;
                    if read == 0 {
                        return Err(Some(failure(
                            ErrorClass::Io,
                            format!("connection closed after {} of {length} body bytes", *body_bytes),
                        )));
                    }
                    *body_bytes += read as u64;
                }
                keep_alive &= *body_bytes == length;
            }
            Framing::Chunked => {
                let mut decoder = ChunkedDecoder::default();
                let protocol = |err: crate::http::HttpError| Some(failure(ErrorClass::Protocol, err.to_string()));
                let (used, mut done) = decoder.feed(already).map_err(protocol)?;
                *body_bytes = decoder.body_bytes;
                keep_alive &= used == already.len();
                while !done {
                    let read = read_some(stream, &mut self.scratch, deadline)?;
                    if read == 0 {
                        return Err(Some(failure(ErrorClass::Io, "connection closed inside a chunked body")));
                    }
                    let (used, finished) = decoder.feed(&self.scratch[..read]).map_err(protocol)?;
                    *body_bytes = decoder.body_bytes;
                    keep_alive &= used == read;
                    done = finished;
                }
                *body_bytes = decoder.body_bytes;
            }
            Framing::UntilClose => {
                *body_bytes = already.len() as u64;
                loop {
                    match read_some(stream, &mut self.scratch, deadline) {
                        Ok(0) => break,
                        Ok(read) => *body_bytes += read as u64,
                        // A TLS peer that closes without close_notify ends a close-delimited
                        // body the same way a plain one does.
                        Err(Some(failed))
                            if failed.class == ErrorClass::Tls && failed.detail.contains("close_notify") =>
                        {
                            break
                        }
                        Err(failed) => return Err(failed),
                    }
                }
                keep_alive = false;
            }
        }
        Ok(keep_alive)
    }
}

/// DNS, connect and (for TLS targets) the handshake, each timed into `phases`, all within
/// `deadline`. `tls` is required for TLS targets.
pub fn open(
    target: &Target,
    tls: Option<&TlsConfig>,
    phases: &mut Phases,
    deadline: Instant,
) -> Result<Stream, Failure> {
    let started = Instant::now();
    let resolved = (target.host.as_str(), target.port).to_socket_addrs();
    let resolved_at = Instant::now();
    phases.dns_ns = Some(nanos(resolved_at - started));
    let addresses: Vec<SocketAddr> = match resolved {
        Ok(addresses) => addresses.collect(),
        Err(err) => return Err(failure(ErrorClass::Dns, format!("cannot resolve {}: {err}", target.host))),
    };
    if addresses.is_empty() {
        return Err(failure(ErrorClass::Dns, format!("{} has no address", target.host)));
    }
    if resolved_at >= deadline {
        return Err(failure(ErrorClass::Timeout, "name resolution outlived the timeout"));
    }
    let mut last_error = None;
    let mut connected = None;
    for address in &addresses {
        let remaining = remaining(deadline)?;
        match TcpStream::connect_timeout(address, remaining) {
            Ok(tcp) => {
                connected = Some(tcp);
                break;
            }
            Err(err) => last_error = Some((address, err)),
        }
    }
    let connected_at = Instant::now();
    phases.connect_ns = Some(nanos(connected_at - resolved_at));
    let tcp = match (connected, last_error) {
        (Some(tcp), _) => tcp,
        (None, Some((address, err))) => {
            return Err(failure(classify_io(&err), format!("cannot connect to {address}: {err}")))
        }
        (None, None) => return Err(failure(ErrorClass::Io, "no address to connect to")),
    };
    // Our request goes out in one write, so Nagle could only delay the TLS handshake.
    let _ = tcp.set_nodelay(true);
    if !target.tls {
        return Ok(Stream::Plain(tcp));
    }
    let Some(tls_config) = tls else {
        return Err(failure(ErrorClass::Tls, "https without a TLS configuration"));
    };
    let name = ServerName::try_from(target.host.clone())
        .map_err(|err| failure(ErrorClass::Tls, format!("invalid server name {}: {err}", target.host)))?;
    let mut session = rustls::ClientConnection::new(Arc::clone(&tls_config.rustls), name)
        .map_err(|err| failure(ErrorClass::Tls, err.to_string()))?;
    // The handshake runs to completion here, not lazily inside the first write, so its
    // cost lands in `tls` and never in `write` or `wait`. It ends when our last flight
    // (client Finished) is written; TLS 1.3 session tickets that follow are read with
    // the response.
    let mut tcp = tcp;
    let mut first_bytes = FirstBytes::default();
    while session.is_handshaking() {
        let remaining = remaining(deadline)?;
        set_timeouts(&tcp, remaining)?;
        if let Err(err) = session.complete_io(&mut Watched { tcp: &mut tcp, first: &mut first_bytes }) {
            let class = match classify_io(&err) {
                ErrorClass::Timeout => ErrorClass::Timeout,
                _ => ErrorClass::Tls,
            };
            phases.tls_ns = Some(nanos(connected_at.elapsed()));
            let detail = match first_bytes.http_status_line() {
                Some(status) => plain_http_detail(target, &status),
                None => describe_handshake_error(&err, tls_config),
            };
            return Err(failure(class, detail));
        }
    }
    phases.tls_ns = Some(nanos(connected_at.elapsed()));
    Ok(Stream::Tls(Box::new(rustls::StreamOwned::new(session, tcp))))
}

/// The first bytes the server sent during a TLS handshake. A TLS server's first byte is a
/// record type (22, handshake; 21, alert); a plain HTTP server reads our ClientHello as a
/// garbled request and answers `HTTP/1.1 400 Bad Request`, which is worth recognizing: the fix
/// is the URL's scheme, not the trust store.
#[derive(Debug)]
struct FirstBytes {
    bytes: [u8; 64],
    len: usize,
}

impl Default for FirstBytes {
    fn default() -> Self {
        Self { bytes: [0; 64], len: 0 }
    }
}

impl FirstBytes {
    fn keep(&mut self, read: &[u8]) {
        let room = self.bytes.len() - self.len;
        let take = room.min(read.len());
        self.bytes[self.len..self.len + take].copy_from_slice(&read[..take]);
        self.len += take;
    }

    /// `HTTP/1.1 400 Bad Request` when the server answered in HTTP.
    fn http_status_line(&self) -> Option<String> {
        let seen = &self.bytes[..self.len];
        if !seen.starts_with(b"HTTP/") {
            return None;
        }
        let line = seen.split(|&byte| byte == b'\r' || byte == b'\n').next().unwrap_or(seen);
        Some(String::from_utf8_lossy(line).into_owned())
    }
}

/// The socket as the handshake uses it, keeping the first bytes read in `first`.
struct Watched<'a> {
    tcp: &'a mut TcpStream,
    first: &'a mut FirstBytes,
}

impl Read for Watched<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let read = self.tcp.read(buffer)?;
        self.first.keep(&buffer[..read]);
        Ok(read)
    }
}

impl Write for Watched<'_> {
    fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
        self.tcp.write(buffer)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.tcp.flush()
    }
}

/// "the server does not speak TLS: it answered the TLS handshake with \"HTTP/1.1 400 Bad
/// Request\"; is it http://127.0.0.1:8080/?" (starts with [`PLAIN_HTTP_DETAIL`]).
fn plain_http_detail(target: &Target, status_line: &str) -> String {
    let authority = if target.port == 443 { format!("{}:443", target.authority) } else { target.authority.clone() };
    format!(
        "{PLAIN_HTTP_DETAIL}: it answered the TLS handshake with {status_line:?}; is it http://{authority}{}?",
        target.path
    )
}

/// "TLS handshake: invalid peer certificate: UnknownIssuer (trusting only the 1 root in
/// ca.pem)": a certificate failure says which roots it was checked against, because "unknown
/// issuer" alone does not tell a private CA missing from a wrong one.
fn describe_handshake_error(err: &std::io::Error, tls: &TlsConfig) -> String {
    let certificate = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|rustls_error| matches!(rustls_error, rustls::Error::InvalidCertificate(_)));
    if certificate {
        // webpki accepts only a leaf as the server's certificate; `openssl req -x509` marks a
        // self-signed one CA:TRUE by default, which curl accepts and this client refuses. The
        // reason sits in an opaque `OtherError`, so its name is matched in the text.
        let hint = if err.to_string().contains("CaUsedAsEndEntity") {
            "; the server's own certificate is marked CA:TRUE: re-issue it with basicConstraints CA:FALSE, or sign a leaf with that CA"
        } else {
            ""
        };
        format!("TLS handshake: {err} (trusting {}{hint})", tls.trusting)
    } else {
        format!("TLS handshake: {err}")
    }
}

/// Reads what is available, with the socket's timeout set to what is left of the deadline.
///
/// `SO_RCVTIMEO` can expire a little before our monotonic deadline (seen: 21 µs early on a
/// 200 ms timeout), so a timeout before the deadline re-arms with what is left: a request is
/// classed `timeout` only once its deadline has really passed.
pub fn read_some(stream: &mut Stream, buffer: &mut [u8], deadline: Instant) -> Result<usize, Option<Failure>> {
    let left = remaining(deadline)?;
    stream.tcp().set_read_timeout(Some(left)).map_err(|err| failure(classify_io(&err), err.to_string()))?;
    loop {
        match stream.read(buffer) {
            Ok(read) => return Ok(read),
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(err)
                if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) && Instant::now() < deadline =>
            {
                let left = remaining(deadline)?;
                stream.tcp().set_read_timeout(Some(left)).map_err(|err| failure(classify_io(&err), err.to_string()))?;
            }
            Err(err) if err.kind() == ErrorKind::UnexpectedEof && matches!(stream, Stream::Tls(_)) => {
                return Err(Some(failure(ErrorClass::Tls, format!("peer closed without close_notify: {err}"))))
            }
            Err(err) => return Err(Some(failure(classify_io(&err), format!("reading the response: {err}")))),
        }
    }
}

pub fn remaining(deadline: Instant) -> Result<Duration, Failure> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(failure(ErrorClass::Timeout, "deadline passed"));
    }
    Ok(left)
}

fn set_timeouts(tcp: &TcpStream, remaining: Duration) -> Result<(), Failure> {
    tcp.set_read_timeout(Some(remaining))
        .and_then(|()| tcp.set_write_timeout(Some(remaining)))
        .map_err(|err| failure(classify_io(&err), err.to_string()))
}

/// A kept connection the server closed while idle: EOF, reset or broken pipe.
fn is_closed(err: &std::io::Error) -> bool {
    matches!(err.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe | ErrorKind::ConnectionAborted)
}

/// Socket errors by class. Timeouts surface as `WouldBlock` (`EAGAIN` from a socket with
/// `SO_RCVTIMEO`) or `TimedOut` (connect); rustls errors arrive wrapped as `InvalidData`.
pub fn classify_io(err: &std::io::Error) -> ErrorClass {
    const ENETUNREACH: i32 = 101;
    const EHOSTUNREACH: i32 = 113;
    if err.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
        return ErrorClass::Tls;
    }
    match err.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => ErrorClass::Timeout,
        ErrorKind::ConnectionRefused => ErrorClass::Refused,
        _ if matches!(err.raw_os_error(), Some(ENETUNREACH | EHOSTUNREACH)) => ErrorClass::Unreachable,
        _ => ErrorClass::Io,
    }
}

pub fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Largest body [`fetch`] keeps.
const FETCH_MAX_BODY: usize = 1 << 20;

/// A connection of its own to `target` (dns, connect and for TLS targets the handshake) within
/// `timeout`, for requests that are not measured (remote write's POSTs); the error in words.
/// Sends `bytes` bytes to this process itself over a loopback TCP connection (a listener on
/// 127.0.0.1, a connect to it, the bytes read back to the end): traffic whose every figure is
/// known, for `proctor doctor` to check that per-process network counts it. Here so that this
/// crate stays the one place that opens connections.
pub fn loopback_exchange(bytes: usize) -> std::io::Result<()> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let mut client = TcpStream::connect(listener.local_addr()?)?;
    let (mut server, _) = listener.accept()?;
    client.write_all(&vec![7u8; bytes])?;
    drop(client);
    let mut got = Vec::with_capacity(bytes);
    server.read_to_end(&mut got)?;
    if got.len() == bytes {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("{} of {bytes} bytes came back", got.len())))
    }
}

pub fn connect(target: &Target, tls: Option<&TlsConfig>, timeout: Duration) -> Result<Stream, String> {
    open(target, tls, &mut Phases::default(), Instant::now() + timeout).map_err(|failed| failed.detail)
}

/// One request on a connection of its own (`Connection: close`), body kept (at most 1 MiB):
/// the REST calls around a probe (Jupyter's terminal API), not a measured request.
pub fn fetch(
    target: &Target,
    tls: Option<&TlsConfig>,
    spec: &crate::http::RequestSpec,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), String> {
    fetch_at_most(target, tls, spec, timeout, FETCH_MAX_BODY)
}

/// [`fetch`] keeping a body of at most `max_body` bytes (a longer one is an error, found before
/// more than about `max_body` bytes are held): another agent's API (`top --connect`,
/// `alerts status`). The whole exchange, connect to the body's end, is within `timeout`.
pub fn fetch_at_most(
    target: &Target,
    tls: Option<&TlsConfig>,
    spec: &crate::http::RequestSpec,
    timeout: Duration,
    max_body: usize,
) -> Result<(u16, Vec<u8>), String> {
    let deadline = Instant::now() + timeout;
    // A read that ran into the deadline says which deadline, not the socket's EAGAIN.
    let said = |failed: Failure| match failed.class {
        ErrorClass::Timeout => format!("no whole answer within {timeout:?}"),
        _ => failed.detail,
    };
    let mut spec = spec.clone();
    spec.close = true;
    let mut stream = open(target, tls, &mut Phases::default(), deadline).map_err(|failed| failed.detail)?;
    let remaining_now = remaining(deadline).map_err(|failed| failed.detail)?;
    let _ = stream.tcp().set_write_timeout(Some(remaining_now));
    stream
        .write_all(&build_request(target, &spec))
        .and_then(|()| stream.flush())
        .map_err(|err| format!("writing the request: {err}"))?;
    let mut buffer = Vec::new();
    let mut scratch = vec![0; 16 * 1024];
    let head = loop {
        if let Some(head) = parse_head(&buffer, spec.method.eq_ignore_ascii_case("HEAD")).map_err(|e| e.to_string())? {
            if (100..200).contains(&head.status) {
                buffer.drain(..head.length);
                continue;
            }
            break head;
        }
        match read_some(&mut stream, &mut scratch, deadline) {
            Ok(0) => return Err("connection closed before the response head ended".into()),
            Ok(read) => buffer.extend_from_slice(&scratch[..read]),
            Err(failed) => return Err(failed.map_or_else(|| "connection closed".into(), said)),
        }
    };
    let mut body = buffer.split_off(head.length);
    // A chunked body's end is found by feeding each new piece once.
    let mut chunks = ChunkedDecoder::default();
    let mut fed = 0;
    loop {
        let complete = match head.framing {
            Framing::Empty => true,
            Framing::Length(length) => body.len() as u64 >= length,
            Framing::Chunked => {
                let (_, done) = chunks.feed(&body[fed..]).map_err(|err| err.to_string())?;
                fed = body.len();
                done
            }
            Framing::UntilClose => false,
        };
        if complete {
            break;
        }
        if body.len() > max_body || matches!(head.framing, Framing::Length(length) if length > max_body as u64) {
            return Err(format!("response body over {max_body} bytes"));
        }
        match read_some(&mut stream, &mut scratch, deadline) {
            Ok(0) if head.framing == Framing::UntilClose => break,
            Ok(0) => return Err("connection closed inside the response body".into()),
            Ok(read) => body.extend_from_slice(&scratch[..read]),
            Err(Some(failed)) if failed.class == ErrorClass::Tls && failed.detail.contains("close_notify") => break,
            Err(failed) => return Err(failed.map_or_else(|| "connection closed".into(), said)),
        }
    }
    if let Framing::Length(length) = head.framing {
        body.truncate(usize::try_from(length).unwrap_or(usize::MAX));
    }
    if head.framing == Framing::Chunked {
        body = crate::http::dechunk(&body).0;
    }
    Ok((head.status, body))
}
