#!/usr/bin/env python3
"""proctor statsd vs Etsy statsd 0.9.0 on loopback: % received, drain rate, CPU per million.

Started by run.sh, which builds the binaries and installs Etsy statsd. Every server is started
here, stopped here by its own PID, and bound to 127.0.0.1; the blaster sends a bounded number of
packets. Received counts come from each server's admin port with flushing effectively off
(flush interval 1 h), so nothing resets them during a run.
"""
import json, os, re, signal, socket, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROCTOR = os.path.join(ROOT, "target/release/proctor")
# Another build to compare in the same run (e.g. the commit before a change), as contender
# "proctor-baseline": PROCTOR_BASELINE=path/to/proctor.
BASELINE = os.environ.get("PROCTOR_BASELINE")
BLAST = os.path.join(ROOT, "target/release/examples/statsd_blast")
ETSY = os.path.join(ROOT, "target/etsy-statsd/node_modules/statsd/stats.js")
TICKS = os.sysconf("SC_CLK_TCK")


def free_port(kind):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def admin(port, command):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall((command + "\n").encode())
        data = b""
        while not data.endswith(b"END\n\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.decode()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Server:
    def __init__(self, name, udp, mgmt, argv, received):
        self.name, self.udp, self.mgmt, self.received_fn = name, udp, mgmt, received
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.time() + 20
        while True:
            try:
                admin(self.mgmt, "stats")
                break
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    self.log.seek(0)
                    raise SystemExit(f"{name} did not start: {self.log.read().decode()}")
                time.sleep(0.05)

    def received(self):
        return self.received_fn(admin(self.mgmt, self.received_fn.command))

    def drops(self):
        text = admin(self.mgmt, "stats")
        found = [re.search(rf"proctor.{name}: (\d+)", text) for name in
                 ("kernel_dropped_packets", "queue_dropped_packets", "shard_queue_dropped_metrics")]
        return [int(m.group(1)) for m in found]

    def stop(self):
        # Only the process this script started, by PID.
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def proctor_received(text):
    return int(re.search(r"proctor.packets_received: (\d+)", text).group(1))
proctor_received.command = "stats"


def etsy_received(text):
    return int(re.search(r"'?statsd\.packets_received'?: (\d+)", text).group(1))
etsy_received.command = "counters"


def start(contender):
    udp, mgmt = free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_STREAM)
    if contender.startswith("proctor"):
        binary = BASELINE if contender == "proctor-baseline" else PROCTOR
        argv = [binary, "statsd", "--udp", f"127.0.0.1:{udp}", "--admin", f"127.0.0.1:{mgmt}",
                "--flush-interval", "1h"]
        if contender == "proctor-small-buffer":
            # What Etsy gets by default: net.core.rmem_default, reported doubled by the kernel.
            argv += ["--rcvbuf", str(read_int("/proc/sys/net/core/rmem_default") // 2)]
        return Server(contender, udp, mgmt, argv, proctor_received)
    config = tempfile.NamedTemporaryFile("w", suffix=".js", delete=False)
    json.dump({"address": "127.0.0.1", "port": udp, "mgmt_address": "127.0.0.1", "mgmt_port": mgmt,
               "flushInterval": 3600000, "backends": []}, config)
    config.close()
    return Server(contender, udp, mgmt, ["node", ETSY, config.name], etsy_received)


def read_int(path):
    with open(path) as f:
        return int(f.read())


def measure(contender, packets, rate):
    server = start(contender)
    try:
        cpu0 = cpu_seconds(server.proc.pid)
        t0 = time.monotonic()
        blast = subprocess.run([BLAST, "--target", f"127.0.0.1:{server.udp}", "--packets", str(packets),
                                "--rate", str(rate)], capture_output=True, text=True, check=True)
        sent = json.loads(blast.stdout)
        # Wait until the count stops moving: the server has drained its socket buffer.
        last, last_change, deadline = -1, time.monotonic(), time.monotonic() + 120
        cpu_at_change = cpu0
        while time.monotonic() < deadline:
            now_received = server.received()
            if now_received != last:
                last, last_change = now_received, time.monotonic()
                # CPU up to the last packet handled, not the idle second of waiting after it.
                cpu_at_change = cpu_seconds(server.proc.pid)
            elif time.monotonic() - last_change > 1.0:
                break
            time.sleep(0.05)
        cpu = cpu_at_change - cpu0
        drops = server.drops() if contender.startswith("proctor") else [None, None, None]
        drain_seconds = max(last_change - t0, 1e-9)
        return {
            "contender": contender, "packets": packets, "target_rate": rate,
            "sent": sent["sent"], "send_rate": sent["rate"], "received": last,
            "received_pct": 100.0 * last / sent["sent"], "drain_rate": last / drain_seconds,
            "cpu_seconds": cpu, "cpu_per_million": cpu / max(last / 1e6, 1e-9), "kernel_drops": drops[0],
            "queue_drops": drops[1], "shard_drops": drops[2],
        }
    finally:
        server.stop()


def median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def table(results):
    """One row per (contender, packets, rate): medians over the rounds, and CPU per million as a
    ratio to Etsy's median in the same row group."""
    groups = {}
    for r in results:
        groups.setdefault((r["packets"], r["target_rate"], r["contender"]), []).append(r)
    etsy = {(p, t): median([r["cpu_per_million"] for r in rs]) for (p, t, c), rs in groups.items() if c == "etsy"}
    print("| contender | packets | target pkt/s | rounds | sent pkt/s | received % | drain pkt/s | CPU s | CPU s / M pkts | ÷ Etsy | kernel drops | queue drops |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (packets, target, contender), rs in groups.items():
        m = lambda key: median([r[key] for r in rs])
        rate = "full" if target == 0 else f"{target:,}"
        ratio = etsy.get((packets, target))
        ratio = f"{m('cpu_per_million') / ratio:.2f}" if ratio else ""
        drops = "" if rs[0]["kernel_drops"] is None else f"{m('kernel_drops'):,.0f}"
        queue = "" if rs[0]["queue_drops"] is None else f"{median([r['queue_drops'] + r['shard_drops'] for r in rs]):,.0f}"
        print(f"| {contender} | {packets:,} | {rate} | {len(rs)} | {m('send_rate'):,.0f} | {m('received_pct'):.2f} | "
              f"{m('drain_rate'):,.0f} | {m('cpu_seconds'):.2f} | {m('cpu_per_million'):.2f} | {ratio} | {drops} | {queue} |")


def main():
    contenders = ["proctor", "proctor-small-buffer", "etsy"]
    if BASELINE:
        contenders.insert(0, "proctor-baseline")
    contenders = os.environ.get("CONTENDERS", " ".join(contenders)).split()
    full = int(os.environ.get("FULL_PACKETS", "5000000"))
    rates = [int(r) for r in os.environ.get("RATES", "20000 60000 100000 200000 500000").split()]
    sweep_seconds = float(os.environ.get("SWEEP_SECONDS", "3"))
    rounds = int(os.environ.get("ROUNDS", "1"))
    results = []
    print(f"# load before: {open('/proc/loadavg').read().strip()}", flush=True)
    # Rounds interleave the contenders, so a slow spell on the machine hits all of them.
    for _ in range(rounds):
        for contender in contenders:
            results.append(measure(contender, full, 0))
            print(json.dumps(results[-1]), flush=True)
        for rate in rates:
            for contender in contenders:
                results.append(measure(contender, int(rate * sweep_seconds), rate))
                print(json.dumps(results[-1]), flush=True)
    print(f"# load after: {open('/proc/loadavg').read().strip()}", flush=True)
    print()
    table(results)
    out = os.path.join(ROOT, "bench/out")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"statsd-{int(time.time())}.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
