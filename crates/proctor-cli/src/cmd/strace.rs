//! `proctor strace`: analyze strace logs, or trace a command and analyze that.
//!
//! This module only does the I/O around `proctor-strace`: expanding arguments into inputs,
//! a progress line on a terminal, turning "nothing recognised" into a clear error, running
//! strace for `proctor strace run`, and writing the report and the plot.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context};
use proctor_strace::input::{self, Input, Progress};
use proctor_strace::parse::BadLine;
use proctor_strace::{feed_reader, plot, report, Analyzer, AnalyzerConfig, Report};

use crate::output::Format;

/// Arguments of `proctor strace`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    run: Option<Sub>,
    /// strace logs: files, a directory of `strace -ff` files, or - for stdin. Gzip is detected.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    #[command(flatten)]
    options: Options,
}

#[derive(Debug, clap::Args)]
struct Options {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text, global = true)]
    format: Format,
    /// Also draw per-syscall wall-time histograms to this file (.svg or .png).
    #[arg(long, value_name = "FILE", global = true)]
    plot: Option<PathBuf>,
    /// Rows per table in the text report, and panels in the plot.
    #[arg(long, default_value_t = 15, global = true)]
    top: usize,
    /// How many of the slowest calls to list.
    #[arg(long, default_value_t = 20, global = true)]
    slowest: usize,
    /// Calls at least this many milliseconds long go into the timeline.
    #[arg(long, default_value_t = 100.0, global = true)]
    slow_ms: f64,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Run a command under `strace -f -tt -T -y` and analyze the result.
    Run {
        /// Keep the strace log here instead of a temporary file.
        #[arg(long, value_name = "FILE")]
        keep: Option<PathBuf>,
        /// The command and its arguments (after --).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The plot's file name is checked before strace runs or a log is read.
    if let Some(path) = &args.options.plot {
        plot::Format::from_path(path)?;
    }
    match args.run {
        Some(Sub::Run { keep, command }) => trace_and_analyze(&command, keep, &args.options),
        None => {
            let inputs = input::expand(&args.paths)?;
            analyze_and_print(&inputs, &args.options)
        }
    }
}

fn trace_and_analyze(command: &[String], keep: Option<PathBuf>, options: &Options) -> anyhow::Result<ExitCode> {
    let strace = find_in_path("strace")
        .context("strace is not installed: proctor strace run needs it (Debian/Ubuntu: apt-get install strace)")?;
    let temporary = tempfile::Builder::new().prefix("proctor-strace-").suffix(".log").tempfile()?;
    let log: PathBuf = keep.unwrap_or_else(|| temporary.path().to_path_buf());
    let status = Command::new(&strace)
        .args(["-f", "-tt", "-T", "-y", "-o"])
        .arg(&log)
        .arg("--")
        .args(command)
        .status()
        .with_context(|| format!("cannot start {}", strace.display()))?;
    match status.code() {
        Some(0) => {}
        Some(code) => eprintln!("proctor: {} exited with {code}; analyzing its trace anyway", command[0]),
        None => eprintln!("proctor: strace ended by a signal; analyzing what it wrote"),
    }
    let inputs = [Input { path: Some(log.clone()), pid: None }];
    let result = analyze_and_print(&inputs, options);
    if log != temporary.path() {
        eprintln!("proctor: strace log kept in {}", log.display());
    }
    result
}

fn find_in_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|candidate| candidate.is_file())
}

fn analyze_and_print(inputs: &[Input], options: &Options) -> anyhow::Result<ExitCode> {
    let config = AnalyzerConfig {
        slowest: options.slowest,
        slow_threshold_ns: (options.slow_ms.max(0.0) * 1e6) as u64,
        ..AnalyzerConfig::default()
    };
    let mut analyzer = Analyzer::new(config);
    for input in inputs {
        let name = input.name();
        analyzer.begin_source(&name, input.pid);
        let reader = input::open(input, progress_for(input))?;
        let result = feed_reader(&mut analyzer, reader);
        if std::io::stderr().is_terminal() {
            eprint!("\r\x1b[K");
        }
        result.with_context(|| format!("cannot read {name}"))?;
        let (lines, events) = analyzer.current_source_counts();
        if lines == 0 {
            eprintln!("proctor: {name} is empty");
        } else if events == 0 {
            eprintln!("proctor: {name}: no strace line among its {lines} lines");
        }
    }
    let report = report::build(analyzer.finish());
    if report.is_empty() {
        bail!("{}", nothing_found(&report));
    }
    if let Some(path) = &options.plot {
        write_plot(&report, path, options.top)?;
    }
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    match options.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut stdout, &report)?;
            writeln!(stdout)?;
        }
        Format::Text => stdout.write_all(report.render_text(options.top).as_bytes())?,
    }
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Why the whole input was rejected, as specifically as the counts allow.
fn nothing_found(report: &Report) -> String {
    let names: Vec<&str> = report.sources.iter().map(|source| source.name.as_str()).collect();
    let names = names.join(", ");
    if report.lines == 0 {
        return format!("{names}: empty input, nothing to analyze");
    }
    let binary = BadLine::Binary.as_str();
    if report.bad_lines.by_reason.iter().any(|reason| reason.name == binary) {
        return format!("{names}: binary data, not strace output");
    }
    let first = report
        .bad_lines
        .examples
        .first()
        .map(|example| format!("; line {}: {}: {}", example.line, example.what, example.text))
        .unwrap_or_default();
    let cut = match report.lines_cut {
        0 => String::new(),
        n => format!(" ({n} of them longer than 1 MiB, read as their first MiB)"),
    };
    format!("{names}: no strace lines among {} lines{cut}{first}", report.lines)
}

/// A percentage on stderr for files of 64 MiB or more, only when stderr is a terminal.
fn progress_for(input: &Input) -> Option<Progress> {
    const WORTH_SHOWING_BYTES: u64 = 64 << 20;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let path = input.path.as_ref()?;
    let total = std::fs::metadata(path).ok()?.len();
    if total < WORTH_SHOWING_BYTES {
        return None;
    }
    let name = path.display().to_string();
    let mut shown = u64::MAX;
    Some(Box::new(move |read: u64| {
        let percent = read.saturating_mul(100) / total;
        if percent != shown {
            shown = percent;
            eprint!("\rproctor strace: {name} {percent:>3}% of {} MB", total >> 20);
        }
    }))
}

fn write_plot(report: &Report, path: &Path, panels: usize) -> anyhow::Result<()> {
    let bytes = match plot::Format::from_path(path)? {
        plot::Format::Svg => plot::svg(report, panels).into_bytes(),
        plot::Format::Png => plot::png(report, panels),
    };
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("proctor: plot written to {}", path.display());
    Ok(())
}
