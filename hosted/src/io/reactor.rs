//! The fd reactor: one epoll instance per runtime (the platform's), one
//! poller thread that turns readiness into epoch-stamped wakes.
//!
//! Why a poller thread rather than idle drivers polling: a driver sleeps on
//! its park token (a futex), and a wake for one worker must not depend on
//! some other worker being idle. A dedicated thread blocked in `epoll_wait`
//! delivers readiness the moment it happens, to whichever worker owns the
//! waiting process, through the same `Waker::wake` as every other
//! completion — one hop (poller → target driver), no change to the idle
//! policy. It is started on the first fd wait, so runtimes that never wait
//! on an fd never pay for it.
//!
//! Registrations are per wait and one-shot: a wait adds (or re-arms) the
//! fd with the interests of its current waiters; when an event delivers the
//! last waiter, the poller removes the fd from epoll. So the map holds an
//! fd exactly while some process waits on it, and so does the kernel.
//!
//! Invariant (fd hygiene): an entry's waker for a
//! direction is removed by exactly one of (a) the poller, which then wakes
//! it, or (b) the waiting process's guard, on unwind, which removes it only
//! if it still holds that process's `(pid, epoch)` — and whoever empties an
//! entry removes the kernel registration with it.
#![deny(unsafe_code)]

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use smarm_core::{Pid, Waker};
use smarm_platform::{Event, Interest, Platform, PollError, RawFd};

use smarm_platform::linux::LinuxPlatform;

use super::edge::EdgeTable;

/// Event token of the poller's stop socket.
const STOP_TOKEN: u64 = u64::MAX;
/// Events fetched per `epoll_wait`.
const EVENT_BATCH: usize = 64;

pub(crate) use super::edge::Direction;

/// The waiters of one fd and the token of its current registration.
#[derive(Debug)]
struct Entry {
    token: u64,
    read: Option<Waker>,
    write: Option<Waker>,
}

impl Entry {
    fn slot(&mut self, direction: Direction) -> &mut Option<Waker> {
        match direction {
            Direction::Read => &mut self.read,
            Direction::Write => &mut self.write,
        }
    }

    fn interest(&self) -> Option<Interest> {
        match (self.read.is_some(), self.write.is_some()) {
            (false, false) => None,
            (readable, writable) => Some(Interest { readable, writable }),
        }
    }
}

#[derive(Debug, Default)]
struct Table {
    fds: HashMap<RawFd, Entry>,
    /// Registration counter, part of every token: an event that was already
    /// fetched for a registration since removed finds a different token and
    /// is ignored.
    sequence: u32,
}

impl Table {
    fn next_token(&mut self, fd: RawFd) -> u64 {
        // 31 bits: the top bit of a token marks an edge registration.
        self.sequence = self.sequence.wrapping_add(1) & 0x7fff_ffff;
        (u64::from(self.sequence) << 32) | u64::from(fd as u32)
    }
}

/// Why registering a wait failed.
#[derive(Debug)]
pub(crate) enum RegisterError {
    /// Another process already waits for this direction on this fd.
    Busy,
    /// The poller could not be registered or the fd refused.
    Poll(PollError),
    /// The poller thread could not be started.
    Poller(std::io::Error),
}

struct Poller {
    stop: UnixStream,
    thread: JoinHandle<()>,
}

/// One runtime's reactor.
pub(crate) struct Reactor {
    platform: Arc<LinuxPlatform>,
    table: Arc<Mutex<Table>>,
    /// The sockets' edge registrations, polled by the same loop.
    pub(crate) edge: Arc<EdgeTable>,
    poller: Mutex<Option<Poller>>,
}

impl fmt::Debug for Reactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reactor").field("waited_fds", &lock(&self.table).fds.len()).finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing unwinds while these locks are held (no user code runs under
    // them); recover from poison rather than panic.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Reactor {
    pub(crate) fn new(platform: Arc<LinuxPlatform>) -> Reactor {
        Reactor {
            platform,
            table: Arc::new(Mutex::new(Table::default())),
            edge: Arc::new(EdgeTable::default()),
            poller: Mutex::new(None),
        }
    }

    /// Starts the poller thread if it is not running.
    pub(crate) fn ensure_poller(&self) -> Result<(), RegisterError> {
        let mut poller = lock(&self.poller);
        if poller.is_some() {
            return Ok(());
        }
        let (stop, stop_listener) = UnixStream::pair().map_err(RegisterError::Poller)?;
        self.platform
            .poll_register(stop_listener.as_raw_fd(), STOP_TOKEN, Interest::READABLE)
            .map_err(RegisterError::Poll)?;
        let platform = self.platform.clone();
        let table = self.table.clone();
        let edge = self.edge.clone();
        let thread = std::thread::Builder::new()
            .name("smarm-poller".into())
            .spawn(move || poll_loop(&platform, &table, &edge, stop_listener))
            .map_err(RegisterError::Poller)?;
        *poller = Some(Poller { stop, thread });
        Ok(())
    }

    /// Registers `waker` as the waiter for `direction` on `fd` and arms the
    /// kernel registration.
    pub(crate) fn register(
        &self,
        fd: RawFd,
        direction: Direction,
        waker: Waker,
    ) -> Result<(), RegisterError> {
        self.ensure_poller()?;
        let mut table = lock(&self.table);
        let table = &mut *table;
        if let Some(entry) = table.fds.get_mut(&fd) {
            if entry.slot(direction).is_some() {
                return Err(RegisterError::Busy);
            }
            *entry.slot(direction) = Some(waker);
            let interest = entry.interest().unwrap_or(Interest::READABLE);
            let armed = match self.platform.poll_modify(fd, entry.token, interest) {
                // The fd was closed (and its number perhaps reused) while
                // another waiter was parked on it: the kernel dropped the
                // registration. Start a fresh one.
                Err(PollError::NotRegistered) => {
                    table.sequence = table.sequence.wrapping_add(1) & 0x7fff_ffff;
                    let token = (u64::from(table.sequence) << 32) | u64::from(fd as u32);
                    entry.token = token;
                    self.platform.poll_register(fd, token, interest)
                }
                other => other,
            };
            if let Err(error) = armed {
                *entry.slot(direction) = None;
                if entry.interest().is_none() {
                    table.fds.remove(&fd);
                }
                return Err(RegisterError::Poll(error));
            }
            return Ok(());
        }
        let token = table.next_token(fd);
        let interest = match direction {
            Direction::Read => Interest::READABLE,
            Direction::Write => Interest::WRITABLE,
        };
        self.platform.poll_register(fd, token, interest).map_err(RegisterError::Poll)?;
        let mut entry = Entry { token, read: None, write: None };
        *entry.slot(direction) = Some(waker);
        table.fds.insert(fd, entry);
        Ok(())
    }

    /// The waiting process's unwind path: removes its waiter for
    /// `direction` on `fd` if it is still `(pid, epoch)`, and the kernel
    /// registration with the entry's last waiter.
    pub(crate) fn cancel(&self, fd: RawFd, direction: Direction, pid: Pid, epoch: u32) {
        let mut table = lock(&self.table);
        let Some(entry) = table.fds.get_mut(&fd) else { return };
        let slot = entry.slot(direction);
        if !slot.as_ref().is_some_and(|waker| waker.pid() == pid && waker.epoch() == epoch) {
            // The poller took it (and woke a wait that no longer exists).
            return;
        }
        *slot = None;
        match entry.interest() {
            Some(interest) => {
                let _ = self.platform.poll_modify(fd, entry.token, interest);
            }
            None => {
                table.fds.remove(&fd);
                let _ = self.platform.poll_deregister(fd);
            }
        }
    }

    /// Stops and joins the poller thread.
    pub(crate) fn shutdown(&self) {
        let poller = lock(&self.poller).take();
        if let Some(mut poller) = poller {
            let _ = poller.stop.write_all(&[1]);
            let _ = poller.thread.join();
        }
    }

    /// Fds with a waiting process (diagnostics).
    pub(crate) fn waited_fds(&self) -> usize {
        lock(&self.table).fds.len()
    }
}

/// The poller thread: waits for readiness, hands each ready waiter its
/// wake, re-arms or removes the registration.
fn poll_loop(platform: &LinuxPlatform, table: &Mutex<Table>, edge: &EdgeTable, stop: UnixStream) {
    let mut events = [Event::default(); EVENT_BATCH];
    let mut wakes: Vec<Waker> = Vec::with_capacity(2 * EVENT_BATCH);
    loop {
        let count = match platform.poll(&mut events, None) {
            Ok(count) => count,
            Err(error) => {
                // Nothing sensible is left to do: an epoll that fails is
                // broken for every waiter. Say so once and stop.
                eprintln!("smarm: the fd poller stopped: {error}");
                return;
            }
        };
        {
            let mut table = lock(table);
            let table = &mut *table;
            for event in &events[..count] {
                if event.token != STOP_TOKEN && edge.dispatch(event) {
                    continue;
                }
                if event.token == STOP_TOKEN {
                    let _ = platform.poll_deregister(stop.as_raw_fd());
                    return;
                }
                let fd = (event.token & 0xffff_ffff) as u32 as RawFd;
                let Some(entry) = table.fds.get_mut(&fd) else { continue };
                if entry.token != event.token {
                    continue;
                }
                if event.readable {
                    wakes.extend(entry.read.take());
                }
                if event.writable {
                    wakes.extend(entry.write.take());
                }
                // One-shot: the registration is disarmed now.
                match entry.interest() {
                    Some(interest) => {
                        let _ = platform.poll_modify(fd, entry.token, interest);
                    }
                    None => {
                        table.fds.remove(&fd);
                        let _ = platform.poll_deregister(fd);
                    }
                }
            }
        }
        for waker in wakes.drain(..) {
            waker.wake();
        }
    }
}
