//! The queues' own series on `/metrics` (`proctor_remote_write_*`, OTLP queues' too), one set
//! per remote URL.

use proctor_http::prom::{Family, Kind};
use proctor_vocab::snapshot::RemoteWriteOut;

pub fn families(queues: &[RemoteWriteOut]) -> Vec<Family> {
    let counter = |name: &str, help: &'static str, value: fn(&RemoteWriteOut) -> u64| {
        let mut f = Family::new(name, Kind::Counter, help);
        for q in queues {
            f.push(vec![("url", q.url.clone())], value(q) as f64);
        }
        f
    };
    let mut out = vec![
        counter("proctor_remote_write_samples_sent", "Agent samples the receiver took.", |q| q.samples_sent_total),
        counter("proctor_remote_write_points_sent", "Series points the receiver took.", |q| q.points_sent_total),
        counter("proctor_remote_write_requests_sent", "Requests the receiver answered 2xx.", |q| q.requests_sent_total),
        counter("proctor_remote_write_sent_bytes", "Compressed bytes of the requests answered 2xx.", |q| {
            q.bytes_sent_total
        }),
        counter(
            "proctor_remote_write_samples_dropped",
            "Agent samples in batches a receiver refused with a 4xx other than 429.",
            |q| q.samples_dropped_total,
        ),
        counter(
            "proctor_remote_write_v2_fallbacks",
            "Times a receiver asked for remote write 2.0 showed it did not take it; the queue speaks 1.0 since.",
            |q| q.v2_fallbacks_total,
        ),
        counter(
            "proctor_remote_write_points_rejected",
            "Points an OTLP receiver took the request of but refused (partial success).",
            |q| q.points_rejected_total,
        ),
        counter(
            "proctor_remote_write_samples_not_in_store",
            "Agent samples the queue needed from the store but the store never had.",
            |q| q.samples_not_in_store_total,
        ),
    ];
    let mut failed = Family::new(
        "proctor_remote_write_failed_requests",
        Kind::Counter,
        "Failed attempts by reason: 5xx, 429, 3xx, other and network (retried), 4xx and (OTLP) 5xx_dropped (dropped).",
    );
    let mut lag = Family::new(
        "proctor_remote_write_lag_seconds",
        Kind::Gauge,
        "How far the receiver is behind the newest sample.",
    );
    let mut backlog = Family::new(
        "proctor_remote_write_backlog_samples",
        Kind::Gauge,
        "About how many agent samples are still to send.",
    );
    for q in queues {
        for reason in ["5xx", "429", "4xx", "3xx", "other", "network", "5xx_dropped"] {
            let n = q.failed_total.get(reason).copied().unwrap_or(0);
            failed.push(vec![("url", q.url.clone()), ("reason", reason.to_string())], n as f64);
        }
        if let Some(l) = q.lag_secs {
            lag.push(vec![("url", q.url.clone())], l);
        }
        if let Some(b) = q.backlog_samples {
            backlog.push(vec![("url", q.url.clone())], b as f64);
        }
    }
    out.extend([failed, lag, backlog]);
    out
}
