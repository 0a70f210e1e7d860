//! Unix-domain sockets: [`UnixListener`], [`UnixStream`], [`UnixDatagram`].
#![deny(unsafe_code)]

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::io::edge::Direction;

use super::source::{never, short, Source};
use super::{sys, Ready};

/// A Unix-domain socket server; [`accept`](Self::accept) parks the calling
/// process until a connection comes.
///
/// ```
/// use std::io::{Read, Write};
/// let path = std::env::temp_dir().join(format!("smarm-doc-{}.sock", std::process::id()));
/// let _ = std::fs::remove_file(&path);
/// let listener = smarm::net::UnixListener::bind(&path).unwrap();
/// let answer = smarm::run(move || {
///     let client = smarm::spawn({
///         let path = listener.local_addr().unwrap().as_pathname().unwrap().to_owned();
///         move || smarm::net::UnixStream::connect(path).unwrap().write_all(b"hi").unwrap()
///     })
///     .unwrap();
///     let (mut stream, _) = listener.accept().unwrap();
///     let mut buffer = [0u8; 2];
///     stream.read_exact(&mut buffer).unwrap();
///     client.join().unwrap();
///     buffer
/// });
/// std::fs::remove_file(&path).unwrap();
/// assert_eq!(&answer, b"hi");
/// ```
#[derive(Debug, Clone)]
pub struct UnixListener {
    source: Arc<Source<std::os::unix::net::UnixListener>>,
}

impl UnixListener {
    /// Binds a listener to the filesystem `path`, nonblocking, with an
    /// accept queue of 4,096 connections (capped by `net.core.somaxconn`),
    /// as [`TcpListener::bind`](super::TcpListener::bind).
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("smarm-doc-bind-{}.sock", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let listener = smarm::net::UnixListener::bind(&path).unwrap();
    /// assert_eq!(listener.local_addr().unwrap().as_pathname(), Some(path.as_path()));
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        let listener = std::os::unix::net::UnixListener::bind(path)?;
        listener.set_nonblocking(true)?;
        sys::set_backlog(listener.as_raw_fd(), sys::LISTEN_BACKLOG)?;
        Ok(UnixListener { source: Source::new(listener) })
    }

    /// Accepts a connection, parking until one comes.
    ///
    /// ```no_run
    /// let listener = smarm::net::UnixListener::bind("/tmp/example.sock").unwrap();
    /// smarm::run(move || drop(listener.accept().unwrap()));
    /// ```
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (stream, address) = self.source.call(Direction::Read, 0, never, |listener| listener.accept())?;
        stream.set_nonblocking(true)?;
        Ok((UnixStream { source: Source::new(stream) }, address))
    }

    /// An endless iterator over accepted connections.
    ///
    /// ```no_run
    /// let listener = smarm::net::UnixListener::bind("/tmp/example.sock").unwrap();
    /// smarm::run(move || {
    ///     for stream in listener.incoming().take(1) {
    ///         drop(stream.unwrap());
    ///     }
    /// });
    /// ```
    pub fn incoming(&self) -> UnixIncoming<'_> {
        UnixIncoming { listener: self }
    }

    /// The address the listener is bound to.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("smarm-doc-addr-{}.sock", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let listener = smarm::net::UnixListener::bind(&path).unwrap();
    /// assert!(listener.local_addr().unwrap().as_pathname().is_some());
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.source.socket().local_addr()
    }

    /// Another handle to the same listener.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("smarm-doc-clone-{}.sock", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let listener = smarm::net::UnixListener::bind(&path).unwrap();
    /// assert!(listener.try_clone().is_ok());
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn try_clone(&self) -> io::Result<UnixListener> {
        Ok(self.clone())
    }

    /// A select arm ready when a connection may be waiting (see [`Ready`]).
    ///
    /// ```
    /// use smarm::Selectable;
    /// let path = std::env::temp_dir().join(format!("smarm-doc-arm-{}.sock", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let listener = smarm::net::UnixListener::bind(&path).unwrap();
    /// let _ = listener.acceptable().is_ready();
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn acceptable(&self) -> Ready<'_> {
        Ready::new(&*self.source, Direction::Read)
    }
}

impl From<std::os::unix::net::UnixListener> for UnixListener {
    /// Wraps a std listener, making it nonblocking.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("smarm-doc-from-{}.sock", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let listener = smarm::net::UnixListener::from(std::os::unix::net::UnixListener::bind(&path).unwrap());
    /// assert!(listener.local_addr().is_ok());
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    fn from(listener: std::os::unix::net::UnixListener) -> UnixListener {
        // Only fails on a descriptor that is not a socket: then every later
        // call reports that error itself.
        let _ = listener.set_nonblocking(true);
        UnixListener { source: Source::new(listener) }
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.source.fd()
    }
}

impl AsFd for UnixListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.source.socket().as_fd()
    }
}

/// The iterator of [`UnixListener::incoming`].
#[derive(Debug)]
pub struct UnixIncoming<'a> {
    listener: &'a UnixListener,
}

impl Iterator for UnixIncoming<'_> {
    type Item = io::Result<UnixStream>;

    fn next(&mut self) -> Option<io::Result<UnixStream>> {
        Some(self.listener.accept().map(|(stream, _)| stream))
    }
}

/// A Unix-domain stream whose blocking calls park the calling process;
/// `Read` and `Write` on the type and on `&UnixStream`.
///
/// ```
/// use std::io::{Read, Write};
/// smarm::run(|| {
///     let (mut a, mut b) = smarm::net::UnixStream::pair().unwrap();
///     a.write_all(b"ping").unwrap();
///     let mut buffer = [0u8; 4];
///     b.read_exact(&mut buffer).unwrap();
///     assert_eq!(&buffer, b"ping");
/// });
/// ```
#[derive(Debug, Clone)]
pub struct UnixStream {
    pub(super) source: Arc<Source<std::os::unix::net::UnixStream>>,
}

impl UnixStream {
    /// Connects to the socket at `path`.
    ///
    /// ```no_run
    /// let stream = smarm::net::UnixStream::connect("/tmp/example.sock").unwrap();
    /// ```
    pub fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        // A Unix-domain connect does not wait for the peer's accept.
        let stream = std::os::unix::net::UnixStream::connect(path)?;
        stream.set_nonblocking(true)?;
        Ok(UnixStream { source: Source::new(stream) })
    }

    /// A connected pair of streams.
    ///
    /// ```
    /// let (a, b) = smarm::net::UnixStream::pair().unwrap();
    /// assert!(a.peer_addr().is_ok() && b.local_addr().is_ok());
    /// ```
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = std::os::unix::net::UnixStream::pair()?;
        a.set_nonblocking(true)?;
        b.set_nonblocking(true)?;
        Ok((UnixStream { source: Source::new(a) }, UnixStream { source: Source::new(b) }))
    }

    /// The address of the local end.
    ///
    /// ```
    /// let (a, _b) = smarm::net::UnixStream::pair().unwrap();
    /// assert!(a.local_addr().unwrap().is_unnamed());
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.source.socket().local_addr()
    }

    /// The address of the remote end.
    ///
    /// ```
    /// let (a, _b) = smarm::net::UnixStream::pair().unwrap();
    /// assert!(a.peer_addr().unwrap().is_unnamed());
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.source.socket().peer_addr()
    }

    /// Shuts down the read half, the write half or both.
    ///
    /// ```
    /// use std::io::Read;
    /// smarm::run(|| {
    ///     let (a, mut b) = smarm::net::UnixStream::pair().unwrap();
    ///     a.shutdown(std::net::Shutdown::Write).unwrap();
    ///     assert_eq!(b.read(&mut [0u8; 4]).unwrap(), 0);
    /// });
    /// ```
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.source.socket().shutdown(how)
    }

    /// Sets the timeout of blocking reads (`None`: forever; zero is
    /// `InvalidInput`); past it a read is `TimedOut`.
    ///
    /// ```
    /// use std::io::Read;
    /// use std::time::Duration;
    /// smarm::run(|| {
    ///     let (mut a, _b) = smarm::net::UnixStream::pair().unwrap();
    ///     a.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
    ///     assert_eq!(a.read(&mut [0u8; 4]).unwrap_err().kind(), std::io::ErrorKind::TimedOut);
    /// });
    /// ```
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.source.set_timeout(Direction::Read, timeout)
    }

    /// The read timeout.
    ///
    /// ```
    /// let (a, _b) = smarm::net::UnixStream::pair().unwrap();
    /// assert_eq!(a.read_timeout().unwrap(), None);
    /// ```
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.source.timeout(Direction::Read))
    }

    /// Sets the timeout of blocking writes.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (a, _b) = smarm::net::UnixStream::pair().unwrap();
    /// a.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    /// assert_eq!(a.write_timeout().unwrap(), Some(Duration::from_secs(1)));
    /// ```
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.source.set_timeout(Direction::Write, timeout)
    }

    /// The write timeout.
    ///
    /// ```
    /// let (a, _b) = smarm::net::UnixStream::pair().unwrap();
    /// assert_eq!(a.write_timeout().unwrap(), None);
    /// ```
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.source.timeout(Direction::Write))
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    ///
    /// ```
    /// let (a, _b) = smarm::net::UnixStream::pair().unwrap();
    /// assert!(a.take_error().unwrap().is_none());
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.source.socket().take_error()
    }

    /// Another handle to the same stream (one process reads, another
    /// writes).
    ///
    /// ```
    /// let (a, _b) = smarm::net::UnixStream::pair().unwrap();
    /// assert!(a.try_clone().is_ok());
    /// ```
    pub fn try_clone(&self) -> io::Result<UnixStream> {
        Ok(self.clone())
    }

    /// A select arm ready when a read may not block (see [`Ready`]).
    ///
    /// ```
    /// use smarm::Selectable;
    /// let (a, _b) = smarm::net::UnixStream::pair().unwrap();
    /// let _ = a.readable().is_ready();
    /// ```
    pub fn readable(&self) -> Ready<'_> {
        Ready::new(&*self.source, Direction::Read)
    }

    /// A select arm ready when a write may not block (see [`Ready`]).
    ///
    /// ```
    /// use smarm::Selectable;
    /// let (a, _b) = smarm::net::UnixStream::pair().unwrap();
    /// assert!(a.writable().is_ready());
    /// ```
    pub fn writable(&self) -> Ready<'_> {
        Ready::new(&*self.source, Direction::Write)
    }

    /// One read that never waits: `WouldBlock` when nothing is there.
    ///
    /// ```
    /// let (a, _b) = smarm::net::UnixStream::pair().unwrap();
    /// assert_eq!(a.try_read(&mut [0u8; 4]).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
    /// ```
    pub fn try_read(&self, buffer: &mut [u8]) -> io::Result<usize> {
        self.source.try_call(Direction::Read, |mut stream| stream.read(buffer))
    }

    /// One write that never waits: `WouldBlock` when the socket is full.
    ///
    /// ```
    /// let (a, _b) = smarm::net::UnixStream::pair().unwrap();
    /// assert_eq!(a.try_write(b"x").unwrap(), 1);
    /// ```
    pub fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        self.source.try_call(Direction::Write, |mut stream| stream.write(data))
    }

    fn read_inner(&self, buffer: &mut [u8]) -> io::Result<usize> {
        self.source.call(Direction::Read, buffer.len(), short, |mut stream| stream.read(buffer))
    }

    fn write_inner(&self, data: &[u8]) -> io::Result<usize> {
        self.source.call(Direction::Write, data.len(), short, |mut stream| stream.write(data))
    }
}

impl Read for UnixStream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.read_inner(buffer)
    }
}

impl Read for &UnixStream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.read_inner(buffer)
    }
}

impl Write for UnixStream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_inner(data)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &UnixStream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_inner(data)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl From<std::os::unix::net::UnixStream> for UnixStream {
    /// Wraps a std stream, making it nonblocking.
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// let a = smarm::net::UnixStream::from(a);
    /// assert!(a.peer_addr().is_ok());
    /// ```
    fn from(stream: std::os::unix::net::UnixStream) -> UnixStream {
        // Only fails on a descriptor that is not a socket: then every later
        // call reports that error itself.
        let _ = stream.set_nonblocking(true);
        UnixStream { source: Source::new(stream) }
    }
}

impl AsRawFd for UnixStream {
    fn as_raw_fd(&self) -> RawFd {
        self.source.fd()
    }
}

impl AsFd for UnixStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.source.socket().as_fd()
    }
}

/// A Unix-domain datagram socket whose blocking calls park the calling
/// process.
///
/// ```
/// smarm::run(|| {
///     let (a, b) = smarm::net::UnixDatagram::pair().unwrap();
///     a.send(b"one").unwrap();
///     let mut buffer = [0u8; 8];
///     assert_eq!(b.recv(&mut buffer).unwrap(), 3);
/// });
/// ```
#[derive(Debug, Clone)]
pub struct UnixDatagram {
    source: Arc<Source<std::os::unix::net::UnixDatagram>>,
}

impl UnixDatagram {
    fn wrap(socket: std::os::unix::net::UnixDatagram) -> io::Result<UnixDatagram> {
        socket.set_nonblocking(true)?;
        Ok(UnixDatagram { source: Source::new(socket) })
    }

    /// A socket bound to the filesystem `path`.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("smarm-doc-dgram-{}.sock", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let socket = smarm::net::UnixDatagram::bind(&path).unwrap();
    /// assert!(socket.local_addr().unwrap().as_pathname().is_some());
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixDatagram> {
        UnixDatagram::wrap(std::os::unix::net::UnixDatagram::bind(path)?)
    }

    /// A socket bound to no address.
    ///
    /// ```
    /// let socket = smarm::net::UnixDatagram::unbound().unwrap();
    /// assert!(socket.local_addr().unwrap().is_unnamed());
    /// ```
    pub fn unbound() -> io::Result<UnixDatagram> {
        UnixDatagram::wrap(std::os::unix::net::UnixDatagram::unbound()?)
    }

    /// A connected pair of sockets.
    ///
    /// ```
    /// let (a, b) = smarm::net::UnixDatagram::pair().unwrap();
    /// assert!(a.peer_addr().is_ok() && b.peer_addr().is_ok());
    /// ```
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = std::os::unix::net::UnixDatagram::pair()?;
        Ok((UnixDatagram::wrap(a)?, UnixDatagram::wrap(b)?))
    }

    /// Sets the peer of [`send`](Self::send) and [`recv`](Self::recv).
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("smarm-doc-dconn-{}.sock", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let server = smarm::net::UnixDatagram::bind(&path).unwrap();
    /// let client = smarm::net::UnixDatagram::unbound().unwrap();
    /// client.connect(&path).unwrap();
    /// assert!(client.peer_addr().is_ok());
    /// drop(server);
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn connect<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        self.source.socket().connect(path)
    }

    /// Sends one datagram to the socket at `path`.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("smarm-doc-dsend-{}.sock", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let server = smarm::net::UnixDatagram::bind(&path).unwrap();
    /// let client = smarm::net::UnixDatagram::unbound().unwrap();
    /// assert_eq!(client.send_to(b"hi", &path).unwrap(), 2);
    /// let (n, _) = server.recv_from(&mut [0u8; 4]).unwrap();
    /// assert_eq!(n, 2);
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn send_to<P: AsRef<Path>>(&self, data: &[u8], path: P) -> io::Result<usize> {
        let path = path.as_ref();
        self.source.call(Direction::Write, data.len(), never, |socket| socket.send_to(data, path))
    }

    /// Receives one datagram, parking until one comes.
    ///
    /// ```
    /// let (a, b) = smarm::net::UnixDatagram::pair().unwrap();
    /// a.send(b"x").unwrap();
    /// let (n, _) = b.recv_from(&mut [0u8; 4]).unwrap();
    /// assert_eq!(n, 1);
    /// ```
    pub fn recv_from(&self, buffer: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.source.call(Direction::Read, buffer.len(), never, |socket| socket.recv_from(buffer))
    }

    /// Sends one datagram to the connected peer.
    ///
    /// ```
    /// let (a, b) = smarm::net::UnixDatagram::pair().unwrap();
    /// assert_eq!(a.send(b"x").unwrap(), 1);
    /// assert_eq!(b.recv(&mut [0u8; 4]).unwrap(), 1);
    /// ```
    pub fn send(&self, data: &[u8]) -> io::Result<usize> {
        self.source.call(Direction::Write, data.len(), never, |socket| socket.send(data))
    }

    /// Receives one datagram from the connected peer, parking until one
    /// comes (or the read timeout passes: `TimedOut`).
    ///
    /// ```
    /// use std::time::Duration;
    /// smarm::run(|| {
    ///     let (a, _b) = smarm::net::UnixDatagram::pair().unwrap();
    ///     a.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
    ///     assert_eq!(a.recv(&mut [0u8; 4]).unwrap_err().kind(), std::io::ErrorKind::TimedOut);
    /// });
    /// ```
    pub fn recv(&self, buffer: &mut [u8]) -> io::Result<usize> {
        self.source.call(Direction::Read, buffer.len(), never, |socket| socket.recv(buffer))
    }

    /// The address the socket is bound to.
    ///
    /// ```
    /// let socket = smarm::net::UnixDatagram::unbound().unwrap();
    /// assert!(socket.local_addr().is_ok());
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.source.socket().local_addr()
    }

    /// The connected peer's address.
    ///
    /// ```
    /// let socket = smarm::net::UnixDatagram::unbound().unwrap();
    /// assert!(socket.peer_addr().is_err());
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.source.socket().peer_addr()
    }

    /// Sets the timeout of blocking receives.
    ///
    /// ```
    /// use std::time::Duration;
    /// let socket = smarm::net::UnixDatagram::unbound().unwrap();
    /// socket.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    /// assert_eq!(socket.read_timeout().unwrap(), Some(Duration::from_secs(1)));
    /// ```
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.source.set_timeout(Direction::Read, timeout)
    }

    /// The receive timeout.
    ///
    /// ```
    /// let socket = smarm::net::UnixDatagram::unbound().unwrap();
    /// assert_eq!(socket.read_timeout().unwrap(), None);
    /// ```
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.source.timeout(Direction::Read))
    }

    /// Sets the timeout of blocking sends.
    ///
    /// ```
    /// use std::time::Duration;
    /// let socket = smarm::net::UnixDatagram::unbound().unwrap();
    /// socket.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    /// assert_eq!(socket.write_timeout().unwrap(), Some(Duration::from_secs(1)));
    /// ```
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.source.set_timeout(Direction::Write, timeout)
    }

    /// The send timeout.
    ///
    /// ```
    /// let socket = smarm::net::UnixDatagram::unbound().unwrap();
    /// assert_eq!(socket.write_timeout().unwrap(), None);
    /// ```
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.source.timeout(Direction::Write))
    }

    /// Another handle to the same socket.
    ///
    /// ```
    /// let socket = smarm::net::UnixDatagram::unbound().unwrap();
    /// assert!(socket.try_clone().is_ok());
    /// ```
    pub fn try_clone(&self) -> io::Result<UnixDatagram> {
        Ok(self.clone())
    }

    /// A select arm ready when a datagram may be waiting (see [`Ready`]).
    ///
    /// ```
    /// use smarm::Selectable;
    /// let socket = smarm::net::UnixDatagram::unbound().unwrap();
    /// let _ = socket.readable().is_ready();
    /// ```
    pub fn readable(&self) -> Ready<'_> {
        Ready::new(&*self.source, Direction::Read)
    }
}

impl From<std::os::unix::net::UnixDatagram> for UnixDatagram {
    /// Wraps a std socket, making it nonblocking.
    ///
    /// ```
    /// let socket = smarm::net::UnixDatagram::from(std::os::unix::net::UnixDatagram::unbound().unwrap());
    /// assert!(socket.local_addr().is_ok());
    /// ```
    fn from(socket: std::os::unix::net::UnixDatagram) -> UnixDatagram {
        // Only fails on a descriptor that is not a socket: then every later
        // call reports that error itself.
        let _ = socket.set_nonblocking(true);
        UnixDatagram { source: Source::new(socket) }
    }
}

impl AsRawFd for UnixDatagram {
    fn as_raw_fd(&self) -> RawFd {
        self.source.fd()
    }
}

impl AsFd for UnixDatagram {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.source.socket().as_fd()
    }
}
