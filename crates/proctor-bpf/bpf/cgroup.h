// SPDX-License-Identifier: MIT OR GPL-2.0
//
// A task's cgroups as proctor names them, for the task scans (task_record.h) and the process
// events (events.bpf.c): the kernfs ids of its cgroup2 cgroup and of its memory controller's
// cgroup, a pair that says which cgroup /proc/PID/cgroup names without reading it. Include after
// common.h.

// A task's cgroups (include/linux/cgroup-defs.h): the cgroup2 (default hierarchy) one, and each
// controller's state, whose cgroup is the task's in the controller's hierarchy (v1) or the
// nearest one up with the controller on (v2). A cgroup's kernfs node id is its directory's inode
// number (and generation): the id of a cgroup while it lives, never another's.
struct kernfs_node {
	__u64 id;
} CORE;

struct cgroup {
	struct kernfs_node *kn;
} CORE;

struct cgroup_subsys_state {
	struct cgroup *cgroup;
} CORE;

struct css_set {
	struct cgroup_subsys_state *subsys[16];
	struct cgroup *dfl_cgrp;
} CORE;

// The memory controller's index in css_set.subsys: its value is fitted to the running kernel's
// (a relocation by name); a kernel without the controller has none, and its id here is 0.
enum cgroup_subsys_id {
	memory_cgrp_id = 4,
};

// The task's cgroup2 cgroup id and its memory controller's cgroup id (0 where the kernel has no
// memory controller). Loads through a pointer of the kernel's BTF types fault to 0 where it is
// NULL (the verifier makes them probe reads), so the chains need no tests: a branch each would be
// walked again by the verifier along every way through the task scan's loop.
static __always_inline void cgroup_ids(struct css_set *cset, __u64 *dfl_id, __u64 *memcg_id)
{
	*dfl_id = cset->dfl_cgrp->kn->id;
	*memcg_id = 0;
	if (__builtin_preserve_enum_value(*(enum cgroup_subsys_id *)memory_cgrp_id, 0 /* exists */)) {
		__u32 i = __builtin_preserve_enum_value(*(enum cgroup_subsys_id *)memory_cgrp_id, 1 /* value */);

		*memcg_id = cset->subsys[i & 15]->cgroup->kn->id;
	}
}
