"""How far each source of a process's resident size is from the exact figure (issue 32 item 4).

For every process on the machine this reads, back to back, `/proc/PID/stat` field 24, `statm`
field 2, `status` VmRSS and `smaps_rollup` Rss (the page walk smem sums), and with `--proctor BIN`
the resident size that `BIN snapshot` reported for the same pid in the last of ten samples, for
the processes whose `statm` did not move while proctor ran. It prints one
line per process that disagrees and a summary per source against `statm` (what htop shows):
how many differ, the median and the largest difference in KiB and in percent.

The reads are not atomic: a process that faults pages between two of them differs by those
pages, so run it on a machine whose processes are mostly idle, and compare the sources by their
median. Usage: python3 bench/rss/rss_error.py [--proctor target/release/proctor] [--quiet]
"""

import json
import os
import statistics
import subprocess
import sys

PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def stat_rss_kib(pid):
    raw = read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    # Fields after the command name, which may hold spaces and parentheses: field 3 is [0].
    rest = raw[raw.rindex(b")") + 2 :].split()
    return int(rest[24 - 3]) * PAGE_KIB


def statm_rss_kib(pid):
    raw = read(f"/proc/{pid}/statm")
    return None if raw is None else int(raw.split()[1]) * PAGE_KIB


def field_kib(raw, name):
    if raw is None:
        return None
    for line in raw.splitlines():
        if line.startswith(name + b":"):
            return int(line.split()[1])
    return None


def proctor_rss_kib(binary):
    """The last of ten snapshots a second apart: past the first scan, which reads every
    process's `status`, so the figures include those carried over from an earlier read."""
    cmd = [binary, "snapshot", "--count", "10", "--interval", "1s", "--top", "100000", "--format", "json"]
    out = subprocess.run(cmd, check=True, capture_output=True).stdout
    rows = json.loads(out.splitlines()[-1])["processes"]["top"]
    return {r["pid"]: r["rss_bytes"] // 1024 for r in rows if r.get("rss_bytes") is not None}


def summary(name, pairs):
    """pairs: (reference KiB, other KiB) for every process where both were read."""
    diffs = [abs(o - r) for r, o in pairs]
    pcts = [abs(o - r) * 100.0 / r for r, o in pairs if r > 0]
    differ = sum(1 for d in diffs if d)
    if not diffs:
        print(f"{name:<22} no processes")
        return
    print(
        f"{name:<22} {differ:>4} of {len(diffs):>4} differ; |diff| median {statistics.median(diffs):>7.0f} KiB, "
        f"max {max(diffs):>7} KiB; median {statistics.median(pcts):5.2f} %, max {max(pcts):6.2f} %"
    )


def main():
    quiet = "--quiet" in sys.argv
    proctor = None
    if "--proctor" in sys.argv:
        proctor = sys.argv[sys.argv.index("--proctor") + 1]
    # statm before proctor's ten seconds too: a process whose statm moved meanwhile (a busy
    # one) is left out of proctor's line, which would otherwise compare two moments.
    statm_before = {int(n): statm_rss_kib(n) for n in os.listdir("/proc") if n.isdigit()} if proctor else {}
    from_proctor = proctor_rss_kib(proctor) if proctor else {}
    rows = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        stat = stat_rss_kib(pid)
        statm = statm_rss_kib(pid)
        status = field_kib(read(f"/proc/{pid}/status"), b"VmRSS")
        smaps = field_kib(read(f"/proc/{pid}/smaps_rollup"), b"Rss")
        if stat is None or statm is None or status is None:
            continue  # gone, or a kernel thread (no mm: no VmRSS)
        steady = statm_before.get(pid) == statm
        rows.append((pid, stat, statm, status, smaps, from_proctor.get(pid) if steady else None))
    if not quiet:
        print(f"{'pid':>7} {'stat':>9} {'statm':>9} {'status':>9} {'smaps':>9} {'proctor':>9}  (KiB)")
        for pid, stat, statm, status, smaps, prc in sorted(rows):
            if len({stat, statm, status, smaps if smaps is not None else statm, prc if prc is not None else statm}) > 1:
                print(f"{pid:>7} {stat:>9} {statm:>9} {status:>9} {smaps!s:>9} {prc!s:>9}")
    print(f"\nkernel {os.uname().release}, {os.cpu_count()} CPUs, {len(rows)} processes with an mm; against statm:")
    summary("stat field 24", [(r[2], r[1]) for r in rows])
    summary("status VmRSS", [(r[2], r[3]) for r in rows])
    summary("smaps_rollup Rss", [(r[2], r[4]) for r in rows if r[4] is not None])
    if proctor:
        moved = sum(1 for r in rows if r[5] is None)
        summary("proctor snapshot", [(r[2], r[5]) for r in rows if r[5] is not None])
        print(f"{'':<22} ({moved} left out: statm moved while proctor ran, or not in its snapshot)")


if __name__ == "__main__":
    main()
