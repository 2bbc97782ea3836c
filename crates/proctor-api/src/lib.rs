//! `proctor serve`: the live agent.
//!
//! [`agent::Agent`] samples on its own thread and publishes an immutable [`agent::Snapshot`];
//! [`router::router`] answers every request from the latest one (JSON API under `/api/v1/`,
//! Prometheus `/metrics`, the Jupyter-compatible `/api/metrics/v1`, the embedded dashboard).
//! With [`Recording::On`], [`record`] appends every sample to a `proctor-store` directory on a
//! thread of its own, fed over a bounded queue that drops (and counts) rather than waits.
//! No handler reads `/proc` or waits on the sampler, so a slow read can delay the next sample
//! but never a response. Nothing here changes the host: every route is a GET.

pub mod agent;
pub mod assets;
pub mod history;
pub mod jupyter;
pub mod prom;
pub mod record;
pub mod router;
pub mod store_history;
pub mod wire;

pub use agent::{Agent, AgentConfig, Shared, Snapshot};
pub use record::{Recording, RecordingStatus};
pub use router::{router, ApiConfig, ExtraMetrics};

/// Serves `app` on an already-bound listener until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}
