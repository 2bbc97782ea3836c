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

pub mod exited;
pub mod fields;
pub mod groups;
pub mod history;
pub mod js;
pub mod jupyter;
pub mod numbers;
pub mod process;
pub mod report;
pub mod select;
pub mod snapshot;

// The units, the quantity grammar and its duration and time forms live in proctor-units, below
// every crate; they are re-exported here under the names the surfaces already use.
pub use proctor_units::{duration, quantity, series, units, when};
pub use proctor_units::{duration_arg, format_duration, parse_duration, DurationError};
pub use proctor_units::{format_utc, parse_when, When};
pub use select::ProcessSort;

#[cfg(test)]
mod series_docs {
    use crate::series::CATALOG;

    /// The catalog's row for `s` as docs/api.md's "Series" table writes it.
    fn row(s: &crate::series::Series) -> String {
        let mut on = Vec::new();
        if s.live {
            on.push("history");
        }
        if s.stored {
            on.push("report, rollups");
        }
        // Every series: a field of its scope's shape, or a host series read from the model.
        on.push("alerts, dump");
        let prom: Vec<String> = s.prometheus.iter().map(|p| format!("`{p}`")).collect();
        format!("| `{}` | {} | {} | {} | {} |", s.name, s.unit.as_str(), on.join(", "), s.meaning, prom.join(", "))
    }

    #[test]
    fn docs_api_md_lists_every_series_and_every_rename() {
        let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md")).expect("api.md");
        let mut missing = Vec::new();
        for s in CATALOG {
            missing.extend(Some(row(s)).filter(|r| !docs.contains(r.as_str())));
            for alias in s.aliases {
                let rename = format!("| `{alias}` | `{}` |", s.name);
                missing.extend(Some(rename).filter(|r| !docs.contains(r.as_str())));
            }
        }
        assert!(missing.is_empty(), "docs/api.md lacks these rows:\n{}", missing.join("\n"));
    }
}
