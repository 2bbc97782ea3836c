#!/usr/bin/env bash
# The fleet (issue 37), each part the real thing: OTLP/HTTP into Prometheus 3.5 itself
# (--web.enable-otlp-receiver) and into the OpenTelemetry Collector (its OTLP receiver and file
# exporter), both built with `go build` from their published Go modules
# (crates/proctor-remote/tests/prometheus3, otelcol); Debian's VictoriaMetrics
# as a remote-write receiver (asked for 2.0, which it does not take: the queue falls back to
# 1.0); packaging/grafana's dashboard and packaging/prometheus's rules against Debian's
# Prometheus fed by proctor (promtool check and test rules, every query returns data); three
# agents into one Prometheus and one VictoriaMetrics, one killed with -9 and restarted
# (crates/proctor-cli/tests/it/otlp.rs, remote_write.rs, fleet.rs). Installs victoria-metrics
# and prometheus when missing; otherwise a loud SKIP for what cannot be had.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: Prometheus 3.5 and the OpenTelemetry Collector (go build, crates/proctor-remote/tests/prometheus3 and otelcol); runs the dev build's test binaries"
source scripts/lib/cargo.sh

if ! command -v go >/dev/null; then
  echo "SKIP: OTLP end to end: no Go toolchain to build Prometheus 3 and the Collector: OTLP is NOT tested against either"
else
  otlp_env=()
  # Prometheus 3.5 itself (cmd/prometheus from its module; the version stamped as its release
  # would), and the Collector's OTLP receiver with its file exporter.
  build() { # NAME ENV GO-BUILD-ARGS...
    local name=$1 env=$2 started=$SECONDS
    shift 2
    if (cd "crates/proctor-remote/tests/$name" && go build -o "$root/target/$name" "$@") >"target/$name-build.log" 2>&1; then
      echo "-- built $name in $((SECONDS - started)) s"
      otlp_env+=("$env=$root/target/$name")
    else
      echo "SKIP: OTLP into $name: it did not build (the Go module proxy unreachable? see target/$name-build.log): that receiver is NOT tested"
    fi
  }
  root=$PWD
  build prometheus3 PROCTOR_PROMETHEUS3 -ldflags "-X github.com/prometheus/common/version.Version=3.5.0" \
    github.com/prometheus/prometheus/cmd/prometheus
  build otelcol PROCTOR_OTELCOL .
  # The wire test needs neither, and runs in any case.
  [[ ${#otlp_env[@]} -eq 0 ]] || export "${otlp_env[@]}"
  run_tests proctor-cli it --nocapture otlp:: 2>&1
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
