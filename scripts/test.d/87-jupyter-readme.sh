#!/usr/bin/env bash
# The README's "Use it in Jupyter" lines, exactly as written (issue 32 item 1), on the oldest
# jupyter-server proctor supports and on the current one (scripts/jupyter/readme_e2e.py): in a
# fresh virtualenv per version holding jupyter-server and jupyter-resource-usage 1.3.0, the
# README's pip line installs the release build's wheel, its enable/disable lines must succeed,
# and a real `jupyter server` on 127.0.0.1 with a token must then answer /api/metrics/v1 from
# proctor.jupyter, with jupyter_resource_usage's server extension not loaded.
#
# The versions: 2.0.1 is the oldest jupyter-server the package's `jupyter` extra allows
# (jupyter-server>=2; 2.0.0 is not on the index) and the oldest jupyter-resource-usage 1.3.0
# takes; 2.21.1 is the current one, on which the README's enable line used to fail. Override
# with JUPYTER_SERVER_VERSIONS="2.0.1 2.21.1".
#
# Installs them with pip into target/jupyter-readme/venv-VERSION (made anew each run, so the
# README's pip line is what installs proctor and no earlier run's config takes part), and
# maturin into .venv when the wheel must be built; a version pip cannot install is a loud SKIP.
#
# needs: release (scripts/test.sh runs this part once the release build and its wheel are made)
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (installs the release build's wheel)"
source scripts/lib/cargo.sh

skip() {
  echo "SKIP: 87-jupyter-readme (the README's Jupyter lines on a real jupyter-server): $*"
}
dir=$target_dir/jupyter-readme
mkdir -p "$dir"

wheel=$(built_wheel)
if [[ -z $wheel ]]; then
  # Run alone: the release build makes the wheel with .venv's maturin, as scripts/test.sh does.
  [[ -x .venv/bin/python ]] || python3 -m venv .venv >"$dir/venv.log" 2>&1 \
    || { skip "python3 -m venv .venv failed (see $dir/venv.log)"; exit 0; }
  .venv/bin/python -c 'import maturin' 2>/dev/null || .venv/bin/pip install --quiet maturin >"$dir/pip-maturin.log" 2>&1 \
    || { skip "pip install maturin failed (see $dir/pip-maturin.log)"; exit 0; }
  echo "-- no wheel yet (this part was run alone): the release build"
  release_build .venv/bin/python || { echo "FAIL: the release build failed"; exit 1; }
  wheel=$(built_wheel)
  [[ -n $wheel ]] || { echo "FAIL: the release build made no wheel"; exit 1; }
fi
echo "-- the wheel: $wheel"

failed=0
for version in ${JUPYTER_SERVER_VERSIONS:-2.0.1 2.21.1}; do
  venv=$dir/venv-$version
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >"$dir/venv-$version.log" 2>&1; then
    skip "jupyter-server $version: python3 -m venv failed (see $dir/venv-$version.log)"
    continue
  fi
  echo "== jupyter-server $version: pip install jupyter-server==$version jupyter-resource-usage==1.3.0 (log: $dir/pip-$version.log)"
  if ! "$venv/bin/pip" install --quiet "jupyter-server==$version" "jupyter-resource-usage==1.3.0" >"$dir/pip-$version.log" 2>&1; then
    skip "jupyter-server $version: pip install jupyter-server==$version jupyter-resource-usage==1.3.0 failed (see $dir/pip-$version.log)"
    continue
  fi
  if ! timeout 600 "$venv/bin/python" scripts/jupyter/readme_e2e.py "$venv" "$wheel" README.md; then
    echo "FAIL: the README's Jupyter lines on jupyter-server $version"
    failed=1
  fi
done
exit $failed
