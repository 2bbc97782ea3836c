#!/usr/bin/env python3
"""The statsd half of the standing attack suite (issue 15): ~21,000 malformed packets over UDP
and hostile TCP streams against a real `proctor statsd`, bounded to seconds. Every bad line must
be counted by reason on the admin port, the server must stay up with bounded memory, and a
good metric sent afterwards must still be aggregated. Python's standard library only.

Usage: statsd_attacks.py PROCTOR_BIN
"""

import os
import random
import select
import socket
import subprocess
import sys
import threading
import time

FAILURES = []


def bound_ports(proc, deadline):
    """The ports statsd says it bound (`proctor statsd: udp|tcp|admin 127.0.0.1:PORT`), read
    from its stderr until the admin line; it was started on port 0, so no other process can
    take a port between its choice and its bind."""
    ports, pending, fd = {}, b"", proc.stderr.fileno()
    while "admin" not in ports:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            sys.exit(f"FAIL: statsd did not say its ports (exit {proc.poll()}): {ports}")
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            words = line.decode(errors="replace").split()
            if len(words) >= 4 and words[:2] == ["proctor", "statsd:"] and words[2] in ("udp", "tcp", "admin"):
                ports[words[2]] = int(words[3].rsplit(":", 1)[1])
    # Drained from here on, so that statsd never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in iter(lambda: os.read(fd, 65536), b"")], daemon=True).start()
    return ports["udp"], ports["tcp"], ports["admin"]


def admin(port, command):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(command.encode() + b"\n")
        data = b""
        while b"END" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.decode("utf-8", "replace")


def stats(port):
    out = {}
    for line in admin(port, "stats").splitlines():
        name, _, value = line.partition(": ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def malformed_packets(r):
    """About 21,000 packets, each bad in its own way (some carry a good line beside a bad one)."""
    fixed = [
        b"", b"\n", b"\n\n\n", b":", b"::", b"|", b"key", b"key:", b"key:1", b"key:1|", b"key:1|x",
        b"key:|c", b":1|c", b"key:abc|c", b"key:1|c|@", b"key:1|c|@abc", b"key:1|c|@-1", b"key:1|c|@2",
        b"key:1|c|#", b"key:NaN|g", b"key:inf|ms", b"key:-inf|c", b"key:1e999|g", b"key:-5|ms",
        b"key:1|ms|@0", b"key:0x10|c", b"key:1,5|c", b"key: 1|c", b"key:1 |c", b"key:1|C", b"key:1|MS",
        b"k\x00ey:1|c", b"key:1\x00|c", b"\xff\xfe:1|c", b"key:1|c\r", b"key:1|c\n\x00",
        b"key:" + b"9" * 400 + b"|c", b"key:1|s|s", b"key:+-1|g", b"key:--1|g", b"key:1|h|@0.5|#a:b",
        b"k" * 2000 + b":1|c",
    ]
    packets = []
    for packet in fixed:
        packets.extend([packet] * 100)
    alphabet = b"abc:|@#.,-+019eE \t\x00\xff\n"
    for _ in range(16_000):
        size = r.choice([1, 3, 8, 20, 64, 200, 1400])
        packets.append(bytes(r.choice(alphabet) for _ in range(size)))
    for _ in range(800):
        # Many lines in one packet, most of them broken.
        packets.append(b"\n".join(bytes(r.choice(alphabet) for _ in range(12)) for _ in range(50)))
    r.shuffle(packets)
    return packets


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    proc = subprocess.Popen(
        [binary, "statsd", "--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--admin", "127.0.0.1:0",
         "--flush-interval", "1s", "--max-mib", "16"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        udp, tcp, admin_port = bound_ports(proc, deadline)
        while True:
            try:
                before = stats(admin_port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit("FAIL: statsd did not start")
                time.sleep(0.05)
        rss_before = rss_mib(proc.pid)
        r = random.Random(15)
        packets = malformed_packets(r)
        sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        started = time.monotonic()
        for index, packet in enumerate(packets):
            sender.sendto(packet, ("127.0.0.1", udp))
            if index % 200 == 0:
                time.sleep(0.002)  # paced: the kernel's buffer, not the sender, decides
        # TCP: a line with no end (64 MiB), a NUL flood, and half a line then a close.
        streams = 0
        for payload in [b"k" * (64 << 20), b"\x00" * (1 << 20), b"key:1|c\nkey:2|", b"\xff" * 100_000 + b"\n"]:
            try:
                with socket.create_connection(("127.0.0.1", tcp), timeout=10) as conn:
                    conn.sendall(payload)
                streams += 1
            except OSError as err:
                streams += 1  # the server may close a hostile stream early: that is its answer
                print(f"  tcp stream of {len(payload)} bytes: closed by the server ({err.__class__.__name__})")
        # Then a good line: still aggregated.
        sender.sendto(b"attack.survivor:7|c", ("127.0.0.1", udp))
        time.sleep(1.5)
        after = stats(admin_port)
        took = time.monotonic() - started
        received = after.get("proctor.packets_received", 0) - before.get("proctor.packets_received", 0)
        dropped = after.get("proctor.kernel_dropped_packets", 0) - before.get("proctor.kernel_dropped_packets", 0)
        bad = {name.split(".")[-1]: value for name, value in after.items() if name.startswith("proctor.bad_lines.") and value}
        counters = admin(admin_port, "counters")
        rss_after = rss_mib(proc.pid)
        if proc.poll() is not None:
            FAILURES.append(f"statsd exited with {proc.returncode}")
        if "attack.survivor" not in counters:
            FAILURES.append("a good line after the attack was not aggregated")
        if received + dropped < len(packets):
            FAILURES.append(f"{len(packets)} sent, {received:.0f} received + {dropped:.0f} dropped by the kernel")
        if sum(bad.values()) < 1000:
            FAILURES.append(f"too few bad lines counted: {bad}")
        if rss_after > 128:
            FAILURES.append(f"RSS {rss_after:.1f} MiB")
        print(f"statsd: {len(packets)} malformed packets and {streams} hostile TCP streams in {took:.1f} s; "
              f"{received:.0f} received, {dropped:.0f} dropped by the kernel; bad lines by reason: "
              + ", ".join(f"{name} {count:.0f}" for name, count in sorted(bad.items()))
              + f"; RSS {rss_before:.1f} → {rss_after:.1f} MiB; a good line after it still counted")
    finally:
        proc.kill()
        proc.wait()
    if FAILURES:
        print("FAIL: statsd attacks:", *FAILURES, sep="\n  ")
        sys.exit(1)


if __name__ == "__main__":
    main()
