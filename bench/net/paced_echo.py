"""The paced UDP echo that bench/net/cost.py and bench/net/reader.py run beside the agent."""

# A sender paces datagrams to an echo process that answers each: RATE packets a second on
# loopback in all (RATE / 2 each way), every millisecond's share sent in a burst.
WORKLOAD = r'''
import socket, sys, time
rate, secs = int(sys.argv[1]), float(sys.argv[2])
e = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); e.bind(('127.0.0.1', 0))
import os
if os.fork() == 0:
    e.settimeout(2.0)
    try:
        while True:
            b, a = e.recvfrom(2048); e.sendto(b, a)
    except OSError:
        os._exit(0)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(e.getsockname())
per_ms = rate / 2 / 1000.0
start = time.monotonic(); sent = 0; payload = b'p' * 200
while True:
    now = time.monotonic() - start
    if now >= secs: break
    due = int(now * 1000 * per_ms)
    while sent < due:
        s.send(payload); s.recv(2048); sent += 1
    time.sleep(0.0005)
print(sent * 2, flush=True)
os.wait()
'''
