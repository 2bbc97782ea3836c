#!/usr/bin/env bash
# What `proctor share` costs, side by side with smem on the same family in one run: a Python
# master holding OBJECT_MIB of dirty anonymous memory (default 1024) forked into WORKERS (4)
# workers, all sharing it copy-on-write.
#   bash bench/share/run.sh                       # hyperfine, 10 runs each
#   OBJECT_MIB=256 WORKERS=8 RUNS=20 bash bench/share/run.sh
#   PROCTOR_BIN=/tmp/old/proctor bash bench/share/run.sh   # another build, not rebuilt
# Prints hyperfine's table (wall time of one round; smem reads the same members' smaps), then
# proctor's own account of one round: CPU of the reads per GiB resident and the longest hold
# of a target's mmap lock. The family is ended by its pids (on Ctrl-C too); the workers die
# with their master (PR_SET_PDEATHSIG).
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/proctor_bin.sh
object=${OBJECT_MIB:-1024}
workers=${WORKERS:-4}
runs=${RUNS:-10}
tag="proctor-share-bench-$$"
fifo=$(mktemp -u)
mkfifo "$fifo"
python3 - "$object" "$workers" "$tag" >"$fifo" <<'PY' &
import ctypes, os, sys, time
object_mib, workers, tag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
data = bytearray(b"\x01") * (object_mib << 20)
for _ in range(workers):
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: die with the master
        time.sleep(3600)
        os._exit(0)
print(os.getpid(), flush=True)
time.sleep(3600)
PY
master_pid=$!
trap 'kill "$master_pid" 2>/dev/null || true; rm -f "$fifo"' EXIT
read -r master <"$fifo"
sleep 1
echo "-- family: master $master, $workers workers, ${object} MiB shared; $(nproc) cores"
times=$(mktemp)
hyperfine --warmup 2 --runs "$runs" --export-json "$times" \
  -n "proctor share" "$PROCTOR_BIN share $master --budget 1 --format json" \
  -n "smem (same members)" "smem -c 'pid pss uss' -H -P 'proctor-share-bench-[$$]'"
python3 -c '
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    median, name = r["median"] * 1e3, r["command"]
    print(f"-- median {median:.1f} ms: {name}")
' "$times" 2>/dev/null || true
rm -f "$times"
# (The pattern's bracket keeps smem from matching its own command line, which holds it.)
echo "-- smem lists $(smem -c 'pid pss uss' -H -P "proctor-share-bench-[$$]" | wc -l) processes with that pattern"
"$PROCTOR_BIN" share "$master" --budget 1 --format json | python3 -c '
import json, sys
d = json.load(sys.stdin)
s, c = d["summary"], d["cost"]
gib = s["unshared_bytes"] / 2**30
reads, cpu, held, pid = c["reads"], c["cpu_ms"], c["longest_held_ms"], c["longest_held_pid"]
n, saving, pct = s["processes"], s["saving_bytes"] / 2**30, s["saving_percent"]
print(f"-- one round: {reads} reads, {gib:.2f} GiB resident in all: {cpu:.1f} ms CPU ({cpu / gib:.1f} ms per GiB), longest hold {held:.1f} ms (pid {pid})")
print(f"-- {n} processes; sharing saves {saving:.2f} GiB, {pct:.0f} %")
'
