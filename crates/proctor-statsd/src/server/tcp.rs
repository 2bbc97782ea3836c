//! statsd over TCP: an accept thread and one thread per connection, each cutting its stream at
//! the last newline and handing the complete lines to the stream parser like a datagram.
//!
//! TCP has flow control, so a connection blocks rather than drops when the parser is behind.
//! It does not parse.

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::conn::{accept_connections, is_read_timeout};
use crate::net::RawBatch;
use crate::server::state::Shared;
use crate::shutdown::Shutdown;

pub(crate) fn tcp_accept_loop(
    listener: &TcpListener,
    ingress: &SyncSender<RawBatch>,
    shared: Arc<Shared>,
    shutdown: &Shutdown,
) {
    accept_connections(listener, shutdown, |stream| {
        shared.counters.tcp_connections.fetch_add(1, Ordering::Relaxed);
        let (ingress, shutdown, shared) = (ingress.clone(), shutdown.clone(), Arc::clone(&shared));
        thread::Builder::new()
            .name("statsd-tcp-conn".to_owned())
            .spawn(move || tcp_connection(stream, &ingress, &shared, &shutdown))
    });
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
