//! What every handler shares: the configuration the router is built with and the state each
//! request gets (the agent, the counters, the `/metrics` cache, the store reads' permit). Its
//! own module so that handler modules ([`crate::alerts`]) and the router both use it without
//! using each other.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use proctor_agent::disk::DiskWatch;
use proctor_agent::Shared;
use proctor_stored::store_history::PointCache;
use proctor_vocab::jupyter::JupyterConfig;
use proctor_vocab::snapshot::{self, AgentExtras};

use crate::auth::HostRule;
use crate::counters::HttpCounters;
use crate::prom::{Family, MetricsConfig};

/// Extra `/metrics` families from other parts of the agent (the embedded statsd server).
pub type ExtraMetrics = Arc<dyn Fn() -> Vec<Family> + Send + Sync>;

/// The remote-write queues' status as of a snapshot (lag is measured against its sample).
pub type RemoteWriteStatus =
    Arc<dyn Fn(&proctor_agent::snapshot::Snapshot) -> Vec<snapshot::RemoteWriteOut> + Send + Sync>;

/// What the router needs besides the agent.
#[derive(Clone)]
pub struct ApiConfig {
    /// When set, every request must carry `Authorization: Bearer TOKEN` (or the
    /// `proctor_token` cookie the dashboard's sign-in form sets).
    pub token: Option<Arc<str>>,
    pub metrics: MetricsConfig,
    pub jupyter: JupyterConfig,
    /// The filesystem `/api/metrics/v1` reports on, watched off the sampling thread.
    pub disk: Option<Arc<DiskWatch>>,
    pub extra_metrics: Option<ExtraMetrics>,
    /// The server's counters: the router counts requests, [`crate::serve`] connections.
    pub counters: Arc<HttpCounters>,
    /// Which `Host`s are answered (see [`HostRule`]).
    pub hosts: HostRule,
    /// The alert engine, when serve runs rules (`--rules`).
    pub alerts: Option<Arc<proctor_alerts::engine::Handle>>,
    /// The remote-write queues, when serve sends to any (`--remote-write`).
    pub remote_write: Option<RemoteWriteStatus>,
}

impl std::fmt::Debug for ApiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiConfig")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("metrics", &self.metrics)
            .field("jupyter", &self.jupyter)
            .field("disk", &self.disk.as_ref().map(|d| d.path().to_owned()))
            .field("extra_metrics", &self.extra_metrics.is_some())
            .finish()
    }
}

/// `/metrics` rendered once per snapshot and format: (seq, openmetrics, body).
pub(crate) type MetricsCache = Arc<Mutex<Option<(u64, bool, Bytes)>>>;

#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) shared: Arc<Shared>,
    pub(crate) config: Arc<ApiConfig>,
    pub(crate) http: Arc<HttpCounters>,
    pub(crate) metrics_cache: MetricsCache,
    pub(crate) store: Arc<StoreReads>,
}

/// Store reads for `/api/v1/history` and `/api/v1/report`: one at a time (each decodes up to
/// its frame budget on a blocking thread), and the history's points of the last one.
#[derive(Debug)]
pub(crate) struct StoreReads {
    pub(crate) permit: tokio::sync::Semaphore,
    pub(crate) cache: Mutex<PointCache>,
}

impl AppState {
    pub(crate) fn extras(&self, s: &proctor_agent::snapshot::Snapshot) -> AgentExtras {
        AgentExtras {
            http: Some(self.http.out()),
            disk_error: self.config.disk.as_ref().and_then(|d| d.status().error),
            remote_write: self.config.remote_write.as_ref().map(|f| f(s)).unwrap_or_default(),
        }
    }
}
