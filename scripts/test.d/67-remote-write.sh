#!/usr/bin/env bash
# Remote write (issue 20) against the real thing: Debian's Prometheus started on loopback with
# --web.enable-remote-write-receiver takes proctor serve's samples; three agents are three
# instances; after a 30 s outage of the receiver and a restart of the agent mid-backlog, every
# stored sample is in Prometheus at its time with its value (crates/proctor-cli/tests/it/
# remote_write.rs). Installs the prometheus package when missing; otherwise a loud SKIP.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: the 2.0 receiver (go build, crates/proctor-remote/tests/v2recv); runs the dev build's test binaries"
source scripts/lib/cargo.sh

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
  run_tests proctor-cli it --nocapture remote_write:: 2>&1

# Remote write 2.0 against Prometheus's own decoder: a receiver built with `go build` from the
# Go module proxy's Prometheus 3.5 (prompb/io/prometheus/write/v2, what Prometheus 3.x's receiver
# decodes with; Debian's Prometheus 2.42 takes only 1.0), crates/proctor-remote/tests/v2recv/.
if ! command -v go >/dev/null; then
  echo "SKIP: remote write 2.0: no Go toolchain to build the 2.0 receiver: version 2 is NOT tested against Prometheus's decoder"
  exit 0
fi
recv=$PWD/target/v2recv
if ! (cd crates/proctor-remote/tests/v2recv && go build -o "$recv" .) >target/v2recv-build.log 2>&1; then
  echo "SKIP: remote write 2.0: the receiver did not build (the Go module proxy unreachable? see target/v2recv-build.log): version 2 is NOT tested against Prometheus's decoder"
  exit 0
fi
ensure_dev_proctor
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$recv" "127.0.0.1:$port" >"$work/seen.jsonl" 2>"$work/recv.log" &
recv_pid=$!
mkdir "$work/data"
"$proctor_dev" serve --listen 127.0.0.1:0 --interval 500ms --data-dir "$work/data" \
  --remote-write "http://127.0.0.1:$port/api/v1/write" --remote-write-version 2 2>"$work/serve.log" &
serve_pid=$!
trap 'kill "$serve_pid" "$recv_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 60); do
  [[ -s $work/seen.jsonl ]] && break
  sleep 0.5
done
kill "$serve_pid"
wait "$serve_pid" || true
python3 - "$work/seen.jsonl" "$work/serve.log" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines, "the 2.0 receiver took no request; serve said:\n" + open(sys.argv[2]).read()
for s in lines:
    assert s["content_type"] == "application/x-protobuf;proto=io.prometheus.write.v2.Request", s
    assert s["version"] == "2.0.0" and s["encoding"] == "snappy", s
    assert s["problems"] == [], s
assert any('type=gauge help="Load average over 1 minute."' in s.get("load1", "") for s in lines), lines
print(f"remote write 2.0: {len(lines)} requests decoded by Prometheus's writev2, {lines[0]['series']} series, {lines[0]['symbols']} symbols, no problems")
PY
