#!/usr/bin/env bash
# Issue 21's headline, small (scripts/jupyter/echo_e2e.py): `proctor probe jupyter` holds a key
# in a real Jupyter terminal on the motivating tree (children sharing memory under the server)
# while a tab polls /api/metrics/v1, once with jupyter-resource-usage 1.3.0 serving it and once
# with proctor.jupyter. Asserts properties, not times: every keystroke echoed, the terminal
# deleted (also after Ctrl-C), the endpoint's body; and, with strace on the server's event-loop
# thread, that jupyter-resource-usage's loop reads the tree's smaps_rollup (the control) and
# proctor.jupyter's never does. The echo p99 ratio is a timing: bench/jupyter measures it.
#
# Installs jupyter-server, jupyter-resource-usage==1.3.0 and maturin into .venv (pip), and
# strace (apt-get) when missing; when any of that fails, a loud SKIP (for strace: of the
# event-loop check only).
#
# needs: release (scripts/test.sh runs this part once the release build and its wheel are made)
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (installs the release build's wheel; the dev build's proctor)"
source scripts/lib/cargo.sh

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
if ! command -v strace >/dev/null && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  (apt-get install -y -qq strace || (apt-get update -qq && apt-get install -y -qq strace)) >"$logs/apt-strace.log" 2>&1 || true
fi
echo "-- pip install the release build's wheel (proctor's Python package)"
pip_install_wheel "$venv/bin/python" || { echo "FAIL: the release build made no wheel to install"; exit 1; }
ensure_dev_proctor
timeout 600 "$venv/bin/python" scripts/jupyter/echo_e2e.py "$venv/bin/python" "$proctor_dev"
