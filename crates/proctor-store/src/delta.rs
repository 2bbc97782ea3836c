//! Version-2 delta records: a sample as what differs from its *base* sample. Pure: no files,
//! no compression (see `codec`).
//!
//! Most of a host's processes are idle, and an idle process's `ProcessSample` is identical from
//! one sample to the next (the sampler keeps the parse of a byte-identical `stat` line). So a
//! delta names, in the sample's own process order:
//!
//! ```text
//! delta = {"base": B, ["anchor": true,] "rest": PATCH, "rows": [OP, ...]}
//! OP    = {"k": [i, n]}            the base's rows i..i+n, unchanged
//!       | {"p": {"@": i, F: V..}}  the base's row i with the fields F changed to V (same pid
//!                                  and start time; a field that became None is `null`)
//!       | {"n": ProcessSample}     a row the base does not have (a new process, a reused pid)
//! ```
//!
//! The sample's ended processes ride beside `rest` whole (nothing to patch: each sample lists
//! new ones), as `"ended"`, a table ([`EndedTable`]): each distinct name, executable and cgroup
//! path once in `strings`, each distinct command line once in `cmdlines`, and one array of
//! numbers per process. A fork storm lists ~1,000 a second, mostly children of one parent with
//! one command line and cgroup; as objects (`"exited"`, which records before `ended` carry and
//! readers still take) each spelled out its field names and strings, ~4× the bytes to encode and
//! compress.
//!
//! The base is the frame `B` bytes before this one in the same segment: the chunk's key, or an
//! *anchor*, a delta marked as the base of the frames after it (every `anchor_frames` frames;
//! an anchor's base is the previous anchor or the key). Why not always the key: the PSS worker
//! refreshes every process's reading once a minute, so against a key up to 60 s old about half
//! the rows differ (measured with ~650 processes: ~400 changed rows per delta, 10.8 KB per delta
//! against the key, 2.1 KB against the previous sample). Anchors bound that drift at the price
//! of a short chain: decoding a frame decodes its key and the anchors between (at most 14 with
//! chunks of 60 and an anchor every 4), and damage to an anchor loses the frames after it in its
//! chunk (damage to another delta loses only that frame, as before).
//!
//! `rest` is everything but the processes (times, host, container, cost) as a patch of the
//! base's JSON value: a patch is either `[V]` (replace with V) or an object whose entries patch
//! the members (an object's by name, an array's of the same length by index). Nothing else is
//! ever a patch, so `null` and objects are values only inside `[ ]`.
//!
//! Rows are compared field by field (`ProcessSample` is destructured without `..`, so a new
//! field fails to compile here until it is carried); `rest` is compared as JSON, so new fields
//! of the host, the container or the cost are carried without a change here. A reader of a
//! newer build's patch ignores members it does not know, as for JSON records; a patch from an
//! older build leaves a field the writer did not have as the base has it (read as absent: None).
//!
//! The writer holds the base's rows (cloned: the strings are shared `Arc`s) and the base's
//! `rest` as a JSON value; the reader holds the decoded base sample and its `rest` value.
//!
//! A delta can only describe its base: each base row is taken at most once (kept or patched),
//! so a decoded sample has at most the base's rows plus the new rows the record spells out. A
//! reader holds `rows` and `rest` as text ([`DeltaRecord`]) until it has the base, then parses
//! them against it: taking more rows than the base has fails while parsing, before anything is
//! built, and a `rest` patch far larger than the base's rest is refused unparsed (a patch names
//! what changed in a host part; 1 KB of `[0,0,…]` would be 16 KB of JSON values). A hand-built
//! 1 KB delta that kept the same 20 rows 200,000 times decoded into 4 million rows (~1.6 GB)
//! before this bound.

use std::collections::HashMap;
use std::sync::Arc;

use proctor_model::{
    ContainerSample, ExitedProcess, GpuSample, HostSample, ProcessNet, ProcessSample, PssReading, Sample, SampleCost,
    SampleGroups, Stall, StatusReading, TaskSample,
};
use proctor_procfs::process::Io;
use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::codec::CodecError;

/// The sample deltas are taken against (a key's or an anchor's), with what comparing needs.
#[derive(Debug, Clone)]
pub struct KeySample {
    /// The base sample's processes, as written (writer) or decoded (reader).
    processes: Vec<ProcessSample>,
    /// Everything but the processes, as JSON ([`rest_value`]).
    rest: Value,
    /// pid → index in `processes`, for rows that are not where the last match predicts (the
    /// writer's; a reader only follows indices).
    by_pid: HashMap<u32, u32>,
    /// [`value_bytes`] of `rest`: what a patch of it may be measured against.
    rest_bytes: usize,
    /// The base sample's ended processes (not in `rest`: each delta carries its own whole).
    exited: Vec<ExitedProcess>,
}

impl KeySample {
    /// A base indexed by pid, with the sample's ended processes ([`KeySample::sample`] gives
    /// them back).
    pub fn new(sample: &Sample) -> KeySample {
        KeySample { exited: sample.exited.clone(), ..KeySample::for_deltas(sample) }
    }

    /// The writer's base: indexed by pid, and without the sample's ended processes, which no
    /// delta is compared with (each carries its own whole). A storm's anchor copied ~1,000 of
    /// them and kept them for nothing.
    pub fn for_deltas(sample: &Sample) -> KeySample {
        let by_pid = sample.processes.iter().enumerate().map(|(i, p)| (p.pid, i as u32)).collect();
        let rest = rest_value(sample);
        KeySample {
            processes: sample.processes.clone(),
            rest_bytes: value_bytes(&rest),
            rest,
            by_pid,
            exited: Vec::new(),
        }
    }

    /// A reader's base, taking the sample's processes.
    pub fn from_sample(mut sample: Sample) -> KeySample {
        let rest = rest_value(&sample);
        let rest_bytes = value_bytes(&rest);
        KeySample {
            processes: std::mem::take(&mut sample.processes),
            rest,
            by_pid: HashMap::new(),
            rest_bytes,
            exited: std::mem::take(&mut sample.exited),
        }
    }

    /// The base sample itself.
    pub fn sample(&self) -> Result<Sample, CodecError> {
        let mut sample: Sample = Sample::deserialize(&self.rest).map_err(CodecError::Parse)?;
        sample.processes = self.processes.clone();
        sample.exited = self.exited.clone();
        Ok(sample)
    }

    /// The base after `delta` (an anchor read on the way to a later frame): the rest patched in
    /// place and the rows moved, never a whole sample built.
    pub fn advance(mut self, delta: &DeltaRecord<'_>) -> Result<KeySample, CodecError> {
        let patch = delta.rest_patch(&self)?;
        let ops = delta.row_ops(self.processes.len())?;
        apply(&mut self.rest, patch)?;
        let mut old: Vec<Option<ProcessSample>> = self.processes.into_iter().map(Some).collect();
        let mut processes = Vec::with_capacity(old.len());
        for op in ops {
            match op {
                RowOp::Keep(from, n) => {
                    let (from, n) = (from as usize, n as usize);
                    let kept = from.checked_add(n).and_then(|to| old.get_mut(from..to)).ok_or(ROW_TAKEN)?;
                    for row in kept {
                        processes.push(row.take().ok_or(ROW_TAKEN)?);
                    }
                }
                RowOp::Patch(patch) => {
                    let row = old.get_mut(patch.key as usize).and_then(Option::take).ok_or(ROW_TAKEN)?;
                    processes.push(apply_row(row, *patch));
                }
                RowOp::New(row) => processes.push(*row),
            }
        }
        let rest_bytes = value_bytes(&self.rest);
        let exited = delta.exited()?;
        Ok(KeySample { processes, rest: self.rest, by_pid: HashMap::new(), rest_bytes, exited })
    }

    /// Bytes held beyond the strings the rows share with the sampler's samples (an estimate:
    /// the rows, the pid index and the JSON of the rest).
    pub fn held_bytes(&self) -> usize {
        self.processes.capacity() * std::mem::size_of::<ProcessSample>()
            + self.by_pid.capacity() * (std::mem::size_of::<(u32, u32)>() + 1)
            + value_bytes(&self.rest)
    }

    fn find(&self, pid: u32, guess: usize) -> Option<usize> {
        match self.processes.get(guess) {
            Some(p) if p.pid == pid => Some(guess),
            _ => self.by_pid.get(&pid).map(|&i| i as usize),
        }
    }
}

fn value_bytes(v: &Value) -> usize {
    std::mem::size_of::<Value>()
        + match v {
            Value::String(s) => s.capacity(),
            Value::Array(a) => a.iter().map(value_bytes).sum(),
            // A BTreeMap entry: key, value, and about a pointer of node overhead.
            Value::Object(m) => m.iter().map(|(k, v)| k.capacity() + 24 + 8 + value_bytes(v)).sum(),
            _ => 0,
        }
}

/// A sample without its processes, serialized under `Sample`'s own field names so that it
/// deserializes as a `Sample` (with no processes).
#[derive(Serialize)]
struct Rest<'a> {
    seq: u64,
    unix_ns: u64,
    mono_ns: u64,
    clock_ticks_per_sec: u64,
    page_size: u64,
    host: &'a HostSample,
    container: &'a Option<ContainerSample>,
    processes: [ProcessSample; 0],
    cost: &'a SampleCost,
    groups: &'a Option<Arc<SampleGroups>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu: &'a Option<Arc<GpuSample>>,
}

fn rest_value(sample: &Sample) -> Value {
    // Without `..`: a field added to `Sample` must be added to `Rest` too.
    let Sample {
        seq,
        unix_ns,
        mono_ns,
        clock_ticks_per_sec,
        page_size,
        host,
        container,
        processes: _,
        cost,
        groups,
        gpu,
        // Written beside the rest, whole: a list of new rows each sample, no patch to take.
        exited: _,
    } = sample;
    let rest = Rest {
        seq: *seq,
        unix_ns: *unix_ns,
        mono_ns: *mono_ns,
        clock_ticks_per_sec: *clock_ticks_per_sec,
        page_size: *page_size,
        host,
        container,
        processes: [],
        cost,
        groups,
        gpu,
    };
    // Plain structs and string-keyed maps always serialize.
    serde_json::to_value(rest).expect("a sample always serializes to JSON")
}

/// A version-2 delta record as read: where its base is and whether it is an anchor, with its
/// `rest` patch and `rows` still text (borrowed from the decompressed record), parsed only
/// against the base ([`decode_delta`], [`KeySample::advance`]).
#[derive(Debug, Deserialize)]
pub struct DeltaRecord<'a> {
    /// How many bytes before this frame its base frame starts (the chunk's key, or an anchor).
    pub base: u64,
    /// Whether later frames may take this one as their base.
    #[serde(default)]
    pub anchor: bool,
    #[serde(borrow)]
    rest: &'a RawValue,
    #[serde(borrow)]
    rows: &'a RawValue,
    /// The sample's ended processes, whole, as objects (records written before `ended`).
    #[serde(default, borrow)]
    exited: Option<&'a RawValue>,
    /// The sample's ended processes as a table (absent with `exited`: none).
    #[serde(default, borrow)]
    ended: Option<&'a RawValue>,
}

/// A delta record as written, but for its ended processes: `ended` ([`EndedTableOut::write`])
/// follows `rows` when there are any.
#[derive(Serialize)]
struct DeltaOut<'a> {
    base: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    anchor: bool,
    rest: Value,
    rows: &'a [RowOp],
}

/// A delta's ended processes, as written: see the module's doc. A row is
/// `[pid, ppid, start_ticks, lifetime_ns, end_unix_ns, comm, cmdline, exe, cgroup, wait_status,
/// user_ns, system_ns, children_ns, minflt, majflt, peak_rss_bytes, seen]`, where `comm`, `exe`
/// and `cgroup` index `strings` and `cmdline` indexes `cmdlines` (`null`: none); `nets` pairs a
/// row's index with its network counters, for the few that have them. Written by hand
/// ([`EndedTableOut::write`]); this is what it gathers besides the rows.
struct EndedTableOut<'a> {
    strings: Vec<&'a str>,
    cmdlines: Vec<&'a [String]>,
    nets: Vec<(u32, &'a ProcessNet)>,
}

/// [`EndedTableOut`] as read.
#[derive(Deserialize)]
struct EndedTable {
    strings: Vec<Arc<str>>,
    cmdlines: Vec<Arc<[String]>>,
    rows: Vec<EndedRow>,
    #[serde(default)]
    nets: Vec<(u32, ProcessNet)>,
}

/// One ended process of an [`EndedTable`]: `ExitedProcess`'s fields in its order, strings as
/// indices. Read through serde; written by [`write_row`] (serde writes it only in a test, to
/// hold the two equal).
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct EndedRow(
    u32,
    u32,
    u64,
    u64,
    u64,
    u32,
    Option<u32>,
    Option<u32>,
    Option<u32>,
    u32,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    bool,
);

impl<'a> EndedTableOut<'a> {
    /// Appends the table of `exited` (at least one) to `out`: its rows first, straight into
    /// `out` as each string and command line gets its index, then the strings, the command
    /// lines and any network counters (JSON's members in any order: readers take them by
    /// name). A storm's ~100 KB of rows built apart and copied in were a list of their own to
    /// fault in each frame.
    fn write(exited: &'a [ExitedProcess], out: &mut Vec<u8>) {
        let mut table = EndedTableOut { strings: Vec::new(), cmdlines: Vec::new(), nets: Vec::new() };
        let mut strings: HashMap<&'a str, u32> = HashMap::new();
        let mut cmdlines: HashMap<&'a [String], u32> = HashMap::new();
        // Rows in a row share their strings' allocations (the sampler shares an ended process's
        // name, and a cgroup's path): each field's last string is checked by address first.
        let mut last: [(*const u8, usize, u32); 3] = [(std::ptr::null(), 0, 0); 3];
        let mut string = |field: usize, s: &'a str| {
            let (at, len, i) = last[field];
            if std::ptr::eq(at, s.as_ptr()) && len == s.len() {
                return i;
            }
            let i = *strings.entry(s).or_insert_with(|| {
                table.strings.push(s);
                (table.strings.len() - 1) as u32
            });
            last[field] = (s.as_ptr(), s.len(), i);
            i
        };
        out.extend_from_slice(b"{\"rows\":[");
        for (i, x) in exited.iter().enumerate() {
            // Destructured without `..`: a field added to `ExitedProcess` fails to compile here
            // until the table carries it.
            let ExitedProcess {
                pid,
                ppid,
                start_ticks,
                lifetime_ns,
                end_unix_ns,
                comm,
                cmdline,
                exe,
                cgroup,
                wait_status,
                user_ns,
                system_ns,
                children_ns,
                minflt,
                majflt,
                peak_rss_bytes,
                seen,
                net,
            } = x;
            let cmdline = cmdline.as_deref().map(|c| {
                *cmdlines.entry(c).or_insert_with(|| {
                    table.cmdlines.push(c);
                    (table.cmdlines.len() - 1) as u32
                })
            });
            let row = EndedRow(
                *pid,
                *ppid,
                *start_ticks,
                *lifetime_ns,
                *end_unix_ns,
                string(0, comm),
                cmdline,
                exe.as_deref().map(|e| string(1, e)),
                cgroup.as_deref().map(|c| string(2, c)),
                *wait_status,
                *user_ns,
                *system_ns,
                *children_ns,
                *minflt,
                *majflt,
                *peak_rss_bytes,
                *seen,
            );
            if i > 0 {
                out.push(b',');
            }
            write_row(out, &row);
            if let Some(net) = net {
                table.nets.push((i as u32, net));
            }
        }
        out.extend_from_slice(b"],\"strings\":");
        serde_json::to_writer(&mut *out, &table.strings).expect("strings always serialize to JSON");
        out.extend_from_slice(b",\"cmdlines\":");
        serde_json::to_writer(&mut *out, &table.cmdlines).expect("command lines always serialize to JSON");
        if !table.nets.is_empty() {
            out.extend_from_slice(b",\"nets\":");
            serde_json::to_writer(&mut *out, &table.nets).expect("network counters always serialize to JSON");
        }
        out.push(b'}');
    }
}

/// Appends `row` as serde_json writes it (an array of its fields: numbers, `null` for none,
/// `true`/`false`), so that a storm's ~1,000 a frame go straight into the record.
fn write_row(out: &mut Vec<u8>, row: &EndedRow) {
    // By position: a field added to `EndedRow` and left out here fails
    // `ended_rows_written_by_hand_are_what_serde_writes`.
    let mut digits = itoa::Buffer::new();
    let mut number = |out: &mut Vec<u8>, n: u64| {
        out.extend_from_slice(digits.format(n).as_bytes());
        out.push(b',');
    };
    // 17 fields of at most 20 digits and a comma each, and the brackets.
    out.reserve(17 * 21 + 2);
    out.push(b'[');
    for n in [u64::from(row.0), u64::from(row.1), row.2, row.3, row.4, u64::from(row.5)] {
        number(out, n);
    }
    for n in [row.6, row.7, row.8] {
        match n {
            Some(n) => number(out, u64::from(n)),
            None => out.extend_from_slice(b"null,"),
        }
    }
    number(out, u64::from(row.9));
    for n in [row.10, row.11, row.12, row.13, row.14, row.15] {
        number(out, n);
    }
    out.extend_from_slice(if row.16 { b"true]" } else { b"false]" });
}

impl EndedTable {
    /// The ended processes, their strings shared; an index past its table is refused.
    fn processes(self) -> Result<Vec<ExitedProcess>, CodecError> {
        const BAD: CodecError = CodecError::Delta("an ended process names a string its table does not have");
        let EndedTable { strings, cmdlines, rows, nets } = self;
        let string = |i: u32| strings.get(i as usize).cloned().ok_or(BAD);
        let maybe = |i: Option<u32>| i.map(string).transpose();
        let mut out = Vec::with_capacity(rows.len());
        for EndedRow(
            pid,
            ppid,
            start_ticks,
            lifetime_ns,
            end_unix_ns,
            comm,
            cmdline,
            exe,
            cgroup,
            wait_status,
            user_ns,
            system_ns,
            children_ns,
            minflt,
            majflt,
            peak_rss_bytes,
            seen,
        ) in rows
        {
            out.push(ExitedProcess {
                pid,
                ppid,
                start_ticks,
                lifetime_ns,
                end_unix_ns,
                comm: string(comm)?,
                cmdline: cmdline.map(|i| cmdlines.get(i as usize).cloned().ok_or(BAD)).transpose()?,
                exe: maybe(exe)?,
                cgroup: maybe(cgroup)?,
                wait_status,
                user_ns,
                system_ns,
                children_ns,
                minflt,
                majflt,
                peak_rss_bytes,
                seen,
                net: None,
            });
        }
        for (i, net) in nets {
            let x = out.get_mut(i as usize).ok_or(CodecError::Delta("network counters for a row the table lacks"))?;
            x.net = Some(Box::new(net));
        }
        Ok(out)
    }
}

/// A delta that takes a base row twice, or one the base does not have.
const ROW_TAKEN: CodecError = CodecError::Delta("a row beyond the base's, or used twice");

/// A `rest` patch may be this much larger than the base's rest (as [`value_bytes`] counts it)
/// before it is refused unparsed: twice the base, and 64 KiB besides for parts that appear
/// (a container part, new disks). Measured rest patches are a few hundred bytes.
const REST_SLACK_BYTES: usize = 64 << 10;

impl<'a> DeltaRecord<'a> {
    /// Parses a record's fields, leaving `rest` and `rows` as text: nothing is built that its
    /// base has not been seen to allow.
    pub fn parse(record: &'a [u8]) -> Result<DeltaRecord<'a>, CodecError> {
        serde_json::from_slice(record).map_err(CodecError::Parse)
    }

    /// The ended processes the record lists: at most as many as a sample keeps.
    fn exited(&self) -> Result<Vec<ExitedProcess>, CodecError> {
        let list: Vec<ExitedProcess> = match (self.exited, self.ended) {
            (None, None) => return Ok(Vec::new()),
            (Some(raw), None) => serde_json::from_str(raw.get()).map_err(CodecError::Parse)?,
            (None, Some(raw)) => {
                serde_json::from_str::<EndedTable>(raw.get()).map_err(CodecError::Parse)?.processes()?
            }
            (Some(_), Some(_)) => return Err(CodecError::Delta("a delta lists its ended processes twice")),
        };
        if list.len() > proctor_model::MAX_EXITED {
            return Err(CodecError::Delta("more ended processes than a sample keeps"));
        }
        Ok(list)
    }

    /// The `rest` patch as a value, unless its text is far larger than `base`'s rest.
    fn rest_patch(&self, base: &KeySample) -> Result<Value, CodecError> {
        if self.rest.get().len() > base.rest_bytes.saturating_mul(2).saturating_add(REST_SLACK_BYTES) {
            return Err(CodecError::Delta("a patch of the rest far larger than its base's rest"));
        }
        serde_json::from_str(self.rest.get()).map_err(CodecError::Parse)
    }

    /// The row operations, parsed one at a time: taking more rows from the base than its
    /// `base_rows` fails at the operation that does, so at most `base_rows` keeps and patches
    /// are ever built. (Which rows, and each only once, is checked where they are taken.)
    fn row_ops(&self, base_rows: usize) -> Result<Vec<RowOp>, CodecError> {
        let mut parser = serde_json::Deserializer::from_str(self.rows.get());
        let ops = RowsSeed { base_rows }.deserialize(&mut parser).map_err(CodecError::Parse)?;
        parser.end().map_err(CodecError::Parse)?;
        Ok(ops)
    }
}

/// Parses a delta's `rows` array, counting the base rows each operation takes.
struct RowsSeed {
    base_rows: usize,
}

impl<'de> DeserializeSeed<'de> for RowsSeed {
    type Value = Vec<RowOp>;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Vec<RowOp>, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for RowsSeed {
    type Value = Vec<RowOp>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of row operations")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<RowOp>, A::Error> {
        use serde::de::Error;
        let mut ops = Vec::new();
        let mut taken: usize = 0;
        while let Some(op) = seq.next_element::<RowOp>()? {
            taken = taken.saturating_add(match &op {
                // The writer never keeps zero rows; allowing it would let a record hold any
                // number of operations that take nothing.
                RowOp::Keep(_, 0) => return Err(A::Error::custom("a keep of no rows")),
                RowOp::Keep(_, n) => *n as usize,
                RowOp::Patch(_) => 1,
                RowOp::New(_) => 0,
            });
            if taken > self.base_rows {
                return Err(A::Error::custom("a delta takes more rows than its base has"));
            }
            ops.push(op);
        }
        Ok(ops)
    }
}

#[derive(Debug, Serialize, Deserialize)]
enum RowOp {
    /// The key's rows `.0 .. .0 + .1`, unchanged.
    #[serde(rename = "k")]
    Keep(u32, u32),
    // Boxed, so an operation is 16 bytes whatever it holds: a parsed record costs about what
    // its text did.
    #[serde(rename = "p")]
    Patch(Box<RowPatch>),
    #[serde(rename = "n")]
    New(Box<ProcessSample>),
}

/// The fields of a key row that changed; `None` is "as in the key". Fields that are `Option`s
/// in the row are `Some(None)` when they became `None` (written `null`).
#[derive(Debug, Default, Serialize, Deserialize)]
struct RowPatch {
    #[serde(rename = "@")]
    key: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ppid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    comm: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state: Option<char>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    utime_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stime_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    cutime_ticks: Option<Option<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    cstime_ticks: Option<Option<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    cminflt: Option<Option<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    cmajflt: Option<Option<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    open_fds: Option<Option<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    num_threads: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    minflt: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    majflt: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nice: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vsize_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    resident_bytes: Option<Option<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    status: Option<Option<StatusReading>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    io: Option<Option<Box<Io>>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    cmdline: Option<Option<Arc<[String]>>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pss: Option<Option<PssReading>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    cgroup: Option<Option<Arc<str>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tasks: Option<Vec<TaskSample>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    stall: Option<Option<Stall>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    net: Option<Option<Box<ProcessNet>>>,
}

/// A member that is present is `Some`, even when it is `null` (absent members are `default`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// `Some(new)` when it differs from `old`.
fn changed<T: PartialEq + Clone>(old: &T, new: &T) -> Option<T> {
    (old != new).then(|| new.clone())
}

/// The patch from `old` to `new` (same pid and start time), or `None` when they are equal.
fn row_patch(key: u32, old: &ProcessSample, new: &ProcessSample) -> Option<RowPatch> {
    // Without `..`: a field added to `ProcessSample` fails to compile until it is carried.
    let ProcessSample {
        pid: _,
        ppid,
        start_ticks: _,
        comm,
        state,
        utime_ticks,
        stime_ticks,
        cutime_ticks,
        cstime_ticks,
        cminflt,
        cmajflt,
        open_fds,
        num_threads,
        minflt,
        majflt,
        nice,
        vsize_bytes,
        resident_bytes,
        status,
        io,
        cmdline,
        pss,
        cgroup,
        tasks,
        stall,
        net,
        // Live only: not stored (see its doc).
        pss_stale: _,
        pss_estimate: _,
    } = new;
    // The cheap, usual case first: an idle process is unchanged.
    if old.utime_ticks == *utime_ticks
        && old.stime_ticks == *stime_ticks
        && old.cutime_ticks == *cutime_ticks
        && old.cstime_ticks == *cstime_ticks
        && old.cminflt == *cminflt
        && old.cmajflt == *cmajflt
        && old.open_fds == *open_fds
        && old.minflt == *minflt
        && old.state == *state
        && old.resident_bytes == *resident_bytes
        && old.ppid == *ppid
        && old.num_threads == *num_threads
        && old.majflt == *majflt
        && old.nice == *nice
        && old.vsize_bytes == *vsize_bytes
        && old.status == *status
        && old.io == *io
        && old.pss == *pss
        && old.comm == *comm
        && old.cmdline == *cmdline
        && old.cgroup == *cgroup
        && old.tasks == *tasks
        && old.stall == *stall
        && old.net == *net
    {
        return None;
    }
    Some(RowPatch {
        key,
        ppid: changed(&old.ppid, ppid),
        comm: changed(&old.comm, comm),
        state: changed(&old.state, state),
        utime_ticks: changed(&old.utime_ticks, utime_ticks),
        stime_ticks: changed(&old.stime_ticks, stime_ticks),
        cutime_ticks: changed(&old.cutime_ticks, cutime_ticks),
        cstime_ticks: changed(&old.cstime_ticks, cstime_ticks),
        cminflt: changed(&old.cminflt, cminflt),
        cmajflt: changed(&old.cmajflt, cmajflt),
        open_fds: changed(&old.open_fds, open_fds),
        num_threads: changed(&old.num_threads, num_threads),
        minflt: changed(&old.minflt, minflt),
        majflt: changed(&old.majflt, majflt),
        nice: changed(&old.nice, nice),
        vsize_bytes: changed(&old.vsize_bytes, vsize_bytes),
        resident_bytes: changed(&old.resident_bytes, resident_bytes),
        status: changed(&old.status, status),
        io: changed(&old.io, io),
        cmdline: changed(&old.cmdline, cmdline),
        pss: changed(&old.pss, pss),
        cgroup: changed(&old.cgroup, cgroup),
        tasks: changed(&old.tasks, tasks),
        stall: changed(&old.stall, stall),
        net: changed(&old.net, net),
    })
}

fn apply_row(mut row: ProcessSample, patch: RowPatch) -> ProcessSample {
    // Without `..`, like `row_patch`.
    let RowPatch {
        key: _,
        ppid,
        comm,
        state,
        utime_ticks,
        stime_ticks,
        cutime_ticks,
        cstime_ticks,
        cminflt,
        cmajflt,
        open_fds,
        num_threads,
        minflt,
        majflt,
        nice,
        vsize_bytes,
        resident_bytes,
        status,
        io,
        cmdline,
        pss,
        cgroup,
        tasks,
        stall,
        net,
    } = patch;
    fn set<T>(field: &mut T, value: Option<T>) {
        if let Some(value) = value {
            *field = value;
        }
    }
    set(&mut row.ppid, ppid);
    set(&mut row.comm, comm);
    set(&mut row.state, state);
    set(&mut row.utime_ticks, utime_ticks);
    set(&mut row.stime_ticks, stime_ticks);
    set(&mut row.cutime_ticks, cutime_ticks);
    set(&mut row.cstime_ticks, cstime_ticks);
    set(&mut row.cminflt, cminflt);
    set(&mut row.cmajflt, cmajflt);
    set(&mut row.open_fds, open_fds);
    set(&mut row.num_threads, num_threads);
    set(&mut row.minflt, minflt);
    set(&mut row.majflt, majflt);
    set(&mut row.nice, nice);
    set(&mut row.vsize_bytes, vsize_bytes);
    set(&mut row.resident_bytes, resident_bytes);
    set(&mut row.status, status);
    set(&mut row.io, io);
    set(&mut row.cmdline, cmdline);
    set(&mut row.pss, pss);
    set(&mut row.cgroup, cgroup);
    set(&mut row.tasks, tasks);
    set(&mut row.stall, stall);
    set(&mut row.net, net);
    row
}

/// The patch that turns `old` into `new`; `None` when they are equal.
fn diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) if o.len() == n.len() && n.keys().all(|k| o.contains_key(k)) => {
            let patch: Map<String, Value> =
                n.iter().filter_map(|(k, nv)| diff(&o[k.as_str()], nv).map(|d| (k.clone(), d))).collect();
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (Value::Array(o), Value::Array(n)) if o.len() == n.len() => {
            let patch: Map<String, Value> = o
                .iter()
                .zip(n)
                .enumerate()
                .filter_map(|(i, (ov, nv))| diff(ov, nv).map(|d| (i.to_string(), d)))
                .collect();
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ if old == new => None,
        _ => Some(Value::Array(vec![new.clone()])),
    }
}

/// Applies a patch made by [`diff`]. A member the target does not have is added when the patch
/// replaces it (a newer writer's field: ignored when deserialized) and skipped otherwise.
fn apply(target: &mut Value, patch: Value) -> Result<(), CodecError> {
    let bad = |why| Err(CodecError::Delta(why));
    match patch {
        Value::Array(mut replace) if replace.len() == 1 => {
            *target = replace.pop().expect("one element");
            Ok(())
        }
        Value::Object(members) => match target {
            Value::Object(t) => {
                for (k, sub) in members {
                    match t.get_mut(&k) {
                        Some(v) => apply(v, sub)?,
                        None => {
                            if let Value::Array(mut replace) = sub {
                                if replace.len() == 1 {
                                    t.insert(k, replace.pop().expect("one element"));
                                }
                            }
                        }
                    }
                }
                Ok(())
            }
            Value::Array(t) => {
                for (k, sub) in members {
                    let Some(v) = k.parse::<usize>().ok().and_then(|i| t.get_mut(i)) else {
                        return bad("a patch names an element the key does not have");
                    };
                    apply(v, sub)?;
                }
                Ok(())
            }
            _ => bad("a patch of members applied to a plain value"),
        },
        _ => bad("a patch is neither [value] nor an object"),
    }
}

/// The version-2 delta record of `sample` against `key`, whose frame starts `base` bytes before
/// this one's; `anchor` when later frames will take this one as their base.
pub fn encode_delta(key: &KeySample, sample: &Sample, base: u64, anchor: bool, expected: usize) -> Vec<u8> {
    encode_delta_into(Vec::with_capacity(expected), key, sample, base, anchor)
}

/// [`encode_delta`] into `out` (cleared first): the writer hands it the allocation of the record
/// before the last, so a storm's records (~100 KB each) do not each fault in pages of their own.
pub fn encode_delta_into(mut out: Vec<u8>, key: &KeySample, sample: &Sample, base: u64, anchor: bool) -> Vec<u8> {
    let rest = diff(&key.rest, &rest_value(sample)).unwrap_or_else(|| Value::Object(Map::new()));
    let mut rows: Vec<RowOp> = Vec::new();
    let mut guess = 0;
    for new in &sample.processes {
        let found = key.find(new.pid, guess).filter(|&i| key.processes[i].start_ticks == new.start_ticks);
        let Some(i) = found else {
            rows.push(RowOp::New(Box::new(new.clone())));
            continue;
        };
        guess = i + 1;
        let i32_ = i as u32;
        match row_patch(i32_, &key.processes[i], new) {
            Some(patch) => rows.push(RowOp::Patch(Box::new(patch))),
            None => match rows.last_mut() {
                Some(RowOp::Keep(from, n)) if *from + *n == i32_ => *n += 1,
                _ => rows.push(RowOp::Keep(i32_, 1)),
            },
        }
    }
    out.clear();
    serde_json::to_writer(&mut out, &DeltaOut { base, anchor, rest, rows: &rows })
        .expect("a delta always serializes to JSON");
    if !sample.exited.is_empty() {
        // In the record's object, after its rows.
        out.pop();
        out.extend_from_slice(b",\"ended\":");
        EndedTableOut::write(&sample.exited, &mut out);
        out.push(b'}');
    }
    out
}

/// The sample a version-2 delta record describes, given its base. Each base row is taken at
/// most once, so the sample has at most the base's rows and the record's new ones.
pub fn decode_delta(key: &KeySample, delta: &DeltaRecord<'_>) -> Result<Sample, CodecError> {
    let patch = delta.rest_patch(key)?;
    let ops = delta.row_ops(key.processes.len())?;
    let mut rest = key.rest.clone();
    apply(&mut rest, patch)?;
    let mut sample: Sample = Sample::deserialize(rest).map_err(CodecError::Parse)?;
    let rows = &key.processes;
    let mut taken = vec![false; rows.len()];
    let mut take = move |i: usize| match taken.get_mut(i) {
        Some(t) if !*t => {
            *t = true;
            Ok(&rows[i])
        }
        _ => Err(ROW_TAKEN),
    };
    let mut processes = Vec::with_capacity(rows.len());
    for op in ops {
        match op {
            RowOp::Keep(from, n) => {
                let from = from as usize;
                for i in from..from.saturating_add(n as usize) {
                    processes.push(take(i)?.clone());
                }
            }
            RowOp::Patch(patch) => processes.push(apply_row(take(patch.key as usize)?.clone(), *patch)),
            RowOp::New(row) => processes.push(*row),
        }
    }
    sample.processes = processes;
    sample.exited = delta.exited()?;
    Ok(sample)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A base of `rows` processes (pids 1..=rows), and nothing else.
    fn base(rows: u32) -> KeySample {
        let row = |pid: u32| ProcessSample {
            pid,
            ppid: 1,
            start_ticks: 7,
            comm: Arc::from("p"),
            state: 'S',
            num_threads: 1,
            ..ProcessSample::default()
        };
        KeySample::from_sample(Sample {
            clock_ticks_per_sec: 100,
            page_size: 4096,
            processes: (1..=rows).map(row).collect(),
            ..Sample::default()
        })
    }

    /// Decodes `rows` (the JSON of a delta's row operations) against a base of 4 rows, as a
    /// delta and as an anchor; both must agree.
    fn rows_of(rows: &str) -> Result<Vec<u32>, String> {
        let text = format!("{{\"base\":8,\"rest\":{{}},\"rows\":{rows}}}");
        let record = DeltaRecord::parse(text.as_bytes()).map_err(|e| e.to_string())?;
        let decoded = decode_delta(&base(4), &record).map(|s| s.processes.iter().map(|p| p.pid).collect());
        let advanced = base(4).advance(&record).map(|k| k.processes.iter().map(|p| p.pid).collect());
        assert_eq!(decoded.as_ref().map_err(ToString::to_string), advanced.as_ref().map_err(ToString::to_string));
        decoded.map_err(|e| e.to_string())
    }

    #[test]
    fn reaped_children_cpu_round_trips_through_a_delta_and_old_rows_read_as_unknown() {
        let key = base(3);
        let mut sample =
            decode_delta(&key, &DeltaRecord::parse(br#"{"base":8,"rest":{},"rows":[{"k":[0,3]}]}"#).expect("parses"))
                .expect("decodes");
        sample.processes[0].cutime_ticks = Some(40);
        sample.processes[0].cstime_ticks = Some(2);
        sample.processes[1].cutime_ticks = Some(0);
        let bytes = encode_delta(&key, &sample, 8, false, 256);
        let back = decode_delta(&key, &DeltaRecord::parse(&bytes).expect("parses")).expect("decodes");
        let children: Vec<_> = back.processes.iter().map(|p| (p.cutime_ticks, p.cstime_ticks)).collect();
        assert_eq!(children, [(Some(40), Some(2)), (Some(0), None), (None, None)]);
        // Back to unknown (a row written by a build that did not read them) is carried too.
        let mut later = back.clone();
        let mut key2 = KeySample::from_sample(back);
        later.processes[0].cutime_ticks = None;
        let bytes = encode_delta(&key2, &later, 8, false, 256);
        key2 =
            KeySample::from_sample(decode_delta(&key2, &DeltaRecord::parse(&bytes).expect("parses")).expect("decodes"));
        assert_eq!(key2.processes[0].cutime_ticks, None);
    }

    #[test]
    fn ended_processes_ride_beside_the_rest_whole_and_never_leak_from_the_base() {
        let mut key_sample = decode_delta(
            &base(3),
            &DeltaRecord::parse(br#"{"base":8,"rest":{},"rows":[{"k":[0,3]}]}"#).expect("parses"),
        )
        .expect("decodes");
        let ended = |pid: u32| ExitedProcess { pid, ppid: 1, comm: Arc::from("cc1"), ..ExitedProcess::default() };
        key_sample.exited = vec![ended(70)];
        let key = KeySample::new(&key_sample);
        assert_eq!(key.sample().expect("the base").exited, vec![ended(70)], "the base keeps its own list");
        let mut sample = key_sample.clone();
        sample.exited = vec![ended(71), ended(72)];
        let bytes = encode_delta(&key, &sample, 8, true, 256);
        let record = DeltaRecord::parse(&bytes).expect("parses");
        assert_eq!(decode_delta(&key, &record).expect("decodes").exited, sample.exited);
        // An anchor carries its own list on: the next delta's base has 71 and 72, not 70.
        let anchor = key.clone().advance(&record).expect("advances");
        assert_eq!(anchor.sample().expect("the anchor").exited, sample.exited);
        // A sample with none ended lists none, whatever its base listed.
        let mut quiet = key_sample.clone();
        quiet.exited.clear();
        let bytes = encode_delta(&key, &quiet, 8, false, 256);
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("exited") && !text.contains("ended"), "{text}");
        assert!(decode_delta(&key, &DeltaRecord::parse(&bytes).expect("parses")).expect("decodes").exited.is_empty());
        // More than a sample keeps is refused.
        let many: Vec<ExitedProcess> = (0..=proctor_model::MAX_EXITED as u32).map(ended).collect();
        let too_many =
            format!(r#"{{"base":8,"rest":{{}},"rows":[],"exited":{}}}"#, serde_json::to_string(&many).expect("json"));
        assert!(decode_delta(&key, &DeltaRecord::parse(too_many.as_bytes()).expect("parses")).is_err());
    }

    /// Ended processes with every field set, and with every optional one absent.
    fn storm_of_ended() -> Vec<ExitedProcess> {
        let cmdline: Arc<[String]> =
            Arc::from(vec!["python3".to_string(), "storm.py".to_string(), "--storm".to_string()]);
        let cgroup: Arc<str> = Arc::from("/user.slice/build \"quoted\"");
        // Shared as the sampler shares it, but for one row that holds its own copy.
        let python: Arc<str> = Arc::from("python3");
        let mut out: Vec<ExitedProcess> = (0..5u32)
            .map(|i| ExitedProcess {
                pid: 1000 + i,
                ppid: 999,
                start_ticks: 50 + u64::from(i),
                lifetime_ns: 25_000_000,
                end_unix_ns: 1_795_000_000_123_456_789,
                comm: match i {
                    3 => Arc::from("cc1\n\u{7}"),
                    4 => Arc::from("python3"),
                    _ => Arc::clone(&python),
                },
                cmdline: Some(Arc::clone(&cmdline)),
                exe: (i == 2).then(|| Arc::from("/usr/bin/python3.11")),
                cgroup: Some(Arc::clone(&cgroup)),
                wait_status: if i == 4 { 9 } else { 256 },
                user_ns: u64::MAX,
                system_ns: 7,
                children_ns: 3,
                minflt: 120,
                majflt: 1,
                peak_rss_bytes: 9_437_184,
                seen: i % 2 == 0,
                net: None,
            })
            .collect();
        let tcp = proctor_model::NetCounters { tx_bytes: 4096, ..Default::default() };
        out[1].net = Some(Box::new(ProcessNet { tcp, retransmits: 2, ..ProcessNet::default() }));
        out.push(ExitedProcess { pid: 7, comm: Arc::from(""), ..ExitedProcess::default() });
        out
    }

    #[test]
    fn ended_rows_written_by_hand_are_what_serde_writes() {
        // The table as serde_json writes a struct of its fields, rows as `EndedRow`s.
        #[derive(Serialize)]
        struct BySerde {
            rows: Vec<EndedRow>,
            strings: Vec<Arc<str>>,
            cmdlines: Vec<Arc<[String]>>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            nets: Vec<(u32, ProcessNet)>,
        }
        // Every length of number: each power of ten and the numbers around it, and the ends.
        let mut edges: Vec<u64> = (1..=19).flat_map(|k| [10u64.pow(k) - 1, 10u64.pow(k), 10u64.pow(k) + 7]).collect();
        edges.extend([0, 1, 5, 123_456_789, u64::from(u32::MAX), u64::MAX - 1, u64::MAX]);
        let mut rows = Vec::new();
        for (i, &n) in edges.iter().enumerate() {
            let small = n as u32;
            let some = |k: usize| (i % 3 != k).then_some(small);
            rows.push(EndedRow(
                small,
                small,
                n,
                n,
                n,
                small,
                some(0),
                some(1),
                some(2),
                small,
                n,
                n,
                n,
                n,
                n,
                n,
                i % 2 == 0,
            ));
        }
        for row in &rows {
            let mut ours = Vec::new();
            write_row(&mut ours, row);
            assert_eq!(String::from_utf8_lossy(&ours), serde_json::to_string(row).expect("json"));
        }
        // Whole tables, with and without network counters, after what came before in the record.
        for mut exited in [storm_of_ended(), vec![ExitedProcess::default()]] {
            exited[0].exe = Some(Arc::from("/bin/\"x\"\u{1}"));
            let mut ours = b"{".to_vec();
            EndedTableOut::write(&exited, &mut ours);
            let table = &ours[1..];
            let EndedTable { strings, cmdlines, rows, nets } = serde_json::from_slice(table).expect("reads as a table");
            let by_serde = BySerde { rows, strings, cmdlines, nets };
            assert_eq!(String::from_utf8_lossy(table), serde_json::to_string(&by_serde).expect("json"));
            assert_eq!(by_serde.nets.len(), exited.iter().filter(|x| x.net.is_some()).count());
        }
    }

    #[test]
    fn ended_processes_are_a_table_with_each_string_once_and_read_back_whole() {
        let key_sample = decode_delta(
            &base(3),
            &DeltaRecord::parse(br#"{"base":8,"rest":{},"rows":[{"k":[0,3]}]}"#).expect("parses"),
        )
        .expect("decodes");
        let key = KeySample::new(&key_sample);
        let mut sample = key_sample.clone();
        sample.exited = storm_of_ended();
        let bytes = encode_delta(&key, &sample, 8, false, 256);
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(text.matches("storm.py").count(), 1, "one command line, written once: {text}");
        assert_eq!(text.matches("user.slice").count(), 1, "one cgroup, written once: {text}");
        // The name once among the strings, shared or not.
        let strings: Value = serde_json::from_slice::<Value>(&bytes).expect("json")["ended"]["strings"].clone();
        let names = strings.as_array().expect("strings").iter().filter(|s| s.as_str() == Some("python3")).count();
        assert_eq!(names, 1, "{text}");
        assert!(!text.contains("\"exited\"") && !text.contains("lifetime_ns"), "no objects: {text}");
        let back = decode_delta(&key, &DeltaRecord::parse(&bytes).expect("parses")).expect("decodes").exited;
        assert_eq!(back, sample.exited);
        // Read back, the rows share their strings as the sampler's did.
        assert!(Arc::ptr_eq(
            back[0].cmdline.as_ref().expect("a cmdline"),
            back[4].cmdline.as_ref().expect("a cmdline")
        ));
        // A record of a build before the table, its list as objects, still reads.
        let objects = format!(
            r#"{{"base":8,"rest":{{}},"rows":[{{"k":[0,3]}}],"exited":{}}}"#,
            serde_json::to_string(&sample.exited).expect("json")
        );
        let old = decode_delta(&key, &DeltaRecord::parse(objects.as_bytes()).expect("parses")).expect("decodes");
        assert_eq!(old.exited, sample.exited);
    }

    #[test]
    fn an_ended_table_that_points_outside_itself_or_is_given_twice_is_refused() {
        let key = base(1);
        let refused = |ended: &str| {
            let text = format!(r#"{{"base":8,"rest":{{}},"rows":[{{"k":[0,1]}}],{ended}}}"#);
            match decode_delta(&key, &DeltaRecord::parse(text.as_bytes()).expect("parses")) {
                Ok(s) => panic!("{ended} was read as {:?}", s.exited),
                Err(e) => e.to_string(),
            }
        };
        let row = |comm: u32, cmdline: &str| format!("[5,1,7,0,0,{comm},{cmdline},null,null,0,0,0,0,0,0,0,true]");
        let table = |row: String, nets: &str| {
            format!(r#""ended":{{"strings":["sh"],"cmdlines":[["sh","-c"]],"rows":[{row}]{nets}}}"#)
        };
        let fine = format!(r#"{{"base":8,"rest":{{}},"rows":[{{"k":[0,1]}}],{}}}"#, table(row(0, "0"), ""));
        let read = decode_delta(&key, &DeltaRecord::parse(fine.as_bytes()).expect("parses")).expect("decodes");
        assert_eq!(read.exited[0].cmdline.as_deref(), Some(&["sh".to_string(), "-c".to_string()][..]));
        assert!(refused(&table(row(1, "0"), "")).contains("string"), "a name past the strings");
        assert!(refused(&table(row(0, "1"), "")).contains("string"), "a command line past the command lines");
        let net = serde_json::to_string(&ProcessNet::default()).expect("json");
        assert!(refused(&table(row(0, "0"), &format!(r#","nets":[[1,{net}]]"#))).contains("network"), "for no row");
        assert!(refused(&format!(r#"{},"exited":[]"#, table(row(0, "0"), ""))).contains("twice"));
        let many = vec![row(0, "null"); proctor_model::MAX_EXITED + 1].join(",");
        assert!(refused(&table(many, "")).contains("more ended processes"));
    }

    #[test]
    fn groups_and_reaped_childrens_faults_round_trip_through_a_delta() {
        let mut key_sample = decode_delta(
            &base(3),
            &DeltaRecord::parse(br#"{"base":8,"rest":{},"rows":[{"k":[0,3]}]}"#).expect("parses"),
        )
        .expect("decodes");
        let members = |pids: &[u32]| {
            let mut g = SampleGroups { by: "rules".into(), ..SampleGroups::default() };
            g.members.insert("web".into(), pids.to_vec());
            Some(Arc::new(g))
        };
        key_sample.groups = members(&[1, 2]);
        let key = KeySample::new(&key_sample);
        let mut sample = key_sample.clone();
        sample.groups = members(&[1, 2, 3]);
        sample.processes[2].cminflt = Some(7);
        sample.processes[2].cmajflt = Some(1);
        sample.processes[2].open_fds = Some(12);
        let bytes = encode_delta(&key, &sample, 8, false, 256);
        let back = decode_delta(&key, &DeltaRecord::parse(&bytes).expect("parses")).expect("decodes");
        assert_eq!(back.groups, members(&[1, 2, 3]));
        assert_eq!((back.processes[2].cminflt, back.processes[2].cmajflt), (Some(7), Some(1)));
        assert_eq!(back.processes[2].open_fds, Some(12));
        // Unchanged groups cost nothing in the delta.
        let same = encode_delta(&key, &key_sample, 8, false, 256);
        assert!(!String::from_utf8_lossy(&same).contains("web"), "{}", String::from_utf8_lossy(&same));
    }

    #[test]
    fn a_delta_takes_each_base_row_at_most_once() {
        assert_eq!(rows_of(r#"[{"k":[0,4]}]"#), Ok(vec![1, 2, 3, 4]));
        assert_eq!(rows_of(r#"[{"k":[2,2]},{"p":{"@":0}},{"k":[1,1]}]"#), Ok(vec![3, 4, 1, 2]));
        let new_row = serde_json::to_string(&base(9).processes[8]).expect("serializes");
        assert_eq!(rows_of(&format!(r#"[{{"n":{new_row}}},{{"k":[0,1]}}]"#)), Ok(vec![9, 1]));
        for (rows, why) in [
            // Within the base's count, but a row twice.
            (r#"[{"k":[0,2]},{"k":[1,1]}]"#, "used twice"),
            (r#"[{"p":{"@":3}},{"k":[3,1]}]"#, "used twice"),
            // Past the base's rows.
            (r#"[{"k":[3,2]}]"#, "beyond the base"),
            (r#"[{"p":{"@":4}}]"#, "beyond the base"),
            // More rows than the base has, refused while parsing, before they are built.
            (r#"[{"k":[0,4]},{"k":[0,4]},{"k":[0,4]}]"#, "more rows than its base has"),
            (r#"[{"k":[0,4294967295]}]"#, "more rows than its base has"),
            // Operations that take nothing would be free to repeat.
            (r#"[{"k":[0,0]}]"#, "a keep of no rows"),
        ] {
            let got = rows_of(rows);
            assert!(got.as_ref().is_err_and(|e| e.contains(why)), "{rows}: {got:?}");
        }
    }

    #[test]
    fn a_rest_patch_far_larger_than_the_base_rest_is_refused_unparsed() {
        let key = base(1);
        let fits = "0,".repeat(key.rest_bytes / 2);
        let text = format!("{{\"base\":8,\"rest\":{{\"x\":[[{fits}0]]}},\"rows\":[]}}");
        assert!(decode_delta(&key, &DeltaRecord::parse(text.as_bytes()).expect("parses")).is_ok());
        let bomb = "0,".repeat(key.rest_bytes + REST_SLACK_BYTES);
        let text = format!("{{\"base\":8,\"rest\":{{\"x\":[[{bomb}0]]}},\"rows\":[]}}");
        let got = decode_delta(&key, &DeltaRecord::parse(text.as_bytes()).expect("parses"));
        assert!(got.is_err_and(|e| e.to_string().contains("far larger")));
    }

    #[test]
    fn a_row_operation_costs_about_what_its_text_does() {
        // `{"k":[0,1]}` is 11 bytes; an unboxed operation was the size of a whole row (~500).
        assert!(std::mem::size_of::<RowOp>() <= 16, "{}", std::mem::size_of::<RowOp>());
    }

    #[test]
    fn value_patches_round_trip() {
        let cases = [
            (json!({"a": 1, "b": {"c": [1, 2, 3], "d": null}}), json!({"a": 1, "b": {"c": [1, 5, 3], "d": {"x": 1}}})),
            (json!({"a": [1, 2]}), json!({"a": [1, 2, 3]})),
            (json!({"a": 1, "b": 2}), json!({"a": 1})),
            (json!({"a": 1}), json!({"a": 1, "b": null})),
            (json!({"a": {"x": 1}}), json!({"a": null})),
            (json!({"a": null}), json!({"a": {"x": [null]}})),
            (json!([{"a": 1}, {"a": 2}]), json!([{"a": 1}, {"a": 3}])),
            (json!(1.5), json!("s")),
        ];
        for (old, new) in cases {
            let mut got = old.clone();
            if let Some(patch) = diff(&old, &new) {
                apply(&mut got, patch).expect("applies");
            }
            assert_eq!(got, new, "{old} → {new}");
        }
        assert_eq!(diff(&json!({"a": [1, {"b": 2}]}), &json!({"a": [1, {"b": 2}]})), None);
        // Only what changed is carried.
        assert_eq!(diff(&json!({"a": 1, "b": [1, 2]}), &json!({"a": 1, "b": [1, 7]})), Some(json!({"b": {"1": [7]}})));
    }

    #[test]
    fn bad_patches_are_errors() {
        for patch in
            [json!(5), json!([1, 2]), json!({"a": {"0": [1]}}), json!({"b": {"9": [1]}}), json!({"b": {"x": [1]}})]
        {
            let mut target = json!({"a": 1, "b": [1]});
            assert!(apply(&mut target, patch.clone()).is_err(), "{patch}");
        }
        // A member the reader does not know is added (then ignored by serde), or skipped.
        let mut target = json!({"a": 1});
        apply(&mut target, json!({"new": [2], "newer": {"x": [1]}})).expect("applies");
        assert_eq!(target, json!({"a": 1, "new": 2}));
    }
}
