//! Etsy statsd's configuration file, read as data.
//!
//! Etsy's config is a JavaScript object literal that statsd `eval`s. proctor does not run
//! JavaScript: it accepts JSON and the common literal forms people write (comments, unquoted
//! keys, single-quoted strings, trailing commas, `undefined`) by rewriting them to JSON, then
//! reads the keys that apply. Anything else (a `require()`, an expression) is an error naming the
//! line and column. Keys proctor does not use are returned so the caller can say so; this module
//! does no I/O.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::flush::{Bin, HistogramSpec};

/// A configuration file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "line {line}, column {column}: {message} (proctor reads JSON or a plain JavaScript object literal, not code)"
    )]
    Syntax { line: usize, column: usize, message: String },
    #[error("the configuration must be an object, found {0}")]
    NotAnObject(&'static str),
    #[error("key {key}: expected {expected}")]
    Type { key: String, expected: &'static str },
}

/// The Etsy keys proctor applies. `None` means "not in the file".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EtsyConfig {
    pub address: Option<String>,
    pub port: Option<u16>,
    pub mgmt_address: Option<String>,
    pub mgmt_port: Option<u16>,
    /// `servers: [{server: "./servers/tcp", address, port}]` entries that name the TCP server.
    pub tcp: Option<(Option<String>, u16)>,
    pub flush_interval_ms: Option<u64>,
    pub percent_threshold: Option<Vec<f64>>,
    pub histogram: Option<Vec<HistogramSpec>>,
    pub delete_idle_stats: Option<bool>,
    pub delete_counters: Option<bool>,
    pub delete_timers: Option<bool>,
    pub delete_sets: Option<bool>,
    pub delete_gauges: Option<bool>,
    pub gauges_max_ttl: Option<u32>,
    pub prefix_stats: Option<String>,
    pub key_name_sanitize: Option<bool>,
    pub flush_counts: Option<bool>,
    pub health_status: Option<String>,
    pub graphite_host: Option<String>,
    pub graphite_port: Option<u16>,
    pub backends: Option<Vec<String>>,
    pub legacy_namespace: Option<bool>,
    pub global_prefix: Option<String>,
    pub prefix_counter: Option<String>,
    pub prefix_timer: Option<String>,
    pub prefix_gauge: Option<String>,
    pub prefix_set: Option<String>,
    pub global_suffix: Option<String>,
    /// Top-level keys present but not used by proctor (e.g. `debug`, `dumpMessages`).
    pub ignored_keys: Vec<String>,
}

/// Parses a configuration file's text.
pub fn parse_etsy_config(text: &str) -> Result<EtsyConfig, ConfigError> {
    let json = js_literal_to_json(text)?;
    let value: Value = serde_json::from_str(&json).map_err(|err| ConfigError::Syntax {
        line: err.line(),
        column: err.column(),
        message: err.to_string().split(" at line").next().unwrap_or_default().to_owned(),
    })?;
    let Value::Object(map) = value else {
        return Err(ConfigError::NotAnObject(kind_name(&value)));
    };
    let map: BTreeMap<String, Value> = map.into_iter().collect();
    let mut config = EtsyConfig::default();
    for (key, value) in &map {
        match key.as_str() {
            "address" => config.address = Some(string(key, value)?),
            "port" => config.port = Some(port(key, value)?),
            "mgmt_address" => config.mgmt_address = Some(string(key, value)?),
            "mgmt_port" => config.mgmt_port = Some(port(key, value)?),
            "flushInterval" => config.flush_interval_ms = Some(number(key, value)? as u64),
            "percentThreshold" => {
                config.percent_threshold = Some(match value {
                    Value::Array(items) => items.iter().map(|item| number(key, item)).collect::<Result<_, _>>()?,
                    other => vec![number(key, other)?],
                })
            }
            "histogram" => config.histogram = Some(histogram(value)?),
            "deleteIdleStats" => config.delete_idle_stats = Some(boolean(key, value)?),
            "deleteCounters" => config.delete_counters = Some(boolean(key, value)?),
            "deleteTimers" => config.delete_timers = Some(boolean(key, value)?),
            "deleteSets" => config.delete_sets = Some(boolean(key, value)?),
            "deleteGauges" => config.delete_gauges = Some(boolean(key, value)?),
            "gaugesMaxTTL" => config.gauges_max_ttl = Some(number(key, value)? as u32),
            "prefixStats" => config.prefix_stats = Some(string(key, value)?),
            "keyNameSanitize" => config.key_name_sanitize = Some(boolean(key, value)?),
            "flush_counts" => config.flush_counts = Some(boolean(key, value)?),
            "healthStatus" => config.health_status = Some(string(key, value)?),
            "graphiteHost" => config.graphite_host = Some(string(key, value)?),
            "graphitePort" => config.graphite_port = Some(port(key, value)?),
            "backends" => {
                let Value::Array(items) = value else {
                    return Err(ConfigError::Type { key: key.clone(), expected: "an array of strings" });
                };
                config.backends = Some(items.iter().map(|item| string(key, item)).collect::<Result<_, _>>()?);
            }
            "graphite" => graphite(&mut config, value)?,
            "servers" => servers(&mut config, value)?,
            _ => config.ignored_keys.push(key.clone()),
        }
    }
    Ok(config)
}

fn graphite(config: &mut EtsyConfig, value: &Value) -> Result<(), ConfigError> {
    let Value::Object(map) = value else {
        return Err(ConfigError::Type { key: "graphite".into(), expected: "an object" });
    };
    for (sub, value) in map {
        let key = format!("graphite.{sub}");
        match sub.as_str() {
            "legacyNamespace" => config.legacy_namespace = Some(boolean(&key, value)?),
            "globalPrefix" => config.global_prefix = Some(string(&key, value)?),
            "prefixCounter" => config.prefix_counter = Some(string(&key, value)?),
            "prefixTimer" => config.prefix_timer = Some(string(&key, value)?),
            "prefixGauge" => config.prefix_gauge = Some(string(&key, value)?),
            "prefixSet" => config.prefix_set = Some(string(&key, value)?),
            "globalSuffix" => config.global_suffix = Some(string(&key, value)?),
            _ => config.ignored_keys.push(key),
        }
    }
    Ok(())
}

fn servers(config: &mut EtsyConfig, value: &Value) -> Result<(), ConfigError> {
    let Value::Array(items) = value else {
        return Err(ConfigError::Type { key: "servers".into(), expected: "an array" });
    };
    for item in items {
        let Value::Object(map) = item else {
            return Err(ConfigError::Type { key: "servers".into(), expected: "an array of objects" });
        };
        let server = map.get("server").and_then(Value::as_str).unwrap_or("./servers/udp");
        let address = map.get("address").map(|v| string("servers.address", v)).transpose()?;
        let port = map.get("port").map(|v| port("servers.port", v)).transpose()?.unwrap_or(8125);
        if server.ends_with("tcp") {
            config.tcp = Some((address, port));
        } else {
            config.address = address.or(config.address.take());
            config.port = Some(port);
        }
    }
    Ok(())
}

fn histogram(value: &Value) -> Result<Vec<HistogramSpec>, ConfigError> {
    let wrong = || ConfigError::Type {
        key: "histogram".into(),
        expected: "an array of {metric: string, bins: [number or \"inf\"]}",
    };
    let Value::Array(items) = value else {
        return Err(wrong());
    };
    items
        .iter()
        .map(|item| {
            let metric = item.get("metric").and_then(Value::as_str).ok_or_else(wrong)?;
            let bins = item.get("bins").and_then(Value::as_array).ok_or_else(wrong)?;
            let bins = bins
                .iter()
                .map(|bin| match bin {
                    Value::String(text) if text == "inf" => Ok(Bin::Inf),
                    Value::Number(number) => number.as_f64().map(Bin::Below).ok_or_else(wrong),
                    _ => Err(wrong()),
                })
                .collect::<Result<_, _>>()?;
            Ok(HistogramSpec { metric: metric.to_owned(), bins })
        })
        .collect()
}

fn kind_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn string(key: &str, value: &Value) -> Result<String, ConfigError> {
    value.as_str().map(str::to_owned).ok_or(ConfigError::Type { key: key.to_owned(), expected: "a string" })
}

fn boolean(key: &str, value: &Value) -> Result<bool, ConfigError> {
    value.as_bool().ok_or(ConfigError::Type { key: key.to_owned(), expected: "true or false" })
}

fn number(key: &str, value: &Value) -> Result<f64, ConfigError> {
    // Etsy coerces with `Number()`, so "10000" works there; accept numeric strings too.
    match value {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => crate::jsnum::js_number(text),
        _ => None,
    }
    .filter(|n| n.is_finite())
    .ok_or(ConfigError::Type { key: key.to_owned(), expected: "a number" })
}

fn port(key: &str, value: &Value) -> Result<u16, ConfigError> {
    let n = number(key, value)?;
    if (0.0..=65535.0).contains(&n) && n.fract() == 0.0 {
        Ok(n as u16)
    } else {
        Err(ConfigError::Type { key: key.to_owned(), expected: "a port number" })
    }
}

/// Rewrites the JavaScript literal forms found in statsd configs to JSON, keeping every newline
/// so JSON error positions are the file's own.
pub fn js_literal_to_json(text: &str) -> Result<String, ConfigError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 16);
    let mut index = 0;
    let (mut line, mut column) = (1usize, 1usize);
    let advance = |c: char, line: &mut usize, column: &mut usize| {
        if c == '\n' {
            *line += 1;
            *column = 1;
        } else {
            *column += 1;
        }
    };
    while index < chars.len() {
        let c = chars[index];
        let next = chars.get(index + 1).copied();
        if c == '/' && next == Some('/') {
            while index < chars.len() && chars[index] != '\n' {
                advance(chars[index], &mut line, &mut column);
                index += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let (start_line, start_column) = (line, column);
            index += 2;
            column += 2;
            loop {
                if index + 1 >= chars.len() {
                    return Err(ConfigError::Syntax {
                        line: start_line,
                        column: start_column,
                        message: "unterminated comment".into(),
                    });
                }
                if chars[index] == '*' && chars[index + 1] == '/' {
                    index += 2;
                    column += 2;
                    break;
                }
                if chars[index] == '\n' {
                    out.push('\n');
                }
                advance(chars[index], &mut line, &mut column);
                index += 1;
            }
            continue;
        }
        if c == '"' || c == '\'' {
            let (start_line, start_column) = (line, column);
            out.push('"');
            index += 1;
            column += 1;
            loop {
                let Some(&ch) = chars.get(index) else {
                    return Err(ConfigError::Syntax {
                        line: start_line,
                        column: start_column,
                        message: "unterminated string".into(),
                    });
                };
                index += 1;
                advance(ch, &mut line, &mut column);
                if ch == c {
                    out.push('"');
                    break;
                }
                match ch {
                    '\\' => {
                        let escaped = chars.get(index).copied().unwrap_or('\\');
                        index += 1;
                        column += 1;
                        if escaped == '\'' {
                            out.push('\'');
                        } else {
                            out.push('\\');
                            out.push(escaped);
                        }
                    }
                    '"' => out.push_str("\\\""),
                    _ => out.push(ch),
                }
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' || c == '$' {
            let start = index;
            while index < chars.len()
                && (chars[index].is_ascii_alphanumeric() || chars[index] == '_' || chars[index] == '$')
            {
                index += 1;
            }
            let word: String = chars[start..index].iter().collect();
            column += index - start;
            let mut look = index;
            while look < chars.len() && chars[look].is_whitespace() {
                look += 1;
            }
            if chars.get(look) == Some(&':') {
                out.push('"');
                out.push_str(&word);
                out.push('"');
            } else if word == "undefined" {
                out.push_str("null");
            } else {
                // true, false, null, Infinity or something JSON will reject with a position.
                out.push_str(&word);
            }
            continue;
        }
        if c == ',' {
            // Drop a trailing comma: the next significant character closes the container.
            let mut look = index + 1;
            loop {
                while look < chars.len() && chars[look].is_whitespace() {
                    look += 1;
                }
                if chars.get(look) == Some(&'/') && chars.get(look + 1) == Some(&'/') {
                    while look < chars.len() && chars[look] != '\n' {
                        look += 1;
                    }
                    continue;
                }
                break;
            }
            if matches!(chars.get(look), Some('}' | ']')) {
                out.push(' ');
                index += 1;
                column += 1;
                continue;
            }
        }
        out.push(c);
        advance(c, &mut line, &mut column);
        index += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{parse_etsy_config, ConfigError};
    use crate::flush::Bin;

    #[test]
    fn reads_etsy_example_style() {
        let text = r#"
/* comment */
{
  graphitePort: 2003
, graphiteHost: "127.0.0.1"   // trailing comment
, port: 8125
, flushInterval: '2000'
, percentThreshold: [90, -10]
, histogram: [ { metric: 'lat', bins: [10, 100, 'inf'] } ]
, deleteIdleStats: true
, graphite: { legacyNamespace: false, globalPrefix: "app", }
, backends: [ "./backends/graphite", './backends/console' ]
, debug: true
}
"#;
        let config = parse_etsy_config(text).expect("parses");
        assert_eq!(config.graphite_host.as_deref(), Some("127.0.0.1"));
        assert_eq!(config.flush_interval_ms, Some(2000));
        assert_eq!(config.percent_threshold, Some(vec![90.0, -10.0]));
        let histogram = config.histogram.expect("histogram");
        assert_eq!(histogram[0].bins, vec![Bin::Below(10.0), Bin::Below(100.0), Bin::Inf]);
        assert_eq!(config.legacy_namespace, Some(false));
        assert_eq!(config.global_prefix.as_deref(), Some("app"));
        assert_eq!(config.ignored_keys, vec!["debug".to_owned()]);
    }

    #[test]
    fn javascript_code_is_a_clear_error() {
        let err = parse_etsy_config("{\n  port: require('x')\n}").expect_err("rejects code");
        match err {
            ConfigError::Syntax { line, .. } => assert_eq!(line, 2),
            other => panic!("unexpected {other}"),
        }
        let err = parse_etsy_config("{ port: 'abc' }").expect_err("rejects port");
        assert_eq!(err.to_string(), "key port: expected a number");
    }
}
