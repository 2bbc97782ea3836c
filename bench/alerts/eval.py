"""The alert evaluation benchmark; see eval.sh for what it measures and its knobs."""
import json, os, signal, statistics, subprocess, sys, tempfile, time, urllib.request

BIN = os.environ.get("PROCTOR_BIN", "")
DURATION = int(os.environ.get("DURATION", "60"))
WARMUP = int(os.environ.get("WARMUP", "20"))
PROCS = int(os.environ.get("PROCS", "600"))
TICK = os.sysconf("SC_CLK_TCK")


def rules_text():
    lines = ["groups:", "  - name: host", "    rules:"]
    scalar = [
        "host.cpu.busy_percent > {t}%",
        "host.cpu.iowait_percent > {t}%",
        "host.memory.used_bytes / host.memory.total_bytes > 0.{t}",
        "host.load.avg1 > {t}",
        "avg_over(host.cpu.busy_percent, 5m) > {t}%",
        "max_over(host.load.avg5, 10m) > {t}",
        "rate(host.pressure_cpu.some.total_seconds) > 0.{t}",
        "host.memory.swap_used_bytes > {t}GiB and host.cpu.busy_percent > 50%",
        "agent.last_sample.cpu_seconds > {t}ms",
        "container.memory_current_bytes > {t}GiB or container.cpu_used_cpus > {t}",
    ]
    n = 0
    for i in range(80):
        expr = scalar[i % len(scalar)].format(t=90 + i % 9)
        lines += [f"      - alert: Host{i}", f"        expr: '{expr}'", "        for: 1m"]
        n += 1
    per = [
        'process{{name="benchsleep-{k}"}}.rss_bytes > 1GiB',
        'process{{cmdline=~"benchsleep-{k} .*"}}.cpu_percent > 90%',
        'process{{user="nobody", name="x{k}"}}.threads > 500',
        "process.rss_bytes > {k}0GiB",
        'process.state == "D" for 30s',
    ]
    lines += ["  - name: processes", "    rules:"]
    for k in range(20):
        expr = per[k % len(per)].format(k=k)
        lines += [f"      - alert: Proc{k}", f"        expr: '{expr}'"]
        n += 1
    assert n == 100
    return "\n".join(lines) + "\n"


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return json.load(r)


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def start(args, port, env=None):
    p = subprocess.Popen([BIN, "serve", "--no-record", "--listen", f"127.0.0.1:{port}", "--interval", "1s"] + args,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    for _ in range(100):
        try:
            get(port, "/api/v1/agent")
            return p
        except Exception:
            time.sleep(0.1)
    raise SystemExit(f"serve on {port} did not answer")


def main():
    started = []
    def stop(*_):
        for p in started:
            try:
                p.kill(); p.wait()
            except Exception:
                pass
        sys.exit(1)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    have = len([d for d in os.listdir("/proc") if d.isdigit()])
    life = str(WARMUP + DURATION + 60)
    for i in range(max(0, PROCS - have)):
        started.append(subprocess.Popen(["bash", "-c", f"exec -a benchsleep-{i % 20} sleep {life}"]))
    with tempfile.TemporaryDirectory() as tmp:
        rules = os.path.join(tmp, "rules.yml")
        with open(rules, "w") as f:
            f.write(rules_text())
        check = subprocess.run([BIN, "alerts", "check", rules], capture_output=True, text=True)
        if check.returncode != 0:
            raise SystemExit(check.stderr)
        # Not recording; the alerts' log and state go to the default data directory, here a
        # temporary one.
        with_rules = start(["--rules", rules], 19561, {**os.environ, "XDG_STATE_HOME": tmp})
        started.append(with_rules)
        without = start([], 19562)
        started.append(without)
        time.sleep(WARMUP)
        procs = len([d for d in os.listdir("/proc") if d.isdigit()])
        c0 = {p.pid: cpu_ticks(p.pid) for p in (with_rules, without)}
        a0 = get(19561, "/api/v1/alerts")
        s0 = {port: get(port, "/api/v1/agent")["samples_total"] for port in (19561, 19562)}
        per_eval = []
        t_end = time.time() + DURATION
        while time.time() < t_end:
            per_eval.append(get(19561, "/api/v1/alerts")["last_evaluation_cpu_seconds"] * 1e6)
            time.sleep(1)
        a1 = get(19561, "/api/v1/alerts")
        s1 = {port: get(port, "/api/v1/agent")["samples_total"] for port in (19561, 19562)}
        c1 = {p.pid: cpu_ticks(p.pid) for p in (with_rules, without)}
        evals = a1["evaluations_total"] - a0["evaluations_total"]
        mean_eval = (a1["evaluation_cpu_seconds_total"] - a0["evaluation_cpu_seconds_total"]) / max(evals, 1) * 1e6
        def per_sample(p, port):
            return (c1[p.pid] - c0[p.pid]) / TICK / max(s1[port] - s0[port], 1) * 1e6
        w, wo = per_sample(with_rules, 19561), per_sample(without, 19562)
        per_eval.sort()
        print(f"processes: {procs}; rules: 100 (20 per process); window {DURATION} s, {evals} evaluations, "
              f"{a1['snapshots_skipped_total']} snapshots skipped; firing {a1['firing']}")
        print(f"engine CPU per evaluation: median {statistics.median(per_eval):.0f} µs, "
              f"p90 {per_eval[int(len(per_eval) * 0.9)]:.0f} µs, mean {mean_eval:.0f} µs (goal ≤ 100 µs)")
        print(f"whole agent CPU per sample: with rules {w:.0f} µs, without {wo:.0f} µs, "
              f"difference {w - wo:.0f} µs (clock ticks of {1e6 / TICK:.0f} µs: ±{2e6 / TICK / max(evals, 1):.0f} µs)")
    for p in started:
        p.kill(); p.wait()


if len(sys.argv) == 3 and sys.argv[1] == "--rules-only":
    # The rules alone, for the eval_cost example (see docs/performance.md).
    with open(sys.argv[2], "w") as f:
        f.write(rules_text())
else:
    main()
