//! The shape of a process that ended (issue 35): one row per process in a sample's `exited`
//! list, for `dump exited`, the snapshot's `exited` and `top`'s ended view. Its fields are
//! [`EXITED`], held equal to the shape's keys by a test.

use crate::units::Unit;
use proctor_model::{ExitedProcess, Sample};
use serde::{Deserialize, Serialize};

use crate::fields::Field;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExitedOut {
    pub pid: u32,
    pub ppid: u32,
    pub name: String,
    pub cmdline: Option<Vec<String>>,
    pub exe: Option<String>,
    pub cgroup: Option<String>,
    pub start_time_unix_secs: f64,
    pub end_time_unix_secs: f64,
    pub lifetime_seconds: f64,
    /// `null` when a signal ended it.
    pub exit_code: Option<u32>,
    pub signal: Option<u32>,
    pub cpu_seconds: f64,
    pub cpu_user_seconds: f64,
    pub cpu_system_seconds: f64,
    pub children_cpu_seconds: f64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub peak_rss_bytes: u64,
    pub seen: bool,
    /// IP bytes its sockets received and sent over its life, as the kernel's table last had
    /// them (with `--net`; `null` without, or if it used no socket).
    pub net_rx_bytes: Option<u64>,
    pub net_tx_bytes: Option<u64>,
}

pub fn exited(x: &ExitedProcess) -> ExitedOut {
    let secs = |ns: u64| ns as f64 / 1e9;
    let signal = x.wait_status & 0x7f;
    ExitedOut {
        pid: x.pid,
        ppid: x.ppid,
        name: x.comm.to_string(),
        cmdline: x.cmdline.as_ref().map(|c| c.to_vec()),
        exe: x.exe.as_deref().map(str::to_string),
        cgroup: x.cgroup.as_deref().map(str::to_string),
        start_time_unix_secs: secs(x.end_unix_ns.saturating_sub(x.lifetime_ns)),
        end_time_unix_secs: secs(x.end_unix_ns),
        lifetime_seconds: secs(x.lifetime_ns),
        exit_code: (signal == 0).then_some((x.wait_status >> 8) & 0xff),
        signal: (signal != 0).then_some(signal),
        cpu_seconds: secs(x.user_ns + x.system_ns),
        cpu_user_seconds: secs(x.user_ns),
        cpu_system_seconds: secs(x.system_ns),
        children_cpu_seconds: secs(x.children_ns),
        minor_faults: x.minflt,
        major_faults: x.majflt,
        peak_rss_bytes: x.peak_rss_bytes,
        seen: x.seen,
        net_rx_bytes: x.net.as_ref().map(|n| n.rx_bytes()),
        net_tx_bytes: x.net.as_ref().map(|n| n.tx_bytes()),
    }
}

/// The ended processes a snapshot document lists at most (the newest to end); `count` says
/// how many ended.
pub const LISTED_MAX: usize = 256;

/// A snapshot's ended processes: how many ended since the previous sample, how many of them
/// no sample had listed alive, and the last [`LISTED_MAX`] to end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExitedListOut {
    pub count: usize,
    pub unseen: usize,
    pub listed: Vec<ExitedOut>,
}

pub fn exited_list(s: &Sample) -> ExitedListOut {
    let skip = s.exited.len().saturating_sub(LISTED_MAX);
    ExitedListOut {
        count: s.exited.len(),
        unseen: s.exited.iter().filter(|x| !x.seen).count(),
        listed: s.exited[skip..].iter().map(exited).collect(),
    }
}

/// Every ended process of a sample, in the order they ended.
pub fn exited_of(s: &Sample) -> Vec<ExitedOut> {
    s.exited.iter().map(exited).collect()
}

macro_rules! f {
    ($name:literal, $title:literal, $unit:ident, $desc:literal) => {
        Field { name: $name, title: $title, unit: Unit::$unit, description: $desc }
    };
}

/// The fields of [`ExitedOut`], in its order.
pub static EXITED: &[Field] = &[
    f!("pid", "PID", Count, "Its process id."),
    f!("ppid", "PPID", Count, "Its parent's process id when it ended."),
    f!("name", "Name", Text, "Its name when it ended (comm)."),
    f!("cmdline", "Command", TextList, "Its command line: from its exec, or as proctor last read it."),
    f!("exe", "Exe", Text, "The path it exec'd, where proctor saw the exec."),
    f!("cgroup", "Cgroup", Text, "Its cgroup."),
    f!("start_time_unix_secs", "Started", UnixSeconds, "When it started."),
    f!("end_time_unix_secs", "Ended", UnixSeconds, "When its last thread exited."),
    f!("lifetime_seconds", "Lived", Seconds, "How long it lived."),
    f!("exit_code", "Code", Count, "Its exit code; null when a signal ended it."),
    f!("signal", "Signal", Count, "The signal that ended it; null when it exited."),
    f!("cpu_seconds", "TIME", Seconds, "CPU time it used (user + system, the scheduler's total)."),
    f!("cpu_user_seconds", "User", Seconds, "CPU time in user mode."),
    f!("cpu_system_seconds", "System", Seconds, "CPU time in the kernel."),
    f!("children_cpu_seconds", "Children", Seconds, "CPU time of the children it waited for."),
    f!("minor_faults", "MinFlt", Count, "Minor page faults."),
    f!("major_faults", "MajFlt", Count, "Major page faults."),
    f!("peak_rss_bytes", "PeakRSS", Bytes, "The most it had resident at once (ru_maxrss)."),
    f!("seen", "Seen", Text, "Whether a sample listed it while it lived (false: it lived between two samples)."),
    f!(
        "net_rx_bytes",
        "NetRx",
        Bytes,
        "IP bytes its sockets received over its life, its last interval included (with --net)."
    ),
    f!(
        "net_tx_bytes",
        "NetTx",
        Bytes,
        "IP bytes its sockets sent over its life, its last interval included (with --net)."
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_fields_are_the_shapes_keys_in_order() {
        let x = ExitedProcess { comm: Arc::from("cc1"), wait_status: 9, ..ExitedProcess::default() };
        let value = serde_json::to_value(exited(&x)).expect("serializes");
        let keys: Vec<&str> = value.as_object().expect("an object").keys().map(String::as_str).collect();
        let names: Vec<&str> = EXITED.iter().map(|f| f.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted, "serde_json's map is sorted");
        assert_eq!(value["signal"], 9);
        assert!(value["exit_code"].is_null());
        let code = ExitedProcess { wait_status: 3 << 8, ..x };
        let value = serde_json::to_value(exited(&code)).expect("serializes");
        assert_eq!((value["exit_code"].as_u64(), value["signal"].is_null()), (Some(3), true));
    }
}
