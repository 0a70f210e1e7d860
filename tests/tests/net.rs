//! `smarm::net`: sockets whose blocking calls park the process, on one
//! worker, four workers on one thread and the four-thread Engine — echo
//! with many clients (every byte counted), bad input (refused connect,
//! peer reset, read timeout, a handle dropped while another waits), a
//! process stopped while it waits, sockets in `select`, and plain threads.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{ms, next_worker, Drive};
use smarm::net::{TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixStream};

const CLIENTS: usize = 16;
const ROUNDS: usize = 20;

fn echo(drive: Drive) {
    let workers = drive.workers();
    let (sent, echoed) = drive.run(move || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let echoed = Arc::new(AtomicUsize::new(0));
        let counter = echoed.clone();
        let server = smarm::spawn(move || {
            let mut connections = Vec::new();
            for (i, stream) in listener.incoming().take(CLIENTS).enumerate() {
                let mut stream = stream.unwrap();
                let counter = counter.clone();
                connections.push(
                    smarm::spawn_on(i % workers, move || {
                        let mut buffer = [0u8; 256];
                        loop {
                            let n = stream.read(&mut buffer).unwrap();
                            if n == 0 {
                                break;
                            }
                            counter.fetch_add(n, Ordering::SeqCst);
                            stream.write_all(&buffer[..n]).unwrap();
                        }
                    })
                    .unwrap(),
                );
            }
            for connection in connections {
                connection.join().unwrap();
            }
        })
        .unwrap();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                smarm::spawn_on(i % workers, move || {
                    let mut stream = TcpStream::connect(address).unwrap();
                    let mut total = 0;
                    for round in 0..ROUNDS {
                        let message = format!("client {i} round {round}\n");
                        stream.write_all(message.as_bytes()).unwrap();
                        let mut back = vec![0u8; message.len()];
                        stream.read_exact(&mut back).unwrap();
                        assert_eq!(back, message.as_bytes());
                        total += message.len();
                    }
                    total
                })
                .unwrap()
            })
            .collect();
        let sent: usize = clients.into_iter().map(|client| client.join().unwrap()).sum();
        server.join().unwrap();
        (sent, echoed.load(Ordering::SeqCst))
    });
    assert!(sent > CLIENTS * ROUNDS * 10);
    assert_eq!(sent, echoed, "every byte sent was echoed once");
}
drive_tests!(echo => tcp_echo_every_byte_once, tcp_echo_every_byte_once_on_4_workers, tcp_echo_every_byte_once_on_4_threads);

fn refused(drive: Drive) {
    drive.run(|| {
        // A port that was just free: bind, read the port, close.
        let address = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let error = TcpStream::connect(address).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::ConnectionRefused);
        let error = TcpStream::connect_timeout(&address, ms(500)).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::ConnectionRefused);
    });
}
drive_tests!(refused => connect_to_a_closed_port_is_refused, connect_to_a_closed_port_is_refused_on_4_workers, connect_to_a_closed_port_is_refused_on_4_threads);

/// Closes `stream` with a reset (`SO_LINGER` zero) instead of a FIN.
fn reset(stream: TcpStream) {
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: `linger` is a valid value of the option's type and size; the
    // descriptor is open.
    let result = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(result, 0);
    drop(stream);
}

fn peer_reset(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let victim_client = TcpStream::connect(address).unwrap();
        let (mut victim, _) = listener.accept().unwrap();
        let mut healthy_client = TcpStream::connect(address).unwrap();
        let (mut healthy, _) = listener.accept().unwrap();
        let reader = smarm::spawn_on(next_worker(workers), move || {
            // Parks in the read; the peer resets meanwhile.
            victim.read(&mut [0u8; 16])
        })
        .unwrap();
        smarm::sleep(ms(20));
        reset(victim_client);
        let error = reader.join().unwrap().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::ConnectionReset);
        // The other connection does not notice.
        healthy_client.write_all(b"fine").unwrap();
        let mut buffer = [0u8; 4];
        healthy.read_exact(&mut buffer).unwrap();
        assert_eq!(&buffer, b"fine");
    });
}
drive_tests!(peer_reset => a_peer_reset_is_an_error_for_that_process_only, a_peer_reset_is_an_error_for_that_process_only_on_4_workers, a_peer_reset_is_an_error_for_that_process_only_on_4_threads);

fn read_timeout(drive: Drive) {
    drive.run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        server.set_read_timeout(Some(ms(20))).unwrap();
        let started = std::time::Instant::now();
        let error = server.read(&mut [0u8; 8]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::TimedOut);
        assert!(started.elapsed() >= ms(20));
        // Still usable, both ways.
        client.write_all(b"late").unwrap();
        let mut buffer = [0u8; 4];
        server.read_exact(&mut buffer).unwrap();
        assert_eq!(&buffer, b"late");
        server.write_all(b"back").unwrap();
        client.read_exact(&mut buffer).unwrap();
        assert_eq!(&buffer, b"back");
        // And the same for a datagram socket.
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_read_timeout(Some(ms(10))).unwrap();
        assert_eq!(udp.recv_from(&mut [0u8; 8]).unwrap_err().kind(), ErrorKind::TimedOut);
        udp.send_to(b"self", udp.local_addr().unwrap()).unwrap();
        assert_eq!(udp.recv_from(&mut [0u8; 8]).unwrap().0, 4);
    });
}
drive_tests!(read_timeout => a_read_timeout_is_timed_out_and_the_socket_stays_usable, a_read_timeout_is_timed_out_and_the_socket_stays_usable_on_4_workers, a_read_timeout_is_timed_out_and_the_socket_stays_usable_on_4_threads);

fn dropped_while_waiting(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (mut peer, mine) = UnixStream::pair().unwrap();
        let clone = mine.try_clone().unwrap();
        let reader = smarm::spawn_on(next_worker(workers), move || {
            let mut buffer = [0u8; 8];
            let n = (&clone).read(&mut buffer).unwrap();
            buffer[..n].to_vec()
        })
        .unwrap();
        smarm::sleep(ms(10));
        // The other handle goes: the socket lives on in the reader's.
        drop(mine);
        peer.write_all(b"still").unwrap();
        assert_eq!(reader.join().unwrap(), b"still");

        // Shutting the socket down through another handle wakes a reader
        // parked on it with the end of the stream.
        let (_peer, mine) = UnixStream::pair().unwrap();
        let clone = mine.try_clone().unwrap();
        let reader =
            smarm::spawn_on(next_worker(workers), move || (&clone).read(&mut [0u8; 8]).unwrap() == 0)
                .unwrap();
        smarm::sleep(ms(10));
        mine.shutdown(Shutdown::Both).unwrap();
        drop(mine);
        assert!(reader.join().unwrap(), "the reader saw the end of the stream");
    });
}
drive_tests!(dropped_while_waiting => a_handle_dropped_while_another_waits_never_hangs_it, a_handle_dropped_while_another_waits_never_hangs_it_on_4_workers, a_handle_dropped_while_another_waits_never_hangs_it_on_4_threads);

fn stopped_while_waiting(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let baseline = smarm::net::registered_sockets().unwrap();
        let (mut peer, mine) = UnixStream::pair().unwrap();
        let clone = mine.try_clone().unwrap();
        let waiter = smarm::spawn_on(next_worker(workers), move || {
            let _ = (&clone).read(&mut [0u8; 8]);
            unreachable!("a stopped process resumed");
        })
        .unwrap();
        smarm::sleep(ms(10));
        assert_eq!(smarm::net::registered_sockets().unwrap(), baseline + 1);
        let runtime = smarm::current_runtime().unwrap();
        runtime.request_stop(waiter.pid()).unwrap();
        assert!(waiter.join().unwrap_err().is_stopped());
        // The socket works for the next reader, and goes from the poller
        // with its last handle.
        peer.write_all(b"next").unwrap();
        let mut buffer = [0u8; 4];
        (&mine).read_exact(&mut buffer).unwrap();
        assert_eq!(&buffer, b"next");
        drop(mine);
        assert_eq!(smarm::net::registered_sockets().unwrap(), baseline);
    });
}
drive_tests!(stopped_while_waiting => a_process_stopped_while_waiting_on_a_socket_leaves_nothing_behind, a_process_stopped_while_waiting_on_a_socket_leaves_nothing_behind_on_4_workers, a_process_stopped_while_waiting_on_a_socket_leaves_nothing_behind_on_4_threads);

const MESSAGES: usize = 50;

fn select_socket_and_channel(drive: Drive) {
    let workers = drive.workers();
    let (from_socket, from_channel) = drive.run(move || {
        let (mut peer, mine) = UnixStream::pair().unwrap();
        let (tx, rx) = smarm::channel::<u32>();
        let connection = smarm::spawn_on(next_worker(workers), move || {
            let (mut bytes, mut messages) = (0usize, 0usize);
            let mut channel_open = true;
            let mut buffer = [0u8; 64];
            while bytes < MESSAGES || channel_open {
                let picked = if channel_open {
                    smarm::select(&[&rx, &mine.readable()])
                } else {
                    smarm::select(&[&mine.readable()]) + 1
                };
                if picked == 0 {
                    match rx.try_recv() {
                        Ok(_) => messages += 1,
                        Err(_) => channel_open = false,
                    }
                    continue;
                }
                match mine.try_read(&mut buffer) {
                    Ok(n) => bytes += n,
                    Err(error) if error.kind() == ErrorKind::WouldBlock => {}
                    Err(error) => panic!("read: {error}"),
                }
            }
            (bytes, messages)
        })
        .unwrap();
        for i in 0..MESSAGES {
            if i % 2 == 0 {
                peer.write_all(b"x").unwrap();
                tx.send(i as u32).unwrap();
            } else {
                tx.send(i as u32).unwrap();
                peer.write_all(b"x").unwrap();
            }
            if i % 10 == 0 {
                smarm::sleep(ms(1));
            }
        }
        drop(tx);
        connection.join().unwrap()
    });
    assert_eq!((from_socket, from_channel), (MESSAGES, MESSAGES));
}
drive_tests!(select_socket_and_channel => select_waits_on_a_socket_and_a_channel_at_once, select_waits_on_a_socket_and_a_channel_at_once_on_4_workers, select_waits_on_a_socket_and_a_channel_at_once_on_4_threads);

fn select_set_with_a_socket(drive: Drive) {
    drive.run(|| {
        #[derive(Clone, Copy, PartialEq, Debug)]
        enum Arm {
            Control,
            Socket,
        }
        let (peer, mine) = UnixDatagram::pair().unwrap();
        let (_control_tx, control) = smarm::channel::<()>();
        let mut select = smarm::Select::new();
        select.add(Arm::Control);
        select.add(Arm::Socket);
        // Nothing there yet: a receive times out, and then so does the set.
        mine.set_read_timeout(Some(ms(5))).unwrap();
        assert_eq!(mine.recv(&mut [0u8; 4]).unwrap_err().kind(), ErrorKind::TimedOut);
        let arm = mine.readable();
        let picked = select.wait_timeout(ms(5), |key| match key {
            Arm::Control => &control as &dyn smarm::Selectable,
            Arm::Socket => &arm,
        });
        assert_eq!(picked, None);
        peer.send(b"d").unwrap();
        let picked = select.wait_timeout(ms(1000), |key| match key {
            Arm::Control => &control as &dyn smarm::Selectable,
            Arm::Socket => &arm,
        });
        assert_eq!(picked, Some(Arm::Socket));
        assert_eq!(mine.recv(&mut [0u8; 4]).unwrap(), 1);
    });
}

fn plain_threads_block(_drive: Drive) {
    // Outside any process the calls block the thread.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut buffer = [0u8; 5];
        stream.read_exact(&mut buffer).unwrap();
        stream.write_all(&buffer).unwrap();
    });
    let mut client = TcpStream::connect(address).unwrap();
    client.write_all(b"plain").unwrap();
    let mut buffer = [0u8; 5];
    client.read_exact(&mut buffer).unwrap();
    assert_eq!(&buffer, b"plain");
    server.join().unwrap();
    // The server's end is closed: the end of the stream.
    assert_eq!(client.read(&mut [0u8; 1]).unwrap(), 0);
    // A timeout on a thread is a timeout too.
    let (_peer, mine) = UnixStream::pair().unwrap();
    mine.set_read_timeout(Some(ms(10))).unwrap();
    assert_eq!((&mine).read(&mut [0u8; 1]).unwrap_err().kind(), ErrorKind::TimedOut);
}

#[test]
fn a_select_set_waits_on_a_datagram_socket() {
    select_set_with_a_socket(Drive::Single(1));
    select_set_with_a_socket(Drive::Threads(2));
}

#[test]
fn outside_a_process_the_calls_block_the_thread() {
    plain_threads_block(Drive::Single(1));
}

#[test]
fn a_socket_moves_to_the_runtime_that_uses_it_next() {
    // Bound outside any runtime, used by one runtime, then by another.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    for drive in [Drive::Single(1), Drive::Threads(2), Drive::Single(1)] {
        let listener = listener.clone();
        let echoed = drive.run(move || {
            let server = smarm::spawn(move || {
                let (mut stream, _) = listener.accept().unwrap();
                let mut buffer = [0u8; 4];
                stream.read_exact(&mut buffer).unwrap();
                stream.write_all(&buffer).unwrap();
            })
            .unwrap();
            // Let the server park in accept (the listener registers) first.
            smarm::sleep(ms(5));
            let mut client = TcpStream::connect(address).unwrap();
            client.write_all(b"move").unwrap();
            let mut buffer = [0u8; 4];
            client.read_exact(&mut buffer).unwrap();
            server.join().unwrap();
            buffer
        });
        assert_eq!(&echoed, b"move");
    }
}
