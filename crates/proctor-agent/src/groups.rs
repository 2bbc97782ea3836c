//! Process groups on the sampling thread: each cycle's rows folded into groups (by rules, cgroup
//! or user; `proctor-groups` does the folding), with a CPU-seconds counter per group that only
//! grows — the group's CPU over each interval, its members' reaped children included, added up
//! — so `/metrics` can serve it as a Prometheus counter although members come and go.
//!
//! Bounded: at most `max` groups are published per snapshot (by CPU, then RSS), the rest are
//! counted as `overflow`; counters are kept for at most `4 × max` names (the smallest dropped
//! first).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use proctor_groups::{add_ended_net, add_exited, add_stored_exited, churn, fold, Assigner, By};
use proctor_model::{ExitedProcess, ProcessNet, SampleGroups};

use crate::snapshot::Snapshot;

pub use proctor_groups::GroupsView;

/// The groups a recorded sample was stored with (`record --groups`), folded as the agent folded
/// them, against the stored sample before it for rates and churn; `None` when it has none.
/// Counters are not stored: each group's counter is its members' CPU time so far
/// (`cpu_seconds_total`), and the fold's cost is 0.
pub fn stored_view(s: &Snapshot, prev: Option<&proctor_model::Sample>) -> Option<GroupsView> {
    let stored = s.sample.groups.as_deref()?;
    let names = stored.names();
    let churned = prev.and_then(|p| {
        let before = p.groups.as_deref()?;
        let procs = |x: &proctor_model::Sample| x.processes.iter().map(|p| (p.pid, p.start_ticks)).collect::<Vec<_>>();
        Some(churn(&procs(p), &before.names(), &procs(&s.sample), &names))
    });
    let mut rows = fold(&s.rows, &names, s.sample.clock_ticks_per_sec, s.host.boot_time_unix_secs, churned.as_ref());
    add_stored_exited(&mut rows, &s.sample, prev);
    let by = match stored.by.as_str() {
        "rules" => "rules",
        "user" => "user",
        "cgroup" => "cgroup",
        _ => "stored",
    };
    Some(GroupsView {
        by,
        ungrouped: s.rows.len().saturating_sub(names.len()),
        groups: rows
            .into_iter()
            .map(|g| {
                let counter = g.cpu_seconds_total;
                (g, counter)
            })
            .collect(),
        overflow: 0,
        cost_cpu_ns: 0,
        exited_total: BTreeMap::new(),
    })
}

/// What the agent keeps between cycles.
#[derive(Debug)]
pub struct GroupState {
    assigner: Assigner,
    max: usize,
    users: BTreeMap<u32, String>,
    counters: BTreeMap<String, f64>,
    /// Members ended, by group, since start (bounded like `counters`).
    exited: BTreeMap<String, u64>,
    /// The previous sample's processes (pid, start ticks) and their groups, for who started
    /// and exited.
    prev: Option<Members>,
    /// The previous sample's network counters by pid (with its start ticks), for the last
    /// interval of members that ended since.
    prev_net: HashMap<u32, (u64, ProcessNet)>,
}

/// A sample's processes (pid, start ticks) and the group each was in.
type Members = (Vec<(u32, u64)>, BTreeMap<u32, String>);

impl GroupState {
    pub fn new(by: Arc<By>, max: usize) -> GroupState {
        let users = proctor_procfs::system::read_users(std::path::Path::new("/etc/passwd"));
        GroupState {
            assigner: Assigner::new((*by).clone()),
            max: max.max(1),
            users,
            counters: BTreeMap::new(),
            exited: BTreeMap::new(),
            prev: None,
            prev_net: HashMap::new(),
        }
    }

    /// Folds `s`'s rows into groups and advances the counters by the interval; also returns
    /// which group each process went to, for the stored sample.
    pub fn fold(&mut self, s: &Snapshot) -> (GroupsView, SampleGroups) {
        let before = proctor_procfs::system::thread_cpu_ns();
        let names = self.assigner.assign(&s.rows, &self.users);
        let procs: Vec<(u32, u64)> = s.rows.iter().map(|r| (r.pid, r.start_ticks)).collect();
        let churn = self.prev.as_ref().map(|(prev, prev_names)| churn(prev, prev_names, &procs, &names));
        let mut rows = fold(&s.rows, &names, s.sample.clock_ticks_per_sec, s.host.boot_time_unix_secs, churn.as_ref());
        // Processes that lived between two samples join the group rules, cgroup or their
        // parent give them; a parent that ended too, after the previous sample listed it, is
        // looked up in that sample's groups.
        let mut exited_groups: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        let unseen: Vec<&ExitedProcess> = s.sample.exited.iter().filter(|x| !x.seen).collect();
        if !unseen.is_empty() {
            let prev_names = self.prev.as_ref().map(|(_, n)| n);
            // A storm's ended processes share a few parents: each name is taken once.
            let mut parents: BTreeMap<u32, String> = BTreeMap::new();
            for x in &unseen {
                if let std::collections::btree_map::Entry::Vacant(at) = parents.entry(x.ppid) {
                    if let Some(name) = names.get(&x.ppid).or_else(|| prev_names?.get(&x.ppid)) {
                        at.insert(name.clone());
                    }
                }
            }
            let joined = self.assigner.name_exited(&unseen, &parents);
            for (x, group) in unseen.iter().zip(&joined) {
                if let Some(name) = group {
                    match exited_groups.get_mut(&**name) {
                        Some(pids) => pids.push(x.pid),
                        None => {
                            exited_groups.insert(name.to_string(), vec![x.pid]);
                        }
                    }
                }
            }
            let live = |pid: u32| s.rows.binary_search_by_key(&pid, |r| r.pid).is_ok();
            add_exited(&mut rows, &unseen, &joined, &parents, live, s.interval_secs);
        }
        // Members the previous sample listed that ended since: their last interval's network.
        if let Some((_, prev_names)) = &self.prev {
            let ended: Vec<_> = s
                .sample
                .exited
                .iter()
                .filter(|x| x.seen)
                // A zombie still listed is a live row (its own rate): not counted twice.
                .filter(|x| s.rows.binary_search_by_key(&x.pid, |r| r.pid).is_err())
                .filter_map(|x| {
                    let (start, before) = self.prev_net.get(&x.pid)?;
                    (*start == x.start_ticks).then_some(())?;
                    Some((prev_names.get(&x.pid)?.as_str(), before, x.net.as_deref()?))
                })
                .collect();
            add_ended_net(&mut rows, &ended, s.interval_secs);
        }
        self.prev_net = s
            .sample
            .processes
            .iter()
            .filter_map(|p| Some((p.pid, (p.start_ticks, p.net.as_deref().copied()?))))
            .collect();
        if let Some(secs) = s.interval_secs {
            for g in &rows {
                *self.counters.entry(g.name.clone()).or_default() += g.cpu_percent / 100.0 * secs;
            }
        } else {
            for g in &rows {
                self.counters.entry(g.name.clone()).or_default();
            }
        }
        for g in &rows {
            if g.exited > 0 {
                *self.exited.entry(g.name.clone()).or_default() += g.exited;
            }
        }
        if self.exited.len() > self.max.saturating_mul(4) {
            // As for the CPU counters: the names with the most kept, a dropped one restarts.
            let mut by_count: Vec<(String, u64)> = std::mem::take(&mut self.exited).into_iter().collect();
            by_count.sort_by_key(|c| std::cmp::Reverse(c.1));
            by_count.truncate(self.max.saturating_mul(2));
            self.exited = by_count.into_iter().collect();
        }
        if self.counters.len() > self.max.saturating_mul(4) {
            // Keep the names with the most CPU; a dropped group's counter restarts from 0,
            // which Prometheus reads as a counter reset.
            let mut by_cpu: Vec<(String, f64)> = std::mem::take(&mut self.counters).into_iter().collect();
            by_cpu.sort_by(|a, b| b.1.total_cmp(&a.1));
            by_cpu.truncate(self.max.saturating_mul(2));
            self.counters = by_cpu.into_iter().collect();
            for g in &rows {
                self.counters.entry(g.name.clone()).or_default();
            }
        }
        let mut members: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        // `names` is ordered by pid, so each list comes out ascending.
        for (pid, name) in &names {
            members.entry(name.clone()).or_default().push(*pid);
        }
        let overflow = rows.len().saturating_sub(self.max);
        let groups = rows
            .into_iter()
            .take(self.max)
            .map(|g| {
                let c = self.counters.get(&g.name).copied().unwrap_or(0.0);
                (g, c)
            })
            .collect();
        let by = match self.assigner.by() {
            By::Rules(_) => "rules",
            By::Cgroup => "cgroup",
            By::User => "user",
        };
        let view = GroupsView {
            by,
            groups,
            overflow,
            ungrouped: s.rows.len().saturating_sub(names.len()),
            cost_cpu_ns: proctor_procfs::system::thread_cpu_ns().saturating_sub(before),
            exited_total: self.exited.clone(),
        };
        self.prev = Some((procs, names));
        (view, SampleGroups { by: by.to_string(), members, exited: exited_groups })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proctor_model::{ExitedProcess, NetCounters, ProcessNet, ProcessSample, Sample, StatusReading};

    fn net(rx: u64) -> ProcessNet {
        ProcessNet { tcp: NetCounters { rx_bytes: rx, ..Default::default() }, ..Default::default() }
    }

    fn process(pid: u32, rx: u64) -> ProcessSample {
        ProcessSample {
            pid,
            start_ticks: 5,
            status: Some(StatusReading { effective_uid: Some(4242), ..Default::default() }),
            net: Some(Box::new(net(rx))),
            ..ProcessSample::default()
        }
    }

    fn sample(seq: u64, processes: Vec<ProcessSample>, exited: Vec<ExitedProcess>) -> Sample {
        Sample {
            seq,
            unix_ns: 1_700_000_000_000_000_000 + seq * 2_000_000_000,
            mono_ns: 1_000_000_000 + seq * 2_000_000_000,
            clock_ticks_per_sec: 100,
            page_size: 4096,
            processes,
            exited,
            ..Sample::default()
        }
    }

    /// Live: a member of the previous sample that ended since brings its traffic from that
    /// sample to its exit into its group's receive rate, beside the live member's own rate.
    #[test]
    fn an_ended_members_last_interval_reaches_its_groups_rate_live() {
        let mut state = GroupState::new(Arc::new(By::User), 16);
        let first = sample(0, vec![process(10, 1000), process(11, 1000)], Vec::new());
        let (view, _) = state.fold(&Snapshot::derive(first.clone(), None));
        assert_eq!(view.groups.len(), 1);
        let ended =
            ExitedProcess { pid: 10, start_ticks: 5, seen: true, net: Some(Box::new(net(5000))), ..Default::default() };
        let second = sample(1, vec![process(11, 3000)], vec![ended]);
        let (view, _) = state.fold(&Snapshot::derive(second, Some(&first)));
        let (g, _) = &view.groups[0];
        // 11: 2000 B in 2 s; 10: 4000 B between the first sample and its exit, over the same 2 s.
        assert_eq!(g.net_rx_bytes_per_sec, Some(3000.0), "{g:?}");
    }
}
