#!/usr/bin/env bash
# The whole test suite: the house habits (rustfmt, clippy with warnings as errors), the Rust
# tests, then each scripts/test.d/*.sh in name order. Every part runs even when an earlier one
# failed, so one failure never hides whether the others still work; a table at the end says,
# per part, passed / FAILED / passed with a SKIP, and how long it took, and the exit status is
# non-zero if any part failed. A part that cannot get what it needs prints a loud SKIP line
# with the reason; it never passes silently.
set -uo pipefail
cd "$(dirname "$0")/.."

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
results=()
failed=0

# Every part runs under a time limit, so that one hung test fails its part with the reason and
# the suite still reaches its summary, well inside CI's 90 minutes. The limits are generous (a
# cold rehearsal's parts take 1 s to 16 min); PROCTOR_PART_LIMIT_SCALE multiplies them.
limit_for() {
  local seconds
  case $1 in
    "cargo test --workspace") seconds=1200 ;;
    *95-aarch64.sh) seconds=1800 ;;
    # A release build, and cargo-deb built from crates.io on a fresh machine.
    *40-package.sh) seconds=1500 ;;
    *) seconds=900 ;;
  esac
  echo $((seconds * ${PROCTOR_PART_LIMIT_SCALE:-1}))
}

# The whole suite stops starting parts, and cuts the last one short, at 85 minutes: CI allows 90,
# and a summary that names what ran out of time says more than a run killed from outside.
suite_limit=${PROCTOR_SUITE_LIMIT:-5100}

# run NAME COMMAND...: runs one part, its output shown as it comes and kept to look for SKIPs.
run() {
  local name=$1
  shift
  echo "== $name"
  local started=$SECONDS
  local limit left
  limit=$(limit_for "$name")
  left=$((suite_limit - SECONDS))
  if [[ $left -le 0 ]]; then
    echo "FAIL: $name not run: the suite has used its ${suite_limit} s"
    results+=("$(printf '%-36s %6ss  %s' "$name" 0 "FAILED (not run: the suite used its ${suite_limit} s)")")
    failed=1
    return
  fi
  [[ $left -lt $limit ]] && limit=$left
  # timeout puts the part in a process group of its own and signals the whole group; bash -c
  # lets a part be one of the functions below (exported), and no part reads the terminal.
  timeout --kill-after=30 "$limit" bash -c '"$@"' "$name" "$@" 2>&1 </dev/null | tee "$logs/part.log"
  local status=${PIPESTATUS[0]}
  local took=$((SECONDS - started))
  local result=passed
  if [[ $status -eq 124 || $status -eq 137 ]]; then
    result="FAILED (timed out after ${limit} s)"
    echo "FAIL: $name did not finish within ${limit} s and was stopped (tests still running are named above)"
    failed=1
  elif [[ $status -ne 0 ]]; then
    result="FAILED (exit $status)"
    failed=1
  elif grep -q "SKIP" "$logs/part.log"; then
    result="passed, with SKIP: $(grep -m1 -o 'SKIP.*' "$logs/part.log" | cut -c1-70)"
  fi
  results+=("$(printf '%-36s %6ss  %s' "$name" "$took" "$result")")
}

# A fresh clone gains nothing from incremental compilation, which writes as much again as the
# build itself; CI's disk is shared, so say how much there is before filling it.
if [[ -n "${CI:-}" ]]; then
  export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
fi
free_kib=$(df -Pk . | awk 'NR == 2 { print $4 }')
echo "-- disk: $((free_kib / 1024 / 1024)) GiB free where the build goes (a cold run writes ~8 GiB)"

# rustfmt and clippy come with rustup's default profile; a minimal toolchain gets them added.
for tool in rustfmt clippy; do
  if ! cargo "${tool/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$tool" >/dev/null 2>&1 || true
  fi
done

fmt() {
  if cargo fmt --version >/dev/null 2>&1; then
    cargo fmt --all --check
  else
    echo "SKIP: cargo fmt is not installed and rustup could not add rustfmt: formatting NOT checked"
  fi
}
clippy() {
  if cargo clippy --version >/dev/null 2>&1; then
    cargo clippy --workspace --all-targets --locked -- -D warnings
  else
    echo "SKIP: cargo clippy is not installed and rustup could not add clippy: lints NOT checked"
  fi
}

export -f fmt clippy
run "cargo fmt --check" fmt
run "cargo clippy -D warnings" clippy
run "cargo test --workspace" cargo test --workspace --locked

shopt -s nullglob
for part in scripts/test.d/*.sh; do
  run "$part" bash "$part"
done

echo
echo "== summary"
printf '%-36s %7s  %s\n' "part" "time" "result"
for line in "${results[@]}"; do
  echo "$line"
done
if [[ $failed -ne 0 ]]; then
  echo "== some parts FAILED"
  exit 1
fi
echo "== all test parts passed"
