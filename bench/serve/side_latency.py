#!/usr/bin/env python3
"""Two or more builds' `proctor serve --no-record` running at once, each asked the same
endpoints in turn (a connection per request, 200 requests a build a round, 2 rounds), so the
builds' request latencies are compared under the same machine state. `bench/ab.sh serve`
measures one build at a time after an idle window, where a server's wake-up from idle can
weigh more than its handler; this one keeps every build equally awake.

    python3 bench/serve/side_latency.py OLD_BIN NEW_BIN [PATH ...]
    (default paths: /api/metrics/v1 /api/v1/container)

Prints each build's median wall time per path and round. Loopback only; the servers it starts
are stopped by their pids.
"""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ab import free_port, http_get as get  # noqa: E402  (bench/ab.py: one request, one connection)


def main():
    bins = [a for a in sys.argv[1:] if not a.startswith("/api") and a != "/metrics"]
    paths = [a for a in sys.argv[1:] if a.startswith("/api") or a == "/metrics"] or ["/api/metrics/v1", "/api/v1/container"]
    if len(bins) < 2:
        raise SystemExit(__doc__)
    ports = [free_port() for _ in bins]
    procs = [subprocess.Popen([b, "serve", "--no-record", "--listen", f"127.0.0.1:{p}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for b, p in zip(bins, ports)]
    try:
        deadline = time.monotonic() + 60
        for port in ports:
            while True:
                try:
                    if get(port, "/api/v1/agent").startswith(b"HTTP/1.1 200"):
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("a server did not answer in 60 s")
                time.sleep(0.1)
        time.sleep(10)  # the workers' first pass over every process
        procs_now = sum(1 for e in os.listdir("/proc") if e.isdigit())
        print(f"# {procs_now} processes, load {' '.join(open('/proc/loadavg').read().split()[:3])}")
        for path in paths:
            for rnd in (1, 2):
                for b, port in zip(bins, ports):
                    walls = []
                    for _ in range(200):
                        t = time.perf_counter()
                        reply = get(port, path)
                        walls.append(time.perf_counter() - t)
                    print(f"{path:24s} round {rnd}  {b:40s} p50 {1000 * statistics.median(walls):.3f} ms  "
                          f"({reply[:12].decode(errors='replace')}, {len(reply)} bytes)")
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


if __name__ == "__main__":
    main()
