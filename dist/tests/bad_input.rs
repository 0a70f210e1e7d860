//! Bad input from a peer: a malformed frame, an unknown control message,
//! a peer that stops ticking, a peer that stops reading. The peer is made
//! by hand here (erl_dist's handshake on a plain thread), so it can
//! misbehave in ways a BEAM never does.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use common::{unique, Epmd, COOKIE, WAIT};
use erl_dist::handshake::ClientSideHandshake;
use erl_dist::node::{Creation, LocalNode};
use smarm_dist::{atom, DisconnectReason, ErlPid, Incoming, Node, Options};

/// A blocking TCP stream seen through futures' io traits (every poll
/// completes).
struct Blocking(TcpStream);

impl futures::io::AsyncRead for Blocking {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(self.0.read(buf))
    }
}

impl futures::io::AsyncWrite for Blocking {
    fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Poll::Ready(self.0.write(buf))
    }
    fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(self.0.flush())
    }
    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Connects to the node at `port` as `name` and completes the handshake.
fn fake_peer(name: &str, port: u16, cookie: &str) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let local = LocalNode::new(name.parse().unwrap(), Creation::new(7));
    let mut handshake = ClientSideHandshake::new(Blocking(stream), local, cookie);
    let (Blocking(stream), _) = futures::executor::block_on(async {
        handshake.execute_send_name(erl_dist::LOWEST_DISTRIBUTION_PROTOCOL_VERSION).await?;
        handshake.execute_rest(true).await
    })
    .expect("handshake");
    stream
}

/// Runs `misbehave` as a peer of a fresh node and returns why the node
/// dropped the connection and what a monitor across it received.
fn drop_reason(ticktime: Duration, misbehave: fn(&mut TcpStream)) -> (DisconnectReason, Incoming) {
    let epmd = Epmd::start();
    let options = Options { ticktime, ..epmd.options() };
    smarm::run(move || {
        let node = Node::start_with(&unique("smarm"), COOKIE, options).unwrap();
        let peer_name = format!("{}@{}", unique("fake"), common::host());
        let port = node.port();
        let name = peer_name.clone();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let peer = std::thread::spawn(move || {
            let mut stream = fake_peer(&name, port, COOKIE);
            go_rx.recv().unwrap();
            misbehave(&mut stream);
            // Hold the socket until the node has dropped it.
            let mut sink = [0u8; 1024];
            let deadline = Instant::now() + WAIT;
            while Instant::now() < deadline {
                match stream.read(&mut sink) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        });
        let deadline = Instant::now() + WAIT;
        while !node.connected().contains(&peer_name) {
            assert!(Instant::now() < deadline, "the fake peer did not connect");
            smarm::sleep(Duration::from_millis(5));
        }
        let mut mailbox = node.mailbox().unwrap();
        let reference = mailbox.monitor(ErlPid::new(peer_name.as_str(), 1, 0, 7));
        go_tx.send(()).unwrap();
        let down = mailbox.recv_timeout(WAIT).unwrap();
        assert!(matches!(&down, Incoming::Down { reference: r, .. } if *r == reference));
        let reason = node.last_disconnect(&peer_name).expect("a recorded reason");
        // The node keeps running: it still makes mailboxes.
        assert!(smarm::spawn({
            let node = node.clone();
            move || node.mailbox().is_ok()
        })
        .unwrap()
        .join()
        .unwrap());
        node.stop();
        peer.join().unwrap();
        (reason, down)
    })
}

fn expect_noconnection(down: &Incoming) {
    match down {
        Incoming::Down { reason, .. } => assert_eq!(*reason, atom("noconnection")),
        other => panic!("expected a Down, got {other:?}"),
    }
}

#[test]
fn a_malformed_frame_closes_the_connection_and_tells_its_monitors() {
    let (reason, down) = drop_reason(Duration::from_secs(60), |stream| {
        // A pass-through frame whose control message is not a term.
        stream.write_all(&[0, 0, 0, 4, 112, 131, 255, 0]).unwrap();
    });
    assert!(matches!(reason, DisconnectReason::Malformed(_)), "{reason:?}");
    expect_noconnection(&down);
}

#[test]
fn an_unknown_control_message_closes_the_connection() {
    let (reason, down) = drop_reason(Duration::from_secs(60), |stream| {
        // {99}: a control message with an operation that does not exist.
        stream.write_all(&[0, 0, 0, 6, 112, 131, 104, 1, 97, 99]).unwrap();
    });
    assert!(matches!(reason, DisconnectReason::Malformed(_)), "{reason:?}");
    expect_noconnection(&down);
}

#[test]
fn a_frame_longer_than_the_limit_is_malformed() {
    let (reason, down) = drop_reason(Duration::from_secs(60), |stream| {
        stream.write_all(&[0x7f, 0xff, 0xff, 0xff]).unwrap();
    });
    assert!(matches!(reason, DisconnectReason::Malformed(_)), "{reason:?}");
    expect_noconnection(&down);
}

#[test]
fn a_silent_peer_is_dropped_after_the_tick_time() {
    let started = Instant::now();
    let (reason, down) = drop_reason(Duration::from_millis(800), |_| {});
    assert_eq!(reason, DisconnectReason::Silent);
    expect_noconnection(&down);
    // Not before the tick time: the node waited for it.
    assert!(started.elapsed() >= Duration::from_millis(800));
}

/// Reads one frame's control message from a peer's socket (ticks skipped);
/// `None` at the end of the stream.
fn read_message(stream: &mut TcpStream) -> Option<erl_dist::message::Message> {
    loop {
        let mut length = [0u8; 4];
        stream.read_exact(&mut length).ok()?;
        let length = u32::from_be_bytes(length) as usize;
        if length == 0 {
            continue;
        }
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).unwrap();
        assert_eq!(body[0], 112, "a pass-through frame");
        return Some(erl_dist::message::Message::read_from(&mut &body[1..]).expect("a well-formed message"));
    }
}

#[test]
fn a_peer_that_does_not_read_holds_its_senders_back_and_then_gets_every_message_in_order() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    const SENDERS: usize = 4;
    const MESSAGES: usize = 100;
    // 12.5 MiB in all: far more than the loopback socket buffers hold
    // while nobody reads, and the limit is small.
    const SIZE: usize = 32 * 1024;
    let epmd = Epmd::start();
    let options = Options { send_queue_limit: 16 * 1024, ..epmd.options() };
    smarm::run(move || {
        let node = Node::start_with(&unique("smarm"), COOKIE, options).unwrap();
        let peer_name = format!("{}@{}", unique("fake"), common::host());
        let port = node.port();
        let name = peer_name.clone();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let peer = std::thread::spawn(move || {
            let mut stream = fake_peer(&name, port, COOKIE);
            go_rx.recv().unwrap();
            let mut next = [0u32; SENDERS];
            let mut received = 0;
            while received < SENDERS * MESSAGES {
                let message = read_message(&mut stream).expect("every message arrives");
                let term = match message {
                    erl_dist::message::Message::Send(m) => m.message,
                    erl_dist::message::Message::SendSender(m) => m.message,
                    other => panic!("unexpected {other:?}"),
                };
                let (sender, sequence, body): (u32, u32, String) =
                    smarm_dist::FromTerm::from_term(term).unwrap();
                assert_eq!(sequence, next[sender as usize], "in order, none lost");
                assert_eq!(body.len(), SIZE);
                next[sender as usize] += 1;
                received += 1;
            }
            received
        });
        let deadline = Instant::now() + WAIT;
        while !node.connected().contains(&peer_name) {
            assert!(Instant::now() < deadline, "the fake peer did not connect");
            smarm::sleep(Duration::from_millis(5));
        }
        let target = ErlPid::new(peer_name.as_str(), 1, 0, 7);
        let attempted: Arc<Vec<AtomicUsize>> = Arc::new((0..SENDERS).map(|_| AtomicUsize::new(0)).collect());
        let sent: Arc<Vec<AtomicUsize>> = Arc::new((0..SENDERS).map(|_| AtomicUsize::new(0)).collect());
        let senders: Vec<_> = (0..SENDERS)
            .map(|index| {
                let (node, target, attempted, sent) =
                    (node.clone(), target.clone(), attempted.clone(), sent.clone());
                smarm::spawn(move || {
                    let mailbox = node.mailbox().unwrap();
                    let body = "x".repeat(SIZE);
                    for sequence in 0..MESSAGES {
                        attempted[index].store(sequence + 1, Ordering::SeqCst);
                        mailbox.send(&target, &(index as u32, sequence as u32, body.as_str())).unwrap();
                        sent[index].store(sequence + 1, Ordering::SeqCst);
                    }
                })
                .unwrap()
            })
            .collect();
        // Nobody reads: every sender ends up inside a send it cannot
        // finish (an unbounded queue would let them all finish instead).
        let held =
            || (0..SENDERS).all(|i| attempted[i].load(Ordering::SeqCst) > sent[i].load(Ordering::SeqCst));
        let deadline = Instant::now() + WAIT;
        while !held() {
            assert!(Instant::now() < deadline, "the senders were not held back");
            smarm::sleep(Duration::from_millis(1));
        }
        let total: usize = (0..SENDERS).map(|i| sent[i].load(Ordering::SeqCst)).sum();
        assert!(total < SENDERS * MESSAGES);
        go_tx.send(()).unwrap();
        for sender in senders {
            sender.join().unwrap();
        }
        // The last frames may still be on their way: wait for the peer off
        // the workers.
        let received = smarm::io::block_on_io(move || peer.join().unwrap()).unwrap();
        assert_eq!(received, SENDERS * MESSAGES);
        node.stop();
    });
}

#[test]
fn a_peer_that_neither_reads_nor_ticks_is_dropped_and_releases_the_senders_it_held() {
    let epmd = Epmd::start();
    let options =
        Options { ticktime: Duration::from_millis(800), send_queue_limit: 16 * 1024, ..epmd.options() };
    smarm::run(move || {
        let node = Node::start_with(&unique("smarm"), COOKIE, options).unwrap();
        let peer_name = format!("{}@{}", unique("fake"), common::host());
        let port = node.port();
        let name = peer_name.clone();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let peer = std::thread::spawn(move || {
            // Connected, then deaf and mute until the test ends.
            let _stream = fake_peer(&name, port, COOKIE);
            let _ = done_rx.recv();
        });
        let deadline = Instant::now() + WAIT;
        while !node.connected().contains(&peer_name) {
            assert!(Instant::now() < deadline, "the fake peer did not connect");
            smarm::sleep(Duration::from_millis(5));
        }
        let target = ErlPid::new(peer_name.as_str(), 1, 0, 7);
        let sender = {
            let node = node.clone();
            smarm::spawn(move || {
                let mailbox = node.mailbox().unwrap();
                let body = "x".repeat(32 * 1024);
                let mut sent = 0usize;
                // Sends until the queue holds it back, and then until the
                // connection is dropped.
                while mailbox.send(&target, &body.as_str()).is_ok() {
                    sent += 1;
                }
                sent
            })
            .unwrap()
        };
        let sent = sender.join().unwrap();
        assert!(sent > 0);
        assert_eq!(node.last_disconnect(&peer_name), Some(DisconnectReason::Silent));
        assert!(!node.connected().contains(&peer_name));
        node.stop();
        done_tx.send(()).unwrap();
        smarm::io::block_on_io(move || peer.join().unwrap()).unwrap();
    });
}
