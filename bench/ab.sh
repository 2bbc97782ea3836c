#!/usr/bin/env bash
# Compares two builds of proctor, in one session, the two alternating (this machine is shared
# and noisy, so both must see the same conditions). Two forms:
#
#   bash bench/ab.sh OLD NEW [--rounds N] [scan] [serve] [record] [record_side] [statsd] [top]
#       The headline benchmarks (bench/ab.py says what each measures): scan µs per process and
#       its ratio to the kernel floor, serve CPU and RSS and `/api/metrics/v1` p50, store bytes
#       per sample, statsd CPU per million packets, top's CPU over htop's. OLD and NEW are git revisions (built with `cargo build --release` in worktrees
#       under target/ab/, sharing one target directory) or paths to proctor binaries. Prints
#       each side's median, NEW/OLD, each side's run-to-run spread and whether the difference
#       is beyond it (the two sides' rounds do not overlap). Default: 3 rounds, all five.
#         bash bench/ab.sh main HEAD
#         bash bench/ab.sh 6f01919 HEAD --rounds 5 scan statsd
#
#   bash bench/ab.sh OLD_BIN NEW_BIN ROUNDS COMMAND...
#       Any benchmark command, run with PROCTOR_BIN set to each build in turn (bench/core and
#       bench/serve read it); `{}` in COMMAND is replaced by the build's path:
#         bash bench/ab.sh /tmp/old/proctor target/release/proctor 2 .venv/bin/python bench/core/bench.py scan host tree
#         bash bench/ab.sh /tmp/old/proctor target/release/proctor 2 sh -c '{} record --dir "$(mktemp -d)" --interval 1s --count 60 --format json'
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,22p' "$0"; exit 2; }

if [[ $# -ge 4 && $3 =~ ^[0-9]+$ ]]; then
  old=$(readlink -f "$1") new=$(readlink -f "$2") rounds=$3
  shift 3
  for round in $(seq "$rounds"); do
    for build in "$old" "$new"; do
      args=()
      for a in "$@"; do args+=("${a//\{\}/$build}"); done
      echo "######## round $round: $build (load $(cut -d' ' -f1-3 /proc/loadavg)): ${args[*]}"
      PROCTOR_BIN=$build "${args[@]}"
    done
  done
  exit 0
fi

old_spec=$1 new_spec=$2
shift 2
rounds=3
benches=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    *) benches+=("$1"); shift ;;
  esac
done

work=$PWD/target/ab
mkdir -p "$work"
# build SPEC [EXAMPLE]: the proctor binary for a revision or a path; with EXAMPLE, also that
# release example of proctor-statsd. Prints the binary's path on the last line.
build() {
  local spec=$1 example=${2:-}
  if [[ -x $spec && ! -d $spec ]]; then
    readlink -f "$spec"
    return
  fi
  local sha
  sha=$(git rev-parse --verify --quiet "$spec^{commit}") || { echo "ab.sh: $spec is neither a binary nor a git revision" >&2; exit 2; }
  local tree=$work/src-${sha:0:12} out=$work/bin-${sha:0:12}
  if [[ ! -x $out/proctor || ( -n $example && ! -x $out/$example ) ]]; then
    [[ -d $tree ]] || git worktree add --detach --quiet "$tree" "$sha"
    echo "-- cargo build --release --bin proctor at ${sha:0:12}" >&2
    (cd "$tree" && CARGO_TARGET_DIR=$work/target cargo build --release --locked --quiet --bin proctor) >&2
    mkdir -p "$out"
    cp "$work/target/release/proctor" "$out/proctor"
    if [[ -n $example ]]; then
      (cd "$tree" && CARGO_TARGET_DIR=$work/target cargo build --release --locked --quiet -p proctor-statsd --example "$example") >&2
      cp "$work/target/release/examples/$example" "$out/$example"
    fi
  fi
  echo "$out/proctor"
}

new_bin=$(build "$new_spec" statsd_blast | tail -1)
old_bin=$(build "$old_spec" | tail -1)
blaster=$(dirname "$new_bin")/statsd_blast
if [[ ! -x $blaster ]]; then
  # NEW given as a binary: the blaster from this checkout.
  cargo build --release --locked --quiet -p proctor-statsd --example statsd_blast
  blaster=${CARGO_TARGET_DIR:-target}/release/examples/statsd_blast
fi
if [[ " ${benches[*]:-top} " == *" top "* ]] && { ! command -v htop >/dev/null || ! command -v tmux >/dev/null; }; then
  (apt-get update -qq && apt-get install -y -qq htop tmux) >/dev/null 2>&1 || echo "WARNING: could not install htop/tmux (top will fail)"
fi
echo "# bash bench/ab.sh $old_spec $new_spec --rounds $rounds ${benches[*]:-}"
exec python3 bench/ab.py "$old_bin" "$new_bin" "$blaster" "$rounds" "${benches[@]}"
