//! `proctor probe`: measure an HTTP endpoint's latency phase by phase, and say what shape
//! the latencies have.
//!
//! Layers, pure first: [`url`] and [`http`] (wire format), [`schedule`] (when requests
//! start), [`record`] (one request's result; also the JSON-lines file format) and [`report`]
//! (percentiles, histogram, modes via `proctor-modes`, phase attribution) do no I/O and read
//! no clock; [`tls`] turns whom to trust (Mozilla's roots, a private CA's PEM, or nobody) into
//! a rustls configuration. [`client`] is the only module that touches the network; [`runner`]
//! owns the threads and the clock. [`plot`] draws a recorded run as SVG or PNG.

pub mod client;
pub mod http;
pub mod plot;
pub mod record;
pub mod report;
pub mod runner;
pub mod schedule;
pub mod tls;
pub mod url;

pub use record::{ErrorClass, Phases, RequestRecord};
