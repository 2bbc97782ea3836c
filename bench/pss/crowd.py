#!/usr/bin/env python3
"""The PSS worker's cap on one hold where the load comes and goes: how many big quiet processes
a real `proctor serve` caps (reads whole past `--target-max-hold`, then never again), and what
it read instead, build against build (`how_to_read`, `BUSY_FACTOR` in
crates/proctor-sampler/src/pss.rs).

    python3 bench/pss/crowd.py OLD NEW
    CHILDREN=16 SIZE=512 CAP=50ms SECONDS=300 REPEATS=2 BUDGET=0.005 python3 bench/pss/crowd.py OLD NEW

CHILDREN pythons (16) each keep SIZE MiB (512) resident and write 40 of those pages every 5 ms:
no new pages, so their counters stand and the worker reads each through `smaps_rollup` again as
its reading reaches the maximum age (60 s). Two loops run and sleep by turns for random spells
(0.2-2 s running, 0-1.9 s asleep; bash's RANDOM, seeded), so the host is crowded (more tasks
runnable than CPUs) about half the time. `proctor serve --no-record --target-max-hold CAP
--pss-budget BUDGET` runs for SECONDS; then, from its API, the children it capped (`pss_note`),
the longest hold on any of them, and the worker's reads, walks through `pagemap` and reads put
off while the host was busy (`reads_put_off_busy`, absent from builds without it). A 512 MiB
child held ~28 ms on a quiet host here: under the 50 ms cap with the margin (42 ms), past it at
twice that, so quiet reads are made whole and crowded ones may pass the cap. Each binary in
turn, REPEATS times; the load is printed before each run. Run it alone: the load it makes is
the point.

With PIN=CPU (a CPU number), the crowd is on the agent's own CPU rather than the host's: the
agent runs under `taskset -c CPU`, and in place of the two flickering loops one loop runs there
without pause (`taskset -c CPU`). The host then has at most two tasks runnable, no more than
its CPUs, so only the busy share of the CPUs the agent may run on (`pss_worker.crowd_cpus`,
builds from `53b31b7`) says the agent's reads would share their CPU.
    PIN=1 CHILDREN=16 SIZE=512 SECONDS=180 REPEATS=1 python3 bench/pss/crowd.py OLD NEW
"""
import os
import subprocess
import sys
import time

from common import child_source, flickering, get, serve

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHILDREN = int(os.environ.get("CHILDREN", "16"))
SIZE = int(os.environ.get("SIZE", "512"))
CAP = os.environ.get("CAP", "50ms")
SECONDS = int(os.environ.get("SECONDS", "300"))
REPEATS = int(os.environ.get("REPEATS", "2"))
BUDGET = os.environ.get("BUDGET", "0.005")
PIN = os.environ.get("PIN")


def load():
    return " ".join(open("/proc/loadavg").read().split()[:4])


def one(binary, seed):
    children, loops, serve_proc = [], [], None
    try:
        for _ in range(CHILDREN):
            c = subprocess.Popen([sys.executable, "-c", child_source(SIZE)], stdout=subprocess.PIPE)
            children.append(c)
        for c in children:
            c.stdout.readline()
        if PIN is None:
            loops = flickering((seed, seed + 1))
            prefix = ()
        else:
            prefix = ("taskset", "-c", PIN)
            loops = [subprocess.Popen([*prefix, "bash", "-c", "while :; do :; done"])]
        print(f"  load at the start: {load()}")
        serve_proc, port = serve(binary, "--target-max-hold", CAP, "--pss-budget", BUDGET, prefix=prefix)
        time.sleep(SECONDS)
        pids = {c.pid for c in children}
        rows = [p for p in get(port, "/api/v1/snapshot?top=100000")["processes"]["top"] if p["pid"] in pids]
        capped = [p for p in rows if (p.get("pss_note") or "").startswith("not read again")]
        put_off_now = [p for p in rows if (p.get("pss_note") or "").startswith("put off")]
        longest = max((p.get("stall_by_proctor_max_seconds") or 0 for p in rows), default=0)
        read = sum(1 for p in rows if p.get("pss_bytes") is not None)
        w = get(port, "/api/v1/agent")["pss_worker"]
        put_off = w.get("reads_put_off_busy")
        print(f"  children capped {len(capped)} of {len(rows)} (read {read}, put off now {len(put_off_now)}); "
              f"longest hold on one {1000 * longest:.1f} ms; worker: {w['reads']} reads, {w.get('pagemap_reads')} "
              f"through pagemap, {'-' if put_off is None else put_off} put off while busy, "
              f"CPU {w['cpu_seconds']:.2f} s, crowd_cpus {w.get('crowd_cpus', '-')}; load at the end: {load()}")
    finally:
        for p in loops + children + ([serve_proc] if serve_proc else []):
            p.kill()
            p.wait()


def main():
    binaries = sys.argv[1:] or [os.path.join(ROOT, "target/release/proctor")]
    pin = "" if PIN is None else f"PIN={PIN} "
    print(f"$ {pin}CHILDREN={CHILDREN} SIZE={SIZE} CAP={CAP} SECONDS={SECONDS} REPEATS={REPEATS} BUDGET={BUDGET} "
          f"python3 bench/pss/crowd.py {' '.join(binaries)}  (nproc {os.cpu_count()})")
    for r in range(REPEATS):
        for b in binaries:
            print(f"run {r + 1}: {b}")
            one(b, 1 + 2 * r)


if __name__ == "__main__":
    main()
