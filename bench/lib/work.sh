# Sourced by the bench scripts, from the repository root: `work` (a fresh directory, `mktemp -d`
# with WORK_TEMPLATE when set), `pids` (append every process the script starts) and an EXIT
# trap that ends those processes by their pid and removes `work`; `free_port` prints a loopback
# port nothing listens on; `start_agent` starts a `proctor serve` ($PROCTOR_BIN).
work=$(mktemp -d ${WORK_TEMPLATE:+"$WORK_TEMPLATE"})
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_agent VAR DIR EXTRA...: `proctor serve` on a loopback port the kernel picks, recording
# into DIR (made if missing) with EXTRA flags, its stderr in DIR.log; sets VAR_pid and VAR_base
# (http://ADDR) in the calling shell, so the EXIT trap ends it by its pid.
start_agent() {
  local var=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  "$PROCTOR_BIN" serve --listen 127.0.0.1:0 --interval 1s --data-dir "$dir" "$@" 2>"$dir.log" &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 100); do
    grep -q 'listening on' "$dir.log" 2>/dev/null && break
    sleep 0.1
  done
  printf -v "${var}_pid" '%s' "$pid"
  printf -v "${var}_base" '%s' "$(grep -o 'listening on http://[0-9.:]*' "$dir.log" | sed 's/listening on //')"
}
