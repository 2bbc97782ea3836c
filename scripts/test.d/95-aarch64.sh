#!/usr/bin/env bash
# Pi class (issue 17): proctor builds for aarch64-unknown-linux-gnu with Debian's cross
# toolchain, its snapshot runs under qemu-aarch64 (user-mode emulation, called directly: no
# binfmt_misc needed), and the tests of the crates whose code depends on the architecture run
# under it too: proctor-procfs (the /proc and /sys parsers: byte layouts, word sizes),
# proctor-store (the codec: varints, CRCs, zstd's C code), proctor-statsd (the parser and
# aggregator's float maths) and proctor-model (rates and derived figures). The rest of the
# workspace is portable code above those, tested natively by `cargo test`; cross-building the
# whole binary shows it compiles for aarch64.
#
# Installs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user with apt-get and the Rust
# target with rustup when they are missing; when that cannot be done, a loud SKIP. Tests that
# fail only under emulation are listed with a SKIP line naming each one and why (a qemu-user
# limit, shown by the test passing natively in the same run); any other failure fails the part.
#
# lane: build (scripts/test.sh runs it in the build lane: a cross compile, then emulation)
set -euo pipefail
cd "$(dirname "$0")/../.."
crates=(proctor-procfs proctor-store proctor-statsd proctor-model)
echo "-- compiles: proctor and the tests of ${crates[*]} for aarch64-unknown-linux-gnu (dev profile, no debug info)"
source scripts/lib/cargo.sh
target=aarch64-unknown-linux-gnu
sysroot=/usr/aarch64-linux-gnu

qemu() { command -v qemu-aarch64 || command -v qemu-aarch64-static; }
have_tools() {
  command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && qemu >/dev/null 2>&1 && [ -e "$sysroot/lib/ld-linux-aarch64.so.1" ]
}
install() {
  apt-get install -y "$@" >/dev/null 2>&1 || (apt-get update >/dev/null 2>&1 && apt-get install -y "$@" >/dev/null 2>&1)
}
if ! have_tools && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  install gcc-aarch64-linux-gnu libc6-dev-arm64-cross || true
  # Debian ships the emulator in qemu-user or, alone, in qemu-user-static.
  qemu >/dev/null 2>&1 || install qemu-user || install qemu-user-static || true
fi
if ! have_tools; then
  echo "SKIP: aarch64: the cross toolchain or qemu-aarch64 is missing and could not be installed (gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user or qemu-user-static): the Pi-class build is NOT tested"
  exit 0
fi
if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  rustup target add "$target" >/dev/null 2>&1 || true
fi
if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  echo "SKIP: aarch64: rustup could not add the $target target: the Pi-class build is NOT tested"
  exit 0
fi

# A full path: a test that execs the command line (python's os.execv) needs one.
runner="$(qemu) -L $sysroot"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$runner"
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
export PROCTOR_TEST_RUNNER="$runner"
# No debug info for the cross build: a panic still names its file and line, and the build writes
# and links far less (time, and CI's shared disk).
# (Target-only flags: the host's build scripts and proc macros stay shared with the native build.)
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C debuginfo=0"

echo "-- cross build: proctor for $target"
cargo build --locked --quiet --target "$target" --bin proctor
bin="$target_dir/$target/debug/proctor"
file_says=$(od -An -tx1 -j18 -N2 "$bin" | tr -d ' \n')
if [ "$file_says" != "b700" ]; then
  echo "FAIL: $bin is not an aarch64 ELF (e_machine bytes $file_says, 0xb7 expected)"
  exit 1
fi

echo "-- proctor snapshot under qemu-aarch64"
$runner "$bin" snapshot --interval 200ms --format json > "$target_dir/aarch64-snapshot.json"
python3 - "$target_dir/aarch64-snapshot.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["host"]["online_cpus"] >= 1, s["host"]
assert len(s["processes"]) >= 1, "no processes"
last = s["agent"]["last_sample"]
assert last["files_read"] > 0 and last["processes_seen"] >= 1, last
print(f"aarch64 snapshot: {s['host']['online_cpus']} CPUs online, {last['processes_seen']} processes seen, {last['files_read']} files read in the last sample")
PY

packages=()
for c in "${crates[@]}"; do packages+=(-p "$c"); done
echo "-- cargo test --target $target ${crates[*]} under qemu-aarch64"
log="$target_dir/aarch64-test.log"
set +e
# The run's own lines go to the log, not here: a test that fails under emulation only is named
# below with a SKIP line, and its raw "FAILED" line would read as a failure of the suite. The
# log is printed whole when anything fails for real.
cargo test --locked --target "$target" "${packages[@]}" --no-fail-fast >"$log" 2>&1
status=$?
set -e
passed=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')
failures=$(grep -E '^test .* \.\.\. FAILED$' "$log" | sed -E 's/^test (.*) \.\.\. FAILED$/\1/' | sort -u)
if [ "$status" -eq 0 ]; then
  echo "aarch64: $passed tests of ${crates[*]} passed under qemu-aarch64"
  exit 0
fi
if [ -z "$failures" ]; then
  cat "$log"
  echo "FAIL: cargo test for $target exited $status with no failing test named (a build error?)"
  exit 1
fi
# A failure counts as emulation's only when the same test passes natively, now: the dev build's
# test binaries of the same crates, run with no emulator anywhere (nothing is compiled again).
native_log="$target_dir/aarch64-native-recheck.log"
: >"$native_log"
ensure_dev_proctor
while IFS=$'\t' read -r package name _; do
  [[ " ${crates[*]} " == *" $package "* ]] || continue
  # shellcheck disable=SC2086
  (unset PROCTOR_TEST_RUNNER; run_tests "$package" "$name" --exact $failures) >>"$native_log" 2>&1 || true
done <"$target_dir/test-binaries.tsv"
emulation_only=()
real=()
while IFS= read -r name; do
  [ -n "$name" ] || continue
  if grep -qxF "test $name ... ok" "$native_log"; then
    emulation_only+=("$name")
  else
    real+=("$name")
  fi
done <<< "$failures"
for name in "${emulation_only[@]}"; do
  echo "SKIP: aarch64: $name fails under qemu-aarch64 only (passes natively): NOT tested on aarch64"
done
if [ "${#emulation_only[@]}" -ne 0 ]; then
  echo "(qemu-user answers a process's own /proc/self/stat and /proc/PID/stat with a line of its own making, which the sampler refuses as it would any malformed stat line, a child under an address-space limit cannot map qemu's own memory, and an emulated test cannot exec an aarch64 child without binfmt_misc: such tests fail under emulation only)"
fi
echo "aarch64: $passed tests of ${crates[*]} passed under qemu-aarch64, ${#emulation_only[@]} fail under emulation only (the run: $log)"
if [ "${#real[@]}" -ne 0 ]; then
  cat "$log"
  printf 'FAIL: aarch64: fails natively too: %s\n' "${real[@]}"
  exit 1
fi
