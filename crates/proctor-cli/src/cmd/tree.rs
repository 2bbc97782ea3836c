//! `proctor tree PID`: one process and all its descendants, per-process rows and the total.
//!
//! Memory comes from the cheap counters (`statm`, `status`) by default. `--pss` forces one
//! fresh `smaps_rollup` read per member on this thread — a one-off, whose cost (and the stall
//! it imposes on each target) is printed with the result. When the tree is exactly one cgroup,
//! that cgroup's memory counter is the O(1) answer and is shown as such.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use proctor_model::{build_tree, MemoryAge, Tree};
use proctor_procfs::cgroup;
use proctor_sampler::pss::read_pss;
use proctor_vocab::process::{ProcessOut, TreeOut};
use proctor_vocab::units::{bytes, opt_bytes, opt_pct, printable};
use serde::Serialize;

use super::common::{one_snapshot, ReadArgs};
use crate::output::{print_json, Format};

/// Arguments of `proctor tree`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The root of the tree.
    pub pid: u32,
    /// Read smaps_rollup for every member now (PSS, USS); it stalls each target briefly.
    #[arg(long)]
    pub pss: bool,
    /// Time between the two samples that CPU % is derived from (0: no CPU %).
    #[arg(long, default_value = "1s", value_parser = proctor_vocab::duration_arg)]
    pub interval: Duration,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub read: ReadArgs,
}

/// The tree's own cgroup, when its members are exactly that cgroup's processes.
#[derive(Debug, Serialize)]
pub struct CgroupAnswer {
    path: String,
    memory_current_bytes: Option<u64>,
    note: &'static str,
}

#[derive(Debug, Serialize)]
pub struct PssCost {
    reads: usize,
    failed: usize,
    cpu_ms: f64,
    wall_ms: f64,
    slowest_pid: Option<u32>,
    slowest_ms: f64,
}

/// One tree view: what `proctor tree` prints, and `proctor replay --tree` for a stored sample.
/// The tree is the vocabulary's (what `/api/v1/processes/PID/tree` answers).
#[derive(Debug, Serialize)]
pub struct TreeView {
    #[serde(flatten)]
    pub tree: TreeOut,
    pub cgroup: Option<CgroupAnswer>,
    pub pss_read: Option<PssCost>,
    /// What the `pss` line suggests when no member has a PSS reading.
    #[serde(skip)]
    pub pss_hint: &'static str,
}

/// The hint `proctor tree` gives when PSS was not read.
const LIVE_PSS_HINT: &str = "add --pss for a one-off read; it stalls each process briefly";

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut config = args.read.config()?;
    if !config.root.path(format!("/proc/{}", args.pid)).exists() {
        eprintln!("proctor tree: no process with pid {}", args.pid);
        return Ok(ExitCode::FAILURE);
    }
    config.pss_budget = 0.0;
    let root = config.root.clone();
    let s = one_snapshot(config, args.interval)?;
    let Some(mut tree) = build_tree(&s.rows, args.pid) else {
        eprintln!("proctor tree: no process with pid {} (it exited while being read)", args.pid);
        return Ok(ExitCode::FAILURE);
    };
    let pss_read = args.pss.then(|| {
        let epoch = Instant::now();
        let mut buf = Vec::new();
        let mut cost = PssCost { reads: 0, failed: 0, cpu_ms: 0.0, wall_ms: 0.0, slowest_pid: None, slowest_ms: 0.0 };
        let started = Instant::now();
        for r in &mut tree.rows {
            let t = Instant::now();
            match read_pss(&root, r.row.pid, epoch, &mut buf) {
                Ok(reading) => {
                    cost.reads += 1;
                    cost.cpu_ms += reading.cost_cpu_ns as f64 / 1e6;
                    r.row.pss = Some(MemoryAge {
                        pss_bytes: reading.rollup.pss_bytes,
                        uss_bytes: reading.rollup.uss_bytes(),
                        swap_pss_bytes: reading.rollup.swap_pss_bytes,
                        age_secs: 0.0,
                    });
                }
                Err(_) => cost.failed += 1,
            }
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if ms > cost.slowest_ms {
                cost.slowest_ms = ms;
                cost.slowest_pid = Some(r.row.pid);
            }
        }
        cost.wall_ms = started.elapsed().as_secs_f64() * 1e3;
        let rows: Vec<_> = tree.rows.iter().map(|r| r.row.clone()).collect();
        if let Some(t) = build_tree(&rows, args.pid) {
            tree.total = t.total;
        }
        cost
    });
    let cgroup = cgroup_answer(&root, &s.rows, &tree);
    let out = TreeView { tree: proctor_vocab::process::tree(&s, &tree), cgroup, pss_read, pss_hint: LIVE_PSS_HINT };
    print_tree(&out, args.format, false)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints one tree view. `stream`: one of several (JSON becomes one line each, text gets a
/// blank line after), as `snapshot::print_view` does.
pub fn print_tree(view: &TreeView, format: Format, stream: bool) -> anyhow::Result<()> {
    match (format, stream) {
        (Format::Json, false) => print_json(view)?,
        (Format::Json, true) => {
            let mut w = std::io::stdout().lock();
            serde_json::to_writer(&mut w, view)?;
            writeln!(w)?;
            w.flush()?;
        }
        (Format::Text, _) => {
            print_text(view)?;
            if stream {
                println!();
            }
        }
    }
    Ok(())
}

/// When every process in the root's cgroup (and cgroups below it) is in the tree and every
/// tree member is in it, the cgroup's memory counter answers "how much does this tree use" in
/// one read, including page cache charged to it, which per-process sums cannot see.
fn cgroup_answer(root: &proctor_procfs::Root, rows: &[proctor_model::ProcessRow], tree: &Tree) -> Option<CgroupAnswer> {
    let root_cgroup = tree.rows.first()?.row.cgroup.clone()?;
    if &*root_cgroup == "/" {
        return None;
    }
    let inside =
        |c: &str| c == &*root_cgroup || c.strip_prefix(&*root_cgroup).is_some_and(|rest| rest.starts_with('/'));
    let members: std::collections::HashSet<u32> = tree.rows.iter().map(|r| r.row.pid).collect();
    let all_members_inside = tree.rows.iter().all(|r| r.row.cgroup.as_deref().is_some_and(inside));
    let no_outsiders =
        rows.iter().filter(|r| r.cgroup.as_deref().is_some_and(inside)).all(|r| members.contains(&r.pid));
    if !(all_members_inside && no_outsiders) {
        return None;
    }
    let paths = cgroup::discover(root, tree.root_pid).ok()??;
    let counters = cgroup::read_counters(root, &paths);
    Some(CgroupAnswer {
        path: root_cgroup.to_string(),
        memory_current_bytes: counters.memory_current_bytes,
        note: "this tree is exactly this cgroup: its memory counter is the O(1) total, page cache included",
    })
}

fn print_text(o: &TreeView) -> anyhow::Result<()> {
    let mut w = std::io::stdout().lock();
    writeln!(
        w,
        "{:>7} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>4}  COMMAND",
        "PID", "CPU%", "RSS", "ANON", "FILE", "SHMEM", "PSS", "USS", "THR"
    )?;
    for r in &o.tree.processes {
        let p = &r.process;
        let mut command = format!("{}{}", "  ".repeat(r.depth.min(20)), printable(&command_of(p)));
        command.truncate(command.floor_char_boundary(90));
        writeln!(
            w,
            "{:>7} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>4}  {}",
            p.pid,
            opt_pct(p.cpu_percent),
            opt_bytes(p.rss_bytes),
            opt_bytes(p.anon_bytes),
            opt_bytes(p.file_bytes),
            opt_bytes(p.shmem_bytes),
            opt_bytes(p.pss_bytes),
            opt_bytes(p.uss_bytes),
            p.threads,
            command
        )?;
    }
    let t = &o.tree.total;
    writeln!(
        w,
        "{:>7} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>4}  {} processes (RSS counts shared pages once per process)",
        "total",
        opt_pct(t.cpu_percent),
        bytes(t.rss_bytes),
        bytes(t.anon_bytes),
        bytes(t.file_bytes),
        bytes(t.shmem_bytes),
        opt_bytes(t.pss_bytes),
        opt_bytes(t.uss_bytes),
        t.threads,
        t.processes
    )?;
    match (t.pss_known, t.pss_oldest_age_secs) {
        (0, _) => writeln!(w, "pss        not read ({})", o.pss_hint)?,
        (n, age) => writeln!(
            w,
            "pss        known for {n} of {} processes, oldest reading {:.1} s old",
            t.processes,
            age.unwrap_or(0.0)
        )?,
    }
    if let Some(c) = &o.pss_read {
        writeln!(
            w,
            "pss cost   {} smaps_rollup reads ({} failed): {:.1} ms CPU, {:.1} ms wall; slowest {:.2} ms (pid {})",
            c.reads,
            c.failed,
            c.cpu_ms,
            c.wall_ms,
            c.slowest_ms,
            c.slowest_pid.map_or("-".into(), |p| p.to_string())
        )?;
    }
    if let Some(c) = &o.cgroup {
        writeln!(w, "cgroup     {}: memory charged {} — {}", c.path, opt_bytes(c.memory_current_bytes), c.note)?;
    }
    Ok(())
}

/// The command line if read, else the name in brackets (as ps shows kernel threads).
fn command_of(p: &ProcessOut) -> String {
    match p.cmdline.as_deref() {
        Some(args) if !args.is_empty() => args.join(" "),
        _ => format!("[{}]", p.name),
    }
}
