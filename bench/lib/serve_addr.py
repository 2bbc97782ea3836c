"""Starts a `proctor serve` command line for the bench scripts and waits (30 s at most) for the
address it prints on stderr: returns (process, "127.0.0.1:PORT"); `agent` reads its
`/api/v1/agent`."""
import json
import select
import subprocess
import time
import urllib.request


def start(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        ready, _, _ = select.select([p.stderr], [], [], 1.0)
        if ready:
            line = p.stderr.readline()
            if "http://" in line:
                return p, line.split("http://", 1)[1].split()[0].rstrip("/")
    p.kill()
    raise SystemExit(f"{' '.join(cmd)}: serve did not start")


def agent(addr):
    """The serve at `addr`'s `/api/v1/agent` document."""
    with urllib.request.urlopen(f"http://{addr}/api/v1/agent", timeout=10) as r:
        return json.loads(r.read())
