//! The few socket calls std does not offer: a nonblocking TCP connect, its
//! pending error, a listener's backlog, and `poll(2)` on one descriptor.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::io::RawFd;
use std::time::Duration;

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// A socket address in the kernel's layout.
fn raw_address(address: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all zeroes is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { MaybeUninit::zeroed().assume_init() };
    let length = match address {
        SocketAddr::V4(v4) => {
            let raw = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for every
            // sockaddr type; the write stays inside `storage`.
            unsafe { (&raw mut storage).cast::<libc::sockaddr_in>().write(raw) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let raw = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { (&raw mut storage).cast::<libc::sockaddr_in6>().write(raw) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, length as libc::socklen_t)
}

/// Starts a nonblocking TCP connect to `address`. Returns the socket and
/// whether the connection is still in progress (wait for writability,
/// then read [`take_error`]).
pub(crate) fn start_connect(address: &SocketAddr) -> io::Result<(OwnedFd, bool)> {
    let domain = if address.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: socket(2) has no memory-safety preconditions.
    let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    let (storage, length) = raw_address(address);
    loop {
        // SAFETY: `storage` holds a valid address of `length` bytes.
        let result = unsafe { libc::connect(fd, (&raw const storage).cast(), length) };
        if result == 0 {
            return Ok((socket, false));
        }
        let error = last_error();
        match error.raw_os_error() {
            Some(libc::EINPROGRESS) => return Ok((socket, true)),
            Some(libc::EINTR) => continue,
            _ => return Err(error),
        }
    }
}

/// The socket's pending error (`SO_ERROR`), cleared by reading it.
/// How many connections a listener's accept queue holds before the kernel
/// drops new handshakes (the client then retries after a second or more).
/// std listens with 128; a server taking a burst of thousands of
/// connections needs more. The kernel caps it at `net.core.somaxconn`.
pub(crate) const LISTEN_BACKLOG: libc::c_int = 4096;

/// Sets the accept-queue length of a socket that already listens: Linux
/// takes a second `listen(2)` on a listening socket as a new backlog.
pub(crate) fn set_backlog(fd: RawFd, backlog: libc::c_int) -> io::Result<()> {
    // SAFETY: listen(2) reads no memory; a bad descriptor is an error.
    if unsafe { libc::listen(fd, backlog) } == 0 {
        Ok(())
    } else {
        Err(last_error())
    }
}

pub(crate) fn take_error(fd: RawFd) -> io::Result<Option<io::Error>> {
    let mut value: libc::c_int = 0;
    let mut length = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `length` are valid for writes of their sizes.
    let result = unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, (&raw mut value).cast(), &mut length)
    };
    if result < 0 {
        return Err(last_error());
    }
    Ok((value != 0).then(|| io::Error::from_raw_os_error(value)))
}

/// Blocks the calling thread in `poll(2)` until `fd` is readable (or
/// writable, `readable == false`), hung up or in error, or `timeout`
/// passes. Returns whether it became ready.
pub(crate) fn poll_one(fd: RawFd, readable: bool, timeout: Option<Duration>) -> io::Result<bool> {
    let events = if readable { libc::POLLIN | libc::POLLRDHUP } else { libc::POLLOUT };
    let mut poll = libc::pollfd { fd, events, revents: 0 };
    let timeout_ms = match timeout {
        None => -1,
        Some(timeout) => timeout.as_nanos().div_ceil(1_000_000).min(libc::c_int::MAX as u128) as libc::c_int,
    };
    // SAFETY: `poll` is one valid pollfd.
    let result = unsafe { libc::poll(&mut poll, 1, timeout_ms) };
    if result < 0 {
        let error = last_error();
        if error.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(error);
    }
    Ok(result > 0)
}

/// `read(2)` into a buffer that need not be initialized (what an async
/// reader hands over), so no byte is zeroed first. Returns how many bytes
/// the kernel wrote at the start of `buffer`.
#[cfg(feature = "tokio-io")]
pub(crate) fn read_uninit(fd: RawFd, buffer: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buffer`, writable memory we
    // hold exclusively; read(2) writes at most `len` bytes into it and never
    // reads it.
    let read = unsafe { libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len()) };
    if read < 0 {
        return Err(last_error());
    }
    // Non-negative and at most `buffer.len()`: fits a usize.
    Ok(read as usize)
}
