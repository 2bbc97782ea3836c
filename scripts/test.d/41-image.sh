#!/usr/bin/env bash
# The OCI image (issue 22): packaging/image/build.sh builds it with buildah from scratch (the
# release binary and the libraries ldd names, no registry), and podman runs it the way a node
# agent runs, `podman run --pid=host -v /:/host:ro`:
#   - `proctor snapshot --host-root /host --format json` inside it lists this machine's
#     processes (every process seen outside before and after it, by pid and start time,
#     including a sleep this part starts);
#   - `proctor doctor --host-root /host` inside it says it shares the host's pid namespace;
#   - the image holds nothing but proctor, its libraries and three small files.
#
# Installs buildah, podman and runc with apt-get when missing (root); where they cannot be
# installed or podman cannot run a container here, a loud SKIP with podman's own words.
# Images and containers live in a private storage root under a temporary directory, removed
# at the end.
#
# needs: release (scripts/test.sh runs this part once the release build is made)
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (the release build's proctor)"
source scripts/lib/cargo.sh

have() { command -v buildah >/dev/null && command -v podman >/dev/null && command -v runc >/dev/null; }
if ! have && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "-- installing buildah, podman and runc (apt-get)"
  mkdir -p "$target_dir"
  (apt-get install -y -qq buildah podman runc || (apt-get update -qq && apt-get install -y -qq buildah podman runc)) \
    >"$target_dir/apt-podman.log" 2>&1 || true
fi
if ! have; then
  echo "SKIP: OCI image: buildah, podman or runc is missing and could not be installed (see $target_dir/apt-podman.log): the image is NOT tested"
  exit 0
fi

[[ -x $proctor_release ]] || { echo "-- release build (this part was run alone)"; release_build; }
bin=$proctor_release

work=$(mktemp -d /tmp/proctor-image.XXXXXX)
sleeper=""
cleanup() {
  [[ -n $sleeper ]] && kill "$sleeper" 2>/dev/null || true
  podman "${store[@]}" rm -af >/dev/null 2>&1 || true
  buildah "${store[@]}" rm -a >/dev/null 2>&1 || true
  podman "${store[@]}" rmi -af >/dev/null 2>&1 || true
  rm -rf "$work"
}
# A private store (vfs: no overlay mounts to leave behind); crun refuses cgroup v1 hybrid
# hosts, runc does not; the host's cgroup manager here is plain cgroupfs, not systemd.
store=(--root "$work/storage" --runroot "$work/run" --storage-driver vfs)
trap cleanup EXIT
export BUILDAH_ARGS="${store[*]}"
image=localhost/proctor:test
echo "-- $(buildah --version), $(podman --version)"
packaging/image/build.sh "$bin" "$image"

# podman's default ulimits (nofile, nproc) are above this machine's hard limits, which the
# runtime may not raise: pass the open-file hard limit itself and a modest process limit
# (lowering a limit is always allowed; the agent runs a handful of threads).
run_args=(--runtime runc --cgroup-manager cgroupfs --events-backend file)
ctr_args=(--rm --network none --pid=host -v /:/host:ro
  --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
if ! podman "${store[@]}" "${run_args[@]}" run "${ctr_args[@]}" "$image" --version >"$work/version.out" 2>&1; then
  echo "SKIP: OCI image: podman cannot run a container here: $(tail -1 "$work/version.out"): the image was built but NOT run"
  exit 0
fi
echo "-- in the image: $(cat "$work/version.out")"

sleep 600 &
sleeper=$!
snap=(snapshot --host-root /host --interval 0 --top 100000 --sort pid --format json)
"$bin" snapshot --interval 0 --top 100000 --sort pid --format json >"$work/before.json"
podman "${store[@]}" "${run_args[@]}" run "${ctr_args[@]}" "$image" "${snap[@]}" >"$work/inside.json" 2>"$work/inside.err" ||
  { echo "FAIL: proctor snapshot in the image:"; cat "$work/inside.err"; exit 1; }
"$bin" snapshot --interval 0 --top 100000 --sort pid --format json >"$work/after.json"
podman "${store[@]}" "${run_args[@]}" run "${ctr_args[@]}" "$image" doctor --host-root /host --format json >"$work/doctor.json" 2>"$work/doctor.err" ||
  { echo "FAIL: proctor doctor in the image:"; cat "$work/doctor.err"; exit 1; }
# What the image holds, from the image itself (no shell in it to list with).
podman "${store[@]}" image mount "$image" >"$work/mnt.path" 2>/dev/null || true
if [[ -s $work/mnt.path ]]; then
  (cd "$(cat "$work/mnt.path")" && find . -type f | sort) >"$work/files.txt"
  podman "${store[@]}" image unmount "$image" >/dev/null 2>&1 || true
fi
size=$(podman "${store[@]}" image inspect "$image" --format '{{.Size}}')

python3 - "$work" "$sleeper" "$size" <<'PY'
import json, sys
work, sleeper, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
load = lambda name: json.load(open(f"{work}/{name}"))
procs = lambda doc: {(p["pid"], p["start_time_unix_secs"]) for p in doc["processes"]["top"]}
before, inside, after = procs(load("before.json")), procs(load("inside.json")), procs(load("after.json"))
stable = before & after
missing = stable - inside
assert not missing, f"the image's snapshot missed host processes seen before and after it: {sorted(missing)[:10]}"
assert sleeper in {pid for pid, _ in inside}, f"the host's sleep {sleeper} is not in the image's snapshot"
print(f"image: snapshot --host-root /host lists all {len(stable)} host processes seen before and after it "
      f"({len(inside)} in all), sleep {sleeper} among them")
reading = load("doctor.json")["reading"]
assert reading["host_root"] and reading["root"] == "/host", reading
assert "sharing the pid namespace" in reading["says"] and reading["in_host_pid_namespace"] is True, reading
print(f"image: doctor: {reading['says']}")
try:
    files = [f.strip() for f in open(f"{work}/files.txt")]
except FileNotFoundError:
    files = []
if files:
    extra = [f for f in files if not (f in ("./usr/bin/proctor", "./etc/passwd", "./etc/group") or ".so" in f)]
    assert not extra, f"the image holds more than proctor and its libraries: {extra}"
    print(f"image: {size / 1e6:.1f} MB, {len(files)} files: " + ", ".join(f[1:] for f in files))
else:
    print(f"image: {size / 1e6:.1f} MB (its files could not be listed here)")
PY
# With CAP_BPF and CAP_PERFMON added, and bpf(2) let through seccomp (podman's default profile
# refuses it: docs/deploy.md), as docs/deploy.md's podman line runs it: inside the container, in
# the host's pid namespace, doctor says the task iterator and the process events work under
# --host-root. Without the seccomp option, doctor must say why it cannot. A SKIP line where
# this podman cannot add the capabilities.
bpf_args=(--cap-add CAP_BPF --cap-add CAP_PERFMON)
if podman "${store[@]}" "${run_args[@]}" run "${ctr_args[@]}" "${bpf_args[@]}" --security-opt seccomp=unconfined \
  "$image" doctor --host-root /host >"$work/doctor-bpf.txt" 2>"$work/doctor-bpf.err"; then
  iter=$(grep "^task iterator:" "$work/doctor-bpf.txt" || true)
  events=$(grep "^process events:" "$work/doctor-bpf.txt" || true)
  echo "image (+CAP_BPF CAP_PERFMON, seccomp unconfined): $iter"
  echo "image (+CAP_BPF CAP_PERFMON, seccomp unconfined): $events"
  [[ $iter == *"every process's stat fields at once"* ]] || { echo "FAIL: the task iterator in the image"; exit 1; }
  [[ $events == *"every exec and process exit"* ]] || { echo "FAIL: the process events in the image"; exit 1; }
  podman "${store[@]}" "${run_args[@]}" run "${ctr_args[@]}" "${bpf_args[@]}" "$image" doctor --host-root /host \
    >"$work/doctor-seccomp.txt" 2>&1 || true
  events=$(grep "^process events:" "$work/doctor-seccomp.txt" || true)
  echo "image (+caps, default seccomp): $events"
  if [[ $events == *"every exec and process exit"* ]]; then
    echo "-- this podman's default seccomp profile lets bpf(2) through"
  else
    [[ $events == *"not used"*"seccomp profile that lets bpf(2) through"* ]] \
      || { echo "FAIL: refused under the default seccomp profile, doctor does not say what is needed"; exit 1; }
  fi
else
  echo "SKIP: BPF in the image: podman cannot add CAP_BPF and CAP_PERFMON here: $(tail -1 "$work/doctor-bpf.err")"
fi
echo "image: passed"
