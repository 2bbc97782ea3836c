#!/usr/bin/env python3
"""bench/net/cost.sh's body: see there."""
import atexit
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from paced_echo import WORKLOAD  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import serve_addr  # noqa: E402

PROCTOR = os.environ["PROCTOR_BIN"]
REPEATS = int(os.environ.get("REPEATS", "3"))
RATE = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
# PIN=1: the agent on CPU 0, the workload on CPU 1. Where the kernel does not account interrupt
# time apart (CONFIG_IRQ_TIME_ACCOUNTING unset, as here), a packet's softirq is charged to
# whichever thread it interrupted; pinned apart, loopback's softirqs run on the workload's CPU
# and the agent's per-sample CPU is its own.
PIN = os.environ.get("PIN") == "1"
AGENT_CPU = ["taskset", "-c", "0"] if PIN else []
WORKLOAD_CPU = ["taskset", "-c", "1"] if PIN else []
TICK = os.sysconf("SC_CLK_TCK")
# TCP=1: beside the echo, a TCP connection on loopback in this process, a byte each way a second.
# Where the kernel refuses the storage walk, the kernel's TCP tables are walked (~2 ms here) every
# 10 s while some process's TCP figures move or a connection is open, and not otherwise; this
# holds one open, as a host with TCP traffic has.
TCP = os.environ.get("TCP") == "1"


class Chatter:
    """A loopback TCP connection that sends a byte each way a second until closed."""

    def __init__(self):
        listener = socket.create_server(("127.0.0.1", 0))
        self.client = socket.create_connection(listener.getsockname())
        self.server, _ = listener.accept()
        listener.close()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(1.0):
            self.client.sendall(b"x")
            self.server.recv(1)
            self.server.sendall(b"y")
            self.client.recv(1)

    def close(self):
        self.stop.set()
        self.thread.join()
        self.client.close()
        self.server.close()


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def start_serve(data, extra):
    return serve_addr.start([*AGENT_CPU, PROCTOR, "serve", "--listen", "127.0.0.1:0", "--interval", "1s", "--no-record", *extra])


agent = serve_addr.agent


def run_workload():
    chatter = Chatter() if TCP else None
    try:
        return echo()
    finally:
        if chatter:
            chatter.close()


def echo():
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    out = subprocess.run([*WORKLOAD_CPU, sys.executable, "-c", WORKLOAD, str(RATE), str(SECONDS)], capture_output=True, text=True, check=True)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return int(out.stdout.split()[0]), cpu, wall


def arm(name, data):
    if name == "none":
        packets, cpu, wall = run_workload()
        return {"packets": packets, "workload_cpu": cpu, "wall": wall}
    p, addr = start_serve(data, ["--net"] if name == "net" else [])
    try:
        time.sleep(2.5)
        a0, c0 = agent(addr), cpu_seconds(p.pid)
        packets, cpu, wall = run_workload()
        a1, c1 = agent(addr), cpu_seconds(p.pid)
        samples = a1["samples_total"] - a0["samples_total"]
        sampling = a1["sampling_cpu_seconds_total"] - a0["sampling_cpu_seconds_total"]
        return {
            "packets": packets,
            "workload_cpu": cpu,
            "wall": wall,
            "agent_cpu": c1 - c0,
            "sample_ms": 1000 * sampling / max(samples, 1),
            "net_from": a1.get("process_net_from"),
        }
    finally:
        p.terminate()
        p.wait()


def side_by_side():
    """Both agents at once beside one workload: the same packets, the same neighbours, so the
    per-sample ratio is the network part's own cost, not the drift between runs (which moved
    one agent's per-sample CPU by 40 % between runs minutes apart)."""
    ratios = []
    for r in range(REPEATS):
        started = []
        try:
            (net, net_addr) = start_serve(None, ["--net"])
            started.append(net)
            (plain, plain_addr) = start_serve(None, [])
            started.append(plain)
            time.sleep(2.5)
            before = {k: agent(a) for k, a in (("net", net_addr), ("no-net", plain_addr))}
            run_workload()
            after = {k: agent(a) for k, a in (("net", net_addr), ("no-net", plain_addr))}
        finally:
            for p in started:
                p.terminate()
                p.wait()
        per = {}
        for k in after:
            samples = after[k]["samples_total"] - before[k]["samples_total"]
            cpu = after[k]["sampling_cpu_seconds_total"] - before[k]["sampling_cpu_seconds_total"]
            per[k] = 1000 * cpu / max(samples, 1)
        ratios.append(per["net"] / per["no-net"])
        walk = lambda k: (after[k].get("process_net_walk") or {}).get("walks_total", 0) - \
            (before[k].get("process_net_walk") or {}).get("walks_total", 0)
        print(f"round {r + 1}: sample ms CPU with --net {per['net']:.3f}, without {per['no-net']:.3f}: "
              f"{ratios[-1]:.3f} ({after['net'].get('process_net_from')}, "
              f"{(after['net'].get('process_net_walk') or {}).get('how')}, {walk('net')} walks)", flush=True)
    print(f"\nside by side, {RATE} packets/s for {SECONDS:.0f} s{', a TCP connection beside' if TCP else ''}, {REPEATS} runs; load {open('/proc/loadavg').read().split()[0]}")
    print(f"agent CPU per sample with / without: median {statistics.median(ratios):.3f} (goal at most 1.2)")


def median_interval(xs, resamples=2000):
    """A bootstrap 95 % interval of the median (seeded: the same rounds give the same interval)."""
    rng = random.Random(1)
    medians = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def main():
    if os.environ.get("SIDE") == "1":
        side_by_side()
        return
    data = tempfile.mkdtemp(prefix="proctor-net-cost-")
    atexit.register(shutil.rmtree, data, ignore_errors=True)
    arms = ["net", "no-net", "none"]
    results = {a: [] for a in arms}
    for r in range(REPEATS):
        # Each round starts one arm later, so a drift over a round lands on every arm alike.
        for a in arms[r % len(arms):] + arms[:r % len(arms)]:
            results[a].append(arm(a, data))
            print(f"round {r + 1} {a}: {results[a][-1]}", flush=True)
    med = lambda a, k: statistics.median(x[k] for x in results[a])
    print(f"\n{RATE} packets/s for {SECONDS:.0f} s, medians of {REPEATS}{', agent and workload pinned apart' if PIN else ''}; load {open('/proc/loadavg').read().split()[0]}")
    print(f"{'arm':<8} {'packets':>9} {'workload CPU s':>15} {'agent CPU s':>12} {'sample ms CPU':>14}")
    for a in arms:
        agent_cpu = f"{med(a, 'agent_cpu'):.3f}" if a != "none" else "-"
        sample = f"{med(a, 'sample_ms'):.3f}" if a != "none" else "-"
        print(f"{a:<8} {med(a, 'packets'):>9.0f} {med(a, 'workload_cpu'):>15.3f} {agent_cpu:>12} {sample:>14}")
    print(f"\nworkload CPU with the network programs / without (agent in both): {med('net', 'workload_cpu') / med('no-net', 'workload_cpu'):.3f}")
    print(f"workload CPU with the network programs / no agent: {med('net', 'workload_cpu') / med('none', 'workload_cpu'):.3f}")
    # The machine's speed drifts by more than the goal between runs minutes apart: the ratio of
    # each round's own arms, run back to back, is the figure to read.
    for other in ("no-net", "none"):
        paired = [n["workload_cpu"] / o["workload_cpu"] for n, o in zip(results["net"], results[other])]
        low, high = median_interval(paired)
        print(f"  per round, --net / {other}: median {statistics.median(paired):.3f}, 95 % interval [{low:.3f}, {high:.3f}] "
              f"({', '.join(f'{x:.3f}' for x in paired)})")
    print(f"agent CPU per sample with / without: {med('net', 'sample_ms') / med('no-net', 'sample_ms'):.3f}")
    # The agent's whole CPU over a run is a few clock ticks (10 ms each): the per-sample
    # figure above, from its own accounting, is the one to read.
    without = med('no-net', 'agent_cpu')
    whole = f"{med('net', 'agent_cpu') / without:.3f}" if without > 0 else "n/a (under one clock tick without)"
    print(f"agent CPU with / without: {whole}")


if __name__ == "__main__":
    main()
