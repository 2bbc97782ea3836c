//! proctor's one outgoing HTTP client: every connection proctor opens to another machine goes
//! through [`client`] (the prober's measured requests, alert receivers, remote write,
//! `top --connect`, `alerts status` and `alerts silence`), and every secret file is read by
//! [`secret`]. Only the statsd Graphite backend opens connections of its own (a plain TCP
//! line protocol, not HTTP); a test (`proctor-cli`'s `tests/it/architecture.rs`) holds that.
//!
//! Layers, pure first: [`url`] (what to connect to), [`http`] (the request bytes, the response
//! head and its framing, chunked bodies), [`server_timing`] (the `Server-Timing` header),
//! [`outcome`] (a request's phases and failure class) do no I/O and read no clock; [`tls`]
//! turns whom to trust (Mozilla's roots, a private CA's PEM file, or nobody) into a rustls
//! configuration; [`client`] opens connections under a deadline, times each phase, and keeps
//! every response body bounded.

pub mod client;
pub mod http;
pub mod outcome;
pub mod secret;
pub mod server_timing;
pub mod tls;
pub mod url;
