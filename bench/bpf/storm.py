#!/usr/bin/env python3
"""Issue 35's burst goal: N processes of 1-50 ms over D seconds beside `proctor serve --groups`.

    PROCTOR_BIN=target/release/proctor python3 bench/bpf/storm.py [N] [SECONDS]
    STORM_SERVE_ARGS='--no-process-events' ...   # serve's arguments beside --groups
    STORM_PROCESSES=600 ...                       # idle sleepers started first, up to ~600 processes
    STORM_KEEP_DATA=1 ...                         # keep serve's store (for crates/proctor-store/examples)

The driver forks N children at an even pace over SECONDS; each spins 0-1 ms of CPU and sleeps
the rest of a 1-50 ms life (uniform, seeded), then exits; the driver reaps them all. Then:
every child counted (rows of `dump exited` whose parent is the driver) and attributed (the
rules' group `storm`, which the driver's command line names: its started/exited counts and
proctor_group_processes_exited_total); their CPU summed from the exit rows against what the
kernel gave the driver for its children (getrusage(RUSAGE_CHILDREN)); and the agent's CPU over
the burst against the same length of idle before and after it.
"""
import json
import os
import random
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

PROCTOR = os.environ["PROCTOR_BIN"]
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """The process's CPU time, ns-exact: every live thread's schedstat run time (a thread that
    ended since is not counted; the agent's threads live as long as it)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except OSError:
            pass
    return total / 1e9


def cpu_by_thread(pid):
    """CPU seconds by thread name (the agent names its threads: proctor-agent, proctor-pss…)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            ns = int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except OSError:
            continue
        out[name] = out.get(name, 0) + ns / 1e9
    return out


def faults_by_thread(pid):
    """Minor page faults by thread name (`stat`'s tenth field): memory a thread touched for the
    first time, ~1.3 µs each here (a fresh buffer's pages, or a heap grown again)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            fields = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = out.get(name, 0) + int(fields[7])
    return out


def faults_moved(before, after):
    """The threads' faults between two `faults_by_thread` readings, most first."""
    moved = {n: after.get(n, 0) - before.get(n, 0) for n in after}
    return ", ".join(f"{n} {v}" for n, v in sorted(moved.items(), key=lambda kv: -kv[1]) if v > 0) or "none"


def by_thread(before, after):
    """The threads' CPU between two `cpu_by_thread` readings, largest first, in ms."""
    moved = {n: after.get(n, 0) - before.get(n, 0) for n in after}
    return ", ".join(f"{n} {1000 * v:.1f}" for n, v in sorted(moved.items(), key=lambda kv: -kv[1]) if v >= 0.0005)


def user_process(pid):
    """Whether the process has memory (a kernel thread's statm is all zeros)."""
    try:
        return open(f"/proc/{pid}/statm").read().split()[0] != "0"
    except OSError:
        return False


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def child(spin_s, life_s):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < spin_s:
        pass
    rest = life_s - (time.perf_counter() - t0)
    if rest > 0:
        time.sleep(rest)
    os._exit(0)


def storm(n, seconds):
    rng = random.Random(35)
    plan = [(rng.uniform(0, 0.001), rng.uniform(0.001, 0.050)) for _ in range(n)]
    start = time.monotonic()
    live = 0
    for i, (spin, life) in enumerate(plan):
        due = start + i * seconds / n
        while True:
            # Reap what has ended while waiting for the next start.
            while live:
                pid, _ = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                live -= 1
            delay = due - time.monotonic()
            if delay <= 0:
                break
            time.sleep(min(delay, 0.002))
        if os.fork() == 0:
            child(spin, life)
        live += 1
    while live:
        os.waitpid(-1, 0)
        live -= 1
    return time.monotonic() - start


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    if len(sys.argv) > 3 and sys.argv[3] == "--storm":
        storm(n, seconds)
        return
    sleepers = []
    while sum(1 for e in os.listdir("/proc") if e.isdigit()) < int(os.environ.get("STORM_PROCESSES", "0")):
        sleepers.append(subprocess.Popen(["sleep", "900"], stdin=subprocess.DEVNULL))
    try:
        run(n, seconds)
    finally:
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()


def run(n, seconds):
    data = tempfile.mkdtemp(prefix="proctor-storm-")
    os.makedirs(os.path.join(data, "d"))
    rules = os.path.join(data, "rules.yml")
    with open(rules, "w") as f:
        f.write("process_names:\n  - name: storm\n    cmdline: ['bench/bpf/storm.py']\n")
    cmd = [PROCTOR, "serve", "--listen", "127.0.0.1:0", "--interval", "1s", "--data-dir", os.path.join(data, "d"),
           "--groups", rules, *os.environ.get("STORM_SERVE_ARGS", "").split()]
    serve = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        addr = None
        end = time.time() + 30
        while addr is None and time.time() < end:
            if select.select([serve.stderr], [], [], 1.0)[0]:
                line = serve.stderr.readline()
                if "http://" in line:
                    addr = line.split("http://", 1)[1].split()[0].rstrip("/")
        get = lambda path: json.loads(urllib.request.urlopen(f"http://{addr}{path}", timeout=10).read())
        time.sleep(3)
        procs = sum(1 for e in os.listdir("/proc") if e.isdigit())
        # The PSS worker's first pass reads every process with memory once, at up to 4x its
        # budget (~150 ms of CPU at ~600 processes): an idle window that holds it is no idle.
        # Wait (at most 120 s) until it has read as many, and 3 s more.
        users = sum(1 for e in os.listdir("/proc") if e.isdigit() and user_process(e))
        end = time.time() + 120
        while time.time() < end and ((get("/api/v1/agent").get("pss_worker") or {}).get("reads") or 0) < users:
            time.sleep(1)
        time.sleep(3)
        print(f"== {n} processes of 1-50 ms over {seconds:.0f} s beside `{' '.join(cmd[1:])}`, {procs} processes (load {load()})")
        idle0, idle_threads0, idle_faults0 = cpu_seconds(serve.pid), cpu_by_thread(serve.pid), faults_by_thread(serve.pid)
        time.sleep(seconds)
        idle, idle_threads = cpu_seconds(serve.pid) - idle0, by_thread(idle_threads0, cpu_by_thread(serve.pid))
        idle_faults = faults_moved(idle_faults0, faults_by_thread(serve.pid))
        # The storm runs in a child of this script, so its children's parent is known and its
        # command line names the group.
        pss_idle = (get("/api/v1/agent").get("pss_worker") or {})
        busy0, busy_threads0, busy_faults0 = cpu_seconds(serve.pid), cpu_by_thread(serve.pid), faults_by_thread(serve.pid)
        wall0 = time.monotonic()
        driver = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(n), str(seconds), "--storm"])
        usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        driver.wait()
        wall = time.monotonic() - wall0
        # The driver's own rusage for its children is not ours: read it from the kernel's
        # accounting of the driver as our child (RUSAGE_CHILDREN counts grandchildren reaped
        # by the driver, through its cutime).
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy, busy_threads = cpu_seconds(serve.pid) - busy0, by_thread(busy_threads0, cpu_by_thread(serve.pid))
        busy_faults = faults_moved(busy_faults0, faults_by_thread(serve.pid))
        pss_busy = (get("/api/v1/agent").get("pss_worker") or {})
        time.sleep(3)
        # A second idle window after the storm: at ~70 processes the whole idle cost is a
        # millisecond or two a second, and one window's moved by half between runs.
        pss_after0 = (get("/api/v1/agent").get("pss_worker") or {})
        after0, after_threads0 = cpu_seconds(serve.pid), cpu_by_thread(serve.pid)
        time.sleep(seconds)
        idle_after, after_threads = cpu_seconds(serve.pid) - after0, by_thread(after_threads0, cpu_by_thread(serve.pid))
        groups = get("/api/v1/groups")
        agent = get("/api/v1/agent")
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=30)
        serve = None
        dump = subprocess.run([PROCTOR, "dump", "exited", "--dir", os.path.join(data, "d"), "--format", "json",
                               "--fields", "pid,ppid,name,cpu_seconds,seen"], capture_output=True, text=True)
        if dump.returncode != 0:
            raise SystemExit(f"proctor dump exited failed: {dump.stderr}")
        rows = dump.stdout
        mine = [json.loads(l) for l in rows.splitlines() if l.strip()]
        kids = [r for r in mine if r["ppid"] == driver.pid]
        driver_row = [r for r in mine if r["pid"] == driver.pid]
        kids_cpu = sum(r["cpu_seconds"] for r in kids)
        driver_cpu = sum(r["cpu_seconds"] for r in driver_row)
        # What the kernel says the driver and its children used: ours minus before.
        kernel_total = (usage.ru_utime - usage0.ru_utime) + (usage.ru_stime - usage0.ru_stime)
        kernel_kids = kernel_total - driver_cpu
        if agent["process_events_from"] != "bpf":
            print(f"no BPF process events ({agent['process_events_unavailable']}): {len(kids)} children in `dump exited`")
            rate = (idle + idle_after) / (2 * seconds)
            print(f"agent CPU: {busy:.3f} s over the storm's {wall:.1f} s against {idle:.3f} s idle in {seconds:.0f} s before "
                  f"and {idle_after:.3f} s after: {busy / (rate * wall) if rate else float('inf'):.2f}× their mean over as long; "
                  f"load after {load()}")
            return
        print(f"counted: {len(kids)} of {n} children in `dump exited` ({sum(1 for r in kids if not r['seen'])} never listed alive);"
              f" the agent's coverage {agent['starts']['coverage_percent']:.1f} %, events lost {agent['starts']['events_lost_total']}")
        storm_group = next((g for g in groups["groups"] if g["name"] == "storm"), None)
        print(f"attributed: group `storm` exited total (proctor_group_processes_exited_total): "
              f"{storm_group and storm_group.get('exited_total')}")
        print(f"CPU: children's exit rows sum {kids_cpu:.3f} s; the kernel's (driver's and children's, RUSAGE_CHILDREN) "
              f"{kernel_total:.3f} s less the driver's own row {driver_cpu:.3f} s = {kernel_kids:.3f} s: "
              f"{100 * (kids_cpu / kernel_kids - 1):+.2f} % (goal within 2 %)")
        # The storm runs past its SECONDS when the driver and its children need more than the
        # machine's CPUs (on 2 CPUs they use ~3 s of CPU a second): the idle cost it is held
        # against is the idle windows' cost a second, over the storm's own length.
        idle_rate = (idle + idle_after) / (2 * seconds)
        print(f"agent CPU: {busy:.3f} s over the storm's {wall:.1f} s against {idle:.3f} s idle in {seconds:.0f} s before it and "
              f"{idle_after:.3f} s after: {busy / (idle_rate * wall) if idle_rate else float('inf'):.2f}× their mean over as long "
              f"(goal at most 2×; {busy / (idle_rate * seconds) if idle_rate else float('inf'):.2f}× against {seconds:.0f} s); load after {load()}")
        print(f"  by thread, ms: storm {busy_threads}; idle before {idle_threads}; idle after {after_threads}")
        print(f"  page faults by thread: storm {busy_faults}; idle before {idle_faults}")
        pss = agent.get("pss_worker") or {}
        print(f"  PSS worker over the run: {pss.get('reads')} reads, {pss.get('errors')} errors, "
              f"{pss.get('skipped_unchanged')} skipped unchanged, {pss.get('skipped_young')} skipped young, "
              f"{pss.get('cpu_seconds')} s CPU")
        # Its reads by window: the storm's against the idle one after it (the one before it
        # comes just after the first pass, which the wait above ends by count, not by time).
        moved = lambda a, b, k: (b.get(k) or 0) - (a.get(k) or 0)
        print(f"  PSS worker's reads (errors), CPU ms: over the storm {moved(pss_idle, pss_busy, 'reads')} "
              f"({moved(pss_idle, pss_busy, 'errors')}), {1000 * moved(pss_idle, pss_busy, 'cpu_seconds'):.1f}; "
              f"idle after {moved(pss_after0, pss, 'reads')} ({moved(pss_after0, pss, 'errors')}), "
              f"{1000 * moved(pss_after0, pss, 'cpu_seconds'):.1f}")
    finally:
        if serve is not None:
            serve.kill()
            serve.wait()
        if os.environ.get("STORM_KEEP_DATA"):
            print(f"  the store is kept: {os.path.join(data, 'd')}")
        else:
            subprocess.run(["rm", "-rf", data])


if __name__ == "__main__":
    main()
