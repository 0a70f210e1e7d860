//! The byte streams under the node: `smarm::net` sockets, whose waits park
//! the calling smarm process (never its worker) on the socket's own
//! edge-triggered registration.
//!
//! Everything network-shaped the node needs passes through here — listen,
//! accept, connect, read, write, shut down — so another socket layer can
//! take its place without touching the protocol code. The handshake and
//! epmd code of `erl_dist` is written against `futures::io`; [`Stream`]
//! implements those traits by waiting inside `poll_*` (the process parks
//! there), so a future over it never returns `Pending` and
//! `smarm::block_on` drives it in one poll.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_io::{AsyncRead, AsyncWrite};
use smarm::net::{TcpListener, TcpStream};

/// Reads tried (yielding between them) before a reader parks. A reply
/// often comes within tens of microseconds, and a worker with nothing to
/// run sleeps in the poller, whose wake-up costs more than that; fewer
/// tries (64) measured worse than none between two smarm nodes, as the
/// spin then ended just before the reply, so the window covers a round
/// trip.
const SPINS_BEFORE_PARKING: u32 = 256;

/// How long a connect may take before it is given up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A connected TCP stream; clones share the socket (one reads, others
/// write).
#[derive(Debug, Clone)]
pub(crate) struct Stream {
    socket: TcpStream,
}

impl Stream {
    /// Connects to `addr` (the calling process parks meanwhile), with
    /// `TCP_NODELAY`: a frame goes out as one write, but a reply must not
    /// wait for a delayed ACK.
    pub(crate) fn connect(addr: SocketAddr) -> io::Result<Stream> {
        Stream::new(TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?)
    }

    fn new(socket: TcpStream) -> io::Result<Stream> {
        socket.set_nodelay(true)?;
        Ok(Stream { socket })
    }

    /// Reads what is there (at least one byte; 0 at the end of the
    /// stream): tries again a while, yielding to the worker's other
    /// processes between tries, then parks until the socket is readable.
    pub(crate) fn read_some(&self, buffer: &mut [u8]) -> io::Result<usize> {
        for _ in 0..SPINS_BEFORE_PARKING {
            match self.socket.try_read(buffer) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => smarm::yield_now(),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                other => return other,
            }
        }
        (&self.socket).read(buffer)
    }

    /// Writes all of `data`, parking while the socket is full.
    pub(crate) fn write_all(&self, data: &[u8]) -> io::Result<()> {
        (&self.socket).write_all(data)
    }

    /// Writes some of `data`, parking while the socket is full — up to the
    /// write timeout, then `TimedOut`.
    pub(crate) fn write_some(&self, data: &[u8]) -> io::Result<usize> {
        (&self.socket).write(data)
    }

    /// Sets how long [`Stream::write_some`] and [`Stream::write_all`] wait
    /// for room at most (`None`: as long as it takes).
    pub(crate) fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.socket.set_write_timeout(timeout)
    }

    /// Writes as much of `data` as the socket takes now, never waiting:
    /// how much went out (less than all of it when the socket is full).
    pub(crate) fn write_now(&self, mut data: &[u8]) -> io::Result<usize> {
        let mut written = 0;
        while !data.is_empty() {
            match self.socket.try_write(data) {
                Ok(0) => return Err(io::Error::from(ErrorKind::WriteZero)),
                Ok(n) => {
                    written += n;
                    data = &data[n..];
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(written)
    }

    /// Shuts both directions: a reader waiting on it sees the end.
    pub(crate) fn shutdown(&self) {
        let _ = self.socket.shutdown(Shutdown::Both);
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, _: &mut Context<'_>, buffer: &mut [u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(self.read_some(buffer))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(self.write_all(data).map(|()| data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.shutdown();
        Poll::Ready(Ok(()))
    }
}

/// A listening socket on the loopback or any address.
#[derive(Debug)]
pub(crate) struct Listener {
    socket: TcpListener,
}

impl Listener {
    pub(crate) fn bind(addr: SocketAddr) -> io::Result<Listener> {
        Ok(Listener { socket: TcpListener::bind(addr)? })
    }

    pub(crate) fn port(&self) -> io::Result<u16> {
        Ok(self.socket.local_addr()?.port())
    }

    /// Waits (parked) for the next connection.
    pub(crate) fn accept(&self) -> io::Result<Stream> {
        let (socket, _) = self.socket.accept()?;
        Stream::new(socket)
    }
}

/// Runs a future whose every poll completes (the streams above wait
/// inside `poll_*`), in the calling process.
pub(crate) fn run<F: std::future::Future>(future: F) -> io::Result<F::Output> {
    smarm::block_on(future)
        .map_err(|_| io::Error::other("not inside a smarm process or thread that can wait"))
}
