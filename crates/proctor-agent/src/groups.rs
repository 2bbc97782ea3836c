//! Process groups on the sampling thread: each cycle's rows folded into groups (by rules, cgroup
//! or user; `proctor-groups` does the folding), with a CPU-seconds counter per group that only
//! grows — the group's CPU over each interval, its members' reaped children included, added up
//! — so `/metrics` can serve it as a Prometheus counter although members come and go.
//!
//! Bounded: at most `max` groups are published per snapshot (by CPU, then RSS), the rest are
//! counted as `overflow`; counters are kept for at most `4 × max` names (the smallest dropped
//! first).

use std::collections::BTreeMap;
use std::sync::Arc;

use proctor_groups::GroupRow;
use proctor_groups::{churn, fold, Assigner, By};
use proctor_model::{ExitedProcess, SampleGroups};

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
    let rows = fold(&s.rows, &names, s.sample.clock_ticks_per_sec, s.host.boot_time_unix_secs, churned.as_ref());
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
        }
    }

    /// Processes that started and ended between two samples (the BPF process events' exits
    /// that no sample listed) into the groups rules, cgroup or parent give them: each is one
    /// member started and one exited. Its CPU already reached the `cutime` of its nearest live
    /// ancestor (through every ended parent between that waited), so it is in that ancestor's
    /// group's reaped share; where its own group is another, its own CPU moves there (still a
    /// reaped share: CPU of processes that ended unseen): counted once, where it belongs. A
    /// group that only short-lived processes were in this interval gets a row.
    fn add_exited_unseen(&self, s: &Snapshot, names: &BTreeMap<u32, String>, rows: &mut Vec<GroupRow>) {
        let unseen: Vec<ExitedProcess> = s.sample.exited.iter().filter(|x| !x.seen).cloned().collect();
        if unseen.is_empty() {
            return;
        }
        let joined = self.assigner.name_exited(&unseen, names);
        let by_pid: BTreeMap<u32, usize> = unseen.iter().enumerate().map(|(i, x)| (x.pid, i)).collect();
        let live = |pid: u32| s.rows.binary_search_by_key(&pid, |r| r.pid).is_ok();
        // The nearest live ancestor, through ended parents (bounded: a loop ends).
        let reaper = |x: &ExitedProcess| {
            let mut at = x.ppid;
            for _ in 0..64 {
                if live(at) {
                    return Some(at);
                }
                match by_pid.get(&at) {
                    Some(&i) if unseen[i].ppid != at => at = unseen[i].ppid,
                    _ => return None,
                }
            }
            None
        };
        let secs = s.interval_secs.filter(|t| *t > 0.0);
        let pct = |ns: u64| secs.map_or(0.0, |t| ns as f64 / 1e9 / t * 100.0);
        let at = |rows: &mut Vec<GroupRow>, name: &str| match rows.iter().position(|g| g.name == name) {
            Some(i) => i,
            None => {
                rows.push(GroupRow { name: name.to_string(), ..GroupRow::default() });
                rows.len() - 1
            }
        };
        for (x, group) in unseen.iter().zip(joined) {
            if let Some(name) = &group {
                let i = at(rows, name);
                rows[i].started += 1;
                rows[i].exited += 1;
            }
            let from = reaper(x).and_then(|pid| names.get(&pid));
            if from == group.as_ref() {
                // Reaped within its own group: already there.
                continue;
            }
            let (user, system) = (pct(x.user_ns), pct(x.system_ns));
            if let Some(name) = &group {
                let i = at(rows, name);
                let g = &mut rows[i];
                g.cpu_percent += user + system;
                g.reaped_cpu_percent += user + system;
                g.cpu_user_percent += user;
                g.cpu_system_percent += system;
            }
            if let Some(g) = from.and_then(|f| rows.iter_mut().find(|g| &g.name == f)) {
                let take_user = user.min(g.cpu_user_percent);
                let take_system = system.min(g.cpu_system_percent);
                let take = (take_user + take_system).min(g.reaped_cpu_percent);
                g.reaped_cpu_percent -= take;
                g.cpu_percent = (g.cpu_percent - take).max(0.0);
                g.cpu_user_percent -= take_user.min(take);
                g.cpu_system_percent -= (take - take_user.min(take)).min(g.cpu_system_percent);
            }
        }
        rows.sort_by(|a, b| {
            b.cpu_percent.total_cmp(&a.cpu_percent).then(b.rss_bytes.cmp(&a.rss_bytes)).then(a.name.cmp(&b.name))
        });
    }

    /// Folds `s`'s rows into groups and advances the counters by the interval; also returns
    /// which group each process went to, for the stored sample.
    pub fn fold(&mut self, s: &Snapshot) -> (GroupsView, SampleGroups) {
        let before = proctor_procfs::system::thread_cpu_ns();
        let names = self.assigner.assign(&s.rows, &self.users);
        let procs: Vec<(u32, u64)> = s.rows.iter().map(|r| (r.pid, r.start_ticks)).collect();
        let churn = self.prev.as_ref().map(|(prev, prev_names)| churn(prev, prev_names, &procs, &names));
        let mut rows = fold(&s.rows, &names, s.sample.clock_ticks_per_sec, s.host.boot_time_unix_secs, churn.as_ref());
        // A short-lived process whose parent ended too, after the previous sample listed it,
        // follows the group that parent was in.
        if !s.sample.exited.is_empty() {
            // Only the ended processes' parents are looked up: their groups, now or as the
            // previous sample had them.
            let prev_names = self.prev.as_ref().map(|(_, n)| n);
            let parents: BTreeMap<u32, String> = s
                .sample
                .exited
                .iter()
                .filter_map(|x| {
                    let group = names.get(&x.ppid).or_else(|| prev_names?.get(&x.ppid))?;
                    Some((x.ppid, group.clone()))
                })
                .collect();
            self.add_exited_unseen(s, &parents, &mut rows);
        }
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
        (view, SampleGroups { by: by.to_string(), members })
    }
}
