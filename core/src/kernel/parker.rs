//! One wait of a plain OS thread: what a thread that is not running a
//! process blocks on where a process would park.
//!
//! A [`ThreadWait`] is made fresh for every wait, so a stale registration
//! (a clone left in a channel after the thread gave up) can only reach a
//! wait that is over. Its state word goes `Waiting` → `Woken` (a waker's
//! compare-and-swap) or `Waiting` → `Retired` (the thread's own, when its
//! deadline passes or it found what it waited for): exactly one of the two
//! wins, so a waker knows whether its wake landed, as a process's
//! epoch-stamped wake tells it. The thread sleeps on a [`ParkToken`]
//! through the host's thread hooks, which remember a wake that arrives
//! before the sleep.
//!
//! A sleep with no deadline first moves `Waiting` → `Sleeping` and counts
//! the thread as asleep for the deadlock look (`kernel::deadlock`); only a
//! wake ends it, and the waker whose compare-and-swap moves `Sleeping` →
//! `Woken` takes the thread out of the count before it goes on, so the
//! count never calls a thread asleep that a wake has already set going.

use smarm_platform::{Nanos, ParkToken};

use crate::kernel::atomic::{AtomicU32, Ordering};
use crate::kernel::deadlock;
use crate::kernel::host::{self, ThreadHooks};

const WAITING: u32 = 0;
const WOKEN: u32 = 1;
const RETIRED: u32 = 2;
/// Asleep with no deadline, counted in the deadlock look's sleeping
/// threads: only a wake ends it, and the waker that moves it to `WOKEN`
/// takes it out of the count.
const SLEEPING: u32 = 3;

/// One wait of one plain thread; shared (in an `Arc`) between the thread
/// and every place it registered with.
/// How long `park` looks for a wake before it sleeps: about the time a
/// process on another core takes to answer, far less than a sleep and
/// its wake-up cost on a loaded machine.
#[cfg(not(loom))]
const SPIN_FOR: Nanos = 10_000;
/// Looks between two clock reads while spinning.
#[cfg(not(loom))]
const LOOKS_PER_CLOCK_READ: u32 = 32;

#[derive(Debug)]
pub(crate) struct ThreadWait {
    state: AtomicU32,
    token: ParkToken,
    hooks: &'static ThreadHooks,
}

impl ThreadWait {
    /// A new wait for the calling thread; `None` if the host cannot block
    /// a thread (no hooks installed, or a host without threads).
    pub(crate) fn new() -> Option<ThreadWait> {
        let hooks = host::thread_hooks()?;
        Some(ThreadWait::with_hooks(hooks))
    }

    /// A new wait parking through `hooks`.
    pub(crate) fn with_hooks(hooks: &'static ThreadHooks) -> ThreadWait {
        ThreadWait { state: AtomicU32::new(WAITING), token: ParkToken::new(), hooks }
    }

    /// The clock a thread's deadline is on (the runtimes' clock).
    pub(crate) fn now(&self) -> Nanos {
        (self.hooks.now)()
    }

    /// Wakes the wait if it is still open; returns whether the wake landed.
    /// Callable from any thread, any number of times: only the first wake
    /// of an open wait lands.
    pub(crate) fn wake(&self) -> bool {
        // AcqRel: the waker's writes before the wake (a queued message)
        // happen before the woken thread's look; Acquire on failure is
        // enough to read who won.
        let mut seen = WAITING;
        loop {
            match self.state.compare_exchange(seen, WOKEN, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                // Gone to sleep meanwhile: wake the sleep instead.
                Err(SLEEPING) => seen = SLEEPING,
                Err(_) => return false,
            }
        }
        if seen == SLEEPING {
            // Out of the sleeping count before this waker goes on, so a
            // deadlock look never counts a thread this wake sets running.
            deadlock::thread_woken();
        }
        (self.hooks.unpark)(&self.token);
        true
    }

    /// Ends the wait without sleeping: a wake that already landed is eaten,
    /// and every later one fails.
    pub(crate) fn retire(&self) {
        let _ = self.state.compare_exchange(WAITING, RETIRED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Looks for a wake for up to [`SPIN_FOR`] (or the deadline, if
    /// sooner), reading the clock every few looks. Whether one landed.
    #[cfg(not(loom))]
    fn spin_until_woken(&self, deadline: Option<Nanos>) -> bool {
        let start = self.now();
        let until =
            deadline.map_or(start.saturating_add(SPIN_FOR), |d| d.min(start.saturating_add(SPIN_FOR)));
        loop {
            for _ in 0..LOOKS_PER_CLOCK_READ {
                if self.state.load(Ordering::Acquire) == WOKEN {
                    return true;
                }
                core::hint::spin_loop();
            }
            if self.now() >= until {
                return false;
            }
        }
    }

    /// Sleeps until a wake lands or `deadline` (on [`now`](Self::now))
    /// passes; the wait is over either way. Returns whether a wake landed.
    pub(crate) fn park(&self, deadline: Option<Nanos>) -> bool {
        // A reply often comes within a few microseconds (a process on
        // another core answering): look for it briefly before paying for
        // a sleep and the waker's syscall to end it. (Not under loom,
        // whose models explore the sleep itself.)
        #[cfg(not(loom))]
        if self.spin_until_woken(deadline) {
            return true;
        }
        if deadline.is_none() {
            // Only a wake can end this sleep: announce it, for the
            // deadlock look. A waker that wins first finds `WOKEN` here.
            if self.state.compare_exchange(WAITING, SLEEPING, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                deadlock::thread_asleep();
            }
        }
        loop {
            // Acquire pairs with the waker's AcqRel.
            if self.state.load(Ordering::Acquire) == WOKEN {
                return true;
            }
            if deadline.is_some_and(|deadline| self.now() >= deadline) {
                // Time is up; a wake that wins the race still counts.
                return self
                    .state
                    .compare_exchange(WAITING, RETIRED, Ordering::AcqRel, Ordering::Acquire)
                    .is_err();
            }
            // A wake between the load and the sleep set the token, so the
            // sleep returns at once; a spurious return loops.
            (self.hooks.park)(&self.token, deadline);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_models;
