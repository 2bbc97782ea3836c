//! Where a queue's series come from: a sample (live or read back from the store) and the one
//! before it, made into the families `/metrics` renders, by the same code for both.

use std::path::PathBuf;
use std::sync::Arc;

use proctor_agent::groups::stored_view;
use proctor_agent::snapshot::Snapshot;
use proctor_http::prom::{self, Family, MetricsConfig};
use proctor_model::Sample;
use proctor_store::{same_run, ForwardReader, ForwardStats, Reader};
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

/// Samples read back from the store directory, forward: the backlog is read through one
/// cursor kept between batches, so a batch costs the frames it sends, whatever lies after.
#[derive(Debug)]
pub struct StoreSource {
    dir: PathBuf,
    forward: ForwardReader,
}

/// How far back the sample before a cursor is looked for (a few intervals at any sane rate).
const PREV_LOOKBACK_NS: u64 = 600 * 1_000_000_000;

impl StoreSource {
    pub fn new(dir: PathBuf) -> StoreSource {
        let forward = ForwardReader::new(&dir);
        StoreSource { dir, forward }
    }

    /// Up to `max` samples stored after `after_ns` and at or before `to_ns`, in time order.
    /// Frames that cannot be read are passed over (the store's reader says why, once). When
    /// `after_ns` is the last sample handed out, the read goes on where the last one stopped;
    /// any other time places the cursor again (the queue went live in between, or restarted).
    pub fn after(&mut self, after_ns: u64, to_ns: u64, max: usize) -> Vec<Sample> {
        self.forward.read_after(after_ns, to_ns, max)
    }

    /// What reading the store has cost so far, in frames.
    pub fn cost(&self) -> ForwardStats {
        self.forward.stats()
    }

    /// The stored sample at `unix_ns` (or the last one before it), for rates after a restart.
    pub fn sample_at(&mut self, unix_ns: u64) -> Option<Sample> {
        let mut reader = Reader::open(&self.dir).ok()?;
        let frames = reader.frames(unix_ns.saturating_sub(PREV_LOOKBACK_NS), unix_ns).ok()?;
        frames.iter().rev().find_map(|f| reader.read(f))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use proctor_store::{StoreConfig, Writer};

    use super::*;

    const SECOND: u64 = 1_000_000_000;
    const T0: u64 = 1_700_000_000 * SECOND;

    fn sample(seq: u64) -> Sample {
        Sample {
            seq,
            unix_ns: T0 + seq * SECOND,
            mono_ns: SECOND + seq * SECOND,
            clock_ticks_per_sec: 100,
            page_size: 4096,
            ..Sample::default()
        }
    }

    /// A store of samples 1 s apart, in segments of 100 s (an hour's segment of 1 s samples,
    /// scaled down), so a backlog spans many segments.
    fn writer(dir: &Path) -> Writer {
        let config = StoreConfig { segment_max_age: Duration::from_secs(100), ..StoreConfig::default() };
        Writer::open(dir, config).expect("open").0
    }

    fn append(writer: &mut Writer, seqs: std::ops::Range<u64>) {
        for seq in seqs {
            writer.append(&sample(seq)).expect("append");
        }
    }

    /// Reads as the queue does: batches of `batch` after the last sample read, up to the newest.
    fn read(source: &mut StoreSource, pos: &mut u64, to_ns: u64, batch: usize, want: usize) -> Vec<u64> {
        let mut seqs = Vec::new();
        while seqs.len() < want {
            let read = source.after(*pos, to_ns, batch);
            if read.is_empty() {
                break;
            }
            for s in read {
                *pos = s.unix_ns;
                seqs.push(s.seq);
            }
        }
        seqs
    }

    /// Issue 33 item 10: each backfill batch listed and walked every stored frame after the
    /// cursor, so a batch cost grew with the backlog (300 headers walked per sample sent with
    /// 3,000 behind, 15 with 300). Read forward, a sample costs its own frame whatever the
    /// backlog: the same 300 samples sent from a backlog of 300 and of 3,000 walk and decode
    /// the same frames per sample, about one.
    #[test]
    fn a_batch_costs_its_own_frames_whatever_the_backlog() {
        let per_sample = |backlog: u64| {
            let dir = tempfile::tempdir().expect("tempdir");
            append(&mut writer(dir.path()), 0..backlog);
            let mut source = StoreSource::new(dir.path().to_owned());
            let mut pos = T0 - SECOND;
            let seqs = read(&mut source, &mut pos, T0 + (backlog - 1) * SECOND, 10, 300);
            assert_eq!(seqs, (0..300).collect::<Vec<_>>(), "backlog {backlog}: every sample, in order, once");
            let cost = source.cost();
            (cost.headers_walked as f64 / 300.0, cost.frames_decoded as f64 / 300.0)
        };
        let (small, large) = (per_sample(300), per_sample(3000));
        for (what, (headers, decoded)) in [("300 behind", small), ("3000 behind", large)] {
            assert!(headers <= 2.0, "{what}: {headers} frame headers walked per sample sent");
            assert!(decoded <= 1.0, "{what}: {decoded} frames decoded per sample sent");
        }
        assert!(
            (large.0 - small.0).abs() <= 0.5,
            "headers walked per sample: {small:?} behind 300, {large:?} behind 3000"
        );
    }

    /// The cursor goes on as the store grows and rotates, stops at `to_ns`, is placed again by
    /// time when asked for another time (the queue went live, or restarted), and when the
    /// segment it was in is gone (retention).
    #[test]
    fn the_cursor_follows_growth_rotation_rewinds_and_lost_segments() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = writer(dir.path());
        append(&mut w, 0..250);
        let mut source = StoreSource::new(dir.path().to_owned());
        let mut pos = T0 - SECOND;
        // Up to a time: nothing after it is handed out, and the next read goes on from there.
        assert_eq!(read(&mut source, &mut pos, T0 + 49 * SECOND, 7, usize::MAX), (0..50).collect::<Vec<_>>());
        assert_eq!(read(&mut source, &mut pos, T0 + 249 * SECOND, 7, usize::MAX), (50..250).collect::<Vec<_>>());
        // The live segment grows, then a new segment is started (at 300).
        append(&mut w, 250..320);
        assert_eq!(read(&mut source, &mut pos, u64::MAX, 7, usize::MAX), (250..320).collect::<Vec<_>>());
        assert!(source.cost().headers_walked <= 320, "{:?}", source.cost());
        assert_eq!(source.cost().seeks, 1, "{:?}", source.cost());

        // Asked for what follows an earlier time: placed again, by time.
        let mut pos = T0 + 120 * SECOND;
        assert_eq!(read(&mut source, &mut pos, T0 + 130 * SECOND, 100, usize::MAX), (121..131).collect::<Vec<_>>());
        assert_eq!(source.cost().seeks, 2);

        // The segment the cursor is in (100..200) is removed: it goes on from the next one.
        let segment = proctor_store::segment::list_segments(dir.path())
            .expect("list")
            .into_iter()
            .find(|s| s.start_ns == T0 + 100 * SECOND)
            .expect("the segment of 100 s");
        std::fs::remove_file(&segment.path).expect("remove");
        assert_eq!(read(&mut source, &mut pos, u64::MAX, 100, 100), (200..300).collect::<Vec<_>>());
    }
}
