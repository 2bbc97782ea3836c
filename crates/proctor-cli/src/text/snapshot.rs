//! The snapshot document as `proctor snapshot` and `proctor replay` print it.

use std::io::Write;

use proctor_agent::Snapshot;
use proctor_vocab::snapshot::{AgentExtras, SnapshotOut};
use proctor_vocab::units::{bytes, opt_bytes, opt_pct, printable};
use proctor_vocab::ProcessSort;

use crate::output::{print_json, write_container, Format};

/// What `snapshot` shows and how; `replay` renders stored samples through the same code.
#[derive(Debug, Clone, Copy)]
pub struct View {
    pub top: usize,
    pub sort: ProcessSort,
    pub format: Format,
}

/// Prints the snapshot document of `s`. `stream`: one of several (JSON becomes one line each,
/// text gets a blank line after).
pub fn print_view(view: View, s: &Snapshot, stream: bool) -> anyhow::Result<()> {
    let out = proctor_vocab::snapshot::snapshot(s, view.sort, view.top, &AgentExtras::default());
    match (view.format, stream) {
        (Format::Json, false) => print_json(&out)?,
        (Format::Json, true) => {
            let mut w = std::io::stdout().lock();
            serde_json::to_writer(&mut w, &out)?;
            writeln!(w)?;
            w.flush()?;
        }
        (Format::Text, _) => {
            print_text(&out)?;
            if stream {
                println!();
            }
        }
    }
    Ok(())
}

fn print_text(o: &SnapshotOut) -> anyhow::Result<()> {
    let mut w = std::io::stdout().lock();
    let h = &o.host;
    let load = h.load.as_ref().map_or("-".to_string(), |l| format!("{:.2} {:.2} {:.2}", l.avg1, l.avg5, l.avg15));
    writeln!(
        w,
        "host       {} CPUs online · load {load} · up {}",
        h.online_cpus.map_or("?".into(), |n| n.to_string()),
        h.uptime_secs.map_or("-".into(), |u| format!("{:.1} h", u / 3600.0))
    )?;
    if let Some(c) = &h.cpu {
        writeln!(
            w,
            "cpu        busy {:.1}% (user {:.1} nice {:.1} system {:.1} iowait {:.1} irq {:.1} steal {:.1}) · {} ctxsw/s",
            c.busy_percent,
            c.user_percent,
            c.nice_percent,
            c.system_percent,
            c.iowait_percent,
            c.irq_percent + c.softirq_percent,
            c.steal_percent,
            h.context_switches_per_sec.map_or("-".into(), |v| format!("{v:.0}"))
        )?;
    }
    let m = &h.memory;
    writeln!(
        w,
        "memory     used {} of {} (available {}) · swap used {}",
        opt_bytes(m.used_bytes),
        opt_bytes(m.total_bytes),
        opt_bytes(m.available_bytes),
        opt_bytes(m.swap_used_bytes)
    )?;
    let psi = |name: &str, p: &Option<proctor_vocab::snapshot::PressureOut>| {
        p.as_ref().map(|p| {
            let some = p.some.as_ref().map_or("-".into(), |l| format!("{:.2}", l.avg10));
            let full = p.full.as_ref().map_or("-".into(), |l| format!("{:.2}", l.avg10));
            format!("{name} {some}/{full}")
        })
    };
    let psis: Vec<String> = [psi("cpu", &h.pressure_cpu), psi("memory", &h.pressure_memory), psi("io", &h.pressure_io)]
        .into_iter()
        .flatten()
        .collect();
    if !psis.is_empty() {
        writeln!(w, "pressure   {} (some/full avg10 %)", psis.join(" · "))?;
    }
    for d in &h.disks {
        if d.reads_per_sec + d.writes_per_sec > 0.0 {
            writeln!(
                w,
                "disk       {} read {}/s write {}/s busy {:.1}%",
                d.device,
                bytes(d.read_bytes_per_sec as u64),
                bytes(d.write_bytes_per_sec as u64),
                d.busy_percent
            )?;
        }
    }
    for n in &h.nets {
        if n.rx_packets_per_sec + n.tx_packets_per_sec > 0.0 {
            writeln!(
                w,
                "net        {} rx {}/s tx {}/s",
                n.device,
                bytes(n.rx_bytes_per_sec as u64),
                bytes(n.tx_bytes_per_sec as u64)
            )?;
        }
    }
    write_container(&mut w, &o.container)?;
    writeln!(w)?;
    // Read/s and Write/s only where the sample read processes' io (`--io`).
    let io = o.processes.top.iter().any(|p| p.io_bytes_per_sec.is_some());
    let rate = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{}/s", bytes(v.max(0.0) as u64)));
    writeln!(
        w,
        "{:>7} {:>7} {:>5} {:>6} {:>9} {:>9} {:>4} {}S  COMMAND",
        "PID",
        "PPID",
        "UID",
        "CPU%",
        "RSS",
        "ANON",
        "THR",
        if io { format!("{:>11} {:>11} ", "READ/s", "WRITE/s") } else { String::new() }
    )?;
    for p in &o.processes.top {
        let mut command = printable(&match p.cmdline.as_deref() {
            Some(args) if !args.is_empty() => args.join(" "),
            _ => format!("[{}]", p.name),
        });
        command.truncate(command.floor_char_boundary(80));
        let io_cells = if io {
            format!("{:>11} {:>11} ", rate(p.read_bytes_per_sec), rate(p.write_bytes_per_sec))
        } else {
            String::new()
        };
        writeln!(
            w,
            "{:>7} {:>7} {:>5} {:>6} {:>9} {:>9} {:>4} {io_cells}{}  {}",
            p.pid,
            p.ppid,
            p.uid.map_or("-".into(), |u| u.to_string()),
            opt_pct(p.cpu_percent),
            opt_bytes(p.rss_bytes),
            opt_bytes(p.anon_bytes),
            p.threads,
            p.state,
            command
        )?;
    }
    writeln!(w)?;
    let c = &o.agent.last_sample;
    let errors: Vec<String> = c.errors.iter().map(|(key, n)| format!("{key}={n}")).collect();
    writeln!(
        w,
        "self       last sample {:.2} ms wall, {:.2} ms CPU for {} processes · {} files read, {} opened, {} fds kept · {} gone mid-read · errors: {}",
        c.wall_seconds * 1e3,
        c.cpu_seconds * 1e3,
        o.processes.count,
        c.files_read,
        c.files_opened,
        c.fds_kept,
        c.processes_gone,
        if errors.is_empty() { "none".to_string() } else { errors.join(" ") }
    )?;
    Ok(())
}
