#!/usr/bin/env bash
# How the PSS worker reads the busy children of the Netflix-shaped tree (issue 34): walks of
# their pages (2 MiB a hold) or whole `smaps_rollup` reads (one hold of the whole mapping),
# seen on `/api/v1/agent`'s `pss_worker` over one agent's life, longer than a round of
# bench/impact/run.sh (60 s) and than the 150 s after which a stopped walk's rate is forgotten.
# Starts the impact workload (CHILDREN (24) children sharing SIZE_BYTES (1 GiB), each mapping
# and touching fresh pages RATE (200) times a second), then `proctor serve --no-record` and
# ARGS on loopback, and prints the worker's counts every EVERY (15) seconds for SECONDS_TOTAL (345),
# with whose read held longest (the workload itself: the tree's quiet parent).
# Ends both by their PIDs.
#   bash bench/impact/walks.sh
#   ARGS='--pss-budget 0.001' bash bench/impact/walks.sh        # savings of 30 ms
#   PROCTOR_BIN=/tmp/old/proctor bash bench/impact/walks.sh    # another build, not rebuilt
# Needs CAP_SYS_ADMIN for the walks (else every read is whole, and the counts say so).
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/proctor_bin.sh
source bench/lib/host_memory.sh
children=${CHILDREN:-24}
size_bytes=${SIZE_BYTES:-1073741824}
rate=${RATE:-200}
seconds=${SECONDS_TOTAL:-345}
every=${EVERY:-15}
port=${PORT:-19465}
read -ra args <<<"${ARGS:-}"
echo "-- $(nproc) CPUs, $(git rev-parse --short HEAD), $(uname -r), $PROCTOR_BIN"
echo "-- load before: $(cat /proc/loadavg)"
echo "-- $(host_memory)"
"$PROCTOR_BIN" impact-workload --workload pagefault --children "$children" --size-bytes "$size_bytes" \
  --rate "$rate" >/dev/null &
workload=$!
agent=
cleanup() {
  [[ -n $agent ]] && kill "$agent" 2>/dev/null || true
  kill "$workload" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
# The tree is complete when the workload has all its children (at most 60 s).
for _ in $(seq 600); do
  [[ $(pgrep -c -P "$workload" || true) -ge $children ]] && break
  sleep 0.1
done
echo "-- workload $workload: $(pgrep -c -P "$workload" || true) children"
echo "-- $PROCTOR_BIN serve --no-record --listen 127.0.0.1:$port ${args[*]}"
"$PROCTOR_BIN" serve --no-record --listen "127.0.0.1:$port" "${args[@]}" >/dev/null 2>&1 &
agent=$!
start=$(date +%s)
for ((t = every; t <= seconds; t += every)); do
  wait_s=$((start + t - $(date +%s)))
  ((wait_s > 0)) && sleep "$wait_s"
  curl -fsS "http://127.0.0.1:$port/api/v1/agent" | python3 -c '
import json, sys
w = json.load(sys.stdin)["pss_worker"]
keys = ["reads", "pagemap_reads", "walks_stopped", "reads_walk_unaffordable", "reads_put_off_busy"]
longest, total, cpu = w["max_lock_seconds"], w["lock_seconds_total"], w.get("cpu_seconds") or 0
pid = w.get("max_lock_pid")
whose = "the workload itself" if str(pid) == sys.argv[2] else f"pid {pid}"
print(sys.argv[1].rjust(4), "s:", " ".join(f"{k} {w.get(k)}" for k in keys),
      f"longest hold {longest * 1e3:.1f} ms ({whose}), holds {total:.3f} s, cpu {cpu:.2f} s")' "$t" "$workload"
done
echo "-- load after: $(cat /proc/loadavg)"
echo "-- $(host_memory)"
