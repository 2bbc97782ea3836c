#!/usr/bin/env python3
"""What the final-switch tracepoint costs every context switch on the machine.

    PROCTOR_BIN=target/release/proctor python3 bench/bpf/switch.py [ROUND_TRIPS] [ROUNDS]

The process events attach a program to `sched_switch`, which runs at every context switch of
every task (it returns at once unless the task switching away has exited). A ping-pong over
two pipes between two processes pinned to one CPU switches twice per round trip; it is timed
beside `proctor serve --no-record` with the events on, with `--no-process-events`, and with no
agent, alternated ROUNDS (5) times. Prints each arm's median wall time per round trip and the
ratios.
"""
import os
import statistics
import subprocess
import sys
import time

PROCTOR = os.environ["PROCTOR_BIN"]


def ping_pong(n):
    """Wall seconds for n round trips between this process and a child, both on CPU 0."""
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {0})
        for _ in range(n):
            os.read(a_r, 1)
            os.write(b_w, b"x")
        os._exit(0)
    os.sched_setaffinity(0, {0})
    t = time.perf_counter()
    for _ in range(n):
        os.write(a_w, b"x")
        os.read(b_r, 1)
    elapsed = time.perf_counter() - t
    os.waitpid(pid, 0)
    for fd in (a_r, a_w, b_r, b_w):
        os.close(fd)
    os.sched_setaffinity(0, set(range(os.cpu_count())))
    return elapsed


def arm(name, n):
    serve = None
    if name != "none":
        extra = ["--no-process-events"] if name == "no-events" else []
        serve = subprocess.Popen([PROCTOR, "serve", "--no-record", "--listen", "127.0.0.1:0", *extra],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3)
    try:
        return ping_pong(n)
    finally:
        if serve is not None:
            serve.terminate()
            serve.wait()


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"== {n} pipe round trips on one CPU (2 context switches each), {rounds} rounds; load {load}")
    times = {"events": [], "no-events": [], "none": []}
    for r in range(rounds):
        order = ["events", "no-events", "none"] if r % 2 == 0 else ["none", "no-events", "events"]
        for name in order:
            times[name].append(arm(name, n))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k in ("events", "no-events", "none"):
        runs = ", ".join(f"{1e6 * t / n:.2f}" for t in times[k])
        print(f"{k:<10} {1e6 * med[k] / n:6.2f} µs per round trip (runs: {runs})")
    print(f"events / no-events {med['events'] / med['no-events']:.3f}×; events / none {med['events'] / med['none']:.3f}×;"
          f" per switch: {1e9 * (med['events'] - med['no-events']) / n / 2:+.0f} ns")


if __name__ == "__main__":
    main()
