"""proctor's /api/metrics/v1 against the real jupyter-resource-usage 1.3.0, side by side.

Starts a Jupyter server with jupyter-resource-usage (CPU and disk tracking on, memory and CPU
limits set, so every key of its answer is present), starts `proctor serve --jupyter-pid` on
that server's pid, and checks that both answers have the same keys, in the same order, with
the same JSON types, and that the shared figures agree. Prints 'N passed, N failed'.

Usage: python jupyter_shape.py PROCTOR_BINARY
"""

import json
import os
import shutil
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


STEADY_S = 3


def tree(root):
    """{pid: (ppid, comm)} of root and its descendants, from /proc."""
    parent = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        parent[int(entry)] = (ppid, comm)
    members = {root: parent.get(root, (0, "?"))} if root in parent else {}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, comm) in parent.items():
            if ppid in members and pid not in members:
                members[pid] = (ppid, comm)
                grew = True
    return members


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
        # The server starts with a child of its own, as a kernel would be, so both sides sum a
        # real tree: the shell starts `sleep`, then execs the server in its own pid.
        server = [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
                  f"--ServerApp.port={jport}", "--ServerApp.ip=127.0.0.1",
                  f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={workdir}",
                  # proctor's wheel enables proctor.jupyter where it is installed: this side is
                  # jupyter-resource-usage's alone.
                  "--ServerApp.jpserver_extensions="
                  "{'jupyter_resource_usage': True, 'proctor.jupyter': False}",
                  "--ResourceUseDisplay.track_cpu_percent=True",
                  "--ResourceUseDisplay.track_disk_usage=True",
                  "--ResourceUseDisplay.disk_path=/",
                  f"--ResourceUseDisplay.mem_limit={mem_limit}",
                  "--ResourceUseDisplay.cpu_limit=2.0"]
        jupyter = subprocess.Popen(
            ["sh", "-c", 'sleep 120 & exec "$@"', "sh"] + server,
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "jupyter.log"), "w"))
        started.append(jupyter)
        jurl = f"http://127.0.0.1:{jport}/api/metrics/v1"
        auth = {"Authorization": f"token {TOKEN}"}
        wait_for(lambda: get(jurl, auth), "jupyter-resource-usage")
        sleeper = wait_for(lambda: next((p for p, (_, comm) in tree(jupyter.pid).items()
                                         if comm == "sleep"), None), "the server's child")
        started.insert(0, sleeper)

        proctor = subprocess.Popen(
            [PROCTOR, "serve", "--no-record", "--listen", "127.0.0.1:0", "--interval", "200ms",
             "--jupyter-pid", str(jupyter.pid), "--pss-budget", "0.5", "--disk-path", "/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started.append(proctor)
        line = proctor.stderr.readline()
        addr = line.split("http://")[1].split("/")[0]
        purl = f"http://{addr}/api/metrics/v1"
        # PSS is rationed; wait until every member of the tree has a reading.
        wait_for(lambda: (lambda j: j if "pss" in j else None)(get(purl)), "proctor's pss", 60)

        # Both sides sum whatever the tree holds when they read it, and the server starts short
        # lived children of its own now and then (extensions probing for tools): a reading is
        # compared only when the tree held the same processes for STEADY_S before the two
        # answers and still does after them (proctor's answer comes from a sample up to one
        # interval old, its PSS from a rationed read older still).
        def steady_pair():
            before = tree(jupyter.pid)
            t0 = time.time()
            while time.time() - t0 < STEADY_S:
                if tree(jupyter.pid) != before:
                    return None
                time.sleep(0.1)
            theirs_now = get(jurl, auth)
            ours_now = get(purl)
            if "pss" not in ours_now or tree(jupyter.pid) != before:
                return None
            return theirs_now, ours_now, before

        theirs, ours, members = wait_for(steady_pair, f"a tree steady for {STEADY_S} s", 90)
        print("tree:  ", " ".join(f"{p}:{comm}" for p, (_, comm) in sorted(members.items())))
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
            if isinstance(p, int):  # the server's sleeping child, by its pid
                try:
                    os.kill(p, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                continue
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        log = os.path.join(workdir, "jupyter.log")
        if (sys.exc_info()[0] is not None or False in results) and os.path.exists(log):
            with open(log, errors="replace") as f:
                print(f"jupyter-server's log, its end:\n{f.read()[-3000:]}")
        shutil.rmtree(workdir, ignore_errors=True)
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
