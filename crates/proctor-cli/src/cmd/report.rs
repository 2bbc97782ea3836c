//! placeholder
#[derive(Debug, clap::Args)]
pub struct Args {}
