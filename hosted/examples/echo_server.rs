//! A TCP echo server on 127.0.0.1 — one process per connection, on
//! `smarm::net` sockets whose reads and writes park the process — and
//! clients in the same program.
//!
//! Run: `cargo run -p smarm --release --example echo_server [clients] [messages]`
//! (defaults: 1,000 clients, 100 messages each).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Instant;

use smarm::net::{TcpListener, TcpStream};

/// Accepts `connections` connections, one echo process each.
fn serve(listener: TcpListener, connections: usize) -> std::io::Result<()> {
    let mut handles = Vec::with_capacity(connections);
    for stream in listener.incoming().take(connections) {
        let stream = stream?;
        stream.set_nodelay(true)?;
        let handle = smarm::spawn(move || {
            if let Err(e) = echo(stream) {
                eprintln!("connection failed: {e}");
            }
        });
        handles.push(handle.map_err(std::io::Error::other)?);
    }
    for handle in handles {
        let _ = handle.join();
    }
    Ok(())
}

/// Echoes until the peer closes.
fn echo(mut stream: TcpStream) -> std::io::Result<()> {
    let mut buffer = [0u8; 4096];
    loop {
        let n = stream.read(&mut buffer)?;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&buffer[..n])?;
    }
}

/// Sends `messages` messages and checks every echo.
fn client(addr: SocketAddr, id: usize, messages: usize) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    for m in 0..messages {
        let message = format!("client {id} message {m}\n");
        stream.write_all(message.as_bytes())?;
        let mut echoed = vec![0u8; message.len()];
        stream.read_exact(&mut echoed)?;
        if echoed != message.as_bytes() {
            return Err(std::io::Error::other(format!("client {id}: wrong echo for message {m}")));
        }
    }
    Ok(())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let clients: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let messages: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let start = Instant::now();
    let engine = smarm::Engine::builder().workers(4).build().expect("engine starts");
    let failures = engine
        .block_on(move || {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = listener.local_addr().expect("address");
            let server = smarm::spawn(move || serve(listener, clients).expect("server")).expect("spawn");
            let rt = smarm::current_runtime().expect("in a process");
            let mut failures = 0;
            // In waves of 250 so a default `ulimit -n` holds both ends.
            for first in (0..clients).step_by(250) {
                let wave: Vec<_> = (first..(first + 250).min(clients))
                    .map(|id| rt.spawn(move || client(addr, id, messages).expect("client")).expect("spawn"))
                    .collect();
                failures += wave.into_iter().map(|h| h.join()).filter(Result::is_err).count();
            }
            server.join().expect("server");
            failures
        })
        .expect("root returns");
    let elapsed = start.elapsed();
    println!(
        "{clients} clients x {messages} messages echoed in {elapsed:?} ({:.0} round trips/s), {failures} failed",
        (clients * messages) as f64 / elapsed.as_secs_f64()
    );
    if failures > 0 {
        std::process::exit(1);
    }
}
