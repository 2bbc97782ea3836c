//! Rounds over time: who copies the shared pages, how fast, when the copy is complete, and
//! which workers were recycled (a pid gone and a new child in its place) with what they had
//! copied.
//!
//! A forked worker starts with every page shared with its master; each page it writes (or, in
//! CPython, each object whose reference count it touches) becomes a private dirty copy. So the
//! growth of a worker's `Private_Dirty` is its copying, and what it still shares
//! (`Shared_Clean` + `Shared_Dirty`) over its copying rate is how long until it holds its own
//! copy of everything.

use std::collections::VecDeque;

use serde::Serialize;

use crate::family::Role;
use crate::round::{Round, Summary};
use crate::{bytes, span, MIB};

/// Below this rate a worker is not called a copier: CPython's allocator and a few refcounts
/// move an idle worker's private memory by less.
pub const COPYING_BYTES_PER_MIN: f64 = 0.25 * MIB;
/// Points kept per worker; past it every other point is dropped (11 hours at 10 s before the
/// first thinning).
const MAX_POINTS: usize = 4096;
/// Members kept; past it the longest-gone ones are forgotten (a family whose children churn,
/// watched for days, would otherwise grow without bound).
const MAX_TRACKS: usize = 256;
/// Recyclings listed; later ones are counted in `recycled_not_listed`.
const MAX_RECYCLED: usize = 1000;

#[derive(Debug, Clone)]
struct Track {
    number: u32,
    pid: u32,
    start_ticks: u64,
    role: Role,
    started_during_watch: bool,
    /// (seconds, private dirty, shared) of each reading.
    points: Vec<(f64, u64, u64)>,
    gone_at: Option<f64>,
}

/// A worker that went away and the one that took its place.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recycle {
    pub number: u32,
    pub old_pid: u32,
    pub new_pid: u32,
    /// When the old pid was first missed.
    pub at_secs: f64,
    /// Its private dirty memory at its last reading: what it had copied or written.
    pub old_private_dirty_bytes: u64,
    /// How long it was watched.
    pub old_watched_secs: f64,
}

/// The family's sums at one round.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FamilyPoint {
    pub at_secs: f64,
    pub unshared_bytes: u64,
    pub used_bytes: u64,
}

/// One member over the watch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Growth {
    /// Workers are numbered in the order they were first seen; a replacement takes the number
    /// of the worker it replaced. The master is 0.
    pub number: u32,
    pub pid: u32,
    pub role: Role,
    pub alive: bool,
    /// Whether it started while watched, so `growth_bytes` is its growth since it started;
    /// otherwise since the watch began.
    pub started_during_watch: bool,
    pub watched_secs: f64,
    pub private_dirty_bytes: u64,
    pub growth_bytes: i64,
    /// Least-squares slope of private dirty over its readings; `None` with fewer than two.
    pub rate_bytes_per_min: Option<f64>,
    /// What it still shares at its last reading.
    pub shared_bytes: u64,
    /// When, at that rate, it will have copied all it still shares (from its last reading).
    pub full_copy_after_secs: Option<f64>,
    /// Its readings: (seconds, private dirty bytes).
    #[serde(skip)]
    pub points: Vec<(f64, u64)>,
}

/// What `--watch` concludes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub rounds: usize,
    pub watched_secs: f64,
    pub members: Vec<Growth>,
    pub recycled: Vec<Recycle>,
    pub recycled_not_listed: usize,
    /// Members that went away longest ago, dropped past the 256 kept.
    pub forgotten: usize,
    /// Workers that went away with no new one in their place (yet).
    pub exited: Vec<u32>,
    /// The fastest copier, by number, when one copies at least [`COPYING_BYTES_PER_MIN`].
    pub top_grower: Option<u32>,
    pub top_grower_pid: Option<u32>,
    pub verdict: String,
    pub family: Vec<FamilyPoint>,
}

/// Follows rounds; [`Tracker::report`] says what they show.
#[derive(Debug, Default)]
pub struct Tracker {
    tracks: Vec<Track>,
    /// (pid, start) of workers that went away, waiting for a newcomer to take their number.
    gone: VecDeque<(u32, u64)>,
    next_number: u32,
    recycled: Vec<Recycle>,
    recycled_not_listed: usize,
    forgotten: usize,
    family: Vec<FamilyPoint>,
    rounds: usize,
    first_at: Option<f64>,
    last_at: f64,
}

impl Tracker {
    pub fn new() -> Self {
        Self { next_number: 1, ..Self::default() }
    }

    pub fn push(&mut self, round: &Round) {
        let at = round.at_secs;
        let first_round = self.rounds == 0;
        self.rounds += 1;
        self.first_at.get_or_insert(at);
        self.last_at = at;
        let summary = Summary::of(round);
        if self.family.len() >= MAX_POINTS {
            thin(&mut self.family);
        }
        self.family.push(FamilyPoint {
            at_secs: at,
            unshared_bytes: summary.unshared_bytes,
            used_bytes: summary.used_bytes,
        });
        // Those missing from this round are gone (a read that failed still counts as there).
        for t in &mut self.tracks {
            let present = round.members.iter().any(|m| m.pid == t.pid && m.start_ticks == t.start_ticks);
            if !present && t.gone_at.is_none() {
                t.gone_at = Some(at);
                if t.role == Role::Worker {
                    self.gone.push_back((t.pid, t.start_ticks));
                }
            }
        }
        for m in &round.members {
            let index = match self.tracks.iter().position(|t| t.pid == m.pid && t.start_ticks == m.start_ticks) {
                Some(i) => i,
                None => {
                    let number = match (m.role, first_round) {
                        (Role::Master, _) => 0,
                        (Role::Worker, false) => {
                            let old = self
                                .gone
                                .pop_front()
                                .and_then(|key| self.tracks.iter().find(|t| (t.pid, t.start_ticks) == key));
                            match old {
                                Some(t) => {
                                    let (first, last) = (t.points.first(), t.points.last());
                                    let recycle = Recycle {
                                        number: t.number,
                                        old_pid: t.pid,
                                        new_pid: m.pid,
                                        at_secs: t.gone_at.unwrap_or(at),
                                        old_private_dirty_bytes: last.map_or(0, |p| p.1),
                                        old_watched_secs: match (first, last) {
                                            (Some(f), Some(l)) => l.0 - f.0,
                                            _ => 0.0,
                                        },
                                    };
                                    let number = t.number;
                                    if self.recycled.len() < MAX_RECYCLED {
                                        self.recycled.push(recycle);
                                    } else {
                                        self.recycled_not_listed += 1;
                                    }
                                    number
                                }
                                None => self.take_number(),
                            }
                        }
                        (Role::Worker, true) => self.take_number(),
                    };
                    self.tracks.push(Track {
                        number,
                        pid: m.pid,
                        start_ticks: m.start_ticks,
                        role: m.role,
                        started_during_watch: !first_round,
                        points: Vec::new(),
                        gone_at: None,
                    });
                    self.tracks.len() - 1
                }
            };
            if let Some(c) = m.counters {
                let t = &mut self.tracks[index];
                if t.points.len() >= MAX_POINTS {
                    thin(&mut t.points);
                }
                t.points.push((at, c.private_dirty_bytes, c.shared_bytes()));
            }
        }
        self.forget_longest_gone();
    }

    /// Keeps at most [`MAX_TRACKS`] members by dropping the ones gone longest ago (never a
    /// member still there). A dropped worker can no longer be paired with a replacement.
    fn forget_longest_gone(&mut self) {
        let excess = self.tracks.len().saturating_sub(MAX_TRACKS);
        if excess == 0 {
            return;
        }
        let mut gone: Vec<(f64, u32, u64)> =
            self.tracks.iter().filter_map(|t| t.gone_at.map(|g| (g, t.pid, t.start_ticks))).collect();
        gone.sort_by(|a, b| a.0.total_cmp(&b.0));
        gone.truncate(excess);
        let dropped: Vec<(u32, u64)> = gone.into_iter().map(|(_, pid, start)| (pid, start)).collect();
        self.tracks.retain(|t| !dropped.contains(&(t.pid, t.start_ticks)));
        self.gone.retain(|key| !dropped.contains(key));
        self.forgotten += dropped.len();
    }

    fn take_number(&mut self) -> u32 {
        let n = self.next_number;
        self.next_number += 1;
        n
    }

    pub fn report(&self) -> Report {
        let watched_secs = self.first_at.map_or(0.0, |f| self.last_at - f);
        let mut members: Vec<Growth> = self.tracks.iter().map(growth).collect();
        members.sort_by_key(|g| (g.number, !g.alive, g.pid));
        let top = members
            .iter()
            .filter(|g| g.alive && g.role == Role::Worker)
            .filter(|g| g.rate_bytes_per_min.is_some_and(|r| r >= COPYING_BYTES_PER_MIN))
            .max_by(|a, b| {
                a.rate_bytes_per_min.partial_cmp(&b.rate_bytes_per_min).unwrap_or(std::cmp::Ordering::Equal)
            });
        let exited: Vec<u32> = self.gone.iter().map(|&(pid, _)| pid).collect();
        let verdict = verdict(self.rounds, watched_secs, top, &self.recycled);
        Report {
            rounds: self.rounds,
            watched_secs,
            top_grower: top.map(|g| g.number),
            top_grower_pid: top.map(|g| g.pid),
            members: members.clone(),
            recycled: self.recycled.clone(),
            recycled_not_listed: self.recycled_not_listed,
            forgotten: self.forgotten,
            exited,
            verdict,
            family: self.family.clone(),
        }
    }
}

fn thin<T: Copy>(points: &mut Vec<T>) {
    let kept: Vec<T> = points.iter().step_by(2).copied().collect();
    *points = kept;
}

fn growth(t: &Track) -> Growth {
    let first = t.points.first();
    let last = t.points.last();
    let rate = slope(&t.points).map(|per_sec| per_sec * 60.0);
    let shared = last.map_or(0, |p| p.2);
    let full_copy_after_secs = rate.filter(|r| *r >= COPYING_BYTES_PER_MIN).map(|r| shared as f64 / (r / 60.0));
    Growth {
        number: t.number,
        pid: t.pid,
        role: t.role,
        alive: t.gone_at.is_none(),
        started_during_watch: t.started_during_watch,
        watched_secs: match (first, last) {
            (Some(f), Some(l)) => l.0 - f.0,
            _ => 0.0,
        },
        private_dirty_bytes: last.map_or(0, |p| p.1),
        growth_bytes: match (first, last) {
            (Some(f), Some(l)) => l.1 as i64 - f.1 as i64,
            _ => 0,
        },
        rate_bytes_per_min: rate,
        shared_bytes: shared,
        full_copy_after_secs,
        points: t.points.iter().map(|p| (p.0, p.1)).collect(),
    }
}

/// Least-squares slope of private dirty bytes per second; `None` without two distinct times.
fn slope(points: &[(f64, u64, u64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_v = points.iter().map(|p| p.1 as f64).sum::<f64>() / n;
    let mut num = 0.0;
    let mut den = 0.0;
    for p in points {
        let dt = p.0 - mean_t;
        num += dt * (p.1 as f64 - mean_v);
        den += dt * dt;
    }
    (den > 0.0).then(|| num / den)
}

fn verdict(rounds: usize, watched_secs: f64, top: Option<&Growth>, recycled: &[Recycle]) -> String {
    let mut out = String::new();
    if rounds < 2 || watched_secs <= 0.0 {
        return "one round: --watch 10s shows who copies the shared pages and how fast".into();
    }
    match top {
        Some(g) => {
            let rate = g.rate_bytes_per_min.unwrap_or(0.0);
            out.push_str(&format!("worker {} (pid {}) copies {:.1} MiB/min", g.number, g.pid, rate / MIB));
            match g.full_copy_after_secs {
                Some(secs) if g.shared_bytes > 0 => out.push_str(&format!(
                    "; after ~{} it holds its own copy of what it still shares ({}). Recycling workers \
sooner than that (gunicorn max_requests, uwsgi max-requests, PHP-FPM pm.max_requests) keeps the \
saving; later, recycling only costs the restart",
                    span(secs),
                    bytes(g.shared_bytes as f64)
                )),
                _ => out.push_str(&format!(
                    "; it shares nothing any more: it holds its own copy ({} private dirty), and recycling it gives that back",
                    bytes(g.private_dirty_bytes as f64)
                )),
            }
        }
        None => out.push_str(&format!(
            "no worker copied more than {:.2} MiB/min over {}: the sharing holds, and recycling workers would gain nothing",
            COPYING_BYTES_PER_MIN / MIB,
            span(watched_secs)
        )),
    }
    for r in recycled {
        out.push_str(&format!(
            ". Worker {} (pid {}) was recycled at {}: it had {} private dirty; pid {} took its place",
            r.number,
            r.old_pid,
            span(r.at_secs),
            bytes(r.old_private_dirty_bytes as f64),
            r.new_pid
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round::{MemberRead, ReadCost};
    use proctor_procfs::smaps::Counters;

    const M: u64 = 1024 * 1024;

    fn read(pid: u32, role: Role, private_dirty: u64, shared: u64) -> MemberRead {
        MemberRead {
            pid,
            ppid: 100,
            start_ticks: u64::from(pid),
            comm: "w".into(),
            role,
            counters: Some(Counters {
                rss_bytes: private_dirty + shared,
                pss_bytes: private_dirty + shared / 4,
                private_dirty_bytes: private_dirty,
                shared_dirty_bytes: shared,
                ..Counters::default()
            }),
            anonymous_known: true,
            error: None,
            cost: Some(ReadCost::default()),
        }
    }

    fn round(at: f64, members: Vec<MemberRead>) -> Round {
        Round { at_secs: at, unix_ms: 0, members }
    }

    #[test]
    fn the_fastest_copier_is_named_with_when_its_copy_is_complete() {
        let mut t = Tracker::new();
        for minute in 0..=4u64 {
            t.push(&round(
                minute as f64 * 60.0,
                vec![
                    read(100, Role::Master, 10 * M, 200 * M),
                    read(101, Role::Worker, M, 200 * M),
                    // Worker 2 copies 5 MiB a minute out of what it shares.
                    read(102, Role::Worker, M + 5 * M * minute, 200 * M - 5 * M * minute),
                    read(103, Role::Worker, M + M / 10 * minute, 200 * M),
                ],
            ));
        }
        let r = t.report();
        assert_eq!((r.rounds, r.watched_secs), (5, 240.0));
        assert_eq!((r.top_grower, r.top_grower_pid), (Some(2), Some(102)));
        let w2 = r.members.iter().find(|g| g.pid == 102).expect("worker 2");
        assert!((w2.rate_bytes_per_min.expect("rate") - 5.0 * M as f64).abs() < 1.0);
        assert_eq!(w2.growth_bytes, 20 * M as i64);
        // It still shares 180 MiB; at 5 MiB/min that is 36 minutes.
        assert!((w2.full_copy_after_secs.expect("forecast") - 36.0 * 60.0).abs() < 1e-6);
        assert!(
            r.verdict.starts_with("worker 2 (pid 102) copies 5.0 MiB/min; after ~36 min it holds its own copy"),
            "{}",
            r.verdict
        );
        let w3 = r.members.iter().find(|g| g.pid == 103).expect("worker 3");
        assert_eq!(w3.full_copy_after_secs, None, "0.1 MiB/min is under the copying threshold");
        assert_eq!(r.members[0].number, 0, "the master first");
    }

    #[test]
    fn a_replaced_worker_is_recycled_with_what_it_had_copied() {
        let mut t = Tracker::new();
        t.push(&round(0.0, vec![read(100, Role::Master, M, 200 * M), read(101, Role::Worker, M, 200 * M)]));
        t.push(&round(10.0, vec![read(100, Role::Master, M, 200 * M), read(101, Role::Worker, 40 * M, 160 * M)]));
        t.push(&round(20.0, vec![read(100, Role::Master, M, 200 * M), read(107, Role::Worker, M, 200 * M)]));
        t.push(&round(30.0, vec![read(100, Role::Master, M, 200 * M), read(107, Role::Worker, M, 200 * M)]));
        let r = t.report();
        assert_eq!(
            r.recycled,
            vec![Recycle {
                number: 1,
                old_pid: 101,
                new_pid: 107,
                at_secs: 20.0,
                old_private_dirty_bytes: 40 * M,
                old_watched_secs: 10.0
            }]
        );
        assert!(r.exited.is_empty());
        let new = r.members.iter().find(|g| g.pid == 107).expect("the replacement");
        assert!(new.started_during_watch && new.alive && new.number == 1);
        assert!(r.verdict.contains(
            "Worker 1 (pid 101) was recycled at 20 s: it had 40.00 MiB private dirty; pid 107 took its place"
        ));
        assert!(r.verdict.starts_with("no worker copied"), "{}", r.verdict);
    }

    #[test]
    fn one_round_says_to_watch_and_a_worker_that_left_is_exited() {
        let mut t = Tracker::new();
        t.push(&round(0.0, vec![read(100, Role::Master, M, M), read(101, Role::Worker, M, M)]));
        assert!(t.report().verdict.starts_with("one round"));
        t.push(&round(5.0, vec![read(100, Role::Master, M, M)]));
        assert_eq!(t.report().exited, vec![101]);
    }

    /// A family whose children come and go forever keeps at most MAX_TRACKS members, the
    /// longest gone forgotten first, and the recyclings it lists are capped and counted.
    #[test]
    fn members_and_recyclings_stay_bounded() {
        let mut t = Tracker::new();
        for i in 0..3000u32 {
            t.push(&round(f64::from(i), vec![read(100, Role::Master, M, M), read(1000 + i, Role::Worker, M, M)]));
        }
        let r = t.report();
        assert!(r.members.len() <= MAX_TRACKS, "{}", r.members.len());
        assert_eq!(r.members.len() + r.forgotten, 3001);
        assert!(r.members.iter().any(|g| g.pid == 3999 && g.alive), "the newest is kept");
        assert!(r.members.iter().any(|g| g.pid == 100 && g.alive), "the master is kept");
        assert_eq!(r.recycled.len(), MAX_RECYCLED);
        assert_eq!(r.recycled.len() + r.recycled_not_listed, 2999);
    }

    #[test]
    fn points_stay_bounded() {
        let mut t = Tracker::new();
        for i in 0..(3 * MAX_POINTS) {
            t.push(&round(i as f64, vec![read(100, Role::Master, M + i as u64, M)]));
        }
        let r = t.report();
        assert!(r.family.len() <= MAX_POINTS && r.members[0].points.len() <= MAX_POINTS);
        assert!(r.members[0].rate_bytes_per_min.is_some_and(|x| (x - 60.0).abs() < 1.0));
    }
}
