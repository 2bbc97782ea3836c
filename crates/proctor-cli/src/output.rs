//! Output helpers shared by the subcommands: the `--format` switch and broken-pipe handling.

use std::io::ErrorKind;

/// How a data command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for people.
    Text,
    /// One JSON document for programs.
    Json,
}

/// A closed stdout (`proctor snapshot | head`) is a normal way for a reader to stop, not an error.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == ErrorKind::BrokenPipe))
}

/// `1.5 GiB`, `12 MiB`, `900 KiB`, `12 B`.
pub fn bytes(value: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = value as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value} B")
    } else if v >= 100.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

pub fn opt_bytes(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_string(), bytes)
}

pub fn opt_pct(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"))
}

/// Writes JSON to stdout, followed by a newline.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes() {
        assert_eq!(bytes(12), "12 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(2 * 1024 * 1024 * 1024), "2.0 GiB");
    }
}
