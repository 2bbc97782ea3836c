//! What one request came to, in the client's words: the phases it went through and, when it
//! failed, the class of the failure. The prober's records (`proctor_probe::record`) are made of
//! these; alert delivery and remote write read the class to decide on a retry.

use serde::{Deserialize, Serialize};

/// Why a request produced no usable response, or the class of an HTTP error status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// Name resolution failed (NXDOMAIN, no resolver, no address).
    Dns,
    /// The host answered the SYN with a RST: nothing listens on the port.
    Refused,
    /// No route to the host or network (ICMP unreachable).
    Unreachable,
    /// The request's deadline passed in any phase (`--timeout`).
    Timeout,
    /// The TLS handshake or a TLS record failed (bad certificate, not TLS at all, …).
    Tls,
    /// The response was not HTTP/1.x or broke its own framing.
    Protocol,
    /// Any other socket error, or the server closed before the response ended.
    Io,
    /// A complete response with a 4xx status: timed like a success, counted as an error.
    Http4xx,
    /// A complete response with a 5xx status.
    Http5xx,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 9] = [
        ErrorClass::Dns,
        ErrorClass::Refused,
        ErrorClass::Unreachable,
        ErrorClass::Timeout,
        ErrorClass::Tls,
        ErrorClass::Protocol,
        ErrorClass::Io,
        ErrorClass::Http4xx,
        ErrorClass::Http5xx,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Dns => "dns",
            ErrorClass::Refused => "refused",
            ErrorClass::Unreachable => "unreachable",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Tls => "tls",
            ErrorClass::Protocol => "protocol",
            ErrorClass::Io => "io",
            ErrorClass::Http4xx => "http_4xx",
            ErrorClass::Http5xx => "http_5xx",
        }
    }

    /// HTTP status classes come with a full response, so their times are real latencies.
    pub fn has_response(self) -> bool {
        matches!(self, ErrorClass::Http4xx | ErrorClass::Http5xx)
    }
}

/// The phases of one request, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phases {
    /// Open loop only: from the intended send time to the actual start. Coordinated-omission
    /// correction counts this time in the total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_ns: Option<u64>,
    pub dns_ns: Option<u64>,
    pub connect_ns: Option<u64>,
    pub tls_ns: Option<u64>,
    /// WebSocket only: the HTTP/1.1 upgrade, from sending the handshake to its `101`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_ns: Option<u64>,
    /// Writing the request into the socket (kernel buffer; not its arrival).
    pub write_ns: Option<u64>,
    /// From the end of the write to the first response byte.
    pub wait_ns: Option<u64>,
    /// From the first response byte to the end of the body.
    pub transfer_ns: Option<u64>,
}

/// Phase names in the order they happen, as used in reports.
pub const PHASE_NAMES: [&str; 8] = ["queue", "dns", "connect", "tls", "upgrade", "write", "wait", "transfer"];

impl Phases {
    /// The phases in [`PHASE_NAMES`] order.
    pub fn values(&self) -> [Option<u64>; 8] {
        [
            self.queue_ns,
            self.dns_ns,
            self.connect_ns,
            self.tls_ns,
            self.upgrade_ns,
            self.write_ns,
            self.wait_ns,
            self.transfer_ns,
        ]
    }
}

/// How `error_detail` begins when an `https` request met a server that answered the TLS
/// handshake in plain HTTP: a `tls` error whose cure is the URL's scheme, not a CA file.
pub const PLAIN_HTTP_DETAIL: &str = "the server does not speak TLS";
