//! Output helpers shared by the subcommands: the `--format` switch, JSON to stdout and
//! broken-pipe handling. How values are written for people is the vocabulary's
//! (`proctor_vocab::units`).

use std::io::ErrorKind;

/// How a data command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for people.
    Text,
    /// One JSON document for programs.
    Json,
}

/// A closed stdout (`proctor snapshot | head`) is a normal way for a reader to stop, not an error.
/// The write may have failed inside serde_json, which wraps the `io::Error` in its own.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == ErrorKind::BrokenPipe)
            || cause.downcast_ref::<serde_json::Error>().and_then(serde_json::Error::io_error_kind)
                == Some(ErrorKind::BrokenPipe)
    })
}

/// Writes JSON to stdout, followed by a newline.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    use std::io::Write;
    // Buffered: stdout is line-buffered, and pretty JSON is a line per value.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// The container lines of the text views (`snapshot`, `doctor`).
pub fn write_container(w: &mut impl std::io::Write, c: &proctor_vocab::snapshot::ContainerOut) -> std::io::Result<()> {
    let cpus = |v: Option<f64>| v.map_or("-".to_string(), proctor_model::format_cpus);
    writeln!(
        w,
        "container  cgroup {} {} · effective CPUs {} (rounded up {}; affinity {}, cpuset {}, quota {}) of {} online",
        c.cgroup_version.as_deref().unwrap_or("none"),
        c.cgroup_path.as_deref().unwrap_or("-"),
        cpus(c.effective_cpus),
        c.effective_cpus_ceil.map_or("-".into(), |v| v.to_string()),
        c.affinity_cpus.map_or("-".into(), |v| v.to_string()),
        c.cpuset_cpus.map_or("-".into(), |v| v.to_string()),
        cpus(c.quota_cpus),
        c.host_online_cpus.map_or("?".into(), |v| v.to_string()),
    )?;
    writeln!(
        w,
        "           memory limit {} ({}) · charged now {}",
        proctor_vocab::units::opt_bytes(c.memory_limit_bytes),
        c.memory_limit_source.as_deref().unwrap_or("-"),
        proctor_vocab::units::opt_bytes(c.memory_current_bytes)
    )?;
    for warning in &c.warnings {
        writeln!(w, "warning    {warning}")?;
    }
    Ok(())
}
