//! Per-process network (issue 36): programs on the kernel's device queue and receive
//! tracepoints, on the cgroup2 root's ingress and socket creation, and on TCP's state changes
//! (bpf/net.bpf.c) count every packet against the process that owns its socket, in a table
//! keyed by pid that [`NetTable::read`] copies once a sample: no packet reaches user space.
//! [`NetTable::connections`] walks the TCP sockets the programs gave an owner (an iterator over
//! their socket storage, or, where the kernel refuses that, over its TCP tables: [`Walk`]) for
//! each process's open connections and smoothed round-trip times. The packets are counted on
//! their socket (its storage is at hand; the row is a hash lookup); the walk adds what each owned
//! socket counted since the last walk to its owner's row, with its TCP payload (a closing
//! connection, a released datagram socket and a socket changing owner add theirs): walk, then
//! read, for rows with every packet so far. (Where the TCP tables are walked, each packet goes
//! straight to its row, with its connection's payload: [`Walk::TcpTables`].)
//!
//! One table per process (loaded with the other parts, one BTF parse), attached when the first
//! [`NetTable`] opens, and kept. Rows of processes that are gone are deleted by
//! [`NetTable::forget`], so the table holds the live processes that used the network.

use std::collections::HashMap;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use aya::maps::{Array, HashMap as BpfHashMap, MapData};
use aya::programs::{BtfTracePoint, CgroupAttachMode, CgroupSkb, CgroupSkbAttachType, CgroupSock, Iter};
use aya::{Btf, Ebpf, EbpfLoader};

use crate::{load_error, may_load_tracing, thread_cpu_ns, Unavailable};

/// The programs, as clang built them from `bpf/net.bpf.c` (`bpf/build.sh`).
pub static NET_OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/net.bpf.o");

/// (program, tracepoint) in the object.
const TRACEPOINTS: [(&str, &str); 5] = [
    ("proctor_queue", "net_dev_queue"),
    ("proctor_receive", "netif_receive_skb"),
    ("proctor_state", "inet_sock_set_state"),
    ("proctor_reset_sent", "tcp_send_reset"),
    ("proctor_reset_received", "tcp_receive_reset"),
];
/// Retransmits: the program for the tracepoint with the outcome (newer kernels, which fire it for
/// retransmits that did not go out too) is tried first, then the one for the older two arguments.
const RETRANSMIT: &str = "tcp_retransmit_skb";
const RETRANSMIT_PROGRAMS: [&str; 2] = ["proctor_retransmit_outcome", "proctor_retransmit"];
/// The cgroup programs, attached to the cgroup2 root: received packets with their socket, and
/// every socket's creation.
const INGRESS: &str = "proctor_ingress";
const SOCK_CREATE: &str = "proctor_sock_create";
/// A datagram socket's release, which adds its last counts to its owner's row.
const SOCK_RELEASE: &str = "proctor_sock_release";
/// The iterator over the owned sockets (the owner storage map's), attached once; each walk
/// makes a new iterator from its link.
const SOCKETS: &str = "proctor_owned_sockets";
const OWNERS: &str = "proctor_owner";
/// The iterators over the kernel's TCP and UDP tables, for a kernel that refuses the one above
/// (attached per walk; the UDP one only adds the datagram sockets' counts to their rows).
const TCP_SOCKETS: &str = "proctor_tcp_sockets";
/// How the sockets' counts reach the rows (net.bpf.c): by the storage walk (0, as loaded), or by
/// each packet's program ([`ROWS_EACH_PACKET`], with [`Walk::TcpTables`]).
const MODE: &str = "proctor_net_mode";
/// The host's totals, a slot per CPU ([`TotalsMap`]).
const TOTALS: &str = "proctor_net_totals";
const ROWS_EACH_PACKET: u32 = 1;
const UDP_SOCKETS: &str = "proctor_udp_sockets";

/// How [`NetTable::connections`] walks the sockets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Walk {
    /// The sockets the programs gave an owner, through their storage's iterator: its cost is
    /// the sockets', so it can run each sample.
    Owned,
    /// Every bucket of the kernel's TCP tables, empty or not (262,144 here), in this network
    /// namespace: the kernel refused the storage iterator (why), or [`walk_tcp_tables`] asked.
    /// Too dear for each sample, so the packets' programs add each packet to its owner's row
    /// as it passes (a row lookup a packet more), with what its TCP connection's payload
    /// counters grew by: packets, bytes and payload are current at every read, but for what a
    /// connection's last ACK acknowledged (read before TCP takes it), which comes with its next
    /// packet, the walk or its close. The walk sees this namespace only; a container's
    /// connection is current through its packets.
    TcpTables(String),
}

static TCP_TABLES_ASKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes this process walk the kernel's TCP tables ([`Walk::TcpTables`]) when the network part
/// is loaded after this call: what a kernel that refuses the storage iterator gets, so tests
/// can hold that path too.
pub fn walk_tcp_tables() {
    TCP_TABLES_ASKED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Attaching to a cgroup takes CAP_NET_ADMIN beside what loading takes.
const CAP_NET_ADMIN: u32 = 12;

/// One direction of one protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flow {
    pub packets: u64,
    /// IP packets' lengths, headers included (the link header not).
    pub bytes: u64,
}

/// One protocol's traffic for one process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Proto {
    pub tx: Flow,
    pub rx: Flow,
    /// Payload bytes. A datagram's, as it left and as its socket took it in (a socket whose
    /// receive buffer is full drops it after that). TCP's, from the connection's own counters:
    /// what the peer acknowledged and what arrived in order, added at each walk
    /// ([`NetTable::connections`]) and as the connection closes.
    pub sent_bytes: u64,
    pub received_bytes: u64,
}

/// A process's counters since the programs were attached (or since its pid was another's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcNet {
    /// When the process started (the kernel's boot-time clock, ns): a row whose start is not
    /// the process's is another process's that had the pid.
    pub start_boottime_ns: u64,
    pub tcp: Proto,
    pub udp: Proto,
    pub connects: u64,
    pub accepts: u64,
    pub retransmits: u64,
    pub resets_sent: u64,
    pub resets_received: u64,
}

/// The host's packets since the programs were attached, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetTotals {
    /// Every IP packet handed to a device (made here or forwarded).
    pub tx: Flow,
    /// Every IP packet delivered to this host.
    pub rx: Flow,
    /// Of those, what no process's socket made (forwarded, resets and ACKs of no socket,
    /// ICMP, a handshake's answer) ...
    pub tx_unowned: Flow,
    /// ... and what TCP or UDP gave to a process's socket.
    pub rx_owned: Flow,
    /// Processes not counted because the table was full (their traffic is in the unowned).
    pub table_full: u64,
}

impl NetTotals {
    /// Delivered packets no process's socket took: TCP's handshake answers and TIME_WAIT,
    /// ICMP, a closed port's, other protocols.
    pub fn rx_unowned(&self) -> Flow {
        Flow {
            packets: self.rx.packets.saturating_sub(self.rx_owned.packets),
            bytes: self.rx.bytes.saturating_sub(self.rx_owned.bytes),
        }
    }
}

/// One TCP socket with an owner, from [`NetTable::connections`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    pub pid: u32,
    pub start_boottime_ns: u64,
    /// The kernel's TCP state (1 established … 10 listen).
    pub state: u8,
    /// Smoothed round-trip time, µs (0 before the first measurement).
    pub srtt_us: u32,
    /// Segments retransmitted over its life.
    pub retransmits: u32,
}

/// TCP's state numbers (include/net/tcp_states.h).
pub const TCP_ESTABLISHED: u8 = 1;
pub const TCP_LISTEN: u8 = 10;

/// `struct proc_net`: 18 words.
#[derive(Clone, Copy)]
#[repr(C)]
struct RawProcNet([u64; 18]);

// SAFETY: u64s, no padding, any bit pattern valid.
unsafe impl aya::Pod for RawProcNet {}

/// `struct totals`: 9 words, in a slot of 16 per CPU.
const TOTALS_WORDS: usize = 9;
const TOTALS_SLOT_WORDS: usize = 16;

/// The totals' array (`proctor_net_totals`: one slot per possible CPU, each written by its own
/// CPU's programs), mapped read-only into this process, so a sample sums it without a system
/// call (the per-CPU array's lookup it replaced was 11–16 µs of the sampler's CPU, cold).
struct TotalsMap {
    words: std::ptr::NonNull<u64>,
    len: usize,
    cpus: usize,
    /// The map, held for as long as it is mapped.
    _map: MapData,
}

// SAFETY: the mapping is read-only here and lives as long as the struct; reads are volatile
// loads of aligned words, which the kernel's programs write whole.
unsafe impl Send for TotalsMap {}
unsafe impl Sync for TotalsMap {}

impl TotalsMap {
    fn new(map: MapData, cpus: usize) -> std::io::Result<TotalsMap> {
        // SAFETY: sysconf reads a constant.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = (cpus * TOTALS_SLOT_WORDS * 8).div_ceil(page) * page;
        // SAFETY: a new shared read-only mapping of the map's fd (an mmap-able array at least
        // `len` long: `cpus` slots); the result is checked before use.
        let at = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, map.fd().as_fd().as_raw_fd(), 0)
        };
        if at == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let words = std::ptr::NonNull::new(at.cast::<u64>()).ok_or_else(|| std::io::Error::other("mmap gave null"))?;
        Ok(TotalsMap { words, len, cpus, _map: map })
    }

    /// One CPU's slot (`cpu` < `cpus`).
    fn slot(&self, cpu: usize) -> [u64; TOTALS_WORDS] {
        assert!(cpu < self.cpus, "CPU {cpu} of {}", self.cpus);
        // SAFETY: within the mapping (`cpus` slots of TOTALS_SLOT_WORDS words), aligned.
        std::array::from_fn(|i| unsafe { self.words.as_ptr().add(cpu * TOTALS_SLOT_WORDS + i).read_volatile() })
    }

    /// Every CPU's slot, summed.
    fn sum(&self) -> [u64; TOTALS_WORDS] {
        let mut w = [0u64; TOTALS_WORDS];
        for cpu in 0..self.cpus {
            for (s, v) in w.iter_mut().zip(self.slot(cpu)) {
                *s = s.wrapping_add(v);
            }
        }
        w
    }
}

impl Drop for TotalsMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.words.as_ptr().cast(), self.len) };
    }
}

/// Rows asked for in one batch: a sample's read of a few hundred processes is two calls.
const BATCH: usize = 256;

/// Buffers for one batch, kept between samples.
#[derive(Default)]
struct BatchBuffers {
    keys: Vec<u32>,
    values: Vec<RawProcNet>,
    /// The kernel has no batch lookups (before 5.6): not asked again.
    unsupported: bool,
}

/// Reads the whole table with `BPF_MAP_LOOKUP_BATCH` (Linux 5.6+): one system call per
/// [`BATCH`] rows, where iterating takes two per row (next key, then lookup). Rows added or
/// deleted meanwhile may be missed or seen, as with iterating.
fn read_batched(
    fd: std::os::fd::RawFd,
    out: &mut HashMap<u32, ProcNet>,
    batch: usize,
    buffers: &mut BatchBuffers,
) -> std::io::Result<()> {
    // `union bpf_attr`'s `batch` member (include/uapi/linux/bpf.h).
    #[repr(C)]
    #[derive(Default)]
    struct BatchAttr {
        in_batch: u64,
        out_batch: u64,
        keys: u64,
        values: u64,
        count: u32,
        map_fd: u32,
        elem_flags: u64,
        flags: u64,
    }
    const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
    let batch = batch.clamp(1, BATCH);
    if buffers.unsupported {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    let BatchBuffers { keys, values, unsupported } = buffers;
    keys.resize(batch, 0);
    values.resize(batch, RawProcNet([0; 18]));
    // A hash map's batch position is a bucket index (u32).
    let (mut at, mut next) = (0u32, 0u32);
    let mut first = true;
    loop {
        let mut attr = BatchAttr {
            in_batch: if first { 0 } else { std::ptr::addr_of!(at) as u64 },
            out_batch: std::ptr::addr_of_mut!(next) as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: batch as u32,
            map_fd: fd as u32,
            ..BatchAttr::default()
        };
        // SAFETY: the attribute points at buffers of `count` keys and values of the map's own
        // sizes (u32, struct proc_net), and at two u32 batch positions, all alive for the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_LOOKUP_BATCH,
                &mut attr as *mut BatchAttr,
                std::mem::size_of::<BatchAttr>(),
            )
        };
        let error = (rc < 0).then(std::io::Error::last_os_error);
        let filled = (attr.count as usize).min(batch);
        if error.as_ref().is_none_or(|e| e.raw_os_error() == Some(libc::ENOENT)) {
            for (pid, raw) in keys.iter().zip(values.iter()).take(filled) {
                out.insert(*pid, proc_net(&raw.0));
            }
        }
        match error {
            None => {}
            // The end of the table.
            Some(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Some(e) => {
                // A kernel without the command says EINVAL; one asked for a batch smaller than
                // a bucket (ENOSPC) is asked again next sample.
                *unsupported = e.raw_os_error() == Some(libc::EINVAL);
                return Err(e);
            }
        }
        at = next;
        first = false;
    }
}

/// `struct conn_record`: tgid, state, start, srtt, retransmits.
pub const CONNECTION_BYTES: usize = 24;

fn proc_net(w: &[u64; 18]) -> ProcNet {
    let proto = |i: usize, sent: u64, received: u64| Proto {
        tx: Flow { packets: w[i], bytes: w[i + 1] },
        rx: Flow { packets: w[i + 2], bytes: w[i + 3] },
        sent_bytes: sent,
        received_bytes: received,
    };
    ProcNet {
        start_boottime_ns: w[0],
        tcp: proto(1, w[9], w[10]),
        udp: proto(5, w[11], w[12]),
        connects: w[13],
        accepts: w[14],
        retransmits: w[15],
        resets_sent: w[16],
        resets_received: w[17],
    }
}

/// The loaded programs and their maps, one per process.
pub(crate) struct Loaded {
    bpf: Mutex<Ebpf>,
    table: Mutex<BpfHashMap<MapData, u32, RawProcNet>>,
    totals: TotalsMap,
    /// `Some` once attached: the outcome (kept, so a refusal is said, not retried).
    attached: Mutex<Option<Result<(), Unavailable>>>,
    /// The retransmit program that fit this kernel (one of [`RETRANSMIT_PROGRAMS`]).
    retransmit: &'static str,
    batch: Mutex<BatchBuffers>,
    walk: Walk,
    /// The storage walk's link ([`Walk::Owned`]), the walks' read buffer ([`WALK_BUFFER`]), and
    /// where the next walk of other network namespaces starts ([`NetTable::connections_in`]).
    sockets: Mutex<(Option<OwnedFd>, Vec<u8>, u64)>,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("net::Loaded").finish_non_exhaustive()
    }
}

impl Loaded {
    /// Fits the object to the kernel's BTF and loads its programs; attaches nothing.
    /// `loader`: one without a BTF of its own ([`crate::loader`]).
    pub(crate) fn load<'a>(mut loader: EbpfLoader<'a>, btf: &'a Btf) -> Result<Loaded, Unavailable> {
        // A slot for every CPU a program may run on.
        let cpus = aya::util::nr_cpus().map_err(|(what, e)| Unavailable(format!("reading {what}: {e}")))?;
        let slots = u32::try_from(cpus).map_err(|_| Unavailable(format!("{cpus} possible CPUs")))?;
        let mut bpf = loader.btf(Some(btf)).map_max_entries(TOTALS, slots).load(NET_OBJECT).map_err(|e| {
            Unavailable(crate::refused(
                &e,
                "the network programs do not fit this kernel (Linux 6.3 or later is needed)",
            ))
        })?;
        let missing = |name: &str| Unavailable(format!("the object has no program {name}"));
        let kind = |name: &str, e: &dyn std::fmt::Display| Unavailable(format!("{name}: {e}"));
        let refused = |name: &str, e: aya::programs::ProgramError| Unavailable(format!("{name}: {}", load_error(&e)));
        for (name, tracepoint) in TRACEPOINTS {
            let program: &mut BtfTracePoint =
                bpf.program_mut(name).ok_or_else(|| missing(name))?.try_into().map_err(|e| kind(name, &e))?;
            program.load(tracepoint, btf).map_err(|e| refused(name, e))?;
        }
        let (mut retransmit, mut refusals) = (None, Vec::new());
        for name in RETRANSMIT_PROGRAMS {
            let program: &mut BtfTracePoint =
                bpf.program_mut(name).ok_or_else(|| missing(name))?.try_into().map_err(|e| kind(name, &e))?;
            match program.load(RETRANSMIT, btf) {
                Ok(()) => {
                    retransmit = Some(name);
                    break;
                }
                Err(e) => refusals.push(format!("{name}: {}", load_error(&e))),
            }
        }
        let retransmit = retransmit.ok_or_else(|| Unavailable(refusals.join("; ")))?;
        let ingress: &mut CgroupSkb =
            bpf.program_mut(INGRESS).ok_or_else(|| missing(INGRESS))?.try_into().map_err(|e| kind(INGRESS, &e))?;
        ingress.load().map_err(|e| refused(INGRESS, e))?;
        for name in [SOCK_CREATE, SOCK_RELEASE] {
            let program: &mut CgroupSock =
                bpf.program_mut(name).ok_or_else(|| missing(name))?.try_into().map_err(|e| kind(name, &e))?;
            program.load().map_err(|e| refused(name, e))?;
        }
        let (walk, link) = match owned_sockets(&mut bpf, btf) {
            Ok(link) => (Walk::Owned, Some(link)),
            Err(why) => {
                let tcp: &mut Iter = bpf
                    .program_mut(TCP_SOCKETS)
                    .ok_or_else(|| missing(TCP_SOCKETS))?
                    .try_into()
                    .map_err(|e| kind(TCP_SOCKETS, &e))?;
                tcp.load("tcp", btf).map_err(|e| refused(TCP_SOCKETS, e))?;
                let udp: &mut Iter = bpf
                    .program_mut(UDP_SOCKETS)
                    .ok_or_else(|| missing(UDP_SOCKETS))?
                    .try_into()
                    .map_err(|e| kind(UDP_SOCKETS, &e))?;
                udp.load("udp", btf).map_err(|e| refused(UDP_SOCKETS, e))?;
                // Nothing is attached yet: every packet from the first is added to its row.
                let mode = bpf.map_mut(MODE).ok_or_else(|| Unavailable(format!("the object has no {MODE}")))?;
                let mut mode: Array<_, u32> = Array::try_from(mode).map_err(|e| Unavailable(format!("{MODE}: {e}")))?;
                mode.set(0, ROWS_EACH_PACKET, 0).map_err(|e| Unavailable(format!("writing {MODE}: {e}")))?;
                (Walk::TcpTables(why), None)
            }
        };
        let table = bpf.take_map("proctor_net").ok_or_else(|| Unavailable("the object has no table".into()))?;
        let table = BpfHashMap::try_from(table).map_err(|e| Unavailable(format!("the table: {e}")))?;
        let totals = match bpf.take_map(TOTALS) {
            Some(aya::maps::Map::Array(data)) => data,
            _ => return Err(Unavailable(format!("the object has no array {TOTALS}"))),
        };
        let totals = TotalsMap::new(totals, cpus).map_err(|e| Unavailable(format!("mapping {TOTALS}: {e}")))?;
        Ok(Loaded {
            bpf: Mutex::new(bpf),
            table: Mutex::new(table),
            totals,
            attached: Mutex::new(None),
            retransmit,
            batch: Mutex::default(),
            walk,
            sockets: Mutex::new((link, Vec::new(), 0)),
        })
    }

    fn attach(&self) -> Result<(), Unavailable> {
        let mut attached = self.attached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(outcome) = &*attached {
            return outcome.clone();
        }
        let outcome = (|| {
            let root = cgroup2_root()?;
            let cgroup = std::fs::File::open(&root)
                .map_err(|e| Unavailable(format!("opening the cgroup2 root {}: {e}", root.display())))?;
            let mut bpf = self.bpf.lock().unwrap_or_else(|e| e.into_inner());
            let gone = |name: &str| Unavailable(format!("{name} is gone"));
            let failed = |what: String, e: aya::programs::ProgramError| {
                Unavailable(format!("attaching {what}: {}", load_error(&e)))
            };
            // The cgroup programs first: a packet counted on the way out has its owner. Through a
            // link (Linux 5.7+), which the kernel always attaches beside others (the flags must
            // be 0: `Single` is 0), and which goes with this process.
            for name in [SOCK_CREATE, SOCK_RELEASE] {
                let program: &mut CgroupSock =
                    bpf.program_mut(name).and_then(|p| p.try_into().ok()).ok_or_else(|| gone(name))?;
                program
                    .attach(&cgroup, CgroupAttachMode::Single)
                    .map_err(|e| failed(format!("{name} to {}", root.display()), e))?;
            }
            let ingress: &mut CgroupSkb =
                bpf.program_mut(INGRESS).and_then(|p| p.try_into().ok()).ok_or_else(|| gone(INGRESS))?;
            ingress
                .attach(&cgroup, CgroupSkbAttachType::Ingress, CgroupAttachMode::Single)
                .map_err(|e| failed(format!("{INGRESS} to {}", root.display()), e))?;
            for (name, tracepoint) in TRACEPOINTS {
                let program: &mut BtfTracePoint =
                    bpf.program_mut(name).and_then(|p| p.try_into().ok()).ok_or_else(|| gone(name))?;
                program.attach().map_err(|e| failed(format!("{name} to {tracepoint}"), e))?;
            }
            let name = self.retransmit;
            let program: &mut BtfTracePoint =
                bpf.program_mut(name).and_then(|p| p.try_into().ok()).ok_or_else(|| gone(name))?;
            program.attach().map_err(|e| failed(format!("{name} to {RETRANSMIT}"), e))?;
            Ok(())
        })();
        *attached = Some(outcome.clone());
        outcome
    }
}

/// Loads the storage walk's iterator and links it to the owner storage map (`BPF_LINK_CREATE`
/// with the map in its `bpf_iter_link_info`, which aya's `Iter::attach` does not pass). A link
/// starts nothing: each walk makes an iterator from it. `Err`: why the kernel refused.
fn owned_sockets(bpf: &mut Ebpf, btf: &Btf) -> Result<OwnedFd, String> {
    if TCP_TABLES_ASKED.load(std::sync::atomic::Ordering::Relaxed) {
        return Err("the TCP tables were asked for".into());
    }
    let program: &mut Iter = bpf
        .program_mut(SOCKETS)
        .and_then(|p| p.try_into().ok())
        .ok_or_else(|| format!("the object has no iterator {SOCKETS}"))?;
    program.load("bpf_sk_storage_map", btf).map_err(|e| format!("{SOCKETS}: {}", load_error(&e)))?;
    let program = program.fd().map_err(|e| format!("{SOCKETS}: {e}"))?.as_fd().as_raw_fd();
    let Some(aya::maps::Map::SkStorage(owners)) = bpf.map(OWNERS) else {
        return Err(format!("the object has no socket storage {OWNERS}"));
    };
    iter_link(program, Some(owners.fd().as_fd().as_raw_fd())).map_err(|e| format!("linking {SOCKETS} to {OWNERS}: {e}"))
}

/// Where the cgroup2 hierarchy is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a
/// hybrid host), from `/proc/self/mountinfo`.
fn cgroup2_root() -> Result<std::path::PathBuf, Unavailable> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| Unavailable(format!("reading /proc/self/mountinfo: {e}")))?;
    info.lines()
        .find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            (right.split_whitespace().next() == Some("cgroup2"))
                .then(|| left.split_whitespace().nth(4).map(Into::into))?
        })
        .ok_or_else(|| {
            Unavailable("no cgroup2 hierarchy is mounted: the received packets' sockets are seen through it".into())
        })
}

/// What one [`NetTable::read`] cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCost {
    pub rows: u64,
    /// Rows that went between listing and reading them (their process ended and another reader
    /// forgot it).
    pub vanished: u64,
    pub cpu_ns: u64,
}

/// A handle on the per-process network table (the programs attached).
#[derive(Debug, Clone)]
pub struct NetTable {
    loaded: Arc<Loaded>,
}

impl NetTable {
    /// Attaches the programs (the first time in this process). `Err` says why per-process
    /// network cannot be had here.
    pub fn open() -> Result<NetTable, Unavailable> {
        if !may_load_tracing() || !crate::has_capability(CAP_NET_ADMIN) {
            return Err(Unavailable(
                "this process may not load BPF tracing programs and attach them to the cgroup2 root: proctor needs \
                 CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (or root)"
                    .to_string(),
            ));
        }
        if let Some(why) = crate::other_pid_namespace("the network table numbers processes") {
            return Err(Unavailable(why));
        }
        crate::load_parts(false, false, true);
        let loaded = crate::parts().lock().unwrap_or_else(|e| e.into_inner()).net.clone().expect("loaded above")?;
        loaded.attach()?;
        Ok(NetTable { loaded })
    }

    /// Every row of the table into `out` (cleared first), by pid: what the walks
    /// ([`NetTable::connections`]) and the sockets closed so far added; walk first for the
    /// packets up to now.
    pub fn read(&self, out: &mut HashMap<u32, ProcNet>) -> ReadCost {
        let started = thread_cpu_ns();
        out.clear();
        let table = self.loaded.table.lock().unwrap_or_else(|e| e.into_inner());
        let mut vanished = 0;
        {
            use aya::maps::IterableMap;
            use std::os::fd::{AsFd, AsRawFd};
            let mut buffers = self.loaded.batch.lock().unwrap_or_else(|e| e.into_inner());
            if read_batched(table.map().fd().as_fd().as_raw_fd(), out, BATCH, &mut buffers).is_ok() {
                return ReadCost { rows: out.len() as u64, vanished, cpu_ns: thread_cpu_ns().saturating_sub(started) };
            }
            // A kernel without batch lookups (before 5.6): one row at a time.
            out.clear();
        }
        for entry in table.iter() {
            match entry {
                Ok((pid, raw)) => {
                    out.insert(pid, proc_net(&raw.0));
                }
                Err(_) => vanished += 1,
            }
        }
        ReadCost { rows: out.len() as u64, vanished, cpu_ns: thread_cpu_ns().saturating_sub(started) }
    }

    /// The table read two ways, for a test: in batches of `batch` rows (`None` where the kernel
    /// has no batch lookups), and one row at a time.
    #[doc(hidden)]
    pub fn read_both_ways(&self, batch: usize) -> (Option<HashMap<u32, ProcNet>>, HashMap<u32, ProcNet>) {
        use aya::maps::IterableMap;
        use std::os::fd::{AsFd, AsRawFd};
        let table = self.loaded.table.lock().unwrap_or_else(|e| e.into_inner());
        let mut batched = HashMap::new();
        let ok = read_batched(table.map().fd().as_fd().as_raw_fd(), &mut batched, batch, &mut BatchBuffers::default())
            .is_ok();
        let each = table.iter().filter_map(Result::ok).map(|(pid, raw)| (pid, proc_net(&raw.0))).collect();
        (ok.then_some(batched), each)
    }

    /// Deletes the rows of these pids (processes that ended); returns how many were there.
    pub fn forget(&self, pids: impl IntoIterator<Item = u32>) -> u64 {
        let mut table = self.loaded.table.lock().unwrap_or_else(|e| e.into_inner());
        pids.into_iter().filter(|pid| table.remove(pid).is_ok()).count() as u64
    }

    /// The host's totals, summed over CPUs (read from this process's mapping of them: no
    /// system call).
    pub fn totals(&self) -> NetTotals {
        totals_of(self.loaded.totals.sum())
    }

    /// Each possible CPU's own totals, for a test.
    #[doc(hidden)]
    pub fn totals_by_cpu(&self) -> Vec<NetTotals> {
        (0..self.loaded.totals.cpus).map(|cpu| totals_of(self.loaded.totals.slot(cpu))).collect()
    }

    /// How [`NetTable::connections`] walks the sockets on this kernel.
    pub fn walk(&self) -> &Walk {
        &self.loaded.walk
    }

    /// Every TCP socket the programs gave an owner ([`NetTable::walk`] says how they are
    /// found), into `out` (cleared first); returns the walk's CPU ns. The walk also adds what
    /// each owned socket counted since the last walk (packets, bytes, payload) to its owner's
    /// row: the rows grow only here, as a connection closes or a datagram socket is released,
    /// and as a socket changes owner.
    pub fn connections(&self, out: &mut Vec<Connection>) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
        self.connections_in(out, &[], std::time::Duration::ZERO).map(|(cpu_ns, _)| cpu_ns)
    }

    /// [`NetTable::connections`], and where the kernel's TCP tables are walked
    /// ([`Walk::TcpTables`]: each walk sees one network namespace's), the tables of the other
    /// network namespaces `pids` are in too (a container's), each from a thread that enters it,
    /// taking turns: as many as `budget` of CPU reads (one at least, [`MAX_NAMESPACES`] at
    /// most); returns the walk's CPU ns and how the other namespaces' walks went. The storage
    /// walk sees every namespace's sockets, so there `pids` are not looked at.
    pub fn connections_in(
        &self,
        out: &mut Vec<Connection>,
        pids: &[u32],
        budget: std::time::Duration,
    ) -> Result<(u64, Namespaces), Box<dyn std::error::Error + Send + Sync>> {
        let started = thread_cpu_ns();
        out.clear();
        let mut namespaces = Namespaces::default();
        let mut guard = self.loaded.sockets.lock().map_err(|_| "another walk panicked")?;
        let (link, bytes, cursor) = &mut *guard;
        match link {
            Some(link) => read_connections(&mut iter_create(link)?, bytes, out)?,
            None => {
                let mut bpf = self.loaded.bpf.lock().map_err(|_| "another walk panicked while attaching")?;
                // The datagram sockets first: their walk writes nothing, only adds their counts.
                let udp: &mut Iter = bpf.program_mut(UDP_SOCKETS).ok_or("program gone")?.try_into()?;
                let link = udp.attach()?;
                std::io::copy(&mut udp.take_link(link)?.into_file()?, &mut std::io::sink())?;
                let program: &mut Iter = bpf.program_mut(TCP_SOCKETS).ok_or("program gone")?.try_into()?;
                let link = program.attach()?;
                read_connections(&mut program.take_link(link)?.into_file()?, bytes, out)?;
                if !pids.is_empty() {
                    let program = program.fd()?.as_fd().as_raw_fd();
                    let budget_ns = budget.as_nanos() as u64;
                    namespaces = walk_other_namespaces(program, pids, cursor, budget_ns, bytes, out);
                }
            }
        }
        Ok((thread_cpu_ns().saturating_sub(started), namespaces))
    }
}

/// `struct totals`' words, named.
fn totals_of(w: [u64; TOTALS_WORDS]) -> NetTotals {
    NetTotals {
        tx: Flow { packets: w[0], bytes: w[1] },
        rx: Flow { packets: w[2], bytes: w[3] },
        tx_unowned: Flow { packets: w[4], bytes: w[5] },
        rx_owned: Flow { packets: w[6], bytes: w[7] },
        table_full: w[8],
    }
}

/// The most other network namespaces one walk of the TCP tables visits
/// ([`NetTable::connections_in`]), whatever its budget allows.
pub const MAX_NAMESPACES: usize = 64;

/// How one walk's visits of other network namespaces' TCP tables went
/// ([`NetTable::connections_in`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespaces {
    /// Network namespaces other than the agent's with a process that used the network.
    pub found: u32,
    /// Of those, walked this time.
    pub walked: u32,
    /// Left for a later walk: past the walk's budget or [`MAX_NAMESPACES`].
    pub skipped: u32,
    /// Why a namespace could not be walked (the last such error), e.g. entering it refused
    /// without CAP_SYS_ADMIN: its processes' traffic is still counted, their connections not.
    pub refused: Option<String>,
    /// Whether that error was the kernel's refusal (EPERM or EACCES: no CAP_SYS_ADMIN, a
    /// security policy), not a failure (a namespace gone, a walk that could not be read).
    pub refused_by_permission: bool,
    /// The pids (of those given) in a namespace not walked this time, skipped or refused: their
    /// connections are as the last walk of their namespace found them.
    pub unwalked: Vec<u32>,
}

/// Walks the TCP tables of the network namespaces `pids` are in, other than this thread's,
/// from `cursor` on (a namespace's inode: where the last walk stopped, so all take turns),
/// until their walks have cost `budget_ns` of this thread's CPU: one thread enters each in
/// turn (`setns`) and makes the walk's iterator there (a walk of the tables sees the namespace
/// it was made in); the walks are read here, into `out`. Each walks every bucket of the
/// tables, empty or not (the established table is the host's, shared by every namespace not
/// given its own), so each costs about what this namespace's walk does.
fn walk_other_namespaces(
    program: i32,
    pids: &[u32],
    cursor: &mut u64,
    budget_ns: u64,
    bytes: &mut Vec<u8>,
    out: &mut Vec<Connection>,
) -> Namespaces {
    use std::os::unix::fs::MetadataExt;
    let mut ns = Namespaces::default();
    let inode = |path: &str| std::fs::metadata(path).map(|m| m.ino());
    let Ok(own) = inode("/proc/thread-self/ns/net") else {
        ns.refused = Some("this thread's network namespace could not be read".into());
        return ns;
    };
    // Each process in another namespace, by the namespace's inode (one gone since is passed
    // over).
    let mut members: Vec<(u64, u32)> = Vec::new();
    for &pid in pids {
        if let Ok(ino) = inode(&format!("/proc/{pid}/ns/net")) {
            if ino != own {
                members.push((ino, pid));
            }
        }
    }
    members.sort_unstable();
    let mut found = members.clone();
    found.dedup_by_key(|(ino, _)| *ino);
    ns.found = found.len() as u32;
    if found.is_empty() {
        return ns;
    }
    // Those from the cursor on, in turns.
    let first = found.partition_point(|(ino, _)| *ino < *cursor);
    found.rotate_left(first);
    found.truncate(MAX_NAMESPACES);
    let files: Vec<_> =
        found.iter().map(|(_, pid)| std::fs::File::open(format!("/proc/{pid}/ns/net"))).collect::<Vec<_>>();
    let link = match iter_link(program, None) {
        Ok(link) => link,
        Err(e) => {
            ns.refused_by_permission = e.kind() == std::io::ErrorKind::PermissionDenied;
            ns.refused = Some(format!("linking the TCP tables' walk: {e}"));
            ns.unwalked = members.iter().map(|(_, pid)| *pid).collect();
            return ns;
        }
    };
    // The entering thread makes one walk at a time, handed over as it is read here, so none is
    // made past the budget: it stops when this side stops taking them.
    let (mut walked, mut tried) = (std::collections::HashSet::new(), 0);
    let started = thread_cpu_ns();
    let outcome = std::thread::scope(|s| {
        // A failure: what failed, and whether the kernel refused it (EPERM, EACCES).
        let failed =
            |what: &str, e: &std::io::Error| (format!("{what}: {e}"), e.kind() == std::io::ErrorKind::PermissionDenied);
        let (give, take) = std::sync::mpsc::sync_channel::<Result<std::fs::File, (String, bool)>>(0);
        let entering = std::thread::Builder::new().name("proctor-netns".into()).spawn_scoped(s, move || {
            for f in &files {
                let walk = f.as_ref().map_err(|e| failed("opening its namespace", e)).and_then(|f| {
                    // SAFETY: setns on this thread only (it ends after these walks); the fd is
                    // a network namespace's, open for the call.
                    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                        return Err(failed("entering it", &std::io::Error::last_os_error()));
                    }
                    iter_create(&link).map_err(|e| failed("making its walk", &e))
                });
                if give.send(walk).is_err() {
                    return;
                }
            }
        });
        let entering = entering.map_err(|e| format!("starting a thread to enter them: {e}"))?;
        // Read while the budget lasts (the first always); the rest wait for the next walk.
        for (ino, _) in &found {
            if tried > 0 && thread_cpu_ns().saturating_sub(started) >= budget_ns {
                break;
            }
            let Ok(walk) = take.recv() else {
                break;
            };
            tried += 1;
            *cursor = ino + 1;
            match walk.and_then(|mut f| {
                read_connections(&mut f, bytes, out).map_err(|e| (format!("reading its walk: {e}"), false))
            }) {
                Ok(()) => {
                    walked.insert(*ino);
                }
                Err((e, permission)) => {
                    ns.refused = Some(e);
                    ns.refused_by_permission = permission;
                }
            }
        }
        // Its next hand-over fails, and it ends; joined here, so a panic of it is said, not
        // passed on.
        drop(take);
        entering.join().map_err(|_| "the thread entering them panicked".to_string())
    });
    if let Err(e) = outcome {
        ns.refused = Some(e);
        ns.refused_by_permission = false;
    }
    ns.walked = walked.len() as u32;
    ns.skipped = ns.found - tried;
    ns.unwalked = members.iter().filter(|(ino, _)| !walked.contains(ino)).map(|(_, pid)| *pid).collect();
    ns
}

/// A link of the iterator program `program`, over the elements of the map `map` where it
/// iterates a map's (`iter/bpf_sk_storage_map`), else with no target (`iter/tcp`).
fn iter_link(program: i32, map: Option<i32>) -> std::io::Result<OwnedFd> {
    // `union bpf_attr`'s `link_create` member for an iterator (include/uapi/linux/bpf.h).
    #[repr(C)]
    #[derive(Default)]
    struct LinkCreate {
        prog_fd: u32,
        target_fd: u32,
        attach_type: u32,
        flags: u32,
        iter_info: u64,
        iter_info_len: u32,
        _pad: u32,
    }
    const BPF_LINK_CREATE: libc::c_long = 28;
    const BPF_TRACE_ITER: u32 = 28;
    // `union bpf_iter_link_info`'s `map` member: the map's fd.
    let info = map.map(|fd| [fd as u32, 0]);
    let mut attr = LinkCreate { prog_fd: program as u32, attach_type: BPF_TRACE_ITER, ..LinkCreate::default() };
    if let Some(info) = &info {
        attr.iter_info = info.as_ptr() as u64;
        attr.iter_info_len = std::mem::size_of_val(info) as u32;
    }
    let fd = crate::scan::bpf(BPF_LINK_CREATE, &mut attr)?;
    // SAFETY: the kernel just gave us this fd; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A new iterator of `link`, as a file to read: its walk is of the calling thread's network
/// namespace, where the iterator is of one.
fn iter_create(link: &OwnedFd) -> std::io::Result<std::fs::File> {
    #[repr(C)]
    struct IterCreate {
        link_fd: u32,
        flags: u32,
    }
    const BPF_ITER_CREATE: libc::c_long = 33;
    let mut attr = IterCreate { link_fd: link.as_raw_fd() as u32, flags: 0 };
    let fd = crate::scan::bpf(BPF_ITER_CREATE, &mut attr)?;
    // SAFETY: the kernel just gave us this fd; nothing else owns it.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
}

/// Whether this process may enter another network namespace to walk its TCP tables
/// ([`NetTable::connections_in`]): a thread enters its own (the same permission check:
/// CAP_SYS_ADMIN), for `doctor`.
pub fn may_enter_namespaces() -> Result<(), String> {
    let ns = std::fs::File::open("/proc/thread-self/ns/net")
        .map_err(|e| format!("opening /proc/thread-self/ns/net: {e}"))?;
    std::thread::scope(|s| {
        let entering = std::thread::Builder::new().spawn_scoped(s, || {
            // SAFETY: setns on this short-lived thread, into the namespace it is already in.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(format!("entering a network namespace: {}", std::io::Error::last_os_error()));
            }
            Ok(())
        });
        match entering {
            Ok(thread) => thread.join().unwrap_or_else(|_| Err("the thread entering it panicked".into())),
            Err(e) => Err(format!("starting a thread to enter it: {e}")),
        }
    })
}

/// The walk's read buffer: 682 records. The walk is read through it a piece at a time, so what
/// it holds between walks does not grow with the host's sockets (the records are parsed as they
/// come; only `out` holds one per socket).
const WALK_BUFFER: usize = 682 * CONNECTION_BYTES;

/// Reads a walk's records to the end through `buffer`, parsing each into `out` as it comes; a
/// read may end inside a record, whose start waits in the buffer for the rest. A walk that ends
/// inside a record (the kernel writes whole ones) is an error, after every whole record before
/// it is in `out`.
fn read_connections(file: &mut impl Read, buffer: &mut Vec<u8>, out: &mut Vec<Connection>) -> std::io::Result<()> {
    buffer.resize(WALK_BUFFER, 0);
    let mut filled = 0;
    loop {
        let n = match file.read(&mut buffer[filled..]) {
            Ok(0) if filled == 0 => return Ok(()),
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("the sockets' walk ended {filled} bytes into a {CONNECTION_BYTES}-byte record"),
                ))
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        filled += n;
        let whole = filled - filled % CONNECTION_BYTES;
        out.extend(buffer[..whole].chunks_exact(CONNECTION_BYTES).map(parse_connection));
        buffer.copy_within(whole..filled, 0);
        filled -= whole;
    }
}

fn parse_connection(r: &[u8]) -> Connection {
    let u32_at = |i: usize| u32::from_ne_bytes(r[i..i + 4].try_into().expect("4 bytes"));
    Connection {
        pid: u32_at(0),
        state: u32_at(4) as u8,
        start_boottime_ns: u64::from_ne_bytes(r[8..16].try_into().expect("8 bytes")),
        srtt_us: u32_at(16),
        retransmits: u32_at(20),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A walk read in pieces that end inside records gives every record once, whole, however
    /// many sockets there are, and the buffer stays its size.
    #[test]
    fn a_walk_read_in_odd_pieces_gives_every_record() {
        struct Trickle(Vec<u8>, usize);
        impl Read for Trickle {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                // 7 bytes, then as much as fits, alternately: records split at every offset.
                let want = if self.1.is_multiple_of(2) { 7 } else { buf.len() };
                self.1 += 1;
                let n = want.min(buf.len()).min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0.drain(..n);
                Ok(n)
            }
        }
        let sockets = 5_000u32;
        let mut walk = Vec::new();
        for i in 0..sockets {
            walk.extend_from_slice(&(i + 1).to_ne_bytes()); // pid
            walk.extend_from_slice(&1u32.to_ne_bytes()); // state
            walk.extend_from_slice(&(u64::from(i) * 1_000).to_ne_bytes()); // start
            walk.extend_from_slice(&(i * 2).to_ne_bytes()); // srtt
            walk.extend_from_slice(&(i % 3).to_ne_bytes()); // retransmits
        }
        let (mut buffer, mut out) = (Vec::new(), Vec::new());
        read_connections(&mut Trickle(walk.clone(), 0), &mut buffer, &mut out).expect("whole records");
        assert_eq!(out.len(), sockets as usize);
        for (i, c) in out.iter().enumerate() {
            let i = i as u32;
            assert_eq!(
                (c.pid, c.state, c.start_boottime_ns, c.srtt_us, c.retransmits),
                (i + 1, 1, u64::from(i) * 1_000, i * 2, i % 3)
            );
        }
        assert_eq!(buffer.len(), WALK_BUFFER);
        assert!(buffer.capacity() < sockets as usize * CONNECTION_BYTES);

        // A walk cut off inside a record says so, and keeps the whole records before it.
        walk.extend_from_slice(&[9; 5]);
        out.clear();
        let torn = read_connections(&mut Trickle(walk, 0), &mut buffer, &mut out).expect_err("a torn record");
        assert_eq!(torn.to_string(), "the sockets' walk ended 5 bytes into a 24-byte record");
        assert_eq!(out.len(), sockets as usize);
    }

    /// The words land in the fields `struct proc_net` names them for.
    #[test]
    fn a_row_reads_as_the_kernel_lays_it_out() {
        let w: [u64; 18] = std::array::from_fn(|i| i as u64 * 10);
        let p = proc_net(&w);
        assert_eq!(p.start_boottime_ns, 0);
        assert_eq!(p.tcp.tx, Flow { packets: 10, bytes: 20 });
        assert_eq!(p.tcp.rx, Flow { packets: 30, bytes: 40 });
        assert_eq!(p.udp.tx, Flow { packets: 50, bytes: 60 });
        assert_eq!(p.udp.rx, Flow { packets: 70, bytes: 80 });
        assert_eq!(
            (p.tcp.sent_bytes, p.tcp.received_bytes, p.udp.sent_bytes, p.udp.received_bytes),
            (90, 100, 110, 120)
        );
        assert_eq!((p.connects, p.accepts, p.retransmits, p.resets_sent, p.resets_received), (130, 140, 150, 160, 170));
    }

    #[test]
    fn a_connection_record_reads_as_laid_out() {
        let mut r = Vec::new();
        r.extend(4242u32.to_ne_bytes());
        r.extend(1u32.to_ne_bytes());
        r.extend(77u64.to_ne_bytes());
        r.extend(350u32.to_ne_bytes());
        r.extend(3u32.to_ne_bytes());
        assert_eq!(
            parse_connection(&r),
            Connection { pid: 4242, start_boottime_ns: 77, state: TCP_ESTABLISHED, srtt_us: 350, retransmits: 3 }
        );
    }
}
