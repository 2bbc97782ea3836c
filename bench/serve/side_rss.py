#!/usr/bin/env python3
"""Two or more builds' `proctor serve --no-record` running at once, their memory read from
`/proc/PID/status` after the same time, so a small difference in what a build keeps is not
lost in the machine's drift between one-at-a-time runs (`bench/ab.sh serve`). Each round starts
every build afresh (the start order rotated a build a round), waits WINDOW seconds and reads
`VmRSS`, `RssAnon`, `RssFile` and `VmHWM`; then stops them by their pids.

It also reads each build's working set: halfway through the window it clears the accessed bits
of every page the serve maps (`/proc/PID/clear_refs`, 1), and at the end sums `Referenced:` over
`/proc/PID/smaps` (`Referenced`: pages touched in the window's second half, counted a 4 KiB
page table entry at a time) and over the binary's own mappings alone (`BinRef`: the code and
data it ran and read). `RssFile` is not that: on a kernel whose page cache holds a file in
large folios (ext4 on 6.18 here), a fault maps the whole folio around the page it wanted, so
the binary's resident size follows how its file was read into the cache, not what ran.

    python3 bench/serve/side_rss.py OLD_BIN NEW_BIN [...]
    env: ROUNDS (3), WINDOW seconds (40), PROCESSES (600: sleepers started up to that many
         processes on the machine, stopped at the end), ARGS (extra serve flags, split on spaces)

Prints each build's reading per round and its median, and NEW/OLD of the medians. The first
sample a serve takes (and the trim of its heap 10 s in) are inside the window.
"""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ab import free_port, side_by_side  # noqa: E402  (bench/ab.py)

FIELDS = ("VmRSS", "RssAnon", "RssFile", "VmHWM", "Referenced", "BinRef")
STATUS = FIELDS[:4]


def status_kb(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in STATUS:
                out[name] = int(rest.split()[0])
    return out


def clear_refs(pid):
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("1")


def referenced_kb(pid, binary):
    """`Referenced:` summed over every mapping of `pid`, and over those of `binary` alone."""
    binary = os.path.realpath(binary)
    total = own = 0
    mine = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head, _, rest = line.partition(" ")
            if not head.endswith(":"):
                # A mapping's first line: range, perms, offset, dev, inode, path.
                fields = line.split(None, 5)
                mine = len(fields) == 6 and fields[5].strip() == binary
            elif head == "Referenced:":
                kb = int(rest.split()[0])
                total += kb
                own += kb if mine else 0
    return {"Referenced": total, "BinRef": own}


def resolve(b):
    """The binary a serve of `b` runs: `b` itself, or the one a wrapper script execs (`exec BIN`)."""
    try:
        with open(b, "rb") as f:
            if f.read(2) == b"#!":
                f.seek(0)
                for line in f.read().decode().splitlines():
                    if line.startswith("exec "):
                        return line.split()[1]
    except OSError:
        pass
    return b


def main():
    bins, orders, window = side_by_side(__doc__, 40)
    want = int(os.environ.get("PROCESSES", "600"))
    extra = os.environ.get("ARGS", "").split()
    have = sum(1 for p in os.listdir("/proc") if p.isdigit())
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(max(0, want - have))]
    readings = {b: [] for b in bins}
    try:
        print(f"{have + len(sleepers)} processes ({len(sleepers)} sleepers started), window {window:g} s, {len(orders)} rounds")
        for r, order in enumerate(orders):
            procs = {}
            for b in order:
                port = free_port()
                procs[b] = subprocess.Popen([b, "serve", "--no-record", "--listen", f"127.0.0.1:{port}", *extra],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(window / 2)
            for b in order:
                clear_refs(procs[b].pid)
            time.sleep(window / 2)
            load = open("/proc/loadavg").read().split()[:3]
            for b in order:
                kb = status_kb(procs[b].pid) | referenced_kb(procs[b].pid, resolve(b))
                readings[b].append(kb)
                print(f"round {r + 1} (load {' '.join(load)}): {b}: " + ", ".join(f"{k} {kb[k]:,} kB" for k in FIELDS))
            for p in procs.values():
                p.terminate()
            for p in procs.values():
                p.wait(timeout=30)
    finally:
        for s in sleepers:
            s.terminate()
        for s in sleepers:
            s.wait()
    print()
    medians = {b: {k: statistics.median(x[k] for x in readings[b]) for k in FIELDS} for b in bins}
    for b in bins:
        print(f"median {b}: " + ", ".join(f"{k} {medians[b][k]:,.0f} kB" for k in FIELDS))
    old = bins[0]
    for b in bins[1:]:
        print(f"{b} / {old}: " + ", ".join(f"{k} {medians[b][k] / medians[old][k]:.3f}" for k in FIELDS))


if __name__ == "__main__":
    main()
