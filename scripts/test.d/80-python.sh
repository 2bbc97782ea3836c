#!/usr/bin/env bash
# The `proctor` Python package and its Jupyter server extension: the release build's wheel
# (`pip wheel .`: maturin, a release build of the Rust core, made once by scripts/test.sh for
# this part, 85-jupyterlab and 86-jupyter-echo) installed with pip, then pytest on python/tests/ against real jupyter-servers
# (proctor.jupyter beside the real jupyter-resource-usage 1.3.0) with real kernels.
#
# Installs into .venv: jupyter-server, jupyter-resource-usage==1.3.0, ipykernel, pytest,
# maturin (pip). If pip cannot install them, or cannot build the package, it prints a loud SKIP
# with the reason.
#
# needs: release (scripts/test.sh runs this part once the release build and its wheel are made)
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (installs the release build's wheel; the dev build's proctor)"
source scripts/lib/cargo.sh

venv=.venv
if ! [[ -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv" >/dev/null 2>&1 || true
fi
if ! [[ -x "$venv/bin/python" ]]; then
  echo "SKIP: Python package test: could not make $venv (python3 -m venv failed)"
  exit 0
fi
if ! "$venv/bin/python" -c 'import jupyter_server, jupyter_resource_usage, ipykernel, jupyter_client, pytest, maturin, importlib.metadata as m; assert m.version("jupyter-resource-usage") == "1.3.0"' 2>/dev/null; then
  "$venv/bin/pip" install --quiet jupyter-server "jupyter-resource-usage==1.3.0" ipykernel jupyter-client pytest maturin \
    >"$venv/pip-python-test.log" 2>&1 || true
fi
if ! "$venv/bin/python" -c 'import jupyter_server, jupyter_resource_usage, ipykernel, jupyter_client, pytest, maturin' 2>/dev/null; then
  echo "SKIP: Python package test: pip could not install jupyter-server jupyter-resource-usage==1.3.0 ipykernel pytest maturin (see $venv/pip-python-test.log)"
  exit 0
fi

# The CLI, for the container-truth comparison.
ensure_dev_proctor
proctor_bin="$(realpath "$proctor_dev")"
python="$(cd "$venv/bin" && pwd)/python"
pip_install_wheel "$python" || { echo "FAIL: the release build made no wheel to install"; exit 1; }
echo "installed $(built_wheel)"

# Run from the tests' folder so `import proctor` is the installed package, not python/proctor
# (which has no compiled _core).
cd python/tests
PROCTOR_BIN="$proctor_bin" exec "$python" -m pytest -q -p no:cacheprovider .
