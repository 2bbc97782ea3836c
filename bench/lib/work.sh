# Sourced by the bench scripts, from the repository root: `work` (a fresh directory, `mktemp -d`
# with WORK_TEMPLATE when set), `pids` (append every process the script starts) and an EXIT
# trap that ends those processes by their pid and removes `work`; `free_port` prints a loopback
# port nothing listens on.
work=$(mktemp -d ${WORK_TEMPLATE:+"$WORK_TEMPLATE"})
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
