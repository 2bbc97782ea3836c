//! proctor's public language, one place for every surface (CLI text and JSON, `dump`, HTTP,
//! Python, the dashboard, the TUI): how spans of time and points in time are written.
//!
//! Nothing here reads a file, a socket or the clock.

pub mod duration;
pub mod when;

pub use duration::{duration_arg, format_duration, parse_duration, DurationError};
pub use when::{format_utc, parse_when, When};
