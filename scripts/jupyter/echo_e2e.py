#!/usr/bin/env python3
"""Issue 21's headline, small: the Netflix method (`proctor probe jupyter`, a key held in a
Jupyter terminal, every keystroke timed to its echo) on the motivating tree, scaled down
(CHILDREN children sharing SHARED_MIB MiB in 4 KiB pages under the Jupyter server, as
bench/jupyter builds it), once with jupyter-resource-usage 1.3.0 serving /api/metrics/v1 and
once with proctor.jupyter, while one "tab" polls /api/metrics/v1 every POLL_S seconds.

jupyter-resource-usage reads smaps_rollup for every process of the tree on tornado's event
loop, so while it answers the terminal's echoes wait; proctor.jupyter answers from a snapshot.
The test asserts the ratio of the two runs' p99 echo latency (at least RATIO), never an
absolute time, and that every keystroke came back in both runs.

Usage: echo_e2e.py PYTHON PROCTOR. Every process it starts is stopped by its pid.
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "lib"))
from jupyter_tree import tree_then_jupyter  # noqa: E402

PY, PROCTOR = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
CHILDREN = int(os.environ.get("CHILDREN", 32))
SHARED_MIB = int(os.environ.get("SHARED_MIB", 384))
POLL_S = float(os.environ.get("POLL_S", 0.5))
HOLD_S = float(os.environ.get("HOLD_S", 8))
RATIO = float(os.environ.get("RATIO", 5))
TOKEN = "echo-e2e"
AUTH = {"Authorization": f"token {TOKEN}"}


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=AUTH)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def wait_up(port, server, seconds=180):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            fail(f"the Jupyter server exited ({server.returncode}) before answering")
        try:
            if get(port, "/api/metrics/v1", 120)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    fail("the Jupyter server never answered /api/metrics/v1")


def poll_metrics(port, stop, times):
    """One tab: GET /api/metrics/v1 on a keep-alive connection, then wait POLL_S, again."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            conn.request("GET", "/api/metrics/v1", headers=AUTH)
            conn.getresponse().read()
            times.append(time.perf_counter() - t0)
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        stop.wait(POLL_S)
    conn.close()


def run(ext):
    workdir = tempfile.mkdtemp(prefix=f"echo-e2e-{ext}-")
    port = free_port()
    exts = {"jupyter_resource_usage": True, "proctor.jupyter": False} if ext == "jru" else \
        {"jupyter_resource_usage": False, "proctor.jupyter": True}
    argv = [PY, "-m", "jupyter_server", "--no-browser", "--allow-root", f"--ServerApp.port={port}",
            "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={workdir}",
            "--ServerApp.jpserver_extensions=" + repr(exts)]
    log = open(os.path.join(workdir, "jupyter.log"), "w")
    server = subprocess.Popen(tree_then_jupyter(PY, SHARED_MIB << 20, CHILDREN, argv),
                              stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_up(port, server)
        if ext == "proctor":
            time.sleep(3)  # a few samples in, as a user opening a tab would find it
        stop, polls = threading.Event(), []
        tab = threading.Thread(target=poll_metrics, args=(port, stop, polls), daemon=True)
        tab.start()
        probe = subprocess.run([PROCTOR, "probe", "jupyter", f"http://127.0.0.1:{port}", "--token", TOKEN,
                                "--hold", f"{HOLD_S}s", "--format", "json"],
                               capture_output=True, text=True, timeout=HOLD_S + 120)
        stop.set()
        tab.join(timeout=150)
        if probe.returncode != 0:
            fail(f"{ext}: proctor probe jupyter exited {probe.returncode}: {probe.stderr[-2000:]}")
        if "deleted terminal" not in probe.stderr:
            fail(f"{ext}: the terminal was not deleted: {probe.stderr[-2000:]}")
        status, body = get(port, "/api/terminals")
        if status != 200 or json.loads(body) != []:
            fail(f"{ext}: terminals left on the server after the probe: {status} {body[:200]!r}")
        report = json.loads(probe.stdout)
        p = {q["label"]: q["value_ns"] / 1e6 for q in report["latency"]["percentiles"]}
        polls.sort()
        poll_p50 = polls[len(polls) // 2] * 1e3 if polls else float("nan")
        print(f"{ext:8s} keystroke echo: {report['requests']} keys, {report['ok']} echoed; p50 {p['p50']:.2f} ms, "
              f"p99 {p['p99']:.2f} ms, max {p['max']:.2f} ms; /api/metrics/v1 p50 {poll_p50:.1f} ms over "
              f"{len(polls)} polls")
        if report["ok"] != report["requests"] or report["requests"] < HOLD_S * 30 * 0.9:
            fail(f"{ext}: not every keystroke came back: {report['errors']} {report['error_examples']}")
        if ext == "proctor":
            interrupted(port)
        return p
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        log.close()


def interrupted(port):
    """Ctrl-C in the middle of a hold: the report of what was measured, exit 130, and the
    terminal deleted all the same."""
    probe = subprocess.Popen([PROCTOR, "probe", "jupyter", f"http://127.0.0.1:{port}", "--token", TOKEN,
                              "--hold", "60s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, body = get(port, "/api/terminals")
            if status == 200 and json.loads(body):
                break
            time.sleep(0.2)
        else:
            fail("the interrupted probe never created its terminal")
        time.sleep(2)
        probe.send_signal(signal.SIGINT)
        out, err = probe.communicate(timeout=30)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
    status, body = get(port, "/api/terminals")
    print(f"Ctrl-C after 2 s: exit {probe.returncode}; terminals left: {body.decode()}; "
          f"{out.splitlines()[1].strip() if len(out.splitlines()) > 1 else out!r}")
    if probe.returncode != 130 or "deleted terminal" not in err or json.loads(body) != []:
        fail(f"after Ctrl-C: exit {probe.returncode}, terminals {body[:200]!r}, stderr {err[-1500:]}")
    if " ok," not in out:
        fail(f"after Ctrl-C no report of the keys measured: {out[-1500:]}")


def main():
    print(f"{CHILDREN} children sharing {SHARED_MIB} MiB under the Jupyter server; one tab polls "
          f"/api/metrics/v1 every {POLL_S:g} s; `proctor probe jupyter --hold {HOLD_S:g}s` meanwhile")
    jru = run("jru")
    ours = run("proctor")
    ratio = jru["p99"] / max(ours["p99"], 1e-3)
    print(f"p99 echo latency with jupyter-resource-usage / with proctor.jupyter: {ratio:.1f}x (needs >= {RATIO:g}x)")
    if ratio < RATIO:
        fail("the stall jupyter-resource-usage causes does not show in the keystroke echo")
    print("jupyter echo: 1 passed, 0 failed")


if __name__ == "__main__":
    main()
