//! proctor-http against real HTTP on loopback: a real agent (real /proc, or a fake tree),
//! the real router, and a plain HTTP/1.1 client over a TcpStream.

mod harness;
mod history_store;
mod prometheus;
mod report;
mod routes;
