//! proctor's public language, one place for every surface (CLI text and JSON, `dump`, HTTP,
//! Python, the dashboard, the TUI): the field table with names, units, titles and meanings
//! ([`fields`]), how values are written ([`units`]), sort keys and the filter ([`select`]), the
//! JSON shapes built from the agent's snapshots and stored ranges ([`snapshot`], [`process`],
//! [`history`], [`report`], [`jupyter`]); units and the grammar of typed quantities, spans and
//! times come from proctor-units ([`units`], [`quantity`], [`duration`], [`when`]).
//!
//! Internal types (model rows, samples) are not the public format: every public document is a
//! serializable counterpart made here. Nothing here reads a file, a socket or the clock, except
//! that a snapshot document states its own age.

pub mod fields;
pub mod groups;
pub mod history;
pub mod js;
pub mod jupyter;
pub mod process;
pub mod report;
pub mod select;
pub mod snapshot;

// The units, the quantity grammar and its duration and time forms live in proctor-units, below
// every crate; they are re-exported here under the names the surfaces already use.
pub use proctor_units::{duration, quantity, units, when};
pub use proctor_units::{duration_arg, format_duration, parse_duration, DurationError};
pub use proctor_units::{format_utc, parse_when, When};
pub use select::ProcessSort;
