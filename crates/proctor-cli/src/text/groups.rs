//! Process groups as `proctor groups` and `proctor replay --groups` print them.

use std::io::Write;

use proctor_vocab::groups::GroupsOut;
use proctor_vocab::units::{bytes, percent, printable, seconds};

/// The groups document in aligned columns.
pub fn print_text(doc: &GroupsOut) -> anyhow::Result<()> {
    let total_groups = doc.groups.len() + doc.overflow;
    let mut out = std::io::stdout().lock();
    let rates = doc.interval_secs.map_or("no rates (one sample)".to_string(), |i| format!("rates over {}", seconds(i)));
    let shown = if doc.overflow > 0 { format!(" (the first {} shown)", doc.groups.len()) } else { String::new() };
    writeln!(out, "{total_groups} groups by {} of {} processes{shown}; {rates}", doc.by, doc.processes)?;
    if doc.ungrouped > 0 {
        writeln!(out, "{} processes matched no rule and follow no grouped parent: not shown", doc.ungrouped)?;
    }
    if doc.cmdline_unread > 0 && doc.by == "rules" {
        writeln!(
            out,
            "{} processes' command lines were not read yet: exe and cmdline rules could not take them (a longer --interval gives the reader time)",
            doc.cmdline_unread
        )?;
    }
    writeln!(
        out,
        "{:>7} {:>8} {:>6} {:>6} {:>10} {:>10} {:>16} {:>9} {:>9} {:>9} {:>12}  GROUP",
        "CPU%", "REAPED%", "PROCS", "THR", "TIME", "RSS", "PSS (known)", "SWAP", "MINFLT/s", "MAJFLT/s", "FDS (known)"
    )?;
    for g in doc.groups.iter().map(|g| g.row) {
        let pss = if g.pss_known > 0 {
            format!("{} ({}/{})", bytes(g.pss_bytes), g.pss_known, g.processes)
        } else {
            "-".into()
        };
        let fds =
            if g.fds_known > 0 { format!("{} ({}/{})", g.open_fds, g.fds_known, g.processes) } else { "-".into() };
        writeln!(
            out,
            "{:>7} {:>8} {:>6} {:>6} {:>10} {:>10} {:>16} {:>9} {:>9} {:>9} {:>12}  {}",
            percent(g.cpu_percent),
            percent(g.reaped_cpu_percent),
            g.processes,
            g.threads,
            seconds(g.cpu_seconds_total),
            bytes(g.rss_bytes),
            pss,
            bytes(g.swap_bytes),
            format!("{:.0}", g.minor_faults_per_sec),
            format!("{:.1}", g.major_faults_per_sec),
            fds,
            printable(&g.name)
        )?;
    }
    Ok(())
}
