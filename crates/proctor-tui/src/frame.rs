//! One screen's worth of data: the vocabulary's host, container and process shapes at one
//! time, however they were obtained (the in-process agent, a recording, a remote `proctor
//! serve`'s JSON API). The screen is drawn from a [`Frame`] only, so the three sources look the
//! same and speak the names, units and formats every other surface speaks.

use std::sync::Arc;

use proctor_agent::Snapshot;
use proctor_vocab::exited::{exited_of, ExitedOut};
use proctor_vocab::process::{process, ProcessOut};
use proctor_vocab::snapshot::{container, host, ContainerOut, HostOut};
use serde::Deserialize;

/// Where a frame came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// This process's agent, now.
    Live,
    /// Read back from a store.
    Stored,
    /// A remote agent's JSON API.
    Remote,
}

/// The agent's own cost, as far as the source tells it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgentLine {
    /// CPU of the whole agent process since it started (for a live `proctor top`: this process,
    /// screen included); the header shows its rate between two frames.
    pub cpu_seconds_total: f64,
    /// CPU the last sampling cycle took.
    pub last_sample_cpu_seconds: f64,
    pub resident_bytes: u64,
    /// The PSS worker's rest after its last read (seconds still to go) and its budget (share
    /// of one CPU), where the agent has the worker: the Enter pane says why a process waits.
    pub pss_rest: Option<(f64, f64)>,
}

#[derive(Debug, Clone)]
pub struct Frame {
    pub origin: Origin,
    /// The sample's sequence number in its run (0 where the source does not say).
    pub seq: u64,
    pub time_unix_ms: u64,
    /// Seconds between this sample and the one rates were taken against.
    pub interval_secs: Option<f64>,
    pub host: HostOut,
    pub container: ContainerOut,
    /// Sorted by pid.
    pub processes: Vec<ProcessOut>,
    pub agent: Option<AgentLine>,
    /// What fires, when the source runs alert rules (`top --rules`, or a remote serve's).
    pub alerts: Option<AlertLine>,
    /// Processes that ended since the frame before (the source's BPF process events; empty
    /// without them), in the order they ended; `events` says whether the source has them.
    pub exited: Vec<ExitedOut>,
    pub events: bool,
    /// Why the source does not count each process's network where it was asked to (`--net`
    /// refused: no CAP_NET_ADMIN, an old kernel); `None` when it counts or was not asked.
    pub net_unavailable: Option<String>,
}

/// The header's alerts line: firing rules with their instance counts, pending instances.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlertLine {
    /// (rule, instances firing), in the rules file's order.
    pub firing: Vec<(String, usize)>,
    pub pending: usize,
    pub rules: usize,
    /// A reload that kept the old rules, said as the agent says it.
    pub note: Option<String>,
}

impl AlertLine {
    /// From a running rule set's states (`proctor top --rules`).
    pub fn of(a: &proctor_alerts::engine::Alerting) -> AlertLine {
        let mut line = AlertLine { rules: a.set.rules.len(), ..AlertLine::default() };
        for r in &a.set.rules {
            let Some(st) = a.state.rules.get(&r.name) else { continue };
            let firing = st.instances.values().filter(|i| i.phase == proctor_alerts::state::Phase::Firing).count();
            line.pending += st.instances.len() - firing;
            if firing > 0 {
                line.firing.push((r.name.clone(), firing));
            }
        }
        line
    }

    /// From a remote agent's `/api/v1/alerts`; `None` when it runs no rules.
    pub fn from_json(json: &[u8]) -> Result<Option<AlertLine>, String> {
        #[derive(Deserialize)]
        struct Inst {
            state: String,
        }
        #[derive(Deserialize)]
        struct Rule {
            name: String,
            instances: Vec<Inst>,
        }
        #[derive(Deserialize)]
        struct Doc {
            enabled: bool,
            #[serde(default)]
            rules: Vec<Rule>,
            reload_error: Option<String>,
        }
        let doc: Doc = serde_json::from_slice(json).map_err(|e| format!("its alerts are not proctor's: {e}"))?;
        if !doc.enabled {
            return Ok(None);
        }
        let mut line = AlertLine { rules: doc.rules.len(), note: doc.reload_error, ..AlertLine::default() };
        for r in doc.rules {
            let firing = r.instances.iter().filter(|i| i.state == "firing").count();
            line.pending += r.instances.len() - firing;
            if firing > 0 {
                line.firing.push((r.name, firing));
            }
        }
        Ok(Some(line))
    }

    /// `2 firing: HostCpuBusy, Burner ×3; 1 pending (5 rules)`.
    pub fn text(&self) -> String {
        let mut out = if self.firing.is_empty() {
            "none firing".to_string()
        } else {
            let names: Vec<String> = self
                .firing
                .iter()
                .map(|(name, n)| if *n > 1 { format!("{name} ×{n}") } else { name.clone() })
                .collect();
            format!("{} firing: {}", self.firing.iter().map(|f| f.1).sum::<usize>(), names.join(", "))
        };
        if self.pending > 0 {
            out.push_str(&format!("; {} pending", self.pending));
        }
        out.push_str(&format!(" ({} rule{})", self.rules, if self.rules == 1 { "" } else { "s" }));
        if let Some(note) = &self.note {
            out.push_str(&format!("; {note}"));
        }
        out
    }
}

impl Frame {
    /// The frame of a snapshot (live, or derived from a stored sample and the one before it).
    pub fn from_snapshot(s: &Snapshot, origin: Origin) -> Frame {
        let mut processes: Vec<ProcessOut> = s.rows.iter().map(|r| process(s, r)).collect();
        processes.sort_by_key(|p| p.pid);
        let agent = (s.agent.pid != 0).then(|| AgentLine {
            cpu_seconds_total: s.agent.process_cpu_seconds,
            last_sample_cpu_seconds: s.sample.cost.cpu_ns as f64 / 1e9,
            resident_bytes: s.agent.resident_bytes,
            pss_rest: s.agent.pss.map(|p| (p.resting_ns as f64 / 1e9, p.budget)),
        });
        Frame {
            origin,
            seq: s.sample.seq,
            time_unix_ms: s.unix_ms(),
            interval_secs: s.interval_secs,
            host: host(s),
            container: container(s),
            processes,
            agent,
            alerts: None,
            exited: exited_of(&s.sample),
            // A stored sample does not say; one that lists ended processes had them.
            events: s.agent.events_used || !s.sample.exited.is_empty(),
            net_unavailable: s.agent.net_why_not.clone(),
        }
    }

    /// The frame of a remote agent: its `/api/v1/snapshot` and `/api/v1/processes` documents.
    pub fn from_remote(snapshot_json: &[u8], processes_json: &[u8]) -> Result<Frame, String> {
        #[derive(Deserialize)]
        struct LastSample {
            cpu_seconds: f64,
        }
        #[derive(Deserialize)]
        struct Agent {
            cpu_seconds_total: f64,
            resident_bytes: u64,
            last_sample: LastSample,
            #[serde(default)]
            process_events_from: Option<String>,
            #[serde(default)]
            process_net_unavailable: Option<String>,
            #[serde(default)]
            pss_worker: Option<PssWorker>,
        }
        #[derive(Deserialize)]
        struct PssWorker {
            #[serde(default)]
            resting_seconds: Option<f64>,
            #[serde(default)]
            budget_share_of_one_cpu: Option<f64>,
        }
        #[derive(Deserialize)]
        struct Doc {
            seq: u64,
            time_unix_ms: u64,
            interval_secs: Option<f64>,
            host: HostOut,
            container: ContainerOut,
            #[serde(default)]
            exited: proctor_vocab::exited::ExitedListOut,
            agent: Agent,
        }
        #[derive(Deserialize)]
        struct List {
            processes: Vec<ProcessOut>,
        }
        let doc: Doc =
            serde_json::from_slice(snapshot_json).map_err(|e| format!("its snapshot is not proctor's: {e}"))?;
        let list: List =
            serde_json::from_slice(processes_json).map_err(|e| format!("its process list is not proctor's: {e}"))?;
        let mut processes = list.processes;
        processes.sort_by_key(|p| p.pid);
        Ok(Frame {
            origin: Origin::Remote,
            seq: doc.seq,
            time_unix_ms: doc.time_unix_ms,
            interval_secs: doc.interval_secs,
            host: doc.host,
            container: doc.container,
            processes,
            agent: Some(AgentLine {
                cpu_seconds_total: doc.agent.cpu_seconds_total,
                last_sample_cpu_seconds: doc.agent.last_sample.cpu_seconds,
                resident_bytes: doc.agent.resident_bytes,
                pss_rest: doc.agent.pss_worker.as_ref().and_then(|w| w.resting_seconds.zip(w.budget_share_of_one_cpu)),
            }),
            alerts: None,
            exited: doc.exited.listed,
            events: doc.agent.process_events_from.as_deref() == Some("bpf"),
            net_unavailable: doc.agent.process_net_unavailable,
        })
    }

    pub fn process(&self, pid: u32) -> Option<&ProcessOut> {
        self.processes.binary_search_by_key(&pid, |p| p.pid).ok().map(|i| &self.processes[i])
    }

    /// The parent chain of `pid`, nearest parent first (bounded: a cycle in hostile data ends it).
    pub fn parents(&self, pid: u32) -> Vec<&ProcessOut> {
        let mut chain = Vec::new();
        let mut at = self.process(pid).map(|p| p.ppid);
        while let Some(ppid) = at {
            if ppid == 0 || chain.len() >= 64 {
                break;
            }
            let Some(parent) = self.process(ppid) else { break };
            chain.push(parent);
            at = Some(parent.ppid);
        }
        chain
    }
}

/// Frames are handed around behind an `Arc`: the time-travel ring and the screen share them.
pub type SharedFrame = Arc<Frame>;
