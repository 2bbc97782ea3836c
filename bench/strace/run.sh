#!/usr/bin/env bash
# Benchmark of `proctor strace` on a generated 5 M-line `-f -tt -T -y` log (~560 MB):
# throughput against `cat` and `wc -l` in the same hyperfine run (all reading from the page
# cache after a warm-up), then peak RSS from /usr/bin/time -v. The log lives in /tmp and is
# deleted at the end. Usage: bench/strace/run.sh [LINES]
set -euo pipefail
cd "$(dirname "$0")/../.."
lines="${1:-5000000}"
log="/tmp/proctor-strace-bench.$$.log"
trap 'rm -f "$log"' EXIT

command -v hyperfine >/dev/null || { echo "hyperfine is needed (apt-get install hyperfine)" >&2; exit 1; }
cargo build --release --locked --quiet --bin proctor
proctor="$PWD/target/release/proctor"

echo "== generating $lines lines into $log"
python3 bench/strace/gen.py "$lines" >"$log"
bytes=$(stat -c %s "$log")
echo "size: $bytes bytes; machine: $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== throughput (medians; MB/s = $bytes / median)"
hyperfine --warmup 1 --runs 5 --export-json /tmp/proctor-strace-bench.json \
  "cat $log > /dev/null" \
  "wc -l $log" \
  "$proctor strace $log > /dev/null"
python3 - "$bytes" <<'PY'
import json, sys
size = int(sys.argv[1])
for result in json.load(open("/tmp/proctor-strace-bench.json"))["results"]:
    print(f'{result["median"]:.3f} s median  {size / result["median"] / 1e9:.2f} GB/s  {result["command"]}')
PY
rm -f /tmp/proctor-strace-bench.json

echo "== memory"
/usr/bin/time -v "$proctor" strace "$log" 2>&1 >/dev/null | grep -E "Maximum resident|Elapsed"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
