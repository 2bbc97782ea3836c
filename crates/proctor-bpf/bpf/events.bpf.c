// SPDX-License-Identifier: MIT OR GPL-2.0
//
// proctor's process events: every exec and every process exit, written into a ring buffer that
// a thread of proctor's drains (crates/proctor-bpf/src/events.rs), and every fork counted.
// A process that lives less than a sample is seen here: its parent, name and command line at
// exec, its CPU time, faults and peak resident size at exit, and its cgroup.
//
// Built like task_iter.bpf.c (clang alone, no libbpf headers; `bash bpf/build.sh`), CO-RE: the
// kernel types name only the fields read, and the loader fits them to the running kernel's BTF.
// The programs are BTF tracepoints (tp_btf, Linux 5.5+): their arguments are the tracepoint's
// own, typed (`struct task_struct *`), so reading a task's fields needs no probe_read.

#include "common.h"
#include "cgroup.h"

#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_LRU_HASH 9
#define BPF_MAP_TYPE_RINGBUF 27

// Helpers, by number (include/uapi/linux/bpf.h).
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static __u64 (*bpf_get_current_cgroup_id)(void) = (void *)80;
static long (*bpf_probe_read_user)(void *dst, __u32 size, const void *src) = (void *)112;
static __u64 (*bpf_ktime_get_boot_ns)(void) = (void *)125;
static long (*bpf_ringbuf_output)(void *ringbuf, void *data, __u64 size, __u64 flags) = (void *)130;
static void *(*bpf_ringbuf_reserve)(void *ringbuf, __u64 size, __u64 flags) = (void *)131;
static void (*bpf_ringbuf_submit)(void *data, __u64 flags) = (void *)132;
static __u64 (*bpf_ringbuf_query)(void *ringbuf, __u64 flags) = (void *)134;

#define BPF_RB_NO_WAKEUP 1
#define BPF_RB_FORCE_WAKEUP 2
#define BPF_RB_AVAIL_DATA 0

// The ring's size (a power of two pages). Events are submitted without waking the reader,
// which drains the ring every second, until a quarter of it is full: then each event wakes it.
// So a steady trickle costs no wakeups and a burst cannot fill the ring unnoticed. An exec
// record carries only the arguments it copied, so a process's exec, exit and final records
// take ~460 bytes with a 40-byte command line (~720 with all 256): 512 KiB holds ~1,100 of
// them between two drains. The reader maps it twice (the kernel's ring layout), so it shows as
// ~1 MB of the agent's resident size (1 MiB of fixed-size records showed as 2.1 MB).
#define RING_BYTES (1 << 19)
#define WAKE_AT (RING_BYTES / 4)

typedef struct {
	int counter;
} atomic_t;

struct mm_struct {
	unsigned long arg_start, arg_end;
} CORE;

struct signal_struct {
	atomic_t live;
	__u64 utime, stime, cutime, cstime;
	unsigned long min_flt, maj_flt, cmin_flt, cmaj_flt;
	unsigned long maxrss;
	unsigned long long sum_sched_runtime;
} CORE;

struct sched_entity {
	__u64 sum_exec_runtime;
} CORE;

struct task_struct {
	unsigned int flags;
	int exit_state;
	int exit_code;
	int pid, tgid;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	__u64 utime, stime;
	__u64 start_boottime;
	unsigned long min_flt, maj_flt;
	char comm[16];
	struct signal_struct *signal;
	struct mm_struct *mm;
	struct css_set *cgroups;
	struct sched_entity se;
} CORE;

struct linux_binprm {
	const char *filename;
} CORE;

// Counters, one slot per CPU, summed by the reader.
struct counts {
	__u64 process_forks;
	__u64 thread_forks;
	__u64 execs;
	__u64 exits;
	// Events the ring had no room for.
	__u64 lost_execs;
	__u64 lost_exits;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RING_BYTES);
} proctor_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counts);
} proctor_counts SEC(".maps");

// Threads whose exit ended their process, until their last switch away (LRU: one whose switch
// is never seen cannot hold a slot for good).
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} proctor_dying SEC(".maps");

#define KIND_EXEC 1
#define KIND_EXIT 2
#define KIND_FINAL 3
#define ARGS_BYTES 256
#define FILENAME_BYTES 128

// Every field 8 bytes (or a byte array of a multiple of 8) so that the compiler and the Rust
// reader (src/events.rs) lay it out alike; `kind` tells the records apart. An exec record ends
// after the arguments copied (`args_len` bytes, at most ARGS_BYTES): it is built in a per-CPU
// scratch copy (too large for the stack) and written with that size.
struct exec_event {
	__u64 kind;
	__u64 pid, ppid;
	__u64 start_boottime;
	__u64 time_boottime;
	__u64 cgroup_id;
	// The command line's length in the process's memory; at most ARGS_BYTES of it were copied.
	__u64 args_len;
	char comm[16];
	char filename[FILENAME_BYTES];
	char args[ARGS_BYTES];
};

struct exit_event {
	__u64 kind;
	__u64 pid, ppid;
	__u64 start_boottime;
	__u64 time_boottime;
	__u64 cgroup_id;
	__u64 exit_code;
	// The whole process's: its live thread's and its threads' that exited before (nanoseconds,
	// faults), and its children's that it waited for.
	__u64 utime, stime, runtime, min_flt, maj_flt;
	__u64 cutime, cstime, cmin_flt, cmaj_flt;
	// Pages: the most the process had resident at once.
	__u64 maxrss;
	// The exiting thread's own part of `runtime`, for the final event to replace.
	__u64 thread_runtime;
	// Its memory controller's cgroup id (cgroup.h), with `cgroup_id` the pair the task scan
	// gives: the cgroup of a process that lived between two samples, where the controller is
	// not in cgroup2's hierarchy (a hybrid host).
	__u64 memcg_id;
	char comm[16];
};

// The last thread of a process switching away for the last time: the scheduler has charged it
// everything by then (at the exit tracepoint it has not charged the time since its last tick or
// switch: the exit's own unmapping, up to a tick). `runtime` replaces the exit's `thread_runtime`.
struct final_event {
	__u64 kind;
	__u64 pid, tid;
	__u64 start_boottime;
	__u64 runtime;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exec_event);
} proctor_exec_scratch SEC(".maps");

static struct counts *counts(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&proctor_counts, &zero);
}

static __u64 wake_flag(void)
{
	return bpf_ringbuf_query(&proctor_events, BPF_RB_AVAIL_DATA) >= WAKE_AT ? BPF_RB_FORCE_WAKEUP
										 : BPF_RB_NO_WAKEUP;
}

// sched_process_fork(struct task_struct *parent, struct task_struct *child): a new task, the
// kernel's `processes` count in /proc/stat. Counted only: the exec or the exit tells the rest.
SEC("tp_btf/sched_process_fork")
int proctor_fork(__u64 *ctx)
{
	struct task_struct *child = (struct task_struct *)ctx[1];
	struct counts *c = counts();

	if (!c)
		return 0;
	if (child->pid == child->tgid)
		c->process_forks++;
	else
		c->thread_forks++;
	return 0;
}

// sched_process_exec(struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm): runs in
// the exec'ing task, after its new name is set and its new memory holds the arguments.
SEC("tp_btf/sched_process_exec")
int proctor_exec(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];
	struct linux_binprm *bprm = (struct linux_binprm *)ctx[2];
	struct counts *c = counts();
	struct exec_event *e;
	struct mm_struct *mm;
	__u32 zero = 0;
	__u64 len = 0;

	if (!c)
		return 0;
	c->execs++;
	e = bpf_map_lookup_elem(&proctor_exec_scratch, &zero);
	if (!e) {
		c->lost_execs++;
		return 0;
	}
	e->kind = KIND_EXEC;
	e->pid = p->tgid;
	e->ppid = p->real_parent->tgid;
	e->start_boottime = p->group_leader->start_boottime;
	e->time_boottime = bpf_ktime_get_boot_ns();
	e->cgroup_id = bpf_get_current_cgroup_id();
	__builtin_memcpy(e->comm, p->comm, sizeof(e->comm));
	e->filename[0] = 0;
	bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), bprm->filename);
	e->args[0] = 0;
	mm = p->mm;
	if (mm) {
		unsigned long start = mm->arg_start, end = mm->arg_end;

		len = end > start ? end - start : 0;
		e->args_len = len;
		if (len > ARGS_BYTES)
			len = ARGS_BYTES;
		// The verifier wants the size bounded where the helper is called.
		len &= (ARGS_BYTES * 2 - 1);
		if (len > ARGS_BYTES)
			len = ARGS_BYTES;
		if (bpf_probe_read_user(e->args, len, (const void *)start)) {
			e->args_len = 0;
			len = 0;
		}
	} else {
		e->args_len = 0;
	}
	if (bpf_ringbuf_output(&proctor_events, e, __builtin_offsetof(struct exec_event, args) + len,
			       wake_flag()))
		c->lost_execs++;
	return 0;
}

// sched_process_exit(struct task_struct *p, ...): runs in each exiting thread, after its
// memory is let go. Only the thread whose exit ends its process writes an event; by then the
// process's peak resident size is in its signal_struct, with its exited threads' times.
SEC("tp_btf/sched_process_exit")
int proctor_exit(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];
	struct signal_struct *sig = p->signal;
	struct counts *c;
	struct exit_event *e;

	if (sig->live.counter != 0)
		return 0;
	c = counts();
	if (!c)
		return 0;
	c->exits++;
	e = bpf_ringbuf_reserve(&proctor_events, sizeof(*e), 0);
	if (!e) {
		c->lost_exits++;
		return 0;
	}
	e->kind = KIND_EXIT;
	e->pid = p->tgid;
	e->ppid = p->real_parent->tgid;
	e->start_boottime = p->group_leader->start_boottime;
	e->time_boottime = bpf_ktime_get_boot_ns();
	cgroup_ids(p->cgroups, &e->cgroup_id, &e->memcg_id);
	e->exit_code = (__u32)p->exit_code;
	e->utime = sig->utime + p->utime;
	e->stime = sig->stime + p->stime;
	e->runtime = sig->sum_sched_runtime + p->se.sum_exec_runtime;
	e->min_flt = sig->min_flt + p->min_flt;
	e->maj_flt = sig->maj_flt + p->maj_flt;
	e->cutime = sig->cutime;
	e->cstime = sig->cstime;
	e->cmin_flt = sig->cmin_flt;
	e->cmaj_flt = sig->cmaj_flt;
	e->maxrss = sig->maxrss;
	e->thread_runtime = p->se.sum_exec_runtime;
	__builtin_memcpy(e->comm, p->group_leader->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, wake_flag());
	{
		__u32 tid = p->pid;
		__u64 one = 1;

		bpf_map_update_elem(&proctor_dying, &tid, &one, 0);
	}
	return 0;
}

// sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next, ...): runs on
// every context switch, so it returns at once unless `prev` has exited (a task that has exited
// switches away once more, for good), and writes only for the thread whose exit ended its
// process.
SEC("tp_btf/sched_switch")
int proctor_switch(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct final_event *e;
	__u32 tid;

	if (!prev->exit_state)
		return 0;
	tid = prev->pid;
	if (!bpf_map_lookup_elem(&proctor_dying, &tid))
		return 0;
	bpf_map_delete_elem(&proctor_dying, &tid);
	e = bpf_ringbuf_reserve(&proctor_events, sizeof(*e), 0);
	if (!e)
		return 0;
	e->kind = KIND_FINAL;
	e->pid = prev->tgid;
	e->tid = tid;
	e->start_boottime = prev->group_leader->start_boottime;
	e->runtime = prev->se.sum_exec_runtime;
	bpf_ringbuf_submit(e, wake_flag());
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
