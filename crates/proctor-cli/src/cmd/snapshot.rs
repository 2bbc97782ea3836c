//! `proctor snapshot`: host, container truth and the top processes from two samples.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use proctor_model::{host_view, ContainerTruth, HostView, ProcessRow, SampleCost};
use proctor_sampler::{Sampler, Schedule};
use serde::Serialize;

use super::common::{command_of, printable, two_samples, ReadArgs};
use crate::output::{bytes, opt_bytes, opt_pct, print_json, Format};

/// Arguments of `proctor snapshot`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many processes to list.
    #[arg(long, default_value_t = 15)]
    pub top: usize,
    /// Order processes by this column.
    #[arg(long, value_enum, default_value_t = SortKey::Cpu)]
    pub sort: SortKey,
    /// Time between the two samples that rates are derived from (0: one sample, no rates).
    #[arg(long, default_value = "1s", value_parser = proctor_vocab::duration_arg)]
    pub interval: Duration,
    /// Keep sampling: print this many snapshots, one per interval, on a drift-corrected
    /// schedule (JSON becomes one document per line).
    #[arg(long, default_value_t = 1)]
    pub count: u64,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    Cpu,
    Rss,
    Pid,
}

#[derive(Serialize)]
struct Output<'a> {
    /// When the sample was taken (Unix nanoseconds): replayed views need it.
    unix_ns: u64,
    host: HostView,
    container: &'a ContainerTruth,
    process_count: usize,
    processes: Vec<&'a ProcessRow>,
    sample_cost: &'a SampleCost,
}

pub fn sort_rows(rows: &mut Vec<&ProcessRow>, key: SortKey) {
    match key {
        SortKey::Cpu => rows.sort_by(|a, b| {
            b.cpu_percent.unwrap_or(0.0).total_cmp(&a.cpu_percent.unwrap_or(0.0)).then(b.rss_bytes.cmp(&a.rss_bytes))
        }),
        SortKey::Rss => rows.sort_by_key(|r| std::cmp::Reverse(r.rss_bytes)),
        SortKey::Pid => rows.sort_by_key(|r| r.pid),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut config = args.read.config();
    config.pss_budget = 0.0;
    let mut sampler = Sampler::new(config);
    if args.count <= 1 {
        let s = two_samples(&mut sampler, args.interval);
        print(&args, &s.cur, s.prev.as_ref(), &s.truth, &s.rows, false)?;
        return Ok(ExitCode::SUCCESS);
    }
    // The loop: tick k is due at start + k·interval, whatever each cycle cost.
    let mut schedule = Schedule::new(std::time::Instant::now(), args.interval);
    let mut prev = sampler.sample();
    for _ in 0..args.count {
        schedule.wait();
        let cur = sampler.sample();
        let truth = proctor_model::container_truth(&cur);
        let ctx = proctor_model::RowContext { effective_cpus: truth.effective_cpus };
        let rows = proctor_model::process_rows(&cur, Some(&prev), ctx);
        print(&args, &cur, Some(&prev), &truth, &rows, true)?;
        prev = cur;
    }
    if schedule.missed() > 0 {
        eprintln!("proctor snapshot: {} ticks missed because sampling overran the interval", schedule.missed());
    }
    Ok(ExitCode::SUCCESS)
}

fn print(
    args: &Args,
    cur: &proctor_model::Sample,
    prev: Option<&proctor_model::Sample>,
    truth: &ContainerTruth,
    rows: &[ProcessRow],
    stream: bool,
) -> anyhow::Result<()> {
    let view = View { top: args.top, sort: args.sort, format: args.format };
    print_view(view, cur, prev, truth, rows, stream)
}

/// What `snapshot` shows and how; `replay` renders stored samples through the same code.
#[derive(Debug, Clone, Copy)]
pub struct View {
    pub top: usize,
    pub sort: SortKey,
    pub format: Format,
}

/// Prints one snapshot view of `cur` (rates against `prev`). `stream`: one of several (JSON
/// becomes one line each, text gets a blank line after).
pub fn print_view(
    view: View,
    cur: &proctor_model::Sample,
    prev: Option<&proctor_model::Sample>,
    truth: &ContainerTruth,
    rows: &[ProcessRow],
    stream: bool,
) -> anyhow::Result<()> {
    let mut top: Vec<&ProcessRow> = rows.iter().collect();
    sort_rows(&mut top, view.sort);
    top.truncate(view.top);
    let out = Output {
        unix_ns: cur.unix_ns,
        host: host_view(cur, prev),
        container: truth,
        process_count: rows.len(),
        processes: top,
        sample_cost: &cur.cost,
    };
    match (view.format, stream) {
        (Format::Json, false) => print_json(&out)?,
        (Format::Json, true) => {
            let mut w = std::io::stdout().lock();
            serde_json::to_writer(&mut w, &out)?;
            writeln!(w)?;
            w.flush()?;
        }
        (Format::Text, _) => {
            print_text(&out)?;
            if stream {
                println!();
            }
        }
    }
    Ok(())
}

fn print_text(o: &Output) -> anyhow::Result<()> {
    let mut w = std::io::stdout().lock();
    let h = &o.host;
    let load = h.load.map_or("-".to_string(), |l| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]));
    writeln!(
        w,
        "host       {} CPUs online · load {load} · up {}",
        h.online_cpus.map_or("?".into(), |n| n.to_string()),
        h.uptime_secs.map_or("-".into(), |u| format!("{:.1} h", u / 3600.0))
    )?;
    if let Some(c) = h.cpu {
        writeln!(
            w,
            "cpu        busy {:.1}% (user {:.1} nice {:.1} system {:.1} iowait {:.1} irq {:.1} steal {:.1}) · {} ctxsw/s",
            c.busy, c.user, c.nice, c.system, c.iowait, c.irq + c.softirq, c.steal,
            h.context_switches_per_sec.map_or("-".into(), |v| format!("{v:.0}"))
        )?;
    }
    writeln!(
        w,
        "memory     used {} of {} (available {}) · swap used {}",
        opt_bytes(h.memory_used_bytes),
        opt_bytes(h.memory_total_bytes),
        opt_bytes(h.memory_available_bytes),
        opt_bytes(h.swap_used_bytes)
    )?;
    let psi = |name: &str, p: Option<proctor_procfs::host::Pressure>| {
        p.map(|p| {
            let some = p.some.map_or("-".into(), |l| format!("{:.2}", l.avg10));
            let full = p.full.map_or("-".into(), |l| format!("{:.2}", l.avg10));
            format!("{name} {some}/{full}")
        })
    };
    let psis: Vec<String> = [psi("cpu", h.pressure_cpu), psi("memory", h.pressure_memory), psi("io", h.pressure_io)]
        .into_iter()
        .flatten()
        .collect();
    if !psis.is_empty() {
        writeln!(w, "pressure   {} (some/full avg10 %)", psis.join(" · "))?;
    }
    for d in &h.disks {
        if d.reads_per_sec + d.writes_per_sec > 0.0 {
            writeln!(
                w,
                "disk       {} read {}/s write {}/s busy {:.1}%",
                d.name,
                bytes(d.read_bytes_per_sec as u64),
                bytes(d.write_bytes_per_sec as u64),
                d.busy_percent
            )?;
        }
    }
    for n in &h.nets {
        if n.rx_packets_per_sec + n.tx_packets_per_sec > 0.0 {
            writeln!(
                w,
                "net        {} rx {}/s tx {}/s",
                n.name,
                bytes(n.rx_bytes_per_sec as u64),
                bytes(n.tx_bytes_per_sec as u64)
            )?;
        }
    }
    write_container(&mut w, o.container)?;
    writeln!(w)?;
    writeln!(
        w,
        "{:>7} {:>7} {:>5} {:>6} {:>9} {:>9} {:>4} S  COMMAND",
        "PID", "PPID", "UID", "CPU%", "RSS", "ANON", "THR"
    )?;
    for r in &o.processes {
        let mut command = printable(&command_of(r));
        command.truncate(command.floor_char_boundary(80));
        writeln!(
            w,
            "{:>7} {:>7} {:>5} {:>6} {:>9} {:>9} {:>4} {}  {}",
            r.pid,
            r.ppid,
            r.uid.map_or("-".into(), |u| u.to_string()),
            opt_pct(r.cpu_percent),
            opt_bytes(r.rss_bytes),
            opt_bytes(r.anon_bytes),
            r.threads,
            r.state,
            command
        )?;
    }
    writeln!(w)?;
    write_cost(&mut w, o.sample_cost, o.process_count)?;
    Ok(())
}

pub fn write_container(w: &mut impl Write, c: &ContainerTruth) -> std::io::Result<()> {
    let cpus = |v: Option<f64>| v.map_or("-".to_string(), proctor_model::format_cpus);
    writeln!(
        w,
        "container  cgroup {} {} · effective CPUs {} (rounded up {}; affinity {}, cpuset {}, quota {}) of {} online",
        c.cgroup_version.unwrap_or("none"),
        c.cgroup_path.as_deref().unwrap_or("-"),
        cpus(c.effective_cpus),
        c.effective_cpus_ceil.map_or("-".into(), |v| v.to_string()),
        c.affinity_cpus.map_or("-".into(), |v| v.to_string()),
        c.cpuset_cpus.map_or("-".into(), |v| v.to_string()),
        cpus(c.quota_cpus),
        c.host_online_cpus.map_or("?".into(), |v| v.to_string()),
    )?;
    writeln!(
        w,
        "           memory limit {} ({}) · charged now {}",
        opt_bytes(c.memory_limit_bytes),
        c.memory_limit_source.as_deref().unwrap_or("-"),
        opt_bytes(c.memory_current_bytes)
    )?;
    for warning in &c.warnings {
        writeln!(w, "warning    {warning}")?;
    }
    Ok(())
}

pub fn write_cost(w: &mut impl Write, cost: &SampleCost, processes: usize) -> std::io::Result<()> {
    let errors: Vec<String> =
        cost.errors.iter().map(|((reader, reason), n)| format!("{reader}:{reason}={n}")).collect();
    writeln!(
        w,
        "self       last sample {:.2} ms wall, {:.2} ms CPU for {processes} processes · {} files read, {} opened, {} fds kept · {} gone mid-read · errors: {}",
        cost.wall_ns as f64 / 1e6,
        cost.cpu_ns as f64 / 1e6,
        cost.files_read,
        cost.files_opened,
        cost.fds_kept,
        cost.processes_gone,
        if errors.is_empty() { "none".to_string() } else { errors.join(" ") }
    )
}
