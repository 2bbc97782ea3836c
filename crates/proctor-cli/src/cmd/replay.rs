//! `proctor replay`: the `snapshot` view of recorded samples, at one time or for every sample
//! in a range, with rates derived from each stored sample and the one before it; with `--tree`,
//! the `tree` view of one process and its descendants instead. Renders through
//! `snapshot::print_view` and `tree::print_tree`; it neither samples nor writes.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use proctor_agent::Snapshot;
use proctor_model::{build_tree, Sample};
use proctor_store::{same_run, Reader};
use proctor_vocab::ProcessSort;

use super::common::now_unix_ns;
use crate::output::Format;
use crate::text::snapshot::{print_view, View};
use crate::text::tree::{print_tree, TreeView};
use proctor_vocab::{format_utc, parse_when, When};

/// Arguments of `proctor replay`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The data directory `proctor record` or `proctor serve` wrote (default: where `proctor serve` records).
    #[arg(long, value_name = "DIR", default_value_os_t = crate::datadir::default_for_flags())]
    pub dir: PathBuf,
    /// Show the last sample at or before this time ("10 min ago", "2024-05-01T12:00:00" UTC,
    /// "@UNIX_SECONDS"). The default, without --from, is the newest sample.
    #[arg(long, value_parser = parse_when, conflicts_with_all = ["from", "to"])]
    pub at: Option<When>,
    /// Show every sample from this time...
    #[arg(long, value_parser = parse_when)]
    pub from: Option<When>,
    /// ...up to this time (default: now).
    #[arg(long, value_parser = parse_when, requires = "from")]
    pub to: Option<When>,
    /// How many processes to list.
    #[arg(long, default_value_t = 15)]
    pub top: usize,
    /// Order processes by this key: cpu, rss (or mem), pss, vsize, threads, swap, time, io (read and write
    /// together, with --io), read, write, pid, name.
    #[arg(long, default_value = "cpu", value_parser = ProcessSort::parse)]
    pub sort: ProcessSort,
    /// Show the `tree` view (a process and its descendants, with totals) instead of `snapshot`'s.
    #[arg(long)]
    pub tree: bool,
    /// The root of the tree.
    #[arg(long, default_value_t = 1, requires = "tree")]
    pub pid: u32,
    /// Show the process groups stored with each sample (`record --groups`), as `proctor
    /// groups` shows them live, instead of the processes; --top is the number of groups.
    #[arg(long, conflicts_with = "tree")]
    pub groups: bool,
    /// Text, or JSON (one document per line for a range).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Which view each sample is shown in.
#[derive(Debug, Clone, Copy)]
enum Shown {
    Snapshot(View),
    Tree { root: u32, format: Format },
    Groups { top: usize, format: Format },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut reader = Reader::open(crate::datadir::for_reading(&args.dir)?).context("cannot replay")?;
    let result = replay(&args, &mut reader);
    // Whatever the outcome (a skipped segment may be why nothing was found), what could not be
    // read is said.
    crate::datadir::report_read("proctor replay", reader.report());
    result
}

fn replay(args: &Args, reader: &mut Reader) -> anyhow::Result<ExitCode> {
    let now = now_unix_ns();
    let view = if args.tree {
        Shown::Tree { root: args.pid, format: args.format }
    } else if args.groups {
        Shown::Groups { top: args.top, format: args.format }
    } else {
        Shown::Snapshot(View { top: args.top, sort: args.sort, format: args.format })
    };
    match args.from {
        None => {
            let at = args.at.map_or(u64::MAX, |w| w.resolve(now));
            let Some((cur, prev)) = reader.at_or_before(at)? else {
                bail!(
                    "no sample at or before {} in {}{}",
                    format_utc(at.min(now)),
                    args.dir.display(),
                    extent(reader)?
                );
            };
            let mut snapshot = Snapshot::derive(cur, prev.as_ref());
            if !show(view, &mut snapshot, prev.as_ref(), false)? {
                if args.groups {
                    bail!("{}", no_groups(snapshot.sample.unix_ns));
                }
                bail!("no process with pid {} in the sample at {}", args.pid, format_utc(snapshot.sample.unix_ns));
            }
        }
        Some(from) => {
            let (from, to) = (from.resolve(now), args.to.map_or(now, |w| w.resolve(now)));
            if from > to {
                bail!("--from {} is after --to {}", format_utc(from), format_utc(to));
            }
            let frames = reader.frames(from, to)?;
            if frames.is_empty() {
                bail!(
                    "no samples between {} and {} in {}{}",
                    format_utc(from),
                    format_utc(to),
                    args.dir.display(),
                    extent(reader)?
                );
            }
            // The sample just before the range, so the first one in it has rates too.
            let mut prev: Option<Sample> = match from.checked_sub(1) {
                Some(before) => reader.at_or_before(before)?.map(|(s, _)| s),
                None => None,
            };
            let (mut shown, mut without_root) = (0usize, 0usize);
            for frame in &frames {
                let Some(cur) = reader.read(frame) else { continue };
                let pair = prev.take().filter(|p| same_run(p, &cur));
                let mut snapshot = Snapshot::derive(cur, pair.as_ref());
                if show(view, &mut snapshot, pair.as_ref(), true)? {
                    shown += 1;
                } else {
                    without_root += 1;
                }
                prev = Some(snapshot.sample);
            }
            if args.groups && without_root > 0 {
                eprintln!(
                    "proctor replay: {without_root} of {} samples read have no groups stored (recorded without --groups); they are not shown",
                    shown + without_root
                );
                if shown == 0 {
                    bail!("{}", no_groups(from));
                }
            } else if without_root > 0 {
                eprintln!(
                    "proctor replay: pid {} is in {shown} of {} samples read; the others are not shown",
                    args.pid,
                    shown + without_root
                );
            }
            if shown == 0 && without_root > 0 {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Shows one stored sample, derived against the one before it; `false` when the tree's root
/// is not in it (nothing is printed then).
fn show(shown: Shown, s: &mut Snapshot, prev: Option<&Sample>, stream: bool) -> anyhow::Result<bool> {
    match shown {
        Shown::Snapshot(view) => {
            print_heading(view.format, &s.sample, prev);
            print_view(view, s, stream)?;
        }
        Shown::Tree { root, format } => {
            let Some(tree) = build_tree(&s.rows, root) else { return Ok(false) };
            print_heading(format, &s.sample, prev);
            // A stored sample has no answer for the tree's own cgroup (only the watched one's
            // counters are recorded), and PSS only as the worker last read it.
            let view = TreeView {
                tree: proctor_vocab::process::tree(s, &tree),
                cgroup: None,
                pss_read: None,
                pss_hint: "no stored PSS reading for these processes",
            };
            print_tree(&view, format, stream)?;
        }
        Shown::Groups { top, format } => {
            let Some(view) = proctor_agent::groups::stored_view(s, prev) else { return Ok(false) };
            s.groups = Some(std::sync::Arc::new(view));
            let doc = proctor_vocab::groups::groups(s, top).context("no groups")?;
            print_heading(format, &s.sample, prev);
            match format {
                Format::Json if stream => {
                    use std::io::Write;
                    let mut out = std::io::stdout().lock();
                    serde_json::to_writer(&mut out, &doc)?;
                    writeln!(out)?;
                }
                Format::Json => crate::output::print_json(&doc)?,
                Format::Text => crate::text::groups::print_text(&doc)?,
            }
        }
    }
    Ok(true)
}

fn no_groups(at: u64) -> String {
    format!(
        "the samples from {} on were recorded without groups: record with `--groups` (cgroup, user or a rules file), or see `proctor groups` for now",
        format_utc(at)
    )
}

/// The line above each text view: which sample, and what its rates span.
fn print_heading(format: Format, cur: &Sample, prev: Option<&Sample>) {
    if format == Format::Text {
        let rates = match prev {
            Some(p) => format!("rates over the {:.2} s before it", cur.mono_ns.saturating_sub(p.mono_ns) as f64 / 1e9),
            None => "no earlier sample of the same recorder run: no rates".to_string(),
        };
        println!("sample     {} (seq {}), {rates}", format_utc(cur.unix_ns), cur.seq);
    }
}

/// ", which holds samples from A to B" (or says it is empty), for error messages.
fn extent(reader: &mut Reader) -> anyhow::Result<String> {
    let frames = reader.all_frames()?;
    Ok(match (frames.first(), frames.last()) {
        (Some(first), Some(last)) => {
            format!(", which holds samples from {} to {}", format_utc(first.unix_ns()), format_utc(last.unix_ns()))
        }
        _ => ", which holds no samples".to_string(),
    })
}
