#!/usr/bin/env python3
"""Issue 32 item 1: the README's Jupyter lines, run exactly as written, leave a jupyter-server
whose /api/metrics/v1 is answered by proctor.jupyter.

The lines are read from README.md's first ```sh block under "## Use it in Jupyter", so the
README and this test cannot drift; the only change made to them is the README's own
placeholder: `/path/to/proctor` becomes the release build's wheel (the README offers "or a
built wheel"). Each line runs in bash with VENV's bin first on PATH, as in an activated
virtualenv, and must exit 0 without jupyter-server's "Validation failed" (its
`server extension enable` prints that and still exits 0).

Then `jupyter server` from the same VENV starts on 127.0.0.1 with a token and nothing on its
command line about extensions, so only the config the README's lines left behind decides. What
is asserted:
- after the pip line alone, `jupyter server extension list` says proctor.jupyter is enabled
  (pip install enables it: the wheel ships its jupyter_server_config.d file);
- jupyter-server's log says proctor.jupyter was loaded and jupyter_resource_usage was not;
- GET /api/metrics/v1 is 200 with jupyter-resource-usage's fields (rss, pss, limits, ...), and
  its memory limit is the container's limit as proctor reads it (proctor.limits() in VENV):
  jupyter-resource-usage 1.3.0 answers 0 there when no limit is configured, and none is.

Usage: readme_e2e.py VENV WHEEL README. VENV holds jupyter-server (and, when the caller installs
it, jupyter-resource-usage) but not proctor. Every process it starts is stopped by its pid.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

VENV, WHEEL, README = (os.path.abspath(a) for a in sys.argv[1:4])
TOKEN = "readme-e2e"
PLACEHOLDER = "/path/to/proctor"
METRICS_KEYS = ("rss", "limits")


ANSI = re.compile(r"\x1b\[[0-9;]*m")
# What did not hold, in order; the test goes on where it still can, so one run shows them all.
problems = []


def fail(message):
    """Ends the test: this, and what failed before it."""
    print(f"FAIL: {message}")
    if problems:
        print(f"FAIL: and before it: {problems}")
    sys.exit(1)


def problem(message):
    print(f"FAIL: {message}")
    problems.append(message.splitlines()[0])


def readme_lines(path):
    """The command lines of the first ```sh block in the "## Use it in Jupyter" section."""
    text = open(path, encoding="utf-8").read()
    section = re.search(r"^## Use it in Jupyter\n(.*?)(?=^## )", text, re.S | re.M)
    if not section:
        fail(f"{path} has no '## Use it in Jupyter' section")
    block = re.search(r"^```sh\n(.*?)^```", section.group(1), re.S | re.M)
    if not block:
        fail(f"{path}'s '## Use it in Jupyter' section has no ```sh block")
    lines = []
    for line in block.group(1).splitlines():
        command = line.split("#", 1)[0].strip()
        if command:
            lines.append(command)
    return lines


def environment(home):
    """An activated VENV, with Jupyter's per-user directories in a fresh HOME so that nothing
    from this machine's ~/.jupyter takes part, and no MEM_LIMIT/CPU_LIMIT from outside."""
    env = dict(os.environ)
    env["PATH"] = os.path.join(VENV, "bin") + os.pathsep + env.get("PATH", "")
    env["VIRTUAL_ENV"] = VENV
    env["HOME"] = home
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_PATH", "JUPYTER_CONFIG_PATH",
                 "PYTHONPATH", "MEM_LIMIT", "CPU_LIMIT"):
        env.pop(name, None)
    env["JUPYTER_RUNTIME_DIR"] = os.path.join(home, "runtime")
    return env


def run_line(command, env):
    shown = command.replace(PLACEHOLDER, WHEEL)
    print(f"-- $ {command}" + (f"   (as: {shown})" if shown != command else ""))
    done = subprocess.run(["bash", "-c", shown], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    output = ANSI.sub("", done.stdout)
    print("   " + output.strip().replace("\n", "\n   ") if output.strip() else "   (no output)")
    if done.returncode != 0:
        problem(f"the README's line `{command}` exited {done.returncode}")
    elif "Validation failed" in output or "could not be found" in output:
        problem(f"the README's line `{command}` exited 0 but did not do what it says (output above)")


def extension_list(env):
    done = subprocess.run(["jupyter", "server", "extension", "list"], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    return ANSI.sub("", done.stdout)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     headers={"Authorization": f"token {TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_for(what, check, server, bound_s=180):
    """Polls check() until it returns a value (bounded; a server that exited ends it at once)."""
    deadline = time.monotonic() + bound_s
    last = None
    while time.monotonic() < deadline:
        if server.poll() is not None:
            fail(f"jupyter server exited with {server.returncode} while waiting for {what}")
        try:
            value = check()
            if value is not None:
                return value
        except OSError as e:
            last = e
        time.sleep(0.2)
    fail(f"no {what} within {bound_s} s (last error: {last!r})")


def venv_python(env, code):
    done = subprocess.run([os.path.join(VENV, "bin", "python"), "-c", code], env=env,
                          stdout=subprocess.PIPE, text=True, check=True, timeout=120)
    return done.stdout.strip()


def main():
    home = tempfile.mkdtemp(prefix="readme-e2e-")
    try:
        run(home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run(home):
    """The test, with `home` as the server's HOME and root directory (removed after)."""
    env = environment(home)
    versions = venv_python(env, "import importlib.metadata as m, json\n"
                                "def v(n):\n"
                                "    try: return m.version(n)\n"
                                "    except m.PackageNotFoundError: return None\n"
                                "print(json.dumps({n: v(n) for n in ('jupyter-server', 'jupyter-resource-usage', 'proctor')}))")
    versions = json.loads(versions)
    print(f"-- {VENV}: jupyter-server {versions['jupyter-server']}, "
          f"jupyter-resource-usage {versions['jupyter-resource-usage'] or 'not installed'}")
    if versions["proctor"]:
        fail(f"{VENV} already has proctor {versions['proctor']}: the README's pip line must be what installs it")

    lines = readme_lines(README)
    print(f"-- the README's lines: {lines}")
    if not lines or not lines[0].startswith("pip install"):
        fail(f"the README's Jupyter block should start with its pip install line: {lines}")
    run_line(lines[0], env)
    listed = extension_list(env)
    if not re.search(r"proctor\.jupyter\s+enabled", listed):
        problem("after `pip install` alone, `jupyter server extension list` does not show proctor.jupyter enabled:\n" + listed)
    else:
        print("-- after pip install alone: proctor.jupyter is enabled (`jupyter server extension list`)")
    for line in lines[1:]:
        run_line(line, env)
    print("   " + extension_list(env).strip().replace("\n", "\n   "))

    port = free_port()
    log_path = os.path.join(home, "jupyter-server.log")
    argv = ["jupyter", "server", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={home}"]
    print(f"-- $ {' '.join(argv)}")
    with open(log_path, "w") as log:
        server = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=home)
    try:
        wait_for("answer from /api/status", lambda: get(port, "/api/status")[0] == 200 or None, server)
        log_text = open(log_path, encoding="utf-8", errors="replace").read()
        loaded = set(re.findall(r"(\S+) \| extension was successfully loaded", log_text))
        print(f"-- server extensions loaded (jupyter-server's log): {', '.join(sorted(loaded))}")
        if "proctor.jupyter" not in loaded:
            problem("jupyter-server did not load proctor.jupyter; its log:\n" + log_text)
        if "jupyter_resource_usage" in loaded:
            problem("jupyter-server loaded jupyter_resource_usage too, whose handler answers the same routes first")

        def metrics():
            status, body = get(port, "/api/metrics/v1")
            if status != 200:
                fail(f"GET /api/metrics/v1: {status} {body[:300]!r}")
            data = json.loads(body)
            # The sampler's first sample may not be in yet: then the body says so (no rss yet).
            return data if "rss" in data else None

        data = wait_for("sample in /api/metrics/v1", metrics, server, bound_s=60)
        print(f"-- GET /api/metrics/v1: 200 {json.dumps(data)[:400]}")
        missing = [k for k in METRICS_KEYS if k not in data]
        if missing:
            fail(f"/api/metrics/v1 lacks {missing}: {data}")
        if not (isinstance(data["rss"], int) and data["rss"] > 0):
            fail(f"/api/metrics/v1's rss is not a positive integer: {data['rss']!r}")
        container = json.loads(venv_python(env, "import json, os, proctor\n"
                                                f"print(json.dumps(proctor.limits({server.pid})))"))
        expected = container["memory_limit_bytes"]
        got = data.get("limits", {}).get("memory", {}).get("rss")
        if not expected or got != expected:
            fail(f"/api/metrics/v1's limits.memory.rss is {got!r}, not the container's limit as proctor reads it "
                 f"({expected!r}, {container.get('memory_limit_source')}): not proctor.jupyter's answer")
        print(f"-- limits.memory.rss = {got} = the container's limit ({container.get('memory_limit_source')}): "
              "proctor.jupyter answered")
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    if problems:
        fail(f"{len(problems)} problem(s) above")
    print(f"ok: the README's Jupyter lines on jupyter-server {versions['jupyter-server']}")


if __name__ == "__main__":
    main()
