//! `proctor groups`: processes folded into groups — by a process-exporter rules file
//! (`--config`), by cgroup or by user — from the agent's snapshot after one interval, or
//! `--check FILE` to validate a rules file. Grouping and folding live in `proctor-groups`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use std::sync::Arc;

use proctor_agent::AgentConfig;
use proctor_groups::By;

use super::common::{one_snapshot_with, ReadArgs};
use crate::output::{print_json, Format};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupBy {
    /// The rules of --config (process-exporter's format).
    Rules,
    /// The cgroup: a systemd unit, a container, a Kubernetes pod.
    Cgroup,
    /// The process's user.
    User,
}

/// Arguments of `proctor groups`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A process-exporter config (`process_names:` rules); first matching rule wins, children
    /// follow their group unless they match a rule of their own.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// How to group (default: rules with --config, else cgroup).
    #[arg(long, value_enum)]
    pub by: Option<GroupBy>,
    /// Only check a rules file: every mistake with its line and column; exit 1 if any.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["config", "by"])]
    pub check: Option<PathBuf>,
    /// Time between the two samples rates are taken over.
    #[arg(long, default_value = "1s", value_parser = proctor_vocab::duration_arg)]
    pub interval: Duration,
    /// How many groups to list (0: all).
    #[arg(long, default_value_t = 0)]
    pub top: usize,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub read: ReadArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.check {
        return match crate::daemon::load_rules(path)? {
            Ok(rules) => {
                println!("{}: {} rules, no mistakes", path.display(), rules.rules.len());
                Ok(ExitCode::SUCCESS)
            }
            Err(errors) => {
                for e in &errors {
                    eprintln!("{}:{}:{}: {}", path.display(), e.line, e.col, e.message);
                }
                eprintln!("{}: {} mistakes", path.display(), errors.len());
                Ok(ExitCode::FAILURE)
            }
        };
    }
    let by = match (args.by, &args.config) {
        (Some(GroupBy::Rules) | None, Some(path)) => crate::daemon::rules_from(path)?,
        (Some(GroupBy::Rules), None) => bail!("--by rules needs --config FILE (a process-exporter config)"),
        (Some(GroupBy::User), _) => By::User,
        (Some(GroupBy::Cgroup) | None, _) => By::Cgroup,
    };
    let mut config = args.read.config()?;
    config.pss_budget = 0.0;
    config.process_fds = true;
    let agent_config =
        AgentConfig { groups: Some(Arc::new(by)), max_groups: usize::MAX, ..AgentConfig::brief(args.interval) };
    let s = one_snapshot_with(config, agent_config, args.interval)?;
    let doc = proctor_vocab::groups::groups(&s, args.top).context("the agent folded no groups")?;
    match args.format {
        Format::Json => print_json(&doc)?,
        Format::Text => crate::text::groups::print_text(&doc)?,
    }
    Ok(ExitCode::SUCCESS)
}
