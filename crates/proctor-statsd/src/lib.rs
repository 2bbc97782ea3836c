//! A statsd server that keeps its packets and counts what it loses (issue #4).
//!
//! The crate is three layers. [`parse`] (bytes → metrics, pure), [`aggregate`] and [`flush`]
//! (metrics → windows → the numbers backends send, pure, no clock) decide *what* statsd means;
//! [`server`], [`net`] and the backends decide *when* and *where*. Only the last three touch
//! sockets, files or threads.
//!
//! # Compatibility with Etsy statsd 0.9
//!
//! Lines, keys, timer statistics, Graphite names and Graphite values are Etsy's, verified in
//! `scripts/test.d/50-statsd.sh` against the real `statsd@0.9.0`. proctor differs on purpose
//! where Etsy produces garbage or loses data:
//!
//! - `@0` and other rates that are not positive and finite, or so small (subnormal) that
//!   `1 / rate` is not, are bad lines (Etsy divides by zero and sends `Infinity`); `@ 0.5`
//!   or `@+0.5` are bad lines (Etsy throws).
//! - Values that are not finite (`Infinity`, `1e400`) are bad lines; sums that overflow are
//!   pinned at ±`f64::MAX`, and so are squares of huge timer samples; the median of two
//!   samples whose sum overflows is computed halves first. Nothing downstream ever sees
//!   `Infinity` or `NaN` (the `flush_window` fuzz target in the root's `fuzz/` checks this).
//! - A `-100` or a `>100` percentile is clamped to all samples (Etsy sends `NaN`).
//! - `h` and `d` (DogStatsD histogram and distribution) are timers; Etsy counts them as
//!   counters, as it does every unknown type. Other unknown types, and an empty type, are
//!   bad lines here.
//! - An empty key (after sanitising) is a bad line; Etsy aggregates it under `""`.
//! - A TCP client's last line without a trailing newline is used when it closes; Etsy drops it.
//! - Bad lines are also counted by reason ([`parse::BadLine`]); the total is Etsy's
//!   `bad_lines_seen`.
//! - Memory is bounded (keys, timer samples, set members); see [`aggregate`].

pub mod admin;
pub mod aggregate;
pub mod backend;
pub mod config;
mod conn;
pub mod flush;
pub mod graphite;
pub mod jsnum;
pub mod net;
pub mod parse;
pub mod prom;
pub mod self_metrics;
pub mod server;
pub mod setup;
pub mod shutdown;

pub use aggregate::{AggregatorConfig, IdlePolicy};
pub use backend::{Backend, BackendError, ConsoleBackend, FileBackend};
pub use flush::{FlushConfig, FlushData};
pub use graphite::{GraphiteBackend, GraphiteConfig, GraphiteNaming};
pub use parse::{BadLine, LineParser, ParseOptions};
pub use self_metrics::{SelfMetrics, Series};
pub use server::{run, Listeners, Server, ServerConfig, ServerHandle};
pub use shutdown::Shutdown;
