#!/usr/bin/env bash
# proctor serve's /metrics against the real Prometheus tools from Debian's `prometheus`
# package: `promtool check metrics` on a live exposition (with a hostile process name), and a
# real Prometheus server scraping the agent on loopback with a Bearer token.
#
# Installs the package with apt-get when it is missing and apt-get can run; otherwise prints a
# loud SKIP with the reason.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (runs the dev build's test binaries)"
source scripts/lib/cargo.sh

if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  if command -v apt-get >/dev/null && [[ $(id -u) -eq 0 ]]; then
    echo "-- installing Debian's prometheus package (promtool, prometheus)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus) \
      >target/apt-prometheus.log 2>&1 || true
  fi
fi
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  echo "SKIP: Prometheus integration: promtool/prometheus are not installed and apt-get install prometheus failed (see target/apt-prometheus.log)"
  exit 0
fi
echo "-- $(prometheus --version 2>&1 | head -1)"
PROCTOR_PROMTOOL="$(command -v promtool)" PROCTOR_PROMETHEUS="$(command -v prometheus)" \
  run_tests proctor-http it prometheus:: routes::metrics_escape_hostile_process_names 2>&1
# serve --statsd's /metrics (statsd's families beside the agent's) and serve --rules' (the
# alerts' families) through promtool too.
PROCTOR_PROMTOOL="$(command -v promtool)" \
  run_tests proctor-cli it serve_with_statsd_exposes_flushed_keys_on_metrics \
  alerts::an_unreachable_webhook_is_retried_and_counted_and_sampling_misses_no_tick 2>&1
