//! TCP plumbing shared by the metric listener and the admin listener: one thread per accepted
//! connection, joined at shutdown, and line reads that wake up to check for shutdown.
//!
//! It knows nothing about statsd lines or admin commands; callers pass what a connection does.

use std::io::{self, BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::thread::JoinHandle;

use crate::shutdown::Shutdown;

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

/// A read timeout (`SO_RCVTIMEO`) expired: the moment to check for shutdown.
pub(crate) fn is_read_timeout(err: &io::Error) -> bool {
    matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// Reads one line into `line` from a stream with a read timeout set; `None` at end of stream,
/// on an error, or once shutdown is triggered.
pub(crate) fn read_line(reader: &mut BufReader<TcpStream>, line: &mut String, shutdown: &Shutdown) -> Option<()> {
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
