#!/usr/bin/env bash
# The `proctor` Python package and its Jupyter server extension: `pip install .` (maturin, a
# release build of the Rust core), then pytest on python/tests/ against real jupyter-servers
# (proctor.jupyter beside the real jupyter-resource-usage 1.3.0) with real kernels.
#
# Installs into .venv: jupyter-server, jupyter-resource-usage==1.3.0, ipykernel, pytest,
# maturin (pip). If pip cannot install them, or cannot build the package, it prints a loud SKIP
# with the reason.
set -euo pipefail
cd "$(dirname "$0")/../.."

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

# The CLI, for the container-truth comparison (already built by scripts/test.sh).
cargo build --locked --bin proctor 2>&1 | tail -1
target_dir="${CARGO_TARGET_DIR:-target}"
proctor_bin="$(cd "$target_dir/debug" && pwd)/proctor"
python="$(cd "$venv/bin" && pwd)/python"

# pip builds in the source tree with maturin (release profile, into $target_dir/…/release).
started=$(date +%s)
# Without build isolation pip runs the venv's maturin, which must be on PATH.
if ! PATH="$PWD/$venv/bin:$PATH" "$venv/bin/pip" install --no-build-isolation --force-reinstall --no-deps . >"$venv/pip-proctor.log" 2>&1; then
  tail -20 "$venv/pip-proctor.log"
  echo "SKIP: Python package test: pip install . failed (see $venv/pip-proctor.log)"
  exit 0
fi
echo "pip install . took $(( $(date +%s) - started )) s"

# Run from the tests' folder so `import proctor` is the installed package, not python/proctor
# (which has no compiled _core).
cd python/tests
PROCTOR_BIN="$proctor_bin" exec "$python" -m pytest -q -p no:cacheprovider .
