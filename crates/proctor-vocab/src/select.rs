//! Choosing and ordering processes, once for every surface: the sort keys people type
//! (`--sort mem`, `?sort=cpu`, the TUI's `P`/`M`/`T`), their default order, and the filter's
//! matching rule.

use proctor_model::ProcessRow;

use crate::fields::{ProcessField, RowCtx};

/// How processes are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProcessSort {
    Pid,
    Name,
    /// CPU percent over the last interval, then CPU seconds used since start.
    Cpu,
    /// Resident memory.
    Rss,
    Pss,
    Vsize,
    Threads,
    Swap,
    /// CPU seconds used since start (top's TIME+).
    Time,
    /// Bytes read from storage per second (with `--io`).
    Read,
    Write,
    /// Read and write together, as htop's IO_RATE.
    Io,
}

/// Every name a sort key is typed as, the canonical one first for each key.
const NAMES: [(&str, ProcessSort); 13] = [
    ("pid", ProcessSort::Pid),
    ("name", ProcessSort::Name),
    ("cpu", ProcessSort::Cpu),
    ("rss", ProcessSort::Rss),
    ("mem", ProcessSort::Rss),
    ("pss", ProcessSort::Pss),
    ("vsize", ProcessSort::Vsize),
    ("threads", ProcessSort::Threads),
    ("swap", ProcessSort::Swap),
    ("time", ProcessSort::Time),
    ("io", ProcessSort::Io),
    ("read", ProcessSort::Read),
    ("write", ProcessSort::Write),
];

impl ProcessSort {
    /// Parses a sort key: a key's name, the field it orders by, or an alias of that field in
    /// the one alias table ([`crate::fields::ALIASES`]: `mem` is `rss_bytes`, as in top).
    pub fn parse(text: &str) -> Result<ProcessSort, String> {
        let text = text.trim().to_ascii_lowercase();
        let field = crate::fields::unalias(&text);
        NAMES
            .iter()
            .find(|(name, key)| *name == text || key.field() == field)
            .map(|(_, key)| *key)
            .ok_or_else(|| format!("must be one of {}; got '{text}'", ProcessSort::names()))
    }

    /// Every name a key may be typed as, comma-separated.
    pub fn names() -> String {
        NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    }

    /// The canonical name.
    pub fn name(self) -> &'static str {
        NAMES.iter().find(|(_, key)| *key == self).map_or("cpu", |(name, _)| name)
    }

    /// The field of a process (see [`crate::fields::PROCESS`]) this key orders by.
    pub fn field(self) -> &'static str {
        match self {
            ProcessSort::Pid => "pid",
            ProcessSort::Name => "name",
            ProcessSort::Cpu => "cpu_percent",
            ProcessSort::Rss => "rss_bytes",
            ProcessSort::Pss => "pss_bytes",
            ProcessSort::Vsize => "vsize_bytes",
            ProcessSort::Threads => "threads",
            ProcessSort::Swap => "swap_bytes",
            ProcessSort::Time => "cpu_seconds_total",
            ProcessSort::Read => "read_bytes_per_sec",
            ProcessSort::Write => "write_bytes_per_sec",
            ProcessSort::Io => "io_bytes_per_sec",
        }
    }

    /// Biggest first, except for pid and name.
    pub fn descending_by_default(self) -> bool {
        !matches!(self, ProcessSort::Pid | ProcessSort::Name)
    }

    /// This key's field, with its readers.
    pub fn reader(self) -> &'static ProcessField {
        crate::fields::process_reader(self.field()).expect("every sort key names a process field (a test holds it)")
    }
}

/// Orders `rows` by `key` (ascending, unknown values smallest, as the field table orders them),
/// ties by pid (ascending), so the order is stable between samples.
pub fn sort_rows(ctx: &RowCtx, rows: &mut [&ProcessRow], key: ProcessSort, descending: bool) {
    let field = key.reader();
    rows.sort_by(|a, b| {
        let ord = field.order_rows(ctx, a, b);
        let ord = if descending { ord.reverse() } else { ord };
        ord.then(a.pid.cmp(&b.pid))
    });
}

/// The filter's rule: `needle` (lowercase) is a substring of the name or of the command line
/// (its arguments joined by single spaces, as htop matches it: `sleep 1234` finds `sleep
/// 1234`), or the exact pid.
pub fn matches(row: &ProcessRow, needle: &str) -> bool {
    matches_parts(row.pid, &row.comm, row.cmdline.as_deref(), needle)
}

/// [`matches`] over the parts of a process in any shape (a model row, a vocabulary
/// `ProcessOut`): the one filter rule.
pub fn matches_parts(pid: u32, name: &str, cmdline: Option<&[String]>, needle: &str) -> bool {
    if needle.is_empty() {
        return true;
    }
    name.to_lowercase().contains(needle)
        || pid.to_string() == needle
        || cmdline.is_some_and(|c| c.join(" ").to_lowercase().contains(needle))
}

/// A kernel thread: kthreadd (pid 2) or its child, with an empty command line once read (the
/// dashboard's and the TUI's rule; an unread command line is not taken for empty).
pub fn is_kernel_thread(pid: u32, ppid: u32, cmdline: Option<&[String]>) -> bool {
    (pid == 2 || ppid == 2) && cmdline.is_some_and(<[String]>::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_matches_the_name_the_whole_command_line_or_the_pid() {
        let cmdline: Vec<String> = ["sleep", "1234"].iter().map(|s| s.to_string()).collect();
        let m = |needle: &str| matches_parts(77, "Sleep", Some(&cmdline), needle);
        assert!(m("sleep 1234"), "across arguments, as htop's filter");
        assert!(m("p 12") && m("sleep") && m("77") && m(""));
        assert!(!m("sleep  1234") && !m("7") && !m("1234 sleep"));
        assert!(!matches_parts(77, "x", None, "sleep"), "an unread command line matches nothing");
    }

    #[test]
    fn keys_parse_with_their_aliases_and_refuse_the_rest() {
        assert_eq!(ProcessSort::parse("mem"), Ok(ProcessSort::Rss));
        assert_eq!(ProcessSort::parse("CPU"), Ok(ProcessSort::Cpu));
        assert_eq!(ProcessSort::Rss.name(), "rss");
        let err = ProcessSort::parse("comm").err().unwrap_or_default();
        assert!(err.starts_with("must be one of pid, name, cpu, rss, mem") && err.ends_with("got 'comm'"), "{err}");
        for (name, key) in NAMES {
            assert_eq!(ProcessSort::parse(name), Ok(key));
            assert!(crate::fields::PROCESS.iter().any(|f| f.name == key.field()), "{name}");
        }
    }
}
