// SPDX-License-Identifier: MIT OR GPL-2.0
//
// What proctor's two task scans share (task_iter.bpf.c, the `iter/task` program read through a
// file; task_scan.bpf.c, the open-coded iterator run once per scan): the kernel types they read
// and the records they write, one per process and a short one per other thread, with what
// /proc/PID/stat would print for it. User space sums the threads of each process
// (crates/proctor-bpf/src/lib.rs).
//
// CO-RE: the kernel types below name only the fields read here, each with
// preserve_access_index, so clang records every access as a relocation by name and the loader
// fits the offsets to the running kernel's BTF (/sys/kernel/btf/vmlinux). The layouts are
// those of Linux 6.2 and later (the task state in `__state` since 5.14, the resident counters
// per-CPU since 6.2); on an older kernel a relocation fails, the load is refused, and proctor
// reads /proc and says why.

#include "common.h"
#include "cgroup.h"

// task->flags: a kernel thread, a workqueue worker.
#define PF_WQ_WORKER 0x00000020
#define PF_KTHREAD 0x00200000

// The task as fill_record() follows its pointers (see there): task_scan.bpf.c, whose loader
// fits kfunc calls, defines it as an untrusted cast of the task (aya loads the other programs,
// and does not fit kfuncs).
#ifndef UNTRUSTED
#define UNTRUSTED(task) (task)
#endif

// A kernel thread's own data (kernel/kthread.c): the name past 15 characters, and for a
// workqueue worker its `struct worker`.
struct kthread {
	void *data;
	char *full_name;
} CORE;

// A workqueue worker (kernel/workqueue_internal.h): what it last ran, and whether it runs now.
struct worker {
	void *current_work;
	char desc[32];
} CORE;

struct percpu_counter {
	__s64 count;
} CORE;

struct mm_struct {
	unsigned long total_vm;
	struct percpu_counter rss_stat[4];
} CORE;

struct upid {
	int nr;
} CORE;

struct pid {
	unsigned int level;
	struct upid numbers[1];
} CORE;

struct signal_struct {
	int nr_threads;
	struct pid *pids[4];
	__u64 utime, stime, cutime, cstime;
	unsigned long min_flt, maj_flt, cmin_flt, cmaj_flt;
	unsigned long long sum_sched_runtime;
} CORE;

struct sched_entity {
	__u64 sum_exec_runtime;
} CORE;

struct thread_info {
	unsigned int cpu;
} CORE;

// A process's open files (include/linux/fdtable.h): the table of descriptors in use, a bit each.
struct fdtable {
	unsigned int max_fds;
	unsigned long *open_fds;
} CORE;

struct files_struct {
	struct fdtable *fdt;
} CORE;

// A task's credentials (include/linux/cred.h): the effective user, as the initial user
// namespace numbers it.
typedef struct {
	unsigned int val;
} kuid_t;

struct cred {
	kuid_t euid;
} CORE;

struct task_struct {
	struct thread_info thread_info;
	unsigned int __state;
	int prio, static_prio;
	unsigned int policy, rt_priority;
	unsigned int flags;
	int exit_state;
	int pid, tgid;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	__u64 utime, stime;
	__u64 start_boottime;
	void *worker_private;
	unsigned long min_flt, maj_flt;
	char comm[16];
	struct signal_struct *signal;
	struct mm_struct *mm;
	struct files_struct *files;
	const struct cred *real_cred;
	struct css_set *cgroups;
	struct sched_entity se;
} CORE;

// The descriptor table's bits counted here: a table of up to 256 fds (four words), which most
// processes' are (64 in the files_struct itself, else 128 or 256 until a process opens more).
// A larger one is NO_FDS, and user space stats its /proc/PID/fd instead.
#define FD_WORDS 4
#define NO_FDS (~0ULL)
#define NO_UID (~0ULL)

// One record per process (its leader task); a `thread_record` per other thread. Every field is
// 8 bytes so that the layout is the same for the compiler and for the Rust reader (src/lib.rs),
// which tells the two apart by `size`.
struct record {
	__u64 size;
	__u64 tid, tgid, ppid, pgrp, session;
	// flags: the task's; bit 32 set by this program: a workqueue worker running a work item now.
	__u64 state, exit_state, flags;
	__s64 prio, static_prio;
	__u64 cpu, nr_threads;
	// The thread's own counters (nanoseconds, faults).
	__u64 utime, stime, runtime, min_flt, maj_flt;
	__u64 start_boottime;
	// The group's: threads that have exited, and children waited for.
	__u64 sig_utime, sig_stime, sig_runtime, sig_min_flt, sig_maj_flt;
	__u64 cutime, cstime, cmin_flt, cmaj_flt;
	// Pages.
	__u64 total_vm, rss_file, rss_anon, rss_shmem;
	// Open fds, as `stat` of /proc/PID/fd gives them (6.2+); NO_FDS where they were not asked
	// for or the table is larger than this program counts.
	__u64 open_fds;
	// The kernfs ids of the task's cgroup2 cgroup and of its memory controller's cgroup (0 where
	// the kernel has no memory controller): which cgroup /proc/PID/cgroup names, without reading
	// it (user space reads it for a pair it has not seen, and when a process's pair changes).
	__u64 cgroup_id, memcg_id;
	// The effective user id, as `Uid:` in /proc/PID/status gives it second (the task's
	// objective credentials) before any user namespace maps it; NO_UID where the task has none.
	__u64 euid;
	char comm[16];
	// Kernel threads: the full name (kthread), or a workqueue worker's description; `stat`
	// prints these in place of comm.
	char long_name[64];
	char desc[32];
	// Not part of any record: where count_fds() reads the table's words (map memory, whose
	// contents the verifier does not track; a stack copy made the ways through differ).
	unsigned long fd_words[FD_WORDS];
};

// A thread other than its process's leader: only what `stat` sums over a process's threads.
struct thread_record {
	__u64 size;
	__u64 tid, tgid;
	__u64 utime, stime, runtime, min_flt, maj_flt;
};

// Writes into `r` the fds open in `files`, as proc_readfd_count() counts them for `stat` of
// /proc/PID/fd: the bits set in the table of open descriptors, 0 where the task has no files
// (a kernel thread, an exiting task). Read without the task's lock, as a snapshot: a table
// being replaced is read before or after.
//
// The verifier walks the scan's loop along every way through its body until their states meet,
// so this has one way through that matters: one read of a constant size (a size from the table
// would be tracked exactly, and a loop or a branch on the table's size is walked once per
// size: 3,933 instructions checked became 33,000-51,000, a second of CPU at each start), into
// the record's `fd_words`. Four words are always readable where a table begins: the embedded
// one's bitmap is followed by the files_struct's other bitmaps and fds, an allocated one (128
// fds or more) by its close-on-exec bitmap. Words past the table's are masked off without a
// branch.
static __always_inline void count_fds(struct record *r, struct files_struct *files)
{
	struct fdtable *fdt = files ? files->fdt : 0;
	unsigned long *w = r->fd_words;
	__u64 words, valid, n = 0;

	if (!fdt) {
		r->open_fds = 0;
		return;
	}
	words = fdt->max_fds / 64;
	if (words > FD_WORDS || bpf_probe_read_kernel(w, FD_WORDS * sizeof(*w), fdt->open_fds)) {
		r->open_fds = NO_FDS;
		return;
	}
	// Bit i set: word i is the table's.
	valid = (1ULL << words) - 1;
#pragma unroll
	for (int i = 0; i < FD_WORDS; i++)
		n += __builtin_popcountll(w[i] & -((valid >> i) & 1));
	r->open_fds = n;
}

// Writes `task`'s record into `r`, every field of it (`r` may hold an earlier task's record).
// A process's numbers are loaded through `task`, the pointers it follows through `via`, the same
// task as UNTRUSTED() gives it. From the open-coded iterator's trusted pointer the verifier
// decides whether each pointer loaded is trusted too, with a search of the kernel's BTF by name
// each time, along every way through the scan's loop: 187 of the 260 ms of CPU a `serve` took
// to start here. Through an untrusted pointer it does not, and each load gets the JIT's bounds
// test (faulting to 0, as every load past the task already may): why the numbers stay plain
// loads, and a thread's record (most tasks on a busy host) takes none of it.
// A process's open fds are counted only when bit 0 of `args[0]` is set (the open-coded scan's
// argument, set when the agent's groups ask; the iterator's file passes none): a few cache
// misses a process, so a scan without them costs what it did. Returns the bytes of it to keep:
// a thread's short record, a user process's record up to the kernel-thread names, or all of it
// but the words count_fds() read.
static __always_inline __u32 fill_record(struct record *r, struct task_struct *task, const __u64 *args)
{
	struct task_struct *via;

	if (task->pid != task->tgid) {
		struct thread_record *t = (struct thread_record *)r;

		t->size = sizeof(*t);
		t->tid = task->pid;
		t->tgid = task->tgid;
		t->utime = task->utime;
		t->stime = task->stime;
		t->runtime = task->se.sum_exec_runtime;
		t->min_flt = task->min_flt;
		t->maj_flt = task->maj_flt;
		return sizeof(*t);
	}
	via = UNTRUSTED(task);
	r->size = task->flags & PF_KTHREAD ? __builtin_offsetof(struct record, fd_words)
					   : __builtin_offsetof(struct record, long_name);
	r->tid = task->pid;
	r->tgid = task->tgid;
	r->ppid = via->real_parent ? via->real_parent->tgid : 0;
	r->state = task->__state;
	r->exit_state = task->exit_state;
	r->flags = task->flags;
	r->prio = task->prio;
	r->static_prio = task->static_prio;
	// task_cpu(): in thread_info where the kernel keeps thread_info in the task (x86, arm64).
	r->cpu = task->thread_info.cpu;
	r->utime = task->utime;
	r->stime = task->stime;
	r->runtime = task->se.sum_exec_runtime;
	r->min_flt = task->min_flt;
	r->maj_flt = task->maj_flt;
	r->start_boottime = task->start_boottime;
	__builtin_memcpy(r->comm, task->comm, sizeof(r->comm));
	if (task->flags & PF_KTHREAD) {
		struct kthread *kthread = via->worker_private;
		char *full_name = 0;
		void *data = 0;

		__builtin_memset(r->long_name, 0, sizeof(r->long_name));
		__builtin_memset(r->desc, 0, sizeof(r->desc));
		if (kthread) {
			bpf_probe_read_kernel(&full_name, sizeof(full_name), &kthread->full_name);
			bpf_probe_read_kernel(&data, sizeof(data), &kthread->data);
		}
		if (task->flags & PF_WQ_WORKER) {
			struct worker *worker = data;
			void *current = 0;

			if (worker) {
				bpf_probe_read_kernel(&current, sizeof(current), &worker->current_work);
				bpf_probe_read_kernel(r->desc, sizeof(r->desc), worker->desc);
				r->flags |= (__u64)(current != 0) << 32;
			}
		}
		if (full_name)
			bpf_probe_read_kernel_str(r->long_name, sizeof(r->long_name), full_name);
	}

	{
		struct signal_struct *sig = via->signal;
		struct mm_struct *mm = via->mm;
		struct pid *pgrp = sig ? sig->pids[2] : 0;
		struct pid *session = sig ? sig->pids[3] : 0;

		r->nr_threads = sig ? sig->nr_threads : 0;
		r->pgrp = pgrp ? pgrp->numbers[0].nr : 0;
		r->session = session ? session->numbers[0].nr : 0;
		r->sig_utime = sig ? sig->utime : 0;
		r->sig_stime = sig ? sig->stime : 0;
		r->sig_runtime = sig ? sig->sum_sched_runtime : 0;
		r->sig_min_flt = sig ? sig->min_flt : 0;
		r->sig_maj_flt = sig ? sig->maj_flt : 0;
		r->cutime = sig ? sig->cutime : 0;
		r->cstime = sig ? sig->cstime : 0;
		r->cmin_flt = sig ? sig->cmin_flt : 0;
		r->cmaj_flt = sig ? sig->cmaj_flt : 0;
		r->total_vm = mm ? mm->total_vm : 0;
		r->rss_file = mm ? mm->rss_stat[0].count : 0;
		r->rss_anon = mm ? mm->rss_stat[1].count : 0;
		r->rss_shmem = mm ? mm->rss_stat[3].count : 0;
	}

	cgroup_ids(via->cgroups, &r->cgroup_id, &r->memcg_id);
	{
		const struct cred *cred = via->real_cred;

		r->euid = cred ? cred->euid.val : NO_UID;
	}

	// Open fds, where the run asks. The flag is read from the run's argument here, not kept in
	// a register: a flag known along each way through the scan's loop would have the verifier
	// walk the loop once for each value.
	r->open_fds = NO_FDS;
	if (args && (args[0] & 1))
		count_fds(r, via->files);
	return task->flags & PF_KTHREAD ? __builtin_offsetof(struct record, fd_words)
					: __builtin_offsetof(struct record, long_name);
}
