//! Fuzz target: frames of every kind after a real base, read back by a `Reader`, the way
//! `dump`, `replay`, `report` and `/api/v1/report` read a store.
//!
//! At start the target writes a real store with the crate's `Writer` (a key frame, deltas and
//! anchors of a few churning processes; once as record version 2, once as version 1) and keeps
//! its one segment's bytes. Each input then builds a segment: the magic, the first `keep` frames
//! of one base, and frames described by the input, each given a header and a valid CRC by the
//! target, so the fuzzer gets past the checksum and into decompression and decoding:
//!
//! ```text
//! input = flags u8 | frame*
//! flags = keep (bits 0-3: base frames kept, 0-15) | v1 base (bit 6) | open a Writer too (bit 7)
//! frame = spec u8 | base u8 | len u16 (little-endian) | body (len bytes, or what is left)
//! spec  = kind (bits 0-1: key, delta, probe, statsd) | version (bits 2-3: 2, 1, 1, 3)
//!         | raw (bit 4: body is the payload as is; else the record, compressed here)
//!         | damage (bit 5: body goes into the segment as it is, no header: what a reader must
//!           read around)
//!         | rollup (bit 6: the frame is a rollup block whatever bits 0-1 say; its record
//!           version is 1, so bits 2-3 01 or 10)
//! ```
//!
//! In a record, each `@B` becomes the distance back to the frame numbered `base` (modulo the
//! frames before it), so a delta can name a real base without the fuzzer learning offsets.
//!
//! The segment is read forwards (full, lean and host shapes, and events), then backwards by a
//! fresh reader (which decodes anchor chains cold). With bit 7, `Writer::open` also walks,
//! repairs or sets it aside. Promises checked: no panic; no decoded sample has more processes
//! than the base's largest sample plus one per 40 record bytes the input's frames hold (a delta
//! takes each base row once; a new row is at least 59 bytes of JSON), which a delta that takes a
//! base row twice breaks; every delta record the target compresses decodes the same as a plain
//! delta and as an anchor, or fails both ways (the anchor path checked for a base row used
//! twice and the plain one did not: the gigabyte frame of issue 15 item 2); no rollup block
//! holds more cells (names × rows) than `rollup::CELLS_PER_BYTE` per byte of its record, or
//! than `rollup::COMPACTED_CELLS` over six hours of rows (nor
//! more bytes of names than `rollup::NAME_BYTES_PER_BYTE`), read
//! by the reader or decoded here from a record the target compresses (an idle column is 3
//! bytes whatever the rows: the 76-byte frame of 16.7 million cells of issue 33 item 5); and,
//! with `-malloc_limit_mb`, no allocation past the decompression bound.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use proctor_model::{
    ExitedProcess, HostSample, ProbeBatch, ProbeResult, ProcessSample, RollupBlock, RollupRow, Sample, SampleCost,
    Stat, StatsdFlush,
};
use proctor_store::codec::{compress_alone, decompress_delta, decompress_key, decompressed_cap, encode_event, Event};
use proctor_store::delta::{decode_delta, DeltaRecord, KeySample};
use proctor_store::frame::{encode_header, FrameKind};
use proctor_store::rollup::{
    decode_block_version, CELLS_PER_BYTE, COMPACTED_CELLS, MAX_COMPACTED_ROWS, NAME_BYTES_PER_BYTE,
};
use proctor_store::segment::{walk, Check};
use proctor_store::{Reader, StoreConfig, Writer};

const T0: u64 = 1_700_000_000_000_000_000;
const SEGMENT: &str = "01700000000000000000.seg";

/// One base store's segment, as the writer left it.
struct Base {
    bytes: Vec<u8>,
    /// Where each frame starts, and where the last one ends.
    offsets: Vec<usize>,
    /// The most processes any of its samples has.
    max_rows: usize,
    /// Its largest record, decompressed: a version-1 delta's dictionary is at most this.
    max_record: usize,
    /// Its first sample, as deltas are decoded against it.
    key: KeySample,
}

struct Setup {
    dir: PathBuf,
    v2: Base,
    v1: Base,
}

fn row(pid: u32, seq: u64) -> ProcessSample {
    ProcessSample {
        pid,
        ppid: 1,
        start_ticks: u64::from(pid) * 3,
        comm: Arc::from(format!("p{pid}")),
        state: 'S',
        utime_ticks: seq * u64::from(pid % 3),
        stime_ticks: seq,
        cutime_ticks: Some(seq / 3),
        cstime_ticks: Some(seq / 3),
        cminflt: Some(seq / 2),
        cmajflt: Some(0),
        open_fds: None,
        num_threads: 1,
        minflt: seq,
        majflt: 0,
        nice: 0,
        vsize_bytes: 1 << 20,
        resident_bytes: Some(4096),
        status: None,
        io: None,
        cmdline: (seq > 0).then(|| Arc::from(vec![format!("/bin/p{pid}")])),
        pss: None,
        pss_stale: false,
        pss_estimate: None,
        cgroup: None,
        tasks: Vec::new(),
        stall: (seq % 3 == 1).then_some(proctor_model::Stall {
            reads: seq,
            total_ns: seq * 1000,
            max_ns: 700,
            capped: seq % 2 == 1,
            refused: seq % 7 == 4,
            put_off: seq % 11 == 3,
            waited_ns: (seq % 5 == 1).then_some(seq * 300),
        }),
        // Network use on some rows, changing with the sample (delta records carry it).
        net: (pid % 2 == 0).then(|| {
            Box::new(proctor_model::ProcessNet {
                tcp: proctor_model::NetCounters { tx_packets: seq, tx_bytes: seq * 1500, ..Default::default() },
                connects: seq / 4,
                connections: u32::from(seq % 3 == 0),
                srtt_median_us: (seq % 3 == 0).then_some(120),
                srtt_max_us: (seq % 3 == 0).then_some(480),
                ..Default::default()
            })
        }),
    }
}

/// Processes 1..=5, with pid 2 gone on odd samples and a new pid 100+seq on even ones; an
/// ended process listed every third sample.
fn sample(seq: u64) -> Sample {
    let mut processes: Vec<ProcessSample> = (1..=5).map(|pid| row(pid, seq)).collect();
    if seq % 2 == 1 {
        processes.remove(1);
    } else {
        processes.push(row(100 + seq as u32, seq));
    }
    Sample {
        seq,
        unix_ns: T0 + seq * 1_000_000_000,
        mono_ns: seq * 1_000_000_000,
        clock_ticks_per_sec: 100,
        page_size: 4096,
        host: HostSample::default(),
        container: None,
        processes,
        cost: SampleCost { cpu_ns: seq, ..SampleCost::default() },
        groups: None,
        gpu: None,
        // Every third sample lists an ended process, so the base's deltas patch the list.
        exited: (seq % 3 == 0)
            .then(|| ExitedProcess { pid: 200 + seq as u32, ppid: 1, comm: "short".into(), ..ExitedProcess::default() })
            .into_iter()
            .collect(),
    }
}

fn write_base(dir: &Path, record_version: u8) -> Base {
    let config = StoreConfig { chunk_frames: 8, anchor_frames: 3, record_version, ..StoreConfig::default() };
    let (mut writer, _) = Writer::open(dir, config).expect("base store opens");
    let samples: Vec<Sample> = (0..7).map(sample).collect();
    for s in &samples {
        writer.append(s).expect("base sample written");
    }
    let path = writer.active_segment().expect("a segment").to_owned();
    drop(writer);
    let walked = walk(&path, Check::Full).expect("base walks");
    let bytes = std::fs::read(&path).expect("base reads");
    let mut offsets: Vec<usize> = walked.frames.iter().map(|f| f.offset as usize).collect();
    offsets.push(bytes.len());
    let max_record = samples.iter().map(|s| proctor_store::codec::encode_record(s).len()).max().unwrap_or(0);
    clear(dir);
    Base {
        bytes,
        offsets,
        max_rows: samples.iter().map(|s| s.processes.len()).max().unwrap_or(0),
        max_record,
        key: KeySample::from_sample(samples[0].clone()),
    }
}

fn clear(dir: &Path) {
    for entry in std::fs::read_dir(dir).expect("list").flatten() {
        let _ = std::fs::remove_file(entry.path());
    }
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        // tmpfs when there is one: every input writes and reads a file.
        let parent = Path::new("/dev/shm");
        let parent = if parent.is_dir() { parent.to_owned() } else { std::env::temp_dir() };
        let dir = parent.join(format!("proctor-store-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("work directory");
        let setup = Setup { v2: write_base(&dir, 2), v1: write_base(&dir, 1), dir };
        if let Some(seeds) = std::env::var_os("PROCTOR_STORE_FUZZ_WRITE_SEEDS") {
            write_seeds(&setup, Path::new(&seeds));
        }
        setup
    })
}

/// The frames an input describes, as (kind, version, payload, the most record bytes it can
/// decompress to), `None` for damage (the payload is then the bytes as they go in); `offsets`
/// gains where each frame ends.
fn frames_of(input: &[u8], base: &Base, offsets: &mut Vec<usize>) -> Vec<(Option<(FrameKind, u8)>, Vec<u8>, usize)> {
    let mut frames = Vec::new();
    let mut rest = input;
    let mut at = *offsets.last().expect("the end of the kept frames");
    while rest.len() >= 4 {
        let (spec, named) = (rest[0], rest[1]);
        let len = usize::from(u16::from_le_bytes([rest[2], rest[3]]));
        let body = &rest[4..];
        let body = &body[..len.min(body.len())];
        rest = &rest[4 + body.len()..];
        if spec & 0x20 != 0 {
            at += body.len();
            frames.push((None, body.to_vec(), 0));
            continue;
        }
        let kind = if spec & 0x40 != 0 {
            FrameKind::Rollup
        } else {
            [FrameKind::Key, FrameKind::Delta, FrameKind::Probe, FrameKind::Statsd][usize::from(spec & 3)]
        };
        let version = [2, 1, 1, 3][usize::from((spec >> 2) & 3)];
        let (payload, record_bytes) = if spec & 0x10 != 0 {
            (body.to_vec(), decompressed_cap(body.len(), base.max_record))
        } else {
            // `@B`: the distance back to an earlier frame.
            let earlier = offsets.len() - 1;
            let target = if earlier == 0 { at } else { offsets[usize::from(named) % earlier] };
            let distance = (at - target).to_string();
            let mut record = Vec::with_capacity(body.len());
            let mut i = 0;
            while i < body.len() {
                if body[i..].starts_with(b"@B") {
                    record.extend_from_slice(distance.as_bytes());
                    i += 2;
                } else {
                    record.push(body[i]);
                    i += 1;
                }
            }
            if kind == FrameKind::Delta {
                same_either_way(&base.key, &record);
            }
            if kind == FrameKind::Rollup {
                if let Ok(block) = decode_block_version(version, &record) {
                    check_cells(&block, record.len());
                }
            }
            (compress_alone(1, &record).expect("compresses"), record.len())
        };
        at += 24 + payload.len();
        offsets.push(at);
        frames.push((Some((kind, version)), payload, record_bytes));
    }
    frames
}

/// A delta record decodes the same as a plain delta (`decode_delta`) and as an anchor (the
/// base it makes, `KeySample::advance`), or fails both ways: the two paths once checked
/// different things (the anchor path refused a base row used twice, the other did not).
fn same_either_way(key: &KeySample, record: &[u8]) {
    let Ok(delta) = DeltaRecord::parse(record) else { return };
    let json = |s: Sample| serde_json::to_value(&s).expect("a sample serializes");
    let plain = decode_delta(key, &delta).map(json);
    let anchor = key.clone().advance(&delta).and_then(|k| k.sample()).map(json);
    match (plain, anchor) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "a delta decodes differently as an anchor"),
        (Err(_), Err(_)) => {}
        (a, b) => panic!("a delta decodes one way only: as a delta {:?}, as an anchor {:?}", a.err(), b.err()),
    }
}

/// A rollup block holds no more cells than `CELLS_PER_BYTE` per byte of the record it came from
/// (at most `record_bytes`), or, of up to `MAX_COMPACTED_ROWS` rows (six hours compacted), no
/// more than `COMPACTED_CELLS`.
fn check_cells(block: &RollupBlock, record_bytes: usize) {
    let cells = block.names.len() * block.rows.len();
    let compacted = block.rows.len() <= MAX_COMPACTED_ROWS && cells <= COMPACTED_CELLS;
    assert!(
        cells <= record_bytes * CELLS_PER_BYTE || compacted,
        "a rollup block of {} names x {} rows from at most {record_bytes} record bytes",
        block.names.len(),
        block.rows.len()
    );
    let name_bytes: usize = block.names.iter().map(String::len).sum();
    assert!(
        name_bytes <= record_bytes * NAME_BYTES_PER_BYTE,
        "a rollup block of {name_bytes} bytes of names from at most {record_bytes} record bytes"
    );
}

fuzz_target!(|input: &[u8]| {
    let Some((&flags, input)) = input.split_first() else { return };
    let setup = setup();
    let base = if flags & 0x40 != 0 { &setup.v1 } else { &setup.v2 };
    let keep = usize::from(flags & 0x0f).min(base.offsets.len() - 1);
    let mut offsets: Vec<usize> = base.offsets[..=keep].to_vec();
    let frames = frames_of(input, base, &mut offsets);

    let mut segment = base.bytes[..base.offsets[keep]].to_vec();
    let mut record_bytes = 0;
    for (i, (frame, payload, most)) in frames.iter().enumerate() {
        if let Some((kind, version)) = frame {
            segment.extend_from_slice(&encode_header(T0 + (keep + i) as u64, *kind, *version, payload));
        }
        segment.extend_from_slice(payload);
        record_bytes += most;
    }
    std::fs::write(setup.dir.join(SEGMENT), &segment).expect("segment written");

    // Every row of a decoded sample is a base sample's, taken once by each delta on the way,
    // or spelled out in one of the records: at least 59 bytes of JSON (`ProcessSample` as an
    // array of its 18 fields, `[0,0,0,"","S",0,0,0,0,0,0,0,null,null,null,null,null,null]`).
    let most_rows = base.max_rows + record_bytes / 40;
    let check = |sample: &Sample| {
        assert!(
            sample.processes.len() <= most_rows,
            "{} processes decoded from a segment whose records hold at most {most_rows}",
            sample.processes.len()
        );
    };

    let mut reader = Reader::open(&setup.dir).expect("reader opens");
    if let Ok(all) = reader.all_frames() {
        for frame in &all {
            for sample in [reader.read(frame), reader.read_lean(frame), reader.read_host(frame)].iter().flatten() {
                check(sample);
            }
        }
        if let Ok(events) = reader.event_frames(0, u64::MAX) {
            for frame in &events {
                if let Some(Event::Rollup(block)) = reader.read_event(frame) {
                    check_cells(&block, record_bytes);
                }
            }
        }
        let mut cold = Reader::open(&setup.dir).expect("reader opens");
        for frame in all.iter().rev() {
            if let Some(sample) = cold.read(frame) {
                check(&sample);
            }
        }
    }
    if std::env::var_os("PROCTOR_STORE_FUZZ_VERBOSE").is_some() {
        eprintln!("{} frames, {:?}", frames.len() + keep, reader.report());
    }
    if flags & 0x80 != 0 {
        let _ = Writer::open(&setup.dir, StoreConfig::default());
    }
    clear(&setup.dir);
});

/// Writes the committed seeds (`PROCTOR_STORE_FUZZ_WRITE_SEEDS=DIR`, see README.md): each base
/// rebuilt from its key by the frames after it (their records with `@B` for their base), the
/// version-2 one again with damage after its third frame, a key
/// frame and both events given as frames, and a delta that keeps its base's rows again and
/// again (the frame of issue 15 item 2); a real rollup block, and one of idle columns claiming
/// far more cells than its bytes can hold (the frame of issue 33 item 5, smaller).
fn write_seeds(setup: &Setup, dir: &Path) {
    std::fs::create_dir_all(dir).expect("seed directory");
    let frame = |spec: u8, base: u8, body: &[u8]| {
        let mut out = vec![spec, base];
        out.extend_from_slice(&(body.len() as u16).to_le_bytes());
        out.extend_from_slice(body);
        out
    };
    for (name, base, flags) in [("v2", &setup.v2, 1u8), ("v1", &setup.v1, 0x41)] {
        let mut seed = vec![flags];
        let mut key = decompress_key(&base.bytes[32..base.offsets[1]]).expect("key record");
        for (i, window) in base.offsets.windows(2).enumerate().skip(1) {
            let (start, end) = (window[0], window[1]);
            let header = &base.bytes[start..start + 24];
            let payload = &base.bytes[start + 24..end];
            let (kind, version) = (header[16], header[17]);
            let record = if kind == 1 && version == 1 {
                decompress_delta(payload, &key).expect("record")
            } else {
                decompress_key(payload).expect("record")
            };
            if kind == 0 {
                key = record.clone();
            }
            let text = String::from_utf8(record).expect("JSON");
            // A version-2 delta's base distance is its record's first member: the latest anchor
            // before it (every third frame of the chunk) or the key.
            let base_frame = (i - 1) / 3 * 3;
            let text = match text.strip_prefix("{\"base\":") {
                Some(after) => {
                    let digits = after.find(|c: char| !c.is_ascii_digit()).unwrap_or(0);
                    format!("{{\"base\":@B{}", &after[digits..])
                }
                None => text,
            };
            seed.extend(frame(kind | if version == 1 { 0x04 } else { 0 }, base_frame as u8, text.as_bytes()));
        }
        std::fs::write(dir.join(format!("seed-rebuild-{name}")), &seed).expect("seed");
        if name == "v2" {
            // The same with 12 bytes of damage after its third frame: read around, it loses the
            // frames whose base is gone with it.
            let mut at = 1;
            for _ in 0..3 {
                at += 4 + usize::from(u16::from_le_bytes([seed[at + 2], seed[at + 3]]));
            }
            let mut damaged = seed[..at].to_vec();
            damaged.extend(frame(0x20, 0, b"JUNKJUNKJUNK"));
            damaged.extend_from_slice(&seed[at..]);
            std::fs::write(dir.join("seed-damage-v2"), damaged).expect("seed");
        }
    }
    let key = decompress_key(&setup.v2.bytes[32..setup.v2.offsets[1]]).expect("key record");
    let mut seed = vec![0u8];
    seed.extend(frame(0x00, 0, &key));
    seed.extend(frame(0x01, 0, b"{\"base\":@B,\"anchor\":true,\"rest\":{\"seq\":[1]},\"rows\":[{\"k\":[0,2]},{\"p\":{\"@\":2,\"utime_ticks\":9}}]}"));
    seed.extend(frame(0x01, 1, b"{\"base\":@B,\"rest\":{},\"rows\":[{\"k\":[0,1]}]}"));
    std::fs::write(dir.join("seed-key-anchor-delta"), seed).expect("seed");
    let probe = Event::Probe(ProbeBatch {
        run: "r".into(),
        target: "http://127.0.0.1:1/".into(),
        results: vec![ProbeResult {
            seq: 0,
            sent_unix_ns: T0,
            total_ns: 1000,
            status: Some(200),
            error: None,
            has_response: true,
            connect_ns: Some(10),
            wait_ns: None,
        }],
    });
    let statsd = Event::Statsd(StatsdFlush {
        unix_ns: T0,
        interval_ms: 1000,
        timers: Vec::new(),
        counters: vec![("hits".into(), 1.0, 1.0)],
        gauges: vec![("queue".into(), 7.0)],
    });
    let mut seed = vec![1u8];
    seed.extend(frame(0x06, 0, &encode_event(&probe)));
    seed.extend(frame(0x07, 0, &encode_event(&statsd)));
    std::fs::write(dir.join("seed-events"), seed).expect("seed");
    let mut bomb = b"{\"base\":@B,\"rest\":{},\"rows\":[{\"k\":[0,5]}".to_vec();
    for _ in 0..2000 {
        bomb.extend_from_slice(b",{\"k\":[0,5]}");
    }
    bomb.extend_from_slice(b"]}");
    let mut seed = vec![1u8];
    seed.extend(frame(0x01, 0, &bomb));
    std::fs::write(dir.join("seed-keep-again"), seed).expect("seed");

    // An hour of minute rows of three series (one missing now and then, one idle), as the
    // roller writes them; then 256 idle columns with empty names claiming 2,048 rows (5 KB).
    let stat = |v: f64| Some(Stat { min: v - 1.0, mean: v, max: v + 2.5, last: v + 0.5, n: 60 });
    let block = RollupBlock {
        span_s: 60,
        names: vec!["host.cpu.user".into(), "group.web.rss_bytes".into(), "group.idle.rss_bytes".into()],
        rows: (0..60u64)
            .map(|m| RollupRow {
                start_unix_s: T0 / 1_000_000_000 + m * 60,
                span_s: 60,
                samples: 60,
                values: vec![
                    stat(m as f64 * 1.5),
                    if m % 7 == 3 { None } else { stat(1e8 + m as f64 * 4096.0) },
                    stat(4096.0),
                ],
            })
            .collect(),
    };
    let mut claim = Vec::new();
    let varint = proctor_store::rollup::varint;
    varint(&mut claim, 60);
    varint(&mut claim, 256);
    claim.extend(std::iter::repeat_n(0u8, 256));
    varint(&mut claim, 2048);
    for i in 0..2048 {
        varint(&mut claim, if i == 0 { T0 / 1_000_000_000 } else { 60 });
        varint(&mut claim, 60);
    }
    for _ in 0..256 {
        claim.extend_from_slice(&[0x3f, 0, 0]);
    }
    let mut seed = vec![1u8];
    seed.extend(frame(0x44, 0, &encode_event(&Event::Rollup(block))));
    seed.extend(frame(0x44, 0, &claim));
    std::fs::write(dir.join("seed-rollup"), seed).expect("seed");
}
