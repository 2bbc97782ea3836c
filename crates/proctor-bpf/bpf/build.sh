#!/usr/bin/env bash
# Rebuilds the BPF objects from their C sources with clang (Debian's `clang` package; CLANG
# names another): `bash crates/proctor-bpf/bpf/build.sh [OUT_DIR]` writes OUT_DIR/*.bpf.o
# (default: next to the sources, the checked-in copies). The build is reproducible: the debug
# info names the sources relative to this directory, so the same clang gives the same bytes
# wherever the checkout is; scripts/test.d/35-bpf.sh rebuilds and compares.
set -euo pipefail
cd "$(dirname "$0")"
out=${1:-.}
clang=${CLANG:-clang}
for src in *.bpf.c; do
  # net.bpf.c swaps counters atomically (BPF_XCHG: instruction set v3, Linux 5.12+; the
  # tracepoints it needs are newer still).
  cpu=()
  [ "$src" = net.bpf.c ] && cpu=(-mcpu=v3)
  # -g: BTF and its .BTF.ext (the CO-RE relocations) come with the debug info.
  "$clang" -O2 -g -target bpf "${cpu[@]}" -fdebug-compilation-dir=. -c "$src" -o "$out/${src%.c}.o"
done
