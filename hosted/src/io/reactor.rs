//! The fd reactor: one epoll instance per runtime (the platform's), polled
//! by the runtime's own drivers — no thread of its own.
//!
//! As Go's scheduler polls its netpoller, a driver with nothing to run
//! parks *in* the poller ([`Reactor::park`]: `epoll_wait` with its next
//! timer as the timeout, interrupted by a wake of its token), and a busy
//! driver takes pending readiness without blocking every few passes
//! ([`Reactor::poll_pending`]). Readiness becomes epoch-stamped wakes,
//! delivered through the ordinary wake path to whichever worker owns the
//! waiting process. At most one driver sleeps in the poller at a time; the
//! others park on their tokens. A runtime that never waited on an fd never
//! polls: its drivers park as before.
//!
//! Two kinds of registration share the epoll set. Sockets of `smarm::net`
//! are registered once, edge-triggered (see the `edge` module). The
//! fd-level waits of `smarm::io` are per wait and one-shot: a wait adds
//! (or re-arms) the fd with the interests of its current waiters; when an
//! event delivers the last waiter, the reactor removes the fd from epoll.
//! So the map holds an fd exactly while some process waits on it, and so
//! does the kernel.
//!
//! Invariant (fd hygiene): an entry's waker for a
//! direction is removed by exactly one of (a) the poll that delivers its
//! event, which then wakes it, or (b) the waiting process's guard, on
//! unwind, which removes it only if it still holds that process's
//! `(pid, epoch)` — and whoever empties an entry removes the kernel
//! registration with it.
#![deny(unsafe_code)]

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use smarm_core::{Pid, Waker};
use smarm_platform::{Event, Interest, Nanos, ParkToken, Platform, PollError, RawFd};

use smarm_platform::linux::LinuxPlatform;

use super::edge::EdgeTable;

/// A busy driver takes pending readiness once every this many passes
/// that did work (and whenever a pass finds nothing to do).
pub(crate) const POLL_EVERY: u32 = 8;
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
}

/// One runtime's reactor.
pub(crate) struct Reactor {
    platform: Arc<LinuxPlatform>,
    table: Arc<Mutex<Table>>,
    /// The sockets' edge registrations, polled by the same loop.
    pub(crate) edge: Arc<EdgeTable>,
    /// Whether any fd was ever registered: until then drivers park
    /// without polling.
    active: AtomicBool,
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
            active: AtomicBool::new(false),
        }
    }

    /// Makes the drivers poll from now on (before the first
    /// registration, so its events cannot be missed by a driver that
    /// parks without polling).
    pub(crate) fn activate(&self) {
        // Release/Acquire: a driver that sees the flag polls the epoll set
        // the registration went into.
        self.active.store(true, Ordering::Release);
    }

    /// Whether drivers poll (some fd was registered).
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Parks a driver on `token` until a wake, `deadline` or readiness —
    /// in the poller if this runtime waits on fds — and delivers the
    /// readiness it got.
    pub(crate) fn park(&self, token: &ParkToken, deadline: Option<Nanos>) {
        if !self.active.load(Ordering::Acquire) {
            self.platform.park(token, deadline);
            return;
        }
        let mut events = [Event::default(); EVENT_BATCH];
        match self.platform.park_polling(token, deadline, &mut events) {
            Ok(count) => self.dispatch(&events[..count]),
            Err(_) => self.platform.park(token, deadline),
        }
    }

    /// Delivers pending readiness without blocking (a busy driver, every
    /// few passes). Returns whether there was any.
    pub(crate) fn poll_pending(&self) -> bool {
        if !self.active.load(Ordering::Acquire) {
            return false;
        }
        let mut events = [Event::default(); EVENT_BATCH];
        match self.platform.poll_pending(&mut events) {
            Ok(0) | Err(_) => false,
            Ok(count) => {
                self.dispatch(&events[..count]);
                true
            }
        }
    }

    /// Hands each event to its socket (edge registrations) or its waiters
    /// (one-shot waits), re-arming or removing the one-shot registrations.
    fn dispatch(&self, events: &[Event]) {
        let mut wakes: Vec<Waker> = Vec::new();
        let mut table = None;
        for event in events {
            if self.edge.dispatch(event) {
                continue;
            }
            let table = table.get_or_insert_with(|| lock(&self.table));
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
                    let _ = self.platform.poll_modify(fd, entry.token, interest);
                }
                None => {
                    table.fds.remove(&fd);
                    let _ = self.platform.poll_deregister(fd);
                }
            }
        }
        drop(table);
        for waker in wakes {
            waker.wake();
        }
    }

    /// Registers `waker` as the waiter for `direction` on `fd` and arms the
    /// kernel registration.
    pub(crate) fn register(
        &self,
        fd: RawFd,
        direction: Direction,
        waker: Waker,
    ) -> Result<(), RegisterError> {
        self.activate();
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

    /// Fds with a waiting process (diagnostics).
    pub(crate) fn waited_fds(&self) -> usize {
        lock(&self.table).fds.len()
    }
}
