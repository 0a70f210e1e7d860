//! One socket shared by its handles: the descriptor, its cached readiness,
//! its one edge registration (made on the first wait, removed on drop) and
//! its timeouts; and the call loop every blocking method goes through.
//!
//! A call is tried while the cached readiness says it may succeed; when
//! it would block, the direction's readiness is cleared and the caller
//! waits: a process parks until the socket's edge (or its timer), a plain
//! thread blocks in `poll(2)` on the descriptor.
#![deny(unsafe_code)]

use std::io;
use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smarm_core::kernel::wait::{Wait, Waiter};
use smarm_core::NoPreempt;

use crate::context::{self, HostContext};
use crate::io::edge::{Direction, Readiness, Snapshot};

use super::sys;

/// No timeout, in a timeout word.
const NO_TIMEOUT: u64 = u64::MAX;

/// The edge registration of a socket, with the runtime it belongs to.
#[derive(Debug)]
struct Registration {
    context: Arc<HostContext>,
    token: u64,
}

/// A socket and what its handles share.
#[derive(Debug)]
pub(crate) struct Source<S: AsRawFd> {
    socket: S,
    readiness: Arc<Readiness>,
    /// The registration, if the socket ever waited through a poller.
    registration: Mutex<Option<Registration>>,
    /// The address of the context registered with (0: none): the fast
    /// check of every wait.
    registered_with: AtomicUsize,
    /// Read and write timeouts in nanoseconds, [`NO_TIMEOUT`] for none.
    timeouts: [AtomicU64; 2],
}

/// Whether a successful call drained the direction's readiness.
pub(crate) type Drained<R> = fn(&R, usize) -> bool;

/// A stream read or write that moved less than asked drained the socket.
pub(crate) fn short<R: Copy + Into<usize>>(done: &R, asked: usize) -> bool {
    let done: usize = (*done).into();
    done > 0 && done < asked
}

/// A call whose success says nothing about what is left.
pub(crate) fn never<R>(_: &R, _: usize) -> bool {
    false
}

impl<S: AsRawFd> Source<S> {
    /// Wraps `socket`, which must be nonblocking already.
    pub(crate) fn new(socket: S) -> Arc<Source<S>> {
        Arc::new(Source {
            socket,
            readiness: Arc::new(Readiness::default()),
            registration: Mutex::new(None),
            registered_with: AtomicUsize::new(0),
            timeouts: [AtomicU64::new(NO_TIMEOUT), AtomicU64::new(NO_TIMEOUT)],
        })
    }

    pub(crate) fn socket(&self) -> &S {
        &self.socket
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// Sets the timeout of `direction`'s blocking calls. A zero duration is
    /// refused, as std refuses it.
    pub(crate) fn set_timeout(&self, direction: Direction, timeout: Option<Duration>) -> io::Result<()> {
        let nanos = match timeout {
            None => NO_TIMEOUT,
            Some(timeout) if timeout.is_zero() => {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot set a zero timeout"));
            }
            Some(timeout) => u64::try_from(timeout.as_nanos()).unwrap_or(NO_TIMEOUT - 1).min(NO_TIMEOUT - 1),
        };
        // Relaxed: a setting read by later calls, guarding no other data.
        self.timeouts[direction as usize].store(nanos, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn timeout(&self, direction: Direction) -> Option<Duration> {
        match self.timeouts[direction as usize].load(Ordering::Relaxed) {
            NO_TIMEOUT => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    /// Runs `call` until it does not say `WouldBlock`, waiting for
    /// `direction` in between (up to the direction's timeout: then
    /// `TimedOut`). `drained(result, asked)` says whether a success left
    /// nothing behind (then the readiness is cleared without an extra
    /// `EAGAIN`).
    pub(crate) fn call<R>(
        &self,
        direction: Direction,
        asked: usize,
        drained: Drained<R>,
        mut call: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        let mut deadline = None;
        loop {
            let seen = self.readiness.snapshot();
            if seen.is_ready(direction) {
                match call(&self.socket) {
                    Ok(result) => {
                        if drained(&result, asked) {
                            self.readiness.clear(direction, seen);
                        }
                        return Ok(result);
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        self.readiness.clear(direction, seen);
                    }
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(error) => return Err(error),
                }
            }
            let deadline = *deadline.get_or_insert_with(|| {
                self.timeout(direction).map(|timeout| std::time::Instant::now() + timeout)
            });
            self.wait(direction, deadline)?;
        }
    }

    /// One try of `call`, never waiting: `WouldBlock` clears the cached
    /// readiness (so a select on the socket waits for the next edge).
    pub(crate) fn try_call<R>(
        &self,
        direction: Direction,
        mut call: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        let seen = self.readiness.snapshot();
        let result = call(&self.socket);
        if matches!(&result, Err(error) if error.kind() == io::ErrorKind::WouldBlock) {
            self.readiness.clear(direction, seen);
        }
        result
    }

    /// Waits until `direction` may be ready or `deadline` passes (then
    /// `TimedOut`).
    pub(crate) fn wait(&self, direction: Direction, deadline: Option<std::time::Instant>) -> io::Result<()> {
        if smarm_core::self_pid().is_none() {
            return self.wait_thread(direction, deadline);
        }
        self.register()?;
        let deadline = deadline.map(|deadline| {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            smarm_core::now().map(|now| now + left)
        });
        let Ok(mut wait) = Wait::begin() else {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "cannot wait here"));
        };
        if let Some(Some(deadline)) = deadline {
            if wait.expired(Some(deadline)) {
                wait.retire();
                return Err(io::ErrorKind::TimedOut.into());
            }
            wait.wake_at(deadline);
        }
        let waiter = wait.waiter();
        let ready = {
            // No preemption while the readiness's lock is held.
            let _no_preempt = NoPreempt::new();
            self.readiness.add_waiter(direction, &waiter)
        };
        if ready {
            wait.retire();
            return Ok(());
        }
        // Takes the waiter out again however the wait ends (a stop
        // unwinds through it): nothing is left behind.
        let _remove = RemoveWaiter { readiness: &self.readiness, direction, waiter };
        wait.park();
        if self.readiness.snapshot().is_ready(direction) {
            return Ok(());
        }
        match deadline {
            Some(Some(deadline)) if smarm_core::now().is_some_and(|now| now >= deadline) => {
                Err(io::ErrorKind::TimedOut.into())
            }
            // A spurious return: the caller loops and waits again.
            _ => Ok(()),
        }
    }

    fn wait_thread(&self, direction: Direction, deadline: Option<std::time::Instant>) -> io::Result<()> {
        let timeout = match deadline {
            None => None,
            Some(deadline) => {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                Some(left)
            }
        };
        if sys::poll_one(self.fd(), direction == Direction::Read, timeout)? {
            let (readable, writable) = (direction == Direction::Read, direction == Direction::Write);
            self.readiness.set(readable, writable);
            Ok(())
        } else if deadline.is_some() {
            Err(io::ErrorKind::TimedOut.into())
        } else {
            Ok(())
        }
    }

    /// Makes the socket's edge registration with the calling process's
    /// runtime: once, or again when the socket is used from another
    /// runtime than the one it last waited through (the registration
    /// moves; a socket waits through one runtime at a time).
    fn register(&self) -> io::Result<()> {
        let context = context::current().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "this runtime has no io services: start it with smarm::run or smarm::Engine",
            )
        })?;
        let address = Arc::as_ptr(&context) as usize;
        // Relaxed: a hint for the fast path; the lock below decides.
        if self.registered_with.load(Ordering::Relaxed) == address {
            return Ok(());
        }
        let _no_preempt = NoPreempt::new();
        let mut registration = self.registration.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(old) = registration.as_ref() {
            if Arc::ptr_eq(&old.context, &context) {
                return Ok(());
            }
        }
        if let Some(old) = registration.take() {
            old.context.reactor.edge.deregister(&old.context.platform, self.fd(), old.token);
            self.registered_with.store(0, Ordering::Relaxed);
            // Whatever the old poller had not reported yet: try again.
            self.readiness.set(true, true);
        }
        context.reactor.activate();
        match context.reactor.edge.register(&context.platform, self.fd(), &self.readiness) {
            Ok(token) => {
                *registration = Some(Registration { context, token });
                self.registered_with.store(address, Ordering::Relaxed);
                Ok(())
            }
            Err(smarm_platform::PollError::Os(code)) => Err(io::Error::from_raw_os_error(code)),
            Err(error) => Err(io::Error::new(io::ErrorKind::InvalidInput, error)),
        }
    }

    /// The readiness arm of `direction`, for a select.
    pub(crate) fn arm_is_ready(&self, direction: Direction) -> bool {
        self.readiness.snapshot().is_ready(direction)
    }

    /// Registers a select's `waiter` for `direction`; `true` if the arm is
    /// ready (or cannot be waited on: the next call says why).
    pub(crate) fn arm_register(&self, direction: Direction, waiter: &Waiter) -> bool {
        if waiter.pid().is_none() || self.register().is_err() {
            // A plain thread has no poller to wake it: it polls the
            // descriptor once, and a select spins on it.
            return waiter.pid().is_none() && self.poll_now(direction) || waiter.pid().is_some();
        }
        let _no_preempt = NoPreempt::new();
        self.readiness.add_waiter(direction, waiter)
    }

    fn poll_now(&self, direction: Direction) -> bool {
        sys::poll_one(self.fd(), direction == Direction::Read, Some(Duration::ZERO)).unwrap_or(true)
    }

    /// The cached readiness.
    pub(crate) fn snapshot(&self) -> Snapshot {
        self.readiness.snapshot()
    }

    /// Clears `direction`'s cached readiness unless an edge came since
    /// `seen`.
    pub(crate) fn clear(&self, direction: Direction, seen: Snapshot) {
        self.readiness.clear(direction, seen);
    }
}

impl<S: AsRawFd> Drop for Source<S> {
    fn drop(&mut self) {
        let registration = self.registration.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(registration) = registration.take() {
            let reactor = &registration.context.reactor;
            reactor.edge.deregister(&registration.context.platform, self.fd(), registration.token);
        }
        // Nobody can wait on a socket whose last handle is gone; wake any
        // stale registration anyway, so nothing can hang on it.
        self.readiness.close();
    }
}

/// Removes a wait's waiter when the wait ends.
struct RemoveWaiter<'a> {
    readiness: &'a Readiness,
    direction: Direction,
    waiter: Waiter,
}

impl Drop for RemoveWaiter<'_> {
    fn drop(&mut self) {
        // The bit was clear when the waiter was left (under the lock), and
        // only an edge sets it: that edge takes this direction's waiters
        // (if it has not yet, the wake it gives is stale, and harmless).
        // The lock is needed only after a timer or a stop.
        if self.readiness.snapshot().is_ready(self.direction) {
            return;
        }
        let _no_preempt = NoPreempt::new();
        self.readiness.remove_waiter(self.direction, &self.waiter);
    }
}

#[cfg(any(feature = "futures-io", feature = "tokio-io"))]
impl<S: AsRawFd> Source<S> {
    /// One try of `call` for a future's `poll`: run while the cached
    /// readiness says it may succeed; when it would block, leave the
    /// task's waker on `direction` (made from `cx`) and say `Pending`. The
    /// same registration and readiness serve the blocking calls.
    pub(crate) fn poll_call<R>(
        &self,
        cx: &mut std::task::Context<'_>,
        direction: Direction,
        asked: usize,
        drained: Drained<R>,
        mut call: impl FnMut(&S) -> io::Result<R>,
    ) -> std::task::Poll<io::Result<R>> {
        use std::task::Poll;
        loop {
            let seen = self.readiness.snapshot();
            if seen.is_ready(direction) {
                match call(&self.socket) {
                    Ok(result) => {
                        if drained(&result, asked) {
                            self.readiness.clear(direction, seen);
                        }
                        return Poll::Ready(Ok(result));
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        self.readiness.clear(direction, seen);
                    }
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(error) => return Poll::Ready(Err(error)),
                }
            }
            if let Err(error) = self.register() {
                // No poller to wake the task (outside any runtime's
                // process): one direct try, whatever the cache says.
                return Poll::Ready(match call(&self.socket) {
                    Err(would_block) if would_block.kind() == io::ErrorKind::WouldBlock => Err(error),
                    other => other,
                });
            }
            let waiter = Waiter::from_task(cx.waker());
            let ready = {
                let _no_preempt = NoPreempt::new();
                self.readiness.add_waiter(direction, &waiter)
            };
            if !ready {
                return Poll::Pending;
            }
        }
    }
}
