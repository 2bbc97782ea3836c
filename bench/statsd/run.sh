#!/usr/bin/env bash
# Benchmark: proctor statsd vs Etsy statsd 0.9.0 on loopback, same run, same blaster.
#   bench/statsd/run.sh                      # 5 M packets full speed + 20k..500k pkt/s sweep
#   FULL_PACKETS=1000000 RATES="20000 100000" SWEEP_SECONDS=2 bench/statsd/run.sh
#   ROUNDS=3 PROCTOR_BASELINE=target/baseline/proctor bench/statsd/run.sh   # medians, before vs after
# Prints one JSON line per measurement and a markdown table; keeps JSON under bench/out/.
# Loopback only; every server it starts is stopped by PID; the blaster's count is bounded.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --locked -p proctor-cli
cargo build --release --locked -p proctor-statsd --example statsd_blast
if [[ ! -f target/etsy-statsd/node_modules/statsd/stats.js ]]; then
  mkdir -p target/etsy-statsd
  npm install --prefix target/etsy-statsd --no-audit --no-fund --silent statsd@0.9.0
fi
echo "# $(nproc) CPUs, $(uname -r), net.core.rmem_max=$(sysctl -n net.core.rmem_max), rmem_default=$(sysctl -n net.core.rmem_default), node $(node --version)"
exec python3 bench/statsd/bench.py
