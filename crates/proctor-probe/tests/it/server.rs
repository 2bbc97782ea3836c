//! A loopback HTTP/1.1 server for the tests, plain or HTTPS (rustls `ServerConnection` over
//! the same std `TcpStream`): one thread per connection, keep-alive, and a per-request
//! [`Action`] chosen from a global request counter.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub enum Action {
    /// `200` with a 5-byte body after `delay`; `split`: head and body in two writes.
    Reply { delay: Duration, split: bool },
    /// `200` after `delay` with a body of `body` bytes: the length tells the client's record
    /// which reply it was.
    Tagged { delay: Duration, body: usize },
    /// An empty response with this status.
    Status(u16),
    /// Chunked body "hello world" (11 bytes).
    Chunked,
    /// No length: "hello world", then close.
    UntilClose,
    /// Read the request, never answer (the connection stays open 5 s).
    Stall,
    /// `200` announcing 100 body bytes, send 5 of them, then stall 5 s.
    StallBody,
    /// `200` with a 5-byte body after `delay`, carrying each of `headers` as a
    /// `Server-Timing` header.
    ServerTiming { delay: Duration, headers: &'static [&'static str] },
}

pub struct Server {
    port: u16,
    scheme: &'static str,
}

/// Each accepted connection, handed to a thread of its own.
type Accept = Box<dyn Fn(TcpStream) + Send + Sync>;

/// The accept loop on a thread that lives until the test binary exits.
fn listen(nodelay: bool, accept: Accept) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("local addr").port();
    let accept = Arc::new(accept);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            stream.set_nodelay(nodelay).expect("nodelay");
            let accept = Arc::clone(&accept);
            std::thread::spawn(move || accept(stream));
        }
    });
    port
}

impl Server {
    /// `nodelay`: set TCP_NODELAY on accepted sockets. The accept thread lives until the test
    /// binary exits; connections end when the client closes them.
    pub fn start(nodelay: bool, action: impl Fn(u64) -> Action + Send + Sync + 'static) -> Server {
        let counter = AtomicU64::new(0);
        let port = listen(nodelay, Box::new(move |mut stream| serve(&mut stream, &action, &counter)));
        Server { port, scheme: "http" }
    }

    /// HTTPS with `tls` (TCP_NODELAY on). Every new connection first waits `handshake_delay`
    /// before reading the ClientHello, so the client's `tls` phase has a known floor while
    /// its `connect` (completed by the kernel's backlog) and later phases do not.
    pub fn start_tls(
        tls: Arc<rustls::ServerConfig>,
        handshake_delay: Duration,
        action: impl Fn(u64) -> Action + Send + Sync + 'static,
    ) -> Server {
        let counter = AtomicU64::new(0);
        let port = listen(
            true,
            Box::new(move |tcp| {
                std::thread::sleep(handshake_delay);
                let Ok(session) = rustls::ServerConnection::new(Arc::clone(&tls)) else { return };
                // The handshake happens inside the first read; a client that rejects our
                // certificate ends it there with an alert, and `serve` returns.
                let mut stream = rustls::StreamOwned::new(session, tcp);
                serve(&mut stream, &action, &counter);
                stream.conn.send_close_notify();
                let _ = stream.flush();
            }),
        );
        Server { port, scheme: "https" }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}://127.0.0.1:{}{path}", self.scheme, self.port)
    }
}

fn serve(stream: &mut (impl Read + Write), action: &dyn Fn(u64) -> Action, counter: &AtomicU64) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // Requests in these tests have no body: the head ends the request.
        while !buffer.windows(4).any(|window| window == b"\r\n\r\n") {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(read) => buffer.extend_from_slice(&chunk[..read]),
            }
        }
        let end = buffer.windows(4).position(|window| window == b"\r\n\r\n").map_or(0, |at| at + 4);
        let close = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase().contains("connection: close");
        buffer.drain(..end);
        let index = counter.fetch_add(1, Ordering::Relaxed);
        let written = match action(index) {
            Action::Reply { delay, split } => {
                std::thread::sleep(delay);
                let head = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
                if split {
                    stream.write_all(head).and_then(|()| stream.write_all(b"hello"))
                } else {
                    stream.write_all(&[&head[..], b"hello"].concat())
                }
            }
            Action::Tagged { delay, body } => {
                std::thread::sleep(delay);
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {body}\r\n\r\n");
                stream.write_all(&[head.as_bytes(), &vec![b'x'; body]].concat())
            }
            Action::ServerTiming { delay, headers } => {
                std::thread::sleep(delay);
                let mut reply = String::from("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n");
                for header in headers {
                    reply.push_str(&format!("Server-Timing: {header}\r\n"));
                }
                reply.push_str("\r\nhello");
                stream.write_all(reply.as_bytes())
            }
            Action::Status(status) => {
                stream.write_all(format!("HTTP/1.1 {status} Oops\r\nContent-Length: 0\r\n\r\n").as_bytes())
            }
            Action::Chunked => stream.write_all(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            ),
            Action::UntilClose => {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello world");
                return;
            }
            Action::Stall => {
                std::thread::sleep(Duration::from_secs(5));
                return;
            }
            Action::StallBody => {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello");
                std::thread::sleep(Duration::from_secs(5));
                return;
            }
        };
        if written.is_err() || close {
            return;
        }
    }
}
