//! Families (the very ones `/metrics` renders) gathered into a batch of series: one label set
//! per series, `__name__` spelled as the text format spells the sample (`_total` on counters,
//! `_bucket`/`_sum`/`_count` on histograms), external labels added, samples in time order.

use std::collections::{BTreeMap, HashMap};

use proctor_http::prom::{Family, Kind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
}

/// What a receiver is told about a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub kind: MetricType,
    pub help: &'static str,
    /// `seconds`, `bytes`, `ratio` from the name's suffix, else empty.
    pub unit: &'static str,
}

/// A label set, sorted by name (`__name__` included), as remote write requires.
pub type Labels = Vec<(String, String)>;

/// Series ready to encode.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    /// Each series' labels and points: (milliseconds since the epoch, value), in the order added.
    pub series: Vec<(Labels, Vec<(i64, f64)>)>,
    /// Per family, under the name its TYPE line has in the text format (`_total` on counters).
    pub metadata: BTreeMap<String, Meta>,
    /// The sample names of each family (`x_total`, `x_bucket`…) to its metadata key.
    names: BTreeMap<String, String>,
    /// A series' identity (its sample name and labels as the family gives them, external
    /// labels being the same for the whole batch) to its place in `series`.
    index: HashMap<String, usize>,
    /// Where a series' identity is written to look it up: no allocation for a series seen before.
    scratch: String,
    /// Points in the batch.
    pub points: usize,
    /// Stored or live samples whose series are in the batch.
    pub samples: usize,
    /// The newest sample in the batch: (unix ns, seq).
    pub last: Option<(u64, u64)>,
}

fn unit_of(name: &str) -> &'static str {
    ["seconds", "bytes", "ratio"].into_iter().find(|u| name.ends_with(&format!("_{u}"))).unwrap_or("")
}

impl Batch {
    /// Adds every sample of `families` at `unix_ns`, with `external` labels (an external label
    /// never replaces one the series has, as Prometheus's own external labels behave). The
    /// external labels must be the same for every call on one batch.
    pub fn add(&mut self, families: &[Family], unix_ns: u64, seq: u64, external: &[(String, String)]) {
        let ms = (unix_ns / 1_000_000) as i64;
        for f in families {
            let kind = match f.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
                Kind::Histogram => MetricType::Histogram,
            };
            let total = if kind == MetricType::Counter { "_total" } else { "" };
            let family_name = format!("{}{total}", f.name);
            self.metadata.entry(family_name).or_insert_with(|| Meta { kind, help: f.help, unit: unit_of(&f.name) });
            for s in &f.samples {
                let mut key = std::mem::take(&mut self.scratch);
                key.clear();
                key.push_str(&f.name);
                key.push_str(total);
                key.push_str(s.suffix);
                for (k, v) in &s.labels {
                    key.push('\0');
                    key.push_str(k);
                    key.push('\0');
                    key.push_str(v);
                }
                let at = match self.index.get(&key) {
                    Some(&at) => {
                        self.scratch = key;
                        at
                    }
                    None => {
                        let name = format!("{}{total}{}", f.name, s.suffix);
                        if !self.names.contains_key(&name) {
                            self.names.insert(name.clone(), format!("{}{total}", f.name));
                        }
                        let mut labels: Labels = Vec::with_capacity(s.labels.len() + external.len() + 1);
                        labels.push(("__name__".to_string(), name));
                        labels.extend(s.labels.iter().map(|(k, v)| (k.to_string(), v.clone())));
                        for (k, v) in external {
                            if !labels.iter().any(|(name, _)| name == k) {
                                labels.push((k.clone(), v.clone()));
                            }
                        }
                        labels.sort_by(|a, b| a.0.cmp(&b.0));
                        self.series.push((labels, Vec::new()));
                        self.index.insert(key, self.series.len() - 1);
                        self.series.len() - 1
                    }
                };
                let points = &mut self.series[at].1;
                // One point per series and time: a family that names a label set twice keeps
                // its first value, as a scrape would refuse the duplicate.
                if points.last().is_none_or(|&(t, _)| t < ms) {
                    points.push((ms, s.value));
                    self.points += 1;
                }
            }
        }
        self.samples += 1;
        self.last = Some((unix_ns, seq));
    }

    /// The metadata of the family a sample name belongs to.
    pub fn family_of(&self, sample_name: &str) -> Option<&Meta> {
        self.metadata.get(self.names.get(sample_name)?)
    }

    /// The family (its metadata key: `x_total` for a counter) a sample name belongs to.
    pub fn family_key_of(&self, sample_name: &str) -> Option<&str> {
        self.names.get(sample_name).map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.samples == 0
    }

    /// Empties the batch for the next one, keeping its allocations' capacity.
    pub fn clear(&mut self) {
        self.series.clear();
        self.index.clear();
        self.points = 0;
        self.samples = 0;
        self.last = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn families() -> Vec<Family> {
        let mut cpu = Family::new("proctor_host_cpu_seconds", Kind::Counter, "CPU time.");
        cpu.push(vec![("mode", "user".into()), ("cpu", "0".into())], 12.5);
        let mut load = Family::new("proctor_host_load1", Kind::Gauge, "Load.");
        load.push(Vec::new(), 0.5);
        vec![cpu, load]
    }

    #[test]
    fn series_are_named_as_scraped_sorted_and_in_time_order() {
        let mut b = Batch::default();
        let external = vec![("instance".to_string(), "box".to_string()), ("mode".to_string(), "not-this".to_string())];
        b.add(&families(), 2_000_000_000, 2, &external);
        b.add(&families(), 3_000_000_000, 3, &external);
        assert_eq!(b.samples, 2);
        assert_eq!(b.points, 4);
        let cpu: Labels = vec![
            ("__name__".into(), "proctor_host_cpu_seconds_total".into()),
            ("cpu".into(), "0".into()),
            ("instance".into(), "box".into()),
            ("mode".into(), "user".into()),
        ];
        let points = b.series.iter().find(|(labels, _)| *labels == cpu).map(|(_, p)| p.clone());
        assert_eq!(points, Some(vec![(2000, 12.5), (3000, 12.5)]));
        assert_eq!(b.series.len(), 2, "one series per label set, whatever the number of samples");
        assert_eq!(
            b.family_of("proctor_host_cpu_seconds_total").map(|m| (m.kind, m.unit)),
            Some((MetricType::Counter, "seconds"))
        );
        assert_eq!(b.family_of("proctor_host_load1").map(|m| m.kind), Some(MetricType::Gauge));
        assert_eq!(b.last, Some((3_000_000_000, 3)));
    }
}
