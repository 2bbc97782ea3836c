#!/usr/bin/env bash
# What each fleet exporter costs (issue 37), side by side in one run, on loopback: four agents
# at --interval 1s for SECONDS_RUN (120) seconds, all recording, one with no exporter, one with
# remote write 1.0 into Debian's Prometheus, one with remote write 2.0 into the 2.0 receiver
# (crates/proctor-remote/tests/v2recv: Prometheus 3.5's decoder), one with OTLP into Prometheus
# 3.5 itself (crates/proctor-remote/tests/prometheus3, --web.enable-otlp-receiver). It prints,
# per exporter:
#   1. bytes on the wire per sample (the compressed bodies the receiver answered 2xx for),
#      beside node_exporter scraped as Prometheus scrapes it (gzip text), per scrape;
#   2. the agent's CPU per sample against the agent without an exporter (goal <= 1.15x).
#   bash bench/fleet/run.sh
#   SECONDS_RUN=300 bash bench/fleet/run.sh
#   PROCTOR_BIN=/tmp/old/proctor bash bench/fleet/run.sh
# Every process it starts is ended by its pid (on Ctrl-C too).
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/proctor_bin.sh
run_secs=${SECONDS_RUN:-120}
for tool in prometheus prometheus-node-exporter curl python3 go; do
  command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install prometheus prometheus-node-exporter curl golang)"; exit 1; }
done
root=$PWD
(cd crates/proctor-remote/tests/v2recv && go build -o "$root/target/v2recv" .) || { echo "go build of v2recv failed"; exit 1; }
(cd crates/proctor-remote/tests/prometheus3 && go build -o "$root/target/prometheus3" github.com/prometheus/prometheus/cmd/prometheus) \
  || { echo "go build of prometheus3 failed"; exit 1; }
source bench/lib/work.sh
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.2; done; echo "nothing on port $1"; exit 1; }
prom_port=$(free_port); ne_port=$(free_port); v2_port=$(free_port); otlp_port=$(free_port)
prometheus-node-exporter --web.listen-address="127.0.0.1:$ne_port" >"$work/ne.log" 2>&1 &
pids+=($!)
printf 'global:\n  scrape_interval: 1h\n' >"$work/prom.yml"
prometheus --config.file="$work/prom.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" --web.enable-remote-write-receiver >"$work/prom.log" 2>&1 &
pids+=($!)
target/v2recv "127.0.0.1:$v2_port" >/dev/null 2>"$work/v2.log" &
pids+=($!)
mkdir "$work/prom3"
printf 'global:\n  scrape_interval: 1h\n' >"$work/prom3/prom.yml"
target/prometheus3 --config.file="$work/prom3/prom.yml" --storage.tsdb.path="$work/prom3/tsdb" \
  --web.listen-address="127.0.0.1:$otlp_port" --web.enable-otlp-receiver >"$work/prom3.log" 2>&1 &
pids+=($!)
for p in "$ne_port" "$prom_port" "$v2_port" "$otlp_port"; do wait_port "$p"; done

start_agent off "$work/off"
start_agent rw1 "$work/rw1" --remote-write "http://127.0.0.1:$prom_port/api/v1/write" --external-label instance=rw1
start_agent rw2 "$work/rw2" --remote-write "http://127.0.0.1:$v2_port/api/v1/write" --remote-write-version 2 --external-label instance=rw2
start_agent otlp "$work/otlp" --otlp "http://127.0.0.1:$otlp_port/api/v1/otlp/v1/metrics" --external-label instance=otlp
echo "-- $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); four agents at --interval 1s for ${run_secs} s: $PROCTOR_BIN"
sleep "$run_secs"
agent() { curl -s "$1/api/v1/agent"; }
ne_bytes=$(curl -s -o "$work/ne.gz" -w '%{size_download}' -H 'Accept-Encoding: gzip' "http://127.0.0.1:$ne_port/metrics")
ne_points=$(gzip -dc "$work/ne.gz" | grep -vc '^#')
python3 - "$(agent "$off_base")" "$(agent "$rw1_base")" "$(agent "$rw2_base")" "$(agent "$otlp_base")" "$ne_bytes" "$ne_points" <<'PY'
import json, sys
off, *on = [json.loads(a) for a in sys.argv[1:5]]
ne_bytes, ne_points = int(sys.argv[5]), int(sys.argv[6])
per = lambda a: a["cpu_seconds_total"] / a["samples_total"] * 1e3
print(f"node_exporter scrape (gzip text): {ne_bytes} bytes, {ne_points} points per scrape: {ne_bytes / ne_points:.2f} bytes/point")
print(f"agent without an exporter: {per(off):.3f} ms CPU per sample ({off['samples_total']} samples)")
for name, a in zip(["remote write 1.0", "remote write 2.0", "OTLP/HTTP"], on):
    q = a["remote_write"][0]
    sent = q["samples_sent_total"]
    assert sent > 0 and not q["failed_total"], (name, q)
    print(f"{name:17}: {q['bytes_sent_total'] / sent:7.0f} bytes/sample ({q['bytes_sent_total'] / q['points_sent_total']:.2f} bytes/point, "
          f"{q['points_sent_total'] / sent:.0f} points/sample, {q['protocol_version']}), "
          f"{per(a):.3f} ms CPU per sample: {per(a) / per(off):.2f}x without (goal <= 1.15x)")
PY
