#!/usr/bin/env bash
# Backfill CPU per sample sent, against the backlog behind the cursor (issue 33 item 10): each
# batch used to walk every stored frame after the cursor.
#
# For each backlog in BACKLOGS (default "3000 30000") a synthetic store of that many 1 s samples
# ending now (crates/proctor-stored/examples/store_day: one real sample of this host, its times
# and host counters moved on; default StoreConfig, so hour segments), with a remote-write cursor
# before its first sample; then `proctor serve --remote-write` to a loopback receiver that
# answers 204 to everything (python3), `--remote-write-backfill-rate RATE` (default 1000; a batch
# is 60 samples). Measured: the CPU of the queue's thread (`proctor-remote`, its
# /proc/PID/task/TID/schedstat) over the samples it sends from the 100th to the SENT-th (default
# 2000), per sample. Every binary in BINS (default: PROCTOR_BIN, a release build of this
# checkout) runs each backlog, side by side, ROUNDS (default 3) times; medians at the end.
#   bash bench/remote_write/backlog.sh
#   BINS="/tmp/old/proctor target/release/proctor" ROUNDS=5 bash bench/remote_write/backlog.sh
# Ends only what it started, by pid.
set -euo pipefail
cd "$(dirname "$0")/../.."
backlogs=${BACKLOGS:-3000 30000}
rate=${RATE:-1000}
sent=${SENT:-2000}
rounds=${ROUNDS:-3}
if [[ -z ${BINS:-} ]]; then
  source bench/lib/proctor_bin.sh
  BINS=$PROCTOR_BIN
fi
store_day=${STORE_DAY_BIN:-}
if [[ -z $store_day ]]; then
  cargo build --release --locked --quiet -p proctor-stored --example store_day
  store_day=${CARGO_TARGET_DIR:-target}/release/examples/store_day
fi
WORK_TEMPLATE=/tmp/proctor-backlog-bench.XXXXXX source bench/lib/work.sh

port=$(free_port)
python3 - "$port" >"$work/receiver.log" 2>&1 <<'PY' &
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
PY
pids+=($!)
url="http://127.0.0.1:$port/api/v1/write"

for backlog in $backlogs; do
  end_ms=$(($(date +%s%3N) - 1000))
  "$store_day" "$work/store-$backlog" "$backlog" 1000 "$end_ms"
  echo "$(((end_ms - backlog * 1000) * 1000000 - 1))" >"$work/start-$backlog"
done

one() { # BIN BACKLOG: prints the queue thread's ms of CPU per sample sent
  local bin=$1 backlog=$2 dir=$work/run
  rm -rf "$dir"
  cp -r "$work/store-$backlog" "$dir"
  mkdir "$dir/remote-write"
  python3 - "$dir/remote-write" "$url" "$(cat "$work/start-$backlog")" <<'PY'
import json, sys, re
d, url, ns = sys.argv[1], sys.argv[2], int(sys.argv[3])
# proctor_remote::queue::cursor_file_name
h = 0xcbf29ce484222325
for b in url.encode():
    h = ((h ^ b) * 0x100000001b3) & (2**64 - 1)
readable = re.sub(r"[^A-Za-z0-9.-]", "_", url.removeprefix("https://").removeprefix("http://"))[:48]
json.dump({"url": url, "unix_ns": ns, "seq": 0}, open(f"{d}/{readable}-{h:016x}.json", "w"))
PY
  "$bin" serve --listen 127.0.0.1:0 --interval 1s --pss-budget 0 --data-dir "$dir" \
    --remote-write "$url" --remote-write-backfill-rate "$rate" 2>"$work/serve.log" &
  local pid=$!
  pids+=("$pid")
  local base=""
  for _ in $(seq 100); do
    base=$(grep -o 'listening on http://[0-9.:]*' "$work/serve.log" | sed 's/listening on //') && [[ -n $base ]] && break
    sleep 0.1
  done
  python3 - "$pid" "$base" "$sent" <<'PY'
import glob, json, sys, time, urllib.request
pid, base, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
def thread():
    for task in glob.glob(f"/proc/{pid}/task/*"):
        if open(f"{task}/comm").read().strip() == "proctor-remote":
            return task
def point(task):
    q = json.load(urllib.request.urlopen(f"{base}/api/v1/agent"))["remote_write"][0]
    return q["samples_sent_total"], int(open(f"{task}/schedstat").read().split()[0])
task = None
while task is None:
    task = thread()
    time.sleep(0.05)
start = None
deadline = time.time() + 600
while time.time() < deadline:
    n, cpu = point(task)
    if start is None and n >= 100:
        start = (n, cpu)
    if start and n >= want:
        print(f"{(cpu - start[1]) / 1e6 / (n - start[0]):.3f}")
        break
    time.sleep(0.2)
else:
    sys.exit("timed out")
PY
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

echo "-- $(nproc) cores; backfill rate $rate/s; queue thread CPU over samples 100..$sent sent"
declare -A results
for round in $(seq "$rounds"); do
  for backlog in $backlogs; do
    for bin in $BINS; do
      ms=$(one "$bin" "$backlog")
      echo "round $round: backlog $backlog, $bin: $ms ms CPU per sample sent (load $(cut -d' ' -f1 /proc/loadavg))"
      results["$backlog $bin"]+="$ms "
    done
  done
done
echo "-- medians (ms of the queue thread's CPU per sample sent)"
for backlog in $backlogs; do
  for bin in $BINS; do
    python3 -c "import statistics, sys; print(f'backlog {sys.argv[1]:>6}: {statistics.median(map(float, sys.argv[3].split())):.3f} ms  ({sys.argv[3].strip()})  {sys.argv[2]}')" \
      "$backlog" "$bin" "${results["$backlog $bin"]}"
  done
done
