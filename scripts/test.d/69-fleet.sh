#!/usr/bin/env bash
# The fleet (issue 37), each part the real thing: OTLP/HTTP into Prometheus 3.5's own OTLP write
# handler and TSDB, and the OpenTelemetry Collector's pdata decoder (a receiver built with `go
# build` from their Go modules, crates/proctor-remote/tests/otlprecv), and into the Collector
# itself (its OTLP receiver and file exporter, crates/proctor-remote/tests/otelcol); Debian's VictoriaMetrics
# as a remote-write receiver (asked for 2.0, which it does not take: the queue falls back to
# 1.0); packaging/grafana's dashboard and packaging/prometheus's rules against Debian's
# Prometheus fed by proctor (promtool check and test rules, every query returns data); three
# agents into one Prometheus and one VictoriaMetrics, one killed with -9 and restarted
# (crates/proctor-cli/tests/it/otlp.rs, remote_write.rs, fleet.rs). Installs victoria-metrics
# and prometheus when missing; otherwise a loud SKIP for what cannot be had.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: the OTLP receivers (go build, crates/proctor-remote/tests/otlprecv and otelcol); runs the dev build's test binaries"
source scripts/lib/cargo.sh

if ! command -v go >/dev/null; then
  echo "SKIP: OTLP end to end: no Go toolchain to build the receivers: OTLP is NOT tested against Prometheus's OTLP handler or the Collector"
else
  otlp_env=()
  for r in otlprecv otelcol; do
    started=$SECONDS
    if (cd "crates/proctor-remote/tests/$r" && go build -o "$PWD/../../../../target/$r" .) >"target/$r-build.log" 2>&1; then
      echo "-- built $r in $((SECONDS - started)) s"
      [[ $r == otlprecv ]] && otlp_env+=("PROCTOR_OTLPRECV=$PWD/target/$r") || otlp_env+=("PROCTOR_OTELCOL=$PWD/target/$r")
    else
      echo "SKIP: OTLP into $r: it did not build (the Go module proxy unreachable? see target/$r-build.log): that receiver is NOT tested"
    fi
  done
  if [[ ${#otlp_env[@]} -gt 0 ]]; then
    export "${otlp_env[@]}"
    run_tests proctor-cli it --nocapture otlp:: 2>&1
  fi
fi

wanted=()
command -v victoria-metrics >/dev/null || wanted+=(victoria-metrics)
command -v prometheus >/dev/null && command -v promtool >/dev/null || wanted+=(prometheus)
if [[ ${#wanted[@]} -gt 0 ]] && command -v apt-get >/dev/null && [[ $(id -u) -eq 0 ]]; then
  echo "-- installing Debian's ${wanted[*]}"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${wanted[@]}") \
    >target/apt-fleet.log 2>&1 || true
fi
vm=$(command -v victoria-metrics || true)
prom=$(command -v prometheus || true)
promtool=$(command -v promtool || true)
if [[ -n $vm ]]; then
  echo "-- Debian's victoria-metrics $(dpkg-query -W -f='${Version}' victoria-metrics 2>/dev/null || echo '(version unknown)')"
  PROCTOR_VICTORIA_METRICS="$vm" run_tests proctor-cli it --nocapture remote_write::victoria 2>&1
else
  echo "SKIP: VictoriaMetrics end to end: victoria-metrics is not installed and apt-get install failed (see target/apt-fleet.log)"
fi
if [[ -n $prom && -n $promtool ]]; then
  echo "-- $(prometheus --version 2>&1 | head -1): packaging/grafana and packaging/prometheus against it"
  [[ -n $vm ]] || echo "SKIP: the three-agent fleet: no victoria-metrics (see target/apt-fleet.log); only the dashboard and rules are checked"
  if [[ -n $vm ]]; then export PROCTOR_VICTORIA_METRICS="$vm"; fi
  PROCTOR_PROMETHEUS="$prom" PROCTOR_PROMTOOL="$promtool" run_tests proctor-cli it --nocapture fleet:: 2>&1
else
  echo "SKIP: the fleet's dashboard, rules and three agents: prometheus/promtool are not installed and apt-get install failed (see target/apt-fleet.log)"
fi
