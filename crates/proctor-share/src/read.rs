//! The reads, on a worker thread under a CPU budget.
//!
//! `smaps_rollup` and `smaps` walk every resident page of the target while the kernel holds its
//! mmap lock (about 13 ms per GiB here): the target cannot fault in new memory, mmap or munmap
//! meanwhile. So reads run one at a time on their own thread, each timed twice — the CPU it cost
//! this thread (`CLOCK_THREAD_CPUTIME_ID`) and its wall time, which bounds how long the target
//! was held — and after each the thread rests long enough that its share of one core stays
//! within the budget, as the agent's PSS worker does.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proctor_procfs::process::{parse_cmdline, parse_stat};
use proctor_procfs::smaps::{parse_smaps, Counters, Mapping};
use proctor_procfs::system::{list_pids, thread_cpu_ns};
use proctor_procfs::{ErrorKind, Root};

use crate::family::Proc;
use crate::round::ReadCost;

/// The process table from each process's `stat` (no mmap lock is taken): pid, parent, start
/// time and name. Processes that exit while being read are left out.
pub fn table(root: &Root) -> Result<Vec<Proc>, proctor_procfs::Error> {
    let mut pids = Vec::new();
    list_pids(root, &mut pids)?;
    let mut buf = Vec::new();
    let mut out = Vec::with_capacity(pids.len());
    for pid in pids {
        if root.read_into(format!("/proc/{pid}/stat"), &mut buf).is_err() {
            continue;
        }
        if let Some(stat) = parse_stat(&buf) {
            out.push(Proc { pid, ppid: stat.ppid, start_ticks: stat.start_ticks, comm: stat.comm, cmdline: None });
        }
    }
    Ok(out)
}

/// One member's read.
#[derive(Debug, Clone)]
pub struct Read {
    pub pid: u32,
    pub result: Result<Counters, String>,
    pub cost: ReadCost,
}

/// One process's mappings, or why not.
pub type MapsRead = (Result<Vec<Mapping>, String>, ReadCost);

#[derive(Debug)]
enum Request {
    Rollups(Vec<u32>),
    Smaps(u32),
    Cmdlines(Vec<u32>),
}

#[derive(Debug)]
enum Response {
    Rollups(Vec<Read>),
    Smaps(MapsRead),
    Cmdlines(Vec<Option<String>>),
}

/// The reading thread; dropping it stops the thread after its current read.
#[derive(Debug)]
pub struct Worker {
    requests: Option<SyncSender<Request>>,
    responses: Receiver<Response>,
    thread: Option<JoinHandle<()>>,
    budget: f64,
}

impl Worker {
    /// `budget` is the share of one core the reads may use (0.1 = 10 %).
    pub fn start(root: Root, budget: f64) -> std::io::Result<Worker> {
        let budget = budget.clamp(0.001, 1.0);
        // One request at a time: the caller waits for each answer, so nothing queues up.
        let (requests, inbox) = sync_channel::<Request>(1);
        let (outbox, responses) = sync_channel::<Response>(1);
        let thread = std::thread::Builder::new().name("proctor-share".into()).spawn(move || {
            let mut buf = Vec::new();
            let rest = |cost: &ReadCost| {
                let ns = (cost.cpu_ns.max(20_000) as f64 * (1.0 / budget - 1.0)) as u64;
                std::thread::sleep(Duration::from_nanos(ns));
            };
            while let Ok(request) = inbox.recv() {
                let response = match request {
                    Request::Rollups(pids) => {
                        let mut reads = Vec::with_capacity(pids.len());
                        for (i, pid) in pids.iter().enumerate() {
                            let (result, cost) = read_file(&root, &format!("/proc/{pid}/smaps_rollup"), &mut buf);
                            let result = result.and_then(|maps| {
                                maps.first().map(|m| m.counters).ok_or_else(|| "empty smaps_rollup".to_string())
                            });
                            if i + 1 < pids.len() {
                                rest(&cost);
                            }
                            reads.push(Read { pid: *pid, result, cost });
                        }
                        Response::Rollups(reads)
                    }
                    Request::Smaps(pid) => Response::Smaps(read_file(&root, &format!("/proc/{pid}/smaps"), &mut buf)),
                    // cmdline takes the target's mmap lock too, briefly: read here, not by
                    // the caller, and only for the processes a `--match` has to see.
                    Request::Cmdlines(pids) => Response::Cmdlines(
                        pids.iter()
                            .map(|pid| {
                                root.read_into(format!("/proc/{pid}/cmdline"), &mut buf)
                                    .ok()
                                    .map(|()| parse_cmdline(&buf).join(" "))
                                    .filter(|c| !c.is_empty())
                            })
                            .collect(),
                    ),
                };
                if outbox.send(response).is_err() {
                    break;
                }
            }
        })?;
        Ok(Worker { requests: Some(requests), responses, thread: Some(thread), budget })
    }

    pub fn budget(&self) -> f64 {
        self.budget
    }

    /// Reads each pid's `smaps_rollup`, one after the other, resting between reads.
    pub fn rollups(&self, pids: Vec<u32>) -> Vec<Read> {
        let asked = pids.clone();
        let answer = self.ask(Request::Rollups(pids));
        match answer {
            Some(Response::Rollups(reads)) => reads,
            _ => asked
                .into_iter()
                .map(|pid| Read { pid, result: Err("the reading thread stopped".into()), cost: ReadCost::default() })
                .collect(),
        }
    }

    /// Reads one pid's `smaps`: every mapping.
    pub fn smaps(&self, pid: u32) -> MapsRead {
        match self.ask(Request::Smaps(pid)) {
            Some(Response::Smaps(read)) => read,
            _ => (Err("the reading thread stopped".into()), ReadCost::default()),
        }
    }

    /// Each pid's command line, arguments joined by spaces; `None` when unreadable or empty.
    pub fn cmdlines(&self, pids: Vec<u32>) -> Vec<Option<String>> {
        let n = pids.len();
        match self.ask(Request::Cmdlines(pids)) {
            Some(Response::Cmdlines(lines)) => lines,
            _ => vec![None; n],
        }
    }

    fn ask(&self, request: Request) -> Option<Response> {
        self.requests.as_ref()?.send(request).ok()?;
        self.responses.recv().ok()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.requests.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads and parses one smaps-shaped file, timing the read alone (parsing holds nothing).
fn read_file(root: &Root, path: &str, buf: &mut Vec<u8>) -> (Result<Vec<Mapping>, String>, ReadCost) {
    let cpu_before = thread_cpu_ns();
    let wall = Instant::now();
    let read = root.read_into(path, buf);
    let cost = ReadCost {
        cpu_ns: thread_cpu_ns().saturating_sub(cpu_before),
        held_ns: u64::try_from(wall.elapsed().as_nanos()).unwrap_or(u64::MAX),
    };
    let result = match read {
        Ok(()) => parse_smaps(buf).ok_or_else(|| format!("{}: not an smaps file", root.path(path).display())),
        Err(e) if e.kind == ErrorKind::Gone => Err("gone".into()),
        Err(e) => Err(e.to_string()),
    };
    (result, cost)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worker's own process: a real smaps_rollup and smaps, read and timed.
    #[test]
    fn reads_this_process_and_says_why_for_a_missing_one() {
        let worker = Worker::start(Root::default(), 1.0).expect("thread");
        let me = std::process::id();
        let reads = worker.rollups(vec![me, u32::MAX - 1]);
        assert_eq!(reads.len(), 2);
        let mine = reads[0].result.as_ref().expect("own smaps_rollup");
        assert!(mine.rss_bytes > 0 && mine.pss_bytes > 0 && mine.pss_bytes <= mine.rss_bytes);
        assert!(reads[0].cost.held_ns > 0);
        assert_eq!(reads[1].result.as_ref().err().map(String::as_str), Some("gone"));
        let (maps, cost) = worker.smaps(me);
        let maps = maps.expect("own smaps");
        assert!(maps.len() > 5 && maps.iter().any(|m| m.path == "[heap]" || m.path.is_empty()));
        assert!(cost.held_ns > 0);
        let lines = worker.cmdlines(vec![me]);
        assert!(lines[0].as_deref().is_some_and(|c| !c.is_empty()));
        let table = table(&Root::default()).expect("table");
        assert!(table.iter().any(|p| p.pid == me && p.ppid > 0));
    }
}
