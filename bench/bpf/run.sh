#!/usr/bin/env bash
# The BPF task iterator against the /proc floor (issue 35), in the same run: `proctor bench`
# scans every process three ways, interleaved — proctor's sampler, the floor (readdir + pread
# of each stat through kept fds, nothing parsed) and the task iterator (one read for every
# task, threads summed) — at ~600 and ~5,000 processes (sleepers started to get there, ended
# by pid after). Prints per-process CPU, medians of REPEATS (5) runs, the load, and the host's
# memory before and after (bench/lib/host_memory.sh): the scan at ~5,000 moves with it.
#   bash bench/bpf/run.sh                 # 600 and 5000
#   bash bench/bpf/run.sh 600             # one size
#   PROCTOR_BIN=/tmp/old/proctor bash bench/bpf/run.sh
# Needs what the iterator needs (root, or CAP_BPF and CAP_PERFMON, and a kernel with BTF);
# without it the iterator row says why.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/proctor_bin.sh
source bench/lib/host_memory.sh
echo "-- $(host_memory)"
python3 bench/bpf/bench.py "$@"
echo "-- $(host_memory)"
