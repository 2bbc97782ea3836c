#!/usr/bin/env bash
# Recording overhead (issue #7): proctor record vs atop -w vs collectl -f, one after the other on
# the same host with ~600 processes (idle `sleep` children are added to reach TARGET), at the
# same interval. Reports per tool: CPU seconds per sample (user+sys from GNU time) and bytes
# written per sample (the size of what it wrote, divided by the samples).
#   bench/record/run.sh                          # 1 s interval, 60 samples, 600 processes
#   INTERVAL=10 SAMPLES=30 bench/record/run.sh   # the 10 s figure
# Installs atop and collectl (Debian) when missing; skips a tool that cannot be had. Every
# process it starts is stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/../.."
INTERVAL=${INTERVAL:-1}
SAMPLES=${SAMPLES:-60}
TARGET=${TARGET:-600}
cargo build --release --locked --bin proctor 2>&1 | tail -1
BIN=${CARGO_TARGET_DIR:-target}/release/proctor
if ! command -v atop >/dev/null || ! command -v collectl >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq atop collectl) >/dev/null 2>&1 \
    || echo "WARNING: could not install atop/collectl; those comparisons will be skipped"
fi

WORK=$(mktemp -d)
SLEEPERS=()
cleanup() {
  for pid in "${SLEEPERS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
have=$(ls /proc | grep -c '^[0-9]')
for ((i = have; i < TARGET; i++)); do
  sleep 100000 &
  SLEEPERS+=($!)
done
sleep 1
procs=$(ls /proc | grep -c '^[0-9]')
echo "processes: $procs, interval ${INTERVAL}s, $SAMPLES samples, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %14s %16s %12s  %s\n' tool "CPU ms/sample" "bytes/sample" "max RSS KiB" command

measure() { # name, output path, command...
  local name=$1 out=$2; shift 2
  local t="$WORK/$name.time"
  /usr/bin/time -f '%U %S %M' -o "$t" "$@" >"$WORK/$name.stdout" 2>"$WORK/$name.stderr" || {
    echo "$name failed: $(tail -2 "$WORK/$name.stderr")"; return 0; }
  read -r user sys rss <"$t"
  local bytes
  bytes=$(du -sb "$out" | cut -f1)
  awk -v n="$name" -v u="$user" -v s="$sys" -v b="$bytes" -v k="$SAMPLES" -v r="$rss" -v c="$*" \
    'BEGIN { printf "%-10s %14.2f %16.0f %12d  %s\n", n, (u + s) * 1000 / k, b / k, r, c }'
}

mkdir -p "$WORK/proctor"
measure proctor "$WORK/proctor" "$BIN" record --dir "$WORK/proctor" --interval "${INTERVAL}s" --count "$SAMPLES"
if command -v atop >/dev/null; then
  measure atop "$WORK/atop.raw" atop -w "$WORK/atop.raw" "$INTERVAL" "$SAMPLES"
fi
if command -v collectl >/dev/null; then
  mkdir -p "$WORK/collectl"
  # Every subsystem collectl records by default plus processes (Z), process interval = interval.
  measure collectl "$WORK/collectl" collectl -scdmnZ -i "$INTERVAL:$INTERVAL" -c "$SAMPLES" -f "$WORK/collectl"
fi
echo
echo "proctor record's own summary:"
cat "$WORK/proctor.stdout"
