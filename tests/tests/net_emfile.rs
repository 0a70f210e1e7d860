//! `EMFILE` on accept: with the descriptor limit lowered (this binary's
//! own process, so no other test feels it), an accept that finds no free
//! descriptor is an error, the connection stays queued, and the listener
//! accepts it once descriptors are free again — on one worker and on the
//! Engine.

mod common;

use std::io::{ErrorKind, Read, Write};

use common::Drive;
use smarm::net::{TcpListener, TcpStream};

/// Lowers the soft `RLIMIT_NOFILE` to `limit`; returns the old soft limit.
fn set_fd_limit(limit: libc::rlim_t) -> libc::rlim_t {
    let mut current = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `current` is a valid rlimit to write.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut current) }, 0);
    let lowered = libc::rlimit { rlim_cur: limit.min(current.rlim_max), rlim_max: current.rlim_max };
    // SAFETY: `lowered` is a valid rlimit to read.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lowered) }, 0);
    current.rlim_cur
}

fn emfile(drive: Drive) {
    drive.run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(address).unwrap();
        // Use up every descriptor: open ones until the OS says no.
        let mut hogs = Vec::new();
        let old = set_fd_limit(256);
        loop {
            match std::fs::File::open("/dev/null") {
                Ok(file) => hogs.push(file),
                Err(error) => {
                    assert_eq!(error.raw_os_error(), Some(libc::EMFILE));
                    break;
                }
            }
        }
        let error = listener.accept().unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EMFILE), "accept with no descriptor left: {error}");
        assert_ne!(error.kind(), ErrorKind::WouldBlock);
        // Free them: the queued connection is accepted, and it works.
        hogs.clear();
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(b"again").unwrap();
        let mut buffer = [0u8; 5];
        server.read_exact(&mut buffer).unwrap();
        assert_eq!(&buffer, b"again");
        set_fd_limit(old);
    });
}

#[test]
fn emfile_on_accept_is_an_error_and_the_listener_recovers() {
    // One test function: the limit is process-wide, so the two drives run
    // one after the other, never at once.
    emfile(Drive::Single(1));
    emfile(Drive::Threads(4));
}
