"""proctor serve vs jupyter-resource-usage 1.3.0 (issue #3). Run through bench/serve/run.sh.

Phase `latency`: a Jupyter server whose 96 children share 2 GiB (4 KiB pages) serves
jupyter-resource-usage's /api/metrics/v1; `proctor serve --jupyter-pid` watches the same tree.
Each endpoint gets a steady request rate from `hey`, while a second `hey` measures an unrelated
endpoint of the same server. Phase `cost`: the agent alone at the default interval with ~600
processes on the host, its CPU and RSS read from /proc over a window. Phase `ring`: the history
ring filled (3600 points) to show RSS with a full ring.

Every figure is printed next to the command that produced it, with the load average.
Processes are started here and stopped here by their pids.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

PROCTOR = os.path.abspath("target/release/proctor")
HEY = os.path.abspath("target/bench-bin/hey")
PY = os.path.abspath(".venv/bin/python")
TOKEN = "bench"
started = []


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd, **kw):
    p = subprocess.Popen(cmd, **kw)
    started.append(p)
    return p


def stop_all():
    for p in reversed(started):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    started.clear()


def wait_http(url, headers=None, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            req = urllib.request.Request(url, headers=headers or {})
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.read()
        except Exception:
            time.sleep(0.5)
    raise SystemExit(f"{url} never answered")


def proc_cpu_rss(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    rss = hwm = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) * 1024
    return cpu, rss, hwm


def hey(url, rate, seconds, workers=1, headers=()):
    cmd = [HEY, "-z", f"{seconds}s", "-c", str(workers), "-q", str(rate), "-t", "60", "-o", "csv"]
    for h in headers:
        cmd += ["-H", h]
    cmd.append(url)
    return cmd


def percentile(values, q):
    """Nearest rank, so a p99 of 15 values is the slowest of them."""
    if not values:
        return None
    values = sorted(values)
    rank = max(1, -(-len(values) * q // 100))
    return values[int(rank) - 1]


def parse_hey(text, seconds):
    """hey -o csv: one row per request (response time in seconds, 0.1 ms resolution)."""
    times, codes, errors = [], {}, 0
    for line in text.splitlines()[1:]:
        parts = line.split(",")
        if len(parts) < 7:
            continue
        try:
            t, code = float(parts[0]), parts[6]
        except ValueError:
            errors += 1
            continue
        times.append(t)
        codes[code] = codes.get(code, 0) + 1
    return {"p50": percentile(times, 50), "p99": percentile(times, 99), "max": max(times) if times else None,
            "codes": codes, "errors": errors, "rps": len(times) / seconds}


def wrk(url, seconds):
    cmd = ["wrk", "-t1", "-c1", f"-d{seconds}s", "--latency", url]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
    pct = {int(m.group(1)): float(m.group(2)) * scale[m.group(3)]
           for m in re.finditer(r"^\s+(\d+)%\s+([\d.]+)(us|ms|s)$", out, re.M)}
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    return cmd, {"p50": pct.get(50), "p99": pct.get(99), "rps": float(rps.group(1)) if rps else None}


def ms(v):
    return "   n/a   " if v is None else f"{v * 1e3:9.3f}"


def side_by_side(label, primary, secondary, seconds):
    """Runs two hey commands at once; prints both lines."""
    p1 = subprocess.Popen(primary, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    p2 = subprocess.Popen(secondary, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    o1, _ = p1.communicate()
    o2, _ = p2.communicate()
    a, b = parse_hey(o1, seconds), parse_hey(o2, seconds)
    for name, r in ((label, a), ("   other endpoint during that load", b)):
        print(f"{name:44s} p50 {ms(r['p50'])} ms  p99 {ms(r['p99'])} ms  max {ms(r['max'])} ms  "
              f"{r['rps']:6.1f} req/s  codes {r['codes']} errors {r['errors']}")
    print(f"   ({' '.join(primary)})\n   ({' '.join(secondary)})")
    return a, b


TREE_THEN_JUPYTER = r"""
import mmap, os, signal, sys
size = int(sys.argv[1]); n = int(sys.argv[2]); argv = sys.argv[3:]
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(mmap.MADV_NOHUGEPAGE)  # 4 KiB pages, as in the motivating case
for i in range(0, size, 4096):
    m[i] = 1
for _ in range(n):
    if os.fork() == 0:
        # Children share the 2 GiB copy-on-write and die with their parent.
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        signal.pause()
        os._exit(0)
# The parent becomes the Jupyter server: same pid, so the children are its children.
os.execv(argv[0], argv)
"""


def phase_latency(seconds=20):
    print(f"\n== latency: 96 children sharing 2 GiB under a Jupyter server (load {load()})")
    workdir = tempfile.mkdtemp(prefix="serve-bench-")
    jport = free_port()
    jupyter_argv = [PY, "-m", "jupyter_server", "--no-browser", "--allow-root",
                    f"--ServerApp.port={jport}", "--ServerApp.ip=127.0.0.1",
                    f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={workdir}",
                    "--ResourceUseDisplay.track_cpu_percent=True",
                    "--ResourceUseDisplay.track_disk_usage=True", "--ResourceUseDisplay.disk_path=/"]
    jupyter = start([PY, "-c", TREE_THEN_JUPYTER, str(2 << 30), "96"] + jupyter_argv,
                    stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "jupyter.log"), "w"))
    auth = f"Authorization: token {TOKEN}"
    jbase = f"http://127.0.0.1:{jport}"
    wait_http(f"{jbase}/api/status", {"Authorization": f"token {TOKEN}"})
    t = time.perf_counter()
    wait_http(f"{jbase}/api/metrics/v1", {"Authorization": f"token {TOKEN}"})
    print(f"one jupyter-resource-usage request, cold: {time.perf_counter() - t:.2f} s")
    pport = free_port()
    pcmd = [PROCTOR, "serve", "--listen", f"127.0.0.1:{pport}", "--jupyter-pid", str(jupyter.pid)]
    proctor = start(pcmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pbase = f"http://127.0.0.1:{pport}"
    wait_http(f"{pbase}/api/metrics/v1")
    time.sleep(3)
    print(f"proctor: {' '.join(pcmd)}")
    rows = {}
    rate = 10
    print(f"-- steady {rate} req/s asked (one closed-loop worker: a slow answer delays the next request) "
          f"for {seconds} s each, one endpoint at a time, other endpoint at 1 req/s")
    rows["jru"] = side_by_side("jupyter-resource-usage /api/metrics/v1",
                               hey(f"{jbase}/api/metrics/v1", rate, seconds, headers=[auth]),
                               hey(f"{jbase}/api/status", 1, seconds, headers=[auth]), seconds)
    rows["pj1"] = side_by_side("proctor /api/metrics/v1",
                               hey(f"{pbase}/api/metrics/v1", rate, seconds),
                               hey(f"{pbase}/api/v1/container", 1, seconds), seconds)
    rows["pm1"] = side_by_side("proctor /metrics",
                               hey(f"{pbase}/metrics", rate, seconds),
                               hey(f"{pbase}/api/v1/container", 1, seconds), seconds)
    fast = 100
    print(f"-- proctor at {fast} req/s x 2 workers for {seconds} s, other endpoint at 10 req/s")
    rows["pj"] = side_by_side("proctor /api/metrics/v1",
                              hey(f"{pbase}/api/metrics/v1", fast, seconds, workers=2),
                              hey(f"{pbase}/api/v1/container", 10, seconds), seconds)
    rows["pm"] = side_by_side("proctor /metrics",
                              hey(f"{pbase}/metrics", fast, seconds, workers=2),
                              hey(f"{pbase}/api/v1/container", 10, seconds), seconds)
    print("-- proctor, closed loop as fast as one wrk connection goes (us resolution), other endpoint at 10 req/s")
    for path in ("/api/metrics/v1", "/metrics"):
        other = subprocess.Popen(hey(f"{pbase}/api/v1/container", 10, 10), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        cmd, w = wrk(f"{pbase}{path}", 10)
        b = parse_hey(other.communicate()[0], 10)
        print(f"{'proctor ' + path:44s} p50 {ms(w['p50'])} ms  p99 {ms(w['p99'])} ms  {w['rps'] or 0:9.1f} req/s   ({' '.join(cmd)})")
        print(f"{'   other endpoint during that load':44s} p50 {ms(b['p50'])} ms  p99 {ms(b['p99'])} ms  max {ms(b['max'])} ms  {b['rps']:6.1f} req/s")
    cpu, rss, hwm = proc_cpu_rss(proctor.pid)
    agent = json.loads(wait_http(f"{pbase}/api/v1/agent"))
    print(f"proctor during this phase: RSS {rss / 2**20:.1f} MiB (peak {hwm / 2**20:.1f}), "
          f"{agent['processes_gone_total']} processes gone, pss worker {agent['pss_worker']}")
    print(f"load after: {load()}")
    stop_all()
    return rows


def phase_cost(target=600, window=60):
    sleepers = []
    print(f"\n== cost: the agent alone at the default interval (load {load()})")
    while sum(1 for d in os.listdir("/proc") if d.isdigit()) < target:
        sleepers.append(start(["sleep", "3600"], stdin=subprocess.DEVNULL))
    n = sum(1 for d in os.listdir("/proc") if d.isdigit())
    port = free_port()
    cmd = [PROCTOR, "serve", "--listen", f"127.0.0.1:{port}"]
    p = start(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_http(f"http://127.0.0.1:{port}/api/v1/agent")
    time.sleep(10)  # the cmdline and PSS workers' first pass over every process
    c0, _, _ = proc_cpu_rss(p.pid)
    t0 = time.monotonic()
    time.sleep(window)
    c1, rss, hwm = proc_cpu_rss(p.pid)
    dt = time.monotonic() - t0
    agent = json.loads(wait_http(f"http://127.0.0.1:{port}/api/v1/agent"))
    print(f"processes on the host: {n}; command: {' '.join(cmd)}")
    print(f"agent CPU over {dt:.0f} s: {100 * (c1 - c0) / dt:.2f} % of one core "
          f"(utime+stime from /proc/{p.pid}/stat, after a 10 s warm-up)")
    print(f"agent RSS: {rss / 2**20:.1f} MiB (VmRSS), peak {hwm / 2**20:.1f} MiB (VmHWM)")
    print(f"its own figures: last sample {agent['last_sample']['cpu_seconds'] * 1e6:.0f} us CPU, "
          f"{agent['last_sample']['wall_seconds'] * 1e6:.0f} us wall, {agent['last_sample']['files_read']} files; "
          f"history {agent['history']['bytes'] / 2**10:.0f} KiB of {agent['history']['max_bytes'] / 2**10:.0f} KiB bound; "
          f"pss worker {agent['pss_worker']['cpu_seconds']:.2f} s CPU")
    print(f"load after: {load()}")
    stop_all()


def phase_ring(target=600):
    print(f"\n== ring: 3600 history points at 50 ms, then RSS (load {load()})")
    while sum(1 for d in os.listdir("/proc") if d.isdigit()) < target:
        start(["sleep", "3600"], stdin=subprocess.DEVNULL)
    port = free_port()
    cmd = [PROCTOR, "serve", "--listen", f"127.0.0.1:{port}", "--interval", "50ms", "--history", "180s"]
    p = start(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/api/v1/agent"
    wait_http(url)
    while True:
        agent = json.loads(wait_http(url))
        if agent["history"]["points"] >= agent["history"]["capacity"]:
            break
        time.sleep(5)
    _, rss, hwm = proc_cpu_rss(p.pid)
    print(f"command: {' '.join(cmd)}")
    print(f"full ring: {agent['history']['points']} points, {agent['history']['bytes'] / 2**20:.2f} MiB; "
          f"agent RSS {rss / 2**20:.1f} MiB, peak {hwm / 2**20:.1f} MiB")
    stop_all()


if __name__ == "__main__":
    phases = sys.argv[1:] or ["latency", "cost"]
    try:
        for name in phases:
            {"latency": phase_latency, "cost": phase_cost, "ring": phase_ring}[name]()
    finally:
        stop_all()
