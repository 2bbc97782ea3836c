// SPDX-License-Identifier: MIT OR GPL-2.0
//
// proctor's per-process network: every IPv4 and IPv6 packet this host sends or delivers, counted
// in the kernel against the process that owns its socket, TCP and UDP apart, with what each
// process handed to send and got from receive, its connects, accepts, retransmits and resets.
// User space reads the table once a sample (crates/proctor-bpf/src/net.rs); no packet reaches
// user space. A walk of the sockets it gave an owner yields each process's open connections and
// their smoothed round-trip times on demand.
//
// Why these hooks (BTF tracepoints, Linux 6.3+, and cgroup programs; not fentry/fexit, which a
// kernel locked down for integrity refuses, as this project's machines do): every packet handed
// to a device passes `net_dev_queue` with the socket that made it (the kernel's own ACKs
// included), before any queueing discipline, so in the call that made it; every one received
// passes `netif_receive_skb`: the host's totals. A received packet's socket is known only once
// TCP or UDP found it: a cgroup skb program on the cgroup2 root's ingress sees it there, with
// its socket. What no socket took (a handshake's last ACK, TIME_WAIT, ICMP, a closed port,
// forwarded traffic) is the difference, its own figure, not a shortfall. A socket's owner
// (socket-local storage, cloned to an accepted child from its listener) is the process that
// created it (cgroup sock_create), connected, listened, or last sent on it: a datagram in its
// sender's call, a TCP segment made while the caller holds the socket's lock (its send, or the
// ACKs its receive sends; a softirq finding the lock held leaves the work to the holder), so
// receive in softirq lands on the right process. Three programs a packet (queue, receive,
// ingress) and none per send or receive call: at 50,000 packets a second the calls' two were
// half of what the accounting added to the workload (bench/net/cost.sh; docs/performance.md).
//
// Bytes are IP packets' lengths (headers included, link header not): what `lo` counts (it
// counts a packet after taking its link header off; an Ethernet device counts 14 bytes more a
// packet). Payload bytes: a datagram's, from its lengths as it leaves and as its socket takes it
// in; TCP's, what the connection's own counters say the peer acknowledged (`bytes_acked`) and
// what arrived in order (`bytes_received`), added at each walk of the sockets and when the
// connection closes (and with each packet where the kernel refuses the storage walk: see
// `direct_row`).
//
// Built like the other objects (clang alone, no libbpf headers; `bash bpf/build.sh`), CO-RE.

#include "common.h"

#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_SK_STORAGE 24
#define BPF_F_NO_PREALLOC 1
#define BPF_F_MMAPABLE (1U << 10)
#define BPF_F_CLONE (1U << 9)
#define BPF_NOEXIST 1
#define BPF_ANY 0
#define BPF_SK_STORAGE_GET_F_CREATE 1

static __u32 (*bpf_get_smp_processor_id)(void) = (void *)8;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static void *(*bpf_sk_storage_get)(void *map, void *sk, void *value, __u64 flags) = (void *)107;
static void *(*bpf_skc_to_tcp_sock)(void *sk) = (void *)137;
static void *(*bpf_get_current_task_btf)(void) = (void *)158;

#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define AF_INET 2
#define SOCK_STREAM 1
#define AF_INET6 10
#define ETH_P_IP_BE 0x0008
#define ETH_P_IPV6_BE 0xdd86
#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_SYN_RECV 3
#define TCP_FIN_WAIT1 4
#define TCP_FIN_WAIT2 5
#define TCP_CLOSE 7
#define TCP_CLOSE_WAIT 8
#define TCP_LAST_ACK 9
#define TCP_CLOSING 11
#define TCP_LISTEN 10

struct task_struct {
	struct task_struct *group_leader;
	__u64 start_boottime;
} CORE;

struct sock_common {
	unsigned short skc_family;
	volatile unsigned char skc_state;
} CORE;

// socket_lock_t: `owned` is set while a process holds the socket (lock_sock).
struct proctor_sock_lock {
	int owned;
} CORE;

struct file;

struct socket {
	struct file *file;
} CORE;

struct sock {
	struct sock_common __sk_common;
	struct socket *sk_socket;
	struct proctor_sock_lock sk_lock;
	__u16 sk_protocol;
	__u16 sk_type;
	int sk_err;
} CORE;

struct tcp_sock {
	__u32 srtt_us;
	__u32 total_retrans;
	__u64 bytes_received;
	__u64 bytes_acked;
} CORE;

struct sk_buff {
	struct sock *sk;
	unsigned int len;
	__u16 protocol;
	__u16 transport_header;
	__u16 network_header;
	struct net_device *dev;
	unsigned char *head;
	unsigned char *data;
	// An offset from head on 64-bit kernels (sk_buff_data_t): where skb_shared_info starts.
	unsigned int end;
	char cb[48];
} CORE;

struct skb_shared_info {
	unsigned short gso_size;
	unsigned short gso_segs;
	unsigned int gso_type;
} CORE;

struct net_device {
	__u64 features;
	unsigned int mtu;
	unsigned int gso_max_size;
	__u16 gso_max_segs;
} CORE;

// The cgroup programs' context (include/uapi/linux/bpf.h): a fixed ABI, not CO-RE.
struct bpf_sock {
	__u32 bound_dev_if;
	__u32 family;
	__u32 type;
	__u32 protocol;
};

struct __sk_buff {
	__u32 len;
	__u32 fields_1[18];
	// The packet (direct access; a cgroup skb program's starts at the IP header).
	__u32 data;
	__u32 data_end;
	__u32 fields_2[14];
	__u32 data_meta;
	__u64 flow_keys;
	__u64 tstamp;
	__u32 wire_len;
	__u32 gso_segs;
	union {
		struct bpf_sock *sk;
		__u64 sk_word;
	};
};

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} CORE;

struct bpf_iter__tcp {
	struct bpf_iter_meta *meta;
	struct sock_common *sk_common;
} CORE;

struct bpf_iter__bpf_sk_storage_map {
	struct bpf_iter_meta *meta;
	struct sock *sk;
	void *value;
} CORE;

// Who owns a socket: a process, by pid and start (a reused pid is another process); for TCP,
// the connection's payload counters as last added to its owner's row; and what the socket
// counted since its counts were last added to its owner's row (see flush): packets and IP
// bytes each way, and a datagram socket's payload.
struct owner {
	__u32 tgid;
	__u16 flags;
	// The socket's protocol, written where its storage is made (and by each packet it sends): the
	// receiving side reads it here, not from the socket (a helper call and a field a packet).
	__u16 proto;
	__u64 start;
	__u64 acked, received;
	__u64 tx_packets, tx_bytes, rx_packets, rx_bytes, sent, got;
};

// `acked` and `received` hold the connection's counters as last added: set from zero for a
// socket made (or connected) after the programs were attached; for one made before, from what
// it had counted when the first walk found it (what it carried before that is not counted).
#define OWNER_BASELINE 1

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	// Cloned: an accepted connection is its listener's until its acceptor uses it.
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
	__type(key, int);
	__type(value, struct owner);
} proctor_owner SEC(".maps");

// One process's counters since the programs were attached (or since its pid was another's).
struct proc_net {
	__u64 start;
	__u64 tcp_tx_packets, tcp_tx_bytes, tcp_rx_packets, tcp_rx_bytes;
	__u64 udp_tx_packets, udp_tx_bytes, udp_rx_packets, udp_rx_bytes;
	__u64 tcp_sent, tcp_received, udp_sent, udp_received;
	__u64 connects, accepts, retransmits, resets_sent, resets_received;
};

// A row per process that used the network since the reader's last read, which deletes the rows
// of processes gone: 8,192 holds a busy host's. A row that finds the table full is counted
// (`table_full`), its traffic in the unowned figures. The reader's batched read walks every
// bucket, empty or not (as many as rows here): at 32,768 that walk was half its time.
#define PROCESSES 8192

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROCESSES);
	__type(key, __u32);
	__type(value, struct proc_net);
} proctor_net SEC(".maps");

// Host totals, one slot per CPU, summed by the reader. Each slot has 128 bytes to itself (no
// two CPUs write one cache line, nor a pair the hardware fetches together).
struct totals {
	// Every IP packet handed to a device (locally made or forwarded) and every one delivered
	// to this host, and of those, what no process was found for.
	__u64 tx_packets, tx_bytes, rx_packets, rx_bytes;
	__u64 tx_unowned_packets, tx_unowned_bytes;
	// Delivered packets that TCP or UDP gave to an owned socket (the rest are unowned).
	__u64 rx_owned_packets, rx_owned_bytes;
	__u64 table_full;
	__u64 pad[7];
};

// A plain array indexed by the CPU (the loader sets its length to the possible CPUs), not a
// per-CPU one, so that the reader maps it into its memory and sums the slots without a system
// call: the per-CPU array's lookup was 11-16 µs of the sampler's CPU a sample, cold
// (docs/performance.md). The programs' lookup is inlined either way (the CPU's number is a
// per-CPU load; bench/net/calls.py).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct totals);
} proctor_net_totals SEC(".maps");

// How the sockets' counts reach the rows: 0 (as loaded), by the storage walk each sample; 1,
// where the kernel refuses that walk, by each packet's program (a row lookup a packet more),
// so the rows are current at every sample and not only at the TCP tables' walk every 10 s.
// Written by the loader before anything is attached.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} proctor_net_mode SEC(".maps");

static __always_inline int rows_each_packet(void)
{
	__u32 zero = 0;
	__u32 *mode = bpf_map_lookup_elem(&proctor_net_mode, &zero);

	return mode && *mode;
}

// Counters are added atomically: a softirq's program may interrupt a task's on the same CPU.
#define ADD(field, n) __sync_fetch_and_add(&(field), (n))
// A total in this CPU's slot written by one program only: that program does not run twice at
// once on one CPU (the kernel skips a tracing program's nested run, and the send and receive
// paths run with bottom halves off), so no other write can fall between its load and store.
// Atomic adds cost the packet more (bench/net/cost.sh).
#define ADD_CPU(field, n) ((field) += (n))

static __always_inline struct totals *totals(void)
{
	__u32 cpu = bpf_get_smp_processor_id();

	return bpf_map_lookup_elem(&proctor_net_totals, &cpu);
}

// The IP packet's length: the buffer from its network header on, wherever `data` stands.
static __always_inline __u64 ip_len(struct sk_buff *skb)
{
	__s64 data_off = (__s64)(skb->data - skb->head);

	return (__u64)((__s64)skb->len + data_off - (__s64)skb->network_header);
}

// The calling process, as a socket's owner (its pid and start; nothing else is written).
static __always_inline void current_owner(struct owner *o)
{
	struct task_struct *task = bpf_get_current_task_btf();

	o->tgid = bpf_get_current_pid_tgid() >> 32;
	o->start = task->group_leader->start_boottime;
}

// Makes the calling process the owner, written only when it is another.

// The owner's row, made (or restarted, for a reused pid) when needed; 0 when the table is full.
static __always_inline struct proc_net *row_of(const struct owner *o)
{
	struct proc_net *p = bpf_map_lookup_elem(&proctor_net, &o->tgid);

	if (p && p->start == o->start)
		return p;
	struct proc_net fresh = {.start = o->start};
	if (bpf_map_update_elem(&proctor_net, &o->tgid, &fresh, p ? BPF_ANY : BPF_NOEXIST) && !p) {
		// Made by another CPU just now, or the table is full.
		p = bpf_map_lookup_elem(&proctor_net, &o->tgid);
		if (!p) {
			struct totals *t = totals();

			if (t)
				ADD(t->table_full, 1);
		}
		return p;
	}
	return bpf_map_lookup_elem(&proctor_net, &o->tgid);
}

// Where each packet goes straight to its owner's row (`proctor_net_mode`), that row; 0 where
// the socket counts it for the walk to add (or the table is full: the socket keeps it).
static __always_inline struct proc_net *direct_row(const struct owner *o)
{
	if (!rows_each_packet())
		return 0;
	return row_of(o);
}

// Adds what the socket counted since the last time to its owner's row, and starts its counts
// again (each swapped with zero, so a packet counted meanwhile on another CPU is in this add or
// the next). The packets' programs count on the socket, not the row (but see `direct_row`): the
// row is a hash lookup (~60-95 ns a packet, bpf_stats), the socket's storage is at hand. Called
// by the walk each sample for every owned socket, as a TCP connection closes, as a datagram
// socket is released, and before the socket changes owner. With the table full the counts wait
// on the socket (`table_full` counts the tries).
static __always_inline void flush(struct owner *o, int proto)
{
	struct proc_net *p;
	__u64 txp, txb, rxp, rxb, sent, got;

	if (!o->tgid || !(o->tx_packets | o->rx_packets))
		return;
	p = row_of(o);
	if (!p)
		return;
	txp = __sync_lock_test_and_set(&o->tx_packets, 0);
	txb = __sync_lock_test_and_set(&o->tx_bytes, 0);
	rxp = __sync_lock_test_and_set(&o->rx_packets, 0);
	rxb = __sync_lock_test_and_set(&o->rx_bytes, 0);
	if (proto == IPPROTO_TCP) {
		ADD(p->tcp_tx_packets, txp);
		ADD(p->tcp_tx_bytes, txb);
		ADD(p->tcp_rx_packets, rxp);
		ADD(p->tcp_rx_bytes, rxb);
	} else {
		sent = __sync_lock_test_and_set(&o->sent, 0);
		got = __sync_lock_test_and_set(&o->got, 0);
		ADD(p->udp_tx_packets, txp);
		ADD(p->udp_tx_bytes, txb);
		ADD(p->udp_rx_packets, rxp);
		ADD(p->udp_rx_bytes, rxb);
		ADD(p->udp_sent, sent);
		ADD(p->udp_received, got);
	}
}

// Per packet, so it compares the pid alone (a helper call) and reads the start only for another
// pid: a pid reused while the socket lives on in a process that inherited it keeps the old
// start (the sampler then reads the row as another process's). What the socket counted until
// now is the previous owner's.
static __always_inline void take(struct owner *o, int proto)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (o->tgid != tgid) {
		struct task_struct *task = bpf_get_current_task_btf();

		flush(o, proto);
		o->tgid = tgid;
		o->start = task->group_leader->start_boottime;
	}
}

// Makes the calling process (`me`, filled in here) the TCP socket's owner.
static __always_inline struct owner *own(struct sock *sk, struct owner *me)
{
	struct owner *o;

	current_owner(me);
	if (!sk)
		return 0;
	o = bpf_sk_storage_get(&proctor_owner, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (o)
		o->proto = IPPROTO_TCP;
	if (o && (o->tgid != me->tgid || o->start != me->start)) {
		flush(o, IPPROTO_TCP);
		o->tgid = me->tgid;
		o->start = me->start;
	}
	return o;
}

// The socket owner's row, or 0.
static __always_inline struct proc_net *row_of_sock(struct sock *sk)
{
	struct owner *o;

	if (!sk)
		return 0;
	o = bpf_sk_storage_get(&proctor_owner, sk, 0, 0);
	return o && o->tgid ? row_of(o) : 0;
}

static __always_inline int is_ip(struct sk_buff *skb)
{
	return skb->protocol == ETH_P_IP_BE || skb->protocol == ETH_P_IPV6_BE;
}

// A datagram's payload, from a packet's IP length less its headers: the IP header with its
// options or extension headers (up to where the transport header starts) and UDP's 8 bytes.
// Fragments after the first carry no UDP header, so a datagram too long for the device counts
// 8 bytes short for each: telling them apart takes reading the packet's IP header, which cost
// ~60 ns a packet here (bpf_stats), for datagrams applications avoid sending.
static __always_inline __u64 datagram_payload(struct sk_buff *skb, __u64 len)
{
	__u64 headers = (__u64)(skb->transport_header - skb->network_header) + 8;

	return len > headers ? len - headers : 0;
}

// How many packets the device is handed for a buffer: one, or, for a buffer of several segments
// (GSO) that the kernel cuts before the device (longer than the device takes, or of a kind it
// cannot cut: what validate_xmit_skb decides), its segments, each with the headers (TCP's from
// its header's length, UDP's 8 bytes). `lo` and veth count a buffer they are handed whole once,
// as this does; a NIC's driver that cuts it (TSO) may count its segments.
static __always_inline __u64 wire_segments(struct sk_buff *skb, int proto, __u64 *len)
{
	struct skb_shared_info *shinfo = (struct skb_shared_info *)(skb->head + skb->end);
	struct net_device *dev = skb->dev;
	__u32 gso = 0, type = 0;
	__u16 size, segs;
	__u64 headers = (__u64)(skb->transport_header - skb->network_header);
	__u8 doff = 0;

	// One no longer than a packet the device sends is one (the common case, without reading
	// skb_shared_info; the link header and some slack for it on top).
	if (!dev || skb->len <= dev->mtu + 32)
		return 1;
	// gso_size and gso_segs, side by side since Linux 2.6.
	bpf_probe_read_kernel(&gso, sizeof(gso), &shinfo->gso_size);
	size = gso & 0xffff;
	segs = gso >> 16;
	if (!size || segs < 2)
		return 1;
	bpf_probe_read_kernel(&type, sizeof(type), &shinfo->gso_type);
	// The device's GSO features are the buffer's kinds shifted by NETIF_F_GSO_SHIFT (16).
	if (skb->len < dev->gso_max_size && segs <= dev->gso_max_segs &&
	    (dev->features & ((__u64)type << 16)) == ((__u64)type << 16))
		return 1;
	if (!proto) {
		// No socket's (forwarded): the IP header says.
		__u8 next = 0;

		bpf_probe_read_kernel(&next, 1, skb->head + skb->network_header +
						    (skb->protocol == ETH_P_IP_BE ? 9 : 6));
		proto = next;
	}
	if (proto == IPPROTO_TCP) {
		bpf_probe_read_kernel(&doff, 1, skb->head + skb->transport_header + 12);
		headers += (doff >> 4) * 4;
	} else {
		headers += 8;
	}
	*len += (segs - 1) * headers;
	return segs;
}

static __always_inline void add_payload(struct owner *o, struct proc_net *p, __u64 acked, __u64 received,
					int with_received);
static __always_inline void tcp_payload(struct tcp_sock *tp, struct owner *o, struct proc_net *p);

// A connection's two payload counters read as untyped memory, in one copy where they lie within
// 128 bytes of each other (72 apart in Linux 6.18; their offsets are this kernel's, by CO-RE): a
// copy's call costs more than its bytes (bench/net/programs.py, PROTO=tcp).
#define COUNTERS_WINDOW 16
static __always_inline int tcp_counters(struct tcp_sock *tp, __u64 *acked, __u64 *received)
{
	__u32 a = __builtin_preserve_field_info(tp->bytes_acked, 0 /* BPF_FIELD_BYTE_OFFSET */);
	__u32 r = __builtin_preserve_field_info(tp->bytes_received, 0);
	__u32 lo = a < r ? a : r, hi = a < r ? r : a;
	__u64 window[COUNTERS_WINDOW];

	if (hi - lo < sizeof(window) && !((a | r) & 7)) {
		if (bpf_probe_read_kernel(window, sizeof(window), (void *)tp + lo))
			return -1;
		*acked = window[(a - lo) / 8];
		*received = window[(r - lo) / 8];
		return 0;
	}
	if (bpf_probe_read_kernel(acked, sizeof(*acked), &tp->bytes_acked))
		return -1;
	return bpf_probe_read_kernel(received, sizeof(*received), &tp->bytes_received) ? -1 : 0;
}

// A packet sent on an owned TCP or UDP socket: on the socket, or on its owner's row where each
// packet goes there (`direct_row`), with a TCP connection's payload so far.
static __always_inline void count_sent(struct sock *sk, struct owner *o, int proto, __u64 packets, __u64 len,
				       __u64 payload)
{
	struct proc_net *p = direct_row(o);
	struct tcp_sock *tp;
	__u64 acked = 0, received = 0;
	int state;

	if (!p) {
		ADD(o->tx_packets, packets);
		ADD(o->tx_bytes, len);
		if (proto == IPPROTO_UDP)
			ADD(o->sent, payload);
	} else if (proto == IPPROTO_TCP) {
		ADD(p->tcp_tx_packets, packets);
		ADD(p->tcp_tx_bytes, len);
		// The connection's counters, read as untyped memory: the tracepoint's socket is one the
		// socket-casting helpers refuse (an RCU pointer), and the verifier types it as a bare
		// sock. A full stream socket of TCP's is a tcp_sock (a raw one of TCP's protocol is
		// not).
		if (sk->sk_type != SOCK_STREAM)
			return;
		tp = (struct tcp_sock *)sk;
		if (tcp_counters(tp, &acked, &received))
			return;
		// After a close or shutdown, a FIN arriving is acknowledged before the state changes
		// (tcp_fin), so this packet may be that ACK, its counter already past the FIN's
		// sequence number: what arrived is added by the ingress program (before TCP takes
		// the segment) and at close.
		state = sk->__sk_common.skc_state;
		add_payload(o, p, acked, received, state != TCP_FIN_WAIT1 && state != TCP_FIN_WAIT2);
	} else {
		ADD(p->udp_tx_packets, packets);
		ADD(p->udp_tx_bytes, len);
		ADD(p->udp_sent, payload);
	}
}

// Every IP packet handed to a device, against the owner of the socket that made it, counted
// before any queueing discipline runs, so in the call that made it: a datagram's sender, or,
// for TCP, the process holding the socket's lock when that is set (its send, or its receive's
// ACKs), which becomes the owner. TCP's timers and softirq send too; then the owner stands.
SEC("tp_btf/net_dev_queue")
int proctor_queue(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	struct totals *t;
	struct sock *sk;
	struct owner *o = 0;
	__u64 len, packets, payload = 0;
	int proto = 0;

	if (!skb || !is_ip(skb))
		return 0;
	t = totals();
	if (!t)
		return 0;
	len = ip_len(skb);
	sk = skb->sk;
	// Storage lives on full sockets only (not a handshake's request or TIME_WAIT's).
	if (sk)
		o = bpf_sk_storage_get(&proctor_owner, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (o) {
		proto = sk->sk_protocol;
		o->proto = proto;
	}
	if (proto == IPPROTO_UDP)
		payload = datagram_payload(skb, len);
	packets = wire_segments(skb, proto, &len);
	ADD_CPU(t->tx_packets, packets);
	ADD_CPU(t->tx_bytes, len);
	// A kernel's own datagram socket (no file: a tunnel's, sending in softirq for whatever task
	// it interrupted) is nobody's.
	if (o && proto == IPPROTO_UDP && sk->sk_socket && sk->sk_socket->file)
		take(o, proto);
	else if (o && proto == IPPROTO_TCP && sk->sk_lock.owned &&
		 sk->__sk_common.skc_state != TCP_LISTEN)
		// Not a listener: the kernel answers for one (a reset to a stray segment) in softirq,
		// without its lock, while its owner may hold it in accept() (a thousand connections'
		// churn moved listeners to the connecting process that way).
		take(o, proto);
	if (!o || !o->tgid || (proto != IPPROTO_TCP && proto != IPPROTO_UDP)) {
		ADD_CPU(t->tx_unowned_packets, packets);
		ADD_CPU(t->tx_unowned_bytes, len);
		return 0;
	}
	count_sent(sk, o, proto, packets, len, payload);
	return 0;
}

// Every IP packet a device received (forwarded ones too: they leave again, counted there).
SEC("tp_btf/netif_receive_skb")
int proctor_receive(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	struct totals *t;

	if (!skb || !is_ip(skb))
		return 0;
	t = totals();
	if (!t)
		return 0;
	ADD_CPU(t->rx_packets, 1);
	ADD_CPU(t->rx_bytes, ip_len(skb));
	return 0;
}

// A received packet TCP or UDP found a socket for, with its length from the IP header on. A
// datagram counted here was given to its socket, which may still drop it (a full receive
// buffer: the kernel counts those as the socket's drops).
SEC("cgroup_skb/ingress")
int proctor_ingress(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	struct owner *o;
	struct proc_net *p;
	struct totals *t;
	__u64 len = skb->len;

	if (!sk)
		return 1;
	// Storage lives on full sockets only, and the lookup answers none for another socket, so
	// no bpf_sk_fullsock first; the protocol is the storage's (docs/performance.md).
	o = bpf_sk_storage_get(&proctor_owner, sk, 0, 0);
	if (!o || !o->tgid)
		return 1;
	if (o->proto != IPPROTO_TCP && o->proto != IPPROTO_UDP)
		return 1;
	p = direct_row(o);
	if (o->proto == IPPROTO_TCP) {
		if (p) {
			struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);

			ADD(p->tcp_rx_packets, 1);
			ADD(p->tcp_rx_bytes, len);
			// Before TCP takes this segment: what the ones before it carried and acknowledged.
			if (tp)
				tcp_payload(tp, o, p);
		} else {
			ADD(o->rx_packets, 1);
			ADD(o->rx_bytes, len);
		}
	} else {
		// A whole datagram here (fragments are joined before UDP takes it), from its IP header
		// on: IPv4's says its length; IPv6's is 40 bytes (extension headers counted as payload).
		__u8 *ip = (__u8 *)(long)skb->data;
		__u8 v = 0x45;
		__u64 headers;

		if (ip + 1 <= (__u8 *)(long)skb->data_end)
			v = *ip;
		headers = (v >> 4) == 4 ? (v & 15) * 4 + 8 : 48;
		if (p) {
			ADD(p->udp_rx_packets, 1);
			ADD(p->udp_rx_bytes, len);
			ADD(p->udp_received, len > headers ? len - headers : 0);
		} else {
			ADD(o->rx_packets, 1);
			ADD(o->rx_bytes, len);
			ADD(o->got, len > headers ? len - headers : 0);
		}
	}
	t = totals();
	if (t) {
		ADD_CPU(t->rx_owned_packets, 1);
		ADD_CPU(t->rx_owned_bytes, len);
	}
	return 1;
}

// A socket is its creator's from the start, so a datagram socket's first packet (a server's
// first request, before its receive returned) has an owner.
SEC("cgroup/sock_create")
int proctor_sock_create(struct bpf_sock *sk)
{
	struct owner *o;

	if (sk->protocol != IPPROTO_TCP && sk->protocol != IPPROTO_UDP)
		return 1;
	o = bpf_sk_storage_get(&proctor_owner, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (o) {
		current_owner(o);
		o->proto = sk->protocol;
		// A new socket's counters start at zero.
		o->flags |= OWNER_BASELINE;
	}
	return 1;
}

// A datagram socket closing adds its last counts (a TCP one does as its connection closes).
SEC("cgroup/sock_release")
int proctor_sock_release(struct bpf_sock *sk)
{
	struct owner *o;

	if (sk->protocol != IPPROTO_UDP)
		return 1;
	o = bpf_sk_storage_get(&proctor_owner, sk, 0, 0);
	if (o)
		flush(o, IPPROTO_UDP);
	return 1;
}

static __always_inline int is_inet(struct sock *sk, int *proto)
{
	unsigned short family;

	if (!sk)
		return 0;
	family = sk->__sk_common.skc_family;
	if (family != AF_INET && family != AF_INET6)
		return 0;
	*proto = sk->sk_protocol;
	return *proto == IPPROTO_TCP || *proto == IPPROTO_UDP;
}

// Adds what a TCP connection's counters grew by since they were last added to its owner's row
// (`p`, the row already looked up, or 0 to look it up here): the payload the peer acknowledged
// and what arrived in order. Called by the walk (for each owned socket), when the connection
// closes, and, where each packet goes straight to its row (`direct_row`), by each packet: the
// walk of the kernel's TCP tables sees only the agent's network namespace, so a container's
// connection would otherwise add its payload only as it closes. `with_received` 0 leaves what
// arrived for a later call. Swapped atomically, so two CPUs at once add each byte once.
static __always_inline void add_payload(struct owner *o, struct proc_net *p, __u64 acked, __u64 received,
					int with_received)
{
	__u64 was;

	if (!(o->flags & OWNER_BASELINE)) {
		o->acked = acked;
		o->received = received;
		o->flags |= OWNER_BASELINE;
		return;
	}
	if (!o->tgid)
		return;
	if (!p)
		p = row_of(o);
	if (!p)
		return;
	was = __sync_lock_test_and_set(&o->acked, acked);
	if (acked > was)
		ADD(p->tcp_sent, acked - was);
	else if (acked < was)
		// Another flush had read later counters: theirs stand.
		__sync_lock_test_and_set(&o->acked, was);
	if (!with_received)
		return;
	was = __sync_lock_test_and_set(&o->received, received);
	if (received > was)
		ADD(p->tcp_received, received - was);
	else if (received < was)
		__sync_lock_test_and_set(&o->received, was);
}

static __always_inline void tcp_payload(struct tcp_sock *tp, struct owner *o, struct proc_net *p)
{
	add_payload(o, p, tp->bytes_acked, tp->bytes_received, 1);
}

// TCP's states: connect (CLOSE to SYN_SENT, in the caller's call) and listen make the caller
// the owner, and a connect starts its counters afresh (a socket disconnected and connected again
// had them zeroed); a connection accepted (SYN_RECV to ESTABLISHED, in softirq) counts for the
// owner its listener gave it; a connection closing adds its last payload. The counters count a
// sequence number for the connecting side's SYN once acknowledged, and one for each FIN (the
// peer's as it arrives, one's own as the peer acknowledges it): not payload, so each is added to
// what was already counted as the state change that follows it shows, before the last payload
// is added. (Counted before the state changes: the kernel updates them first.)
SEC("tp_btf/inet_sock_set_state")
int proctor_state(__u64 *ctx)
{
	struct sock *sk = (struct sock *)ctx[0];
	int old = (int)ctx[1], new = (int)ctx[2];
	struct proc_net *p;
	int proto;

	if (!is_inet(sk, &proto) || proto != IPPROTO_TCP)
		return 0;
	if (new == TCP_SYN_SENT || new == TCP_LISTEN) {
		struct owner me;
		struct owner *o = own(sk, &me);

		if (new == TCP_SYN_SENT) {
			if (o) {
				// The SYN, once acknowledged.
				o->acked = 1;
				o->received = 0;
				o->flags |= OWNER_BASELINE;
			}
			p = row_of(&me);
			if (p)
				ADD(p->connects, 1);
		}
	} else if (old == TCP_SYN_RECV && new == TCP_ESTABLISHED) {
		struct owner *o = bpf_sk_storage_get(&proctor_owner, sk, 0, 0);

		// The storage was copied from the listener's with what the listener had counted (the
		// handshakes' packets): that is the listener's, not this connection's.
		if (o) {
			o->tx_packets = 0;
			o->tx_bytes = 0;
			o->rx_packets = 0;
			o->rx_bytes = 0;
		}
		p = row_of_sock(sk);
		if (p)
			ADD(p->accepts, 1);
	} else {
		struct owner *o = bpf_sk_storage_get(&proctor_owner, sk, 0, 0);
		struct tcp_sock *tp;
		// Closed by the FINs' exchange, not a reset or a timeout.
		int clean = new == TCP_CLOSE && !sk->sk_err;

		if (!o)
			return 0;
		if (new == TCP_CLOSE_WAIT || new == TCP_CLOSING || (old == TCP_FIN_WAIT2 && clean))
			ADD(o->received, 1);
		if ((old == TCP_FIN_WAIT1 && new == TCP_FIN_WAIT2) ||
		    ((old == TCP_LAST_ACK || old == TCP_CLOSING) && clean))
			ADD(o->acked, 1);
		if (new == TCP_CLOSE) {
			flush(o, IPPROTO_TCP);
			tp = bpf_skc_to_tcp_sock(sk);
			if (tp)
				tcp_payload(tp, o, 0);
		}
	}
	return 0;
}

// The segments a buffer TCP retransmits carries (what the kernel's RetransSegs adds for it: a
// buffer of a large send holds many): `tcp_gso_segs` in TCP's control block in skb->cb, after
// seq and end_seq (include/net/tcp.h, struct tcp_skb_cb; laid out so since Linux 3.18).
static __always_inline __u64 segments(const struct sk_buff *skb)
{
	__u16 segs = 0;

	bpf_probe_read_kernel(&segs, sizeof(segs), &skb->cb[8]);
	return segs ? segs : 1;
}

// Two programs for one tracepoint; the loader loads the one that fits. Older kernels give the
// tracepoint (sk, skb) and fire it only for a retransmit that went out; newer ones (6.18 here)
// add the outcome and fire it for every try, so the second counts only those that went out
// (not one still in the host's queue, or refused for memory).
SEC("tp_btf/tcp_retransmit_skb")
int proctor_retransmit(__u64 *ctx)
{
	struct proc_net *p = row_of_sock((struct sock *)ctx[0]);

	if (p)
		ADD(p->retransmits, segments((const struct sk_buff *)ctx[1]));
	return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int proctor_retransmit_outcome(__u64 *ctx)
{
	struct proc_net *p;

	if ((int)ctx[2] != 0)
		return 0;
	p = row_of_sock((struct sock *)ctx[0]);
	if (p)
		ADD(p->retransmits, segments((const struct sk_buff *)ctx[1]));
	return 0;
}

SEC("tp_btf/tcp_send_reset")
int proctor_reset_sent(__u64 *ctx)
{
	struct proc_net *p = row_of_sock((struct sock *)ctx[0]);

	if (p)
		ADD(p->resets_sent, 1);
	return 0;
}

SEC("tp_btf/tcp_receive_reset")
int proctor_reset_received(__u64 *ctx)
{
	struct proc_net *p = row_of_sock((struct sock *)ctx[0]);

	if (p)
		ADD(p->resets_received, 1);
	return 0;
}

// One record per owned TCP socket for the walk below.
struct conn_record {
	__u32 tgid;
	__u32 state;
	__u64 start;
	__u32 srtt_us;
	__u32 retrans;
};

// One record per TCP socket with an owner: whose, its state and smoothed RTT. The walk goes
// over the owner storage (every socket proctor has given an owner, in any network namespace,
// as the traffic is counted), not the kernel's TCP tables: those have a bucket for every
// connection the host could hold (262,144 here), empty or not, and the walk visited them all.
// Storage lives on full sockets only, so TIME_WAIT and request sockets are not among them.
SEC("iter/bpf_sk_storage_map")
int proctor_owned_sockets(struct bpf_iter__bpf_sk_storage_map *ctx)
{
	struct sock *sk = ctx->sk;
	struct owner *o = ctx->value;
	struct tcp_sock *tp;
	struct conn_record r;

	if (!sk || !o || !o->tgid)
		return 0;
	tp = bpf_skc_to_tcp_sock(sk);
	if (!tp) {
		if (sk->sk_protocol == IPPROTO_UDP)
			flush(o, IPPROTO_UDP);
		return 0;
	}
	flush(o, IPPROTO_TCP);
	tcp_payload(tp, o, 0);
	r.tgid = o->tgid;
	r.start = o->start;
	r.state = sk->__sk_common.skc_state;
	// tcp_sock keeps the smoothed RTT in eighths of a microsecond.
	r.srtt_us = tp->srtt_us >> 3;
	r.retrans = tp->total_retrans;
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

// The same records from a walk of the kernel's TCP tables, for a kernel that refuses the
// storage iterator: every bucket, empty or not, in this network namespace.
SEC("iter/tcp")
int proctor_tcp_sockets(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct tcp_sock *tp;
	struct owner *o;
	struct conn_record r;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	o = bpf_sk_storage_get(&proctor_owner, tp, 0, 0);
	if (!o || !o->tgid)
		return 0;
	flush(o, IPPROTO_TCP);
	tcp_payload(tp, o, 0);
	r.tgid = o->tgid;
	r.start = o->start;
	r.state = skc->skc_state;
	r.srtt_us = tp->srtt_us >> 3;
	r.retrans = tp->total_retrans;
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

struct udp_sock;

struct bpf_iter__udp {
	struct bpf_iter_meta *meta;
	struct udp_sock *udp_sk;
} CORE;

// With the TCP tables' walk, the datagram sockets' counts are added by a walk of the kernel's
// UDP tables (this network namespace); it writes no record.
SEC("iter/udp")
int proctor_udp_sockets(struct bpf_iter__udp *ctx)
{
	struct owner *o;

	if (!ctx->udp_sk)
		return 0;
	o = bpf_sk_storage_get(&proctor_owner, ctx->udp_sk, 0, 0);
	if (o)
		flush(o, IPPROTO_UDP);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
