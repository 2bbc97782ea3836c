// SPDX-License-Identifier: MIT OR GPL-2.0
//
// What every proctor BPF program spells the same way, without libbpf's headers: the kernel's
// integer types, the section and CO-RE attributes, BTF-defined maps as libbpf's headers write
// them, and the helpers more than one program calls, by number (include/uapi/linux/bpf.h).

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;

#define SEC(name) __attribute__((section(name), used))
#define CORE __attribute__((preserve_access_index))
#define __always_inline inline __attribute__((always_inline))

#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name

#define HELPER static __attribute__((unused))
HELPER void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
HELPER long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;
// bpf_probe_read_kernel (113) and bpf_probe_read_kernel_str (115) copy what an untyped kernel
// pointer points at.
HELPER long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *src) = (void *)113;
HELPER long (*bpf_probe_read_kernel_str)(void *dst, __u32 size, const void *src) = (void *)115;
// bpf_seq_write (127): appends bytes to an iterator's output.
HELPER long (*bpf_seq_write)(void *seq, const void *data, __u32 len) = (void *)127;
