#!/usr/bin/env bash
# A short cargo-fuzz run of proctor-store's frame decoding (issue 15 item 2): the target in
# crates/proctor-store/fuzz/ (`decode_frame`: key frames, deltas, anchors and events with valid
# CRCs after a real base store, read back every way a reader reads) for a bounded time, from the
# committed seeds and the store dictionary, with allocations over 512 MiB treated as crashes
# (the decompression bound allows a few MiB for inputs this size). A crash fails the suite;
# libFuzzer prints the input (as Base64 too) and leaves it under the fuzz dir's artifacts/.
#
# Installs what it needs outside git: cargo-fuzz under target/tools (shared with the statsd fuzz
# part; cargo install --locked, about a minute on 2 cores) unless `cargo fuzz` already works.
# cargo-fuzz passes unstable rustc flags: a nightly toolchain is used when rustup has one, else
# the stable one with RUSTC_BOOTSTRAP=1. Whatever cannot be had prints a loud SKIP and the
# reason, and the script exits 0.
#
# PROCTOR_FUZZ_SECONDS sets the time (default 25).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
seconds=${PROCTOR_FUZZ_SECONDS:-25}
tools=$root/target/tools
fuzz_target_dir=$root/target/fuzz-store
export PATH="$tools/bin:$PATH"
target=decode_frame

skip() {
  echo "SKIP: store fuzz run: $*"
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

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "-- installing cargo-fuzz into $tools (log: $tools/install.log)"
  mkdir -p "$tools"
  if ! cargo install --locked --root "$tools" cargo-fuzz >"$tools/install.log" 2>&1 \
     || ! cargo fuzz --version >/dev/null 2>&1; then
    skip "cargo install cargo-fuzz failed (see $tools/install.log)"
  fi
fi

cd crates/proctor-store
# New inputs go to a scratch corpus under target/; the committed seeds are only read.
scratch=$fuzz_target_dir/corpus/$target
mkdir -p "$scratch"
log=$fuzz_target_dir/$target.log
echo "-- cargo ${toolchain[*]} fuzz run $target for ${seconds} s"
if ! cargo "${toolchain[@]}" fuzz run --target-dir "$fuzz_target_dir" "$target" "$scratch" "fuzz/corpus/$target" -- \
     -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 -dict=fuzz/store.dict \
     -print_final_stats=1 >"$log" 2>&1; then
  if grep -q -E 'panicked at|ERROR: (libFuzzer|AddressSanitizer)|malloc\(' "$log"; then
    grep -A3 -E 'panicked at|ERROR: (libFuzzer|AddressSanitizer)|malloc\(' "$log" | head -n 20
    grep -E 'Test unit written|^Base64:' "$log" || true
  else
    tail -n 40 "$log"
  fi
  echo "FAIL: fuzz target $target crashed or did not build (full log: $log)"
  exit 1
fi
grep -E "^#[0-9]+[[:space:]]+DONE|^stat::number_of_executed_units|^stat::peak_rss_mb" "$log" || tail -n 5 "$log"
echo "store fuzz run: no crash in ${seconds} s"
