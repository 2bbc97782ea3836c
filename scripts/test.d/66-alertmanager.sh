#!/usr/bin/env bash
# proctor serve's alerts against a real Alertmanager from Debian's `prometheus-alertmanager`
# package, on loopback: a CPU-burner rule's alert reaches it firing and then resolved (through
# Alertmanager's own routing to a webhook), and a silence made with `proctor alerts silence`
# keeps a second firing from it. The rest of the alert tests (webhook counts under flapping,
# retries, SIGHUP, restarts) run in `cargo test` without it.
#
# Installs the package with apt-get when it is missing and apt-get can run; otherwise prints a
# loud SKIP with the reason.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (runs the dev build's test binaries)"
source scripts/lib/cargo.sh

am=$(command -v prometheus-alertmanager || command -v alertmanager || true)
if [[ -z $am ]] && command -v apt-get >/dev/null && [[ $(id -u) -eq 0 ]]; then
  echo "-- installing Debian's prometheus-alertmanager package"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus-alertmanager) \
    >target/apt-alertmanager.log 2>&1 || true
  am=$(command -v prometheus-alertmanager || command -v alertmanager || true)
fi
if [[ -z $am ]]; then
  echo "SKIP: Alertmanager end to end: prometheus-alertmanager is not installed and apt-get install failed (see target/apt-alertmanager.log)"
  exit 0
fi
echo "-- $("$am" --version 2>&1 | head -1)"
PROCTOR_ALERTMANAGER="$am" run_tests proctor-cli it \
  alerts::alertmanager_gets_a_firing_and_a_resolved_alert_and_a_proctor_silence_holds_the_next \
  alerts::alertmanager_hears_a_firing_that_a_flapping_hold_keeps_from_other_receivers 2>&1
