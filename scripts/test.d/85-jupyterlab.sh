#!/usr/bin/env bash
# JupyterLab in real headless Chromium with jupyter-resource-usage 1.3.0's frontend unchanged
# (its labextension) while proctor's server extension (`proctor.jupyter`) serves the numbers and
# jupyter-resource-usage's own server extension is off (issue #8): the status bar shows the
# memory limit given only to ProctorResourceUse and the memory of the page's last
# /api/metrics/v1 answer, jupyter-server loaded proctor.jupyter and not jupyter_resource_usage,
# and the kernel usage panel shows the running kernel's numbers (pid checked against /proc).
# Screenshot: target/test-artifacts/jupyterlab-statusbar.png.
#
# Installs what it needs: Debian's chromium (apt-get), playwright-core into web/node_modules
# (npm ci from the committed lock file; no browser download), jupyterlab, ipykernel, maturin and
# jupyter-resource-usage==1.3.0 into .venv, and proctor itself (`pip install .`). When any of
# them cannot be had, it prints a loud SKIP with the reason and exits 0.
#
# needs: release (scripts/test.sh runs this part once the release build and its wheel are made)
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (installs the release build's wheel)"
source scripts/lib/cargo.sh

skip() {
  echo "SKIP: 85-jupyterlab (JupyterLab status bar and kernel panel served by proctor.jupyter, in Chromium): $*"
  exit 0
}

# chromium, node and web/node_modules (or a SKIP); sets $logs and $chromium.
source scripts/lib/browser.sh

venv=.venv
if ! [[ -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv" >"$logs/venv.log" 2>&1 || skip "python3 -m venv $venv failed (see $logs/venv.log)"
fi
if ! "$venv/bin/python" -c 'import jupyterlab, ipykernel, maturin, jupyter_resource_usage, importlib.metadata as m; assert m.version("jupyter-resource-usage") == "1.3.0"' 2>/dev/null; then
  echo "-- pip install jupyterlab ipykernel maturin jupyter-resource-usage==1.3.0 (log: $logs/pip-jupyterlab.log)"
  "$venv/bin/pip" install jupyterlab ipykernel maturin "jupyter-resource-usage==1.3.0" >"$logs/pip-jupyterlab.log" 2>&1 \
    || skip "pip install jupyterlab ipykernel maturin jupyter-resource-usage==1.3.0 failed (see $logs/pip-jupyterlab.log)"
fi
[[ -d "$venv/share/jupyter/labextensions/@jupyter-server/resource-usage" ]] \
  || skip "jupyter-resource-usage is installed but its labextension is not in $venv/share/jupyter/labextensions"
[[ -f pyproject.toml ]] || skip "no pyproject.toml: proctor's Python package is not in this tree"
# Always this tree's wheel (scripts/test.sh's release build), so the test sees this tree's extension.
echo "-- pip install the release build's wheel (proctor's Python package)"
pip_install_wheel "$venv/bin/python" || { echo "FAIL: the release build made no wheel to install"; exit 1; }
"$venv/bin/python" -c 'import proctor.jupyter' 2>"$logs/import-proctor.log" \
  || { echo "FAIL: the wheel is installed but 'import proctor.jupyter' fails:"; cat "$logs/import-proctor.log"; exit 1; }

echo "-- node --test web/test/jupyterlab.test.mjs (chromium: $("$chromium" --version 2>/dev/null | tail -1); $("$venv/bin/python" -m jupyterlab --version 2>/dev/null | sed 's/^/jupyterlab /'))"
JUPYTER_PYTHON="$venv/bin/python" CHROMIUM_BIN="$chromium" node --test web/test/jupyterlab.test.mjs
echo "-- screenshot: target/test-artifacts/jupyterlab-statusbar.png"
