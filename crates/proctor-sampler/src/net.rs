//! Per-process network (issue 36): the kernel's table of every process's packets (BPF,
//! `proctor_bpf::net`), copied once a sample onto the processes it belongs to, with each one's
//! established TCP connections and their round-trip times from a walk of the sockets the
//! programs gave an owner (each sample while that is cheap: [`WALK_FREE`]; every
//! [`TCP_TABLES_EVERY`] where the kernel's TCP tables are walked instead, while a walk could
//! find something new: [`quiet`]).
//! Rows of processes that ended are forgotten here, so the kernel's table holds the living.

use std::collections::HashMap;

use proctor_bpf::net::{Connection, ProcNet, Proto, Walk, TCP_ESTABLISHED, TCP_LISTEN};
use proctor_bpf::NetTable;
use proctor_model::{HostNet, NetCounters, ProcessNet, ProcessSample, SampleCost};

/// The socket walk visits only the sockets the programs gave an owner (tens of µs at a few
/// hundred), so it runs each sample while a walk costs under [`WALK_FREE`] of CPU. A dearer
/// one (a host with a vast number of sockets) is not followed by another for its cost over
/// [`WALK_SHARE`], and a process keeps the last walk's figures in between.
pub const WALK_FREE: std::time::Duration = std::time::Duration::from_millis(1);
/// The most of the time a dear walk may take.
pub const WALK_SHARE: f64 = 0.01;
/// How often the kernel's TCP tables are walked where the kernel refuses the storage iterator
/// ([`proctor_bpf::net::Walk::TcpTables`]): that walk visits every bucket, empty or not
/// (262,144 here: 0.35–2.4 ms of CPU), so not each sample, nor at all while nothing it could
/// find has changed ([`quiet`]).
pub const TCP_TABLES_EVERY: std::time::Duration = std::time::Duration::from_secs(10);
/// What the walks of other network namespaces' TCP tables may cost a walk (0.2 % of a core
/// over [`TCP_TABLES_EVERY`]; one namespace at least): each visits every bucket of the tables,
/// about what this namespace's walk costs (0.35–3 ms here), so a host with many containers has
/// them walked in turns (`proctor_bpf::net::NetTable::connections_in`).
pub const NAMESPACES_BUDGET: std::time::Duration = std::time::Duration::from_millis(20);

/// How the walks of the TCP sockets go ([`crate::Sampler::net_walk`]), as of the last one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetWalk {
    /// `None`: the sockets the programs gave an owner, in every network namespace, each sample
    /// while that is cheap; `Some(why)`: the kernel's TCP tables every [`TCP_TABLES_EVERY`], as
    /// the kernel refused the storage iterator (why), this namespace's and the others entered.
    pub tcp_tables: Option<String>,
    /// With the TCP tables: other network namespaces with a process that has a row, how many
    /// the last walk visited, how many it left for a later walk (its budget,
    /// [`NAMESPACES_BUDGET`]), and why one could not be entered (the last such error).
    pub namespaces_found: u32,
    pub namespaces_walked: u32,
    pub namespaces_skipped: u32,
    pub namespaces_refused: Option<String>,
    /// Walks run since the start, and (with the TCP tables) the samples at which a walk was
    /// due and put off, as nothing it could find had changed since the last one ([`quiet`]).
    pub walks: u64,
    pub walks_skipped_quiet: u64,
}

#[derive(Debug)]
pub(crate) struct NetState {
    table: NetTable,
    rows: HashMap<u32, ProcNet>,
    connections: Vec<Connection>,
    /// Per pid: its established connections' smoothed RTTs (µs) as of the last walk, sorted.
    rtts: HashMap<u32, Vec<u32>>,
    /// When the next walk may run (`None`: now).
    next_walk: Option<std::time::Instant>,
    /// The processes given a row by the last sample: where the kernel's TCP tables are walked,
    /// the network namespaces they are in are walked too (`NetTable::connections_in`).
    pids: Vec<u32>,
    /// How the last walk went.
    pub(crate) last_walk: NetWalk,
    /// What the TCP figures of every row came to at the last read ([`tcp_activity`]), and at
    /// the read before the last walk; whether that walk found a connection (not a listener);
    /// the table's `table_full` at the last read and before the last walk.
    activity: (u64, u64),
    found_open: bool,
    table_full: (u64, u64),
    gone: Vec<u32>,
    /// The rows of processes that ended, as last counted (pid, start ticks, counters): this
    /// sample's and the previous one's, for their exit records (an exit just after the events
    /// were drained is told one sample later).
    ended: Vec<(u32, u64, ProcessNet)>,
    ended_before: Vec<(u32, u64, ProcessNet)>,
}

impl NetState {
    pub(crate) fn new(table: NetTable) -> Self {
        let tcp_tables = match table.walk() {
            Walk::Owned => None,
            Walk::TcpTables(why) => Some(why.clone()),
        };
        NetState {
            table,
            rows: HashMap::new(),
            connections: Vec::new(),
            rtts: HashMap::new(),
            next_walk: None,
            last_walk: NetWalk { tcp_tables, ..NetWalk::default() },
            pids: Vec::new(),
            activity: (0, 0),
            found_open: false,
            table_full: (0, 0),
            gone: Vec::new(),
            ended: Vec::new(),
            ended_before: Vec::new(),
        }
    }

    /// Gives each exit record without network the counters its process's row had when it was
    /// forgotten (matched by pid and start time), its last interval included.
    pub(crate) fn give_exited(&self, exited: &mut [proctor_model::ExitedProcess]) {
        for x in exited.iter_mut().filter(|x| x.net.is_none()) {
            let found = self
                .ended
                .iter()
                .chain(&self.ended_before)
                .find(|(pid, start, _)| *pid == x.pid && *start == x.start_ticks);
            x.net = found.map(|(_, _, net)| Box::new(*net));
        }
    }

    /// Walks the owned TCP sockets, unless the last walk's cost keeps this one back
    /// ([`WALK_FREE`], [`WALK_SHARE`]).
    fn walk(&mut self, cost: &mut SampleCost) {
        let now = std::time::Instant::now();
        if self.next_walk.is_some_and(|at| now < at) {
            return;
        }
        if self.last_walk.walks > 0
            && self.last_walk.tcp_tables.is_some()
            && quiet(self.found_open, self.activity, self.table_full)
        {
            self.last_walk.walks_skipped_quiet += 1;
            return;
        }
        self.last_walk.walks += 1;
        self.activity.1 = self.activity.0;
        self.table_full.1 = self.table_full.0;
        let walked = self.table.connections_in(&mut self.connections, &self.pids, NAMESPACES_BUDGET);
        // Each process's list is kept (emptied) from walk to walk, now that a walk runs each
        // sample; the lists of processes left with no connection go after the walk. A process
        // in a network namespace this walk did not visit (its turn is to come) keeps its list.
        let unwalked: std::collections::HashSet<u32> =
            walked.as_ref().map(|(_, ns)| ns.unwalked.iter().copied().collect()).unwrap_or_default();
        for (pid, r) in self.rtts.iter_mut() {
            if !unwalked.contains(pid) {
                r.clear();
            }
        }
        match walked {
            Ok((cpu_ns, ns)) => {
                self.next_walk = match self.table.walk() {
                    Walk::Owned => next_walk(now, std::time::Duration::from_nanos(cpu_ns)),
                    Walk::TcpTables(_) => {
                        // Another network namespace's tables not walked (entering it refused
                        // without CAP_SYS_ADMIN, or it went): its processes keep their traffic
                        // and show no connections; said in the sample's cost. Those left for
                        // a later walk by its budget wait for their turn, no error.
                        self.last_walk.namespaces_found = ns.found;
                        self.last_walk.namespaces_walked = ns.walked;
                        self.last_walk.namespaces_skipped = ns.skipped;
                        self.last_walk.namespaces_refused = ns.refused.clone();
                        let failed = ns.found.saturating_sub(ns.walked + ns.skipped);
                        if failed > 0 {
                            let kind = if ns.refused_by_permission { "permission" } else { "io" };
                            *cost.errors.entry(("process.net.connections", kind)).or_default() += u64::from(failed);
                        }
                        Some(now + TCP_TABLES_EVERY)
                    }
                };
                self.found_open = self.connections.iter().any(|c| c.state != TCP_LISTEN);
                for c in self.connections.iter().filter(|c| c.state == TCP_ESTABLISHED) {
                    self.rtts.entry(c.pid).or_default().push(c.srtt_us);
                }
                self.rtts.retain(|_, r| !r.is_empty());
                for r in self.rtts.values_mut() {
                    r.sort_unstable();
                }
            }
            Err(_) => {
                // Tried again when next due, whatever moved.
                self.found_open = true;
                *cost.errors.entry(("process.net.connections", "io")).or_default() += 1
            }
        }
    }

    /// Gives each process its row (matched by pid and start time), forgets the rows of
    /// processes that started before `scan_boot_ns` (the scan's start, on the boot clock) and
    /// are not in `processes` (they ended), and returns the host's totals.
    pub(crate) fn attach(
        &mut self,
        processes: &mut [ProcessSample],
        ticks_per_sec: u64,
        scan_boot_ns: u64,
        cost: &mut SampleCost,
    ) -> HostNet {
        // The walk first: it adds what the sockets counted since the last to the rows read next.
        self.walk(cost);
        self.table.read(&mut self.rows);
        // Only the TCP tables' walk is put off by it (`quiet`).
        if self.last_walk.tcp_tables.is_some() {
            self.activity.0 = tcp_activity(self.rows.iter());
        }
        let ns_per_tick = 1_000_000_000 / ticks_per_sec.max(1);
        self.pids.clear();
        for p in processes.iter_mut() {
            let Some(row) = self.rows.remove(&p.pid) else { continue };
            if row.start_boottime_ns / ns_per_tick != p.start_ticks {
                // Another process's that had the pid: the kernel starts it again at its next
                // packet; forgotten now if that one is gone.
                self.rows.insert(p.pid, row);
                continue;
            }
            let (connections, median, max) = match self.rtts.get(&p.pid).filter(|r| !r.is_empty()) {
                Some(r) => (r.len() as u32, Some(r[(r.len() - 1) / 2]), r.last().copied()),
                None => (0, None, None),
            };
            p.net = Some(Box::new(process_net(&row, connections, median, max)));
            self.pids.push(p.pid);
        }
        // What is left matched no process of this scan: gone if it started before the scan.
        self.gone.clear();
        self.gone.extend(self.rows.iter().filter(|(_, r)| r.start_boottime_ns < scan_boot_ns).map(|(&pid, _)| pid));
        std::mem::swap(&mut self.ended, &mut self.ended_before);
        self.ended.clear();
        for pid in &self.gone {
            if let Some(row) = self.rows.get(pid) {
                self.ended.push((*pid, row.start_boottime_ns / ns_per_tick, process_net(row, 0, None, None)));
            }
        }
        self.table.forget(self.gone.iter().copied());
        let t = self.table.totals();
        self.table_full.0 = t.table_full;
        let rx_unowned = t.rx_unowned();
        HostNet {
            tx_packets: t.tx.packets,
            tx_bytes: t.tx.bytes,
            rx_packets: t.rx.packets,
            rx_bytes: t.rx.bytes,
            tx_unowned_packets: t.tx_unowned.packets,
            tx_unowned_bytes: t.tx_unowned.bytes,
            rx_unowned_packets: rx_unowned.packets,
            rx_unowned_bytes: rx_unowned.bytes,
            table_full: t.table_full,
        }
    }
}

/// Whether a due walk of the kernel's TCP tables (~2 ms of CPU here, most of the network
/// reader's cost where it runs) would find nothing new, so is not run: the last walk found no
/// connection but listeners (a listener alone shows no figure), and since the read before it no
/// row's TCP figures moved (`activity`: at the last read, and before that walk; a row of a
/// process gone takes its figures with it) and no packet found the table full (`table_full`,
/// the same two: its counts wait on their socket for a walk). Every TCP connection an owner was
/// given sends or receives, connects or accepts, which moves its owner's row, as its close
/// does; so a connection is found at the first due walk after its first packet.
fn quiet(found_open: bool, activity: (u64, u64), table_full: (u64, u64)) -> bool {
    !found_open && activity.0 == activity.1 && table_full.0 == table_full.1
}

/// The TCP figures of every row, each row's hashed with its pid and start and the hashes added
/// up (wrapping): any packet, connect, accept, retransmit or reset counted for a process, or a
/// row with TCP figures forgotten, changes it. Hashed, so a row gone and another's growth by as
/// much do not cancel out (a plain sum would, as 5 packets of a process that ended and 5 more
/// of another's).
fn tcp_activity<'a>(rows: impl Iterator<Item = (&'a u32, &'a ProcNet)>) -> u64 {
    use std::hash::{Hash, Hasher};
    rows.fold(0u64, |sum, (&pid, r)| {
        // std's SipHash with its fixed keys: the same figures give the same hash on every call.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (pid, r.start_boottime_ns).hash(&mut h);
        [r.tcp.tx.packets, r.tcp.rx.packets, r.connects, r.accepts, r.retransmits, r.resets_sent, r.resets_received]
            .hash(&mut h);
        sum.wrapping_add(h.finish())
    })
}

/// When the walk after one that started at `at` and cost `cost` may run (`None`: the next
/// sample's).
fn next_walk(at: std::time::Instant, cost: std::time::Duration) -> Option<std::time::Instant> {
    (cost >= WALK_FREE).then(|| at + cost.div_f64(WALK_SHARE))
}

fn process_net(row: &ProcNet, connections: u32, median: Option<u32>, max: Option<u32>) -> ProcessNet {
    ProcessNet {
        tcp: counters(&row.tcp),
        udp: counters(&row.udp),
        connects: row.connects,
        accepts: row.accepts,
        retransmits: row.retransmits,
        resets_sent: row.resets_sent,
        resets_received: row.resets_received,
        connections,
        srtt_median_us: median,
        srtt_max_us: max,
    }
}

fn counters(p: &Proto) -> NetCounters {
    NetCounters {
        tx_packets: p.tx.packets,
        tx_bytes: p.tx.bytes,
        rx_packets: p.rx.packets,
        rx_bytes: p.rx.bytes,
        sent_bytes: p.sent_bytes,
        received_bytes: p.received_bytes,
    }
}

/// The boot-time clock now (ns): what the kernel stamps a process's start with.
pub(crate) fn boot_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use proctor_bpf::net::ProcNet;

    use super::{next_walk, quiet, tcp_activity};

    /// A cheap walk runs each sample; a dear one waits a hundred times its cost.
    #[test]
    fn a_dear_walk_is_followed_by_the_next_only_after_its_share() {
        let at = Instant::now();
        assert_eq!(next_walk(at, Duration::from_micros(40)), None);
        assert_eq!(next_walk(at, Duration::from_micros(999)), None);
        assert_eq!(next_walk(at, Duration::from_millis(5)), Some(at + Duration::from_millis(500)));
    }

    /// A due walk of the TCP tables is skipped only while nothing it could find has changed:
    /// no connection found last time, no row's TCP figures moved, no packet found the table full.
    #[test]
    fn a_walk_of_the_tcp_tables_is_skipped_only_when_nothing_moved() {
        assert!(quiet(false, (7, 7), (0, 0)));
        assert!(!quiet(true, (7, 7), (0, 0)), "a connection found last time is walked again");
        assert!(!quiet(false, (8, 7), (0, 0)), "TCP figures moved");
        assert!(!quiet(false, (7, 7), (1, 0)), "counts wait on a socket");
    }

    /// Each TCP figure moves the sum, datagrams do not, a row with TCP figures gone does, and
    /// a row gone does not cancel out another's growth by as much.
    #[test]
    fn every_tcp_figure_moves_the_activity() {
        let base = ProcNet { start_boottime_ns: 1, ..ProcNet::default() };
        let was = tcp_activity([(&7, &base)].into_iter());
        let moved: [fn(&mut ProcNet); 7] = [
            |r| r.tcp.tx.packets += 1,
            |r| r.tcp.rx.packets += 1,
            |r| r.connects += 1,
            |r| r.accepts += 1,
            |r| r.retransmits += 1,
            |r| r.resets_sent += 1,
            |r| r.resets_received += 1,
        ];
        for (i, m) in moved.iter().enumerate() {
            let mut r = base;
            m(&mut r);
            assert_ne!(tcp_activity([(&7, &r)].into_iter()), was, "figure {i}");
        }
        let mut udp = base;
        udp.udp.tx.packets += 5;
        assert_eq!(tcp_activity([(&7, &udp)].into_iter()), was);
        let mut busy = base;
        busy.tcp.rx.packets = 5;
        assert_ne!(tcp_activity([(&7, &base), (&8, &busy)].into_iter()), was, "a row gone");
        // Before: 7 idle, 8 with 5 packets; after: 8 gone, 7 with 5 packets.
        let before = tcp_activity([(&7, &base), (&8, &busy)].into_iter());
        assert_ne!(tcp_activity([(&7, &busy)].into_iter()), before, "a row gone, another grown by as much");
    }
}
