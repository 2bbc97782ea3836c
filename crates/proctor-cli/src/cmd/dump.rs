//! `proctor dump`: recorded samples as CSV or JSON lines, one row per process (or per host
//! sample) per stored sample, with field selection, filters and top-N per sample, like
//! `below dump` and `sadf`. Rows are the vocabulary's documents (the process and host shapes
//! `/api/v1` answers with) flattened to dotted names; the columns are the vocabulary's field
//! table, which `--fields list` prints. Rates come from each sample and the one before it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use proctor_agent::Snapshot;
use proctor_model::Sample;
use proctor_store::{same_run, Event, Reader, PROBE_STREAM};
use proctor_vocab::fields::{self, Field};
use proctor_vocab::units::Unit;
use serde_json::Value;

use super::common::now_unix_ns;
use crate::output::Format;
use crate::probe_filter::{report_filtered, FilterArgs, Filters};
use crate::streams::request_record;
use proctor_vocab::{format_utc, parse_when, When};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Subject {
    /// One row per process per sample.
    Process,
    /// One row per sample: CPU shares, memory, load, pressure, paging.
    Host,
    /// One row per process group per sample, from the groups recorded with it (`record
    /// --groups`, `serve --groups`).
    Group,
    /// One row per process that ended, from the samples that list them (the BPF process
    /// events: those that lived between two samples too), in the order they ended.
    Exited,
    /// One row per series per rollup row (min, mean, max, last), from the tier that fits the
    /// range (`--tier`).
    Rollup,
    /// The probe results `proctor probe --record` stored (DIR/probe): the probe's report over
    /// those that match --slow, --status, --url, --error, --phase, --from and --to, or with
    /// --list one line per request (JSON lines with --format json). Stored results keep only
    /// the total, status, error class, connect and wait.
    Probe,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TierChoice {
    /// The finest tier that reaches back to --from, else the one reaching furthest.
    Auto,
    /// The minute tier.
    #[value(name = "1m")]
    Minute,
    /// The hour tier.
    #[value(name = "1h")]
    Hour,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DumpFormat {
    Csv,
    /// One JSON object per line.
    Json,
}

/// Arguments of `proctor dump`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_enum)]
    pub subject: Subject,
    /// The data directory `proctor record` or `proctor serve` wrote (default: where `proctor serve` records).
    #[arg(long, value_name = "DIR", default_value_os_t = crate::datadir::default_for_flags())]
    pub dir: PathBuf,
    /// From this time ("1h ago", "2024-05-01T12:00:00" UTC, "@UNIX_SECONDS"; default: the start).
    #[arg(long, value_parser = parse_when)]
    pub from: Option<When>,
    /// Up to this time (default: now).
    #[arg(long, value_parser = parse_when)]
    pub to: Option<When>,
    #[arg(long, value_enum, default_value_t = DumpFormat::Csv)]
    pub format: DumpFormat,
    /// Comma-separated fields, in order (`time` is the sample's UTC time, `time_unix_ms` the
    /// same in Unix milliseconds). `--fields list` prints every field with its unit and meaning.
    #[arg(long, value_delimiter = ',')]
    pub fields: Vec<String>,
    /// Keep rows where FIELD=TEXT (exact), FIELD~TEXT (contains), FIELD>N or FIELD<N, N a
    /// quantity in the field's unit (`rss_bytes>2G`, `cpu_seconds_total>1m30s`). Repeat to
    /// require all.
    #[arg(long = "filter", value_parser = parse_filter)]
    pub filters: Vec<Filter>,
    /// Per sample, only the N rows with the highest --sort value.
    #[arg(long)]
    pub top: Option<usize>,
    /// The numeric field --top ranks by.
    #[arg(long, default_value = "cpu_percent")]
    pub sort: String,
    /// `dump rollup`: which rollup tier to read.
    #[arg(long, value_enum, default_value_t = TierChoice::Auto)]
    pub tier: TierChoice,
    /// `dump probe`: which requests (see `proctor probe analyze --help`).
    #[command(flatten)]
    pub probe: FilterArgs,
}
const EXITED_FIELDS: &str = "time,end_time_unix_secs,pid,ppid,name,lifetime_seconds,cpu_seconds,peak_rss_bytes,exit_code,signal,seen,cgroup,cmdline";

const PROCESS_FIELDS: &str = "time,pid,ppid,name,state,uid,cpu_percent,rss_bytes,anon_bytes,swap_bytes,threads,major_faults_per_sec,read_bytes_per_sec,write_bytes_per_sec,cgroup,cmdline";
const GROUP_FIELDS: &str = "time,name,processes,threads,cpu_percent,cpu_user_percent,cpu_system_percent,reaped_cpu_percent,rss_bytes,pss_bytes,pss_known,swap_bytes,minor_faults_per_sec,major_faults_per_sec,open_fds,fds_known,started,exited";
const ROLLUP_FIELDS: &str = "time,tier,span_s,samples,series,min,mean,max,last,n";
const HOST_FIELDS: &str = "time,cpu.busy_percent,cpu.user_percent,cpu.system_percent,cpu.iowait_percent,cpu.steal_percent,memory.used_bytes,memory.available_bytes,memory.swap_used_bytes,load.avg1,load.avg5,load.avg15,context_switches_per_sec,major_faults_per_sec,pressure_cpu.some.avg10,pressure_memory.some.avg10,pressure_io.some.avg10";

/// The columns every row has besides the subject's fields.
const TIME_FIELDS: [Field; 2] = [
    Field { name: "time", title: "Time", unit: Unit::Text, description: "When the sample was taken, UTC (RFC 3339)." },
    Field {
        name: "time_unix_ms",
        title: "Time",
        unit: Unit::UnixMillis,
        description: "When the sample was taken, Unix milliseconds.",
    },
];

/// A rollup row's columns, one series at a time (`proctor_stored::rollup`).
const ROLLUP: &[Field] = &[
    Field { name: "tier", title: "Tier", unit: Unit::Text, description: "The rollup tier: 1m or 1h." },
    Field {
        name: "span_s",
        title: "Span",
        unit: Unit::Seconds,
        description: "The time the row covers from its start.",
    },
    Field { name: "samples", title: "Samples", unit: Unit::Count, description: "Raw samples the row stands for." },
    Field {
        name: "series",
        title: "Series",
        unit: Unit::Text,
        description:
            "A stored series of the catalog (docs/api.md, \"Series\"), or group.NAME.SERIES; rows rolled before it keep their old names.",
    },
    Field {
        name: "min",
        title: "Min",
        unit: Unit::Number,
        description: "The smallest value in the row (the series' own unit), to 2 significant digits of the series' largest in the block (docs/api.md, \"Series\").",
    },
    Field {
        name: "mean",
        title: "Mean",
        unit: Unit::Number,
        description: "The mean of the row's values, to 4 significant digits of the series' largest in the block.",
    },
    Field {
        name: "max",
        title: "Max",
        unit: Unit::Number,
        description: "The largest value in the row, to 4 significant digits of the series' largest in the block.",
    },
    Field {
        name: "last",
        title: "Last",
        unit: Unit::Number,
        description: "The row's last value, to 2 significant digits of the series' largest in the block.",
    },
    Field { name: "n", title: "Values", unit: Unit::Count, description: "Samples with a value of this series." },
];

/// Every column `subject` can print: the time columns, then the vocabulary's field table.
fn columns(subject: Subject) -> impl Iterator<Item = &'static Field> {
    let table = match subject {
        Subject::Process => fields::PROCESS,
        Subject::Host => fields::host_all(),
        Subject::Group => fields::GROUP,
        Subject::Exited => proctor_vocab::exited::EXITED,
        Subject::Rollup => ROLLUP,
        Subject::Probe => &[],
    };
    TIME_FIELDS.iter().chain(table.iter())
}

#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    Equals(String, String),
    Contains(String, String),
    Above(String, f64),
    Below(String, f64),
}

/// `FIELD=TEXT`, `FIELD~TEXT`, `FIELD>NUMBER`, `FIELD<NUMBER`. A number is a quantity in the one
/// grammar (`5`, `2G`, `1m30s`, `80%`, `10MiB/s`), compared in the field's base unit (bytes,
/// seconds); a unit that does not fit a field the table knows is refused.
pub fn parse_filter(text: &str) -> Result<Filter, String> {
    let at = text
        .find(['=', '~', '>', '<'])
        .ok_or_else(|| format!("not a filter: {text:?} (try comm=nginx, cpu_percent>5, rss_bytes>2G)"))?;
    let (field, rest) = text.split_at(at);
    let (op, value) = rest.split_at(1);
    let field = field.trim().to_string();
    if field.is_empty() {
        return Err(format!("not a filter: {text:?} (no field name)"));
    }
    let number = || {
        let q = proctor_units::parse_quantity(value).map_err(|e| format!("not a number in filter {text:?}: {e}"))?;
        match unit_of(&field) {
            Some(unit) if !q.dim.fits(unit) => {
                Err(format!("filter {text:?}: {} does not fit {field}, which is in {}", q.dim.name(), unit.as_str()))
            }
            _ => Ok(q.value),
        }
    };
    Ok(match op {
        "=" => Filter::Equals(field, value.to_string()),
        "~" => Filter::Contains(field, value.to_string()),
        ">" => {
            let n = number()?;
            Filter::Above(field, n)
        }
        _ => {
            let n = number()?;
            Filter::Below(field, n)
        }
    })
}

/// The unit of a field of the process, host or group table, by its (dotted) name.
fn unit_of(name: &str) -> Option<Unit> {
    [fields::PROCESS, fields::host_all(), fields::GROUP]
        .iter()
        .flat_map(|t| t.iter())
        .find(|f| f.name == name)
        .map(|f| f.unit)
}

impl Filter {
    fn field(&self) -> &str {
        match self {
            Filter::Equals(f, _) | Filter::Contains(f, _) | Filter::Above(f, _) | Filter::Below(f, _) => f,
        }
    }

    fn keeps(&self, row: &Row) -> bool {
        let value = row.get(self.field());
        match self {
            Filter::Equals(_, want) => value.is_some_and(|v| text(v) == *want),
            Filter::Contains(_, want) => value.is_some_and(|v| text(v).contains(want.as_str())),
            Filter::Above(_, n) => value.and_then(Value::as_f64).is_some_and(|v| v > *n),
            Filter::Below(_, n) => value.and_then(Value::as_f64).is_some_and(|v| v < *n),
        }
    }
}

/// A flattened row: dotted names and their values.
type Row = Vec<(String, Value)>;

trait RowExt {
    fn get(&self, name: &str) -> Option<&Value>;
}

impl RowExt for Row {
    /// The value of `name`; a name under a `null` object (`cpu.busy_percent` of a sample
    /// without rates) is `null` too.
    fn get(&self, name: &str) -> Option<&Value> {
        self.iter()
            .find(|(n, v)| {
                n == name || (v.is_null() && name.strip_prefix(n.as_str()).is_some_and(|r| r.starts_with('.')))
            })
            .map(|(_, v)| v)
    }
}

fn rows_of(subject: Subject, cur: Sample, prev: Option<&Sample>) -> anyhow::Result<(Vec<Row>, Sample)> {
    let s = Snapshot::derive(cur, prev);
    let time = Value::String(format_utc(s.sample.unix_ns));
    let make = |value: Value| {
        let mut row = vec![("time".to_string(), time.clone()), ("time_unix_ms".to_string(), Value::from(s.unix_ms()))];
        row.extend(fields::flatten(value));
        row
    };
    let rows = match subject {
        Subject::Host => {
            let mut row = make(serde_json::to_value(proctor_vocab::snapshot::host(&s))?);
            // The catalog's host series outside the shape, as the model computed them.
            row.extend(fields::host_series_fields().iter().map(|(f, i)| {
                // Whole numbers (bytes, counts) as the shape writes them, without a `.0`.
                let v = s.host.series[*i].map(|v| match v {
                    v if v.fract() == 0.0 && v.abs() < 9e15 => Value::from(v as i64),
                    v => serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
                });
                (f.name.to_string(), v.unwrap_or(Value::Null))
            }));
            vec![row]
        }
        Subject::Process => s
            .rows
            .iter()
            .map(|r| serde_json::to_value(proctor_vocab::process::process(&s, r)).map(make))
            .collect::<Result<_, _>>()?,
        Subject::Rollup | Subject::Probe => unreachable!("rollup rows and probe results are not read from samples"),
        Subject::Exited => proctor_vocab::exited::exited_of(&s.sample)
            .into_iter()
            .map(|x| serde_json::to_value(x).map(make))
            .collect::<Result<_, _>>()?,
        Subject::Group => {
            let Some(view) = proctor_agent::groups::stored_view(&s, prev) else { return Ok((Vec::new(), s.sample)) };
            view.groups.iter().map(|(g, _)| serde_json::to_value(g).map(make)).collect::<Result<_, _>>()?
        }
    };
    Ok((rows, s.sample))
}

/// A value as CSV and filters see it: strings bare, arrays of scalars space-joined, null empty.
fn text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(|v| !v.is_object() && !v.is_array()) => {
            items.iter().map(text).collect::<Vec<_>>().join(" ")
        }
        other => other.to_string(),
    }
}

fn csv_cell(value: &Value) -> String {
    let text = text(value);
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if args.fields == ["list"] {
        for f in columns(args.subject) {
            writeln!(out, "{}\t{}\t{}", f.name, f.unit.as_str(), f.description)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let probe_filters = Filters { args: args.probe.clone(), from: None, to: None, range_text: Vec::new() };
    if args.subject == Subject::Probe {
        return dump_probe(&args, probe_filters);
    }
    if probe_filters.any() || args.probe.list {
        bail!("--slow, --status, --url, --error, --phase and --list are for `dump probe`");
    }
    let default_fields = match args.subject {
        Subject::Process => PROCESS_FIELDS,
        Subject::Host => HOST_FIELDS,
        Subject::Group => GROUP_FIELDS,
        Subject::Exited => EXITED_FIELDS,
        Subject::Rollup => ROLLUP_FIELDS,
        Subject::Probe => unreachable!("dump probe returned above"),
    };
    let fields: Vec<String> = if args.fields.is_empty() {
        default_fields.split(',').map(str::to_string).collect()
    } else {
        args.fields.clone()
    };
    let known = |name: &str| columns(args.subject).find(|f| f.name == name);
    let wanted = fields.iter().map(String::as_str).chain(args.filters.iter().map(Filter::field));
    for name in wanted {
        if known(name).is_none() {
            bail!("no field {name:?} in {:?} rows (see --fields list)", args.subject);
        }
    }
    if args.top.is_some() {
        match known(&args.sort) {
            None => bail!("no field {:?} in {:?} rows to sort by (see --fields list)", args.sort, args.subject),
            Some(f) if !f.unit.is_numeric() => {
                bail!("--sort {} is not a number ({}): --top ranks by a numeric field", f.name, f.unit.as_str())
            }
            Some(_) => {}
        }
    }
    let now = now_unix_ns();
    let from = args.from.map_or(0, |w| w.resolve(now));
    let to = args.to.map_or(now, |w| w.resolve(now));
    if args.subject == Subject::Rollup {
        return dump_rollup(&args, &fields, from, to, out);
    }
    let mut reader = Reader::open(crate::datadir::for_reading(&args.dir)?).context("cannot dump")?;
    let frames = reader.frames(from, to).context("cannot dump")?;
    if args.format == DumpFormat::Csv {
        writeln!(out, "{}", fields.join(","))?;
    }
    let mut prev: Option<Sample> = None;
    let mut grouped = 0u64;
    let mut listed = 0u64;
    for frame in &frames {
        let Some(cur) = reader.read(frame) else { continue };
        let pair = prev.take().filter(|p| same_run(p, &cur));
        grouped += u64::from(cur.groups.is_some());
        listed += cur.exited.len() as u64;
        let (mut rows, cur) = rows_of(args.subject, cur, pair.as_ref())?;
        rows.retain(|row| args.filters.iter().all(|f| f.keeps(row)));
        if let Some(n) = args.top {
            let key = |row: &Row| row.get(&args.sort).and_then(Value::as_f64).unwrap_or(f64::NEG_INFINITY);
            rows.sort_by(|a, b| key(b).total_cmp(&key(a)));
            rows.truncate(n);
        }
        for row in &rows {
            write_row(&mut out, args.format, &fields, row)?;
        }
        prev = Some(cur);
    }
    out.flush()?;
    crate::datadir::report_read("proctor dump", reader.report());
    if args.subject == Subject::Group && !frames.is_empty() && grouped == 0 {
        bail!(
            "none of the {} samples says which group its processes were in: record with `--groups` (cgroup, user or a rules file)",
            frames.len()
        );
    }
    if args.subject == Subject::Exited && !frames.is_empty() && listed == 0 {
        eprintln!(
            "proctor dump: none of the {} samples lists an ended process: the recording agent had no BPF process events \
             (see `proctor doctor`), or none ended",
            frames.len()
        );
    }
    if frames.is_empty() {
        eprintln!(
            "proctor dump: no samples between {} and {} in {}",
            format_utc(from),
            format_utc(to),
            args.dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The most stored probe results `dump probe` holds at once (a week of a busy probe is hundreds
/// of millions); the rest of the range is left out, and said.
const MAX_PROBE_RECORDS: usize = 2_000_000;

/// `dump probe`: the probe stream's results in the range, as records, through the filters into
/// the probe's report or list (the one `probe analyze` prints).
fn dump_probe(args: &Args, mut filters: Filters) -> anyhow::Result<ExitCode> {
    let now = now_unix_ns();
    filters.from = args.from.map(|w| w.resolve(now));
    filters.to = args.to.map(|w| w.resolve(now));
    filters.range_text.extend(filters.from.map(|from| format!("--from {}", format_utc(from))));
    filters.range_text.extend(filters.to.map(|to| format!("--to {}", format_utc(to))));
    let dir = args.dir.join(PROBE_STREAM);
    if !dir.is_dir() {
        bail!(
            "no probe results in {}: record some with `proctor probe URL --record --data-dir {}`",
            dir.display(),
            args.dir.display()
        );
    }
    let mut reader = Reader::open(&dir).context("cannot dump")?;
    let (from, to) = (filters.from.unwrap_or(0), filters.to.unwrap_or(now));
    // A batch's frame carries its earliest send time; one may start up to its age (1 s) early.
    let mut records = Vec::new();
    let mut left_out = 0u64;
    for frame in reader.event_frames(from.saturating_sub(2_000_000_000), to).context("cannot dump")? {
        let Some(Event::Probe(batch)) = reader.read_event(&frame) else { continue };
        let room = MAX_PROBE_RECORDS.saturating_sub(records.len());
        left_out += batch.results.len().saturating_sub(room) as u64;
        records.extend(batch.results.iter().take(room).map(|result| request_record(&batch, result)));
    }
    crate::datadir::report_read("proctor dump", reader.report());
    if left_out > 0 {
        eprintln!(
            "proctor dump: read the first {MAX_PROBE_RECORDS} probe results of the range and left {left_out} out; \
             narrow it with --from/--to"
        );
    }
    if records.is_empty() {
        eprintln!(
            "proctor dump: no probe results between {} and {} in {}",
            format_utc(from),
            format_utc(to),
            dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    records.sort_by_key(|record| record.sent_unix_ns);
    let format = match args.format {
        DumpFormat::Csv => Format::Text,
        DumpFormat::Json => Format::Json,
    };
    report_filtered(records, &filters, &format!("proctor dump probe {}", dir.display()), format, None)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes one row in `fields`' order, as CSV or a JSON line.
fn write_row(out: &mut impl Write, format: DumpFormat, fields: &[String], row: &Row) -> anyhow::Result<()> {
    match format {
        DumpFormat::Csv => {
            let cells: Vec<String> = fields.iter().map(|f| row.get(f).map_or(String::new(), csv_cell)).collect();
            writeln!(out, "{}", cells.join(","))?;
        }
        DumpFormat::Json => {
            let mut line = String::from("{");
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                line.push_str(&serde_json::to_string(f)?);
                line.push(':');
                line.push_str(&serde_json::to_string(row.get(f).unwrap_or(&Value::Null))?);
            }
            line.push('}');
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// `dump rollup`: the rows of one tier starting in `[from, to]`, a line per series per row;
/// `--top` keeps each row's N series with the highest `--sort`.
fn dump_rollup(
    args: &Args,
    fields: &[String],
    from: u64,
    to: u64,
    mut out: std::io::StdoutLock<'_>,
) -> anyhow::Result<ExitCode> {
    const NS: u64 = 1_000_000_000;
    let data = crate::datadir::for_reading(&args.dir)?;
    let (label, mut tier) = match args.tier {
        TierChoice::Auto => proctor_stored::range::open_tier(data, from, false).ok_or_else(|| {
            anyhow::anyhow!(
                "no rollup rows in {}: serve and record roll finished hours every 5 minutes, `proctor rollup` by hand",
                data.display()
            )
        })?,
        TierChoice::Minute | TierChoice::Hour => {
            let label = if args.tier == TierChoice::Minute { "1m" } else { "1h" };
            match proctor_stored::range::tier_reader(data, label) {
                None => bail!("no {label} rollup tier in {} (`proctor rollup` makes one)", data.display()),
                Some(reader) => (label, reader.context("cannot dump")?),
            }
        }
    };
    let (block_s, _) = proctor_stored::range::tier_spans(label);
    let blocks = tier.event_frames(from.saturating_sub(block_s * NS), to).context("cannot dump")?;
    if args.format == DumpFormat::Csv {
        writeln!(out, "{}", fields.join(","))?;
    }
    let (mut rows_out, mut bad, mut read_until_s) = (0u64, 0u64, 0u64);
    for frame in &blocks {
        let Some(block) = proctor_stored::range::read_tier_block(&mut tier, frame, &mut read_until_s) else {
            bad += 1;
            continue;
        };
        for row in &block.rows {
            let start_ns = row.start_unix_s.saturating_mul(NS);
            if start_ns < from || start_ns > to {
                continue;
            }
            rows_out += 1;
            let mut lines: Vec<Row> = block
                .names
                .iter()
                .zip(&row.values)
                .filter_map(|(name, stat)| {
                    let stat = stat.as_ref()?;
                    Some(vec![
                        ("time".to_string(), Value::String(format_utc(start_ns))),
                        ("time_unix_ms".to_string(), Value::from(row.start_unix_s * 1000)),
                        ("tier".to_string(), Value::from(label)),
                        ("span_s".to_string(), Value::from(row.span_s)),
                        ("samples".to_string(), Value::from(row.samples)),
                        ("series".to_string(), Value::from(name.as_str())),
                        ("min".to_string(), Value::from(stat.min)),
                        ("mean".to_string(), Value::from(stat.mean)),
                        ("max".to_string(), Value::from(stat.max)),
                        ("last".to_string(), Value::from(stat.last)),
                        ("n".to_string(), Value::from(stat.n)),
                    ])
                })
                .filter(|line| args.filters.iter().all(|f| f.keeps(line)))
                .collect();
            if let Some(n) = args.top {
                let key = |row: &Row| row.get(&args.sort).and_then(Value::as_f64).unwrap_or(f64::NEG_INFINITY);
                lines.sort_by(|a, b| key(b).total_cmp(&key(a)));
                lines.truncate(n);
            }
            for line in &lines {
                write_row(&mut out, args.format, fields, line)?;
            }
        }
    }
    out.flush()?;
    crate::datadir::report_read("proctor dump", tier.report());
    if bad > 0 {
        eprintln!("proctor dump: {bad} rollup block(s) could not be read and were skipped");
    }
    if rows_out == 0 {
        eprintln!("proctor dump: no {label} rollup rows between {} and {}", format_utc(from), format_utc(to));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_and_apply() {
        assert_eq!(parse_filter("comm=nginx"), Ok(Filter::Equals("comm".into(), "nginx".into())));
        assert_eq!(parse_filter("cpu_percent>5"), Ok(Filter::Above("cpu_percent".into(), 5.0)));
        assert!(parse_filter("nonsense").is_err());
        assert!(parse_filter("=x").is_err());
        assert!(parse_filter("cpu_percent>lots").is_err());
        // The one quantity grammar, in the field's base unit.
        assert_eq!(parse_filter("rss_bytes>2G"), Ok(Filter::Above("rss_bytes".into(), 2147483648.0)));
        assert_eq!(parse_filter("rss_bytes>2 GiB"), parse_filter("rss_bytes>2G"));
        assert_eq!(parse_filter("cpu_seconds_total<1m30s"), Ok(Filter::Below("cpu_seconds_total".into(), 90.0)));
        assert_eq!(parse_filter("cpu_percent>5%"), Ok(Filter::Above("cpu_percent".into(), 5.0)));
        assert!(parse_filter("rss_bytes>5s").is_err_and(|e| e.contains("a duration does not fit rss_bytes")));
        let row: Row = vec![("name".into(), Value::from("nginx: worker")), ("cpu_percent".into(), Value::from(7.5))];
        assert!(Filter::Contains("name".into(), "worker".into()).keeps(&row));
        assert!(!Filter::Equals("name".into(), "nginx".into()).keeps(&row));
        assert!(Filter::Above("cpu_percent".into(), 5.0).keeps(&row));
        assert!(!Filter::Below("cpu_percent".into(), 5.0).keeps(&row));
        assert!(!Filter::Above("missing".into(), 0.0).keeps(&row));
    }

    #[test]
    fn csv_cells_quote_what_needs_quoting_and_join_arrays() {
        assert_eq!(csv_cell(&Value::from("a,b")), "\"a,b\"");
        assert_eq!(csv_cell(&Value::from("say \"hi\"")), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell(&serde_json::json!(["/bin/sh", "-c", "x"])), "/bin/sh -c x");
        assert_eq!(csv_cell(&Value::Null), "");
        let row: Row = fields::flatten(serde_json::json!({"cpu": {"busy": 1.5}, "mem": null, "args": ["a", "b"]}));
        assert_eq!(row.get("cpu.busy"), Some(&Value::from(1.5)));
        assert_eq!(row.get("mem.used_bytes"), Some(&Value::Null));
        assert_eq!(csv_cell(row.get("args").expect("args")), "a b");
    }
}
