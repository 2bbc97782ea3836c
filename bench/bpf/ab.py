#!/usr/bin/env python3
"""Two or more builds' task-iterator figure side by side, beside the same sleepers.

    python3 bench/bpf/ab.py BIN_A,BIN_B[,...] ROUNDS [PROCESSES]

Starts `sleep` processes until the host has PROCESSES (default 5,000), then runs each build's
`proctor bench -n 20 --scans 100 --format json` (300 scans under ~2,000 processes, as
bench.py) once a round, the order reversed every other round, and prints each round's figures
and load, then each build's median of `per_process_task_iter` (µs of CPU a process) and of the
floor. bench.py starts its sleepers afresh for each build; here both builds see the same ones,
so the comparison is closer to paired. The sleepers are killed at the end.
"""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sleepers import count_pids, sleepers  # noqa: E402


def main():
    bins = sys.argv[1].split(",")
    rounds = int(sys.argv[2])
    target = int(sys.argv[3]) if len(sys.argv) > 3 else 5000
    with sleepers(target):
        scans = "100" if target > 2000 else "300"
        iters = {b: [] for b in bins}
        floors = {b: [] for b in bins}
        for r in range(rounds):
            for b in bins if r % 2 == 0 else bins[::-1]:
                out = subprocess.run([b, "bench", "-n", "20", "--scans", scans, "--format", "json"],
                                     capture_output=True, text=True, check=True).stdout
                got = json.loads(out)
                if got["per_process_task_iter"] is None:
                    sys.exit(f"{b}: no task iterator here: {got['task_iter_unavailable']}")
                iters[b].append(got["per_process_task_iter"]["cpu_us"])
                floors[b].append(got["per_process_floor"]["cpu_us"])
            load = " ".join(open("/proc/loadavg").read().split()[:3])
            print(f"round {r}: " + ", ".join(f"{b} {iters[b][-1]:.3f}" for b in bins) + f" µs (load {load})", flush=True)
        print(f"{count_pids()} processes at the end")
        for b in bins:
            runs = ", ".join(f"{x:.3f}" for x in iters[b])
            print(f"{b}: iterator median {statistics.median(iters[b]):.3f} µs a process "
                  f"(floor {statistics.median(floors[b]):.3f}); runs: {runs}")


if __name__ == "__main__":
    main()
