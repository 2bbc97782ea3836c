//! `proctor serve`'s HTTP side, answered from the agent's snapshots: the JSON API under
//! `/api/v1/` (shapes from `proctor-vocab`), Prometheus `/metrics` ([`prom`]), the
//! jupyter-resource-usage endpoint `/api/metrics/v1`, and the dashboard ([`assets`]).
//!
//! No handler reads `/proc` or waits on the sampler: each takes an `Arc` of the latest
//! snapshot, or walks the history ring once under its lock, and works from that. Reads of the
//! agent's store (history older than the ring, `/api/v1/report`) run on blocking threads, one
//! at a time. Nothing here changes the host: every route is a GET.
//!
//! What it does not do: sample, record or decide where the store lives (`proctor-agent`), or
//! name fields (`proctor-vocab`).

pub mod alerts;
pub mod assets;
pub mod auth;
pub mod counters;
pub mod params;
pub mod prom;
pub mod router;
pub mod serve;
pub mod state;

pub use auth::HostRule;
pub use counters::HttpCounters;
pub use router::router;
pub use serve::{serve, ConnLimits};
pub use state::{ApiConfig, ExtraMetrics, RemoteWriteStatus};
