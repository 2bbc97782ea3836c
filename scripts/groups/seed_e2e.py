#!/usr/bin/env python3
"""The field report behind issue 17, reproduced: a wrapper shell script that runs a child
script in a loop, and a memory hog that starts halfway through. Both run in a memory cgroup of
their own (32 MiB), so the hog's pages push the wrapper's out of memory and its children fault
them back in, as swapping did on the report's Raspberry Pi (this machine has no swap: the
pages that go are file pages, the child's copy of bash, read back with major faults).

`proctor record --groups RULES` records the whole time; then `proctor report --group wrapper`
must show the wrapper's memory flat and its page-fault rate rising after the hog starts.

Usage: seed_e2e.py PROCTOR CGROUP_DIR WORK_DIR. Every process it starts is ended by pid (the
wrapper's family by its process group); the cgroup is removed at the end.
"""

import json
import os
import signal
import subprocess
import sys
import time

PROCTOR, CGROUP, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
MARK = f"seed{os.getpid()}"
BEFORE_S = 15
HOG_S = 15

WRAPPER = """#!/bin/bash
# The wrapper: a child script, again and again.
while :; do ./seedbash -c 'for i in 1 2 3; do :; done'; sleep 0.1; done
"""

# Reads (never writes: no writeback) every page of a file mapped in, pass after pass with a
# short breath between passes: the cgroup's limit makes room for them by dropping the
# wrapper's file pages. With 64 MiB and 0.3 s between passes the wrapper's major faults rose
# only to 1.8/s in one CI rehearsal, and to 7.9/s against a bar of 7.2 in one of three runs
# here; 96 MiB and 0.05 s churn the cache faster.
HOG = """import mmap, os, sys, time
path, mb, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with open(path, "wb") as f:
    f.truncate(mb << 20)
m = mmap.mmap(os.open(path, os.O_RDONLY), mb << 20, prot=mmap.PROT_READ)
end = time.time() + secs
total = 0
while time.time() < end:
    for i in range(0, mb << 20, 4096):
        total += m[i]
    time.sleep(0.05)
"""

RULES = f"""process_names:
  - name: wrapper
    cmdline: ['seedwrap-{MARK}']
  - name: hog
    cmdline: ['seedhog-{MARK}']
"""


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def in_cgroup(argv0, script):
    """A shell that joins the cgroup, then execs `script` (its argv[0] set to `argv0`)."""
    return ["bash", "-c", f'echo $$ > {CGROUP}/cgroup.procs && {script}', argv0]


def main():
    data = os.path.join(WORK, "data")
    os.makedirs(data, exist_ok=True)
    rules = os.path.join(WORK, "rules.yml")
    with open(rules, "w") as f:
        f.write(RULES)
    with open(os.path.join(WORK, "wrapper.sh"), "w") as f:
        f.write(WRAPPER)
    with open(os.path.join(WORK, "hog.py"), "w") as f:
        f.write(HOG)
    started = []
    record = subprocess.Popen(
        [PROCTOR, "record", "--dir", data, "--interval", "1s", "--groups", rules],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started.append(record)
    try:
        time.sleep(1.5)
        # The copy of bash is written from inside the cgroup, so its page cache is the
        # cgroup's to lose.
        wrapper = subprocess.Popen(
            in_cgroup("x", f"cd {WORK} && cp /bin/bash seedbash && exec -a seedwrap-{MARK} bash wrapper.sh"),
            start_new_session=True, stdout=subprocess.DEVNULL)
        started.append(wrapper)
        time.sleep(BEFORE_S)
        hog_start_ns = time.time_ns()
        hog = subprocess.Popen(
            in_cgroup("x", f"cd {WORK} && exec -a seedhog-{MARK} python3 hog.py {WORK}/hogfile 96 {HOG_S}"),
            stdout=subprocess.DEVNULL)
        started.append(hog)
        hog.wait(timeout=HOG_S + 30)
        end_ns = time.time_ns()
    finally:
        for p in started[1:]:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL) if p is started[1] else p.kill()
                except ProcessLookupError:
                    pass
        # The wrapper's family (its loop and the child of the moment) by process group.
        try:
            os.killpg(started[1].pid, signal.SIGKILL)
        except (ProcessLookupError, IndexError):
            pass
        record.send_signal(signal.SIGINT)
        try:
            record.wait(timeout=20)
        except subprocess.TimeoutExpired:
            record.kill()
        for p in started[1:]:
            p.wait(timeout=10)
        try:
            os.remove(os.path.join(WORK, "hogfile"))
        except FileNotFoundError:
            pass
    if hog.returncode != 0:
        fail(f"the hog exited {hog.returncode} (killed by the cgroup's OOM killer?)")

    from_ns = hog_start_ns - BEFORE_S * 1_000_000_000
    base = [PROCTOR, "report", "--dir", data, "--from", f"@{from_ns // 10**9}", "--to", f"@{end_ns // 10**9 + 1}"]
    out = subprocess.run(base + ["--group", "wrapper", "--format", "json", "--points", "60"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        fail(f"report --group wrapper exited {out.returncode}: {out.stderr}")
    report = json.loads(out.stdout)
    groups = {g["name"]: g for g in report.get("groups", [])}
    if "wrapper" not in groups:
        fail(f"no wrapper group in the report: {list(groups)}")
    series = {s["name"]: s["points"] for s in groups["wrapper"]["series"]}

    def mean(name, before):
        pts = [p for p in series.get(name, []) if (p["end_ns"] <= hog_start_ns) == before
               and (before or p["start_ns"] >= hog_start_ns + 2_000_000_000)]
        n = sum(p["count"] for p in pts)
        if n == 0:
            fail(f"no {name} values {'before' if before else 'after'} the hog started: {series.get(name)}")
        return sum(p["mean"] * p["count"] for p in pts) / n

    rss_before, rss_after = mean("rss", True), mean("rss", False)
    major_before, major_after = mean("faults.major", True), mean("faults.major", False)
    minor_before, minor_after = mean("faults.minor", True), mean("faults.minor", False)
    print(f"wrapper rss: {rss_before / 2**20:.2f} MiB before the hog, {rss_after / 2**20:.2f} MiB during")
    print(f"wrapper major faults/s: {major_before:.2f} before, {major_after:.2f} during; "
          f"minor faults/s: {minor_before:.0f} before, {minor_after:.0f} during")
    if not 0.75 <= rss_after / rss_before <= 1.33:
        fail("the wrapper's memory is not flat")
    if major_after < 5 or major_after < 5 * (major_before + 1):
        fail("the wrapper's page-fault rate did not rise after the hog started")
    if minor_before < 50:
        fail("the wrapper's children's minor faults are not counted (reaped children's cminflt)")

    text = subprocess.run(base + ["--group", "wrapper"], capture_output=True, text=True, timeout=60)
    if text.returncode != 0 or "group wrapper" not in text.stdout or "MAJFLT/S" not in text.stdout:
        fail(f"the text report lacks the wrapper's table: {text.stdout[-2000:]} {text.stderr}")
    print("\n".join(line for line in text.stdout.splitlines() if line.startswith("  ") or line.startswith("group")))
    missing = subprocess.run(base + ["--group", "nosuch"], capture_output=True, text=True, timeout=60)
    if missing.returncode == 0 or "wrapper" not in missing.stderr:
        fail(f"an unknown group is not a clear error naming the recorded ones: {missing.stderr}")
    plots = os.path.join(WORK, "plots")
    os.makedirs(plots, exist_ok=True)
    drawn = subprocess.run(base + ["--group", "wrapper", "--out", plots], capture_output=True, text=True, timeout=120)
    if drawn.returncode != 0 or not os.path.exists(os.path.join(plots, "group-wrapper.png")):
        fail(f"no group plot: {drawn.stderr}")
    print(f"plot: {plots}/group-wrapper.png")
    print("seed's graphs: 1 passed, 0 failed")


if __name__ == "__main__":
    main()
