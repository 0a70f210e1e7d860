//! A minimal HTTP/1.1 keep-alive server on `smarm::net`: a process per
//! connection, `httparse` for the requests, "Hello, world!" for every one.
//!
//! An idle connection costs its process (the top page of a stack, a slot)
//! and no buffer: the read buffer is allocated when the first byte comes.
//!
//! Connections are spread over the workers: the accept loop hands each
//! accepted stream to `smarm::current_runtime().spawn(..)` — the runtime
//! handle's spawn, which places round-robin over the workers — rather than
//! to `smarm::spawn`, which keeps the new process on the caller's worker
//! (so every connection would sit on the acceptor's worker and the others
//! would idle).
//!
//! Run: `cargo run -p smarm --release --example http_hello -- [workers] [port]`
//! (defaults: every CPU, port 8080; listens on 127.0.0.1 only) and point a
//! load generator at it (`wrk -c 100 -d 10 http://127.0.0.1:8080/`); or
//! `cargo run -p smarm --example http_hello -- --selftest [clients] [requests]`
//! to serve on a free port, send `requests` keep-alive requests from each
//! of `clients` client processes, check every answer and exit.

use std::io::{Read, Write};
use std::net::SocketAddr;

use smarm::net::{TcpListener, TcpStream};

const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, world!";

/// Serves one connection until the peer closes or sends garbage; returns
/// how many requests it answered.
fn connection(mut stream: TcpStream) -> std::io::Result<u64> {
    // An idle connection holds no buffer: wait for its first byte (a peek
    // parks the process), then allocate.
    if stream.peek(&mut [0u8; 1])? == 0 {
        return Ok(0);
    }
    let mut buffer = vec![0u8; 4096];
    let mut filled = 0;
    let mut out = Vec::with_capacity(RESPONSE.len());
    let mut answered = 0;
    loop {
        let n = stream.read(&mut buffer[filled..])?;
        if n == 0 {
            return Ok(answered);
        }
        filled += n;
        // Every complete request in the buffer (pipelining), answered in one write.
        let mut start = 0;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 16];
            let mut request = httparse::Request::new(&mut headers);
            match request.parse(&buffer[start..filled]) {
                Ok(httparse::Status::Complete(length)) => {
                    out.extend_from_slice(RESPONSE);
                    answered += 1;
                    start += length;
                }
                Ok(httparse::Status::Partial) => break,
                Err(error) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, error)),
            }
        }
        buffer.copy_within(start..filled, 0);
        filled -= start;
        if filled == buffer.len() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "request headers too large"));
        }
        if !out.is_empty() {
            stream.write_all(&out)?;
            out.clear();
        }
    }
}

/// Accepts connections (forever, or `limit` of them), one process each,
/// placed round-robin over the workers.
fn serve(listener: TcpListener, limit: Option<usize>) -> std::io::Result<u64> {
    let runtime = smarm::current_runtime().ok_or_else(|| std::io::Error::other("not in a process"))?;
    let mut handles = Vec::new();
    let mut accepted = 0;
    while limit.is_none_or(|limit| accepted < limit) {
        let (stream, _) = match listener.accept() {
            Ok(accepted) => accepted,
            // Out of descriptors (or another transient error): the listener
            // works again once connections close.
            Err(error) => {
                eprintln!("accept: {error}");
                smarm::sleep(std::time::Duration::from_millis(10));
                continue;
            }
        };
        accepted += 1;
        let _ = stream.set_nodelay(true);
        let handle =
            runtime.spawn(move || connection(stream).unwrap_or_default()).map_err(std::io::Error::other)?;
        if limit.is_some() {
            handles.push(handle);
        }
    }
    Ok(handles.into_iter().map(|handle| handle.join().unwrap_or(0)).sum())
}

/// A self-test client: `requests` keep-alive requests, each answer checked.
fn client(address: SocketAddr, requests: usize) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(address)?;
    let mut answer = vec![0u8; RESPONSE.len()];
    for _ in 0..requests {
        stream.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")?;
        stream.read_exact(&mut answer)?;
        if answer != RESPONSE {
            return Err(std::io::Error::other("wrong answer"));
        }
    }
    Ok(())
}

fn selftest(clients: usize, requests: usize) {
    let engine = smarm::Engine::builder().workers(2).build().expect("engine starts");
    let answered = engine
        .block_on(move || {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let address = listener.local_addr().expect("address");
            let server = smarm::spawn(move || serve(listener, Some(clients))).expect("spawn the server");
            let runtime = smarm::current_runtime().expect("in a process");
            let handles: Vec<_> = (0..clients)
                .map(|_| runtime.spawn(move || client(address, requests)).expect("spawn a client"))
                .collect();
            for handle in handles {
                handle.join().expect("client runs").expect("client checks");
            }
            server.join().expect("server runs").expect("server serves")
        })
        .expect("root returns");
    assert_eq!(answered, (clients * requests) as u64);
    println!("{clients} clients x {requests} requests answered");
}

fn main() {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    if first.as_deref() == Some("--selftest") {
        let clients = args.next().map_or(10, |n| n.parse().expect("a number of clients"));
        let requests = args.next().map_or(100, |n| n.parse().expect("a number of requests"));
        selftest(clients, requests);
        return;
    }
    let workers = first.map_or_else(smarm::available_cpus, |n| n.parse().expect("a number of workers"));
    let port: u16 = args.next().map_or(8080, |n| n.parse().expect("a port"));
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind 127.0.0.1");
    println!("http_hello: {workers} workers on http://{}/", listener.local_addr().expect("address"));
    let engine = smarm::Engine::builder().workers(workers).build().expect("engine starts");
    engine.block_on(move || serve(listener, None).expect("serve")).expect("root returns");
}
