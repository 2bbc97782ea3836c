//! Datagram sockets for the receive path: binding with `SO_REUSEPORT`, sizing `SO_RCVBUF`,
//! a batched `recvmmsg` reader, and the kernel's per-socket drop counter.
//!
//! Kernel drops are read from the `drops` column of `/proc/net/udp` (by socket inode) when
//! someone asks, rather than from `SO_RXQ_OVFL`: the control message costs work on every
//! datagram and only arrives with the next datagram after a drop, while the `/proc` column is
//! exact at any time and costs nothing on the hot path.
//!
//! This is the only unsafe code in the crate, kept to thin libc calls. It does not parse or
//! aggregate: the reader leaves datagrams in its own buffers (or copies them into a
//! [`RawBatch`]) and returns.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Datagrams copied out of a [`BatchReader`], each after the other in one buffer.
#[derive(Debug, Default)]
pub struct RawBatch {
    pub data: Vec<u8>,
    /// End offset of each packet in `data`.
    pub ends: Vec<u32>,
}

impl RawBatch {
    pub fn with_capacity(bytes: usize, packets: usize) -> Self {
        RawBatch { data: Vec::with_capacity(bytes), ends: Vec::with_capacity(packets) }
    }

    pub fn push(&mut self, packet: &[u8]) {
        self.data.extend_from_slice(packet);
        self.ends.push(self.data.len() as u32);
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn packets(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0usize;
        self.ends.iter().map(move |end| {
            let packet = &self.data[start..*end as usize];
            start = *end as usize;
            packet
        })
    }
}

/// How the receive buffer request turned out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RcvbufOutcome {
    pub requested_bytes: usize,
    /// What `getsockopt(SO_RCVBUF)` reports: Linux doubles the request for its bookkeeping,
    /// so this is compared with twice the request.
    pub applied_bytes: usize,
    /// `SO_RCVBUFFORCE` (needs `CAP_NET_ADMIN`) got past `net.core.rmem_max`.
    pub forced: bool,
}

impl RcvbufOutcome {
    /// True when `net.core.rmem_max` capped the request and forcing did not help.
    pub fn capped(&self) -> bool {
        self.applied_bytes < self.requested_bytes.saturating_mul(2)
    }
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: `value` outlives the call and the length matches its type.
    let rc = unsafe {
        libc::setsockopt(fd, level, name, (&value as *const i32).cast(), size_of::<i32>() as libc::socklen_t)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt_int(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = size_of::<i32>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid for writes of the sizes given.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut i32).cast(), &mut len) };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Requests `bytes` of receive buffer: plain `SO_RCVBUF` first, and `SO_RCVBUFFORCE` when
/// `net.core.rmem_max` capped that (it succeeds only with `CAP_NET_ADMIN`).
pub fn set_rcvbuf(fd: RawFd, bytes: usize) -> io::Result<RcvbufOutcome> {
    let request = bytes.min(i32::MAX as usize / 2) as i32;
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, request)?;
    let mut outcome = RcvbufOutcome {
        requested_bytes: request as usize,
        applied_bytes: getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF)? as usize,
        forced: false,
    };
    if outcome.capped() && setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, request).is_ok() {
        outcome.applied_bytes = getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF)? as usize;
        outcome.forced = true;
    }
    Ok(outcome)
}

/// Binds a UDP socket, with `SO_REUSEPORT` set before `bind` when asked, so several sockets
/// (one reader thread each) can share a port and the kernel spreads senders across them.
pub fn bind_udp(address: SocketAddr, reuseport: bool) -> io::Result<UdpSocket> {
    let domain = if address.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain socket(2); the fd is owned immediately below.
    let fd = unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    if reuseport {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    let (storage, len) = sockaddr(address);
    // SAFETY: `storage` holds a valid sockaddr of `len` bytes.
    let rc = unsafe { libc::bind(fd, (&storage as *const libc::sockaddr_storage).cast(), len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(UdpSocket::from(owned))
}

fn sockaddr(address: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    match address {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large enough and suitably aligned for sockaddr_in.
            let sin = unsafe { &mut *(&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) };
            (storage, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_addr = libc::in6_addr { s6_addr: v6.ip().octets() };
            sin6.sin6_flowinfo = v6.flowinfo();
            sin6.sin6_scope_id = v6.scope_id();
            (storage, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

/// What one `recvmmsg` call produced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchInfo {
    pub packets: usize,
    pub bytes: usize,
    /// Datagrams longer than the slot, cut (`MSG_TRUNC`): counted, their lines still parsed.
    pub truncated: usize,
}

/// A batched datagram reader over any datagram socket (UDP or Unix).
///
/// It owns `slots` buffers of `slot_bytes` each and the `mmsghdr` array pointing into them;
/// the pointers target heap memory that never moves, so the reader itself may move.
pub struct BatchReader {
    fd: RawFd,
    buffers: Vec<u8>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    slot_bytes: usize,
    /// Slots filled by the last `receive`.
    received: usize,
}

impl std::fmt::Debug for BatchReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchReader").field("fd", &self.fd).field("slots", &self.headers.len()).finish()
    }
}

impl BatchReader {
    /// `fd` must stay open for as long as the reader is used.
    pub fn new(fd: RawFd, slots: usize, slot_bytes: usize) -> Self {
        let slots = slots.max(1);
        let mut reader = BatchReader {
            fd,
            buffers: vec![0; slots * slot_bytes],
            // SAFETY (both): all-zero iovec and mmsghdr are valid (null pointers, zero lengths).
            iovecs: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            headers: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            slot_bytes,
            received: 0,
        };
        for slot in 0..slots {
            reader.iovecs[slot].iov_base = reader.buffers[slot * slot_bytes..].as_mut_ptr().cast();
            reader.iovecs[slot].iov_len = slot_bytes;
        }
        for slot in 0..slots {
            let header = &mut reader.headers[slot].msg_hdr;
            header.msg_iov = &mut reader.iovecs[slot];
            header.msg_iovlen = 1;
        }
        reader
    }

    /// Takes up to `slots` datagrams into the reader's own buffers, where [`BatchReader::packets`]
    /// finds them until the next call. With `wait`, blocks until at least one is there
    /// (`MSG_WAITFORONE`); without, returns `WouldBlock` when none is.
    pub fn receive(&mut self, wait: bool) -> io::Result<BatchInfo> {
        self.received = 0;
        for header in &mut self.headers {
            header.msg_hdr.msg_flags = 0;
            header.msg_len = 0;
        }
        let flags = if wait { libc::MSG_WAITFORONE } else { libc::MSG_DONTWAIT };
        // SAFETY: every header points at live buffers of the lengths it states.
        let received = unsafe {
            libc::recvmmsg(self.fd, self.headers.as_mut_ptr(), self.headers.len() as u32, flags, std::ptr::null_mut())
        };
        if received < 0 {
            return Err(io::Error::last_os_error());
        }
        self.received = received as usize;
        let mut info = BatchInfo { packets: self.received, ..BatchInfo::default() };
        for header in &self.headers[..self.received] {
            if header.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                info.truncated += 1;
            }
            info.bytes += (header.msg_len as usize).min(self.slot_bytes);
        }
        Ok(info)
    }

    /// The datagrams of the last [`BatchReader::receive`], in arrival order (a truncated one cut
    /// to the slot).
    pub fn packets(&self) -> impl Iterator<Item = &[u8]> {
        self.headers[..self.received].iter().enumerate().map(move |(slot, header)| {
            let start = slot * self.slot_bytes;
            &self.buffers[start..start + (header.msg_len as usize).min(self.slot_bytes)]
        })
    }

    /// Like [`BatchReader::receive`], then copies the datagrams to the end of `batch`.
    pub fn read(&mut self, batch: &mut RawBatch, wait: bool) -> io::Result<BatchInfo> {
        let info = self.receive(wait)?;
        for packet in self.packets() {
            batch.push(packet);
        }
        Ok(info)
    }
}

/// How full a socket's receive queue is, in the kernel's own accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveQueue {
    /// Bytes charged for queued datagrams (`sk_rmem_alloc`): each buffer's true size, which for
    /// a small datagram is far more than its payload (832 bytes for a 12-byte one on loopback).
    pub used_bytes: u64,
    /// The charge past which the kernel drops (`sk_rcvbuf`, the doubled `SO_RCVBUF`).
    pub limit_bytes: u64,
}

/// `SO_MEMINFO` (Linux 4.6) as numbered in `asm-generic/socket.h`; alpha, mips, parisc and
/// sparc number their socket options differently and get `Unsupported` instead.
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64",
    target_arch = "loongarch64",
    target_arch = "s390x",
    target_arch = "powerpc64"
))]
const SO_MEMINFO: Option<i32> = Some(55);
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64",
    target_arch = "loongarch64",
    target_arch = "s390x",
    target_arch = "powerpc64"
)))]
const SO_MEMINFO: Option<i32> = None;

/// The socket's receive queue charge and limit (`SO_MEMINFO`); one cheap syscall.
pub fn receive_queue(fd: RawFd) -> io::Result<ReceiveQueue> {
    let Some(option) = SO_MEMINFO else {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    };
    // The kernel fills as many of its `SK_MEMINFO_VARS` u32 values as fit.
    let mut values = [0u32; 9];
    let mut len = size_of::<[u32; 9]>() as libc::socklen_t;
    // SAFETY: `values` and `len` are valid for writes of the sizes given.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, option, values.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ReceiveQueue {
        used_bytes: u64::from(values[libc::SK_MEMINFO_RMEM_ALLOC as usize]),
        limit_bytes: u64::from(values[libc::SK_MEMINFO_RCVBUF as usize]),
    })
}

/// The inode of a socket, which names it in `/proc/net/udp`.
pub fn socket_inode(socket: &impl AsRawFd) -> io::Result<u64> {
    // SAFETY: fstat writes a `stat` we own; all-zero is a valid initial value.
    let mut stat: libc::stat = unsafe { zeroed() };
    let rc = unsafe { libc::fstat(socket.as_raw_fd(), &mut stat) };
    if rc == 0 {
        Ok(stat.st_ino)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The `drops` column of the `/proc/net/udp` (or `udp6`) row whose inode is `inode`.
///
/// Columns: `sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops`.
pub fn parse_udp_drops(text: &str, inode: u64) -> Option<u64> {
    text.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() >= 13 && fields[9].parse::<u64>().ok() == Some(inode) {
            fields[12].parse().ok()
        } else {
            None
        }
    })
}

/// Kernel drops of each socket inode (`None` where the socket is not in either table).
///
/// The kernel lists a table a page at a time; a socket closed between two pages can make the
/// listing skip a live one, so a socket missed is looked for once more in a second listing.
pub fn udp_drops(inodes: &[u64]) -> Vec<Option<u64>> {
    let look = |inodes: &[u64]| -> Vec<Option<u64>> {
        let tables: Vec<String> =
            ["/proc/net/udp", "/proc/net/udp6"].iter().filter_map(|path| std::fs::read_to_string(path).ok()).collect();
        inodes.iter().map(|inode| tables.iter().find_map(|table| parse_udp_drops(table, *inode))).collect()
    };
    let mut found = look(inodes);
    if found.iter().any(Option::is_none) {
        for (first, again) in found.iter_mut().zip(look(inodes)) {
            *first = first.or(again);
        }
    }
    found
}

/// Wakes a thread blocked in `recvmmsg`/`accept` on this socket: Linux returns from a blocked
/// receive once the socket is shut down for reading, even an unconnected UDP socket.
pub fn shutdown_read(socket: &impl AsRawFd) {
    // SAFETY: shutdown(2) on a descriptor we still own; failure (ENOTCONN on unconnected UDP,
    // after the wake-up has happened) is expected and harmless.
    unsafe {
        libc::shutdown(socket.as_raw_fd(), libc::SHUT_RD);
    }
}

#[cfg(test)]
mod tests {
    use super::{bind_udp, parse_udp_drops, receive_queue, socket_inode, udp_drops, BatchReader, RawBatch};
    use std::os::fd::AsRawFd;

    #[test]
    fn batch_reader_reads_several_datagrams_at_once() {
        let socket = bind_udp("127.0.0.1:0".parse().expect("addr"), true).expect("bind");
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind sender");
        let target = socket.local_addr().expect("addr");
        for packet in ["a:1|c", "b:2|c", &"x".repeat(100)] {
            sender.send_to(packet.as_bytes(), target).expect("send");
        }
        let mut reader = BatchReader::new(socket.as_raw_fd(), 8, 64);
        let mut batch = RawBatch::default();
        let mut truncated = 0;
        while batch.len() < 3 {
            let info = reader.read(&mut batch, true).expect("read");
            truncated += info.truncated;
        }
        let packets: Vec<&[u8]> = batch.packets().collect();
        assert_eq!(packets[0], b"a:1|c");
        assert_eq!(packets[1], b"b:2|c");
        assert_eq!(packets[2].len(), 64);
        assert_eq!(truncated, 1);
        let err = reader.read(&mut batch, false).expect_err("nothing left");
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
        let inode = socket_inode(&socket).expect("inode");
        assert_eq!(udp_drops(&[inode]), vec![Some(0)]);
    }

    #[test]
    fn the_receive_queue_charge_grows_with_queued_datagrams() {
        let socket = bind_udp("127.0.0.1:0".parse().expect("addr"), false).expect("bind");
        let empty = receive_queue(socket.as_raw_fd()).expect("SO_MEMINFO");
        assert_eq!(empty.used_bytes, 0);
        assert!(empty.limit_bytes > 0);
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind sender");
        for _ in 0..3 {
            sender.send_to(b"a:1|c", socket.local_addr().expect("addr")).expect("send");
        }
        // Loopback usually delivers inside `send_to`, but a busy host may defer it to ksoftirqd.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut queued = receive_queue(socket.as_raw_fd()).expect("SO_MEMINFO");
        while queued.used_bytes < 3 * 5 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
            queued = receive_queue(socket.as_raw_fd()).expect("SO_MEMINFO");
        }
        assert!(queued.used_bytes >= 3 * 5, "{queued:?}");
        assert_eq!(queued.limit_bytes, empty.limit_bytes);
    }

    #[test]
    fn drops_come_from_the_matching_inode_row() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
 1: 0100007F:1FBD 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 17
 2: 0100007F:1FBE 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 777 2 0000000000000000 3
";
        assert_eq!(parse_udp_drops(table, 777), Some(3));
        assert_eq!(parse_udp_drops(table, 4242), Some(17));
        assert_eq!(parse_udp_drops(table, 1), None);
    }
}
