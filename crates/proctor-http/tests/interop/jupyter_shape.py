"""proctor's /api/metrics/v1 against the real jupyter-resource-usage 1.3.0, side by side.

Starts a Jupyter server with jupyter-resource-usage (CPU and disk tracking on, memory and CPU
limits set, so every key of its answer is present), starts `proctor serve --jupyter-pid` on
that server's pid, and checks that both answers have the same keys, in the same order, with
the same JSON types, and that the shared figures agree. Prints 'N passed, N failed'.

Usage: python jupyter_shape.py PROCTOR_BINARY
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

PROCTOR = sys.argv[1]
TOKEN = "shape-test"
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, headers=None, timeout=5):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode(), object_pairs_hook=lambda pairs: dict(pairs))


def wait_for(fn, what, seconds=60):
    deadline = time.time() + seconds
    last = None
    while time.time() < deadline:
        try:
            value = fn()
            if value is not None:
                return value
        except Exception as e:  # not up yet
            last = e
        time.sleep(0.3)
    raise SystemExit(f"timed out waiting for {what}: {last}")


def shape(value):
    """Keys (in order) and JSON types, recursively; ints and floats kept apart as Python does."""
    if isinstance(value, dict):
        return [(k, shape(v)) for k, v in value.items()]
    return type(value).__name__


def main():
    started = []
    workdir = tempfile.mkdtemp(prefix="jru-shape-")
    try:
        jport = free_port()
        mem_limit = 8 << 30
        jupyter = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
             f"--ServerApp.port={jport}", "--ServerApp.ip=127.0.0.1",
             f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={workdir}",
             "--ResourceUseDisplay.track_cpu_percent=True",
             "--ResourceUseDisplay.track_disk_usage=True",
             "--ResourceUseDisplay.disk_path=/",
             f"--ResourceUseDisplay.mem_limit={mem_limit}",
             "--ResourceUseDisplay.cpu_limit=2.0"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "jupyter.log"), "w"))
        started.append(jupyter)
        # A child of the server, as a kernel would be, so both sides sum a real tree.
        child = subprocess.Popen(["sleep", "120"])
        started.append(child)
        jurl = f"http://127.0.0.1:{jport}/api/metrics/v1"
        auth = {"Authorization": f"token {TOKEN}"}
        theirs = wait_for(lambda: get(jurl, auth), "jupyter-resource-usage")
        theirs = get(jurl, auth)  # a second call has a real cpu_percent

        proctor = subprocess.Popen(
            [PROCTOR, "serve", "--no-record", "--listen", "127.0.0.1:0", "--interval", "200ms",
             "--jupyter-pid", str(jupyter.pid), "--pss-budget", "0.5", "--disk-path", "/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started.append(proctor)
        line = proctor.stderr.readline()
        addr = line.split("http://")[1].split("/")[0]
        purl = f"http://{addr}/api/metrics/v1"
        # PSS is rationed; wait until every member of the tree has a reading.
        ours = wait_for(lambda: (lambda j: j if "pss" in j else None)(get(purl)), "proctor's pss", 60)
        theirs = get(jurl, auth)

        print("theirs:", json.dumps(theirs))
        print("ours:  ", json.dumps(ours))
        check("same keys, order and JSON types", shape(theirs) == shape(ours),
              f"\n  theirs {shape(theirs)}\n  ours   {shape(ours)}")
        check("rss agrees within 25 %", abs(ours["rss"] - theirs["rss"]) <= 0.25 * theirs["rss"],
              f"{ours['rss']} vs {theirs['rss']}")
        check("pss agrees within 25 %", abs(ours["pss"] - theirs["pss"]) <= 0.25 * theirs["pss"],
              f"{ours['pss']} vs {theirs['pss']}")
        check("disk_total is the same filesystem", ours["disk_total"] == theirs["disk_total"],
              f"{ours['disk_total']} vs {theirs['disk_total']}")
        check("disk_used within 1 GiB", abs(ours["disk_used"] - theirs["disk_used"]) < (1 << 30),
              f"{ours['disk_used']} vs {theirs['disk_used']}")
        nproc = len(os.sched_getaffinity(0))
        check("cpu_count is the effective CPU count", ours["cpu_count"] == nproc,
              f"{ours['cpu_count']} vs affinity {nproc}")
        check("memory warn is a bool", isinstance(ours["limits"]["memory"]["warn"], bool))
    finally:
        for p in reversed(started):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
