#!/usr/bin/env python3
"""bench/bpf/run.sh's body: see there. Where the open-coded scan runs (6.7+), the iterator's
file (the reader kernels 6.2 to 6.6 get) is measured beside it in the same scans."""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sleepers import count_pids, sleepers  # noqa: E402

PROCTOR = os.environ["PROCTOR_BIN"]
REPEATS = int(os.environ.get("REPEATS", "5"))


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def bench(target):
    with sleepers(target, 900):
        cmd = [PROCTOR, "bench", "-n", "20", "--scans", "100" if target > 2000 else "300", "--format", "json"]
        print(f"\n== {count_pids()} processes (load {load()}): {' '.join(cmd)}, {REPEATS} runs")
        rows = {"proctor": [], "floor": [], "iterator": [], "ratio": [], "via": [], "file": [], "file_ratio": []}
        how = None
        why = None
        for _ in range(REPEATS):
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            rows["proctor"].append(r["per_process"]["cpu_us"])
            rows["floor"].append(r["per_process_floor"]["cpu_us"])
            if r["per_process_task_iter"] is None:
                why = r["task_iter_unavailable"]
                continue
            rows["iterator"].append(r["per_process_task_iter"]["cpu_us"])
            rows["ratio"].append(r["task_iter_ratio_to_floor_cpu"])
            how = r.get("task_iter_how")
            if r.get("per_process_task_iter_file") is not None:
                rows["file"].append(r["per_process_task_iter_file"]["cpu_us"])
                rows["file_ratio"].append(r["task_iter_file_ratio_to_floor_cpu"])
            if r["per_process_via_task_iter"] is not None:
                rows["via"].append(r["per_process_via_task_iter"]["cpu_us"])
        med = {k: statistics.median(v) for k, v in rows.items() if v}
        print(f"proctor per process    {med['proctor']:7.3f} µs CPU  (its sampler through /proc: stat, status when the footprint moved)")
        print(f"floor per process      {med['floor']:7.3f} µs CPU  (readdir + pread stat via kept fds, nothing parsed)")
        if "iterator" in med:
            runs = ", ".join(f"{x:.3f}" for x in rows["ratio"])
            print(f"task iterator          {med['iterator']:7.3f} µs CPU  (BPF, threads summed; goal ≤ 0.5): {how}")
            print(f"iterator / floor       {med['ratio']:7.3f}×          (goal ≤ 1/8 = 0.125); runs: {runs}")
            print(f"floor / iterator       {med['floor'] / med['iterator']:7.1f}×")
            print(f"proctor / iterator     {med['proctor'] / med['iterator']:7.1f}×          (goal ≥ 8×)")
        if "file" in med:
            runs = ", ".join(f"{x:.3f}" for x in rows["file_ratio"])
            print(f"iterator's file        {med['file']:7.3f} µs CPU  (the iter/task program's file in the same scans, the reader before 6.7)")
            print(f"file / floor           {med['file_ratio']:7.3f}×          runs: {runs}")
            print(f"file / iterator        {med['file'] / med['iterator']:7.2f}×")
        if "via" in med:
            print(f"proctor via iterator   {med['via']:7.3f} µs CPU  (the sampler as the agent runs it with the iterator: /proc still listed)")
            print(f"proctor: /proc / via   {med['proctor'] / med['via']:7.2f}×")
        else:
            print(f"task iterator          not measured: {why}")
        print(f"-- load after: {load()}")


if __name__ == "__main__":
    for target in [int(a) for a in sys.argv[1:]] or [600, 5000]:
        bench(target)
