#!/usr/bin/env bash
# Every exec and exit (issue 35): a burst of N short-lived processes (default 10,000: a shell
# runs `/bin/true` N times, each living well under a sample) beside `proctor serve` at a 1 s
# interval, three arms alternated REPEATS (3) times: the BPF process events on, off
# (`--no-process-events`: /proc alone), and no agent at all. Per arm, medians: how many of the
# burst's processes proctor saw (`dump exited` rows for the events; distinct `true` pids in the
# stored samples for /proc), the agent's own coverage figure (/api/v1/agent starts), the
# burst's wall and CPU time (what the tracepoints cost the workload), and the agent's CPU over
# the run.
#   bash bench/bpf/burst.sh           # 10000
#   bash bench/bpf/burst.sh 2000
#   PROCTOR_BIN=/tmp/old/proctor REPEATS=5 bash bench/bpf/burst.sh
# Needs root (or CAP_BPF and CAP_PERFMON) for the events arm; without it that arm says why.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/proctor_bin.sh
exec python3 bench/bpf/burst.py "$@"
