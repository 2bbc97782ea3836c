"""The agent on a small board (issue 17): `proctor serve --interval 10s --groups RULES.yml` with
300 processes in 20 groups, recording (the default agent), and what it costs: RSS (peak and
final), CPU in % of one core, the agent's own per-sample figures, the store's bytes per sample.
Goals: at most 15 MB RSS and 0.3 % of one core. Run through bench/groups/pi.sh.

The 300 processes are `sleep`s started here, each with its own argv[0]
(`pibench<PID>-gNN-pMM`, 20 names of 15 processes). The rules file groups only them, by a
cmdline regex with a named capture: the rest of the host stays ungrouped (process-exporter's
own behaviour for processes no rule takes). A catch-all rule would add one group whose size is
whatever else runs on this machine, and the check "20 groups of 15" could not hold anywhere
else; the agent still reads every process on the host each sample either way, and the rules
are still tried on every command line. The other processes on the host are counted and
printed.

A `--no-record` agent runs at the same time (NORECORD=0 turns it off): side by side, both see
the same host. CPU is utime+stime of the agent's pid from /proc/PID/stat over the window after
WARMUP seconds (and over the whole run, start-up included); RSS is VmRSS and VmHWM from
/proc/PID/status. The bench asks the agent for /api/v1/agent and /api/v1/groups once a
minute (a few requests in all, as a slow scraper would).

Everything started here is stopped here by its pid: on normal exit, Ctrl-C and SIGTERM. The
sleepers also end by themselves when the run's time is up, should this script be killed.
"""

import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

PROCTOR = os.path.abspath(os.environ.get("PROCTOR_BIN", "target/release/proctor"))
DURATION = int(os.environ.get("DURATION", "600"))  # measured window, seconds (60 samples at 10s)
WARMUP = int(os.environ.get("WARMUP", "30"))  # start-up left out of the window: first cmdline and PSS passes
ROUNDS = int(os.environ.get("ROUNDS", "1"))
INTERVAL = os.environ.get("INTERVAL", "10s")
NGROUPS = int(os.environ.get("NGROUPS", "20"))
PER_GROUP = int(os.environ.get("PER_GROUP", "15"))
NORECORD = os.environ.get("NORECORD", "1") != "0"
AGENT_ARGS = os.environ.get("AGENT_ARGS", "").split()  # more flags for both agents, e.g. "--pss-budget 0"
POLL = 60  # seconds between the bench's own requests to the agents
GOAL_RSS_BYTES = 15_000_000  # "15 MB"
GOAL_CPU_PERCENT = 0.3
HZ = os.sysconf("SC_CLK_TCK")
MARKER = f"pibench{os.getpid()}"
SLEEP = shutil.which("sleep") or "/bin/sleep"

sleepers = []  # Popen of every sleeper started here
agents = []  # Popen of every agent started here
temp_dirs = []


def load():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def host_processes():
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def ticks(pid, task=None):
    path = f"/proc/{pid}/task/{task}/stat" if task else f"/proc/{pid}/stat"
    with open(path) as f:
        text = f.read()
    comm = text[text.index("(") + 1:text.rindex(")")]
    fields = text.rsplit(")", 1)[1].split()
    return comm, int(fields[11]) + int(fields[12])


def status_kib(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "Threads"):
                out[key] = int(value.split()[0])
    return out


def smaps_rollup_kib(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1])
    return out


def threads_ticks(pid):
    """CPU ticks by thread name (threads of one name summed)."""
    by_name = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            comm, t = ticks(pid, tid)
        except (FileNotFoundError, ProcessLookupError):
            continue
        by_name[comm] = by_name.get(comm, 0) + t
    return by_name


def get_json(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.loads(r.read())


def start_sleepers(lifetime):
    """NGROUPS×PER_GROUP sleepers, each with its own argv[0]; one process group of their own,
    so a Ctrl-C in the terminal reaches this script (which stops them) and not them."""
    pgid = 0
    for g in range(1, NGROUPS + 1):
        for m in range(1, PER_GROUP + 1):
            p = subprocess.Popen([f"{MARKER}-g{g:02d}-p{m:02d}", str(lifetime)], executable=SLEEP,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 process_group=pgid)
            pgid = pgid or p.pid
            sleepers.append(p)


def stop_sleepers():
    for p in sleepers:
        if p.poll() is None:
            p.kill()
    for p in sleepers:
        p.wait()
    sleepers.clear()


def stop_agents():
    for p in agents:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in agents:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    agents.clear()


def write_rules(path):
    with open(path, "w") as f:
        f.write("# bench/groups/pi.py: its own sleepers only, one group per gNN\n"
                "process_names:\n"
                "  - name: \"pibench-{{.Matches.group}}\"\n"
                "    cmdline:\n"
                f"      - '^{MARKER}-(?P<group>g[0-9]+)-p[0-9]+ '\n")


def start_agent(rules, record_args, log_path):
    cmd = [PROCTOR, "serve", "--listen", "127.0.0.1:0", "--interval", INTERVAL, "--groups", rules, *record_args, *AGENT_ARGS]
    log = open(log_path, "w")
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    agents.append(p)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(log_path) as f:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", f.read())
        if m:
            return p, int(m.group(1)), time.monotonic(), cmd
        if p.poll() is not None:
            break
        time.sleep(0.1)
    with open(log_path) as f:
        raise SystemExit(f"agent did not start: {' '.join(cmd)}\n{f.read()}")


def check_groups(doc):
    """(our groups found, how many have exactly PER_GROUP processes, other groups)."""
    ours = [g for g in doc["groups"] if re.fullmatch(r"pibench-g\d+", g["name"])]
    right = sum(1 for g in ours if g["processes"] == PER_GROUP)
    return len(ours), right, len(doc["groups"]) - len(ours)


def one_round(n):
    tmp = tempfile.mkdtemp(prefix="pibench-")
    temp_dirs.append(tmp)
    rules = os.path.join(tmp, "rules.yml")
    write_rules(rules)
    data = os.path.join(tmp, "data")
    os.mkdir(data)
    lifetime = WARMUP + DURATION + 120
    before = host_processes()
    start_sleepers(lifetime)
    time.sleep(1)
    variants = [("recording", ["--data-dir", data])] + ([("--no-record", ["--no-record"])] if NORECORD else [])
    runs = {}
    for name, args in variants:
        p, port, t_start, cmd = start_agent(rules, args, os.path.join(tmp, f"agent-{len(runs)}.log"))
        runs[name] = {"p": p, "port": port, "t_start": t_start, "cmd": cmd, "fold": [], "checks": []}
    print(f"round {n}: {len(sleepers)} sleepers started ({before} processes before, {host_processes()} now); "
          f"agents {', '.join(str(r['p'].pid) for r in runs.values())}; load {load()}", flush=True)
    loads = []
    t0 = min(r["t_start"] for r in runs.values())
    next_poll = t0 + WARMUP
    while True:
        now = time.monotonic()
        for name, r in runs.items():
            if r["p"].poll() is not None:
                raise SystemExit(f"agent {name} exited ({r['p'].returncode}); log in {tmp}")
        loads.append(load()[0])
        if now >= next_poll:
            for name, r in runs.items():
                if "c0" not in r:  # the window opens
                    r["c0"], r["w0"] = ticks(r["p"].pid)[1], time.monotonic()
                    r["a0"] = get_json(r["port"], "/api/v1/agent")
                    r["thr0"] = threads_ticks(r["p"].pid)
                doc = get_json(r["port"], "/api/v1/groups")
                r["fold"].append(doc["fold_cpu_seconds"])
                r["checks"].append((check_groups(doc), doc["ungrouped"], doc["cmdline_unread"], doc["processes"]))
            next_poll += POLL
        if now >= t0 + WARMUP + DURATION:
            break
        time.sleep(min(5.0, max(0.1, t0 + WARMUP + DURATION - now)))
    out = {}
    for name, r in runs.items():
        pid = r["p"].pid
        c1, w1 = ticks(pid)[1], time.monotonic()
        st, smaps, thr1 = status_kib(pid), smaps_rollup_kib(pid), threads_ticks(pid)
        a1 = get_json(r["port"], "/api/v1/agent")
        doc = get_json(r["port"], "/api/v1/groups")
        r["fold"].append(doc["fold_cpu_seconds"])
        r["checks"].append((check_groups(doc), doc["ungrouped"], doc["cmdline_unread"], doc["processes"]))
        a0 = r["a0"]
        samples = a1["samples_total"] - a0["samples_total"]
        rec0, rec1 = a0["recording"], a1["recording"]
        frames = rec1["frames_written"] - rec0["frames_written"]
        res = {
            "cmd": r["cmd"],
            "rss_peak_mib": st["VmHWM"] / 1024,
            "rss_final_mib": st["VmRSS"] / 1024,
            "rss_anon_mib": st["RssAnon"] / 1024,
            "rss_file_mib": st["RssFile"] / 1024,
            "pss_mib": smaps.get("Pss", 0) / 1024,
            "private_dirty_mib": smaps.get("Private_Dirty", 0) / 1024,
            "threads": st["Threads"],
            "cpu_pct": 100 * (c1 - r["c0"]) / HZ / (w1 - r["w0"]),
            "cpu_pct_whole": 100 * c1 / HZ / (w1 - r["t_start"]),
            "agent_cpu_pct": 100 * (a1["cpu_seconds_total"] - a0["cpu_seconds_total"])
            / max(a1["uptime_secs"] - a0["uptime_secs"], 1e-9),
            "samples": samples,
            "missed": a1["missed_ticks_total"],
            "sampling_ms": 1e3 * (a1["sampling_cpu_seconds_total"] - a0["sampling_cpu_seconds_total"]) / max(samples, 1),
            "last_cpu_ms": 1e3 * a1["last_sample"]["cpu_seconds"],
            "last_wall_ms": 1e3 * a1["last_sample"]["wall_seconds"],
            "last_derive_ms": 1e3 * a1["last_sample"]["derive_cpu_seconds"],
            "files_read": a1["last_sample"]["files_read"],
            "processes_seen": a1["last_sample"]["processes_seen"],
            "fold_ms": 1e3 * statistics.median(r["fold"]),
            "pss_cpu_s": (a1["pss_worker"] or {}).get("cpu_seconds") or 0.0,
            "pss_cpu_s_window": ((a1["pss_worker"] or {}).get("cpu_seconds") or 0.0)
            - ((a0["pss_worker"] or {}).get("cpu_seconds") or 0.0),
            "pss_reads_window": (a1["pss_worker"] or {}).get("reads", 0) - (a0["pss_worker"] or {}).get("reads", 0),
            "pss_max_read_ms": 1e3 * ((a1["pss_worker"] or {}).get("max_read_cpu_seconds") or 0.0),
                        "history_kib": a1["history"]["bytes"] / 1024,
            "history_points": a1["history"]["points"],
            "recording": rec1["enabled"],
            "frames": rec1["frames_written"],
            "key_frames": rec1["key_frames"],
            "bytes_per_sample": rec1["bytes_written"] / max(rec1["frames_written"], 1),
            "bytes_per_sample_window": (rec1["bytes_written"] - rec0["bytes_written"]) / max(frames, 1),
            "rec_ms": 1e3 * rec1["write_cpu_seconds"] / max(rec1["frames_written"], 1),
            "dropped": rec1["dropped"],
            "write_errors": rec1["write_errors"],
            "threads_cpu_s": {k: (v - r["thr0"].get(k, 0)) / HZ for k, v in thr1.items()},
            "checks": r["checks"],
        }
        if rec1["enabled"]:
            res["store_dir_bytes"] = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(data) for f in fs)
        out[name] = res
    stop_agents()
    stop_sleepers()
    shutil.rmtree(tmp, ignore_errors=True)
    temp_dirs.remove(tmp)
    out["load"] = (min(loads), statistics.median(loads), max(loads))
    return out


def med(rounds, variant, key):
    vals = [r[variant][key] for r in rounds if variant in r and r[variant].get(key) is not None]
    return statistics.median(vals) if vals else None


def report(rounds):
    variants = [v for v in ("recording", "--no-record") if v in rounds[0]]
    what = "median of {} rounds".format(len(rounds)) if len(rounds) > 1 else "one round"
    print(f"\n== proctor serve --interval {INTERVAL} --groups, {NGROUPS * PER_GROUP} bench processes in {NGROUPS} groups "
          f"({what}; window {DURATION} s after {WARMUP} s warm-up; {os.cpu_count()} CPUs)")
    for v in variants:
        print(f"command ({v}): {' '.join(rounds[-1][v]['cmd'])}")
    rows = [
        ("RSS peak, VmHWM (MiB)", "rss_peak_mib", "{:.1f}", f"<= 15 MB ({GOAL_RSS_BYTES / 2**20:.1f} MiB)"),
        ("RSS final, VmRSS (MiB)", "rss_final_mib", "{:.1f}", ""),
        ("  of it anonymous (MiB)", "rss_anon_mib", "{:.1f}", ""),
        ("  of it file-backed (MiB)", "rss_file_mib", "{:.1f}", ""),
        ("PSS (MiB)", "pss_mib", "{:.1f}", ""),
        ("CPU, window (% of one core)", "cpu_pct", "{:.3f}", f"<= {GOAL_CPU_PERCENT}"),
        ("CPU, whole run incl. start (%)", "cpu_pct_whole", "{:.3f}", ""),
        ("CPU, agent's own count (%)", "agent_cpu_pct", "{:.3f}", ""),
        ("samples in the window", "samples", "{:.0f}", ""),
        ("missed ticks", "missed", "{:.0f}", ""),
        ("sampling thread (ms CPU/sample)", "sampling_ms", "{:.2f}", ""),
        ("last sample: CPU (ms)", "last_cpu_ms", "{:.2f}", ""),
        ("last sample: wall (ms)", "last_wall_ms", "{:.2f}", ""),
        ("last sample: derive (ms)", "last_derive_ms", "{:.2f}", ""),
        ("last sample: files read", "files_read", "{:.0f}", ""),
        ("processes seen", "processes_seen", "{:.0f}", ""),
        ("group fold (ms CPU/sample, median)", "fold_ms", "{:.3f}", ""),
        ("PSS worker CPU in the window (s)", "pss_cpu_s_window", "{:.3f}", ""),
        ("PSS worker reads in the window", "pss_reads_window", "{:.0f}", ""),
        ("PSS worker's costliest read (ms CPU)", "pss_max_read_ms", "{:.2f}", ""),
        ("PSS worker CPU, whole run (s)", "pss_cpu_s", "{:.3f}", ""),
        ("recorder thread (ms CPU/sample)", "rec_ms", "{:.2f}", ""),
        ("store bytes/sample, whole run", "bytes_per_sample", "{:.0f}", ""),
        ("store bytes/sample, window", "bytes_per_sample_window", "{:.0f}", ""),
        ("store directory (bytes)", "store_dir_bytes", "{:.0f}", ""),
        ("frames written (key frames)", "frames", "{:.0f}", ""),
        ("history ring (KiB)", "history_kib", "{:.0f}", ""),
        ("threads", "threads", "{:.0f}", ""),
    ]
    print(f"{'':36s}" + "".join(f"{v:>14s}" for v in variants) + "  goal")
    for title, key, fmt, goal in rows:
        cells = []
        for v in variants:
            x = med(rounds, v, key)
            cells.append(fmt.format(x) if x is not None else "-")
            if key == "frames" and x is not None:
                k = med(rounds, v, "key_frames")
                cells[-1] += f" ({k:.0f})"
        if all(c == "-" for c in cells):
            continue
        print(f"{title:36s}" + "".join(f"{c:>14s}" for c in cells) + (f"  {goal}" if goal else ""))
    for v in variants:
        names = sorted({k for r in rounds for k in r[v]["threads_cpu_s"]})
        cpu = {k: statistics.median(r[v]["threads_cpu_s"].get(k, 0.0) for r in rounds) for k in names}
        print(f"CPU s in the window by thread ({v}): "
              + ", ".join(f"{k} {s:.2f}" for k, s in sorted(cpu.items(), key=lambda kv: -kv[1]) if s > 0) or "none")
    for i, r in enumerate(rounds, 1):
        for v in variants:
            # Only the bench's groups are checked: the host's own short-lived processes may
            # have command lines not read yet, which leaves them ungrouped, as it should.
            bad = [c for c in r[v]["checks"] if c[0] != (NGROUPS, NGROUPS, 0)]
            (found, right, other), ungrouped, unread, procs = r[v]["checks"][-1]
            print(f"round {i} {v}: groups seen {found} (of {NGROUPS}), {right} with {PER_GROUP} processes, "
                  f"{other} other; {ungrouped} of {procs} processes ungrouped, {unread} command lines unread; "
                  f"{len(r[v]['checks']) - len(bad)}/{len(r[v]['checks'])} checks right; "
                  f"RSS peak {r[v]['rss_peak_mib']:.1f} MiB, CPU {r[v]['cpu_pct']:.3f} %, "
                  f"dropped {r[v]['dropped']}, write errors {r[v]['write_errors']}")
        lo, mid, hi = r["load"]
        print(f"round {i}: load (1 min) during the run min {lo:.2f} median {mid:.2f} max {hi:.2f}")
    rss = med(rounds, "recording", "rss_peak_mib")
    cpu = med(rounds, "recording", "cpu_pct")
    print(f"goals (recording): RSS peak {rss * 2**20 / 1e6:.1f} MB <= 15 MB: {'met' if rss * 2**20 <= GOAL_RSS_BYTES else 'MISSED'}; "
          f"CPU {cpu:.3f} % <= {GOAL_CPU_PERCENT} %: {'met' if cpu <= GOAL_CPU_PERCENT else 'MISSED'}")


def main():
    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    print(f"{PROCTOR} ({subprocess.run([PROCTOR, '--version'], capture_output=True, text=True).stdout.strip()}); "
          f"{ROUNDS} round(s) of {WARMUP}+{DURATION} s; load {load()}", flush=True)
    rounds = []
    try:
        for n in range(1, ROUNDS + 1):
            rounds.append(one_round(n))
    except KeyboardInterrupt:
        print("interrupted: stopping what was started", file=sys.stderr)
    finally:
        stop_agents()
        stop_sleepers()
        for d in temp_dirs:
            shutil.rmtree(d, ignore_errors=True)
    if rounds:
        report(rounds)


if __name__ == "__main__":
    main()
