//! The WebSocket probe against loopback servers made here with tungstenite's server side, one
//! behaviour each: a plain echo, an echo that pings and fragments its answer into binary
//! pieces, one that answers pairs out of order, one that never answers, one that closes after
//! three, one that refuses the upgrade, one that greets first, a terminal-like one speaking
//! Jupyter's protocol and echoing keys in lumps, and a wss echo behind a private CA.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proctor_probe::report::{self, ReportConfig};
use proctor_probe::schedule::Limit;
use proctor_probe::tls::{parse_pem_certificates, TlsConfig, Trust};
use proctor_probe::ws::{self, Framing, Payload, WsConfig, WsPacing, WsSummary};
use proctor_probe::{ErrorClass, RequestRecord};
use tungstenite::protocol::frame::coding::{Data, OpCode};
use tungstenite::protocol::frame::Frame;
use tungstenite::protocol::CloseFrame;
use tungstenite::{Bytes, Message};

use crate::pki::Pki;

#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    Echo,
    PingAndFragment,
    Reversed,
    Silent,
    CloseAfter3,
    Refuse,
    Greet,
    Terminal,
    PingFlood,
}

/// Serves every connection on its own thread with `behaviour`, until the test ends.
fn server(behaviour: Behaviour) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream, behaviour));
        }
    });
    port
}

fn serve(mut stream: TcpStream, behaviour: Behaviour) {
    let _ = stream.set_nodelay(true);
    if behaviour == Behaviour::Refuse {
        let mut head = [0u8; 4096];
        let _ = stream.read(&mut head);
        let _ = stream.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n\r\nforbidden");
        return;
    }
    let Ok(socket) = tungstenite::accept(stream) else { return };
    if behaviour == Behaviour::PingFlood {
        return ping_flood(socket);
    }
    talk(socket, behaviour);
}

/// Pings as fast as the socket takes them and never reads (so never takes a pong), for at most
/// 60 s or until the client has gone.
fn ping_flood(mut socket: tungstenite::WebSocket<TcpStream>) {
    let _ = socket.get_mut().set_write_timeout(Some(Duration::from_secs(5)));
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        if socket.send(Message::Ping(Bytes::from_static(b"still there?"))).is_err() {
            return;
        }
    }
}

fn talk<S: Read + Write>(mut socket: tungstenite::WebSocket<S>, behaviour: Behaviour) {
    let mut held: Option<Message> = None;
    let mut answered = 0;
    if behaviour == Behaviour::Greet {
        let _ = socket.send(Message::text("hello, client"));
    }
    if behaviour == Behaviour::Terminal {
        let _ = socket.send(Message::text(r#"["setup", {}]"#));
        let _ = socket.send(Message::text(r#"["stdout", "user@host:~$ "]"#));
    }
    let mut lump = String::new();
    loop {
        let message = match socket.read() {
            Ok(message @ (Message::Text(_) | Message::Binary(_))) => message,
            Ok(_) => continue,
            Err(_) => return,
        };
        let sent = match behaviour {
            Behaviour::Echo | Behaviour::Greet => socket.send(message),
            Behaviour::PingAndFragment => {
                let data = message.into_data();
                let third = data.len() / 3;
                let _ = socket.send(Message::Ping(Bytes::from_static(b"are you there")));
                let pieces = [
                    Frame::message(data.slice(..third), OpCode::Data(Data::Binary), false),
                    Frame::message(data.slice(third..2 * third), OpCode::Data(Data::Continue), false),
                    Frame::message(data.slice(2 * third..), OpCode::Data(Data::Continue), true),
                ];
                pieces.into_iter().try_for_each(|piece| socket.send(Message::Frame(piece)))
            }
            Behaviour::Reversed => match held.take() {
                None => {
                    held = Some(message);
                    Ok(())
                }
                Some(first) => socket.send(message).and_then(|()| socket.send(first)),
            },
            Behaviour::Silent => Ok(()),
            Behaviour::CloseAfter3 => {
                answered += 1;
                if answered > 3 {
                    let frame = CloseFrame { code: 1001.into(), reason: "going away".into() };
                    let _ = socket.close(Some(frame));
                    let _ = socket.flush();
                    std::thread::sleep(Duration::from_millis(200));
                    return;
                }
                socket.send(message)
            }
            Behaviour::Terminal => {
                // Echo what came in `["stdin", k]` as `["stdout", …]`, two keys per answer.
                let text = message.into_text().map(|text| text.to_string()).unwrap_or_default();
                let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                if value[0] == "stdin" {
                    lump.push_str(value[1].as_str().unwrap_or(""));
                }
                if lump.chars().count() >= 2 {
                    let out = serde_json::json!(["stdout", std::mem::take(&mut lump)]).to_string();
                    socket.send(Message::text(out))
                } else {
                    Ok(())
                }
            }
            Behaviour::Refuse | Behaviour::PingFlood => unreachable!("answered before talking"),
        };
        if sent.is_err() {
            return;
        }
    }
}

fn config(url: &str, pacing: WsPacing, limit: Limit, payload: Payload, timeout: Duration) -> WsConfig {
    WsConfig {
        target: proctor_probe::url::parse_ws(url).expect("ws url"),
        headers: vec![("X-Test".into(), "1".into())],
        tls: None,
        timeout,
        pacing,
        limit,
        payload,
        framing: Framing::Plain,
        run_id: "ws-test".into(),
        url: Some(url.to_string()),
    }
}

fn count(n: u64) -> Limit {
    Limit { count: Some(n), duration: Some(Duration::from_secs(30)) }
}

fn run(config: WsConfig) -> (Vec<RequestRecord>, WsSummary) {
    let (handle, counters) = ws::start(config).expect("start");
    let records: Vec<RequestRecord> = handle.records.iter().collect();
    handle.join();
    (records, counters.summary())
}

fn errors(records: &[RequestRecord], class: ErrorClass) -> usize {
    records.iter().filter(|record| record.error == Some(class)).count()
}

#[test]
fn closed_loop_echo_times_every_message_and_the_upgrade() {
    let port = server(Behaviour::Echo);
    let (records, summary) = run(config(
        &format!("ws://127.0.0.1:{port}/echo"),
        WsPacing::Closed,
        count(20),
        Payload::Numbered,
        Duration::from_secs(5),
    ));
    assert_eq!(records.len(), 20);
    assert!(records.iter().all(|record| record.error.is_none() && record.status == Some(101)), "{records:?}");
    assert!(records.iter().all(|record| record.url.as_deref() == Some(format!("ws://127.0.0.1:{port}/echo").as_str())));
    let seqs: Vec<u64> = records.iter().map(|record| record.seq).collect();
    assert_eq!(seqs, (0..20).collect::<Vec<_>>());
    let first = &records[0];
    assert!(!first.reused && first.phases.connect_ns.is_some() && first.phases.upgrade_ns.is_some(), "{first:?}");
    assert!(records[1..].iter().all(|record| record.reused && record.phases.upgrade_ns.is_none()));
    assert!(records.iter().all(|record| record.phases.wait_ns.is_some() && record.phases.write_ns.is_some()));
    assert_eq!(summary.connections, 1);
    let report = report::build(&records, &ReportConfig::default());
    assert_eq!((report.ok, report.connections), (20, 1));
    assert!(report.phases.iter().any(|phase| phase.name == "upgrade" && phase.count == 1), "{:?}", report.phases);
}

#[test]
fn open_loop_measures_from_the_intended_send_time() {
    let port = server(Behaviour::Echo);
    let started = Instant::now();
    let (records, _) = run(config(
        &format!("ws://127.0.0.1:{port}/"),
        WsPacing::Open { rate_per_second: 50.0 },
        count(25),
        Payload::Numbered,
        Duration::from_secs(5),
    ));
    assert_eq!(records.len(), 25);
    assert!(records.iter().all(|record| record.error.is_none() && record.phases.queue_ns.is_some()));
    // 25 messages at 50/s are due over 0.48 s: the schedule was kept, not run back to back.
    let span = records.last().expect("records").sent_unix_ns - records[0].sent_unix_ns;
    assert!((470_000_000..=490_000_000).contains(&span), "intended sends span {span} ns");
    assert!(started.elapsed() >= Duration::from_millis(480));
}

#[test]
fn pings_fragments_and_binary_echoes_are_handled() {
    let port = server(Behaviour::PingAndFragment);
    let (records, summary) = run(config(
        &format!("ws://127.0.0.1:{port}/"),
        WsPacing::Closed,
        count(10),
        Payload::Numbered,
        Duration::from_secs(5),
    ));
    assert_eq!(records.len(), 10);
    assert!(records.iter().all(|record| record.error.is_none()), "{records:?}");
    assert_eq!(summary.pings, 10);
    assert_eq!(summary.unmatched, 0);
}

#[test]
fn out_of_order_echoes_are_matched_by_content() {
    let port = server(Behaviour::Reversed);
    let (records, summary) = run(config(
        &format!("ws://127.0.0.1:{port}/"),
        WsPacing::Open { rate_per_second: 100.0 },
        count(10),
        Payload::Numbered,
        Duration::from_secs(5),
    ));
    assert_eq!(records.len(), 10);
    assert!(records.iter().all(|record| record.error.is_none()), "{records:?}");
    // Pairs come back second first: the second message's record arrives before the first's.
    let seqs: Vec<u64> = records.iter().map(|record| record.seq).collect();
    assert_eq!(&seqs[..4], &[1, 0, 3, 2], "{seqs:?}");
    assert_eq!(summary.unmatched, 0);
}

/// A server that floods pings and never reads (issue 33 item 11): the run still ends with each
/// message timed out, and the pings were answered as they came (before, pings kept the reader
/// from ever looking at the timeouts: `-n 5 --timeout 3s` never ended, and the pongs piled up
/// unsent without bound).
#[test]
fn a_ping_flood_neither_holds_the_run_nor_its_timeouts() {
    let port = server(Behaviour::PingFlood);
    let url = format!("ws://127.0.0.1:{port}/");
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(run(config(&url, WsPacing::Closed, count(5), Payload::Numbered, Duration::from_millis(300))));
    });
    let (records, summary) = finished.recv_timeout(Duration::from_secs(60)).expect("the run ended within 60 s");
    assert_eq!(records.len(), 5, "{records:?}");
    assert!(records.iter().all(|record| record.error.is_some()), "nothing is echoed: {records:?}");
    assert!(summary.pings > 0, "pings were read: {summary:?}");
}

#[test]
fn a_server_that_never_echoes_times_each_message_out() {
    let port = server(Behaviour::Silent);
    let (records, _) = run(config(
        &format!("ws://127.0.0.1:{port}/"),
        WsPacing::Closed,
        count(3),
        Payload::Numbered,
        Duration::from_millis(200),
    ));
    assert_eq!(records.len(), 3);
    assert_eq!(errors(&records, ErrorClass::Timeout), 3, "{records:?}");
    assert!(records.iter().all(|record| record.total_ns >= 200_000_000));
    let report = report::build(&records, &ReportConfig::default());
    assert_eq!(report.none_succeeded().as_deref(), Some("no request succeeded (3 sent): 3 timeout"));
}

#[test]
fn a_close_frame_fails_what_is_outstanding_and_the_next_message_reconnects() {
    let port = server(Behaviour::CloseAfter3);
    let (records, summary) = run(config(
        &format!("ws://127.0.0.1:{port}/"),
        WsPacing::Closed,
        count(6),
        Payload::Numbered,
        Duration::from_secs(5),
    ));
    assert_eq!(records.len(), 6);
    let failed: Vec<&RequestRecord> = records.iter().filter(|record| record.error.is_some()).collect();
    assert_eq!(failed.len(), 1, "{records:?}");
    assert_eq!((failed[0].seq, failed[0].error), (3, Some(ErrorClass::Io)));
    let detail = failed[0].error_detail.as_deref().unwrap_or("");
    assert!(detail.contains("code 1001: going away"), "{detail}");
    // The fifth message opened a new connection: its record has the connection's phases.
    assert!(!records[4].reused && records[4].phases.upgrade_ns.is_some(), "{:?}", records[4]);
    assert_eq!((summary.connections, summary.closes), (2, 1));
}

#[test]
fn a_refused_upgrade_is_a_protocol_error_with_its_status() {
    let port = server(Behaviour::Refuse);
    let (records, summary) = run(config(
        &format!("ws://127.0.0.1:{port}/"),
        WsPacing::Closed,
        count(2),
        Payload::Numbered,
        Duration::from_secs(5),
    ));
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|record| record.error == Some(ErrorClass::Protocol) && record.status == Some(403)));
    let detail = records[0].error_detail.as_deref().unwrap_or("");
    assert!(detail.contains("HTTP 403 Forbidden, not 101"), "{detail}");
    assert_eq!(summary.connections, 0);
}

#[test]
fn a_greeting_is_counted_not_matched() {
    let port = server(Behaviour::Greet);
    let (records, summary) = run(config(
        &format!("ws://127.0.0.1:{port}/"),
        WsPacing::Closed,
        count(5),
        Payload::Numbered,
        Duration::from_secs(5),
    ));
    assert_eq!(records.iter().filter(|record| record.error.is_none()).count(), 5, "{records:?}");
    assert_eq!(summary.unmatched, 1);
}

#[test]
fn held_keys_in_a_jupyter_terminal_are_matched_in_lumps() {
    let port = server(Behaviour::Terminal);
    let mut config = config(
        &format!("ws://127.0.0.1:{port}/terminals/websocket/1"),
        WsPacing::Open { rate_per_second: 40.0 },
        count(12),
        Payload::Key("j".into()),
        Duration::from_secs(5),
    );
    config.framing = Framing::JupyterTerminal;
    let (records, summary) = run(config);
    assert_eq!(records.len(), 12);
    assert!(records.iter().all(|record| record.error.is_none()), "{records:?}");
    // Keys come back two at a time: every odd keystroke waited for the next one (25 ms at 40/s).
    let waits: Vec<u64> = records.iter().map(|record| record.total_ns).collect();
    for pair in waits.chunks(2) {
        assert!(pair[0] >= 20_000_000, "the first key of a lump waits for the second: {waits:?}");
    }
    // The prompt and `setup` were drained before the clock started, and never matched.
    assert_eq!(summary.unmatched, 0);
}

#[test]
fn wss_trusts_a_private_ca() {
    let pki = Pki::generate("proctor ws test CA");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let server_config = Arc::clone(&pki.server);
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let server_config = Arc::clone(&server_config);
            std::thread::spawn(move || {
                let Ok(session) = rustls::ServerConnection::new(server_config) else { return };
                let stream = rustls::StreamOwned::new(session, tcp);
                if let Ok(socket) = tungstenite::accept(stream) {
                    talk(socket, Behaviour::Echo);
                }
            });
        }
    });
    let certificates = parse_pem_certificates(pki.ca_pem.as_bytes(), "ca.pem").expect("pem");
    let mut config = config(
        &format!("wss://localhost:{port}/"),
        WsPacing::Closed,
        count(5),
        Payload::Numbered,
        Duration::from_secs(5),
    );
    config.tls = Some(TlsConfig::new(Trust::Roots { certificates, source: "ca.pem".into() }).expect("tls"));
    let (records, _) = run(config);
    assert_eq!(records.len(), 5);
    assert!(records.iter().all(|record| record.error.is_none() && record.tls_verified == Some(true)), "{records:?}");
    assert!(records[0].phases.tls_ns.is_some());
}
