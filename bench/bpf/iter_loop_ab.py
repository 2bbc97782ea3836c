#!/usr/bin/env python3
"""Two or more builds of the `iter_loop` example (the scan alone, as the agent runs it, with the
kernel's part and the reader's apart) by turns, beside the same sleepers.

    cargo build --release -p proctor-bpf --example iter_loop; cp target/release/examples/iter_loop /tmp/iter_loop_B
    python3 bench/bpf/iter_loop_ab.py /tmp/iter_loop_A,/tmp/iter_loop_B ROUNDS [PROCESSES]

Starts `sleep` processes until the host has PROCESSES (default 5,000); each round runs every
build twice, `iter_loop 300 64` (64 MiB written before each scan: its data cold, as the agent's
once-a-second scan finds it) and `iter_loop 2000 0` (warm), and prints their lines and the load;
then each build's medians. The sleepers are killed at the end.
"""
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sleepers import count_pids, sleepers  # noqa: E402

LINE = re.compile(r"([\d.]+) µs CPU per process \(kernel ([\d.]+), reader ([\d.]+)\)")


def main():
    bins = sys.argv[1].split(",")
    rounds = int(sys.argv[2])
    target = int(sys.argv[3]) if len(sys.argv) > 3 else 5000
    ways = {"cold": ["300", "64"], "warm": ["2000", "0"]}
    got = {(b, w): [] for b in bins for w in ways}
    with sleepers(target, 3600):
        print(f"{count_pids()} processes (load {' '.join(open('/proc/loadavg').read().split()[:3])})")
        for r in range(rounds):
            for b in bins if r % 2 == 0 else bins[::-1]:
                for w, args in ways.items():
                    out = subprocess.run([b, *args], check=True, capture_output=True, text=True).stdout.strip()
                    print(f"round {r} {b} {w}: {out}")
                    m = LINE.search(out)
                    got[(b, w)].append(tuple(float(x) for x in m.groups()))
        print(f"load after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    for (b, w), runs in got.items():
        med = [statistics.median(x[i] for x in runs) for i in range(3)]
        print(f"{b} {w}: medians {med[0]:.3f} µs a process (kernel {med[1]:.3f}, reader {med[2]:.3f})")


if __name__ == "__main__":
    main()
