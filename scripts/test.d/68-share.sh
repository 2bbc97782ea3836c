#!/usr/bin/env bash
# proctor share against a real gunicorn (--preload, 3 sync workers, a ~200 MiB object built
# before fork) on loopback: the saving, smem's PSS and USS beside proctor's, one worker copying
# 50 MiB named as the grower with the copy found in its mappings, and a killed worker reported
# recycled with what it had copied (crates/proctor-share/tests/interop/gunicorn_share.py).
#
# Installs gunicorn into .venv (pip) and Debian's smem (apt-get) when missing; without gunicorn
# the part is a loud SKIP, without smem only the cross-check is.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (the dev build's proctor)"
source scripts/lib/cargo.sh

venv=.venv
if ! [[ -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv" >/dev/null 2>&1 || true
fi
if [[ -x "$venv/bin/python" ]] && ! [[ -x "$venv/bin/gunicorn" ]]; then
  "$venv/bin/pip" install --quiet gunicorn >"$venv/pip-gunicorn.log" 2>&1 || true
fi
if ! [[ -x "$venv/bin/gunicorn" ]]; then
  echo "SKIP: gunicorn share end to end: could not make $venv or pip install gunicorn (see $venv/pip-gunicorn.log)"
  exit 0
fi
smem=$(command -v smem || true)
if [[ -z $smem ]] && command -v apt-get >/dev/null && [[ $(id -u) -eq 0 ]]; then
  echo "-- installing Debian's smem package"
  mkdir -p target
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq smem) >target/apt-smem.log 2>&1 || true
  smem=$(command -v smem || true)
fi
echo "-- $("$venv/bin/gunicorn" --version 2>&1 | head -1)${smem:+, smem at $smem}"
ensure_dev_proctor
"$venv/bin/python" crates/proctor-share/tests/interop/gunicorn_share.py "$target_dir/debug/proctor" "$venv/bin/gunicorn" "$smem"
