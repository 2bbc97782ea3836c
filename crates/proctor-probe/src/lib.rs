//! `proctor probe`: measure an HTTP endpoint's latency phase by phase (or a WebSocket's
//! echo, message by message), and say what shape the latencies have.
//!
//! The transport is `proctor-client`'s (re-exported: [`url`], [`http`], [`server_timing`],
//! [`tls`], [`client`]); this crate adds what measuring needs. Layers, pure first:
//! [`schedule`] (when requests start), [`record`] (one request's result; also the JSON-lines file format) and [`report`]
//! (percentiles, histogram, modes via `proctor-modes`, phase attribution) do no I/O and read
//! no clock; [`tls`] turns whom to trust (Mozilla's roots, a private CA's PEM, or nobody) into
//! a rustls configuration. [`client`] opens every connection; [`runner`] owns the threads and the clock; [`ws`] runs a WebSocket probe on its own thread over a
//! connection `client` opened (tungstenite for the upgrade and the framing) and [`jupyter`]
//! drives a Jupyter terminal through it (REST calls through `client`). [`plot`] draws a
//! recorded run as SVG or PNG. [`har`] reads a browser's HAR export into records (pure: a
//! reader in).
//!
//! # JSON output
//!
//! `proctor probe --format json` prints the [`report::Report`]; `--out` appends one
//! [`RequestRecord`] per line. Every duration in both is in nanoseconds and named `<what>_ns`:
//! requests are timed on a monotonic clock in whole nanoseconds, the records keep those
//! integers, and the report is made from the records (also from files, by `probe analyze`),
//! so one unit serves both and nothing is rounded on the way. `requests_per_second` is a rate;
//! counts, shares and ratios carry no unit.
//!
//! Renamed in issue 14, so that no duration hides its unit (or uses another one):
//!
//! | before | now |
//! |---|---|
//! | `span_seconds` | `span_ns` |
//! | `timeline[].offset_seconds` | `timeline[].offset_ns` |
//! | `timeline[].width_seconds` | `timeline[].width_ns` |
//! | `latency.percentiles[].ns` | `latency.percentiles[].value_ns` |
//! | `modes.modes[].value` (nanoseconds) | `modes.modes[].value_ns` |
//! | `modes.modes[].low` (nanoseconds) | `modes.modes[].low_ns` |
//! | `modes.modes[].high` (nanoseconds) | `modes.modes[].high_ns` |
//!
//! New then: `modes.modes[].total_ns` and `.time_fraction`, `modes.total_ns`,
//! `modes.fine_structure[]` (`spikes_ns`, `step_ns`), `notes[]` and `delayed_ack`.
//!
//! New in issue 21 (docs/probe.md), each left out when empty: in records `url`,
//! `server_timing[]` (`name`, `dur_ns`, `desc`) and `server_timing_dropped`; in the report
//! `substeps[]` (named `server:NAME`, the fields of `phases[]` plus `desc`),
//! `substeps_left_out`, `server_timing_dropped`, `attribution[].substep` (with
//! `substep_median_ns`, `baseline_substep_median_ns`, `substep_share`) and `selection`
//! (`matched`, `of`, `filters`) when filters chose the records.

pub mod har;
pub mod jupyter;
pub mod plot;
pub mod record;
pub mod report;
pub mod runner;
pub mod schedule;
pub mod ws;

// The transport, from the one outgoing client; re-exported so the prober's paths stay.
pub use proctor_client::{client, http, server_timing, tls, url};

pub use record::{ErrorClass, Phases, RequestRecord};
pub use server_timing::Substep;
