//! Output helpers shared by the subcommands: the `--format` switch, JSON to stdout and
//! broken-pipe handling. How values are written for people is the vocabulary's
//! (`proctor_vocab::units`).

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

/// Writes JSON to stdout, followed by a newline.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}
