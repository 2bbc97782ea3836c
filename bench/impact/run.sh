#!/usr/bin/env bash
# proctor's cost as the target sees it (issue 34 item 4): `proctor impact` on the Netflix-shaped
# tree scaled to this machine — CHILDREN (24) children sharing SIZE (1G) copy-on-write, each
# mapping and touching fresh pages RATE (200) times a second on an open-loop schedule — in
# ROUNDS (5) rounds of DURATION (36s) per arm, arms alternating: no monitor, `proctor serve`
# at its defaults (1 s, PSS on), and the psutil loop jupyter-resource-usage runs
# (memory_full_info() over the tree, then a 1 s pause). About ten minutes with the defaults.
#   bash bench/impact/run.sh
#   DURATION=10s ROUNDS=3 bash bench/impact/run.sh             # a shorter run
#   PROCTOR_BIN=/tmp/old/proctor bash bench/impact/run.sh      # another build, not rebuilt
#   PYTHON=/path/to/python bash bench/impact/run.sh            # a Python with psutil
#   SWITCH=10s ROUNDS=3 DURATION=120s PSUTIL=0 bash bench/impact/run.sh
#       # turns: the arms alternate every 10 s, each monitor started once and stopped outside
#       # its turns; intervals resample whole cycles; no psutil arm (their width against rounds':
#       # docs/performance.md, impact, forty-second session)
#   SWITCH=10s ATTRIBUTE=1 PSUTIL=0 bash bench/impact/run.sh
#       # with turns, the run traced (needs tracefs: mount -t tracefs nodev /sys/kernel/tracing)
#       # and each monitor charged what the trace saw it delay; its tail beside the same
#       # operations' without those delays
#   AGENTS='serve --pss-slice 0;serve' SWITCH=10s ATTRIBUTE=1 PSUTIL=0 bash bench/impact/run.sh
#       # two proctor arms in one run, split at ';' (each one --agent): here the PSS worker on
#       # the kernel's slice and on its own (default)
# Needs a Python with psutil (python3 -m venv .venv && .venv/bin/pip install psutil); without
# one the psutil arm is reported as skipped. Prints the command, the load and the host's memory
# (bench/lib/host_memory.sh) before and after, the text report; keeps the JSON, the text and the plot in bench/out/impact/.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/proctor_bin.sh
source bench/lib/host_memory.sh
children=${CHILDREN:-24}
size=${SIZE:-1G}
rate=${RATE:-200}
rounds=${ROUNDS:-5}
duration=${DURATION:-36s}
python=${PYTHON:-.venv/bin/python}
switch=${SWITCH:-}
psutil=${PSUTIL:-1}
attribute=${ATTRIBUTE:-0}
agents=${AGENTS:-serve}
out=bench/out/impact
mkdir -p "$out"
command=("$PROCTOR_BIN" impact --workload pagefault --children "$children" --size "$size" --rate "$rate/s"
  --rounds "$rounds" --duration "$duration" --format json --plot "$out/impact.png")
IFS=';' read -ra agent_words <<<"$agents"
for words in "${agent_words[@]}"; do
  command+=(--agent "$words")
done
if [[ $psutil != 0 ]]; then
  command+=(--baseline psutil --baseline-python "$python")
fi
if [[ -n $switch ]]; then
  command+=(--switch "$switch")
fi
if [[ $attribute != 0 ]]; then
  command+=(--attribute)
fi
echo "-- $(nproc) CPUs, $(git rev-parse --short HEAD), $(uname -r)"
echo "-- load before: $(cat /proc/loadavg)"
echo "-- $(host_memory)"
echo "-- $(printf "%q " "${command[@]}")"
"${command[@]}" >"$out/impact.json"
echo "-- load after: $(cat /proc/loadavg)"
echo "-- $(host_memory)"
# The same figures as text, from the JSON just written (no second run).
python3 - "$out/impact.json" <<'PY' | tee "$out/impact.txt"
import json, sys
doc = json.load(open(sys.argv[1]))
ms = lambda s: "-" if s is None else f"{s * 1e3:.3f} ms"
for arm in doc["arms"]:
    if arm["skipped"]:
        print(f"{arm['name']}: SKIPPED: {arm['skipped']}")
        continue
    l = arm["latency"]
    print(f"{arm['name']}: {l['operations']} ops, p50 {ms(l['p50_seconds'])}, p99 {ms(l['p99_seconds'])}, "
          f"p99.9 {ms(l['p999_seconds'])}, max {ms(l['max_seconds'])}")
    for d in arm["differences"] or []:
        pct = "" if d["percent"] is None else f" ({d['percent']:+.1f} %)"
        print(f"  {d['statistic']:>5} {ms(d['seconds'])}{pct}, 95 % interval [{ms(d['low_seconds'])}, {ms(d['high_seconds'])}]"
              f"{' excludes 0' if d['includes_zero'] is False else ''}")
    for r in arm["rounds"]:
        rl = r["latency"] or {}
        print(f"  round {r['round']}: p99 {ms(rl.get('p99_seconds'))}, p99.9 {ms(rl.get('p999_seconds'))}, "
              f"max {ms(rl.get('max_seconds'))}, monitor CPU {r['monitor_cpu_seconds']}")
    if arm["monitor_cpu_seconds"] is not None:
        print(f"  monitor CPU {arm['monitor_cpu_seconds']:.2f} s ({arm['monitor_cpu_percent_of_one_cpu']:.2f} % of one CPU)")
    if arm["ledger"]:
        g = arm["ledger"]
        print(f"  ledger {ms(g['stall_seconds_total'])} over {g['processes']} processes, longest read "
              f"{ms(g['stall_max_seconds'])} (pid {g.get('stall_max_pid')} {g.get('stall_max_name')}, "
              f"{'timed' if g.get('stall_max_timed') else 'times nothing'}), {ms(g['timed_stall_seconds_total'])} on the timed children; "
              f"the tree's threads waited {ms(g['target_waited_seconds_total'])} on them (the agent's trace)")
    if arm.get("slept_operations") is not None:
        print(f"  {arm['slept_operations']} operations slept (waited for the mmap lock), {ms(arm['slept_seconds'])} in all")
    if arm["target_wait_beyond_none_seconds"] is not None:
        # As `proctor impact`'s text: beside the machine's noise the wait may come out below
        # none's, and a ratio then says nothing.
        ratio = arm["wait_over_ledger"]
        print(f"  target-side wait beyond none {ms(arm['target_wait_beyond_none_seconds'])}"
              + (f", {ratio * 100:.0f} % of the ledger" if ratio is not None and ratio > 0 else ""))
    for how, c in (arm.get("attributed") or {}).items():
        print(f"  charged by the trace ({how}): the threads' delays: CPU {ms(c['cpu_delay_seconds'])}, lock {ms(c['lock_delay_seconds'])}; "
              f"{c['operations_delayed']} operations delayed, by {ms(c['operations_delay_seconds'])} summed over them")
        w = c["without"] or {}
        print(f"    without: p99 {ms(w.get('p99_seconds'))}, p99.9 {ms(w.get('p999_seconds'))}, max {ms(w.get('max_seconds'))}")
        for d in c["differences"] or []:
            pct = "" if d["percent"] is None else f" ({d['percent']:+.2f} %)"
            print(f"    added {d['statistic']:>5} {ms(d['seconds'])}{pct}, 95 % interval [{ms(d['low_seconds'])}, {ms(d['high_seconds'])}]")
a = doc.get("attribution")
if a:
    print(f"attribution: {a['problem'] or ''} {a['events']} events, {a['lost_events']} lost, {a['unread_lines']} lines unread")
if doc.get("pauses_let_finish_a_traced_read"):
    print(f"{doc['pauses_let_finish_a_traced_read']} pauses let an agent finish a traced read first")
PY
echo "-- kept: $out/impact.json, $out/impact.txt, $out/impact.png"
