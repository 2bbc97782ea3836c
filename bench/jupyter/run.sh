#!/usr/bin/env bash
# jupyter-resource-usage 1.3.0's server extension vs proctor's (`proctor.jupyter`) on the same
# repro, one after the other in one run (issue #8): /api/metrics/v1 latency while 4 tabs poll
# it every 5 s, the worst /api/status stall meanwhile, PSS against psutil's, the server's CPU.
# Knobs are environment variables (see bench/jupyter/bench.py), e.g.
#   DURATION=30 CHILDREN=96 SHARED_MIB=2048 bash bench/jupyter/run.sh
#
# Installs into .venv: jupyter-server, jupyter-resource-usage==1.3.0, psutil, maturin, and proctor
# itself (`pip install .`, rebuilt from this tree on every run so the figures are this tree's).
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/python -c 'import jupyter_server, psutil, maturin, importlib.metadata as m; assert m.version("jupyter-resource-usage") == "1.3.0"' 2>/dev/null \
  || .venv/bin/pip install -q jupyter-server "jupyter-resource-usage==1.3.0" psutil maturin
mkdir -p target
if [[ -f pyproject.toml ]]; then
  echo "-- pip install . (proctor's Python package; log: target/pip-proctor-bench.log)"
  # As scripts/test.d/80-python.sh does it (the venv's maturin, no build isolation).
  PATH="$PWD/.venv/bin:$PATH" .venv/bin/pip install --no-build-isolation --force-reinstall --no-deps . \
    >target/pip-proctor-bench.log 2>&1 \
    || echo "!! pip install . failed (see target/pip-proctor-bench.log): proctor's side will not be measured"
else
  echo "!! no pyproject.toml in this tree: proctor's Python package cannot be installed, its side will not be measured"
fi
echo "-- cargo build --release --bin proctor (for the keystroke echo probe)"
cargo build --release --locked --quiet --bin proctor
PROCTOR_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/proctor" exec .venv/bin/python bench/jupyter/bench.py
