"""What bench.py and ab.py share: `sleep` processes that bring the host to a number of
processes, killed when the block ends."""
import contextlib
import os
import subprocess


def count_pids():
    return sum(1 for e in os.listdir("/proc") if e.isdigit())


@contextlib.contextmanager
def sleepers(target, seconds=3600):
    """Starts `sleep` processes until /proc lists `target` processes; kills them at the end."""
    started = []
    try:
        while count_pids() < target:
            started.append(subprocess.Popen(["sleep", str(seconds)], stdin=subprocess.DEVNULL))
        yield started
    finally:
        for s in started:
            s.kill()
        for s in started:
            s.wait()
