//! UDP: [`UdpSocket`].
#![deny(unsafe_code)]

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use crate::io::edge::Direction;

use super::source::{never, Source};
use super::Ready;

/// A UDP socket whose `recv` and `send` calls park the calling process (a
/// plain thread blocks).
///
/// ```
/// smarm::run(|| {
///     let a = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
///     let b = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
///     a.send_to(b"hello", b.local_addr().unwrap()).unwrap();
///     let mut buffer = [0u8; 16];
///     let (n, from) = b.recv_from(&mut buffer).unwrap();
///     assert_eq!((&buffer[..n], from), (&b"hello"[..], a.local_addr().unwrap()));
/// });
/// ```
#[derive(Debug, Clone)]
pub struct UdpSocket {
    source: Arc<Source<std::net::UdpSocket>>,
}

impl UdpSocket {
    /// Binds a socket to `address`, nonblocking.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(socket.local_addr().unwrap().port() != 0);
    /// ```
    pub fn bind<A: ToSocketAddrs>(address: A) -> io::Result<UdpSocket> {
        let socket = std::net::UdpSocket::bind(address)?;
        socket.set_nonblocking(true)?;
        Ok(UdpSocket { source: Source::new(socket) })
    }

    /// Receives one datagram, parking until one comes; returns its length
    /// and sender.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    ///     socket.send_to(b"me", socket.local_addr().unwrap()).unwrap();
    ///     let (n, _) = socket.recv_from(&mut [0u8; 8]).unwrap();
    ///     assert_eq!(n, 2);
    /// });
    /// ```
    pub fn recv_from(&self, buffer: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.source.call(Direction::Read, buffer.len(), never, |socket| socket.recv_from(buffer))
    }

    /// Sends one datagram to `address`, parking while the socket is full.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert_eq!(socket.send_to(b"me", socket.local_addr().unwrap()).unwrap(), 2);
    /// ```
    pub fn send_to<A: ToSocketAddrs>(&self, data: &[u8], address: A) -> io::Result<usize> {
        let address = address
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to send to"))?;
        self.source.call(Direction::Write, data.len(), never, |socket| socket.send_to(data, address))
    }

    /// Sets the peer of [`send`](Self::send) and [`recv`](Self::recv)
    /// (datagrams from elsewhere are dropped).
    ///
    /// ```
    /// let a = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let b = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// a.connect(b.local_addr().unwrap()).unwrap();
    /// assert_eq!(a.peer_addr().unwrap(), b.local_addr().unwrap());
    /// ```
    pub fn connect<A: ToSocketAddrs>(&self, address: A) -> io::Result<()> {
        self.source.socket().connect(address)
    }

    /// Sends one datagram to the connected peer.
    ///
    /// ```
    /// smarm::run(|| {
    ///     let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    ///     socket.connect(socket.local_addr().unwrap()).unwrap();
    ///     socket.send(b"loop").unwrap();
    ///     assert_eq!(socket.recv(&mut [0u8; 8]).unwrap(), 4);
    /// });
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
    ///     let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    ///     socket.connect(socket.local_addr().unwrap()).unwrap();
    ///     socket.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
    ///     assert_eq!(socket.recv(&mut [0u8; 8]).unwrap_err().kind(), std::io::ErrorKind::TimedOut);
    /// });
    /// ```
    pub fn recv(&self, buffer: &mut [u8]) -> io::Result<usize> {
        self.source.call(Direction::Read, buffer.len(), never, |socket| socket.recv(buffer))
    }

    /// The address the socket is bound to.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(socket.local_addr().unwrap().ip().is_loopback());
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.source.socket().local_addr()
    }

    /// The connected peer's address.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(socket.peer_addr().is_err());
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.source.socket().peer_addr()
    }

    /// Sets the timeout of blocking receives (`None`: forever; zero is
    /// `InvalidInput`).
    ///
    /// ```
    /// use std::time::Duration;
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// socket.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    /// assert_eq!(socket.read_timeout().unwrap(), Some(Duration::from_secs(1)));
    /// ```
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.source.set_timeout(Direction::Read, timeout)
    }

    /// The receive timeout.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert_eq!(socket.read_timeout().unwrap(), None);
    /// ```
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.source.timeout(Direction::Read))
    }

    /// Sets the timeout of blocking sends.
    ///
    /// ```
    /// use std::time::Duration;
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// socket.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    /// assert_eq!(socket.write_timeout().unwrap(), Some(Duration::from_secs(1)));
    /// ```
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.source.set_timeout(Direction::Write, timeout)
    }

    /// The send timeout.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert_eq!(socket.write_timeout().unwrap(), None);
    /// ```
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.source.timeout(Direction::Write))
    }

    /// Sets `SO_BROADCAST`.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// socket.set_broadcast(true).unwrap();
    /// assert!(socket.broadcast().unwrap());
    /// ```
    pub fn set_broadcast(&self, broadcast: bool) -> io::Result<()> {
        self.source.socket().set_broadcast(broadcast)
    }

    /// Whether `SO_BROADCAST` is set.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(!socket.broadcast().unwrap());
    /// ```
    pub fn broadcast(&self) -> io::Result<bool> {
        self.source.socket().broadcast()
    }

    /// Sets `IP_TTL`.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// socket.set_ttl(9).unwrap();
    /// assert_eq!(socket.ttl().unwrap(), 9);
    /// ```
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.source.socket().set_ttl(ttl)
    }

    /// The socket's `IP_TTL`.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(socket.ttl().unwrap() > 0);
    /// ```
    pub fn ttl(&self) -> io::Result<u32> {
        self.source.socket().ttl()
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(socket.take_error().unwrap().is_none());
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.source.socket().take_error()
    }

    /// Another handle to the same socket.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let other = socket.try_clone().unwrap();
    /// assert_eq!(other.local_addr().unwrap(), socket.local_addr().unwrap());
    /// ```
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        Ok(self.clone())
    }

    /// A select arm ready when a datagram may be waiting (see [`Ready`]).
    ///
    /// ```
    /// use smarm::Selectable;
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let _ = socket.readable().is_ready();
    /// ```
    pub fn readable(&self) -> Ready<'_> {
        Ready::new(&*self.source, Direction::Read)
    }

    /// One receive that never waits: `WouldBlock` when nothing is there.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let error = socket.try_recv_from(&mut [0u8; 8]).unwrap_err();
    /// assert_eq!(error.kind(), std::io::ErrorKind::WouldBlock);
    /// ```
    pub fn try_recv_from(&self, buffer: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.source.try_call(Direction::Read, |socket| socket.recv_from(buffer))
    }
}

impl From<std::net::UdpSocket> for UdpSocket {
    /// Wraps a std socket, making it nonblocking.
    ///
    /// ```
    /// let socket = smarm::net::UdpSocket::from(std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
    /// assert!(socket.local_addr().is_ok());
    /// ```
    fn from(socket: std::net::UdpSocket) -> UdpSocket {
        // Only fails on a descriptor that is not a socket: then every later
        // call reports that error itself.
        let _ = socket.set_nonblocking(true);
        UdpSocket { source: Source::new(socket) }
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.source.fd()
    }
}

impl AsFd for UdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.source.socket().as_fd()
    }
}
