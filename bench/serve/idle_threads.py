#!/usr/bin/env python3
"""Two or more builds' `proctor serve` (recording, each into a data directory of its own) side by
side on an idle host: each thread's CPU and wakeups (voluntary and involuntary context
switches) over the same window, so what wakes an idle agent, and what it costs, is seen thread
by thread. Each round starts every build afresh (the start order rotated a build a round),
waits WARM seconds, then reads `/proc/PID/task/*/schedstat` and `status` at the window's start
and end; then stops them by their pids.

    python3 bench/serve/idle_threads.py OLD_BIN NEW_BIN [...]
    env: ROUNDS (3), WINDOW seconds (60), WARM seconds (15), ARGS (extra serve flags, split on
         spaces; `--groups bench/serve/groups.yml` turns the per-process groups on, which count
         each process's open fds), PROCESSES (0: sleepers started up to that many processes on
         the machine, stopped at the end)

Prints each build's threads per round (CPU ms / wakeups) and the medians of the totals.
"""
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ab import free_port, side_by_side  # noqa: E402  (bench/ab.py)


def threads(pid):
    """{thread name: [CPU ns, context switches]} summed over the threads of that name."""
    out = collections.defaultdict(lambda: [0, 0])
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            switches = sum(int(line.split()[1]) for line in open(f"/proc/{pid}/task/{tid}/status")
                           if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))
            ns = int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except OSError:
            continue
        out[name][0] += ns
        out[name][1] += switches
    return out


def main():
    bins, orders, window = side_by_side(__doc__, 60)
    warm = float(os.environ.get("WARM", "15"))
    extra = os.environ.get("ARGS", "").split()
    want = int(os.environ.get("PROCESSES", "0"))
    have = sum(1 for p in os.listdir("/proc") if p.isdigit())
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(max(0, want - have))]
    try:
        run(bins, orders, window, warm, extra)
    finally:
        for s in sleepers:
            s.terminate()
        for s in sleepers:
            s.wait()


def run(bins, orders, window, warm, extra):
    totals = {b: [] for b in bins}
    for r, order in enumerate(orders):
        procs, dirs = {}, []
        try:
            for b in order:
                d = tempfile.mkdtemp(prefix="proctor-idle-")
                dirs.append(d)
                procs[b] = subprocess.Popen([b, "serve", "--listen", f"127.0.0.1:{free_port()}", "--data-dir", d, *extra],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(warm)
            before = {b: threads(p.pid) for b, p in procs.items()}
            time.sleep(window)
            after = {b: threads(p.pid) for b, p in procs.items()}
            load = " ".join(open("/proc/loadavg").read().split()[:3])
            for b in order:
                moved = {n: [v - before[b].get(n, [0, 0])[i] for i, v in enumerate(after[b][n])] for n in after[b]}
                cpu_ms = sum(ns for ns, _ in moved.values()) / 1e6
                wakeups = sum(w for _, w in moved.values())
                totals[b].append((cpu_ms, wakeups))
                detail = ", ".join(f"{n} {ns / 1e6:.1f} ms/{w}" for n, (ns, w) in sorted(moved.items()) if ns or w)
                print(f"round {r + 1} (load {load}) {b}: {cpu_ms:.1f} ms CPU, {wakeups} wakeups in {window:g} s; {detail}",
                      flush=True)
        finally:
            for p in procs.values():
                p.terminate()
            for p in procs.values():
                p.wait()
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)
    for b in bins:
        cpu = statistics.median(c for c, _ in totals[b])
        wakeups = statistics.median(w for _, w in totals[b])
        print(f"median {b}: {cpu:.1f} ms CPU ({100 * cpu / 1000 / window:.3f} % of a core), {wakeups:.0f} wakeups in {window:g} s")


if __name__ == "__main__":
    main()
