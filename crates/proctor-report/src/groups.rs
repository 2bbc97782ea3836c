//! Process groups over a range: each recorded sample's processes folded into the groups the
//! agent stored with it (`Sample::groups`), and each group's series bucketed like the host's.
//!
//! A sample recorded without groups adds nothing; a group is a name, so a group whose members
//! all changed is still one series. Rates (CPU, faults, io) need the previous folded sample of
//! the same run, as the host's do; levels (processes, memory) do not.

use std::collections::BTreeMap;

use proctor_groups::GroupRow;
use serde::Serialize;

use crate::points::{Acc, Headline, Series, SeriesPoint, Unit};

/// The series of each group, in a fixed order: (name, unit, what it is).
pub const GROUP_SERIES: [(&str, Unit, &str); 15] = [
    ("processes", Unit::Count, "member processes"),
    ("threads", Unit::Count, "members' threads"),
    ("cpu", Unit::Percent, "CPU, % of one CPU, members' reaped children included"),
    ("rss", Unit::Bytes, "resident memory, summed over members"),
    ("pss", Unit::Bytes, "proportional set size of the members whose PSS is known"),
    ("swap", Unit::Bytes, "members' swapped-out memory"),
    ("faults.minor", Unit::PerSecond, "minor page faults per second, reaped children included"),
    ("faults.major", Unit::PerSecond, "major page faults per second, reaped children included"),
    ("io.read", Unit::BytesPerSecond, "bytes read from storage per second (recorded with --io)"),
    ("io.write", Unit::BytesPerSecond, "bytes written to storage per second (recorded with --io)"),
    ("net.rx", Unit::BytesPerSecond, "bytes received per second over members' sockets (recorded with --net)"),
    ("net.tx", Unit::BytesPerSecond, "bytes sent per second over members' sockets (recorded with --net)"),
    ("net.retransmits", Unit::PerSecond, "TCP segments members retransmitted per second (recorded with --net)"),
    ("started", Unit::Count, "members that appeared since the previous sample"),
    ("exited", Unit::Count, "members of the previous sample that are gone"),
];

pub(crate) const G: usize = GROUP_SERIES.len();

/// A group's values in a bucket: per series, (mean, max, count) when it had any.
pub(crate) type GroupValues = [Option<(f64, f64, u32)>; G];

/// The index of a group series by name.
pub fn group_series_index(name: &str) -> Option<usize> {
    GROUP_SERIES.iter().position(|(n, _, _)| *n == name)
}

/// A group's values at one sample; rates only with a previous sample (`with_rates`), started
/// and exited only when the previous sample's groups were known too (`with_churn`).
pub fn group_values(g: &GroupRow, with_rates: bool, with_churn: bool) -> [Option<f64>; G] {
    let rate = |v: f64| with_rates.then_some(v);
    [
        Some(g.processes as f64),
        Some(g.threads as f64),
        rate(g.cpu_percent),
        Some(g.rss_bytes as f64),
        (g.pss_known > 0).then_some(g.pss_bytes as f64),
        Some(g.swap_bytes as f64),
        rate(g.minor_faults_per_sec),
        rate(g.major_faults_per_sec),
        g.read_bytes_per_sec.filter(|_| with_rates),
        g.write_bytes_per_sec.filter(|_| with_rates),
        g.net_rx_bytes_per_sec.filter(|_| with_rates),
        g.net_tx_bytes_per_sec.filter(|_| with_rates),
        g.net_retransmits_per_sec.filter(|_| with_rates),
        with_churn.then_some(g.started as f64),
        with_churn.then_some(g.exited as f64),
    ]
}

/// Which groups a range keeps series for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupSelect {
    /// Every group, up to a cap (the rest are counted in `groups_left_out`).
    All { max: usize },
    /// These names only.
    Named(Vec<String>),
}

/// One group over the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupSummary {
    pub name: String,
    /// Samples (or rollup rows' samples) the group had members in.
    pub samples: u64,
    pub series: Vec<Series>,
    /// Each series over the whole range (series without a value are left out).
    pub headline: Vec<Headline>,
}

#[derive(Debug)]
struct GroupAcc {
    /// `buckets[bucket][series]`, allocated on first use of the bucket.
    buckets: BTreeMap<usize, [Acc; G]>,
    whole: [Acc; G],
    samples: u64,
}

impl GroupAcc {
    fn add(&mut self, bucket: usize, samples: u64, values: &GroupValues) {
        self.samples += samples;
        // Values come in time order, so mostly to the last bucket used.
        let b = match self.buckets.last_entry() {
            Some(last) if *last.key() == bucket => last.into_mut(),
            _ => self.buckets.entry(bucket).or_insert([Acc::default(); G]),
        };
        for (i, v) in values.iter().enumerate() {
            let Some((mean, max, n)) = *v else { continue };
            if !mean.is_finite() || !max.is_finite() || n == 0 {
                continue;
            }
            b[i].add(mean, max, n);
            self.whole[i].add(mean, max, n);
        }
    }
}

/// The groups' accumulators of a [`crate::RangeBuilder`].
#[derive(Debug)]
pub(crate) struct GroupAccs {
    select: GroupSelect,
    groups: BTreeMap<String, GroupAcc>,
    /// Names not kept because of the cap ([`GroupSelect::All`]).
    left_out: std::collections::BTreeSet<String>,
    /// Names seen but not asked for ([`GroupSelect::Named`]), at most [`OTHERS`].
    others: std::collections::BTreeSet<String>,
}

/// Other groups' names a named selection remembers, to say what there was.
const OTHERS: usize = 64;

impl GroupAccs {
    pub(crate) fn new(select: GroupSelect) -> GroupAccs {
        GroupAccs { select, groups: BTreeMap::new(), left_out: Default::default(), others: Default::default() }
    }

    pub(crate) fn wants(&self, name: &str) -> bool {
        match &self.select {
            GroupSelect::Named(names) => names.iter().any(|n| n == name),
            GroupSelect::All { max } => {
                self.groups.contains_key(name) || (self.groups.len() < *max && !self.left_out.contains(name))
            }
        }
    }

    /// Adds one group's values (each a bucket's (mean, max, count), a sample's being
    /// (v, v, 1)) to `bucket`. A name past the cap is counted, not kept.
    pub(crate) fn add(&mut self, name: &str, bucket: usize, samples: u64, values: &GroupValues) {
        // A group already kept is found with one lookup (a rollup fold adds ~50 groups' values
        // for each of 130,000 rows over 90 days).
        if let Some(acc) = self.groups.get_mut(name) {
            acc.add(bucket, samples, values);
            return;
        }
        if !self.wants(name) {
            match self.select {
                GroupSelect::All { .. } => {
                    self.left_out.insert(name.to_string());
                }
                GroupSelect::Named(_) if self.others.len() < OTHERS => {
                    self.others.insert(name.to_string());
                }
                GroupSelect::Named(_) => {}
            }
            return;
        }
        let mut acc = GroupAcc { buckets: BTreeMap::new(), whole: [Acc::default(); G], samples: 0 };
        acc.add(bucket, samples, values);
        self.groups.insert(name.to_string(), acc);
    }

    /// The summaries (by name), how many groups the cap left out, and other groups' names.
    pub(crate) fn finish(self, from_ns: u64, bucket_ns: f64) -> (Vec<GroupSummary>, usize, Vec<String>) {
        let left_out = self.left_out.len();
        let others = self.others.into_iter().collect();
        let out = self
            .groups
            .into_iter()
            .map(|(name, acc)| {
                let series = GROUP_SERIES
                    .iter()
                    .enumerate()
                    .map(|(i, (sname, unit, description))| Series {
                        name: sname,
                        unit: *unit,
                        description,
                        points: acc
                            .buckets
                            .iter()
                            .filter(|(_, b)| b[i].count > 0)
                            .map(|(&bucket, b)| SeriesPoint {
                                bucket: bucket as u32,
                                start_ns: from_ns + (bucket as f64 * bucket_ns) as u64,
                                end_ns: from_ns + ((bucket + 1) as f64 * bucket_ns) as u64,
                                mean: b[i].sum / f64::from(b[i].count),
                                max: b[i].max,
                                count: b[i].count,
                            })
                            .collect(),
                    })
                    .collect();
                let headline = GROUP_SERIES
                    .iter()
                    .zip(&acc.whole)
                    .filter(|(_, a)| a.count > 0)
                    .map(|((sname, unit, description), a)| Headline {
                        name: sname,
                        unit: *unit,
                        description,
                        mean: a.sum / f64::from(a.count),
                        max: a.max,
                        count: a.count,
                    })
                    .collect();
                GroupSummary { name, samples: acc.samples, series, headline }
            })
            .collect();
        (out, left_out, others)
    }
}
