#!/usr/bin/env python3
"""What one `smaps_rollup` read of a Netflix-tree child costs the reader, on this machine today.

    python3 bench/jupyter/rollup_cost.py [SHARED_MIB] [CHILDREN] [READS]

Maps SHARED_MIB (default 2048) MiB of private anonymous memory in 4 KiB pages (huge pages
refused), touches every page, forks CHILDREN (default 4) that share it copy-on-write and sleep,
and reads each child's /proc/PID/smaps_rollup READS (default 3) times, printing the CPU and
wall time of each read and their median. bench/jupyter/pss.py's tree is 96 such children: the
whole tree read once costs 97 times the median. The children are killed at the end.
"""
import mmap
import os
import statistics
import sys
import time

shared_mib = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
children = int(sys.argv[2]) if len(sys.argv) > 2 else 4
reads = int(sys.argv[3]) if len(sys.argv) > 3 else 3
size = shared_mib << 20
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(mmap.MADV_NOHUGEPAGE)
for at in range(0, size, 4096):
    m[at] = 1
kids = []
try:
    for _ in range(children):
        pid = os.fork()
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        kids.append(pid)
    cpu = []
    for pid in kids:
        for _ in range(reads):
            t0, w0 = time.thread_time(), time.monotonic()
            with open(f"/proc/{pid}/smaps_rollup") as f:
                f.read()
            cpu.append((time.thread_time() - t0) * 1e3)
            print(f"child {pid}: {cpu[-1]:.1f} ms CPU, {(time.monotonic() - w0) * 1e3:.1f} ms wall", flush=True)
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"median {statistics.median(cpu):.1f} ms CPU a read of a child sharing {shared_mib} MiB (load {load})")
finally:
    for pid in kids:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
