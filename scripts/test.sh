#!/usr/bin/env bash
# The whole test suite: the house habits (rustfmt, clippy with warnings as errors), the Rust
# tests, then each scripts/test.d/*.sh in name order. A part that cannot get what it needs
# prints a loud SKIP line with the reason; it never passes silently.
set -euo pipefail
cd "$(dirname "$0")/.."

# rustfmt and clippy come with rustup's default profile; a minimal toolchain gets them added.
for tool in rustfmt clippy; do
  if ! cargo "${tool/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$tool" >/dev/null 2>&1 || true
  fi
done

echo "== cargo fmt --check"
if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all --check 2>&1
else
  echo "SKIP: cargo fmt is not installed and rustup could not add rustfmt: formatting NOT checked"
fi

echo "== cargo clippy --workspace --all-targets -- -D warnings"
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --workspace --all-targets --locked -- -D warnings 2>&1
else
  echo "SKIP: cargo clippy is not installed and rustup could not add clippy: lints NOT checked"
fi

echo "== cargo test --workspace"
cargo test --workspace --locked 2>&1

shopt -s nullglob
for part in scripts/test.d/*.sh; do
  echo "== $part"
  bash "$part"
done
echo "== all test parts finished"
