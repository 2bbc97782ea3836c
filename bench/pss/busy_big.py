#!/usr/bin/env python3
"""The PSS worker beside a big process that keeps faulting (a compiler, a JVM growing): how soon
every other process has a PSS reading, and what the worker read and spent.

    python3 bench/pss/busy_big.py [BIN ...]         # default: this checkout's release build
    SIZE=1500 SECONDS=40 REPEATS=3 python3 bench/pss/busy_big.py OLD NEW

One python keeps SIZE MiB (1,500) resident and allocates and touches 64 MiB more every 0.3 s,
so its fault counts move every sample and the worker reads it through `pagemap`; a quiet python
of 200 MiB stands for what a person looks at (top's F2 test child). `proctor serve --no-record`
starts beside them, and every second for SECONDS its snapshot is read: the first second at which
every process with memory but the busy one has a PSS reading (processes whose smaps_rollup is
refused, such as a container's init, are left out), and the worker's counters at the end.
Each binary in turn, REPEATS times; the load is printed.
"""
import os
import subprocess
import sys
import time

from common import get, serve as serve_on_free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SIZE = int(os.environ.get("SIZE", "1500"))
SECONDS = int(os.environ.get("SECONDS", "40"))
REPEATS = int(os.environ.get("REPEATS", "3"))

BUSY = """
import sys, time
keep = bytearray(int(sys.argv[1]) << 20)
for j in range(0, len(keep), 4096):
    keep[j] = 1
while True:
    b = bytearray(64 << 20)
    for j in range(0, len(b), 4096):
        b[j] = 1
    del b
    time.sleep(0.3)
"""
QUIET = "import time\nb = bytearray(200 << 20)\nfor j in range(0, len(b), 4096):\n    b[j] = 1\ntime.sleep(3600)\n"


def readable(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            f.read(1)
        return True
    except OSError:
        return False


def one(binary):
    busy = subprocess.Popen([sys.executable, "-c", BUSY, str(SIZE)])
    quiet = subprocess.Popen([sys.executable, "-c", QUIET])
    serve = None
    try:
        # Both ready: the busy one holds its SIZE, the quiet one its 200 MiB.
        def rss_mib(pid):
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) >> 10
            return 0

        end = time.time() + 120
        while time.time() < end and (rss_mib(busy.pid) < SIZE or rss_mib(quiet.pid) < 200):
            time.sleep(0.2)
        serve, port = serve_on_free_port(binary)
        started = time.time()
        all_read_at = quiet_at = None
        unread = []
        while time.time() - started < SECONDS:
            time.sleep(1)
            rows = get(port, "/api/v1/snapshot?top=100000")["processes"]["top"]
            others = [p for p in rows if (p.get("rss_bytes") or 0) > 0 and p["pid"] != busy.pid
                      and p["pid"] != serve.pid and readable(p["pid"])]
            unread = [p["pid"] for p in others if p.get("pss_bytes") is None]
            at = time.time() - started
            if quiet_at is None and any(p["pid"] == quiet.pid and p.get("pss_bytes") for p in rows):
                quiet_at = at
            if all_read_at is None and not unread:
                all_read_at = at
        w = get(port, "/api/v1/agent")["pss_worker"]
        said = lambda t: f"{t:.0f} s" if t is not None else f"not in {SECONDS} s"
        print(f"  the quiet 200 MiB child read: {said(quiet_at)}; every other process: {said(all_read_at)}"
              f"{'' if all_read_at is not None else f' ({len(unread)} unread)'}; worker: {w['reads']} reads,"
              f" {w['pagemap_reads']} through pagemap, CPU {1000 * w['cpu_seconds']:.0f} ms,"
              f" longest reading {1000 * w['max_read_cpu_seconds']:.0f} ms")
    finally:
        for p in (serve, busy, quiet):
            if p is not None:
                p.kill()
                p.wait()


def main():
    binaries = sys.argv[1:] or [os.path.join(ROOT, "target/release/proctor")]
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"== the PSS worker beside a busy {SIZE} MiB process, {SECONDS} s per run (load {load})")
    for r in range(REPEATS):
        for b in binaries:
            print(f"run {r + 1}: {b}")
            one(b)


if __name__ == "__main__":
    main()
