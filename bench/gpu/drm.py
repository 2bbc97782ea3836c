#!/usr/bin/env python3
"""What per-process GPU from DRM fdinfo costs, on a synthetic /proc (issue 23).

A captured tree of N processes with F fds each (links to /dev/null and sockets), G of which
also hold a DRM fd with an amdgpu-shaped fdinfo, is sampled by `proctor snapshot --root TREE
--count C --interval 500ms --format json`, once with /dev/dri in the tree (the DRM worker
runs) and once without (it does not start). Reported from the agent's own figures in the last
line: the DRM worker's walks, fdinfo reads and CPU, and the sampling thread's CPU per cycle,
which must not grow with the worker (it does no GPU reads). Each pair is run RUNS times; medians.

Usage: bench/gpu/drm.py PROCTOR_BIN [N] [F] [G] [RUNS]
"""
import json, os, statistics, subprocess, sys, tempfile

STAT = ("{pid} (p{pid}) S 1 {pid} {pid} 0 -1 4194304 97 0 0 0 5 3 0 0 20 0 1 0 1000 3133440 358 "
        "18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 1 1 1 1 1 1 1 0\n")
FDINFO = ("pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-client-id:\t{cid}\ndrm-pdev:\t0000:03:00.0\n"
          "drm-resident-vram:\t65536 KiB\ndrm-engine-gfx:\t1000 ns\ndrm-engine-compute:\t0 ns\n")


def tree(root, n, f, g, dri):
    def put(path, text):
        p = os.path.join(root, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write(text)
    put("proc/stat", "cpu  1 0 1 10 0 0 0 0 0 0\nbtime 1\n")
    put("proc/meminfo", "MemTotal: 1048576 kB\nMemAvailable: 524288 kB\n")
    if dri:
        os.makedirs(os.path.join(root, "dev/dri"), exist_ok=True)
    for i in range(n):
        pid = 1000 + i
        put(f"proc/{pid}/stat", STAT.format(pid=pid))
        put(f"proc/{pid}/statm", "765 427 399 5 0 123 0\n")
        put(f"proc/{pid}/status", f"Name:\tp{pid}\nUid:\t1000\t1000\t1000\t1000\n")
        fd = os.path.join(root, f"proc/{pid}/fd")
        os.makedirs(fd, exist_ok=True)
        for k in range(f):
            os.symlink("/dev/null" if k % 2 else f"socket:[{pid * 100 + k}]", os.path.join(fd, str(k)))
        if i < g:
            os.symlink("/dev/dri/renderD128", os.path.join(fd, str(f)))
            put(f"proc/{pid}/fdinfo/{f}", FDINFO.format(cid=i))


def run(binary, root, count):
    out = subprocess.run([binary, "snapshot", "--root", root, "--count", str(count), "--interval", "500ms",
                          "--format", "json", "--top", "1"], capture_output=True, text=True, check=True)
    last = json.loads(out.stdout.strip().splitlines()[-1])
    a = last["agent"]
    return {
        "sampling_cpu_ms_per_cycle": a["sampling_cpu_seconds_total"] / a["samples_total"] * 1e3,
        "drm": a.get("drm_worker"),
    }


def main():
    binary = sys.argv[1]
    n, f, g, runs = (int(x) for x in (sys.argv[2:6] + ["1000", "32", "10", "3"][len(sys.argv) - 2:])[:4])
    count = 12
    print(f"# {n} processes x {f} fds, {g} with a DRM client; snapshot --count {count} --interval 500ms; {runs} runs")
    with tempfile.TemporaryDirectory() as with_dri, tempfile.TemporaryDirectory() as without:
        tree(with_dri, n, f, g, True)
        tree(without, n, f, g, False)
        on, off = [], []
        for _ in range(runs):
            on.append(run(binary, with_dri, count))
            off.append(run(binary, without, count))
    med = lambda xs: statistics.median(xs)
    d = [r["drm"] for r in on]
    print(f"command: {binary} snapshot --root TREE --count {count} --interval 500ms --format json --top 1")
    print(f"DRM worker: walks {med([x['walks'] for x in d]):.0f}, fdinfo reads {med([x['fdinfo_reads'] for x in d]):.0f}, "
          f"clients {med([x['clients'] for x in d]):.0f}, CPU {med([x['cpu_seconds'] for x in d]) * 1e3:.1f} ms over "
          f"{count} cycles (median of {runs})")
    print(f"sampling thread CPU per cycle: {med([r['sampling_cpu_ms_per_cycle'] for r in on]):.2f} ms with the worker, "
          f"{med([r['sampling_cpu_ms_per_cycle'] for r in off]):.2f} ms without (median of {runs})")


if __name__ == "__main__":
    main()
