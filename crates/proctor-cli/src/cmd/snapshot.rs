//! `proctor snapshot`: host, container truth and the top processes, from the agent's snapshot
//! after one interval (rates over it); `--count` keeps printing the agent's snapshots.
//!
//! The document is the vocabulary's `SnapshotOut`, the one `GET /api/v1/snapshot` answers;
//! the text view is written from that same document. No sampling happens here: the agent
//! (`proctor-agent`) is the one sampling loop.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use proctor_agent::{Agent, AgentConfig};
use proctor_vocab::ProcessSort;

use super::common::ReadArgs;
use crate::output::Format;
use crate::text::snapshot::{print_view, View};

/// Arguments of `proctor snapshot`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many processes to list.
    #[arg(long, default_value_t = 15)]
    pub top: usize,
    /// Order processes by this key: cpu, rss (or mem), pss, vsize, threads, swap, time, io (read and write
    /// together, with --io), read, write, pid, name.
    #[arg(long, default_value = "cpu", value_parser = ProcessSort::parse)]
    pub sort: ProcessSort,
    /// Time between the two samples that rates are derived from (0: one sample, no rates).
    #[arg(long, default_value = "1s", value_parser = proctor_vocab::duration_arg)]
    pub interval: Duration,
    /// Keep sampling: print this many snapshots, one per interval, on a drift-corrected
    /// schedule (JSON becomes one document per line).
    #[arg(long, default_value_t = 1)]
    pub count: u64,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub read: ReadArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut config = args.read.config()?;
    config.pss_budget = 0.0;
    let view = View { top: args.top, sort: args.sort, format: args.format };
    if args.count <= 1 {
        let s = super::common::one_snapshot(config, args.interval)?;
        print_view(view, &s, false)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.interval.is_zero() {
        anyhow::bail!("--count needs an --interval above 0");
    }
    // The agent samples on its drift-corrected schedule; each of its snapshots is printed.
    let agent = Agent::start(config, AgentConfig::brief(args.interval)).context("cannot start the sampling thread")?;
    let shared = agent.shared();
    let mut seq = shared.latest().sample.seq;
    let mut last = None;
    for _ in 0..args.count {
        let s = shared
            .wait_newer(seq, args.interval * 10 + Duration::from_secs(10))
            .context("the agent stopped sampling")?;
        seq = s.sample.seq;
        print_view(view, &s, true)?;
        last = Some(s);
    }
    agent.stop();
    if let Some(missed) = last.map(|s| s.agent.missed_ticks).filter(|&m| m > 0) {
        eprintln!("proctor snapshot: {missed} ticks missed because sampling overran the interval");
    }
    Ok(ExitCode::SUCCESS)
}
