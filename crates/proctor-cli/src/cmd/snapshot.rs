//! `proctor snapshot`: not implemented yet.

use std::process::ExitCode;

/// Arguments of `proctor snapshot`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    eprintln!("proctor snapshot: not implemented yet");
    Ok(ExitCode::from(2))
}
