//! proctor's public language, one place for every surface (CLI text and JSON, `dump`, HTTP,
//! Python, the dashboard, the TUI): the field table with names, units, titles and meanings
//! ([`fields`]), how values are written ([`units`]), sort keys and the filter ([`select`]), the
//! JSON shapes built from the agent's snapshots and stored ranges ([`snapshot`], [`process`],
//! [`history`], [`report`], [`jupyter`]), and how spans and points in time are typed
//! ([`duration`], [`when`]).
//!
//! Internal types (model rows, samples) are not the public format: every public document is a
//! serializable counterpart made here. Nothing here reads a file, a socket or the clock, except
//! that a snapshot document states its own age.

pub mod duration;
pub mod fields;
pub mod groups;
pub mod history;
pub mod js;
pub mod jupyter;
pub mod process;
pub mod report;
pub mod select;
pub mod snapshot;
pub mod units;
pub mod when;

pub use duration::{duration_arg, format_duration, parse_duration, DurationError};
pub use select::ProcessSort;
pub use when::{format_utc, parse_when, When};
