"""What the PSS benchmarks here share: a big child like one of the impact tree's, a load that
comes and goes, and a `proctor serve` on a free loopback port."""
import json
import socket
import subprocess
import time
import urllib.request


def child_source(size_mib):
    """A python that keeps SIZE MiB resident, prints a line once it does, then writes 40 of its
    pages every 5 ms: pages it already has, so its fault counters stand (it reads as unchanged)
    while its threads keep using their memory, like one of the impact tree's children."""
    return f"""
import mmap, time
n = {int(size_mib)} << 20
m = mmap.mmap(-1, n)
for i in range(0, n, 4096): m[i] = 1
print(flush=True)
i = 0
while True:
    for k in range(40):
        m[(i * 4096 * 97) % n] = 2; i += 1
    time.sleep(0.005)
"""


# A loop that runs for a random spell (0.2-2 s), then sleeps for another (0-1.9 s), seeded by
# its first argument (bash's RANDOM): two of them make a machine whose load comes and goes (a
# build's compilers, a trace's bursts). Ended by its pid.
FLICKER = r'''
RANDOM=$1
while :; do
  t=${EPOCHREALTIME/./}
  stop=$(( t + (RANDOM % 1800 + 200) * 1000 ))
  while (( t < stop )); do t=${EPOCHREALTIME/./}; done
  sleep "$(( RANDOM % 2 )).$(( RANDOM % 10 ))"
done
'''


def flickering(seeds):
    """Two (or more) FLICKER loops, one per seed."""
    return [subprocess.Popen(["bash", "-c", FLICKER, "flicker", str(s)]) for s in seeds]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.load(r)


def serve(binary, *args, prefix=()):
    """`BINARY serve --no-record` on a free loopback port with ARGS, once its API answers (30 s
    at most): the process and its port. `prefix`: a command it runs under (`taskset -c 1`)."""
    port = free_port()
    proc = subprocess.Popen([*prefix, binary, "serve", "--no-record", "--listen", f"127.0.0.1:{port}", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.time()
    while True:
        try:
            get(port, "/api/v1/agent")
            return proc, port
        except OSError:
            if time.time() - started > 30:
                proc.kill()
                proc.wait()
                raise
            time.sleep(0.1)
