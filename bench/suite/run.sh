#!/usr/bin/env bash
# What the whole test suite costs, as a newcomer meets it: a fresh clone of REV (no target/, no
# .venv, no node_modules) runs `bash scripts/test.sh` the way CI runs it (CI=true), timed by
# /usr/bin/time; with --hog, beside as many busy loops as the machine has cores (at least two):
# each a `bash` spinning at normal priority, a laptop busy with a browser and a build.
#
#   bash bench/suite/run.sh                 # cold: HEAD, idle machine
#   bash bench/suite/run.sh --hog           # the same beside two busy loops
#   bash bench/suite/run.sh --hog --rev main
#
# What a clone cannot bring stays on the machine between runs, as it does on a contributor's:
# Debian packages, cargo-installed tools (cargo-deb, cargo-fuzz), pip's and npm's download
# caches, rustup's targets. The first run on a new machine installs them; the script says which
# were already there, so a figure is never quoted without it. Prints the suite's per-part table,
# the wall time, the CPU time and the load; the clone is removed at the end and the suite's
# output kept in target/bench-suite/ of this checkout.
set -uo pipefail
cd "$(dirname "$0")/../.."
rev=HEAD
hog=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --hog) hog=1; shift ;;
    --rev) rev=$2; shift 2 ;;
    *) sed -n '2,16p' "$0"; exit 2 ;;
  esac
done
sha=$(git rev-parse --verify "$rev^{commit}") || exit 2
out=$PWD/target/bench-suite
mkdir -p "$out"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
kind=$([[ $hog -eq 1 ]] && echo loaded || echo cold)
log="$out/$stamp-$kind-${sha:0:12}.log"
clone=$(mktemp -d /tmp/proctor-suite.XXXXXX)

hogs=()
cleanup() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$clone"
}
trap cleanup EXIT

# What the machine already has that the suite would otherwise install.
have=()
for tool in cargo-deb cargo-fuzz; do command -v "$tool" >/dev/null && have+=("$tool"); done
for deb in prometheus chromium qemu-user buildah; do
  dpkg-query -W -f='${Status}' "$deb" 2>/dev/null | grep -q "install ok installed" && have+=("deb:$deb")
done

git clone --quiet --no-local "$PWD" "$clone/proctor" || exit 1
git -C "$clone/proctor" checkout --quiet --detach "$sha"
if [[ $hog -eq 1 ]]; then
  loops=$(nproc)
  [[ $loops -ge 2 ]] || loops=2
  for _ in $(seq "$loops"); do
    bash -c 'while :; do :; done' &
    hogs+=($!)
  done
fi
{
  echo "-- suite at ${sha:0:12}, $kind ($([[ $hog -eq 1 ]] && echo "${#hogs[@]} busy loops, pids ${hogs[*]}" || echo "no hog")), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "-- already on this machine: ${have[*]:-nothing the suite installs}"
  echo "-- command: cd FRESH_CLONE && CI=true /usr/bin/time -f '%e s wall, %U s user, %S s system' bash scripts/test.sh"
} | tee "$log"
(cd "$clone/proctor" && CI=true /usr/bin/time -f '%e s wall, %U s user, %S s system' -o "$clone/time" \
  bash scripts/test.sh) >>"$log" 2>&1
status=$?
sed -n '/^== summary/,$p' "$log"
echo "-- suite: exit $status, $(cat "$clone/time"), load at the end $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
echo "-- full output: $log"
exit $status
