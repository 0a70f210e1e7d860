//! TCP: [`TcpListener`] and [`TcpStream`].
#![deny(unsafe_code)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::io::edge::Direction;

use super::source::{never, short, Source};
use super::{sys, Ready};

/// A TCP socket server, listening for connections; [`accept`](Self::accept)
/// parks the calling process until a connection comes (a plain thread
/// blocks).
///
/// ```
/// use std::io::{Read, Write};
/// use smarm::net::{TcpListener, TcpStream};
///
/// let echoed = smarm::run(|| {
///     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
///     let address = listener.local_addr().unwrap();
///     let server = smarm::spawn(move || {
///         let (mut stream, _) = listener.accept().unwrap();
///         let mut buffer = [0u8; 4];
///         stream.read_exact(&mut buffer).unwrap();
///         stream.write_all(&buffer).unwrap();
///     })
///     .unwrap();
///     let mut client = TcpStream::connect(address).unwrap();
///     client.write_all(b"ping").unwrap();
///     let mut buffer = [0u8; 4];
///     client.read_exact(&mut buffer).unwrap();
///     server.join().unwrap();
///     buffer
/// });
/// assert_eq!(&echoed, b"ping");
/// ```
#[derive(Debug, Clone)]
pub struct TcpListener {
    source: Arc<Source<std::net::TcpListener>>,
}

impl TcpListener {
    /// Binds a listener to `address` (the first of its addresses that
    /// binds), nonblocking, with an accept queue of 4,096 connections
    /// (capped by the kernel's `net.core.somaxconn`) rather than std's 128,
    /// so a burst of connects is not dropped and retried a second later.
    ///
    /// ```
    /// let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// assert!(listener.local_addr().unwrap().port() != 0);
    /// ```
    pub fn bind<A: ToSocketAddrs>(address: A) -> io::Result<TcpListener> {
        let listener = std::net::TcpListener::bind(address)?;
        listener.set_nonblocking(true)?;
        sys::set_backlog(listener.as_raw_fd(), sys::LISTEN_BACKLOG)?;
        Ok(TcpListener { source: Source::new(listener) })
    }

    /// Accepts a connection, parking the calling process until one comes
    /// (a plain thread blocks). Errors are the OS's: `EMFILE` when the
    /// process has no descriptor left (the connection stays queued; accept
    /// again once descriptors are free).
    ///
    /// ```no_run
    /// let listener = smarm::net::TcpListener::bind("127.0.0.1:8080").unwrap();
    /// smarm::run(move || {
    ///     let (stream, peer) = listener.accept().unwrap();
    ///     println!("{peer} connected on {}", stream.local_addr().unwrap());
    /// });
    /// ```
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (stream, peer) = self.source.call(Direction::Read, 0, never, |listener| listener.accept())?;
        Ok((TcpStream::from_std(stream)?, peer))
    }

    /// An endless iterator over accepted connections ([`accept`](Self::accept)
    /// in a loop).
    ///
    /// ```no_run
    /// let listener = smarm::net::TcpListener::bind("127.0.0.1:8080").unwrap();
    /// smarm::run(move || {
    ///     for stream in listener.incoming().take(1) {
    ///         drop(stream.unwrap());
    ///     }
    /// });
    /// ```
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The address the listener is bound to.
    ///
    /// ```
    /// let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// assert!(listener.local_addr().unwrap().ip().is_loopback());
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.source.socket().local_addr()
    }

    /// Sets `IP_TTL` on the socket.
    ///
    /// ```
    /// let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// listener.set_ttl(42).unwrap();
    /// assert_eq!(listener.ttl().unwrap(), 42);
    /// ```
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.source.socket().set_ttl(ttl)
    }

    /// The socket's `IP_TTL`.
    ///
    /// ```
    /// let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// assert!(listener.ttl().unwrap() > 0);
    /// ```
    pub fn ttl(&self) -> io::Result<u32> {
        self.source.socket().ttl()
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    ///
    /// ```
    /// let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// assert!(listener.take_error().unwrap().is_none());
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.source.socket().take_error()
    }

    /// Another handle to the same listener (processes may accept on both).
    ///
    /// ```
    /// let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let other = listener.try_clone().unwrap();
    /// assert_eq!(listener.local_addr().unwrap(), other.local_addr().unwrap());
    /// ```
    pub fn try_clone(&self) -> io::Result<TcpListener> {
        Ok(self.clone())
    }

    /// A select arm ready when a connection may be waiting: see
    /// [`TcpStream::readable`].
    ///
    /// ```
    /// use smarm::Selectable;
    /// let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let _ = listener.acceptable().is_ready();
    /// ```
    pub fn acceptable(&self) -> Ready<'_> {
        Ready::new(&*self.source, Direction::Read)
    }

    /// One accept that never waits: `WouldBlock` when no connection is
    /// queued.
    ///
    /// ```
    /// let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let error = listener.try_accept().unwrap_err();
    /// assert_eq!(error.kind(), std::io::ErrorKind::WouldBlock);
    /// ```
    pub fn try_accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (stream, peer) = self.source.try_call(Direction::Read, |listener| listener.accept())?;
        Ok((TcpStream::from_std(stream)?, peer))
    }
}

impl From<std::net::TcpListener> for TcpListener {
    /// Wraps a std listener, making it nonblocking.
    ///
    /// ```
    /// let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let listener = smarm::net::TcpListener::from(std_listener);
    /// assert!(listener.local_addr().is_ok());
    /// ```
    fn from(listener: std::net::TcpListener) -> TcpListener {
        // Only fails on a descriptor that is not a socket: then every later
        // call reports that error itself.
        let _ = listener.set_nonblocking(true);
        TcpListener { source: Source::new(listener) }
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.source.fd()
    }
}

impl AsFd for TcpListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.source.socket().as_fd()
    }
}

/// The iterator of [`TcpListener::incoming`].
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;

    fn next(&mut self) -> Option<io::Result<TcpStream>> {
        Some(self.listener.accept().map(|(stream, _)| stream))
    }
}

/// A TCP connection whose blocking calls park the calling process (a plain
/// thread blocks). `Read` and `Write` are implemented on the type and on
/// `&TcpStream`, so `BufReader`, `read_exact`, `write!` and `io::copy` work
/// as on std; [`try_clone`](Self::try_clone) gives a second handle, so one
/// process reads while another writes.
///
/// ```
/// use std::io::{BufRead, BufReader, Write};
/// use smarm::net::{TcpListener, TcpStream};
///
/// let line = smarm::run(|| {
///     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
///     let address = listener.local_addr().unwrap();
///     smarm::spawn(move || {
///         let (mut stream, _) = listener.accept().unwrap();
///         writeln!(stream, "hello").unwrap();
///     })
///     .unwrap();
///     let stream = TcpStream::connect(address).unwrap();
///     let mut line = String::new();
///     BufReader::new(stream).read_line(&mut line).unwrap();
///     line
/// });
/// assert_eq!(line, "hello\n");
/// ```
#[derive(Debug, Clone)]
pub struct TcpStream {
    pub(super) source: Arc<Source<std::net::TcpStream>>,
}

impl TcpStream {
    fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        Ok(TcpStream { source: Source::new(stream) })
    }

    /// Connects to `address` (each of its addresses in turn until one
    /// answers), parking the calling process while the connection is made.
    /// A closed port is `ConnectionRefused`.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     assert_eq!(stream.peer_addr().unwrap(), listener.local_addr().unwrap());
    /// });
    /// ```
    pub fn connect<A: ToSocketAddrs>(address: A) -> io::Result<TcpStream> {
        let mut last = None;
        for address in address.to_socket_addrs()? {
            match TcpStream::connect_to(&address, None) {
                Ok(stream) => return Ok(stream),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to connect to")))
    }

    /// Connects to `address`, giving up with `TimedOut` after `timeout`
    /// (a zero timeout is `InvalidInput`).
    ///
    /// ```
    /// use std::time::Duration;
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let address = listener.local_addr().unwrap();
    ///     let stream = smarm::net::TcpStream::connect_timeout(&address, Duration::from_secs(5)).unwrap();
    ///     assert!(stream.local_addr().is_ok());
    /// });
    /// ```
    pub fn connect_timeout(address: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot connect with a zero timeout"));
        }
        TcpStream::connect_to(address, Some(Instant::now() + timeout))
    }

    fn connect_to(address: &SocketAddr, deadline: Option<Instant>) -> io::Result<TcpStream> {
        let (fd, pending) = sys::start_connect(address)?;
        let stream = TcpStream { source: Source::new(std::net::TcpStream::from(fd)) };
        if !pending {
            return Ok(stream);
        }
        loop {
            // Writable once the connection is made or has failed; the
            // cached readiness starts set, so look at the socket first.
            if let Some(error) = sys::take_error(stream.source.fd())? {
                return Err(error);
            }
            match stream.source.socket().peer_addr() {
                Ok(_) => return Ok(stream),
                Err(error) if error.kind() == io::ErrorKind::NotConnected => {}
                Err(error) => return Err(error),
            }
            let seen = stream.source.snapshot();
            stream.source.clear(Direction::Write, seen);
            stream.source.wait(Direction::Write, deadline)?;
        }
    }

    /// The address of the remote end.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     assert_eq!(stream.peer_addr().unwrap(), listener.local_addr().unwrap());
    /// });
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.source.socket().peer_addr()
    }

    /// The address of the local end.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     assert!(stream.local_addr().unwrap().ip().is_loopback());
    /// });
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.source.socket().local_addr()
    }

    /// Shuts down the read half, the write half or both; a process parked
    /// in a read of this socket wakes and reads the end of the stream.
    ///
    /// ```
    /// use std::io::Read;
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let mut stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     stream.shutdown(std::net::Shutdown::Read).unwrap();
    ///     assert_eq!(stream.read(&mut [0u8; 8]).unwrap(), 0);
    /// });
    /// ```
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.source.socket().shutdown(how)
    }

    /// Sets `TCP_NODELAY` (no Nagle batching of small writes).
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     stream.set_nodelay(true).unwrap();
    ///     assert!(stream.nodelay().unwrap());
    /// });
    /// ```
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.source.socket().set_nodelay(nodelay)
    }

    /// Whether `TCP_NODELAY` is set.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     assert!(!stream.nodelay().unwrap());
    /// });
    /// ```
    pub fn nodelay(&self) -> io::Result<bool> {
        self.source.socket().nodelay()
    }

    /// Sets `IP_TTL`.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     stream.set_ttl(7).unwrap();
    ///     assert_eq!(stream.ttl().unwrap(), 7);
    /// });
    /// ```
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.source.socket().set_ttl(ttl)
    }

    /// The socket's `IP_TTL`.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     assert!(stream.ttl().unwrap() > 0);
    /// });
    /// ```
    pub fn ttl(&self) -> io::Result<u32> {
        self.source.socket().ttl()
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     assert!(stream.take_error().unwrap().is_none());
    /// });
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.source.socket().take_error()
    }

    /// Reads without taking: parks until data (or the end) is there.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let mut client = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     let (mut server, _) = listener.accept().unwrap();
    ///     client.write_all(b"hi").unwrap();
    ///     let mut buffer = [0u8; 2];
    ///     assert_eq!(server.peek(&mut buffer).unwrap(), 2);
    ///     server.read_exact(&mut buffer).unwrap();
    ///     assert_eq!(&buffer, b"hi");
    /// });
    /// ```
    pub fn peek(&self, buffer: &mut [u8]) -> io::Result<usize> {
        self.source.call(Direction::Read, buffer.len(), never, |stream| stream.peek(buffer))
    }

    /// Sets the timeout of blocking reads: past it a read is `TimedOut`
    /// and the stream stays usable. `None` waits forever; a zero duration
    /// is `InvalidInput`.
    ///
    /// ```
    /// use std::io::Read;
    /// use std::time::Duration;
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let mut stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     stream.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    ///     let error = stream.read(&mut [0u8; 8]).unwrap_err();
    ///     assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
    /// });
    /// ```
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.source.set_timeout(Direction::Read, timeout)
    }

    /// The read timeout.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     assert_eq!(stream.read_timeout().unwrap(), None);
    /// });
    /// ```
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.source.timeout(Direction::Read))
    }

    /// Sets the timeout of blocking writes (as
    /// [`set_read_timeout`](Self::set_read_timeout)).
    ///
    /// ```
    /// use std::time::Duration;
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     stream.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    ///     assert_eq!(stream.write_timeout().unwrap(), Some(Duration::from_secs(1)));
    /// });
    /// ```
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.source.set_timeout(Direction::Write, timeout)
    }

    /// The write timeout.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     assert_eq!(stream.write_timeout().unwrap(), None);
    /// });
    /// ```
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.source.timeout(Direction::Write))
    }

    /// Another handle to the same connection, so one process reads while
    /// another writes. The connection closes when the last handle drops.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     let writer = stream.try_clone().unwrap();
    ///     assert_eq!(writer.peer_addr().unwrap(), stream.peer_addr().unwrap());
    /// });
    /// ```
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        Ok(self.clone())
    }

    /// A select arm ready when a read may not block: wait on the socket and
    /// a channel at once with `smarm::select`, then
    /// [`try_read`](Self::try_read) (which says `WouldBlock` if the
    /// readiness was stale, and the next select waits again).
    ///
    /// ```
    /// use std::io::Write;
    /// use smarm::Selectable;
    ///
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let mut client = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     let (server, _) = listener.accept().unwrap();
    ///     let (_tx, rx) = smarm::channel::<u32>();
    ///     client.write_all(b"x").unwrap();
    ///     loop {
    ///         match smarm::select(&[&rx, &server.readable()]) {
    ///             0 => unreachable!("nobody sends"),
    ///             _ => match server.try_read(&mut [0u8; 8]) {
    ///                 Ok(n) => break assert_eq!(n, 1),
    ///                 Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
    ///                 Err(e) => panic!("{e}"),
    ///             },
    ///         }
    ///     }
    /// });
    /// ```
    pub fn readable(&self) -> Ready<'_> {
        Ready::new(&*self.source, Direction::Read)
    }

    /// A select arm ready when a write may not block (see
    /// [`readable`](Self::readable)).
    ///
    /// ```
    /// use smarm::Selectable;
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     assert!(stream.writable().is_ready());
    /// });
    /// ```
    pub fn writable(&self) -> Ready<'_> {
        Ready::new(&*self.source, Direction::Write)
    }

    /// One read that never waits: `WouldBlock` when nothing is there.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     let error = stream.try_read(&mut [0u8; 8]).unwrap_err();
    ///     assert_eq!(error.kind(), std::io::ErrorKind::WouldBlock);
    /// });
    /// ```
    pub fn try_read(&self, buffer: &mut [u8]) -> io::Result<usize> {
        self.source.try_call(Direction::Read, |mut stream| stream.read(buffer))
    }

    /// One write that never waits: `WouldBlock` when the socket is full.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let listener = smarm::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let stream = smarm::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    ///     assert_eq!(stream.try_write(b"hi").unwrap(), 2);
    /// });
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

impl Read for TcpStream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.read_inner(buffer)
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.read_inner(buffer)
    }
}

impl Write for TcpStream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_inner(data)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &TcpStream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_inner(data)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl From<std::net::TcpStream> for TcpStream {
    /// Wraps a std stream, making it nonblocking.
    ///
    /// ```
    /// let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let std_stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    /// let stream = smarm::net::TcpStream::from(std_stream);
    /// assert!(stream.peer_addr().is_ok());
    /// ```
    fn from(stream: std::net::TcpStream) -> TcpStream {
        // Only fails on a descriptor that is not a socket: then every later
        // call reports that error itself.
        let _ = stream.set_nonblocking(true);
        TcpStream { source: Source::new(stream) }
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.source.fd()
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.source.socket().as_fd()
    }
}
