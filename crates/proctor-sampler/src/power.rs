//! Energy and power counters, kept open and re-read every cycle on the sampling thread: each
//! is one `pread` of a small sysfs file that takes no lock of any process. Which files exist
//! and which this process may read is learned once, when the reader opens
//! ([`proctor_procfs::power::discover`]); an unreadable one (RAPL's `energy_uj` is root-only
//! since Linux 5.10) is listed in [`PowerReader::discovery`] for `doctor` to say, and is never
//! an error per sample.

use std::sync::Arc;

use proctor_model::{PowerReading, SampleCost};
use proctor_procfs::power::{discover, energy_delta_uj, parse_counter, Discovery, PowerSource, Unit};
use proctor_procfs::{ProcFile, Root};

use crate::nvml::NvmlReading;

#[derive(Debug)]
struct Source {
    source: PowerSource,
    domain: Arc<str>,
    file: ProcFile,
}

#[derive(Debug)]
pub struct PowerReader {
    sources: Vec<Source>,
    discovery: Discovery,
}

impl PowerReader {
    pub fn open(root: &Root, cost: &mut SampleCost) -> Self {
        let mut discovery = discover(root);
        let mut sources = Vec::with_capacity(discovery.sources.len());
        let mut failed = Vec::new();
        for source in &discovery.sources {
            match root.open_kept(&source.path) {
                Ok(file) => {
                    cost.files_opened += 1;
                    sources.push(Source { domain: Arc::from(source.domain.as_str()), source: source.clone(), file });
                }
                Err(e) => failed.push(proctor_procfs::power::Unreadable {
                    domain: source.domain.clone(),
                    path: source.path.clone(),
                    kind: e.kind,
                }),
            }
        }
        discovery.sources.retain(|s| !failed.iter().any(|f| f.path == s.path));
        discovery.unreadable.extend(failed);
        Self { sources, discovery }
    }

    /// What was found when the reader opened: the sources it reads and those it may not.
    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    /// Reads every source once; a failure is counted under `host.power` by reason.
    pub fn read(&mut self, cost: &mut SampleCost, out: &mut Vec<PowerReading>) {
        for s in &mut self.sources {
            cost.files_read += 1;
            match s.file.read() {
                Ok(bytes) => match parse_counter(bytes) {
                    Some(value) => out.push(PowerReading {
                        domain: Arc::clone(&s.domain),
                        unit: s.source.unit,
                        value,
                        max_energy_range_uj: s.source.max_energy_range_uj,
                        in_host_total: s.source.in_host_total,
                    }),
                    None => *cost.errors.entry(("host.power", "parse")).or_default() += 1,
                },
                Err(e) => *cost.errors.entry(("host.power", e.kind.as_str())).or_default() += 1,
            }
        }
    }
}

/// One domain's energy over a metered run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DomainEnergy {
    pub domain: String,
    pub joules: f64,
    /// Part of the host's total.
    pub in_host_total: bool,
    /// `energy_counter` (the counter's own joules, wraps included) or `power_sensor` (its
    /// watts integrated over the reads: a sensor's average, not a meter).
    pub from: &'static str,
}

/// What [`EnergyMeter`] measured.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct EnergyTotals {
    /// Between the first and the last read.
    pub seconds: f64,
    pub domains: Vec<DomainEnergy>,
    /// The host's total; `None` when no domain makes it.
    pub host_joules: Option<f64>,
    /// Files that exist but may not be read (RAPL is root-only on many kernels), and why.
    pub unreadable: Vec<String>,
    /// What NVML said, where it is not reading (no library, no device).
    pub nvml: Option<String>,
    pub reads: u64,
}

/// Meters energy over a run on a thread of its own: every source read at the start, every
/// `every` (so a RAPL counter cannot wrap twice between reads) and at the end.
#[derive(Debug)]
pub struct EnergyMeter {
    stop: std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    thread: std::thread::JoinHandle<EnergyTotals>,
}

impl EnergyMeter {
    /// Starts metering now. `nvml_library` adds NVIDIA boards where the library loads.
    pub fn start(root: Root, every: std::time::Duration, nvml_library: Option<String>) -> std::io::Result<Self> {
        let stop = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let for_thread = std::sync::Arc::clone(&stop);
        // The first read happens before this returns, so the run starts after it.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("proctor-energy".into())
            .spawn(move || meter(&root, every, nvml_library, &for_thread, ready_tx))?;
        let _ = ready_rx.recv_timeout(std::time::Duration::from_secs(5));
        Ok(Self { stop, thread })
    }

    /// Takes the last read and returns the totals.
    pub fn finish(self) -> EnergyTotals {
        let (lock, wake) = &*self.stop;
        *lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        wake.notify_all();
        self.thread.join().unwrap_or_default()
    }
}

fn meter(
    root: &Root,
    every: std::time::Duration,
    nvml_library: Option<String>,
    stop: &(std::sync::Mutex<bool>, std::sync::Condvar),
    ready: std::sync::mpsc::Sender<()>,
) -> EnergyTotals {
    use std::time::Instant;
    let mut cost = SampleCost::default();
    let mut reader = PowerReader::open(root, &mut cost);
    let nvml =
        nvml_library.and_then(|lib| crate::nvml::NvmlWorker::start(&lib, std::time::Duration::from_secs(2)).ok());
    let mut nvml_status = nvml.as_ref().map(|n| n.wait_loaded(std::time::Duration::from_secs(2)));
    let read = |reader: &mut PowerReader, cost: &mut SampleCost| {
        let mut out = Vec::new();
        reader.read(cost, &mut out);
        if let Some(reading) = nvml.as_ref().and_then(|n| {
            n.request();
            // NVML answers in milliseconds; a reading from the previous request is as good.
            std::thread::sleep(std::time::Duration::from_millis(20));
            n.latest()
        }) {
            nvml_power(&reading, &mut out);
        }
        (Instant::now(), out)
    };
    let mut totals = EnergyTotals::default();
    let (first_at, mut prev) = read(&mut reader, &mut cost);
    let _ = ready.send(());
    let mut prev_at = first_at;
    let mut joules: Vec<DomainEnergy> = Vec::new();
    loop {
        let done = {
            let (lock, wake) = stop;
            let guard = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (guard, _) = wake
                .wait_timeout_while(guard, every, |stopped| !*stopped)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *guard
        };
        let (at, now) = read(&mut reader, &mut cost);
        totals.reads += 1;
        let dt = at.duration_since(prev_at).as_secs_f64();
        for r in &now {
            let Some(before) = prev.iter().find(|p| p.domain == r.domain && p.unit == r.unit) else { continue };
            let (added, from) = match r.unit {
                Unit::EnergyMicrojoules => (
                    energy_delta_uj(before.value, r.value, r.max_energy_range_uj).map(|uj| uj as f64 / 1e6),
                    "energy_counter",
                ),
                Unit::PowerMicrowatts => (Some(before.value as f64 / 1e6 * dt), "power_sensor"),
            };
            let Some(added) = added else { continue };
            match joules.iter_mut().find(|d| *d.domain == *r.domain) {
                Some(d) => d.joules += added,
                None => joules.push(DomainEnergy {
                    domain: r.domain.to_string(),
                    joules: added,
                    in_host_total: r.in_host_total,
                    from,
                }),
            }
        }
        prev = now;
        prev_at = at;
        if done {
            break;
        }
    }
    if let Some(n) = nvml.as_ref() {
        nvml_status = Some(n.status());
    }
    totals.seconds = prev_at.duration_since(first_at).as_secs_f64();
    totals.host_joules = joules.iter().filter(|d| d.in_host_total).map(|d| d.joules).reduce(|a, b| a + b);
    totals.domains = joules;
    totals.unreadable = reader
        .discovery()
        .unreadable
        .iter()
        .map(|u| format!("{} ({}): {}", u.domain, u.path.display(), u.kind.as_str()))
        .collect();
    totals.nvml = nvml_status.filter(|s| s.state != "reading").map(|s| match s.detail {
        Some(detail) => format!("{}: {detail}", s.state),
        None => s.state.to_string(),
    });
    totals
}

/// NVML boards as power domains: their energy counter where the board has one (Volta and
/// later), else the instantaneous power. A board's power is outside RAPL's packages and DRAM,
/// so it is part of the host's total.
pub(crate) fn nvml_power(reading: &NvmlReading, out: &mut Vec<PowerReading>) {
    for d in &reading.devices {
        let (unit, value) = match (d.energy_millijoules, d.power_milliwatts) {
            (Some(mj), _) => (Unit::EnergyMicrojoules, mj.saturating_mul(1000)),
            (None, Some(mw)) => (Unit::PowerMicrowatts, u64::from(mw) * 1000),
            (None, None) => continue,
        };
        out.push(PowerReading {
            domain: Arc::from(format!("nvml:{}", d.index)),
            unit,
            value,
            max_energy_range_uj: None,
            in_host_total: true,
        });
    }
}
