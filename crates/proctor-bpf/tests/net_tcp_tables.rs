//! The connections walk where the kernel refuses the socket storage iterator: the kernel's TCP
//! tables are walked instead (asked for here, so this path is held on any kernel that has it).
//! Its own test binary: the network part is loaded once per process.

use proctor_bpf::net::{walk_tcp_tables, Walk, TCP_ESTABLISHED, TCP_LISTEN};
use proctor_bpf::NetTable;
use std::io::{Read, Write};

/// A budget for walks of other network namespaces that any test's walks fit in.
const ONE_MINUTE: std::time::Duration = std::time::Duration::from_secs(60);

/// Taken by the tests that walk other network namespaces: where the next walk starts among
/// them is the table's, one for the process.
static OTHER_NAMESPACES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The table, walking the TCP tables; None (said) where the kernel refuses the programs.
fn open() -> Option<NetTable> {
    walk_tcp_tables();
    match NetTable::open() {
        Ok(t) => Some(t),
        Err(why) => {
            eprintln!("SKIP: BPF per-process network: {why}");
            None
        }
    }
}

#[test]
fn the_tcp_tables_walk_sees_a_held_pair_and_its_listener() {
    let Some(table) = open() else { return };
    assert!(matches!(table.walk(), Walk::TcpTables(why) if why.contains("asked")), "{:?}", table.walk());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let client = std::net::TcpStream::connect(listener.local_addr().expect("its address")).expect("connected");
    let (mut server, _) = listener.accept().expect("accepted");
    // 12,345 bytes one way and one back: the reply acknowledges them all.
    let mut client = client;
    client.write_all(&[7; 12_345]).expect("sent");
    let mut got = vec![0; 12_345];
    server.read_exact(&mut got).expect("received");
    server.write_all(&[1]).expect("replied");
    client.read_exact(&mut [0]).expect("the reply");
    let me = std::process::id();
    // Before any walk, each packet is already in this process's row (the programs add them as
    // they pass where the tables are walked): the 12,346 bytes both ways with their headers
    // (it sent them all and received them all). So is the payload each packet found counted:
    // the accepted end's reply left after its 12,345 bytes had arrived. What the last packets
    // carried may wait for the next packet or the walk (an ACK not yet sent, or one counted by
    // the ingress program before TCP took it), never more than was sent.
    let mut rows = std::collections::HashMap::new();
    table.read(&mut rows);
    let row = rows.get(&me).expect("this process's row before the walk");
    assert!(row.tcp.tx.bytes >= 12_346 + 2 * 40 && row.tcp.rx.bytes >= 12_346 + 2 * 40, "{row:?}");
    assert!(row.tcp.received_bytes >= 12_345 && row.tcp.received_bytes <= 12_346, "{row:?}");
    assert!(row.tcp.sent_bytes <= 12_346, "{row:?}");
    let mut conns = Vec::new();
    table.connections(&mut conns).expect("the walk");
    let established = conns.iter().filter(|c| c.pid == me && c.state == TCP_ESTABLISHED).count();
    assert_eq!(established, 2, "the client's end and the accepted one: {conns:?}");
    assert!(conns.iter().any(|c| c.pid == me && c.state == TCP_LISTEN), "{conns:?}");
    // This walk added both ends' payload to this process's row.
    table.read(&mut rows);
    let row = rows.get(&me).expect("this process's row");
    assert_eq!((row.tcp.sent_bytes, row.tcp.received_bytes), (12_346, 12_346), "{row:?}");
    // Closed, they leave ESTABLISHED. Not always by the next walk: a child this process spawns
    // meanwhile (the other test's `unshare`) holds a copy of every descriptor until its exec
    // closes them, and the sockets close with the last copy; CI once walked in that gap.
    drop((client, server));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        table.connections(&mut conns).expect("the walk");
        let open = conns.iter().filter(|c| c.pid == me && c.state == TCP_ESTABLISHED).count();
        if open == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {open} established 10 s after closing: {conns:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A connection in another network namespace (a container's), which the walk of this
/// namespace's TCP tables never sees: its payload still reaches its owner's row while it is
/// open, each packet adding what the connection's counters grew by (without that it would
/// wait for the connection to close), and told of a process in that namespace, the walk
/// enters it and gives the pair and its listener too, their payload counted once.
#[test]
fn a_connection_in_another_network_namespace_is_walked_and_counted_before_it_closes() {
    let Some(table) = open() else { return };
    let _turn = OTHER_NAMESPACES.lock().unwrap_or_else(|e| e.into_inner());
    // A pair in a new network namespace: 1,000,000 bytes one way, one back, held open. Each
    // socket call gives up after a minute, so a pair that cannot talk ends (and this test skips).
    let peer = r#"
import socket, sys
socket.setdefaulttimeout(60)
l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()
c = socket.create_connection(l.getsockname()); s, _ = l.accept()
c.sendall(b'x' * 1000000); got = 0
while got < 1000000: got += len(s.recv(1 << 16))
s.sendall(b'y'); c.recv(1)
print('done', flush=True); sys.stdin.readline()
"#;
    let mut child = match std::process::Command::new("unshare")
        .args(["--net", "sh", "-c", "ip link set lo up && exec python3 -c \"$0\"", peer])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(why) => {
            eprintln!("SKIP: a connection in another network namespace: unshare: {why}");
            return;
        }
    };
    let pid = child.id();
    let mut line = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    std::io::BufRead::read_line(&mut out, &mut line).expect("its line");
    if line.trim() != "done" {
        let _ = child.kill();
        let _ = child.wait();
        eprintln!("SKIP: a connection in another network namespace: unshare --net could not make one");
        return;
    }
    // The walk runs (it adds nothing for that namespace); the payload is there, or arrives with
    // the pair's last ACK (which a delayed ACK may hold back a little): waited for, bounded.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut rows = std::collections::HashMap::new();
    let row = loop {
        let mut conns = Vec::new();
        table.connections(&mut conns).expect("the walk");
        assert!(!conns.iter().any(|c| c.pid == pid), "this namespace's walk saw the other's: {conns:?}");
        // Told of a process in it, the walk enters that namespace too.
        let (_, ns) = table.connections_in(&mut conns, &[std::process::id(), pid], ONE_MINUTE).expect("the walks");
        let theirs: Vec<_> = conns.iter().filter(|c| c.pid == pid).map(|c| c.state).collect();
        assert_eq!(
            (theirs.iter().filter(|&&s| s == TCP_ESTABLISHED).count(), theirs.contains(&TCP_LISTEN)),
            (2, true),
            "the pair and its listener in the other namespace: {conns:?} {ns:?}"
        );
        assert_eq!((ns.found, ns.walked, ns.skipped, ns.refused.as_deref()), (1, 1, 0, None), "{ns:?}");
        table.read(&mut rows);
        let row = rows.get(&pid).copied();
        if row.is_some_and(|r| r.tcp.sent_bytes >= 1_000_000) || std::time::Instant::now() > deadline {
            break row.expect("the peer's row");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let _ = child.stdin.take().map(|mut s| s.write_all(b"\n"));
    let _ = child.wait();
    assert!((1_000_000..=1_000_001).contains(&row.tcp.sent_bytes), "{row:?}");
    assert!((1_000_000..=1_000_001).contains(&row.tcp.received_bytes), "{row:?}");
}

/// Where entering another network namespace is refused (no CAP_SYS_ADMIN: dropped here from
/// the walking thread, which the thread that enters inherits it from), the walk of this
/// namespace's tables still runs, and the refusal is said, not passed over.
#[test]
fn a_namespace_the_agent_may_not_enter_is_said() {
    let Some(table) = open() else { return };
    let _turn = OTHER_NAMESPACES.lock().unwrap_or_else(|e| e.into_inner());
    // A process in a network namespace of its own, asleep.
    let mut child = match std::process::Command::new("unshare").args(["--net", "sleep", "60"]).spawn() {
        Ok(c) => c,
        Err(why) => {
            eprintln!("SKIP: a namespace the agent may not enter: unshare: {why}");
            return;
        }
    };
    let pid = child.id();
    // Bounded: until unshare has made the namespace and exec'd sleep in it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let own = std::fs::read_link("/proc/self/ns/net").expect("this namespace");
    while std::fs::read_link(format!("/proc/{pid}/ns/net")).ok().is_none_or(|ns| ns == own) {
        assert!(std::time::Instant::now() < deadline, "unshare made no namespace in 10 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let outcome = std::thread::scope(|s| {
        s.spawn(|| {
            drop_sys_admin();
            let mut conns = Vec::new();
            table.connections_in(&mut conns, &[pid], ONE_MINUTE).map_err(|e| e.to_string())
        })
        .join()
        .expect("the walking thread")
    });
    let _ = child.kill();
    let _ = child.wait();
    let (_, ns) = outcome.expect("this namespace's walk");
    assert_eq!((ns.found, ns.walked, ns.skipped, ns.unwalked.as_slice()), (1, 0, 0, &[pid][..]), "{ns:?}");
    assert!(ns.refused.as_deref().is_some_and(|e| e.contains("entering it") && e.contains("not permitted")), "{ns:?}");
    assert!(ns.refused_by_permission, "the kernel's refusal, not a failure: {ns:?}");
}

/// Takes CAP_SYS_ADMIN out of this thread's effective and permitted sets (capabilities are a
/// thread's own; threads it starts from now on inherit the rest).
fn drop_sys_admin() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_SYS_ADMIN: u32 = 21;
    let mut header = Header { version: VERSION_3, pid: 0 };
    let mut data = [Data::default(); 2];
    // SAFETY: capget and capset read and write the header and the two data words we own.
    unsafe {
        assert_eq!(libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()), 0, "capget");
        data[0].effective &= !(1 << CAP_SYS_ADMIN);
        data[0].permitted &= !(1 << CAP_SYS_ADMIN);
        assert_eq!(libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()), 0, "capset");
    }
}

/// Over its budget, a walk visits one other network namespace and leaves the rest for the
/// next walks, which take them in turns: three sleepers in namespaces of their own, walked
/// with no budget, are each visited once in three walks, and the pids of those not visited
/// are said each time.
#[test]
fn other_namespaces_take_turns_within_the_budget() {
    let Some(table) = open() else { return };
    let _turn = OTHER_NAMESPACES.lock().unwrap_or_else(|e| e.into_inner());
    let mut sleepers = Vec::new();
    for _ in 0..3 {
        match std::process::Command::new("unshare").args(["--net", "sleep", "60"]).spawn() {
            Ok(c) => sleepers.push(c),
            Err(why) => {
                eprintln!("SKIP: other namespaces in turns: unshare: {why}");
                return;
            }
        }
    }
    let pids: Vec<u32> = sleepers.iter().map(|c| c.id()).collect();
    let own = std::fs::read_link("/proc/self/ns/net").expect("this namespace");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while pids.iter().any(|p| std::fs::read_link(format!("/proc/{p}/ns/net")).ok().is_none_or(|ns| ns == own)) {
        assert!(std::time::Instant::now() < deadline, "unshare made no namespaces in 10 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut conns = Vec::new();
    let mut visited: Vec<u32> = Vec::new();
    for _ in 0..3 {
        let (_, ns) = table.connections_in(&mut conns, &pids, std::time::Duration::ZERO).expect("the walks");
        assert_eq!((ns.found, ns.walked, ns.skipped, ns.unwalked.len()), (3, 1, 2, 2), "{ns:?}");
        let walked: Vec<u32> = pids.iter().copied().filter(|p| !ns.unwalked.contains(p)).collect();
        visited.extend(walked);
    }
    for mut c in sleepers {
        let _ = c.kill();
        let _ = c.wait();
    }
    visited.sort_unstable();
    let mut all = pids.clone();
    all.sort_unstable();
    assert_eq!(visited, all, "each namespace once in three walks");
}
