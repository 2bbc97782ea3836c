//! Prometheus remote write from the agent (`proctor serve --remote-write URL`): the store is the
//! write-ahead log, each remote has a queue (a thread, a cursor file, backoff), and what is sent
//! is what `/metrics` shows, named the same.
//!
//! `wire` (the protobuf messages of versions 1.0 and 2.0, snappy's block format), `series`
//! (families into labelled series), `source` (a sample into families, live or read back),
//! `post` (one request, TLS by the probe's setup), `queue` (the thread, the cursor, retries).

pub mod metrics;
pub mod post;
pub mod queue;
pub mod series;
pub mod source;
pub mod wire;
