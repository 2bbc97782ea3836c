#!/usr/bin/env bash
# proctor strace end to end: the built binary on a checked-in fixture (text, json, svg,
# png), its error messages, and `proctor strace run` on a live command when strace works.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (the dev build's proctor)"
source scripts/lib/cargo.sh

fixtures=crates/proctor-strace/tests/fixtures
ensure_dev_proctor
proctor=$proctor_dev
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

fail() { echo "FAIL 60-strace: $*" >&2; exit 1; }

"$proctor" strace "$fixtures/f_tt_T.log" >"$out/text"
grep -q "futex: peaks at .*250 ms (16 calls.*500 ms (8 calls.*1.00 s (4 calls" "$out/text" || fail "text report lacks the futex peaks"
"$proctor" strace --format json "$fixtures/ff_tt_T" >"$out/json"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["calls"] > 0 and r["syscalls"][0]["peaks"]' "$out/json" \
  || fail "json report does not parse or has no peaks"
"$proctor" strace --plot "$out/plot.svg" "$fixtures/f_ttt_T_y.log.gz" >/dev/null 2>&1
grep -q "<svg" "$out/plot.svg" || fail "svg plot missing"
"$proctor" strace --plot "$out/plot.png" - <"$fixtures/f_tt_T.log" >/dev/null 2>&1
head -c 8 "$out/plot.png" | od -An -c | grep -q "P   N   G" || fail "png plot missing"

if "$proctor" strace "$out/missing.log" 2>"$out/err"; then fail "missing file accepted"; fi
grep -q "cannot open .*missing.log" "$out/err" || fail "unclear message for a missing file: $(cat "$out/err")"
head -c 4096 /dev/urandom >"$out/binary"
if "$proctor" strace "$out/binary" 2>"$out/err" >/dev/null; then fail "binary file accepted"; fi
grep -q "binary data\|no strace lines" "$out/err" || fail "unclear message for binary data: $(cat "$out/err")"
: >"$out/empty"
if "$proctor" strace "$out/empty" 2>"$out/err" >/dev/null; then fail "empty file accepted"; fi
grep -q "empty" "$out/err" || fail "unclear message for an empty file: $(cat "$out/err")"

if ! command -v strace >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get install -y strace >/dev/null 2>&1 || (apt-get update >/dev/null 2>&1 && apt-get install -y strace >/dev/null 2>&1)) || true
  fi
fi
if ! command -v strace >/dev/null 2>&1; then
  echo "SKIP 60-strace live run: strace is not installed and could not be installed"
  "$proctor" strace run -- true 2>"$out/err" && fail "run without strace succeeded"
  grep -q "strace is not installed" "$out/err" || fail "unclear message without strace"
  exit 0
fi
if ! strace -o /dev/null true 2>/dev/null; then
  echo "SKIP 60-strace live run: strace cannot trace here (ptrace not permitted)"
  exit 0
fi
"$proctor" strace run -- sh -c 'sleep 0.25; sleep 0.25' >"$out/live"
grep -q "clock_nanosleep: peak at 25[0-9] ms (2 calls" "$out/live" || fail "live run lacks the 250 ms sleeps: $(head -20 "$out/live")"
echo "60-strace: ok"
