//! The connections walk where the kernel refuses the socket storage iterator: the kernel's TCP
//! tables are walked instead (asked for here, so this path is held on any kernel that has it).
//! Its own test binary: the network part is loaded once per process.

use proctor_bpf::net::{walk_tcp_tables, Walk, TCP_ESTABLISHED, TCP_LISTEN};
use proctor_bpf::NetTable;
use std::io::{Read, Write};

#[test]
fn the_tcp_tables_walk_sees_a_held_pair_and_its_listener() {
    walk_tcp_tables();
    let table = match NetTable::open() {
        Ok(t) => t,
        Err(why) => {
            eprintln!("SKIP: BPF per-process network: {why}");
            return;
        }
    };
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
    // (it sent them all and received them all). The payload waits for the walk.
    let mut rows = std::collections::HashMap::new();
    table.read(&mut rows);
    let row = rows.get(&me).expect("this process's row before the walk");
    assert!(row.tcp.tx.bytes >= 12_346 + 2 * 40 && row.tcp.rx.bytes >= 12_346 + 2 * 40, "{row:?}");
    assert_eq!((row.tcp.sent_bytes, row.tcp.received_bytes), (0, 0), "{row:?}");
    let mut conns = Vec::new();
    table.connections(&mut conns).expect("the walk");
    let established = conns.iter().filter(|c| c.pid == me && c.state == TCP_ESTABLISHED).count();
    assert_eq!(established, 2, "the client's end and the accepted one: {conns:?}");
    assert!(conns.iter().any(|c| c.pid == me && c.state == TCP_LISTEN), "{conns:?}");
    // This walk added both ends' payload to this process's row.
    table.read(&mut rows);
    let row = rows.get(&me).expect("this process's row");
    assert_eq!((row.tcp.sent_bytes, row.tcp.received_bytes), (12_346, 12_346), "{row:?}");
    drop((client, server));
    table.connections(&mut conns).expect("the walk");
    assert_eq!(conns.iter().filter(|c| c.pid == me && c.state == TCP_ESTABLISHED).count(), 0, "{conns:?}");
}
