#!/usr/bin/env python3
"""proctor top in a real terminal (tmux): what a person sees after each key.

Starts its own processes (a parent with a 200 MiB child and a victim child, a process with a
hostile name, a copy of sleep under a long path, a process with three named threads, a short-lived process caught by a recording)
and ends only those, by pid. Each check reads the screen with `tmux capture-pane`. Usage: top_e2e.py PATH/TO/proctor
"""
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PROCTOR = os.path.abspath(sys.argv[1])
SESSION = f"proctor-top-e2e-{os.getpid()}"
# A tmux server of our own (its own socket): another run's kill-server cannot end this one's.
# Each start of top gets a new server (start_top): a server still shutting down from the last
# one's kill-server could otherwise take the new session, or refuse it.
SOCKET = SESSION
STARTS = 0
TMP = tempfile.mkdtemp(prefix="proctor-top-e2e-")
STARTED = []  # Popen objects we own
FAILED = []


def check(ok, what, screen=None):
    if ok:
        print(f"  ok   {what}")
    else:
        print(f"  FAIL {what}")
        if screen is not None:
            print("  --- screen ---\n" + screen + "\n  --------------")
        FAILED.append(what)


def tmux(*args, check_rc=True):
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=check_rc).stdout


def screen():
    return tmux("capture-pane", "-p", "-t", SESSION)


def keys(*k):
    tmux("send-keys", "-t", SESSION, *k)
    # A lone Escape followed at once by another key reads as Alt+key (as in every terminal
    # program): give it a moment to stand alone.
    if k and k[-1] == "Escape":
        time.sleep(0.3)


def read(path, missing):
    """A /proc file's bytes, or `missing` when the process has gone."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return missing


def rss_kib(pid):
    m = re.search(rb"VmRSS:\s+(\d+) kB", read(f"/proc/{pid}/status", b""))
    return int(m.group(1)) if m else 0


def until(pred, timeout, step=0.1):
    """Polls pred() until it is true or `timeout` seconds pass; returns its last value."""
    end = time.time() + timeout
    while True:
        value = pred()
        if value or time.time() >= end:
            return value
        time.sleep(step)


def wait_for(pred, timeout=10.0, step=0.2):
    """Polls the screen until pred(screen) is true; returns the last screen."""
    end = time.time() + timeout
    s = screen()
    while time.time() < end:
        s = screen()
        if pred(s):
            return s
        time.sleep(step)
    return s


def frame_second(s):
    """The Unix second the header's clock (`proctor top  10:41:35 UTC`) names: the frame was
    drawn in it. The date is today's, or yesterday's for a clock just before midnight."""
    h, m, sec = (int(x) for x in re.search(r"proctor top\s+(\d\d):(\d\d):(\d\d)(?:\.\d{3})? UTC", s).groups())
    now = time.time()
    midnight = now - now % 86400
    t = midnight + h * 3600 + m * 60 + sec
    return t - 86400 if t > now + 60 else t


def frame_ms(s):
    """The header clock's time of day in milliseconds (`10:41:35 UTC` live, `10:41:35.250 UTC`
    in the past), or None without a header."""
    m = re.search(r"proctor top\s+(\d\d):(\d\d):(\d\d)(?:\.(\d{3}))? UTC", s)
    if m is None:
        return None
    h, mi, sec = (int(x) for x in m.groups()[:3])
    return ((h * 60 + mi) * 60 + sec) * 1000 + int(m.group(4) or 0)


def went_back(before, now):
    """Whether the clock `now` is earlier than `before` (times of day; a step over midnight
    counts)."""
    return before is not None and now is not None and 0 < (before - now) % 86_400_000 < 43_200_000


def started_at(pid):
    """When `pid` started, in Unix seconds, never later than it did (the boot time is whole
    seconds, rounded down): a process whose start is past a frame was not in it."""
    stat = open(f"/proc/{pid}/stat").read()
    ticks = int(stat[stat.rindex(")") + 2:].split()[19])
    boot = next(int(line.split()[1]) for line in open("/proc/stat") if line.startswith("btime "))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def rows(s):
    """Table rows: (pid, line) for lines that start with a pid under the heading."""
    out, seen_head = [], False
    for line in s.splitlines():
        if re.match(r"\s*PID\b", line):
            seen_head = True
            continue
        m = re.match(r"\s*(\d+) ", line)
        if seen_head and m:
            out.append((int(m.group(1)), line))
    return out


def bold_in(sgr):
    """Whether an SGR's parameters (`1;38;5;6`) turn bold on; colour indexes are skipped."""
    params, i = sgr.split(";"), 0
    while i < len(params):
        if params[i] in ("38", "48"):
            i += 3 if i + 1 < len(params) and params[i + 1] == "5" else 5
            continue
        if params[i] == "1":
            return True
        i += 1
    return False


def start_top(args, env=None, size=(120, 40)):
    global SOCKET, STARTS
    tmux("kill-server", check_rc=False)
    STARTS += 1
    SOCKET = f"{SESSION}-{STARTS}"
    # The environment goes on the command line too, not only to tmux: with one server for all
    # starts, a server still shutting down took a new session with the environment it started
    # with (NO_COLOR from the first run reached a later one that way in CI).
    extra = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    cmd = " ".join(["env", "-u", "NO_COLOR", *extra, PROCTOR, "top", *args])
    # After top exits, the pane shows whether the terminal came back cooked.
    shell = f"printf 'BEFORE-TOP\\n'; {cmd}; rc=$?; printf 'EXITED rc=%s ' $rc; stty -a | grep -o -- '-icanon\\|icanon' | head -1; sleep 60"
    e = {**os.environ, **(env or {})}
    subprocess.run(
        ["tmux", "-L", SOCKET, "new-session", "-d", "-s", SESSION, "-x", str(size[0]), "-y", str(size[1]), shell],
        check=True, env=e,
    )


def main():
    # The family: a parent shell with a 200 MiB child and a victim child.
    hog = os.path.join(TMP, "hog.py")
    with open(hog, "w") as f:
        f.write("import sys, time\nb = bytearray(int(sys.argv[1]) << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\ntime.sleep(600)\n")
    family = os.path.join(TMP, "family.sh")
    with open(family, "w") as f:
        f.write(f"python3 {hog} 200 proctor-top-big &\npython3 {hog} 1 proctor-top-victim &\nwait\n")
    parent = subprocess.Popen(["sh", family, "proctor-top-parent"])
    STARTED.append(parent)
    # A process whose name and arguments try to drive the terminal.
    evil_py = os.path.join(TMP, "e.py")
    with open(evil_py, "w") as f:
        f.write("import time\nopen('/proc/self/comm','w').write('\\x1b[31mEVIL\\u202e')\ntime.sleep(600)\n")
    evil = subprocess.Popen(["python3", evil_py, "proctor-top-evil\x1b]0;pwned\x07\x1b[31mRED\u202egpj.exe"])
    STARTED.append(evil)
    # Ready when both children run python (not yet the shell that forked them), the big one has
    # touched its 200 MiB and the hostile one has renamed itself: on a starved machine that takes
    # seconds, and every check below reads the screen as if it were so.
    def family():
        children = subprocess.run(["pgrep", "-P", str(parent.pid)], capture_output=True, text=True).stdout.split()
        big = victim = None
        for c in children:
            cmd = read(f"/proc/{c}/cmdline", b"")
            if b"proctor-top-big" in cmd:
                big = int(c)
            if b"proctor-top-victim" in cmd:
                victim = int(c)
        return big, victim, children
    def ready():
        big, victim, _ = family()
        return big and victim and rss_kib(big) >= 200 << 10 and b"EVIL" in read(f"/proc/{evil.pid}/comm", b"")
    until(ready, 60)
    big, victim, children = family()
    assert big and victim, f"children not found: {children}"
    assert rss_kib(big) >= 200 << 10, f"the big child touched only {rss_kib(big)} KiB in 60 s"
    print(f"-- parent {parent.pid}, 200 MiB child {big}, victim {victim}, hostile name {evil.pid}")

    slow_log = os.path.join(TMP, "slow.jsonl")
    conf = os.path.join(TMP, "top.conf")
    start_top(["--interval", "500ms", "--config", conf, "--slow", "'rss>150MiB'", "--slow-log", slow_log], env={"NO_COLOR": "1"})
    s = wait_for(lambda s: "PID" in s and len(rows(s)) > 3)
    check("proctor top" in s and "Mem" in s and "Load" in s, "the live screen has its header", s)

    # Sort by memory: the 200 MiB child above every smaller process, first unless a bigger one runs.
    keys("M")
    s = wait_for(lambda s: "RSS▼" in s)
    r = rows(s)
    pids = [p for p, _ in r]
    check(big in pids and all(p != parent.pid and p != victim for p in pids[: pids.index(big)]) if big in pids else False,
          "M sorts by memory: the 200 MiB child is above its parent and sibling", s)
    def rss_mib(line):
        m = re.search(r"([\d.]+) (KiB|MiB|GiB)\s", line[20:])
        if not m:
            return 0.0
        return float(m.group(1)) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[m.group(2)]
    above = [rss_mib(l) for p, l in r[: pids.index(big)]] if big in pids else []
    check(all(v >= 199 for v in above), f"every row above it uses at least as much ({above})", s)
    check(pids and pids[0] == big or bool(above), "the 200 MiB child is first, or only bigger processes precede it", s)

    # The slow rule marks it, and the log says so.
    check("!rss>150MiB" in s, "--slow rss>150MiB marks the 200 MiB child", s)

    # Filter narrows to it.
    keys("-l", "\\")
    for ch in "proctor-top-big":
        keys("-l", ch)
    keys("Enter")
    # The filter narrows the rows as it is typed, before Enter closes the prompt (htop's way):
    # wait for the frame drawn after Enter, whose status line is no longer the prompt.
    s = wait_for(lambda s: len(rows(s)) == 1 and "Filter: " not in s)
    check([p for p, _ in rows(s)] == [big], "F4 filter proctor-top-big shows only that child", s)
    check(re.search(r"1 of \d+ shown", s) is not None, "the status line says 1 of N shown", s)

    # Tree shows it under its parent.
    keys("-l", "\\"); keys("Escape")
    keys("-l", "\\")
    for ch in "proctor-top":
        keys("-l", ch)
    keys("Enter", "t")
    s = wait_for(lambda s: any(l for p, l in rows(s) if p == big and ("└─" in l or "├─" in l)))
    r = rows(s)
    pids = [p for p, _ in r]
    ok = parent.pid in pids and big in pids and pids.index(parent.pid) < pids.index(big)
    big_line = next((l for p, l in r if p == big), "")
    check(ok and ("└─" in big_line or "├─" in big_line), "F5 tree: the child is drawn under its parent with a branch", s)
    keys("t"); keys("-l", "\\"); keys("Escape")

    # F9 kills the victim, and only it.
    keys("/")
    for ch in "proctor-top-victim":
        keys("-l", ch)
    keys("Enter")
    s = wait_for(lambda s: True, timeout=0.5)
    keys("F9")
    s = wait_for(lambda s: "SIGTERM" in s and "Send to" in s)
    check("Send to pid" in s, "F9 opens the signal menu for the selected process", s)
    keys("Enter")
    s = wait_for(lambda s: "Confirm" in s)
    check(f"Send SIGTERM to pid {victim}" in s, "the confirmation names the victim's pid", s)
    keys("y")
    s = wait_for(lambda s: "sent SIGTERM" in s)
    check(f"sent SIGTERM to pid {victim}" in s, "the result is shown", s)
    # Gone, or a zombie its parent has not reaped yet; a starved victim takes a while to run its exit.
    victim_gone = until(lambda: read(f"/proc/{victim}/stat", b") Z").split(b")")[-1].split()[0] == b"Z", 20)
    check(victim_gone, "the victim got the signal")
    check(os.path.exists(f"/proc/{big}") and os.path.exists(f"/proc/{parent.pid}"), "its parent and sibling are untouched")

    # Hostile names never reach the terminal as control sequences.
    keys("-l", "\\")
    for ch in "proctor-top-evil":
        keys("-l", ch)
    keys("Enter")
    s = wait_for(lambda s: any(p == evil.pid for p, _ in rows(s)))
    keys("Enter")
    s = wait_for(lambda s: "command:" in s)
    check("?]0;pwned??[31mRED?gpj.exe" in s.replace("\n", ""), "the detail pane shows the hostile command line with ? for its control characters", s)
    check(f"pid {evil.pid}  ?[31mEVIL?" in s, "and its hostile name the same way", s)
    keys("Enter")
    title = tmux("display-message", "-p", "-t", SESSION, "#{pane_title}")
    check("pwned" not in title, f"the pane title was not changed by it ({title.strip()!r})")
    ansi = tmux("capture-pane", "-p", "-e", "-t", SESSION)
    check(re.search(r"\x1b\[(3[0-7]|38;5;\d+)m", ansi) is None and "\u202e" not in ansi,
          "no colour (NO_COLOR, and none from the hostile name) and no right-to-left override reached the terminal")
    keys("-l", "\\"); keys("Escape")

    # z: cgroups with their pressure, read live off the screen's thread.
    keys("z")
    s = wait_for(lambda s: "PSI cpu/mem/io" in s and re.search(r"\s[\d.]+/[\d.]+/[\d.]+\s", s) is not None, timeout=10)
    if os.path.exists("/proc/pressure/cpu"):
        check(re.search(r"\s[\d.]+/[\d.]+/[\d.]+\s", s) is not None, "z shows cgroups with their PSI (cpu/mem/io)", s)
    else:
        print("SKIP z's PSI figures: this kernel has no /proc/pressure")
        check("PSI cpu/mem/io" in s, "z shows the cgroup view", s)
    # Enter zooms into the first cgroup: the table shows only its processes.
    keys("Enter")
    s = wait_for(lambda s: "processes of cgroup /" in s, timeout=10)
    zoomed = re.search(r"processes of cgroup (\S+)", s)
    drawn_before = frame_second(s) + 1
    def in_cgroup(pid, path):
        try:
            if started_at(pid) >= drawn_before:
                return True  # exited since the frame, and its pid taken by a newer process
            return any(line.rstrip("\n").endswith(":" + path) for line in open(f"/proc/{pid}/cgroup"))
        except OSError:
            return True  # exited since the frame
    shown = [p for p, _ in rows(s)]
    outside = [p for p in shown if zoomed is not None and not in_cgroup(p, zoomed.group(1))]
    def described(pid):
        try:
            return f"{pid} {open(f'/proc/{pid}/comm').read().strip()} started {started_at(pid):.2f}, frame {drawn_before - 1}: " + \
                " ".join(line.strip() for line in open(f"/proc/{pid}/cgroup") if ":memory:" in line or line.startswith("0::"))
        except OSError as e:
            return f"{pid}: {e}"
    check(zoomed is not None and shown and not outside,
          "Enter in z zooms into one cgroup: every row shown is in it",
          s + "".join(f"\n  not in it: {described(p)}" for p in outside))
    keys("Escape")

    # F8 lowers the selected process's priority (nice +1), through the actions worker.
    keys("-l", "\\")
    for ch in "proctor-top-big":
        keys("-l", ch)
    keys("Enter")
    wait_for(lambda s: len(rows(s)) == 1)
    nice_before = int(open(f"/proc/{big}/stat").read().rsplit(")", 1)[1].split()[16])
    keys("F8")
    s = wait_for(lambda s: "lowered the priority" in s)
    nice_after = int(open(f"/proc/{big}/stat").read().rsplit(")", 1)[1].split()[16])
    check(nice_after == min(nice_before + 1, 19) and f"lowered the priority of (nice +1) pid {big}" in s,
          f"F8 renices the selected process ({nice_before} -> {nice_after}) and says so", s)
    keys("-l", "\\"); keys("Escape")

    # F2: a column switched on is kept in the config file and shown.
    keys("F2")
    s = wait_for(lambda s: "Columns:" in s)
    keys("Down")  # ppid, the second field
    time.sleep(0.2)
    keys("Space")
    time.sleep(0.2)
    keys("Escape")
    s = wait_for(lambda s: "columns kept in" in s)
    kept = open(conf).read() if os.path.exists(conf) else ""
    check("ppid" in kept and re.search(r"\bPPID\b", s) is not None, "F2 turns on PPID, shows it and keeps it in the config file", s)

    # F2 turns on PSS and Read/s in the running sampler: the 200 MiB child's row shows a
    # number under each (after `-` until the first reading), with no restart.
    keys("F2")
    s = wait_for(lambda s: "Columns:" in s and "pss_bytes" in s)
    listed = re.findall(r"\[[ x]\] (\w+)", s)
    for name in ["pss_bytes", "read_bytes_per_sec"]:
        at = listed.index(name) if name in listed else 0
        for _ in range(at):
            keys("Down")
        time.sleep(0.2)
        keys("Space")
        time.sleep(0.2)
        for _ in range(at):
            keys("Up")
    keys("Escape")
    s = wait_for(lambda s: "columns kept in" in s)
    keys("-l", "\\")
    for ch in "proctor-top-big":
        keys("-l", ch)
    keys("Enter")

    def under(s, title):
        """The cell of the big child's row under a right-aligned column's title."""
        head = next((l for l in s.splitlines() if re.match(r"\s*PID\b", l)), "")
        m = re.search(r"\s" + re.escape(title) + r"[▲▼]?(?=\s)", head)
        line = next((l for p, l in rows(s) if p == big), "")
        return line[max(m.end() - 9, 0):m.end()].strip() if m and line else ""

    number = re.compile(r"^[\d.]+ (B|KiB|MiB|GiB)(/s)?$")
    # The PSS worker reads under its CPU budget: a dev build beside two busy loops on a slow
    # machine took more than 60 s to reach the child (release builds there: well under).
    s = wait_for(lambda s: number.match(under(s, "PSS")) and number.match(under(s, "Read/s")), timeout=120)
    kept = open(conf).read() if os.path.exists(conf) else ""
    check("pss_bytes" in kept and number.match(under(s, "PSS")) is not None,
          f"F2 turns PSS on and the 200 MiB child's PSS comes without a restart ({under(s, 'PSS')!r})", s)
    check(number.match(under(s, "Read/s")) is not None,
          f"F2 turns Read/s on and its rate comes without a restart ({under(s, 'Read/s')!r})", s)
    keys("-l", "\\"); keys("Escape")

    # F6: htop's "Sort by" menu; Home, Enter sorts by its first column (PID), the heading marks it.
    keys("F6")
    s = wait_for(lambda s: "Sort by" in s)
    check("Sort by" in s and re.search(r"│[▲▼] RSS", s) is not None, "F6 opens the Sort by menu, RSS marked as sorted by", s)
    keys("Home")
    time.sleep(0.2)
    keys("Enter")
    # The heading and the message come in one frame; the message hides while a problem is
    # shown, and says itself again with it once the status line has room (see draw.rs).
    s = wait_for(lambda s: "Sort by" not in s and re.search(r"\bPID[▲▼]", s) is not None and "sorted by PID" in s)
    check(re.search(r"\bPID[▲▼]", s) is not None and "sorted by PID" in s, "Home, Enter in the menu sorts by PID", s)

    # Resize to 80x24: the header stays whole.
    tmux("resize-window", "-t", SESSION, "-x", "80", "-y", "24", check_rc=False)
    s = wait_for(lambda s: max((len(l) for l in s.splitlines()), default=0) <= 80 and "PID" in s, timeout=10)
    lines = s.splitlines()
    check(len(lines) <= 24 and all(len(l) <= 80 for l in lines), "at 80x24 every line fits", s)
    check(lines and lines[0].startswith("proctor top") and any(l.startswith("Mem") for l in lines)
          and any(l.startswith("Load") for l in lines) and any("PID" in l for l in lines), "at 80x24 the header and table heading are whole", s)

    # q restores the terminal.
    keys("q")
    s = wait_for(lambda s: re.search(r"EXITED rc=\d+ \S", s) is not None)
    check("EXITED rc=0" in s and "BEFORE-TOP" in s, "q exits 0 and the screen before top is back", s)
    check(re.search(r"EXITED rc=0 icanon", s) is not None, "the terminal is cooked again (icanon)", s)
    alt = tmux("display-message", "-p", "-t", SESSION, "#{alternate_on}").strip()
    check(alt == "0", f"the alternate screen is left ({alt})")

    log = [json.loads(l) for l in open(slow_log)] if os.path.exists(slow_log) else []
    # The alerts' log line: the rule fired for the child, and says the --slow part it came from.
    check(any(e.get("state") == "firing" and e.get("labels", {}).get("pid") == str(big)
              and e.get("labels", {}).get("slow") == "rss>150MiB" for e in log),
          f"the slow log has the firing ({len(log)} lines)")

    # SIGTERM from outside restores the terminal too.
    start_top(["--interval", "500ms", "--config", conf])
    wait_for(lambda s: "PID" in s)
    colours = tmux("capture-pane", "-p", "-e", "-t", SESSION)
    check(re.search(r"\x1b\[(3[0-7]|38;5;\d+)m", colours) is not None, "without NO_COLOR the screen has colours (so the NO_COLOR check can fail)")
    pane_pid = tmux("display-message", "-p", "-t", SESSION, "#{pane_pid}").strip()
    top_pid = subprocess.run(["pgrep", "-P", pane_pid, "-f", "proctor top"], capture_output=True, text=True).stdout.split()
    if top_pid:
        os.kill(int(top_pid[0]), signal.SIGTERM)
    s = wait_for(lambda s: re.search(r"EXITED rc=\d+ \S", s) is not None)
    check("EXITED rc=0 icanon" in s, "SIGTERM: top exits and the terminal is cooked again", s)

    # At 80x24 a program installed under a long path shows its basename, highlighted (bold), and
    # its argument: the directory gives way, as htop's shortened paths.
    bindir = os.path.join(TMP, "a", "very", "long", "install", "path", "bin")
    os.makedirs(bindir)
    sleeper_path = os.path.join(bindir, "proctor-long-sleeper")
    shutil.copy("/bin/sleep", sleeper_path)
    sleeper = subprocess.Popen([sleeper_path, "999"])
    STARTED.append(sleeper)
    start_top(["--interval", "500ms", "--config", os.path.join(TMP, "default.conf"), "--filter", "proctor-long-sleeper"],
              size=(80, 24))
    s = wait_for(lambda s: any(p == sleeper.pid and " 999" in l for p, l in rows(s)))
    line = next((l for p, l in rows(s) if p == sleeper.pid), "")
    check(line.rstrip().endswith(" proctor-long-sleeper 999"), f"at 80x24 the long-path program shows its basename and argument ({line.rstrip()!r})", s)
    ansi = tmux("capture-pane", "-p", "-e", "-t", SESSION)
    lit = next((l for l in ansi.splitlines() if str(sleeper.pid) in l), "")
    before = re.search(r"((?:\x1b\[[\d;]*m)+)proctor-long-sleeper", lit)
    check(before is not None and any(bold_in(p) for p in re.findall(r"\x1b\[([\d;]*)m", before.group(1))),
          f"its basename is bold ({lit!r})")
    keys("q")
    wait_for(lambda s: re.search(r"EXITED rc=\d+ \S", s) is not None)

    # H: a process's threads as rows under it, each with the name it gave itself (prctl), and
    # gone again on a second H.
    threaded_py = os.path.join(TMP, "threaded.py")
    with open(threaded_py, "w") as f:
        f.write("import ctypes, threading, time\nlibc = ctypes.CDLL(None)\n"
                "def run(name):\n    libc.prctl(15, name.encode(), 0, 0, 0)\n    time.sleep(600)\n"
                "for n in ('pt-alpha', 'pt-beta', 'pt-gamma'):\n    threading.Thread(target=run, args=(n,), daemon=True).start()\n"
                "time.sleep(600)\n")
    threaded = subprocess.Popen(["python3", threaded_py, "proctor-top-threaded"])
    STARTED.append(threaded)
    names = ("pt-alpha", "pt-beta", "pt-gamma")
    start_top(["--interval", "500ms", "--config", os.path.join(TMP, "default.conf"), "--filter", "proctor-top-threaded"])
    s = wait_for(lambda s: any(p == threaded.pid for p, _ in rows(s)))
    check(not any(n in s for n in names), "before H no thread row is shown", s)
    keys("H")
    s = wait_for(lambda s: all(n in s for n in names), timeout=15)
    table = rows(s)
    at = next((i for i, (p, _) in enumerate(table) if p == threaded.pid), None)
    below = [l for _, l in table[at + 1:at + 4]] if at is not None else []
    tids = {int(t) for t in os.listdir(f"/proc/{threaded.pid}/task")}
    check(at is not None and all(any(n in l for l in below) for n in names)
          and all(p in tids and p != threaded.pid for p, _ in table[at + 1:at + 4]),
          "H: each named thread is a row (its tid in the PID column) under its process", s)
    keys("H")
    s = wait_for(lambda s: not any(n in s for n in names), timeout=15)
    check(not any(n in s for n in names) and any(p == threaded.pid for p, _ in rows(s)),
          "H again: the thread rows are gone, the process stays", s)
    keys("q")
    wait_for(lambda s: re.search(r"EXITED rc=\d+ \S", s) is not None)

    # X: processes that ended, those that lived between two samples too (BPF process events,
    # root here), each with its own argument; a SKIP line where the events cannot be had.
    start_top(["--interval", "1s", "--config", os.path.join(TMP, "default.conf")])
    wait_for(lambda s: "PID" in s)
    subprocess.run(["sh", "-c", "for i in 1 2 3 4 5; do /bin/true proctor-top-ended $i; done"], check=True)
    keys("X")
    want = [f"/bin/true proctor-top-ended {i}" for i in range(1, 6)]
    s = wait_for(lambda s: all(w in s for w in want) or "no BPF process events" in s, timeout=15)
    if "no BPF process events" in s:
        print("SKIP: top's X view of ended processes: the live agent has no BPF process events (proctor doctor says why)")
    else:
        lines = [l for l in s.splitlines() if "proctor-top-ended" in l]
        check(all(w in s for w in want) and all(re.search(r"\s0\s+(no|yes)\s+/bin/true", l) for l in lines),
              "X lists the five short-lived children with exit code 0, each with its argument", s)
    keys("Escape")
    s = wait_for(lambda s: "proctor-top-ended" not in s)
    check("proctor-top-ended" not in s and "PID" in s, "Esc leaves the ended view for the processes", s)
    keys("q")
    wait_for(lambda s: re.search(r"EXITED rc=\d+ \S", s) is not None)

    # A recording: stepping back shows a process that has since exited.
    data = os.path.join(TMP, "data")
    rec = subprocess.Popen([PROCTOR, "record", "--dir", data, "--interval", "250ms"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    STARTED.append(rec)
    short = subprocess.Popen(["python3", hog, "1", "proctor-top-shortlived"])
    STARTED.append(short)
    # The recording has the process (with the command line the filter matches), then, after it
    # ends, a newer frame without it: read back from the recording as it is written.
    def recorded():
        out = subprocess.run([PROCTOR, "top", "--dir", data, "--once", "--size", "160x30", "--filter", "proctor-top-shortlived"],
                             capture_output=True, text=True).stdout
        return short.pid in [p for p, _ in rows(out)]
    until(recorded, 60, step=0.25)
    short.terminate()
    short.wait()
    until(lambda: not recorded(), 60, step=0.25)
    rec.send_signal(signal.SIGINT)
    rec.wait(timeout=20)
    start_top(["--dir", data, "--filter", "proctor-top-shortlived", "--config", conf])
    s = wait_for(lambda s: "PID" in s)
    check(short.pid not in [p for p, _ in rows(s)], "the newest recorded frame no longer has the short-lived process", s)
    # Each `[` is one 250 ms frame back; how many lie between the process's end and the
    # recorder's stop depends on how long the `--once` polls above took to see it gone (seconds
    # on a loaded machine). A step is taken only once the previous one is on the screen (the
    # paused clock, to the millisecond, went back): a key sent before top drew its last answer
    # would step twice between two looks, and the process may be in only a frame or two.
    found = False
    shown = frame_ms(s) + 999  # the live clock is whole seconds
    for _ in range(1000):
        keys("[")
        s = wait_for(lambda s: "loading" not in s and "PAUSED" in s and went_back(shown, frame_ms(s)), timeout=15)
        if not ("PAUSED" in s and went_back(shown, frame_ms(s))):
            break  # the oldest frame: nothing further back
        shown = frame_ms(s)
        if short.pid in [p for p, _ in rows(s)]:
            found = True
            break
    check(found and "PAUSED in the past" in s, "[ steps back through the recording to the process that has since exited", s)
    keys("C-c")
    s = wait_for(lambda s: re.search(r"EXITED rc=\d+ \S", s) is not None)
    check("EXITED rc=0 icanon" in s, "Ctrl-C exits 0 and the terminal is cooked again", s)

    # --connect: a remote agent's screen, from its JSON API.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    serve = subprocess.Popen([PROCTOR, "serve", "--listen", f"127.0.0.1:{port}", "--no-record"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    STARTED.append(serve)
    out = ""
    for _ in range(40):
        time.sleep(0.25)
        p = subprocess.run([PROCTOR, "top", "--connect", f"http://127.0.0.1:{port}", "--once", "--size", "120x30", "--filter", "proctor-top-big"],
                           capture_output=True, text=True)
        out = p.stdout
        if p.returncode == 0 and str(big) in out:
            break
    check(str(big) in out and "live from http://127.0.0.1" in out, "--connect shows the remote agent's processes", out)
    serve.terminate()
    serve.wait(timeout=10)

    # --once with the hostile process: plain text, nothing for a terminal to act on.
    p = subprocess.run([PROCTOR, "top", "--once", "--size", "160x30", "--filter", "proctor-top-evil"], capture_output=True)
    check(p.returncode == 0 and b"\x1b" not in p.stdout and "\u202e".encode() not in p.stdout and b"?[31mRED?gpj.exe" in p.stdout,
          "--once prints the hostile process without escape or bidi characters")


if __name__ == "__main__":
    try:
        main()
    finally:
        tmux("kill-server", check_rc=False)
        # The family's children are ours too: found before their parents end, ended by pid.
        kids = []
        for proc in STARTED:
            kids += subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        for c in kids:
            try:
                os.kill(int(c), signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in STARTED:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        # Its scripts, config and recording; a failure's screens were printed above.
        shutil.rmtree(TMP, ignore_errors=True)
    if FAILED:
        print(f"top e2e: {len(FAILED)} failed")
        sys.exit(1)
    print("top e2e: all passed")
