//! `proctor probe URL`: measure an HTTP endpoint phase by phase; `proctor probe analyze
//! FILE…` re-reads recorded runs.
//!
//! This module is the I/O around `proctor-probe`: argument checks, the `--out` JSON-lines
//! file (one line per request, flushed as it arrives), Ctrl-C (blocked in every thread and
//! taken by `sigwait` on a thread of its own, so the report of what was measured is printed
//! instead of dying mid-run), reading recorded files, and writing the report and plot.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use proctor_probe::client::ClientConfig;
use proctor_probe::http::RequestSpec;
use proctor_probe::report::{self, ReportConfig};
use proctor_probe::runner::{self, RunConfig};
use proctor_probe::schedule::{Bursts, Limit, Pacing};
use proctor_probe::tls::{parse_pem_certificates, TlsConfig, Trust};
use proctor_probe::{plot, ErrorClass, RequestRecord};

use crate::output::Format;
use crate::streams::{probe_result, EventRecorder};
use proctor_model::{ProbeBatch, ProbeResult};
use proctor_store::{Event, PROBE_STREAM};
use proctor_vocab::duration_arg as parse_duration;

/// Arguments of `proctor probe`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    analyze: Option<Sub>,
    /// The URL to probe: http://HOST[:PORT]/PATH or https://…
    #[arg(required = true)]
    url: Option<String>,
    #[command(flatten)]
    run: RunOptions,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text, global = true)]
    format: Format,
    /// Also draw the times over the run and their histogram to this file (.svg or .png).
    #[arg(long, value_name = "FILE", global = true)]
    plot: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct RunOptions {
    /// Number of requests (default 50 when neither -n nor --duration is given). One limit
    /// only: -n with --duration (or with --every) is refused rather than one of them ignored.
    #[arg(short = 'n', long = "requests", value_name = "N", value_parser = clap::value_parser!(u64).range(1..),
          conflicts_with_all = ["duration", "every"])]
    requests: Option<u64>,
    /// Keep sending for this long (e.g. 30s, 5m).
    #[arg(long, value_parser = parse_duration, value_name = "D", conflicts_with = "every")]
    duration: Option<Duration>,
    /// Closed loop: this many workers, each sending its next request when the last ends.
    /// With --rate: the most requests in flight at once (default 32).
    #[arg(short = 'c', long, value_name = "C")]
    concurrency: Option<usize>,
    /// Open loop: start this many requests per second on schedule; latency is measured from
    /// the intended send time (coordinated-omission correction).
    #[arg(long, value_name = "R")]
    rate: Option<f64>,
    /// Open a new connection for every request (sends Connection: close).
    #[arg(long)]
    no_reuse: bool,
    /// HTTP method.
    #[arg(short = 'X', long = "method", default_value = "GET")]
    method: String,
    /// Extra header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "'K: V'")]
    headers: Vec<String>,
    /// Request body.
    #[arg(long, value_name = "BODY")]
    data: Option<String>,
    /// https: trust only the CA certificates in this PEM file (a private CA), instead of the
    /// built-in Mozilla roots.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    cacert: Option<PathBuf>,
    /// https: do not verify the server's certificate. The report and JSON say
    /// `tls_verified: false`.
    #[arg(short = 'k', long)]
    insecure: bool,
    /// Per-request deadline, from its start to the end of the body.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    timeout: Duration,
    /// Append every request to this file as a JSON line, as it finishes.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Also record the results into DATA/probe (DATA from --data-dir, else the directory
    /// `proctor serve` records into), for `proctor report`. Batches of up to a second.
    #[arg(long)]
    record: bool,
    /// The data directory to record into (must exist); implies --record.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Scheduled bursts: start a burst this often (e.g. 5m); needs --burst.
    #[arg(long, value_parser = parse_duration, value_name = "D", requires = "burst")]
    every: Option<Duration>,
    /// Requests per burst (sent with --concurrency workers).
    #[arg(long, value_name = "N", requires = "every")]
    burst: Option<u64>,
    /// How long to keep bursting (default: until Ctrl-C).
    #[arg(long = "for", value_parser = parse_duration, value_name = "D", requires = "every")]
    for_duration: Option<Duration>,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Re-analyze JSON-lines results written by --out (several files are merged).
    Analyze {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The plot's file name is checked before any request is sent or file read.
    if let Some(path) = &args.plot {
        plot::Format::from_path(path)?;
    }
    if let Some(Sub::Analyze { files }) = &args.analyze {
        return analyze(files, args.format, args.plot.as_deref());
    }
    let Some(url) = args.url.as_deref() else {
        bail!("a URL is required");
    };
    probe(url, &args.run, args.format, args.plot.as_deref())
}

fn probe(url: &str, options: &RunOptions, format: Format, plot_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let target = proctor_probe::url::parse(url)?;
    let mut headers = Vec::new();
    for header in &options.headers {
        let Some((name, value)) = header.split_once(':') else {
            bail!("invalid header {header:?}: expected 'Name: value'");
        };
        let name = name.trim();
        if name.is_empty() || name.bytes().any(|byte| byte <= b' ' || byte >= 0x7f || byte == b':') {
            bail!("invalid header name in {header:?}");
        }
        if value.bytes().any(|byte| byte == b'\r' || byte == b'\n') {
            bail!("invalid header value in {header:?}: line breaks");
        }
        headers.push((name.to_string(), value.trim().to_string()));
    }
    let method = options.method.to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|byte| byte.is_ascii_alphabetic()) {
        bail!("invalid method {:?}", options.method);
    }
    let pacing = match options.rate {
        Some(rate) if !(rate.is_finite() && rate > 0.0) => bail!("--rate must be a positive number"),
        Some(rate) => Pacing::Open { rate_per_second: rate, workers: options.concurrency.unwrap_or(32) },
        None => Pacing::Closed { concurrency: options.concurrency.unwrap_or(1) },
    };
    if pacing.workers() > 1024 {
        bail!("--concurrency above 1024 is refused: one thread per worker");
    }
    let bursts = match (options.every, options.burst) {
        (Some(every), Some(requests)) => {
            if every.is_zero() || requests == 0 {
                bail!("--every and --burst must be above zero");
            }
            Some(Bursts { every, requests, total: options.for_duration.unwrap_or(Duration::MAX) })
        }
        _ => None,
    };
    let limit = match bursts {
        Some(bursts) => Limit { count: Some(bursts.requests), duration: Some(bursts.every) },
        None if options.requests.is_none() && options.duration.is_none() => Limit { count: Some(50), duration: None },
        None => Limit { count: options.requests, duration: options.duration },
    };
    let tls = match (target.tls, &options.cacert, options.insecure) {
        (false, None, false) => None,
        (false, _, _) => bail!("--cacert and --insecure apply to https URLs only"),
        (true, Some(path), _) => {
            let pem = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            let source = path.display().to_string();
            let certificates = parse_pem_certificates(&pem, &source)?;
            Some(TlsConfig::new(Trust::Roots { certificates, source })?)
        }
        (true, None, true) => {
            eprintln!("proctor: warning: --insecure: server certificates are not verified");
            Some(TlsConfig::new(Trust::Insecure)?)
        }
        (true, None, false) => Some(TlsConfig::new(Trust::WebpkiRoots)?),
    };
    let client = Arc::new(ClientConfig {
        target,
        request: RequestSpec {
            method,
            headers,
            body: options.data.clone().unwrap_or_default().into_bytes(),
            close: options.no_reuse,
        },
        timeout: options.timeout,
        reuse: !options.no_reuse,
        tls,
    });
    let mut out = match &options.out {
        Some(path) => Some(BufWriter::new(
            File::options()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open {}", path.display()))?,
        )),
        None => None,
    };

    let recorder = if options.record || options.data_dir.is_some() {
        let dir = match &options.data_dir {
            Some(dir) => dir.clone(),
            None => crate::datadir::default_dir_created().map_err(|(_, e)| anyhow::anyhow!(e))?,
        };
        Some(EventRecorder::start(&dir, PROBE_STREAM, "proctor probe")?)
    } else {
        None
    };

    // Block SIGINT/SIGTERM before any thread starts, so every thread inherits the mask and
    // only the signal thread takes them.
    let signals = crate::signals::block()?;
    let interrupted = Arc::new(AtomicBool::new(false));
    let run_id = run_id();
    let handle = runner::start(RunConfig { client, pacing, limit, bursts, run_id: run_id.clone() })
        .context("cannot start the probe threads")?;
    let stop = handle.stop_flag();
    let interrupted_for_thread = Arc::clone(&interrupted);
    signals.on_signal(move || {
        interrupted_for_thread.store(true, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
    });

    let mut records: Vec<RequestRecord> = Vec::new();
    let mut batch = Batch::new(run_id.clone(), url);
    loop {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        match handle.records.recv_timeout(Duration::from_millis(100)) {
            Ok(record) => {
                if let Some(out) = out.as_mut() {
                    serde_json::to_writer(&mut *out, &record)?;
                    out.write_all(b"\n")?;
                    out.flush().context("cannot write the results file")?;
                }
                if let Some(recorder) = &recorder {
                    batch.push(&record, recorder);
                }
                records.push(record);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if let Some(recorder) = &recorder {
            batch.send_if_old(recorder);
        }
    }
    let was_interrupted = interrupted.load(Ordering::Relaxed);
    if was_interrupted {
        // Records that finished before the signal are already in; requests still in flight
        // are abandoned (their threads end with the process).
        while let Ok(record) = handle.records.try_recv() {
            records.push(record);
        }
        eprintln!("proctor: interrupted; reporting the {} requests that finished", records.len());
    } else {
        handle.join();
    }
    if let Some(recorder) = recorder {
        if was_interrupted {
            for record in &records[records.len().min(batch.seen)..] {
                batch.push(record, &recorder);
            }
        }
        batch.send(&recorder);
        recorder.stop();
    }
    // A server that answered the handshake in plain HTTP needs another URL, not a CA file.
    let plain_http = records.iter().filter(|record| record.server_spoke_plain_http()).count();
    if plain_http > 0 {
        eprintln!(
            "proctor: {url}: the server does not speak TLS: {plain_http} of {} requests got a plain HTTP answer to their TLS handshake; probe it with http://",
            records.len()
        );
    }
    let tls_failures = records.iter().filter(|record| record.error == Some(ErrorClass::Tls)).count() - plain_http;
    if tls_failures > 0 && options.cacert.is_none() && !options.insecure {
        eprintln!(
            "proctor: TLS failed for {tls_failures} of {} requests; a server with a private CA needs --cacert FILE (or --insecure to skip verification)",
            records.len()
        );
    }
    let title = format!("proctor probe {url} ({})", describe(&pacing, bursts, options.no_reuse));
    let report = print_report(&records, &title, format, plot_path)?;
    // The report is printed either way; the exit status says whether anything worked.
    let none_succeeded = report.none_succeeded();
    if let Some(why) = &none_succeeded {
        eprintln!("proctor: {why}");
    }
    Ok(match (was_interrupted, none_succeeded) {
        (true, _) => ExitCode::from(130),
        (false, Some(_)) => ExitCode::FAILURE,
        (false, None) => ExitCode::SUCCESS,
    })
}

/// Results waiting to be recorded: one stored record per second of results (or per 512), so a
/// fast probe does not write a frame per request.
struct Batch {
    run: String,
    target: String,
    results: Vec<ProbeResult>,
    started: Option<std::time::Instant>,
    /// Records pushed so far (the interrupted path pushes the rest).
    seen: usize,
}

impl Batch {
    const MAX: usize = 512;
    const AGE: Duration = Duration::from_secs(1);

    fn new(run: String, target: &str) -> Self {
        Batch { run, target: target.to_string(), results: Vec::new(), started: None, seen: 0 }
    }

    fn push(&mut self, record: &RequestRecord, recorder: &EventRecorder) {
        self.seen += 1;
        self.started.get_or_insert_with(std::time::Instant::now);
        self.results.push(probe_result(record));
        if self.results.len() >= Self::MAX {
            self.send(recorder);
        }
    }

    fn send_if_old(&mut self, recorder: &EventRecorder) {
        if self.started.is_some_and(|t| t.elapsed() >= Self::AGE) {
            self.send(recorder);
        }
    }

    fn send(&mut self, recorder: &EventRecorder) {
        self.started = None;
        if self.results.is_empty() {
            return;
        }
        let results = std::mem::take(&mut self.results);
        // The frame's time is the batch's earliest send time, so a time range finds it.
        let unix_ns = results.iter().map(|r| r.sent_unix_ns).min().unwrap_or(0);
        recorder
            .send(unix_ns, Event::Probe(ProbeBatch { run: self.run.clone(), target: self.target.clone(), results }));
    }
}

fn describe(pacing: &Pacing, bursts: Option<Bursts>, no_reuse: bool) -> String {
    let mut text = match *pacing {
        Pacing::Closed { concurrency } => {
            format!("closed loop, {} worker{}", concurrency.max(1), if concurrency > 1 { "s" } else { "" })
        }
        Pacing::Open { rate_per_second, workers } => {
            format!("open loop at {rate_per_second}/s, up to {workers} in flight")
        }
    };
    if let Some(bursts) = bursts {
        text.push_str(&format!(", bursts of {} every {:?}", bursts.requests, bursts.every));
    }
    text.push_str(if no_reuse { ", new connection per request" } else { ", connections reused" });
    text
}

/// Seconds since the epoch and our pid: unique enough to tell merged runs apart.
fn run_id() -> String {
    let seconds = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_secs());
    format!("{seconds}-{}", std::process::id())
}

fn analyze(files: &[PathBuf], format: Format, plot_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut records = Vec::new();
    let mut bad_lines = 0u64;
    for path in files {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        for (number, line) in BufReader::new(file).lines().enumerate() {
            let line = line.with_context(|| format!("cannot read {}", path.display()))?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<RequestRecord>(&line) {
                Ok(record) => records.push(record),
                Err(err) => {
                    bad_lines += 1;
                    if bad_lines <= 10 {
                        eprintln!("proctor: {}:{}: not a probe record: {err}", path.display(), number + 1);
                    }
                }
            }
        }
    }
    if bad_lines > 10 {
        eprintln!("proctor: {bad_lines} lines were not probe records (first 10 shown)");
    }
    if records.is_empty() {
        bail!("no probe records in {}", files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    let names: Vec<String> = files.iter().map(|path| path.display().to_string()).collect();
    // Analysing recorded failures is a success: the exit status speaks of this command.
    print_report(&records, &format!("proctor probe analyze {}", names.join(" ")), format, plot_path)?;
    Ok(ExitCode::SUCCESS)
}

fn print_report(
    records: &[RequestRecord],
    title: &str,
    format: Format,
    plot_path: Option<&Path>,
) -> anyhow::Result<report::Report> {
    let report = report::build(records, &ReportConfig::default());
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    match format {
        Format::Text => stdout.write_all(report::render_text(&report, title).as_bytes())?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut stdout, &report)?;
            stdout.write_all(b"\n")?;
        }
    }
    stdout.flush()?;
    if let Some(path) = plot_path {
        let bytes = match plot::Format::from_path(path)? {
            plot::Format::Png => plot::png(records, &report, title),
            plot::Format::Svg => plot::svg(records, &report, title).into_bytes(),
        };
        std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("proctor: plot written to {}", path.display());
    }
    Ok(report)
}
