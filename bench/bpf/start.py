#!/usr/bin/env python3
"""What `proctor serve` costs to start, build against build: the CPU it has used 2 s after it
was started (its BPF programs' loads and the kernel's checks of them, the BTF parse, the first
sample), and each BPF program's load (`BPF_PROG_LOAD`'s time under `strace -T`, one extra start
per build; strace's own cost is in that start, not in the CPU figures).

    python3 bench/bpf/start.py BIN [BIN ...]
    env: ROUNDS (5; the builds alternate, a round starting one build later than the one before),
         ARGS (extra serve flags, split on spaces, e.g. ARGS=--net)

Prints each build's starts' CPU and their median, the ratio of the medians to the first build's,
and the five slowest program loads of each build. Run as root for the BPF parts (without them a
serve starts on /proc alone, and says so).
"""
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def serve(binary, extra):
    return [binary, "serve", "--listen", "127.0.0.1:0", "--no-record", *extra]


def start_cpu(binary, extra, after=2.0):
    """The serve's CPU `after` seconds from its start, then stopped by its pid."""
    t0 = time.monotonic()
    proc = subprocess.Popen(serve(binary, extra), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(max(0.0, after - (time.monotonic() - t0)))
        if proc.poll() is not None:
            raise SystemExit(f"{binary} serve ended at once ({proc.returncode})")
        return cpu_seconds(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def program_loads(binary, extra):
    """Each BPF program's load time in ms, from one start under `strace -f -T -e bpf`."""
    if not shutil.which("strace"):
        return None
    with tempfile.NamedTemporaryFile(prefix="proctor-start-", suffix=".strace") as out:
        proc = subprocess.Popen(["strace", "-f", "-T", "-e", "trace=bpf", "-o", out.name, *serve(binary, extra)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3)
        # The serve is strace's child: ended with SIGINT (its own stop), strace ends with it.
        children = open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()
        for pid in children:
            os.kill(int(pid), signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        loads = []
        for line in open(out.name):
            m = re.search(r'BPF_PROG_LOAD.*prog_name="([^"]*)".*<([0-9.]+)>$', line)
            if m and m.group(1):
                loads.append((float(m.group(2)) * 1000, m.group(1)))
        return sorted(loads, reverse=True)


def main():
    builds = sys.argv[1:]
    if not builds:
        sys.exit(__doc__)
    rounds = int(os.environ.get("ROUNDS", "5"))
    extra = os.environ.get("ARGS", "").split()
    print(f"-- {os.cpu_count()} CPUs, load {' '.join(open('/proc/loadavg').read().split()[:3])}, "
          f"`serve --listen 127.0.0.1:0 --no-record {' '.join(extra)}`, {rounds} rounds")
    cpu = {b: [] for b in builds}
    for r in range(rounds):
        for i in range(len(builds)):
            b = builds[(i + r) % len(builds)]
            cpu[b].append(start_cpu(b, extra))
    base = statistics.median(cpu[builds[0]])
    for b in builds:
        med = statistics.median(cpu[b])
        runs = ", ".join(f"{1000 * c:.0f}" for c in cpu[b])
        print(f"{b}: CPU 2 s after start {runs} ms; median {1000 * med:.0f} ms, {med / base:.2f}x the first build's")
        loads = program_loads(b, extra)
        if loads is None:
            print("  program loads: strace is not installed: not measured")
        else:
            print("  slowest program loads: " + ", ".join(f"{name} {ms:.1f} ms" for ms, name in loads[:5])
                  + f" (of {len(loads)}, {sum(ms for ms, _ in loads):.1f} ms in all)")
    print(f"-- load after {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
