#!/usr/bin/env python3
"""An experiment, not a feature: give a running agent's threads an EEVDF custom slice
(`sched_setattr`'s `sched_runtime` for the normal class, Linux 6.12+; same nice, same weight),
to see whether a woken target preempts a long PSS read sooner (docs/performance.md, impact,
forty-sixth session). The agent now does this itself for its PSS worker (`--pss-slice`, 0.1 ms
by default); this script stays as the command of that session's figure, and to try other
threads.

    python3 bench/impact/slice.py pid PID NS [THREAD,...]       # that process's threads
    python3 bench/impact/slice.py parent PID NS [THREAD,...]    # the `serve` PID started
    # beside `proctor impact … --agent serve`, on its PSS worker, 0.1 ms:
    python3 bench/impact/slice.py parent "$(pgrep -f 'proctor impact' | head -1)" 100000 proctor-pss

Prints each thread's slice before and after (`se.slice` in /proc/PID/task/TID/sched). x86_64.
"""
import ctypes
import os
import struct
import sys
import time

from thread_runs import find_agent

libc = ctypes.CDLL(None, use_errno=True)
SYS_sched_setattr = 314


def set_slice(tid, ns):
    # The thread's own nice kept: sched_setattr sets the nice it is given.
    nice = os.getpriority(os.PRIO_PROCESS, tid)
    attr = struct.pack("IIQiIQQQII", 56, 0, 0, nice, 0, ns, 0, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, 56)
    if libc.syscall(SYS_sched_setattr, tid, buf, 0) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def slice_of(pid, tid):
    for line in open(f"/proc/{pid}/task/{tid}/sched"):
        if line.startswith("se.slice"):
            return int(line.split(":")[1])


if __name__ == "__main__":
    mode, target, ns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    names = sys.argv[4].split(",") if len(sys.argv) > 4 else None
    pid = target if mode == "pid" else None
    while pid is None:
        pid = find_agent(target)
        time.sleep(0.2)
    time.sleep(2)
    for tid in os.listdir(f"/proc/{pid}/task"):
        comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
        if names and comm not in names:
            continue
        before = slice_of(pid, tid)
        set_slice(int(tid), ns)
        print(f"{comm}/{tid}: slice {before} -> {slice_of(pid, tid)} ns", flush=True)
