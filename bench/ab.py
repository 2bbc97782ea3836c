"""The headline benchmarks, two builds side by side: `bash bench/ab.sh OLD NEW` runs this.

Usage: ab.py OLD_BIN NEW_BIN BLASTER ROUNDS [scan] [serve] [record] [record_side] [statsd] [top]

Every round runs each benchmark once per build, the two builds back to back and their order
swapped every round (old-new, new-old, …), so both see the same machine. Each figure is a cost
(lower is better):

  scan     µs of CPU per process of one all-process scan, and that over the kernel floor measured
           in the same run (`proctor bench -n 200 --scans 300 --format json`, ~600 processes)
  serve    `proctor serve --no-record` CPU, % of one core, over WINDOW s after a 10 s warm-up, at
           the default 1 s interval with ~600 processes (utime+stime from /proc/PID/stat); its
           resident size (VmRSS) at the end of the window, and its anonymous part (RssAnon:
           the binary's own pages in VmRSS move by megabytes between builds of the same code,
           with where the linker put the hot functions, since the kernel maps 64 KiB around
           each page fault); then the median wall time of
           REQUESTS sequential `GET /api/metrics/v1` (the Jupyter drop-in), a connection each
  record   `proctor serve --data-dir DIR`: store bytes written per sample over RECORD_WINDOW s
           (default 60: one chunk of 60 frames at 1 s, so one key frame in the window) after a
           10 s warm-up (the data directory's growth over `samples_total`'s)
  record_side  the same with both builds recording at once, each into its own directory, so
           both store the same host's changes (one after the other, a compile's churn in one
           window and not the other moved a build's figure 2× between rounds); also prints
           each round's NEW/OLD
  statsd   `proctor statsd` CPU seconds per million packets received: PACKETS packets from the
           one blaster (the NEW tree's statsd_blast example) paced at RATE packets/s
  top      `proctor top --interval 1s` CPU over the same WINDOW as `htop -d 10` beside it, each
           in its own 120x40 tmux session: proctor's CPU / htop's

For each figure it prints both medians, NEW/OLD, each side's spread (max − min over the rounds,
as % of its median) and whether the difference is beyond the run-to-run spread: only when the
two sides' rounds do not overlap (every NEW round above, or below, every OLD one). Processes it
starts are stopped by their pids; traffic goes to loopback only.

Knobs (environment): WINDOW (default 20 s), PACKETS (1000000), RATE (200000), TARGET (600),
REQUESTS (50), RECORD_WINDOW (60 s).
"""

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

WINDOW = float(os.environ.get("WINDOW", 20))
PACKETS = int(os.environ.get("PACKETS", 1_000_000))
RATE = int(os.environ.get("RATE", 200_000))
TARGET = int(os.environ.get("TARGET", 600))
REQUESTS = int(os.environ.get("REQUESTS", 50))
RECORD_WINDOW = float(os.environ.get("RECORD_WINDOW", 60))
HZ = os.sysconf("SC_CLK_TCK")
STARTED = []


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def pids_now():
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def start(argv, **kw):
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, **kw)
    STARTED.append(p)
    return p


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def side_by_side(doc, window):
    """For the scripts that run builds at once (bench/serve): the builds named on the command
    line (at least two, else `doc` is printed), ROUNDS (3), WINDOW seconds (`window`), and each
    round's start order (rotated a build a round, so none always starts first)."""
    bins = sys.argv[1:]
    if len(bins) < 2:
        raise SystemExit(doc)
    rounds = int(os.environ.get("ROUNDS", "3"))
    orders = [bins[r % len(bins):] + bins[: r % len(bins)] for r in range(rounds)]
    return bins, orders, float(os.environ.get("WINDOW", str(window)))


def wait_for(what, check, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"ab.py: timed out waiting for {what}")


def http_ok(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        return s.recv(12).startswith(b"HTTP/1.1 200")


def bench_scan(binary):
    out = subprocess.run([binary, "bench", "-n", "200", "--scans", "300", "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    return {"scan µs CPU/process": r["per_process"]["cpu_us"], "scan / floor": r["per_process_ratio_cpu"]}


def http_get(port, path):
    """The whole response of one request on a connection of its own."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def resident_bytes(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def bench_serve(binary):
    port = free_port()
    p = start([binary, "serve", "--no-record", "--listen", f"127.0.0.1:{port}"],
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("serve to answer", lambda: http_ok(port, "/api/v1/agent"))
        time.sleep(10)  # the cmdline and PSS workers' first pass over every process
        c0, t0 = cpu_seconds(p.pid), time.monotonic()
        time.sleep(WINDOW)
        c1, t1 = cpu_seconds(p.pid), time.monotonic()
        rss, anon = resident_bytes(p.pid), resident_bytes(p.pid, "RssAnon")
        walls = []
        for _ in range(REQUESTS):
            started = time.perf_counter()
            reply = http_get(port, "/api/metrics/v1")
            walls.append(time.perf_counter() - started)
            if not reply.startswith(b"HTTP/1.1 200"):
                raise SystemExit(f"ab.py: /api/metrics/v1 answered {reply[:40]!r}")
        return {"serve CPU % of a core": 100 * (c1 - c0) / (t1 - t0), "serve RSS MiB": rss / 2**20,
                "serve RssAnon MiB": anon / 2**20,
                "/api/metrics/v1 p50 ms": 1000 * statistics.median(walls)}
    finally:
        stop(p)


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def bench_record(binary):
    port = free_port()
    data = tempfile.mkdtemp(prefix="ab-record.")
    p = start([binary, "serve", "--data-dir", data, "--listen", f"127.0.0.1:{port}"],
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    samples = lambda: json.loads(http_get(port, "/api/v1/agent").split(b"\r\n\r\n", 1)[1])["samples_total"]
    try:
        wait_for("serve to answer", lambda: http_ok(port, "/api/v1/agent"))
        time.sleep(10)  # past the first chunk's key frame and the workers' first pass
        n0, b0 = samples(), dir_bytes(data)
        time.sleep(RECORD_WINDOW)
        n1, b1 = samples(), dir_bytes(data)
        return {"store bytes/sample": (b1 - b0) / max(n1 - n0, 1)}
    finally:
        stop(p)
        shutil.rmtree(data, ignore_errors=True)


def bench_record_side(old, new):
    """Both builds recording at once: {"old": figures, "new": figures}."""
    runs = {}
    try:
        for side, binary in (("old", old), ("new", new)):
            port = free_port()
            data = tempfile.mkdtemp(prefix=f"ab-record-{side}.")
            p = start([binary, "serve", "--data-dir", data, "--listen", f"127.0.0.1:{port}"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            runs[side] = (port, data, p)
        for port, _, _ in runs.values():
            wait_for("serve to answer", lambda port=port: http_ok(port, "/api/v1/agent"))
        samples = lambda port: json.loads(http_get(port, "/api/v1/agent").split(b"\r\n\r\n", 1)[1])["samples_total"]
        time.sleep(10)
        first = {side: (samples(port), dir_bytes(data)) for side, (port, data, _) in runs.items()}
        time.sleep(RECORD_WINDOW)
        out = {}
        for side, (port, data, _) in runs.items():
            n0, b0 = first[side]
            n1, b1 = samples(port), dir_bytes(data)
            out[side] = {"store bytes/sample": (b1 - b0) / max(n1 - n0, 1)}
        return out
    finally:
        for _, data, p in runs.values():
            stop(p)
            shutil.rmtree(data, ignore_errors=True)


def statsd_stat(admin, name):
    with socket.create_connection(("127.0.0.1", admin), timeout=5) as s:
        s.sendall(b"stats\n")
        data = b""
        # The admin port answers as Etsy's does: the lines, then "END" and a blank line.
        while b"END\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    for line in data.decode().splitlines():
        key, _, value = line.partition(": ")
        if key == name:
            return float(value)
    return 0.0


def bench_statsd(binary, blaster):
    udp, admin = free_port(socket.SOCK_DGRAM), free_port()
    p = start([binary, "statsd", "--udp", f"127.0.0.1:{udp}", "--admin", f"127.0.0.1:{admin}"],
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("statsd's admin port", lambda: statsd_stat(admin, "proctor.packets_received") is not None)
        c0 = cpu_seconds(p.pid)
        subprocess.run([blaster, "--target", f"127.0.0.1:{udp}", "--packets", str(PACKETS), "--rate", str(RATE)],
                       check=True, stdout=subprocess.DEVNULL)

        def arrived():
            got = statsd_stat(admin, "proctor.packets_received")
            lost = statsd_stat(admin, "proctor.kernel_dropped_packets")
            return got if got + lost >= PACKETS else None

        received = wait_for("statsd to read every packet", arrived, 120)
        c1 = cpu_seconds(p.pid)
        return {"statsd CPU s/M packets": (c1 - c0) * 1e6 / received}
    finally:
        stop(p)


def bench_top(binary):
    if not shutil.which("tmux") or not shutil.which("htop"):
        raise SystemExit("ab.py: top needs tmux and htop (apt-get install tmux htop)")
    tag = f"ab-{os.getpid()}"
    tools = {"proctor": f"exec {binary} top --interval 1s --config /dev/null", "htop": "exec htop -d 10"}
    sessions = []
    try:
        for name, cmd in tools.items():
            session = f"{tag}-{name}"
            subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40", cmd], check=True)
            sessions.append(session)
        time.sleep(3)  # past start-up: the first samples, the first full draw
        pane = {s: int(subprocess.run(["tmux", "display-message", "-p", "-t", s, "#{pane_pid}"],
                                      check=True, capture_output=True, text=True).stdout) for s in sessions}
        before = {s: cpu_seconds(pid) for s, pid in pane.items()}
        time.sleep(WINDOW)
        used = {s: cpu_seconds(pid) - before[s] for s, pid in pane.items()}
        return {"top CPU / htop CPU": used[f"{tag}-proctor"] / max(used[f"{tag}-htop"], 1 / HZ)}
    finally:
        for s in sessions:
            subprocess.run(["tmux", "kill-session", "-t", s], stderr=subprocess.DEVNULL)


def spread(values):
    m = statistics.median(values)
    return (max(values) - min(values)) / m * 100 if m else 0.0


def main():
    old, new, blaster, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    wanted = sys.argv[5:] or ["scan", "serve", "record", "statsd", "top"]
    benches = {"scan": bench_scan, "serve": bench_serve, "record": bench_record, "record_side": None,
               "statsd": lambda b: bench_statsd(b, blaster), "top": bench_top}
    unknown = [w for w in wanted if w not in benches]
    if unknown:
        raise SystemExit(f"ab.py: unknown benchmark {unknown}; choose from {list(benches)}")
    sleepers = []
    try:
        while pids_now() < TARGET:
            sleepers.append(start(["sleep", "3600"], stdout=subprocess.DEVNULL))
        print(f"# {pids_now()} processes, {os.cpu_count()} CPUs, load {load()}; {rounds} rounds; "
              f"WINDOW={WINDOW:g} PACKETS={PACKETS} RATE={RATE}")
        print(f"# old: {old}\n# new: {new}")
        results = {}  # figure -> {"old": [...], "new": [...]}
        for r in range(rounds):
            order = [("old", old), ("new", new)] if r % 2 == 0 else [("new", new), ("old", old)]
            for name in wanted:
                if name == "record_side":
                    pair = bench_record_side(old, new)
                    for side in ("old", "new"):
                        for figure, value in pair[side].items():
                            results.setdefault(figure, {"old": [], "new": []})[side].append(value)
                    shown = "; ".join(f"{side} {k} {v:.3f}" for side in ("old", "new") for k, v in pair[side].items())
                    ratios = ", ".join(f"{k} new/old {pair['new'][k] / pair['old'][k]:.3f}" for k in pair["old"])
                    print(f"round {r + 1} {name}: {shown}; {ratios} (load {load()})", flush=True)
                    continue
                for side, binary in order:
                    figures = benches[name](binary)
                    for figure, value in figures.items():
                        results.setdefault(figure, {"old": [], "new": []})[side].append(value)
                    shown = ", ".join(f"{k} {v:.3f}" for k, v in figures.items())
                    print(f"round {r + 1} {name:6s} {side}: {shown} (load {load()})", flush=True)
        print()
        print(f"{'figure':26s} {'old median':>11s} {'new median':>11s} {'new/old':>8s} {'spread old':>11s} "
              f"{'spread new':>11s}  verdict")
        for figure, sides in results.items():
            mo, mn = statistics.median(sides["old"]), statistics.median(sides["new"])
            so, sn = spread(sides["old"]), spread(sides["new"])
            ratio = mn / mo if mo else float("nan")
            change = abs(ratio - 1) * 100
            # Beyond the spread only when the two sides' ranges do not overlap: every round of
            # one side costs more than every round of the other. (Comparing the medians' gap
            # with the spread called a rebuild of the same source 36 % slower on scan µs here:
            # 5.98–7.44 against 6.91–8.61, a machine whose speed drifts between rounds.)
            if len(sides["old"]) < 2:
                verdict = "one round: no spread to compare with"
            elif min(sides["new"]) > max(sides["old"]):
                verdict = f"slower: {change:.1f} %, every round above every old one"
            elif max(sides["new"]) < min(sides["old"]):
                verdict = f"faster: {change:.1f} %, every round below every old one"
            else:
                verdict = f"within the spread ({change:.1f} %; the rounds overlap)"
            print(f"{figure:26s} {mo:11.3f} {mn:11.3f} {ratio:8.3f} {so:10.1f}% {sn:10.1f}%  {verdict}")
    finally:
        for p in STARTED:
            stop(p)


if __name__ == "__main__":
    main()
