#!/usr/bin/env bash
# A short cargo-fuzz smoke run of proctor-statsd's pure layers (issue #4 item 9): the targets
# in crates/proctor-statsd/fuzz/ (`parse_packet`: bytes → parser invariants; `flush_window`:
# bytes → parse → aggregate → flush → Graphite text, nothing infinite) for a bounded time each,
# starting from the committed seeds and the statsd dictionary. A crash fails the suite;
# libFuzzer prints the input (as Base64 too) and leaves it under the fuzz dir's artifacts/.
#
# Installs what it needs outside git: cargo-fuzz under target/tools (cargo install --locked;
# about a minute on 2 cores) unless `cargo fuzz` already works. cargo-fuzz passes unstable
# rustc flags, so the machine's stable toolchain is told to accept them with RUSTC_BOOTSTRAP=1
# (nightly is not needed, and not on every machine). Whatever cannot be had prints a loud SKIP
# and the reason, and the script exits 0.
#
# PROCTOR_FUZZ_SECONDS sets the time per target (default 25: with a fresh install and build the
# whole part stays under three minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
seconds=${PROCTOR_FUZZ_SECONDS:-25}
tools=$root/target/tools
fuzz_target_dir=$root/target/fuzz
export PATH="$tools/bin:$PATH"
export RUSTC_BOOTSTRAP=1

if ! command -v c++ >/dev/null; then
  echo "SKIP: statsd fuzz smoke run: no C++ compiler (libfuzzer-sys builds libFuzzer from source)"
  exit 0
fi

# The flags cargo-fuzz hands rustc, tried on an empty program: a toolchain that refuses them
# is a missing tool, not a failing test.
mkdir -p "$fuzz_target_dir"
probe=$fuzz_target_dir/probe
if ! echo 'fn main() {}' | rustc --edition 2021 -Cpasses=sancov-module \
      -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Zsanitizer=address \
      -o "$probe" - >"$probe.log" 2>&1; then
  echo "SKIP: statsd fuzz smoke run: rustc $(rustc --version | cut -d' ' -f2) does not take cargo-fuzz's flags even with RUSTC_BOOTSTRAP=1 (see $probe.log)"
  exit 0
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "-- installing cargo-fuzz into $tools (log: $tools/install.log)"
  mkdir -p "$tools"
  started=$SECONDS
  if ! cargo install --locked --root "$tools" cargo-fuzz >"$tools/install.log" 2>&1 \
     || ! cargo fuzz --version >/dev/null 2>&1; then
    echo "SKIP: statsd fuzz smoke run: cargo install cargo-fuzz failed (see $tools/install.log)"
    exit 0
  fi
  echo "   installed $(cargo fuzz --version) in $((SECONDS - started)) s"
fi

cd crates/proctor-statsd
for target in parse_packet flush_window; do
  # New inputs go to a scratch corpus under target/; the committed seeds are only read.
  scratch=$fuzz_target_dir/corpus/$target
  mkdir -p "$scratch"
  echo "-- cargo fuzz run $target for ${seconds} s"
  log=$fuzz_target_dir/$target.log
  if ! cargo fuzz run --target-dir "$fuzz_target_dir" "$target" "$scratch" "fuzz/corpus/$target" -- \
       -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -dict=fuzz/statsd.dict \
       -print_final_stats=1 >"$log" 2>&1; then
    # The panic message and the input; a build error's tail otherwise. The whole log stays.
    if grep -q -E 'panicked at|ERROR: (libFuzzer|AddressSanitizer)' "$log"; then
      grep -A3 -E 'panicked at|ERROR: (libFuzzer|AddressSanitizer)' "$log" | head -n 20
      grep -E 'Test unit written|^Base64:' "$log" || true
    else
      tail -n 40 "$log"
    fi
    echo "FAIL: fuzz target $target crashed or did not build (full log: $log)"
    exit 1
  fi
  grep -E "^#[0-9]+[[:space:]]+DONE|^stat::number_of_executed_units" "$log" || tail -n 5 "$log"
done
echo "statsd fuzz smoke run: no crash in ${seconds} s per target"
