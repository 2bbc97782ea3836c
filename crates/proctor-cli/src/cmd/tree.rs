//! `proctor tree PID`: one process and all its descendants, per-process rows and the total.
//!
//! Memory comes from the cheap counters (`statm`, `status`) by default. `--pss` forces one
//! fresh `smaps_rollup` read per member on this thread — a one-off, whose cost (and the stall
//! it imposes on each target) is printed with the result. When the tree is exactly one cgroup,
//! that cgroup's memory counter is the O(1) answer and is shown as such.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use proctor_model::{build_tree, MemoryAge, Tree};
use proctor_procfs::cgroup;
use proctor_sampler::pss::read_pss;

use super::common::{one_snapshot, ReadArgs};
use crate::output::Format;
use crate::text::tree::{print_tree, CgroupAnswer, PssCost, TreeView};

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
                        stale: false,
                        estimated_from: None,
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
