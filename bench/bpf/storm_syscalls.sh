#!/usr/bin/env bash
# The sampling thread's system calls and CPU over one storm (bench/bpf/storm.py's driver), per
# build, the builds alternated:
#
#   bash bench/bpf/storm_syscalls.sh [ROUNDS] BIN...      # e.g. 2 /tmp/proctor-A /tmp/proctor-C
#
# Each run starts `BIN serve --interval 1s --groups` (storm.py's rules) in a scratch data dir,
# waits 4 s, then counts the `proctor-agent` thread's system calls (perf stat, the
# raw_syscalls:sys_enter tracepoint, that thread alone) and its CPU (schedstat) while the driver
# forks 10,000 children of 1-50 ms over 10 s. Needs perf and root (the tracepoint).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=2
if [[ ${1:-} =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
[ $# -ge 1 ] || { echo "usage: $0 [ROUNDS] BIN..." >&2; exit 2; }
scratch=$(mktemp -d /tmp/proctor-storm-sys.XXXX)
trap 'rm -rf "$scratch"' EXIT
printf "process_names:\n  - name: storm\n    cmdline: ['bench/bpf/storm.py']\n" > "$scratch/rules.yml"
for round in $(seq "$rounds"); do
  for bin in "$@"; do
    data=$(mktemp -d "$scratch/d.XXXX")
    "$bin" serve --listen 127.0.0.1:0 --interval 1s --data-dir "$data" --groups "$scratch/rules.yml" >/dev/null 2>&1 &
    pid=$!
    sleep 4
    tid=$(grep -l '^proctor-agent$' /proc/$pid/task/*/comm | head -1 | cut -d/ -f5)
    cpu0=$(cut -d' ' -f1 "/proc/$pid/task/$tid/schedstat")
    perf stat -x, -e raw_syscalls:sys_enter -t "$tid" -o "$scratch/perf" -- \
      env PROCTOR_BIN="$bin" python3 "$here/storm.py" 10000 10 --storm
    cpu1=$(cut -d' ' -f1 "/proc/$pid/task/$tid/schedstat")
    calls=$(grep sys_enter "$scratch/perf" | cut -d, -f1)
    echo "round $round $bin: sampling thread $calls system calls, $(( (cpu1 - cpu0) / 1000000 )) ms CPU over the storm (load $(cut -d' ' -f1-3 /proc/loadavg))"
    kill -INT "$pid"
    wait "$pid" || true
  done
done
