# Sourced by the bench scripts whose figures move with the host's memory (the task scan at
# ~5,000 processes, the PSS reads' holds and walks), from the repository root: `host_memory`
# prints one line, how fast this host's memory is right now (crates/proctor-sampler/examples/
# host_memory.rs: a dependent load's latency over 1, 8 and 64 MiB, one smaps_rollup read of a
# 1 GiB child and how its frames lie), or why it was not measured. On a virtual machine the
# caches are shared with other guests, so a run's figures are read against the line printed
# beside them. The example is built here, whatever PROCTOR_BIN names.
host_memory() {
  if cargo build --release --locked --quiet -p proctor-sampler --example host_memory 2>/dev/null; then
    "${CARGO_TARGET_DIR:-target}/release/examples/host_memory" || echo "host memory: not measured (the probe failed)"
  else
    echo "host memory: not measured (the probe did not build)"
  fi
}
