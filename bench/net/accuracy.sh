#!/usr/bin/env bash
# Per-process network, accuracy (issue 36): bench/net/workload.py's mixed loopback workload (a
# TCP bulk transfer, datagrams both ways, HTTP requests to python's http.server), each peer's
# payload as the kernel table counted it against what the peer says it sent and received (goal:
# within 0.5 %), and the table's whole (process rows + the unowned row) against the devices'
# own counters over the same window (goal: within 2 %).
#   bash bench/net/accuracy.sh               # 50 MB, 20,000 datagrams, 1,000 requests
#   bash bench/net/accuracy.sh 10 5000 300
# Needs root (CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN); without it a SKIP line says why.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build -q --release --locked -p proctor-bpf --example net_accuracy
exec target/release/examples/net_accuracy python3 bench/net/workload.py "$@"
