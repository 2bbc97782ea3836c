//! `proctor serve`: the live agent.
//!
//! [`agent::Agent`] samples on its own thread and publishes an immutable [`agent::Snapshot`];
//! [`router::router`] answers every request from the latest one (JSON API under `/api/v1/`,
//! Prometheus `/metrics`, the Jupyter-compatible `/api/metrics/v1`, the embedded dashboard).
//! With [`Recording::On`], [`record`] appends every sample to a `proctor-store` directory on a
//! thread of its own, fed over a bounded queue that drops (and counts) rather than waits.
//! No handler reads `/proc` or waits on the sampler, so a slow read can delay the next sample
//! but never a response. Nothing here changes the host: every route is a GET.
//!
//! The HTTP parts (`router`, `assets`, [`serve`]) are behind the default `http` feature; without
//! it the crate is the agent and the JSON shapes, which is what the Python package embeds.

pub mod agent;
#[cfg(feature = "http")]
pub mod assets;
pub mod history;
pub mod jupyter;
pub mod prom;
pub mod record;
#[cfg(feature = "http")]
pub mod router;
pub mod store_history;
#[cfg(feature = "http")]
pub mod store_report;
pub mod wire;

pub use agent::{Agent, AgentConfig, Shared, Snapshot};
pub use record::{Recording, RecordingStatus};
#[cfg(feature = "http")]
pub use router::{router, ApiConfig, ExtraMetrics};

#[cfg(feature = "http")]
/// Serves `app` on an already-bound listener until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}
