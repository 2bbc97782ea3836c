//! `proctor._core`: the native half of the `proctor` Python package (PyO3, abi3).
//!
//! It wraps proctor-agent's [`Agent`] (the sampler on its own Rust thread publishing an
//! immutable [`Snapshot`]) and proctor-vocab's JSON shapes of a snapshot (no HTTP crate: the
//! wheel carries no HTTP server); the Python half in
//! `python/proctor/` parses the JSON into dicts and holds the Jupyter extension. Every method
//! that can wait (the first sample, stopping the thread, a one-off `/proc` read) releases the
//! GIL; the rest take an `Arc` of the latest snapshot and serialize it, so they never read
//! `/proc` and never wait on the sampling thread. Nothing reads `/proc` with the GIL held.
//!
//! Values cross into Python as JSON text, not as Python objects built here: serde keeps the
//! field order jupyter-resource-usage's clients see, and the Jupyter handlers write the text
//! as it is.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proctor_agent::disk::DiskWatch;
use proctor_agent::{Agent, AgentConfig, Shared, Snapshot};
use proctor_model::{build_tree, container_truth, ContainerTruth};
use proctor_procfs::process::{parse_smaps_rollup, parse_status};
use proctor_procfs::{ErrorKind, Root};
use proctor_sampler::{HostFiles, Sampler as CoreSampler, SamplerConfig};
use proctor_vocab::jupyter::{jupyter_metrics, kernel_usage, JupyterConfig, JupyterMetrics};
use proctor_vocab::snapshot::{AgentExtras, ContainerOut};
use proctor_vocab::{process, snapshot as wire, ProcessSort};
use pyo3::exceptions::{PyException, PyOSError, PyPermissionError, PyProcessLookupError, PyValueError};
use pyo3::prelude::*;
use serde::Serialize;

pyo3::create_exception!(_core, ProctorError, PyException, "An error from proctor's native core.");

/// Processes `snapshot_json` lists, as `GET /api/v1/snapshot` does.
const SNAPSHOT_TOP: usize = 15;

/// A snapshot older than this many intervals (plus [`STALE_GRACE`]) means the sampling thread
/// stopped publishing: the answer still comes from it, marked with an `error`.
const STALE_INTERVALS: f64 = 3.0;
const STALE_GRACE: Duration = Duration::from_secs(2);

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn to_json<T: Serialize>(value: &T) -> PyResult<String> {
    serde_json::to_string(value).map_err(|e| ProctorError::new_err(format!("cannot encode JSON: {e}")))
}

/// Seconds since the snapshot's sample was taken (wall clock: the sample carries its unix time).
fn age_secs(s: &Snapshot) -> f64 {
    unix_ns().saturating_sub(s.sample.unix_ns) as f64 / 1e9
}

/// The container truth of one host-only sample taken now on the calling thread: what
/// `proctor snapshot` prints under "container".
fn one_off_truth(pid: u32) -> (ContainerTruth, proctor_model::Sample) {
    let config = SamplerConfig {
        host_files: HostFiles::Cpu,
        processes: false,
        process_cgroups: false,
        cmdline: false,
        pss_budget: 0.0,
        container_pid: pid,
        ..SamplerConfig::default()
    };
    let mut sampler = CoreSampler::new(config);
    let sample = sampler.sample();
    (container_truth(&sample), sample)
}

/// Effective CPUs of the calling process's container: min(affinity, the tightest cgroup quota
/// over its own and ancestor cgroups). Reads cgroupfs once, with the GIL released.
#[pyfunction]
fn effective_cpu_count(py: Python<'_>) -> PyResult<f64> {
    let truth = py.detach(|| one_off_truth(0).0);
    truth.effective_cpus.ok_or_else(|| {
        ProctorError::new_err("cannot tell the effective CPUs: no affinity, quota or online CPUs readable")
    })
}

/// JSON of [`ContainerOut`] for `pid`'s container (0: the caller's), plus the host's
/// memory; one-off read with the GIL released.
#[pyfunction]
#[pyo3(signature = (pid = 0))]
fn limits_json(py: Python<'_>, pid: u32) -> PyResult<String> {
    #[derive(Serialize)]
    struct LimitsOut {
        #[serde(flatten)]
        container: ContainerOut,
        host_memory_bytes: Option<u64>,
    }
    let sample = py.detach(|| {
        let config = SamplerConfig {
            processes: false,
            process_cgroups: false,
            cmdline: false,
            pss_budget: 0.0,
            container_pid: pid,
            ..SamplerConfig::default()
        };
        CoreSampler::new(config).sample()
    });
    let host_memory_bytes = sample.host.meminfo.and_then(|m| m.total_bytes);
    to_json(&LimitsOut { container: wire::container(&Snapshot::bare(sample)), host_memory_bytes })
}

fn proc_error(pid: u32, e: &proctor_procfs::Error) -> PyErr {
    let msg = format!("pid {pid}: {e}");
    match e.kind {
        ErrorKind::Gone => PyProcessLookupError::new_err(format!("no process with pid {pid}")),
        ErrorKind::Permission => PyPermissionError::new_err(msg),
        _ => PyOSError::new_err(msg),
    }
}

/// One process's memory now: `/proc/PID/status`, and with `pss` its `smaps_rollup` (which
/// walks the target's pages under its mmap lock: a one-off, on the caller's thread, with the
/// GIL released).
#[pyfunction]
#[pyo3(signature = (pid, pss = false))]
fn process_memory_json(py: Python<'_>, pid: u32, pss: bool) -> PyResult<String> {
    #[derive(Serialize)]
    struct MemoryOut {
        pid: u32,
        rss_bytes: Option<u64>,
        anon_bytes: Option<u64>,
        file_bytes: Option<u64>,
        shmem_bytes: Option<u64>,
        swap_bytes: Option<u64>,
        peak_rss_bytes: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pss_bytes: Option<Option<u64>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        uss_bytes: Option<Option<u64>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        swap_pss_bytes: Option<Option<u64>>,
    }
    let result = py.detach(|| -> Result<MemoryOut, PyErr> {
        let root = Root::default();
        let mut buf = Vec::new();
        let path = format!("/proc/{pid}/status");
        root.read_into(&path, &mut buf).map_err(|e| proc_error(pid, &e))?;
        let status = parse_status(&buf).ok_or_else(|| ProctorError::new_err(format!("{path}: not a status file")))?;
        let rollup = if pss {
            let path = format!("/proc/{pid}/smaps_rollup");
            root.read_into(&path, &mut buf).map_err(|e| proc_error(pid, &e))?;
            Some(
                parse_smaps_rollup(&buf)
                    .ok_or_else(|| ProctorError::new_err(format!("{path}: not a smaps_rollup file")))?,
            )
        } else {
            None
        };
        Ok(MemoryOut {
            pid,
            rss_bytes: status.vm_rss_bytes,
            anon_bytes: status.rss_anon_bytes,
            file_bytes: status.rss_file_bytes,
            shmem_bytes: status.rss_shmem_bytes,
            swap_bytes: status.vm_swap_bytes,
            peak_rss_bytes: status.vm_hwm_bytes,
            pss_bytes: rollup.map(|r| r.pss_bytes),
            uss_bytes: rollup.map(|r| r.uss_bytes()),
            swap_pss_bytes: rollup.map(|r| r.swap_pss_bytes),
        })
    })?;
    to_json(&result)
}

/// The last `/api/metrics/v1` answer that had the root in it, served (with an `error` and its
/// age) while the tree cannot be measured.
#[derive(Debug)]
struct LastGood {
    metrics: JupyterMetrics,
    unix_ns: u64,
}

/// A background sampler: proctor's sampling thread rooted at one process tree.
#[pyclass(module = "proctor._core", frozen)]
#[derive(Debug)]
struct Sampler {
    /// The sampling thread; `None` once closed. Locked only to take it out in `close`.
    agent: Mutex<Option<Agent>>,
    /// Shared with the sampling thread, which publishes every snapshot into it.
    shared: Arc<Shared>,
    root_pid: u32,
    interval: Duration,
    /// The filesystem the Jupyter body reports, read on a thread of its own (statvfs can hang).
    disk: DiskWatch,
    last_good: Mutex<Option<LastGood>>,
}

/// Why the latest snapshot should not be trusted as current, if it should not.
fn problem(sampler: &Sampler, s: &Snapshot, closed: bool) -> Option<String> {
    if closed {
        return Some("sampler is closed".to_string());
    }
    let age = age_secs(s);
    let limit = sampler.interval.as_secs_f64() * STALE_INTERVALS + STALE_GRACE.as_secs_f64();
    (age > limit).then(|| format!("sampler stalled: no sample for {age:.1} s"))
}

impl Sampler {
    fn is_closed(&self) -> bool {
        self.agent.lock().unwrap_or_else(PoisonError::into_inner).is_none()
    }

    fn jupyter_json(&self, config: &JupyterConfig) -> PyResult<String> {
        #[derive(Serialize)]
        struct WithError<'a> {
            #[serde(flatten)]
            metrics: &'a JupyterMetrics,
            error: String,
            age_secs: f64,
        }
        let s = self.shared.latest();
        let issue = problem(self, &s, self.is_closed());
        let mut last = self.last_good.lock().unwrap_or_else(PoisonError::into_inner);
        match jupyter_metrics(&s, config, self.disk.status().usage) {
            Some(metrics) => {
                let json = match &issue {
                    Some(error) => {
                        to_json(&WithError { metrics: &metrics, error: error.clone(), age_secs: age_secs(&s) })
                    }
                    None => to_json(&metrics),
                };
                *last = Some(LastGood { metrics, unix_ns: s.sample.unix_ns });
                json
            }
            None => {
                let error = issue.unwrap_or_else(|| format!("root pid {} is gone", config.pid));
                match last.as_ref() {
                    Some(good) => to_json(&WithError {
                        metrics: &good.metrics,
                        error,
                        age_secs: unix_ns().saturating_sub(good.unix_ns) as f64 / 1e9,
                    }),
                    None => Err(PyProcessLookupError::new_err(format!("{error}, and no sample of it was ever taken"))),
                }
            }
        }
    }
}

#[pymethods]
impl Sampler {
    /// Starts sampling; the first sample is taken before this returns (GIL released).
    #[new]
    #[pyo3(signature = (root_pid = None, interval = 1.0, pss_budget = 0.02, disk_path = None))]
    fn new(
        py: Python<'_>,
        root_pid: Option<u32>,
        interval: f64,
        pss_budget: f64,
        disk_path: Option<PathBuf>,
    ) -> PyResult<Self> {
        if !interval.is_finite() || interval < 0.01 {
            return Err(PyValueError::new_err(format!("interval must be at least 0.01 s, not {interval}")));
        }
        if !pss_budget.is_finite() || !(0.0..=1.0).contains(&pss_budget) {
            return Err(PyValueError::new_err(format!("pss_budget is a share of one core in 0..=1, not {pss_budget}")));
        }
        let root_pid = root_pid.unwrap_or_else(std::process::id);
        // A stat of /proc, so off the GIL like every other read.
        if root_pid == 0 || !py.detach(|| std::path::Path::new(&format!("/proc/{root_pid}")).exists()) {
            return Err(PyProcessLookupError::new_err(format!("no process with pid {root_pid} (root_pid)")));
        }
        let interval = Duration::from_secs_f64(interval);
        let sampler_config =
            // The server the agent runs in is the tree's root, watched like its children: its
            // PSS is read again when its counters move.
            SamplerConfig {
                pss_budget,
                pss_root: Some(root_pid),
                container_pid: root_pid,
                pss_own_by_age: false,
                ..SamplerConfig::default()
            };
        // The ring is not read from Python; two points is its minimum.
        let agent_config = AgentConfig::brief(interval);
        let disk_path = disk_path.unwrap_or_else(|| PathBuf::from("/"));
        let (agent, disk) = py
            .detach(|| {
                let disk = DiskWatch::start(&disk_path, Duration::from_secs(5), Duration::from_secs(2))?;
                // The first disk reading, so the first Jupyter body has it (a hung mount waits
                // at most this long, and is then reported).
                disk.wait_first(Duration::from_secs(2));
                Ok::<_, std::io::Error>((Agent::start(sampler_config, agent_config)?, disk))
            })
            .map_err(|e| PyOSError::new_err(format!("cannot start the sampling thread: {e}")))?;
        let shared = agent.shared();
        if shared.latest().row(root_pid).is_none() {
            py.detach(|| agent.stop());
            return Err(PyProcessLookupError::new_err(format!("no process with pid {root_pid} (root_pid): it exited")));
        }
        Ok(Sampler { agent: Mutex::new(Some(agent)), shared, root_pid, interval, disk, last_good: Mutex::new(None) })
    }

    #[getter]
    fn root_pid(&self) -> u32 {
        self.root_pid
    }

    #[getter]
    fn interval(&self) -> f64 {
        self.interval.as_secs_f64()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.is_closed()
    }

    /// (age of the latest sample in seconds, error or None, samples taken).
    fn status(&self) -> (f64, Option<String>, u64) {
        let s = self.shared.latest();
        let closed = self.is_closed();
        let error = problem(self, &s, closed)
            .or_else(|| s.row(self.root_pid).is_none().then(|| format!("root pid {} is gone", self.root_pid)));
        (age_secs(&s), error, s.agent.samples)
    }

    /// `/api/v1/snapshot`'s JSON for the latest sample, plus `age_secs` and `error`.
    fn snapshot_json(&self) -> PyResult<String> {
        #[derive(Serialize)]
        struct Out {
            #[serde(flatten)]
            snapshot: wire::SnapshotOut,
            age_secs: f64,
            error: Option<String>,
        }
        let s = self.shared.latest();
        let error = problem(self, &s, self.is_closed());
        let extras = AgentExtras { http: None, disk_error: self.disk.status().error, remote_write: Vec::new() };
        let snapshot = wire::snapshot(&s, ProcessSort::Cpu, SNAPSHOT_TOP, &extras);
        to_json(&Out { snapshot, age_secs: age_secs(&s), error })
    }

    /// `/api/v1/processes/PID/tree`'s JSON, or `None` when `pid` is not in the latest sample.
    fn tree_json(&self, pid: u32) -> PyResult<Option<String>> {
        let s = self.shared.latest();
        build_tree(&s.rows, pid).map(|t| to_json(&process::tree(&s, &t))).transpose()
    }

    /// jupyter-resource-usage 1.3.0's `/api/metrics/v1` JSON for the root's tree. Limits left
    /// as `None` are the container's. When the tree cannot be measured (root gone, sampler
    /// stalled or closed), the last good answer with `error` and `age_secs` added.
    #[pyo3(signature = (*, mem_limit = None, cpu_limit = None, track_cpu_percent = true, track_disk_usage = true,
                        mem_warning_threshold = 0.1, cpu_warning_threshold = 0.1, disk_warning_threshold = 0.1))]
    #[allow(clippy::too_many_arguments)]
    fn jupyter_metrics_json(
        &self,
        mem_limit: Option<u64>,
        cpu_limit: Option<f64>,
        track_cpu_percent: bool,
        track_disk_usage: bool,
        mem_warning_threshold: f64,
        cpu_warning_threshold: f64,
        disk_warning_threshold: f64,
    ) -> PyResult<String> {
        let config = JupyterConfig {
            pid: self.root_pid,
            mem_limit_bytes: mem_limit.filter(|&m| m > 0),
            cpu_limit: cpu_limit.filter(|&c| c > 0.0),
            track_cpu_percent,
            track_disk_usage,
            mem_warning_threshold,
            cpu_warning_threshold,
            disk_warning_threshold,
        };
        self.jupyter_json(&config)
    }

    /// The `content` of ipykernel's `usage_reply` for `pid`'s tree (a kernel), or `None` when
    /// `pid` is not in the latest sample.
    fn kernel_usage_json(&self, pid: u32, hostname: &str) -> PyResult<Option<String>> {
        let s = self.shared.latest();
        kernel_usage(&s, pid, hostname).map(|k| to_json(&k)).transpose()
    }

    /// Stops the sampling thread (waits for at most one cycle, GIL released). Idempotent.
    fn close(&self, py: Python<'_>) {
        let agent = self.agent.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(agent) = agent {
            py.detach(|| agent.stop());
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // An Agent dropped without `stop` would keep sampling until the process exits.
        if let Some(agent) = self.agent.get_mut().unwrap_or_else(PoisonError::into_inner).take() {
            agent.stop();
        }
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ProctorError", m.py().get_type::<ProctorError>())?;
    m.add_class::<Sampler>()?;
    m.add_function(wrap_pyfunction!(effective_cpu_count, m)?)?;
    m.add_function(wrap_pyfunction!(limits_json, m)?)?;
    m.add_function(wrap_pyfunction!(process_memory_json, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_off_truth_is_bounded_by_the_affinity() {
        let (truth, _) = one_off_truth(0);
        let effective = truth.effective_cpus.expect("affinity is readable");
        let affinity = truth.affinity_cpus.expect("affinity is readable") as f64;
        assert!(effective > 0.0 && effective <= affinity, "{effective} vs {affinity}");
    }

    #[test]
    fn a_bare_snapshot_renders_the_container() {
        let (_, sample) = one_off_truth(0);
        let s = Snapshot::bare(sample);
        let json = serde_json::to_string(&wire::container(&s)).expect("serializable");
        assert!(json.contains("\"effective_cpus\":"), "{json}");
    }
}
