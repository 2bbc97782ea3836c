#!/usr/bin/env python3
"""bench/bpf/burst.sh's body: see there."""
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import serve_addr  # noqa: E402

PROCTOR = os.environ["PROCTOR_BIN"]
REPEATS = int(os.environ.get("REPEATS", "3"))
TICK = os.sysconf("SC_CLK_TCK")


def forks():
    for line in open("/proc/stat"):
        if line.startswith("processes "):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def start_serve(data, extra):
    return serve_addr.start([PROCTOR, "serve", "--listen", "127.0.0.1:0", "--interval", "1s", "--data-dir", data, *extra])


def get(addr, path):
    with urllib.request.urlopen(f"http://{addr}{path}", timeout=10) as r:
        return json.loads(r.read())


def samples(addr):
    return get(addr, "/api/v1/agent")["samples_total"]


def wait_samples(addr, n, timeout=30):
    end = time.time() + timeout
    want = samples(addr) + n
    while samples(addr) < want and time.time() < end:
        time.sleep(0.1)


def burst(n):
    """Runs the burst; its wall seconds and CPU seconds (the shell and its children)."""
    before = os.times()
    t = time.monotonic()
    subprocess.run(["sh", "-c", f"i=0; while [ $i -lt {n} ]; do /bin/true proctor-burst; i=$((i+1)); done"], check=True)
    wall = time.monotonic() - t
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def arm(name, n):
    data = tempfile.mkdtemp(prefix="proctor-burst-")
    serve = None
    out = {"arm": name}
    try:
        if name != "none":
            serve, addr = start_serve(data, ["--no-process-events"] if name == "proc" else [])
            wait_samples(addr, 2)
            agent_cpu = cpu_seconds(serve.pid)
        f0 = forks()
        out["wall_s"], out["cpu_s"] = burst(n)
        out["kernel_forks"] = forks() - f0
        if serve is None:
            return out
        wait_samples(addr, 2)
        agent = get(addr, "/api/v1/agent")
        out["agent_cpu_s"] = cpu_seconds(serve.pid) - agent_cpu
        out["events"] = agent["process_events_from"]
        out["coverage_percent"] = agent["starts"]["coverage_percent"]
        out["coverage_exact"] = agent["starts"]["coverage_exact"]
        out["why_not"] = agent["process_events_unavailable"]
        out["events_lost"] = agent["starts"]["events_lost_total"]
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=30)
        serve = None
        if name == "events":
            rows = subprocess.run([PROCTOR, "dump", "exited", "--dir", data, "--fields", "cmdline"],
                                  capture_output=True, text=True, check=True).stdout
            out["burst_seen"] = sum(1 for l in rows.splitlines() if l == "/bin/true proctor-burst")
        else:
            rows = subprocess.run([PROCTOR, "dump", "process", "--dir", data, "--fields", "pid,name"],
                                  capture_output=True, text=True, check=True).stdout
            out["burst_seen"] = len({l for l in rows.splitlines() if l.endswith(",true")})
        return out
    finally:
        if serve is not None:
            serve.kill()
            serve.wait()
        subprocess.run(["rm", "-rf", data])


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    print(f"== a burst of {n} short-lived processes beside proctor serve (1 s), {REPEATS} rounds; load {load()}")
    results = {"events": [], "proc": [], "none": []}
    for r in range(REPEATS):
        order = ["events", "proc", "none"] if r % 2 == 0 else ["none", "proc", "events"]
        for name in order:
            results[name].append(arm(name, n))
            print(f"   round {r + 1} {name}: {json.dumps(results[name][-1])}", flush=True)
    med = lambda name, key: statistics.median([x[key] for x in results[name] if x.get(key) is not None] or [float("nan")])
    print(f"-- medians (load after: {load()})")
    for name, what in (("events", "BPF process events"), ("proc", "/proc alone (--no-process-events)"), ("none", "no agent")):
        rows = results[name]
        line = f"{what:<36} burst wall {med(name, 'wall_s'):6.2f} s  burst CPU {med(name, 'cpu_s'):6.2f} s"
        if name != "none":
            line += (f"  seen {med(name, 'burst_seen'):7.0f} of {n} ({100 * med(name, 'burst_seen') / n:5.1f} %)"
                     f"  agent coverage {med(name, 'coverage_percent'):5.1f} %"
                     f"  agent CPU {med(name, 'agent_cpu_s'):5.2f} s")
            if name == "events":
                line += f"  events lost (max) {max((x.get('events_lost') or 0) for x in rows)}"
            if rows and rows[0].get("events") != ("bpf" if name == "events" else "proc"):
                line += f"  (events: {rows[0].get('events')}: {rows[0].get('why_not')})"
        print(line)
    if all(x["events"] == "bpf" for x in results["events"]):
        print(f"burst wall, events / none: {med('events', 'wall_s') / med('none', 'wall_s'):.3f}×;"
              f" burst CPU, events / none: {med('events', 'cpu_s') / med('none', 'cpu_s'):.3f}×")


if __name__ == "__main__":
    main()
