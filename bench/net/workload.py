#!/usr/bin/env python3
"""The mixed loopback workload of bench/net's accuracy half (issue 36): a TCP bulk transfer
between two processes, datagrams both ways between two more, and many small HTTP requests to
python's own http.server, each peer a process of its own that knows what it sent and received.
Prints `done name=N pid=P sent=S received=R` per peer (payload bytes, as send and receive
returned them), then `all done`, and keeps every peer alive until a line comes on stdin (so
their rows are read while they live).
    python3 bench/net/workload.py [BULK_MB] [DATAGRAMS] [REQUESTS]
"""
import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

BULK = int(float(sys.argv[1]) * 1e6) if len(sys.argv) > 1 else 50_000_000
DATAGRAMS = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
REQUESTS = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000

PEER = r'''
import os, socket, sys
mode = sys.argv[1]
def done(name, sent, received):
    print(f'done name={name} pid={os.getpid()} sent={sent} received={received}', flush=True)
    sys.stdin.readline()
if mode == 'tcp-server':
    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()
    print(s.getsockname()[1], flush=True)
    a, _ = s.accept(); got = 0
    while True:
        b = a.recv(1 << 16)
        if not b: break
        got += len(b)
    a.sendall(b'ok'); a.close()
    done('tcp-server', 2, got)
elif mode == 'tcp-client':
    n = int(sys.argv[3]); c = socket.create_connection(('127.0.0.1', int(sys.argv[2])))
    chunk = b'x' * (1 << 16); left = n
    while left: k = min(left, len(chunk)); c.sendall(chunk[:k]); left -= k
    c.shutdown(socket.SHUT_WR); got = len(c.recv(16))
    done('tcp-client', n, got)
elif mode == 'udp-echo':
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('127.0.0.1', 0))
    print(u.getsockname()[1], flush=True)
    n = int(sys.argv[2]); sent = got = 0
    for _ in range(n):
        b, addr = u.recvfrom(4096); got += len(b); sent += u.sendto(b, addr)
    done('udp-echo', sent, got)
elif mode == 'udp-client':
    port, n = int(sys.argv[2]), int(sys.argv[3])
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); sent = got = 0
    for i in range(n):
        sent += u.sendto(b'd' * (64 + i % 1400), ('127.0.0.1', port)); got += len(u.recv(4096))
    done('udp-client', sent, got)
elif mode == 'http-client':
    port, n = int(sys.argv[2]), int(sys.argv[3])
    req = b'GET /page HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n'; got = 0
    for _ in range(n):
        c = socket.create_connection(('127.0.0.1', port)); c.sendall(req)
        while True:
            b = c.recv(1 << 16)
            if not b: break
            got += len(b)
        c.close()
    print(f'served {len(req) * n} {got}', flush=True)
    done('http-client', len(req) * n, got)
'''


def main():
    tmp = tempfile.mkdtemp(prefix="proctor-net-bench-")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    peer = os.path.join(tmp, "peer.py")
    with open(peer, "w") as f:
        f.write(PEER)
    with open(os.path.join(tmp, "page"), "w") as f:
        f.write("p" * 2000)
    procs = []

    def start(*args, cwd=None):
        p = subprocess.Popen([sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=cwd)
        procs.append(p)
        return p

    server = start(peer, "tcp-server")
    client = start(peer, "tcp-client", server.stdout.readline().strip(), str(BULK))
    echo = start(peer, "udp-echo", str(DATAGRAMS))
    uclient = start(peer, "udp-client", echo.stdout.readline().strip(), str(DATAGRAMS))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    http = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)], cwd=tmp,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    hclient = start(peer, "http-client", str(port), str(REQUESTS))
    for p in (server, client, echo, uclient):
        print(p.stdout.readline().strip(), flush=True)
    served = hclient.stdout.readline().split()
    print(hclient.stdout.readline().strip(), flush=True)
    # The server's truth is the client's, mirrored (what one sent the other received), less the
    # readiness probe's connection (no bytes).
    print(f"done name=http.server pid={http.pid} sent={served[2]} received={served[1]}", flush=True)
    print("all done", flush=True)
    sys.stdin.readline()
    for p in procs:
        try:
            p.stdin.write("\n")
            p.stdin.flush()
        except OSError:
            pass
        p.wait()
    http.terminate()
    http.wait()


if __name__ == "__main__":
    main()
