//! What else a recorder stores beside samples: probe results and statsd flushes, as plain
//! data. The producers' own types (`proctor-probe`'s `RequestRecord`, `proctor-statsd`'s
//! `FlushData`) are converted into these by `proctor-cli`, so the store and the report depend
//! on neither producer. Every field added later must be an `Option` or `#[serde(default)]`:
//! stored records are read back by newer builds.

use serde::{Deserialize, Serialize};

/// One request of a `proctor probe` run, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// Position in the run's schedule.
    pub seq: u64,
    /// When the request was meant to start (open loop) or started, Unix ns.
    pub sent_unix_ns: u64,
    /// From the intended start to the end of the response or the failure.
    pub total_ns: u64,
    pub status: Option<u16>,
    /// The error class (`timeout`, `refused`, `http_5xx`, …) or `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A complete HTTP response arrived, so `total_ns` is a latency.
    pub has_response: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ns: Option<u64>,
}

/// Consecutive results of one probe run, stored as one record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeBatch {
    /// The run's id, so several runs in one store stay apart.
    pub run: String,
    /// The URL probed.
    pub target: String,
    pub results: Vec<ProbeResult>,
}

/// One statsd timer's statistics over a flush interval, Etsy's names (`mean`, `upper_90`, …)
/// in milliseconds, `count` a count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsdTimer {
    pub key: String,
    pub stats: Vec<(String, f64)>,
}

impl StatsdTimer {
    pub fn stat(&self, name: &str) -> Option<f64> {
        self.stats.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
}

/// One statsd flush, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsdFlush {
    /// The flush's time, Unix ns; it covers the `interval_ms` before it.
    pub unix_ns: u64,
    pub interval_ms: u64,
    pub timers: Vec<StatsdTimer>,
    /// (key, count in the interval, per second).
    pub counters: Vec<(String, f64, f64)>,
    pub gauges: Vec<(String, f64)>,
}
