#!/usr/bin/env bash
# The cost of watching (issue #16): CPU of `proctor top` (1 s refresh), `htop -d 10` and `top -d 1`
# over the same DURATION on the same host with ~TARGET processes (idle `sleep` children are added
# to reach it), all three at once, each in its own tmux session of the same size (120x40), so
# they draw the same number of rows and share whatever else the machine is doing. CPU is
# user+system ticks of each tool's own pid from /proc/PID/stat, read before and after.
#   bench/top/run.sh                       # 60 s, 1,000 processes
#   DURATION=30 TARGET=500 bench/top/run.sh
#   ROUNDS=3 bench/top/run.sh              # three runs; the median of each column is printed
# Installs htop and tmux (Debian) when missing. Every process it starts is stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${DURATION:-60}
TARGET=${TARGET:-1000}
ROUNDS=${ROUNDS:-1}
cargo build --release --locked --bin proctor 2>&1 | tail -1
BIN=$(realpath "${CARGO_TARGET_DIR:-target}/release/proctor")
if ! command -v htop >/dev/null || ! command -v tmux >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq htop tmux) >/dev/null 2>&1 \
    || echo "WARNING: could not install htop/tmux"
fi
command -v tmux >/dev/null || { echo "tmux is needed to give each tool a terminal"; exit 1; }

SLEEPERS=()
SESSIONS=()
cleanup() {
  for s in "${SESSIONS[@]}"; do tmux kill-session -t "$s" 2>/dev/null || true; done
  for pid in "${SLEEPERS[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
have=$(ls /proc | grep -c '^[0-9]')
for ((i = have; i < TARGET; i++)); do
  sleep 100000 &
  SLEEPERS+=($!)
done
sleep 1
procs=$(ls /proc | grep -c '^[0-9]')
hz=$(getconf CLK_TCK)
echo "processes: $procs, $DURATION s per round, $ROUNDS rounds, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "versions: $("$BIN" --version); $(htop --version 2>/dev/null | head -1); $(top -v 2>/dev/null | head -1)"

ticks() { # pid -> utime+stime
  awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}
# The one process a tmux pane runs (the tool, exec'd by the pane's shell).
pane_pid() { tmux display-message -p -t "$1" '#{pane_pid}'; }

declare -A CMDS=(
  [proctor]="exec $BIN top --interval 1s --config /dev/null"
  [htop]="exec htop -d 10"
  [top]="exec top -d 1"
)
TOOLS=(proctor htop top)
declare -A RESULTS
for ((round = 1; round <= ROUNDS; round++)); do
  declare -A PIDS=() START=()
  for tool in "${TOOLS[@]}"; do
    if [[ $tool != proctor ]] && ! command -v "$tool" >/dev/null; then continue; fi
    s="bench-top-$tool-$$"
    SESSIONS+=("$s")
    tmux new-session -d -s "$s" -x 120 -y 40 "${CMDS[$tool]}"
  done
  sleep 3 # past start-up: the first samples, the first full draw
  for tool in "${TOOLS[@]}"; do
    s="bench-top-$tool-$$"
    tmux has-session -t "$s" 2>/dev/null || continue
    PIDS[$tool]=$(pane_pid "$s")
    START[$tool]=$(ticks "${PIDS[$tool]}")
  done
  sleep "$DURATION"
  for tool in "${!PIDS[@]}"; do
    end=$(ticks "${PIDS[$tool]}")
    rss=$(awk '/VmRSS/ { print $2 }' "/proc/${PIDS[$tool]}/status")
    RESULTS[$tool]+="$(( end - START[$tool] )):$rss "
    tmux kill-session -t "bench-top-$tool-$$"
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
printf '%-8s %14s %14s %12s  %s\n' tool "CPU s/${DURATION}s" "% of one CPU" "RSS KiB" command
for tool in "${TOOLS[@]}"; do
  [[ -n ${RESULTS[$tool]:-} ]] || { echo "$tool: not run (not installed)"; continue; }
  t=$(echo "${RESULTS[$tool]}" | tr ' ' '\n' | cut -d: -f1 | tr '\n' ' ' | median)
  r=$(echo "${RESULTS[$tool]}" | tr ' ' '\n' | cut -d: -f2 | tr '\n' ' ' | median)
  secs=$(awk -v t="$t" -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }')
  pct=$(awk -v t="$t" -v hz="$hz" -v d="$DURATION" 'BEGIN { printf "%.2f", 100 * t / hz / d }')
  printf '%-8s %14s %14s %12s  %s\n' "$tool" "$secs" "$pct" "$r" "${CMDS[$tool]#exec }"
  declare "CPU_$tool=$t"
done
if [[ -n ${CPU_proctor:-} && -n ${CPU_htop:-} && ${CPU_htop} -gt 0 ]]; then
  awk -v p="$CPU_proctor" -v h="$CPU_htop" 'BEGIN { printf "proctor top / htop: %.2f (goal: at most 0.33)\n", p / h }'
fi
if [[ -n ${CPU_proctor:-} && -n ${CPU_top:-} && ${CPU_top} -gt 0 ]]; then
  awk -v p="$CPU_proctor" -v t="$CPU_top" 'BEGIN { printf "proctor top / top:  %.2f\n", p / t }'
fi
