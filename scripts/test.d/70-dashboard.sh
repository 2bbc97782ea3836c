#!/usr/bin/env bash
# The dashboard in real headless Chromium: the page served by `proctor serve` loads with no
# console errors, its charts fill, the process table sorts, filters, shows a tree and hides
# kernel threads until asked (and says so), a process named `<img src=x onerror=alert(1)>`
# renders as text, the detail shows PSS/USS, and a 401 asks for the token; zoomed out to a
# day, the charts show samples older than the in-memory ring, read from the agent's store (and
# not when the store lacks them); the "Top processes" tables fill for the range shown on load
# and rank a stored synthetic burner first for a picked range (and not without it). A drag
# across the CPU chart (real pointer events) draws a band on every chart and lists a burner
# that ran inside the range (not for a range before it); Esc and a click go back to live; one
# report request at a time, the last pick wins, its error shown. pick.test.mjs checks the
# arithmetic of a pick in node alone.
# Chart labels stay inside their canvas, and percentages read as the CLI writes them. An agent
# with alert rules shows what fires in a banner (a hostile process name as text); one without
# rules shows no banner. A family head (several children of one name) says what its workers share.
# Rows are counted as drawn (computed style, a box inside the table's viewport), never by the
# page's own attributes; each run finds its own processes by a random marker in their command
# lines. Screenshots: target/test-artifacts/dashboard.png, dashboard-tree.png,
# dashboard-filter-{none,few,tree}.png, chart-edge.png, dashboard-day.png,
# dashboard-report.png, dashboard-report-on-load.png, dashboard-range.png, dashboard-alerts.png, dashboard-sharing.png,
# dashboard-power.png (a captured tree's power sensor and GPU client in the "Power and GPUs" card),
# dashboard-net.png (as root, an agent with --net: a loopback talker's NetRx/s and NetTx/s columns,
# its TCP connections in the detail; an agent without --net draws no network column),
# dashboard-report-net.png (that agent's store: the talker in the range's "By network" card; none
# without --net).
#
# Installs what it needs: Debian's chromium (apt-get, when it is missing and we are root) and
# playwright-core into web/node_modules (npm ci from the committed lock file; no browser
# download). When either cannot be had, it prints a loud SKIP with the reason and exits 0.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (the dev build's proctor and its examples store_day and rollup_year)"
source scripts/lib/cargo.sh

skip() {
  echo "SKIP: 70-dashboard (browser tests of the web dashboard): $*"
  exit 0
}

# chromium, node and web/node_modules (or a SKIP); sets $logs and $chromium.
source scripts/lib/browser.sh

ensure_dev_proctor
proctor=$proctor_dev
# Writes a store of older samples for the zoom-into-the-store and top-processes tests.
store_day="$dev_dir/examples/store_day"
# Writes rollup tiers (days of minute rows from a real capture) for the groups-table test.
rollup_year="$dev_dir/examples/rollup_year"

echo "-- node --test web/test/pick.test.mjs"
node --test web/test/pick.test.mjs
echo "-- node --test web/test/dashboard.test.mjs (chromium: $("$chromium" --version 2>/dev/null | tail -1))"
PROCTOR_BIN="$proctor" STORE_DAY_BIN="$store_day" ROLLUP_YEAR_BIN="$rollup_year" CHROMIUM_BIN="$chromium" node --test web/test/dashboard.test.mjs
echo "-- screenshot: target/test-artifacts/dashboard.png"
