#!/usr/bin/env python3
"""What the per-packet programs cost each packet, build against build (issue 36): each build's
`proctor serve --net` on CPU 0 beside the paced UDP echo on CPU 1 (bench/net/paced_echo.py; PROTO=tcp:
its TCP echo, one connection),
one build after the other, the order rotated a round.

    python3 bench/net/programs.py BIN [BIN ...]
    env: ROUNDS (3), SECONDS (8), RATE (50000 packets a second, half each way), PROTO (udp, tcp),
         MODE=stats (default): the kernel's own count for each program (`sysctl
           kernel.bpf_stats_enabled=1`, `bpftool prog show`: run_time_ns / run_cnt; the count's
           two clock reads are in each figure);
         MODE=perf: `perf record -C 1 -g` of the workload, and the share of its CPU spent in the
           tracepoints' BPF dispatch (`bpf_trace_run1`, the queue and receive programs in it)
           and in the cgroup ingress's (`__cgroup_bpf_run_filter_skb`, the ingress program in
           it), each with what it calls: what the accounting adds to the workload, without the
           count's clock reads, read in one run. `total (self)`: the same samples summed by the
           function they landed in, over the programs and the kernel functions that run them
           or that they call (ACCOUNTING below); the unwinder does not find every one of those
           under its caller, so this one can be the larger.

Needs root, bpftool (MODE=stats) or perf (MODE=perf). The programs counted are those the
build's serve loaded (the ids that were not there before it started), so another agent's do
not mix in."""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paced_echo import WORKLOAD, WORKLOAD_TCP  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import serve_addr  # noqa: E402

PROGRAMS = ("proctor_queue", "proctor_receive", "proctor_ingress")
# The kernel functions that run the programs and that they call, for MODE=perf's sum by self.
ACCOUNTING = ("bpf_trace_run1", "__cgroup_bpf_run_filter_skb", "__bpf_prog_run_save_cb", "bpf_sk_storage_get", "bpf_sk_fullsock",
              "bpf_sk_storage_get_tracing", "bpf_get_current_pid_tgid")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SECONDS = float(os.environ.get("SECONDS", "8"))
RATE = int(os.environ.get("RATE", "50000"))
MODE = os.environ.get("MODE", "stats")
PROTO = os.environ.get("PROTO", "udp")
if PROTO not in ("udp", "tcp"):
    raise SystemExit(f"programs.py: PROTO is udp or tcp, not {PROTO!r}")


def prog_ids():
    out = subprocess.run(["bpftool", "prog", "show", "-j"], check=True, capture_output=True, text=True).stdout
    return {p["id"]: p for p in json.loads(out)}


agent = serve_addr.agent


def workload():
    """The paced echo on CPU 1; returns the packets it sent and received."""
    code = WORKLOAD_TCP if PROTO == "tcp" else WORKLOAD
    out = subprocess.run(["taskset", "-c", "1", sys.executable, "-c", code, str(RATE), str(SECONDS)],
                         check=True, capture_output=True, text=True).stdout
    return int(out.split()[0])


def perf_shares(data):
    """Inclusive shares (%) of the workload's samples, by symbol, from `perf report`."""
    out = subprocess.run(["perf", "report", "-i", data, "--children", "--sort", "sym", "-g", "none"],
                         check=True, capture_output=True, text=True).stdout
    shares = {}
    for line in out.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+[\d.]+%\s+\[k\]\s+(\S+)", line)
        if m:
            shares[m.group(2)] = shares.get(m.group(2), 0.0) + float(m.group(1))
    prog = lambda name: sum(v for k, v in shares.items() if k.startswith("bpf_prog_") and k.endswith("_" + name))
    tp, cg = shares.get("bpf_trace_run1", 0.0), shares.get("__cgroup_bpf_run_filter_skb", 0.0)
    q, r, i = prog("proctor_queue"), prog("proctor_receive"), prog("proctor_ingress")
    # The same samples by the function they landed in: the accounting's own functions summed.
    # Some samples in them are not found under their caller by the unwinder, so this sum can
    # be the larger; neither counts the shared functions they call (rcu_read_lock, ...).
    out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "sym", "-F", "overhead,sym"],
                         check=True, capture_output=True, text=True).stdout
    own = 0.0
    for line in out.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+\[k\]\s+(\S+)", line)
        if m and (m.group(2) in ACCOUNTING or re.fullmatch(r"bpf_prog_\w+_(" + "|".join(PROGRAMS) + ")", m.group(2))):
            own += float(m.group(1))
    return {"total": tp + cg, "tracepoints": tp, "queue": q, "receive": r, "tp dispatch": tp - q - r,
            "cgroup ingress": cg, "ingress": i, "cgroup dispatch": cg - i, "total (self)": own}


def start_net(cmd):
    """Starts a `serve --net` command line (serve_addr.start) and waits, 30 s at most, for its
    network programs to attach; returns (process, address)."""
    p, addr = serve_addr.start(cmd)
    deadline = time.monotonic() + 30
    while (net_from := agent(addr).get("process_net_from")) != "bpf":
        if time.monotonic() > deadline:
            p.terminate()
            p.wait()
            raise SystemExit(f"{cmd[cmd.index('serve') - 1]}: the network programs did not attach: {net_from}")
        time.sleep(0.2)
    return p, addr


def one(binary):
    before = set(prog_ids())
    p, addr = start_net(["taskset", "-c", "0", binary, "serve", "--listen", "127.0.0.1:0", "--interval", "1s",
                         "--no-record", "--net"])
    try:
        if MODE == "perf":
            data = f"/tmp/proctor-programs-{os.getpid()}.perf"
            rec = subprocess.Popen(["perf", "record", "-q", "-F", "9999", "-C", "1", "-g", "-o", data, "--",
                                    "sleep", str(max(1.0, SECONDS - 2))],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            packets = workload()
            rec.wait()
            try:
                return packets, perf_shares(data)
            finally:
                os.unlink(data)
        was = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        try:
            packets = workload()
            progs = prog_ids()
        finally:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write(was)
        ns = {}
        for prog_id, prog in progs.items():
            if prog_id not in before and prog.get("name") in PROGRAMS and prog.get("run_cnt"):
                ns[prog["name"]] = prog["run_time_ns"] / prog["run_cnt"]
        ns["a packet, all"] = sum(ns.get(n, 0.0) for n in PROGRAMS)
        return packets, ns
    finally:
        p.terminate()
        p.wait()


def main():
    bins = sys.argv[1:]
    if not bins:
        raise SystemExit(__doc__)
    for tool in ("bpftool", "taskset") + (("perf",) if MODE == "perf" else ()):
        if not shutil.which(tool):
            raise SystemExit(f"programs.py: {tool} is not installed (MODE={MODE} needs it)")
    got = {b: [] for b in bins}
    for r in range(ROUNDS):
        for b in bins[r % len(bins):] + bins[:r % len(bins)]:
            packets, figures = one(b)
            got[b].append(figures)
            unit = "% of the workload's CPU" if MODE == "perf" else "ns a run"
            print(f"round {r + 1} {b}: {packets} packets; {unit}: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()), flush=True)
    print(f"\nmedians of {ROUNDS} rounds, {RATE} packets/s for {SECONDS:g} s, MODE={MODE}; "
          f"load {open('/proc/loadavg').read().split()[0]}")
    for b in bins:
        keys = got[b][0].keys()
        print(f"{b}: " + ", ".join(f"{k} {statistics.median(x.get(k, 0.0) for x in got[b]):.2f}" for k in keys))


if __name__ == "__main__":
    main()
