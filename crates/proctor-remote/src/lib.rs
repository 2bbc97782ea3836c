//! Prometheus remote write and OTLP/HTTP from the agent (`proctor serve --remote-write URL`,
//! `--otlp URL`): the store is the write-ahead log, each remote has a queue (a thread, a cursor
//! file, backoff), and what is sent is what `/metrics` shows, named the same (OTLP: the
//! OpenTelemetry conventions' names where they exist).
//!
//! `wire` (the protobuf messages of versions 1.0 and 2.0, snappy's block format), `otlp` (the
//! OTLP metrics messages, the names' mapping, gzip), `series`
//! (families into labelled series), `source` (a sample into families, live or read back),
//! `post` (one request, TLS by the probe's setup), `queue` (the thread, the cursor, retries).

pub mod metrics;
pub mod otlp;
pub mod post;
pub mod queue;
pub mod series;
pub mod source;
pub mod wire;
