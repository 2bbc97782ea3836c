//! `proctor groups`: processes folded into groups — by a process-exporter rules file
//! (`--config`), by cgroup or by user — from the agent's snapshot after one interval, or
//! `--check FILE` to validate a rules file. Grouping and folding live in `proctor-groups`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use std::sync::Arc;

use proctor_agent::AgentConfig;
use proctor_groups::{By, Rules};
use proctor_vocab::groups::GroupsOut;
use proctor_vocab::units::{bytes, percent, printable, seconds};

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

/// A rules file larger than this is refused unread: real ones are a few KiB, and every rule
/// costs regex matching on every sample.
const MAX_RULES_BYTES: u64 = 1 << 20;

fn load_rules(path: &Path) -> anyhow::Result<Result<Rules, Vec<proctor_groups::Diagnostic>>> {
    use std::io::Read;
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_RULES_BYTES + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read {} (as UTF-8 text)", path.display()))?;
    if text.len() as u64 > MAX_RULES_BYTES {
        bail!("{} is over {} KiB: not a rules file proctor reads", path.display(), MAX_RULES_BYTES >> 10);
    }
    Ok(Rules::parse(&text))
}

/// `cgroup`, `user`, or a rules file (refused with its first mistakes).
pub fn by_spec(spec: &str) -> anyhow::Result<By> {
    match spec {
        "cgroup" => Ok(By::Cgroup),
        "user" => Ok(By::User),
        path => rules_from(Path::new(path)),
    }
}

fn rules_from(path: &Path) -> anyhow::Result<By> {
    match load_rules(path)? {
        Ok(rules) => Ok(By::Rules(rules)),
        Err(errors) => {
            let first: Vec<String> = errors.iter().take(5).map(ToString::to_string).collect();
            bail!(
                "{} has {} mistakes (proctor groups --check {0} lists them):\n  {}",
                path.display(),
                errors.len(),
                first.join("\n  ")
            );
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.check {
        return match load_rules(path)? {
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
        (Some(GroupBy::Rules) | None, Some(path)) => rules_from(path)?,
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
        Format::Text => print_text(&doc)?,
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn print_text(doc: &GroupsOut) -> anyhow::Result<()> {
    let total_groups = doc.groups.len() + doc.overflow;
    let mut out = std::io::stdout().lock();
    let rates = doc.interval_secs.map_or("no rates (one sample)".to_string(), |i| format!("rates over {}", seconds(i)));
    let shown = if doc.overflow > 0 { format!(" (the first {} shown)", doc.groups.len()) } else { String::new() };
    writeln!(out, "{total_groups} groups by {} of {} processes{shown}; {rates}", doc.by, doc.processes)?;
    if doc.ungrouped > 0 {
        writeln!(out, "{} processes matched no rule and follow no grouped parent: not shown", doc.ungrouped)?;
    }
    if doc.cmdline_unread > 0 && doc.by == "rules" {
        writeln!(
            out,
            "{} processes' command lines were not read yet: exe and cmdline rules could not take them (a longer --interval gives the reader time)",
            doc.cmdline_unread
        )?;
    }
    writeln!(
        out,
        "{:>7} {:>8} {:>6} {:>6} {:>10} {:>10} {:>16} {:>9} {:>9} {:>9} {:>12}  GROUP",
        "CPU%", "REAPED%", "PROCS", "THR", "TIME", "RSS", "PSS (known)", "SWAP", "MINFLT/s", "MAJFLT/s", "FDS (known)"
    )?;
    for g in doc.groups.iter().map(|g| g.row) {
        let pss = if g.pss_known > 0 {
            format!("{} ({}/{})", bytes(g.pss_bytes), g.pss_known, g.processes)
        } else {
            "-".into()
        };
        let fds =
            if g.fds_known > 0 { format!("{} ({}/{})", g.open_fds, g.fds_known, g.processes) } else { "-".into() };
        writeln!(
            out,
            "{:>7} {:>8} {:>6} {:>6} {:>10} {:>10} {:>16} {:>9} {:>9} {:>9} {:>12}  {}",
            percent(g.cpu_percent),
            percent(g.reaped_cpu_percent),
            g.processes,
            g.threads,
            seconds(g.cpu_seconds_total),
            bytes(g.rss_bytes),
            pss,
            bytes(g.swap_bytes),
            format!("{:.0}", g.minor_faults_per_sec),
            format!("{:.1}", g.major_faults_per_sec),
            fds,
            printable(&g.name)
        )?;
    }
    Ok(())
}
