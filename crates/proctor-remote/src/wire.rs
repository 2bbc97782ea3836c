//! The remote-write messages and their encoding: protobuf, then snappy's block format.
//!
//! Version 1.0 is `prometheus.WriteRequest` (prompb/remote.proto and types.proto): series with
//! their labels spelled out, `__name__` among them, sorted by name; samples in time order; the
//! families' metadata in a list of their own. Version 2.0 is `io.prometheus.write.v2.Request`:
//! every string once in `symbols` (the first one empty), series naming theirs by index, and
//! each series carrying its own metadata. Only the fields proctor sends are declared: a decoder
//! skips the rest, and tests decode with these same messages.

use std::collections::HashMap;

use crate::series::{Batch, MetricType};

/// `Content-Type` of a version 1.0 request.
pub const V1_CONTENT_TYPE: &str = "application/x-protobuf";
/// `X-Prometheus-Remote-Write-Version` of a version 1.0 request.
pub const V1_VERSION: &str = "0.1.0";
/// `Content-Type` of a version 2.0 request: the message is named in the media type.
pub const V2_CONTENT_TYPE: &str = "application/x-protobuf;proto=io.prometheus.write.v2.Request";
pub const V2_VERSION: &str = "2.0.0";

/// Which protocol a remote speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    pub fn content_type(self) -> &'static str {
        match self {
            Version::V1 => V1_CONTENT_TYPE,
            Version::V2 => V2_CONTENT_TYPE,
        }
    }

    pub fn header(self) -> &'static str {
        match self {
            Version::V1 => V1_VERSION,
            Version::V2 => V2_VERSION,
        }
    }
}

pub mod v1 {
    //! `prometheus.WriteRequest` and the types it uses.

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct WriteRequest {
        #[prost(message, repeated, tag = "1")]
        pub timeseries: Vec<TimeSeries>,
        #[prost(message, repeated, tag = "3")]
        pub metadata: Vec<MetricMetadata>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TimeSeries {
        #[prost(message, repeated, tag = "1")]
        pub labels: Vec<Label>,
        #[prost(message, repeated, tag = "2")]
        pub samples: Vec<Sample>,
    }

    #[derive(Clone, PartialEq, Eq, prost::Message)]
    pub struct Label {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub value: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(double, tag = "1")]
        pub value: f64,
        /// Milliseconds since the Unix epoch.
        #[prost(int64, tag = "2")]
        pub timestamp: i64,
    }

    #[derive(Clone, PartialEq, Eq, prost::Message)]
    pub struct MetricMetadata {
        /// UNKNOWN 0, COUNTER 1, GAUGE 2, HISTOGRAM 3, GAUGEHISTOGRAM 4, SUMMARY 5, INFO 6, STATESET 7.
        #[prost(int32, tag = "1")]
        pub r#type: i32,
        #[prost(string, tag = "2")]
        pub metric_family_name: String,
        #[prost(string, tag = "4")]
        pub help: String,
        #[prost(string, tag = "5")]
        pub unit: String,
    }
}

pub mod v2 {
    //! `io.prometheus.write.v2.Request` and the types it uses.

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Request {
        #[prost(string, repeated, tag = "4")]
        pub symbols: Vec<String>,
        #[prost(message, repeated, tag = "5")]
        pub timeseries: Vec<TimeSeries>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TimeSeries {
        /// Pairs of indexes into `symbols`: name, value, name, value…
        #[prost(uint32, repeated, tag = "1")]
        pub labels_refs: Vec<u32>,
        #[prost(message, repeated, tag = "2")]
        pub samples: Vec<Sample>,
        #[prost(message, optional, tag = "5")]
        pub metadata: Option<Metadata>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(double, tag = "1")]
        pub value: f64,
        #[prost(int64, tag = "2")]
        pub timestamp: i64,
    }

    #[derive(Clone, PartialEq, Eq, prost::Message)]
    pub struct Metadata {
        /// The same numbering as version 1's, 0 being "unspecified".
        #[prost(int32, tag = "1")]
        pub r#type: i32,
        #[prost(uint32, tag = "3")]
        pub help_ref: u32,
        #[prost(uint32, tag = "4")]
        pub unit_ref: u32,
    }
}

fn type_number(t: MetricType) -> i32 {
    match t {
        MetricType::Counter => 1,
        MetricType::Gauge => 2,
        MetricType::Histogram => 3,
    }
}

/// A batch as a version 1.0 `WriteRequest`: one series per label set, labels sorted by name
/// (`__name__` first among equals by byte order), samples in time order; metadata once per family.
pub fn v1_request(batch: &Batch) -> v1::WriteRequest {
    let timeseries = batch
        .series
        .iter()
        .map(|(labels, points)| v1::TimeSeries {
            labels: labels.iter().map(|(name, value)| v1::Label { name: name.clone(), value: value.clone() }).collect(),
            samples: points.iter().map(|&(timestamp, value)| v1::Sample { value, timestamp }).collect(),
        })
        .collect();
    let metadata = batch
        .metadata
        .iter()
        .map(|(name, m)| v1::MetricMetadata {
            r#type: type_number(m.kind),
            metric_family_name: name.clone(),
            help: m.help.to_string(),
            unit: m.unit.to_string(),
        })
        .collect();
    v1::WriteRequest { timeseries, metadata }
}

/// A batch as a version 2.0 `Request`: every string interned once in `symbols` (index 0 is the
/// empty string, as the protocol requires), each series with its family's metadata.
pub fn v2_request(batch: &Batch) -> v2::Request {
    let mut symbols = vec![String::new()];
    let mut index: HashMap<String, u32> = HashMap::from([(String::new(), 0)]);
    let mut intern = |s: &str| -> u32 {
        if let Some(&i) = index.get(s) {
            return i;
        }
        let i = symbols.len() as u32;
        symbols.push(s.to_string());
        index.insert(s.to_string(), i);
        i
    };
    let mut timeseries = Vec::with_capacity(batch.series.len());
    for (labels, points) in &batch.series {
        let mut labels_refs = Vec::with_capacity(labels.len() * 2);
        let mut family = None;
        for (name, value) in labels {
            labels_refs.push(intern(name));
            labels_refs.push(intern(value));
            if name == "__name__" {
                family = batch.family_of(value);
            }
        }
        let metadata = family.map(|m| v2::Metadata {
            r#type: type_number(m.kind),
            help_ref: intern(m.help),
            unit_ref: intern(m.unit),
        });
        timeseries.push(v2::TimeSeries {
            labels_refs,
            samples: points.iter().map(|&(timestamp, value)| v2::Sample { value, timestamp }).collect(),
            metadata,
        });
    }
    v2::Request { symbols, timeseries }
}

/// The request body: the message in `version`'s encoding, snappy-compressed (block format).
pub fn encode(batch: &Batch, version: Version) -> Vec<u8> {
    let raw = match version {
        Version::V1 => prost::Message::encode_to_vec(&v1_request(batch)),
        Version::V2 => prost::Message::encode_to_vec(&v2_request(batch)),
    };
    // Compressing a buffer in memory cannot fail but for a length beyond snappy's 2^32 bound,
    // which a batch (bounded in samples) never reaches.
    snap::raw::Encoder::new().compress_vec(&raw).expect("a batch fits snappy's block limit")
}

/// A body back into a version 1.0 request (tests, and anyone checking what was sent).
pub fn decode_v1(body: &[u8]) -> Result<v1::WriteRequest, String> {
    let raw = snap::raw::Decoder::new().decompress_vec(body).map_err(|e| format!("snappy: {e}"))?;
    prost::Message::decode(raw.as_slice()).map_err(|e| format!("protobuf: {e}"))
}

/// A body back into a version 2.0 request.
pub fn decode_v2(body: &[u8]) -> Result<v2::Request, String> {
    let raw = snap::raw::Decoder::new().decompress_vec(body).map_err(|e| format!("snappy: {e}"))?;
    prost::Message::decode(raw.as_slice()).map_err(|e| format!("protobuf: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proctor_http::prom::{Family, Kind};

    fn batch() -> Batch {
        let mut cpu = Family::new("proctor_host_cpu_seconds", Kind::Counter, "CPU time.");
        cpu.push(vec![("mode", "user".into())], 1.5);
        let mut load = Family::new("proctor_host_load1", Kind::Gauge, "Load.");
        load.push(Vec::new(), 0.25);
        let mut b = Batch::default();
        let external = [("instance".to_string(), "box".to_string())];
        b.add(&[cpu.clone(), load.clone()], 1_000_000_000, 1, &external);
        b.add(&[cpu, load], 2_000_000_000, 2, &external);
        b
    }

    #[test]
    fn version_1_decodes_back_to_what_was_batched() {
        let body = encode(&batch(), Version::V1);
        assert!(snap::raw::decompress_len(&body).is_ok(), "snappy block format");
        let r = decode_v1(&body).expect("decodes");
        assert_eq!(r.timeseries.len(), 2);
        let cpu = &r.timeseries[0];
        let names: Vec<&str> = cpu.labels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["__name__", "instance", "mode"], "sorted by name");
        assert_eq!(cpu.labels[0].value, "proctor_host_cpu_seconds_total");
        assert_eq!(cpu.samples.iter().map(|s| (s.timestamp, s.value)).collect::<Vec<_>>(), [(1000, 1.5), (2000, 1.5)]);
        let meta: Vec<(&str, i32, &str)> =
            r.metadata.iter().map(|m| (m.metric_family_name.as_str(), m.r#type, m.unit.as_str())).collect();
        assert_eq!(meta, [("proctor_host_cpu_seconds_total", 1, "seconds"), ("proctor_host_load1", 2, "")]);
    }

    #[test]
    fn version_2_interns_every_string_once_with_the_empty_one_first() {
        let r = decode_v2(&encode(&batch(), Version::V2)).expect("decodes");
        assert_eq!(r.symbols[0], "");
        let mut unique = r.symbols.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), r.symbols.len(), "no string twice: {:?}", r.symbols);
        let load = &r.timeseries[1];
        let labels: Vec<&str> = load.labels_refs.iter().map(|&i| r.symbols[i as usize].as_str()).collect();
        assert_eq!(labels, ["__name__", "proctor_host_load1", "instance", "box"]);
        let meta = load.metadata.as_ref().expect("metadata per series");
        assert_eq!((meta.r#type, r.symbols[meta.help_ref as usize].as_str()), (2, "Load."));
        assert_eq!(load.samples.len(), 2);
    }
}
