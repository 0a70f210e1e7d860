//! Sockets whose blocking calls park the calling process: TCP, UDP and
//! Unix sockets shaped like `std::net` and `std::os::unix::net`.
//!
//! Every socket is nonblocking from the start (the `From` conversions of
//! the std types make it so). A call that would block parks the calling
//! process until the socket is ready — its worker runs other processes
//! meanwhile — and outside any process it blocks the calling thread, as
//! std does. Read and write timeouts are honoured by parking with a timer:
//! past one a call is `TimedOut` and the socket stays usable.
//!
//! Each socket is registered with its runtime's poller once,
//! edge-triggered, on its first wait, and deregistered when its last
//! handle drops. Its readiness is cached per direction: a read that
//! returned less than it asked for, or a write that would block, clears
//! it, and the next call waits for the next edge instead of paying a
//! failed syscall first.
//!
//! `try_clone` gives another handle to the same socket (one process reads
//! while another writes); the socket closes when the last handle drops.
//! [`TcpStream::readable`] and friends are arms for [`crate::select`], so a
//! connection process can wait on its socket and a channel at once.
//!
//! A TCP echo on the loopback interface:
//!
//! ```
//! use std::io::{Read, Write};
//! use smarm::net::{TcpListener, TcpStream};
//!
//! let echoed = smarm::run(|| {
//!     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//!     let address = listener.local_addr().unwrap();
//!     let server = smarm::spawn(move || {
//!         let (mut stream, _) = listener.accept().unwrap();
//!         let mut buffer = [0u8; 64];
//!         let n = stream.read(&mut buffer).unwrap();
//!         stream.write_all(&buffer[..n]).unwrap();
//!     })
//!     .unwrap();
//!     let mut client = TcpStream::connect(address).unwrap();
//!     client.write_all(b"ping").unwrap();
//!     let mut buffer = [0u8; 4];
//!     client.read_exact(&mut buffer).unwrap();
//!     server.join().unwrap();
//!     buffer
//! });
//! assert_eq!(&echoed, b"ping");
//! ```
//!
//! # Async io
//!
//! With the `futures-io` feature, [`TcpStream`] and [`UnixStream`] (and
//! their `&` forms) implement `futures_io::AsyncRead` and `AsyncWrite`;
//! with `tokio-io`, tokio's `AsyncRead` and `AsyncWrite` (tokio's io
//! traits only: no tokio runtime). The same registration and readiness
//! serve them: a poll that would block leaves the task's waker on the
//! socket. Run such futures in a process with [`crate::block_on`] — the
//! `hyper_hello` example serves HTTP with hyper that way, a process per
//! connection. Outside any runtime's process a poll that would wait
//! fails with `Unsupported` (there is no poller to wake it); read and
//! write timeouts apply to the blocking calls only.
#![deny(unsafe_code)]

mod async_io;
mod source;
#[allow(unsafe_code)]
mod sys;
mod tcp;
mod udp;
mod unix;

use std::fmt;

use smarm_core::kernel::wait::Waiter;
use smarm_core::Selectable;

use crate::io::edge::Direction;

pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixIncoming, UnixListener, UnixStream};

/// What a [`Ready`] arm needs of a socket.
trait Arm: Sync {
    fn arm_is_ready(&self, direction: Direction) -> bool;
    fn arm_register(&self, direction: Direction, waiter: &Waiter) -> bool;
}

impl<S: std::os::fd::AsRawFd + Sync + Send> Arm for source::Source<S> {
    fn arm_is_ready(&self, direction: Direction) -> bool {
        source::Source::arm_is_ready(self, direction)
    }

    fn arm_register(&self, direction: Direction, waiter: &Waiter) -> bool {
        source::Source::arm_register(self, direction, waiter)
    }
}

/// A select arm over one direction of a socket's readiness, from
/// [`TcpStream::readable`], [`TcpStream::writable`],
/// [`TcpListener::acceptable`] and their Unix and UDP twins. Usable in
/// [`crate::select`], [`crate::select_timeout`] and [`crate::Select`].
///
/// Ready means the last call in that direction did not say `WouldBlock`
/// (or an edge came since): after the arm wins, make a `try_` call, and if
/// it says `WouldBlock` select again. From a plain thread the arm looks at
/// the descriptor each time it is asked, and a select spins.
///
/// ```
/// use std::io::Write;
/// use std::time::Duration;
///
/// smarm::run(|| {
///     let (mut left, right) = smarm::net::UnixStream::pair().unwrap();
///     let (_tx, rx) = smarm::channel::<()>();
///     // Nothing written yet: once `try_read` has seen that, the select times out.
///     assert!(right.try_read(&mut [0u8; 4]).is_err());
///     let arm = right.readable();
///     assert_eq!(smarm::select_timeout(&[&rx, &arm], Duration::from_millis(5)), None);
///     left.write_all(b"x").unwrap();
///     assert_eq!(smarm::select_timeout(&[&rx, &arm], Duration::from_secs(5)), Some(1));
/// });
/// ```
pub struct Ready<'a> {
    source: &'a dyn Arm,
    direction: Direction,
}

impl<'a> Ready<'a> {
    fn new(source: &'a dyn Arm, direction: Direction) -> Ready<'a> {
        Ready { source, direction }
    }
}

impl fmt::Debug for Ready<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ready").field("direction", &self.direction).finish_non_exhaustive()
    }
}

impl Selectable for Ready<'_> {
    fn is_ready(&self) -> bool {
        self.source.arm_is_ready(self.direction)
    }

    fn register(&self, waiter: &Waiter) -> bool {
        self.source.arm_register(self.direction, waiter)
    }
}

/// Sockets registered with the calling process's runtime poller right now
/// (diagnostics and tests): each socket counts once from its first wait
/// until its last handle drops. `None` outside a hosted runtime's process.
///
/// ```
/// smarm::run(|| {
///     let before = smarm::net::registered_sockets().unwrap();
///     let (a, _b) = smarm::net::UnixStream::pair().unwrap();
///     a.set_read_timeout(Some(std::time::Duration::from_millis(1))).unwrap();
///     let _ = std::io::Read::read(&mut &a, &mut [0u8; 4]); // waits: registers
///     assert_eq!(smarm::net::registered_sockets().unwrap(), before + 1);
///     drop(a);
///     assert_eq!(smarm::net::registered_sockets().unwrap(), before);
/// });
/// ```
pub fn registered_sockets() -> Option<usize> {
    smarm_core::self_pid()?;
    Some(crate::context::current()?.reactor.edge.registered())
}
