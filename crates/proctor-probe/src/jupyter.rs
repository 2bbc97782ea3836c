//! `proctor probe jupyter URL`: the Netflix method automated. A terminal is created through
//! Jupyter's REST API (`POST /api/terminals`), its WebSocket (`/terminals/websocket/NAME`)
//! is probed by [`crate::ws`] holding a key (`["stdin", "j"]` at the key rate, each keystroke
//! timed until its echo comes back in `["stdout", …]`), and the terminal is deleted at the end
//! (`DELETE /api/terminals/NAME`), also after Ctrl-C: the caller holds the [`Terminal`] and
//! calls [`Terminal::delete`] on every way out.
//!
//! Authentication is Jupyter's token, sent as `Authorization: token T` on the REST calls and
//! the upgrade alike (a token-authenticated request needs no XSRF cookie).

use std::time::Duration;

use crate::client::fetch;
use crate::http::RequestSpec;
use crate::tls::TlsConfig;
use crate::url::{self, Target};

/// A terminal this probe created, to be deleted.
#[derive(Debug)]
pub struct Terminal {
    server: Target,
    tls: Option<TlsConfig>,
    headers: Vec<(String, String)>,
    pub name: String,
    /// `ws[s]://HOST/…/terminals/websocket/NAME`.
    pub websocket: Target,
    deleted: bool,
}

/// Why Jupyter's API refused or failed, in words.
#[derive(Debug, thiserror::Error)]
pub enum JupyterError {
    #[error(transparent)]
    Url(#[from] url::UrlError),
    #[error("POST {url}: {detail}")]
    Create { url: String, detail: String },
}

/// The headers every call carries: the token, and any the user added.
pub fn headers(token: Option<&str>, extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> =
        token.map(|token| ("Authorization".to_string(), format!("token {token}"))).into_iter().collect();
    headers.extend(extra.iter().cloned());
    headers
}

/// Creates a terminal on the Jupyter server at `base` (`http[s]://HOST:PORT[/base_url]`).
pub fn create_terminal(
    base: &str,
    tls: Option<TlsConfig>,
    headers: Vec<(String, String)>,
    timeout: Duration,
) -> Result<Terminal, JupyterError> {
    let base = base.trim_end_matches('/');
    let server = url::parse(&format!("{base}/api/terminals"))?;
    let spec = RequestSpec { method: "POST".into(), headers: headers.clone(), body: Vec::new(), close: true };
    let url = format!("{base}/api/terminals");
    let (status, body) = fetch(&server, tls.as_ref(), &spec, timeout)
        .map_err(|detail| JupyterError::Create { url: url.clone(), detail })?;
    if !(200..300).contains(&status) {
        let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
        let hint = match status {
            403 | 401 => " (is --token right?)",
            404 => " (is this a Jupyter server, with terminals enabled?)",
            _ => "",
        };
        return Err(JupyterError::Create { url, detail: format!("HTTP {status}{hint}: {}", text.trim()) });
    }
    let name = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|value| value.get("name")?.as_str().map(str::to_string))
        .filter(|name| {
            !name.is_empty() && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
        })
        .ok_or_else(|| JupyterError::Create {
            url: url.clone(),
            detail: format!(
                "no terminal name in the answer: {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            ),
        })?;
    let ws_base = match base.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => format!("wss://{rest}"),
        Some((_, rest)) => format!("ws://{rest}"),
        None => base.to_string(),
    };
    let websocket = url::parse_ws(&format!("{ws_base}/terminals/websocket/{name}"))?;
    Ok(Terminal { server, tls, headers, name, websocket, deleted: false })
}

impl Terminal {
    /// `DELETE /api/terminals/NAME`; an error in words (the terminal may outlive us then).
    pub fn delete(&mut self, timeout: Duration) -> Result<(), String> {
        if self.deleted {
            return Ok(());
        }
        self.deleted = true;
        let mut target = self.server.clone();
        target.path = format!("{}/{}", target.path.trim_end_matches('/'), self.name);
        let spec =
            RequestSpec { method: "DELETE".into(), headers: self.headers.clone(), body: Vec::new(), close: true };
        match fetch(&target, self.tls.as_ref(), &spec, timeout) {
            Ok((status, _)) if (200..300).contains(&status) || status == 404 => Ok(()),
            Ok((status, body)) => Err(format!(
                "DELETE {}: HTTP {status}: {}",
                target.path,
                String::from_utf8_lossy(&body[..body.len().min(200)]).trim()
            )),
            Err(detail) => Err(format!("DELETE {}: {detail}", target.path)),
        }
    }
}
