#!/usr/bin/env bash
# Months of rollups on a small box (issue 17): a year of 1-minute rows for 50 groups plus host
# and container must take <= 100 MB, and `proctor report --from "90 days ago"` over them <= 2 s.
#
# 1. A real capture: this script starts 49 groups of its own (40 idle ones of 1-3 sleepers, 9
#    busy "wrapper" loops that run a child every 0.2-1 s with random work), and every other
#    process falls into a 50th group, `other`; `proctor record --groups` records them at 1 s
#    for CAPTURE_MIN minutes (default 15).
# 2. The example `rollup_year` rolls the capture into minute rows as the agent does and writes
#    DAYS (default 365) of minute blocks ending now with the tier's own settings, compacts each
#    six hours into one block as the agent does, then rolls the hour tier from them, twice:
#    each minute a captured one drawn at random (pessimistic for the
#    delta coding: no minute follows from the one before), and the captured minutes in their
#    order, over and over, each hour from a random one (a minute follows from the one before as
#    on the box, but for the wrap-around).
# 3. hyperfine times `proctor report --from "90 days ago"` (host series) and with
#    `--all-groups` over the synthetic tiers, 5 runs each after a warm-up.
#
# Usage: bash bench/rollup/run.sh   (CAPTURE_MIN=15 DAYS=365; CAPTURE=DIR reuses an earlier
# capture instead of recording one). Ends only what it started.
set -euo pipefail
cd "$(dirname "$0")/../.."
CAPTURE_MIN=${CAPTURE_MIN:-15}
DAYS=${DAYS:-365}
cargo build --release --locked --quiet --bin proctor
cargo build --release --locked --quiet -p proctor-stored --example rollup_year
bin=target/release/proctor
work=$(mktemp -d /tmp/proctor-rollup-bench.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

cat > "$work/rules.yml" <<'RULES'
process_names:
  - name: "{{.Matches.g}}"
    cmdline: ['^rollbench-(?P<g>[a-z]+-[0-9]+)']
  - name: other
    cmdline: ['.+']
RULES
if [[ -n ${CAPTURE:-} ]]; then
  cp -r "$CAPTURE" "$work/capture"
else
for g in $(seq -w 1 40); do
  for p in $(seq 1 $((RANDOM % 3 + 1))); do
    setsid bash -c "exec -a rollbench-idle-$g sleep 100000" & pids+=($!)
  done
done
for g in $(seq -w 1 9); do
  setsid bash -c "exec -a rollbench-busy-$g bash -c 'while :; do head -c \$((RANDOM * 64)) /dev/urandom | md5sum >/dev/null; sleep 0.\$((RANDOM % 8 + 2)); done'" & pids+=($!)
done
sleep 2
echo "capturing ${CAPTURE_MIN} min at 1 s into $work/capture (load $(cut -d' ' -f1-3 /proc/loadavg))"
mkdir -p "$work/capture"
timeout --signal=INT $((CAPTURE_MIN * 60 + 5)) "$bin" record --dir "$work/capture" --interval 1s --groups "$work/rules.yml" \
  > "$work/record.txt" 2>&1 || true
cleanup
pids=()
fi
echo "synthesizing $DAYS days of minute rows (random minutes, then captured order)"
year=$(target/release/examples/rollup_year "$work/capture" "$work/year" "$DAYS")
echo "$year"
in_order=$(target/release/examples/rollup_year "$work/capture" "$work/in-order" "$DAYS" 7 sequence)
echo "$in_order"
rm -rf "$work/in-order"
echo
hyperfine --warmup 1 --runs 5 --export-json "$work/report.json" \
  -n "report 90 days" "$bin report --dir $work/year --from '90 days ago' --format json > /dev/null" \
  -n "report 90 days, all groups" "$bin report --dir $work/year --from '90 days ago' --all-groups --format json > /dev/null"
"$bin" report --dir "$work/year" --from '90 days ago' --all-groups | head -12
python3 - "$work" "$year" "$in_order" <<'PY'
import json, sys
work, year, in_order = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
runs = json.load(open(f"{work}/report.json"))["results"]
mb = year["minute_tier_bytes"] / 1e6
print(f"\n| figure | measured | goal |\n| --- | --- | --- |")
print(f"| a year of minute rows, {year['groups']} groups + host + container ({year['series']} series), random minutes | {mb:.1f} MB ({year['minute_tier_bytes'] / year['minute_rows']:.0f} B/row) | <= 100 MB |")
print(f"| the same before compaction (hour blocks) | {year['hour_blocks_bytes'] / 1e6:.1f} MB | |")
print(f"| the same, minutes in captured order | {in_order['minute_tier_bytes'] / 1e6:.1f} MB ({in_order['minute_tier_bytes'] / in_order['minute_rows']:.0f} B/row) | <= 100 MB |")
print(f"| the hour tier for the same year | {year['hour_tier_bytes'] / 1e6:.2f} MB | |")
for r in runs:
    print(f"| `proctor report --from '90 days ago'` ({r['command']}), median of 5 | {r['median']:.2f} s | <= 2 s |")
PY
echo "work dir: $work (remove it when done)"
