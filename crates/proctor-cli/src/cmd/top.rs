//! `proctor top`: the terminal view (`proctor-tui`), live from an in-process agent, over a
//! recording (`--dir`, `--at`), or from a remote `proctor serve` (`--connect`). This module
//! only turns flags into a `TopConfig` and wires SIGTERM to the screen's quit.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use proctor_agent::{AgentConfig, Recording};
use proctor_sampler::SamplerConfig;
use proctor_tui::view::Needs;
use proctor_tui::{ReadsRule, Source, TopConfig};

use crate::daemon::Daemon;
use proctor_vocab::{parse_when, When};

use super::common::{now_unix_ns, ReadArgs};

/// Arguments of `proctor top`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Time between refreshes (and samples, when live).
    #[arg(long, value_parser = proctor_vocab::duration_arg, conflicts_with = "delay")]
    pub interval: Option<Duration>,
    /// The refresh delay in tenths of a second, as top and htop take it (`-d 10` is 1 s).
    #[arg(short = 'd', long = "delay", value_name = "TENTHS")]
    pub delay: Option<u32>,
    /// Show a recording instead of this machine now: the data directory `proctor record` or
    /// `proctor serve` writes.
    #[arg(long, value_name = "DIR", conflicts_with = "connect")]
    pub dir: Option<PathBuf>,
    /// With --dir: start at this time ("10 min ago", "2024-05-01T12:00:00" UTC, "@UNIX").
    #[arg(long, value_parser = parse_when, requires = "dir")]
    pub at: Option<When>,
    /// Show a remote `proctor serve` (http://HOST:PORT) from its JSON API.
    #[arg(long, value_name = "URL")]
    pub connect: Option<String>,
    /// With --connect: a file holding the agent's token.
    #[arg(long, value_name = "FILE", requires = "connect")]
    pub token_file: Option<PathBuf>,
    /// Live: where stepping back past the frames kept in memory reads (default: where `proctor
    /// serve` records, when it exists).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["dir", "connect"])]
    pub data_dir: Option<PathBuf>,
    /// Frames kept in memory for stepping back (live and --connect).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub keep: usize,
    /// pgtop's slow threshold: highlight processes past these rules, e.g.
    /// `cpu>80%,rss>2GiB,state=D>5s` (FIELD OP VALUE, optional >HOLD time).
    #[arg(long, value_name = "RULES")]
    pub slow: Option<String>,
    /// Append each transition of a --slow rule (pending, firing, resolved) to FILE as a JSON
    /// line, in the alerts' log format (docs/alerts.md).
    #[arg(long, value_name = "FILE", requires = "slow")]
    pub slow_log: Option<PathBuf>,
    /// Print one screen as text and exit (for scripts and tests).
    #[arg(long)]
    pub once: bool,
    /// With --once: the screen size, COLSxROWS from 40x10 to 1000x400 (default: the terminal's,
    /// else 120x40).
    #[arg(long, value_name = "COLSxROWS", value_parser = parse_size, requires = "once")]
    pub size: Option<(u16, u16)>,
    /// Start in tree view.
    #[arg(long)]
    pub tree: bool,
    /// Start sorted by this column (a process field name, or cpu, mem, time, pid).
    #[arg(long, value_name = "KEY")]
    pub sort: Option<String>,
    /// Start with this filter.
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    /// Alert rules (serve's `--rules` file) evaluated on the live samples: the header says what
    /// fires. Nobody is told; `serve --rules` tells receivers. With --connect, the header shows
    /// the remote serve's alerts without this flag.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["connect", "dir"])]
    pub rules: Option<PathBuf>,
    /// Where F2's columns are kept (default: $XDG_CONFIG_HOME/proctor/top.conf).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Live: the share of one CPU the PSS/USS reader may use (smaps_rollup costs grow with a
    /// process's memory and take its mmap lock). Default: 0.005, as `proctor serve`, while a
    /// PSS, USS, SwapPSS or PSS age column is shown (F2 turns it on and off); otherwise 0,
    /// nothing read, as htop. Given, it holds whatever is shown.
    #[arg(long, value_name = "SHARE")]
    pub pss_budget: Option<f64>,
    /// No colours (also when NO_COLOR is set).
    #[arg(long)]
    pub no_color: bool,
    #[command(flatten)]
    pub read: ReadArgs,
}

fn parse_size(text: &str) -> Result<(u16, u16), String> {
    let (c, r) = text.split_once(['x', 'X']).ok_or("expected COLSxROWS, e.g. 120x40")?;
    let c: u16 = c.trim().parse().map_err(|_| format!("'{c}' is not a column count"))?;
    let r: u16 = r.trim().parse().map_err(|_| format!("'{r}' is not a row count"))?;
    if c < 40 || r < 10 {
        return Err("at least 40x10".into());
    }
    // The screen is drawn into a buffer of cells first: 65535x65535 asked for 206 GB.
    if c > MAX_COLS || r > MAX_ROWS {
        return Err(format!("at most {MAX_COLS}x{MAX_ROWS}"));
    }
    Ok((c, r))
}

/// The largest `--size`: wider and taller than any terminal, and a screen buffer of tens of MB.
const MAX_COLS: u16 = 1000;
const MAX_ROWS: u16 = 400;

fn sort_field(key: &str) -> anyhow::Result<String> {
    if proctor_tui::view::column(key).is_some() {
        return Ok(key.to_string());
    }
    match proctor_vocab::ProcessSort::parse(key) {
        Ok(sort) => Ok(sort.field().to_string()),
        Err(e) => bail!("--sort {e} (or a field of `proctor dump process --fields list`)"),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let interval = match (args.interval, args.delay) {
        (Some(i), _) => i,
        (None, Some(tenths)) => Duration::from_millis(u64::from(tenths) * 100),
        (None, None) => Duration::from_secs(1),
    };
    if interval < Duration::from_millis(100) {
        bail!("the refresh interval must be at least 100 ms (got {})", proctor_vocab::format_duration(interval));
    }
    // `top` = the daemon (the agent, for the live screen) + the TUI. `Err`: live, the agent's
    // sampler and store, started below once signals are blocked.
    let sort = args.sort.as_deref().map(sort_field).transpose()?;
    let source: Result<Source, (SamplerConfig, Option<PathBuf>, ReadsRule)> = if let Some(dir) = &args.dir {
        let dir = crate::datadir::for_reading(dir)?.to_path_buf();
        let at = args.at.map(|w| w.resolve(now_unix_ns()) / 1_000_000);
        Ok(Source::Recording { dir, at })
    } else if let Some(url) = &args.connect {
        let token = match &args.token_file {
            Some(f) => Some(super::common::secret(f, "--token-file")?),
            None => None,
        };
        Ok(Source::Remote { url: url.clone(), token })
    } else {
        let store = match &args.data_dir {
            Some(d) => Some(crate::datadir::for_reading(d)?.to_path_buf()),
            None => crate::datadir::default_dir_here().ok().filter(|d| d.is_dir()),
        };
        // PSS is read by the budgeted worker, as in `serve`, and `/proc/PID/io` by the scan,
        // while a column needs them (F2 turns them on and off in the running sampler) unless a
        // flag fixes them. The saved columns (and --sort) decide the start, --once included.
        if args.pss_budget.is_some_and(|b| !(0.0..=1.0).contains(&b)) {
            bail!("--pss-budget is a share of one CPU, between 0 and 1");
        }
        let rule = ReadsRule { pss_budget: args.pss_budget, io: args.read.io };
        let config_file = args.config.clone().or_else(proctor_tui::default_config_file);
        let mut view = proctor_tui::run::load_view(config_file.as_deref(), &mut Vec::new());
        if let Some(f) = sort.as_deref().and_then(proctor_tui::view::column) {
            view.sort = f;
        }
        let wanted = rule.wanted(Needs::of_view(&view));
        let mut sampler = args.read.config()?;
        sampler.pss_budget = wanted.pss_budget;
        sampler.process_io = wanted.process_io;
        Err((sampler, store, rule))
    };
    let once = args.once.then(|| {
        args.size
            .or_else(|| ratatui::crossterm::terminal::size().ok().filter(|(c, r)| *c >= 40 && *r >= 10))
            .unwrap_or((120, 40))
    });
    let color = !args.no_color && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let slow = match &args.slow {
        Some(spec) => Some(proctor_alerts::slow::parse(spec).map_err(|e| anyhow::anyhow!("--slow {e}"))?),
        None => None,
    };
    if once.is_none() && !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        bail!("stdout is not a terminal: use --once to print one screen");
    }
    crate::daemon::limit_malloc_arenas();
    // Blocked before the agent starts its threads, so only the TUI's waiter receives them.
    let signals = crate::signals::block()?;
    let (source, daemon) = match source {
        Ok(source) => (source, None),
        Err((sampler, store, reads)) => {
            let root = sampler.root.clone();
            let daemon = Daemon::start(sampler, AgentConfig::brief(interval), Recording::Off)?;
            (Source::Live { shared: daemon.shared(), root, store, reads }, Some(daemon))
        }
    };
    let config = TopConfig {
        source,
        interval,
        keep: args.keep,
        slow,
        slow_log: args.slow_log,
        once,
        config_file: args.config.or_else(proctor_tui::default_config_file),
        color,
        tree: args.tree,
        net: args.read.net,
        sort,
        filter: args.filter,
        rules: args.rules,
    };
    let shown = proctor_tui::run(config, move |stop| signals.on_signal(stop)).map_err(anyhow::Error::msg);
    if let Some(daemon) = daemon {
        daemon.stop();
    }
    shown?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_screen_size_is_bounded_both_ways() {
        assert_eq!(parse_size("120x40"), Ok((120, 40)));
        assert_eq!(parse_size("1000X400"), Ok((1000, 400)));
        assert_eq!(parse_size("65535x65535"), Err("at most 1000x400".to_string()));
        assert_eq!(parse_size("1001x40"), Err("at most 1000x400".to_string()));
        assert_eq!(parse_size("39x40"), Err("at least 40x10".to_string()));
    }
}
