//! Where a queue's series come from: a sample (live or read back from the store) and the one
//! before it, made into the families `/metrics` renders, by the same code for both.

use std::path::PathBuf;
use std::sync::Arc;

use proctor_agent::groups::stored_view;
use proctor_agent::snapshot::Snapshot;
use proctor_http::prom::{self, Family, MetricsConfig};
use proctor_model::Sample;
use proctor_store::{same_run, Reader};
use proctor_vocab::snapshot::HttpOut;

/// The families of `sample`: host, container, the top processes by `/metrics`' rule and the
/// groups stored with it. `live`: the agent's snapshot of this very sample, which spares
/// deriving it again. Rates (the CPU ranking, groups' fault rates and churn) need `prev`, used
/// only when it comes from the same agent run.
pub fn families(
    sample: &Sample,
    prev: Option<&Sample>,
    config: &MetricsConfig,
    live: Option<&Snapshot>,
) -> Vec<Family> {
    let prev = prev.filter(|p| same_run(p, sample));
    let derived;
    let snapshot = match live {
        Some(s) => s,
        None => {
            derived = Snapshot::derive(sample.clone(), prev);
            &derived
        }
    };
    // Groups as stored with the sample, in both paths, so a group's series do not change with
    // the path its sample took (the live agent's own group counters are not stored).
    let groups = stored_view(snapshot, prev).map(Arc::new);
    let mut out = prom::families_of(snapshot, config, groups.as_deref(), &HttpOut::default());
    out.retain(|f| !f.name.starts_with("proctor_agent_"));
    out
}

/// Samples read back from the store directory.
#[derive(Debug)]
pub struct StoreSource {
    dir: PathBuf,
}

/// How far back the sample before a cursor is looked for (a few intervals at any sane rate).
const PREV_LOOKBACK_NS: u64 = 600 * 1_000_000_000;

impl StoreSource {
    pub fn new(dir: PathBuf) -> StoreSource {
        StoreSource { dir }
    }

    /// Up to `max` samples stored after `after_ns` and at or before `to_ns`, in time order.
    /// Frames that cannot be read are passed over (the store's reader says why, once).
    pub fn after(&mut self, after_ns: u64, to_ns: u64, max: usize) -> Vec<Sample> {
        let Ok(mut reader) = Reader::open(&self.dir) else { return Vec::new() };
        let Ok(frames) = reader.frames(after_ns.saturating_add(1), to_ns) else { return Vec::new() };
        frames.iter().filter_map(|f| reader.read(f)).take(max).collect()
    }

    /// The stored sample at `unix_ns` (or the last one before it), for rates after a restart.
    pub fn sample_at(&mut self, unix_ns: u64) -> Option<Sample> {
        let mut reader = Reader::open(&self.dir).ok()?;
        let frames = reader.frames(unix_ns.saturating_sub(PREV_LOOKBACK_NS), unix_ns).ok()?;
        frames.iter().rev().find_map(|f| reader.read(f))
    }
}
