//! `proctor impact`: A/B from the target's side. A fixed-rate workload runs while rounds
//! alternate between no monitor, proctor with the `--agent` words, and optionally the psutil
//! loop; the target's percentiles, their differences with bootstrap intervals, the monitors'
//! CPU and the stall ledger are printed. The measuring is `proctor-impact`'s; this turns flags
//! into its config and prints. `impact-workload` (hidden) is the workload process it starts.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use proctor_impact::run::{Arm, ImpactConfig};
use proctor_impact::workload::{Workload, WorkloadConfig};
use proctor_vocab::duration_arg;
use proctor_vocab::quantity::{rate_arg, size_arg};

use crate::output::{print_json, Format};

/// Arguments of `proctor impact`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The target: `pagefault` (a tree of children sharing --size copy-on-write, each mapping
    /// and touching fresh pages at --rate, so mmap-lock waits show as latency), `http` (the
    /// same tree as preforked HTTP workers, asked at --rate in all), or a URL to ask at --rate.
    /// Or give a command after `--` to run at --rate, one at a time.
    #[arg(long, value_name = "pagefault|http|URL", conflicts_with = "command", value_parser = workload_arg)]
    workload: Option<String>,
    /// How long each arm runs in each round.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration_arg)]
    duration: Duration,
    /// Rounds; each runs every arm once, in turn (none, each --agent, psutil), each round
    /// starting one arm later than the one before.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// Turns: within each round, the arms take turns this long (e.g. 10s) until each has had
    /// --duration; each monitor is started once, runs alone for --warmup outside any window, and
    /// is stopped (SIGSTOP: no CPU, no lock held) outside its turns. The intervals then resample
    /// whole cycles of turns, so what the host did in a minute falls on both arms alike. Without
    /// it each arm has one window a round and each monitor starts afresh in it.
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    switch: Option<Duration>,
    /// Before anything is measured: with --switch, how long each monitor runs alone before the
    /// first turn (default 30s); without, how long the workload runs alone before the first
    /// round, so its start (faulting its memory in, its children's first pages) is no arm's
    /// (default 10s: the first no-monitor window's tail ran high without it).
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    warmup: Option<Duration>,
    /// With --switch and the pagefault workload: trace the run (tracefs: root, or tracefs
    /// writable) and charge each monitor what it delayed its own turns' operations by: its
    /// threads running where a child waited to run, its holds of a child's mmap lock while the
    /// child waited for it. The report sets each monitor's percentiles beside those of the same
    /// operations without those delays. Every arm's turns are traced alike.
    #[arg(long, requires = "switch")]
    attribute: bool,
    /// An agent arm: proctor's words, split at spaces (no quoting). A `serve` gets a loopback
    /// port of its own and --no-record unless the words say otherwise; its stall ledger is read
    /// from its API. Repeatable; default `serve` (1 s, PSS on).
    #[arg(long, value_name = "'serve --interval 1s'")]
    agent: Vec<String>,
    /// Also run jupyter-resource-usage's way of reading the tree: psutil's memory_full_info()
    /// over every process in a loop.
    #[arg(long, value_enum)]
    baseline: Option<Baseline>,
    /// The Python with psutil for --baseline psutil (default .venv/bin/python, else python3).
    /// Make one with: python3 -m venv .venv && .venv/bin/pip install psutil
    #[arg(long, value_name = "PATH")]
    baseline_python: Option<PathBuf>,
    /// The psutil loop's pause between passes over the tree.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration_arg)]
    baseline_interval: Duration,
    /// Children of the pagefault or http tree.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    children: u32,
    /// Memory the tree's parent fills and its children share copy-on-write (e.g. 64M, 1G).
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = size_arg)]
    size: f64,
    /// Operations a second: per child for pagefault (default 1000/s), in all for http (500/s),
    /// a URL (50/s) or a command (10/s).
    #[arg(long, value_name = "RATE", value_parser = rate_arg)]
    rate: Option<f64>,
    /// For a URL or a command: the root of the tree whose ledger and psutil readings count
    /// (default: the workload process).
    #[arg(long, value_name = "PID")]
    target: Option<u32>,
    /// Bootstrap resamples for each interval.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(100..=100_000))]
    resamples: u32,
    /// The bootstrap's seed: the same seed and data give the same intervals.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also write the arms' latency distributions side by side (.png or .svg).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// The command to run as the workload (after `--`).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Baseline {
    Psutil,
}

/// Arguments of the hidden `proctor impact-workload`: the workload process `impact` starts.
#[derive(Debug, clap::Args)]
pub struct WorkloadArgs {
    #[arg(long)]
    workload: String,
    #[arg(long)]
    children: u32,
    #[arg(long)]
    size_bytes: u64,
    #[arg(long)]
    rate: f64,
    #[arg(last = true)]
    command: Vec<String>,
}

/// `--workload`, checked as it is parsed (so a bad one is a usage error, exit 2).
fn workload_arg(text: &str) -> Result<String, String> {
    workload_of(Some(text), &[]).map(|_| text.to_string()).map_err(|e| e.to_string())
}

/// The workload as `--workload` names it.
fn workload_of(text: Option<&str>, command: &[String]) -> anyhow::Result<Workload> {
    match (text, command) {
        (None, []) | (Some("pagefault"), []) => Ok(Workload::Pagefault),
        (Some("http"), []) => Ok(Workload::Http),
        (Some(url), []) if url.starts_with("http://") || url.starts_with("https://") => {
            proctor_client::url::parse(url).map_err(|e| anyhow::anyhow!("{url}: {e}"))?;
            Ok(Workload::Url(url.to_string()))
        }
        (Some(other), []) => {
            bail!("{other:?} is not pagefault, http or an http:// or https:// URL (a command goes after --)")
        }
        (None, argv) => Ok(Workload::Command(argv.to_vec())),
        (Some(_), _) => bail!("give --workload or a command after --, not both"),
    }
}

fn default_rate(workload: &Workload) -> f64 {
    match workload {
        Workload::Pagefault => 1000.0,
        Workload::Http => 500.0,
        Workload::Url(_) => 50.0,
        Workload::Command(_) => 10.0,
    }
}

/// Memory the host could give now (`MemAvailable`), for refusing a region that cannot fit.
fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kib| kib * 1024)
}

/// The Python for the psutil arm, and why it cannot run when it cannot.
fn baseline_python(flag: Option<&Path>) -> (PathBuf, Option<String>) {
    let python = match flag {
        Some(path) => path.to_path_buf(),
        None if Path::new(".venv/bin/python").exists() => PathBuf::from(".venv/bin/python"),
        None => PathBuf::from("python3"),
    };
    let unavailable = proctor_impact::arms::python_has_psutil(&python).err();
    (python, unavailable)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let workload = workload_of(args.workload.as_deref(), &args.command)?;
    let rate = args.rate.unwrap_or_else(|| default_rate(&workload));
    if rate <= 0.0 || !rate.is_finite() {
        bail!("--rate must be above 0");
    }
    let per_second = if workload == Workload::Pagefault { rate * f64::from(args.children) } else { rate };
    if per_second > 200_000.0 {
        bail!(
            "--rate: {per_second:.0} operations a second in all is more than the 200,000 one collector keeps up with"
        );
    }
    if args.duration < Duration::from_millis(500) {
        bail!("--duration must be at least 500ms (each arm's window)");
    }
    if let Some(turn) = args.switch {
        if turn < Duration::from_secs(1) || turn > args.duration {
            bail!(
                "--switch must be at least 1s (a resampled block) and at most --duration ({})",
                proctor_vocab::format_duration(args.duration)
            );
        }
    }
    if args.attribute && workload != Workload::Pagefault {
        bail!("--attribute is for the pagefault workload (its children time their own operations, so a child's delays are its operations')");
    }
    let size_bytes = args.size as u64;
    if let Some(available) = available_bytes() {
        if size_bytes > available / 2 {
            bail!(
                "--size {}: more than half the memory available now ({}); the tree would push the host into reclaim",
                proctor_vocab::units::bytes(size_bytes),
                proctor_vocab::units::bytes(available)
            );
        }
    }
    if let Some(plot) = &args.plot {
        proctor_impact::plot::Format::from_path(plot)?;
    }
    if args.target.is_some() && matches!(workload, Workload::Pagefault | Workload::Http) {
        bail!("--target is for a URL or a command; the pagefault and http trees are their own target");
    }
    let exe = std::env::current_exe().context("cannot find the running proctor binary")?;
    let agents = if args.agent.is_empty() { vec!["serve".to_string()] } else { args.agent.clone() };
    let mut arms = vec![Arm::None];
    for words in &agents {
        let words: Vec<String> = words.split_whitespace().map(str::to_string).collect();
        if words.is_empty() {
            bail!("--agent '': give proctor's words, e.g. --agent 'serve --interval 1s'");
        }
        if words[0] != "serve" {
            eprintln!(
                "proctor impact: --agent '{}' is not a serve: its CPU is measured, its ledger cannot be read",
                words.join(" ")
            );
        }
        arms.push(Arm::Agent(words));
    }
    if args.baseline == Some(Baseline::Psutil) {
        let (python, unavailable) = baseline_python(args.baseline_python.as_deref());
        if let Some(why) = &unavailable {
            eprintln!("proctor impact: SKIP the psutil arm: {why}");
        }
        arms.push(Arm::Psutil { python, pause: args.baseline_interval, unavailable });
    }
    let workload_config =
        WorkloadConfig { workload: workload.clone(), children: args.children, size_bytes, rate_per_sec: rate };
    let mut workload_command: Vec<OsString> = vec![
        exe.clone().into(),
        "impact-workload".into(),
        "--workload".into(),
        match &workload {
            Workload::Pagefault => "pagefault".into(),
            Workload::Http => "http".into(),
            Workload::Url(url) => url.into(),
            Workload::Command(_) => "command".into(),
        },
        "--children".into(),
        args.children.to_string().into(),
        "--size-bytes".into(),
        size_bytes.to_string().into(),
        "--rate".into(),
        rate.to_string().into(),
    ];
    if let Workload::Command(argv) = &workload {
        workload_command.push("--".into());
        workload_command.extend(argv.iter().map(OsString::from));
    }
    let config = ImpactConfig {
        workload: workload_config,
        workload_command,
        exe,
        arms,
        duration: args.duration,
        rounds: args.rounds,
        resamples: args.resamples as usize,
        seed: args.seed,
        target: args.target,
        switch: args.switch,
        warmup: args.warmup.unwrap_or(Duration::from_secs(if args.switch.is_some() { 30 } else { 10 })),
        attribute: args.attribute,
    };
    let mut progress = |line: &str| eprintln!("proctor impact: {}", proctor_vocab::units::printable(line));
    let report = proctor_impact::run::run(&config, &mut progress).map_err(anyhow::Error::msg)?;
    if let Some(path) = &args.plot {
        let turns =
            args.switch.map_or(String::new(), |turn| format!(" in turns of {}", proctor_vocab::format_duration(turn)));
        let title = format!(
            "proctor impact: {} rounds of {} per arm{turns}",
            report.rounds,
            proctor_vocab::format_duration(args.duration)
        );
        let bytes = match proctor_impact::plot::Format::from_path(path)? {
            proctor_impact::plot::Format::Png => proctor_impact::plot::png(&report, &title),
            proctor_impact::plot::Format::Svg => proctor_impact::plot::svg(&report, &title).into_bytes(),
        };
        std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    match args.format {
        Format::Json => print_json(&report)?,
        Format::Text => {
            let mut out = std::io::stdout().lock();
            out.write_all(proctor_impact::report::render_text(&report).as_bytes())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The hidden `impact-workload`: runs until `impact` ends it.
pub fn run_workload(args: WorkloadArgs) -> anyhow::Result<ExitCode> {
    let workload = match args.workload.as_str() {
        "command" if !args.command.is_empty() => Workload::Command(args.command),
        other => workload_of(Some(other), &[])?,
    };
    let config =
        WorkloadConfig { workload, children: args.children, size_bytes: args.size_bytes, rate_per_sec: args.rate };
    proctor_impact::workload::run(&config).map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_are_named_or_given_as_a_command() {
        assert_eq!(workload_of(None, &[]).expect("default"), Workload::Pagefault);
        assert_eq!(workload_of(Some("http"), &[]).expect("http"), Workload::Http);
        assert_eq!(
            workload_of(Some("http://127.0.0.1:1/x"), &[]).expect("url"),
            Workload::Url("http://127.0.0.1:1/x".into())
        );
        assert_eq!(workload_of(None, &["true".into()]).expect("command"), Workload::Command(vec!["true".into()]));
        let error = workload_of(Some("pagefaults"), &[]).expect_err("typo").to_string();
        assert!(error.contains("not pagefault, http or"), "{error}");
        assert!(workload_of(Some("http"), &["true".into()]).is_err());
    }
}
