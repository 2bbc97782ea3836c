#!/usr/bin/env bash
# A short cargo-fuzz run of every fuzz target in fuzz/ (one package, so one sanitizer build):
# `parse_packet` (statsd bytes → parser invariants), `flush_window` (bytes → parse → aggregate
# → flush → Graphite text, nothing infinite) and `decode_frame` (key frames, deltas, anchors,
# events and rollup blocks with valid CRCs after a real base store, read back every way a reader
# reads, with allocations over 512 MiB treated as crashes), each for a bounded time from its
# committed seeds and its dictionary. A crash fails the suite; libFuzzer prints the input (as
# Base64 too) and leaves it under fuzz/artifacts/.
#
# Installs what it needs outside git: cargo-fuzz where cargo installs tools (`cargo install
# --locked`, ~/.cargo/bin, as 40-package installs cargo-deb; about a minute on 2 cores, once per
# machine, not once per clone) unless `cargo fuzz` already works. cargo-fuzz passes unstable rustc
# flags: a nightly toolchain is used when rustup has one, else the stable one with
# RUSTC_BOOTSTRAP=1. Whatever cannot be had prints a loud SKIP and the reason, and the script
# exits 0.
#
# PROCTOR_FUZZ_SECONDS sets the time per target (default 20).
#
# lane: build (scripts/test.sh runs it in the build lane: it is a compile, then CPU-bound runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: fuzz/ (the three targets and what they use, release profile with AddressSanitizer and coverage), once; cargo-fuzz when it is not installed"
root=$PWD
seconds=${PROCTOR_FUZZ_SECONDS:-20}
logs=$root/target/test-logs
fuzz_target_dir=$root/target/fuzz

skip() {
  echo "SKIP: fuzz run: $*"
  exit 0
}

command -v c++ >/dev/null || skip "no C++ compiler (libfuzzer-sys builds libFuzzer from source)"

toolchain=()
if rustup run nightly rustc --version >/dev/null 2>&1; then
  toolchain=(+nightly)
else
  export RUSTC_BOOTSTRAP=1
fi

# cargo-fuzz's flags on an empty program first: a toolchain that refuses them is a missing
# tool, not a failing test.
mkdir -p "$fuzz_target_dir"
probe=$fuzz_target_dir/probe
if ! echo 'fn main() {}' | rustc "${toolchain[@]}" --edition 2021 -Cpasses=sancov-module \
      -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Zsanitizer=address \
      -o "$probe" - >"$probe.log" 2>&1; then
  skip "rustc ${toolchain[*]:-(stable, RUSTC_BOOTSTRAP=1)} does not take cargo-fuzz's flags (see $probe.log)"
fi

# Unoptimized: a command-line driver of cargo, it builds in 14 s instead of 25 s on 2 idle cores
# (25 CPU-s instead of 47).
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "-- installing cargo-fuzz (cargo install --locked cargo-fuzz, opt-level 0; log: $logs/cargo-fuzz-install.log)"
  mkdir -p "$logs"
  started=$SECONDS
  if ! CARGO_PROFILE_RELEASE_OPT_LEVEL=0 cargo install --locked cargo-fuzz >"$logs/cargo-fuzz-install.log" 2>&1 \
     || ! cargo fuzz --version >/dev/null 2>&1; then
    skip "cargo install cargo-fuzz failed (see $logs/cargo-fuzz-install.log)"
  fi
  echo "   installed $(cargo fuzz --version) in $((SECONDS - started)) s"
fi

cd fuzz
echo "-- cargo ${toolchain[*]} fuzz build (every target, one build)"
started=$SECONDS
if ! cargo "${toolchain[@]}" fuzz build --target-dir "$fuzz_target_dir" >"$fuzz_target_dir/build.log" 2>&1; then
  tail -n 40 "$fuzz_target_dir/build.log"
  echo "FAIL: the fuzz targets did not build (full log: $fuzz_target_dir/build.log)"
  exit 1
fi
echo "   built in $((SECONDS - started)) s"

declare -A extra=(
  [parse_packet]="-dict=statsd.dict"
  [flush_window]="-dict=statsd.dict"
  [decode_frame]="-dict=store.dict -malloc_limit_mb=512"
)
for target in parse_packet flush_window decode_frame; do
  # New inputs go to a scratch corpus under target/; the committed seeds are only read.
  scratch=$fuzz_target_dir/corpus/$target
  mkdir -p "$scratch"
  log=$fuzz_target_dir/$target.log
  echo "-- cargo ${toolchain[*]} fuzz run $target for ${seconds} s"
  # shellcheck disable=SC2086
  if ! cargo "${toolchain[@]}" fuzz run --target-dir "$fuzz_target_dir" "$target" "$scratch" "corpus/$target" -- \
       -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 ${extra[$target]} \
       -print_final_stats=1 >"$log" 2>&1; then
    # The panic message and the input; a build error's tail otherwise. The whole log stays.
    if grep -q -E 'panicked at|ERROR: (libFuzzer|AddressSanitizer)|malloc\(' "$log"; then
      grep -A3 -E 'panicked at|ERROR: (libFuzzer|AddressSanitizer)|malloc\(' "$log" | head -n 20
      grep -E 'Test unit written|^Base64:' "$log" || true
    else
      tail -n 40 "$log"
    fi
    echo "FAIL: fuzz target $target crashed (full log: $log)"
    exit 1
  fi
  grep -E "^#[0-9]+[[:space:]]+DONE|^stat::number_of_executed_units|^stat::peak_rss_mb" "$log" || tail -n 5 "$log"
done
echo "fuzz run: no crash in ${seconds} s per target"
