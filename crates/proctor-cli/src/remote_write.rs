//! `serve --remote-write URL…` and `serve --otlp URL…`: the flags, checked before anything
//! starts, made into one `proctor_remote` queue per URL.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use proctor_http::prom::MetricsConfig;
use proctor_probe::tls::{parse_pem_certificates, TlsConfig, Trust};
use proctor_remote::post::Endpoint;
use proctor_remote::queue::{cursor_file_name, LiveFamilies, Protocol, Queue, QueueConfig};
use proctor_remote::wire::Version;

#[derive(Debug, Clone, clap::Args)]
pub struct RemoteWriteArgs {
    /// Send every sample to this Prometheus remote-write receiver (Prometheus with
    /// --web.enable-remote-write-receiver, Mimir, Thanos Receive, VictoriaMetrics, Cortex);
    /// repeatable, one queue each. The store is the write-ahead log: needs recording.
    #[arg(long = "remote-write", value_name = "URL")]
    pub urls: Vec<String>,
    /// A header sent with every request, e.g. 'X-Scope-OrgID: team'; repeatable.
    #[arg(long = "remote-write-header", value_name = "'NAME: VALUE'", requires = "urls")]
    pub headers: Vec<String>,
    /// `Authorization: Bearer` with the token in this file.
    #[arg(long = "remote-write-bearer-token-file", value_name = "FILE", requires = "urls")]
    pub bearer_token_file: Option<PathBuf>,
    /// Basic auth: USER, with the password in --remote-write-password-file.
    #[arg(long = "remote-write-user", value_name = "USER", requires = "password_file")]
    pub user: Option<String>,
    #[arg(long = "remote-write-password-file", value_name = "FILE", requires = "user")]
    pub password_file: Option<PathBuf>,
    /// Trust only the CA certificates in this PEM file for https receivers (else Mozilla's roots).
    #[arg(long = "remote-write-cacert", value_name = "CA.pem", requires = "urls")]
    pub cacert: Option<PathBuf>,
    /// A label added to every series sent (default: instance and host, this host's name); repeatable.
    /// OTLP sends them as resource attributes (`instance` is `service.instance.id`).
    #[arg(long = "external-label", value_name = "NAME=VALUE")]
    pub external_labels: Vec<String>,
    /// The protocol: 1 (remote write 1.0) or 2 (2.0: interned strings, metadata per series).
    #[arg(long = "remote-write-version", value_name = "1|2", default_value_t = 1)]
    pub version: u8,
    /// Most stored samples a second read back and sent after an outage or a restart.
    #[arg(long = "remote-write-backfill-rate", value_name = "N", default_value_t = 100.0)]
    pub backfill_rate: f64,
    /// How long one request may take, connect to reply (OTLP's too).
    #[arg(long = "remote-write-timeout", value_name = "D", default_value = "30s", value_parser = proctor_vocab::duration_arg)]
    pub timeout: Duration,
    /// Send every sample as OTLP/HTTP metrics (protobuf, gzip, cumulative) to this receiver: an
    /// OpenTelemetry Collector's OTLP receiver (http://HOST:4318), Prometheus 3 with
    /// --web.enable-otlp-receiver (http://HOST:9090/api/v1/otlp/v1/metrics); a URL without a
    /// path gets /v1/metrics. Repeatable, one queue each, the store as the write-ahead log as
    /// for --remote-write (its backfill rate and timeout apply).
    #[arg(long = "otlp", value_name = "URL")]
    pub otlp_urls: Vec<String>,
    /// A header sent with every OTLP request, e.g. 'X-Scope-OrgID: team'; repeatable.
    #[arg(long = "otlp-header", value_name = "'NAME: VALUE'", requires = "otlp_urls")]
    pub otlp_headers: Vec<String>,
    /// OTLP: `Authorization: Bearer` with the token in this file.
    #[arg(long = "otlp-bearer-token-file", value_name = "FILE", requires = "otlp_urls")]
    pub otlp_bearer_token_file: Option<PathBuf>,
    /// OTLP: trust only the CA certificates in this PEM file for https receivers.
    #[arg(long = "otlp-cacert", value_name = "CA.pem", requires = "otlp_urls")]
    pub otlp_cacert: Option<PathBuf>,
}

/// `--…-header` values as (name, value), or the first mistake.
fn parse_headers(flag: &str, given: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    let mut headers = Vec::new();
    for h in given {
        let Some((name, value)) = h.split_once(':') else {
            bail!("{flag} {h:?}: want 'NAME: VALUE'");
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            bail!("{flag} {h:?}: {name:?} is not a header name");
        }
        if !header_value_ok(value) {
            bail!("{flag} {h:?}: a control character in the value");
        }
        headers.push((name.to_string(), value.to_string()));
    }
    Ok(headers)
}

/// Whom an https receiver must be vouched for by: the CA file given, else Mozilla's roots.
fn trust(cacert: Option<&Path>, flag: &str) -> anyhow::Result<Trust> {
    Ok(match cacert {
        Some(path) => {
            let pem = std::fs::read(path).with_context(|| format!("cannot read {flag} {}", path.display()))?;
            let source = path.display().to_string();
            Trust::Roots { certificates: parse_pem_certificates(&pem, &source)?, source }
        }
        None => Trust::WebpkiRoots,
    })
}

/// An OTLP URL as given, or with `/v1/metrics` when it has no path (the Collector's
/// `endpoint` setting does the same).
fn otlp_url(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    if rest.contains('/') && !rest.ends_with('/') {
        url.to_string()
    } else {
        format!("{}/v1/metrics", url.trim_end_matches('/'))
    }
}

/// Checked queue settings, made before the agent starts so a mistake stops serve at once.
#[derive(Debug)]
pub struct Planned {
    queues: Vec<QueueConfig>,
}

fn header_value_ok(v: &str) -> bool {
    !v.chars().any(char::is_control)
}

/// RFC 4648 base64 with padding: the one place proctor needs it (a Basic auth header).
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl RemoteWriteArgs {
    /// The queues' settings, or the first mistake in words. `store_dir`: where serve records.
    pub fn plan(&self, store_dir: Option<&Path>, metrics: MetricsConfig, host: &str) -> anyhow::Result<Planned> {
        if self.urls.is_empty() && self.otlp_urls.is_empty() {
            if !self.external_labels.is_empty() {
                bail!("--external-label labels what --remote-write and --otlp send: give one of them");
            }
            return Ok(Planned { queues: Vec::new() });
        }
        let Some(store_dir) = store_dir else {
            bail!(
                "--remote-write and --otlp send what the store holds (it is the write-ahead log): they need \
                 recording, so drop --no-record or give a usable --data-dir"
            );
        };
        let version = match self.version {
            1 => Version::V1,
            2 => Version::V2,
            other => bail!("--remote-write-version {other}: 1 or 2"),
        };
        if !(self.backfill_rate.is_finite() && self.backfill_rate >= 1.0) {
            bail!("--remote-write-backfill-rate must be at least 1 sample a second");
        }
        let mut headers = parse_headers("--remote-write-header", &self.headers)?;
        if let Some(path) = &self.bearer_token_file {
            headers.push((
                "Authorization".into(),
                format!("Bearer {}", crate::cmd::common::secret(path, "--remote-write-bearer-token-file")?),
            ));
        }
        if let (Some(user), Some(path)) = (&self.user, &self.password_file) {
            if self.bearer_token_file.is_some() {
                bail!("give a bearer token or basic auth, not both");
            }
            let password = crate::cmd::common::secret(path, "--remote-write-password-file")?;
            headers
                .push(("Authorization".into(), format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))));
        }
        let mut otlp_headers = parse_headers("--otlp-header", &self.otlp_headers)?;
        if let Some(path) = &self.otlp_bearer_token_file {
            otlp_headers.push((
                "Authorization".into(),
                format!("Bearer {}", crate::cmd::common::secret(path, "--otlp-bearer-token-file")?),
            ));
        }
        let mut external = Vec::new();
        for l in &self.external_labels {
            let Some((name, value)) = l.split_once('=') else { bail!("--external-label {l:?}: want NAME=VALUE") };
            let ok_name = !name.is_empty()
                && !name.starts_with("__")
                && name
                    .bytes()
                    .enumerate()
                    .all(|(i, b)| b == b'_' || b.is_ascii_alphabetic() || (i > 0 && b.is_ascii_digit()));
            if !ok_name {
                bail!("--external-label {l:?}: {name:?} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, not __…)");
            }
            external.retain(|(n, _): &(String, String)| n != name);
            external.push((name.to_string(), value.to_string()));
        }
        let resource = proctor_remote::otlp::resource(&external, host);
        for default in ["instance", "host"] {
            if !external.iter().any(|(n, _)| n == default) {
                external.push((default.to_string(), host.to_string()));
            }
        }
        let rw_trust = trust(self.cacert.as_deref(), "--remote-write-cacert")?;
        let otlp_trust = trust(self.otlp_cacert.as_deref(), "--otlp-cacert")?;
        let cursors = store_dir.join("remote-write");
        let mut queues = Vec::new();
        let remotes =
            self.urls.iter().map(|u| (u.clone(), false)).chain(self.otlp_urls.iter().map(|u| (otlp_url(u), true)));
        for (url, otlp) in remotes {
            let flag = if otlp { "--otlp" } else { "--remote-write" };
            let target = proctor_probe::url::parse(&url).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
            let trust = if otlp { &otlp_trust } else { &rw_trust };
            let tls = if target.tls { Some(TlsConfig::new(trust.clone())?) } else { None };
            let (protocol, headers, external_labels) = if otlp {
                (Protocol::Otlp { resource: resource.clone() }, otlp_headers.clone(), Vec::new())
            } else {
                (Protocol::RemoteWrite(version), headers.clone(), external.clone())
            };
            queues.push(QueueConfig {
                endpoint: Endpoint { url: url.clone(), target, tls, headers, timeout: self.timeout },
                protocol,
                external_labels,
                store_dir: store_dir.to_owned(),
                cursor_path: cursors.join(cursor_file_name(&url)),
                metrics,
                max_samples: 60,
                deadline: Duration::from_secs(5),
                backfill_per_sec: self.backfill_rate,
                store_grace: Duration::from_secs(10),
                live: None,
            });
        }
        std::fs::create_dir_all(&cursors).with_context(|| format!("cannot create {}", cursors.display()))?;
        Ok(Planned { queues })
    }
}

impl Planned {
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Each queue's URL and protocol, for the log.
    pub fn describe(&self) -> Vec<String> {
        self.queues
            .iter()
            .map(|q| match q.protocol {
                Protocol::RemoteWrite(_) => format!("remote write to {}", q.endpoint.url),
                Protocol::Otlp { .. } => format!("OTLP to {}", q.endpoint.url),
            })
            .collect()
    }

    /// Starts one queue per remote; `live` gives the families only live snapshots have.
    pub fn start(self, shared: &Arc<proctor_agent::Shared>, live: LiveFamilies) -> anyhow::Result<Vec<Queue>> {
        let mut out = Vec::new();
        for mut config in self.queues {
            config.live = Some(Arc::clone(&live));
            let url = config.endpoint.url.clone();
            out.push(
                Queue::start(Arc::clone(shared), config)
                    .with_context(|| format!("cannot start the queue for {url}"))?,
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::{base64, otlp_url};

    #[test]
    fn an_otlp_url_without_a_path_gets_the_metrics_path() {
        assert_eq!(otlp_url("http://c:4318"), "http://c:4318/v1/metrics");
        assert_eq!(otlp_url("http://c:4318/"), "http://c:4318/v1/metrics");
        assert_eq!(otlp_url("http://p:9090/api/v1/otlp/v1/metrics"), "http://p:9090/api/v1/otlp/v1/metrics");
    }

    #[test]
    fn base64_pads_as_rfc_4648_says() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"Aladdin:open sesame"), "QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    }
}
