//! statsd over TCP: an accept thread and one thread per connection, each cutting its stream at
//! the last newline and ingesting the complete lines like a datagram.
//!
//! TCP has flow control, so a connection that is behind simply reads later and its client
//! slows down; nothing is dropped here except a partial line past `MAX_PENDING_LINE_BYTES`.
//! The per-line work is `ingest`'s; this module only frames the stream.

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::conn::{accept_connections, is_read_timeout};
use crate::parse::ParseOptions;
use crate::server::ingest::Ingest;
use crate::server::state::Shared;
use crate::shutdown::Shutdown;

pub(crate) fn tcp_accept_loop(listener: &TcpListener, options: ParseOptions, shared: Arc<Shared>, shutdown: &Shutdown) {
    accept_connections(listener, shutdown, |stream| {
        shared.counters.tcp_connections.fetch_add(1, Ordering::Relaxed);
        let (shutdown, shared) = (shutdown.clone(), Arc::clone(&shared));
        thread::Builder::new()
            .name("statsd-tcp-conn".to_owned())
            .spawn(move || tcp_connection(stream, options, &shared, &shutdown))
    });
}

/// The longest partial line kept while waiting for its newline; a client that sends more is
/// broken or hostile, and its partial line is dropped.
const MAX_PENDING_LINE_BYTES: usize = 1 << 20;

fn tcp_connection(mut stream: TcpStream, options: ParseOptions, shared: &Shared, shutdown: &Shutdown) {
    let mut ingest = Ingest::new(options, shared.shards.len());
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
                    ingest.packet(&pending[..=last]);
                    ingest.commit(shared);
                    pending.drain(..=last);
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
        ingest.packet(&pending);
        ingest.commit(shared);
    }
}
