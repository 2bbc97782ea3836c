//! The loopback server of `bench/probe/run.sh`: HTTP/1.1 keep-alive, `200` with a 2-byte
//! body, one thread per connection, TCP_NODELAY. Binds `127.0.0.1:0`, prints the port on
//! stdout, and exits by itself after `--seconds` (default 300) so a benchmark that dies
//! cannot leave it behind. Not a general server: requests must not have bodies.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut seconds = 300u64;
    while let Some(arg) = args.next() {
        if arg == "--seconds" {
            seconds = args.next().and_then(|value| value.parse().ok()).unwrap_or(seconds);
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0")?;
    println!("{}", listener.local_addr()?.port());
    std::io::stdout().flush()?;
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(seconds));
        std::process::exit(0);
    });
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let _ = stream.set_nodelay(true);
        std::thread::spawn(move || {
            let mut pending: Vec<u8> = Vec::with_capacity(4096);
            let mut chunk = [0u8; 4096];
            loop {
                while let Some(end) = pending.windows(4).position(|window| window == b"\r\n\r\n") {
                    pending.drain(..end + 4);
                    if stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").is_err() {
                        return;
                    }
                }
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(read) => pending.extend_from_slice(&chunk[..read]),
                }
            }
        });
    }
    Ok(())
}
