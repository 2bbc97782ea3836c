#!/usr/bin/env bash
# proctor serve benchmarks (issue #3): latency of /api/metrics/v1 and /metrics beside
# jupyter-resource-usage 1.3.0 on a Jupyter server whose 96 children share 2 GiB, the latency of
# another endpoint during that load, and the agent's CPU and RSS at the default interval with
# ~600 processes. Usage: bench/serve/run.sh [latency|cost|ring]...
#
# Installs: wrk (Debian), jupyter-server and
# jupyter-resource-usage==1.3.0 into .venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --locked --bin proctor 2>&1 | tail -1
command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk) >/dev/null 2>&1 \
  || { echo "wrk is needed (apt-get install wrk)"; exit 1; }
[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/python -c 'import jupyter_server, jupyter_resource_usage' 2>/dev/null \
  || .venv/bin/pip install -q jupyter-server "jupyter-resource-usage==1.3.0"
exec .venv/bin/python bench/serve/bench.py "$@"
