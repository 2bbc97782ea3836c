#!/usr/bin/env bash
# The whole test suite, or its quick form for the edit-test loop:
#
#   bash scripts/test.sh            # everything (installs what it needs)
#   bash scripts/test.sh --quick    # cargo fmt --check, clippy -D warnings, cargo test, and a
#                                   # check that the fuzz targets still compile
#
# Every part runs even when an earlier one failed, so one failure never hides whether the others
# still work; a table at the end says, per part, passed / FAILED / passed with a SKIP, its wall
# time and CPU time, and the exit status is non-zero if any part failed. A part that cannot get
# what it needs prints a loud SKIP line with the reason; it never passes silently.
#
# Each kind of build is made once (scripts/lib/cargo.sh): the dev build (clippy's lints and the
# tests in one compile), one release build (the package, the image and the Python wheel), one
# sanitizer build (every fuzz target), one aarch64 cross build. The parts run in three lanes at
# once, because on two cores a compile and a test that mostly waits share the machine well:
#   prepare  Debian packages, the Python virtualenv and npm packages (network, in the background);
#   build    fmt, the dev build, then the release build, the fuzz part and the aarch64 part;
#   test     once the dev build is there: cargo test, then every other part in name order (the
#            ones that need the release build wait for it).
# A part's output is printed as one block when it ends (and kept in target/test-logs/suite/).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/cargo.sh

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]"; exit 2 ;;
esac

logs="$target_dir/test-logs/suite"
rm -rf "$logs"
mkdir -p "$logs"
suite_started=$SECONDS
# The parts run the dev build this run makes first (scripts/lib/cargo.sh); alone, they build it.
export PROCTOR_DEV_BUILT=1

# Every part runs under a time limit, so that one hung test fails its part with the reason and
# the suite still reaches its summary, well inside CI's 90 minutes. PROCTOR_PART_LIMIT_SCALE
# multiplies them.
limit_for() {
  local seconds
  case $1 in
    "build: release + wheel") seconds=1500 ;;
    "build: lint + dev"|"cargo test --workspace"|*95-aarch64.sh) seconds=1200 ;;
    *) seconds=900 ;;
  esac
  echo $((seconds * ${PROCTOR_PART_LIMIT_SCALE:-1}))
}

# The suite stops starting parts, and cuts running ones short, at 85 minutes: CI allows 90, and
# a summary that names what ran out of time says more than a run killed from outside.
suite_limit=${PROCTOR_SUITE_LIMIT:-5100}

# The kernel's tracepoints through tracefs: the agent's trace of a target's own wait on its reads
# (proctor-sampler's lockwait) and `impact --attribute` are tested where it is mounted, and say
# SKIP where it is not. As root, mount it for the suite (as `proctor doctor` says to), and take
# it down again at the end if this mounted it.
tracefs=/sys/kernel/tracing
if [[ ! -d $tracefs/instances && $(id -u) -eq 0 ]] && mount -t tracefs nodev "$tracefs" 2>/dev/null; then
  echo "-- tracefs mounted at $tracefs for the suite (the tracing tests run); unmounted at the end"
  trap 'umount "$tracefs" 2>/dev/null' EXIT
elif [[ -d $tracefs/instances ]]; then
  echo "-- tracefs is mounted at $tracefs: the tracing tests run"
else
  echo "SKIP: tracefs is not mounted at $tracefs and could not be (root mounts it): the tracing tests say SKIP"
fi

# A fresh clone gains nothing from incremental compilation, which writes as much again as the
# build itself; CI's disk is shared, so say how much there is before filling it.
if [[ -n "${CI:-}" ]]; then
  export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
fi
free_kib=$(df -Pk . | awk 'NR == 2 { print $4 }')
echo "-- disk: $((free_kib / 1024 / 1024)) GiB free where the build goes (a cold run writes ~6 GiB)"
echo "-- $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); logs in $logs"

# rustfmt and clippy come with rustup's default profile; a minimal toolchain gets them added.
for tool in rustfmt clippy; do
  if ! cargo "${tool/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$tool" >/dev/null 2>&1 || true
  fi
done

# part NAME COMMAND...: runs one part with its time limit; its output goes to its own log,
# printed as one block when it ends. Writes NAME's result line for the summary.
part() {
  local name=$1
  shift
  local file=${name//[^A-Za-z0-9._-]/_}
  local log="$logs/$file.log" result="$logs/$file.result"
  local limit left
  limit=$(limit_for "$name")
  left=$((suite_limit - (SECONDS - suite_started)))
  if [[ $left -le 0 ]]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" 0 0 "-" "FAILED (not run: the suite used its ${suite_limit} s)" >"$result"
    return 1
  fi
  [[ $left -lt $limit ]] && limit=$left
  local started=$SECONDS
  local at=$((SECONDS - suite_started))
  echo "== start $name (at ${at} s)"
  # timeout puts the part in a process group of its own and signals the whole group; bash -c
  # lets a part be one of the functions below (exported); no part reads the terminal. `times`
  # writes the CPU of the part's processes (every descendant that was waited for) to fd 3.
  timeout --kill-after=30 "$limit" bash -c '"$@"; s=$?; times >&3; exit $s' "$name" "$@" \
    >"$log" 2>&1 </dev/null 3>"$log.cpu"
  local status=$?
  local took=$((SECONDS - started))
  local cpu
  cpu=$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%.0f", t }' "$log.cpu")
  [[ -n $cpu ]] || cpu="?"
  local outcome=passed
  if [[ $status -eq 124 || $status -eq 137 ]]; then
    outcome="FAILED (timed out after ${limit} s)"
    echo "FAIL: $name did not finish within ${limit} s and was stopped (tests still running are named above)" >>"$log"
  elif [[ $status -ne 0 ]]; then
    outcome="FAILED (exit $status)"
  elif grep -q "SKIP" "$log"; then
    outcome="passed, with SKIP: $(grep -m1 -o 'SKIP.*' "$log" | cut -c7-76)"
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$took" "$cpu" "$at" "$outcome" >"$result"
  # One block per part, whole, never interleaved with another lane's.
  {
    flock 9
    echo "======== $name: $outcome (${took} s, ${cpu} s CPU)"
    cat "$log"
    echo "======== end of $name"
  } 9>"$logs/print.lock"
  [[ $outcome != FAILED* ]]
}

# not_run NAME WHY: a part that could not run because what it needs failed.
not_run() {
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" 0 0 "-" "FAILED (not run: $2)" >"$logs/${1//[^A-Za-z0-9._-]/_}.result"
  echo "FAIL: $1 not run: $2"
}

# Markers between lanes: mark NAME ok|failed; wait_mark NAME prints ok or failed once it is set.
mark() { echo "$2" >"$logs/mark.$1"; }
wait_mark() {
  while [[ ! -f $logs/mark.$1 ]]; do
    if [[ $((SECONDS - suite_started)) -ge $suite_limit ]]; then
      echo "failed"
      return
    fi
    sleep 1
  done
  cat "$logs/mark.$1"
}

fmt() {
  source scripts/lib/cargo.sh
  echo "-- compiles: nothing"
  if cargo fmt --version >/dev/null 2>&1; then
    cargo fmt --all --check
  else
    echo "SKIP: cargo fmt is not installed and rustup could not add rustfmt: formatting NOT checked"
  fi
}
lint_and_dev_build() {
  source scripts/lib/cargo.sh
  if [[ -n $(clippy_driver) ]]; then
    echo "-- compiles: every target of the workspace (lib, bins, tests, examples), dev profile, through clippy-driver with -D warnings (cargo test --workspace --no-run)"
  else
    echo "-- compiles: every target of the workspace, dev profile (cargo test --workspace --no-run)"
    echo "SKIP: clippy is not installed and rustup could not add it: lints NOT checked"
  fi
  dev_build
}
workspace_tests() {
  source scripts/lib/cargo.sh
  echo "-- compiles: nothing (runs the dev build's tests: cargo test --workspace --no-fail-fast)"
  # Every test binary runs even after one fails: cargo's default stops at the first failing
  # binary, and the crates after it then go untested without a word.
  dev_cargo test --workspace --locked --no-fail-fast
}
release_and_wheel() {
  source scripts/lib/cargo.sh
  echo "-- compiles: proctor with the release profile, then the Python wheel (maturin) from the same target directory"
  release_build .venv/bin/python
}
# The fuzz package is a workspace of its own (fuzz/Cargo.toml), so the dev build never compiles
# it: a field added to a model struct its targets build broke it unseen until the full suite's
# 55-fuzz, its sanitizer build ~45 minutes in. A plain `cargo check` on stable (no sanitizer, no
# run) finds that in seconds once its dependencies are checked (~40 s the first time).
fuzz_check() {
  source scripts/lib/cargo.sh
  echo "-- compiles: nothing to run (cargo check of fuzz/'s targets, target dir $target_dir/fuzz-check)"
  CARGO_TARGET_DIR="$target_dir/fuzz-check" cargo check --locked --manifest-path fuzz/Cargo.toml --bins
}
export -f fmt lint_and_dev_build workspace_tests release_and_wheel fuzz_check

if [[ $quick -eq 1 ]]; then
  part "cargo fmt --check" fmt
  if part "build: lint + dev" lint_and_dev_build; then
    part "cargo test --workspace" workspace_tests
  else
    not_run "cargo test --workspace" "the dev build failed"
  fi
  part "fuzz targets compile" fuzz_check
  order=("cargo fmt --check" "build: lint + dev" "cargo test --workspace" "fuzz targets compile")
else
  shopt -s nullglob
  parts=(scripts/test.d/*.sh)
  # Parts that need the release build (the binary or the wheel), and the build lane's own.
  needs_release() { grep -q '^# needs: release' "$1"; }
  in_build_lane() { grep -q '^# lane: build' "$1"; }

  # prepare: network installs, in the background, from the start.
  (part "prepare (installs)" bash scripts/lib/prepare.sh; mark prepare done) &
  prepare_lane=$!

  # build: fmt, the dev build, then the release build and the build lane's parts.
  (
    part "cargo fmt --check" fmt
    if part "build: lint + dev" lint_and_dev_build; then mark dev ok; else mark dev failed; fi
    wait_mark prepare >/dev/null
    if part "build: release + wheel" release_and_wheel; then mark release ok; else mark release failed; fi
    for p in "${parts[@]}"; do
      in_build_lane "$p" || continue
      if [[ $(wait_mark dev) == ok ]]; then part "$p" bash "$p"; else not_run "$p" "the dev build failed"; fi
    done
  ) &
  build_lane=$!

  # test: once the dev build is there.
  (
    if [[ $(wait_mark dev) != ok ]]; then
      not_run "cargo test --workspace" "the dev build failed"
      for p in "${parts[@]}"; do in_build_lane "$p" || not_run "$p" "the dev build failed"; done
      exit 0
    fi
    part "cargo test --workspace" workspace_tests
    wait_mark prepare >/dev/null
    for p in "${parts[@]}"; do
      in_build_lane "$p" && continue
      needs_release "$p" && continue
      part "$p" bash "$p"
    done
    for p in "${parts[@]}"; do
      in_build_lane "$p" && continue
      needs_release "$p" || continue
      if [[ $(wait_mark release) == ok ]]; then part "$p" bash "$p"; else not_run "$p" "the release build failed"; fi
    done
  ) &
  test_lane=$!
  wait "$prepare_lane" "$build_lane" "$test_lane"

  order=("prepare (installs)" "cargo fmt --check" "build: lint + dev" "cargo test --workspace" "build: release + wheel" "${parts[@]}")
fi

echo
echo "== summary ($(( SECONDS - suite_started )) s in all, load now $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-36s %7s %7s %7s  %s\n' "part" "time" "CPU" "at" "result"
failed=0
for name in "${order[@]}"; do
  result="$logs/${name//[^A-Za-z0-9._-]/_}.result"
  if [[ ! -f $result ]]; then
    printf '%-36s %6ss %6ss %6ss  %s\n' "$name" 0 0 "-" "FAILED (no result: the lane running it stopped)"
    failed=1
    continue
  fi
  IFS=$'\t' read -r n took cpu at outcome <"$result"
  printf '%-36s %6ss %6ss %6ss  %s\n' "$n" "$took" "$cpu" "$at" "$outcome"
  [[ $outcome == FAILED* ]] && failed=1
done
if [[ $failed -ne 0 ]]; then
  # What failed, once more at the very end: CI keeps the tail of a long run, where each part's
  # whole block may have been cut. A panic with its message, a FAIL line, a Python exception,
  # node --test's `not ok` lines and their `error:` (with the lines of a multi-line message).
  for name in "${order[@]}"; do
    file=${name//[^A-Za-z0-9._-]/_}
    grep -q $'\tFAILED' "$logs/$file.result" 2>/dev/null || continue
    echo "== why $name failed (from $logs/$file.log):"
    awk '/panicked at/ { print; n = 2; next }
         n > 0 { print; n--; next }
         /^ *not ok [0-9]/ { print; next }
         /^ +error: / { print; n = 3; next }
         /(^|[^A-Za-z])FAIL([^A-Za-z]|$)|^[A-Za-z.]*(Error|Exception): |^error(\[|:)|timed out/ { print }' \
      "$logs/$file.log" 2>/dev/null | cut -c1-300 | head -n 24 | sed 's/^/   /'
  done
  echo "== some parts FAILED"
  exit 1
fi
echo "== all test parts passed"
