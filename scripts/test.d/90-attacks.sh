#!/usr/bin/env bash
# The standing attack suite (issue 15), the parts that drive the built binary from outside:
# HTTP (auth bypass, DNS rebinding and cross-origin, path traversal, malformed requests, with
# ordinary clients and the sampler running meanwhile), malformed statsd packets and TCP
# streams, and hostile strace logs. Each is bounded
# to seconds and prints its figures. The other attacks are Rust integration tests run by
# `cargo test`: idle-connection and busy-connection floods (proctor-cli tests/it/flood.rs),
# SIGKILL of the recorder at random moments (record.rs), hostile statsd keys
# (statsd_attack.rs), a hand-built store frame against serve and dump (hostile_store.rs),
# corrupted, truncated and unreadable store files, FIFOs and a full disk (proctor-store
# tests/it/hostile.rs), hostile process names through promtool (65-prometheus) and Chromium
# (70-dashboard), and the fuzz targets (55-fuzz).
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (the dev build's proctor)"
source scripts/lib/cargo.sh

ensure_dev_proctor
proctor=$proctor_dev
python3 scripts/attacks/http_attacks.py "$proctor"
python3 scripts/attacks/statsd_attacks.py "$proctor"
bash scripts/attacks/strace_attacks.sh "$proctor"
