#!/usr/bin/env bash
# proctor serve's /api/metrics/v1 side by side with the real jupyter-resource-usage 1.3.0 on
# the same Jupyter server's tree: same keys, order and JSON types; the shared figures agree.
#
# Installs jupyter-server and jupyter-resource-usage==1.3.0 into .venv (pip); if that fails it
# prints a loud SKIP with the reason.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (the dev build's proctor)"
source scripts/lib/cargo.sh

venv=.venv
if ! [[ -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv" >/dev/null 2>&1 || true
fi
if [[ -x "$venv/bin/python" ]] && ! "$venv/bin/python" -c 'import jupyter_server, jupyter_resource_usage, importlib.metadata as m; assert m.version("jupyter-resource-usage") == "1.3.0"' 2>/dev/null; then
  "$venv/bin/pip" install --quiet jupyter-server "jupyter-resource-usage==1.3.0" >"$venv/pip-jupyter.log" 2>&1 || true
fi
if ! [[ -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import jupyter_server, jupyter_resource_usage' 2>/dev/null; then
  echo "SKIP: Jupyter shape test: could not make $venv or pip install jupyter-server jupyter-resource-usage==1.3.0 (see $venv/pip-jupyter.log)"
  exit 0
fi
ensure_dev_proctor
"$venv/bin/python" crates/proctor-http/tests/interop/jupyter_shape.py "$target_dir/debug/proctor"
