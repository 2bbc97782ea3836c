#!/usr/bin/env bash
# The strace half of the standing attack suite (issue 15): hostile logs given to the built
# binary. Each must end in seconds with a clear word, within a memory bound, never a panic.
# Usage: strace_attacks.sh PROCTOR_BIN
set -euo pipefail
proctor=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL strace attack: $*" >&2; exit 1; }

# run NAME FILE MAX_MIB: analyzes FILE, checks the exit (0, or 1 with a message) and peak RSS.
run() {
  local name=$1 file=$2 max_mib=$3 status=0
  # Peak RSS and seconds from the kernel's rusage of the child (no /usr/bin/time needed).
  python3 "$out/measure.py" "$out/time" timeout 60 "$proctor" strace --format json "$file" >"$out/json" 2>"$out/err" || status=$?
  read -r kib seconds <"$out/time" || true
  [[ $status -eq 0 || $status -eq 1 ]] || fail "$name: exit $status: $(head -c 300 "$out/err")"
  grep -q "panicked" "$out/err" && fail "$name: panicked: $(head -c 300 "$out/err")"
  [[ $status -eq 0 ]] || [[ -s "$out/err" ]] || fail "$name: failed without a word"
  (( kib / 1024 <= max_mib )) || fail "$name: peak RSS $((kib / 1024)) MiB > $max_mib MiB"
  printf '  %-44s exit %d  %5.2f s  %4d MiB  %s\n' "$name" "$status" "$seconds" "$((kib / 1024))" \
    "$(if [[ $status -eq 0 ]]; then python3 "$out/summary.py" "$out/json"; else tail -n 1 "$out/err" | sed "s|$out/||g" | cut -c1-110; fi)"
}

cat >"$out/measure.py" <<'PY'
import resource, subprocess, sys, time
started = time.monotonic()
status = subprocess.call(sys.argv[2:])
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as f:
    f.write(f"{usage.ru_maxrss} {time.monotonic() - started:.2f}\n")
sys.exit(status)
PY
cat >"$out/summary.py" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["capped"]
capped = c["syscall_lines"] + c["errnos"] + c["signals"] + c["pid_events"] + c["pending"]
print(f'{r["calls"]} calls, {r["bad_lines"]["count"]} bad lines, {r["orphans"]["unfinished"] + r["orphans"]["resumed"]} orphans, {capped} capped, {r["lines_cut"]} lines cut')
PY
python3 - "$out" <<'PY'
import os, random, sys
out = sys.argv[1]
r = random.Random(15)
def write(name, lines):
    with open(os.path.join(out, name), "w") as f:
        f.writelines(lines)
write("names.log", (f"1 sys{i:07}(1) = 0 <0.000001>\n" for i in range(200_000)))
write("errnos.log", (f"1 open(\"/x\", O_RDONLY) = -1 E{i:07} (No such thing) <0.000001>\n" for i in range(200_000)))
write("signals.log", (f"1 --- SIGX{i:06} {{si_signo=1}} ---\n" for i in range(100_000)))
write("pids.log", (f"{i} getpid() = {i} <0.000001>\n" for i in range(1, 200_001)))
write("unfinished.log", (f"{i} read(3,  <unfinished ...>\n" for i in range(1, 200_001)))
write("resumed.log", (f"{i} <... read resumed>\"x\", 1) = 1 <0.000001>\n" for i in range(1, 200_001)))
write("durations.log", (f"1 read(3, \"\", 1) = 0 <{d}>\n" for d in ["1e308", "-1", "NaN", "inf", "99999999999999999999.9", "0.0000000001", "1.2.3"] * 10_000))
write("timestamps.log", (f"1 {t} read(3, \"\", 1) = 0 <0.000001>\n" for t in ["25:61:61.000000", "99999999999999999999.1", "-1.0", "00:00:00.000000", "23:59:59.999999"] * 10_000))
with open(os.path.join(out, "long_line.log"), "w") as f:
    f.write("1 write(1, \"" + "a" * 50_000_000 + "\", 50000000) = 50000000 <0.1>\n")
with open(os.path.join(out, "nested.log"), "w") as f:
    f.write("1 ioctl(3, " + "{" * 1_000_000 + "}" * 1_000_000 + ") = 0 <0.000001>\n")
with open(os.path.join(out, "binary.log"), "wb") as f:
    f.write(bytes(r.getrandbits(8) for _ in range(1_000_000)))
with open(os.path.join(out, "nul.log"), "wb") as f:
    f.write(b"1 read(3, \"\\0\", 1) = 1 <0.000001>\n\x00\x00\x00\n" * 10_000)
with open(os.path.join(out, "no_newline.log"), "w") as f:
    f.write("1 read(3, \"x\", 1) = 1 <0.000001>" * 100_000)
PY
echo "strace attacks (each: exit, seconds, peak RSS, what the report says):"
for name in names errnos signals pids unfinished resumed durations timestamps long_line nested binary nul no_newline; do
  run "$name" "$out/$name.log" 128
done
echo "strace attacks: 13 hostile logs, each ended with a report or a clear error, none over 128 MiB"
