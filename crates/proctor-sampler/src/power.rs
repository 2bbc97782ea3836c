//! Energy and power counters, kept open and re-read every cycle on the sampling thread: each
//! is one `pread` of a small sysfs file that takes no lock of any process. Which files exist
//! and which this process may read is learned once, when the reader opens
//! ([`proctor_procfs::power::discover`]); an unreadable one (RAPL's `energy_uj` is root-only
//! since Linux 5.10) is listed in [`PowerReader::discovery`] for `doctor` to say, and is never
//! an error per sample.

use std::sync::Arc;

use proctor_model::{PowerReading, SampleCost};
use proctor_procfs::power::{discover, parse_counter, Discovery, PowerSource};
use proctor_procfs::{ProcFile, Root};

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
            match ProcFile::open(root.path(&source.path)) {
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
