//! `proctor alerts`: `check` a rules file, `test` it over a recording (backtesting), and talk to
//! a running `serve`: `silence` a rule, `status` of its alerts.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use proctor_agent::Snapshot;
use proctor_alerts::backtest::{render_text, Backtest};
use proctor_alerts::rules;
use proctor_model::Sample;
use proctor_store::{same_run, Reader};
use proctor_vocab::{format_utc, parse_when, When};

use super::common::{now_unix_ns, print_text};
use crate::output::{print_json, Format};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Reads a rules file and says every mistake with its line and column (exit 1), or what it
    /// holds.
    Check { file: PathBuf },
    /// Replays the rules over a recording and says when each would have fired and resolved.
    Test {
        file: PathBuf,
        /// The store to replay.
        #[arg(long, value_name = "DIR", default_value_os_t = crate::datadir::default_for_flags())]
        dir: PathBuf,
        /// Start of the range (`2h ago`, `2024-05-01T10:00`, `@UNIX`); default: the first sample.
        #[arg(long, value_parser = parse_when)]
        from: Option<When>,
        /// End of the range; default: now.
        #[arg(long, value_parser = parse_when)]
        to: Option<When>,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Silences a rule on a running `proctor serve` (through its API) for a while, or with
    /// `--expire ID` ends a silence before its time.
    Silence {
        /// The rule's `alert` name, or `*` for every rule.
        #[arg(required_unless_present = "expire")]
        rule: Option<String>,
        /// End silence ID now (the id `silence` and `status` print), as `amtool silence expire`.
        #[arg(long, value_name = "ID", conflicts_with_all = ["rule", "matchers", "comment"])]
        expire: Option<u64>,
        /// Only alerts with this label (`pid=123`, `name=gunicorn`); repeatable.
        #[arg(long = "match", value_name = "LABEL=VALUE")]
        matchers: Vec<String>,
        /// How long (`30m`, `1h`, `2d`).
        #[arg(long = "for", value_name = "DURATION", default_value = "1h")]
        duration: String,
        #[arg(long, default_value = "")]
        comment: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// The alerts of a running `proctor serve`: rules, what fires, silences, receivers.
    Status {
        #[command(flatten)]
        remote: Remote,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
}

#[derive(Debug, clap::Args)]
struct Remote {
    /// The agent's address.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:9465")]
    url: String,
    /// A file holding the agent's token.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Check { file } => check(&file),
        Sub::Test { file, dir, from, to, format } => backtest(&file, &dir, from, to, format),
        Sub::Silence { expire: Some(id), remote, .. } => expire(id, &remote),
        Sub::Silence { rule, matchers, duration, comment, remote, .. } => {
            silence(rule.unwrap_or_default(), &matchers, &duration, comment, &remote)
        }
        Sub::Status { remote, format } => status(&remote, format),
    }
}

fn read_text(file: &Path) -> anyhow::Result<String> {
    proctor_alerts::engine::read_rules_text(file).map_err(anyhow::Error::msg)
}

fn read_rules(file: &Path) -> anyhow::Result<Result<rules::RuleSet, Vec<rules::Diagnostic>>> {
    Ok(rules::parse(&read_text(file)?))
}

fn check(file: &Path) -> anyhow::Result<ExitCode> {
    let text = read_text(file)?;
    match rules::parse(&text) {
        Ok(set) => {
            let per: usize = set.rules.iter().filter(|r| r.expr.per_instance().is_some()).count();
            println!(
                "{}: ok: {} rule{} ({per} per process or group), {} receiver{}",
                file.display(),
                set.rules.len(),
                if set.rules.len() == 1 { "" } else { "s" },
                set.receivers.len(),
                if set.receivers.len() == 1 { "" } else { "s" }
            );
            for r in &set.rules {
                let instances = match r.expr.per_instance() {
                    Some(scope) => format!(" (per {})", scope.name()),
                    None => String::new(),
                };
                println!("  {} [{}]{instances}: {}", r.name, r.severity(), r.expr_text);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(diags) => {
            for d in &diags {
                eprintln!("{}:{}:{}: {}", file.display(), d.line, d.col, d.message);
            }
            eprintln!("{}: {} mistake{}", file.display(), diags.len(), if diags.len() == 1 { "" } else { "s" });
            if looks_like_promql(&text) {
                eprintln!(
                    "{}: these look like PromQL, which proctor's expressions are not (no exporter names, `by`, or `[5m]`): \
                     docs/alerts.md, \"From PromQL\", translates the usual rules",
                    file.display()
                );
            }
            Ok(ExitCode::from(1))
        }
    }
}

fn backtest(file: &Path, dir: &Path, from: Option<When>, to: Option<When>, format: Format) -> anyhow::Result<ExitCode> {
    let set = match read_rules(file)? {
        Ok(set) => set,
        Err(diags) => {
            for d in &diags {
                eprintln!("{}:{}:{}: {}", file.display(), d.line, d.col, d.message);
            }
            bail!(
                "{}: {} mistake{}: nothing replayed",
                file.display(),
                diags.len(),
                if diags.len() == 1 { "" } else { "s" }
            );
        }
    };
    let mut reader = Reader::open(crate::datadir::for_reading(dir)?).context("cannot read the recording")?;
    let now = now_unix_ns();
    let (from, to) = (from.map_or(0, |w| w.resolve(now)), to.map_or(now, |w| w.resolve(now)));
    if from > to {
        bail!("--from {} is after --to {}", format_utc(from), format_utc(to));
    }
    let frames = reader.frames(from, to)?;
    if frames.is_empty() {
        bail!("no samples between {} and {} in {}", format_utc(from), format_utc(to), dir.display());
    }
    let mut prev: Option<Sample> = match from.checked_sub(1) {
        Some(before) if from > 0 => reader.at_or_before(before)?.map(|(s, _)| s),
        _ => None,
    };
    let mut test = Backtest::new(set);
    for frame in &frames {
        let Some(cur) = reader.read(frame) else { continue };
        let pair = prev.take().filter(|p| same_run(p, &cur));
        let mut snapshot = Snapshot::derive(cur, pair.as_ref());
        snapshot.groups = proctor_agent::groups::stored_view(&snapshot, pair.as_ref()).map(std::sync::Arc::new);
        test.push(&snapshot);
        prev = Some(snapshot.sample);
    }
    crate::datadir::report_read("proctor alerts test", reader.report());
    let out = test.finish();
    match format {
        Format::Json => print_json(&out)?,
        Format::Text => print_text(&render_text(&out)),
    }
    Ok(ExitCode::SUCCESS)
}

fn silence(
    rule: String,
    matchers: &[String],
    duration: &str,
    comment: String,
    remote: &Remote,
) -> anyhow::Result<ExitCode> {
    let secs = proctor_alerts::expr::parse_duration(duration).map_err(|e| anyhow::anyhow!("--for: {e}"))?;
    let mut m = serde_json::Map::new();
    for pair in matchers {
        let Some((k, v)) = pair.split_once('=') else { bail!("--match {pair:?}: expected LABEL=VALUE") };
        m.insert(k.trim().to_string(), serde_json::Value::from(v));
    }
    let body = serde_json::json!({ "rule": rule, "matchers": m, "duration_secs": secs, "comment": comment });
    let (status, answer) = request(remote, "POST", "/api/v1/alerts/silences", Some(&body.to_string()))?;
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap_or(serde_json::Value::String(answer.clone()));
    if !(200..300).contains(&status) {
        bail!(
            "the agent refused the silence (HTTP {status}): {}",
            v.get("error").and_then(|e| e.get("message")).unwrap_or(&v)
        );
    }
    println!(
        "silence {} on {} until {}",
        v["id"],
        v["rule"].as_str().unwrap_or("?"),
        v["ends_at"].as_str().unwrap_or("?")
    );
    Ok(ExitCode::SUCCESS)
}

/// Whether a rules file's expressions look written for Prometheus: a range vector (`[5m]`), an
/// aggregation's `by`/`without`, a recording rule's `level:metric:op` name or an exporter's
/// metric name (`node_…`, `namedprocess_…`, `container_…`, `process_…`, `up`).
fn looks_like_promql(text: &str) -> bool {
    text.lines().filter_map(|l| l.trim_start().strip_prefix("expr:")).any(|expr| {
        let bytes = expr.as_bytes();
        let range = bytes.windows(2).enumerate().any(|(i, w)| {
            w[0] == b'[' && w[1].is_ascii_digit() && bytes[i + 1..].iter().position(|&c| c == b']').is_some()
        });
        let words: Vec<&str> = expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).collect();
        range
            || words.iter().any(|w| {
                matches!(*w, "by" | "without" | "up" | "absent" | "irate" | "increase")
                    || w.starts_with("node_")
                    || w.starts_with("namedprocess_")
                    || w.starts_with("container_")
                    || w.starts_with("process_")
                    || w.matches(':').count() >= 2
            })
    })
}

fn expire(id: u64, remote: &Remote) -> anyhow::Result<ExitCode> {
    let (status, answer) = request(remote, "DELETE", &format!("/api/v1/alerts/silences/{id}"), None)?;
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap_or(serde_json::Value::String(answer.clone()));
    if !(200..300).contains(&status) {
        bail!(
            "the agent refused to end silence {id} (HTTP {status}): {}",
            v.get("error").and_then(|e| e.get("message")).unwrap_or(&v)
        );
    }
    println!("silence {id} on {} ended at {}", v["rule"].as_str().unwrap_or("?"), v["ends_at"].as_str().unwrap_or("?"));
    Ok(ExitCode::SUCCESS)
}

fn status(remote: &Remote, format: Format) -> anyhow::Result<ExitCode> {
    let (code, answer) = request(remote, "GET", "/api/v1/alerts", None)?;
    let v: serde_json::Value =
        serde_json::from_str(&answer).with_context(|| format!("HTTP {code}: not JSON: {answer}"))?;
    if code != 200 {
        bail!("HTTP {code}: {}", v.get("error").and_then(|e| e.get("message")).unwrap_or(&v));
    }
    if format == Format::Json {
        print_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut o = String::new();
    if v["enabled"] == false {
        let _ = writeln!(o, "{}", v["reason"].as_str().unwrap_or("this agent runs no alert rules"));
        print_text(&o);
        return Ok(ExitCode::SUCCESS);
    }
    let _ = writeln!(o, "{} firing, {} pending; {} evaluations", v["firing"], v["pending"], v["evaluations_total"]);
    if let Some(e) = v["reload_error"].as_str() {
        let _ = writeln!(o, "reload: {e}");
    }
    for r in v["rules"].as_array().into_iter().flatten() {
        let _ = writeln!(
            o,
            "{:<24} {:<9} {:<8} {}",
            r["name"].as_str().unwrap_or(""),
            r["state"].as_str().unwrap_or(""),
            r["severity"].as_str().unwrap_or(""),
            r["expr"].as_str().unwrap_or("")
        );
        for i in r["instances"].as_array().into_iter().flatten() {
            let labels: Vec<String> = i["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| *k != "alertname" && *k != "severity")
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            let mut notes = String::new();
            if i["silenced"] == true {
                notes.push_str(" (silenced)");
            }
            if i["flapping"] == true {
                notes.push_str(" (flapping: held)");
            }
            let _ = writeln!(
                o,
                "    {} {} since {}{notes}  {}",
                i["state"].as_str().unwrap_or(""),
                i["value_text"].as_str().unwrap_or(""),
                i["active_at"].as_str().unwrap_or(""),
                labels.join(" ")
            );
        }
    }
    for s in v["silences"].as_array().into_iter().flatten() {
        let _ = writeln!(
            o,
            "silence {} on {} until {}",
            s["id"],
            s["rule"].as_str().unwrap_or(""),
            s["ends_at"].as_str().unwrap_or("")
        );
    }
    for r in v["receivers"].as_array().into_iter().flatten() {
        let _ = writeln!(
            o,
            "receiver {} {}: {} delivered, {} failed attempts, {} given up, {} dropped{}",
            r["kind"].as_str().unwrap_or(""),
            r["target"].as_str().unwrap_or(""),
            r["delivered_total"],
            r["failed_attempts_total"],
            r["given_up_total"],
            r["dropped_total"],
            r["last_error"].as_str().map(|e| format!("; last error: {e}")).unwrap_or_default()
        );
    }
    // Names, labels and errors are what processes and servers chose: no escapes get through.
    print_text(&o);
    Ok(ExitCode::SUCCESS)
}

/// One HTTP/1.1 exchange with the agent (its API is plain HTTP) through the one outgoing
/// client: the status and the body (at most 64 MiB), within 10 s.
fn request(remote: &Remote, method: &str, path: &str, body: Option<&str>) -> anyhow::Result<(u16, String)> {
    let target = proctor_client::url::parse(&remote.url).map_err(|e| anyhow::anyhow!("--url {}: {e}", remote.url))?;
    if target.tls {
        bail!("--url {}: the agent serves plain HTTP; give its http:// address", remote.url);
    }
    let mut headers = vec![("Accept".to_string(), "application/json".to_string())];
    if let Some(f) = &remote.token_file {
        headers.push(("Authorization".to_string(), format!("Bearer {}", super::common::secret(f, "--token-file")?)));
    }
    if body.is_some() {
        headers.push(("Content-Type".to_string(), "application/json".to_string()));
    }
    let spec = proctor_client::http::RequestSpec {
        method: method.to_string(),
        headers,
        body: body.unwrap_or("").as_bytes().to_vec(),
        close: true,
    };
    let target = proctor_client::url::Target { path: path.to_string(), ..target };
    let (status, body) = proctor_client::client::fetch_at_most(&target, None, &spec, Duration::from_secs(10), 64 << 20)
        .map_err(|e| anyhow::anyhow!("{} (is `proctor serve` running there?): {e}", remote.url))?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}
