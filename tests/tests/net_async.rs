//! The async io traits on `smarm::net`'s stream sockets, driven by
//! `smarm::block_on` inside processes: futures_io's and tokio's
//! `AsyncRead`/`AsyncWrite` over TCP and Unix streams, woken by the
//! socket's readiness (a reader pending until its peer writes), every
//! byte counted, on one worker, four workers on one thread and the
//! Engine; polled outside any process they fail with `Unsupported`.

mod common;
use common::*;

use std::future::poll_fn;
use std::io;
use std::pin::Pin;

use smarm::net::{TcpListener, TcpStream, UnixStream};

/// futures_io: reads exactly `buffer.len()` bytes.
async fn read_exact_futures<S: futures_io::AsyncRead + Unpin>(
    stream: &mut S,
    buffer: &mut [u8],
) -> io::Result<()> {
    let mut filled = 0;
    while filled < buffer.len() {
        let n = poll_fn(|cx| Pin::new(&mut *stream).poll_read(cx, &mut buffer[filled..])).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        filled += n;
    }
    Ok(())
}

/// futures_io: writes all of `data`.
async fn write_all_futures<S: futures_io::AsyncWrite + Unpin>(
    stream: &mut S,
    mut data: &[u8],
) -> io::Result<()> {
    while !data.is_empty() {
        let n = poll_fn(|cx| Pin::new(&mut *stream).poll_write(cx, data)).await?;
        data = &data[n..];
    }
    Ok(())
}

/// tokio: reads exactly `buffer.len()` bytes.
async fn read_exact_tokio<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    buffer: &mut [u8],
) -> io::Result<()> {
    let mut read = tokio::io::ReadBuf::new(buffer);
    while read.remaining() > 0 {
        let before = read.filled().len();
        poll_fn(|cx| Pin::new(&mut *stream).poll_read(cx, &mut read)).await?;
        if read.filled().len() == before {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(())
}

/// tokio: writes all of `data`.
async fn write_all_tokio<S: tokio::io::AsyncWrite + Unpin>(
    stream: &mut S,
    mut data: &[u8],
) -> io::Result<()> {
    while !data.is_empty() {
        let n = poll_fn(|cx| Pin::new(&mut *stream).poll_write(cx, data)).await?;
        data = &data[n..];
    }
    Ok(())
}

const CONNECTIONS: usize = 8;
const MESSAGES: usize = 50;
const SIZE: usize = 700;

/// A message of connection `c`, number `m`: bytes that tell them apart.
fn message(c: usize, m: usize) -> Vec<u8> {
    (0..SIZE).map(|i| (c * 31 + m * 7 + i) as u8).collect()
}

/// Eight connections, each echoed by a server process running async code;
/// clients use the blocking calls, sleeping now and then so the server's
/// reads are pending and woken by the socket.
fn tcp_echo(drive: Drive, tokio_traits: bool) {
    let workers = drive.workers();
    drive.run(move || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let acceptor = smarm::spawn(move || {
            let mut servers = Vec::new();
            for _ in 0..CONNECTIONS {
                let (mut stream, _) = listener.accept().unwrap();
                servers.push(
                    smarm::spawn_on(next_worker(workers), move || {
                        smarm::block_on(async move {
                            let mut buffer = vec![0u8; SIZE];
                            let mut echoed = 0;
                            for _ in 0..MESSAGES {
                                if tokio_traits {
                                    read_exact_tokio(&mut stream, &mut buffer).await?;
                                    write_all_tokio(&mut stream, &buffer).await?;
                                } else {
                                    read_exact_futures(&mut stream, &mut buffer).await?;
                                    write_all_futures(&mut stream, &buffer).await?;
                                }
                                echoed += buffer.len();
                            }
                            io::Result::Ok(echoed)
                        })
                        .unwrap()
                    })
                    .unwrap(),
                );
            }
            servers.into_iter().map(|s| s.join().unwrap().unwrap()).sum::<usize>()
        })
        .unwrap();
        let clients: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                smarm::spawn_on(next_worker(workers), move || {
                    use std::io::{Read, Write};
                    let mut stream = TcpStream::connect(address).unwrap();
                    let mut back = vec![0u8; SIZE];
                    for m in 0..MESSAGES {
                        if m % 10 == 0 {
                            smarm::sleep(ms(1));
                        }
                        let sent = message(c, m);
                        stream.write_all(&sent).unwrap();
                        stream.read_exact(&mut back).unwrap();
                        assert_eq!(back, sent, "connection {c} message {m}");
                    }
                })
                .unwrap()
            })
            .collect();
        clients.into_iter().for_each(|c| c.join().unwrap());
        assert_eq!(acceptor.join().unwrap(), CONNECTIONS * MESSAGES * SIZE);
    });
}

fn tcp_echo_futures(drive: Drive) {
    tcp_echo(drive, false);
}
drive_tests!(tcp_echo_futures => futures_io_echo_over_tcp_1, futures_io_echo_over_tcp_4, futures_io_echo_over_tcp_engine);

fn tcp_echo_tokio(drive: Drive) {
    tcp_echo(drive, true);
}
drive_tests!(tcp_echo_tokio => tokio_io_echo_over_tcp_1, tokio_io_echo_over_tcp_4, tokio_io_echo_over_tcp_engine);

/// A Unix stream pair: one process writes with tokio's traits after a
/// sleep, the other reads with futures_io's, pending until then; then
/// `poll_close` ends the stream (the reader sees end of file).
fn unix_pair(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let writer = smarm::spawn_on(next_worker(workers), move || {
            smarm::sleep(ms(5));
            smarm::block_on(async move {
                write_all_tokio(&mut a, b"late but whole").await?;
                poll_fn(|cx| tokio::io::AsyncWrite::poll_shutdown(Pin::new(&mut a), cx)).await
            })
            .unwrap()
        })
        .unwrap();
        let got = smarm::block_on(async move {
            let mut got = Vec::new();
            let mut chunk = [0u8; 4];
            loop {
                let n =
                    poll_fn(|cx| futures_io::AsyncRead::poll_read(Pin::new(&mut b), cx, &mut chunk)).await?;
                if n == 0 {
                    return io::Result::Ok(got);
                }
                got.extend_from_slice(&chunk[..n]);
            }
        })
        .unwrap()
        .unwrap();
        writer.join().unwrap().unwrap();
        assert_eq!(got, b"late but whole");
    });
}
drive_tests!(unix_pair => async_unix_stream_woken_by_readiness_1, async_unix_stream_woken_by_readiness_4, async_unix_stream_woken_by_readiness_engine);

/// Outside any runtime's process there is no poller to wake a task: a
/// read that would wait says `Unsupported`; one that can go on at once
/// (data queued) succeeds.
#[test]
fn outside_a_process_an_async_read_that_would_wait_is_unsupported() {
    use std::io::Write;
    let (mut a, mut b) = UnixStream::pair().unwrap();
    let mut buffer = [0u8; 8];
    let pending =
        smarm::block_on(poll_fn(|cx| futures_io::AsyncRead::poll_read(Pin::new(&mut b), cx, &mut buffer)));
    assert_eq!(pending.unwrap().unwrap_err().kind(), io::ErrorKind::Unsupported);
    a.write_all(b"now").unwrap();
    let ready =
        smarm::block_on(poll_fn(|cx| futures_io::AsyncRead::poll_read(Pin::new(&mut b), cx, &mut buffer)));
    assert_eq!(ready.unwrap().unwrap(), 3);
    assert_eq!(&buffer[..3], b"now");
}
