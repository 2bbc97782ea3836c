#!/usr/bin/env bash
# NVIDIA GPUs through NVML, side by side with nvidia-smi, while a small CUDA workload runs (a
# PyTorch matmul loop): proctor's per-process GPU memory against
# `nvidia-smi --query-compute-apps=pid,used_memory`, and the device's utilization, memory and
# power against `nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw`. Prints the
# figures in a table. On a machine without an NVIDIA GPU (no nvidia-smi, or it finds no GPU) or
# where PyTorch cannot be installed, it prints a loud SKIP and exits 0: no other test depends
# on a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (the dev build's proctor)"
source scripts/lib/cargo.sh

skip() {
  echo "SKIP: 32-nvidia (NVML against nvidia-smi on a real NVIDIA GPU): $*"
  exit 0
}

command -v nvidia-smi >/dev/null 2>&1 || skip "no nvidia-smi here (no NVIDIA driver)"
gpus=$(nvidia-smi -L 2>&1) || skip "nvidia-smi finds no GPU: $(echo "$gpus" | tail -1)"
echo "-- $gpus"

ensure_dev_proctor
proctor="$proctor_dev"
venv="${CARGO_TARGET_DIR:-target}/nvidia-venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv" || skip "python3 -m venv failed"
"$venv/bin/python" -c "import torch" 2>/dev/null || "$venv/bin/pip" install -q torch \
  || skip "PyTorch could not be installed (pip install torch failed)"
"$venv/bin/python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
  || skip "PyTorch sees no CUDA device"

# The workload: a matmul loop for at most 120 s, ended by its pid when the comparison is done.
"$venv/bin/python" - <<'PY' &
import time, torch
a = torch.randn(4096, 4096, device="cuda")
held = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")  # 256 MiB more, held
end = time.time() + 120
while time.time() < end:
    b = a @ a
    torch.cuda.synchronize()
PY
worker=$!
trap 'kill "$worker" 2>/dev/null || true' EXIT
for _ in $(seq 60); do
  nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -qw "$worker" && break
  sleep 1
done
sleep 3

out=$(mktemp -d)
"$proctor" snapshot --count 3 --interval 1s --format json --top 100000 >"$out/proctor.json"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >"$out/apps.csv"
nvidia-smi --query-gpu=index,utilization.gpu,memory.used,power.draw --format=csv,noheader,nounits >"$out/gpu.csv"
kill "$worker" 2>/dev/null || true

WORKER="$worker" OUT="$out" python3 - <<'PY'
import json, os, sys
out, worker = os.environ["OUT"], int(os.environ["WORKER"])
last = json.loads(open(f"{out}/proctor.json").read().strip().splitlines()[-1])
gpus = {g["id"]: g for g in last["host"].get("gpus", [])}
rows = {r["pid"]: r for r in last["processes"]["top"]}
fail = []
print(f"{'figure':<34} {'proctor':>12} {'nvidia-smi':>12}")
for line in open(f"{out}/apps.csv"):
    pid, mib = (x.strip() for x in line.split(","))
    if int(pid) != worker:
        continue
    mine = rows.get(worker, {}).get("gpu_memory_bytes")
    print(f"{'process ' + pid + ' GPU memory MiB':<34} {mine / 2**20 if mine else float('nan'):>12.0f} {float(mib):>12.0f}")
    if mine is None or abs(mine / 2**20 - float(mib)) > max(0.05 * float(mib), 16):
        fail.append("the workload's GPU memory differs from nvidia-smi's by more than 5 %")
for line in open(f"{out}/gpu.csv"):
    index, util, used, power = (x.strip() for x in line.split(","))
    g = gpus.get(f"nvml:{index}")
    if g is None:
        fail.append(f"proctor lists no nvml:{index}")
        continue
    print(f"{'gpu ' + index + ' utilization %':<34} {g['busy_percent'] or float('nan'):>12.0f} {float(util):>12.0f}")
    print(f"{'gpu ' + index + ' memory used MiB':<34} {(g['memory_used_bytes'] or 0) / 2**20:>12.0f} {float(used):>12.0f}")
    print(f"{'gpu ' + index + ' power W':<34} {g['power_watts'] or float('nan'):>12.1f} {float(power) if power not in ('[N/A]', '') else float('nan'):>12.1f}")
    if g["busy_percent"] is None or (float(util) > 50) != (g["busy_percent"] > 50):
        fail.append(f"gpu {index}: busy and idle disagree ({g['busy_percent']} vs {util})")
    if abs((g["memory_used_bytes"] or 0) / 2**20 - float(used)) > max(0.10 * float(used), 512):
        fail.append(f"gpu {index}: memory used differs by more than 10 % (and 512 MiB)")
for f in fail:
    print("FAIL:", f)
sys.exit(1 if fail else 0)
PY
