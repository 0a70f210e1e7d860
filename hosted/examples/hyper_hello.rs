//! hyper serving HTTP/1.1 inside smarm processes: one process per
//! connection, each running hyper's connection future with
//! `smarm::block_on` over a `smarm::net::TcpStream` (tokio's io traits,
//! the `tokio-io` feature; no tokio runtime), spawned through a
//! `hyper::rt::Executor` that starts processes.
//!
//! Connections are spread over the workers: the executor spawns with
//! `smarm::spawn_on`, round robin, because `smarm::spawn` keeps a new
//! process on the acceptor's worker.
//!
//! Run:
//! - `cargo run -p smarm --release --features tokio-io --example hyper_hello -- --selftest [connections] [requests]`
//!   serves in-program keep-alive clients on the loopback and checks
//!   every response (defaults: 20 connections × 50 requests);
//! - `... --example hyper_hello -- --serve 127.0.0.1:8080 [workers] [seconds]` serves until
//!   `seconds` have passed (default 10), for a load generator such as wrk.

use std::convert::Infallible;
use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use smarm::net::{TcpListener, TcpStream};

const BODY: &[u8] = b"Hello, world!";

/// Runs each future hyper hands it in a process of its own, round robin
/// over the workers.
#[derive(Clone)]
struct ProcessExecutor {
    next: Arc<AtomicUsize>,
    workers: usize,
}

impl<F> hyper::rt::Executor<F> for ProcessExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        let worker = self.next.fetch_add(1, Ordering::Relaxed) % self.workers;
        if let Err(e) = smarm::spawn_on(worker, move || drop(smarm::block_on(future))) {
            eprintln!("cannot start a connection process: {e}");
        }
    }
}

async fn hello(_: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(BODY))))
}

/// Accepts connections until `until` says stop (checked between
/// accepts), each served by hyper in its own process.
fn serve(
    listener: TcpListener,
    executor: ProcessExecutor,
    mut more: impl FnMut() -> bool,
) -> std::io::Result<()> {
    while more() {
        let (stream, _) = listener.accept()?;
        stream.set_nodelay(true)?;
        let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service_fn(hello));
        hyper::rt::Executor::execute(&executor, async move {
            if let Err(e) = connection.await {
                eprintln!("connection error: {e}");
            }
        });
    }
    Ok(())
}

/// One keep-alive client: `requests` GETs, each response checked.
fn client(address: SocketAddr, requests: usize) -> std::io::Result<usize> {
    let stream = TcpStream::connect(address)?;
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut ok = 0;
    for _ in 0..requests {
        writer.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")?;
        let mut status = String::new();
        reader.read_line(&mut status)?;
        let mut length = 0;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header)?;
            if header == "\r\n" || header.is_empty() {
                break;
            }
            if let Some(value) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        if status.starts_with("HTTP/1.1 200") && body == BODY {
            ok += 1;
        }
    }
    Ok(ok)
}

fn selftest(connections: usize, requests: usize) {
    let started = Instant::now();
    let engine = smarm::Engine::builder().workers(2).build().expect("engine");
    let answered = engine
        .block_on(move || {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let address = listener.local_addr().expect("address");
            let executor = ProcessExecutor { next: Arc::default(), workers: 2 };
            let mut accepted = 0;
            let server = smarm::spawn(move || {
                serve(listener, executor, || {
                    accepted += 1;
                    accepted <= connections
                })
            })
            .expect("server");
            let clients: Vec<_> = (0..connections)
                .map(|i| smarm::spawn_on(i % 2, move || client(address, requests)).expect("client"))
                .collect();
            let answered: usize = clients.into_iter().map(|c| c.join().expect("client").expect("io")).sum();
            server.join().expect("server").expect("accept");
            answered
        })
        .expect("runtime");
    assert_eq!(answered, connections * requests, "every request answered with the body");
    println!(
        "hyper on smarm: {answered} requests over {connections} connections answered in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
}

fn serve_for(address: &str, workers: usize, seconds: u64) {
    let listener = TcpListener::bind(address).expect("bind");
    println!("serving on http://{} for {seconds} s", listener.local_addr().expect("address"));
    let stop_at = Instant::now() + Duration::from_secs(seconds);
    let engine = smarm::Engine::builder().workers(workers).build().expect("engine");
    let result = engine.block_on(move || {
        let executor = ProcessExecutor { next: Arc::default(), workers };
        // A bounded run: the acceptor stops taking connections after the
        // deadline (checked at each accept), then the runtime stops all.
        let acceptor =
            smarm::spawn(move || serve(listener, executor, || Instant::now() < stop_at)).expect("acceptor");
        let acceptor_pid = acceptor.pid();
        smarm::sleep(stop_at.saturating_duration_since(Instant::now()));
        let _ = smarm::request_stop(acceptor_pid);
        if let Some(runtime) = smarm::current_runtime() {
            runtime.stop_all();
        }
    });
    if let Err(e) = result {
        eprintln!("runtime ended: {e}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--serve") => {
            let address = args.get(1).map_or("127.0.0.1:8080", String::as_str);
            let workers = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
            let seconds = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(10);
            serve_for(address, workers, seconds);
        }
        _ => {
            let number =
                |i: usize, default: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
            selftest(number(1, 20), number(2, 50));
        }
    }
}
