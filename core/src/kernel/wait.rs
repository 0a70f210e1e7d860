//! One wait, by a process or by a plain thread: the guard every blocking
//! primitive (channels, select, the mutex, join, inboxes) waits through.
//!
//! A blocking call opens a [`Wait`] before it takes any lock, registers the
//! wait's [`Waiter`] wherever a wake can come from, then [`park`]s — or,
//! when it finds what it waited for while registering, [`retire`]s the wait
//! so every registration it left is stale. Every waiter wakes its wait at
//! most once, and a wake that comes after the wait is over fails harmlessly.
//!
//! The one exception to "before any lock" is a process's wait opened with
//! `Wait::begin_locked`, under the lock of a look that found nothing (the
//! channel's receive): the opening leaves out the stop observation, which
//! could unwind under the lock, and `Wait::observe_and_park_in` makes it
//! after the lock is released, before the park.
//!
//! Inside a process the wait is the process's own: epoch-stamped, no
//! allocation, the process parks and its worker runs others (see
//! [`process::begin_wait`]). On a plain thread — `main`, a thread of your
//! own — it is a fresh thread wait the thread sleeps on, through the host's
//! thread hooks. The one place no wait can be opened is a worker's driver
//! outside any process (a handler actor, a host hook): sleeping there would
//! stall every process of the worker, so [`Wait::begin`] says
//! [`NotInProcess`] (as it does on a host that cannot block threads).
//!
//! [`park`]: Wait::park
//! [`retire`]: Wait::retire

use alloc::sync::Arc;
use core::fmt;

use crate::kernel::current::{self, Here};
use crate::kernel::deadlock::{WaitKind, WaitSite};
use crate::kernel::error::NotInProcess;
use crate::kernel::parker::ThreadWait;
use crate::kernel::pid::Pid;
use crate::kernel::process::{self, Waker};
use crate::kernel::slab::Joiner;
use crate::kernel::time::Instant;

/// Who a wake is for: one wait of a process or of a plain thread. Clones
/// wake the same wait, at most once between them all.
#[derive(Clone)]
pub struct Waiter(Kind);

#[derive(Clone)]
enum Kind {
    Process(Waker),
    Thread(Arc<ThreadWait>),
    /// An async task's waker: a wake calls it (a task re-polls and looks
    /// again, so "landed" means only "delivered").
    Task(core::task::Waker),
}

impl fmt::Debug for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Kind::Process(waker) => f.debug_tuple("Waiter").field(waker).finish(),
            Kind::Thread(_) => f.write_str("Waiter(thread)"),
            Kind::Task(_) => f.write_str("Waiter(task)"),
        }
    }
}

impl Waiter {
    /// Wakes the wait if it is still open; returns whether the wake
    /// landed. Callable from any thread.
    pub fn wake(&self) -> bool {
        match &self.0 {
            Kind::Process(waker) => waker.wake(),
            Kind::Thread(wait) => wait.wake(),
            Kind::Task(waker) => {
                waker.wake_by_ref();
                true
            }
        }
    }

    /// [`wake`](Self::wake) by a registration that is used up (it is
    /// consumed), from the worker record `here` the caller looked up: a
    /// process's registration leaves its runtime handle to
    /// the waking worker, which saves the next registration made there a
    /// reference-count update.
    #[inline(always)]
    pub(crate) fn wake_last_in(self, here: Here) -> bool {
        match self.0 {
            Kind::Process(waker) => waker.wake_last_in(here),
            _ => self.wake(),
        }
    }

    /// The waiting process; `None` for a plain thread.
    pub fn pid(&self) -> Option<Pid> {
        match &self.0 {
            Kind::Process(waker) => Some(waker.pid()),
            Kind::Thread(_) | Kind::Task(_) => None,
        }
    }

    /// Whether `self` and `other` stand for the same wait.
    pub fn same_wait(&self, other: &Waiter) -> bool {
        match (&self.0, &other.0) {
            (Kind::Process(a), Kind::Process(b)) => {
                a.pid() == b.pid() && a.epoch() == b.epoch() && a.same_runtime(b)
            }
            (Kind::Thread(a), Kind::Thread(b)) => Arc::ptr_eq(a, b),
            (Kind::Task(a), Kind::Task(b)) => a.will_wake(b),
            _ => false,
        }
    }

    /// This wait as a joiner of a process (see `JoinHandle::join`).
    pub(crate) fn joiner(&self) -> Joiner {
        match &self.0 {
            Kind::Process(waker) => Joiner::Process(waker.pid(), waker.epoch()),
            Kind::Thread(wait) => Joiner::Thread(wait.clone()),
            Kind::Task(waker) => Joiner::Task(waker.clone()),
        }
    }

    /// The process waker inside, if this is a process's wait.
    pub fn as_process(&self) -> Option<&Waker> {
        match &self.0 {
            Kind::Process(waker) => Some(waker),
            Kind::Thread(_) | Kind::Task(_) => None,
        }
    }

    /// A registration that wakes an async task: what a future's `poll`
    /// leaves wherever a wake can come from (a socket's readiness, a
    /// channel), in place of a process's or a thread's wait.
    pub fn from_task(waker: &core::task::Waker) -> Waiter {
        Waiter(Kind::Task(waker.clone()))
    }
}

/// Whose wait a [`Wait`] is.
enum Own {
    /// The pid and epoch of a process's wait. No counted handle to the
    /// runtime: the wait lives in the frames of its process, which run only
    /// while the runtime is alive; a registration takes one.
    Process(Pid, u32),
    Thread(Arc<ThreadWait>),
}

/// An open wait of the calling process or thread. Opened before any lock
/// is taken; ended by [`park`](Self::park) or [`retire`](Self::retire)
/// (dropping it retires it too, quietly).
#[must_use = "a wait is ended by park or retire"]
pub struct Wait {
    kind: Own,
    /// A thread's deadline (a process's is a timer on its worker).
    deadline: Option<Instant>,
    /// Not ended yet: dropping it retires it. A word, not a `bool`: a
    /// `Wait` is made in one frame and moved to another at once, and the
    /// move reads this field's slot as a word, which a byte written there
    /// stalls until that write retires (on every wait).
    open: usize,
}

impl fmt::Debug for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("Wait");
        match &self.kind {
            Own::Process(pid, epoch) => f.field("pid", pid).field("epoch", epoch),
            Own::Thread(_) => f.field("thread", &true),
        };
        f.field("deadline", &self.deadline).finish()
    }
}

impl Wait {
    /// Opens a wait for the caller: the running process, or else the
    /// calling plain thread. `NotInProcess` on a worker's driver outside a
    /// process, and on a host that cannot block threads. Inside a process
    /// it is an observation point for `request_stop`.
    #[track_caller]
    pub fn begin() -> Result<Wait, NotInProcess> {
        Wait::begin_at(WaitSite::here(WaitKind::Other))
    }

    /// [`begin`](Self::begin), recording `site` — what the wait is for and
    /// the blocking call's line — for a deadlock report. A public blocking
    /// call takes its caller's line with `#[track_caller]` and passes it
    /// down.
    ///
    /// Inlined for a process's wait, so that its caller builds the `Wait`
    /// in place: returned through memory, its fields' narrow writes read
    /// back whole by the caller's move would stall every wait.
    #[inline]
    pub fn begin_at(site: WaitSite) -> Result<Wait, NotInProcess> {
        Wait::begin_in(Here::get(), site)
    }

    /// [`begin_at`](Self::begin_at) on the worker record `here` the caller
    /// already looked up.
    #[inline]
    pub(crate) fn begin_in(here: Here, site: WaitSite) -> Result<Wait, NotInProcess> {
        match process::open_wait_in(here, site, true) {
            Some((pid, epoch)) => Ok(Wait { kind: Own::Process(pid, epoch), deadline: None, open: 1 }),
            None => Wait::begin_on_thread(),
        }
    }

    /// [`begin_at`](Self::begin_at) outside a process.
    #[inline(never)]
    fn begin_on_thread() -> Result<Wait, NotInProcess> {
        if current::registered().is_some() {
            return Err(NotInProcess);
        }
        let wait = ThreadWait::new().ok_or(NotInProcess)?;
        Ok(Wait { kind: Own::Thread(Arc::new(wait)), deadline: None, open: 1 })
    }

    /// A thread's wait parking through `hooks`, for loom models.
    #[cfg(loom)]
    pub(crate) fn on_thread(hooks: &'static crate::kernel::host::ThreadHooks) -> Wait {
        Wait { kind: Own::Thread(Arc::new(ThreadWait::with_hooks(hooks))), deadline: None, open: 1 }
    }

    /// A registration for this wait, to leave wherever a wake can come
    /// from.
    ///
    /// A process's wait is registered from that process (where it parks and
    /// retires too); a registration made anywhere else wakes nothing.
    pub fn waiter(&self) -> Waiter {
        Waiter(match &self.kind {
            Own::Process(pid, epoch) => match process::waker_of_running(*pid, *epoch) {
                Some(waker) => Kind::Process(waker),
                None => {
                    debug_assert!(false, "a process's wait registered outside that process");
                    Kind::Task(core::task::Waker::noop().clone())
                }
            },
            Own::Thread(wait) => Kind::Thread(wait.clone()),
        })
    }

    /// Opens a wait for the running process under the runtime lock the
    /// caller holds, with its registration: [`begin_at`](Self::begin_at)
    /// without observing a stop, which nothing may raise under a lock.
    /// The caller releases the lock, then ends the wait with
    /// [`observe_and_park_in`](Self::observe_and_park_in) (or retires it).
    /// `None` outside a process (a plain thread opens its wait with
    /// `begin_at`, before any lock). `here` is the worker record the caller
    /// looked up.
    ///
    /// The wait may take the epoch the process's word already holds (see
    /// `StateWord::begin_wait_reusing`): the caller must take every wake
    /// as "look again".
    #[inline]
    pub(crate) fn begin_locked(here: Here, site: WaitSite) -> Option<(Wait, Waiter)> {
        let waker = process::open_wait_unobserved(here, site)?;
        let wait = Wait { kind: Own::Process(waker.pid(), waker.epoch()), deadline: None, open: 1 };
        Some((wait, Waiter(Kind::Process(waker))))
    }

    /// Ends a wait opened by [`begin_locked`](Self::begin_locked): observes
    /// the stop that the opening left out (a raised stop retires the wait
    /// as it unwinds), then parks as [`park`](Self::park) does. `here` is
    /// the worker record the caller looked up.
    ///
    /// Taken by reference, not by value: a `Wait` moved into this call
    /// is read back in words right after its fields' narrower writes,
    /// which stalls each park. Ended either way: what is left is dropped
    /// as a closed wait.
    #[inline]
    pub(crate) fn observe_and_park_in(&mut self, here: Here) {
        match &self.kind {
            Own::Process(..) => {
                process::observe_stop_in(here);
                self.open = 0;
                process::park_in(here);
            }
            Own::Thread(wait) => {
                self.open = 0;
                let _ = wait.park(self.deadline.map(Instant::as_nanos));
            }
        }
    }

    /// Whether the caller is a process (it parks) rather than a plain
    /// thread (it sleeps).
    pub fn in_process(&self) -> bool {
        matches!(self.kind, Own::Process(..))
    }

    /// Now, on the clock deadlines are on.
    pub fn now(&self) -> Instant {
        match &self.kind {
            Own::Process(..) => process::now().unwrap_or(Instant::from_nanos(0)),
            Own::Thread(wait) => Instant::from_nanos(wait.now()),
        }
    }

    /// Whether `deadline` has passed.
    pub fn expired(&self, deadline: Option<Instant>) -> bool {
        deadline.is_some_and(|deadline| self.now() >= deadline)
    }

    /// Makes the wait end at `deadline` if nothing wakes it first. For a
    /// process this arms a timer, which fires as a stale no-op if the wait
    /// ends another way.
    pub fn wake_at(&mut self, deadline: Instant) {
        match &self.kind {
            Own::Process(pid, epoch) => {
                let _ = process::wake_wait_at(*pid, *epoch, deadline);
            }
            Own::Thread(_) => self.deadline = Some(deadline),
        }
    }

    /// Parks the process (sleeps the thread) until a wake lands or the
    /// deadline set with [`wake_at`](Self::wake_at) passes. Returns at once
    /// if a wake already landed. Inside a process it is an observation
    /// point for `request_stop`.
    pub fn park(mut self) {
        self.open = 0;
        match &self.kind {
            Own::Process(..) => process::park(),
            Own::Thread(wait) => {
                let _ = wait.park(self.deadline.map(Instant::as_nanos));
            }
        }
    }

    /// Ends the wait without parking: every registration it left is stale
    /// and a wake that already landed is eaten. Inside a process it is an
    /// observation point for `request_stop`.
    pub fn retire(self) {
        self.retire_in(Here::get());
    }

    /// [`retire`](Self::retire) on the worker record `here` the caller
    /// already looked up.
    pub(crate) fn retire_in(mut self, here: Here) {
        self.open = 0;
        match &self.kind {
            Own::Process(..) => process::retire_wait_in(here),
            Own::Thread(wait) => wait.retire(),
        }
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        if self.open != 0 {
            // Not ended (an early return, or an unwind): retire without
            // observing a stop, which could raise inside an unwind.
            match &self.kind {
                Own::Process(..) => process::retire_wait_quietly(),
                Own::Thread(wait) => wait.retire(),
            }
        }
    }
}

/// Whether the caller can wait: it is a process, or a plain thread on a
/// host that can block threads (not a worker's driver outside a process).
pub fn can_wait() -> bool {
    if process::self_pid().is_some() {
        return true;
    }
    current::registered().is_none() && crate::kernel::host::thread_hooks().is_some()
}

/// Now on the runtimes' clock, for a deadline: the running process's
/// runtime clock, or on a plain thread the host's (the same clock). `None`
/// on a worker's driver outside a process, and on a host that cannot block
/// threads.
pub fn now() -> Option<Instant> {
    if let Some(now) = process::now() {
        return Some(now);
    }
    if current::registered().is_some() {
        return None;
    }
    let threads = crate::kernel::host::thread_hooks()?;
    Some(Instant::from_nanos((threads.now)()))
}
