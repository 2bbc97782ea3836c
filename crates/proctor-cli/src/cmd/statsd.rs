//! `proctor statsd`: run the statsd server in the foreground until SIGINT or SIGTERM, optionally
//! recording every flush into the data directory's statsd stream. The server's flags, config
//! file, sockets and backends are `crate::statsd_server`'s (shared with `proctor serve
//! --statsd`); nothing here parses metrics or knows Etsy's rules.

use std::path::PathBuf;
use std::process::ExitCode;

use proctor_statsd::Shutdown;
use proctor_store::STATSD_STREAM;

use crate::statsd_server::{etsy_config, start, FlushReaders, Options};
use crate::streams::EventRecorder;

/// Arguments of `proctor statsd`, boxed so the `Command` enum stays small.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    options: Box<Options>,
    /// Also record every flush into DATA/statsd (DATA from --data-dir, else the directory
    /// `proctor serve` records into), for `proctor report --timer`.
    #[arg(long)]
    record: bool,
    /// The data directory to record into (must exist); implies --record.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let record = if args.record || args.data_dir.is_some() {
        Some(match &args.data_dir {
            Some(dir) => dir.clone(),
            None => crate::datadir::default_dir_created().map_err(|(_, e)| anyhow::anyhow!(e))?,
        })
    } else {
        None
    };
    let args = *args.options;
    let etsy = etsy_config(&args)?;
    // Block SIGINT and SIGTERM before any thread starts so every thread inherits the mask and
    // only the waiter below receives them.
    let signals = crate::signals::block()?;
    let shutdown = Shutdown::new();
    let recorder = match &record {
        Some(dir) => Some(EventRecorder::start(dir, STATSD_STREAM, "proctor statsd")?),
        None => None,
    };
    let server = start(&args, etsy, shutdown.clone(), recorder.as_ref(), FlushReaders::BackendsOnly)?;
    let waiter = shutdown.clone();
    signals.on_signal(move || {
        eprintln!("proctor statsd: stopping (last flush first)");
        waiter.trigger();
    });
    server.join();
    if let Some(recorder) = recorder {
        recorder.stop();
    }
    if let Some(path) = &args.unix {
        let _ = std::fs::remove_file(path);
    }
    Ok(ExitCode::SUCCESS)
}
