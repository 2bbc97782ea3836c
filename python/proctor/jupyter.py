"""A Jupyter server extension serving jupyter-resource-usage's API from proctor's sampler.

``pip install`` enables it (the wheel installs
``etc/jupyter/jupyter_server_config.d/proctor.jupyter.json``); turn jupyter-resource-usage's
server extension off, which would otherwise answer the same routes first (its frontend stays)::

    jupyter server extension enable proctor.jupyter
    jupyter server extension disable jupyter_resource_usage

or for one run::

    jupyter lab --ServerApp.jpserver_extensions=proctor.jupyter=True \\
        --ServerApp.jpserver_extensions=jupyter_resource_usage=False

(traitlets reads a dict given on the command line as a Python literal, so the JSON form with
``true``/``false`` stops the server at startup.)

Routes, both authenticated like every Jupyter API route:

- ``GET {base_url}api/metrics/v1`` — jupyter-resource-usage 1.3.0's JSON, key for key, for the
  server's process tree (kernels and their children included);
- ``GET {base_url}api/metrics/v1/kernel_usage/get_usage/<kernel_id>`` — the reply its kernel
  panel expects (ipykernel's ``usage_reply``), for the kernel's process tree; an unknown kernel
  id is a 404 with a JSON body.

Every answer comes from a :class:`proctor.Sampler` rooted at the server's own pid, sampling on
a Rust thread: no handler reads ``/proc``, calls psutil or waits on the sampler, so a big tree
cannot stall the server's event loop (jupyter-resource-usage 1.3.0 walks the whole tree with
``memory_full_info()`` — ``smaps_rollup`` per process — on the loop for every request). The
Prometheus gauges jupyter-resource-usage fills (``total_memory_usage``, ``max_memory_usage``,
``total_cpu_usage``, ``max_cpu_usage``, ``current_disk_usage``, ``max_disk_usage``) are set
by a periodic callback that only reads the latest sample.

Configure it with :class:`ProctorResourceUse`, which takes ``ResourceUseDisplay``'s names;
settings already written for ``ResourceUseDisplay`` are honoured when ``ProctorResourceUse``
does not set them. Unset limits are the container's, not the host's.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
from typing import Any, Dict, Optional

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import ioloop, web
from traitlets import Bool, Float, Int, Unicode, Union, default
from traitlets.config import Configurable

try:  # traitlets >= 4.3.3
    from traitlets import Callable
except ImportError:  # pragma: no cover - old traitlets
    from traitlets import Any as Callable  # type: ignore[assignment]

from . import Sampler

#: The settings key under which the extension keeps its state in the Tornado application.
SETTINGS_KEY = "proctor_resource_use"

#: ``ResourceUseDisplay`` names this extension understands; also read from that section of the
#: server's config when ``ProctorResourceUse`` does not set them.
RESOURCE_USE_DISPLAY_NAMES = (
    "mem_limit",
    "mem_warning_threshold",
    "track_cpu_percent",
    "cpu_limit",
    "cpu_warning_threshold",
    "track_disk_usage",
    "disk_path",
    "disk_warning_threshold",
    "enable_prometheus_metrics",
    "show_host_usage",
)


class ProctorResourceUse(Configurable):
    """Server-side settings of ``proctor.jupyter``: jupyter-resource-usage's
    ``ResourceUseDisplay`` names and defaults, except that an unset memory or CPU limit is the
    container's (cgroup limits, affinity and quota), not 0 ("unknown"), plus proctor's own
    ``interval`` and ``pss_budget``."""

    mem_limit = Union(
        trait_types=[Int(), Callable()],
        help="""Memory limit to display, in bytes, or a function ``f(rss=, pss=)`` returning it.
        Defaults to the ``MEM_LIMIT`` environment variable; 0 (or unset): the container's
        memory limit (the smallest cgroup limit on the path, else the host's memory).""",
    ).tag(config=True)

    @default("mem_limit")
    def _mem_limit_default(self) -> int:
        return _env_number("MEM_LIMIT", int)

    mem_warning_threshold = Float(
        default_value=0.1,
        help="Warn when memory use is within this fraction of the limit; 0 disables the warning.",
    ).tag(config=True)

    track_cpu_percent = Bool(
        default_value=False,
        help="""Report CPU use (``cpu_percent``, ``cpu_count``, ``limits.cpu``). Costs nothing
        extra here: the sampler derives CPU rates from counters it reads anyway.""",
    ).tag(config=True)

    cpu_limit = Union(
        trait_types=[Float(), Callable()],
        help="""CPU limit to display, in CPUs, or a function ``f(cpu_percent=)`` returning it.
        Defaults to the ``CPU_LIMIT`` environment variable; 0 (or unset): the effective CPUs
        (min of affinity and every cgroup quota up the tree).""",
    ).tag(config=True)

    @default("cpu_limit")
    def _cpu_limit_default(self) -> float:
        return _env_number("CPU_LIMIT", float)

    cpu_warning_threshold = Float(
        default_value=0.1,
        help="Warn when CPU use is within this fraction of the limit; 0 disables the warning.",
    ).tag(config=True)

    track_disk_usage = Bool(
        default_value=False,
        help="Report the usage of the filesystem holding ``disk_path``.",
    ).tag(config=True)

    disk_path = Union(
        trait_types=[Unicode(), Callable()],
        help="A path in the filesystem to report on (default: ``$HOME``, else /home/jovyan).",
    ).tag(config=True)

    @default("disk_path")
    def _disk_path_default(self) -> str:
        return str(os.environ.get("HOME", "/home/jovyan"))

    disk_warning_threshold = Float(
        default_value=0.1,
        help="Warn when free space is under this fraction of the total; 0 disables the warning.",
    ).tag(config=True)

    enable_prometheus_metrics = Bool(
        default_value=True,
        help="Fill jupyter-resource-usage's Prometheus gauges on the server's /metrics.",
    ).tag(config=True)

    show_host_usage = Bool(
        default_value=True,
        help="Show the host's CPU and memory in the kernel usage panel (``host_usage_flag``).",
    ).tag(config=True)

    interval = Float(
        default_value=1.0,
        help="Seconds between samples of the process tree (on proctor's own thread).",
    ).tag(config=True)

    pss_budget = Float(
        default_value=0.02,
        help="""Share of one core the PSS worker may spend reading smaps_rollup for the server's
        tree (0 disables PSS: ``pss`` is then left out, as on kernels without it).""",
    ).tag(config=True)


def _env_number(name: str, kind: type) -> Any:
    """jupyter-resource-usage reads ``MEM_LIMIT``/``CPU_LIMIT`` with ``int()``/``float()`` and
    fails to start on garbage; here garbage is logged by the caller and read as unset."""
    try:
        return kind(os.environ.get(name, 0) or 0)
    except ValueError:
        return kind(0)


class _State:
    """What the handlers share: the sampler, the settings, the host name (read once)."""

    def __init__(self, config: ProctorResourceUse, sampler: Sampler, log: Any) -> None:
        self.config = config
        self.sampler = sampler
        self.log = log
        self.hostname = socket.gethostname()

    def metrics_json(self) -> str:
        """The ``/api/metrics/v1`` body. Never raises: a failure becomes a body with ``error``."""
        c = self.config
        try:
            mem_limit = c.mem_limit
            cpu_limit = c.cpu_limit
            kwargs: Dict[str, Any] = dict(
                track_cpu_percent=c.track_cpu_percent,
                track_disk_usage=c.track_disk_usage,
                mem_warning_threshold=c.mem_warning_threshold,
                cpu_warning_threshold=c.cpu_warning_threshold,
                disk_warning_threshold=c.disk_warning_threshold,
            )
            if not callable(mem_limit) and not callable(cpu_limit):
                return self.sampler.jupyter_metrics_json(
                    mem_limit=int(mem_limit) or None, cpu_limit=float(cpu_limit) or None, **kwargs
                )
            # A callable limit is asked with the figures it is a limit for, as
            # jupyter-resource-usage does: measure first, then answer with its value.
            first = self.sampler.jupyter_metrics(**kwargs)
            if callable(mem_limit):
                mem_limit = mem_limit(rss=first.get("rss"), pss=first.get("pss"))
            if callable(cpu_limit):
                cpu_limit = cpu_limit(cpu_percent=first.get("cpu_percent", 0.0))
            return self.sampler.jupyter_metrics_json(
                mem_limit=int(mem_limit or 0) or None, cpu_limit=float(cpu_limit or 0) or None, **kwargs
            )
        except Exception as e:  # never an exception per request
            self.log.warning("proctor.jupyter: metrics failed: %s", e)
            return json.dumps({"error": f"{type(e).__name__}: {e}"})


class MetricsHandler(APIHandler):
    """``GET /api/metrics/v1``: jupyter-resource-usage 1.3.0's JSON from the latest sample."""

    @web.authenticated
    def get(self) -> None:
        state: _State = self.settings[SETTINGS_KEY]
        self.write(state.metrics_json())


def _kernel_pid(kernel_manager: Any) -> Optional[int]:
    """The kernel's process id from its manager (jupyter_client's local provisioner), without
    asking the kernel; ``None`` for kernels that are not local processes."""
    provisioner = getattr(kernel_manager, "provisioner", None)
    for holder in (provisioner, getattr(provisioner, "process", None), getattr(kernel_manager, "kernel", None)):
        pid = getattr(holder, "pid", None)
        if isinstance(pid, int) and pid > 0:
            return pid
    return None


class KernelUsageHandler(APIHandler):
    """``GET /api/metrics/v1/kernel_usage/get_usage/<kernel_id>``: what the kernel usage panel
    expects (``content`` of ipykernel's ``usage_reply`` plus ``host_usage_flag``, and
    ``kernel_id``), measured on the kernel's process tree by the sampler."""

    @web.authenticated
    def get(self, kernel_id: str) -> None:
        state: _State = self.settings[SETTINGS_KEY]
        km = self.kernel_manager
        if kernel_id not in km:
            self.set_status(404)
            self.finish(json.dumps({"message": f"no kernel with id {kernel_id}", "kernel_id": kernel_id}))
            return
        pid = _kernel_pid(km.get_kernel(kernel_id))
        if pid is None:
            reply = {"content": {"reason": "kernel process not found"}, "kernel_id": kernel_id}
        else:
            usage = state.sampler.kernel_usage(pid, state.hostname)
            if usage is None:
                # Started after the latest sample: the panel shows "Loading…" and asks again.
                reply = {"content": {"reason": "loading"}, "kernel_id": kernel_id}
            else:
                usage["host_usage_flag"] = state.config.show_host_usage
                reply = {"msg_type": "usage_reply", "content": usage, "kernel_id": kernel_id}
        self.write(json.dumps(reply))


class _Gauges:
    """jupyter-resource-usage's Prometheus gauges, set from the latest sample once a second."""

    NAMES = ("total_memory", "max_memory", "total_cpu", "max_cpu", "max_disk", "current_disk")

    def __init__(self, state: _State) -> None:
        from prometheus_client import REGISTRY, Gauge

        self.state = state
        self.gauges: Dict[str, Any] = {}
        for name in self.NAMES:
            phrase = name + "_usage"
            try:
                gauge = Gauge(phrase, "counter for " + phrase.replace("_", " "), [])
            except ValueError:
                # Already registered (jupyter-resource-usage's extension is loaded too, or this
                # one twice): set the registered gauge rather than fail.
                gauge = REGISTRY._names_to_collectors.get(phrase)  # noqa: SLF001
            self.gauges[phrase] = gauge

    def _set(self, phrase: str, value: Any) -> None:
        gauge = self.gauges.get(phrase)
        if gauge is not None and isinstance(value, (int, float)):
            gauge.set(value)

    def __call__(self) -> None:
        c = self.state.config
        try:
            m = json.loads(self.state.metrics_json())
        except ValueError:
            return
        if "rss" not in m:
            return
        self._set("total_memory_usage", m["rss"])
        self._set("max_memory_usage", m["limits"]["memory"]["rss"])
        if c.track_cpu_percent and "cpu_percent" in m:
            self._set("total_cpu_usage", m["cpu_percent"])
            cpu = m["limits"].get("cpu", {}).get("cpu")
            # In percent of one CPU, like total_cpu_usage (100 × the limit in CPUs).
            self._set("max_cpu_usage", 100.0 * cpu if cpu else 100.0 * m.get("cpu_count", 1))
        if c.track_disk_usage and "disk_used" in m:
            self._set("current_disk_usage", m["disk_used"])
            self._set("max_disk_usage", m["disk_total"])


def _apply_resource_use_display(serverapp: Any, config: ProctorResourceUse) -> None:
    """Values written for jupyter-resource-usage (``c.ResourceUseDisplay.x``) apply unless
    ``ProctorResourceUse`` sets the same name."""
    theirs = serverapp.config.get("ResourceUseDisplay", {})
    ours = serverapp.config.get("ProctorResourceUse", {})
    for name in RESOURCE_USE_DISPLAY_NAMES:
        if name in theirs and name not in ours:
            try:
                setattr(config, name, theirs[name])
            except Exception as e:  # a bad value is reported, the default stays
                serverapp.log.warning("proctor.jupyter: ignoring ResourceUseDisplay.%s: %s", name, e)


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Starts the sampler for the server's tree and adds the routes."""
    config = ProctorResourceUse(parent=serverapp)
    _apply_resource_use_display(serverapp, config)
    for name in ("MEM_LIMIT", "CPU_LIMIT"):
        raw = os.environ.get(name)
        if raw:
            try:
                float(raw)
            except ValueError:
                serverapp.log.warning("proctor.jupyter: %s=%r is not a number; using the container's limit", name, raw)
    disk_path = config.disk_path() if callable(config.disk_path) else config.disk_path
    sampler = Sampler(
        root_pid=os.getpid(), interval=config.interval, pss_budget=config.pss_budget, disk_path=disk_path
    )
    atexit.register(sampler.close)
    state = _State(config, sampler, serverapp.log)
    web_app = serverapp.web_app
    web_app.settings[SETTINGS_KEY] = state
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [(url_path_join(base_url, "/api/metrics/v1"), MetricsHandler)])
    web_app.add_handlers(
        ".*$",
        [(url_path_join(base_url, "/api/metrics/v1/kernel_usage", r"get_usage/(.+)$"), KernelUsageHandler)],
    )
    if config.enable_prometheus_metrics:
        callback = ioloop.PeriodicCallback(_Gauges(state), 1000)
        callback.start()
        state.prometheus_callback = callback  # type: ignore[attr-defined]
    serverapp.log.info(
        "proctor.jupyter: /api/metrics/v1 from proctor's sampler (pid %d, every %.2g s)", os.getpid(), config.interval
    )


def _jupyter_server_extension_points() -> list:
    return [{"module": "proctor.jupyter"}]


# Older jupyter_server and notebook look for these names.
load_jupyter_server_extension = _load_jupyter_server_extension
_jupyter_server_extension_paths = _jupyter_server_extension_points
