"""jupyter-resource-usage 1.3.0's server extension vs proctor's (`proctor.jupyter`), issue #8.

Run through bench/jupyter/run.sh. For each extension in turn, one Jupyter server is started on
the repro of bench/lib/jupyter_tree.py (CHILDREN children sharing SHARED_MIB MiB in 4 KiB pages)
with only that extension serving /api/metrics/v1, and measured in two windows of DURATION s:

1. the status bar's polling alone: TABS "tabs", each a closed loop that asks /api/metrics/v1,
   waits for the answer, then waits TAB_INTERVAL s (what JupyterLab's Poll does), started
   TAB_INTERVAL/TABS apart; beside them a poller that asks /api/status every STATUS_MS ms
   (after each answer) and records how long each answer took: its worst is the stall;
2. the same plus one more client asking /api/metrics/v1 MEASURE_PAUSE_MS ms after each answer,
   so that the percentiles of the metrics latency rest on enough requests.

Every poller is its own process (no GIL shared with another poller) holding one keep-alive
connection; latencies are wall times from sending the request to having read the whole answer,
so they include Jupyter's own request handling (tornado, auth, logging). Percentiles are exact
order statistics over every recorded request (nearest rank), printed as p50/p90/p99/p99.9/max.
Beside them, jupyter-server's own timing of the same requests (its http_request_duration_seconds
histogram on /metrics, read before and after each window: mean and share within 5/10/25 ms),
which leaves out the client, the socket and the wait for a CPU before tornado reads the request.

In window 1, beside them, `proctor probe jupyter` (PROCTOR_BIN) holds a key in a terminal of
the same server for DURATION - 5 s at 30 keystrokes/s and times each keystroke to its echo
(the Netflix method, issue 21): the echo waits whenever tornado's event loop is busy
answering a tab. ECHO=0 leaves it out.

Then PSS: the extension's answer against psutil's memory_full_info().pss summed over the same
tree (the server and its descendants), once proctor's readings are fresh (its answer stopped
moving); and CPU: the server process's utime+stime from /proc over the two windows, split by
thread name, so the sampler threads' share shows beside tornado's.

Knobs (environment): EXTENSIONS ("jru proctor"), CHILDREN (96), SHARED_MIB (2048), TABS (4),
TAB_INTERVAL (5 s), DURATION (60 s per window), STATUS_MS (100), MEASURE_PAUSE_MS (100; 0
skips window 2), TRACK_CPU (1: track_cpu_percent and track_disk_usage on, as a deployment that
shows them has), PSS_WAIT (300 s at most for proctor's PSS to settle).
Every process is started here and stopped here by its pid.
"""

import http.client
import json
import math
import multiprocessing
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import psutil

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from jupyter_tree import tree_then_jupyter  # noqa: E402  (the repro shared with bench/serve)

PY = os.path.abspath(".venv/bin/python")
TOKEN = "bench-jupyter"
AUTH = {"Authorization": f"token {TOKEN}"}


def knob(name, default, kind=int):
    return kind(os.environ.get(name, default))


EXTENSIONS = os.environ.get("EXTENSIONS", "jru proctor").split()
CHILDREN = knob("CHILDREN", 96)
SHARED_MIB = knob("SHARED_MIB", 2048)
TABS = knob("TABS", 4)
TAB_INTERVAL = knob("TAB_INTERVAL", 5.0, float)
DURATION = knob("DURATION", 60.0, float)
STATUS_MS = knob("STATUS_MS", 100.0, float)
MEASURE_PAUSE_MS = knob("MEASURE_PAUSE_MS", 100.0, float)
TRACK_CPU = knob("TRACK_CPU", 1)
PSS_WAIT = knob("PSS_WAIT", 300.0, float)
ECHO = knob("ECHO", 1)
PROCTOR_BIN = os.path.abspath(os.environ.get("PROCTOR_BIN", "target/release/proctor"))

started = []


def load():
    nproc = sum(1 for d in os.listdir("/proc") if d.isdigit())
    with open("/proc/loadavg") as f:
        avg = " ".join(f.read().split()[:3])
    return (f"{nproc} processes on the host, {len(os.sched_getaffinity(0))} CPUs usable "
            f"({os.cpu_count()} online), loadavg {avg}")


def shell_word(arg):
    """`arg` as a shell word a reader can paste: bare, in double quotes, or shlex-quoted."""
    if shlex.quote(arg) == arg:
        return arg
    if not any(c in arg for c in '"$`\\!'):
        return f'"{arg}"'
    return shlex.quote(arg)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(port, path, timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=AUTH)
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError(f"GET {path}: {r.status} {body[:200]!r}")
        return json.loads(body)
    finally:
        conn.close()


def wait_json(port, path, seconds=180, server=None):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        if server is not None and server.poll() is not None:
            raise SystemExit(f"the server exited ({server.returncode}) before answering GET {path}")
        try:
            return get_json(port, path)
        except Exception as e:  # not up yet
            last = e
            time.sleep(0.5)
    raise SystemExit(f"GET {path} never answered: {last}")


def poller(port, path, pause_s, start_delay_s, until, out):
    """A closed loop on one keep-alive connection: ask, read the whole answer, pause, again.
    Sends (offset of each request from the window start, latency s, status) to `out`."""
    records = []
    time.sleep(start_delay_s)
    conn = None
    while time.time() < until:
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        t0 = time.perf_counter()
        try:
            conn.request("GET", path, headers=AUTH)
            r = conn.getresponse()
            r.read()
            status = r.status
        except Exception as e:  # counted, never fatal
            status = f"error {type(e).__name__}"
            conn.close()
            conn = None
        records.append((time.time(), time.perf_counter() - t0, status))
        left = until - time.time()
        if left <= 0:
            break
        time.sleep(min(pause_s, left))
    out.send(records)
    out.close()


def echo_probe(port):
    """Starts `proctor probe jupyter` holding a key for the window (but its last 5 s)."""
    hold = max(DURATION - 5, 1)
    # A keystroke may wait seconds for its echo: 60 s before one counts as lost, not 10.
    argv = [PROCTOR_BIN, "probe", "jupyter", f"http://127.0.0.1:{port}", "--token", TOKEN,
            "--hold", f"{hold:g}s", "--timeout", "60s", "--format", "json"]
    print("   echo: " + " ".join(map(shell_word, argv)))
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def echo_result(probe):
    """The probe's report: {p50, p99, max (s), n, ok}, or None when it failed."""
    try:
        out, err = probe.communicate(timeout=DURATION + 180)
    except subprocess.TimeoutExpired:
        probe.kill()
        out, err = probe.communicate()
    if probe.returncode != 0:
        print(f"   echo probe failed ({probe.returncode}): {err.strip()[-500:]}")
        return None
    report = json.loads(out)
    p = {q["label"]: q["value_ns"] / 1e9 for q in report["latency"]["percentiles"]}
    row = {"n": report["requests"], "ok": report["ok"], "p50": p["p50"], "p99": p["p99"], "max": p["max"]}
    print(f"  {'keystroke echo (proctor probe jupyter)':44s} n={row['n']:5d}  p50 {ms(row['p50'])} ms  "
          f"p99 {ms(row['p99'])} ms  max {ms(row['max'])} ms  echoed {row['ok']} of {row['n']}")
    return row


def run_window(port, with_measure):
    """Runs the tabs, the /api/status poller and (window 2) the measuring client at once."""
    probe = echo_probe(port) if ECHO and not with_measure else None
    until = time.time() + DURATION
    specs = [(f"tab {i + 1}", "/api/metrics/v1", TAB_INTERVAL, i * TAB_INTERVAL / TABS) for i in range(TABS)]
    specs.append(("status", "/api/status", STATUS_MS / 1e3, 0.0))
    if with_measure:
        specs.append(("measure", "/api/metrics/v1", MEASURE_PAUSE_MS / 1e3, 0.0))
    ctx = multiprocessing.get_context("fork")
    running = []
    for name, path, pause, delay in specs:
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=poller, args=(port, path, pause, delay, until, send), daemon=True)
        p.start()
        running.append((name, p, recv))
    results = {}
    for name, p, recv in running:
        results[name] = recv.recv()
        p.join(timeout=30)
        if p.is_alive():  # never expected: the loop ends at `until` plus one answer
            os.kill(p.pid, signal.SIGKILL)
            p.join()
    if probe is not None:
        results["echo"] = echo_result(probe)
    return results


def pct(values, q):
    """Nearest-rank percentile of sorted values."""
    if not values:
        return None
    return values[max(0, math.ceil(q / 100 * len(values)) - 1)]


def ms(v):
    return "     n/a" if v is None else f"{v * 1e3:9.2f}"


def summarize(label, records):
    lat = sorted(r[1] for r in records if r[2] == 200)
    bad = [r[2] for r in records if r[2] != 200]
    row = {"n": len(lat), "bad": len(bad), "p50": pct(lat, 50), "p90": pct(lat, 90), "p99": pct(lat, 99),
           "p999": pct(lat, 99.9), "max": lat[-1] if lat else None}
    print(f"  {label:44s} n={row['n']:5d}  p50 {ms(row['p50'])} ms  p90 {ms(row['p90'])} ms  "
          f"p99 {ms(row['p99'])} ms  p99.9 {ms(row['p999'])} ms  max {ms(row['max'])} ms"
          + (f"  NOT 200: {len(bad)} ({sorted(set(map(str, bad)))})" if bad else ""))
    return row


def request_times(port):
    """jupyter-server's own http_request_duration_seconds histogram (its /metrics; tornado's
    request_time: from the parsed request to the finished answer, so no client or socket time),
    successful GETs per handler class: {name: {"le": {bound: count}, "sum": s, "count": n}}."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", "/metrics", headers=AUTH)
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    out = {}
    for line in text.splitlines():
        m = re.match(r'http_request_duration_seconds_(bucket|sum|count)\{([^}]*)\} (\S+)$', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if labels.get("method") != "GET" or labels.get("status_code") != "200":
            continue
        h = out.setdefault(labels["handler"].rsplit(".", 1)[-1], {"le": {}, "sum": 0.0, "count": 0.0})
        if m.group(1) == "bucket":
            h["le"][float(labels["le"])] = float(m.group(3))
        else:
            h[m.group(1)] = float(m.group(3))
    return out


def show_request_times(before, after, handlers):
    """Prints, per handler, the window's requests as jupyter-server timed them."""
    rows = {}
    for name in handlers:
        a, b = before.get(name, {"le": {}, "sum": 0.0, "count": 0.0}), after.get(name)
        if not b or b["count"] - a["count"] <= 0:
            continue
        n = b["count"] - a["count"]
        within = {le: (b["le"].get(le, 0) - a["le"].get(le, 0)) / n for le in (0.005, 0.01, 0.025)}
        rows[name] = {"n": n, "mean": (b["sum"] - a["sum"]) / n, "within5": within[0.005]}
        print(f"  {'server-side, ' + name:44s} n={n:5.0f}  mean {ms(rows[name]['mean'])} ms  "
              + "  ".join(f"<= {le * 1e3:g} ms: {100 * v:5.1f} %" for le, v in within.items()))
    return rows


def thread_cpu(pid):
    """utime+stime in seconds per thread name of `pid` (threads that ended are in the total only)."""
    ticks = os.sysconf("SC_CLK_TCK")
    by_name = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
            name = head.split("(", 1)[1]
            fields = rest.split()
            by_name[name] = by_name.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue  # a thread that ended between listdir and open
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks, by_name


def psutil_pss(pid):
    """What jupyter-resource-usage sums: memory_full_info().pss over the server and descendants."""
    root = psutil.Process(pid)
    total = 0
    members = 0
    for p in [root] + root.children(recursive=True):
        try:
            total += p.memory_full_info().pss
            members += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total, members


def jupyter_argv(ext, port, workdir):
    argv = [PY, "-m", "jupyter_server", "--no-browser", "--allow-root",
            f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={workdir}"]
    if ext == "jru":
        # proctor.jupyter is listed as off only when it is installed (an unknown name warns).
        exts = {"jupyter_resource_usage": True}
        if proctor_installed():
            exts["proctor.jupyter"] = False
        cls = "ResourceUseDisplay"
    else:
        exts = {"proctor.jupyter": True, "jupyter_resource_usage": False}
        cls = "ProctorResourceUse"
    # traitlets reads a Dict trait given on the command line as a Python literal (True, not
    # true); it is merged into the extensions the config files enable.
    argv.append("--ServerApp.jpserver_extensions=" + repr(exts))
    if TRACK_CPU:
        argv += [f"--{cls}.track_cpu_percent=True", f"--{cls}.track_disk_usage=True", f"--{cls}.disk_path=/"]
    return argv


def proctor_installed():
    return subprocess.run([PY, "-c", "import proctor.jupyter"], capture_output=True).returncode == 0


def loaded_extensions(log_path):
    """The server extensions that jupyter-server says it loaded (its own log lines)."""
    with open(log_path, errors="replace") as f:
        return sorted({line.split("|")[0].split("]")[-1].strip() for line in f
                       if "extension was successfully loaded" in line})


def wait_pss_settled(port):
    """proctor rations smaps_rollup reads (pss_budget), so its PSS total fills in over time:
    waits until three answers 2 s apart agree within 0.1 % (or PSS_WAIT runs out)."""
    t0 = time.monotonic()
    seen = []
    while time.monotonic() - t0 < PSS_WAIT:
        pss = get_json(port, "/api/metrics/v1").get("pss")
        if pss:
            seen.append(pss)
            if len(seen) >= 3 and max(seen[-3:]) - min(seen[-3:]) <= 0.001 * max(seen[-3:]):
                return time.monotonic() - t0, True
        time.sleep(2)
    return time.monotonic() - t0, False


def run_extension(ext):
    name = {"jru": "jupyter-resource-usage 1.3.0", "proctor": "proctor.jupyter"}[ext]
    print(f"\n== {name}: {CHILDREN} children sharing {SHARED_MIB} MiB (4 KiB pages) under the Jupyter server")
    print(f"   load before: {load()}")
    workdir = tempfile.mkdtemp(prefix=f"jupyter-bench-{ext}-")
    port = free_port()
    argv = jupyter_argv(ext, port, workdir)
    log_path = os.path.join(workdir, "jupyter.log")
    cmd = tree_then_jupyter(PY, SHARED_MIB << 20, CHILDREN, argv)
    t_start = time.monotonic()
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))
    started.append(server)
    print(f"   server: python -c \"$(bench/lib/jupyter_tree.py's TREE_THEN_JUPYTER)\" {SHARED_MIB << 20} {CHILDREN} "
          + " ".join(map(shell_word, argv)))
    try:
        wait_json(port, "/api/status", 300, server)
    except SystemExit:
        with open(log_path, errors="replace") as f:
            print("".join(f.readlines()[-15:]))
        raise
    print(f"   up after {time.monotonic() - t_start:.1f} s (tree built, server listening); pid {server.pid}, "
          f"{len(psutil.Process(server.pid).children(recursive=True))} descendants")
    t0 = time.perf_counter()
    first = wait_json(port, "/api/metrics/v1", 300, server)
    print(f"   first /api/metrics/v1: {time.perf_counter() - t0:.3f} s; keys {list(first)}")
    exts = loaded_extensions(log_path)
    print(f"   server extensions loaded (jupyter-server's log): {', '.join(exts)}")
    want, other = ("jupyter_resource_usage", "proctor.jupyter") if ext == "jru" else ("proctor.jupyter", "jupyter_resource_usage")
    if want not in exts or other in exts:
        raise SystemExit(f"   wrong extensions for this run: want {want} and not {other}; see {log_path}")
    if ext == "proctor":
        time.sleep(3)  # a few samples in, as a user opening a tab would find it

    cpu0, threads0 = thread_cpu(server.pid)
    w0 = time.monotonic()
    rows = {}
    print(f"-- window 1, {DURATION:.0f} s: {TABS} tabs each GET /api/metrics/v1 then wait {TAB_INTERVAL:g} s "
          f"(started {TAB_INTERVAL / TABS:g} s apart); GET /api/status {STATUS_MS:g} ms after each answer")
    handlers = ("ApiHandler", "MetricsHandler", "APIStatusHandler")  # JRU's, proctor's, /api/status
    t_before = request_times(port)
    res = run_window(port, False)
    t_after = request_times(port)
    rows["tabs"] = summarize("/api/metrics/v1 (the tabs' requests)",
                             [r for k, v in res.items() if k.startswith("tab") for r in v])
    rows["status1"] = summarize("/api/status (its max is the worst stall)", res["status"])
    rows["echo"] = res.get("echo")
    rows["server1"] = show_request_times(t_before, t_after, handlers)
    print(f"   load: {load()}")
    if MEASURE_PAUSE_MS > 0:
        print(f"-- window 2, {DURATION:.0f} s: the same, plus one client that GETs /api/metrics/v1 "
              f"{MEASURE_PAUSE_MS:g} ms after each answer")
        t_before = request_times(port)
        res = run_window(port, True)
        t_after = request_times(port)
        everything = [r for k, v in res.items() if k != "status" for r in v]
        rows["all"] = summarize("/api/metrics/v1 (tabs + client)", everything)
        rows["status2"] = summarize("/api/status (its max is the worst stall)", res["status"])
        rows["server2"] = show_request_times(t_before, t_after, handlers)
        print(f"   load: {load()}")
    cpu1, threads1 = thread_cpu(server.pid)
    wall = time.monotonic() - w0
    spent = {n: threads1.get(n, 0.0) - threads0.get(n, 0.0) for n in threads1}
    top = sorted(((v, n) for n, v in spent.items() if v > 0), reverse=True)[:6]
    rows["cpu"] = (cpu1 - cpu0) / wall
    print(f"-- server process CPU over the windows: {cpu1 - cpu0:.2f} s in {wall:.0f} s = {100 * rows['cpu']:.2f} % of one core "
          f"(utime+stime, /proc/{server.pid}/stat); by thread name: "
          + ", ".join(f"{n} {v:.2f} s" for v, n in top))
    sampler = sum(v for n, v in spent.items() if n.startswith("proctor"))
    if ext == "proctor":
        rows["sampler_cpu"] = sampler / wall
        print(f"   proctor's threads (names starting 'proctor'): {sampler:.2f} s = {100 * sampler / wall:.2f} % of one core")
        cost = {k: v for k, v in get_json(port, "/api/metrics/v1").items() if k not in ("rss", "pss", "limits")}
        print(f"   the answer's other fields now: {json.dumps(cost)}")

    print("-- PSS: the extension's answer vs psutil memory_full_info().pss summed over the same tree")
    if ext == "proctor":
        waited, settled = wait_pss_settled(port)
        print(f"   proctor's PSS {'settled' if settled else 'still moving'} after {waited:.0f} s more "
              "(three answers 2 s apart within 0.1 %)")
    before = get_json(port, "/api/metrics/v1").get("pss")
    t0 = time.perf_counter()
    ref, members = psutil_pss(server.pid)
    took = time.perf_counter() - t0
    after = get_json(port, "/api/metrics/v1").get("pss")
    print(f"   psutil: {ref / 2**20:.1f} MiB over {members} processes (the sum took {took:.2f} s)")
    if before is None or after is None:
        print(f"   extension: no pss in its answer (before {before}, after {after})")
        rows["pss_err"] = None
    else:
        ours = (before + after) / 2
        rows["pss_err"] = (ours - ref) / ref
        print(f"   extension: {before / 2**20:.1f} MiB before, {after / 2**20:.1f} MiB after the psutil sum; "
              f"mean vs psutil {100 * rows['pss_err']:+.2f} %")
    print(f"   load after: {load()}")
    stop(server)
    shutil.rmtree(workdir, ignore_errors=True)  # kept when the run fails: it holds the server's log
    return rows


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if p in started:
        started.remove(p)


def fmt(v, scale=1e3, unit="ms"):
    return "n/a" if v is None else f"{v * scale:.2f} {unit}"


def server(r, key):
    """The metrics handler's figure from jupyter-server's own timing of window 2."""
    for name in ("ApiHandler", "MetricsHandler"):
        row = r.get("server2", {}).get(name)
        if row:
            return fmt(row["mean"]) if key == "mean" else f"{100 * row['within5']:.1f} %"
    return "n/a"


def main():
    print("jupyter-resource-usage 1.3.0 vs proctor.jupyter (bench/jupyter/run.sh)")
    print(f"knobs: EXTENSIONS='{' '.join(EXTENSIONS)}' CHILDREN={CHILDREN} SHARED_MIB={SHARED_MIB} TABS={TABS} "
          f"TAB_INTERVAL={TAB_INTERVAL:g} DURATION={DURATION:g} STATUS_MS={STATUS_MS:g} "
          f"MEASURE_PAUSE_MS={MEASURE_PAUSE_MS:g} TRACK_CPU={TRACK_CPU} PSS_WAIT={PSS_WAIT:g}")
    print(f"machine: {load()}; kernel {os.uname().release}")
    out = {}
    for ext in EXTENSIONS:
        if ext == "proctor" and not proctor_installed():
            print("\n== proctor.jupyter: NOT MEASURED (`import proctor.jupyter` fails in .venv; "
                  "run.sh's `pip install .` did not provide it)")
            continue
        out[ext] = run_extension(ext)
    print("\n== side by side (same run; goals: p99 < 5 ms, no /api/status stall, PSS within 5 % of psutil)")
    print(f"{'':32s}" + "".join(f"{e:>22s}" for e in out))
    lines = [("metrics p50, tabs only", lambda r: fmt(r["tabs"]["p50"])),
             ("metrics p99, tabs only", lambda r: fmt(r["tabs"]["p99"])),
             ("metrics p50, tabs + client", lambda r: fmt(r.get("all", {}).get("p50"))),
             ("metrics p99, tabs + client", lambda r: fmt(r.get("all", {}).get("p99"))),
             ("metrics requests, tabs + client", lambda r: str(r.get("all", {}).get("n", "n/a"))),
             ("server-side mean, window 2", lambda r: server(r, "mean")),
             ("server-side <= 5 ms, window 2", lambda r: server(r, "within5")),
             ("/api/status worst, window 1", lambda r: fmt(r["status1"]["max"])),
             ("keystroke echo p50, window 1", lambda r: fmt((r.get("echo") or {}).get("p50"))),
             ("keystroke echo p99, window 1", lambda r: fmt((r.get("echo") or {}).get("p99"))),
             ("keystroke echo max, window 1", lambda r: fmt((r.get("echo") or {}).get("max"))),
             ("/api/status worst, window 2", lambda r: fmt(r.get("status2", {}).get("max"))),
             ("PSS vs psutil", lambda r: "n/a" if r.get("pss_err") is None else f"{100 * r['pss_err']:+.2f} %"),
             ("server CPU, % of one core", lambda r: f"{100 * r['cpu']:.2f} %"),
             ("proctor threads' CPU", lambda r: f"{100 * r['sampler_cpu']:.2f} %" if "sampler_cpu" in r else "-")]
    for label, f in lines:
        print(f"{label:32s}" + "".join(f"{f(r):>22s}" for r in out.values()))


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in list(started):
            stop(p)
