//! A time range of stored samples folded into host series and top processes.
//!
//! Samples arrive one at a time, in order ([`RangeBuilder::push`]), so a day of samples is
//! never held at once: the builder keeps the previous sample (for rates), one accumulator per
//! bucket and series, and one per process seen. A rate is derived only between two
//! consecutive samples of the same recorder run (`seq`, monotonic and wall clock all counting
//! up): across a restart the monotonic clocks are unrelated, so the first sample after it
//! gives levels (memory) but no rates. A process is the pair (pid, start time): a reused pid
//! with a new start time is a new process, and no CPU delta spans the two.
//!
//! Does not read the store, the clock or any file.

use std::collections::HashMap;
use std::sync::Arc;

use proctor_groups::{churn, fold};
pub use proctor_model::series::host_values;
use proctor_model::{process_rows, RowContext, Sample};

use crate::groups::{group_values, GroupAccs, GroupSelect, GroupSummary, GroupValues, G};
use serde::Serialize;

use crate::points::Acc;
pub use crate::points::{Headline, Series, SeriesPoint, Unit};

/// The host series, in the model's fixed order ([`proctor_model::series::HOST_SERIES`], whose
/// values the fold takes by index): (name, unit, what it is), the name and meaning the
/// catalog's ([`proctor_units::series`]), which the rollup tiers keep too.
pub static SERIES: std::sync::LazyLock<[(&'static str, Unit, &'static str); N]> = std::sync::LazyLock::new(|| {
    proctor_model::series::HOST_SERIES.map(|name| {
        let row = proctor_units::series::find(name).expect("every host series is a catalog row (a test holds it)");
        (row.name, Unit::of(row.unit), row.meaning)
    })
});

const N: usize = proctor_model::series::N;

/// The index of a series by its name or an alias the catalog keeps for it (`cpu.user`,
/// `host.psi.cpu.some`, as reports and rollups named them before the catalog).
pub fn series_index(name: &str) -> Option<usize> {
    let name = proctor_units::series::canonical(name);
    SERIES.iter().position(|(n, _, _)| *n == name)
}

/// What to fold and how coarsely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeConfig {
    /// The range, Unix nanoseconds, both ends included. Samples outside it are ignored.
    pub from_ns: u64,
    pub to_ns: u64,
    /// Most points per series (buckets of equal length over the range).
    pub max_points: usize,
    /// How many processes each top list holds.
    pub top: usize,
    /// Keep every sample's values as well ([`RangeSummary::points`]), for correlation.
    pub keep_points: bool,
    /// How many of the processes with the highest peak RSS keep their RSS over the range
    /// ([`RangeSummary::top_memory_rss`]), for the plot's panel of them.
    pub rss_series: usize,
}

impl Default for RangeConfig {
    fn default() -> Self {
        RangeConfig { from_ns: 0, to_ns: u64::MAX, max_points: 600, top: 10, keep_points: false, rss_series: 4 }
    }
}

/// Every series' value at one sample. A rate covers `(interval_start_ns, unix_ns]`; levels are
/// the sample's own. `None`: not derivable (no earlier sample of the same run, a counter that
/// went backwards, a file the kernel does not have).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostPoint {
    pub unix_ns: u64,
    /// The previous sample of the same run, when there is one (the rates' interval start).
    pub interval_start_ns: Option<u64>,
    pub values: [Option<f64>; N],
}

/// One process over the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessUsage {
    pub pid: u32,
    pub start_ticks: u64,
    pub comm: String,
    /// The last command line seen, one entry per argument (the cmdline worker fills it in
    /// after the first sight).
    pub cmdline: Option<Vec<String>>,
    /// CPU time used inside the range: deltas of the cumulative counters between consecutive
    /// samples of one run, plus the whole counter of a process that started between two.
    pub cpu_seconds: f64,
    pub rss_peak_bytes: Option<u64>,
    pub rss_mean_bytes: Option<f64>,
    /// IP bytes its sockets received and sent inside the range, and TCP segments they
    /// retransmitted (recorded with `--net`), as CPU: deltas between consecutive samples of one
    /// run, all of it for a process that started or first used the network between two;
    /// `None` where no sample carried its network.
    pub net_rx_bytes: Option<u64>,
    pub net_tx_bytes: Option<u64>,
    pub net_retransmits: Option<u64>,
    /// Samples the process appeared in.
    pub samples: u64,
    pub first_seen_ns: u64,
    pub last_seen_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RangeSummary {
    /// The processes that ended, from the samples whose processes were folded.
    pub exited: ExitedSummary,
    pub from_ns: u64,
    pub to_ns: u64,
    /// Samples folded (inside the range).
    pub samples: u64,
    /// Samples whose processes were folded (all of them unless the caller used
    /// [`RangeBuilder::push_host`] for some).
    pub process_samples: u64,
    /// Recorder runs seen (a restart starts a new one; no rate spans two).
    pub runs: u64,
    /// Samples that gave rates (had an earlier sample of the same run).
    pub samples_with_rates: u64,
    /// The first and last sample's time, when there were any.
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    /// The median time between consecutive samples of one run.
    pub median_interval_ns: Option<u64>,
    pub series: Vec<Series>,
    /// Each series over the whole range (series without a value in it are left out).
    pub headline: Vec<Headline>,
    /// Every sample's values, when [`RangeConfig::keep_points`] asked for them (for
    /// correlation). Not serialized: a day at 1 s is 86,400 of them, the series hold them
    /// downsampled, and `proctor dump host` writes them per sample.
    #[serde(skip_serializing)]
    pub points: Vec<HostPoint>,
    /// Highest CPU seconds first.
    pub top_cpu: Vec<ProcessUsage>,
    /// Highest peak RSS first.
    pub top_memory: Vec<ProcessUsage>,
    /// Most network bytes (received and sent) inside the range first; only processes that
    /// used some (a recording made without `--net` has none).
    pub top_network: Vec<ProcessUsage>,
    /// The RSS of the first [`RangeConfig::rss_series`] processes of `top_memory` (the same
    /// order) in the series' buckets: each bucket's mean and max over the samples whose
    /// processes were folded. For the plot; not serialized (the top lists have each one's
    /// peak and mean).
    #[serde(skip_serializing)]
    pub top_memory_rss: Vec<Vec<SeriesPoint>>,
    /// Distinct processes seen.
    pub processes_seen: u64,
    /// Groups' series, when asked for ([`RangeBuilder::with_groups`]), by name.
    pub groups: Vec<GroupSummary>,
    /// Groups past the cap of [`GroupSelect::All`].
    pub groups_left_out: usize,
    /// Other groups seen when some were named ([`GroupSelect::Named`]; at most 64 names).
    pub groups_not_asked: Vec<String>,
    /// Folded samples that carried groups (a recording made without `--groups` has none).
    pub group_samples: u64,
    /// Rollup rows folded in place of raw samples (their samples are counted in `samples`).
    pub rollup_rows: u64,
}

#[derive(Debug)]
struct ProcAcc {
    comm: String,
    /// Joined with spaces only in `finish`: a day is 86,400 sightings of each process.
    cmdline: Option<Arc<[String]>>,
    cpu_ticks: u64,
    /// (received, sent, retransmitted) inside the range; `None` until a sample carries it.
    net: Option<(u64, u64, u64)>,
    ticks_per_sec: u64,
    rss_peak: Option<u64>,
    rss_sum: f64,
    rss_count: u64,
    /// RSS by bucket, only the buckets the process was seen in (a short-lived process costs
    /// a few entries, not one per bucket), in time order.
    rss_buckets: Vec<(u32, Acc)>,
    samples: u64,
    first_seen_ns: u64,
    last_seen_ns: u64,
}

/// Folds samples one at a time; [`RangeBuilder::finish`] makes the summary.
#[derive(Debug)]
pub struct RangeBuilder {
    config: RangeConfig,
    buckets: usize,
    bucket_ns: f64,
    /// `acc[series][bucket]`.
    acc: Vec<Vec<Acc>>,
    /// `whole[series]`: the range as one bucket.
    whole: [Acc; N],
    /// The previous sample, for rates (its processes are not kept).
    prev: Option<Sample>,
    /// The last sample whose processes were folded, and its run (1-based count of runs).
    prev_procs: Option<(u64, Sample)>,
    process_samples: u64,
    samples: u64,
    runs: u64,
    samples_with_rates: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    intervals: Vec<u64>,
    points: Vec<HostPoint>,
    processes: HashMap<(u32, u64), ProcAcc>,
    /// Group series, when asked for ([`RangeBuilder::with_groups`]).
    groups: Option<GroupAccs>,
    /// Samples whose processes were folded that carried their groups.
    group_samples: u64,
    /// Rollup rows folded ([`RangeBuilder::push_rollup`]).
    rollup_rows: u64,
    /// Where the columns of the last rollup block folded go.
    block_layout: Option<BlockLayout>,
    exited: ExitedAcc,
}

/// Where a rollup block's columns go, worked out from its list of names.
#[derive(Debug)]
struct BlockLayout {
    names: Vec<String>,
    targets: Vec<To>,
    /// The groups the block names, in the order `To::Group` counts them.
    groups: Vec<String>,
}

/// Where one rollup column goes: a host series, a group's series, or nowhere.
#[derive(Debug, Clone, Copy)]
enum To {
    Host(usize),
    Group(usize, usize),
    Skip,
}

impl BlockLayout {
    fn of(names: &[String], with_groups: bool) -> BlockLayout {
        let mut groups: Vec<String> = Vec::new();
        let targets = names
            .iter()
            .map(|name| {
                // Blocks rolled before the catalog named host series `host.` + an old name.
                if let Some(i) = series_index(name) {
                    return To::Host(i);
                }
                let Some(rest) = name.strip_prefix("group.").filter(|_| with_groups) else { return To::Skip };
                // The series is the suffix that names one (a group's name may hold dots).
                let split = crate::groups::GROUP_SERIES
                    .iter()
                    .enumerate()
                    .find_map(|(i, (s, _, _))| rest.strip_suffix(s).and_then(|g| g.strip_suffix('.')).map(|g| (g, i)));
                match split {
                    Some((group, i)) => {
                        let g = groups.iter().position(|x| x == group).unwrap_or_else(|| {
                            groups.push(group.to_string());
                            groups.len() - 1
                        });
                        To::Group(g, i)
                    }
                    None => To::Skip,
                }
            })
            .collect();
        BlockLayout { names: names.to_vec(), targets, groups }
    }
}

/// Folds `samples` (in time order) in one call.
pub fn summarize<I: IntoIterator<Item = Sample>>(samples: I, config: RangeConfig) -> RangeSummary {
    let mut builder = RangeBuilder::new(config);
    for sample in samples {
        builder.push(sample);
    }
    builder.finish()
}

impl RangeBuilder {
    pub fn new(config: RangeConfig) -> Self {
        let buckets = config.max_points.max(1);
        let span = config.to_ns.saturating_sub(config.from_ns).max(1) as f64;
        RangeBuilder {
            config,
            buckets,
            bucket_ns: span / buckets as f64,
            acc: vec![vec![Acc::default(); buckets]; N],
            whole: [Acc::default(); N],
            prev: None,
            prev_procs: None,
            process_samples: 0,
            samples: 0,
            runs: 0,
            samples_with_rates: 0,
            first_ns: None,
            last_ns: None,
            intervals: Vec::new(),
            points: Vec::new(),
            processes: HashMap::new(),
            groups: None,
            group_samples: 0,
            rollup_rows: 0,
            block_layout: None,
            exited: ExitedAcc::default(),
        }
    }

    /// Rollup rows folded so far.
    pub fn rollup_rows(&self) -> u64 {
        self.rollup_rows
    }

    /// Also folds the process groups stored with each sample ([`proctor_model::SampleGroups`])
    /// into series, for the groups `select` names.
    pub fn with_groups(mut self, select: GroupSelect) -> Self {
        self.groups = Some(GroupAccs::new(select));
        self
    }

    /// The bucket a time falls into (clamped to the last).
    fn bucket_of(&self, unix_ns: u64) -> usize {
        (((unix_ns.saturating_sub(self.config.from_ns)) as f64 / self.bucket_ns) as usize).min(self.buckets - 1)
    }

    /// Adds the next sample. Samples outside the range are ignored; one older than the last
    /// pushed is treated as the start of a new run (no rate against it).
    pub fn push(&mut self, cur: Sample) {
        self.push_inner(cur, true);
    }

    /// Adds the next sample to the host series only (its processes, if any, are not looked at):
    /// for long ranges, where reading every sample's processes costs most of the time, the
    /// caller reads whole samples only every so often ([`RangeSummary::process_samples`] says
    /// how many). Process CPU is then the counters' difference between those samples (the sum
    /// of the per-sample deltas, telescoped), so it stays exact for processes that lived through
    /// them; a process that started and ended between two of them is missed, one that ended
    /// loses its CPU since the last, and RSS peaks and means are over those samples only.
    pub fn push_host(&mut self, cur: Sample) {
        self.push_inner(cur, false);
    }

    /// Adds the rows of a rollup block that start in `[from_s, until_s)`: host series
    /// `host.NAME` and, when groups are asked for, `group.NAME.SERIES`, each as its row's mean,
    /// max and count, so bucket means stay means of samples. Where each of the block's names
    /// goes is worked out once per block, not per row (a block is 60 rows of ~500 names). Rows
    /// carry no processes (the top lists come from raw samples only). Blocks must come in time
    /// order and before any raw sample after them; no rate spans a row and a raw sample.
    pub fn push_rollup_block(&mut self, block: &proctor_model::RollupBlock, from_s: u64, until_s: u64) {
        // A tier's blocks name the same series block after block: where each column goes is
        // worked out once per list of names, not once per block (528 names, each looked up in
        // the series catalog and the group series, for every one of 2,160 blocks of 90 days).
        let layout = match self.block_layout.take() {
            Some(layout) if layout.names == block.names => layout,
            _ => BlockLayout::of(&block.names, self.groups.is_some()),
        };
        self.fold_rollup_rows(block, &layout, from_s, until_s);
        self.block_layout = Some(layout);
    }

    fn fold_rollup_rows(
        &mut self,
        block: &proctor_model::RollupBlock,
        layout: &BlockLayout,
        from_s: u64,
        until_s: u64,
    ) {
        let (targets, groups) = (&layout.targets, &layout.groups);
        let mut values: Vec<GroupValues> = vec![[None; G]; groups.len()];
        for row in block.rows.iter().filter(|r| r.start_unix_s >= from_s && r.start_unix_s < until_s) {
            let start_ns = row.start_unix_s.saturating_mul(1_000_000_000);
            let end_ns = start_ns.saturating_add(u64::from(row.span_s).saturating_mul(1_000_000_000));
            if end_ns <= self.config.from_ns || start_ns > self.config.to_ns {
                continue;
            }
            // The row's samples fell inside it; its midpoint picks the bucket.
            let at = (start_ns + (end_ns - start_ns) / 2).clamp(self.config.from_ns, self.config.to_ns);
            let bucket = self.bucket_of(at);
            self.samples += u64::from(row.samples);
            self.rollup_rows += 1;
            self.first_ns.get_or_insert(start_ns.max(self.config.from_ns));
            self.last_ns = Some(end_ns.min(self.config.to_ns));
            // A raw sample after the rows starts a run of its own.
            self.prev = None;
            self.prev_procs = None;
            for v in values.iter_mut() {
                *v = [None; G];
            }
            for (target, stat) in targets.iter().zip(&row.values) {
                let Some(stat) = stat else { continue };
                match *target {
                    To::Host(i) => {
                        self.acc[i][bucket].add(stat.mean, stat.max, stat.n);
                        self.whole[i].add(stat.mean, stat.max, stat.n);
                    }
                    To::Group(g, i) => values[g][i] = Some((stat.mean, stat.max, stat.n)),
                    To::Skip => {}
                }
            }
            if let Some(accs) = self.groups.as_mut() {
                let mut any = false;
                for (group, v) in groups.iter().zip(&values) {
                    if v.iter().all(Option::is_none) {
                        continue;
                    }
                    any = true;
                    let members = v[0].map_or(0, |(_, _, n)| u64::from(n));
                    accs.add(group, bucket, members, v);
                }
                if any {
                    self.group_samples += u64::from(row.samples);
                }
            }
        }
    }

    fn push_inner(&mut self, cur: Sample, with_processes: bool) {
        if cur.unix_ns < self.config.from_ns || cur.unix_ns > self.config.to_ns {
            return;
        }
        let prev = self.prev.take().filter(|p| proctor_store_same_run(p, &cur));
        if prev.is_none() {
            self.runs += 1;
        }
        self.samples += 1;
        self.first_ns.get_or_insert(cur.unix_ns);
        self.last_ns = Some(cur.unix_ns);
        let values = host_values(&cur, prev.as_ref());
        if let Some(p) = &prev {
            self.samples_with_rates += 1;
            // Bounded: at most one entry per sample, and the median needs them all; at 1 s a
            // day is 86,400 u64s.
            self.intervals.push(cur.unix_ns - p.unix_ns);
        }
        let bucket = self.bucket_of(cur.unix_ns);
        for (series, value) in values.iter().enumerate() {
            let Some(v) = *value else { continue };
            if !v.is_finite() {
                continue;
            }
            self.acc[series][bucket].add(v, v, 1);
            self.whole[series].add(v, v, 1);
        }
        if self.config.keep_points {
            self.points.push(HostPoint {
                unix_ns: cur.unix_ns,
                interval_start_ns: prev.as_ref().map(|p| p.unix_ns),
                values,
            });
        }
        if !with_processes {
            self.prev = Some(cur);
            return;
        }
        self.exited.add(&cur);
        // The last sample whose processes were folded, if it belongs to this run.
        let runs = self.runs;
        let prev_procs =
            self.prev_procs.take().filter(|(run, p)| *run == runs && proctor_store_same_run(p, &cur)).map(|(_, p)| p);
        self.fold_processes(&cur, prev_procs.as_ref(), bucket);
        self.fold_groups(&cur, prev_procs.as_ref(), bucket);
        self.process_samples += 1;
        self.prev = Some(host_only(&cur));
        self.prev_procs = Some((runs, cur));
    }

    fn fold_groups(&mut self, cur: &Sample, prev: Option<&Sample>, bucket: usize) {
        let Some(accs) = self.groups.as_mut() else { return };
        let Some(members) = cur.groups.as_deref() else { return };
        self.group_samples += 1;
        let rows = process_rows(cur, prev, RowContext::default());
        let names = members.names();
        let churn = prev.and_then(|p| {
            let before = p.groups.as_deref()?;
            let procs = |s: &Sample| s.processes.iter().map(|p| (p.pid, p.start_ticks)).collect::<Vec<_>>();
            Some(churn(&procs(p), &before.names(), &procs(cur), &names))
        });
        let boot = cur.host.stat.as_ref().and_then(|s| s.boot_time_secs);
        let mut groups = fold(&rows, &names, cur.clock_ticks_per_sec, boot, churn.as_ref());
        proctor_groups::add_stored_exited(&mut groups, cur, prev);
        for g in groups {
            if !accs.wants(&g.name) {
                accs.add(&g.name, bucket, 1, &[None; G]);
                continue;
            }
            let values = group_values(&g, prev.is_some(), churn.is_some()).map(|v| v.map(|v| (v, v, 1)));
            accs.add(&g.name, bucket, 1, &values);
        }
    }

    fn fold_processes(&mut self, cur: &Sample, prev: Option<&Sample>, bucket: usize) {
        // Uptime of the previous sample, in ticks: a process absent from it whose start time is
        // later started between the two samples, so all of its CPU time was used since.
        let prev_uptime_ticks =
            prev.and_then(|p| p.host.uptime.map(|u| (u.up_secs * p.clock_ticks_per_sec as f64) as u64));
        for p in &cur.processes {
            let ticks = p.utime_ticks.saturating_add(p.stime_ticks);
            let used = match prev {
                None => 0,
                Some(prev) => match prev.process(p.pid).filter(|q| q.start_ticks == p.start_ticks) {
                    // A counter that went backwards adds nothing rather than wrapping.
                    Some(q) => ticks.saturating_sub(q.utime_ticks.saturating_add(q.stime_ticks)),
                    None if prev_uptime_ticks.is_some_and(|up| p.start_ticks >= up) => ticks,
                    None => 0,
                },
            };
            let acc = self.processes.entry((p.pid, p.start_ticks)).or_insert_with(|| ProcAcc {
                comm: p.comm.to_string(),
                cmdline: None,
                cpu_ticks: 0,
                net: None,
                ticks_per_sec: cur.clock_ticks_per_sec,
                rss_peak: None,
                rss_sum: 0.0,
                rss_count: 0,
                rss_buckets: Vec::new(),
                samples: 0,
                first_seen_ns: cur.unix_ns,
                last_seen_ns: cur.unix_ns,
            });
            acc.cpu_ticks = acc.cpu_ticks.saturating_add(used);
            if let Some(n) = &p.net {
                let now = (n.rx_bytes(), n.tx_bytes(), n.retransmits);
                // As CPU above; a process the previous sample had without network had used
                // none, so all it counts now is new.
                let before = match prev {
                    None => Some(now),
                    Some(prev) => match prev.process(p.pid).filter(|q| q.start_ticks == p.start_ticks) {
                        Some(q) => {
                            Some(q.net.as_deref().map_or((0, 0, 0), |b| (b.rx_bytes(), b.tx_bytes(), b.retransmits)))
                        }
                        None if prev_uptime_ticks.is_some_and(|up| p.start_ticks >= up) => Some((0, 0, 0)),
                        None => Some(now),
                    },
                };
                let (r, t, x) = acc.net.get_or_insert((0, 0, 0));
                if let Some((br, bt, bx)) = before {
                    *r = r.saturating_add(now.0.saturating_sub(br));
                    *t = t.saturating_add(now.1.saturating_sub(bt));
                    *x = x.saturating_add(now.2.saturating_sub(bx));
                }
            }
            acc.samples += 1;
            acc.last_seen_ns = cur.unix_ns;
            if acc.comm.as_str() != &*p.comm {
                acc.comm = p.comm.to_string();
            }
            if let Some(cmdline) = &p.cmdline {
                if !cmdline.is_empty() && acc.cmdline.as_deref() != Some(&**cmdline) {
                    acc.cmdline = Some(Arc::clone(cmdline));
                }
            }
            if let Some(rss) = p.resident_bytes {
                acc.rss_peak = Some(acc.rss_peak.map_or(rss, |peak| peak.max(rss)));
                acc.rss_sum += rss as f64;
                acc.rss_count += 1;
                let bucket = bucket as u32;
                match acc.rss_buckets.last_mut() {
                    Some((last, values)) if *last == bucket => values.add(rss as f64, rss as f64, 1),
                    _ => {
                        let mut values = Acc::default();
                        values.add(rss as f64, rss as f64, 1);
                        acc.rss_buckets.push((bucket, values));
                    }
                }
            }
        }
    }

    pub fn finish(mut self) -> RangeSummary {
        let (groups, groups_left_out, groups_not_asked) = match self.groups.take() {
            Some(accs) => accs.finish(self.config.from_ns, self.bucket_ns),
            None => (Vec::new(), 0, Vec::new()),
        };
        let series = SERIES
            .iter()
            .enumerate()
            .map(|(i, (name, unit, description))| Series {
                name,
                unit: *unit,
                description,
                points: self.acc[i]
                    .iter()
                    .enumerate()
                    .filter(|(_, acc)| acc.count > 0)
                    .map(|(bucket, acc)| SeriesPoint {
                        bucket: bucket as u32,
                        start_ns: self.config.from_ns + (bucket as f64 * self.bucket_ns) as u64,
                        end_ns: self.config.from_ns + ((bucket + 1) as f64 * self.bucket_ns) as u64,
                        mean: acc.sum / f64::from(acc.count),
                        max: acc.max,
                        count: acc.count,
                    })
                    .collect(),
            })
            .collect();
        let headline = SERIES
            .iter()
            .zip(&self.whole)
            .filter(|(_, acc)| acc.count > 0)
            .map(|((name, unit, description), acc)| Headline {
                name,
                unit: *unit,
                description,
                mean: acc.sum / f64::from(acc.count),
                max: acc.max,
                count: acc.count,
            })
            .collect();
        self.intervals.sort_unstable();
        let median_interval_ns = self.intervals.get(self.intervals.len() / 2).copied();
        let (from_ns, bucket_ns) = (self.config.from_ns, self.bucket_ns);
        let bucket_point = |bucket: u32, acc: &Acc| SeriesPoint {
            bucket,
            start_ns: from_ns + (f64::from(bucket) * bucket_ns) as u64,
            end_ns: from_ns + (f64::from(bucket + 1) * bucket_ns) as u64,
            mean: acc.sum / f64::from(acc.count),
            max: acc.max,
            count: acc.count,
        };
        let mut rss_buckets: HashMap<(u32, u64), Vec<(u32, Acc)>> = HashMap::new();
        let usages: Vec<ProcessUsage> = self
            .processes
            .into_iter()
            .map(|((pid, start_ticks), acc)| {
                // Kept aside until the top list is known: only its first few are drawn.
                rss_buckets.insert((pid, start_ticks), acc.rss_buckets);
                ProcessUsage {
                    pid,
                    start_ticks,
                    comm: acc.comm,
                    cmdline: acc.cmdline.map(|c| c.to_vec()),
                    cpu_seconds: acc.cpu_ticks as f64 / acc.ticks_per_sec.max(1) as f64,
                    rss_peak_bytes: acc.rss_peak,
                    rss_mean_bytes: (acc.rss_count > 0).then(|| acc.rss_sum / acc.rss_count as f64),
                    net_rx_bytes: acc.net.map(|n| n.0),
                    net_tx_bytes: acc.net.map(|n| n.1),
                    net_retransmits: acc.net.map(|n| n.2),
                    samples: acc.samples,
                    first_seen_ns: acc.first_seen_ns,
                    last_seen_ns: acc.last_seen_ns,
                }
            })
            .collect();
        let processes_seen = usages.len() as u64;
        // Ties broken by pid and start time, so the lists do not depend on hash order.
        let mut top_cpu: Vec<&ProcessUsage> = usages.iter().filter(|u| u.cpu_seconds > 0.0).collect();
        top_cpu.sort_by(|a, b| {
            b.cpu_seconds.total_cmp(&a.cpu_seconds).then((a.pid, a.start_ticks).cmp(&(b.pid, b.start_ticks)))
        });
        let mut top_memory: Vec<&ProcessUsage> = usages.iter().filter(|u| u.rss_peak_bytes.is_some()).collect();
        top_memory.sort_by(|a, b| {
            b.rss_peak_bytes.cmp(&a.rss_peak_bytes).then((a.pid, a.start_ticks).cmp(&(b.pid, b.start_ticks)))
        });
        let net_bytes = |u: &ProcessUsage| u.net_rx_bytes.unwrap_or(0).saturating_add(u.net_tx_bytes.unwrap_or(0));
        let mut top_network: Vec<&ProcessUsage> = usages.iter().filter(|u| net_bytes(u) > 0).collect();
        top_network
            .sort_by(|a, b| net_bytes(b).cmp(&net_bytes(a)).then((a.pid, a.start_ticks).cmp(&(b.pid, b.start_ticks))));
        let top = self.config.top;
        let top_memory_rss = top_memory
            .iter()
            .take(top.min(self.config.rss_series))
            .map(|u| {
                let buckets = rss_buckets.remove(&(u.pid, u.start_ticks)).unwrap_or_default();
                buckets.iter().map(|(bucket, acc)| bucket_point(*bucket, acc)).collect()
            })
            .collect();
        let exited = self.exited.finish(self.config.top);
        RangeSummary {
            exited,
            from_ns: self.config.from_ns,
            to_ns: self.config.to_ns,
            samples: self.samples,
            process_samples: self.process_samples,
            runs: self.runs,
            samples_with_rates: self.samples_with_rates,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            median_interval_ns,
            series,
            headline,
            points: self.points,
            top_cpu: top_cpu.into_iter().take(top).cloned().collect(),
            top_memory: top_memory.into_iter().take(top).cloned().collect(),
            top_network: top_network.into_iter().take(top).cloned().collect(),
            top_memory_rss,
            processes_seen,
            groups,
            groups_left_out,
            groups_not_asked,
            group_samples: self.group_samples,
            rollup_rows: self.rollup_rows,
        }
    }
}

/// Names the ended-process fold keeps apart at most; the rest are summed as `(other)`.
const EXITED_NAMES: usize = 4096;

/// Processes that ended over a range, by name (a build's 10,000 `cc1` runs are one row).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ExitedSummary {
    /// Samples whose ended processes were folded (those read whole), and of them the ones that
    /// listed any (0: the recording agent had no BPF process events, or none ended).
    pub samples: u64,
    pub samples_listing: u64,
    pub count: u64,
    /// Of them, those no sample listed alive (they lived between two samples).
    pub unseen: u64,
    /// Counted by the agent but not listed (past a sample's cap).
    pub untold: u64,
    pub cpu_seconds: f64,
    /// The names with the most CPU first, at most `top`.
    pub by_name: Vec<ExitedByName>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ExitedByName {
    pub name: String,
    pub count: u64,
    pub unseen: u64,
    /// Those that exited with a code other than 0 or were killed by a signal.
    pub failed: u64,
    pub cpu_seconds: f64,
    pub peak_rss_max_bytes: u64,
    pub lifetime_mean_seconds: f64,
}

#[derive(Debug, Default)]
struct ExitedAcc {
    samples: u64,
    samples_listing: u64,
    untold: u64,
    names: HashMap<Arc<str>, ExitedByName>,
}

impl ExitedAcc {
    fn add(&mut self, s: &Sample) {
        self.samples += 1;
        self.samples_listing += u64::from(!s.exited.is_empty());
        self.untold += s.cost.starts.and_then(|st| st.events).map_or(0, |e| e.untold);
        for x in &s.exited {
            let key = if self.names.len() < EXITED_NAMES || self.names.contains_key(&x.comm) {
                Arc::clone(&x.comm)
            } else {
                Arc::from("(other)")
            };
            let row = self.names.entry(key).or_default();
            row.count += 1;
            row.unseen += u64::from(!x.seen);
            row.failed += u64::from(x.wait_status != 0);
            row.cpu_seconds += (x.user_ns + x.system_ns) as f64 / 1e9;
            row.peak_rss_max_bytes = row.peak_rss_max_bytes.max(x.peak_rss_bytes);
            // A sum until `finish` divides it.
            row.lifetime_mean_seconds += x.lifetime_ns as f64 / 1e9;
        }
    }

    fn finish(self, top: usize) -> ExitedSummary {
        let mut rows: Vec<ExitedByName> = self
            .names
            .into_iter()
            .map(|(name, mut row)| {
                row.name = name.to_string();
                row.lifetime_mean_seconds /= row.count.max(1) as f64;
                row
            })
            .collect();
        let count = rows.iter().map(|r| r.count).sum();
        let unseen = rows.iter().map(|r| r.unseen).sum();
        let cpu_seconds = rows.iter().map(|r| r.cpu_seconds).sum();
        rows.sort_by(|a, b| {
            b.cpu_seconds.total_cmp(&a.cpu_seconds).then(b.count.cmp(&a.count)).then(a.name.cmp(&b.name))
        });
        rows.truncate(top);
        ExitedSummary {
            samples: self.samples,
            samples_listing: self.samples_listing,
            count,
            unseen,
            untold: self.untold,
            cpu_seconds,
            by_name: rows,
        }
    }
}

/// `sample` without its processes: what the next sample's rates need of it.
fn host_only(sample: &Sample) -> Sample {
    Sample {
        seq: sample.seq,
        unix_ns: sample.unix_ns,
        mono_ns: sample.mono_ns,
        clock_ticks_per_sec: sample.clock_ticks_per_sec,
        page_size: sample.page_size,
        host: sample.host.clone(),
        container: None,
        processes: Vec::new(),
        cost: Default::default(),
        groups: None,
        gpu: None,
        exited: Vec::new(),
    }
}

/// The same rule as `proctor_store::same_run` (this crate sits beside the store, not above
/// it): one sampler's `seq`, monotonic and wall clocks only count up.
fn proctor_store_same_run(prev: &Sample, cur: &Sample) -> bool {
    prev.seq < cur.seq && prev.mono_ns < cur.mono_ns && prev.unix_ns < cur.unix_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_series_are_the_catalogs_stored_host_series_with_their_units() {
        use proctor_units::series::CATALOG;
        use proctor_units::units::Unit as U;
        let mut catalog: Vec<(&str, U)> =
            CATALOG.iter().filter(|s| s.stored && s.name.starts_with("host.")).map(|s| (s.name, s.unit)).collect();
        let mut ours: Vec<(&str, U)> = SERIES
            .iter()
            .map(|(n, u, _)| {
                let u = match u {
                    Unit::Percent => U::Percent,
                    Unit::Bytes => U::Bytes,
                    Unit::BytesPerSecond => U::BytesPerSec,
                    Unit::Count => U::Count,
                    Unit::Number => U::Number,
                    Unit::PerSecond => U::PerSec,
                };
                (*n, u)
            })
            .collect();
        catalog.sort_by_key(|c| c.0);
        ours.sort_by_key(|c| c.0);
        assert_eq!(ours, catalog);
        // The fold sets series by index: the report's list is the model's, in its order.
        assert_eq!(SERIES.map(|(n, _, _)| n), proctor_model::series::HOST_SERIES);
        assert_eq!(SERIES[0].2, "User time, % of all CPUs (niced time is apart).", "the catalog's meaning");
        // The names reports and rollups used before the catalog still find their series.
        assert_eq!(series_index("psi.cpu.some"), series_index("host.pressure_cpu.some.avg10"));
        assert_eq!(series_index("host.cpu.user"), Some(0));
        assert_eq!(series_index("cpu.user"), Some(0));
    }
    use crate::groups::GroupSelect;
    use proctor_model::{HostSample, ProcessSample, SampleCost};
    use proctor_procfs::host::{CpuTicks, DiskStat, MemInfo, Stat, Uptime};
    use std::sync::Arc;

    const S: u64 = 1_000_000_000;
    const T0: u64 = 1_700_000_000 * S;

    /// A sample of run `run` at second `t` of the range: `user` and `idle` cumulative ticks
    /// (100 per second), processes as (pid, start_ticks, cumulative ticks, rss).
    fn sample(seq: u64, t: u64, mono_s: u64, user: u64, idle: u64, procs: &[(u32, u64, u64, u64)]) -> Sample {
        Sample {
            seq,
            unix_ns: T0 + t * S,
            mono_ns: mono_s * S,
            clock_ticks_per_sec: 100,
            page_size: 4096,
            host: HostSample {
                stat: Some(Stat { total: CpuTicks { user, idle, ..CpuTicks::default() }, ..Stat::default() }),
                meminfo: Some(MemInfo {
                    total_bytes: Some(1000),
                    available_bytes: Some(1000 - 10 * t),
                    ..MemInfo::default()
                }),
                disks: vec![disk("sda", t * 2, t * 100), disk("sda1", t * 2, t * 100), disk("loop0", t * 1000, 0)],
                uptime: Some(Uptime { up_secs: 1000.0 + t as f64, idle_secs: 0.0 }),
                ..HostSample::default()
            },
            container: None,
            processes: procs
                .iter()
                .map(|&(pid, start_ticks, ticks, rss)| ProcessSample {
                    pid,
                    ppid: 1,
                    start_ticks,
                    comm: Arc::from(format!("p{pid}")),
                    state: 'R',
                    utime_ticks: ticks,
                    num_threads: 1,
                    resident_bytes: Some(rss),
                    cmdline: Some(Arc::from(vec![format!("/bin/p{pid}"), "-x".to_string()])),
                    ..ProcessSample::default()
                })
                .collect(),
            cost: SampleCost::default(),
            groups: None,
            gpu: None,
            exited: Vec::new(),
        }
    }

    /// Network inside the range as CPU: a process that had network before the range counts
    /// only what it moved inside it; one that first used the network between two samples,
    /// or started between them, all of it; the top list is by bytes, those with none left out.
    #[test]
    fn network_inside_the_range_goes_by_deltas_and_ranks_the_top() {
        let net = |rx: u64, tx: u64, retrans: u64| proctor_model::ProcessNet {
            tcp: proctor_model::NetCounters { rx_bytes: rx, tx_bytes: tx, ..Default::default() },
            retransmits: retrans,
            ..Default::default()
        };
        let at = |t: u64| {
            let mut procs = vec![(7, 500, 0, 4096), (8, 600, 0, 4096), (9, 700, 0, 4096)];
            if t >= 2 {
                procs.push((10, 100_150, 0, 4096)); // started between seconds 1 and 2
            }
            let mut s = sample(t, t, 10 + t, 100 * t, 100 * t, &procs);
            for p in &mut s.processes {
                p.net = match p.pid {
                    7 => Some(Box::new(net(1_000_000 + 100 * t, 50 * t, t))), // a million before the range
                    8 if t >= 2 => Some(Box::new(net(300, 200, 0))),          // first used it after second 1
                    10 => Some(Box::new(net(5_000, 0, 0))),
                    _ => None,
                };
            }
            s
        };
        let config = RangeConfig { from_ns: T0, to_ns: T0 + 3 * S, max_points: 4, ..RangeConfig::default() };
        let mut b = RangeBuilder::new(config);
        for t in 0..=3 {
            b.push(at(t));
        }
        let summary = b.finish();
        let got: Vec<_> =
            summary.top_network.iter().map(|u| (u.pid, u.net_rx_bytes, u.net_tx_bytes, u.net_retransmits)).collect();
        assert_eq!(
            got,
            [
                (10, Some(5_000), Some(0), Some(0)),
                (8, Some(300), Some(200), Some(0)),
                (7, Some(300), Some(150), Some(3))
            ]
        );
        let quiet = summary.top_cpu.iter().chain(&summary.top_memory).find(|u| u.pid == 9).expect("pid 9");
        assert_eq!(quiet.net_rx_bytes, None);
    }

    /// Groups come from the assignment stored with each sample: levels from every sample,
    /// rates and churn only against the previous one of the same run; a sample recorded
    /// without groups adds nothing, and an unknown name is named among the others.
    #[test]
    fn stored_groups_fold_into_series_by_name() {
        let with_groups = |mut s: Sample, web: &[u32], db: &[u32]| {
            let mut g = proctor_model::SampleGroups { by: "rules".into(), ..Default::default() };
            g.members.insert("web".into(), web.to_vec());
            g.members.insert("db".into(), db.to_vec());
            s.groups = Some(Arc::new(g));
            s
        };
        // pid 7 (web) uses 10 ticks a second, 8 (db) none; pid 9 joins web at second 2.
        let at = |t: u64| {
            let mut procs = vec![(7, 500, 10 * t, 4096), (8, 600, 0, 8192)];
            if t >= 2 {
                procs.push((9, 100_100, 0, 4096));
            }
            sample(t, t, 10 + t, 100 * t, 100 * t, &procs)
        };
        let config = RangeConfig { from_ns: T0, to_ns: T0 + 3 * S, max_points: 4, ..RangeConfig::default() };
        let mut b = RangeBuilder::new(config).with_groups(GroupSelect::Named(vec!["web".into()]));
        b.push(at(0)); // no groups stored
        b.push(with_groups(at(1), &[7], &[8]));
        b.push(with_groups(at(2), &[7, 9], &[8]));
        b.push(with_groups(at(3), &[7, 9], &[8]));
        let summary = b.finish();
        assert_eq!(summary.group_samples, 3);
        assert_eq!(summary.groups.len(), 1);
        assert_eq!(summary.groups_not_asked, ["db"]);
        let web = &summary.groups[0];
        assert_eq!(web.samples, 3);
        let head = |name: &str| web.headline.iter().find(|h| h.name == name).map(|h| (h.mean, h.max, h.count));
        assert_eq!(head("processes"), Some((5.0 / 3.0, 2.0, 3)));
        assert_eq!(head("rss"), Some((4096.0 * 5.0 / 3.0, 8192.0, 3)));
        // 10 % of one CPU at each of the three samples with a previous one (the first against
        // the sample stored without groups, whose processes are there all the same).
        assert_eq!(head("cpu"), Some((10.0, 10.0, 3)));
        // pid 9 started between seconds 1 and 2 (churn needs the previous sample's groups).
        assert_eq!(head("started"), Some((0.5, 1.0, 2)));
        let series = |name: &str| web.series.iter().find(|s| s.name == name).expect("series");
        assert_eq!(series("processes").points.iter().map(|p| p.bucket).collect::<Vec<_>>(), [1, 2, 3]);
    }

    /// Host series from every sample, processes from some: process CPU telescopes to the
    /// counters' difference between the folded samples (equal to folding all of them), a
    /// process that lived only between two of them is missed, and the count says so.
    #[test]
    fn host_only_samples_keep_every_host_point_and_telescope_process_cpu() {
        // pid 7 runs throughout (10 ticks a second); pid 9 lives only at seconds 2 and 3.
        let at = |t: u64| {
            let mut procs = vec![(7, 500, 10 * t, 4096 * (t + 1))];
            if (2..=3).contains(&t) {
                procs.push((9, 100_100 + t, 50, 8192));
            }
            sample(t, t, 10 + t, 100 * t, 100 * t, &procs)
        };
        let config =
            RangeConfig { from_ns: T0, to_ns: T0 + 9 * S, max_points: 10, top: 5, keep_points: true, rss_series: 4 };
        let mut all = RangeBuilder::new(config);
        let mut sparse = RangeBuilder::new(config);
        for t in 0..6 {
            all.push(at(t));
            if t % 5 == 0 {
                sparse.push(at(t))
            } else {
                sparse.push_host(at(t))
            }
        }
        let (all, sparse) = (all.finish(), sparse.finish());
        assert_eq!(sparse.series, all.series);
        assert_eq!(sparse.points, all.points);
        assert_eq!((sparse.samples, sparse.process_samples, all.process_samples), (6, 2, 6));
        let cpu = |s: &RangeSummary, pid: u32| s.top_cpu.iter().find(|p| p.pid == pid).map(|p| p.cpu_seconds);
        assert_eq!(cpu(&sparse, 7), Some(0.5));
        assert_eq!(cpu(&all, 7), Some(0.5));
        assert_eq!(cpu(&sparse, 9), None, "lived between the folded samples");
        assert!(cpu(&all, 9).is_some_and(|c| c > 0.0));
        // A restart between folded samples: no process delta spans it.
        let mut restarted = RangeBuilder::new(config);
        restarted.push(at(0));
        restarted.push_host(sample(1, 1, 1, 0, 0, &[]));
        restarted.push(sample(2, 2, 2, 0, 0, &[(7, 500, 40, 4096)]));
        assert_eq!(cpu(&restarted.finish(), 7), None);
    }

    fn disk(name: &str, read_sectors: u64, io_ms: u64) -> DiskStat {
        DiskStat { name: Arc::from(name), read_sectors, io_ms, ..DiskStat::default() }
    }

    #[test]
    fn each_rollup_block_is_read_by_its_own_names() {
        use proctor_model::{RollupBlock, RollupRow, Stat};
        // Two blocks of one name each: the older under a report's name from before the catalog,
        // the newer another series. The second must not be read with the first's columns.
        let block = |start_s: u64, name: &str, v: f64| RollupBlock {
            span_s: 60,
            names: vec![name.to_string()],
            rows: vec![RollupRow { start_unix_s: start_s, span_s: 60, samples: 60, values: vec![Some(Stat::one(v))] }],
        };
        let t0 = T0 / S;
        let config = RangeConfig { from_ns: T0, to_ns: T0 + 600 * S, max_points: 2, ..RangeConfig::default() };
        let mut b = RangeBuilder::new(config);
        b.push_rollup_block(&block(t0, "cpu.user", 10.0), t0, t0 + 600);
        b.push_rollup_block(&block(t0 + 60, "host.cpu.system_percent", 30.0), t0, t0 + 600);
        b.push_rollup_block(&block(t0 + 120, "cpu.user", 20.0), t0, t0 + 600);
        let summary = b.finish();
        let mean = |name: &str| summary.headline.iter().find(|h| h.name == name).map(|h| (h.mean, h.count));
        assert_eq!(mean("host.cpu.user_percent"), Some((15.0, 2)));
        assert_eq!(mean("host.cpu.system_percent"), Some((30.0, 1)));
    }

    fn config(points: usize) -> RangeConfig {
        RangeConfig { from_ns: T0, to_ns: T0 + 9 * S, max_points: points, top: 5, keep_points: true, rss_series: 4 }
    }

    #[test]
    fn ended_processes_fold_by_name_with_their_cpu_failures_and_peaks() {
        let x = |comm: &str, cpu_ms: u64, wait_status: u32, peak: u64, seen: bool| proctor_model::ExitedProcess {
            comm: Arc::from(comm),
            user_ns: cpu_ms * 1_000_000,
            wait_status,
            peak_rss_bytes: peak,
            lifetime_ns: 2_000_000,
            seen,
            ..proctor_model::ExitedProcess::default()
        };
        let mut a = sample(0, 1, 1, 100, 0, &[]);
        a.exited = vec![x("cc1", 300, 0, 50 << 20, false), x("cc1", 200, 1 << 8, 80 << 20, false)];
        let mut b = sample(1, 2, 2, 200, 0, &[]);
        b.exited = vec![x("cc1", 100, 0, 60 << 20, false), x("ld", 50, 9, 10 << 20, true)];
        let c = sample(2, 3, 3, 300, 0, &[]);
        let summary = summarize([a, b, c], config(10));
        let e = &summary.exited;
        assert_eq!((e.samples, e.samples_listing, e.count, e.unseen), (3, 2, 4, 3));
        assert!((e.cpu_seconds - 0.65).abs() < 1e-9);
        let cc1 = &e.by_name[0];
        assert_eq!((cc1.name.as_str(), cc1.count, cc1.unseen, cc1.failed), ("cc1", 3, 3, 1));
        assert!((cc1.cpu_seconds - 0.6).abs() < 1e-9 && (cc1.lifetime_mean_seconds - 0.002).abs() < 1e-12);
        assert_eq!(cc1.peak_rss_max_bytes, 80 << 20);
        assert_eq!((e.by_name[1].name.as_str(), e.by_name[1].failed), ("ld", 1), "a signal is a failure");
    }

    fn series<'a>(summary: &'a RangeSummary, name: &str) -> &'a Series {
        summary.series.iter().find(|s| s.name == name).expect("series")
    }

    #[test]
    fn rates_come_from_consecutive_samples_of_one_run_only() {
        // Run 1 at t = 0..=3 (mono 0..=3), run 2 restarts at t = 5 with seq and mono from 0.
        // Run 1's user share is 25 %, run 2's 75 %; across the restart the counters differ by
        // anything, and no rate may be taken.
        let samples = vec![
            sample(0, 0, 0, 0, 0, &[]),
            sample(1, 1, 1, 25, 75, &[]),
            sample(2, 2, 2, 50, 150, &[]),
            sample(3, 3, 3, 75, 225, &[]),
            sample(0, 5, 0, 10_000, 0, &[]),
            sample(1, 6, 1, 10_075, 25, &[]),
        ];
        let summary = summarize(samples, config(10));
        assert_eq!(summary.samples, 6);
        assert_eq!(summary.runs, 2);
        assert_eq!(summary.samples_with_rates, 4);
        assert_eq!(summary.median_interval_ns, Some(S));
        let user: Vec<(u32, f64)> =
            series(&summary, "host.cpu.user_percent").points.iter().map(|p| (p.bucket, p.mean)).collect();
        assert_eq!(user, vec![(1, 25.0), (2, 25.0), (3, 25.0), (6, 75.0)]);
        // Levels are there for every sample, the restart's first included.
        let used: Vec<u32> = series(&summary, "host.memory.used_bytes").points.iter().map(|p| p.bucket).collect();
        assert_eq!(used, vec![0, 1, 2, 3, 5, 6]);
        assert_eq!(summary.points[4].interval_start_ns, None);
        assert_eq!(summary.points[4].values[0], None);
        // Disk: sda only (sda1 is its partition, loop0 a pseudo-device): 2 sectors/s, 10 % busy.
        let read = series(&summary, "host.disk.read_bytes_per_sec");
        assert!(read.points.iter().all(|p| p.mean == 1024.0), "{:?}", read.points);
        assert!(series(&summary, "host.disk.busy_percent").points.iter().all(|p| p.mean == 10.0));
    }

    #[test]
    fn buckets_keep_the_max_so_a_spike_survives() {
        // Ten samples into two buckets; one second at 90 % user among 10 % ones.
        let mut user = 0;
        let samples: Vec<Sample> = (0..10u64)
            .map(|t| {
                user += if t == 7 { 90 } else { 10 };
                sample(t, t, t, user, 100 * t + 100 - user, &[])
            })
            .collect();
        let summary = summarize(samples, config(2));
        let points = &series(&summary, "host.cpu.user_percent").points;
        assert_eq!(points.len(), 2);
        assert_eq!(points[1].max, 90.0);
        assert!((points[1].mean - 26.0).abs() < 1e-9, "{}", points[1].mean);
        assert_eq!(points[0].max, 10.0);
        assert_eq!(points[0].count, 4, "t=1..4 (t=0 has no rate)");
    }

    #[test]
    fn process_cpu_is_counted_per_pid_and_start_time() {
        // pid 7 runs from t=0 to t=2 (start 50) using 30 ticks/s; then pid 7 is reused by a new
        // process (start 100250, after the previous sample's uptime of 100200 ticks) that had used
        // 40 ticks at first sight and 10/s after. pid 9 only uses memory.
        let samples = vec![
            sample(0, 0, 0, 0, 0, &[(7, 50, 1000, 100), (9, 60, 5, 900)]),
            sample(1, 1, 1, 0, 100, &[(7, 50, 1030, 300), (9, 60, 5, 900)]),
            sample(2, 2, 2, 0, 200, &[(7, 50, 1060, 200), (9, 60, 5, 900)]),
            sample(3, 3, 3, 0, 300, &[(7, 100_250, 40, 50), (9, 60, 5, 900)]),
            sample(4, 4, 4, 0, 400, &[(7, 100_250, 50, 50), (9, 60, 5, 900)]),
        ];
        let summary = summarize(samples, config(10));
        assert_eq!(summary.processes_seen, 3);
        let cpu: Vec<(u32, u64, f64)> = summary.top_cpu.iter().map(|u| (u.pid, u.start_ticks, u.cpu_seconds)).collect();
        assert_eq!(cpu, vec![(7, 50, 0.6), (7, 100_250, 0.5)], "pid 9 used nothing inside the range");
        let old = &summary.top_cpu[0];
        assert_eq!(old.rss_peak_bytes, Some(300));
        assert_eq!(old.rss_mean_bytes, Some(200.0));
        assert_eq!(old.cmdline.as_deref(), Some(&["/bin/p7".to_string(), "-x".to_string()][..]));
        assert_eq!((old.first_seen_ns, old.last_seen_ns), (T0, T0 + 2 * S));
        let memory: Vec<(u32, Option<u64>)> = summary.top_memory.iter().map(|u| (u.pid, u.rss_peak_bytes)).collect();
        assert_eq!(memory, vec![(9, Some(900)), (7, Some(300)), (7, Some(50))]);
        // Each one's RSS over time, in the top list's order, only in the buckets it was seen
        // in (10 buckets of 0.9 s: samples at 0, 1, 2, 3, 4 s fall in buckets 0, 1, 2, 3, 4).
        let rss: Vec<Vec<(u32, f64, f64)>> = summary
            .top_memory_rss
            .iter()
            .map(|points| points.iter().map(|p| (p.bucket, p.mean, p.max)).collect())
            .collect();
        assert_eq!(
            rss,
            vec![
                (0..5).map(|b| (b, 900.0, 900.0)).collect(),
                vec![(0, 100.0, 100.0), (1, 300.0, 300.0), (2, 200.0, 200.0)],
                vec![(3, 50.0, 50.0), (4, 50.0, 50.0)],
            ]
        );
    }

    #[test]
    fn no_process_cpu_across_a_recorder_restart() {
        // The same process (pid 7, start 50) before and after a restart: the 500 ticks it used
        // while nothing recorded are not counted, nor is its counter at the restart's first
        // sample (no earlier sample of that run to say it started since).
        let samples = vec![
            sample(0, 0, 0, 0, 0, &[(7, 50, 100, 1)]),
            sample(1, 1, 1, 0, 100, &[(7, 50, 110, 1)]),
            sample(0, 5, 0, 0, 500, &[(7, 50, 610, 1)]),
            sample(1, 6, 1, 0, 600, &[(7, 50, 620, 1)]),
        ];
        let summary = summarize(samples, config(10));
        assert_eq!(summary.top_cpu.len(), 1);
        assert!((summary.top_cpu[0].cpu_seconds - 0.2).abs() < 1e-12, "{}", summary.top_cpu[0].cpu_seconds);
    }

    #[test]
    fn samples_outside_the_range_are_ignored() {
        let summary = summarize(vec![sample(0, 20, 0, 0, 0, &[])], config(10));
        assert_eq!(summary.samples, 0);
        assert!(summary.series.iter().all(|s| s.points.is_empty()));
    }
}
