#!/usr/bin/env python3
"""Which helper calls a build's per-packet programs make on this kernel, as the kernel runs them
(issue 36): starts `BIN serve --net`, and for each of the queue, receive and ingress programs
it loaded prints the helpers the verifier left as calls (`bpftool prog dump xlated`) and the
`call` instructions in the JIT's machine code (read back with BPF_OBJ_GET_INFO_BY_FD, since
Debian's bpftool is built without the disassembler; `objdump` reads it). A helper the JIT
inlines is a call in the first list and none in the second.

    python3 bench/net/calls.py BIN

Needs root, bpftool and objdump (binutils); x86-64 (the syscall number below)."""
import ctypes
import os
import re
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from programs import PROGRAMS, prog_ids, start_net  # noqa: E402

SYS_BPF = 321  # x86-64
BPF_PROG_GET_FD_BY_ID = 13
BPF_OBJ_GET_INFO_BY_FD = 15
libc = ctypes.CDLL(None, use_errno=True)


def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    r = libc.syscall(SYS_BPF, cmd, buf, 128)
    if r < 0:
        raise OSError(ctypes.get_errno(), f"bpf({cmd})")
    return r


def jited(prog_id):
    """The program's machine code, as the JIT made it."""
    fd = bpf(BPF_PROG_GET_FD_BY_ID, struct.pack("III", prog_id, 0, 0))
    try:
        # struct bpf_prog_info: type, id, tag[8], jited_prog_len, xlated_prog_len,
        # jited_prog_insns, xlated_prog_insns (the first 40 bytes; the kernel takes a prefix).
        info = ctypes.create_string_buffer(40)
        bpf(BPF_OBJ_GET_INFO_BY_FD, struct.pack("IIQ", fd, 40, ctypes.addressof(info)))
        length = struct.unpack_from("I", info.raw, 16)[0]
        code = ctypes.create_string_buffer(length)
        info = ctypes.create_string_buffer(struct.pack("I4x8xIIQQ", 0, length, 0, ctypes.addressof(code), 0))
        bpf(BPF_OBJ_GET_INFO_BY_FD, struct.pack("IIQ", fd, 40, ctypes.addressof(info)))
        return code.raw
    finally:
        os.close(fd)


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    before = prog_ids()
    p, _ = start_net([sys.argv[1], "serve", "--listen", "127.0.0.1:0", "--interval", "1s", "--no-record", "--net"])
    try:
        for prog_id, prog in sorted(prog_ids().items()):
            name = prog.get("name")
            if prog_id in before or name not in PROGRAMS:
                continue
            xlated = subprocess.run(["bpftool", "prog", "dump", "xlated", "id", str(prog_id)], check=True,
                                    capture_output=True, text=True).stdout
            helpers = re.findall(r"call (\w+)#", xlated)
            with tempfile.NamedTemporaryFile(suffix=".bin") as f:
                f.write(jited(prog_id))
                f.flush()
                asm = subprocess.run(["objdump", "-D", "-b", "binary", "-mi386:x86-64", f.name], check=True,
                                     capture_output=True, text=True).stdout
            calls = sum(1 for line in asm.splitlines() if re.search(r"\tcall ", line))
            inlined = len(helpers) - calls
            print(f"{name} (id {prog_id}): the verifier left {len(helpers)} calls ({', '.join(helpers) or 'none'}); "
                  f"the JIT's code has {calls}: {'it inlined ' + str(inlined) if inlined else 'it inlined none'}")
    finally:
        p.terminate()
        p.wait()


if __name__ == "__main__":
    main()
