#!/usr/bin/env bash
# Memory of proctor top's time-travel ring (issue #16): RSS of `proctor top --keep N` for several
# N at once, each in its own tmux session (120x40), after WAIT seconds, with SLEEPERS extra idle
# `sleep` children on the host.
#   bench/top/keep.sh                 # keep 0, 10 and 60; 900 sleepers; 70 s
#   KEEPS="0 30" WAIT=40 bench/top/keep.sh
# Every process it starts is stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/../.."
KEEPS=${KEEPS:-"0 10 60"}
WAIT=${WAIT:-70}
SLEEPERS=${SLEEPERS:-900}
cargo build --release --locked --bin proctor 2>&1 | tail -1
BIN=$(realpath "${CARGO_TARGET_DIR:-target}/release/proctor")
PIDS=()
cleanup() {
  for k in $KEEPS; do tmux kill-session -t "bench-keep-$k-$$" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
for ((i = 0; i < SLEEPERS; i++)); do
  sleep 100000 &
  PIDS+=($!)
done
echo "processes: $(ls /proc | grep -c '^[0-9]'), $WAIT s"
for k in $KEEPS; do
  tmux new-session -d -s "bench-keep-$k-$$" -x 120 -y 40 "exec $BIN top --config /dev/null --keep $k"
done
sleep "$WAIT"
for k in $KEEPS; do
  p=$(tmux display-message -p -t "bench-keep-$k-$$" '#{pane_pid}')
  printf 'keep %-4s RSS %6s KiB  peak %6s KiB  (%s top --keep %s)\n' "$k" \
    "$(awk '/VmRSS/ { print $2 }' "/proc/$p/status")" "$(awk '/VmHWM/ { print $2 }' "/proc/$p/status")" "$BIN" "$k"
done
