#!/usr/bin/env python3
"""How long each of `proctor serve`'s threads runs on a CPU at a stretch, beside impact's tree:
a target's thread queued on that CPU waits for the stretch to end (or for the tick), so the
longest runs are what can move the target's p99 (docs/performance.md, impact, forty-sixth
session).

    python3 bench/impact/thread_runs.py [PROCTOR_BIN]
    SECONDS=30 AGENT='serve --pss-budget 0' python3 bench/impact/thread_runs.py target/release/proctor

Runs `proctor impact --workload pagefault --children 24 --size 1G --rate 200/s --rounds 1
--duration 70s --agent AGENT` (AGENT: `serve`), finds the agent once its round starts, waits
15 s, then records `sched_switch` for SECONDS (30) in a tracing instance of its own (tracefs at
/sys/kernel/tracing; root), and prints per agent thread: its runs, their total, median, p99 and
longest. Run it alone.
"""
import collections
import os
import re
import subprocess
import sys
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/proctor"
SECONDS = int(os.environ.get("SECONDS", "30"))
AGENT = os.environ.get("AGENT", "serve")
INSTANCE = f"/sys/kernel/tracing/instances/proctor-thread-runs-{os.getpid()}"
SWITCH = re.compile(r"\[(\d+)\].*?\s(\d+\.\d+): sched_switch: .*prev_pid=(\d+) .*next_pid=(\d+) ")


def find_agent(parent):
    """The agent `impact` started: a child of `parent` whose second argument is the agent's."""
    word = AGENT.split()[0].encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            ppid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and len(args) > 1 and args[1] == word:
            return int(pid)
    return None


def threads(pid):
    names = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return names
    for tid in tids:
        try:
            names[int(tid)] = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
        except OSError:
            pass
    return names


def record():
    def put(name, value):
        with open(f"{INSTANCE}/{name}", "w") as f:
            f.write(value)

    os.mkdir(INSTANCE)
    try:
        put("buffer_size_kb", "65536")
        put("events/sched/sched_switch/enable", "1")
        put("tracing_on", "1")
        time.sleep(SECONDS)
        put("tracing_on", "0")
        with open(f"{INSTANCE}/trace") as f:
            return f.read()
    finally:
        put("events/sched/sched_switch/enable", "0")
        os.rmdir(INSTANCE)


def runs_of(text, names):
    on, runs, seen = {}, collections.defaultdict(list), []
    for line in text.splitlines():
        if line.startswith("# entries-in-buffer"):
            print(line[2:])
        m = SWITCH.search(line)
        if not m:
            continue
        cpu, ts, prev, nxt = int(m[1]), float(m[2]), int(m[3]), int(m[4])
        seen.append(ts)
        if prev in names and on.get(cpu, (None,))[0] == prev:
            runs[prev].append(ts - on[cpu][1])
        on[cpu] = (nxt, ts)
    if seen:
        print(f"{len(seen)} switches over {seen[-1] - seen[0]:.1f} s")
    return runs


def main():
    command = [BIN, "impact", "--workload", "pagefault", "--children", "24", "--size", "1G", "--rate", "200/s",
               "--rounds", "1", "--duration", "70s", "--agent", AGENT]
    print("$", " ".join(command), f" (load {' '.join(open('/proc/loadavg').read().split()[:3])})", flush=True)
    impact = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        agent, deadline = None, time.time() + 600
        while agent is None and time.time() < deadline and impact.poll() is None:
            agent = find_agent(impact.pid)
            time.sleep(0.2)
        if agent is None:
            sys.exit("the agent did not start")
        time.sleep(15)
        names = threads(agent)
        text = record()
        names.update({t: n for t, n in threads(agent).items() if t not in names})
    finally:
        impact.wait()
    print(f"{'thread':24} {'runs':>6} {'total ms':>9} {'median µs':>10} {'p99 µs':>8} {'longest ms':>10}")
    for tid, r in sorted(runs_of(text, names).items(), key=lambda kv: -sum(kv[1])):
        r.sort()
        print(f"{names[tid] + '/' + str(tid):24} {len(r):6} {1e3 * sum(r):9.1f} {1e6 * r[len(r) // 2]:10.0f} "
              f"{1e6 * r[int(len(r) * 0.99)]:8.0f} {1e3 * r[-1]:10.2f}")


if __name__ == "__main__":
    main()
