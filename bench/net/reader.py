#!/usr/bin/env python3
"""Per-process network, the agent's network reader sample by sample (issue 36): each proctor
named runs `serve --net` on CPU 0 in turn, beside bench/net/cost.sh's paced UDP echo on CPU 1
(RATE packets a second, default 50,000), for ROUNDS (2) rounds alternated, WINDOW (22) samples
each. Each sample's `reader_wall_seconds.net` (the table's batched read, the totals, the rows of
processes gone forgotten, and the connections walk when it runs) and the sample's CPU, from
`/api/v1/agent`'s `last_sample`, polled each second (a sample missed between polls is left out).
Prints median, mean and max of each, per round and over all rounds.
    sudo python3 bench/net/reader.py /tmp/old/proctor target/release/proctor
    ROUNDS=3 WINDOW=30 python3 bench/net/reader.py A B
"""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from paced_echo import WORKLOAD  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import serve_addr  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "2"))
WINDOW = int(os.environ.get("WINDOW", "22"))
RATE = int(os.environ.get("RATE", "50000"))


def start_serve(binary):
    return serve_addr.start(["taskset", "-c", "0", binary, "serve", "--listen", "127.0.0.1:0", "--interval", "1s",
                             "--no-record", "--net"])


agent = serve_addr.agent


def one(binary):
    p, addr = start_serve(binary)
    work = None
    try:
        time.sleep(3)
        first = agent(addr)
        if first.get("process_net_from") != "bpf":
            raise SystemExit(f"{binary}: per-process network is not counted here: {first.get('process_net_unavailable')}")
        work = subprocess.Popen(["taskset", "-c", "1", sys.executable, "-c", WORKLOAD, str(RATE), str(WINDOW + 4)],
                                stdout=subprocess.DEVNULL)
        time.sleep(1.5)
        seen = {}
        deadline = time.time() + WINDOW * 3
        while len(seen) < WINDOW and time.time() < deadline:
            a = agent(addr)
            last = a["last_sample"]
            seen[a["samples_total"]] = (last["reader_wall_seconds"].get("net", 0.0) * 1e6, last["cpu_seconds"] * 1e6)
            time.sleep(1.0)
        return list(seen.values())
    finally:
        if work:
            work.wait()
        p.terminate()
        p.wait()


def line(label, values):
    net = [v[0] for v in values]
    cpu = [v[1] for v in values]
    return (f"{label:<40} {len(values):>3} samples  net reader µs median {statistics.median(net):6.0f} "
            f"mean {statistics.mean(net):6.0f} max {max(net):6.0f}  sample CPU µs median {statistics.median(cpu):5.0f} "
            f"mean {statistics.mean(cpu):5.0f}")


def main():
    binaries = sys.argv[1:]
    if not binaries:
        raise SystemExit(__doc__)
    every = {b: [] for b in binaries}
    for r in range(ROUNDS):
        for b in binaries:
            values = one(b)
            every[b].extend(values)
            print(line(f"round {r + 1} {b}", values), flush=True)
    print(f"\nall rounds ({RATE} packets/s beside; load {open('/proc/loadavg').read().split()[0]}):")
    for b in binaries:
        print(line(b, every[b]))


if __name__ == "__main__":
    main()
