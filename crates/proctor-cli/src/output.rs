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
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == ErrorKind::BrokenPipe)
    })
}
