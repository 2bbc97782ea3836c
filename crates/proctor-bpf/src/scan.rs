//! The task scan on Linux 6.7 and later: `bpf/task_scan.bpf.c`, run once per scan.
//!
//! The `iter/task` program costs the kernel a seq_file step per task (a pid lookup, a task
//! reference taken and dropped, a copy through the file), about 0.11 µs of the 0.18 µs per
//! process a scan took here. The open-coded task iterator (`bpf_iter_task_new`, a kfunc since
//! 6.7) walks the task list in one program run instead: `BPF_PROG_TEST_RUN` runs it, with no
//! attachment and no file, and it writes each task's record into a slot of an array map this
//! process has mapped, where [`Summer`](crate::Summer) reads them.
//!
//! aya 0.14 neither loads programs that call kfuncs nor runs programs, so this module loads it
//! itself: aya's object parser fits the CO-RE relocations to the kernel's BTF (as it does for
//! the other programs), then the loader here points each kfunc call at the kernel's BTF id of
//! its function and the map load at the slots map it made, and loads the instructions with
//! `bpf(2)`. The program is a raw tracepoint program that is never attached: that type may be
//! test-run, runs under the RCU read lock the task iterator needs, and may call the kfunc.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use aya::Btf;
use aya_obj::btf::BtfKind;
use object::{Object as _, ObjectSection as _, ObjectSymbol as _};

use crate::{Unavailable, NEEDS, RECORD_BYTES};

/// The program, as clang built it from `bpf/task_scan.bpf.c` (`bpf/build.sh`).
pub static TASK_SCAN_OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/task_scan.bpf.o");

const SECTION: &str = "raw_tp/proctor_scan";
const PROGRAM: &str = "proctor_scan";
const MAP: &str = "proctor_scan_slots";

/// A slot holds the largest record (a kernel thread's) and the four words the program reads a
/// process's fd table into (`fd_words`, in no record); a record's first word says its size.
pub const SLOT_BYTES: usize = RECORD_BYTES + 4 * 8;

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_F_MMAPABLE: u32 = 1 << 10;
const BPF_PROG_TYPE_RAW_TRACEPOINT: u32 = 17;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_PSEUDO_KFUNC_CALL: u8 = 2;
/// `ld_imm64` (BPF_LD | BPF_IMM | BPF_DW), the map load's opcode; it takes two instructions.
const LD_IMM64: u8 = 0x18;
/// `call` (BPF_JMP | BPF_CALL).
const CALL: u8 = 0x85;

/// One instruction as the kernel reads it (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Insn {
    code: u8,
    /// dst_reg in the low four bits, src_reg in the high four (little-endian layout).
    regs: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    fn set_src(&mut self, src: u8) {
        self.regs = (self.regs & 0x0f) | (src << 4);
    }
}

/// The program's instructions with the CO-RE offsets and kfunc ids fitted to this kernel; what
/// is left to fit is the map's fd, which [`Scanner::with_slots`] puts into `map_loads`.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    insns: Vec<Insn>,
    map_loads: Vec<usize>,
    license: CString,
}

/// Fits the object to the kernel's BTF. `Err` says why the open-coded scan cannot be used
/// (most often: a kernel before 6.7, without `bpf_iter_task_new`).
pub(crate) fn prepare(btf: &Btf) -> Result<Prepared, Unavailable> {
    let mut obj = aya_obj::Object::parse(TASK_SCAN_OBJECT)
        .map_err(|e| Unavailable(format!("the task scan object does not parse: {e}")))?;
    obj.relocate_btf(btf).map_err(|e| {
        Unavailable(format!("the task scan program does not fit this kernel (Linux 6.2 or later is needed): {e}"))
    })?;
    let function = obj
        .functions
        .values()
        .find(|f| f.name == PROGRAM)
        .ok_or_else(|| Unavailable(format!("the object has no function {PROGRAM}")))?;
    let mut insns: Vec<Insn> = function
        .instructions
        .iter()
        .map(|i| Insn { code: i.code, regs: i.dst_reg() | (i.src_reg() << 4), off: i.off, imm: i.imm })
        .collect();
    let first = function.section_offset as u64;

    // The relocations aya's parser keeps to itself: the kfunc calls and the map load.
    let elf = object::File::parse(TASK_SCAN_OBJECT).map_err(|e| Unavailable(format!("the task scan object: {e}")))?;
    let section = elf
        .section_by_name(SECTION)
        .ok_or_else(|| Unavailable(format!("the task scan object has no section {SECTION}")))?;
    let mut map_loads = Vec::new();
    for (offset, relocation) in section.relocations() {
        let object::RelocationTarget::Symbol(index) = relocation.target() else { continue };
        let symbol = elf.symbol_by_index(index).map_err(|e| Unavailable(format!("the task scan object: {e}")))?;
        let name = symbol.name().unwrap_or_default();
        let at = usize::try_from((offset.saturating_sub(first)) / 8).unwrap_or(usize::MAX);
        let insn =
            insns.get_mut(at).ok_or_else(|| Unavailable(format!("a relocation for {name} points past the program")))?;
        if name == MAP && insn.code == LD_IMM64 {
            map_loads.push(at);
        } else if symbol.is_undefined() && insn.code == CALL {
            let id = btf.id_by_type_name_kind(name, BtfKind::Func).map_err(|_| {
                Unavailable(format!(
                    "this kernel has no {name} (the open-coded task iterator came in Linux 6.7): the task iterator's \
                     file is read instead"
                ))
            })?;
            insn.set_src(BPF_PSEUDO_KFUNC_CALL);
            insn.imm = i32::try_from(id).map_err(|_| Unavailable(format!("{name}'s BTF id {id} is out of range")))?;
            insn.off = 0;
        } else {
            return Err(Unavailable(format!("the task scan program refers to {name}, which this loader does not fit")));
        }
    }
    if map_loads.is_empty() {
        return Err(Unavailable(format!("the task scan program does not load its map {MAP}")));
    }
    Ok(Prepared { insns, map_loads, license: obj.license })
}

/// `bpf(2)`, with `attr` the command's part of `union bpf_attr` (the kernel reads the rest as
/// zeros).
pub(crate) fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> std::io::Result<libc::c_long> {
    // SAFETY: `attr` is a #[repr(C)] prefix of union bpf_attr for `cmd`, alive for the call;
    // the pointers in it point at memory alive for the call too.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>()) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct TestRun {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    /// Named so that it is zero: the kernel refuses an attribute with anything set past the
    /// command's fields (the struct's padding was once not zero, and the run said EINVAL).
    _pad: u32,
}

/// The slots map, mapped read-only into this process.
struct Slots {
    map: OwnedFd,
    base: *const u8,
    len: usize,
    count: u32,
}

impl Drop for Slots {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are the mapping made in `Slots::new`, not used after this.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

impl Slots {
    fn new(count: u32) -> std::io::Result<Slots> {
        let mut attr = MapCreate {
            map_type: BPF_MAP_TYPE_ARRAY,
            key_size: 4,
            value_size: SLOT_BYTES as u32,
            max_entries: count,
            map_flags: BPF_F_MMAPABLE,
        };
        let fd = bpf(BPF_MAP_CREATE, &mut attr)?;
        // SAFETY: the kernel just gave us this fd; nothing else owns it.
        let map = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1);
        let len = (count as usize * SLOT_BYTES).div_ceil(page) * page;
        // SAFETY: a new shared read-only mapping of the map's values (an mmapable array's
        // values lie one after the other, each SLOT_BYTES: a multiple of 8).
        let base =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, map.as_raw_fd(), 0) };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Slots { map, base: base as *const u8, len, count })
    }
}

/// The loaded program and its slots. One per process (the agent's samplers share it), used
/// under a lock: a scan's records stay in the slots until the next run.
pub(crate) struct Scanner {
    prepared: Prepared,
    slots: Slots,
    program: OwnedFd,
}

// SAFETY: the raw pointer is a read-only mapping owned by `Slots`; the kernel writes it only
// during a run, which takes `&mut self`.
unsafe impl Send for Scanner {}

impl Scanner {
    /// Loads the program over a map of slots for the host's tasks now, with room.
    pub(crate) fn load(prepared: Prepared) -> Result<Scanner, Unavailable> {
        Scanner::with_slots(prepared, slots_for(host_tasks()))
    }

    fn with_slots(prepared: Prepared, count: u32) -> Result<Scanner, Unavailable> {
        let slots = Slots::new(count).map_err(|e| refusal("its slots map", &e))?;
        let mut insns = prepared.insns.clone();
        let fd = slots.map.as_raw_fd();
        for &at in &prepared.map_loads {
            insns[at].set_src(BPF_PSEUDO_MAP_FD);
            insns[at].imm = fd;
            if let Some(high) = insns.get_mut(at + 1) {
                high.imm = 0;
            }
        }
        let program = load_program(&insns, &prepared.license)?;
        Ok(Scanner { prepared, slots, program })
    }

    /// Runs the program once: every task's record in a slot. Returns the records, a slot
    /// each, in the order the kernel walked the tasks. A host with more tasks than slots gets
    /// a larger map and is scanned again (at most three times; then an error, never a scan
    /// that leaves tasks out).
    ///
    /// `fds`: each process's open fds counted too (the program's argument word, bit 0).
    pub(crate) fn run(&mut self, fds: bool) -> std::io::Result<(&[u8], u64)> {
        let mut runs = 0;
        let args = [u64::from(fds)];
        loop {
            let mut attr = TestRun {
                prog_fd: self.program.as_raw_fd() as u32,
                ctx_in: args.as_ptr() as u64,
                ctx_size_in: std::mem::size_of_val(&args) as u32,
                ..TestRun::default()
            };
            bpf(BPF_PROG_TEST_RUN, &mut attr)?;
            runs += 1;
            let tasks = attr.retval;
            if tasks <= self.slots.count {
                let filled = tasks as usize * SLOT_BYTES;
                // SAFETY: the mapping is `len` >= count × SLOT_BYTES bytes, readable, and the
                // kernel does not write it until the next run (which needs `&mut self`).
                let records = unsafe { std::slice::from_raw_parts(self.slots.base, filled) };
                return Ok((records, runs));
            }
            // A host whose tasks outgrow each larger map in turn gets an error, not a scan
            // that leaves some out: the sampler counts it and reads /proc this cycle.
            if runs > 3 {
                return Err(std::io::Error::other(format!(
                    "{tasks} tasks and {} slots after {runs} runs: the host's tasks grow faster than the map",
                    self.slots.count
                )));
            }
            let larger =
                Scanner::with_slots(self.prepared.clone(), slots_for(tasks)).map_err(|e| std::io::Error::other(e.0))?;
            *self = larger;
        }
    }
}

/// Slots for `tasks` tasks: half as many again, and at least 1,024.
fn slots_for(tasks: u32) -> u32 {
    tasks.saturating_add(tasks / 2).max(1024)
}

/// The host's tasks now (threads included): /proc/loadavg's fourth field, `running/total`.
fn host_tasks() -> u32 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().nth(3)?.split('/').nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn refusal(what: &str, e: &std::io::Error) -> Unavailable {
    if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
        Unavailable(format!("the kernel refused {what} ({e}): {NEEDS}"))
    } else {
        Unavailable(format!("the kernel refused {what}: {e}"))
    }
}

/// Loads the instructions as a raw tracepoint program; a refusal carries the verifier's last
/// lines.
fn load_program(insns: &[Insn], license: &CString) -> Result<OwnedFd, Unavailable> {
    let mut name = [0u8; 16];
    name[..PROGRAM.len()].copy_from_slice(PROGRAM.as_bytes());
    let mut attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_RAW_TRACEPOINT,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name,
        ..ProgLoad::default()
    };
    match bpf(BPF_PROG_LOAD, &mut attr) {
        // SAFETY: the kernel just gave us this fd; nothing else owns it.
        Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) => {
            Err(refusal("the task scan program", &e))
        }
        Err(e) => {
            // Again with the verifier's log, for the reason.
            let mut log = vec![0u8; 256 << 10];
            let mut attr = ProgLoad {
                prog_type: BPF_PROG_TYPE_RAW_TRACEPOINT,
                insn_cnt: insns.len() as u32,
                insns: insns.as_ptr() as u64,
                license: license.as_ptr() as u64,
                log_level: 1,
                log_size: log.len() as u32,
                log_buf: log.as_mut_ptr() as u64,
                prog_name: name,
                ..ProgLoad::default()
            };
            let _ = bpf(BPF_PROG_LOAD, &mut attr);
            let text = String::from_utf8_lossy(crate::c_str(&log)).into_owned();
            let tail: Vec<&str> = text.lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Err(Unavailable(format!("the kernel refused the task scan program ({e}): {}", tail.join(" / "))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host with more tasks than the map has slots is scanned again over a larger map, and
    /// no task is lost. Runs where this process may load BPF (root here); SKIP elsewhere.
    #[test]
    fn more_tasks_than_slots_grows_the_map_and_loses_none() {
        let prepared = match Btf::from_sys_fs().map_err(|e| Unavailable(e.to_string())).and_then(|btf| prepare(&btf)) {
            Ok(p) => p,
            Err(why) => return eprintln!("SKIP: the open-coded task scan: {why}"),
        };
        let mut scanner = match Scanner::with_slots(prepared, 16) {
            Ok(s) => s,
            Err(why) => return eprintln!("SKIP: the open-coded task scan: {why}"),
        };
        let (records, runs) = scanner.run(false).expect("run");
        let records = records.to_vec();
        let tasks = records.len() / SLOT_BYTES;
        assert_eq!(runs, 2, "one run over 16 slots, one over enough");
        assert!(tasks > 16 && scanner.slots.count as usize >= tasks, "{tasks} tasks, {} slots", scanner.slots.count);
        let tids: std::collections::HashSet<u64> = records
            .chunks_exact(SLOT_BYTES)
            .map(|slot| u64::from_ne_bytes(slot[8..16].try_into().expect("8 bytes")))
            .collect();
        assert!(tids.contains(&u64::from(std::process::id())), "this process is among the {tasks} tasks");
        assert_eq!(tids.len(), tasks, "every slot a different task");
    }
}
