//! `serve --remote-write URL…`: the flags, checked before anything starts, made into one
//! `proctor_remote` queue per URL.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use proctor_http::prom::MetricsConfig;
use proctor_probe::tls::{parse_pem_certificates, TlsConfig, Trust};
use proctor_remote::post::Endpoint;
use proctor_remote::queue::{cursor_file_name, LiveFamilies, Queue, QueueConfig};
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
    #[arg(long = "external-label", value_name = "NAME=VALUE", requires = "urls")]
    pub external_labels: Vec<String>,
    /// The protocol: 1 (remote write 1.0) or 2 (2.0: interned strings, metadata per series).
    #[arg(long = "remote-write-version", value_name = "1|2", default_value_t = 1)]
    pub version: u8,
    /// Most stored samples a second read back and sent after an outage or a restart.
    #[arg(long = "remote-write-backfill-rate", value_name = "N", default_value_t = 100.0)]
    pub backfill_rate: f64,
    /// How long one request may take, connect to reply.
    #[arg(long = "remote-write-timeout", value_name = "D", default_value = "30s", value_parser = proctor_vocab::duration_arg)]
    pub timeout: Duration,
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
        if self.urls.is_empty() {
            return Ok(Planned { queues: Vec::new() });
        }
        let Some(store_dir) = store_dir else {
            bail!(
                "--remote-write sends what the store holds (it is the write-ahead log): it needs \
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
        let mut headers = Vec::new();
        for h in &self.headers {
            let Some((name, value)) = h.split_once(':') else {
                bail!("--remote-write-header {h:?}: want 'NAME: VALUE'");
            };
            let (name, value) = (name.trim(), value.trim());
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                bail!("--remote-write-header {h:?}: {name:?} is not a header name");
            }
            if !header_value_ok(value) {
                bail!("--remote-write-header {h:?}: a control character in the value");
            }
            headers.push((name.to_string(), value.to_string()));
        }
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
        for default in ["instance", "host"] {
            if !external.iter().any(|(n, _)| n == default) {
                external.push((default.to_string(), host.to_string()));
            }
        }
        let trust = match &self.cacert {
            Some(path) => {
                let pem = std::fs::read(path)
                    .with_context(|| format!("cannot read --remote-write-cacert {}", path.display()))?;
                let source = path.display().to_string();
                Trust::Roots { certificates: parse_pem_certificates(&pem, &source)?, source }
            }
            None => Trust::WebpkiRoots,
        };
        let cursors = store_dir.join("remote-write");
        let mut queues = Vec::new();
        for url in &self.urls {
            let target = proctor_probe::url::parse(url).map_err(|e| anyhow::anyhow!("--remote-write: {e}"))?;
            let tls = if target.tls { Some(TlsConfig::new(trust.clone())?) } else { None };
            queues.push(QueueConfig {
                endpoint: Endpoint { url: url.clone(), target, tls, headers: headers.clone(), timeout: self.timeout },
                version,
                external_labels: external.clone(),
                store_dir: store_dir.to_owned(),
                cursor_path: cursors.join(cursor_file_name(url)),
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
    use super::base64;

    #[test]
    fn base64_pads_as_rfc_4648_says() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"Aladdin:open sesame"), "QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    }
}
