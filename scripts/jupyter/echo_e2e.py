#!/usr/bin/env python3
"""Issue 21's headline, small: the Netflix method (`proctor probe jupyter`, a key held in a
Jupyter terminal, every keystroke timed to its echo) on the motivating tree, scaled down
(CHILDREN children sharing SHARED_MIB MiB in 4 KiB pages under the Jupyter server, as
bench/jupyter builds it), once with jupyter-resource-usage 1.3.0 serving /api/metrics/v1 and
once with proctor.jupyter, while one "tab" polls /api/metrics/v1 every POLL_S seconds.

jupyter-resource-usage reads smaps_rollup for every process of the tree on tornado's event
loop, so while it answers the terminal's echoes wait; proctor.jupyter answers from a snapshot.
What the test asserts are properties, never a time: in both runs every keystroke came back,
the terminal was deleted and /api/metrics/v1 answered jupyter-resource-usage's body; and
strace, attached to the server's main thread (the event loop) for the whole hold, saw that
thread open `smaps_rollup`/`smaps` of the tree with jupyter-resource-usage (the control: the
check sees the stall's cause) and never with proctor.jupyter. The echo latencies are printed;
their ratio, a timing, is measured by bench/jupyter (`bash bench/jupyter/run.sh`).

Usage: echo_e2e.py PYTHON PROCTOR. Every process it starts is stopped by its pid.
"""

import collections
import http.client
import json
import os
import re
import shutil
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
ECHO_WAIT_S = 120
STRACE = shutil.which("strace")
# Reads that take the target's mmap lock, by the file's name under /proc/PID/.
LOCK_READ = re.compile(r'openat\([^,]*, "/proc/(\d+)/(smaps_rollup|smaps|cmdline|environ|maps|numa_maps)"')
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


def poll_metrics(port, stop, times, bodies):
    """One tab: GET /api/metrics/v1 on a keep-alive connection, then wait POLL_S, again."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            conn.request("GET", "/api/metrics/v1", headers=AUTH)
            r = conn.getresponse()
            body = r.read()
            times.append(time.perf_counter() - t0)
            if r.status == 200:
                bodies.append(body)
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
        # The event loop's reads, from here to the end of the hold: strace on the server's main
        # thread alone (-p without -f), every openat.
        trace = os.path.join(workdir, "loop.strace")
        tracer = attach_strace(server.pid, trace)
        stop, polls, bodies = threading.Event(), [], []
        tab = threading.Thread(target=poll_metrics, args=(port, stop, polls, bodies), daemon=True)
        tab.start()
        # Each echo is waited for up to ECHO_WAIT_S, not the probe's default 10 s: beside two
        # busy loops and the suite, jupyter-resource-usage's loop (1.7 s a poll) held echoes
        # past 10 s (p50 8.0 s, 37 of 240 given up on), and "every keystroke came back" is a
        # property, not a time.
        probe = subprocess.run([PROCTOR, "probe", "jupyter", f"http://127.0.0.1:{port}", "--token", TOKEN,
                                "--hold", f"{HOLD_S}s", "--timeout", f"{ECHO_WAIT_S:g}s", "--format", "json"],
                               capture_output=True, text=True, timeout=HOLD_S + ECHO_WAIT_S + 120)
        stop.set()
        tab.join(timeout=150)
        lock_reads = detach_strace(tracer, trace)
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
        if not bodies:
            fail(f"{ext}: /api/metrics/v1 never answered 200 while the key was held")
        body = json.loads(bodies[-1])
        if not (isinstance(body.get("rss"), int) and body["rss"] > 0 and "limits" in body):
            fail(f"{ext}: /api/metrics/v1 is not jupyter-resource-usage's body: {bodies[-1][:300]!r}")
        if lock_reads is not None:
            shown = ", ".join(f"{name} {n}" for name, n in sorted(lock_reads.items())) or "none"
            print(f"{ext:8s} the event loop's reads of other processes' mmap-locked files while the key was held: {shown}")
        if ext == "proctor":
            interrupted(port)
        return p, lock_reads
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        log.close()
        if sys.exc_info()[0] is not None:
            with open(os.path.join(workdir, "jupyter.log"), errors="replace") as f:
                print(f"{ext}: the server's log, its end:\n{f.read()[-3000:]}")
        shutil.rmtree(workdir, ignore_errors=True)


def attach_strace(pid, path):
    """strace attached to `pid`'s main thread, writing every openat to `path`; None without strace."""
    if not STRACE:
        return None
    tracer = subprocess.Popen([STRACE, "-qq", "-e", "trace=openat", "-e", "signal=none", "-o", path, "-p", str(pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # strace writes nothing until a call; it is attached once the thread shows a tracer.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if tracer.poll() is not None:
            fail(f"strace -p {pid} could not attach: {tracer.stderr.read()[-500:]}")
        with open(f"/proc/{pid}/status") as f:
            if any(line.startswith("TracerPid:") and line.split()[1] != "0" for line in f):
                return tracer
        time.sleep(0.05)
    fail(f"strace -p {pid} did not attach within 30 s")


def detach_strace(tracer, path):
    """Detaches (SIGINT) and counts the mmap-locked reads of other processes' files by name."""
    if tracer is None:
        return None
    tracer.send_signal(signal.SIGINT)
    tracer.wait(timeout=30)
    reads = collections.Counter()
    me = str(tracer.args[-1])
    with open(path, errors="replace") as f:
        for line in f:
            m = LOCK_READ.search(line)
            if m and m.group(1) != me:
                reads[m.group(2)] += 1
    return reads


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
    if not STRACE:
        print("SKIP: strace is not installed: whether the event loop reads smaps is NOT checked")
    jru, jru_reads = run("jru")
    ours, our_reads = run("proctor")
    print(f"p99 echo latency: {jru['p99']:.2f} ms with jupyter-resource-usage, {ours['p99']:.2f} ms with "
          f"proctor.jupyter (not asserted: a timing; bench/jupyter measures it)")
    if jru_reads is not None:
        smaps = lambda reads: reads["smaps_rollup"] + reads["smaps"]
        if smaps(jru_reads) == 0:
            fail("control: strace saw jupyter-resource-usage's event loop read no smaps of the tree, "
                 "so this check cannot see the stall's cause")
        if smaps(our_reads) != 0:
            fail(f"proctor.jupyter's event loop read smaps of other processes: {dict(our_reads)}")
    print("jupyter echo: 1 passed, 0 failed")


if __name__ == "__main__":
    main()
