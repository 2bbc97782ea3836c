//! OTLP/HTTP metrics (`serve --otlp URL`): the same batch of series remote write sends, as an
//! `ExportMetricsServiceRequest` (protobuf, gzip), cumulative temporality.
//!
//! Names: a `/metrics` family with an OpenTelemetry semantic-convention equivalent is sent under
//! that name with the convention's attributes ([`CONVENTIONS`]: `proctor_host_cpu_seconds` is
//! `system.cpu.time` with `cpu.mode` and `cpu.logical_number`); every other family under
//! proctor's own name, spelt the OpenTelemetry way: the unit suffix made the unit, underscores
//! dots (`proctor_host_memory_available_bytes` is `proctor.host.memory.available` in `By`), so
//! a receiver that turns OTLP into Prometheus names with suffixes (Prometheus 3's own) stores it
//! under the name `/metrics` has. Process series carry `process.pid`,
//! `process.executable.name` and `process.command_line` on each point, not on a resource per
//! process as the Collector's hostmetrics does: a receiver that keeps only a few resource
//! attributes as labels (Prometheus) would otherwise fold every process into one series.
//!
//! The resource is the agent: `service.name` proctor, `service.instance.id` (the `instance`
//! external label, else the host name), `host.name`, `host.id` (`/etc/machine-id`), `os.type`,
//! `container.id` and `k8s.pod.name` where known, and every other external label as given.
//! Counters start at boot (`start_time_unix_nano`): the kernel's counters count from there; a
//! process's count from its own start, later, which a receiver sees as a reset when a pid is
//! reused (the count falls).

use std::collections::{BTreeMap, HashMap};

use crate::series::{Batch, MetricType};

/// `Content-Type` of a request.
pub const CONTENT_TYPE: &str = "application/x-protobuf";
/// The version of the OTLP specification the messages follow (for the queue's status).
pub const SPEC_VERSION: &str = "1.5.0";

pub mod proto {
    //! The messages of `opentelemetry.proto.collector.metrics.v1` that proctor sends and reads
    //! back, and those they use (metrics/v1, common/v1, resource/v1). Only the fields proctor
    //! fills are declared: a decoder skips the rest, and tests decode with these same messages.

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExportMetricsServiceRequest {
        #[prost(message, repeated, tag = "1")]
        pub resource_metrics: Vec<ResourceMetrics>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExportMetricsServiceResponse {
        #[prost(message, optional, tag = "1")]
        pub partial_success: Option<ExportMetricsPartialSuccess>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExportMetricsPartialSuccess {
        #[prost(int64, tag = "1")]
        pub rejected_data_points: i64,
        #[prost(string, tag = "2")]
        pub error_message: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceMetrics {
        #[prost(message, optional, tag = "1")]
        pub resource: Option<Resource>,
        #[prost(message, repeated, tag = "2")]
        pub scope_metrics: Vec<ScopeMetrics>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Resource {
        #[prost(message, repeated, tag = "1")]
        pub attributes: Vec<KeyValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ScopeMetrics {
        #[prost(message, optional, tag = "1")]
        pub scope: Option<InstrumentationScope>,
        #[prost(message, repeated, tag = "2")]
        pub metrics: Vec<Metric>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InstrumentationScope {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub version: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Metric {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub description: String,
        #[prost(string, tag = "3")]
        pub unit: String,
        #[prost(oneof = "metric::Data", tags = "5, 7, 9")]
        pub data: Option<metric::Data>,
    }

    pub mod metric {
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Data {
            #[prost(message, tag = "5")]
            Gauge(super::Gauge),
            #[prost(message, tag = "7")]
            Sum(super::Sum),
            #[prost(message, tag = "9")]
            Histogram(super::Histogram),
        }
    }

    /// `AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE`.
    pub const CUMULATIVE: i32 = 2;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Gauge {
        #[prost(message, repeated, tag = "1")]
        pub data_points: Vec<NumberDataPoint>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sum {
        #[prost(message, repeated, tag = "1")]
        pub data_points: Vec<NumberDataPoint>,
        #[prost(int32, tag = "2")]
        pub aggregation_temporality: i32,
        #[prost(bool, tag = "3")]
        pub is_monotonic: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Histogram {
        #[prost(message, repeated, tag = "1")]
        pub data_points: Vec<HistogramDataPoint>,
        #[prost(int32, tag = "2")]
        pub aggregation_temporality: i32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NumberDataPoint {
        #[prost(message, repeated, tag = "7")]
        pub attributes: Vec<KeyValue>,
        #[prost(fixed64, tag = "2")]
        pub start_time_unix_nano: u64,
        #[prost(fixed64, tag = "3")]
        pub time_unix_nano: u64,
        #[prost(oneof = "number_data_point::Value", tags = "4, 6")]
        pub value: Option<number_data_point::Value>,
    }

    pub mod number_data_point {
        #[derive(Clone, Copy, PartialEq, prost::Oneof)]
        pub enum Value {
            #[prost(double, tag = "4")]
            AsDouble(f64),
            #[prost(sfixed64, tag = "6")]
            AsInt(i64),
        }
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct HistogramDataPoint {
        #[prost(message, repeated, tag = "9")]
        pub attributes: Vec<KeyValue>,
        #[prost(fixed64, tag = "2")]
        pub start_time_unix_nano: u64,
        #[prost(fixed64, tag = "3")]
        pub time_unix_nano: u64,
        #[prost(fixed64, tag = "4")]
        pub count: u64,
        #[prost(double, optional, tag = "5")]
        pub sum: Option<f64>,
        #[prost(fixed64, repeated, tag = "6")]
        pub bucket_counts: Vec<u64>,
        #[prost(double, repeated, tag = "7")]
        pub explicit_bounds: Vec<f64>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyValue {
        #[prost(string, tag = "1")]
        pub key: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<AnyValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AnyValue {
        #[prost(oneof = "any_value::Value", tags = "1, 3")]
        pub value: Option<any_value::Value>,
    }

    pub mod any_value {
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Value {
            #[prost(string, tag = "1")]
            StringValue(String),
            #[prost(int64, tag = "3")]
            IntValue(i64),
        }
    }
}

use proto::{any_value, metric, number_data_point, AnyValue, KeyValue};

/// How a convention's metric is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instrument {
    /// A monotonic cumulative sum.
    Counter,
    /// A non-monotonic cumulative sum (a level that goes up and down: memory in use).
    UpDownCounter,
    Gauge,
}

/// A `/metrics` family sent under an OpenTelemetry semantic-convention name.
#[derive(Debug, Clone, Copy)]
pub struct Convention {
    /// The family as `/metrics` names it (a counter without `_total`).
    pub family: &'static str,
    pub name: &'static str,
    pub unit: &'static str,
    pub instrument: Instrument,
    /// Labels renamed: (the family's label, the attribute).
    pub labels: &'static [(&'static str, &'static str)],
    /// An attribute every point of the family carries: the family is one value of it.
    pub fixed: Option<(&'static str, &'static str)>,
}

macro_rules! conv {
    ($family:literal => $name:literal, $unit:literal, $inst:ident, [$(($l:literal, $a:literal)),*] $(, $fk:literal = $fv:literal)?) => {
        Convention {
            family: $family,
            name: $name,
            unit: $unit,
            instrument: Instrument::$inst,
            labels: &[$(($l, $a)),*],
            fixed: conv!(@fixed $($fk, $fv)?),
        }
    };
    (@fixed) => { None };
    (@fixed $k:literal, $v:literal) => { Some(($k, $v)) };
}

/// The families sent under semantic-convention names (system, process and container metrics of
/// the conventions' 1.3x releases). docs/scale-out.md lists them; a test holds the two equal.
pub const CONVENTIONS: &[Convention] = &[
    conv!("proctor_host_cpu_seconds" => "system.cpu.time", "s", Counter, [("cpu", "cpu.logical_number"), ("mode", "cpu.mode")]),
    conv!("proctor_host_memory_total_bytes" => "system.memory.limit", "By", UpDownCounter, []),
    conv!("proctor_host_memory_free_bytes" => "system.memory.usage", "By", UpDownCounter, [], "system.memory.state" = "free"),
    conv!("proctor_host_memory_cached_bytes" => "system.memory.usage", "By", UpDownCounter, [], "system.memory.state" = "cached"),
    conv!("proctor_host_memory_buffers_bytes" => "system.memory.usage", "By", UpDownCounter, [], "system.memory.state" = "buffers"),
    conv!("proctor_host_memory_available_bytes" => "system.linux.memory.available", "By", UpDownCounter, []),
    conv!("proctor_host_swap_free_bytes" => "system.paging.usage", "By", UpDownCounter, [], "system.paging.state" = "free"),
    conv!("proctor_host_forks" => "system.process.created", "{process}", Counter, []),
    conv!("proctor_host_disk_read_bytes" => "system.disk.io", "By", Counter, [("device", "system.device")], "disk.io.direction" = "read"),
    conv!("proctor_host_disk_written_bytes" => "system.disk.io", "By", Counter, [("device", "system.device")], "disk.io.direction" = "write"),
    conv!("proctor_host_disk_reads_completed" => "system.disk.operations", "{operation}", Counter, [("device", "system.device")], "disk.io.direction" = "read"),
    conv!("proctor_host_disk_writes_completed" => "system.disk.operations", "{operation}", Counter, [("device", "system.device")], "disk.io.direction" = "write"),
    conv!("proctor_host_disk_io_time_seconds" => "system.disk.io_time", "s", Counter, [("device", "system.device")]),
    conv!("proctor_host_network_receive_bytes" => "system.network.io", "By", Counter, [("device", "network.interface.name")], "network.io.direction" = "receive"),
    conv!("proctor_host_network_transmit_bytes" => "system.network.io", "By", Counter, [("device", "network.interface.name")], "network.io.direction" = "transmit"),
    conv!("proctor_host_network_receive_packets" => "system.network.packets", "{packet}", Counter, [("device", "network.interface.name")], "network.io.direction" = "receive"),
    conv!("proctor_host_network_transmit_packets" => "system.network.packets", "{packet}", Counter, [("device", "network.interface.name")], "network.io.direction" = "transmit"),
    conv!("proctor_host_network_receive_drop" => "system.network.packet.dropped", "{packet}", Counter, [("device", "network.interface.name")], "network.io.direction" = "receive"),
    conv!("proctor_host_network_transmit_drop" => "system.network.packet.dropped", "{packet}", Counter, [("device", "network.interface.name")], "network.io.direction" = "transmit"),
    conv!("proctor_container_cpu_usage_seconds" => "container.cpu.time", "s", Counter, []),
    conv!("proctor_container_memory_usage_bytes" => "container.memory.usage", "By", UpDownCounter, []),
    conv!("proctor_process_cpu_seconds" => "process.cpu.time", "s", Counter, []),
    conv!("proctor_process_resident_bytes" => "process.memory.usage", "By", UpDownCounter, []),
    conv!("proctor_process_virtual_bytes" => "process.memory.virtual", "By", UpDownCounter, []),
    conv!("proctor_process_threads" => "process.thread.count", "{thread}", UpDownCounter, []),
];

/// The series of the catalog (`proctor_units::series`, the one name each has on every other
/// surface) a convention's metric carries: those made from its family's samples.
pub fn catalog_series(c: &Convention) -> Vec<&'static str> {
    let sample = match c.instrument {
        Instrument::Counter => format!("{}_total", c.family),
        _ => c.family.to_string(),
    };
    proctor_units::series::CATALOG
        .iter()
        .filter(|row| row.prometheus.iter().any(|p| p.split('{').next() == Some(sample.as_str())))
        .map(|row| row.name)
        .collect()
}

/// Labels every family that has them sends as these attributes (a process's identity).
const PROCESS_LABELS: &[(&str, &str)] =
    &[("pid", "process.pid"), ("name", "process.executable.name"), ("cmdline", "process.command_line")];

/// Attributes whose values are integers in the conventions.
const INT_ATTRIBUTES: &[&str] = &["process.pid", "cpu.logical_number"];

/// Unit suffixes of `/metrics` names and the UCUM units they are, longest first.
const UNITS: &[(&str, &str)] = &[
    ("_bytes_per_second", "By/s"),
    ("_seconds", "s"),
    ("_bytes", "By"),
    ("_ratio", "1"),
    ("_celsius", "Cel"),
    ("_hertz", "Hz"),
    ("_watts", "W"),
    ("_joules", "J"),
];

/// The OpenTelemetry name and unit of a `/metrics` family that has no convention.
pub fn own_name(family: &str) -> (String, &'static str) {
    for (suffix, unit) in UNITS {
        if let Some(stem) = family.strip_suffix(suffix) {
            return (stem.replace('_', "."), unit);
        }
    }
    (family.replace('_', "."), "")
}

/// The convention of a family, if it has one.
pub fn convention(family: &str) -> Option<&'static Convention> {
    CONVENTIONS.iter().find(|c| c.family == family)
}

/// The resource attributes of the agent (see the module's words).
pub fn resource(external: &[(String, String)], host: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![("service.name".into(), "proctor".into())];
    let instance = external.iter().find(|(k, _)| k == "instance").map_or(host, |(_, v)| v.as_str());
    out.push(("service.instance.id".into(), instance.to_string()));
    out.push(("service.version".into(), env!("CARGO_PKG_VERSION").into()));
    out.push(("host.name".into(), host.to_string()));
    out.push(("os.type".into(), "linux".into()));
    if let Some(id) = machine_id() {
        out.push(("host.id".into(), id));
    }
    if let Some(id) = container_id() {
        out.push(("container.id".into(), id));
    }
    if let Some(pod) = pod_name() {
        out.push(("k8s.pod.name".into(), pod));
    }
    for (k, v) in external {
        // `instance` is the service instance; `host`, the host name, is already there.
        if k != "instance" && k != "host" && !out.iter().any(|(name, _)| name == k) {
            out.push((k.clone(), v.clone()));
        }
    }
    out
}

fn machine_id() -> Option<String> {
    let bytes = proctor_procfs::regular::read(std::path::Path::new("/etc/machine-id"), 256).ok()?;
    let id = String::from_utf8(bytes).ok()?.trim().to_string();
    (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// The container's id: the 64 hex digits in this process's cgroup path that Docker, containerd
/// and CRI-O name their containers by, if there are any.
fn container_id() -> Option<String> {
    let bytes = proctor_procfs::regular::read(std::path::Path::new("/proc/self/cgroup"), 64 << 10).ok()?;
    container_id_in(&String::from_utf8_lossy(&bytes))
}

fn container_id_in(cgroup: &str) -> Option<String> {
    cgroup.lines().rev().find_map(|line| {
        let path = line.splitn(3, ':').nth(2)?;
        path.split(['/', '-', '.'])
            .find(|part| part.len() == 64 && part.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_string)
    })
}

/// The pod's name in Kubernetes: the downward API's `POD_NAME` where the manifest sets it, else
/// the host name a pod is given (its own name) when the service environment says it is a pod.
fn pod_name() -> Option<String> {
    if let Ok(name) = std::env::var("POD_NAME") {
        return (!name.is_empty()).then_some(name);
    }
    std::env::var_os("KUBERNETES_SERVICE_HOST")?;
    let bytes = proctor_procfs::regular::read(std::path::Path::new("/proc/sys/kernel/hostname"), 256).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_string()).filter(|s| !s.is_empty())
}

fn string(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.into())) }),
    }
}

fn attribute(key: &str, value: &str) -> KeyValue {
    if INT_ATTRIBUTES.contains(&key) {
        if let Ok(n) = value.parse::<i64>() {
            return KeyValue {
                key: key.to_string(),
                value: Some(AnyValue { value: Some(any_value::Value::IntValue(n)) }),
            };
        }
    }
    string(key, value)
}

/// A series' attributes: its labels renamed (the convention's, then a process's identity), the
/// convention's fixed attribute, and no `__name__`.
fn attributes(labels: &[(String, String)], conv: Option<&Convention>) -> Vec<KeyValue> {
    let mut out = Vec::with_capacity(labels.len() + 1);
    for (k, v) in labels {
        if k == "__name__" || k == "le" {
            continue;
        }
        let renamed = conv
            .and_then(|c| c.labels.iter().find(|(l, _)| l == k))
            .or_else(|| PROCESS_LABELS.iter().find(|(l, _)| l == k))
            .map_or(k.as_str(), |(_, a)| a);
        // `irq` is the conventions' `interrupt`; the other modes are spelt alike.
        let value = if renamed == "cpu.mode" && v == "irq" { "interrupt" } else { v.as_str() };
        out.push(attribute(renamed, value));
    }
    if let Some((k, v)) = conv.and_then(|c| c.fixed) {
        out.push(string(k, v));
    }
    out
}

/// A histogram's series regrouped per point: (bounds and cumulative counts, sum, count).
#[derive(Default)]
struct HistogramPoint {
    buckets: Vec<(f64, f64)>,
    sum: Option<f64>,
    count: Option<f64>,
}

/// One histogram series' attributes and its points by time (ms).
type HistogramSeries = (Vec<KeyValue>, BTreeMap<i64, HistogramPoint>);

/// The batch as one request. `start_unix_ns`: the counters' start (the host's boot).
pub fn request(batch: &Batch, resource: &[(String, String)], start_unix_ns: u64) -> proto::ExportMetricsServiceRequest {
    // Metrics in the order their first series came, by OpenTelemetry name: several families
    // can be one metric (memory free, cached and buffers are `system.memory.usage`).
    let mut metrics: Vec<proto::Metric> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    // Histograms: family → (attributes' identity → (attributes, time → point)).
    let mut histograms: BTreeMap<String, BTreeMap<String, HistogramSeries>> = BTreeMap::new();
    for (labels, points) in &batch.series {
        let Some(sample_name) = labels.iter().find(|(k, _)| k == "__name__").map(|(_, v)| v.as_str()) else {
            continue;
        };
        let (Some(meta), Some(family_key)) = (batch.family_of(sample_name), batch.family_key_of(sample_name)) else {
            continue;
        };
        let family =
            family_key.strip_suffix("_total").filter(|_| meta.kind == MetricType::Counter).unwrap_or(family_key);
        if meta.kind == MetricType::Histogram {
            let key: String = labels
                .iter()
                .filter(|(k, _)| k != "__name__" && k != "le")
                .map(|(k, v)| format!("{k}\0{v}\0"))
                .collect();
            let entry = histograms
                .entry(family.to_string())
                .or_default()
                .entry(key)
                .or_insert_with(|| (attributes(labels, None), BTreeMap::new()));
            let le = labels.iter().find(|(k, _)| k == "le").map(|(_, v)| v.as_str());
            for &(ms, value) in points {
                let p = entry.1.entry(ms).or_default();
                if sample_name.ends_with("_bucket") {
                    let bound = match le {
                        Some("+Inf") => f64::INFINITY,
                        Some(le) => le.parse().unwrap_or(f64::NAN),
                        None => f64::NAN,
                    };
                    if !bound.is_nan() {
                        p.buckets.push((bound, value));
                    }
                } else if sample_name.ends_with("_sum") {
                    p.sum = Some(value);
                } else if sample_name.ends_with("_count") {
                    p.count = Some(value);
                }
            }
            continue;
        }
        let conv = convention(family);
        let (name, unit, instrument) = match conv {
            Some(c) => (c.name.to_string(), c.unit, c.instrument),
            None => {
                let (name, unit) = own_name(family);
                let instrument = if meta.kind == MetricType::Counter { Instrument::Counter } else { Instrument::Gauge };
                (name, unit, instrument)
            }
        };
        let attrs = attributes(labels, conv);
        let data_points = points.iter().map(|&(ms, value)| proto::NumberDataPoint {
            attributes: attrs.clone(),
            start_time_unix_nano: if instrument == Instrument::Gauge { 0 } else { start_unix_ns },
            time_unix_nano: ms as u64 * 1_000_000,
            value: Some(number_data_point::Value::AsDouble(value)),
        });
        let i = *at.entry(name.clone()).or_insert_with(|| {
            let data = match instrument {
                Instrument::Gauge => metric::Data::Gauge(proto::Gauge { data_points: Vec::new() }),
                Instrument::Counter | Instrument::UpDownCounter => metric::Data::Sum(proto::Sum {
                    data_points: Vec::new(),
                    aggregation_temporality: proto::CUMULATIVE,
                    is_monotonic: instrument == Instrument::Counter,
                }),
            };
            metrics.push(proto::Metric {
                name,
                description: meta.help.to_string(),
                unit: unit.to_string(),
                data: Some(data),
            });
            metrics.len() - 1
        });
        match &mut metrics[i].data {
            Some(metric::Data::Gauge(g)) => g.data_points.extend(data_points),
            Some(metric::Data::Sum(s)) => s.data_points.extend(data_points),
            _ => {}
        }
    }
    for (family, series) in histograms {
        let help = batch.family_of(&format!("{family}_count")).map_or("", |m| m.help);
        let (name, unit) = own_name(&family);
        let mut data_points = Vec::new();
        for (attrs, by_time) in series.into_values() {
            for (ms, mut p) in by_time {
                p.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
                // Cumulative `le` counts into the per-bucket counts OTLP carries; the `+Inf`
                // bucket is the last count and not a bound.
                let mut bucket_counts = Vec::with_capacity(p.buckets.len());
                let mut below = 0.0;
                for &(_, cumulative) in &p.buckets {
                    bucket_counts.push((cumulative - below).max(0.0) as u64);
                    below = cumulative;
                }
                let explicit_bounds: Vec<f64> = p.buckets.iter().map(|&(b, _)| b).filter(|b| b.is_finite()).collect();
                if bucket_counts.len() != explicit_bounds.len() + 1 {
                    continue; // no +Inf bucket: not a whole histogram point
                }
                data_points.push(proto::HistogramDataPoint {
                    attributes: attrs.clone(),
                    start_time_unix_nano: start_unix_ns,
                    time_unix_nano: ms as u64 * 1_000_000,
                    count: p.count.unwrap_or(below) as u64,
                    sum: p.sum,
                    bucket_counts,
                    explicit_bounds,
                });
            }
        }
        metrics.push(proto::Metric {
            name,
            description: help.to_string(),
            unit: unit.to_string(),
            data: Some(metric::Data::Histogram(proto::Histogram {
                data_points,
                aggregation_temporality: proto::CUMULATIVE,
            })),
        });
    }
    proto::ExportMetricsServiceRequest {
        resource_metrics: vec![proto::ResourceMetrics {
            resource: Some(proto::Resource { attributes: resource.iter().map(|(k, v)| string(k, v)).collect() }),
            scope_metrics: vec![proto::ScopeMetrics {
                scope: Some(proto::InstrumentationScope {
                    name: "proctor".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                }),
                metrics,
            }],
        }],
    }
}

/// The request as a body: protobuf, gzip.
pub fn encode(batch: &Batch, resource: &[(String, String)], start_unix_ns: u64) -> Vec<u8> {
    use std::io::Write;
    let raw = prost::Message::encode_to_vec(&request(batch, resource, start_unix_ns));
    let mut gz = flate2::write::GzEncoder::new(Vec::with_capacity(raw.len() / 4), flate2::Compression::fast());
    // Writing into memory cannot fail.
    gz.write_all(&raw).expect("gzip into memory");
    gz.finish().expect("gzip into memory")
}

/// A body back into a request (tests, and anyone checking what was sent).
pub fn decode(body: &[u8]) -> Result<proto::ExportMetricsServiceRequest, String> {
    use std::io::Read;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(body).read_to_end(&mut raw).map_err(|e| format!("gzip: {e}"))?;
    prost::Message::decode(raw.as_slice()).map_err(|e| format!("protobuf: {e}"))
}

/// What a 2xx's body says was refused (`partial_success`), if anything: (points, message).
pub fn rejected(body: &[u8]) -> Option<(u64, String)> {
    let reply: proto::ExportMetricsServiceResponse = prost::Message::decode(body).ok()?;
    let p = reply.partial_success?;
    (p.rejected_data_points > 0 || !p.error_message.is_empty())
        .then(|| (p.rejected_data_points.max(0) as u64, p.error_message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proctor_http::prom::{Family, Kind, Sample as PromSample};

    fn value(kv: &KeyValue) -> String {
        match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::StringValue(s)) => s.clone(),
            Some(any_value::Value::IntValue(n)) => format!("{n}i"),
            None => String::new(),
        }
    }

    fn batch() -> Batch {
        let mut cpu = Family::new("proctor_host_cpu_seconds", Kind::Counter, "CPU time.");
        cpu.push(vec![("cpu", "1".into()), ("mode", "irq".into())], 1.5);
        let mut free = Family::new("proctor_host_memory_free_bytes", Kind::Gauge, "Free.");
        free.push(Vec::new(), 100.0);
        let mut cached = Family::new("proctor_host_memory_cached_bytes", Kind::Gauge, "Cached.");
        cached.push(Vec::new(), 200.0);
        let mut load = Family::new("proctor_host_load1", Kind::Gauge, "Load.");
        load.push(Vec::new(), 0.5);
        let mut pss = Family::new("proctor_process_pss_bytes", Kind::Gauge, "PSS.");
        pss.push(vec![("pid", "42".into()), ("name", "api".into()), ("cmdline", "api --x".into())], 4096.0);
        let mut hist = Family::new("proctor_agent_sample_duration_seconds", Kind::Histogram, "Wall time.");
        let mut push = |suffix, labels, value| hist.samples.push(PromSample { suffix, labels, value });
        for (le, n) in [("0.001", 2.0), ("0.01", 5.0), ("+Inf", 6.0)] {
            push("_bucket", vec![("le", le.into())], n);
        }
        push("_sum", Vec::new(), 0.05);
        push("_count", Vec::new(), 6.0);
        let mut b = Batch::default();
        let fams = [cpu, free, cached, load, pss, hist];
        b.add(&fams, 2_000_000_000, 2, &[]);
        b.add(&fams, 3_000_000_000, 3, &[]);
        b
    }

    /// Conventions where they exist (one metric for several families, attributes renamed and
    /// fixed, integers as integers), proctor's own names elsewhere, a histogram's cumulative
    /// buckets made per-bucket counts, every point at its time, counters from the start given.
    #[test]
    fn families_become_convention_metrics_or_their_own_dotted_names() {
        let resource = vec![("service.name".to_string(), "proctor".to_string())];
        let body = encode(&batch(), &resource, 1_000);
        let req = decode(&body).expect("decodes");
        let rm = &req.resource_metrics[0];
        assert_eq!(value(&rm.resource.as_ref().expect("resource").attributes[0]), "proctor");
        let metrics = &rm.scope_metrics[0].metrics;
        let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "system.cpu.time",
                "system.memory.usage",
                "proctor.host.load1",
                "proctor.process.pss",
                "proctor.agent.sample.duration"
            ]
        );
        let Some(metric::Data::Sum(cpu)) = &metrics[0].data else { panic!("a sum: {:?}", metrics[0]) };
        assert!(cpu.is_monotonic && cpu.aggregation_temporality == proto::CUMULATIVE);
        assert_eq!(metrics[0].unit, "s");
        assert_eq!(cpu.data_points.len(), 2);
        let p = &cpu.data_points[1];
        let attrs: Vec<(String, String)> = p.attributes.iter().map(|kv| (kv.key.clone(), value(kv))).collect();
        assert_eq!(attrs, [("cpu.logical_number".into(), "1i".into()), ("cpu.mode".into(), "interrupt".into())]);
        assert_eq!((p.start_time_unix_nano, p.time_unix_nano), (1_000, 3_000_000_000));
        assert_eq!(p.value, Some(number_data_point::Value::AsDouble(1.5)));

        let Some(metric::Data::Sum(mem)) = &metrics[1].data else { panic!("an up-down sum") };
        assert!(!mem.is_monotonic);
        let states: Vec<String> = mem.data_points.iter().map(|p| value(&p.attributes[0])).collect();
        assert_eq!(states, ["free", "free", "cached", "cached"]);

        let Some(metric::Data::Gauge(load)) = &metrics[2].data else { panic!("a gauge") };
        assert_eq!((metrics[2].unit.as_str(), load.data_points[0].start_time_unix_nano), ("", 0));
        let Some(metric::Data::Gauge(pss)) = &metrics[3].data else { panic!("a gauge") };
        let attrs: Vec<(String, String)> =
            pss.data_points[0].attributes.iter().map(|kv| (kv.key.clone(), value(kv))).collect();
        assert_eq!(
            attrs,
            [
                ("process.command_line".into(), "api --x".into()),
                ("process.executable.name".into(), "api".into()),
                ("process.pid".into(), "42i".into())
            ]
        );
        assert_eq!(metrics[3].unit, "By");

        let Some(metric::Data::Histogram(h)) = &metrics[4].data else { panic!("a histogram") };
        assert_eq!(metrics[4].unit, "s");
        assert_eq!(h.data_points.len(), 2);
        let p = &h.data_points[0];
        assert_eq!(
            (p.explicit_bounds.as_slice(), p.bucket_counts.as_slice()),
            ([0.001, 0.01].as_slice(), [2, 3, 1].as_slice())
        );
        assert_eq!((p.count, p.sum, p.time_unix_nano), (6, Some(0.05), 2_000_000_000));
    }

    /// The conventions' table as docs/scale-out.md shows it.
    fn conventions_table() -> String {
        let mut out = String::from(
            "| `/metrics` family | OpenTelemetry metric | unit | kind | attributes | catalog series it carries |\n\
             | --- | --- | --- | --- | --- | --- |\n",
        );
        for c in CONVENTIONS {
            let mut attrs: Vec<String> = c.labels.iter().map(|(l, a)| format!("`{a}` (from `{l}`)")).collect();
            if let Some((k, v)) = c.fixed {
                attrs.push(format!("`{k}={v}`"));
            }
            let kind = match c.instrument {
                Instrument::Counter => "counter",
                Instrument::UpDownCounter => "up-down counter",
                Instrument::Gauge => "gauge",
            };
            let attrs = if attrs.is_empty() { "—".to_string() } else { attrs.join(", ") };
            let series: Vec<String> = catalog_series(c).iter().map(|s| format!("`{s}`")).collect();
            let series = if series.is_empty() { "—".to_string() } else { series.join(", ") };
            out.push_str(&format!("| `{}` | `{}` | `{}` | {kind} | {attrs} | {series} |\n", c.family, c.name, c.unit));
        }
        out
    }

    /// docs/scale-out.md lists the mapping as the code has it.
    #[test]
    fn the_docs_list_every_convention() {
        let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/scale-out.md"))
            .expect("docs/scale-out.md");
        let table = conventions_table();
        assert!(docs.contains(&table), "docs/scale-out.md lacks the conventions' table as the code has it:\n{table}");
    }

    /// Every catalog series made from a family with a convention is found, and the family of
    /// every convention exists on `/metrics` as a catalog series' source or by itself.
    #[test]
    fn the_catalog_series_each_convention_carries() {
        let cpu = convention("proctor_host_cpu_seconds").expect("cpu");
        let carried = catalog_series(cpu);
        assert!(
            carried.contains(&"host.cpu.busy_percent") && carried.contains(&"host.cpu.user_percent"),
            "{carried:?}"
        );
        let used = convention("proctor_host_memory_available_bytes").expect("available");
        assert!(catalog_series(used).contains(&"host.memory.used_bytes"), "{:?}", catalog_series(used));
        assert!(catalog_series(convention("proctor_process_threads").expect("threads")).is_empty());
    }

    #[test]
    fn own_names_drop_the_unit_suffix_into_the_unit() {
        assert_eq!(own_name("proctor_host_memory_available_bytes"), ("proctor.host.memory.available".into(), "By"));
        assert_eq!(
            own_name("proctor_group_network_receive_bytes_per_second"),
            ("proctor.group.network.receive".into(), "By/s")
        );
        assert_eq!(own_name("proctor_gpu_busy_ratio"), ("proctor.gpu.busy".into(), "1"));
        assert_eq!(own_name("proctor_host_load1"), ("proctor.host.load1".into(), ""));
    }

    #[test]
    fn a_container_id_is_found_in_the_cgroup_path() {
        let id = "0123456789abcdef".repeat(4);
        assert_eq!(container_id_in(&format!("0::/system.slice/docker-{id}.scope\n")), Some(id.clone()));
        assert_eq!(container_id_in(&format!("12:cpu:/docker/{id}\n0::/\n")), Some(id));
        assert_eq!(container_id_in("0::/user.slice/session-2.scope\n"), None);
    }

    #[test]
    fn a_partial_success_says_what_was_refused() {
        let reply = proto::ExportMetricsServiceResponse {
            partial_success: Some(proto::ExportMetricsPartialSuccess {
                rejected_data_points: 3,
                error_message: "out of order".into(),
            }),
        };
        let body = prost::Message::encode_to_vec(&reply);
        assert_eq!(rejected(&body), Some((3, "out of order".into())));
        assert_eq!(rejected(b""), None, "an empty body is a whole success");
    }
}
