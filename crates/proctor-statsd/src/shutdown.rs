//! The shutdown signal a host process hands the server, and that every server thread watches.
//!
//! It is a flag behind a condition variable: `trigger` sets it and wakes every waiter. It does
//! not install signal handlers and does not stop threads by itself; threads blocked in a socket
//! call are woken by the server shutting their sockets down (`net::shutdown_read`).

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// A shutdown signal shared by the server's threads and its owner.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    inner: Arc<(Mutex<bool>, Condvar)>,
}

impl Shutdown {
    pub fn new() -> Self {
        Shutdown::default()
    }

    pub fn trigger(&self) {
        let (lock, condvar) = &*self.inner;
        *lock.lock().unwrap_or_else(PoisonError::into_inner) = true;
        condvar.notify_all();
    }

    pub fn is_triggered(&self) -> bool {
        *self.inner.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits up to `timeout`; true when shutdown was triggered.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let (lock, condvar) = &*self.inner;
        let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let (guard, _) =
            condvar.wait_timeout_while(guard, timeout, |triggered| !*triggered).unwrap_or_else(PoisonError::into_inner);
        *guard
    }
}
