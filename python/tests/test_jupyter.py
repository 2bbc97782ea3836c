"""proctor.jupyter in a real jupyter-server, beside the real jupyter-resource-usage 1.3.0, with
real kernels that fork real children."""

from __future__ import annotations

import statistics
import threading
import time
import urllib.request

import pytest

from conftest import FULL_SETTINGS, TOKEN, kill_pids, run_fork_code, shape, wait_for

MIB = 1 << 20


def kernel_pid(server, kernel_id: str) -> int:
    """The kernel's pid, from the kernel itself (not from the code under test)."""
    client = server.kernel_client(kernel_id)
    out = []
    client.execute_interactive("import os; print(os.getpid())", timeout=60,
                               output_hook=lambda m: out.append(m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
    return int("".join(out).strip())


@pytest.mark.parametrize("settings", [
    FULL_SETTINGS,
    # jupyter-resource-usage's defaults (no CPU, no disk) with a memory limit, as an admin sets.
    {"mem_limit": str(4 << 30)},
])
def test_metrics_have_jupyter_resource_usages_keys_order_and_types(servers, settings):
    ours_server = servers("proctor", settings)
    theirs_server = servers("jru", settings)
    # Each server with a kernel whose children hold memory, so both sum a real tree.
    pids = []
    try:
        for server in (ours_server, theirs_server):
            kid = server.start_kernel()
            pids += run_fork_code(server.kernel_client(kid), n=2, mib=16, shared=False)
        theirs_server.get("/api/metrics/v1")
        theirs = theirs_server.get("/api/metrics/v1")  # the second call has a real cpu_percent
        # PSS is read on a budgeted worker; wait until every member of the tree has one.
        ours = wait_for(lambda: (lambda j: j if "pss" in j else None)(ours_server.get("/api/metrics/v1")),
                        "proctor's pss for the whole tree", 90)
        assert shape(ours) == shape(theirs), f"\n theirs {theirs}\n ours   {ours}"
        if "disk_total" in theirs:
            assert ours["disk_total"] == theirs["disk_total"]
        assert ours["limits"]["memory"]["rss"] == int(settings["mem_limit"])
    finally:
        kill_pids(pids)


def test_rss_includes_the_kernels_children_and_kernel_usage_answers_the_panel(servers):
    server = servers("proctor", FULL_SETTINGS)
    before = server.get("/api/metrics/v1")["rss"]
    kid = server.start_kernel()
    client = server.kernel_client(kid)
    pids = run_fork_code(client, n=4, mib=64, shared=False)
    try:
        # Four children with 64 MiB of their own pages each, plus the kernel itself.
        want = before + 4 * 64 * MIB
        m = wait_for(lambda: (lambda j: j if j["rss"] >= want else None)(server.get("/api/metrics/v1")),
                     "the children's memory in /api/metrics/v1", 60)
        assert m["rss"] >= want

        usage = wait_for(lambda: (lambda j: j if j["content"].get("kernel_memory", 0) >= 4 * 64 * MIB else None)(
            server.get(f"/api/metrics/v1/kernel_usage/get_usage/{kid}")), "kernel_usage with the children", 60)
        assert usage["kernel_id"] == kid
        content = usage["content"]
        assert content["pid"] == kernel_pid(server, kid)
        # What the panel reads (jupyter-resource-usage 1.3.0's labextension).
        for key, kind in (("hostname", str), ("pid", int), ("kernel_cpu", float), ("kernel_memory", int),
                          ("cpu_count", int), ("host_usage_flag", bool), ("host_virtual_memory", dict)):
            assert isinstance(content[key], kind), key
        for key in ("total", "available", "percent", "used", "free", "active", "inactive"):
            assert key in content["host_virtual_memory"], key
        assert "reason" not in content
    finally:
        kill_pids(pids)


def test_kernel_usage_content_has_ipykernels_keys(servers):
    """Our reply's content against the real one: jupyter-resource-usage asking ipykernel."""
    ours_server = servers("proctor", FULL_SETTINGS)
    theirs_server = servers("jru", FULL_SETTINGS)
    ours_kid = ours_server.start_kernel()
    theirs_kid = theirs_server.start_kernel()
    ours_server.kernel_client(ours_kid)
    theirs_server.kernel_client(theirs_kid)
    theirs = wait_for(lambda: (lambda j: j if "kernel_memory" in j["content"] else None)(
        theirs_server.get(f"/api/metrics/v1/kernel_usage/get_usage/{theirs_kid}")), "jupyter-resource-usage's kernel usage", 60)
    ours = wait_for(lambda: (lambda j: j if "kernel_memory" in j["content"] else None)(
        ours_server.get(f"/api/metrics/v1/kernel_usage/get_usage/{ours_kid}")), "proctor's kernel usage", 60)
    # host_cpu_percent is left out by both when it is unknown (psutil's first call is 0.0).
    keys = lambda c: sorted(k for k in c if k != "host_cpu_percent")
    assert keys(ours["content"]) == keys(theirs["content"])
    assert sorted(ours["content"]["host_virtual_memory"]) == sorted(theirs["content"]["host_virtual_memory"])
    assert ours["kernel_id"] == ours_kid and theirs["kernel_id"] == theirs_kid
    assert ours["content"]["host_virtual_memory"]["total"] == theirs["content"]["host_virtual_memory"]["total"]


def test_unknown_kernel_is_404_json_and_routes_need_the_token(servers):
    server = servers("proctor", FULL_SETTINGS)
    status, body = server.request("/api/metrics/v1/kernel_usage/get_usage/no-such-kernel")
    assert status == 404
    assert body["kernel_id"] == "no-such-kernel" and "no-such-kernel" in body["message"]
    for path in ("/api/metrics/v1", "/api/metrics/v1/kernel_usage/get_usage/no-such-kernel"):
        status, _ = server.request(path, auth=False)
        assert status == 403, path


def test_prometheus_gauges_are_filled(servers):
    server = servers("proctor", FULL_SETTINGS)

    def gauges():
        found = {}
        for line in server.get_text("/metrics").splitlines():
            name, _, value = line.partition(" ")
            if name in ("total_memory_usage", "max_memory_usage", "total_cpu_usage", "max_cpu_usage",
                        "current_disk_usage", "max_disk_usage"):
                found[name] = float(value)
        return found if found.get("total_memory_usage", 0) > 0 else None

    g = wait_for(gauges, "the gauges to be set", 30)
    m = server.get("/api/metrics/v1")
    assert g["max_memory_usage"] == float(FULL_SETTINGS["mem_limit"])
    assert g["max_cpu_usage"] == 100.0 * float(FULL_SETTINGS["cpu_limit"])
    assert g["max_disk_usage"] == float(m["disk_total"])
    assert g["total_memory_usage"] > 0.5 * m["rss"]


def poll_under_load(server, seconds: float, pollers: int = 3):
    """Polls /api/metrics/v1 from `pollers` threads back to back (open tabs, compressed in
    time) while one thread asks /api/status every 50 ms; returns /api/status latencies (s)."""
    stop = threading.Event()
    status_latencies = []

    def get(path):
        req = urllib.request.Request(server.base + path)
        req.add_header("Authorization", f"token {TOKEN}")
        with urllib.request.urlopen(req, timeout=60) as r:
            r.read()

    def poll_metrics():
        while not stop.is_set():
            get("/api/metrics/v1")

    def poll_status():
        while not stop.is_set():
            t = time.perf_counter()
            get("/api/status")
            status_latencies.append(time.perf_counter() - t)
            time.sleep(0.05)

    threads = [threading.Thread(target=poll_metrics) for _ in range(pollers)] + [threading.Thread(target=poll_status)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    return status_latencies


def test_api_status_is_not_stalled_while_metrics_are_polled(servers):
    """The issue's repro, scaled down: a kernel with 24 children sharing 512 MiB. Side by side
    in one run, jupyter-resource-usage (which walks the tree's smaps_rollup on the event loop)
    stalls /api/status; proctor's extension must not."""
    # Seconds: far above a loopback /api/status even on a busy 2-core machine (other builds
    # running), below jupyter-resource-usage's walk of this tree (1.5-2.5 s here).
    stall = 1.0
    results = {}
    for extension in ("jru", "proctor"):
        server = servers(extension, FULL_SETTINGS)
        kid = server.start_kernel()
        pids = run_fork_code(server.kernel_client(kid), n=24, mib=512, shared=True)
        try:
            server.get("/api/metrics/v1")
            latencies = poll_under_load(server, seconds=6)
        finally:
            kill_pids(pids)
            server.stop()
        results[extension] = (sum(1 for x in latencies if x > stall), max(latencies), statistics.median(latencies), len(latencies))
    jru_stalls = results["jru"][0]
    ours_stalls = results["proctor"][0]
    print("stalls over %.2f s, worst, median, requests: %r" % (stall, results))
    # The setup is real: the same polling stalls jupyter-resource-usage's server.
    assert jru_stalls >= 1, f"jupyter-resource-usage did not stall: {results}"
    # The property: no /api/status request waits past the stall bound. How much faster the
    # median is, is a ratio of timings: bench/jupyter measures it (/api/status per window, side
    # by side), not this test.
    assert ours_stalls == 0, f"proctor's extension stalled /api/status: {results}"
