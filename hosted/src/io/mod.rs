//! Blocking io from processes without blocking their worker.
//!
//! - [`block_on_io`] runs a blocking closure on one of the runtime's io
//!   threads and parks the calling process until it returns. The runtime
//!   counts the job as outstanding work, so it stays open until the job is
//!   done even if its process was stopped meanwhile.
//! - [`wait_readable`] / [`wait_writable`] park the calling process until a
//!   (nonblocking) file descriptor is ready, through one epoll instance per
//!   runtime, polled by the runtime's own drivers (see the `reactor` module
//!   doc). [`read`] and [`write_all`] wrap the usual try-then-wait loop
//!   around them. For sockets, prefer [`crate::net`]: its types park on
//!   their own, register once and cache their readiness.
//!
//! Every completion is an epoch-stamped wake of exactly the wait that asked
//! for it. A process stopped while it waits on an fd leaves nothing behind:
//! neither its waiter entry nor the kernel registration.
//!
//! A TCP round trip on the loopback interface: a server process accepts and
//! echoes, a client process connects (on an io thread: `connect` blocks)
//! and checks the echo. Both park on readiness; the worker is never
//! blocked.
//!
//! ```
//! use std::io::ErrorKind;
//! use std::net::{TcpListener, TcpStream};
//! use std::os::unix::io::AsRawFd;
//!
//! let echoed = smarm::run(|| {
//!     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     listener.set_nonblocking(true).unwrap();
//!     let server = smarm::spawn(move || {
//!         let mut stream = loop {
//!             match listener.accept() {
//!                 Ok((stream, _)) => break stream,
//!                 Err(e) if e.kind() == ErrorKind::WouldBlock => {
//!                     smarm::io::wait_readable(listener.as_raw_fd()).unwrap()
//!                 }
//!                 Err(e) => panic!("accept: {e}"),
//!             }
//!         };
//!         stream.set_nonblocking(true).unwrap();
//!         let mut buffer = [0u8; 64];
//!         let n = smarm::io::read(&mut stream, &mut buffer).unwrap();
//!         smarm::io::write_all(&mut stream, &buffer[..n]).unwrap();
//!     })
//!     .unwrap();
//!     let mut client = smarm::io::block_on_io(move || TcpStream::connect(addr)).unwrap().unwrap();
//!     client.set_nonblocking(true).unwrap();
//!     smarm::io::write_all(&mut client, b"ping").unwrap();
//!     let mut buffer = [0u8; 4];
//!     let mut filled = 0;
//!     while filled < 4 {
//!         filled += smarm::io::read(&mut client, &mut buffer[filled..]).unwrap();
//!     }
//!     server.join().unwrap();
//!     buffer
//! });
//! assert_eq!(&echoed, b"ping");
//! ```
#![deny(unsafe_code)]

pub(crate) mod edge;
pub(crate) mod pool;
pub(crate) mod reactor;

use std::fmt;
use std::io::{Read, Write};
use std::os::unix::io::{AsRawFd, RawFd};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};

use smarm_core::{begin_wait, park, retire_wait, NoPreempt, Pid, Waker};
use smarm_platform::PollError;

use crate::context::{self, HostContext};
use pool::{Job, NoThread};
use reactor::{Direction, RegisterError};

/// Why an io wait could not be made.
#[derive(Debug)]
pub enum IoError {
    /// The call parks the calling process and was made outside any process.
    NotInProcess,
    /// The calling process belongs to a runtime that was not started by
    /// this crate (`smarm::run`, [`crate::Engine`]), which has no io
    /// services: start it with one of those.
    NotHosted,
    /// Another process already waits for the same readiness on this fd:
    /// one waiter per fd and direction (give each connection one owner).
    Busy(RawFd),
    /// The poller refused the fd (e.g. a regular file, which epoll does not
    /// support, or a closed fd).
    Poll(PollError),
    /// No io thread could be started and none is running: the OS is out of
    /// threads (`ulimit -u`) or the runtime is shutting down.
    NoThread(std::io::Error),
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoError::NotInProcess => f.write_str("io wait outside a process: call it from a process"),
            IoError::NotHosted => {
                f.write_str("this runtime has no io services: start it with smarm::run or smarm::Engine")
            }
            IoError::Busy(fd) => {
                write!(f, "another process already waits on fd {fd} for the same readiness")
            }
            IoError::Poll(error) => write!(f, "cannot wait on the fd: {error}"),
            IoError::NoThread(error) => write!(f, "no io thread could be started: {error}"),
        }
    }
}

impl std::error::Error for IoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            IoError::Poll(error) => Some(error),
            IoError::NoThread(error) => Some(error),
            _ => None,
        }
    }
}

impl From<IoError> for std::io::Error {
    fn from(error: IoError) -> std::io::Error {
        match error {
            IoError::Poll(PollError::Os(code)) => std::io::Error::from_raw_os_error(code),
            IoError::NoThread(error) => error,
            IoError::Busy(_) => std::io::Error::new(std::io::ErrorKind::ResourceBusy, error),
            IoError::NotInProcess | IoError::NotHosted => {
                std::io::Error::new(std::io::ErrorKind::Unsupported, error)
            }
            other => std::io::Error::other(other),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Where a blocking job leaves its result and finds whom to wake.
struct Completion<R> {
    result: Option<std::thread::Result<R>>,
    waker: Option<Waker>,
}

/// Runs the blocking closure `f` on an io thread of the calling process's
/// runtime and parks the process until it returns; the worker goes on
/// running other processes meanwhile.
///
/// If `f` panics, the panic resumes in the calling process (which then ends
/// as `Panicked` with the same message, unless it catches it). If the
/// process is stopped while it waits, `f` still runs to completion on its
/// io thread — a blocking call cannot be interrupted — and its result is
/// dropped there; the runtime stays open until it is done.
///
/// Outside a process there is nothing to park, so `f` simply runs on the
/// calling thread.
///
/// ```
/// let n = smarm::run(|| smarm::io::block_on_io(|| std::fs::read_dir(".").map(|d| d.count()).unwrap_or(0)));
/// assert!(n.unwrap() > 0);
/// ```
pub fn block_on_io<R, F>(f: F) -> Result<R, IoError>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    if smarm_core::self_pid().is_none() {
        return Ok(f());
    }
    let context = context::current().ok_or(IoError::NotHosted)?;
    let completion = Arc::new(Mutex::new(Completion::<R> { result: None, waker: None }));
    let job_completion = completion.clone();
    let job_context = context.clone();
    let job: Job = Box::new(move || {
        let result = panic::catch_unwind(AssertUnwindSafe(f));
        let waker = {
            let mut completion = lock(&job_completion);
            completion.result = Some(result);
            completion.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        // Last: the wake above already holds the runtime open (the process
        // is live), and if the process is gone this may be what finishes it.
        job_context.external_done();
    });
    {
        // Not preempted while holding the pool's std lock.
        let _no_preempt = NoPreempt::new();
        context.runtime.external_begin();
        if let Err((job, NoThread(error))) = context.pool.submit(job) {
            drop(job);
            context.external_done();
            return Err(IoError::NoThread(error));
        }
    }
    loop {
        let waker = begin_wait().map_err(|_| IoError::NotInProcess)?;
        let no_preempt = NoPreempt::new();
        let mut guard = lock(&completion);
        if let Some(result) = guard.result.take() {
            drop(guard);
            drop(no_preempt);
            retire_wait();
            return match result {
                Ok(value) => Ok(value),
                Err(payload) => panic::resume_unwind(payload),
            };
        }
        guard.waker = Some(waker);
        drop(guard);
        drop(no_preempt);
        park();
    }
}

/// Parks the calling process until `fd` is readable (or hung up, or in
/// error: the next read will say which). `fd` should be nonblocking; call
/// this after a read returned `WouldBlock`.
///
/// Errors: [`IoError::NotInProcess`], [`IoError::NotHosted`],
/// [`IoError::Busy`] if another process waits to read the same fd,
/// [`IoError::Poll`] if epoll refuses the fd.
pub fn wait_readable(fd: RawFd) -> Result<(), IoError> {
    wait(fd, Direction::Read)
}

/// Parks the calling process until `fd` is writable (or in error). See
/// [`wait_readable`].
pub fn wait_writable(fd: RawFd) -> Result<(), IoError> {
    wait(fd, Direction::Write)
}

/// Removes the waiter entry of a wait that did not end normally.
struct FdGuard<'a> {
    context: &'a HostContext,
    fd: RawFd,
    direction: Direction,
    pid: Pid,
    epoch: u32,
    armed: bool,
}

impl Drop for FdGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _no_preempt = NoPreempt::new();
            self.context.reactor.cancel(self.fd, self.direction, self.pid, self.epoch);
        }
    }
}

fn wait(fd: RawFd, direction: Direction) -> Result<(), IoError> {
    if smarm_core::self_pid().is_none() {
        return Err(IoError::NotInProcess);
    }
    let context = context::current().ok_or(IoError::NotHosted)?;
    // An observation point: a pending stop unwinds here, before anything
    // is registered.
    let waker = begin_wait().map_err(|_| IoError::NotInProcess)?;
    let (pid, epoch) = (waker.pid(), waker.epoch());
    let registered = {
        let _no_preempt = NoPreempt::new();
        context.reactor.register(fd, direction, waker)
    };
    if let Err(error) = registered {
        retire_wait();
        return Err(match error {
            RegisterError::Busy => IoError::Busy(fd),
            RegisterError::Poll(error) => IoError::Poll(error),
        });
    }
    // Armed only now that there is something to remove; a stop observed in
    // `park` unwinds through it.
    let mut guard = FdGuard { context: &context, fd, direction, pid, epoch, armed: true };
    park();
    // A normal return from `park` is our wake, which a poll delivered
    // after taking the waiter out of the table: nothing to remove.
    guard.armed = false;
    Ok(())
}

/// Reads from a nonblocking `source` into `buffer`, parking the calling
/// process while no data is available. Returns what `read` returned (0 at
/// end of stream).
pub fn read<S: Read + AsRawFd>(source: &mut S, buffer: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match source.read(buffer) {
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                wait_readable(source.as_raw_fd())?;
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Writes all of `data` to a nonblocking `sink`, parking the calling
/// process while the sink is full.
pub fn write_all<S: Write + AsRawFd>(sink: &mut S, mut data: &[u8]) -> std::io::Result<()> {
    while !data.is_empty() {
        match sink.write(data) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(written) => data = &data[written..],
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                wait_writable(sink.as_raw_fd())?;
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// File descriptors some process of the calling process's runtime is
/// waiting on right now (diagnostics and tests); `None` outside a hosted
/// runtime's process.
pub fn waited_fds() -> Option<usize> {
    smarm_core::self_pid()?;
    Some(context::current()?.reactor.waited_fds())
}
