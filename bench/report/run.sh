#!/usr/bin/env bash
# `proctor report` over a day of 1 s samples with ~600 processes (issue #7): wall time, max RSS
# and output size, from /usr/bin/time -v, for the host summary over the whole day (text, JSON,
# plots), over its last hour, with a statsd timer correlated over the whole day, and over the
# day with every sample read (--frames 0; the default reads at most 1,000, spread by sample).
#   bash bench/report/run.sh                  # 86,400 samples, 600 processes
#   SAMPLES=3600 bash bench/report/run.sh     # an hour, quicker
#   KEEP=/tmp/day bash bench/report/run.sh    # keep (or reuse) the generated store there
#   BIN=/tmp/old/proctor CASES="day-text hour-text" bash bench/report/run.sh   # another build, some cases
# How the day is made: idle `sleep` children bring the host to TARGET processes, `proctor
# record` captures 3 real samples of it, and `day_store` (crates/proctor-store/examples) writes
# SAMPLES samples derived from the last one through proctor_store::Writer, one per synthetic
# second ending at the capture's time, counters advanced (see its header), plus one statsd flush
# every 10 s into DATA/statsd. Every process it starts is stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET=${TARGET:-600}
SAMPLES=${SAMPLES:-86400}
cargo build --release --locked --bin proctor 2>&1 | tail -1
cargo build --release --locked -p proctor-store --example day_store 2>&1 | tail -1
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/proctor}
CASES=${CASES:-day-text day-json day-plots day-timer hour-text day-every}
GEN=${CARGO_TARGET_DIR:-target}/release/examples/day_store

WORK=$(mktemp -d)
SLEEPERS=()
cleanup() {
  for pid in "${SLEEPERS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
DAY=${KEEP:-$WORK/day}
if [[ ! -f $DAY/range ]]; then
  have=$(ls /proc | grep -c '^[0-9]')
  for ((i = have; i < TARGET; i++)); do
    sleep 100000 &
    SLEEPERS+=($!)
  done
  sleep 1
  mkdir -p "$WORK/seed" "$DAY"
  "$BIN" record --dir "$WORK/seed" --interval 1s --count 3 2>/dev/null
  for pid in "${SLEEPERS[@]}"; do kill "$pid" 2>/dev/null || true; done
  SLEEPERS=()
  echo "+ $GEN $WORK/seed $DAY $SAMPLES"
  /usr/bin/time -f 'generated in %e s' "$GEN" "$WORK/seed" "$DAY" "$SAMPLES" >"$DAY/range"
fi
read -r _ FROM _ TO _ <"$DAY/range"
FROM=${FROM#@}
TO=${TO#@}
TO=${TO%:}
HOUR=$(awk -v t="$TO" 'BEGIN { printf "%.3f", t - 3600 }')
echo "store: $(cat "$DAY/range"); $(du -sb "$DAY" | cut -f1) bytes on disk ($(du -sb "$DAY/statsd" | cut -f1) of them statsd)"
echo "host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-22s %10s %12s %14s  %s\n' case "wall s" "max RSS KiB" "stdout bytes" command
measure() { # name, command...
  local name=$1; shift
  [[ " $CASES " == *" $name "* ]] || return 0
  /usr/bin/time -v -o "$WORK/$name.time" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || {
    echo "$name failed: $(tail -3 "$WORK/$name.err")"; return 0; }
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$WORK/$name.time")
  rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$WORK/$name.time")
  printf '%-22s %10.2f %12d %14d  %s\n' "$name" "$wall" "$rss" "$(stat -c %s "$WORK/$name.out")" "$*"
}
mkdir -p "$WORK/plots"
measure day-text "$BIN" report --dir "$DAY" --from "@$FROM" --to "@$TO"
measure day-json "$BIN" report --dir "$DAY" --from "@$FROM" --to "@$TO" --format json
measure day-plots "$BIN" report --dir "$DAY" --from "@$FROM" --to "@$TO" --out "$WORK/plots"
measure day-timer "$BIN" report --dir "$DAY" --from "@$FROM" --to "@$TO" --timer api.latency
measure hour-text "$BIN" report --dir "$DAY" --from "@$HOUR" --to "@$TO"
measure day-every "$BIN" report --dir "$DAY" --from "@$FROM" --to "@$TO" --frames 0
