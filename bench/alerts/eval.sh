#!/usr/bin/env bash
# Alert evaluation cost (issue 18): 100 rules, 20 of them per process, over ~600 processes, on
# `proctor serve --interval 1s --no-record`. Two agents run side by side in one window, one
# with the rules and one without; reported: the engine's own CPU per evaluation (its thread's
# CPU clock, read each second from /api/v1/alerts: median and p90), and each whole agent's CPU
# per sample from /proc/PID/stat, whose difference is what the rules cost all in. Goal: at most
# 100 µs per sample.
#   bash bench/alerts/eval.sh                         # 20 s warm-up, a 60 s window
#   DURATION=120 PROCS=600 bash bench/alerts/eval.sh
#   PROCTOR_BIN=/tmp/old/proctor bash bench/alerts/eval.sh   # another build, not rebuilt
# The same rules for the evaluation alone (hot, and with caches gone cold between samples):
#   python3 bench/alerts/eval.py --rules-only /tmp/rules.yml
#   PROCS=600 cargo run --release -p proctor-alerts --example eval_cost -- /tmp/rules.yml 2000
#   PROCS=600 PAUSE_MS=500 cargo run --release -p proctor-alerts --example eval_cost -- /tmp/rules.yml 40
# Needs python3. Traffic stays on 127.0.0.1; every process it starts is stopped by its pid (on
# Ctrl-C too), and the sleepers end on their own when the run's time is up.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/proctor_bin.sh
exec python3 bench/alerts/eval.py
