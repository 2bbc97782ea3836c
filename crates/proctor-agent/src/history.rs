//! The in-memory history ring: named series, one point per sample, bounded by count.
//!
//! The set of series is fixed when the ring is made (from the first snapshot): host-wide
//! figures, one series per CPU, disk and network device present then, the watched container
//! and the agent itself. Each point also remembers the top processes by CPU, which answer the
//! `process.PID.*` series. Points live in three flat arrays (times, values, top entries) that
//! grow to the capacity and are then overwritten in place: no allocation per point, and the
//! memory bound is exact, known up front and reported. It does no I/O and knows nothing of HTTP.

use crate::snapshot::{HistorySize, Snapshot};

/// How to read one series' value out of a snapshot.
#[derive(Debug, Clone, PartialEq)]
enum Column {
    /// A host total of the catalog, computed once per sample by the model
    /// (`proctor_model::series`): the index into `HostView::series`.
    Host(usize),
    PerCpuBusy(u32),
    DeviceDiskRead(String),
    DeviceDiskWrite(String),
    DeviceNetRx(String),
    DeviceNetTx(String),
    ContainerMemoryCurrent,
    ContainerMemoryLimit,
    ContainerCpuCores,
    ContainerEffectiveCpus,
    Processes,
    AgentCpuSeconds,
    AgentSampleCpu,
    AgentResident,
}

impl Column {
    /// The column of a catalog series the ring keeps (`live`), by its name.
    fn of_catalog(name: &str) -> Option<Column> {
        if let Some(i) = proctor_model::series::index(name) {
            return Some(Column::Host(i));
        }
        Some(match name {
            "container.memory_current_bytes" => Column::ContainerMemoryCurrent,
            "container.memory_limit_bytes" => Column::ContainerMemoryLimit,
            "container.cpu_used_cpus" => Column::ContainerCpuCores,
            "container.effective_cpus" => Column::ContainerEffectiveCpus,
            "host.processes" => Column::Processes,
            "agent.cpu_seconds_total" => Column::AgentCpuSeconds,
            "agent.last_sample.cpu_seconds" => Column::AgentSampleCpu,
            "agent.resident_bytes" => Column::AgentResident,
            _ => return None,
        })
    }

    /// The series' name: the catalog's ([`proctor_units::series`]) for a total, the device
    /// put after the total's first part for a per-device series.
    fn name(&self) -> String {
        let fixed = match self {
            Column::Host(i) => proctor_model::series::HOST_SERIES[*i],
            Column::PerCpuBusy(id) => return format!("host.cpu{id}.busy_percent"),
            Column::DeviceDiskRead(d) => return format!("host.disk.{d}.read_bytes_per_sec"),
            Column::DeviceDiskWrite(d) => return format!("host.disk.{d}.write_bytes_per_sec"),
            Column::DeviceNetRx(d) => return format!("host.net.{d}.rx_bytes_per_sec"),
            Column::DeviceNetTx(d) => return format!("host.net.{d}.tx_bytes_per_sec"),
            Column::ContainerMemoryCurrent => "container.memory_current_bytes",
            Column::ContainerMemoryLimit => "container.memory_limit_bytes",
            Column::ContainerCpuCores => "container.cpu_used_cpus",
            Column::ContainerEffectiveCpus => "container.effective_cpus",
            Column::Processes => "host.processes",
            Column::AgentCpuSeconds => "agent.cpu_seconds_total",
            Column::AgentSampleCpu => "agent.last_sample.cpu_seconds",
            Column::AgentResident => "agent.resident_bytes",
        };
        fixed.to_string()
    }

    fn value(&self, s: &Snapshot) -> Option<f64> {
        let h = &s.host;
        let n = |v: Option<u64>| v.map(|v| v as f64);
        match self {
            Column::Host(i) => h.series.get(*i).copied().flatten(),
            Column::PerCpuBusy(id) => h.per_cpu.iter().find(|(c, _)| c == id).map(|(_, p)| p.busy),
            Column::DeviceDiskRead(name) => h.disks.iter().find(|d| &d.name == name).map(|d| d.read_bytes_per_sec),
            Column::DeviceDiskWrite(name) => h.disks.iter().find(|d| &d.name == name).map(|d| d.write_bytes_per_sec),
            Column::DeviceNetRx(name) => h.nets.iter().find(|d| &d.name == name).map(|d| d.rx_bytes_per_sec),
            Column::DeviceNetTx(name) => h.nets.iter().find(|d| &d.name == name).map(|d| d.tx_bytes_per_sec),
            Column::ContainerMemoryCurrent => n(s.truth.memory_current_bytes),
            Column::ContainerMemoryLimit => n(s.truth.memory_limit_bytes),
            Column::ContainerCpuCores => s.container_cpu_cores,
            Column::ContainerEffectiveCpus => s.truth.effective_cpus,
            Column::Processes => Some(s.rows.len() as f64),
            // A snapshot rebuilt from a stored sample carries no agent figures (pid 0): the
            // process's own CPU and RSS of that time were not stored; the cycle's cost was.
            Column::AgentCpuSeconds => (s.agent.pid != 0).then_some(s.agent.process_cpu_seconds),
            Column::AgentSampleCpu => Some(s.sample.cost.cpu_ns as f64 / 1e9),
            Column::AgentResident => (s.agent.pid != 0).then_some(s.agent.resident_bytes as f64),
        }
    }
}

/// At most this many devices of each kind get their own series; the totals cover the rest.
const MAX_DEVICES: usize = 16;

/// One process among a point's top by CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopEntry {
    pub pid: u32,
    pub cpu_percent: f32,
    pub rss_bytes: u64,
}

/// An unused top slot (fewer processes had a CPU rate than `top_n`).
const NO_ENTRY: TopEntry = TopEntry { pid: 0, cpu_percent: 0.0, rss_bytes: 0 };

/// One series over a time range: parallel arrays, `None` where the value was unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesData {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    pub times_ms: Vec<u64>,
    pub series: Vec<SeriesData>,
}

/// What one point holds and how it is read out of a snapshot: the ring's fixed series and its
/// top-N rule. The ring and store-backed history (`proctor_stored::store_history`) derive their points
/// with the same maker, so a point means the same whichever answers it.
#[derive(Debug, Clone)]
pub struct PointMaker {
    columns: Vec<Column>,
    names: Vec<String>,
    top_n: usize,
}

/// One point: a time, a value per series (NaN where unknown) and the top processes by CPU
/// (`top_n` entries, unused ones with pid 0).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub time_ms: u64,
    pub values: Box<[f64]>,
    pub top: Box<[TopEntry]>,
}

impl Point {
    /// Heap this point holds.
    pub fn bytes(&self) -> usize {
        self.values.len() * std::mem::size_of::<f64>() + self.top.len() * std::mem::size_of::<TopEntry>()
    }

    pub fn as_ref(&self) -> PointRef<'_> {
        PointRef { time_ms: self.time_ms, values: &self.values, top: &self.top }
    }
}

/// A point borrowed from the ring or from a list of [`Point`]s.
#[derive(Debug, Clone, Copy)]
pub struct PointRef<'a> {
    pub time_ms: u64,
    pub values: &'a [f64],
    pub top: &'a [TopEntry],
}

impl PointMaker {
    /// The series a point holds, in its order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// A point of `values` in [`Self::names`]' order (NaN: unknown), with no top processes:
    /// what a rollup row answers for (see [`rollup_series`]).
    pub fn point_of(&self, time_ms: u64, values: Vec<f64>) -> Point {
        assert_eq!(values.len(), self.names.len(), "a value per series");
        Point { time_ms, values: values.into_boxed_slice(), top: vec![NO_ENTRY; self.top_n].into_boxed_slice() }
    }

    /// The point `s` makes.
    pub fn point(&self, s: &Snapshot) -> Point {
        let values: Box<[f64]> = self.columns.iter().map(|c| c.value(s).unwrap_or(f64::NAN)).collect();
        let mut top: Vec<TopEntry> = s
            .rows
            .iter()
            .filter_map(|r| {
                Some(TopEntry { pid: r.pid, cpu_percent: r.cpu_percent? as f32, rss_bytes: r.rss_bytes.unwrap_or(0) })
            })
            .collect();
        let n = self.top_n.min(top.len());
        if n > 0 {
            top.select_nth_unstable_by(n - 1, |a, b| b.cpu_percent.total_cmp(&a.cpu_percent));
        }
        top.truncate(n);
        top.resize(self.top_n, NO_ENTRY);
        Point { time_ms: s.unix_ms(), values, top: top.into_boxed_slice() }
    }

    /// Is `name` a series a point can answer (a fixed series by its name or an alias of it, or
    /// `process.PID.cpu_percent` / `process.PID.rss_bytes`)?
    pub fn knows(&self, name: &str) -> bool {
        self.column(name).is_some() || parse_process_series(name).is_some()
    }

    /// The column of a fixed series, by its name or an alias the catalog keeps for it.
    fn column(&self, name: &str) -> Option<usize> {
        let name = proctor_units::series::canonical(name);
        self.names.iter().position(|n| n == name)
    }

    /// The series `names` over `points` (time order), at most `max_points` of them (0: all).
    /// Past that, points are grouped into `max_points` buckets of equal time and each bucket
    /// answers with its newest time and, per series, the **maximum** of its known values, so a
    /// one-sample spike survives a day-long zoom (a counter's maximum is its newest value).
    pub fn assemble(&self, names: &[String], points: &[PointRef<'_>], max_points: usize) -> Range {
        let buckets = buckets(points, max_points);
        let times_ms = buckets.iter().map(|b| points[b.end - 1].time_ms).collect();
        let series = names
            .iter()
            .map(|name| {
                let column = self.column(name);
                let process = parse_process_series(name);
                let pick = |p: &PointRef<'_>| -> Option<f64> {
                    if let Some(col) = column {
                        return finite(p.values[col]);
                    }
                    let (pid, field) = process?;
                    let e = p.top.iter().find(|e| e.pid == pid && e.pid != 0)?;
                    Some(match field {
                        ProcessField::Cpu => f64::from(e.cpu_percent),
                        ProcessField::Rss => e.rss_bytes as f64,
                    })
                };
                let values =
                    buckets.iter().map(|b| points[b.clone()].iter().filter_map(pick).reduce(f64::max)).collect();
                SeriesData { name: name.clone(), values }
            })
            .collect();
        Range { times_ms, series }
    }

    fn point_bytes(&self) -> usize {
        std::mem::size_of::<u64>()
            + self.columns.len() * std::mem::size_of::<f64>()
            + self.top_n * std::mem::size_of::<TopEntry>()
    }
}

/// Index ranges of `points` (time order) grouped into at most `max_points` buckets of equal
/// time (0: one bucket per point); empty buckets are left out.
fn buckets(points: &[PointRef<'_>], max_points: usize) -> Vec<std::ops::Range<usize>> {
    if max_points == 0 || points.len() <= max_points {
        return (0..points.len()).map(|i| i..i + 1).collect();
    }
    let first = points[0].time_ms;
    let span = points[points.len() - 1].time_ms.saturating_sub(first) + 1;
    let bucket_of = |t: u64| ((u128::from(t.saturating_sub(first)) * max_points as u128) / u128::from(span)) as usize;
    let mut out: Vec<std::ops::Range<usize>> = Vec::with_capacity(max_points);
    for (i, p) in points.iter().enumerate() {
        match out.last_mut() {
            Some(last) if bucket_of(points[last.start].time_ms) == bucket_of(p.time_ms) => last.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

#[derive(Debug)]
pub struct History {
    maker: PointMaker,
    capacity: usize,
    /// Slot `i` holds point `(head + i) % capacity` in age order once the ring is full.
    times: Vec<u64>,
    /// `columns.len()` values per slot.
    values: Vec<f64>,
    /// `top_n` entries per slot, unused ones are `NO_ENTRY` (pid 0).
    top: Vec<TopEntry>,
    /// The slot holding the oldest point.
    head: usize,
}

impl History {
    /// Fixes the series from what `first` has and reserves nothing yet: points are
    /// allocated as they arrive, and the oldest is dropped once `capacity` is reached.
    pub fn new(first: &Snapshot, capacity: usize, top_n: usize) -> Self {
        // The catalog's series the ring keeps, in its order, each device's own series after
        // the total it splits.
        let mut columns = Vec::new();
        for series in proctor_units::series::CATALOG.iter().filter(|s| s.live) {
            columns.extend(Column::of_catalog(series.name));
            match series.name {
                "host.cpu.steal_percent" => {
                    if let Some(stat) = first.sample.host.stat.as_ref() {
                        columns.extend(stat.cpu_ids.iter().take(1024).map(|&id| Column::PerCpuBusy(id)));
                    }
                }
                "host.disk.write_bytes_per_sec" => {
                    let disks = first.sample.host.disks.iter().filter(|d| proctor_model::is_interesting_disk(&d.name));
                    for d in disks.take(MAX_DEVICES) {
                        columns.push(Column::DeviceDiskRead(d.name.to_string()));
                        columns.push(Column::DeviceDiskWrite(d.name.to_string()));
                    }
                }
                "host.net.tx_bytes_per_sec" => {
                    for n in first.sample.host.nets.iter().take(MAX_DEVICES) {
                        columns.push(Column::DeviceNetRx(n.name.to_string()));
                        columns.push(Column::DeviceNetTx(n.name.to_string()));
                    }
                }
                _ => {}
            }
        }
        let names = columns.iter().map(Column::name).collect();
        Self {
            maker: PointMaker { columns, names, top_n },
            capacity: capacity.max(1),
            times: Vec::new(),
            values: Vec::new(),
            top: Vec::new(),
            head: 0,
        }
    }

    pub fn push(&mut self, s: &Snapshot) {
        let Point { time_ms, values, top } = self.maker.point(s);
        let cols = self.maker.columns.len();
        if self.times.len() < self.capacity {
            // Grow by doubling, but never past the capacity, so a full ring holds exactly its bound.
            if self.times.len() == self.times.capacity() {
                let want = (self.times.len() * 2).max(64).min(self.capacity) - self.times.len();
                self.times.reserve_exact(want);
                self.values.reserve_exact(want * cols);
                self.top.reserve_exact(want * self.maker.top_n);
            }
            self.times.push(time_ms);
            self.values.extend_from_slice(&values);
            self.top.extend_from_slice(&top);
        } else {
            let slot = self.head;
            self.times[slot] = time_ms;
            self.values[slot * cols..(slot + 1) * cols].copy_from_slice(&values);
            self.top[slot * self.maker.top_n..(slot + 1) * self.maker.top_n].copy_from_slice(&top);
            self.head = (self.head + 1) % self.capacity;
        }
    }

    /// The slot of the `i`-th oldest point.
    fn slot(&self, i: usize) -> usize {
        (self.head + i) % self.capacity
    }

    fn time_at(&self, i: usize) -> u64 {
        self.times[self.slot(i)]
    }

    fn top_at(&self, i: usize) -> &[TopEntry] {
        let slot = self.slot(i);
        let n = self.maker.top_n;
        &self.top[slot * n..(slot + 1) * n]
    }

    fn point_at(&self, i: usize) -> PointRef<'_> {
        let slot = self.slot(i);
        let cols = self.maker.columns.len();
        PointRef {
            time_ms: self.times[slot],
            values: &self.values[slot * cols..(slot + 1) * cols],
            top: self.top_at(i),
        }
    }

    /// The ring's series and point rule, for deriving points elsewhere (the store).
    pub fn maker(&self) -> &PointMaker {
        &self.maker
    }

    /// The ring's points with `from_ms <= t <= to_ms`, oldest first.
    pub fn points(&self, from_ms: u64, to_ms: u64) -> Vec<PointRef<'_>> {
        let start = self.partition_point(|t| t < from_ms);
        let end = self.partition_point(|t| t <= to_ms);
        (start..end.max(start)).map(|i| self.point_at(i)).collect()
    }

    /// The first point index whose time fails `pred` (times ascend).
    fn partition_point(&self, pred: impl Fn(u64) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.time_at(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    pub fn len(&self) -> usize {
        self.times.len()
    }

    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn series_count(&self) -> usize {
        self.maker.columns.len()
    }

    /// The fixed series names, in a stable order.
    pub fn names(&self) -> &[String] {
        &self.maker.names
    }

    pub fn first_ms(&self) -> Option<u64> {
        (!self.is_empty()).then(|| self.time_at(0))
    }

    pub fn last_ms(&self) -> Option<u64> {
        (!self.is_empty()).then(|| self.time_at(self.len() - 1))
    }

    fn names_bytes(&self) -> usize {
        self.maker.names.iter().map(|n| n.len()).sum()
    }

    /// Heap held by the points now (allocator overhead aside).
    pub fn bytes(&self) -> usize {
        self.times.capacity() * std::mem::size_of::<u64>()
            + self.values.capacity() * std::mem::size_of::<f64>()
            + self.top.capacity() * std::mem::size_of::<TopEntry>()
            + self.names_bytes()
    }

    /// What the ring will hold when full: the bound on its memory.
    pub fn max_bytes(&self) -> usize {
        self.capacity * self.maker.point_bytes() + self.names_bytes()
    }

    pub fn size(&self) -> HistorySize {
        HistorySize {
            points: self.len(),
            capacity: self.capacity(),
            series: self.series_count(),
            bytes: self.bytes(),
            max_bytes: self.max_bytes(),
        }
    }

    /// Is `name` a series this ring can answer (see [`PointMaker::knows`])?
    pub fn knows(&self, name: &str) -> bool {
        self.maker.knows(name)
    }

    /// Points with `from_ms <= t <= to_ms`, at most `max_points` of them (see
    /// [`PointMaker::assemble`]). Unknown names are the caller's to reject first with
    /// [`History::knows`].
    pub fn range(&self, names: &[String], from_ms: u64, to_ms: u64, max_points: usize) -> Range {
        self.maker.assemble(names, &self.points(from_ms, to_ms), max_points)
    }

    /// Pids that were among the top processes at any point in the range, most frequent first.
    pub fn top_pids(&self, from_ms: u64, to_ms: u64) -> Vec<(u32, usize)> {
        let mut counts: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        for i in (0..self.len()).filter(|&i| (from_ms..=to_ms).contains(&self.time_at(i))) {
            for e in self.top_at(i).iter().filter(|e| e.pid != 0) {
                *counts.entry(e.pid).or_default() += 1;
            }
        }
        let mut out: Vec<(u32, usize)> = counts.into_iter().collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ProcessField {
    Cpu,
    Rss,
}

fn parse_process_series(name: &str) -> Option<(u32, ProcessField)> {
    let rest = name.strip_prefix("process.")?;
    let (pid, field) = rest.split_once('.')?;
    let pid: u32 = pid.parse().ok()?;
    let field = match field {
        "cpu_percent" => ProcessField::Cpu,
        "rss_bytes" => ProcessField::Rss,
        _ => return None,
    };
    Some((pid, field))
}

/// Does a rollup tier keep history series `name`? The catalog's stored series are kept under
/// their own names (rows rolled before the catalog, under an alias of it: compare
/// [`proctor_units::series::canonical`] of a block's names). The rest (per-device and per-CPU
/// series, limits, processes, the agent's own figures, the top processes) are not rolled up and
/// are unknown in a tier's part.
pub fn rollup_series(name: &str) -> Option<&'static str> {
    proctor_units::series::find(name).filter(|s| s.stored).map(|s| s.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maker() -> PointMaker {
        let load = Column::of_catalog("host.load.avg1").expect("a host series");
        PointMaker { columns: vec![load], names: vec!["host.load.avg1".into()], top_n: 1 }
    }

    fn check(values: &[f64], max_points: usize, expected_times: &[u64], expected: &[Option<f64>]) {
        let points: Vec<Point> = (0u64..)
            .zip(values)
            .map(|(t, &v)| Point { time_ms: t * 1000, values: Box::new([v]), top: Box::new([NO_ENTRY]) })
            .collect();
        let refs: Vec<PointRef<'_>> = points.iter().map(Point::as_ref).collect();
        // Asked by its old name: the alias answers, under the name asked.
        let range = maker().assemble(&["host.load1".to_string()], &refs, max_points);
        assert_eq!(range.series[0].name, "host.load1");
        assert_eq!(range.times_ms, expected_times);
        assert_eq!(range.series[0].values, expected);
    }

    #[test]
    fn buckets_keep_each_series_maximum_and_the_newest_time() {
        // A one-point spike in 12 points survives thinning to 3.
        let mut v = vec![1.0; 12];
        v[5] = 9.0;
        check(&v, 3, &[3000, 7000, 11000], &[Some(1.0), Some(9.0), Some(1.0)]);
        // Unknown values are left out of a bucket's maximum; a bucket with none is null.
        check(&[f64::NAN, f64::NAN, 2.0, f64::NAN], 2, &[1000, 3000], &[None, Some(2.0)]);
        // Few enough points: every one, as it is.
        check(&[1.0, 2.0], 5, &[0, 1000], &[Some(1.0), Some(2.0)]);
        check(&[1.0, 2.0], 0, &[0, 1000], &[Some(1.0), Some(2.0)]);
    }
}
