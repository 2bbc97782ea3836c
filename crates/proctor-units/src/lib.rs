//! The ground floor of proctor's language, below every other crate: what a field's number
//! means ([`units::Unit`]) and how it is written for people ([`units`]), and the one grammar for
//! every quantity a person types — a flag, a query parameter, a `top` prompt, a `--slow` rule,
//! an alert literal — ([`quantity`]: sizes, rates, percents; [`duration`]: spans; [`when`]:
//! points in time); and the Prometheus exposition formats every `/metrics` family is written in
//! ([`prom`]); and the catalog of every time series with its one name ([`series`]). Pure: no
//! I/O, no clock.

pub mod duration;
pub mod prom;
pub mod quantity;
pub mod series;
pub mod units;
pub mod when;

pub use duration::{duration_arg, format_duration, parse_duration, DurationError};
pub use quantity::{
    parse_percent, parse_quantity, parse_rate, parse_size, scan_quantity, Dim, Quantity, QuantityError,
};
pub use when::{format_utc, parse_when, When};
