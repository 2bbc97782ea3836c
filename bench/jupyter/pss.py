"""Issue 34 item 3: how soon the Jupyter document's `pss` covers the Netflix tree, and how true.

    python3 bench/jupyter/pss.py [-- EXAMPLE_ARGS...]

Builds bench/lib/jupyter_tree.py's repro (CHILDREN children sharing SHARED_MIB MiB in 4 KiB
pages) and execs, in the Jupyter server's place, proctor-vocab's `jupyter_pss` example: the
sampler as `proctor.jupyter` runs it, on the tree under the exec'd process, printing the
document's `pss` every second beside a fresh sum of `Pss:` over the tree's smaps_rollup.
Knobs (environment): CHILDREN (96), SHARED_MIB (2048), EXAMPLE (the release build of the
example; built here if missing). Extra arguments go to the example (`--budget`, `--secs`,
`--check-every`). The tree's children die with the example (PR_SET_PDEATHSIG).
"""

import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "lib"))
from jupyter_tree import tree_then_jupyter  # noqa: E402

root = os.path.abspath(os.path.join(here, "..", ".."))
children = int(os.environ.get("CHILDREN", 96))
shared_mib = int(os.environ.get("SHARED_MIB", 2048))
example = os.environ.get("EXAMPLE", os.path.join(root, "target/release/examples/jupyter_pss"))
if not os.path.exists(example):
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "proctor-vocab", "--example", "jupyter_pss"],
                   cwd=root, check=True)
args = sys.argv[1:]
if args[:1] == ["--"]:
    args = args[1:]
with open("/proc/loadavg") as f:
    print(f"{children} children sharing {shared_mib} MiB; load {' '.join(f.read().split()[:3])}", flush=True)
cmd = tree_then_jupyter(sys.executable, shared_mib << 20, children, [os.path.abspath(example)] + args)
sys.exit(subprocess.run(cmd).returncode)
