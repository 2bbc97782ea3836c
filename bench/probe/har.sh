#!/usr/bin/env bash
# proctor probe analyze of two large HAR files (issue 33 item 16): peak RSS and wall time of
# two builds, side by side in one run (rounds interleaved: old, new, old, new…), and whether
# their reports are the same text. The files are written by bench/probe/har.py when absent:
# http.har (250,000 HTTP entries, 305 MB) and ws.har (one WebSocket entry, 3,000,000
# messages, 1,500,000 pairs, 322 MB).
#
# Usage: bench/probe/har.sh OLD_PROCTOR NEW_PROCTOR [DIR] [ROUNDS]   (DIR /tmp/har, ROUNDS 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
OLD=$1 NEW=$2 DIR=${3:-/tmp/har} ROUNDS=${4:-3}
[[ -s $DIR/http.har && -s $DIR/ws.har ]] || python3 bench/probe/har.py "$DIR"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "$(nproc) CPUs; $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg) before"
for file in http ws; do
  echo "\$ /usr/bin/time -f \"%M KiB %e s\" PROCTOR probe analyze $DIR/$file.har"
  for round in $(seq "$ROUNDS"); do
    for build in old new; do
      bin=$OLD; [[ $build == new ]] && bin=$NEW
      /usr/bin/time -f "%M %e" -o "$WORK/$file.$build.$round.time" \
        "$bin" probe analyze "$DIR/$file.har" > "$WORK/$file.$build.$round.out" 2> /dev/null
    done
  done
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg) after"
python3 - "$WORK" "$ROUNDS" <<'PY'
import filecmp, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
print(f"{'file':6} {'build':5} {'max RSS KiB (median)':>21} {'wall s (median)':>16}  rounds")
for file in ("http", "ws"):
    for build in ("old", "new"):
        runs = [open(f"{work}/{file}.{build}.{r}.time").read().split() for r in range(1, rounds + 1)]
        rss = statistics.median(int(run[0]) for run in runs)
        wall = statistics.median(float(run[1]) for run in runs)
        every = ", ".join(f"{int(run[0]):,} KiB {run[1]} s" for run in runs)
        print(f"{file:6} {build:5} {rss:>21,.0f} {wall:>16.2f}  {every}")
    same = all(filecmp.cmp(f"{work}/{file}.old.1.out", f"{work}/{file}.{b}.{r}.out", shallow=False)
               for b in ("old", "new") for r in range(1, rounds + 1))
    print(f"{file}: reports {'the same text' if same else 'DIFFER'} in every run")
PY
