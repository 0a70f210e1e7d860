//! The peers of `benches/http.sh`: the `http_hello` server of smarm's
//! examples written for tokio — the same `httparse` loop, a task per
//! connection — on the current-thread or the two-thread runtime, and
//! hyper's HTTP/1 server on the current-thread runtime. Every server
//! listens on 127.0.0.1 only and answers "Hello, world!".
//!
//! Run: `cargo run -p smarm-benches --release --example http_peer -- tokio-ct|tokio-mt2|hyper PORT`.
//! `http_peer idle N PORT` is the idle-connection holder of the script
//! instead: it opens `N` connections to the server, prints `open`, and
//! closes them all when its standard input closes.

use std::convert::Infallible;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, world!";

/// The same loop as smarm's `http_hello`: wait for the first byte, then
/// read, answer every complete request in one write, keep the rest.
async fn connection(mut stream: TcpStream) -> std::io::Result<()> {
    // As http_hello: an idle connection holds no buffer until its first
    // byte comes.
    stream.readable().await?;
    let mut buffer = vec![0u8; 4096];
    let mut filled = 0;
    let mut out = Vec::with_capacity(RESPONSE.len());
    loop {
        let n = stream.read(&mut buffer[filled..]).await?;
        if n == 0 {
            return Ok(());
        }
        filled += n;
        let mut start = 0;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 16];
            let mut request = httparse::Request::new(&mut headers);
            match request.parse(&buffer[start..filled]) {
                Ok(httparse::Status::Complete(length)) => {
                    out.extend_from_slice(RESPONSE);
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
            stream.write_all(&out).await?;
            out.clear();
        }
    }
}

async fn serve_httparse(port: u16) {
    let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(async move {
                    let _ = connection(stream).await;
                });
            }
            Err(error) => {
                eprintln!("accept: {error}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

async fn serve_hyper(port: u16) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(|_request| async {
                Ok::<_, Infallible>(
                    hyper::Response::builder()
                        .header("Content-Type", "text/plain")
                        .body(Full::new(Bytes::from_static(b"Hello, world!")))
                        .expect("a response"),
                )
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Holds `count` idle connections to `port` until stdin closes.
fn hold_idle(count: usize, port: u16) {
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(stream) => held.push(stream),
            Err(error) => {
                eprintln!("idle connection {}: {error}", held.len());
                break;
            }
        }
    }
    println!("open {}", held.len());
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {}
    drop(held);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "tokio-ct".into());
    if mode == "idle" {
        let count = args.next().map_or(10_000, |n| n.parse().expect("a count"));
        let port = args.next().map_or(8081, |p| p.parse().expect("a port"));
        hold_idle(count, port);
        return;
    }
    let port: u16 = args.next().map_or(8081, |p| p.parse().expect("a port"));
    let runtime = match mode.as_str() {
        "tokio-mt2" => tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build(),
        _ => tokio::runtime::Builder::new_current_thread().enable_all().build(),
    }
    .expect("runtime");
    println!("http_peer {mode} on http://127.0.0.1:{port}/");
    match mode.as_str() {
        "hyper" => runtime.block_on(serve_hyper(port)),
        _ => runtime.block_on(serve_httparse(port)),
    }
}
