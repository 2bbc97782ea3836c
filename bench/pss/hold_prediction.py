#!/usr/bin/env python3
"""How well a `smaps_rollup` hold is predicted from the holds before it: the rule by which the
PSS worker decides that a big target's read would pass the cap on one hold (50 ms) and walks
its pages instead, or puts it off (`how_to_read`, `HOLD_MARGIN`, `ROLLUP_RATES`, `BUSY_FACTOR` in
crates/proctor-sampler/src/pss.rs).

    python3 bench/pss/hold_prediction.py                 # quiet, then beside two busy loops
    SIZE=1024 SECONDS=60 python3 bench/pss/hold_prediction.py

A child keeps SIZE MiB (1,024) resident and touches 40 pages every 5 ms, like one of the
impact tree's children. This script reads its /proc/PID/smaps_rollup every 0.1 s for SECONDS
(60), timing each read by wall clock (what the worker's ledger takes for a hold where it does
not trace the lock), first on the machine as it is, then with two busy loops of its own beside
it (`while :; do :; done`, ended by their pid), then with two loops that run and sleep by turns
for random spells (0.2-2 s running, 0-1.9 s asleep: a load that comes and goes). For each phase it prints the holds' median,
p99 and max, and for each window W: the reads whose hold passed 1.5 × the highest of the W
holds before it (W = 1: the last read alone), the reads that prediction sends to a walk
(predicted past the 50 ms cap: about 3 × the CPU), and those it lets read whole that then held
past the cap (what the worker caps: the miss that matters). Then the same with the host's
crowd: for a read that begins with more tasks runnable than CPUs (/proc/loadavg's fourth field,
the reader among them), each earlier hold that began without one counts at 2 ×; a read whose
prediction passes the cap only so is not made whole either (walked where the savings pay, else
put off). The load is printed before each phase.
"""
import os
import statistics
import subprocess
import sys
import time

from common import child_source, flickering

SIZE = int(os.environ.get("SIZE", "1024"))
SECONDS = float(os.environ.get("SECONDS", "60"))
MARGIN = 1.5
BUSY_FACTOR = 2.0
CAP_MS = 50.0
WINDOWS = (1, 2, 4, 8, 16)

def running():
    """Tasks runnable now, this one included (/proc/loadavg's fourth field)."""
    with open("/proc/loadavg") as f:
        return int(f.read().split()[3].split("/")[0])


def holds_ms(pid):
    """Each read's hold (ms) and the tasks runnable just before it."""
    out = []
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        r = running()
        t = time.perf_counter()
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            f.read()
        out.append(((time.perf_counter() - t) * 1e3, r))
        time.sleep(0.1)
    return out


def outcomes(ms, crowded, w):
    """For window W, over the reads after the first W: those past MARGIN x the highest of the W
    holds before (missed), those that prediction walks (past the cap), those only the crowd's
    BUSY_FACTOR sends past it (walked or put off), and those read whole that held past the cap.
    `crowded` says which reads began in a crowd; all False is the rule without it."""
    missed = walked = for_crowd = past_cap = 0
    for i in range(w, len(ms)):
        plain = max(ms[i - w:i]) * MARGIN
        scaled = max(ms[j] * (BUSY_FACTOR if crowded[i] and not crowded[j] else 1.0) for j in range(i - w, i)) * MARGIN
        missed += ms[i] > plain
        if plain > CAP_MS:
            walked += 1
        elif scaled > CAP_MS:
            for_crowd += 1
        else:
            past_cap += ms[i] > CAP_MS
    return missed, walked, for_crowd, past_cap


def report(name, reads):
    ms = [h for h, _ in reads]
    ranked = sorted(ms)
    print(f"{name}: {len(ms)} reads, hold median {statistics.median(ms):.1f} ms, "
          f"p99 {ranked[int(len(ms) * 0.99)]:.1f} ms, max {ranked[-1]:.1f} ms")
    for w in WINDOWS:
        missed, walked, _, past_cap = outcomes(ms, [False] * len(ms), w)
        n = len(ms) - w
        print(f"  window {w:2}: past 1.5 x the prediction {missed} of {n} ({100 * missed / n:.1f} %); "
              f"walked {walked} ({100 * walked / n:.1f} %); read whole and past the {CAP_MS:.0f} ms cap {past_cap}")
    # The rule with the host's crowd: a read that begins with more tasks runnable than CPUs (the
    # reader among them) takes each earlier hold that began without a crowd at BUSY_FACTOR x;
    # a hold that began with one carries its stretch already.
    cpus = os.cpu_count()
    crowded = [r > cpus for _, r in reads]
    for w in WINDOWS:
        _, walked, for_crowd, past_cap = outcomes(ms, crowded, w)
        n = len(ms) - w
        print(f"  window {w:2}, with the crowd (over {cpus} runnable): walked {walked} ({100 * walked / n:.1f} %), "
              f"walked or put off for the crowd {for_crowd} ({100 * for_crowd / n:.1f} %); read whole and past the cap {past_cap}")
    print(f"  reads begun with a crowd: {sum(crowded)} of {len(ms)}")


def load():
    with open("/proc/loadavg") as f:
        return f.read().strip()


def main():
    child = subprocess.Popen([sys.executable, "-c", child_source(SIZE)], stdout=subprocess.PIPE)
    loops = []
    try:
        child.stdout.readline()
        print(f"$ SIZE={SIZE} SECONDS={SECONDS:g} python3 bench/pss/hold_prediction.py  (nproc {os.cpu_count()})")
        print(f"load before the quiet phase: {load()}")
        report("quiet", holds_ms(child.pid))
        loops = [subprocess.Popen(["bash", "-c", "while :; do :; done"]) for _ in range(2)]
        time.sleep(1)
        print(f"load before the busy phase: {load()}")
        report("beside two busy loops", holds_ms(child.pid))
        for p in loops:
            p.kill()
            p.wait()
        # Two loops that run and stop by turns, each spell 0.2-2 s at random: a machine whose
        # load comes and goes (a build's compilers, a trace's bursts).
        loops = flickering((1, 2))
        time.sleep(1)
        print(f"load before the flickering phase: {load()}")
        report("beside two loops that run and stop by turns", holds_ms(child.pid))
    finally:
        for p in loops + [child]:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
