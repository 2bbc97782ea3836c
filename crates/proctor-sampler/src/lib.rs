//! The sampling side of proctor: when and how files are read, and what that costs.
//!
//! [`Sampler::sample`] runs one collection cycle on the calling thread and returns a raw
//! [`proctor_model::Sample`] with its own cost inside. It keeps per-pid files open and re-reads
//! them with `pread`, so a steady process costs two syscalls per cycle (`stat`, `statm`);
//! `status` is re-read only when `statm` changed. The reads that take the target's mmap lock —
//! `smaps_rollup` and `cmdline` — never happen here: [`pss::PssWorker`] and
//! [`cmdline::CmdlineWorker`] do them on their own threads, under a CPU budget and a timeout.
//! GPU files are found and read the same way, on [`drm::DrmWorker`]; NVML runs on
//! [`nvml::NvmlWorker`]'s thread, because its calls can block. Energy counters are sysfs files
//! read with the host files ([`power::PowerReader`]).
//! This crate does not derive rates or render anything; that is `proctor-model`'s job.

pub mod cmdline;
mod config;
pub mod drm;
mod events;
mod host;
pub mod lockwait;
mod net;
pub mod nvml;
pub mod pagemap;
pub mod power;
pub mod pss;
mod sampler;
mod schedule;
mod table;
mod worker;

pub use config::{HostFiles, Reads, SamplerConfig};
pub use net::{NetWalk, NAMESPACES_BUDGET, TCP_TABLES_EVERY};
pub use sampler::{host_proc_is_ours, kept_fd_budget, Sampler};
pub use schedule::Schedule;
pub use worker::LockTotals;
