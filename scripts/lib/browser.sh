# Sourced by the test parts that drive Debian's Chromium with playwright-core (70-dashboard,
# 85-jupyterlab): makes sure chromium (apt-get, when it is missing and we are root), node 18 or
# newer and web/node_modules (npm ci from the committed lock file; no browser download) are
# there. When one cannot be had it calls the sourcing part's own `skip` with the reason, which
# prints the loud SKIP line and exits 0. Sets `logs` and `chromium`.

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

# npm ci empties node_modules and installs again: only when what is there is not what the lock
# file says (scripts/lib/prepare.sh already ran it in the suite).
if [[ web/node_modules/.package-lock.json -nt web/package-lock.json ]] && [[ -d web/node_modules/playwright-core ]]; then
  echo "-- web/node_modules is up to date with web/package-lock.json"
else
  echo "-- npm ci in web/ (log: $logs/npm-web.log)"
  if ! (cd web && npm ci --no-audit --no-fund) >"$logs/npm-web.log" 2>&1; then
    skip "npm ci in web/ failed (see $logs/npm-web.log)"
  fi
fi
