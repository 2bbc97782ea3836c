//! `proctor bench`: not implemented yet.

use std::process::ExitCode;

/// Arguments of `proctor bench`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    eprintln!("proctor bench: not implemented yet");
    Ok(ExitCode::from(2))
}
