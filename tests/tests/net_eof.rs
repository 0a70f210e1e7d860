//! The end of a stream is seen when its edge came with the last data: a
//! peer writes and shuts down at once, the reader takes the data in small
//! reads (the last one short, which drains the socket) and then must see
//! end of file, not wait for an edge that will never come. TCP and Unix,
//! on one worker, four workers on one thread, and the Engine.

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::Shutdown;

use smarm::net::{TcpListener, TcpStream, UnixStream};

fn read_to_end_in_chunks(mut stream: impl Read) -> Vec<u8> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4];
    loop {
        let n = stream.read(&mut chunk).unwrap();
        if n == 0 {
            return got;
        }
        got.extend_from_slice(&chunk[..n]);
    }
}

fn unix_eof(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        for round in 0..20 {
            let (mut a, b) = UnixStream::pair().unwrap();
            let writer = smarm::spawn_on(next_worker(workers), move || {
                if round % 2 == 0 {
                    smarm::sleep(ms(1));
                }
                a.write_all(b"late but whole").unwrap();
                a.shutdown(Shutdown::Write).unwrap();
            })
            .unwrap();
            assert_eq!(read_to_end_in_chunks(b), b"late but whole", "round {round}");
            writer.join().unwrap();
        }
    });
}
drive_tests!(unix_eof => end_of_a_unix_stream_after_a_short_read_1, end_of_a_unix_stream_after_a_short_read_4, end_of_a_unix_stream_after_a_short_read_engine);

fn tcp_eof(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        for round in 0..20 {
            let writer = smarm::spawn_on(next_worker(workers), move || {
                let mut stream = TcpStream::connect(address).unwrap();
                if round % 2 == 0 {
                    smarm::sleep(ms(1));
                }
                stream.write_all(b"late but whole").unwrap();
                // Dropped: the connection closes with the data.
            })
            .unwrap();
            let (stream, _) = listener.accept().unwrap();
            assert_eq!(read_to_end_in_chunks(stream), b"late but whole", "round {round}");
            writer.join().unwrap();
        }
    });
}
drive_tests!(tcp_eof => end_of_a_tcp_stream_after_a_short_read_1, end_of_a_tcp_stream_after_a_short_read_4, end_of_a_tcp_stream_after_a_short_read_engine);
