//! `proctor rollup`: rolls a data directory's raw samples up into the long-term tiers now (a
//! row per minute, a row per hour; `proctor_stored::rollup`), as `serve` and `record` do every
//! few minutes while they record. For a store recorded without them, or to see what the tiers
//! hold.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use proctor_stored::rollup::{roll, RollReport};
use serde::Serialize;

use crate::output::{print_json, Format};

/// Arguments of `proctor rollup`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The data directory (default: where `serve` records).
    #[arg(long, value_name = "DIR", default_value_os_t = crate::datadir::default_for_flags())]
    pub dir: PathBuf,
    #[command(flatten)]
    pub tiers: crate::daemon::TierArgs,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Default, Serialize)]
struct Totals {
    calls: u64,
    minute_blocks: u64,
    hour_blocks: u64,
    /// Six-hour windows of minute rows written again as one block each.
    compacted_windows: u64,
    samples_read: u64,
    bad_frames: u64,
    minute_tier_end_unix_s: Option<u64>,
    elapsed_ms: f64,
    note: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dir = crate::datadir::for_reading(&args.dir)?;
    let config = args.tiers.config();
    let mut totals = Totals::default();
    // Each call is bounded (a day of hours); by hand, roll everything that is finished.
    loop {
        let r: RollReport = roll(dir, &config).context("cannot roll up")?;
        totals.calls += 1;
        totals.minute_blocks += r.minute_blocks;
        totals.hour_blocks += r.hour_blocks;
        totals.compacted_windows += r.compacted_windows;
        totals.samples_read += r.samples_read;
        totals.bad_frames += r.bad_frames;
        totals.minute_tier_end_unix_s = r.minute_tier_end_unix_s;
        totals.elapsed_ms += r.elapsed_ms;
        totals.note = r.note.clone();
        let compacting = r.windows_left > 0 && r.compacted_windows > 0;
        if (r.hours_left == 0 && !compacting)
            || r.note.is_some()
            || (r.minute_blocks == 0 && r.hour_blocks == 0 && r.compacted_windows == 0)
        {
            break;
        }
    }
    match args.format {
        Format::Json => print_json(&totals)?,
        Format::Text => {
            println!(
                "rolled {} hours of raw samples ({} samples) into minute rows and {} days into hour rows in {:.0} ms",
                totals.minute_blocks, totals.samples_read, totals.hour_blocks, totals.elapsed_ms
            );
            if totals.compacted_windows > 0 {
                println!("compacted {} windows of six hours into one block each", totals.compacted_windows);
            }
            match totals.minute_tier_end_unix_s {
                Some(end) => println!(
                    "the minute tier ends at {} (an hour is rolled once it is over)",
                    proctor_vocab::format_utc(end.saturating_mul(1_000_000_000))
                ),
                None => println!("the minute tier is empty: no finished hour of raw samples yet"),
            }
            if totals.bad_frames > 0 {
                println!("{} raw frames could not be read and were skipped", totals.bad_frames);
            }
            if let Some(note) = &totals.note {
                println!("not rolled: {note}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
