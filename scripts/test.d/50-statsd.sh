#!/usr/bin/env bash
# proctor statsd against the outside world: the real Etsy statsd 0.9.0 side by side (Graphite
# lines must be equal) and the Python `statsd` and `datadog` client packages.
#
# Installs what it needs outside git: Etsy statsd under target/etsy-statsd (npm), the clients in
# the .venv virtualenv (pip). A part that cannot install prints a loud SKIP and the reason; the
# parts that can still run do.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (runs the dev build's test binaries)"
source scripts/lib/cargo.sh

etsy_dir=target/etsy-statsd
stats_js="$PWD/$etsy_dir/node_modules/statsd/stats.js"
etsy_env=()
if [[ -f "$stats_js" ]]; then
  etsy_env=(PROCTOR_ETSY_STATSD="$stats_js")
elif command -v npm >/dev/null && command -v node >/dev/null; then
  mkdir -p "$etsy_dir"
  if npm install --prefix "$etsy_dir" --no-audit --no-fund --silent statsd@0.9.0 >"$etsy_dir/npm.log" 2>&1 \
     && [[ -f "$stats_js" ]]; then
    etsy_env=(PROCTOR_ETSY_STATSD="$stats_js")
  else
    echo "SKIP: Etsy statsd comparison: npm install statsd@0.9.0 failed (see $etsy_dir/npm.log)"
  fi
else
  echo "SKIP: Etsy statsd comparison: node and npm are not installed"
fi

python_env=()
venv=.venv
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import statsd, datadog' 2>/dev/null; then
  python_env=(PROCTOR_STATSD_PYTHON="$PWD/$venv/bin/python")
elif command -v python3 >/dev/null && python3 -m venv "$venv" >/dev/null 2>&1 \
     && "$venv/bin/pip" install --quiet statsd datadog >"$venv/pip.log" 2>&1; then
  python_env=(PROCTOR_STATSD_PYTHON="$PWD/$venv/bin/python")
else
  echo "SKIP: Python statsd/datadog clients: could not make $venv or pip install statsd datadog"
fi

if [[ ${#etsy_env[@]} -gt 0 ]]; then
  echo "-- proctor vs Etsy statsd 0.9.0 (Graphite lines)"
  (export "${etsy_env[@]}"; run_tests proctor-statsd it etsy::) 2>&1
fi
if [[ ${#python_env[@]} -gt 0 ]]; then
  echo "-- Python statsd and datadog clients"
  (export "${python_env[@]}"; run_tests proctor-statsd it clients::) 2>&1
fi
