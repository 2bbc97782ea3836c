"""proctor: a Linux monitor that never becomes the load, for Python.

The numbers come from proctor's Rust core (``proctor._core``):

- :func:`effective_cpu_count` — the CPUs this process can really use (affinity and every
  cgroup quota up the tree), which ``os.cpu_count()`` gets wrong in containers;
- :func:`limits` — the container's memory and CPU limits, cpuset and cgroup version;
- :class:`Sampler` — proctor's sampler on a Rust thread of its own, rooted at a process tree;
  its methods answer from the latest sample (microseconds, no ``/proc`` read, no wait);
- :func:`process_memory` — one process's memory, read now on the calling thread.

``proctor.jupyter`` is a Jupyter server extension that serves jupyter-resource-usage's
``/api/metrics/v1`` from a :class:`Sampler`.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, Optional

from . import _core
from ._core import ProctorError

__all__ = [
    "ProctorError",
    "Sampler",
    "effective_cpu_count",
    "effective_cpu_count_ceil",
    "limits",
    "process_memory",
]


def effective_cpu_count() -> float:
    """The CPUs this process can use: min(its affinity, the tightest cgroup CPU quota/period
    over its own and every ancestor cgroup). 1.5 means one and a half CPUs' worth of time.

    Reads cgroupfs once, now (a few small files; the GIL is released meanwhile).
    Raises :class:`ProctorError` when none of affinity, quota or online CPUs can be read.
    """
    return _core.effective_cpu_count()


def effective_cpu_count_ceil() -> int:
    """:func:`effective_cpu_count` rounded up: the number of workers to size a pool by."""
    return max(1, math.ceil(effective_cpu_count() - 1e-9))


def limits(pid: int = 0) -> Dict[str, Any]:
    """The limits of ``pid``'s container (0: this process's), read now.

    Keys (unknown values are ``None``): ``memory_limit_bytes`` and ``memory_limit_source``
    (``cgroup:<path>`` or ``host``), ``host_memory_bytes``, ``effective_cpus``,
    ``effective_cpus_ceil``, ``quota_cpus`` and ``quota_path``, ``affinity_cpus``,
    ``cpuset_cpus``, ``host_online_cpus``, ``cgroup_version`` (``"v1"``/``"v2"``/hybrid),
    ``cgroup_path``, ``levels`` (own cgroup first, then each ancestor, with its quota,
    period, memory limit and cpuset), ``warnings``, ``error``.
    """
    return json.loads(_core.limits_json(pid))


def process_memory(pid: int, pss: bool = False) -> Dict[str, Any]:
    """One process's memory, read now **on the calling thread** (the GIL is released).

    Reads ``/proc/PID/status``: ``rss_bytes``, ``anon_bytes``, ``file_bytes``,
    ``shmem_bytes``, ``swap_bytes``, ``peak_rss_bytes``. With ``pss=True`` it also reads
    ``/proc/PID/smaps_rollup`` (``pss_bytes``, ``uss_bytes``, ``swap_pss_bytes``), which walks
    every resident page of the target under its mmap lock — milliseconds per GiB, and the
    target stalls meanwhile. For repeated reads use a :class:`Sampler`, which reads PSS on a
    budgeted worker thread instead.

    Raises ``ProcessLookupError`` when there is no such process and ``PermissionError`` when
    it may not be read.
    """
    return json.loads(_core.process_memory_json(pid, pss))


class Sampler:
    """proctor's sampler, running on a Rust thread of its own, rooted at ``root_pid``'s tree.

    It samples every process on the host every ``interval`` seconds (one kept-open
    ``/proc/PID/stat`` per process), derives CPU rates and container truth, and reads PSS for
    the root's tree on a worker thread that spends at most ``pss_budget`` of one core.
    The first sample is taken before the constructor returns; every method below answers from
    the latest one without reading ``/proc`` or waiting on the sampling thread.

    ``root_pid`` defaults to this process; a pid that does not exist raises
    ``ProcessLookupError`` naming it. ``disk_path`` is the filesystem whose usage
    :meth:`jupyter_metrics` reports (default ``/``).

    Use it as a context manager, or call :meth:`close`::

        with proctor.Sampler(interval=0.5) as s:
            print(s.tree(os.getpid())["total"]["rss_bytes"])
    """

    def __init__(
        self,
        root_pid: Optional[int] = None,
        interval: float = 1.0,
        pss_budget: float = 0.02,
        disk_path: Optional[str] = None,
    ) -> None:
        self._core = _core.Sampler(root_pid, float(interval), float(pss_budget), disk_path)

    @property
    def root_pid(self) -> int:
        """The pid whose tree is measured."""
        return self._core.root_pid

    @property
    def interval(self) -> float:
        """Seconds between samples."""
        return self._core.interval

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._core.closed

    def snapshot(self) -> Dict[str, Any]:
        """The latest sample as proctor serve's ``/api/v1/snapshot`` JSON (``host``,
        ``container``, ``processes`` summary, ``agent`` cost), plus ``age_secs`` (seconds
        since it was taken) and ``error`` (``None``, or why it is not current: the sampler
        stalled or was closed)."""
        return json.loads(self._core.snapshot_json())

    def tree(self, pid: Optional[int] = None) -> Dict[str, Any]:
        """The process tree under ``pid`` (default: the root) in the latest sample:
        ``processes`` (depth-first rows: ``depth`` and the process's fields, ``pid``, ``ppid``, ``comm``, ``rss_bytes``, …) and ``total``
        (``rss_bytes``, ``pss_bytes`` when known for every member, ``cpu_percent`` of one
        CPU, …). Raises ``ProcessLookupError`` when ``pid`` is not in the latest sample."""
        pid = self.root_pid if pid is None else pid
        text = self._core.tree_json(pid)
        if text is None:
            raise ProcessLookupError(f"no process with pid {pid} in the latest sample")
        return json.loads(text)

    def status(self) -> Dict[str, Any]:
        """``age_secs`` of the latest sample, ``error`` (``None`` when all is well; else the
        root is gone, or the sampler stalled or was closed) and ``samples`` taken so far."""
        age, error, samples = self._core.status()
        return {"age_secs": age, "error": error, "samples": samples}

    def jupyter_metrics_json(self, **config: Any) -> str:
        """jupyter-resource-usage 1.3.0's ``/api/metrics/v1`` body for the root's tree, as
        JSON text with its key order. Keyword arguments are its ``ResourceUseDisplay``
        settings: ``mem_limit`` (bytes) and ``cpu_limit`` (CPUs), ``None`` or 0 for the
        container's; ``track_cpu_percent``, ``track_disk_usage``, ``mem_warning_threshold``,
        ``cpu_warning_threshold``, ``disk_warning_threshold``.

        When the tree cannot be measured (the root exited, the sampler stalled or closed),
        the last good answer is returned with ``error`` and ``age_secs`` added."""
        return self._core.jupyter_metrics_json(**config)

    def jupyter_metrics(self, **config: Any) -> Dict[str, Any]:
        """:meth:`jupyter_metrics_json`, parsed."""
        return json.loads(self.jupyter_metrics_json(**config))

    def kernel_usage(self, pid: int, hostname: str = "") -> Optional[Dict[str, Any]]:
        """The ``content`` of ipykernel's ``usage_reply`` (``kernel_cpu``, ``kernel_memory``,
        ``cpu_count``, ``host_virtual_memory``, …) for the tree under ``pid``, from the latest
        sample; ``None`` when ``pid`` is not in it."""
        text = self._core.kernel_usage_json(pid, hostname)
        return None if text is None else json.loads(text)

    def close(self) -> None:
        """Stops the sampling thread (waits at most one cycle). Calling it again does nothing;
        afterwards the methods answer from the last sample, marked with an ``error``."""
        self._core.close()

    def __enter__(self) -> "Sampler":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "running"
        return f"<proctor.Sampler root_pid={self.root_pid} interval={self.interval} {state}>"
