"""The paced echoes that bench/net/cost.py, reader.py and programs.py run beside the agent: UDP
(`WORKLOAD`) and, for programs.py's PROTO=tcp, one TCP connection (`WORKLOAD_TCP`)."""

# The pacing both share: `exchange()` sends one 200-byte message and takes its echo, RATE / 2
# times a second, every millisecond's share in a burst; then the count of packets both ways.
PACE = r'''
per_ms = rate / 2 / 1000.0
start = time.monotonic(); sent = 0; payload = b'p' * 200
while True:
    now = time.monotonic() - start
    if now >= secs: break
    due = int(now * 1000 * per_ms)
    while sent < due:
        exchange(); sent += 1
    time.sleep(0.0005)
s.close()
print(sent * 2, flush=True)
os.wait()
'''

# A sender paces datagrams to an echo process that answers each: RATE packets a second on
# loopback in all (RATE / 2 each way).
WORKLOAD = r'''
import socket, sys, time, os
rate, secs = int(sys.argv[1]), float(sys.argv[2])
e = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); e.bind(('127.0.0.1', 0))
if os.fork() == 0:
    e.settimeout(2.0)
    try:
        while True:
            b, a = e.recvfrom(2048); e.sendto(b, a)
    except OSError:
        os._exit(0)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(e.getsockname())
def exchange():
    s.send(payload); s.recv(2048)
''' + PACE

# The same over one TCP connection: each message answered by the echo, which acknowledges it
# in the answer (its segments and the last ACKs: about RATE packets a second).
WORKLOAD_TCP = r'''
import socket, sys, time, os
rate, secs = int(sys.argv[1]), float(sys.argv[2])
l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()
if os.fork() == 0:
    c, _ = l.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = c.recv(2048)
        if not b: os._exit(0)
        c.sendall(b)
s = socket.create_connection(l.getsockname()); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
def exchange():
    s.sendall(payload); got = 0
    while got < len(payload): got += len(s.recv(2048))
''' + PACE
