//! The byte streams under the node: std nonblocking sockets whose waits
//! park the calling smarm process (through `smarm::io`), never its worker.
//!
//! Everything network-shaped the node needs passes through here — listen,
//! accept, connect, read, write, shut down — so another socket layer can
//! take its place without touching the protocol code. The handshake and
//! epmd code of `erl_dist` is written against `futures::io`; [`Stream`]
//! implements those traits by waiting inside `poll_*` (the process parks
//! there), so a future over it never returns `Pending` and
//! `smarm::block_on` drives it in one poll.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::io::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_io::{AsyncRead, AsyncWrite};

/// Reads retried (yielding between them) before a reader parks.
const SPINS_BEFORE_PARKING: u32 = 64;

/// How long a connect may take before it is given up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

fn io_error(e: smarm::io::IoError) -> io::Error {
    io::Error::other(e.to_string())
}

/// A connected TCP stream; clones share the socket (one reads, one writes).
#[derive(Debug, Clone)]
pub(crate) struct Stream {
    socket: Arc<TcpStream>,
}

impl Stream {
    /// Connects to `addr` (on one of the runtime's io threads: `connect`
    /// blocks), with `TCP_NODELAY`: a frame goes out as one write, but a
    /// reply must not wait for a delayed ACK.
    pub(crate) fn connect(addr: SocketAddr) -> io::Result<Stream> {
        let socket = smarm::io::block_on_io(move || TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT))
            .map_err(io_error)??;
        Stream::from_std(socket)
    }

    fn from_std(socket: TcpStream) -> io::Result<Stream> {
        socket.set_nodelay(true)?;
        socket.set_nonblocking(true)?;
        Ok(Stream { socket: Arc::new(socket) })
    }

    /// Reads what is there (at least one byte; 0 at the end of the stream).
    pub(crate) fn read_some(&self, buffer: &mut [u8]) -> io::Result<usize> {
        let mut spins = 0;
        loop {
            match (&*self.socket).read(buffer) {
                Err(e) if e.kind() == ErrorKind::WouldBlock && spins < SPINS_BEFORE_PARKING => {
                    // A reply often follows within microseconds: yield (other
                    // processes run) and look again before parking, which
                    // costs a wake through the poller.
                    spins += 1;
                    smarm::yield_now();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    spins = 0;
                    smarm::io::wait_readable(self.socket.as_raw_fd()).map_err(io_error)?
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }

    /// Writes all of `data`.
    pub(crate) fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            match (&*self.socket).write(data) {
                Ok(0) => return Err(io::Error::from(ErrorKind::WriteZero)),
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    smarm::io::wait_writable(self.socket.as_raw_fd()).map_err(io_error)?
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
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
        let socket = TcpListener::bind(addr)?;
        socket.set_nonblocking(true)?;
        Ok(Listener { socket })
    }

    pub(crate) fn port(&self) -> io::Result<u16> {
        Ok(self.socket.local_addr()?.port())
    }

    /// Waits for the next connection.
    pub(crate) fn accept(&self) -> io::Result<Stream> {
        loop {
            match self.socket.accept() {
                Ok((socket, _)) => return Stream::from_std(socket),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    smarm::io::wait_readable(self.socket.as_raw_fd()).map_err(io_error)?
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Runs a future whose every poll completes (the streams above wait
/// inside `poll_*`), in the calling process.
pub(crate) fn run<F: std::future::Future>(future: F) -> io::Result<F::Output> {
    smarm::block_on(future)
        .map_err(|_| io::Error::other("not inside a smarm process or thread that can wait"))
}
