#!/usr/bin/env bash
# Core benchmarks (issue #2): the all-process scan vs its floor and top, the host sample vs its
# floor and collectl, and the 96-children tree vs psutil. Prints each figure with the exact
# command that produced it, and the machine's load. Usage: bench/core/run.sh [scan|host|tree]...
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --bin proctor 2>&1 | tail -1
if ! command -v collectl >/dev/null || ! command -v top >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq collectl procps) >/dev/null 2>&1 \
    || echo "WARNING: could not install collectl/procps; those comparisons will be skipped"
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q psutil
exec .venv/bin/python bench/core/bench.py "$@"
