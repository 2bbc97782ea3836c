//! Per-process network (issue 36) against what the processes themselves say they sent and
//! received: python peers this test starts talk over loopback (a TCP bulk transfer, datagrams,
//! HTTP requests to python's own `http.server`, a thousand connections opened and closed), each
//! printing its own byte counts, and the table must give each of them its own. Runs where the
//! kernel lets this process load BPF and attach to the cgroup2 root (root here); elsewhere a
//! SKIP line says why.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use proctor_bpf::net::{Connection, ProcNet, TCP_ESTABLISHED};
use proctor_bpf::NetTable;

fn open() -> Option<NetTable> {
    match NetTable::open() {
        Ok(t) => Some(t),
        Err(why) => {
            eprintln!("SKIP: BPF per-process network: {why}");
            None
        }
    }
}

/// The peers: each prints `ready ...` and its counts as `key=value` words, then waits for a
/// line on stdin before it exits (so its row is read while it lives).
const PEER: &str = r#"
import os, socket, sys
mode = sys.argv[1]
def done(**kv):
    print('done', ' '.join(f'{k}={v}' for k, v in kv.items()), flush=True)
    sys.stdin.readline()
if mode == 'tcp-server':
    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()
    print('ready', s.getsockname()[1], flush=True)
    a, _ = s.accept(); got = 0
    while True:
        b = a.recv(1 << 16)
        if not b: break
        got += len(b)
    a.sendall(b'k' * 1000)
    a.close()
    done(received=got, sent=1000)
elif mode == 'tcp-client':
    n = int(sys.argv[3])
    c = socket.create_connection(('127.0.0.1', int(sys.argv[2])))
    c.sendall(b'x' * n); c.shutdown(socket.SHUT_WR); got = 0
    while True:
        b = c.recv(1 << 16)
        if not b: break
        got += len(b)
    done(sent=n, received=got)
elif mode == 'udp':
    # Send one, receive it (so the receive buffer never drops one), n times, to itself through
    # a second socket: every datagram is this process's, sent and received.
    n = int(sys.argv[2])
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('127.0.0.1', 0))
    v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    got = 0
    for i in range(n):
        v.sendto(b'y' * (100 + i % 1000), u.getsockname()); got += len(u.recv(4096))
    done(sent=sum(100 + i % 1000 for i in range(n)), received=got)
elif mode == 'http-client':
    port, n = int(sys.argv[2]), int(sys.argv[3])
    req = b'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n'
    got = 0
    for i in range(n):
        c = socket.create_connection(('127.0.0.1', port)); c.sendall(req)
        while True:
            b = c.recv(1 << 16)
            if not b: break
            got += len(b)
        c.close()
    done(sent=len(req) * n, received=got)
elif mode == 'churn':
    # Holds 20 connections open (reported), then opens and closes 1,000 more.
    port = int(sys.argv[2])
    held = [socket.create_connection(('127.0.0.1', port)) for _ in range(20)]
    print('holding', len(held), flush=True)
    sys.stdin.readline()
    for c in held: c.close()
    for i in range(1000):
        socket.create_connection(('127.0.0.1', port)).close()
    done(connects=1020)
elif mode == 'sink':
    # Binds to the given address, receives until the sender closes (a minute at most).
    socket.setdefaulttimeout(60)
    s = socket.socket(); s.bind((sys.argv[2], 0)); s.listen()
    print('ready', s.getsockname()[1], flush=True)
    a, _ = s.accept(); got = 0
    while True:
        b = a.recv(1 << 16)
        if not b: break
        got += len(b)
    a.close()
    done(received=got)
elif mode == 'send':
    # Sends n bytes and says how many segments its network namespace retransmitted meanwhile
    # (the test's own namespace: nothing else sends there).
    def retrans():
        rows = [l.split() for l in open('/proc/self/net/snmp') if l.startswith('Tcp:')]
        return int(rows[1][rows[0].index('RetransSegs')])
    socket.setdefaulttimeout(60)
    before = retrans(); n = int(sys.argv[4])
    c = socket.create_connection((sys.argv[2], int(sys.argv[3])))
    c.sendall(b'x' * n); c.shutdown(socket.SHUT_WR)
    while c.recv(1 << 16): pass
    done(sent=n, retransmitted=retrans() - before)
elif mode == 'fork-send':
    # Connects, then a child it forks sends n bytes on that connection and waits until the peer
    # acknowledged them all (nothing left in its send queue); the parent says the child's pid.
    # Each closes the pipes' ends it does not use, so the child ends with its parent.
    import fcntl, struct, termios, time
    port, n = int(sys.argv[2]), int(sys.argv[3])
    c = socket.create_connection(('127.0.0.1', port))
    (up_r, up_w), (down_r, down_w) = os.pipe(), os.pipe()
    child = os.fork()
    if child == 0:
        os.close(up_r); os.close(down_w)
        c.sendall(b'z' * n)
        deadline = time.monotonic() + 60
        while struct.unpack('i', fcntl.ioctl(c.fileno(), termios.TIOCOUTQ, b'\0' * 4))[0]:
            assert time.monotonic() < deadline, 'unacknowledged after 60 s'
            time.sleep(0.001)
        os.write(up_w, b'.'); os.read(down_r, 1); os._exit(0)
    os.close(up_w); os.close(down_r)
    os.read(up_r, 1)
    print('done', f'child={child} sent={n}', flush=True)
    sys.stdin.readline()
    os.write(down_w, b'.'); os.waitpid(child, 0)
elif mode == 'acceptor':
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('127.0.0.1', 0)); s.listen(4096)
    print('ready', s.getsockname()[1], flush=True)
    n = 0
    while n < int(sys.argv[2]):
        a, _ = s.accept(); n += 1
        if n > 20: a.close()
        else: globals().setdefault('kept', []).append(a)
    done(accepts=n)
"#;

struct Peer {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Peer {
    fn start(script: &std::path::Path, args: &[&str]) -> Peer {
        let mut command = Command::new("python3");
        command.arg(script).args(args);
        Peer::spawn(command)
    }

    fn spawn(mut command: Command) -> Peer {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("python3");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        Peer { child, out }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line it prints (bounded by the peer's own end).
    fn line(&mut self) -> String {
        let mut line = String::new();
        self.out.read_line(&mut line).expect("a line from the peer");
        assert!(!line.is_empty(), "the peer {} ended early", self.pid());
        line.trim().to_string()
    }

    /// Its `done` line's counts.
    fn counts(&mut self) -> HashMap<String, u64> {
        let line = self.line();
        let rest = line.strip_prefix("done ").unwrap_or_else(|| panic!("not a done line: {line}"));
        rest.split_whitespace()
            .map(|kv| {
                let (k, v) = kv.split_once('=').expect("key=value");
                (k.to_string(), v.parse().expect("a number"))
            })
            .collect()
    }

    fn end(mut self) {
        let _ = writeln!(self.child.stdin.as_mut().expect("stdin"));
        let _ = self.child.wait();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn script() -> (tempdir::Dir, std::path::PathBuf) {
    let dir = tempdir::Dir::new();
    let path = dir.0.join("peer.py");
    std::fs::write(&path, PEER).expect("write the peer");
    (dir, path)
}

mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
            let path = std::env::temp_dir().join(format!("proctor-net-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&path).expect("a temp dir");
            Dir(path)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The process's row as the sampler reads it: after a walk, which adds the TCP payload its
/// open connections counted since the last.
fn row(table: &NetTable, pid: u32) -> ProcNet {
    let mut rows = HashMap::new();
    table.connections(&mut Vec::new()).expect("the socket walk");
    table.read(&mut rows);
    rows.get(&pid).copied().unwrap_or_else(|| panic!("no row for {pid}: {:?}", rows.keys().collect::<Vec<_>>()))
}

/// Within 0.5 % (the issue's goal for a process's bytes against what it sent or received).
fn close(what: &str, got: u64, truth: u64) {
    let off = (got as f64 - truth as f64).abs() / (truth.max(1) as f64);
    assert!(off <= 0.005, "{what}: {got} against {truth} ({:.2} % off)", off * 100.0);
}

#[test]
fn a_tcp_transfer_and_datagrams_are_each_process_own() {
    let Some(table) = open() else { return };
    let (_dir, peer) = script();
    let mut server = Peer::start(&peer, &["tcp-server"]);
    let port = server.line().split_whitespace().nth(1).expect("a port").to_string();
    let mut client = Peer::start(&peer, &["tcp-client", &port, "4000000"]);
    let c = client.counts();
    let s = server.counts();
    let (cr, sr) = (row(&table, client.pid()), row(&table, server.pid()));
    close("the client's TCP payload sent", cr.tcp.sent_bytes, c["sent"]);
    close("the client's TCP payload received", cr.tcp.received_bytes, c["received"]);
    close("the server's TCP payload received", sr.tcp.received_bytes, s["received"]);
    close("the server's TCP payload sent", sr.tcp.sent_bytes, s["sent"]);
    assert_eq!((cr.connects, cr.accepts, sr.connects, sr.accepts), (1, 0, 0, 1), "{cr:?} {sr:?}");
    // On the wire: the payload and every segment's headers, the ACKs too: at least 20 IP + 20
    // TCP, at most 20 + 60 (TCP's largest header: timestamps and SACK blocks, which ACKs carry
    // after a loss). Loopback drops a segment only when its backlog is full (a busy machine):
    // the client then sends it again, which its row counts (a retransmitted segment on lo is
    // one buffer of at most 64 KiB); a segment resent because its ACK came late (not dropped)
    // reaches the server twice.
    let resent = cr.retransmits * 65_536;
    for (who, r, payload) in [("client", cr, c["sent"]), ("server", sr, s["received"])] {
        let (wire, packets) =
            if who == "client" { (r.tcp.tx.bytes, r.tcp.tx.packets) } else { (r.tcp.rx.bytes, r.tcp.rx.packets) };
        assert!(
            wire >= payload + 40 * packets && wire <= payload + 80 * packets + resent,
            "{who}: {wire} bytes in {packets} packets for {payload} ({} segments retransmitted)",
            cr.retransmits
        );
    }
    if cr.retransmits + sr.retransmits == 0 {
        // What one sent the other received, packet for packet.
        assert_eq!(cr.tcp.tx, sr.tcp.rx, "{cr:?} {sr:?}");
        assert_eq!(
            sr.tcp.tx.bytes + 60,
            cr.tcp.rx.bytes,
            "the server's segments and its handshake answer (unowned) reached the client: {cr:?} {sr:?}"
        );
    } else {
        // A retransmit follows a drop, or none: a tail loss probe or a timeout that fired early
        // on a busy machine sends again a segment that arrives twice (it failed here with one
        // retransmit and 74 segments sent and received). Either way no more went missing than
        // was sent again.
        eprintln!("loopback sent segments again (a busy machine): {cr:?} {sr:?}");
        let missing = cr.tcp.tx.packets.checked_sub(sr.tcp.rx.packets);
        assert!(
            missing.is_some_and(|m| m <= cr.retransmits),
            "a segment not received is one sent again, and none arrives unsent: {cr:?} {sr:?}"
        );
    }
    client.end();
    server.end();

    let mut udp = Peer::start(&peer, &["udp", "3000"]);
    let u = udp.counts();
    let ur = row(&table, udp.pid());
    close("datagram payload sent", ur.udp.sent_bytes, u["sent"]);
    close("datagram payload received", ur.udp.received_bytes, u["received"]);
    assert_eq!((ur.udp.tx.packets, ur.udp.rx.packets), (3000, 3000), "{ur:?}");
    // 20 IP + 8 UDP header bytes a datagram.
    assert_eq!(ur.udp.tx.bytes, u["sent"] + 28 * 3000, "{ur:?}");
    assert_eq!(ur.tcp, Default::default(), "{ur:?}");
    udp.end();
}

#[test]
fn http_requests_to_a_real_server_count_for_client_and_server() {
    let Some(table) = open() else { return };
    let (dir, peer) = script();
    std::fs::write(dir.0.join("index.html"), "x".repeat(5000)).expect("a page");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("its address").port().to_string();
    drop(listener);
    let mut command = Command::new("python3");
    command.args(["-m", "http.server", "--bind", "127.0.0.1", &port]).current_dir(&dir.0).stderr(Stdio::null());
    let server = Peer::spawn(command);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err() {
        assert!(Instant::now() < deadline, "http.server did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = row(&table, server.pid());
    let mut client = Peer::start(&peer, &["http-client", &port, "200"]);
    let c = client.counts();
    let (cr, sr) = (row(&table, client.pid()), row(&table, server.pid()));
    close("the client's request bytes", cr.tcp.sent_bytes, c["sent"]);
    close("the client's response bytes", cr.tcp.received_bytes, c["received"]);
    close("the server's request bytes", sr.tcp.received_bytes - before.tcp.received_bytes, c["sent"]);
    close("the server's response bytes", sr.tcp.sent_bytes - before.tcp.sent_bytes, c["received"]);
    assert_eq!(cr.connects, 200, "{cr:?}");
    assert_eq!(sr.accepts - before.accepts, 200, "{sr:?}");
    client.end();
}

/// A connection made by one process and used by another (a child it forked, as a pre-forking
/// server's workers use what their parent accepted): what the child sent is the child's, the
/// process holding the socket as the segments leave, not the one that made it.
#[test]
fn a_connection_used_by_a_forked_child_counts_for_the_child() {
    let Some(table) = open() else { return };
    let (_dir, peer) = script();
    let mut sink = Peer::start(&peer, &["sink", "127.0.0.1"]);
    let port = sink.line().split_whitespace().nth(1).expect("a port").to_string();
    let mut parent = Peer::start(&peer, &["fork-send", &port, "3000000"]);
    let f = parent.counts();
    let child = u32::try_from(f["child"]).expect("a pid");
    let (pr, cr) = (row(&table, parent.pid()), row(&table, child));
    close("the child's TCP payload sent", cr.tcp.sent_bytes, f["sent"]);
    assert_eq!(pr.tcp.sent_bytes, 0, "the parent sent no payload: {pr:?}");
    assert_eq!((pr.connects, cr.connects), (1, 0), "the parent connected: {pr:?} {cr:?}");
    assert!(cr.tcp.tx.packets > 0 && cr.tcp.tx.bytes > f["sent"], "the child's segments: {cr:?}");
    parent.end();
    sink.end();
}

#[test]
fn a_thousand_connections_are_counted_and_the_walk_sees_those_held() {
    let Some(table) = open() else { return };
    let (_dir, peer) = script();
    let mut acceptor = Peer::start(&peer, &["acceptor", "1020"]);
    let port = acceptor.line().split_whitespace().nth(1).expect("a port").to_string();
    let mut churn = Peer::start(&peer, &["churn", &port]);
    assert_eq!(churn.line(), "holding 20");
    let mut conns: Vec<Connection> = Vec::new();
    let established =
        |conns: &[Connection], pid: u32| conns.iter().filter(|c| c.pid == pid && c.state == TCP_ESTABLISHED).count();
    // The acceptor may not have accepted all 20 yet: its side is counted once it has.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        table.connections(&mut conns).expect("the socket walk");
        if established(&conns, acceptor.pid()) >= 20 || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(established(&conns, churn.pid()), 20, "{conns:?}");
    assert!(
        established(&conns, acceptor.pid()) >= 20,
        "the accepted connections are the acceptor's (cloned from its listener)"
    );
    assert!(conns.iter().any(|c| c.pid == acceptor.pid() && c.state == proctor_bpf::net::TCP_LISTEN));
    assert!(conns.iter().filter(|c| c.pid == churn.pid()).all(|c| c.srtt_us > 0), "loopback still has a round trip");
    writeln!(churn.child.stdin.as_mut().expect("stdin")).expect("go on");
    let n = churn.counts();
    let a = acceptor.counts();
    let (cr, ar) = (row(&table, churn.pid()), row(&table, acceptor.pid()));
    assert_eq!(cr.connects, n["connects"], "{cr:?}");
    assert_eq!(ar.accepts, a["accepts"], "{ar:?}");
    table.connections(&mut conns).expect("the socket walk");
    assert_eq!(established(&conns, churn.pid()), 0, "every connection closed: {conns:?}");
    churn.end();
    acceptor.end();
}

#[test]
fn rows_of_ended_processes_are_forgotten() {
    let Some(table) = open() else { return };
    let (_dir, peer) = script();
    let mut udp = Peer::start(&peer, &["udp", "10"]);
    udp.counts();
    let pid = udp.pid();
    assert!(row(&table, pid).udp.sent_bytes > 0);
    udp.end();
    assert_eq!(table.forget([pid]), 1);
    let mut rows = HashMap::new();
    table.read(&mut rows);
    assert!(!rows.contains_key(&pid));
    assert_eq!(table.forget([pid]), 0, "forgotten once");
}

/// Two network namespaces this test makes, joined by a veth pair with 192.0.2.1 and .2 (a
/// documentation range that exists only inside them), one losing a fifth of what it sends;
/// removed when dropped.
struct Lossy {
    a: String,
    b: String,
    /// How the loss is made: `tc netem` where the kernel has it, else an nftables rule that
    /// drops a random fifth of the segments arriving (both lose real segments on the wire).
    how: &'static str,
}

fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0]).args(&args[1..]).output().map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl Lossy {
    fn make() -> Result<Lossy, String> {
        let id = std::process::id();
        // Made first, so whatever fails below still removes what was made.
        let mut me = Lossy { a: format!("proctor-net-{id}-a"), b: format!("proctor-net-{id}-b"), how: "" };
        let (a, b) = (me.a.clone(), me.b.clone());
        let (a, b) = (a.as_str(), b.as_str());
        run(&["ip", "netns", "add", a])?;
        run(&["ip", "netns", "add", b])?;
        let (va, vb) = (format!("pn{id}a"), format!("pn{id}b"));
        run(&["ip", "link", "add", &va, "netns", a, "type", "veth", "peer", "name", &vb, "netns", b])?;
        run(&["ip", "-n", a, "addr", "add", "192.0.2.1/30", "dev", &va])?;
        run(&["ip", "-n", b, "addr", "add", "192.0.2.2/30", "dev", &vb])?;
        run(&["ip", "-n", a, "link", "set", &va, "up"])?;
        run(&["ip", "-n", b, "link", "set", &vb, "up"])?;
        let netem = run(&["ip", "netns", "exec", a, "tc", "qdisc", "add", "dev", &va, "root", "netem", "loss", "20%"]);
        me.how = match netem {
            Ok(()) => "tc netem loss 20% on the sender's veth",
            Err(netem) => {
                let nft = |rule: &str| run(&["ip", "netns", "exec", b, "nft", rule]);
                nft("add table inet proctor_test")
                    .and_then(|()| {
                        nft("add chain inet proctor_test in { type filter hook input priority 0; policy accept; }")
                    })
                    .and_then(|()| nft("add rule inet proctor_test in meta l4proto tcp numgen random mod 5 0 drop"))
                    .map_err(|nft| format!("no way to lose packets here: {netem}; {nft}"))?;
                "nftables dropping a random fifth of the segments the receiver's veth takes in (this kernel has no netem)"
            }
        };
        Ok(me)
    }
}

impl Drop for Lossy {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth pair, and with it the other.
        let _ = run(&["ip", "netns", "del", &self.a]);
        let _ = run(&["ip", "netns", "del", &self.b]);
    }
}

/// A bulk transfer over a link that loses a fifth of its segments: the sender's row has the
/// retransmitted segments, as many as its namespace's RetransSegs (one retransmitted buffer of
/// a large send holds many), the receiver's none; payload is still to the byte.
#[test]
fn a_lossy_link_shows_as_the_senders_retransmits() {
    let Some(table) = open() else { return };
    let lossy = match Lossy::make() {
        Ok(l) => l,
        Err(why) => {
            eprintln!("SKIP: retransmits on a lossy veth: {why}");
            return;
        }
    };
    eprintln!("lossy link: {}", lossy.how);
    let (_dir, peer) = script();
    let in_ns = |ns: &str, args: &[&str]| {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", ns, "python3"]).arg(&peer).args(args);
        Peer::spawn(command)
    };
    let mut sink = in_ns(&lossy.b, &["sink", "192.0.2.2"]);
    let port = sink.line().split_whitespace().nth(1).expect("a port").to_string();
    let mut sender = in_ns(&lossy.a, &["send", "192.0.2.2", &port, "2000000"]);
    let sent = sender.counts();
    let got = sink.counts();
    assert_eq!(got["received"], 2_000_000, "TCP delivered it all");
    let (sr, kr) = (row(&table, sender.pid()), row(&table, sink.pid()));
    close("the sender's payload", sr.tcp.sent_bytes, sent["sent"]);
    close("the receiver's payload", kr.tcp.received_bytes, got["received"]);
    eprintln!(
        "the sender's row: {} segments retransmitted; its namespace's RetransSegs: {}",
        sr.retransmits, sent["retransmitted"]
    );
    // Segment for segment what the kernel's own counter says (netstat's "segments
    // retransmitted"): nothing else sends in the sender's namespace. (A retransmit refused for
    // memory would be in RetransSegs and not in the row: it did not go out.)
    assert!(sr.retransmits >= 1, "{sr:?}");
    assert_eq!(sr.retransmits, sent["retransmitted"], "the sender's retransmits against its namespace's RetransSegs");
    assert_eq!(kr.retransmits, 0, "{kr:?}");
    sender.end();
    sink.end();
}

/// The table read in batches (one system call per batch, how the sampler reads it) has the
/// rows one-at-a-time iteration has, whatever the batch size: each of the test's peers' rows
/// is in both, equal (the peers have ended their traffic).
#[test]
fn a_batched_read_has_every_row_an_iteration_has() {
    let Some(table) = open() else { return };
    let (_dir, peer) = script();
    let mut peers: Vec<Peer> = (0..6).map(|_| Peer::start(&peer, &["udp", "50"])).collect();
    for p in &mut peers {
        p.counts();
    }
    // Their sockets' counts reach their rows at a walk.
    table.connections(&mut Vec::new()).expect("the socket walk");
    for batch in [1, 4, 256] {
        let (batched, each) = table.read_both_ways(batch);
        let Some(batched) = batched else {
            eprintln!("SKIP: batched reads of the network table: this kernel has no BPF_MAP_LOOKUP_BATCH");
            return;
        };
        for p in &peers {
            let pid = p.pid();
            assert!(each.contains_key(&pid), "iteration lacks {pid}");
            assert_eq!(batched.get(&pid), each.get(&pid), "batch of {batch}, pid {pid}");
        }
        assert!(batched.len() >= peers.len(), "batch of {batch}: {} rows", batched.len());
    }
    for p in peers {
        p.end();
    }
}

/// Each CPU counts its packets in a slot of its own of the totals (an array the reader maps,
/// one slot per possible CPU): datagrams sent from a thread held on each CPU in turn are in
/// that CPU's slot, and the sum is every slot's. With one slot (the array's length left as the
/// object has it) the second CPU's datagrams are counted nowhere.
#[test]
fn each_cpu_counts_its_packets_in_its_own_slot_of_the_totals() {
    let Some(table) = open() else { return };
    let allowed = allowed_cpus();
    if allowed.len() < 2 {
        eprintln!("SKIP: a second CPU's slot of the totals: this test may run on {} CPU only", allowed.len());
    }
    let receiver = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let to = receiver.local_addr().expect("its address");
    const DATAGRAMS: u64 = 300;
    for &cpu in &allowed {
        pin_to(&[cpu]);
        let before = table.totals_by_cpu();
        assert!(cpu < before.len(), "CPU {cpu} has no slot: {} slots", before.len());
        for _ in 0..DATAGRAMS {
            sender.send_to(&[0u8; 64], to).expect("send");
        }
        let after = table.totals_by_cpu();
        // The device's queue runs in the sender's call, on its CPU; others' traffic adds more.
        let counted = after[cpu].tx.packets - before[cpu].tx.packets;
        assert!(counted >= DATAGRAMS, "CPU {cpu}'s slot counted {counted} of the {DATAGRAMS} datagrams it sent");
        let sum: u64 = after.iter().map(|t| t.tx.packets).sum();
        let total = table.totals().tx.packets;
        assert!(total >= sum, "the totals ({total}) are the slots' sum (then {sum})");
    }
    pin_to(&allowed);
}

/// The CPUs this thread may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t filled by the kernel for this thread.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) }, 0);
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// Holds this thread to these CPUs.
fn pin_to(cpus: &[usize]) {
    // SAFETY: a cpu_set_t built here, passed by reference for this thread.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    assert_eq!(unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) }, 0, "pinning to {cpus:?}");
}
