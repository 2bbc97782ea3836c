//! Processes folded into groups: by rules (process-exporter's), by cgroup (a systemd unit, a
//! container, a Kubernetes pod, named from the path) or by user. Pure: rows in, rows out.

use std::collections::BTreeMap;

use proctor_model::{ExitedProcess, ProcessRow};
use proctor_procfs::process::PidMap;
use serde::Serialize;

use std::collections::HashMap;
use std::sync::Arc;

use crate::rules::{follow_parents, Proc, Rules};

/// How processes are grouped.
#[derive(Debug, Clone)]
pub enum By {
    Rules(Rules),
    Cgroup,
    User,
}

/// One group at one sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GroupRow {
    pub name: String,
    pub processes: u64,
    pub threads: u64,
    /// Percent of one CPU over the interval: members' own CPU (those with a rate) plus
    /// `reaped_cpu_percent`.
    pub cpu_percent: f64,
    /// The part of `cpu_percent` used by members' children that exited since the previous
    /// sample unseen or partly seen (from the members' `cutime`/`cstime`): short-lived
    /// processes are not lost. With the BPF process events the agent moves a short-lived
    /// process's own CPU from its reaper's group to its own where the two differ.
    pub reaped_cpu_percent: f64,
    /// `cpu_percent` as user and system time (members' own `utime`/`stime` and their reaped
    /// children's `cutime`/`cstime`, each less what those children had when last seen).
    pub cpu_user_percent: f64,
    pub cpu_system_percent: f64,
    /// CPU seconds members used since they started (user + system), summed.
    pub cpu_seconds_total: f64,
    pub rss_bytes: u64,
    /// Summed over the members whose PSS is known (`pss_known` of `processes`).
    pub pss_bytes: u64,
    pub pss_known: u64,
    pub uss_bytes: u64,
    pub swap_bytes: u64,
    /// Members' faults per second, their reaped children's included (from `cminflt` and
    /// `cmajflt`, as for CPU).
    pub major_faults_per_sec: f64,
    pub minor_faults_per_sec: f64,
    /// Bytes per second members read from and wrote to storage (`/proc/PID/io`'s
    /// `read_bytes`/`write_bytes`); `None` when no member's io was read (`--io` off, or not
    /// permitted).
    pub read_bytes_per_sec: Option<f64>,
    pub write_bytes_per_sec: Option<f64>,
    /// Members' network use per second (`--net`: IP bytes as on the wire, TCP and UDP, each
    /// direction; TCP segments retransmitted; connects made), and their established TCP
    /// connections; `None` when no member's network was counted (off, or no member used it).
    pub net_rx_bytes_per_sec: Option<f64>,
    pub net_tx_bytes_per_sec: Option<f64>,
    pub net_retransmits_per_sec: Option<f64>,
    pub net_connects_per_sec: Option<f64>,
    pub net_connections: Option<u64>,
    /// Open fds summed over the members whose count is known (`fds_known` of `processes`):
    /// counted with groups on, on Linux 6.2 and later, for the processes the agent may read.
    pub open_fds: u64,
    pub fds_known: u64,
    /// When the group's oldest member started.
    pub oldest_start_unix_secs: Option<f64>,
    /// Members that appeared since the previous sample and members of the previous sample
    /// that are gone (by pid and start time; [`churn`]), 0 without a previous sample.
    pub started: u64,
    pub exited: u64,
}

/// The name a cgroup path is known by: a systemd unit (`nginx.service`), a container
/// (`docker:0123456789ab`, `containerd:…`, `crio:…`), a Kubernetes pod (`pod:UID`), else the
/// path's last component (`/` for the root).
pub fn cgroup_name(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    // A pod anywhere on the path names the group (its containers are its members).
    for part in &parts {
        let p = part.trim_end_matches(".slice");
        if let Some(at) = p.rfind("pod") {
            let uid = &p[at + 3..];
            let looks_like_uid = uid.len() >= 32 && uid.chars().all(|c| c.is_ascii_hexdigit() || c == '-' || c == '_');
            if looks_like_uid && (path.contains("kubepods") || at == 0) {
                return format!("pod:{}", uid.replace('_', "-"));
            }
        }
    }
    let Some(last) = parts.last() else { return "/".to_string() };
    for (prefix, kind) in
        [("docker-", "docker"), ("cri-containerd-", "containerd"), ("crio-", "crio"), ("libpod-", "podman")]
    {
        if let Some(id) = last.strip_prefix(prefix).map(|r| r.trim_end_matches(".scope")) {
            return format!("{kind}:{}", &id[..id.len().min(12)]);
        }
    }
    // cgroupfs-style docker: /docker/<64 hex>.
    if parts.len() >= 2 && parts[parts.len() - 2] == "docker" && last.len() == 64 {
        return format!("docker:{}", &last[..12]);
    }
    last.to_string()
}

/// Assigns each row its group name (rows no rule takes are left out; cgroup and user groups
/// take everyone), sample after sample, remembering what does not change while a process
/// keeps its name and command line: a rule's verdict once its command line is known (keyed by
/// pid and start time, and asked again when the process execs: a new name or command line),
/// and each cgroup path's name. Only the processes of the latest sample are remembered.
#[derive(Debug)]
pub struct Assigner {
    by: By,
    rules_seen: HashMap<(u32, u64), Verdict>,
    cgroup_names: HashMap<Arc<str>, String>,
}

/// A rule's verdict on a process, and the name and command line it was given for.
#[derive(Debug)]
struct Verdict {
    comm: Arc<str>,
    cmdline: Arc<[String]>,
    group: Option<String>,
}

impl Verdict {
    /// Whether the verdict still stands for `row`: it has the name and command line it had
    /// (compared by pointer first: a live agent's rows share them sample after sample).
    fn holds_for(&self, row: &ProcessRow) -> bool {
        let same_comm = Arc::ptr_eq(&self.comm, &row.comm) || self.comm == row.comm;
        let same_cmdline =
            row.cmdline.as_ref().is_some_and(|c| Arc::ptr_eq(&self.cmdline, c) || self.cmdline[..] == c[..]);
        same_comm && same_cmdline
    }
}

impl Assigner {
    pub fn new(by: By) -> Assigner {
        Assigner { by, rules_seen: HashMap::new(), cgroup_names: HashMap::new() }
    }

    pub fn by(&self) -> &By {
        &self.by
    }

    pub fn assign(&mut self, rows: &[ProcessRow], users: &BTreeMap<u32, String>) -> BTreeMap<u32, String> {
        match &self.by {
            By::Rules(rules) => {
                let procs: Vec<Proc> = rows
                    .iter()
                    .map(|r| Proc {
                        pid: r.pid,
                        ppid: r.ppid,
                        comm: &r.comm,
                        cmdline: r.cmdline.as_deref(),
                        uid: r.uid,
                        username: r.uid.and_then(|u| users.get(&u)).map(String::as_str),
                    })
                    .collect();
                let mut seen = HashMap::with_capacity(rows.len());
                let mut own = BTreeMap::new();
                for (r, p) in rows.iter().zip(&procs) {
                    let key = (r.pid, r.start_ticks);
                    // Until the command line is read, `exe`/`cmdline` rules cannot decide:
                    // asked again next sample.
                    let name = match self.rules_seen.remove(&key).filter(|v| v.holds_for(r)) {
                        Some(known) => known.group,
                        None => rules.name_of(p),
                    };
                    if let Some(cmdline) = &r.cmdline {
                        let verdict =
                            Verdict { comm: Arc::clone(&r.comm), cmdline: Arc::clone(cmdline), group: name.clone() };
                        seen.insert(key, verdict);
                    }
                    if let Some(n) = name {
                        own.insert(r.pid, n);
                    }
                }
                self.rules_seen = seen;
                follow_parents(&procs, &own)
            }
            By::Cgroup => {
                let mut names = HashMap::with_capacity(self.cgroup_names.len());
                let out = rows
                    .iter()
                    .map(|r| {
                        let name = match &r.cgroup {
                            Some(path) => {
                                let name = self.cgroup_names.remove(path).unwrap_or_else(|| cgroup_name(path));
                                names.insert(Arc::clone(path), name.clone());
                                name
                            }
                            None => "(unknown)".to_string(),
                        };
                        (r.pid, name)
                    })
                    .collect();
                self.cgroup_names = names;
                out
            }
            By::User => rows
                .iter()
                .map(|r| {
                    let name = match r.uid {
                        Some(u) => users.get(&u).cloned().unwrap_or_else(|| u.to_string()),
                        None => "(unknown)".to_string(),
                    };
                    (r.pid, name)
                })
                .collect(),
        }
    }
}

impl Assigner {
    /// The groups of processes that started and ended between two samples (from their exit
    /// events), as `assign` would have named them: a rule matches its name and command line
    /// (from its exec), a cgroup group its cgroup; else it follows its parent — a live process's
    /// group in `names`, or an ended parent's in the same list — and a user group takes the
    /// parent's (an ended process's user is not known). `None`: no group takes it.
    pub fn name_exited(&self, exited: &[&ExitedProcess], names: &BTreeMap<u32, String>) -> Vec<Option<Arc<str>>> {
        // A rule's verdict depends on the name and command line alone (names by pid or start
        // time are refused), and a storm's ended processes share both: each pair is matched once.
        // The line by its allocation: equal lines held apart are matched apart, still right.
        // Names are shared, not copied: a storm's ~1,000 exits a sample took two each.
        // (Keyed by a name a process chose: std's keyed hash, not `PidHasher`.)
        let mut verdicts: HashMap<(&str, usize), Option<Arc<str>>> = HashMap::new();
        let own: Vec<Option<Arc<str>>> = exited
            .iter()
            .map(|x| match &self.by {
                By::Rules(rules) => {
                    let line = x.cmdline.as_ref().map_or(0, |c| Arc::as_ptr(c).cast::<String>() as usize);
                    verdicts
                        .entry((&x.comm, line))
                        .or_insert_with(|| {
                            rules
                                .name_of(&Proc {
                                    pid: x.pid,
                                    ppid: x.ppid,
                                    comm: &x.comm,
                                    cmdline: x.cmdline.as_deref(),
                                    uid: None,
                                    username: None,
                                })
                                .map(Arc::from)
                        })
                        .clone()
                }
                By::Cgroup => x.cgroup.as_deref().map(|c| Arc::from(cgroup_name(c))),
                By::User => None,
            })
            .collect();
        let index: PidMap<usize> = exited.iter().enumerate().map(|(i, x)| (x.pid, i)).collect();
        let mut parents: PidMap<Arc<str>> = PidMap::default();
        (0..exited.len())
            .map(|i| {
                let mut at = i;
                // A chain of ended parents, bounded (a hostile loop ends).
                for _ in 0..=exited.len().min(64) {
                    if let Some(name) = &own[at] {
                        return Some(Arc::clone(name));
                    }
                    let ppid = exited[at].ppid;
                    if let Some(name) = names.get(&ppid) {
                        return Some(Arc::clone(parents.entry(ppid).or_insert_with(|| Arc::from(name.as_str()))));
                    }
                    match index.get(&ppid) {
                        Some(&p) if p != at => at = p,
                        _ => break,
                    }
                }
                None
            })
            .collect()
    }
}

/// Processes that started and ended between two samples (exit events no sample listed alive)
/// into the groups `joined` gives them (one per process in `unseen`, `None`: no group): each is
/// one member started and one exited. Its CPU already reached the `cutime` of its nearest live
/// ancestor (through every ended parent between that waited), so it is in that ancestor's
/// group's reaped share; where its own group is another, its own CPU moves there (still a
/// reaped share: CPU of processes that ended unseen), counted once, where it belongs. A group
/// that only short-lived processes were in gets a row. `parents`: the group of each ended
/// process's parent (now, or as the previous sample had it); `live`: whether a pid is listed
/// now; `interval_secs`: what percentages are over.
pub fn add_exited(
    rows: &mut Vec<GroupRow>,
    unseen: &[&ExitedProcess],
    joined: &[Option<Arc<str>>],
    parents: &BTreeMap<u32, String>,
    live: impl Fn(u32) -> bool,
    interval_secs: Option<f64>,
) {
    if unseen.is_empty() {
        return;
    }
    let by_pid: PidMap<usize> = unseen.iter().enumerate().map(|(i, x)| (x.pid, i)).collect();
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
    let secs = interval_secs.filter(|t| *t > 0.0);
    let pct = |ns: u64| secs.map_or(0.0, |t| ns as f64 / 1e9 / t * 100.0);
    let at = |rows: &mut Vec<GroupRow>, name: &str| match rows.iter().position(|g| g.name == name) {
        Some(i) => i,
        None => {
            rows.push(GroupRow { name: name.to_string(), ..GroupRow::default() });
            rows.len() - 1
        }
    };
    for (x, group) in unseen.iter().zip(joined) {
        if let Some(name) = group {
            let i = at(rows, name);
            rows[i].started += 1;
            rows[i].exited += 1;
            // Its network (with --net: the kernel's last reading of it, on its exit record) was
            // all used since the previous sample: its group's rates over the interval.
            if let (Some(n), Some(t)) = (x.net.as_deref(), secs) {
                let g = &mut rows[i];
                *g.net_rx_bytes_per_sec.get_or_insert(0.0) += n.rx_bytes() as f64 / t;
                *g.net_tx_bytes_per_sec.get_or_insert(0.0) += n.tx_bytes() as f64 / t;
                *g.net_retransmits_per_sec.get_or_insert(0.0) += n.retransmits as f64 / t;
                *g.net_connects_per_sec.get_or_insert(0.0) += n.connects as f64 / t;
                g.net_connections.get_or_insert(0);
            }
        }
        let from = reaper(x).and_then(|pid| parents.get(&pid)).map(String::as_str);
        if from == group.as_deref() {
            // Reaped within its own group: already there.
            continue;
        }
        let (user, system) = (pct(x.user_ns), pct(x.system_ns));
        if let Some(name) = group {
            let i = at(rows, name);
            let g = &mut rows[i];
            g.cpu_percent += user + system;
            g.reaped_cpu_percent += user + system;
            g.cpu_user_percent += user;
            g.cpu_system_percent += system;
        }
        if let Some(g) = from.and_then(|f| rows.iter_mut().find(|g| g.name == f)) {
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

/// A member the previous sample listed that ended before this one: its group, its network
/// counters at that sample, and at its exit (its exit record's, the kernel's last reading).
pub type EndedMember<'a> = (&'a str, &'a proctor_model::ProcessNet, &'a proctor_model::ProcessNet);

/// The last interval of members that ended between two samples after the first one listed
/// them: their network from that sample's counters to their exit's, into their group's rates
/// (a live member's rate is its own counters' change; an ended one has no counters now, so
/// without this its last interval's traffic would fall out of its group's rate). A group whose
/// only members ended gets a row of its own, as [`add_exited`] gives one.
pub fn add_ended_net(rows: &mut Vec<GroupRow>, ended: &[EndedMember<'_>], interval_secs: Option<f64>) {
    let Some(t) = interval_secs.filter(|t| *t > 0.0) else { return };
    for &(name, before, at_exit) in ended {
        let i = match rows.iter().position(|g| g.name == name) {
            Some(i) => i,
            None => {
                rows.push(GroupRow { name: name.to_string(), ..GroupRow::default() });
                rows.len() - 1
            }
        };
        let g = &mut rows[i];
        let delta = |a: u64, b: u64| a.saturating_sub(b) as f64 / t;
        *g.net_rx_bytes_per_sec.get_or_insert(0.0) += delta(at_exit.rx_bytes(), before.rx_bytes());
        *g.net_tx_bytes_per_sec.get_or_insert(0.0) += delta(at_exit.tx_bytes(), before.tx_bytes());
        *g.net_retransmits_per_sec.get_or_insert(0.0) += delta(at_exit.retransmits, before.retransmits);
        *g.net_connects_per_sec.get_or_insert(0.0) += delta(at_exit.connects, before.connects);
        g.net_connections.get_or_insert(0);
    }
}

/// [`add_exited`] for a recorded sample, from the groups the agent stored with it
/// (`SampleGroups::exited` and the members of it and of `prev`), so every reader of a recording
/// folds short-lived processes as the agent did; and [`add_ended_net`] for the members `prev`
/// listed that ended since.
pub fn add_stored_exited(rows: &mut Vec<GroupRow>, cur: &proctor_model::Sample, prev: Option<&proctor_model::Sample>) {
    add_stored_ended_net(rows, cur, prev);
    let Some(groups) = cur.groups.as_deref() else { return };
    if groups.exited.is_empty() {
        return;
    }
    let joined_by_pid: HashMap<u32, &String> =
        groups.exited.iter().flat_map(|(name, pids)| pids.iter().map(move |pid| (*pid, name))).collect();
    let unseen: Vec<&ExitedProcess> = cur.exited.iter().filter(|x| !x.seen).collect();
    let joined: Vec<Option<Arc<str>>> =
        unseen.iter().map(|x| joined_by_pid.get(&x.pid).map(|n| Arc::from(n.as_str()))).collect();
    let now = groups.names();
    let before = prev.and_then(|p| p.groups.as_deref()).map(|g| g.names()).unwrap_or_default();
    let parents: BTreeMap<u32, String> = unseen
        .iter()
        .filter_map(|x| Some((x.ppid, now.get(&x.ppid).or_else(|| before.get(&x.ppid))?.clone())))
        .collect();
    let live = |pid: u32| cur.processes.binary_search_by_key(&pid, |p| p.pid).is_ok();
    let secs = prev.and_then(|p| cur.mono_ns.checked_sub(p.mono_ns)).map(|ns| ns as f64 / 1e9);
    add_exited(rows, &unseen, &joined, &parents, live, secs);
}

/// [`add_ended_net`] for a recorded sample: the members `prev` listed (in the groups stored with
/// it) that ended before `cur`.
fn add_stored_ended_net(rows: &mut Vec<GroupRow>, cur: &proctor_model::Sample, prev: Option<&proctor_model::Sample>) {
    let Some(prev) = prev else { return };
    let Some(before) = prev.groups.as_deref().map(|g| g.names()) else { return };
    let ended: Vec<EndedMember<'_>> = cur
        .exited
        .iter()
        .filter(|x| x.seen)
        // A zombie still listed is a live row (its own rate): not counted twice.
        .filter(|x| cur.processes.binary_search_by_key(&x.pid, |p| p.pid).is_err())
        .filter_map(|x| {
            let at_exit = x.net.as_deref()?;
            let i = prev.processes.binary_search_by_key(&x.pid, |p| p.pid).ok()?;
            let p = &prev.processes[i];
            (p.start_ticks == x.start_ticks).then_some(())?;
            Some((before.get(&x.pid)?.as_str(), p.net.as_deref()?, at_exit))
        })
        .collect();
    let secs = cur.mono_ns.checked_sub(prev.mono_ns).map(|ns| ns as f64 / 1e9);
    add_ended_net(rows, &ended, secs);
}

/// Folds `rows` into groups, biggest CPU first (ties: RSS, then name). `ticks` is the clock
/// tick rate and `boot_unix_secs` the boot time, for CPU seconds and start times.
/// Per group: (members started, members exited) between two samples.
pub type Churn = BTreeMap<String, (u64, u64)>;

/// Who came and went between two samples, per group. `prev` and `cur` are (pid, start ticks)
/// sorted by pid; a process in `cur` and not in `prev` started (counted in its group now), one in
/// `prev` and not in `cur` exited (counted in the group it was in). A reused pid is both.
pub fn churn(
    prev: &[(u32, u64)],
    prev_names: &BTreeMap<u32, String>,
    cur: &[(u32, u64)],
    cur_names: &BTreeMap<u32, String>,
) -> Churn {
    let mut out = Churn::new();
    let (mut i, mut j) = (0, 0);
    let started = |p: &(u32, u64), out: &mut Churn| {
        if let Some(name) = cur_names.get(&p.0) {
            out.entry(name.clone()).or_default().0 += 1;
        }
    };
    let exited = |p: &(u32, u64), out: &mut Churn| {
        if let Some(name) = prev_names.get(&p.0) {
            out.entry(name.clone()).or_default().1 += 1;
        }
    };
    while i < prev.len() || j < cur.len() {
        match (prev.get(i), cur.get(j)) {
            (Some(a), Some(b)) if a.0 == b.0 => {
                if a.1 != b.1 {
                    exited(a, &mut out);
                    started(b, &mut out);
                }
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a.0 < b.0 => {
                exited(a, &mut out);
                i += 1;
            }
            (Some(a), None) => {
                exited(a, &mut out);
                i += 1;
            }
            (_, Some(b)) => {
                started(b, &mut out);
                j += 1;
            }
            (None, None) => break,
        }
    }
    out
}

/// What one process adds to its group's row: every group sum is made from these, whatever
/// shape the process came in (the agent's row here, the public shape in `top`'s `z` view).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Share {
    pub threads: u64,
    /// Own CPU (0 without a rate), reaped children's apart.
    pub cpu_percent: f64,
    pub reaped_cpu_percent: f64,
    /// User and system CPU, reaped children's included.
    pub cpu_user_percent: f64,
    pub cpu_system_percent: f64,
    pub cpu_seconds_total: f64,
    pub rss_bytes: u64,
    /// (PSS, USS) where PSS is known.
    pub pss_uss_bytes: Option<(u64, u64)>,
    pub swap_bytes: u64,
    pub open_fds: Option<u32>,
    /// Faults per second, reaped children's included.
    pub major_faults_per_sec: f64,
    pub minor_faults_per_sec: f64,
    pub read_bytes_per_sec: Option<f64>,
    pub write_bytes_per_sec: Option<f64>,
    /// Network: (rx bytes/s, tx bytes/s, retransmits/s, connects/s, connections).
    pub net: Option<(f64, f64, f64, f64, u64)>,
    pub start_unix_secs: Option<f64>,
}

impl Share {
    /// An agent row's share; `ticks` per second and the boot time turn ticks into seconds.
    pub fn of_row(r: &ProcessRow, ticks: f64, boot_unix_secs: Option<u64>) -> Share {
        let pss = r.pss.and_then(|p| p.pss_bytes.map(|pss| (pss, p.uss_bytes.unwrap_or(0))));
        Share {
            threads: r.threads,
            cpu_percent: r.cpu_percent.unwrap_or(0.0),
            reaped_cpu_percent: r.reaped_cpu_percent.unwrap_or(0.0),
            cpu_user_percent: r.cpu_user_percent.unwrap_or(0.0) + r.reaped_user_percent.unwrap_or(0.0),
            cpu_system_percent: r.cpu_system_percent.unwrap_or(0.0) + r.reaped_system_percent.unwrap_or(0.0),
            cpu_seconds_total: r.cpu_ticks_total as f64 / ticks,
            rss_bytes: r.rss_bytes.unwrap_or(0),
            pss_uss_bytes: pss,
            swap_bytes: r.swap_bytes.unwrap_or(0),
            open_fds: r.open_fds,
            major_faults_per_sec: r.major_faults_per_sec.unwrap_or(0.0) + r.reaped_major_faults_per_sec.unwrap_or(0.0),
            minor_faults_per_sec: r.minor_faults_per_sec.unwrap_or(0.0) + r.reaped_minor_faults_per_sec.unwrap_or(0.0),
            read_bytes_per_sec: r.read_bytes_per_sec,
            write_bytes_per_sec: r.write_bytes_per_sec,
            net: r.net.as_deref().map(|n| {
                (
                    n.rx_bytes_per_sec,
                    n.tx_bytes_per_sec,
                    n.retransmits_per_sec,
                    n.connects_per_sec,
                    u64::from(n.connections),
                )
            }),
            start_unix_secs: boot_unix_secs.map(|b| b as f64 + r.start_ticks as f64 / ticks),
        }
    }
}

impl GroupRow {
    /// A group with no members yet.
    pub fn empty(name: &str) -> GroupRow {
        GroupRow {
            name: name.to_string(),
            processes: 0,
            threads: 0,
            cpu_percent: 0.0,
            reaped_cpu_percent: 0.0,
            cpu_user_percent: 0.0,
            cpu_system_percent: 0.0,
            cpu_seconds_total: 0.0,
            rss_bytes: 0,
            pss_bytes: 0,
            pss_known: 0,
            uss_bytes: 0,
            swap_bytes: 0,
            major_faults_per_sec: 0.0,
            minor_faults_per_sec: 0.0,
            read_bytes_per_sec: None,
            write_bytes_per_sec: None,
            net_rx_bytes_per_sec: None,
            net_tx_bytes_per_sec: None,
            net_retransmits_per_sec: None,
            net_connects_per_sec: None,
            net_connections: None,
            open_fds: 0,
            fds_known: 0,
            oldest_start_unix_secs: None,
            started: 0,
            exited: 0,
        }
    }

    /// Adds one member.
    pub fn add(&mut self, m: &Share) {
        self.processes += 1;
        self.threads += m.threads;
        self.cpu_percent += m.cpu_percent + m.reaped_cpu_percent;
        self.reaped_cpu_percent += m.reaped_cpu_percent;
        self.cpu_user_percent += m.cpu_user_percent;
        self.cpu_system_percent += m.cpu_system_percent;
        self.cpu_seconds_total += m.cpu_seconds_total;
        self.rss_bytes += m.rss_bytes;
        if let Some((pss, uss)) = m.pss_uss_bytes {
            self.pss_bytes += pss;
            self.uss_bytes += uss;
            self.pss_known += 1;
        }
        self.swap_bytes += m.swap_bytes;
        if let Some(fds) = m.open_fds {
            self.open_fds += u64::from(fds);
            self.fds_known += 1;
        }
        self.major_faults_per_sec += m.major_faults_per_sec;
        self.minor_faults_per_sec += m.minor_faults_per_sec;
        if let Some(v) = m.read_bytes_per_sec {
            *self.read_bytes_per_sec.get_or_insert(0.0) += v;
        }
        if let Some(v) = m.write_bytes_per_sec {
            *self.write_bytes_per_sec.get_or_insert(0.0) += v;
        }
        if let Some((rx, tx, retrans, connects, connections)) = m.net {
            *self.net_rx_bytes_per_sec.get_or_insert(0.0) += rx;
            *self.net_tx_bytes_per_sec.get_or_insert(0.0) += tx;
            *self.net_retransmits_per_sec.get_or_insert(0.0) += retrans;
            *self.net_connects_per_sec.get_or_insert(0.0) += connects;
            *self.net_connections.get_or_insert(0) += connections;
        }
        self.oldest_start_unix_secs = match (self.oldest_start_unix_secs, m.start_unix_secs) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// Members summed into one row per group name, biggest CPU first (ties by RSS, then name): the
/// one group sum.
pub fn sum<'a>(members: impl IntoIterator<Item = (&'a str, Share)>) -> Vec<GroupRow> {
    let mut groups: BTreeMap<&str, GroupRow> = BTreeMap::new();
    for (name, share) in members {
        groups.entry(name).or_insert_with(|| GroupRow::empty(name)).add(&share);
    }
    let mut out: Vec<GroupRow> = groups.into_values().collect();
    out.sort_by(|a, b| {
        b.cpu_percent.total_cmp(&a.cpu_percent).then(b.rss_bytes.cmp(&a.rss_bytes)).then(a.name.cmp(&b.name))
    });
    out
}

/// The agent's rows folded by `names` (pid → group; a process without one is in no group),
/// with each group's churn since the previous sample.
pub fn fold(
    rows: &[ProcessRow],
    names: &BTreeMap<u32, String>,
    ticks: u64,
    boot_unix_secs: Option<u64>,
    churn: Option<&Churn>,
) -> Vec<GroupRow> {
    let ticks = ticks.max(1) as f64;
    let members =
        rows.iter().filter_map(|r| Some((names.get(&r.pid)?.as_str(), Share::of_row(r, ticks, boot_unix_secs))));
    let mut out = sum(members);
    if let Some(churn) = churn {
        for g in &mut out {
            if let Some((started, exited)) = churn.get(&g.name) {
                g.started = *started;
                g.exited = *exited;
            }
        }
    }
    out
}

/// The groups of one snapshot, as the agent publishes them: the fold's rows with a CPU-seconds
/// counter each (`proctor_agent::groups` makes it on the sampling thread).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupsView {
    /// `rules`, `cgroup` or `user`.
    pub by: &'static str,
    /// Published groups, biggest CPU first, each with its CPU-seconds counter.
    pub groups: Vec<(GroupRow, f64)>,
    /// Groups left out by the cap.
    pub overflow: usize,
    /// Processes no group took (rules only).
    pub ungrouped: usize,
    /// CPU the fold took on the sampling thread.
    pub cost_cpu_ns: u64,
    /// Members that ended while the agent watched, by group (each sample's `exited` added up:
    /// with the BPF process events, those that lived between two samples too). Empty for
    /// groups read back from a store.
    pub exited_total: BTreeMap<String, u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pid: u32, ppid: u32, comm: &str, cmdline: Option<&[&str]>, cgroup: &str) -> ProcessRow {
        ProcessRow {
            pid,
            ppid,
            start_ticks: u64::from(pid),
            comm: Arc::from(comm),
            cmdline: cmdline.map(|c| c.iter().map(|s| s.to_string()).collect::<Vec<_>>().into()),
            state: 'S',
            uid: Some(0),
            cpu_percent: None,
            cpu_percent_of_effective: None,
            cpu_ticks_total: 0,
            rss_bytes: None,
            anon_bytes: None,
            file_bytes: None,
            shmem_bytes: None,
            swap_bytes: None,
            vsize_bytes: 0,
            threads: 1,
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
            cgroup: Some(Arc::from(cgroup)),
            gpu: None,
            thread_rows: Vec::new(),
            net: None,
            net_total: None,
        }
    }

    /// A process that lived between two samples brings its network (from its exit record) to
    /// its group's rates over the interval; one without network adds none.
    #[test]
    fn a_short_lived_processs_network_counts_in_its_group() {
        let net = proctor_model::ProcessNet {
            tcp: proctor_model::NetCounters { rx_bytes: 4000, tx_bytes: 1000, ..Default::default() },
            connects: 2,
            ..Default::default()
        };
        let curl = ExitedProcess { pid: 300, ppid: 1, net: Some(Box::new(net)), ..ExitedProcess::default() };
        let quiet = ExitedProcess { pid: 301, ppid: 1, ..ExitedProcess::default() };
        let mut rows = Vec::new();
        let joined = [Some(Arc::from("fetch")), Some(Arc::from("idle"))];
        add_exited(&mut rows, &[&curl, &quiet], &joined, &BTreeMap::new(), |_| false, Some(2.0));
        let fetch = rows.iter().find(|g| g.name == "fetch").expect("fetch");
        assert_eq!(
            (fetch.net_rx_bytes_per_sec, fetch.net_tx_bytes_per_sec, fetch.net_connects_per_sec),
            (Some(2000.0), Some(500.0), Some(1.0))
        );
        let idle = rows.iter().find(|g| g.name == "idle").expect("idle");
        assert_eq!(idle.net_rx_bytes_per_sec, None);
    }

    /// A member seen at the previous sample that ended since: its traffic from that sample to
    /// its exit counts in its group's rates (it used to fall out: no counters now, no rate).
    #[test]
    fn an_ended_members_last_interval_counts_in_its_groups_network() {
        let at = |rx: u64, tx: u64, retrans: u64| proctor_model::ProcessNet {
            tcp: proctor_model::NetCounters { rx_bytes: rx, tx_bytes: tx, ..Default::default() },
            retransmits: retrans,
            ..Default::default()
        };
        let (before, exit) = (at(1000, 500, 1), at(5000, 2500, 3));
        let mut rows = vec![GroupRow { name: "web".into(), net_rx_bytes_per_sec: Some(100.0), ..GroupRow::default() }];
        add_ended_net(&mut rows, &[("web", &before, &exit), ("batch", &before, &before)], Some(2.0));
        let web = rows.iter().find(|g| g.name == "web").expect("web");
        assert_eq!(
            (web.net_rx_bytes_per_sec, web.net_tx_bytes_per_sec, web.net_retransmits_per_sec),
            (Some(2100.0), Some(1000.0), Some(1.0))
        );
        let batch = rows.iter().find(|g| g.name == "batch").expect("a row for a group whose member ended");
        assert_eq!(batch.net_rx_bytes_per_sec, Some(0.0));
        let mut none = Vec::new();
        add_ended_net(&mut none, &[("web", &before, &exit)], None);
        assert!(none.is_empty(), "no interval, no rate");
    }

    /// From a recording: a member the previous stored sample listed (in its stored groups) that
    /// ended before this one brings its last interval's network to its group; a zombie still
    /// listed, or a pid reused by another process, does not.
    #[test]
    fn a_recordings_ended_member_brings_its_last_interval() {
        use proctor_model::{ProcessNet, ProcessSample, Sample, SampleGroups};
        let net = |rx: u64| ProcessNet {
            tcp: proctor_model::NetCounters { rx_bytes: rx, ..Default::default() },
            ..Default::default()
        };
        let proc_ = |pid: u32, start: u64, rx: u64| ProcessSample {
            pid,
            start_ticks: start,
            net: Some(Box::new(net(rx))),
            ..ProcessSample::default()
        };
        let groups = |members: &[(&str, &[u32])]| {
            Some(std::sync::Arc::new(SampleGroups {
                by: "rules".into(),
                members: members.iter().map(|(n, p)| (n.to_string(), p.to_vec())).collect(),
                exited: Default::default(),
            }))
        };
        let prev = Sample {
            mono_ns: 1_000_000_000,
            processes: vec![proc_(10, 5, 1000), proc_(11, 5, 1000), proc_(12, 5, 1000)],
            groups: groups(&[("web", &[10, 11, 12])]),
            ..Sample::default()
        };
        let ended = |pid: u32, start: u64, rx: u64| ExitedProcess {
            pid,
            start_ticks: start,
            seen: true,
            net: Some(Box::new(net(rx))),
            ..ExitedProcess::default()
        };
        // 10 ended (+3000 B), 11 is a zombie still listed, 12's pid was reused (another start).
        let cur = Sample {
            mono_ns: 3_000_000_000,
            processes: vec![proc_(11, 5, 1000)],
            exited: vec![ended(10, 5, 4000), ended(11, 5, 9000), ended(12, 6, 9000)],
            groups: groups(&[("web", &[11])]),
            ..Sample::default()
        };
        let mut rows = vec![GroupRow { name: "web".into(), net_rx_bytes_per_sec: Some(0.0), ..GroupRow::default() }];
        add_stored_exited(&mut rows, &cur, Some(&prev));
        assert_eq!(rows[0].net_rx_bytes_per_sec, Some(1500.0), "only pid 10's 3000 B over 2 s: {rows:?}");
    }

    /// A group's network is its members' summed; a group none of whose members used the
    /// network (or with `--net` off) says unknown, not 0.
    #[test]
    fn a_groups_network_is_its_members_summed_and_unknown_without_any() {
        let net = |rx: f64, tx: f64, retrans: f64, connections: u32| proctor_model::NetRates {
            rx_bytes_per_sec: rx,
            tx_bytes_per_sec: tx,
            retransmits_per_sec: retrans,
            connects_per_sec: 1.0,
            connections,
            ..proctor_model::NetRates::default()
        };
        let mut a = row(10, 1, "api", None, "/a");
        a.net = Some(Box::new(net(1000.0, 200.0, 0.5, 3)));
        let mut b = row(11, 1, "api", None, "/a");
        b.net = Some(Box::new(net(24.0, 6.0, 1.5, 1)));
        let quiet = row(12, 1, "api", None, "/a");
        let idle = row(20, 1, "db", None, "/b");
        let names: BTreeMap<u32, String> =
            [(10, "api".to_string()), (11, "api".into()), (12, "api".into()), (20, "db".into())].into();
        let groups = fold(&[a, b, quiet, idle], &names, 100, None, None);
        let api = groups.iter().find(|g| g.name == "api").expect("api");
        assert_eq!(api.net_rx_bytes_per_sec, Some(1024.0));
        assert_eq!(api.net_tx_bytes_per_sec, Some(206.0));
        assert_eq!(api.net_retransmits_per_sec, Some(2.0));
        assert_eq!(api.net_connects_per_sec, Some(2.0));
        assert_eq!(api.net_connections, Some(4));
        let db = groups.iter().find(|g| g.name == "db").expect("db");
        assert_eq!((db.net_rx_bytes_per_sec, db.net_connections), (None, None));
    }

    #[test]
    fn processes_that_ended_unseen_join_their_rule_or_follow_their_parent_ended_or_live() {
        let rules =
            Rules::parse("process_names:\n  - name: cc\n    comm: ['cc1']\n  - name: make\n    cmdline: ['make']\n")
                .expect("rules");
        let a = Assigner::new(By::Rules(rules));
        let live: BTreeMap<u32, String> = [(100, "make".to_string())].into();
        let x = |pid, ppid, comm: &str, cmdline: &[&str]| ExitedProcess {
            pid,
            ppid,
            comm: Arc::from(comm),
            cmdline: Some(cmdline.iter().map(|s| s.to_string()).collect::<Vec<_>>().into()),
            ..ExitedProcess::default()
        };
        // make (live, 100) → gcc (ended, 200) → cc1 (ended, 201): cc1 matches its own rule, gcc
        // follows make; as (202) under the ended gcc follows gcc's group; a stranger under pid 1
        // joins none. A loop of ended parents ends.
        let exited = [
            x(201, 200, "cc1", &["cc1", "a.c"]),
            x(202, 200, "as", &["as", "a.s"]),
            x(200, 100, "gcc", &["gcc", "-c", "a.c"]),
            x(300, 1, "date", &["date"]),
            x(400, 401, "a", &[]),
            x(401, 400, "b", &[]),
        ];
        let names = a.name_exited(&exited.iter().collect::<Vec<_>>(), &live);
        let names: Vec<Option<&str>> = names.iter().map(Option::as_deref).collect();
        assert_eq!(names, [Some("cc"), Some("make"), Some("make"), None, None, None]);
        // A storm's ended processes share their name and their line's allocation: one verdict
        // serves them; the same name with another line, or none, is matched on its own.
        let line: Arc<[String]> = Arc::from(vec!["make".to_string(), "-j2".to_string()]);
        let sub = |pid, cmdline: Option<Arc<[String]>>| ExitedProcess {
            pid,
            ppid: 1,
            comm: Arc::from("sub"),
            cmdline,
            ..ExitedProcess::default()
        };
        let storm = [
            sub(600, Some(Arc::clone(&line))),
            sub(601, Some(Arc::clone(&line))),
            sub(602, Some(Arc::from(vec!["sub".to_string()]))),
            sub(603, None),
            sub(604, Some(Arc::clone(&line))),
        ];
        let names = a.name_exited(&storm.iter().collect::<Vec<_>>(), &BTreeMap::new());
        let names: Vec<Option<&str>> = names.iter().map(Option::as_deref).collect();
        assert_eq!(names, [Some("make"), Some("make"), None, None, Some("make")]);
        let c = Assigner::new(By::Cgroup);
        let mut web = x(500, 1, "curl", &["curl"]);
        web.cgroup = Some(Arc::from("/system.slice/web.service"));
        assert_eq!(c.name_exited(&[&web], &BTreeMap::new()), [Some(Arc::from("web.service"))]);
    }

    #[test]
    fn the_assigner_remembers_verdicts_only_for_live_processes_with_a_command_line() {
        let rules = Rules::parse("process_names:\n  - name: web\n    cmdline: ['gunicorn']\n").expect("rules");
        let mut a = Assigner::new(By::Rules(rules));
        let users = BTreeMap::new();
        let unread = [row(10, 1, "python", None, "/a"), row(11, 10, "python", Some(&["gunicorn", "worker"]), "/a")];
        let names = a.assign(&unread, &users);
        assert_eq!(names.get(&11).map(String::as_str), Some("web"));
        assert_eq!(names.get(&10), None, "not read yet: no verdict, and none remembered");
        assert_eq!(a.rules_seen.len(), 1);
        let read = [
            row(10, 1, "python", Some(&["gunicorn", "master"]), "/a"),
            row(11, 10, "python", Some(&["gunicorn", "worker"]), "/a"),
        ];
        let names = a.assign(&read, &users);
        assert_eq!(
            (names.get(&10).map(String::as_str), names.get(&11).map(String::as_str)),
            (Some("web"), Some("web"))
        );
        let names = a.assign(&read[..1], &users);
        assert_eq!(names.len(), 1);
        assert_eq!(a.rules_seen.len(), 1, "an exited process is forgotten");
        let mut c = Assigner::new(By::Cgroup);
        let names = c.assign(&[row(5, 1, "nginx", None, "/system.slice/nginx.service")], &users);
        assert_eq!(names.get(&5).map(String::as_str), Some("nginx.service"));
        assert_eq!(c.assign(&[], &users).len(), 0);
        assert!(c.cgroup_names.is_empty());
    }

    #[test]
    fn a_process_that_execs_is_judged_again() {
        // The case: a subshell (`bash`) that later execs `execmark`, same pid and start.
        let rules = Rules::parse("process_names:\n  - name: marked\n    comm: ['execmark']\n").expect("rules");
        let mut a = Assigner::new(By::Rules(rules));
        let users = BTreeMap::new();
        let shell = [row(20, 1, "bash", Some(&["bash"]), "/a")];
        assert_eq!(a.assign(&shell, &users).get(&20), None);
        assert_eq!(a.assign(&shell, &users).get(&20), None, "remembered: still not marked");
        // The name changes at the exec; the command line is read again a little later.
        let renamed = [row(20, 1, "execmark", Some(&["bash"]), "/a")];
        assert_eq!(a.assign(&renamed, &users).get(&20).map(String::as_str), Some("marked"));
        let read = [row(20, 1, "execmark", Some(&["./execmark", "120"]), "/a")];
        assert_eq!(a.assign(&read, &users).get(&20).map(String::as_str), Some("marked"));
        // A command line rule is asked again when only the command line changed.
        let rules = Rules::parse("process_names:\n  - name: web\n    cmdline: ['gunicorn']\n").expect("rules");
        let mut a = Assigner::new(By::Rules(rules));
        assert_eq!(a.assign(&[row(30, 1, "python", Some(&["python", "shim.py"]), "/a")], &users).get(&30), None);
        let execd = [row(30, 1, "python", Some(&["gunicorn", "app:app"]), "/a")];
        assert_eq!(a.assign(&execd, &users).get(&30).map(String::as_str), Some("web"));
    }

    #[test]
    fn churn_counts_who_started_and_who_exited_in_the_group_they_were_in() {
        let names = |pairs: &[(u32, &str)]| pairs.iter().map(|(p, n)| (*p, n.to_string())).collect();
        let prev_names: BTreeMap<u32, String> = names(&[(1, "web"), (2, "web"), (3, "db"), (4, "web")]);
        let cur_names: BTreeMap<u32, String> = names(&[(1, "web"), (3, "db"), (4, "db"), (5, "web")]);
        // 2 exited; 4 is a reused pid (new start time): it exited from web and started in db;
        // 5 started; 6 started but no group took it.
        let prev = [(1, 10), (2, 10), (3, 10), (4, 10)];
        let cur = [(1, 10), (3, 10), (4, 99), (5, 99), (6, 99)];
        let c = churn(&prev, &prev_names, &cur, &cur_names);
        assert_eq!(c.get("web"), Some(&(1, 2)));
        assert_eq!(c.get("db"), Some(&(1, 0)));
        assert_eq!(c.len(), 2);
        let rows = [
            row(1, 0, "a", None, "/"),
            row(5, 0, "a", None, "/"),
            row(3, 0, "b", None, "/"),
            row(4, 0, "b", None, "/"),
        ];
        let groups = fold(&rows, &cur_names, 100, None, Some(&c));
        let web = groups.iter().find(|g| g.name == "web").expect("web");
        assert_eq!((web.processes, web.started, web.exited), (2, 1, 2));
        let db = groups.iter().find(|g| g.name == "db").expect("db");
        assert_eq!((db.processes, db.started, db.exited), (2, 1, 0));
    }

    #[test]
    fn cgroup_paths_are_named_as_people_know_them() {
        for (path, name) in [
            ("/system.slice/nginx.service", "nginx.service"),
            ("/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope", "docker:0123456789ab"),
            ("/docker/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "docker:0123456789ab"),
            (
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b3c4d_5e6f_7a8b_9c0d_1e2f3a4b5c6d.slice/cri-containerd-aaaa.scope",
                "pod:1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
            ),
            ("/kubepods/burstable/pod1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d/abc", "pod:1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"),
            ("/user.slice/user-1000.slice/session-3.scope", "session-3.scope"),
            ("/machine.slice/libpod-0123456789abcdef.scope", "podman:0123456789ab"),
            ("/", "/"),
        ] {
            assert_eq!(cgroup_name(path), name, "{path}");
        }
    }
}
