#!/usr/bin/env bash
# The agent on a Raspberry Pi-sized budget (issue 17): `proctor serve --interval 10s --groups
# RULES.yml`, recording, with 300 processes of its own in 20 groups of 15, against the goals of
# at most 15 MB RSS and 0.3 % of one core. A `--no-record` agent runs beside it for comparison.
#   bash bench/groups/pi.sh                          # 30 s warm-up, then a 600 s window (60 samples)
#   DURATION=120 WARMUP=30 ROUNDS=3 bash bench/groups/pi.sh   # medians of 3 rounds
#   NORECORD=0 bash bench/groups/pi.sh               # the recording agent alone
#   PROCTOR_BIN=/tmp/old/proctor bash bench/groups/pi.sh      # another build, not rebuilt
# Knobs: DURATION, WARMUP (seconds), ROUNDS, INTERVAL (10s), NGROUPS (20), PER_GROUP (15),
# NORECORD (1), AGENT_ARGS (more serve flags for both agents, e.g. "--pss-budget 0"). On the shared 2-core machine build with CARGO_BUILD_JOBS=1.
# Needs python3 (3.11 or newer). Traffic stays on 127.0.0.1; every process it starts is stopped
# by its pid (on Ctrl-C too), and the sleepers end on their own when the run's time is up.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/proctor_bin.sh
exec python3 bench/groups/pi.py
