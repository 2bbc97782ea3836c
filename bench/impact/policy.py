#!/usr/bin/env python3
"""An experiment, not a feature: put the threads of each agent `proctor impact` starts whose
command line holds MARK under another scheduling policy or nice, from outside, as each round
starts them, to see whether the target's p99 moves when the agent yields to it sooner.

    python3 bench/impact/policy.py IMPACT_PID MARK idle        # SCHED_IDLE
    python3 bench/impact/policy.py IMPACT_PID MARK batch       # SCHED_BATCH, nice kept
    python3 bench/impact/policy.py IMPACT_PID MARK nice=19     # SCHED_OTHER at nice 19
    python3 bench/impact/policy.py IMPACT_PID MARK slice=100000  # an EEVDF slice of 0.1 ms
    python3 bench/impact/policy.py IMPACT_PID MARK idle proctor-agent  # those threads only
    # beside AGENTS='serve;serve --interval 1s' bash bench/impact/run.sh, the second arm idle:
    python3 bench/impact/policy.py "$(pgrep -f 'proctor impact' | head -1)" '--interval' idle

Polls the parent's children every 50 ms until IMPACT_PID ends; prints each thread it changed
(comm, tid) once.
"""
import os
import sys
import time

from slice import set_slice


def children_with(parent, mark):
    # The kernel's list of the parent's children (CONFIG_PROC_CHILDREN), not a walk of /proc:
    # the poll itself must stay light beside the arms.
    kids = []
    for tid in os.listdir(f"/proc/{parent}/task"):
        try:
            kids += open(f"/proc/{parent}/task/{tid}/children").read().split()
        except OSError:
            continue
    for pid in kids:
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if len(args) > 1 and args[1] == b"serve" and mark.encode() in args:
            yield int(pid)


def apply(tid, policy):
    if policy == "idle":
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    elif policy == "batch":
        os.sched_setscheduler(tid, os.SCHED_BATCH, os.sched_param(0))
    elif policy.startswith("slice="):
        set_slice(tid, int(policy[6:]))
    elif policy.startswith("nice="):
        os.setpriority(os.PRIO_PROCESS, tid, int(policy[5:]))
    else:
        raise SystemExit(f"unknown policy {policy!r}")


if __name__ == "__main__":
    parent, mark, policy = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    names = sys.argv[4].split(",") if len(sys.argv) > 4 else None
    done = set()
    while os.path.exists(f"/proc/{parent}"):
        for pid in children_with(parent, mark):
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                if (pid, tid) in done:
                    continue
                try:
                    comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
                    if names and comm not in names:
                        # A thread has its creator's name until it names itself: one that
                        # still has the process's is looked at again at the next poll.
                        if tid == str(pid) or comm != open(f"/proc/{pid}/comm").read().strip():
                            done.add((pid, tid))
                        continue
                    apply(int(tid), policy)
                except OSError:
                    continue
                done.add((pid, tid))
                print(f"{pid} {comm}/{tid}: {policy}", flush=True)
        time.sleep(0.05)
