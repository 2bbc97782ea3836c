"""`proctor share` against a real gunicorn (--preload, 3 sync workers) whose app builds a
~200 MiB object before forking (share_app.py), on loopback.

1. Before any touch: the family's saving is within 10 % of workers x object size, and every
   member's PSS and USS agree with smem's (Debian's smem, same run) within 3 % or 1 MiB.
2. A watch while one request touches 50 MiB in one worker: that worker's private dirty grows by
   50 MiB +- 10 %, it is named as the top grower, and --maps puts the copy in its anonymous
   memory. The plot is written as a PNG of the expected size.
3. A watch while that worker is killed (gunicorn forks a new one): the worker is reported
   recycled, with the ~50 MiB it had copied.

usage: gunicorn_share.py PROCTOR GUNICORN [SMEM]   (SMEM empty: that cross-check is a SKIP)
Everything started here is ended here, by pid.
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

MIB = 1024 * 1024
OBJECT_MIB = 200
WORKERS = 3
HERE = os.path.dirname(os.path.abspath(__file__))


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return r.read().decode()


def share(proctor, master, *extra):
    out = subprocess.run(
        [proctor, "share", str(master), "--format", "json", *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0:
        fail(f"proctor share {' '.join(extra)} exited {out.returncode}: {out.stderr}")
    return json.loads(out.stdout)


def smem_table(smem, pids):
    out = subprocess.run([smem, "-c", "pid uss pss", "-H", "-P", "gunicorn"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        fail(f"smem exited {out.returncode}: {out.stderr}")
    rows = {}
    for line in out.stdout.splitlines():
        fields = line.split()
        if len(fields) == 3 and int(fields[0]) in pids:
            # smem prints KiB.
            rows[int(fields[0])] = (int(fields[1]) * 1024, int(fields[2]) * 1024)
    return rows


def near(a, b, fraction, floor):
    return abs(a - b) <= max(fraction * max(a, b), floor)


def main():
    proctor, gunicorn = sys.argv[1], sys.argv[2]
    smem = sys.argv[3] if len(sys.argv) > 3 else ""
    port = free_port()
    logs = tempfile.mkdtemp(prefix="share-gunicorn-")
    log = open(os.path.join(logs, "gunicorn.log"), "w")
    server = subprocess.Popen(
        [gunicorn, "--preload", "-w", str(WORKERS), "-k", "sync", "-b", f"127.0.0.1:{port}", "--chdir", HERE,
         "--timeout", "60", "share_app:app"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "SHARE_APP_MIB": str(OBJECT_MIB)},
    )
    master = server.pid
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if server.poll() is not None:
                fail(f"gunicorn exited {server.returncode}; see {log.name}")
            if len(children(master)) == WORKERS:
                try:
                    get(port, "/pid")
                    break
                except OSError:
                    pass
            time.sleep(0.2)
        else:
            fail(f"gunicorn did not start {WORKERS} workers in 90 s; see {log.name}")
        time.sleep(1.0)

        # 1. The saving, and smem's PSS and USS beside proctor's.
        doc = share(proctor, master)
        members = doc["members"]
        roles = sorted(m["role"] for m in members)
        if roles != ["master"] + ["worker"] * WORKERS:
            fail(f"members: {roles}")
        saving = doc["summary"]["saving_bytes"]
        expected = WORKERS * OBJECT_MIB * MIB
        print(f"-- saving {saving / MIB:.1f} MiB, expected {expected / MIB:.0f} MiB (workers x object)")
        print(f"-- {doc['cost']['reads']} reads, {doc['cost']['cpu_ms']:.1f} ms CPU, longest hold {doc['cost']['longest_held_ms']:.1f} ms")
        if abs(saving - expected) > 0.10 * expected:
            fail(f"saving {saving} is not within 10 % of {expected}")
        if smem:
            pids = {m["pid"] for m in members}
            theirs = smem_table(smem, pids)
            if set(theirs) != pids:
                fail(f"smem listed {sorted(theirs)}, proctor {sorted(pids)}")
            for m in members:
                c = m["counters"]
                uss = c["private_clean_bytes"] + c["private_dirty_bytes"]
                smem_uss, smem_pss = theirs[m["pid"]]
                print(f"-- pid {m['pid']}: PSS proctor {c['pss_bytes'] / MIB:.1f} smem {smem_pss / MIB:.1f} MiB; "
                      f"USS proctor {uss / MIB:.1f} smem {smem_uss / MIB:.1f} MiB")
                if not near(c["pss_bytes"], smem_pss, 0.03, MIB) or not near(uss, smem_uss, 0.03, MIB):
                    fail(f"pid {m['pid']} disagrees with smem")
        else:
            print("SKIP: smem cross-check: smem is not installed and apt-get could not install it")

        # 2. One worker copies 50 MiB while watched.
        plot = os.path.join(logs, "share.png")
        watch = subprocess.Popen(
            [proctor, "share", str(master), "--watch", "1s", "--count", "4", "--maps", "--plot", plot, "--format", "json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.5)
        touched = get(port, "/touch?offset_mib=20&mib=50")
        grower = int(touched.split()[0])
        print(f"-- {touched.strip()}")
        out, err = watch.communicate(timeout=120)
        if watch.returncode != 0:
            fail(f"share --watch exited {watch.returncode}: {err}")
        doc = json.loads(out)
        report = doc["watch"]
        growth = {g["pid"]: g for g in report["members"]}
        print(f"-- verdict: {report['verdict']}")
        if report["top_grower_pid"] != grower:
            fail(f"top grower {report['top_grower_pid']}, but {grower} touched the pages")
        grown = growth[grower]["growth_bytes"]
        print(f"-- pid {grower} private dirty grew {grown / MIB:.1f} MiB")
        if abs(grown - 50 * MIB) > 5 * MIB:
            fail(f"growth {grown} is not 50 MiB +- 10 %")
        for pid, g in growth.items():
            if pid != grower and abs(g["growth_bytes"]) > 5 * MIB:
                fail(f"pid {pid} grew {g['growth_bytes']} without being touched")
        maps = doc["maps"]
        if maps is None or maps["pid"] != grower:
            fail(f"--maps read {maps and maps['pid']}, not the grower {grower}")
        top = maps["areas"][0]
        print(f"-- the grower's most copied area: {top['name']} {top['counters']['private_dirty_bytes'] / MIB:.1f} MiB")
        if top["name"] != "[anonymous]" or top["counters"]["private_dirty_bytes"] < 45 * MIB:
            fail(f"the copy is not in the grower's anonymous memory: {top}")
        with open(plot, "rb") as f:
            head = f.read(24)
        if head[:8] != b"\x89PNG\r\n\x1a\n" or struct.unpack(">II", head[16:24])[0] != 900:
            fail("the plot is not a 900 px wide PNG")

        # 3. The grower is recycled: killed, gunicorn forks a new worker in its place.
        watch = subprocess.Popen(
            [proctor, "share", str(master), "--watch", "1s", "--count", "5", "--format", "json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.5)
        os.kill(grower, signal.SIGKILL)
        out, err = watch.communicate(timeout=120)
        if watch.returncode != 0:
            fail(f"share --watch exited {watch.returncode}: {err}")
        report = json.loads(out)["watch"]
        print(f"-- recycled: {report['recycled']}")
        recycled = [r for r in report["recycled"] if r["old_pid"] == grower]
        if not recycled:
            fail(f"pid {grower} was not reported recycled: {report}")
        if recycled[0]["old_private_dirty_bytes"] < 45 * MIB:
            fail(f"the recycled worker had copied {recycled[0]['old_private_dirty_bytes']}, not ~50 MiB")
        if f"pid {grower}) was recycled" not in report["verdict"]:
            fail(f"the verdict does not say so: {report['verdict']}")
        print("ok: gunicorn share end to end")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        if sys.exc_info()[0] is not None:
            with open(os.path.join(logs, "gunicorn.log"), errors="replace") as f:
                print(f"gunicorn's log, its end:\n{f.read()[-3000:]}")
        shutil.rmtree(logs, ignore_errors=True)


if __name__ == "__main__":
    main()
