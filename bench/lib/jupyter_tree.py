"""The motivating repro of issues #3 and #8, shared by bench/serve and bench/jupyter.

A Python process maps SIZE bytes of private anonymous memory in 4 KiB pages (huge pages
refused with MADV_NOHUGEPAGE), touches every page, forks N children that share all of it
copy-on-write, and then execs the Jupyter server in place: same pid, so the children are the
server's children and every process-tree walk from the server meets N+1 processes mapping the
same SIZE bytes (smaps_rollup walks each of them page by page). The children ask for SIGTERM
when their parent dies (PR_SET_PDEATHSIG), so stopping the server by its pid stops them too.
"""

TREE_THEN_JUPYTER = r"""
import mmap, os, signal, sys
size = int(sys.argv[1]); n = int(sys.argv[2]); argv = sys.argv[3:]
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(mmap.MADV_NOHUGEPAGE)  # 4 KiB pages, as in the motivating case
for i in range(0, size, 4096):
    m[i] = 1
for _ in range(n):
    if os.fork() == 0:
        # Children share the 2 GiB copy-on-write and die with their parent.
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        signal.pause()
        os._exit(0)
# The parent becomes the Jupyter server: same pid, so the children are its children.
os.execv(argv[0], argv)
"""


def tree_then_jupyter(python, size_bytes, children, jupyter_argv):
    """The command that builds the tree and then execs `jupyter_argv` (argv[0] an absolute path)."""
    return [python, "-c", TREE_THEN_JUPYTER, str(size_bytes), str(children)] + list(jupyter_argv)
