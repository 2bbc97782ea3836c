#!/usr/bin/env bash
# --host-root (issue 22), the way a container sees the host: inside a mount namespace made with
# `unshare -m`, the real /proc and /sys are bind-mounted under a temporary directory standing
# for /host, and an empty tmpfs is mounted over /sys/fs/cgroup, so cgroups can only be read
# through the host root. There:
#   - `proctor snapshot --host-root DIR` lists the same processes as a snapshot without it
#     (every process seen before and after it, by pid and start time);
#   - container truth is computed for a host cgroup: a `sleep` in a cgroup this part makes,
#     with a 0.5-CPU quota and a 300 MiB memory limit, is found with both limits through the
#     host root, and without it (the cgroup mounts hidden) the limits are not found;
#   - `proctor doctor --host-root DIR` says which root it reads and that it shares the pid
#     namespace of DIR/proc.
# And inside `unshare -m -p -f` with a fresh /proc (a container without --pid=host): without
# the host root only that namespace's processes are seen; with it the host's are, and doctor
# says proctor runs in a child pid namespace and which pid it has on the host.
#
# Needs root, unshare (util-linux) and a writable cgroup hierarchy; otherwise a loud SKIP.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (the dev build's proctor)"
source scripts/lib/cargo.sh

if [[ $(id -u) -ne 0 ]] || ! command -v unshare >/dev/null; then
  echo "SKIP: --host-root in a mount namespace: needs root and unshare (running as uid $(id -u)): NOT tested"
  exit 0
fi
if ! unshare -m true 2>/dev/null; then
  echo "SKIP: --host-root in a mount namespace: unshare -m is refused here ($(unshare -m true 2>&1 | head -1)): NOT tested"
  exit 0
fi
ensure_dev_proctor
bin="$(cd "$target_dir/debug" && pwd)/proctor"

work=$(mktemp -d /tmp/proctor-host-root.XXXXXX)
host="$work/host"
mkdir -p "$host/proc" "$host/sys"
sleeper=""
cgroups=()
cleanup() {
  [[ -n $sleeper ]] && kill "$sleeper" 2>/dev/null || true
  [[ -n $sleeper ]] && wait "$sleeper" 2>/dev/null || true
  for dir in "${cgroups[@]}"; do
    rmdir "$dir" 2>/dev/null || true
  done
  rmdir "$host/proc" "$host/sys" "$host" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# A cgroup with a CPU quota and a memory limit, and a sleep in it: cgroup v1 (cpu and memory
# controllers, as here) or v2 (cpu.max and memory.max).
name="proctor-host-root-$$"
sleep 600 &
sleeper=$!
if [[ -d /sys/fs/cgroup/memory && -d /sys/fs/cgroup/cpu ]]; then
  for c in cpu memory; do
    mkdir "/sys/fs/cgroup/$c/$name" && cgroups+=("/sys/fs/cgroup/$c/$name")
  done
  echo 100000 >"/sys/fs/cgroup/cpu/$name/cpu.cfs_period_us"
  echo 50000 >"/sys/fs/cgroup/cpu/$name/cpu.cfs_quota_us"
  echo $((300 << 20)) >"/sys/fs/cgroup/memory/$name/memory.limit_in_bytes"
  for c in cpu memory; do
    echo "$sleeper" >"/sys/fs/cgroup/$c/$name/cgroup.procs"
  done
  echo "-- cgroup v1: $name with a 0.5-CPU quota and a 300 MiB limit, holding sleep $sleeper"
elif [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
  mkdir "/sys/fs/cgroup/$name" && cgroups+=("/sys/fs/cgroup/$name")
  echo "+cpu +memory" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
  echo "50000 100000" >"/sys/fs/cgroup/$name/cpu.max"
  echo $((300 << 20)) >"/sys/fs/cgroup/$name/memory.max"
  echo "$sleeper" >"/sys/fs/cgroup/$name/cgroup.procs"
  echo "-- cgroup v2: $name with a 0.5-CPU quota and a 300 MiB limit, holding sleep $sleeper"
else
  echo "SKIP: --host-root in a mount namespace: no cgroup v1 cpu/memory or v2 hierarchy to make a limited cgroup in: NOT tested"
  exit 0
fi

snap="--interval 0 --top 100000 --sort pid --format json"
# In a mount namespace: the host's /proc and /sys under $host, the cgroup mounts hidden.
# shellcheck disable=SC2086
unshare -m bash -c "
  set -e
  mount --rbind /proc '$host/proc'
  mount --rbind /sys '$host/sys'
  mount -t tmpfs proctor-hides-cgroups /sys/fs/cgroup
  '$bin' snapshot $snap > '$work/before.json'
  '$bin' snapshot $snap --host-root '$host' > '$work/host.json'
  '$bin' snapshot $snap > '$work/after.json'
  '$bin' snapshot $snap --host-root '$host' --container-pid $sleeper > '$work/host-limited.json'
  '$bin' snapshot $snap --container-pid $sleeper > '$work/plain-limited.json'
  '$bin' doctor --host-root '$host' --format json > '$work/doctor.json'
  '$bin' doctor --host-root '$host' > '$work/doctor.txt'
"
# In a pid namespace of its own with a fresh /proc, the host's /proc still under $host.
# shellcheck disable=SC2086
unshare -m -p -f bash -c "
  set -e
  mount --rbind /proc '$host/proc'
  mount -t proc proc /proc
  '$bin' snapshot $snap > '$work/ns-plain.json'
  '$bin' snapshot $snap --host-root '$host' > '$work/ns-host.json'
  '$bin' doctor --host-root '$host' --format json > '$work/ns-doctor.json'
"
# A host root that is not one is refused with the reason.
if "$bin" snapshot --host-root "$work" --interval 0 >"$work/bad.out" 2>&1; then
  echo "FAIL: snapshot --host-root $work (no proc/ there) succeeded"
  exit 1
fi
grep -q "cannot be read" "$work/bad.out" || { echo "FAIL: a host root without /proc: no reason given:"; cat "$work/bad.out"; exit 1; }

python3 - "$work" "$sleeper" "$host" <<'PY'
import json, sys
work, sleeper, host = sys.argv[1], int(sys.argv[2]), sys.argv[3]
load = lambda name: json.load(open(f"{work}/{name}"))
def procs(doc):
    return {(p["pid"], p["start_time_unix_secs"]) for p in doc["processes"]["top"]}

before, with_host, after = procs(load("before.json")), procs(load("host.json")), procs(load("after.json"))
stable = before & after
missing = stable - with_host
assert not missing, f"--host-root missed processes seen before and after it: {sorted(missing)[:10]}"
assert len(stable) >= 10, f"only {len(stable)} processes were stable across the three snapshots"
print(f"host root: all {len(stable)} processes seen before and after are listed under {host} ({len(with_host)} in all)")

limited = load("host-limited.json")["container"]
plain = load("plain-limited.json")["container"]
mib = 1 << 20
assert limited["quota_cpus"] == 0.5, f"quota through the host root: {limited['quota_cpus']} (0.5 expected): {limited}"
assert limited["memory_limit_bytes"] == 300 * mib and limited["memory_limit_source"] != "host", \
    f"memory limit through the host root: {limited['memory_limit_bytes']} from {limited['memory_limit_source']}"
assert limited["effective_cpus"] == 0.5, limited["effective_cpus"]
assert plain["quota_cpus"] is None and plain["memory_limit_bytes"] != 300 * mib, \
    f"with the cgroup mounts hidden, a snapshot without --host-root still found the limits: {plain}"
print(f"container truth through the host root: sleep {sleeper} in {limited['cgroup_path']}: "
      f"{limited['effective_cpus']} effective CPUs (quota), memory limit {limited['memory_limit_bytes'] // mib} MiB "
      f"({limited['memory_limit_source']}); without --host-root: quota {plain['quota_cpus']}, "
      f"limit from {plain['memory_limit_source']}")

doctor = load("doctor.json")["reading"]
assert doctor["host_root"] and doctor["root"] == host, doctor
assert "sharing the pid namespace" in doctor["says"], doctor["says"]
assert doctor["in_host_pid_namespace"] is True, doctor
text = open(f"{work}/doctor.txt").read()
assert text.startswith(f"reading: reads the host under {host}"), text[:300]
print(f"doctor: {text.splitlines()[0]}")

ns_plain, ns_host = procs(load("ns-plain.json")), procs(load("ns-host.json"))
ns_doctor = load("ns-doctor.json")["reading"]
assert len(ns_plain) <= 5, f"a fresh pid namespace showed {len(ns_plain)} processes"
assert sleeper in {pid for pid, _ in ns_host}, f"the host's sleep {sleeper} is not listed through the host root from a child pid namespace"
assert len(ns_host) >= len(stable) // 2, (len(ns_host), len(stable))
assert ns_doctor["in_host_pid_namespace"] is False and "child pid namespace" in ns_doctor["says"], ns_doctor
assert ns_doctor["pid_in_read_proc"] not in (None, 1, 2), ns_doctor
print(f"child pid namespace: {len(ns_plain)} processes without --host-root, {len(ns_host)} with it; doctor: {ns_doctor['says']}")
PY
echo "host root: passed"
