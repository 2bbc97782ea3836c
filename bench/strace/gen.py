#!/usr/bin/env python3
"""Writes a synthetic `strace -f -tt -T -y` log of N lines to stdout for the benchmark.

The mix imitates a busy multi-threaded server: reads and writes on -y paths and sockets,
futex waits that time out at 250 ms / 500 ms / 1 s, fast futex wake-ups, unfinished and
resumed halves interleaved across pids, errors, signals. Deterministic (fixed seed)."""
import random
import sys

lines = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
rng = random.Random(6)
out = sys.stdout
pids = [4100 + i for i in range(16)]
paths = ["/var/lib/app/data.db", "/var/log/app.log", "/etc/hosts", "/usr/lib/x86_64-linux-gnu/libc.so.6"]
socks = ["TCP:[10.0.0.5:8080->10.0.0.9:51234]", "UNIX:[123456]", "TCP:[10.0.0.5:8080->10.0.0.7:40022]"]
pending = {}
t = 36000.0
chunk = []
written = 0
while written < lines:
    t += rng.random() * 0.0005
    if t >= 86400:
        t -= 86400
    hh, rem = divmod(t, 3600)
    mm, ss = divmod(rem, 60)
    stamp = "%02d:%02d:%09.6f" % (hh, mm, ss)
    pid = rng.choice(pids)
    r = rng.random()
    if pid in pending:
        name, dur = pending.pop(pid)
        if name == "futex":
            line = "%d  %s <... futex resumed>) = -1 ETIMEDOUT (Connection timed out) <%.6f>" % (pid, stamp, dur)
        else:
            line = "%d  %s <... %s resumed>, \"\\x00\\x01payload\"..., 65536) = 4096 <%.6f>" % (pid, stamp, name, dur)
    elif r < 0.05:
        dur = rng.choice((0.25, 0.5, 1.0)) + rng.random() * 0.0003
        pending[pid] = ("futex", dur)
        line = "%d  %s futex(0x7f3a2c0%05x, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, 0, {tv_sec=1700000000, tv_nsec=%d}, FUTEX_BITSET_MATCH_ANY <unfinished ...>" % (pid, stamp, rng.randrange(1 << 20), rng.randrange(10**9))
    elif r < 0.08:
        pending[pid] = ("recvfrom", rng.random() * 0.01)
        line = "%d  %s recvfrom(7<%s>,  <unfinished ...>" % (pid, stamp, rng.choice(socks))
    elif r < 0.30:
        line = "%d  %s futex(0x7f3a2c0%05x, FUTEX_WAKE_PRIVATE, 1) = %d <0.0000%02d>" % (pid, stamp, rng.randrange(1 << 20), rng.randrange(2), rng.randrange(2, 40))
    elif r < 0.55:
        n = rng.randrange(1, 65536)
        line = "%d  %s read(%d<%s>, \"some bytes of the file\"..., 65536) = %d <0.0000%02d>" % (pid, stamp, rng.randrange(3, 40), rng.choice(paths), n, rng.randrange(1, 99))
    elif r < 0.75:
        n = rng.randrange(1, 4096)
        line = "%d  %s write(%d<%s>, \"HTTP/1.1 200 OK\\r\\nContent-Length: 42\"..., %d) = %d <0.0000%02d>" % (pid, stamp, rng.randrange(3, 40), rng.choice(socks), n, n, rng.randrange(1, 99))
    elif r < 0.85:
        line = "%d  %s openat(AT_FDCWD</srv>, \"/srv/static/%d.html\", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory) <0.0000%02d>" % (pid, stamp, rng.randrange(10000), rng.randrange(3, 60))
    elif r < 0.95:
        line = "%d  %s epoll_wait(5<anon_inode:[eventpoll]>, [{events=EPOLLIN, data={u32=7, u64=7}}], 1024, 100) = 1 <0.%06d>" % (pid, stamp, rng.randrange(100000))
    elif r < 0.999:
        line = "%d  %s clock_gettime(CLOCK_MONOTONIC, {tv_sec=%d, tv_nsec=%d}) = 0 <0.000002>" % (pid, stamp, rng.randrange(10**6), rng.randrange(10**9))
    else:
        line = "%d  %s --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=%d, si_uid=1000, si_status=0, si_utime=0, si_stime=0} ---" % (pid, stamp, rng.randrange(5000, 9000))
    chunk.append(line)
    written += 1
    if len(chunk) >= 10000:
        out.write("\n".join(chunk))
        out.write("\n")
        chunk = []
if chunk:
    out.write("\n".join(chunk))
    out.write("\n")
