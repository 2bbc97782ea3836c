#!/usr/bin/env bash
# The suite's installs, all at once, in the background while the first compile runs (they are
# network and disk, the compile is CPU): Debian's packages the parts use (as root, with
# apt-get), the Python virtualenv .venv and its packages (pip), web/'s playwright-core (npm ci
# from the committed lock file) and Etsy statsd 0.9.0 (npm), rustup's aarch64 target, and the
# Go modules of the test receivers (go mod download: Prometheus's and the Collector's).
#
# Nothing here is required: each part still checks for what it needs, installs what is missing
# and prints a loud SKIP when it cannot have it. This only says what could not be installed.
set -uo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (installs)"
logs=target/test-logs
mkdir -p "$logs"
missing=()

debs=(
  prometheus prometheus-alertmanager # 65-prometheus, 66-alertmanager, 67-remote-write
  victoria-metrics                   # 69-fleet
  chromium                           # 70-dashboard, 85-jupyterlab
  tmux                               # 78-top
  clang                              # 35-bpf (rebuilds the BPF object and compares)
  smem                               # 68-share
  strace                             # 60-strace (strace run)
  buildah podman runc                # 41-image
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user # 95-aarch64
)
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  wanted=()
  for d in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q "install ok installed" || wanted+=("$d")
  done
  if [[ ${#wanted[@]} -gt 0 ]]; then
    echo "-- apt-get install ${wanted[*]} (log: $logs/apt-prepare.log)"
    started=$SECONDS
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${wanted[@]}"; } >"$logs/apt-prepare.log" 2>&1; then
      # One package the archive lacks fails the whole call: the rest one by one.
      for d in "${wanted[@]}"; do
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$d" >>"$logs/apt-prepare.log" 2>&1 || missing+=("Debian package $d")
      done
    fi
    echo "   done in $((SECONDS - started)) s"
  else
    echo "-- Debian packages: all ${#debs[@]} already installed"
  fi
else
  missing+=("Debian packages (not root, or no apt-get): ${debs[*]}")
fi

python_packages=(
  jupyter-server "jupyter-resource-usage==1.3.0" jupyterlab ipykernel jupyter-client # 75, 80, 85, 86
  pytest maturin  # 80-python, and the release build's wheel
  gunicorn        # 68-share
  statsd datadog  # 50-statsd
  psutil          # cargo test: proctor impact's psutil arm
)
venv=.venv
[[ -x $venv/bin/python ]] || python3 -m venv "$venv" >"$logs/venv-prepare.log" 2>&1 || missing+=("the virtualenv $venv (python3 -m venv)")
if [[ -x $venv/bin/python ]]; then
  echo "-- pip install into $venv: ${python_packages[*]} (log: $logs/pip-prepare.log)"
  started=$SECONDS
  # --no-compile: Python compiles a module when it is first imported; byte-compiling every file
  # of jupyterlab and its dependencies up front is CPU the dev build beside it wants.
  "$venv/bin/pip" install --quiet --no-compile "${python_packages[@]}" >"$logs/pip-prepare.log" 2>&1 \
    || missing+=("pip packages (see $logs/pip-prepare.log)")
  echo "   done in $((SECONDS - started)) s"
fi

if command -v npm >/dev/null; then
  echo "-- npm ci in web/, npm install statsd@0.9.0 into target/etsy-statsd (log: $logs/npm-prepare.log)"
  (cd web && npm ci --no-audit --no-fund) >"$logs/npm-prepare.log" 2>&1 || missing+=("web/node_modules (npm ci)")
  if [[ ! -f target/etsy-statsd/node_modules/statsd/stats.js ]]; then
    mkdir -p target/etsy-statsd
    npm install --prefix target/etsy-statsd --no-audit --no-fund --silent statsd@0.9.0 >>"$logs/npm-prepare.log" 2>&1 \
      || missing+=("Etsy statsd 0.9.0 (npm)")
  fi
else
  missing+=("npm packages (no npm)")
fi

if command -v rustup >/dev/null && ! rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
  rustup target add aarch64-unknown-linux-gnu >>"$logs/rustup-prepare.log" 2>&1 || missing+=("rustup target aarch64-unknown-linux-gnu")
fi

if command -v go >/dev/null; then
  for m in crates/proctor-remote/tests/v2recv crates/proctor-remote/tests/prometheus3 crates/proctor-remote/tests/otelcol; do
    (cd "$m" && go mod download) >>"$logs/go-prepare.log" 2>&1 || missing+=("Go modules of $m (go mod download)")
  done
else
  missing+=("Go modules (no go)")
fi

if [[ ${#missing[@]} -gt 0 ]]; then
  printf 'could not install: %s (the parts that need it say SKIP)\n' "${missing[@]}"
else
  echo "everything installed"
fi
