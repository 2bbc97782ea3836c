#!/usr/bin/env bash
# Remote write (issue 20) against the real thing: Debian's Prometheus started on loopback with
# --web.enable-remote-write-receiver takes proctor serve's samples; three agents are three
# instances; after a 30 s outage of the receiver and a restart of the agent mid-backlog, every
# stored sample is in Prometheus at its time with its value (crates/proctor-cli/tests/it/
# remote_write.rs). Installs the prometheus package when missing; otherwise a loud SKIP.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v prometheus >/dev/null; then
  if command -v apt-get >/dev/null && [[ $(id -u) -eq 0 ]]; then
    echo "-- installing Debian's prometheus package"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus) \
      >target/apt-prometheus.log 2>&1 || true
  fi
fi
if ! command -v prometheus >/dev/null; then
  echo "SKIP: remote write end to end: prometheus is not installed and apt-get install prometheus failed (see target/apt-prometheus.log)"
  exit 0
fi
echo "-- $(prometheus --version 2>&1 | head -1)"
PROCTOR_PROMETHEUS="$(command -v prometheus)" \
  cargo test --locked -p proctor-cli --test it -- --nocapture remote_write:: 2>&1
