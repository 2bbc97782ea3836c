"""Helpers for the proctor Python tests: real Jupyter servers on loopback, real kernels that
fork real children. Every process started here is stopped by pid in a `finally`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional

import pytest

TOKEN = "proctor-test-token"

# The same jupyter-resource-usage settings for both extensions, so their answers have the
# same shape; every optional key present.
FULL_SETTINGS = {
    "track_cpu_percent": "True",
    "track_disk_usage": "True",
    "disk_path": "/",
    "mem_limit": str(8 << 30),
    "cpu_limit": "2.0",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(fn, what: str, seconds: float = 60.0, every: float = 0.1):
    """Calls `fn` until it returns something truthy; fails the test naming `what` otherwise."""
    deadline = time.monotonic() + seconds
    last_error: Optional[BaseException] = None
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
        except Exception as e:  # not up yet
            last_error = e
        time.sleep(every)
    pytest.fail(f"timed out waiting for {what} (last error: {last_error!r})")


class JupyterServer:
    """A `jupyter server` subprocess on a free loopback port with a token.

    `extension` is "proctor" (proctor.jupyter on, jupyter-resource-usage's server extension
    off) or "jru" (the other way round). `settings` go to the extension's config class."""

    def __init__(self, extension: str, settings: Dict[str, str], workdir: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.runtime_dir = os.path.join(workdir, "runtime")
        os.makedirs(self.runtime_dir, exist_ok=True)
        cls = "ProctorResourceUse" if extension == "proctor" else "ResourceUseDisplay"
        on, off = ("proctor.jupyter", "jupyter_resource_usage")
        if extension != "proctor":
            on, off = off, on
        args = [
            sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
            f"--ServerApp.port={self.port}", "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={workdir}",
            f"--ServerApp.jpserver_extensions={on}=True",
            f"--ServerApp.jpserver_extensions={off}=False",
        ] + [f"--{cls}.{k}={v}" for k, v in settings.items()]
        env = dict(os.environ, JUPYTER_RUNTIME_DIR=self.runtime_dir)
        env.pop("MEM_LIMIT", None)
        env.pop("CPU_LIMIT", None)
        self.log_path = os.path.join(workdir, f"jupyter-{extension}.log")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(self.log_path, "w"), env=env)
        self.kernels: List[str] = []
        self.clients: List[Any] = []
        wait_for(lambda: self.get("/api/status"), f"jupyter server ({extension}) to answer", 60)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def request(self, path: str, method: str = "GET", body: Optional[bytes] = None, auth: bool = True):
        """(status, parsed JSON body or None)."""
        req = urllib.request.Request(self.base + path, data=body, method=method)
        if auth:
            req.add_header("Authorization", f"token {TOKEN}")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, None

    def get(self, path: str):
        status, body = self.request(path)
        assert status == 200, f"GET {path}: {status} {body}"
        return body

    def get_text(self, path: str) -> str:
        req = urllib.request.Request(self.base + path)
        req.add_header("Authorization", f"token {TOKEN}")
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read().decode()

    def start_kernel(self) -> str:
        status, body = self.request("/api/kernels", "POST", b"{}")
        assert status == 201, f"start kernel: {status} {body}"
        self.kernels.append(body["id"])
        return body["id"]

    def kernel_client(self, kernel_id: str):
        """A jupyter_client client on the kernel's own connection file."""
        from jupyter_client import BlockingKernelClient

        path = os.path.join(self.runtime_dir, f"kernel-{kernel_id}.json")
        wait_for(lambda: os.path.exists(path), "the kernel's connection file", 30)
        client = BlockingKernelClient(connection_file=path)
        client.load_connection_file()
        client.start_channels()
        client.wait_for_ready(timeout=60)
        self.clients.append(client)
        return client

    def stop(self) -> None:
        for client in self.clients:
            client.stop_channels()
        for kid in self.kernels:
            try:
                self.request(f"/api/kernels/{kid}", "DELETE")
            except Exception:
                pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# Kernel code: fork `n` children that each hold `mib` MiB, touched page by page. With
# shared=True the memory is allocated once before forking (copy-on-write: shared pages, as in
# the repro); otherwise each child allocates its own. Children die with the kernel
# (PR_SET_PDEATHSIG) and print their pids as JSON.
FORK_CODE = r"""
import ctypes, json, os, signal, time
_shared = bytearray({mib} << 20) if {shared} else None
if _shared is not None:
    for _i in range(0, len(_shared), 4096):
        _shared[_i] = 1
_pids = []
for _n in range({n}):
    _pid = os.fork()
    if _pid == 0:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if _shared is None:
            _mine = bytearray({mib} << 20)
            for _i in range(0, len(_mine), 4096):
                _mine[_i] = 1
        while True:
            time.sleep(60)
    _pids.append(_pid)
print(json.dumps(_pids))
"""


def run_fork_code(client, n: int, mib: int, shared: bool) -> List[int]:
    out: List[str] = []

    def hook(msg):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append("ERROR " + "\n".join(msg["content"]["traceback"]))

    reply = client.execute_interactive(FORK_CODE.format(n=n, mib=mib, shared=shared), timeout=120, output_hook=hook)
    assert reply["content"]["status"] == "ok", "".join(out)
    return json.loads("".join(out).strip().splitlines()[-1])


def kill_pids(pids: List[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def workdir():
    with tempfile.TemporaryDirectory(prefix="proctor-py-test-") as d:
        yield d


@pytest.fixture
def servers(workdir):
    """Starts servers on demand; stops all of them at the end of the test."""
    started: List[JupyterServer] = []

    def start(extension: str, settings: Optional[Dict[str, str]] = None) -> JupyterServer:
        server = JupyterServer(extension, settings if settings is not None else FULL_SETTINGS, workdir)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in reversed(started):
            server.stop()


def shape(value):
    """Keys in order and JSON types, recursively: what a client of the JSON depends on."""
    if isinstance(value, dict):
        return [(k, shape(v)) for k, v in value.items()]
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return type(value).__name__
