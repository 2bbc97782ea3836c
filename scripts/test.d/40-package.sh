#!/usr/bin/env bash
# The systemd unit and the Debian package (issue 22):
#   - packaging/proctor.service passes `systemd-analyze verify`, and `systemd-analyze security`'s
#     exposure score is printed and held under a bar (a loosened sandbox fails here);
#   - the capabilities the unit grants are the ones the agent needs: as an unprivileged user,
#     `proctor doctor` is denied other users' /proc/PID/io and smaps_rollup; with CAP_SYS_PTRACE
#     and CAP_DAC_READ_SEARCH (setpriv, as the unit's AmbientCapabilities does) it is denied no
#     more than root, and with either one alone it is still denied some;
#   - `cargo deb` (cargo-deb installed from crates.io when missing) builds the package, which
#     `dpkg -i` installs: /usr/bin/proctor runs `doctor`, the unit, /etc/default/proctor, the
#     proctor user and /var/lib/proctor are where the unit expects them, and the proctor user
#     records into /var/lib/proctor; `dpkg -r` removes the package and keeps that recording,
#     and purge removes it.
#
# Needs root and dpkg (else a loud SKIP); systemd-analyze's checks SKIP loudly where systemd is
# missing. The package is purged and the proctor user removed at the end, so the machine is as
# it was.
#
# needs: release (scripts/test.sh runs this part once the release build is made)
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (the release build's proctor; cargo-deb itself when it is not installed)"
source scripts/lib/cargo.sh

if [[ $(id -u) -ne 0 ]] || ! command -v dpkg >/dev/null; then
  echo "SKIP: Debian package: needs root and dpkg (uid $(id -u)): the package is NOT tested"
  exit 0
fi
if dpkg -s proctor >/dev/null 2>&1; then
  echo "FAIL: a proctor package is already installed here; this part installs and purges its own"
  exit 1
fi

[[ -x $proctor_release ]] || { echo "-- release build (this part was run alone)"; release_build; }
bin=$proctor_release

work=$(mktemp -d /tmp/proctor-package.XXXXXX)
installed=0
made_user=0
cleanup() {
  if [[ $installed -eq 1 ]]; then
    dpkg -P proctor >/dev/null 2>&1 || true
  fi
  if [[ $made_user -eq 1 ]] && getent passwd proctor >/dev/null; then
    userdel proctor >/dev/null 2>&1 || true
    getent group proctor >/dev/null && groupdel proctor >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
getent passwd proctor >/dev/null || made_user=1

# --- the unit, through systemd's own checks
unit=packaging/proctor.service
security_bar=3.0
check_unit() {
  local path=$1
  if ! command -v systemd-analyze >/dev/null; then
    echo "SKIP: systemd-analyze is missing: the unit is NOT verified"
    return
  fi
  echo "-- systemd-analyze verify $path"
  # verify checks that ExecStart's binary exists, so this runs once the package put it there.
  if ! systemd-analyze verify "$path" >"$work/verify.log" 2>&1; then
    echo "FAIL: systemd-analyze verify $path:"
    cat "$work/verify.log"
    exit 1
  fi
  # Warnings verify prints without failing are failures here too.
  if grep -v '^$' "$work/verify.log" | grep -q .; then
    echo "FAIL: systemd-analyze verify $path warned:"
    cat "$work/verify.log"
    exit 1
  fi
  echo "-- systemd-analyze security --offline=yes $path"
  systemd-analyze security --offline=yes --no-pager "$path" >"$work/security.log" 2>&1 || true
  grep -E '^✗' "$work/security.log" | sed 's/^/   /' || true
  local score
  score=$(grep -Eo 'Overall exposure level for [^:]*: [0-9.]+' "$work/security.log" | grep -Eo '[0-9.]+$' || true)
  if [[ -z $score ]]; then
    echo "FAIL: systemd-analyze security printed no exposure level:"
    cat "$work/security.log"
    exit 1
  fi
  echo "unit: systemd-analyze security exposure $score (bar: under $security_bar)"
  if ! awk -v s="$score" -v bar="$security_bar" 'BEGIN { exit !(s < bar) }'; then
    echo "FAIL: the unit's exposure $score is not under $security_bar"
    exit 1
  fi
}

# --- the capabilities the unit grants, shown on this machine's processes
unit_caps=$(sed -n 's/^AmbientCapabilities=//p' "$unit" | tr 'A-Z' 'a-z' | sed 's/cap_/+/g; s/ /,/g')
echo "-- doctor as root, and as nobody with none, each one and all of the unit's capabilities ($unit_caps)"
"$bin" doctor --format json >"$work/doctor-root.json"
as_nobody() {
  local name=$1 caps=$2
  if [[ -z $caps ]]; then
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$bin" doctor --format json >"$work/doctor-$name.json"
  else
    setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps="$caps" --ambient-caps="$caps" \
      "$bin" doctor --format json >"$work/doctor-$name.json"
  fi
}
as_nobody none ""
as_nobody ptrace +sys_ptrace
as_nobody dac +dac_read_search
as_nobody unit "$unit_caps"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
denied = lambda who: {u["file"]: u["denied"] for u in json.load(open(f"{work}/doctor-{who}.json"))["unreadable"]}
root, none, ptrace, dac, unit = (denied(w) for w in ("root", "none", "ptrace", "dac", "unit"))
files = ("io", "smaps_rollup")
for f in files:
    assert none[f] > root[f], f"nobody should be denied other users' /proc/PID/{f}: {none} vs root {root}"
    assert unit[f] <= root[f], f"with the unit's capabilities, /proc/PID/{f} is still denied more than for root: {unit} vs {root}"
# Each capability is needed: with one alone, something is still denied.
assert any(ptrace[f] > root[f] for f in files), f"CAP_SYS_PTRACE alone reads everything: CAP_DAC_READ_SEARCH is not needed ({ptrace})"
assert any(dac[f] > root[f] for f in files), f"CAP_DAC_READ_SEARCH alone reads everything: CAP_SYS_PTRACE is not needed ({dac})"
# The BPF parts (the task iterator, the process events): with the unit's capabilities each
# loads wherever it loads as root; as nobody, doctor says CAP_BPF and CAP_PERFMON are missing.
for key, title, without in (("task_iter", "task iterator", "/proc"), ("process_events", "process events", "none")):
    line = lambda who: json.load(open(f"{work}/doctor-{who}.json"))[key]
    if "not used" in line("root"):
        print(f"SKIP: the {title} under the unit's capabilities: not even root may use it here ({line('root')})")
        continue
    assert "not used" not in line("unit"), f"with the unit's capabilities the {title} is not used: {line('unit')}"
    assert "CAP_BPF and CAP_PERFMON" in line("none"), f"{title} as nobody: {line('none')}"
    print(f"{title}: as the unit, " + line("unit")[len(title) + 2:][:60] + f"...; as nobody, {without}")
row = lambda d: "io %d, smaps_rollup %d" % (d["io"], d["smaps_rollup"])
print(f"processes denying /proc/PID files: nobody {row(none)}; +CAP_SYS_PTRACE {row(ptrace)}; "
      f"+CAP_DAC_READ_SEARCH {row(dac)}; both (the unit) {row(unit)}; root {row(root)}")
PY

# --- the Debian package
# Unoptimized (opt-level 0): it builds in 21 s instead of 45 s on 2 idle cores (37 CPU-s instead
# of 85) and packages as fast, the compression being C code built with its own flags (10.5 s vs
# 10.4 s for a 20 MB binary, the same bytes; docs/performance.md, "The test suite").
if ! cargo deb --version >/dev/null 2>&1; then
  echo "-- installing cargo-deb from crates.io (opt-level 0)"
  started=$SECONDS
  CARGO_PROFILE_RELEASE_OPT_LEVEL=0 cargo install --locked --quiet cargo-deb >"$work/cargo-deb-install.log" 2>&1 || true
  echo "   done in $((SECONDS - started)) s"
fi
if ! cargo deb --version >/dev/null 2>&1; then
  echo "SKIP: Debian package: cargo install cargo-deb failed ($(tail -1 "$work/cargo-deb-install.log")): the package is NOT tested"
  exit 0
fi
echo "-- $(cargo deb --version): building the package from the release binary"
deb=$(cargo deb --locked --no-build -p proctor-cli --output "$work" 2>"$work/cargo-deb.log" | tail -1) || {
  echo "FAIL: cargo deb:"
  cat "$work/cargo-deb.log"
  exit 1
}
echo "package: $(basename "$deb"), $(du -h "$deb" | cut -f1)"
dpkg-deb --contents "$deb" | awk '{print "   " $1, $6}'

echo "-- dpkg -i"
installed=1
dpkg -i "$deb" >"$work/dpkg-i.log" 2>&1 || { echo "FAIL: dpkg -i:"; cat "$work/dpkg-i.log"; exit 1; }
for path in /usr/bin/proctor /lib/systemd/system/proctor.service /etc/default/proctor /usr/share/doc/proctor/deploy.md; do
  [[ -e $path ]] || { echo "FAIL: the package did not install $path"; exit 1; }
done
# What the unit names is where the package put it.
exec_start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' /lib/systemd/system/proctor.service)
env_file=$(sed -n 's/^EnvironmentFile=-\{0,1\}\(.*\)/\1/p' /lib/systemd/system/proctor.service)
[[ -x $exec_start && -f $env_file ]] || { echo "FAIL: the unit's ExecStart $exec_start or EnvironmentFile $env_file is missing"; exit 1; }
getent passwd proctor >/dev/null || { echo "FAIL: no proctor user after install"; exit 1; }
owner=$(stat -c '%U:%G %a' /var/lib/proctor)
[[ $owner == "proctor:proctor 750" ]] || { echo "FAIL: /var/lib/proctor is $owner, proctor:proctor 750 expected"; exit 1; }
echo "installed: $exec_start, $env_file, /lib/systemd/system/proctor.service, user proctor, /var/lib/proctor ($owner)"
check_unit /lib/systemd/system/proctor.service
/usr/bin/proctor doctor >"$work/doctor.txt"
head -1 "$work/doctor.txt"
grep -q "^read costs" "$work/doctor.txt" || { echo "FAIL: /usr/bin/proctor doctor printed no read costs"; exit 1; }

# The service's user records into the data directory, as the unit runs it.
setpriv --reuid=proctor --regid=proctor --clear-groups --inh-caps="$unit_caps" --ambient-caps="$unit_caps" \
  /usr/bin/proctor record --dir /var/lib/proctor --interval 200ms --count 5 >"$work/record.log" 2>&1 ||
  { echo "FAIL: the proctor user could not record into /var/lib/proctor:"; cat "$work/record.log"; exit 1; }
recorded=$(find /var/lib/proctor -type f | wc -l)
[[ $recorded -gt 0 ]] || { echo "FAIL: nothing recorded into /var/lib/proctor"; exit 1; }

echo "-- dpkg -r"
dpkg -r proctor >"$work/dpkg-r.log" 2>&1 || { echo "FAIL: dpkg -r:"; cat "$work/dpkg-r.log"; exit 1; }
[[ ! -e /usr/bin/proctor ]] || { echo "FAIL: /usr/bin/proctor is still there after dpkg -r"; exit 1; }
left=$(find /var/lib/proctor -type f | wc -l)
[[ $left -eq $recorded ]] || { echo "FAIL: dpkg -r left $left of $recorded recorded files in /var/lib/proctor"; exit 1; }
echo "removed: /usr/bin/proctor gone, /var/lib/proctor kept with its $left recorded files"
dpkg -P proctor >"$work/dpkg-p.log" 2>&1 || { echo "FAIL: dpkg -P:"; cat "$work/dpkg-p.log"; exit 1; }
installed=0
[[ ! -e /var/lib/proctor && ! -e /etc/default/proctor ]] || { echo "FAIL: purge left /var/lib/proctor or /etc/default/proctor"; exit 1; }
echo "purged: /var/lib/proctor and /etc/default/proctor gone"
echo "package: passed"
