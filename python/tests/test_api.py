"""The Python API against the real system: the CLI's container truth, /proc, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import proctor
from conftest import wait_for

PROCTOR_BIN = os.environ.get("PROCTOR_BIN")


def cli_container(affinity=None) -> dict:
    """`proctor snapshot --format json`'s container truth, optionally under a CPU affinity."""
    if not PROCTOR_BIN:
        pytest.fail("PROCTOR_BIN is not set (scripts/test.d/80-python.sh sets it to the built CLI)")
    preexec = (lambda: os.sched_setaffinity(0, affinity)) if affinity else None
    out = subprocess.run([PROCTOR_BIN, "snapshot", "--format", "json", "--top", "1"],
                         check=True, capture_output=True, text=True, preexec_fn=preexec).stdout
    return json.loads(out)["container"]


def in_subprocess(code: str, affinity=None):
    preexec = (lambda: os.sched_setaffinity(0, affinity)) if affinity else None
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         preexec_fn=preexec).stdout
    return json.loads(out)


def test_effective_cpu_count_is_the_clis_container_truth():
    assert proctor.effective_cpu_count() == cli_container()["effective_cpus"]
    assert proctor.effective_cpu_count_ceil() == cli_container()["effective_cpus_ceil"]


def test_effective_cpu_count_follows_affinity_where_os_cpu_count_does_not():
    # One CPU by affinity: os.cpu_count() still says the host's count; proctor and the CLI say 1.
    code = ("import json, os, proctor; print(json.dumps([proctor.effective_cpu_count(), "
            "proctor.effective_cpu_count_ceil(), os.cpu_count()]))")
    effective, ceil, os_count = in_subprocess(code, affinity={0})
    assert effective == cli_container(affinity={0})["effective_cpus"]
    assert effective <= 1.0 and ceil == 1
    if (os.cpu_count() or 1) > 1:
        assert os_count > effective


def test_limits_match_the_cli():
    ours = proctor.limits()
    theirs = cli_container()
    for key in ("memory_limit_bytes", "memory_limit_source", "effective_cpus", "affinity_cpus",
                "cpuset_cpus", "quota_cpus", "cgroup_version", "cgroup_path", "host_online_cpus"):
        assert ours[key] == theirs[key], key
    assert isinstance(ours["host_memory_bytes"], int) and ours["host_memory_bytes"] > 0
    assert isinstance(ours["levels"], list)


def status_field(pid: int, name: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {name} in /proc/{pid}/status")


def test_process_memory_matches_proc_status():
    child = subprocess.Popen(["sleep", "60"])
    try:
        # Until exec completes the child is a copy of this process; after it, the loader is
        # still mapping and faulting in libraries until sleep blocks in nanosleep (state S).
        wait_for(lambda: open(f"/proc/{child.pid}/comm").read().strip() == "sleep", "the child to exec sleep")
        wait_for(lambda: open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "S", "sleep to block")
        m = proctor.process_memory(child.pid)
        assert m["pid"] == child.pid
        assert m["rss_bytes"] == status_field(child.pid, "VmRSS")
        assert m["anon_bytes"] == status_field(child.pid, "RssAnon")
        assert "pss_bytes" not in m
        with_pss = proctor.process_memory(child.pid, pss=True)
        assert 0 < with_pss["pss_bytes"] <= with_pss["rss_bytes"]
        assert with_pss["uss_bytes"] <= with_pss["pss_bytes"]
    finally:
        child.kill()
        child.wait()
    with pytest.raises(ProcessLookupError, match=str(child.pid)):
        proctor.process_memory(child.pid)


def test_process_memory_of_self():
    m = proctor.process_memory(os.getpid())
    # Our own RSS moves a little between two reads; the anon/file split must add up to it.
    assert m["rss_bytes"] == m["anon_bytes"] + m["file_bytes"] + m["shmem_bytes"]


def test_sampler_tree_snapshot_close_and_context_manager():
    child = subprocess.Popen(["sleep", "60"])
    try:
        with proctor.Sampler(interval=0.1, pss_budget=0.5) as s:
            assert s.root_pid == os.getpid() and not s.closed
            wait_for(lambda: open(f"/proc/{child.pid}/comm").read().strip() == "sleep", "the child to exec sleep")
            tree = wait_for(lambda: (lambda t: t if any(r["pid"] == child.pid for r in t["processes"]) else None)(s.tree()),
                            "the child in the sampler's tree")
            assert tree["root_pid"] == os.getpid()
            assert tree["total"]["processes"] >= 2
            assert tree["total"]["rss_bytes"] >= status_field(child.pid, "VmRSS")
            sub = s.tree(child.pid)
            assert [r["pid"] for r in sub["processes"]] == [child.pid]
            snap = s.snapshot()
            for key in ("host", "container", "processes", "agent", "age_secs", "error"):
                assert key in snap
            assert snap["error"] is None and snap["age_secs"] >= 0
            assert snap["container"]["effective_cpus"] == proctor.effective_cpu_count()
            st = s.status()
            assert st["error"] is None and st["samples"] >= 1
            with pytest.raises(ProcessLookupError):
                s.tree(2**22 + 1)
        assert s.closed
        assert s.status()["error"] == "sampler is closed"
        assert s.snapshot()["error"] == "sampler is closed"
        s.close()  # idempotent
    finally:
        child.kill()
        child.wait()


def test_sampler_for_a_gone_pid_names_it():
    child = subprocess.Popen(["true"])
    child.wait()
    with pytest.raises(ProcessLookupError, match=str(child.pid)):
        proctor.Sampler(root_pid=child.pid)


def test_sampler_rejects_bad_arguments():
    with pytest.raises(ValueError):
        proctor.Sampler(interval=0)
    with pytest.raises(ValueError):
        proctor.Sampler(pss_budget=2.0)


def test_jupyter_metrics_serve_the_last_good_answer_when_the_root_exits():
    child = subprocess.Popen(["sleep", "60"])
    try:
        with proctor.Sampler(root_pid=child.pid, interval=0.1) as s:
            good = s.jupyter_metrics()
            assert "error" not in good and good["rss"] > 0
            child.kill()
            child.wait()
            st = wait_for(lambda: (lambda st: st if st["error"] else None)(s.status()), "the sampler to notice")
            assert str(child.pid) in st["error"]
            stale = s.jupyter_metrics()
            assert stale["rss"] == good["rss"]
            assert str(child.pid) in stale["error"] and "gone" in stale["error"]
            assert stale["age_secs"] >= 0
            # Same keys as the good answer, then error and age.
            assert list(stale)[: len(good)] == list(good)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_jupyter_metrics_shape_follows_the_track_flags():
    with proctor.Sampler(interval=0.1) as s:
        minimal = s.jupyter_metrics(track_cpu_percent=False, track_disk_usage=False)
        assert [k for k in minimal if k != "pss"] == ["rss", "limits"]
        assert list(minimal["limits"]) == ["memory"]
        full = s.jupyter_metrics(track_cpu_percent=True, track_disk_usage=True, mem_limit=1 << 30, cpu_limit=1.5)
        assert list(full["limits"]) == ["memory", "cpu", "disk"]
        assert full["limits"]["memory"]["rss"] == 1 << 30
        assert full["limits"]["cpu"]["cpu"] == 1.5
        no_warn = s.jupyter_metrics(mem_warning_threshold=0, cpu_warning_threshold=0)
        assert "warn" not in no_warn["limits"]["memory"] and "warn" not in no_warn["limits"]["cpu"]
        # Unset limits are the container's, not 0.
        default = s.jupyter_metrics()
        assert default["limits"]["memory"]["rss"] == proctor.limits()["memory_limit_bytes"]
        assert default["limits"]["cpu"]["cpu"] == proctor.effective_cpu_count()


def test_sampler_publishes_on_its_own_thread():
    # Nothing on the Python side calls into the sampler while it keeps publishing.
    with proctor.Sampler(interval=0.05) as s:
        before = s.status()["samples"]
        deadline = time.monotonic() + 1.0
        x = 0
        while time.monotonic() < deadline:
            x += 1
        assert s.status()["samples"] > before
