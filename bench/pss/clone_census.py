"""How many of a forked tree's children are clones of each other, by proctor's rule.

    python3 bench/pss/clone_census.py [CHILDREN [SHARED_MIB [TREES]]]

Builds bench/lib/jupyter_tree.py's repro TREES times (default 5; CHILDREN children, default
96, sharing SHARED_MIB MiB, default 256, in 4 KiB pages), the parent exec'ing this script's
census in the server's place once the children have settled (2 s). For each tree it prints
the children's resident size and faults (from /proc/PID/stat) as groups, and how many children
one reading would stand in for: the largest group of equal counters (the rule before
`CLONE_NEAR_BYTES`), and the most children within 16 pages of one child's counters (resident
bytes apart plus a page a fault, and at most 1/256 of the member's resident size: the rule since).
"""

import os
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "lib"))
from jupyter_tree import tree_then_jupyter  # noqa: E402

PAGE = 4096
NEAR = 64 << 10


def census(me):
    time.sleep(2)
    kids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:  # ppid
            kids.append((int(fields[21]) * PAGE, int(fields[7]) + int(fields[9])))  # rss, minflt+majflt
    groups = {}
    for k in kids:
        groups[k] = groups.get(k, 0) + 1
    exact = max(groups.values())
    near = max(sum(1 for o in kids if abs(o[0] - k[0]) + abs(o[1] - k[1]) * PAGE <= min(NEAR, o[0] // 256)) for k in kids)
    shown = ", ".join(f"{n}× {rss >> 10} KiB/{faults}" for (rss, faults), n in sorted(groups.items(), key=lambda g: -g[1]))
    print(f"{len(kids)} children; equal counters: {exact}; within 16 pages of one: {near}; groups: {shown}", flush=True)


if len(sys.argv) > 1 and sys.argv[1] == "--census":
    census(os.getpid())
    sys.exit(0)

children = int(sys.argv[1]) if len(sys.argv) > 1 else 96
shared_mib = int(sys.argv[2]) if len(sys.argv) > 2 else 256
trees = int(sys.argv[3]) if len(sys.argv) > 3 else 5
with open("/proc/loadavg") as f:
    print(f"{trees} trees of {children} children sharing {shared_mib} MiB; load {' '.join(f.read().split()[:3])}")
for _ in range(trees):
    cmd = tree_then_jupyter(sys.executable, shared_mib << 20, children, [sys.executable, os.path.abspath(__file__), "--census"])
    subprocess.run(cmd, check=True)
    time.sleep(1)
