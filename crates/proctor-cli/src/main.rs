//! The `proctor` binary: argument parsing and one module per subcommand.
//!
//! `main` stays thin: it parses arguments, hands them to the subcommand's `run`, and turns the
//! result into an exit code. Data goes to stdout, logs and errors to stderr.

mod cmd;
mod daemon;
mod datadir;
mod output;
mod probe_filter;
mod probe_metrics;
mod remote_write;
mod signals;
mod statsd_server;
mod streams;
mod text;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A Linux monitor that never becomes the load.
#[derive(Debug, Parser)]
#[command(name = "proctor", version, about, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The live agent: JSON API, Prometheus /metrics, a Jupyter-compatible endpoint and a dashboard.
    Serve(cmd::serve::Args),
    /// Host, container and the top processes, from two samples one interval apart.
    Snapshot(cmd::snapshot::Args),
    /// Record raw samples into a data directory until SIGINT/SIGTERM, then print the cost.
    Record(cmd::record::Args),
    /// The snapshot view of recorded samples: at one time, or every sample in a range.
    Replay(cmd::replay::Args),
    /// Recorded samples as CSV or JSON lines, with field selection, filters and top-N.
    Dump(cmd::dump::Args),
    /// A recorded range as plots and top processes; latency correlated with system series.
    Report(Box<cmd::report::Args>),
    /// Roll recorded samples up into the long-term tiers (a row per minute, per hour) now.
    Rollup(cmd::rollup::Args),
    /// Processes in groups (process-exporter rules, cgroup or user); --check validates a rules file.
    Groups(cmd::groups::Args),
    /// Alert rules: check a file, test it over a recording, silence or list a serve's alerts.
    Alerts(cmd::alerts::Args),
    /// A terminal view like htop's, live, over a recording (time travel) or from a remote agent.
    Top(cmd::top::Args),
    /// A process tree with per-process rows and the total.
    Tree(cmd::tree::Args),
    /// What a preforked family (gunicorn, uwsgi, Postgres…) shares, who copies it and how fast.
    Share(cmd::share::Args),
    /// Self-check: how expensive /proc is here, CPU-count truth, cgroups, permissions.
    Doctor(cmd::doctor::Args),
    /// collectl's method: N samples at interval 0, reporting the cost per sample and per process.
    Bench(cmd::bench::Args),
    /// Analyze strace logs: per-syscall wall-time histograms and their peaks.
    Strace(cmd::strace::Args),
    /// A statsd server that keeps its packets and counts what it loses.
    Statsd(cmd::statsd::Args),
    /// Measure an HTTP endpoint's latency phase by phase: percentiles, modes, what is slow.
    // Boxed: its options are several times the size of every other variant's.
    Probe(Box<cmd::probe::Args>),
    /// A monitor's cost as the target sees it: a fixed-rate workload's latency with no monitor,
    /// with proctor, and with the psutil loop, rounds alternating, differences with intervals.
    Impact(Box<cmd::impact::Args>),
    /// The workload process `proctor impact` starts (not for people).
    #[command(hide = true, name = "impact-workload")]
    ImpactWorkload(cmd::impact::WorkloadArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => cmd::serve::run(args),
        Command::Snapshot(args) => cmd::snapshot::run(args),
        Command::Record(args) => cmd::record::run(args),
        Command::Replay(args) => cmd::replay::run(args),
        Command::Dump(args) => cmd::dump::run(args),
        Command::Report(args) => cmd::report::run(*args),
        Command::Rollup(args) => cmd::rollup::run(args),
        Command::Groups(args) => cmd::groups::run(args),
        Command::Alerts(args) => cmd::alerts::run(args),
        Command::Top(args) => cmd::top::run(args),
        Command::Tree(args) => cmd::tree::run(args),
        Command::Share(args) => cmd::share::run(args),
        Command::Doctor(args) => cmd::doctor::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Strace(args) => cmd::strace::run(args),
        Command::Statsd(args) => cmd::statsd::run(args),
        Command::Probe(args) => cmd::probe::run(*args),
        Command::Impact(args) => cmd::impact::run(*args),
        Command::ImpactWorkload(args) => cmd::impact::run_workload(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            if output::is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            // An error may carry a server's reply or a process's name: shown, never obeyed.
            eprintln!("proctor: {}", proctor_vocab::units::printable_lines(&format!("{err:#}")));
            ExitCode::FAILURE
        }
    }
}
