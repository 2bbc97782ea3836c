// SPDX-License-Identifier: MIT OR GPL-2.0
//
// proctor's task scan on Linux 6.7 and later: one run of this program (BPF_PROG_TEST_RUN, no
// attachment, no file) walks every task with the open-coded task iterator
// (`bpf_iter_task_new`, a kfunc) and writes each task's record (task_record.h) into the next
// slot of an array map that user space has mapped, so the records are read where the kernel
// wrote them. The `iter/task` program (task_iter.bpf.c) costs a seq_file step per task: a pid
// lookup, a reference taken and dropped, and a copy through the file; this walks the task list
// under the RCU read lock the test run holds.
//
// crates/proctor-bpf/src/scan.rs loads it: aya's object parser fits the CO-RE relocations,
// and the loader itself points the kfunc calls at the kernel's BTF ids and the map load at the
// slots map it made, sized to the host's tasks.

// The same object as a read-only pointer of a kernel type (6.2+; the verifier makes the call a
// register move). fill_record() follows the task's pointers through it: see there.
extern void *bpf_rdonly_cast(const void *obj, unsigned int btf_id) __attribute__((section(".ksyms")));

// The kernel's BTF id of a type (a CO-RE relocation by name: BPF_TYPE_ID_TARGET).
#define KERNEL_TYPE_ID(type) __builtin_btf_type_id(*(type *)0, 1)
#define UNTRUSTED(task) ((struct task_struct *)bpf_rdonly_cast(task, KERNEL_TYPE_ID(struct task_struct)))

#include "task_record.h"

// The open-coded task iterator (kernel/bpf/task_iter.c): its state lives on the program's
// stack; the verifier knows its size from the kernel's BTF.
struct bpf_iter_task {
	__u64 __opaque[3];
} __attribute__((aligned(8)));

#define BPF_TASK_ITER_ALL_THREADS 1

extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task, unsigned int flags)
	__attribute__((section(".ksyms")));
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __attribute__((section(".ksyms")));
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __attribute__((section(".ksyms")));

// The slots: an array map of `struct record`, mmapable. Its size here is a placeholder; the
// loader makes the map itself (as many slots as the host has tasks, with room) and points this
// program at it.
struct {
	int (*type)[2]; // BPF_MAP_TYPE_ARRAY
	int (*max_entries)[1];
	__u32 *key;
	struct record *value;
	int (*map_flags)[1024]; // BPF_F_MMAPABLE
} proctor_scan_slots SEC(".maps");

// `ctx`: the run's one argument word (BPF_PROG_TEST_RUN's ctx_in, which the kernel requires to
// cover it); bit 0: count each process's open fds. Returns the number of tasks seen: more than
// the map's slots when the host has more tasks than it has room for (the loader then makes a
// larger map and runs it again).
SEC("raw_tp/proctor_scan")
int proctor_scan(__u64 *ctx)
{
	struct bpf_iter_task it;
	struct task_struct *task;
	__u32 n = 0;

	bpf_iter_task_new(&it, 0, BPF_TASK_ITER_ALL_THREADS);
	while ((task = bpf_iter_task_next(&it))) {
		struct record *r;

		// The walk starts at the idle task (pid 0), which /proc does not list.
		if (!task->pid)
			continue;
		r = bpf_map_lookup_elem(&proctor_scan_slots, &n);
		n++;
		if (r)
			fill_record(r, task, ctx);
	}
	bpf_iter_task_destroy(&it);
	return n;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
