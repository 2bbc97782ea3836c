//! Accepting connections without letting clients take the agent's file descriptors.
//!
//! Connections are accepted before any auth, so a token does not protect the fd table: with
//! `axum::serve` 1,100 idle TCP connections under a 1,024-fd limit left the sampler unable to
//! list `/proc`. Here:
//! - at most [`ConnLimits::max_connections`] are open at once, well below the fd limit (the
//!   sampler keeps an fd per process, the store and statsd need theirs);
//! - at that cap a new connection closes the one that has been quiet longest, so idle
//!   connections cannot lock out a real request; only when every open connection is busy is
//!   the new one refused. Busy means a request is being answered (its head was read whole) or
//!   an answer was written in the last [`QUIET_MS`]: bytes read do not count, so a client
//!   dripping a request head a byte at a time (slowloris) is as quiet as an idle one;
//! - one address holds at most [`ConnLimits::per_address`] of them: at that share a new
//!   connection from it closes that address's own quietest one, never another's, so one client
//!   cannot take every slot from the others;
//! - hyper's header-read timeout bounds both a slow request head and the wait for the next
//!   request on a kept-alive connection; a body is read under its route's own deadline
//!   ([`BODY_TIMEOUT`]); buffers per connection are bounded.
//!
//! - when the last connection of a burst closes, freed heap is handed back to the kernel
//!   (`malloc_trim`): a flood's buffers are freed but glibc keeps the pages in its arenas, so
//!   without it RSS stays at the flood's high-water mark.
//!
//! Open, refused and evicted connections are counted in [`HttpCounters`].
//!
//! What it does not do: route or authenticate (the router does), or read anything.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

use crate::counters::HttpCounters;

/// How many connections, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    pub max_connections: usize,
    /// At most this many of them from one address.
    pub per_address: usize,
    /// A request head must arrive within this, on a new connection and between requests on a
    /// kept-alive one.
    pub header_timeout: Duration,
    /// A connection's read buffer grows to at most this (a request head larger than it is
    /// refused).
    pub max_buf_bytes: usize,
}

impl ConnLimits {
    /// Limits for a process whose fd limit is `nofile`: an eighth of it for connections,
    /// between 16 and 512, three quarters of those for one address.
    pub fn for_fd_limit(nofile: u64) -> ConnLimits {
        let limits = ConnLimits {
            max_connections: 0,
            per_address: 0,
            header_timeout: Duration::from_secs(10),
            max_buf_bytes: 64 << 10,
        };
        limits.with_max_connections(usize::try_from((nofile / 8).clamp(16, 512)).unwrap_or(512))
    }

    /// These limits with the cap set to `max` (`--max-connections`), and one address's share
    /// with it.
    pub fn with_max_connections(self, max: usize) -> ConnLimits {
        ConnLimits { max_connections: max, per_address: (max * 3 / 4).max(1), ..self }
    }

    /// [`ConnLimits::for_fd_limit`] of this process's soft `RLIMIT_NOFILE` now.
    pub fn for_this_process() -> ConnLimits {
        ConnLimits::for_fd_limit(proctor_procfs::system::nofile_limit().unwrap_or(1024))
    }
}

/// Open connections: when each was last active, and how to ask it to close.
#[derive(Debug, Default)]
struct Registry {
    next: u64,
    conns: HashMap<u64, Conn>,
}

#[derive(Debug)]
struct Conn {
    peer: IpAddr,
    /// Milliseconds since `epoch` of its accept or the last answer byte written.
    last_active: Arc<AtomicU64>,
    /// Requests on it being answered now (their head read whole).
    in_flight: Arc<AtomicU64>,
    close: Option<oneshot::Sender<()>>,
}

impl Conn {
    /// Milliseconds it has been quiet at `now_ms`: `None` while it is busy.
    fn quiet_for(&self, now_ms: u64) -> Option<u64> {
        let quiet = now_ms.saturating_sub(self.last_active.load(Ordering::Relaxed));
        (self.in_flight.load(Ordering::Relaxed) == 0 && quiet >= QUIET_MS).then_some(quiet)
    }
}

/// What [`admit`] hands a connection it lets in.
struct Admitted {
    id: u64,
    last_active: Arc<AtomicU64>,
    in_flight: Arc<AtomicU64>,
    close: oneshot::Receiver<()>,
}

/// Serves `app` on `listener` until `shutdown` resolves, within `limits`, counting into
/// `counters`. Connections open at shutdown are closed gracefully (a request in flight is
/// answered first).
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    limits: ConnLimits,
    counters: Arc<HttpCounters>,
) -> std::io::Result<()> {
    let epoch = Instant::now();
    let registry = Arc::new(Mutex::new(Registry::default()));
    // Connections accepted since the heap was last trimmed.
    let since_trim = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_buf_bytes.max(8192))
        // A client that sends its request and then shuts its write side (`nc -N`, a script
        // that half-closes) still gets its answer; hyper's default drops it on that EOF.
        .half_close(true)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of fds, or a connection reset before accept: not the server's end.
                Err(e) => {
                    HttpCounters::bump(&counters.accept_errors, 1);
                    if is_fd_exhaustion(&e) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let peer = stream.peer_addr().map_or(IpAddr::from([0, 0, 0, 0]), |a| a.ip());
        let Some(Admitted { id, last_active, in_flight, close: close_rx }) =
            admit(&registry, &limits, epoch, &counters, peer)
        else {
            HttpCounters::bump(&counters.connections_refused, 1);
            drop(stream);
            continue;
        };
        HttpCounters::bump(&counters.connections_accepted, 1);
        counters.connections_open.fetch_add(1, Ordering::Relaxed);
        since_trim.fetch_add(1, Ordering::Relaxed);
        let since_trim = Arc::clone(&since_trim);
        let io = TokioIo::new(Tracked { inner: stream, last_active, epoch });
        let service = Counted { inner: TowerToHyperService::new(app.clone()), in_flight };
        let conn = builder.serve_connection(io, service);
        let registry = Arc::clone(&registry);
        let counters = Arc::clone(&counters);
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            tokio::pin!(conn);
            let closing = async {
                tokio::select! {
                    _ = close_rx => {}
                    _ = stop.wait_for(|stopped| *stopped) => {}
                }
            };
            tokio::select! {
                _ = conn.as_mut() => {}
                () = closing => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(1), conn.as_mut()).await;
                }
            }
            // An evicted connection left the registry, and the open count, when it was asked
            // to close; only one that ends by itself (or at shutdown) leaves them here.
            let removed = registry.lock().unwrap_or_else(PoisonError::into_inner).conns.remove(&id).is_some();
            let was_last = removed && counters.connections_open.fetch_sub(1, Ordering::Relaxed) == 1;
            if was_last && since_trim.load(Ordering::Relaxed) >= TRIM_AFTER {
                since_trim.store(0, Ordering::Relaxed);
                // A few milliseconds of walking the arenas: not on a worker. Counted once done,
                // so a reader of the count knows the pages went back.
                tokio::task::spawn_blocking(move || {
                    proctor_procfs::system::trim_heap();
                    HttpCounters::bump(&counters.heap_trims, 1);
                });
            }
        });
    }
    let _ = stop_tx.send(true);
    Ok(())
}

/// A slot for a new connection from `peer`: free under the cap and the address's share, else
/// the quietest connection's (which is asked to close): at the address's share the quietest of
/// that address's own, at the cap the quietest of all. `None` when every candidate is busy.
fn admit(
    registry: &Mutex<Registry>,
    limits: &ConnLimits,
    epoch: Instant,
    counters: &HttpCounters,
    peer: IpAddr,
) -> Option<Admitted> {
    let mut r = registry.lock().unwrap_or_else(PoisonError::into_inner);
    let now_ms = ms_since(epoch);
    let own_share = r.conns.values().filter(|c| c.peer == peer).count() >= limits.per_address.max(1);
    if own_share || r.conns.len() >= limits.max_connections.max(1) {
        // Closing asks; the connection leaves the registry when its task ends, so it is taken
        // out here to free the slot now.
        let quietest = r
            .conns
            .iter()
            .filter(|(_, c)| !own_share || c.peer == peer)
            .filter_map(|(id, c)| Some((*id, c.quiet_for(now_ms)?)))
            .max_by_key(|(_, quiet)| *quiet)
            .map(|(id, _)| id)?;
        if let Some(mut conn) = r.conns.remove(&quietest) {
            if let Some(close) = conn.close.take() {
                let _ = close.send(());
            }
            HttpCounters::bump(&counters.connections_evicted, 1);
            // Counted out now, with the registry, so `connections_open` never exceeds the cap
            // while the evicted one finishes closing (up to a second).
            let _ = counters
                .connections_open
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_sub(1)));
        }
    }
    let id = r.next;
    r.next += 1;
    let last_active = Arc::new(AtomicU64::new(now_ms));
    let in_flight = Arc::new(AtomicU64::new(0));
    let (close, close_rx) = oneshot::channel();
    r.conns.insert(
        id,
        Conn { peer, last_active: Arc::clone(&last_active), in_flight: Arc::clone(&in_flight), close: Some(close) },
    );
    Some(Admitted { id, last_active, in_flight, close: close_rx })
}

/// The app, counting the requests on one connection that are being answered: from the moment
/// hyper has read a request's head whole until its answer's head is handed back (the body is
/// then written, which [`Tracked`] notes).
struct Counted<S> {
    inner: S,
    in_flight: Arc<AtomicU64>,
}

/// One request being answered; counted out when dropped (answered, or the connection gone).
struct Answering(Arc<AtomicU64>);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<S, R> hyper::service::Service<R> for Counted<S>
where
    S: hyper::service::Service<R>,
    S::Future: Send + 'static,
    S::Response: 'static,
    S::Error: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn call(&self, request: R) -> Self::Future {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let answering = Answering(Arc::clone(&self.in_flight));
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answered = answer.await;
            drop(answering);
            answered
        })
    }
}

/// A request's body must arrive whole within this (hyper bounds only the head).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections since the last trim that make the end of a burst worth a `malloc_trim`.
const TRIM_AFTER: u64 = 64;

/// A connection quiet for less than this is busy, and is not closed for a newcomer.
const QUIET_MS: u64 = 100;

fn ms_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn is_fd_exhaustion(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// A stream that notes when answer bytes last went out. Bytes coming in do not count: a client
/// that sends a request head a byte at a time is not busy until the head is whole.
struct Tracked {
    inner: TcpStream,
    last_active: Arc<AtomicU64>,
    epoch: Instant,
}

impl Tracked {
    fn touch(&self) {
        self.last_active.store(ms_since(self.epoch), Ordering::Relaxed);
    }
}

impl AsyncRead for Tracked {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_an_eighth_of_the_fd_limit_within_bounds() {
        assert_eq!(ConnLimits::for_fd_limit(1024).max_connections, 128);
        assert_eq!(ConnLimits::for_fd_limit(64).max_connections, 16);
        assert_eq!(ConnLimits::for_fd_limit(1 << 20).max_connections, 512);
        assert_eq!(ConnLimits::for_fd_limit(1024).per_address, 96);
        assert_eq!(ConnLimits::for_fd_limit(1024).with_max_connections(1).per_address, 1);
    }

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const THERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 7));

    /// As the accept loop does: admitted, then counted open.
    fn open(
        registry: &Mutex<Registry>,
        limits: &ConnLimits,
        epoch: Instant,
        c: &HttpCounters,
        peer: IpAddr,
    ) -> Option<Admitted> {
        let admitted = admit(registry, limits, epoch, c, peer)?;
        c.connections_open.fetch_add(1, Ordering::Relaxed);
        Some(admitted)
    }

    #[test]
    fn at_the_cap_the_quietest_connection_makes_room_and_busy_ones_refuse() {
        let limits = ConnLimits { max_connections: 2, per_address: 2, ..ConnLimits::for_fd_limit(1024) };
        let registry = Mutex::new(Registry::default());
        let counters = HttpCounters::default();
        let epoch = Instant::now() - Duration::from_secs(10);
        let mut a = open(&registry, &limits, epoch, &counters, HERE).expect("free");
        let b = open(&registry, &limits, epoch, &counters, HERE).expect("free");
        // Both accepted just now: a third is refused.
        assert!(admit(&registry, &limits, epoch, &counters, HERE).is_none());
        // `a` has been quiet for 5 s, `b` is answering a request: the third takes `a`'s slot and
        // `a` is asked to close.
        a.last_active.store(5_000, Ordering::Relaxed);
        b.last_active.store(0, Ordering::Relaxed);
        b.in_flight.fetch_add(1, Ordering::Relaxed);
        let c = open(&registry, &limits, epoch, &counters, HERE).expect("room made");
        assert_ne!(c.id, a.id);
        assert_eq!(a.close.try_recv(), Ok(()));
        assert_eq!(counters.connections_evicted.load(Ordering::Relaxed), 1);
        assert_eq!(registry.lock().expect("lock").conns.len(), 2);
        // The evicted one is counted out when asked to close, not when it has finished closing.
        assert_eq!(counters.connections_open.load(Ordering::Relaxed), 2);
        // Bytes read do not make a connection busy: `c`, quiet since its accept whatever it was
        // sent, makes room, while `b` is still answering.
        c.last_active.store(1_000, Ordering::Relaxed);
        assert!(open(&registry, &limits, epoch, &counters, HERE).is_some());
        assert!(registry.lock().expect("lock").conns.contains_key(&b.id));
    }

    #[test]
    fn an_address_at_its_share_makes_room_only_among_its_own() {
        let limits = ConnLimits { max_connections: 4, per_address: 3, ..ConnLimits::for_fd_limit(1024) };
        let registry = Mutex::new(Registry::default());
        let counters = HttpCounters::default();
        let epoch = Instant::now() - Duration::from_secs(10);
        // Another address's connection, quiet longest of all.
        let theirs = open(&registry, &limits, epoch, &counters, THERE).expect("free");
        theirs.last_active.store(0, Ordering::Relaxed);
        let mine: Vec<Admitted> =
            (0..3).map(|_| open(&registry, &limits, epoch, &counters, HERE).expect("free")).collect();
        // At its share with its own all just accepted: refused, and the other's is kept.
        assert!(admit(&registry, &limits, epoch, &counters, HERE).is_none());
        assert!(registry.lock().expect("lock").conns.contains_key(&theirs.id));
        // One of its own quiet: that one makes room, not the other address's quieter one.
        mine[1].last_active.store(2_000, Ordering::Relaxed);
        assert!(open(&registry, &limits, epoch, &counters, HERE).is_some());
        let r = registry.lock().expect("lock");
        assert!(r.conns.contains_key(&theirs.id) && !r.conns.contains_key(&mine[1].id));
        assert_eq!(r.conns.values().filter(|c| c.peer == HERE).count(), 3);
    }
}
