#!/usr/bin/env bash
# proctor probe (issue #5): self overhead per request beside curl -w and hey, against the
# same loopback server in one run. Every client sends N sequential GETs over one kept-alive
# connection (curl: N URLs in one invocation, which reuses the connection; hey: -c 1;
# proctor: -c 1). Reported per client: the latency it measured (p50, p90, p99, mean) and
# its own CPU per request (user+sys from /usr/bin/time over the whole run), then the
# differences against curl. The server (crates/proctor-probe/examples/probe_bench_server.rs)
# listens on 127.0.0.1 only and exits by itself after 300 s.
#
# Usage: bench/probe/run.sh [N]   (default N=5000; the clients run in turn, not at once)
# Installs: hey v0.1.5 into target/bench-bin (go install), if missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-5000}
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release --locked --bin proctor -p proctor-cli 2>&1 | tail -1
cargo build --release --locked -p proctor-probe --example probe_bench_server 2>&1 | tail -1
HEY=$TARGET/bench-bin/hey
[[ -x $HEY ]] || GOBIN=$TARGET/bench-bin go install github.com/rakyll/hey@v0.1.5
WORK=$(mktemp -d)
trap 'kill "$SERVER" 2>/dev/null; rm -rf "$WORK"' EXIT
"$TARGET/release/examples/probe_bench_server" --seconds 300 > "$WORK/port" &
SERVER=$!
for _ in $(seq 50); do [[ -s $WORK/port ]] && break; sleep 0.1; done
URL="http://127.0.0.1:$(cat "$WORK/port")/"
echo "server: pid $SERVER, $URL; N=$N; $(nproc) CPUs; $(uname -r)"

# curl: one invocation, N URLs from a config file, each written to /dev/null.
for _ in $(seq "$N"); do printf 'url = "%s"\noutput = "/dev/null"\n' "$URL"; done > "$WORK/curl.cfg"
CURL_CMD=(curl -s -K "$WORK/curl.cfg" -w '%{time_total}\n')
HEY_CMD=("$HEY" -n "$N" -c 1 -o csv "$URL")
PROCTOR_CMD=("$TARGET/release/proctor" probe "$URL" -n "$N" -c 1 --out "$WORK/proctor.jsonl" --format json)

run() { # name, command...: stdout to $WORK/name.out, "user sys elapsed" to $WORK/name.time
  local name=$1; shift
  echo "\$ ${*}" | sed "s|$WORK|\$WORK|g"
  /usr/bin/time -f '%U %S %e' -o "$WORK/$name.time" "$@" > "$WORK/$name.out"
}
# Warm-up, then the measured runs in turn.
"$HEY" -n 500 -c 1 "$URL" > /dev/null
run curl "${CURL_CMD[@]}"
run hey "${HEY_CMD[@]}"
run proctor "${PROCTOR_CMD[@]}"

python3 - "$WORK" "$N" <<'PY'
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
def seconds_curl():
    return [float(line) for line in open(f"{work}/curl.out") if line.strip()]
def seconds_hey():
    rows = [line.split(",") for line in open(f"{work}/hey.out")][1:]
    return [float(row[0]) for row in rows if len(row) > 1]
def seconds_proctor():
    return [json.loads(line)["total_ns"] / 1e9 for line in open(f"{work}/proctor.jsonl")]
def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]
rows = {}
for name, read in [("curl", seconds_curl), ("hey", seconds_hey), ("proctor", seconds_proctor)]:
    values = read()
    user, system, elapsed = map(float, open(f"{work}/{name}.time").read().split()[-3:])
    rows[name] = dict(
        count=len(values), p50=pct(values, .5) * 1e6, p90=pct(values, .9) * 1e6,
        p99=pct(values, .99) * 1e6, mean=sum(values) / len(values) * 1e6,
        cpu=(user + system) / n * 1e6, wall=elapsed / n * 1e6)
print(f"\n{'client':8} {'count':>6} {'p50 µs':>8} {'p90 µs':>8} {'p99 µs':>8} {'mean µs':>8} {'CPU µs/req':>11} {'wall µs/req':>12}")
for name, r in rows.items():
    print(f"{name:8} {r['count']:>6} {r['p50']:>8.1f} {r['p90']:>8.1f} {r['p99']:>8.1f} {r['mean']:>8.1f} {r['cpu']:>11.1f} {r['wall']:>12.1f}")
base = rows["curl"]
print("\nagainst curl (reported p50 latency / own CPU per request / wall per request):")
for name in ("hey", "proctor"):
    r = rows[name]
    print(f"  {name:8} p50 {r['p50'] - base['p50']:+.1f} µs, CPU {r['cpu'] - base['cpu']:+.1f} µs, wall {r['wall'] - base['wall']:+.1f} µs")
PY
