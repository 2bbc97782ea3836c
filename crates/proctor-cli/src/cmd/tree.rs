//! `proctor tree`: not implemented yet.

use std::process::ExitCode;

/// Arguments of `proctor tree`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    eprintln!("proctor tree: not implemented yet");
    Ok(ExitCode::from(2))
}
