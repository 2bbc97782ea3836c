// SPDX-License-Identifier: MIT OR GPL-2.0
//
// proctor's task iterator: one `read` of the iterator's file gives a record for every task
// (thread) the kernel has (task_record.h). Built with clang alone (no libbpf headers): `bash
// crates/proctor-bpf/bpf/build.sh` writes task_iter.bpf.o next to this file. Where the kernel
// has the open-coded task iterator (6.7+), proctor runs task_scan.bpf.c instead, which skips
// the file's per-task walk; this one serves 6.2 to 6.6.

#include "task_record.h"

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} CORE;

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} CORE;

SEC("iter/task")
int proctor_tasks(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct record r = {};
	__u32 len;

	if (!task)
		return 0;
	// Open fds are not counted through the file (kernels before 6.7): a read has no way to
	// say whether they are wanted, so user space `stat`s /proc/PID/fd as before.
	len = fill_record(&r, task, 0);
	bpf_seq_write(ctx->meta->seq, &r, len);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
