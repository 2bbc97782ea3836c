#!/usr/bin/env bash
# Issue 17's field report reproduced end to end (scripts/groups/seed_e2e.py): a wrapper script
# running child scripts in a loop and a memory hog that starts halfway, both in a 32 MiB memory
# cgroup made for the test; `proctor record --groups` records them and `proctor report --group
# wrapper` must show the wrapper's memory flat and its page-fault rate rising after the hog.
#
# Needs root and a memory cgroup it may create (v1's memory controller, or v2 with memory
# delegated); otherwise a loud SKIP. The work directory is on disk under target/ (a tmpfs
# keeps file pages in memory, and the test needs them to be dropped).
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (the dev build's proctor)"
source scripts/lib/cargo.sh

skip() {
  echo "SKIP: groups seed end-to-end: $1"
  exit 0
}
[ "$(id -u)" = 0 ] || skip "not root: cannot make a memory cgroup"
own_v1=$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
if [ -n "$own_v1" ] && [ -d "/sys/fs/cgroup/memory$own_v1" ]; then
  cg="/sys/fs/cgroup/memory${own_v1%/}/proctor-seed-$$"
  limit_file=memory.limit_in_bytes
elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
  own_v2=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
  cg="/sys/fs/cgroup${own_v2%/}/proctor-seed-$$"
  limit_file=memory.max
else
  skip "no memory cgroup controller found"
fi
mkdir "$cg" 2>/dev/null || skip "cannot create $cg"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
echo $((32 << 20)) > "$cg/$limit_file" || skip "cannot set $cg/$limit_file"

work="$target_dir/seed-e2e-$$"
rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
if [ "$(stat -f -c %T "$work")" = tmpfs ]; then
  skip "$work is on tmpfs, whose pages the cgroup cannot drop"
fi
ensure_dev_proctor
status=0
timeout 180 python3 scripts/groups/seed_e2e.py "$target_dir/debug/proctor" "$cg" "$work" || status=$?
rm -rf "$work"
exit $status
