//! Process trees: descendants of a root pid, built from ppid links, and their totals.

use std::collections::HashMap;

use serde::Serialize;

use crate::ProcessRow;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeRow {
    pub depth: usize,
    #[serde(flatten)]
    pub row: ProcessRow,
}

/// Sums over a tree. A total is `None` only when no member had the value; `*_missing` says
/// how many members lacked it, so a partial sum is never passed off as complete.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TreeTotal {
    pub processes: u64,
    pub threads: u64,
    pub cpu_percent: Option<f64>,
    pub cpu_percent_of_effective: Option<f64>,
    pub rss_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
    pub shmem_bytes: u64,
    pub swap_bytes: u64,
    pub status_missing: u64,
    pub pss_bytes: Option<u64>,
    pub uss_bytes: Option<u64>,
    /// PSS/USS of how many members are known, and the oldest of those readings.
    pub pss_known: u64,
    pub pss_oldest_age_secs: Option<f64>,
    /// How many of the known were read before their family last changed (a sharer appeared,
    /// left or exec'd), so their share of shared pages may have moved since: a sum with stale
    /// members is not a sum of the tree as it is.
    pub pss_stale: u64,
    /// How many of the known are a clone's reading standing in for the member's own
    /// ([`crate::MemoryAge::estimated_from`]).
    pub pss_estimated: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tree {
    pub root_pid: u32,
    /// Depth-first, children in pid order, root first.
    pub rows: Vec<TreeRow>,
    pub total: TreeTotal,
}

impl TreeTotal {
    /// The tree's PSS as it is now: only when every member's is known and none was read before
    /// its family changed. Members whose figure is a clone's count as known: `pss_estimated`
    /// says how many.
    pub fn pss_complete(&self) -> Option<u64> {
        self.pss_bytes.filter(|_| self.pss_known == self.processes && self.pss_stale == 0)
    }
}

/// Builds the tree under `root_pid` from `rows`; `None` when the pid is not among them.
pub fn build_tree(rows: &[ProcessRow], root_pid: u32) -> Option<Tree> {
    let root_index = rows.iter().position(|r| r.pid == root_pid)?;
    let mut children: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        // pid 0's children (init, kthreadd) and self-parented rows never loop.
        if r.pid != r.ppid {
            children.entry(r.ppid).or_default().push(i);
        }
    }
    for list in children.values_mut() {
        list.sort_by_key(|&i| rows[i].pid);
    }
    let mut out = Vec::new();
    let mut stack = vec![(root_index, 0usize)];
    let mut seen = std::collections::HashSet::new();
    while let Some((i, depth)) = stack.pop() {
        if !seen.insert(rows[i].pid) {
            continue;
        }
        out.push(TreeRow { depth, row: rows[i].clone() });
        if let Some(kids) = children.get(&rows[i].pid) {
            for &k in kids.iter().rev() {
                stack.push((k, depth + 1));
            }
        }
    }
    let total = total_of(out.iter().map(|r| &r.row));
    Some(Tree { root_pid, rows: out, total })
}

fn total_of<'a>(rows: impl Iterator<Item = &'a ProcessRow>) -> TreeTotal {
    let mut t = TreeTotal::default();
    let add_opt = |slot: &mut Option<f64>, v: Option<f64>| {
        if let Some(v) = v {
            *slot = Some(slot.unwrap_or(0.0) + v);
        }
    };
    for r in rows {
        t.processes += 1;
        t.threads += r.threads;
        add_opt(&mut t.cpu_percent, r.cpu_percent);
        add_opt(&mut t.cpu_percent_of_effective, r.cpu_percent_of_effective);
        t.rss_bytes += r.rss_bytes.unwrap_or(0);
        t.anon_bytes += r.anon_bytes.unwrap_or(0);
        match (r.file_bytes, r.shmem_bytes, r.swap_bytes) {
            (Some(f), Some(s), w) => {
                t.file_bytes += f;
                t.shmem_bytes += s;
                t.swap_bytes += w.unwrap_or(0);
            }
            _ => t.status_missing += 1,
        }
        if let Some(m) = r.pss {
            if let Some(p) = m.pss_bytes {
                t.pss_bytes = Some(t.pss_bytes.unwrap_or(0) + p);
            }
            if let Some(u) = m.uss_bytes {
                t.uss_bytes = Some(t.uss_bytes.unwrap_or(0) + u);
            }
            t.pss_known += 1;
            t.pss_stale += u64::from(m.stale);
            t.pss_estimated += u64::from(m.estimated_from.is_some());
            t.pss_oldest_age_secs = Some(t.pss_oldest_age_secs.unwrap_or(0.0).max(m.age_secs));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ProcessSample;

    fn row(pid: u32, ppid: u32, rss: u64) -> ProcessRow {
        ProcessRow {
            pid,
            ppid,
            start_ticks: 1,
            comm: Arc::from("x"),
            cmdline: None,
            state: 'S',
            uid: None,
            cpu_percent: Some(1.0),
            cpu_percent_of_effective: None,
            cpu_ticks_total: 0,
            rss_bytes: Some(rss),
            anon_bytes: Some(rss),
            file_bytes: Some(0),
            shmem_bytes: Some(0),
            swap_bytes: Some(0),
            vsize_bytes: 0,
            threads: 2,
            major_faults_per_sec: None,
            minor_faults_per_sec: None,
            reaped_cpu_percent: None,
            cpu_user_percent: None,
            cpu_system_percent: None,
            reaped_user_percent: None,
            reaped_system_percent: None,
            reaped_minor_faults_per_sec: None,
            reaped_major_faults_per_sec: None,
            open_fds: None,
            read_bytes_per_sec: None,
            write_bytes_per_sec: None,
            pss: None,
            stall: None,
            cgroup: None,
            gpu: None,
            thread_rows: Vec::new(),
            net: None,
            net_total: None,
        }
    }

    #[test]
    fn tree_order_depth_and_total() {
        let rows = vec![row(1, 0, 1), row(10, 1, 10), row(11, 10, 100), row(12, 10, 1000), row(20, 1, 5)];
        let tree = build_tree(&rows, 10).expect("pid 10 exists");
        let pids: Vec<(u32, usize)> = tree.rows.iter().map(|r| (r.row.pid, r.depth)).collect();
        assert_eq!(pids, vec![(10, 0), (11, 1), (12, 1)]);
        assert_eq!(tree.total.processes, 3);
        assert_eq!(tree.total.threads, 6);
        assert_eq!(tree.total.rss_bytes, 1110);
        assert_eq!(tree.total.cpu_percent, Some(3.0));
        assert_eq!(tree.total.pss_bytes, None);
    }

    #[test]
    fn unknown_root_and_ppid_cycles() {
        assert!(build_tree(&[row(1, 0, 1)], 99).is_none());
        // A ppid cycle cannot come from the kernel, but a torn read could suggest one.
        let rows = vec![row(5, 6, 1), row(6, 5, 1)];
        assert_eq!(build_tree(&rows, 5).map(|t| t.rows.len()), Some(2));
    }

    /// The tree's PSS is its PSS only when every member's is known and none is stale.
    #[test]
    fn a_complete_pss_needs_every_member_read_since_its_family_changed() {
        let read = |pid, ppid, stale| ProcessRow {
            pss: Some(crate::MemoryAge {
                pss_bytes: Some(100),
                uss_bytes: Some(50),
                swap_pss_bytes: None,
                age_secs: 3.0,
                stale,
                estimated_from: None,
            }),
            ..row(pid, ppid, 10)
        };
        let total = |rows: &[ProcessRow]| build_tree(rows, 1).expect("root").total;
        let fresh = total(&[read(1, 0, false), read(2, 1, false)]);
        assert_eq!((fresh.pss_complete(), fresh.pss_stale), (Some(200), 0));
        let stale = total(&[read(1, 0, false), read(2, 1, true)]);
        assert_eq!((stale.pss_complete(), stale.pss_stale, stale.pss_bytes), (None, 1, Some(200)));
        let partial = total(&[read(1, 0, false), row(2, 1, 10)]);
        assert_eq!((partial.pss_complete(), partial.pss_known), (None, 1));
        // A clone's reading standing in for a member's own completes the sum, and says so.
        let mut cloned = read(3, 1, false);
        cloned.pss.as_mut().expect("read").estimated_from = Some(2);
        let estimated = total(&[read(1, 0, false), read(2, 1, false), cloned]);
        assert_eq!((estimated.pss_complete(), estimated.pss_estimated), (Some(300), 1));
    }

    /// A row's PSS is the process's own reading unless a clone's stands in for a missing or
    /// stale one, and then it says whose.
    #[test]
    fn a_clones_reading_stands_in_only_for_a_missing_or_stale_one() {
        use crate::{PssReading, Sample};
        use proctor_procfs::process::SmapsRollup;
        let reading = |pss: u64, at: u64| PssReading {
            rollup: SmapsRollup { pss_bytes: Some(pss), ..SmapsRollup::default() },
            read_mono_ns: at,
            cost_cpu_ns: 0,
        };
        let sample = |p: ProcessSample| Sample { mono_ns: 10_000_000_000, processes: vec![p], ..Sample::default() };
        let age = |p: ProcessSample| {
            let s = sample(p);
            crate::process_rows(&s, None, crate::RowContext::default()).remove(0).pss
        };
        let own = ProcessSample { pid: 3, pss: Some(reading(7, 9_000_000_000)), ..ProcessSample::default() };
        let estimate = Some(Arc::new((2, reading(9, 8_000_000_000))));
        let mine = age(ProcessSample { pss_estimate: estimate.clone(), ..own.clone() }).expect("own");
        assert_eq!((mine.pss_bytes, mine.estimated_from, mine.stale), (Some(7), None, false));
        let stale = ProcessSample { pss_stale: true, pss_estimate: estimate.clone(), ..own.clone() };
        let theirs = age(stale).expect("clone's");
        assert_eq!(
            (theirs.pss_bytes, theirs.estimated_from, theirs.stale, theirs.age_secs),
            (Some(9), Some(2), false, 2.0)
        );
        let none = ProcessSample { pss: None, pss_estimate: estimate, ..own };
        assert_eq!(age(none).and_then(|m| m.estimated_from), Some(2));
    }
}
