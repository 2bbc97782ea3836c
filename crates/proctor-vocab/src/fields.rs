//! The public field table: every field of a process and of the host that proctor prints, with
//! its name (the JSON key, dotted for nested objects), column title, unit and meaning. One list,
//! many views, like below's render table: `proctor dump`'s columns and `--fields list`, the
//! text tables' headers, the dashboard's columns and formats (through [`crate::js`]), the TUI's
//! columns and `docs/api.md` all read it, and tests hold it equal to the JSON shapes, so a field
//! cannot be added to one and forgotten in the other.

use std::borrow::Cow;
use std::cmp::Ordering;

use proctor_groups::GroupRow;
use proctor_model::ProcessRow;
use proctor_units::prom::Kind;
use serde::Serialize;

use crate::process::ProcessOut;
pub use crate::process::RowCtx;
use crate::units::Unit;

/// One public field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Field {
    /// The JSON key; nested objects are joined with dots (`memory.used_bytes`).
    pub name: &'static str,
    /// A short column title.
    pub title: &'static str,
    pub unit: Unit,
    pub description: &'static str,
}

/// A field's value as read from a row: a number in the field's unit, text (borrowed from the
/// row where the row holds it), or nothing known.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading<'a> {
    Num(f64),
    Text(Cow<'a, str>),
    Missing,
}

impl Reading<'_> {
    /// The number, when it is one and finite.
    pub fn num(&self) -> Option<f64> {
        match self {
            Reading::Num(v) if v.is_finite() => Some(*v),
            _ => None,
        }
    }

    pub fn text(&self) -> Option<&str> {
        match self {
            Reading::Text(t) => Some(t),
            _ => None,
        }
    }

    /// Ascending order: numbers by value, texts by bytes, nothing known smallest.
    pub fn order(&self, other: &Reading<'_>) -> Ordering {
        match (self, other) {
            (Reading::Missing, Reading::Missing) => Ordering::Equal,
            (Reading::Missing, _) => Ordering::Less,
            (_, Reading::Missing) => Ordering::Greater,
            (Reading::Num(a), Reading::Num(b)) => a.total_cmp(b),
            (Reading::Text(a), Reading::Text(b)) => a.cmp(b),
            (Reading::Num(_), Reading::Text(_)) => Ordering::Less,
            (Reading::Text(_), Reading::Num(_)) => Ordering::Greater,
        }
    }
}

/// A process field read from the agent's row (alerts, sort keys, `/metrics`).
pub type RowRead = for<'a> fn(&RowCtx, &'a ProcessRow) -> Reading<'a>;
/// A process field read from the public shape (`top`, whose frames may come from a remote
/// agent's JSON).
pub type OutRead = for<'a> fn(&'a ProcessOut) -> Reading<'a>;
/// A group field read from its row.
pub type GroupRead = for<'a> fn(&'a GroupRow) -> Reading<'a>;

/// A field's Prometheus family on `/metrics` (one sample per process or group, labelled by
/// it), in base units: a percent is written as a ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromFamily {
    /// Without `_total` for a counter: the renderer adds it.
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    /// Left out of `/metrics` when no row has a value (hardware that is not there).
    pub omit_empty: bool,
}

/// One process field and how to read it.
#[derive(Debug, Clone, Copy)]
pub struct ProcessField {
    pub field: Field,
    pub row: RowRead,
    pub out: OutRead,
    pub prom: Option<PromFamily>,
}

impl ProcessField {
    /// Ascending order of two rows by this field. CPU percent breaks ties by CPU seconds, as
    /// every surface's `cpu` sort does (top's, the API's, `snapshot --sort`).
    pub fn order_rows(&self, ctx: &RowCtx, a: &ProcessRow, b: &ProcessRow) -> Ordering {
        let ord = (self.row)(ctx, a).order(&(self.row)(ctx, b));
        match self.tie_break() {
            Some(t) => ord.then_with(|| (t.row)(ctx, a).order(&(t.row)(ctx, b))),
            None => ord,
        }
    }

    /// [`ProcessField::order_rows`] over the public shape.
    pub fn order_outs(&self, a: &ProcessOut, b: &ProcessOut) -> Ordering {
        let ord = (self.out)(a).order(&(self.out)(b));
        match self.tie_break() {
            Some(t) => ord.then_with(|| (t.out)(a).order(&(t.out)(b))),
            None => ord,
        }
    }

    fn tie_break(&self) -> Option<&'static ProcessField> {
        static CPU_SECONDS: std::sync::OnceLock<Option<&'static ProcessField>> = std::sync::OnceLock::new();
        if self.field.name == "cpu_percent" {
            *CPU_SECONDS.get_or_init(|| process_reader("cpu_seconds_total"))
        } else {
            None
        }
    }
}

/// One group field and how to read it.
#[derive(Debug, Clone, Copy)]
pub struct GroupField {
    pub field: Field,
    pub read: GroupRead,
    pub prom: Option<PromFamily>,
}

fn num<'a, T: Into<f64>>(v: T) -> Reading<'a> {
    Reading::Num(v.into())
}

fn opt<'a, T: Into<f64>>(v: Option<T>) -> Reading<'a> {
    v.map_or(Reading::Missing, |v| Reading::Num(v.into()))
}

fn count<'a>(v: u64) -> Reading<'a> {
    Reading::Num(v as f64)
}

fn bytes<'a>(v: Option<u64>) -> Reading<'a> {
    v.map_or(Reading::Missing, count)
}

fn text(t: &str) -> Reading<'_> {
    Reading::Text(Cow::Borrowed(t))
}

/// A command line as one text, its arguments joined by single spaces (what filters match).
fn joined(args: Option<&[String]>) -> Reading<'static> {
    args.map_or(Reading::Missing, |a| Reading::Text(Cow::Owned(a.join(" "))))
}

/// A state letter as text without an allocation per row (or a search: the state rules read
/// it for every process).
fn state(letter: char) -> Reading<'static> {
    const LETTERS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let at = match letter {
        'A'..='Z' => letter as usize - 'A' as usize,
        'a'..='z' => 26 + letter as usize - 'a' as usize,
        _ => return Reading::Text(Cow::Owned(letter.to_string())),
    };
    Reading::Text(Cow::Borrowed(&LETTERS[at..at + 1]))
}

/// A table's fields alone, at compile time: `&[Field]` for every reader that needs no row.
macro_rules! fields_of {
    ($table:expr) => {{
        const N: usize = $table.len();
        const OUT: [Field; N] = {
            let mut out = [$table[0].field; N];
            let mut i = 0;
            while i < N {
                out[i] = $table[i].field;
                i += 1;
            }
            out
        };
        &OUT
    }};
}

/// A figure from the walk of the TCP sockets (`NetTable::connections`), with what that walk
/// covers: one wording for the three fields it gives.
macro_rules! walked {
    ($what:literal) => {
        concat!(
            $what,
            " (BPF socket walk; where the kernel refuses the walk of every owned socket, the kernel's TCP tables are \
             walked every 10 s, another network namespace's only where the agent may enter it: proctor doctor says \
             which)."
        )
    };
}

/// The fields of one process ([`crate::process::ProcessOut`]), in its order, each with how it is
/// read from the agent's row and from the public shape, and its per-process `/metrics` family.
/// The one field-access table: `top`'s columns and sort, sort keys, alert rules and `/metrics`
/// read fields through it (a test holds the two readers equal on live rows).
pub const PROCESS_FIELDS: &[ProcessField] = &[
    ProcessField {
        field: Field { name: "pid", title: "PID", unit: Unit::Count, description: "Process id." },
        row: |_, r| num(r.pid),
        out: |p| num(p.pid),
        prom: None,
    },
    ProcessField {
        field: Field { name: "ppid", title: "PPID", unit: Unit::Count, description: "Parent's process id." },
        row: |_, r| num(r.ppid),
        out: |p| num(p.ppid),
        prom: None,
    },
    ProcessField {
        field: Field { name: "name", title: "Name", unit: Unit::Text, description: "`comm`: the kernel's 15-byte name, set by the process itself (attacker-controlled)." },
        row: |_, r| text(&r.comm),
        out: |p| text(&p.name),
        prom: None,
    },
    ProcessField {
        field: Field { name: "cmdline", title: "Command", unit: Unit::TextList, description: "Arguments; null until the cmdline worker read them, empty for kernel threads." },
        row: |_, r| joined(r.cmdline.as_deref()),
        out: |p| joined(p.cmdline.as_deref()),
        prom: None,
    },
    ProcessField {
        field: Field { name: "state", title: "S", unit: Unit::Text, description: "State letter: R running, S sleeping, D uninterruptible, Z zombie, T stopped, I idle." },
        row: |_, r| state(r.state),
        out: |p| state(p.state),
        prom: None,
    },
    ProcessField {
        field: Field { name: "uid", title: "UID", unit: Unit::Count, description: "Real user id." },
        row: |_, r| opt(r.uid),
        out: |p| opt(p.uid),
        prom: None,
    },
    ProcessField {
        field: Field { name: "cpu_percent", title: "CPU%", unit: Unit::Percent, description: "Percent of one CPU over the last interval (200 = two CPUs busy), as top shows it." },
        row: |_, r| opt(r.cpu_percent),
        out: |p| opt(p.cpu_percent),
        prom: None,
    },
    ProcessField {
        field: Field { name: "cpu_percent_of_effective", title: "CPU%eff", unit: Unit::Percent, description: "Percent of the container's effective CPUs." },
        row: |_, r| opt(r.cpu_percent_of_effective),
        out: |p| opt(p.cpu_percent_of_effective),
        prom: None,
    },
    ProcessField {
        field: Field { name: "cpu_seconds_total", title: "TIME", unit: Unit::Seconds, description: "CPU time used since the process started (user + system)." },
        row: |c, r| num(r.cpu_ticks_total as f64 / c.ticks_per_sec),
        out: |p| num(p.cpu_seconds_total),
        prom: Some(PromFamily { name: "proctor_process_cpu_seconds", kind: Kind::Counter, help: "CPU time of each of the top processes.", omit_empty: false }),
    },
    ProcessField {
        field: Field { name: "start_time_unix_secs", title: "Started", unit: Unit::UnixSeconds, description: "When the process started." },
        row: |c, r| opt(c.boot_unix_secs.map(|b| b as f64 + r.start_ticks as f64 / c.ticks_per_sec)),
        out: |p| opt(p.start_time_unix_secs),
        prom: None,
    },
    ProcessField {
        field: Field { name: "rss_bytes", title: "RSS", unit: Unit::Bytes, description: "Resident memory." },
        row: |_, r| bytes(r.rss_bytes),
        out: |p| bytes(p.rss_bytes),
        prom: Some(PromFamily { name: "proctor_process_resident_bytes", kind: Kind::Gauge, help: "Resident memory of each of the top processes.", omit_empty: false }),
    },
    ProcessField {
        field: Field { name: "anon_bytes", title: "Anon", unit: Unit::Bytes, description: "Resident anonymous memory (heap, stacks)." },
        row: |_, r| bytes(r.anon_bytes),
        out: |p| bytes(p.anon_bytes),
        prom: None,
    },
    ProcessField {
        field: Field { name: "file_bytes", title: "File", unit: Unit::Bytes, description: "Resident file-backed memory (code, mapped files)." },
        row: |_, r| bytes(r.file_bytes),
        out: |p| bytes(p.file_bytes),
        prom: None,
    },
    ProcessField {
        field: Field { name: "shmem_bytes", title: "Shmem", unit: Unit::Bytes, description: "Resident shared memory (tmpfs, SysV and POSIX shm)." },
        row: |_, r| bytes(r.shmem_bytes),
        out: |p| bytes(p.shmem_bytes),
        prom: None,
    },
    ProcessField {
        field: Field { name: "swap_bytes", title: "Swap", unit: Unit::Bytes, description: "Swapped-out memory." },
        row: |_, r| bytes(r.swap_bytes),
        out: |p| bytes(p.swap_bytes),
        prom: None,
    },
    ProcessField {
        field: Field { name: "vsize_bytes", title: "Virt", unit: Unit::Bytes, description: "Virtual address space." },
        row: |_, r| count(r.vsize_bytes),
        out: |p| count(p.vsize_bytes),
        prom: Some(PromFamily { name: "proctor_process_virtual_bytes", kind: Kind::Gauge, help: "Virtual memory size of each of the top processes.", omit_empty: false }),
    },
    ProcessField {
        field: Field { name: "threads", title: "Thr", unit: Unit::Count, description: "Threads." },
        row: |_, r| count(r.threads),
        out: |p| count(p.threads),
        prom: Some(PromFamily { name: "proctor_process_threads", kind: Kind::Gauge, help: "Threads of each of the top processes.", omit_empty: false }),
    },
    ProcessField {
        field: Field { name: "major_faults_per_sec", title: "MajFlt/s", unit: Unit::PerSec, description: "Major page faults (a read from disk) per second over the last interval." },
        row: |_, r| opt(r.major_faults_per_sec),
        out: |p| opt(p.major_faults_per_sec),
        prom: None,
    },
    ProcessField {
        field: Field { name: "read_bytes_per_sec", title: "Read/s", unit: Unit::BytesPerSec, description: "Bytes read from storage per second (with --io)." },
        row: |_, r| opt(r.read_bytes_per_sec),
        out: |p| opt(p.read_bytes_per_sec),
        prom: None,
    },
    ProcessField {
        field: Field { name: "write_bytes_per_sec", title: "Write/s", unit: Unit::BytesPerSec, description: "Bytes written to storage per second (with --io)." },
        row: |_, r| opt(r.write_bytes_per_sec),
        out: |p| opt(p.write_bytes_per_sec),
        prom: None,
    },
    ProcessField {
        field: Field { name: "io_bytes_per_sec", title: "IO/s", unit: Unit::BytesPerSec, description: "Bytes read and written per second, together (with --io), as htop's IO_RATE." },
        row: |_, r| opt(crate::process::io_rate(r)),
        out: |p| opt(p.io_bytes_per_sec),
        prom: None,
    },
    ProcessField {
        field: Field { name: "net_rx_bytes_per_sec", title: "NetRx/s", unit: Unit::BytesPerSec, description: "IP bytes received per second for its TCP and UDP sockets, headers included (BPF)." },
        row: |_, r| opt(r.net.as_deref().map(|n| n.rx_bytes_per_sec)),
        out: |p| opt(p.net_rx_bytes_per_sec),
        prom: None,
    },
    ProcessField {
        field: Field { name: "net_tx_bytes_per_sec", title: "NetTx/s", unit: Unit::BytesPerSec, description: "IP bytes sent per second from its TCP and UDP sockets, headers and ACKs included (BPF)." },
        row: |_, r| opt(r.net.as_deref().map(|n| n.tx_bytes_per_sec)),
        out: |p| opt(p.net_tx_bytes_per_sec),
        prom: None,
    },
    ProcessField {
        field: Field { name: "net_retransmits_per_sec", title: "Retr/s", unit: Unit::PerSec, description: "TCP segments its sockets retransmitted per second (BPF)." },
        row: |_, r| opt(r.net.as_deref().map(|n| n.retransmits_per_sec)),
        out: |p| opt(p.net_retransmits_per_sec),
        prom: None,
    },
    ProcessField {
        field: Field { name: "net_connects_per_sec", title: "Conn/s", unit: Unit::PerSec, description: "TCP connections it started per second (BPF)." },
        row: |_, r| opt(r.net.as_deref().map(|n| n.connects_per_sec)),
        out: |p| opt(p.net_connects_per_sec),
        prom: None,
    },
    ProcessField {
        field: Field { name: "net_connections", title: "Conns", unit: Unit::Count, description: walked!("Its established TCP connections") },
        row: |_, r| opt(r.net_total.as_deref().map(|n| n.connections)),
        out: |p| opt(p.net_connections),
        prom: Some(PromFamily { name: "proctor_process_tcp_connections", kind: Kind::Gauge, help: "Established TCP connections of each of the top processes.", omit_empty: true }),
    },
    ProcessField {
        field: Field { name: "net_rtt_seconds", title: "RTT", unit: Unit::Seconds, description: walked!("Median smoothed round-trip time over its established TCP connections") },
        row: |_, r| opt(r.net_total.as_deref().and_then(|n| n.srtt_median_us).map(|us| f64::from(us) / 1e6)),
        out: |p| opt(p.net_rtt_seconds),
        prom: Some(PromFamily { name: "proctor_process_tcp_rtt_seconds", kind: Kind::Gauge, help: "Median smoothed round-trip time over the process's established TCP connections.", omit_empty: true }),
    },
    ProcessField {
        field: Field { name: "net_rtt_max_seconds", title: "RTTmax", unit: Unit::Seconds, description: walked!("Longest smoothed round-trip time over its established TCP connections") },
        row: |_, r| opt(r.net_total.as_deref().and_then(|n| n.srtt_max_us).map(|us| f64::from(us) / 1e6)),
        out: |p| opt(p.net_rtt_max_seconds),
        prom: Some(PromFamily { name: "proctor_process_tcp_rtt_max_seconds", kind: Kind::Gauge, help: "Longest smoothed round-trip time over the process's established TCP connections.", omit_empty: true }),
    },
    ProcessField {
        field: Field { name: "net_rx_bytes_total", title: "NetRx", unit: Unit::Bytes, description: "IP bytes received for its sockets since proctor began counting (BPF)." },
        row: |_, r| opt(r.net_total.as_deref().map(|n| n.rx_bytes() as f64)),
        out: |p| opt(p.net_rx_bytes_total.map(|b| b as f64)),
        prom: Some(PromFamily { name: "proctor_process_network_receive_bytes", kind: Kind::Counter, help: "IP bytes received for each of the top processes' TCP and UDP sockets, headers included.", omit_empty: true }),
    },
    ProcessField {
        field: Field { name: "net_tx_bytes_total", title: "NetTx", unit: Unit::Bytes, description: "IP bytes sent from its sockets since proctor began counting (BPF)." },
        row: |_, r| opt(r.net_total.as_deref().map(|n| n.tx_bytes() as f64)),
        out: |p| opt(p.net_tx_bytes_total.map(|b| b as f64)),
        prom: Some(PromFamily { name: "proctor_process_network_transmit_bytes", kind: Kind::Counter, help: "IP bytes sent from each of the top processes' TCP and UDP sockets, headers and ACKs included.", omit_empty: true }),
    },
    ProcessField {
        field: Field { name: "net_retransmits_total", title: "Retr", unit: Unit::Count, description: "TCP segments its sockets retransmitted since proctor began counting (BPF)." },
        row: |_, r| opt(r.net_total.as_deref().map(|n| n.retransmits as f64)),
        out: |p| opt(p.net_retransmits_total.map(|b| b as f64)),
        prom: Some(PromFamily { name: "proctor_process_tcp_retransmits", kind: Kind::Counter, help: "TCP segments each of the top processes' sockets retransmitted.", omit_empty: true }),
    },
    ProcessField {
        field: Field { name: "pss_bytes", title: "PSS", unit: Unit::Bytes, description: "Proportional set size: shared pages divided among their sharers (budgeted smaps_rollup worker; see pss_age_secs)." },
        row: |_, r| bytes(r.pss.and_then(|m| m.pss_bytes)),
        out: |p| bytes(p.pss_bytes),
        prom: Some(PromFamily { name: "proctor_process_pss_bytes", kind: Kind::Gauge, help: "Proportional set size, from the budgeted smaps_rollup worker.", omit_empty: false }),
    },
    ProcessField {
        field: Field { name: "uss_bytes", title: "USS", unit: Unit::Bytes, description: "Unique set size: pages no other process maps." },
        row: |_, r| bytes(r.pss.and_then(|m| m.uss_bytes)),
        out: |p| bytes(p.uss_bytes),
        prom: None,
    },
    ProcessField {
        field: Field { name: "swap_pss_bytes", title: "SwapPSS", unit: Unit::Bytes, description: "Swap divided among its sharers." },
        row: |_, r| bytes(r.pss.and_then(|m| m.swap_pss_bytes)),
        out: |p| bytes(p.swap_pss_bytes),
        prom: None,
    },
    ProcessField {
        field: Field { name: "pss_age_secs", title: "PSS age", unit: Unit::Seconds, description: "How old the PSS reading is; null when there is none yet." },
        row: |_, r| opt(r.pss.map(|m| m.age_secs)),
        out: |p| opt(p.pss_age_secs),
        prom: Some(PromFamily { name: "proctor_process_pss_age_seconds", kind: Kind::Gauge, help: "Age of the PSS reading.", omit_empty: false }),
    },
    ProcessField {
        field: Field { name: "stall_by_proctor_seconds_total", title: "Stall", unit: Unit::Seconds, description: "The stall ledger: how long proctor's reads held this process's mmap lock (smaps_rollup or pagemap, cmdline) since proctor first saw it, each read rounded up to a whole microsecond: the holds the kernel's mmap_lock tracepoints saw where proctor traces a PSS read, else the read's wall time, an upper bound on the hold (a pagemap read holds the lock once per 2 MiB it walks)." },
        row: |_, r| opt(r.stall.map(|s| s.total_ns as f64 / 1e9)),
        out: |p| opt(p.stall_by_proctor_seconds_total),
        prom: Some(PromFamily { name: "proctor_process_stall_by_proctor_seconds", kind: Kind::Counter, help: "How long proctor's reads held the process's mmap lock (traced, or their wall time: an upper bound).", omit_empty: false }),
    },
    ProcessField {
        field: Field { name: "stall_by_proctor_max_seconds", title: "Stall max", unit: Unit::Seconds, description: "The longest single such read." },
        row: |_, r| opt(r.stall.map(|s| s.max_ns as f64 / 1e9)),
        out: |p| opt(p.stall_by_proctor_max_seconds),
        prom: Some(PromFamily { name: "proctor_process_stall_by_proctor_max_seconds", kind: Kind::Gauge, help: "The longest single proctor read that took the process's mmap lock.", omit_empty: false }),
    },
    ProcessField {
        field: Field { name: "stall_target_waited_seconds_total", title: "Waited", unit: Unit::Seconds, description: "The target's side of the stall ledger: how long the process's own threads waited for their mmap lock while a proctor read held it, from the kernel's mmap_lock tracepoints; null where proctor cannot trace them (proctor doctor says why)." },
        row: |_, r| opt(r.stall.and_then(|s| s.waited_ns).map(|w| w as f64 / 1e9)),
        out: |p| opt(p.stall_target_waited_seconds_total),
        prom: Some(PromFamily { name: "proctor_process_stall_target_waited_seconds", kind: Kind::Counter, help: "How long the process's threads waited for their mmap lock while a proctor read held it (mmap_lock tracepoints).", omit_empty: true }),
    },
    ProcessField {
        field: Field { name: "pss_estimated_from", title: "PSS from", unit: Unit::Count, description: "Where the PSS figures are not this process's own reading: the pid of its clone (same parent and name, resident size and faults within 16 pages) whose reading stands in for it until it is read itself; null otherwise." },
        row: |_, r| opt(r.pss.and_then(|m| m.estimated_from)),
        out: |p| opt(p.pss_estimated_from),
        prom: None,
    },
    ProcessField {
        field: Field { name: "pss_note", title: "PSS note", unit: Unit::Text, description: "Why PSS is not read, when it is not: one read held the process's mmap lock past the cap (serve --target-max-hold), the kernel refused the read (another user namespace, or the ptrace access check), or the read is put off while the host is busy and would likely hold the lock past that cap." },
        row: |_, r| crate::process::pss_note(r.stall).map_or(Reading::Missing, text),
        out: |p| p.pss_note.as_deref().map_or(Reading::Missing, text),
        prom: None,
    },
    ProcessField {
        field: Field { name: "cgroup", title: "Cgroup", unit: Unit::Text, description: "The process's cgroup path: the v1 memory controller's where one is mounted (a hybrid host), else v2's; through the BPF task scan it follows a process moved to another cgroup." },
        row: |_, r| r.cgroup.as_deref().map_or(Reading::Missing, text),
        out: |p| p.cgroup.as_deref().map_or(Reading::Missing, text),
        prom: None,
    },
    ProcessField {
        field: Field { name: "gpu_percent", title: "GPU%", unit: Unit::Percent, description: "The busiest GPU engine's busy share over the interval (DRM fdinfo), or NVML's SM share; null for a process holding no GPU." },
        row: |_, r| opt(r.gpu.as_ref().and_then(|g| g.busy_percent)),
        out: |p| opt(p.gpu_percent),
        prom: Some(PromFamily { name: "proctor_process_gpu_busy_ratio", kind: Kind::Gauge, help: "The busiest GPU engine's share (DRM) or NVML's SM share, of each top process holding a GPU.", omit_empty: true }),
    },
    ProcessField {
        field: Field { name: "gpu_memory_bytes", title: "GPUmem", unit: Unit::Bytes, description: "GPU memory held by the process's DRM clients (every region) plus NVML's used memory." },
        row: |_, r| bytes(r.gpu.as_ref().and_then(|g| g.memory_bytes)),
        out: |p| bytes(p.gpu_memory_bytes),
        prom: Some(PromFamily { name: "proctor_process_gpu_memory_bytes", kind: Kind::Gauge, help: "GPU memory of each top process holding a GPU.", omit_empty: true }),
    },
];

/// The fields of one process, as [`Field`]s (every other table's shape).
pub const PROCESS: &[Field] = fields_of!(PROCESS_FIELDS);

/// The fields of one process group (`proctor_groups::GroupRow`: `/api/v1/groups`' rows less
/// the agent's counter, and `proctor dump group`'s columns), in its order. Each with how it is read from a row and its `/metrics` family.
pub const GROUP_FIELDS: &[GroupField] = &[
    GroupField {
        field: Field { name: "name", title: "Group", unit: Unit::Text, description: "The group's name: a rule's name template, a cgroup's unit, container or pod, or a user." },
        read: |g| text(&g.name),
        prom: None,
    },
    GroupField {
        field: Field { name: "processes", title: "Procs", unit: Unit::Count, description: "Member processes." },
        read: |g| count(g.processes),
        prom: Some(PromFamily { name: "proctor_group_processes", kind: Kind::Gauge, help: "Processes in each group.", omit_empty: false }),
    },
    GroupField {
        field: Field { name: "threads", title: "Thr", unit: Unit::Count, description: "Members' threads." },
        read: |g| count(g.threads),
        prom: Some(PromFamily { name: "proctor_group_threads", kind: Kind::Gauge, help: "Threads in each group.", omit_empty: false }),
    },
    GroupField {
        field: Field { name: "cpu_percent", title: "CPU%", unit: Unit::Percent, description: "Percent of one CPU over the interval, members' reaped children included." },
        read: |g| num(g.cpu_percent),
        prom: None,
    },
    GroupField {
        field: Field { name: "reaped_cpu_percent", title: "Reaped%", unit: Unit::Percent, description: "The part of cpu_percent used by processes that ended since the previous sample unseen or partly seen: members' children (from cutime/cstime), and with BPF process events this group's short-lived processes wherever they were reaped." },
        read: |g| num(g.reaped_cpu_percent),
        prom: None,
    },
    GroupField {
        field: Field { name: "cpu_user_percent", title: "User%", unit: Unit::Percent, description: "cpu_percent's user time, reaped children's (cutime) included." },
        read: |g| num(g.cpu_user_percent),
        prom: None,
    },
    GroupField {
        field: Field { name: "cpu_system_percent", title: "Sys%", unit: Unit::Percent, description: "cpu_percent's system time, reaped children's (cstime) included." },
        read: |g| num(g.cpu_system_percent),
        prom: None,
    },
    GroupField {
        field: Field { name: "cpu_seconds_total", title: "TIME", unit: Unit::Seconds, description: "CPU seconds members used since they started, summed." },
        read: |g| num(g.cpu_seconds_total),
        prom: None,
    },
    GroupField {
        field: Field { name: "rss_bytes", title: "RSS", unit: Unit::Bytes, description: "Members' resident memory, summed." },
        read: |g| count(g.rss_bytes),
        prom: Some(PromFamily { name: "proctor_group_resident_bytes", kind: Kind::Gauge, help: "Resident memory of each group, summed.", omit_empty: false }),
    },
    GroupField {
        field: Field { name: "pss_bytes", title: "PSS", unit: Unit::Bytes, description: "PSS of the members whose PSS is known (pss_known of processes)." },
        read: |g| count(g.pss_bytes),
        prom: Some(PromFamily { name: "proctor_group_pss_bytes", kind: Kind::Gauge, help: "PSS summed over the members whose PSS is known (see proctor_group_pss_known_processes).", omit_empty: false }),
    },
    GroupField {
        field: Field { name: "pss_known", title: "PSS of", unit: Unit::Count, description: "Members whose PSS is known." },
        read: |g| count(g.pss_known),
        prom: Some(PromFamily { name: "proctor_group_pss_known_processes", kind: Kind::Gauge, help: "Members whose PSS is known.", omit_empty: false }),
    },
    GroupField {
        field: Field { name: "uss_bytes", title: "USS", unit: Unit::Bytes, description: "USS of the members whose PSS is known." },
        read: |g| count(g.uss_bytes),
        prom: None,
    },
    GroupField {
        field: Field { name: "swap_bytes", title: "Swap", unit: Unit::Bytes, description: "Members' swapped-out memory." },
        read: |g| count(g.swap_bytes),
        prom: Some(PromFamily { name: "proctor_group_swap_bytes", kind: Kind::Gauge, help: "Swapped-out memory of each group, summed.", omit_empty: false }),
    },
    GroupField {
        field: Field { name: "major_faults_per_sec", title: "MajFlt/s", unit: Unit::PerSec, description: "Major page faults per second, reaped children's included (cmajflt)." },
        read: |g| num(g.major_faults_per_sec),
        prom: Some(PromFamily { name: "proctor_group_major_faults_per_second", kind: Kind::Gauge, help: "Major page faults per second over the last interval, summed.", omit_empty: false }),
    },
    GroupField {
        field: Field { name: "minor_faults_per_sec", title: "MinFlt/s", unit: Unit::PerSec, description: "Minor page faults per second, reaped children's included (cminflt)." },
        read: |g| num(g.minor_faults_per_sec),
        prom: Some(PromFamily { name: "proctor_group_minor_faults_per_second", kind: Kind::Gauge, help: "Minor page faults per second over the last interval, summed.", omit_empty: false }),
    },
    GroupField {
        field: Field { name: "read_bytes_per_sec", title: "Read/s", unit: Unit::BytesPerSec, description: "Bytes members read from storage per second (with --io)." },
        read: |g| opt(g.read_bytes_per_sec),
        prom: None,
    },
    GroupField {
        field: Field { name: "write_bytes_per_sec", title: "Write/s", unit: Unit::BytesPerSec, description: "Bytes members wrote to storage per second (with --io)." },
        read: |g| opt(g.write_bytes_per_sec),
        prom: None,
    },
    GroupField {
        field: Field { name: "net_rx_bytes_per_sec", title: "NetRx/s", unit: Unit::BytesPerSec, description: "IP bytes members' sockets received per second, TCP and UDP (with --net)." },
        read: |g| opt(g.net_rx_bytes_per_sec),
        prom: Some(PromFamily { name: "proctor_group_network_receive_bytes_per_second", kind: Kind::Gauge, help: "IP bytes each group's sockets received per second over the last interval (--net), summed.", omit_empty: true }),
    },
    GroupField {
        field: Field { name: "net_tx_bytes_per_sec", title: "NetTx/s", unit: Unit::BytesPerSec, description: "IP bytes members' sockets sent per second, TCP and UDP (with --net)." },
        read: |g| opt(g.net_tx_bytes_per_sec),
        prom: Some(PromFamily { name: "proctor_group_network_transmit_bytes_per_second", kind: Kind::Gauge, help: "IP bytes each group's sockets sent per second over the last interval (--net), summed.", omit_empty: true }),
    },
    GroupField {
        field: Field { name: "net_retransmits_per_sec", title: "Retrans/s", unit: Unit::PerSec, description: "TCP segments members retransmitted per second (with --net)." },
        read: |g| opt(g.net_retransmits_per_sec),
        prom: Some(PromFamily { name: "proctor_group_tcp_retransmits_per_second", kind: Kind::Gauge, help: "TCP segments each group retransmitted per second over the last interval (--net), summed.", omit_empty: true }),
    },
    GroupField {
        field: Field { name: "net_connects_per_sec", title: "Conn/s", unit: Unit::PerSec, description: "TCP connects members made per second (with --net)." },
        read: |g| opt(g.net_connects_per_sec),
        prom: None,
    },
    GroupField {
        field: Field { name: "net_connections", title: "Conns", unit: Unit::Count, description: "Members' established TCP connections, from the walk of the sockets (each sample; with --net)." },
        read: |g| opt(g.net_connections.map(|c| c as f64)),
        prom: Some(PromFamily { name: "proctor_group_tcp_connections", kind: Kind::Gauge, help: "Established TCP connections of each group's members (--net), summed.", omit_empty: true }),
    },
    GroupField {
        field: Field { name: "open_fds", title: "FDs", unit: Unit::Count, description: "Open fds of the members whose count is known (fds_known of processes; Linux 6.2 and later)." },
        read: |g| count(g.open_fds),
        prom: Some(PromFamily { name: "proctor_group_open_fds", kind: Kind::Gauge, help: "Open fds summed over the members whose count is known (see proctor_group_fds_known_processes).", omit_empty: false }),
    },
    GroupField {
        field: Field { name: "fds_known", title: "FDs of", unit: Unit::Count, description: "Members whose open fds were counted." },
        read: |g| count(g.fds_known),
        prom: Some(PromFamily { name: "proctor_group_fds_known_processes", kind: Kind::Gauge, help: "Members whose open fds were counted.", omit_empty: false }),
    },
    GroupField {
        field: Field { name: "oldest_start_unix_secs", title: "Oldest", unit: Unit::UnixSeconds, description: "When the group's oldest member started." },
        read: |g| opt(g.oldest_start_unix_secs),
        prom: None,
    },
    GroupField {
        field: Field { name: "started", title: "Started", unit: Unit::Count, description: "Members that appeared since the previous sample." },
        read: |g| count(g.started),
        prom: None,
    },
    GroupField {
        field: Field { name: "exited", title: "Exited", unit: Unit::Count, description: "Members of the previous sample that are gone." },
        read: |g| count(g.exited),
        prom: None,
    },
];

/// The fields of one process group, as [`Field`]s.
pub const GROUP: &[Field] = fields_of!(GROUP_FIELDS);

/// The host's scalar fields ([`crate::snapshot::HostOut`] flattened; the per-CPU, per-disk and
/// per-interface lists are left out: they are not columns).
pub const HOST: &[Field] = &[
    Field { name: "online_cpus", title: "CPUs", unit: Unit::Count, description: "CPUs online." },
    Field {
        name: "cpu.user_percent",
        title: "User%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in user mode (nice excluded) over the interval.",
    },
    Field {
        name: "cpu.nice_percent",
        title: "Nice%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in user mode at positive nice over the interval.",
    },
    Field {
        name: "cpu.system_percent",
        title: "System%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in kernel mode over the interval.",
    },
    Field {
        name: "cpu.idle_percent",
        title: "Idle%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in idle over the interval.",
    },
    Field {
        name: "cpu.iowait_percent",
        title: "Iowait%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in idle with I/O outstanding over the interval.",
    },
    Field {
        name: "cpu.irq_percent",
        title: "Irq%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in hard interrupts over the interval.",
    },
    Field {
        name: "cpu.softirq_percent",
        title: "Softirq%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in soft interrupts over the interval.",
    },
    Field {
        name: "cpu.steal_percent",
        title: "Steal%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in stolen by the hypervisor over the interval.",
    },
    Field {
        name: "cpu.busy_percent",
        title: "Busy%",
        unit: Unit::Percent,
        description: "Share of all CPUs' time in everything but idle and iowait over the interval.",
    },
    Field {
        name: "memory.total_bytes",
        title: "Mem",
        unit: Unit::Bytes,
        description: "Memory the kernel manages (MemTotal).",
    },
    Field {
        name: "memory.available_bytes",
        title: "Avail",
        unit: Unit::Bytes,
        description: "Memory available for new work without swapping (MemAvailable).",
    },
    Field { name: "memory.used_bytes", title: "Used", unit: Unit::Bytes, description: "total − available." },
    Field { name: "memory.swap_total_bytes", title: "SwapTotal", unit: Unit::Bytes, description: "Swap space." },
    Field { name: "memory.swap_used_bytes", title: "SwapUsed", unit: Unit::Bytes, description: "Swap in use." },
    Field {
        name: "load.avg1",
        title: "Load1",
        unit: Unit::Number,
        description: "Load average over 1 minute (runnable and uninterruptible tasks).",
    },
    Field {
        name: "load.avg5",
        title: "Load5",
        unit: Unit::Number,
        description: "Load average over 5 minutes (runnable and uninterruptible tasks).",
    },
    Field {
        name: "load.avg15",
        title: "Load15",
        unit: Unit::Number,
        description: "Load average over 15 minutes (runnable and uninterruptible tasks).",
    },
    Field {
        name: "pressure_cpu.some.avg10",
        title: "PSI cpu some 10s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for cpu, averaged over 10 s.",
    },
    Field {
        name: "pressure_cpu.some.avg60",
        title: "PSI cpu some 60s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for cpu, averaged over 60 s.",
    },
    Field {
        name: "pressure_cpu.some.avg300",
        title: "PSI cpu some 300s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for cpu, averaged over 300 s.",
    },
    Field {
        name: "pressure_cpu.some.total_seconds",
        title: "PSI cpu some total",
        unit: Unit::Seconds,
        description: "Pressure stall: total time some tasks waited for cpu.",
    },
    Field {
        name: "pressure_cpu.full.avg10",
        title: "PSI cpu full 10s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for cpu, averaged over 10 s.",
    },
    Field {
        name: "pressure_cpu.full.avg60",
        title: "PSI cpu full 60s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for cpu, averaged over 60 s.",
    },
    Field {
        name: "pressure_cpu.full.avg300",
        title: "PSI cpu full 300s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for cpu, averaged over 300 s.",
    },
    Field {
        name: "pressure_cpu.full.total_seconds",
        title: "PSI cpu full total",
        unit: Unit::Seconds,
        description: "Pressure stall: total time all non-idle tasks waited for cpu.",
    },
    Field {
        name: "pressure_memory.some.avg10",
        title: "PSI memory some 10s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for memory, averaged over 10 s.",
    },
    Field {
        name: "pressure_memory.some.avg60",
        title: "PSI memory some 60s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for memory, averaged over 60 s.",
    },
    Field {
        name: "pressure_memory.some.avg300",
        title: "PSI memory some 300s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for memory, averaged over 300 s.",
    },
    Field {
        name: "pressure_memory.some.total_seconds",
        title: "PSI memory some total",
        unit: Unit::Seconds,
        description: "Pressure stall: total time some tasks waited for memory.",
    },
    Field {
        name: "pressure_memory.full.avg10",
        title: "PSI memory full 10s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for memory, averaged over 10 s.",
    },
    Field {
        name: "pressure_memory.full.avg60",
        title: "PSI memory full 60s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for memory, averaged over 60 s.",
    },
    Field {
        name: "pressure_memory.full.avg300",
        title: "PSI memory full 300s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for memory, averaged over 300 s.",
    },
    Field {
        name: "pressure_memory.full.total_seconds",
        title: "PSI memory full total",
        unit: Unit::Seconds,
        description: "Pressure stall: total time all non-idle tasks waited for memory.",
    },
    Field {
        name: "pressure_io.some.avg10",
        title: "PSI io some 10s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for io, averaged over 10 s.",
    },
    Field {
        name: "pressure_io.some.avg60",
        title: "PSI io some 60s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for io, averaged over 60 s.",
    },
    Field {
        name: "pressure_io.some.avg300",
        title: "PSI io some 300s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time some tasks waited for io, averaged over 300 s.",
    },
    Field {
        name: "pressure_io.some.total_seconds",
        title: "PSI io some total",
        unit: Unit::Seconds,
        description: "Pressure stall: total time some tasks waited for io.",
    },
    Field {
        name: "pressure_io.full.avg10",
        title: "PSI io full 10s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for io, averaged over 10 s.",
    },
    Field {
        name: "pressure_io.full.avg60",
        title: "PSI io full 60s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for io, averaged over 60 s.",
    },
    Field {
        name: "pressure_io.full.avg300",
        title: "PSI io full 300s",
        unit: Unit::Percent,
        description: "Pressure stall: share of time all non-idle tasks waited for io, averaged over 300 s.",
    },
    Field {
        name: "pressure_io.full.total_seconds",
        title: "PSI io full total",
        unit: Unit::Seconds,
        description: "Pressure stall: total time all non-idle tasks waited for io.",
    },
    Field {
        name: "context_switches_per_sec",
        title: "Ctxsw/s",
        unit: Unit::PerSec,
        description: "Context switches per second.",
    },
    Field {
        name: "forks_per_sec",
        title: "Forks/s",
        unit: Unit::PerSec,
        description: "Processes and threads created per second.",
    },
    Field { name: "page_faults_per_sec", title: "Flt/s", unit: Unit::PerSec, description: "Page faults per second." },
    Field {
        name: "major_faults_per_sec",
        title: "MajFlt/s",
        unit: Unit::PerSec,
        description: "Major page faults (a read from disk) per second.",
    },
    Field {
        name: "swap_in_pages_per_sec",
        title: "SwapIn/s",
        unit: Unit::PerSec,
        description: "Pages swapped in per second.",
    },
    Field {
        name: "swap_out_pages_per_sec",
        title: "SwapOut/s",
        unit: Unit::PerSec,
        description: "Pages swapped out per second.",
    },
    Field {
        name: "disk.read_bytes_per_sec",
        title: "DiskRd/s",
        unit: Unit::BytesPerSec,
        description: "Bytes read from whole disks per second.",
    },
    Field {
        name: "disk.write_bytes_per_sec",
        title: "DiskWr/s",
        unit: Unit::BytesPerSec,
        description: "Bytes written to whole disks per second.",
    },
    Field {
        name: "net.rx_bytes_per_sec",
        title: "NetRx/s",
        unit: Unit::BytesPerSec,
        description: "Bytes received per second, every interface but lo.",
    },
    Field {
        name: "net.tx_bytes_per_sec",
        title: "NetTx/s",
        unit: Unit::BytesPerSec,
        description: "Bytes sent per second, every interface but lo.",
    },
    Field {
        name: "process_net.rx_bytes_per_sec",
        title: "IPRx/s",
        unit: Unit::BytesPerSec,
        description: "IP bytes every device received per second, lo included, as the network programs counted them (with --net).",
    },
    Field {
        name: "process_net.tx_bytes_per_sec",
        title: "IPTx/s",
        unit: Unit::BytesPerSec,
        description: "IP bytes every device sent per second, lo included, as the network programs counted them (with --net).",
    },
    Field {
        name: "process_net.unowned_rx_bytes_per_sec",
        title: "NoOwnRx/s",
        unit: Unit::BytesPerSec,
        description: "The part of process_net.rx_bytes_per_sec no process's socket took: forwarded packets, packets for no socket, answers to sockets already closed.",
    },
    Field {
        name: "process_net.unowned_tx_bytes_per_sec",
        title: "NoOwnTx/s",
        unit: Unit::BytesPerSec,
        description: "The part of process_net.tx_bytes_per_sec no process's socket made: a handshake's answers, TIME_WAIT and reset replies, forwarded packets.",
    },
    Field {
        name: "process_net.table_full",
        title: "NetFull",
        unit: Unit::Count,
        description: "Processes the kernel's network table had no room for since the programs loaded (their packets counted as unowned).",
    },
    Field { name: "processes", title: "Procs", unit: Unit::Count, description: "Processes on the host." },
    Field { name: "uptime_secs", title: "Up", unit: Unit::Seconds, description: "Time since boot." },
    Field { name: "boot_time_unix_secs", title: "Boot", unit: Unit::UnixSeconds, description: "When the host booted." },
    Field { name: "power_host_watts", title: "Power", unit: Unit::Watts, description: "The host's power over the interval: RAPL's psys zone, else its packages and DRAM, plus NVIDIA boards; null where a part is unreadable (see doctor)." },
];

/// The host's fields as alerts and `dump host` take them: the shape's [`HOST`], then every host
/// series of the catalog ([`crate::series::CATALOG`]) that is not a field of the shape
/// (`memory.cached_bytes`, `disk.busy_percent`), read from the model's host series
/// ([`host_series_value`]). So a host series added to the catalog (and computed by
/// `proctor_model::series`) is a host field at once, with the catalog's unit and meaning.
pub fn host_all() -> &'static [Field] {
    static ALL: std::sync::LazyLock<Vec<Field>> = std::sync::LazyLock::new(|| {
        let series = host_series_fields().iter().map(|(f, _)| *f);
        HOST.iter().copied().chain(series).collect()
    });
    &ALL
}

/// The host fields that are catalog series outside the shape, each with where it is in the
/// model's host series (`proctor_model::series::HOST_SERIES`): worked out once.
pub fn host_series_fields() -> &'static [(Field, usize)] {
    static SERIES: std::sync::LazyLock<Vec<(Field, usize)>> = std::sync::LazyLock::new(|| {
        (crate::series::CATALOG.iter().filter(|s| !s.field))
            .filter_map(|s| {
                let name = s.name.strip_prefix("host.")?;
                let field = Field { name, title: name, unit: s.unit, description: s.meaning };
                Some((field, proctor_model::series::index(s.name)?))
            })
            .collect()
    });
    &SERIES
}

/// Where a host field that is a catalog series outside the shape is in the model's host series,
/// by its field name (`memory.cached_bytes`); `None` for a field of the shape.
pub fn host_series_index(field: &str) -> Option<usize> {
    if let Some((_, i)) = host_series_fields().iter().find(|(f, _)| f.name == field) {
        return Some(*i);
    }
    if HOST.iter().any(|f| f.name == field) {
        return None;
    }
    proctor_model::series::index(&format!("host.{field}"))
}

/// The value of such a field in a snapshot's host view.
pub fn host_series_value(host: &proctor_model::HostView, field: &str) -> Option<f64> {
    host_series_index(field).and_then(|i| host.series[i])
}

/// The short names people type for process fields, as top, htop and pgtop users think of them:
/// the one alias table (sort keys, `top --slow`, `top`'s column and sort names, alert rules'
/// `process.NAME`). Every target is a field of [`PROCESS`]; a test holds that.
pub const ALIASES: &[(&str, &str)] = &[
    ("cpu", "cpu_percent"),
    ("rss", "rss_bytes"),
    ("mem", "rss_bytes"),
    ("pss", "pss_bytes"),
    ("uss", "uss_bytes"),
    ("swap", "swap_bytes"),
    ("vsize", "vsize_bytes"),
    ("time", "cpu_seconds_total"),
    ("majflt", "major_faults_per_sec"),
    ("read", "read_bytes_per_sec"),
    ("write", "write_bytes_per_sec"),
    ("io", "io_bytes_per_sec"),
    ("netrx", "net_rx_bytes_per_sec"),
    ("nettx", "net_tx_bytes_per_sec"),
    ("retrans", "net_retransmits_per_sec"),
    ("net.rx_bytes_per_second", "net_rx_bytes_per_sec"),
    ("net.tx_bytes_per_second", "net_tx_bytes_per_sec"),
    ("net.retransmits_per_second", "net_retransmits_per_sec"),
    ("net.connects_per_second", "net_connects_per_sec"),
    ("net.connections", "net_connections"),
    ("rtt", "net_rtt_seconds"),
];

/// The process field `name` stands for: an alias's target, or `name` itself.
pub fn unalias(name: &str) -> &str {
    ALIASES.iter().find(|(a, _)| *a == name).map_or(name, |(_, f)| f)
}

/// The process field named `name` or an alias of it.
pub fn process_field(name: &str) -> Option<&'static Field> {
    find(PROCESS, unalias(name))
}

/// The process field named `name` or an alias of it, with its readers.
pub fn process_reader(name: &str) -> Option<&'static ProcessField> {
    let name = unalias(name);
    PROCESS_FIELDS.iter().find(|f| f.field.name == name)
}

/// The group field named `name`, with its reader.
pub fn group_reader(name: &str) -> Option<&'static GroupField> {
    GROUP_FIELDS.iter().find(|f| f.field.name == name)
}

/// The field called `name` in `table`.
pub fn find(table: &'static [Field], name: &str) -> Option<&'static Field> {
    table.iter().find(|f| f.name == name)
}

/// A JSON document's leaves as (dotted name, value): what a row of `proctor dump` holds. A `null` object stays one `null` leaf; lists of objects (per-CPU,
/// per-device) are left out; lists of scalars stay one leaf.
pub fn flatten(value: serde_json::Value) -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    flatten_into("", value, &mut out);
    out
}

fn flatten_into(prefix: &str, value: serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let name = if prefix.is_empty() { key } else { format!("{prefix}.{key}") };
                flatten_into(&name, inner, out);
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {}
        other => out.push((prefix.to_string(), other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alias_names_a_process_field() {
        for (alias, field) in ALIASES {
            assert!(find(PROCESS, field).is_some(), "{alias} -> {field}");
            assert!(find(PROCESS, alias).is_none(), "{alias} is a field's own name");
            assert_eq!(process_field(alias).map(|f| f.name), Some(*field));
        }
        assert_eq!(process_field("rss_bytes").map(|f| f.name), Some("rss_bytes"));
        assert!(process_field("nosuch").is_none());
    }
    use std::collections::BTreeSet;

    /// A snapshot of this machine with rates (two samples), PSS and command lines as a live
    /// agent would have them after a while.
    fn live() -> proctor_agent::Snapshot {
        let mut sampler = proctor_sampler::Sampler::new(proctor_sampler::SamplerConfig {
            pss_budget: 0.0,
            process_io: true,
            ..proctor_sampler::SamplerConfig::default()
        });
        let first = sampler.sample();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let second = sampler.sample();
        proctor_agent::Snapshot::derive(second, Some(&first))
    }

    fn names(table: &[Field]) -> Vec<&str> {
        table.iter().map(|f| f.name).collect()
    }

    #[test]
    fn the_process_table_is_exactly_the_process_shape() {
        let s = live();
        let row = s.rows.iter().find(|r| r.pid == std::process::id()).expect("this test's own process");
        let leaves: BTreeSet<String> = flatten(serde_json::to_value(crate::process::process(&s, row)).expect("json"))
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let table: BTreeSet<String> = names(PROCESS).into_iter().map(str::to_string).collect();
        assert_eq!(leaves, table);
    }

    #[test]
    fn the_group_table_is_exactly_the_group_shape() {
        // Every field set (no null hides a name); a field added to GroupRow fails to compile here.
        let row = proctor_groups::GroupRow {
            name: "web".into(),
            processes: 2,
            threads: 3,
            cpu_percent: 1.0,
            reaped_cpu_percent: 0.5,
            cpu_user_percent: 0.75,
            cpu_system_percent: 0.25,
            cpu_seconds_total: 9.0,
            rss_bytes: 11,
            pss_bytes: 12,
            pss_known: 13,
            uss_bytes: 14,
            swap_bytes: 15,
            major_faults_per_sec: 16.0,
            minor_faults_per_sec: 17.0,
            read_bytes_per_sec: Some(18.0),
            write_bytes_per_sec: Some(19.0),
            net_rx_bytes_per_sec: Some(25.0),
            net_tx_bytes_per_sec: Some(26.0),
            net_retransmits_per_sec: Some(27.0),
            net_connects_per_sec: Some(28.0),
            net_connections: Some(29),
            open_fds: 20,
            fds_known: 21,
            oldest_start_unix_secs: Some(22.0),
            started: 23,
            exited: 24,
        };
        let leaves: BTreeSet<String> =
            flatten(serde_json::to_value(&row).expect("json")).into_iter().map(|(n, _)| n).collect();
        let table: BTreeSet<String> = names(GROUP).into_iter().map(str::to_string).collect();
        assert_eq!(leaves, table);
        // Each field's reader gives what the JSON says under its name.
        for (name, leaf) in flatten(serde_json::to_value(&row).expect("json")) {
            let f = group_reader(&name).unwrap_or_else(|| panic!("{name} has no reader"));
            reads_as(&(f.read)(&row), &leaf, &name);
        }
    }

    /// A reading is what the JSON shape prints for the field: null, the number, the text, or
    /// the arguments joined by spaces.
    fn reads_as(reading: &Reading<'_>, leaf: &serde_json::Value, what: &str) {
        use serde_json::Value;
        let same = match (reading, leaf) {
            (Reading::Missing, Value::Null) => true,
            (Reading::Num(v), Value::Number(n)) => n.as_f64() == Some(*v),
            (Reading::Text(t), Value::String(j)) => t == j,
            (Reading::Text(t), Value::Array(a)) => {
                *t == a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" ")
            }
            _ => false,
        };
        assert!(same, "{what}: read {reading:?}, the JSON says {leaf}");
    }

    /// Every host series of the catalog is a host field (alerts, `dump host`): the shape's, or
    /// one read from the model's host series by index, never both, each name once.
    #[test]
    fn every_host_series_of_the_catalog_is_a_host_field_once() {
        let all = host_all();
        let mut names: Vec<&str> = all.iter().map(|f| f.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len(), "a host field twice");
        for s in crate::series::CATALOG.iter().filter(|s| s.name.starts_with("host.")) {
            let field = &s.name["host.".len()..];
            let f = all.iter().find(|f| f.name == field).unwrap_or_else(|| panic!("{} is no host field", s.name));
            assert_eq!(f.unit, s.unit, "{}", s.name);
            match host_series_index(field) {
                Some(i) => {
                    assert!(!s.field, "{} is a field of the shape, read from it", s.name);
                    assert_eq!(proctor_model::series::HOST_SERIES[i], s.name);
                }
                None => assert!(s.field, "{} is outside the shape and the model does not compute it", s.name),
            }
        }
    }

    /// One name, one number: every catalog series that is a host field reads the same in the
    /// host document (alerts, `dump host`), the history ring (`/api/v1/history`, the
    /// dashboard) and the model's values (`report`, the rollups): on this machine, and on a
    /// host whose disks have partitions (the ring and the document once counted `sda1` again).
    #[test]
    fn host_fields_the_ring_and_the_report_agree_on_every_catalog_series() {
        use proctor_procfs::host::DiskStat;
        let disk = |name: &str, sectors: u64| DiskStat {
            name: name.into(),
            read_sectors: sectors,
            write_sectors: sectors / 2,
            ..DiskStat::default()
        };
        let live = live();
        let mut before = live.sample.clone();
        before.host.disks = vec![disk("sda", 0), disk("sda1", 0), disk("sda2", 0)];
        let mut after = live.sample.clone();
        after.mono_ns += 1_000_000_000;
        after.unix_ns += 1_000_000_000;
        after.host.disks = vec![disk("sda", 4000), disk("sda1", 3000), disk("sda2", 1000)];
        let partitioned = proctor_agent::Snapshot::derive(after.clone(), Some(&before));
        for s in [&live, &partitioned] {
            let out: std::collections::BTreeMap<String, serde_json::Value> =
                flatten(serde_json::to_value(crate::snapshot::host(s)).expect("json")).into_iter().collect();
            let ring = proctor_agent::history::History::new(s, 4, 0);
            let point = ring.maker().point(s);
            let mut checked = 0;
            for series in proctor_units::series::CATALOG.iter().filter(|c| c.field && c.live) {
                let Some(i) = proctor_model::series::index(series.name) else { continue };
                let model = s.host.series[i];
                let field = series.name.strip_prefix("host.").expect("a host series");
                let document = out.get(field).and_then(serde_json::Value::as_f64);
                let at = ring.maker().names().iter().position(|n| n == series.name).expect("the ring keeps it");
                let kept = Some(point.values[at]).filter(|v| v.is_finite());
                let same = |a: Option<f64>, b: Option<f64>| match (a, b) {
                    (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
                    (a, b) => a == b,
                };
                assert!(same(model, document), "{}: model {model:?}, document {document:?}", series.name);
                assert!(same(model, kept), "{}: model {model:?}, ring {kept:?}", series.name);
                checked += 1;
            }
            assert!(checked >= 15, "{checked}");
        }
        let read = proctor_model::series::index("host.disk.read_bytes_per_sec").expect("a series");
        assert_eq!(partitioned.host.series[read], Some(4000.0 * 512.0), "sda alone");
    }

    /// `top`'s `z` rows (the public shape's shares) and the agent's (its rows' shares) are one
    /// sum: they agree on everything the public shape carries.
    #[test]
    fn cgroup_sums_from_either_shape_agree() {
        let s = live();
        let ctx = RowCtx::of(&s);
        let path = |c: Option<&str>| c.unwrap_or("(unknown)").to_string();
        let paths: Vec<String> = s.rows.iter().map(|r| path(r.cgroup.as_deref())).collect();
        let from_rows = proctor_groups::sum(
            s.rows
                .iter()
                .zip(&paths)
                .map(|(r, p)| (p.as_str(), proctor_groups::Share::of_row(r, ctx.ticks_per_sec, ctx.boot_unix_secs))),
        );
        let outs: Vec<_> = s.rows.iter().map(|r| crate::process::process(&s, r)).collect();
        let from_outs =
            proctor_groups::sum(outs.iter().zip(&paths).map(|(p, c)| (c.as_str(), crate::process::share(p))));
        assert!(!from_rows.is_empty());
        let key = |g: &proctor_groups::GroupRow| {
            (g.name.clone(), g.processes, g.threads, g.rss_bytes, g.swap_bytes, g.pss_known, g.pss_bytes)
        };
        let mut a: Vec<_> = from_rows.iter().map(key).collect();
        let mut b: Vec<_> = from_outs.iter().map(key).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        let secs = |rows: &[proctor_groups::GroupRow]| rows.iter().map(|g| g.cpu_seconds_total).sum::<f64>();
        assert!((secs(&from_rows) - secs(&from_outs)).abs() < 1e-6);
    }

    #[test]
    fn both_readers_of_every_process_field_read_what_the_api_prints() {
        let s = live();
        let ctx = RowCtx::of(&s);
        // Live rows, and one with what a live test machine may lack (PSS, a GPU, I/O).
        let mut rows = s.rows.clone();
        let mut extra = rows.iter().find(|r| r.pid == std::process::id()).expect("own row").clone();
        extra.pss = Some(proctor_model::MemoryAge {
            pss_bytes: Some(3 << 20),
            uss_bytes: Some(2 << 20),
            swap_pss_bytes: Some(1 << 20),
            age_secs: 4.5,
            stale: false,
            estimated_from: Some(1),
        });
        extra.gpu = Some(proctor_model::gpu::ProcessGpu {
            busy_percent: Some(37.5),
            memory_bytes: Some(5 << 20),
            engines: Vec::new(),
        });
        extra.read_bytes_per_sec = Some(4096.0);
        extra.write_bytes_per_sec = Some(8192.0);
        extra.state = 'D';
        rows.push(extra);
        let mut checked = 0;
        for r in &rows {
            let out = crate::process::process(&s, r);
            let leaves: std::collections::BTreeMap<String, serde_json::Value> =
                flatten(serde_json::to_value(&out).expect("json")).into_iter().collect();
            for f in PROCESS_FIELDS {
                let (from_row, from_out) = ((f.row)(&ctx, r), (f.out)(&out));
                assert_eq!(from_row, from_out, "{} of pid {}", f.field.name, r.pid);
                reads_as(&from_row, &leaves[f.field.name], f.field.name);
                checked += 1;
            }
        }
        assert!(checked > PROCESS_FIELDS.len() * 10, "{checked} readings");
    }

    /// A frame's process turned back into a row (for rules over remote frames) reads the same
    /// through every field of the table, at the tick rate and boot time the caller picks.
    #[test]
    fn a_row_made_back_from_the_public_shape_reads_the_same() {
        let s = live();
        let ctx = RowCtx { ticks_per_sec: 1000.0, boot_unix_secs: Some(0) };
        let mut n = 0;
        for r in &s.rows {
            let mut out = crate::process::process(&s, r);
            // Whole milliseconds, as a remote agent's JSON would give them.
            out.cpu_seconds_total = (out.cpu_seconds_total * 1000.0).round() / 1000.0;
            out.start_time_unix_secs = out.start_time_unix_secs.map(|t| (t * 1000.0).round() / 1000.0);
            out.pss_bytes = Some(7 << 20);
            out.pss_age_secs = Some(2.5);
            out.pss_estimated_from = (r.pid % 3 == 0).then_some(1);
            out.gpu_memory_bytes = (r.pid % 2 == 0).then_some(3 << 20);
            let row = crate::process::row_of(&out, &ctx);
            for f in PROCESS_FIELDS {
                let (a, b) = ((f.out)(&out), (f.row)(&ctx, &row));
                let same = match (&a, &b) {
                    (Reading::Num(x), Reading::Num(y)) => (x - y).abs() <= 1e-6 * x.abs().max(1.0),
                    _ => a == b,
                };
                assert!(same, "{} of pid {}: {a:?} from the shape, {b:?} from the row", f.field.name, r.pid);
                n += 1;
            }
        }
        assert!(n > 0);
    }

    #[test]
    fn the_host_table_is_exactly_the_host_shapes_scalars() {
        let s = live();
        let leaves: Vec<(String, serde_json::Value)> =
            flatten(serde_json::to_value(crate::snapshot::host(&s)).expect("json"));
        // A pressure object this kernel does not have (`full` for cpu on older kernels) is one
        // null leaf: every other leaf is in the table, and every table name is a leaf or under a
        // null one.
        let table: BTreeSet<&str> = names(HOST).into_iter().collect();
        for (name, value) in &leaves {
            assert!(table.contains(name.as_str()) || value.is_null(), "{name} is not in fields::HOST");
        }
        for name in &table {
            let covered = leaves.iter().any(|(leaf, value)| {
                leaf == name
                    || (value.is_null() && name.strip_prefix(leaf.as_str()).is_some_and(|r| r.starts_with('.')))
            });
            assert!(covered, "fields::HOST names {name}, which the host shape does not have");
        }
    }

    #[test]
    fn docs_api_md_documents_every_field_with_its_unit() {
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md")).expect("docs/api.md");
        for f in PROCESS.iter().chain(HOST) {
            let row = format!("| `{}` | {} | {} |", f.name, f.unit.as_str(), f.description);
            assert!(docs.contains(&row), "docs/api.md lacks the row {row}");
        }
    }

    #[test]
    fn names_are_unique_and_units_follow_the_naming_rule() {
        for table in [PROCESS, HOST] {
            let unique: BTreeSet<&str> = names(table).into_iter().collect();
            assert_eq!(unique.len(), table.len());
            for f in table {
                let expected = if f.name.ends_with("_bytes_per_sec") {
                    Some(Unit::BytesPerSec)
                } else if f.name.ends_with("_bytes") {
                    Some(Unit::Bytes)
                } else if f.name.ends_with("_percent") {
                    Some(Unit::Percent)
                } else if f.name.ends_with("_per_sec") {
                    Some(Unit::PerSec)
                } else if f.name.ends_with("_watts") {
                    Some(Unit::Watts)
                } else {
                    None
                };
                if let Some(unit) = expected {
                    assert_eq!(f.unit, unit, "{}", f.name);
                }
            }
        }
    }
}
