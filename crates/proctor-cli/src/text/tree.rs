//! A process tree as `proctor tree` and `proctor replay --tree` print it.

use std::io::Write;

use proctor_vocab::process::{ProcessOut, TreeOut};
use proctor_vocab::units::{bytes, opt_bytes, opt_pct, printable};
use serde::Serialize;

use crate::output::{print_json, Format};

/// The tree's own cgroup, when its members are exactly that cgroup's processes.
#[derive(Debug, Serialize)]
pub struct CgroupAnswer {
    pub(crate) path: String,
    pub(crate) memory_current_bytes: Option<u64>,
    pub(crate) note: &'static str,
}

#[derive(Debug, Serialize)]
pub struct PssCost {
    pub(crate) reads: usize,
    pub(crate) failed: usize,
    pub(crate) cpu_ms: f64,
    pub(crate) wall_ms: f64,
    pub(crate) slowest_pid: Option<u32>,
    pub(crate) slowest_ms: f64,
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

/// Prints one tree view. `stream`: one of several (JSON becomes one line each, text gets a
/// blank line after), as `text::snapshot::print_view` does.
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
