#!/usr/bin/env bash
# What remote write costs (issue 20), with Debian's prometheus and prometheus-node-exporter on
# loopback, all in one run:
#   1. Agent CPU per sample at --interval 1s, two agents side by side for SECONDS_RUN (120)
#      seconds, one with --remote-write, one without, both recording: the ratio (goal ≤ 1.25×).
#   2. Bytes on the wire per sample and per series point (snappy protobuf), beside the same
#      host's node_exporter scrape (gzip text, what Prometheus fetches) per point.
#   3. Backfill after an OUTAGE (600 s) of the receiver: samples per second until caught up,
#      and the receiver's CPU over the backfill.
#   bash bench/remote_write/run.sh
#   SECONDS_RUN=60 OUTAGE=120 bash bench/remote_write/run.sh
#   PROCTOR_BIN=/tmp/old/proctor bash bench/remote_write/run.sh
# Every process it starts is ended by its pid (on Ctrl-C too).
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/proctor_bin.sh
run_secs=${SECONDS_RUN:-120}
outage=${OUTAGE:-600}
for tool in prometheus prometheus-node-exporter curl python3; do
  command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install prometheus prometheus-node-exporter curl)"; exit 1; }
done
source bench/lib/work.sh
prom_port=$(free_port)
ne_port=$(free_port)
prometheus-node-exporter --web.listen-address="127.0.0.1:$ne_port" >"$work/ne.log" 2>&1 &
pids+=($!)
cat >"$work/prom.yml" <<EOF
global:
  scrape_interval: 1h
EOF
start_prom() {
  prometheus --config.file="$work/prom.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" --web.enable-remote-write-receiver >>"$work/prom.log" 2>&1 &
  prom_pid=$!
  pids+=("$prom_pid")
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$prom_port/-/ready" >/dev/null && return; sleep 0.2; done
  echo "prometheus did not start"; exit 1
}
start_prom
url="http://127.0.0.1:$prom_port/api/v1/write"
start_agent on "$work/on" --remote-write "$url" --external-label instance=bench
start_agent off "$work/off"
echo "-- $(nproc) cores; agents at --interval 1s for ${run_secs} s: remote write on (pid $on_pid), off (pid $off_pid)"
sleep "$run_secs"
agent() { curl -s "$1/api/v1/agent"; }
python3 - "$(agent "$on_base")" "$(agent "$off_base")" <<'PY'
import json, sys
on, off = json.loads(sys.argv[1]), json.loads(sys.argv[2])
per = lambda a: a["cpu_seconds_total"] / a["samples_total"] * 1e3
print(f"agent CPU per sample: remote write on {per(on):.3f} ms, off {per(off):.3f} ms: {per(on) / per(off):.2f}x (goal <= 1.25x)")
q = on["remote_write"][0]
print(f"sent: {q['samples_sent_total']} samples, {q['points_sent_total']} points in {q['requests_sent_total']} requests, "
      f"{q['bytes_sent_total']} bytes: {q['bytes_sent_total'] / q['samples_sent_total']:.0f} bytes/sample, "
      f"{q['bytes_sent_total'] / q['points_sent_total']:.2f} bytes/point, lag {q['lag_secs']:.1f} s")
PY
# node_exporter, as Prometheus scrapes it (gzip): bytes and points of one scrape.
ne_bytes=$(curl -s --compressed -o "$work/ne.txt" -w '%{size_download}' -H 'Accept-Encoding: gzip' "http://127.0.0.1:$ne_port/metrics")
ne_points=$(grep -vc '^#' "$work/ne.txt")
python3 -c "print(f'node_exporter scrape: {$ne_bytes} bytes (gzip), {$ne_points} points: {$ne_bytes / $ne_points:.2f} bytes/point')"
kill "$off_pid"

echo "-- receiver down for ${outage} s"
kill "$prom_pid"
wait "$prom_pid" 2>/dev/null || true
sleep "$outage"
before=$(agent "$on_base")
start_prom
t0=$(date +%s.%N)
cpu0=$(awk '{print $14 + $15}' "/proc/$prom_pid/stat")
while :; do
  lag=$(agent "$on_base" | python3 -c 'import json,sys; q=json.load(sys.stdin)["remote_write"][0]; print(q["lag_secs"] or 1e9)')
  python3 -c "import sys; sys.exit(0 if $lag < 6 else 1)" && break
  sleep 0.5
done
t1=$(date +%s.%N)
cpu1=$(awk '{print $14 + $15}' "/proc/$prom_pid/stat")
python3 - "$before" "$(agent "$on_base")" "$t0" "$t1" "$cpu0" "$cpu1" "$(getconf CLK_TCK)" <<'PY'
import json, sys
b, a = json.loads(sys.argv[1])["remote_write"][0], json.loads(sys.argv[2])["remote_write"][0]
t0, t1, c0, c1, tck = map(float, sys.argv[3:8])
n, secs = a["samples_sent_total"] - b["samples_sent_total"], t1 - t0
print(f"backfill: {n} samples in {secs:.1f} s after the receiver came back: {n / secs:.1f} samples/s "
      f"(--remote-write-backfill-rate 100); receiver CPU {(c1 - c0) / tck:.2f} s ({100 * (c1 - c0) / tck / secs:.0f} % of one CPU)")
PY
