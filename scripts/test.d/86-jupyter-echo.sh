#!/usr/bin/env bash
# Issue 21's headline, small (scripts/jupyter/echo_e2e.py): `proctor probe jupyter` holds a key
# in a real Jupyter terminal on the motivating tree (children sharing memory under the server)
# while a tab polls /api/metrics/v1; with jupyter-resource-usage 1.3.0 serving it the keystroke
# echo stalls, with proctor.jupyter it does not. Asserts the ratio of the p99s, not times.
#
# Installs jupyter-server, jupyter-resource-usage==1.3.0 and maturin into .venv (pip), and
# proctor's Python package from this tree (`pip install .`); when any of that fails, a loud SKIP.
set -euo pipefail
cd "$(dirname "$0")/../.."

skip() {
  echo "SKIP: 86-jupyter-echo (keystroke echo in a Jupyter terminal, jupyter-resource-usage vs proctor.jupyter): $*"
  exit 0
}
logs=target/test-logs
mkdir -p "$logs"
venv=.venv
if ! [[ -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv" >"$logs/venv-echo.log" 2>&1 || skip "python3 -m venv $venv failed (see $logs/venv-echo.log)"
fi
if ! "$venv/bin/python" -c 'import jupyter_server, jupyter_server_terminals, terminado, maturin, importlib.metadata as m; assert m.version("jupyter-resource-usage") == "1.3.0"' 2>/dev/null; then
  echo "-- pip install jupyter-server maturin jupyter-resource-usage==1.3.0 (log: $logs/pip-echo.log)"
  "$venv/bin/pip" install jupyter-server maturin "jupyter-resource-usage==1.3.0" >"$logs/pip-echo.log" 2>&1 \
    || skip "pip install jupyter-server maturin jupyter-resource-usage==1.3.0 failed (see $logs/pip-echo.log)"
fi
"$venv/bin/python" -c 'import jupyter_server_terminals, terminado' 2>/dev/null \
  || skip "jupyter-server is installed without terminal support (jupyter_server_terminals, terminado)"
[[ -f pyproject.toml ]] || skip "no pyproject.toml: proctor's Python package is not in this tree"
echo "-- pip install . (proctor's Python package; log: $logs/pip-proctor-echo.log)"
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/pip" install --no-build-isolation --force-reinstall --no-deps . >"$logs/pip-proctor-echo.log" 2>&1 \
  || skip "pip install . (proctor's Python package) failed (see $logs/pip-proctor-echo.log)"
cargo build --locked --quiet --bin proctor
target_dir="${CARGO_TARGET_DIR:-target}"
timeout 600 "$venv/bin/python" scripts/jupyter/echo_e2e.py "$venv/bin/python" "$target_dir/debug/proctor"
