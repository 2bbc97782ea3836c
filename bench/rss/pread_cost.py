"""What one `pread` at offset 0 of a kept-open `/proc/PID/{stat,statm,status}` costs, in CPU µs
of this thread, median of 7 passes of 200 reads of every process's file. It prices the ways to
read an exact resident size each cycle (issue 32 item 4): `statm` beside `stat`, or `status`.
The Python call overhead (a few tenths of a µs) is in all three figures alike.
Usage: python3 bench/rss/pread_cost.py
"""

import os
import statistics
import time

PASSES, ROUNDS = 7, 200


def main():
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    print(f"kernel {os.uname().release}, {os.cpu_count()} CPUs, {len(pids)} processes")
    for name in ("stat", "statm", "status"):
        fds = []
        for pid in pids:
            try:
                fds.append(os.open(f"/proc/{pid}/{name}", os.O_RDONLY))
            except OSError:
                pass
        per_read = []
        for _ in range(PASSES):
            t = time.thread_time_ns()
            for _ in range(ROUNDS):
                for fd in fds:
                    try:
                        os.pread(fd, 4096, 0)
                    except OSError:
                        pass
            per_read.append((time.thread_time_ns() - t) / ROUNDS / len(fds) / 1000)
        for fd in fds:
            os.close(fd)
        print(f"/proc/PID/{name:<7} {statistics.median(per_read):5.2f} µs CPU per pread (median of {PASSES})")


if __name__ == "__main__":
    main()
