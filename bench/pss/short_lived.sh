#!/usr/bin/env bash
# The PSS worker beside short-lived processes: `serve` while COUNT (60) python processes of
# LIFE (0.3) seconds, 20 MiB each, start one every 0.33 s; prints what the worker read and spent
# (/api/v1/agent's pss_worker). A process younger than a second when listed is read from the
# next list on (crates/proctor-sampler/src/pss.rs, YOUNG), so most of these are never read.
#   bash bench/pss/short_lived.sh                    # this checkout's release build
#   bash bench/pss/short_lived.sh OLD_BIN NEW_BIN    # each binary in turn, REPEATS (3) times
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/work.sh
COUNT=${COUNT:-60} LIFE=${LIFE:-0.3} REPEATS=${REPEATS:-3}
if (($# == 0)); then
  source bench/lib/proctor_bin.sh
  set -- "$PROCTOR_BIN"
fi
one() {
  local bin=$1 port
  port=$(free_port)
  "$bin" serve --listen "127.0.0.1:$port" --no-record --interval 1s >/dev/null 2>&1 &
  local serve=$!
  pids+=("$serve")
  for _ in $(seq 100); do curl -sf "127.0.0.1:$port/api/v1/agent" >/dev/null && break; sleep 0.1; done
  local kids=()
  for _ in $(seq "$COUNT"); do
    python3 -c "import time; b = bytearray(20 << 20); time.sleep($LIFE)" &
    kids+=($!)
    sleep 0.33
  done
  wait "${kids[@]}"
  sleep 1
  curl -s "127.0.0.1:$port/api/v1/agent" | python3 -c '
import json, sys
w = json.load(sys.stdin)["pss_worker"]
young = w.get("skipped_young", "-")
print("  reads %d, errors %d, skipped young %s, CPU %.1f ms" % (w["reads"], w["errors"], young, 1000 * w["cpu_seconds"]))'
  kill "$serve"
  wait "$serve" 2>/dev/null || true
}
echo "== $COUNT processes of $LIFE s beside serve (load $(cut -d' ' -f1-3 /proc/loadavg))"
for r in $(seq "$REPEATS"); do
  for bin in "$@"; do
    echo "run $r: $bin"
    one "$bin"
  done
done
