//! `proctor probe URL`: measure an HTTP endpoint phase by phase, or a WebSocket's echo
//! (`ws://`, `wss://`) message by message; `proctor probe jupyter URL` holds a key in a
//! Jupyter terminal and times each echo; `proctor probe analyze FILE…` re-reads recorded runs.
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
use proctor_probe::report;
use proctor_probe::runner::{self, RunConfig};
use proctor_probe::schedule::{Bursts, Limit, Pacing};
use proctor_probe::tls::{parse_pem_certificates, TlsConfig, Trust};
use proctor_probe::ws::{self, Framing, Payload, WsConfig, WsPacing, WsSummary};
use proctor_probe::{jupyter, plot, ErrorClass, RequestRecord};

use crate::output::Format;
use crate::probe_filter::{plural, report_filtered, FilterArgs, Filters};
use crate::streams::{probe_result, EventRecorder};
use proctor_model::{ProbeBatch, ProbeResult};
use proctor_sampler::power::{EnergyMeter, EnergyTotals};
use proctor_store::{Event, PROBE_STREAM};
use proctor_vocab::duration_arg as parse_duration;
use proctor_vocab::{format_utc, parse_when, When};

/// Arguments of `proctor probe`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    analyze: Option<Sub>,
    /// The URL to probe: http://HOST[:PORT]/PATH or https://…; ws://… or wss://… for a
    /// WebSocket echo (messages sent, each timed until its echo comes back).
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
    /// Open loop: start this many requests per second on schedule (`50`, `50/s`, `3000/min`);
    /// latency is measured from the intended send time (coordinated-omission correction).
    #[arg(long, value_name = "R/s", value_parser = proctor_vocab::quantity::rate_arg)]
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
    /// Send `Authorization: Bearer TOKEN` with TOKEN read from this file (surrounding
    /// whitespace ignored): a token kept out of the command line, as a Kubernetes Secret
    /// mounts it (an exec liveness probe of `proctor serve --token-file`).
    #[arg(long, value_name = "FILE")]
    bearer_token_file: Option<PathBuf>,
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
    /// WebSocket: send this text as a held key sends it (at --key-rate for --hold), each
    /// keystroke matched to its echo by counting the text in what comes back.
    #[arg(long, value_name = "TEXT")]
    keys: Option<String>,
    /// Meter the host's energy over the run (RAPL zones, hwmon sensors, NVIDIA boards) and
    /// report requests completed per joule and the mean watts; says why not where no counter
    /// can be read.
    #[arg(long)]
    energy: bool,
    /// With --energy: read the counters under this host root (a container with the host's /
    /// mounted there).
    #[arg(long, value_name = "DIR", requires = "energy")]
    host_root: Option<PathBuf>,
    /// With --energy: a captured tree standing for / (tests).
    #[arg(long, value_name = "DIR", hide = true, requires = "energy", conflicts_with = "host_root")]
    root: Option<PathBuf>,
    /// WebSocket with --keys (and jupyter): how long the key is held (default 15s).
    #[arg(long, value_parser = parse_duration, value_name = "D")]
    hold: Option<Duration>,
    /// WebSocket with --keys (and jupyter): keystrokes per second, '30/s' or '30' (default 30/s,
    /// a typical keyboard repeat rate).
    #[arg(long, value_name = "R/s", value_parser = parse_key_rate)]
    key_rate: Option<f64>,
}

fn parse_key_rate(text: &str) -> Result<f64, String> {
    match proctor_vocab::quantity::parse_rate(text) {
        Ok(rate) if rate > 0.0 && rate <= 10_000.0 => Ok(rate),
        _ => Err(format!("invalid key rate {text:?}: expected keystrokes per second, e.g. 30/s (at most 10000)")),
    }
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Re-analyze JSON-lines results written by --out, or a browser's HAR export (several
    /// files are merged); the filters choose which requests the report covers.
    Analyze {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        filters: FilterArgs,
        /// Only requests sent at or after this time ("10 min ago", "2024-05-01T12:00:00" UTC,
        /// "@UNIX_SECONDS").
        #[arg(long, value_parser = parse_when)]
        from: Option<When>,
        /// Only requests sent at or before this time.
        #[arg(long, value_parser = parse_when)]
        to: Option<When>,
    },
    /// Keystroke-to-echo latency in a Jupyter terminal, the Netflix way: create a terminal
    /// (POST /api/terminals), hold a key in it (["stdin","j"] at --key-rate for --hold), time
    /// each keystroke until its echo comes back in ["stdout", …], delete the terminal (also on
    /// Ctrl-C).
    Jupyter {
        /// The Jupyter server: http://HOST:PORT[/BASE_URL] or https://…
        url: String,
        /// Jupyter's token (default: $JUPYTER_TOKEN); sent as 'Authorization: token T'.
        #[arg(long, value_name = "T", conflicts_with = "token_file")]
        token: Option<String>,
        /// Read the token from this file (keeps it out of the process list).
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        #[command(flatten)]
        run: Box<RunOptions>,
    },
}

/// A HAR larger than this is refused before it is read.
const MAX_HAR_BYTES: u64 = 1 << 30;

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The plot's file name is checked before any request is sent or file read.
    if let Some(path) = &args.plot {
        plot::Format::from_path(path)?;
    }
    match &args.analyze {
        Some(Sub::Analyze { files, filters, from, to }) => {
            let now = crate::cmd::common::now_unix_ns();
            let mut range_text = Vec::new();
            range_text.extend(from.map(|when| format!("--from {}", format_utc(when.resolve(now)))));
            range_text.extend(to.map(|when| format!("--to {}", format_utc(when.resolve(now)))));
            let filters = Filters {
                args: filters.clone(),
                from: from.map(|when| when.resolve(now)),
                to: to.map(|when| when.resolve(now)),
                range_text,
            };
            return analyze(files, &filters, args.format, args.plot.as_deref());
        }
        Some(Sub::Jupyter { url, token, token_file, run }) => {
            let token = match (token, token_file) {
                (Some(token), _) => Some(token.clone()),
                (None, Some(path)) => Some(super::common::secret(path, "--token-file")?),
                (None, None) => std::env::var("JUPYTER_TOKEN").ok().filter(|token| !token.is_empty()),
            };
            return probe_jupyter(url, token.as_deref(), run, args.format, args.plot.as_deref());
        }
        None => {}
    }
    let Some(url) = args.url.as_deref() else {
        bail!("a URL is required");
    };
    let scheme = url.split("://").next().unwrap_or("").to_ascii_lowercase();
    if scheme == "ws" || scheme == "wss" {
        return probe_ws(url, &args.run, args.format, args.plot.as_deref());
    }
    for (given, flag) in [
        (args.run.keys.is_some(), "--keys"),
        (args.run.hold.is_some(), "--hold"),
        (args.run.key_rate.is_some(), "--key-rate"),
    ] {
        if given {
            bail!("{flag} applies to WebSocket URLs (ws://, wss://) and to 'probe jupyter' only");
        }
    }
    probe(url, &args.run, args.format, args.plot.as_deref())
}

fn parse_headers(options: &RunOptions) -> anyhow::Result<Vec<(String, String)>> {
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
    if let Some(path) = &options.bearer_token_file {
        let token = super::common::secret(path, "--bearer-token-file")?;
        headers.push(("Authorization".to_string(), format!("Bearer {token}")));
    }
    Ok(headers)
}

/// The TLS configuration `options` ask for, for a target that is or is not TLS.
fn tls_config(tls_target: bool, options: &RunOptions) -> anyhow::Result<Option<TlsConfig>> {
    Ok(match (tls_target, &options.cacert, options.insecure) {
        (false, None, false) => None,
        (false, _, _) => bail!("--cacert and --insecure apply to https and wss URLs only"),
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
    })
}

fn probe(url: &str, options: &RunOptions, format: Format, plot_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let target = proctor_probe::url::parse(url)?;
    let headers = parse_headers(options)?;
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
    let tls = tls_config(target.tls, options)?;
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
    let title = format!("proctor probe {url} ({})", describe(&pacing, bursts, options.no_reuse));
    let run_id = run_id();
    let start = || {
        runner::start(RunConfig { client, pacing, limit, bursts, run_id: run_id.clone(), url: Some(url.to_string()) })
    };
    let tls_hint = options.cacert.is_none() && !options.insecure;
    run_and_report(url, &run_id, options, start, &title, format, plot_path, tls_hint, None)
}

/// What a run reports besides its records.
type Extra<'a> = Option<&'a dyn Fn() -> WsSummary>;

/// Runs what `start` starts, writing records to `--out` and the store as they arrive, until
/// the run ends or Ctrl-C; then prints the report. The exit status says whether anything
/// worked (130 after Ctrl-C).
#[allow(clippy::too_many_arguments)]
fn run_and_report(
    url: &str,
    run_id: &str,
    options: &RunOptions,
    start: impl FnOnce() -> std::io::Result<runner::RunHandle>,
    title: &str,
    format: Format,
    plot_path: Option<&Path>,
    tls_hint: bool,
    websocket: Extra<'_>,
) -> anyhow::Result<ExitCode> {
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
    let meter = match options.energy {
        true => {
            let root = super::common::root_of(options.root.as_deref(), options.host_root.as_deref())?;
            let nvml = root.is_real().then(|| proctor_sampler::nvml::LIBRARY.to_string());
            Some(EnergyMeter::start(root, Duration::from_secs(1), nvml).context("cannot start the energy meter")?)
        }
        false => None,
    };
    let handle = start().context("cannot start the probe threads")?;
    let stop = handle.stop_flag();
    let interrupted_for_thread = Arc::clone(&interrupted);
    signals.on_signal(move || {
        interrupted_for_thread.store(true, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
    });

    let mut records: Vec<RequestRecord> = Vec::new();
    let mut batch = Batch::new(run_id.to_string(), url);
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
    if tls_failures > 0 && tls_hint {
        eprintln!(
            "proctor: TLS failed for {tls_failures} of {} requests; a server with a private CA needs --cacert FILE (or --insecure to skip verification)",
            records.len()
        );
    }
    let summary = websocket.map(|summary| summary());
    let energy = meter.map(|m| energy_report(&m.finish(), &records));
    let energy = energy.as_ref().map(|(value, text)| (value, text.as_str()));
    let report = print_report(&records, title, format, plot_path, summary.as_ref(), energy)?;
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

/// The schedule of a WebSocket run: held keys (open loop at the key rate for the hold), an
/// open loop at --rate, or a closed loop; numbered messages unless --keys.
fn ws_schedule(options: &RunOptions, keys: Option<&str>) -> anyhow::Result<(WsPacing, Limit, Payload, String)> {
    for (given, flag) in [
        (options.concurrency.is_some_and(|c| c != 1), "-c/--concurrency (one connection, one message stream)"),
        (options.no_reuse, "--no-reuse"),
        (!options.method.eq_ignore_ascii_case("GET"), "-X/--method"),
        (options.data.is_some(), "--data"),
        (options.every.is_some(), "--every/--burst/--for"),
    ] {
        if given {
            bail!("{flag} does not apply to a WebSocket probe");
        }
    }
    if let Some(keys) = keys {
        if keys.is_empty() {
            bail!("--keys needs the text a keystroke sends, e.g. --keys j");
        }
        if options.rate.is_some() {
            bail!("--rate and --keys: a held key is sent at --key-rate");
        }
        let rate = options.key_rate.unwrap_or(30.0);
        let limit = match (options.requests, options.duration) {
            (None, None) => Limit { count: None, duration: Some(options.hold.unwrap_or(Duration::from_secs(15))) },
            (requests, duration) if options.hold.is_none() => Limit { count: requests, duration },
            _ => bail!("--hold with -n or --duration: give one limit"),
        };
        let held = match limit.duration {
            Some(duration) => format!("for {duration:?}"),
            None => format!("{} times", limit.count.unwrap_or(0)),
        };
        let describe = format!("holding {keys:?} at {rate}/s {held}, one connection");
        return Ok((WsPacing::Open { rate_per_second: rate }, limit, Payload::Key(keys.to_string()), describe));
    }
    if options.hold.is_some() || options.key_rate.is_some() {
        bail!("--hold and --key-rate go with --keys");
    }
    let limit = match (options.requests, options.duration) {
        (None, None) => Limit { count: Some(50), duration: None },
        (requests, duration) => Limit { count: requests, duration },
    };
    Ok(match options.rate {
        Some(rate) if !(rate.is_finite() && rate > 0.0) => bail!("--rate must be a positive number"),
        Some(rate) => (
            WsPacing::Open { rate_per_second: rate },
            limit,
            Payload::Numbered,
            format!("open loop at {rate}/s, one connection, numbered messages"),
        ),
        None => (WsPacing::Closed, limit, Payload::Numbered, "closed loop, one connection, numbered messages".into()),
    })
}

fn probe_ws(url: &str, options: &RunOptions, format: Format, plot_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let target = proctor_probe::url::parse_ws(url)?;
    let (pacing, limit, payload, describe) = ws_schedule(options, options.keys.as_deref())?;
    let headers = parse_headers(options)?;
    let tls = tls_config(target.tls, options)?;
    let title = format!("proctor probe {url} ({describe})");
    let config = WsConfig {
        target,
        headers,
        tls,
        timeout: options.timeout,
        pacing,
        limit,
        payload,
        framing: Framing::Plain,
        run_id: run_id(),
        url: Some(url.to_string()),
    };
    run_ws(config, options, &title, format, plot_path)
}

/// Runs a WebSocket probe and reports it with its `websocket:` summary.
fn run_ws(
    config: WsConfig,
    options: &RunOptions,
    title: &str,
    format: Format,
    plot_path: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let url = config.url.clone().unwrap_or_default();
    let run_id = config.run_id.clone();
    let counters: std::cell::RefCell<Option<Arc<ws::WsCounters>>> = std::cell::RefCell::new(None);
    let start = || {
        let (handle, started) = ws::start(config)?;
        *counters.borrow_mut() = Some(started);
        Ok(handle)
    };
    let summary = || counters.borrow().as_ref().map(|counters| counters.summary()).unwrap_or_default();
    let tls_hint = options.cacert.is_none() && !options.insecure;
    run_and_report(&url, &run_id, options, start, title, format, plot_path, tls_hint, Some(&summary))
}

fn probe_jupyter(
    base: &str,
    token: Option<&str>,
    options: &RunOptions,
    format: Format,
    plot_path: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let server = proctor_probe::url::parse(base)?;
    let keys = options.keys.clone().unwrap_or_else(|| "j".to_string());
    let (pacing, limit, payload, describe) = ws_schedule(options, Some(&keys))?;
    let headers = jupyter::headers(token, &parse_headers(options)?);
    let tls = tls_config(server.tls, options)?;
    let mut terminal = jupyter::create_terminal(base, tls.clone(), headers.clone(), options.timeout)?;
    eprintln!("proctor: created terminal {} on {base}; it is deleted at the end", terminal.name);
    let title = format!("proctor probe jupyter {base}: keystroke to echo in terminal {} ({describe})", terminal.name);
    let config = WsConfig {
        url: Some(proctor_probe::url::ws_url(&terminal.websocket)),
        target: terminal.websocket.clone(),
        headers,
        tls,
        timeout: options.timeout,
        pacing,
        limit,
        payload,
        framing: Framing::JupyterTerminal,
        run_id: run_id(),
    };
    let result = run_ws(config, options, &title, format, plot_path);
    match terminal.delete(options.timeout) {
        Ok(()) => eprintln!("proctor: deleted terminal {}", terminal.name),
        Err(why) => eprintln!("proctor: warning: terminal {} may still be running: {why}", terminal.name),
    }
    result
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

fn analyze(files: &[PathBuf], filters: &Filters, format: Format, plot_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut records = Vec::new();
    let mut bad_lines = 0u64;
    for path in files {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let mut reader = BufReader::new(file);
        let start = reader.fill_buf().with_context(|| format!("cannot read {}", path.display()))?;
        let har_extension = path.extension().is_some_and(|extension| extension.eq_ignore_ascii_case("har"));
        if har_extension || proctor_probe::har::looks_like_har(start) {
            let read = read_har(path, reader)?;
            // Taken, not copied, when it is the first file: a copy would hold the records
            // twice at the peak (a 300 MB HAR's 1.5 million WebSocket pairs: 430 MB each).
            if records.is_empty() {
                records = read;
            } else {
                records.extend(read);
            }
            continue;
        }
        for (number, line) in reader.lines().enumerate() {
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
    report_filtered(records, filters, &format!("proctor probe analyze {}", names.join(" ")), format, plot_path)?;
    // Analysing recorded failures is a success: the exit status speaks of this command.
    Ok(ExitCode::SUCCESS)
}

/// A HAR file's requests; a file over [`MAX_HAR_BYTES`] is refused before it is read, and a
/// wrong value is an error naming its JSON path.
fn read_har(path: &Path, reader: BufReader<File>) -> anyhow::Result<Vec<RequestRecord>> {
    let size = reader.get_ref().metadata().with_context(|| format!("cannot read {}", path.display()))?.len();
    if size > MAX_HAR_BYTES {
        bail!("{}: a HAR of {size} bytes is more than the {MAX_HAR_BYTES} read (1 GiB)", path.display());
    }
    let run = format!(
        "har:{}",
        path.file_name().map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned())
    );
    // `take` holds the bound even for a file that grows while it is read.
    let import = proctor_probe::har::read(std::io::Read::take(reader, MAX_HAR_BYTES + 1), &run)
        .map_err(|err| anyhow::anyhow!("{}: {err}", path.display()))?;
    eprintln!(
        "proctor: {}: {}, {} ({}{}{})",
        path.display(),
        plural(import.http_entries, "HTTP entry", "HTTP entries"),
        plural(import.websocket_entries, "WebSocket entry", "WebSocket entries"),
        plural(import.records.len() as u64 - import.http_entries, "message pair", "message pairs"),
        if import.unanswered_sends > 0 {
            format!("; {} unanswered", plural(import.unanswered_sends, "send", "sends"))
        } else {
            String::new()
        },
        if import.unsolicited_receives > 0 {
            format!("; {} with no send before", plural(import.unsolicited_receives, "receive", "receives"))
        } else {
            String::new()
        },
    );
    Ok(import.records)
}

fn print_report(
    records: &[RequestRecord],
    title: &str,
    format: Format,
    plot_path: Option<&Path>,
    websocket: Option<&WsSummary>,
    energy: Option<(&serde_json::Value, &str)>,
) -> anyhow::Result<report::Report> {
    crate::probe_filter::print_report(records, title, format, plot_path, None, websocket, energy)
}

/// Requests per joule over a metered run, as JSON and as the report's closing lines. A request
/// counts when it completed (an answer came back, whatever its status); the energy is the
/// host's total over the run (see `proctor_procfs::power`), or nothing, with the reason.
fn energy_report(totals: &EnergyTotals, records: &[RequestRecord]) -> (serde_json::Value, String) {
    let completed = records.iter().filter(|r| r.error.is_none()).count() as u64;
    let joules = totals.host_joules.filter(|j| *j > 0.0);
    let seconds = totals.seconds;
    let why_not = match joules {
        Some(_) => None,
        None => {
            let mut why = if totals.domains.is_empty() {
                "no energy counter or power sensor could be read here".to_string()
            } else if totals.host_joules.is_none() {
                let names: Vec<&str> = totals.domains.iter().map(|d| d.domain.as_str()).collect();
                format!("no domain makes the host's total (only {})", names.join(", "))
            } else {
                "the counters did not move over the run".to_string()
            };
            if !totals.unreadable.is_empty() {
                why.push_str(&format!("; unreadable: {}", totals.unreadable.join("; ")));
            }
            if let Some(nvml) = &totals.nvml {
                why.push_str(&format!("; NVML {nvml}"));
            }
            Some(why)
        }
    };
    let watts = joules.filter(|_| seconds > 0.0).map(|j| j / seconds);
    let per_joule = joules.map(|j| completed as f64 / j);
    let per_second = (seconds > 0.0).then(|| completed as f64 / seconds);
    let value = serde_json::json!({
        "seconds": seconds,
        "requests_completed": completed,
        "host_joules": joules,
        "mean_watts": watts,
        "requests_per_joule": per_joule,
        "requests_per_second": per_second,
        "requests_per_second_per_watt": per_second.zip(watts).map(|(r, w)| r / w),
        "domains": totals.domains,
        "unreadable": totals.unreadable,
        "nvml": totals.nvml,
        "why_not": why_not,
    });
    let text = match (joules, watts, per_joule, &why_not) {
        (Some(j), Some(w), Some(rpj), _) => {
            let parts: Vec<String> = totals
                .domains
                .iter()
                .filter(|d| d.in_host_total)
                .map(|d| format!("{} {:.3} J", d.domain, d.joules))
                .collect();
            format!(
                "energy     {j:.3} J over {seconds:.2} s, {w:.2} W on average ({})\n\
                 per joule  {rpj:.4} requests/J: {completed} requests completed, {:.2} requests/s at {w:.2} W\n",
                parts.join(", "),
                per_second.unwrap_or(0.0),
            )
        }
        _ => format!("energy     not measured: {}\n", why_not.as_deref().unwrap_or("no figure")),
    };
    (value, text)
}
