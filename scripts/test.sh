#!/usr/bin/env bash
# The whole test suite. Rust tests first, then each scripts/test.d/*.sh in name order.
# A part that cannot get what it needs prints a loud SKIP line with the reason; it never
# passes silently.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test --workspace"
cargo test --workspace --locked 2>&1

shopt -s nullglob
for part in scripts/test.d/*.sh; do
  echo "== $part"
  bash "$part"
done
echo "== all test parts finished"
