#!/usr/bin/env bash
# Per-process network, cost (issue 36): a paced UDP echo at RATE packets a second on loopback
# (default 50,000: half each way) for SECONDS (10), three arms alternated REPEATS (3) times:
# `proctor serve --net` (its network programs), `proctor serve` (without them: the default),
# and no agent, each round starting one arm later. Medians of
# the workload's CPU (what the in-kernel accounting adds to every packet: goal at most 2 %)
# and of the agent's CPU per sample (goal at most 1.2× without), then each round's own
# with/without ratio, their median and its bootstrap 95 % interval: the machine's speed drifts
# by more than 2 % between runs minutes apart, so read that line, from ten rounds or more.
#   PIN=1 REPEATS=10 bash bench/net/cost.sh 50000 5
#   bash bench/net/cost.sh            # 50000 10
#   PROCTOR_BIN=/tmp/old/proctor REPEATS=5 bash bench/net/cost.sh 50000 20
#   PIN=1 bash bench/net/cost.sh      # the agent on CPU 0, the workload on CPU 1
#   SIDE=1 bash bench/net/cost.sh     # both agents at once beside one workload: the agent's
#                                     # per-sample ratio without the drift between runs
#   TCP=1 SIDE=1 bash bench/net/cost.sh # a TCP connection beside, a byte each way a second: the
#                                     # TCP tables' walk (where it is the walk) is not put off
# Needs root (CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN) for the network arm; without it that arm
# reports process_net_from "none".
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/proctor_bin.sh
exec python3 bench/net/cost.py "$@"
