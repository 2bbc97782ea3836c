#!/usr/bin/env bash
# Runs one benchmark command against two proctor builds, alternately, in one session: the way
# every before/after figure in docs/performance.md is taken (this machine is shared and noisy,
# so the two builds must see the same conditions).
#   bash bench/ab.sh OLD_BIN NEW_BIN ROUNDS COMMAND...
# COMMAND runs with PROCTOR_BIN set to each build in turn (bench/core and bench/serve read it),
# and `{}` in COMMAND is replaced by the build's path (for a command that runs proctor itself).
# Examples:
#   bash bench/ab.sh /tmp/old/proctor target/release/proctor 2 .venv/bin/python bench/core/bench.py scan host tree
#   bash bench/ab.sh /tmp/old/proctor target/release/proctor 2 .venv/bin/python bench/serve/bench.py cost
#   bash bench/ab.sh /tmp/old/proctor target/release/proctor 2 sh -c '{} record --dir "$(mktemp -d)" --interval 1s --count 60 --format json'
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,12p' "$0"; exit 2; }
old=$(readlink -f "$1") new=$(readlink -f "$2") rounds=$3
shift 3
for round in $(seq "$rounds"); do
  for build in "$old" "$new"; do
    args=()
    for a in "$@"; do args+=("${a//\{\}/$build}"); done
    echo "######## round $round: $build (load $(cut -d' ' -f1-3 /proc/loadavg)): ${args[*]}"
    PROCTOR_BIN=$build "${args[@]}"
  done
done
