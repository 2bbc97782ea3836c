//! The HTTP server's own counters: bumped by the auth middleware and the store-reading
//! routes, read into the agent document's `http` section and `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

use proctor_vocab::snapshot::HttpOut;

#[derive(Debug, Default)]
pub struct HttpCounters {
    pub requests: AtomicU64,
    pub unauthorized: AtomicU64,
    pub client_errors: AtomicU64,
    /// `/api/v1/history` requests that read the store (their range reached before the ring).
    pub history_store_requests: AtomicU64,
    /// Frames those requests decoded.
    pub history_store_frames_decoded: AtomicU64,
    /// `/api/v1/report` requests that read the store, and the frames they decoded.
    pub report_store_requests: AtomicU64,
    pub report_store_frames_decoded: AtomicU64,
    /// Connections open now, accepted in all, refused at the cap (every open one busy), and
    /// closed to make room for a newcomer (the quietest); accept calls that failed.
    pub connections_open: AtomicU64,
    pub connections_accepted: AtomicU64,
    pub connections_refused: AtomicU64,
    pub connections_evicted: AtomicU64,
    pub accept_errors: AtomicU64,
    /// Requests refused for their `Host` or `Origin` (DNS rebinding, cross-origin pages).
    pub foreign_host_refused: AtomicU64,
    /// Free heap handed back to the kernel after a burst of connections ended.
    pub heap_trims: AtomicU64,
}

impl HttpCounters {
    pub fn out(&self) -> HttpOut {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        HttpOut {
            requests_total: load(&self.requests),
            unauthorized_total: load(&self.unauthorized),
            client_errors_total: load(&self.client_errors),
            history_store_requests_total: load(&self.history_store_requests),
            history_store_frames_decoded_total: load(&self.history_store_frames_decoded),
            report_store_requests_total: load(&self.report_store_requests),
            report_store_frames_decoded_total: load(&self.report_store_frames_decoded),
            connections_open: load(&self.connections_open),
            connections_accepted_total: load(&self.connections_accepted),
            connections_refused_total: load(&self.connections_refused),
            connections_evicted_total: load(&self.connections_evicted),
            accept_errors_total: load(&self.accept_errors),
            foreign_host_refused_total: load(&self.foreign_host_refused),
            heap_trims_total: load(&self.heap_trims),
        }
    }

    pub fn bump(counter: &AtomicU64, by: u64) {
        counter.fetch_add(by, Ordering::Relaxed);
    }
}
