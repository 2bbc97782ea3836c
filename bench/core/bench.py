"""Core benchmarks for proctor (issue #2). Run through bench/core/run.sh.

Every figure is printed next to the command that produced it. Comparisons run side by side in
one invocation and are repeated; medians are reported because this machine is shared.
Children are started here and killed by their pids here; nothing else is touched.
"""

import json
import mmap
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

# PROCTOR_BIN runs the same benchmarks on another build (e.g. the one before a change).
PROCTOR = os.path.abspath(os.environ.get("PROCTOR_BIN", "target/release/proctor"))
REPEATS = 3


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def count_pids():
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def child_cpu(cmd, **kw):
    """Runs cmd to completion; returns (user+sys CPU seconds of the child, wall seconds, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, **kw).stdout
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, out


def show(cmd):
    return " ".join(cmd)


def bench_scan(target=600):
    sleepers = []
    try:
        while count_pids() < target:
            sleepers.append(subprocess.Popen(["sleep", "900"], stdin=subprocess.DEVNULL))
        pids = count_pids()
        print(f"\n== all-process scan at {pids} processes (load {load()})")
        scans = 300
        pcmd = [PROCTOR, "bench", "-n", "200", "--scans", str(scans), "--format", "json"]
        iterations = 30
        tcmd = ["top", "-b", "-d", "0", "-n", str(iterations)]
        tcmd_short = ["top", "-b", "-d", "0", "-n", "5"]
        tcmd_one = ["top", "-b", "-n", "1"]
        have_top = shutil.which("top") is not None
        proctor_us, floor_us, ratio, top_us, top_whole_us, top_one_us = [], [], [], [], [], []
        for _ in range(REPEATS):
            _, _, out = child_cpu(pcmd)
            r = json.loads(out)
            proctor_us.append(r["per_process"]["cpu_us"])
            floor_us.append(r["per_process_floor"]["cpu_us"])
            ratio.append(r["per_process_ratio_cpu"])
            if have_top:
                # Three ways to charge top per process and iteration (see the printout):
                # marginal (30 − 5 iterations, no startup), whole command over 30 iterations,
                # and a one-shot `top -b -n 1`, which reads every pid twice (procps takes a
                # first pass to have CPU deltas) and pays its startup once.
                env = {**os.environ, "COLUMNS": "200"}
                long_cpu, _, _ = child_cpu(tcmd, env=env)
                short_cpu, _, _ = child_cpu(tcmd_short, env=env)
                one_cpu, _, _ = child_cpu(tcmd_one, env=env)
                n = count_pids()
                top_us.append((long_cpu - short_cpu) * 1e6 / ((iterations - 5) * n))
                top_whole_us.append(long_cpu * 1e6 / (iterations * n))
                top_one_us.append(one_cpu * 1e6 / n)
        p, f = statistics.median(proctor_us), statistics.median(floor_us)
        print(f"proctor per process   {p:6.2f} µs CPU  (median of {REPEATS}: {show(pcmd)})")
        print(f"floor per process     {f:6.2f} µs CPU  (same run: readdir + pread stat via kept fds)")
        print(f"proctor / floor       {statistics.median(ratio):6.2f}×  (goal ≤ 1.2×); runs: {', '.join(f'{x:.2f}' for x in ratio)}")
        if top_us:
            t = statistics.median(top_us)
            w = statistics.median(top_whole_us)
            o = statistics.median(top_one_us)
            print(f"top per process       {t:6.2f} µs CPU  marginal iteration (median of {REPEATS}: ({show(tcmd)}) − ({show(tcmd_short)}) child CPU / 25 iterations / pids)")
            print(f"top per process       {w:6.2f} µs CPU  whole command / {iterations} iterations / pids ({show(tcmd)}, startup included)")
            print(f"top per process       {o:6.2f} µs CPU  whole command / pids ({show(tcmd_one)}: one shown iteration, two passes over /proc, startup)")
            print(f"top / proctor         {t / p:6.2f}× marginal, {w / p:.2f}× whole -n {iterations}, {o / p:.2f}× one-shot  (goal ≥ 5×)")
            print(f"top / floor           {t / f:6.2f}× marginal, {w / f:.2f}× whole -n {iterations}, {o / f:.2f}× one-shot  (the most any stat reader can reach)")
        else:
            print("SKIP: top not installed")
    finally:
        for s in sleepers:
            s.kill()
        for s in sleepers:
            s.wait()


def bench_host(samples=8640):
    print(f"\n== host sample, {samples} samples at interval 0 (load {load()})")
    pcmd = [PROCTOR, "bench", "-n", str(samples), "--scans", "0", "--format", "json"]
    ncmd = [PROCTOR, "bench", "-n", str(samples), "--scans", "0", "--no-floor", "--host", "cpu", "--format", "json"]
    have_collectl = shutil.which("collectl") is not None
    thread_us, floor_us, ratio, whole_us, collectl_us = [], [], [], [], []
    for _ in range(REPEATS):
        _, _, out = child_cpu(pcmd)
        r = json.loads(out)
        thread_us.append(r["host_sample"]["cpu_us"])
        floor_us.append(r["host_floor"]["cpu_us"])
        ratio.append(r["host_ratio_cpu"])
        files = r["host_files"]
        cpu, _, out = child_cpu(ncmd)
        whole_us.append(cpu * 1e6 / samples)
        if have_collectl:
            with tempfile.TemporaryDirectory() as d:
                ccmd = ["collectl", "-sc", "-i0", "-c", str(samples), "-f", d]
                cpu, _, _ = child_cpu(ccmd)
                collectl_us.append(cpu * 1e6 / samples)
    print(f"proctor host sample   {statistics.median(thread_us):7.2f} µs CPU  (sampling thread; {files} files; median of {REPEATS}: {show(pcmd)})")
    print(f"floor host sample     {statistics.median(floor_us):7.2f} µs CPU  (same run: pread of the same files, no parsing)")
    print(f"proctor / floor       {statistics.median(ratio):7.2f}×  (goal ≤ 1.3×); runs: {', '.join(f'{x:.2f}' for x in ratio)}")
    w = statistics.median(whole_us)
    print(f"proctor --host cpu    {w:7.2f} µs CPU per sample  (whole process, startup included; /proc/stat + /proc/loadavg like collectl -sc: {show(ncmd)})")
    if collectl_us:
        c = statistics.median(collectl_us)
        print(f"collectl -sc          {c:7.2f} µs CPU per sample  (startup included: collectl -sc -i0 -c {samples} -f DIR)")
        print(f"collectl / proctor    {c / w:7.2f}×  (goal ≥ 10×; same files per sample)")
    else:
        print("SKIP: collectl not installed")


TREE_SCRIPT = r"""
import mmap, os, signal, sys, time
size = int(sys.argv[1]); n = int(sys.argv[2])
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(mmap.MADV_NOHUGEPAGE)  # 4 KiB pages, as in the motivating case
for i in range(0, size, 4096):
    m[i] = 1
kids = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        signal.pause()
        os._exit(0)
    kids.append(pid)
print("ready", flush=True)
signal.signal(signal.SIGTERM, lambda *a: ([os.kill(k, 9) for k in kids], os._exit(0)))
while True:
    signal.pause()
"""

PSUTIL_LOOP = r"""
import json, sys, time, psutil
root = psutil.Process(int(sys.argv[1]))
t = time.perf_counter()
procs = [root] + root.children(recursive=True)
pss = sum(p.memory_full_info().pss for p in procs)
print(json.dumps({"wall": time.perf_counter() - t, "pss": pss, "n": len(procs)}))
"""


def bench_tree(size=2 << 30, children=96):
    print(f"\n== tree: parent with {size >> 20} MiB resident in 4 KiB pages, {children} sleeping children (load {load()})")
    parent = subprocess.Popen([sys.executable, "-c", TREE_SCRIPT, str(size), str(children)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        pid = str(parent.pid)
        cheap = [PROCTOR, "tree", pid, "--interval", "0", "--format", "json"]
        full = [PROCTOR, "tree", pid, "--interval", "0", "--pss", "--format", "json"]
        loop = [sys.executable, "-c", PSUTIL_LOOP, pid]
        cheap_wall, full_wall, psutil_wall, agreement = [], [], [], []
        for _ in range(REPEATS):
            _, wall, out = child_cpu(cheap)
            cheap_wall.append(wall)
            _, wall, out = child_cpu(full)
            f = json.loads(out)
            full_wall.append(wall)
            _, _, out = child_cpu(loop)
            p = json.loads(out)
            psutil_wall.append(p["wall"])
            agreement.append(100.0 * (f["total"]["pss_bytes"] - p["pss"]) / p["pss"])
        c, fw, pw = statistics.median(cheap_wall), statistics.median(full_wall), statistics.median(psutil_wall)
        print(f"proctor tree (cheap)  {c * 1e3:8.1f} ms wall, whole command  ({show(cheap)})")
        print(f"proctor tree --pss    {fw * 1e3:8.1f} ms wall, whole command  ({show(full)})")
        print(f"psutil loop           {pw * 1e3:8.1f} ms wall, loop only  (memory_full_info() over parent + children)")
        print(f"psutil / proctor      {pw / c:8.1f}× (cheap fields), {pw / fw:.2f}× (--pss)")
        print(f"PSS proctor vs psutil {statistics.median(agreement):+8.2f} %  (goal within ±5 %); runs: {', '.join(f'{a:+.2f}' for a in agreement)}")
        print(f"tree total PSS        {f['total']['pss_bytes'] / 2**20:8.1f} MiB, RSS {f['total']['rss_bytes'] / 2**30:.1f} GiB over {f['total']['processes']} processes; psutil saw {p['n']}")
        print(f"smaps_rollup cost     {f['pss_read']['cpu_ms']:8.1f} ms CPU for {f['pss_read']['reads']} reads; slowest {f['pss_read']['slowest_ms']:.1f} ms")
    finally:
        parent.send_signal(signal.SIGTERM)
        parent.wait()


def main():
    which = sys.argv[1:] or ["scan", "host", "tree"]
    print(f"machine: {os.cpu_count()} CPUs, load {load()}, {time.strftime('%Y-%m-%d %H:%M:%S')}")
    for name in which:
        {"scan": bench_scan, "host": bench_host, "tree": bench_tree}[name]()


if __name__ == "__main__":
    main()
