#!/usr/bin/env bash
# The dashboard in real headless Chromium: the page served by `proctor serve` loads with no
# console errors, its charts fill, the process table sorts, filters and shows a tree, a
# process named `<img src=x onerror=alert(1)>` renders as text, the detail shows PSS/USS,
# and a 401 asks for the token; zoomed out to a day, the charts show samples older than the
# in-memory ring, read from the agent's store (and not when the store lacks them); a picked
# range's "Top processes" tables rank a stored synthetic burner first (and not without it).
# Screenshots: target/test-artifacts/dashboard.png, dashboard-day.png, dashboard-report.png.
#
# Installs what it needs: Debian's chromium (apt-get, when it is missing and we are root) and
# playwright-core into web/node_modules (npm ci from the committed lock file; no browser
# download). When either cannot be had, it prints a loud SKIP with the reason and exits 0.
set -euo pipefail
cd "$(dirname "$0")/../.."

skip() {
  echo "SKIP: 70-dashboard (browser tests of the web dashboard): $*"
  exit 0
}

logs=target/test-logs
mkdir -p "$logs"

chromium="${CHROMIUM_BIN:-/usr/bin/chromium}"
if [[ ! -x "$chromium" ]]; then
  if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "-- installing chromium with apt-get (log: $logs/apt-chromium.log)"
    if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; } >"$logs/apt-chromium.log" 2>&1; then
      skip "$chromium is missing and 'apt-get install -y chromium' failed (see $logs/apt-chromium.log)"
    fi
  else
    skip "$chromium is missing and apt-get cannot install it here (needs root and apt-get)"
  fi
  [[ -x "$chromium" ]] || skip "apt-get installed chromium but $chromium is still missing"
fi

command -v node >/dev/null || skip "node is not installed"
command -v npm >/dev/null || skip "npm is not installed"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[[ "$node_major" -ge 18 ]] || skip "node $node_major is too old for node --test (needs 18 or newer)"

echo "-- npm ci in web/ (log: $logs/npm-web.log)"
if ! (cd web && npm ci --no-audit --no-fund) >"$logs/npm-web.log" 2>&1; then
  skip "npm ci in web/ failed (see $logs/npm-web.log)"
fi

cargo build --locked --bin proctor 2>&1
# Writes a store of older samples for the zoom-into-the-store and top-processes tests.
cargo build --locked -p proctor-api --example store_day 2>&1
proctor="${CARGO_TARGET_DIR:-target}/debug/proctor"
store_day="${CARGO_TARGET_DIR:-target}/debug/examples/store_day"

echo "-- node --test web/test/dashboard.test.mjs (chromium: $("$chromium" --version 2>/dev/null | tail -1))"
PROCTOR_BIN="$proctor" STORE_DAY_BIN="$store_day" CHROMIUM_BIN="$chromium" node --test web/test/dashboard.test.mjs
echo "-- screenshot: target/test-artifacts/dashboard.png"
