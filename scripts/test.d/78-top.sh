#!/usr/bin/env bash
# proctor top end to end in a real terminal: tmux at 120x40, keys sent with send-keys, the
# screen read with capture-pane (scripts/tui/top_e2e.py). Sort, filter, tree, F9 on a child the
# test started, hostile names, resize to 80x24, q and SIGTERM restoring the terminal, stepping
# back through a recording, --connect to a loopback serve, X listing short-lived children that
# ended between two samples (BPF process events; a SKIP line without them).
#
# Installs tmux with apt-get when it is missing and this runs as root; otherwise a loud SKIP.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (the dev build's proctor)"
source scripts/lib/cargo.sh

if ! command -v tmux >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get install -y tmux >/dev/null 2>&1 || (apt-get update >/dev/null 2>&1 && apt-get install -y tmux >/dev/null 2>&1)) || true
  fi
fi
if ! command -v tmux >/dev/null 2>&1; then
  echo "SKIP: proctor top end-to-end: tmux is not installed and could not be installed"
  exit 0
fi
ensure_dev_proctor
# Bounded: every wait in the script has its own timeout; this is the backstop.
timeout 300 python3 scripts/tui/top_e2e.py "$target_dir/debug/proctor"
