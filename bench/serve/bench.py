"""proctor serve vs jupyter-resource-usage 1.3.0 (issue #3). Run through bench/serve/run.sh.

Phase `latency`: a Jupyter server whose 96 children share 2 GiB (4 KiB pages) serves
jupyter-resource-usage's /api/metrics/v1; `proctor serve --jupyter-pid` watches the same tree.
Each endpoint gets a steady request rate from `wrk` (paced by bench/serve/paced.lua, latencies
in microseconds), while a second `wrk` measures an unrelated endpoint of the same server. Phase `cost`: the agent alone at the default interval with ~600
processes on the host, its CPU and RSS read from /proc over a window, once with --no-record and
once recording into a temporary --data-dir (the recorder's own figures printed). Phase `ring`: the history
ring filled (3600 points) to show RSS with a full ring.

Every figure is printed next to the command that produced it, with the load average.
Processes are started here and stopped here by their pids.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from jupyter_tree import tree_then_jupyter  # noqa: E402  (the repro shared with bench/jupyter)

# PROCTOR_BIN runs the same benchmarks on another build (e.g. the one before a change).
PROCTOR = os.path.abspath(os.environ.get("PROCTOR_BIN", "target/release/proctor"))
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


PACED = os.path.abspath("bench/serve/paced.lua")
SCALE = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def wrk_cmd(url, seconds, connections=1, pace_ms=None, headers=()):
    """wrk with microsecond latencies; with pace_ms, each connection waits that long before
    every request (bench/serve/paced.lua), which gives a steady rate."""
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "--timeout", "60s"]
    for h in headers:
        cmd += ["-H", h]
    if pace_ms is not None:
        cmd += ["-s", PACED]
    return cmd + [url], pace_ms


def parse_wrk(out):
    pct = {int(m.group(1)): float(m.group(2)) * SCALE[m.group(3)]
           for m in re.finditer(r"^\s+(\d+)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)}
    mx = re.search(r"Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    n = re.search(r"(\d+) requests in", out)
    errors = re.search(r"Socket errors: (.*)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"p50": pct.get(50), "p99": pct.get(99), "max": float(mx.group(1)) * SCALE[mx.group(2)] if mx else None,
            "rps": float(rps.group(1)) if rps else 0.0, "n": int(n.group(1)) if n else 0,
            "errors": (errors.group(1) if errors else "none") + (f", {non2xx.group(1)} non-2xx" if non2xx else "")}


def run_wrk(spec):
    cmd, pace = spec
    env = dict(os.environ, PACE_MS=str(pace)) if pace is not None else None
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def ms(v):
    return "   n/a   " if v is None else f"{v * 1e3:9.3f}"


def show(spec):
    cmd, pace = spec
    return (f"PACE_MS={pace} " if pace is not None else "") + " ".join(cmd)


def side_by_side(label, primary, secondary):
    """Runs two wrk commands at once; prints both lines with their commands."""
    p1, p2 = run_wrk(primary), run_wrk(secondary)
    a, b = parse_wrk(p1.communicate()[0]), parse_wrk(p2.communicate()[0])
    for name, r in ((label, a), ("   other endpoint during that load", b)):
        print(f"{name:44s} p50 {ms(r['p50'])} ms  p99 {ms(r['p99'])} ms  max {ms(r['max'])} ms  "
              f"{r['rps']:8.1f} req/s  n={r['n']}  errors: {r['errors']}")
    print(f"   ({show(primary)})\n   ({show(secondary)})")
    return a, b




def phase_latency(seconds=20):
    print(f"\n== latency: 96 children sharing 2 GiB under a Jupyter server (load {load()})")
    workdir = tempfile.mkdtemp(prefix="serve-bench-")
    jport = free_port()
    jupyter_argv = [PY, "-m", "jupyter_server", "--no-browser", "--allow-root",
                    f"--ServerApp.port={jport}", "--ServerApp.ip=127.0.0.1",
                    f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={workdir}",
                    # proctor's wheel enables proctor.jupyter where it is installed: this side is
                    # jupyter-resource-usage's alone.
                    "--ServerApp.jpserver_extensions="
                    "{'jupyter_resource_usage': True, 'proctor.jupyter': False}",
                    "--ResourceUseDisplay.track_cpu_percent=True",
                    "--ResourceUseDisplay.track_disk_usage=True", "--ResourceUseDisplay.disk_path=/"]
    jupyter = start(tree_then_jupyter(PY, 2 << 30, 96, jupyter_argv),
                    stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "jupyter.log"), "w"))
    auth = f"Authorization: token {TOKEN}"
    jbase = f"http://127.0.0.1:{jport}"
    wait_http(f"{jbase}/api/status", {"Authorization": f"token {TOKEN}"})
    t = time.perf_counter()
    wait_http(f"{jbase}/api/metrics/v1", {"Authorization": f"token {TOKEN}"})
    print(f"one jupyter-resource-usage request, cold: {time.perf_counter() - t:.2f} s")
    pport = free_port()
    pcmd = [PROCTOR, "serve", "--no-record", "--listen", f"127.0.0.1:{pport}", "--jupyter-pid", str(jupyter.pid)]
    proctor = start(pcmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pbase = f"http://127.0.0.1:{pport}"
    wait_http(f"{pbase}/api/metrics/v1")
    time.sleep(3)
    print(f"proctor: {' '.join(pcmd)}")
    rows = {}
    auth_h = [auth]
    print(f"-- steady rate: each wrk connection waits 100 ms before every request (~10 req/s) for {seconds} s; "
          f"the other endpoint of the same server at ~2 req/s")
    rows["jru"] = side_by_side("jupyter-resource-usage /api/metrics/v1",
                               wrk_cmd(f"{jbase}/api/metrics/v1", seconds, 1, 100, auth_h),
                               wrk_cmd(f"{jbase}/api/status", seconds, 1, 500, auth_h))
    rows["pj10"] = side_by_side("proctor /api/metrics/v1",
                                wrk_cmd(f"{pbase}/api/metrics/v1", seconds, 1, 100),
                                wrk_cmd(f"{pbase}/api/v1/container", seconds, 1, 500))
    rows["pm10"] = side_by_side("proctor /metrics",
                                wrk_cmd(f"{pbase}/metrics", seconds, 1, 100),
                                wrk_cmd(f"{pbase}/api/v1/container", seconds, 1, 500))
    print(f"-- proctor at a steady ~200 req/s (2 connections, 10 ms pause each) for {seconds} s, other endpoint at ~10 req/s")
    rows["pj"] = side_by_side("proctor /api/metrics/v1",
                              wrk_cmd(f"{pbase}/api/metrics/v1", seconds, 2, 10),
                              wrk_cmd(f"{pbase}/api/v1/container", seconds, 1, 100))
    rows["pm"] = side_by_side("proctor /metrics",
                              wrk_cmd(f"{pbase}/metrics", seconds, 2, 10),
                              wrk_cmd(f"{pbase}/api/v1/container", seconds, 1, 100))
    print("-- proctor, closed loop as fast as one wrk connection goes (saturation, not a steady rate), other endpoint at ~10 req/s")
    rows["pjmax"] = side_by_side("proctor /api/metrics/v1",
                                 wrk_cmd(f"{pbase}/api/metrics/v1", 10, 1),
                                 wrk_cmd(f"{pbase}/api/v1/container", 10, 1, 100))
    rows["pmmax"] = side_by_side("proctor /metrics",
                                 wrk_cmd(f"{pbase}/metrics", 10, 1),
                                 wrk_cmd(f"{pbase}/api/v1/container", 10, 1, 100))
    cpu, rss, hwm = proc_cpu_rss(proctor.pid)
    agent = json.loads(wait_http(f"{pbase}/api/v1/agent"))
    print(f"proctor during this phase: RSS {rss / 2**20:.1f} MiB (peak {hwm / 2**20:.1f}), "
          f"{agent['processes_gone_total']} processes gone, pss worker {agent['pss_worker']}")
    print(f"load after: {load()}")
    stop_all()
    return rows


def phase_cost(target=600, window=60):
    """The agent at the default interval, without recording and then recording (the default)
    into a temporary data directory, one after the other with the same sleepers."""
    print(f"\n== cost: the agent alone at the default interval (load {load()})")
    while sum(1 for d in os.listdir("/proc") if d.isdigit()) < target:
        start(["sleep", "3600"], stdin=subprocess.DEVNULL)
    data_dir = tempfile.mkdtemp(prefix="serve-bench-data-")
    for record_args in (["--no-record"], ["--data-dir", data_dir]):
        cost_run(record_args, window)
    shutil.rmtree(data_dir)
    stop_all()


def cost_run(record_args, window):
    n = sum(1 for d in os.listdir("/proc") if d.isdigit())
    port = free_port()
    cmd = [PROCTOR, "serve", "--listen", f"127.0.0.1:{port}", *record_args]
    p = start(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_http(f"http://127.0.0.1:{port}/api/v1/agent")
    time.sleep(10)  # the cmdline and PSS workers' first pass over every process
    c0, _, _ = proc_cpu_rss(p.pid)
    agent0 = json.loads(wait_http(f"http://127.0.0.1:{port}/api/v1/agent"))
    t0 = time.monotonic()
    time.sleep(window)
    c1, rss, hwm = proc_cpu_rss(p.pid)
    dt = time.monotonic() - t0
    agent = json.loads(wait_http(f"http://127.0.0.1:{port}/api/v1/agent"))
    samples = agent["samples_total"] - agent0["samples_total"]
    sampling = agent["sampling_cpu_seconds_total"] - agent0["sampling_cpu_seconds_total"]
    print(f"processes on the host: {n}; command: {' '.join(cmd)}")
    print(f"agent CPU over {dt:.0f} s: {100 * (c1 - c0) / dt:.2f} % of one core "
          f"(utime+stime from /proc/{p.pid}/stat, after a 10 s warm-up)")
    print(f"agent RSS: {rss / 2**20:.1f} MiB (VmRSS), peak {hwm / 2**20:.1f} MiB (VmHWM)")
    print(f"its own figures: last sample {agent['last_sample']['cpu_seconds'] * 1e6:.0f} us CPU, "
          f"{agent['last_sample']['wall_seconds'] * 1e6:.0f} us wall, {agent['last_sample']['files_read']} files; "
          f"history {agent['history']['bytes'] / 2**10:.0f} KiB of {agent['history']['max_bytes'] / 2**10:.0f} KiB bound; "
          f"pss worker {agent['pss_worker']['cpu_seconds']:.2f} s CPU")
    # The core's per-sample cost: the sampling thread's CPU per cycle over the same window,
    # which recording must leave (nearly) unchanged; the recorder's own CPU is reported apart.
    print(f"sampling thread: {1e3 * sampling / max(samples, 1):.2f} ms CPU/sample "
          f"over {samples} samples in the window")
    rec = agent["recording"]
    if rec["enabled"]:
        frames = max(rec["frames_written"], 1)
        print(f"recording: {rec['frames_written']} frames ({rec['key_frames']} key), "
              f"{rec['bytes_written'] / frames:.0f} bytes/sample, "
              f"recorder thread {rec['write_cpu_seconds'] / frames * 1e3:.2f} ms CPU/sample, "
              f"{rec['dropped']} dropped, {rec['write_errors']} write errors (whole run, warm-up included)")
    print(f"load after: {load()}")
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=15)


def phase_ring(target=600):
    """Fills the ring (3600 points at 50 ms) without and then with recording; RSS for each."""
    for record in (False, True):
        print(f"\n== ring: 3600 history points at 50 ms, {'recording' if record else '--no-record'}, then RSS (load {load()})")
        while sum(1 for d in os.listdir("/proc") if d.isdigit()) < target:
            start(["sleep", "3600"], stdin=subprocess.DEVNULL)
        port = free_port()
        data = tempfile.mkdtemp(prefix="serve-ring-")
        recording = ["--data-dir", data] if record else ["--no-record"]
        cmd = [PROCTOR, "serve", *recording, "--listen", f"127.0.0.1:{port}", "--interval", "50ms", "--history", "180s"]
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
              f"agent RSS {rss / 2**20:.1f} MiB, peak {hwm / 2**20:.1f} MiB; recording {agent.get('recording')}")
        stop_all()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    phases = sys.argv[1:] or ["latency", "cost"]
    try:
        for name in phases:
            {"latency": phase_latency, "cost": phase_cost, "ring": phase_ring}[name]()
    finally:
        stop_all()
