//! `proctor dump`: recorded samples as CSV or JSON lines, one row per process (or per host
//! sample) per stored sample, with field selection, filters and top-N per sample, like
//! `below dump` and `sadf`. Rows are the model's derived views (`process_rows`, `host_view`)
//! flattened to dotted field names; rates come from each sample and the one before it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use proctor_model::{container_truth, host_view, process_rows, RowContext, Sample};
use proctor_store::{same_run, Reader};
use serde_json::Value;

use super::replay::now_unix_ns;
use proctor_vocab::{format_utc, parse_when, When};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Subject {
    /// One row per process per sample.
    Process,
    /// One row per sample: CPU shares, memory, load, pressure, paging.
    Host,
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
    /// The data directory `proctor record` wrote.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// From this time ("1h ago", "2024-05-01T12:00:00" UTC, "@UNIX_SECONDS"; default: the start).
    #[arg(long, value_parser = parse_when)]
    pub from: Option<When>,
    /// Up to this time (default: now).
    #[arg(long, value_parser = parse_when)]
    pub to: Option<When>,
    #[arg(long, value_enum, default_value_t = DumpFormat::Csv)]
    pub format: DumpFormat,
    /// Comma-separated fields, in order (`time` is the sample's UTC time). `--fields list`
    /// prints the available names.
    #[arg(long, value_delimiter = ',')]
    pub fields: Vec<String>,
    /// Keep rows where FIELD=TEXT (exact), FIELD~TEXT (contains), FIELD>N or FIELD<N. Repeat to
    /// require all.
    #[arg(long = "filter", value_parser = parse_filter)]
    pub filters: Vec<Filter>,
    /// Per sample, only the N rows with the highest --sort value.
    #[arg(long)]
    pub top: Option<usize>,
    /// The numeric field --top ranks by.
    #[arg(long, default_value = "cpu_percent")]
    pub sort: String,
}

const PROCESS_FIELDS: &str = "time,pid,ppid,comm,state,uid,cpu_percent,rss_bytes,anon_bytes,swap_bytes,threads,major_faults_per_sec,read_bytes_per_sec,write_bytes_per_sec,cgroup,cmdline";
const HOST_FIELDS: &str = "time,cpu.busy,cpu.user,cpu.system,cpu.iowait,cpu.steal,memory_used_bytes,memory_available_bytes,swap_used_bytes,load,context_switches_per_sec,major_faults_per_sec,pressure_cpu.some.avg10,pressure_memory.some.avg10,pressure_io.some.avg10";

#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    Equals(String, String),
    Contains(String, String),
    Above(String, f64),
    Below(String, f64),
}

pub fn parse_filter(text: &str) -> Result<Filter, String> {
    let at = text
        .find(['=', '~', '>', '<'])
        .ok_or_else(|| format!("not a filter: {text:?} (try comm=nginx, cpu_percent>5)"))?;
    let (field, rest) = text.split_at(at);
    let (op, value) = rest.split_at(1);
    let field = field.trim().to_string();
    if field.is_empty() {
        return Err(format!("not a filter: {text:?} (no field name)"));
    }
    let number = || value.trim().parse::<f64>().map_err(|_| format!("not a number in filter {text:?}"));
    Ok(match op {
        "=" => Filter::Equals(field, value.to_string()),
        "~" => Filter::Contains(field, value.to_string()),
        ">" => Filter::Above(field, number()?),
        _ => Filter::Below(field, number()?),
    })
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

/// A flattened row: dotted names in the order the view declares them.
type Row = Vec<(String, Value)>;

trait RowExt {
    fn get(&self, name: &str) -> Option<&Value>;
}

impl RowExt for Row {
    fn get(&self, name: &str) -> Option<&Value> {
        self.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

fn flatten(prefix: &str, value: Value, out: &mut Row) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let name = if prefix.is_empty() { key } else { format!("{prefix}.{key}") };
                flatten(&name, inner, out);
            }
        }
        other => out.push((prefix.to_string(), other)),
    }
}

fn rows_of(subject: Subject, cur: &Sample, prev: Option<&Sample>) -> anyhow::Result<Vec<Row>> {
    let time = Value::String(format_utc(cur.unix_ns));
    let make = |value: Value| {
        let mut row = vec![("time".to_string(), time.clone()), ("unix_ns".to_string(), Value::from(cur.unix_ns))];
        flatten("", value, &mut row);
        row
    };
    Ok(match subject {
        Subject::Host => vec![make(serde_json::to_value(host_view(cur, prev))?)],
        Subject::Process => {
            let truth = container_truth(cur);
            let rows = process_rows(cur, prev, RowContext { effective_cpus: truth.effective_cpus });
            rows.iter().map(|r| serde_json::to_value(r).map(make)).collect::<Result<_, _>>()?
        }
    })
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
    let now = now_unix_ns();
    let from = args.from.map_or(0, |w| w.resolve(now));
    let to = args.to.map_or(now, |w| w.resolve(now));
    let mut reader = Reader::open(&args.dir).context("cannot dump")?;
    let frames = reader.frames(from, to)?;
    let default_fields = match args.subject {
        Subject::Process => PROCESS_FIELDS,
        Subject::Host => HOST_FIELDS,
    };
    let fields: Vec<String> = if args.fields.is_empty() {
        default_fields.split(',').map(str::to_string).collect()
    } else {
        args.fields.clone()
    };
    let mut out = std::io::stdout().lock();
    let mut prev: Option<Sample> = None;
    let mut checked_names = false;
    for frame in &frames {
        let Some(cur) = reader.read(frame) else { continue };
        let pair = prev.as_ref().filter(|p| same_run(p, &cur));
        let mut rows = rows_of(args.subject, &cur, pair)?;
        if !checked_names {
            if let Some(first) = rows.first() {
                let names: Vec<&str> = first.iter().map(|(n, _)| n.as_str()).collect();
                if fields == ["list"] {
                    writeln!(out, "{}", names.join("\n"))?;
                    return Ok(ExitCode::SUCCESS);
                }
                let wanted = fields.iter().map(String::as_str).chain(args.filters.iter().map(Filter::field));
                let wanted = wanted.chain(args.top.map(|_| args.sort.as_str()));
                // A null object (`cpu` of a sample without rates) hides its fields, so a name
                // under a null field counts as known.
                let under_null = |name: &str| {
                    first
                        .iter()
                        .any(|(n, v)| v.is_null() && name.strip_prefix(n.as_str()).is_some_and(|r| r.starts_with('.')))
                };
                for name in wanted {
                    if !names.contains(&name) && !under_null(name) {
                        bail!("no field {name:?} in {:?} rows (see --fields list)", args.subject);
                    }
                }
                if args.format == DumpFormat::Csv {
                    writeln!(out, "{}", fields.join(","))?;
                }
                checked_names = true;
            }
        }
        rows.retain(|row| args.filters.iter().all(|f| f.keeps(row)));
        if let Some(n) = args.top {
            let key = |row: &Row| row.get(&args.sort).and_then(Value::as_f64).unwrap_or(f64::NEG_INFINITY);
            rows.sort_by(|a, b| key(b).total_cmp(&key(a)));
            rows.truncate(n);
        }
        for row in &rows {
            match args.format {
                DumpFormat::Csv => {
                    let cells: Vec<String> =
                        fields.iter().map(|f| row.get(f).map_or(String::new(), csv_cell)).collect();
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
        }
        prev = Some(cur);
    }
    out.flush()?;
    for (path, offset, why) in &reader.report().bad_frames {
        eprintln!("proctor dump: skipped the frame at {}:{offset}: {why}", path.display());
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
        let row: Row = vec![("comm".into(), Value::from("nginx: worker")), ("cpu_percent".into(), Value::from(7.5))];
        assert!(Filter::Contains("comm".into(), "worker".into()).keeps(&row));
        assert!(!Filter::Equals("comm".into(), "nginx".into()).keeps(&row));
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
        let mut row = Row::new();
        flatten("", serde_json::json!({"cpu": {"busy": 1.5}, "load": [1, 2, 3]}), &mut row);
        assert_eq!(row.get("cpu.busy"), Some(&Value::from(1.5)));
        assert_eq!(csv_cell(row.get("load").expect("load")), "1 2 3");
    }
}
