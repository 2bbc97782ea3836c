//! `proctor share`: how much a preforked family (gunicorn, uwsgi, PHP-FPM, Postgres, Celery,
//! multiprocessing) shares, which worker is copying the shared pages, how fast, and what.
//!
//! - [`family`] picks the members out of a process table: a master and its descendants.
//! - [`read`] reads each member's `smaps_rollup` (and one process's `smaps`) on a worker
//!   thread under a CPU budget, timing how long each target was held.
//! - [`round`] is one reading of every member and the family's sums: what it would use
//!   unshared (the sum of RSS), what it uses (the sum of PSS), the saving.
//! - [`watch`] follows rounds over time: each worker's private-dirty growth and rate, when at
//!   that rate it will have copied what it still shares, and which workers were recycled.
//! - [`recording`] makes the same rounds out of recorded samples (the agent's PSS readings).
//! - [`maps`] groups one process's mappings (heap, anonymous, each file) by what was copied.
//! - [`plot`] draws per-worker private growth and the family's PSS against its RSS.
//!
//! Everything but [`read`] is pure.

pub mod family;
pub mod maps;
pub mod plot;
pub mod read;
pub mod recording;
pub mod round;
pub mod watch;

/// `1.31 GiB`, `48.00 MiB`, `512 KiB`: bytes for people, binary units, two decimals below 100.
pub fn bytes(value: f64) -> String {
    proctor_units::units::binary(value, 2)
}

/// `45 s`, `25 min`, `3.2 h`, `4.0 days`: a span for people, rounded as a forecast should be.
pub fn span(seconds: f64) -> String {
    if seconds < 90.0 {
        format!("{seconds:.0} s")
    } else if seconds < 90.0 * 60.0 {
        format!("{:.0} min", seconds / 60.0)
    } else if seconds < 48.0 * 3600.0 {
        format!("{:.1} h", seconds / 3600.0)
    } else {
        format!("{:.1} days", seconds / 86400.0)
    }
}

pub const MIB: f64 = 1024.0 * 1024.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn people_units() {
        assert_eq!(bytes(1.31 * 1024.0 * MIB), "1.31 GiB");
        assert_eq!(bytes(48.0 * MIB), "48.00 MiB");
        assert_eq!(bytes(200.0 * MIB), "200 MiB");
        assert_eq!(bytes(12.0), "12 B");
        assert_eq!(span(1500.0), "25 min");
        assert_eq!(span(30.0), "30 s");
        assert_eq!(span(3.0 * 86400.0), "3.0 days");
    }
}
