//! One request's result: its phases, status or error class. This is also the JSON-lines
//! format of `--out` files, which `proctor probe analyze` reads back (merged files too).
//!
//! Pure data; field names carry their units. A phase that did not happen (no DNS or connect
//! on a reused connection, no TLS on plain HTTP, nothing after a failure) is `None`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::server_timing::Substep;
pub use proctor_client::outcome::{ErrorClass, Phases, PHASE_NAMES, PLAIN_HTTP_DETAIL};

/// One request, as written to `--out`. For the WebSocket probe, one message and its echo: the
/// write is the message's, the wait runs to the echo, and the status is the upgrade's `101`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Identifies the run, so merged files keep runs apart. Shared: a run's records (a HAR's
    /// million WebSocket pairs) hold one copy of the text, not one each.
    pub run: Arc<str>,
    /// Position in the run's schedule (0-based).
    pub seq: u64,
    /// Scheduled bursts: which burst this request belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// When the request was meant to start (open loop) or started (closed loop), Unix ns.
    pub sent_unix_ns: u64,
    /// From the intended start to the end of the response or the failure.
    pub total_ns: u64,
    #[serde(flatten)]
    pub phases: Phases,
    /// The connection had carried an earlier request (no DNS, connect or TLS this time).
    pub reused: bool,
    /// `https` only: false when the run skipped certificate verification (`--insecure`), so
    /// a recorded file says whether its server's identity was checked. Absent for `http`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_verified: Option<bool>,
    /// The response's status, also when the request then failed (a timeout or a close
    /// mid-body): only a request that failed before a response head has none.
    pub status: Option<u16>,
    /// Body bytes received, also those of a body cut short.
    pub body_bytes: u64,
    pub error: Option<ErrorClass>,
    /// The error in words, for people (`connection refused`, `certificate expired`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_detail: Option<String>,
    /// The URL requested: the probed URL, or a HAR entry's own. Absent in files written before
    /// it was recorded (and then unknown to `--url` filters). Shared like `run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<Arc<str>>,
    /// The substeps the server reported in `Server-Timing` headers, in the order received
    /// (see [`crate::server_timing`]); absent when it sent none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_timing: Vec<Substep>,
    /// `Server-Timing` metrics (or `dur`s) not kept: malformed, past the per-response limit or
    /// with too long a name.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub server_timing_dropped: u32,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

impl RequestRecord {
    /// A complete HTTP response arrived (any status), so `total_ns` is a latency.
    pub fn has_response(&self) -> bool {
        self.status.is_some() && self.error.is_none_or(ErrorClass::has_response)
    }

    /// The summed duration of the substeps called `name` (a server may report one name more
    /// than once: two queries, two `db` entries); `None` when none of them had a duration.
    pub fn substep_ns(&self, name: &str) -> Option<u64> {
        self.server_timing
            .iter()
            .filter(|step| step.name == name)
            .filter_map(|step| step.dur_ns)
            .reduce(|sum, dur| sum.saturating_add(dur))
    }

    /// A `tls` failure because the server answered the handshake in plain HTTP.
    pub fn server_spoke_plain_http(&self) -> bool {
        self.error == Some(ErrorClass::Tls)
            && self.error_detail.as_deref().is_some_and(|detail| detail.starts_with(PLAIN_HTTP_DETAIL))
    }
}
