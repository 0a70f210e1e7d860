//! Many idle connections on the default configuration: a process per
//! connection, each parked in a read, all answered once a client finally
//! speaks on every one of them.
//!
//! The test raises the soft `RLIMIT_NOFILE` to the hard limit (this binary's
//! own process, so no other test feels it) and holds 100,000 connections,
//! or as many as the limit allows: client and server share this process,
//! so each connection costs two descriptors. It prints how many it held.

mod common;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use smarm::net::{TcpListener, TcpStream};

/// The goal: this many idle connections on one server.
const GOAL: usize = 100_000;
/// Descriptors kept for everything else (the runtime's poller and
/// eventfds, the listener, libtest, stdio).
const SPARE: u64 = 256;

/// Raises the soft descriptor limit to the hard one; returns it.
fn raise_fd_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid rlimit to write.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: `limit` is a valid rlimit to read.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    limit.rlim_cur
}

/// One connection's process: parked in its first read until the client
/// speaks, answers, then waits for the close.
fn serve(mut stream: TcpStream, answered: Arc<AtomicUsize>) -> usize {
    let mut ping = [0u8; 4];
    stream.read_exact(&mut ping).expect("the client's ping");
    assert_eq!(&ping, b"ping");
    stream.write_all(b"pong").expect("the answer");
    answered.fetch_add(1, Ordering::SeqCst);
    assert_eq!(stream.read(&mut ping).expect("the close"), 0, "nothing after the ping");
    1
}

#[test]
fn every_idle_connection_is_answered() {
    let limit = raise_fd_limit();
    let connections = GOAL.min((limit.saturating_sub(SPARE) / 2) as usize);
    assert!(connections >= 1_000, "descriptor limit {limit} too low for this test");
    eprintln!("net_idle: {connections} idle connections (descriptor limit {limit}, goal {GOAL})");

    let (address_tx, address_rx) = mpsc::channel();
    // The client is a plain thread with std's blocking sockets: it opens
    // every connection, leaves them idle until all are open, then pings
    // each and reads each answer.
    let client = std::thread::spawn(move || {
        let address = address_rx.recv().expect("the server's address");
        let mut streams = Vec::with_capacity(connections);
        for _ in 0..connections {
            streams.push(std::net::TcpStream::connect(address).expect("connect"));
        }
        for stream in &mut streams {
            stream.write_all(b"ping").expect("ping");
        }
        let mut answers = 0;
        for stream in &mut streams {
            let mut pong = [0u8; 4];
            stream.read_exact(&mut pong).expect("pong");
            assert_eq!(&pong, b"pong");
            answers += 1;
        }
        answers
    });

    let engine = smarm::Engine::new(smarm::Config::default()).expect("engine starts");
    let answered = Arc::new(AtomicUsize::new(0));
    let counter = answered.clone();
    let served = engine.block_on(move || {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        address_tx.send(listener.local_addr().expect("address")).expect("client waits");
        let runtime = smarm::current_runtime().expect("inside a process");
        let mut processes = Vec::with_capacity(connections);
        for _ in 0..connections {
            let (stream, _) = listener.accept().expect("accept");
            let counter = counter.clone();
            processes.push(runtime.spawn(move || serve(stream, counter)).expect("spawn"));
        }
        processes.into_iter().map(|process| process.join().expect("served")).sum::<usize>()
    });
    // The client only returns once every answer is in; its streams close
    // when it returns, which lets each server process end.
    let answers = client.join().expect("client");
    let served = served.expect("root");
    assert_eq!(answers, connections, "every connection answered");
    assert_eq!(served, connections, "every server process ended once");
    assert_eq!(answered.load(Ordering::SeqCst), connections);
}

#[test]
fn a_burst_of_connects_waits_in_the_accept_queue() {
    // std listens with a queue of 128: past it the kernel drops the
    // handshake and the client retries a second later, so these connects
    // would time out. smarm's listeners queue 4,096.
    const BURST: usize = 600;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    let streams: Vec<_> = (0..BURST)
        .map(|i| {
            std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_millis(500))
                .unwrap_or_else(|error| panic!("connect {i} of {BURST} with none accepted yet: {error}"))
        })
        .collect();
    // Every one of them is in the queue: accept them all, outside any
    // runtime (the thread blocks).
    for _ in 0..BURST {
        listener.accept().expect("queued connection");
    }
    drop(streams);
}
