//! The NVML reader: NVIDIA devices and their processes, on a thread of its own.
//!
//! `libnvidia-ml.so.1` is opened at run time (nvml-wrapper's `dlopen` through libloading), on
//! this thread, so a machine without the driver only gets a status that says so. NVML calls
//! can block (a GPU falling off the bus, a driver busy with a reset), so the sampler never calls
//! NVML: it asks for a reading each cycle ([`NvmlWorker::request`]) and takes the newest one
//! that finished ([`NvmlWorker::latest`]). A read still running after the timeout is reported
//! as stuck, and the sampler goes on without NVML figures until it returns.

use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;
use proctor_model::gpu::{NvmlDevice, NvmlProcess};
use serde::Serialize;

/// The library the driver installs (the unversioned `.so` comes only with development files).
pub const LIBRARY: &str = "libnvidia-ml.so.1";

/// What the NVML thread did last.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NvmlStatus {
    /// `loading`, `reading`, `unavailable` (with `detail`), or `stuck` (a read has not returned
    /// within the timeout).
    pub state: &'static str,
    pub detail: Option<String>,
    pub devices: usize,
    pub reads: u64,
    /// Device or process queries that failed (a field NVML does not support on a device is
    /// left unknown, not counted).
    pub errors: u64,
}

/// One finished reading.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvmlReading {
    pub devices: Vec<NvmlDevice>,
    pub processes: Vec<NvmlProcess>,
}

#[derive(Debug, Default)]
struct State {
    requested: bool,
    in_flight_since: Option<Instant>,
    latest: Option<Arc<NvmlReading>>,
    status: NvmlStatus,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    stop: AtomicBool,
    /// The thread has ended (no library, or no NVML): requests and lookups return at once,
    /// without the lock, on every sample of a machine without NVIDIA's driver.
    gone: AtomicBool,
}

/// Handle to the NVML thread. Dropping it asks the thread to stop; it is not joined, because
/// it may be stuck in the driver.
#[derive(Debug)]
pub struct NvmlWorker {
    shared: Arc<Shared>,
    timeout: Duration,
}

impl NvmlWorker {
    /// Starts the thread, which opens `library` (normally [`LIBRARY`]) and waits for requests.
    pub fn start(library: &str, timeout: Duration) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                status: NvmlStatus { state: "loading", ..NvmlStatus::default() },
                ..State::default()
            }),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            gone: AtomicBool::new(false),
        });
        let for_thread = Arc::clone(&shared);
        let library = library.to_string();
        std::thread::Builder::new().name("proctor-nvml".into()).spawn(move || run(&for_thread, &library))?;
        Ok(Self { shared, timeout })
    }

    /// Asks for a reading; does not wait.
    pub fn request(&self) {
        if self.shared.gone.load(Ordering::Relaxed) {
            return;
        }
        let mut state = self.shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.requested = true;
        drop(state);
        self.shared.wake.notify_one();
    }

    /// The newest finished reading, or `None` while a read is stuck past the timeout (its
    /// figures would be stale) or before the first one.
    pub fn latest(&self) -> Option<Arc<NvmlReading>> {
        if self.shared.gone.load(Ordering::Relaxed) {
            return None;
        }
        let mut state = self.shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.in_flight_since.is_some_and(|since| since.elapsed() > self.timeout) {
            state.status.state = "stuck";
            return None;
        }
        state.latest.clone()
    }

    pub fn status(&self) -> NvmlStatus {
        self.shared.state.lock().unwrap_or_else(PoisonError::into_inner).status.clone()
    }

    /// Waits up to `limit` for the library to load (or fail to): for one-off commands such as
    /// `doctor` that want to say what NVML is doing.
    pub fn wait_loaded(&self, limit: Duration) -> NvmlStatus {
        let deadline = Instant::now() + limit;
        loop {
            let status = self.status();
            if status.state != "loading" || Instant::now() >= deadline {
                return status;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for NvmlWorker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.wake.notify_all();
    }
}

fn run(shared: &Shared, library: &str) {
    let nvml = match Nvml::builder().lib_path(OsStr::new(library)).init() {
        Ok(nvml) => nvml,
        Err(e) => {
            let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.status =
                NvmlStatus { state: "unavailable", detail: Some(format!("{library}: {e}")), ..NvmlStatus::default() };
            return;
        }
    };
    {
        let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.status.state = "reading";
        state.status.devices = nvml.device_count().unwrap_or(0) as usize;
    }
    // Process utilization samples are asked for since the previous read's newest timestamp.
    let mut last_seen: u64 = 0;
    loop {
        {
            let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
            while !state.requested {
                if shared.stop.load(Ordering::Relaxed) {
                    return;
                }
                state = shared
                    .wake
                    .wait_timeout(state, Duration::from_millis(500))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            state.requested = false;
            state.in_flight_since = Some(Instant::now());
        }
        let (reading, errors) = read(&nvml, &mut last_seen);
        let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.in_flight_since = None;
        state.status.state = "reading";
        state.status.reads += 1;
        state.status.errors += errors;
        state.status.devices = reading.devices.len();
        state.latest = Some(Arc::new(reading));
    }
}

fn read(nvml: &Nvml, last_seen: &mut u64) -> (NvmlReading, u64) {
    let mut out = NvmlReading::default();
    let mut errors = 0;
    let count = match nvml.device_count() {
        Ok(n) => n,
        Err(_) => return (out, 1),
    };
    let mut newest = *last_seen;
    for index in 0..count {
        let device = match nvml.device_by_index(index) {
            Ok(d) => d,
            Err(_) => {
                errors += 1;
                continue;
            }
        };
        let utilization = device.utilization_rates().ok();
        let memory = device.memory_info().ok();
        out.devices.push(NvmlDevice {
            index,
            name: device.name().unwrap_or_default(),
            pci_bus_id: device.pci_info().ok().map(|p| p.bus_id),
            utilization_percent: utilization.as_ref().map(|u| u.gpu),
            memory_utilization_percent: utilization.as_ref().map(|u| u.memory),
            memory_used_bytes: memory.as_ref().map(|m| m.used),
            memory_total_bytes: memory.as_ref().map(|m| m.total),
            power_milliwatts: device.power_usage().ok(),
            energy_millijoules: device.total_energy_consumption().ok(),
            temperature_celsius: device.temperature(TemperatureSensor::Gpu).ok(),
            sm_clock_mhz: device.clock_info(Clock::SM).ok(),
            memory_clock_mhz: device.clock_info(Clock::Memory).ok(),
        });
        let mut processes: Vec<NvmlProcess> = Vec::new();
        for list in [device.running_compute_processes(), device.running_graphics_processes()] {
            let Ok(list) = list else {
                errors += 1;
                continue;
            };
            for p in list {
                let used = match p.used_gpu_memory {
                    UsedGpuMemory::Used(bytes) => Some(bytes),
                    UsedGpuMemory::Unavailable => None,
                };
                match processes.iter_mut().find(|q| q.pid == p.pid) {
                    Some(q) => q.used_memory_bytes = q.used_memory_bytes.or(used),
                    None => processes.push(NvmlProcess {
                        pid: p.pid,
                        device: index,
                        used_memory_bytes: used,
                        ..NvmlProcess::default()
                    }),
                }
            }
        }
        // Not every driver or board offers per-process samples; where it does not, the
        // processes keep their memory and have no SM share.
        if let Ok(samples) = device.process_utilization_stats(*last_seen) {
            for s in samples {
                newest = newest.max(s.timestamp);
                if let Some(q) = processes.iter_mut().find(|q| q.pid == s.pid) {
                    q.sm_percent = Some(q.sm_percent.unwrap_or(0).max(s.sm_util));
                    q.memory_percent = Some(q.memory_percent.unwrap_or(0).max(s.mem_util));
                }
            }
        }
        out.processes.extend(processes);
    }
    *last_seen = newest;
    (out, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_a_status_not_a_failure() {
        let worker = NvmlWorker::start("libproctor-no-such-nvml.so.1", Duration::from_secs(2)).expect("test fixture");
        let status = worker.wait_loaded(Duration::from_secs(10));
        assert_eq!(status.state, "unavailable");
        assert!(status.detail.as_deref().unwrap_or("").contains("libproctor-no-such-nvml.so.1"), "{status:?}");
        worker.request();
        assert_eq!(worker.latest(), None);
    }
}
