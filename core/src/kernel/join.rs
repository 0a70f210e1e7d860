//! Spawning a process from another ([`spawn`], [`spawn_on`]) and
//! [`JoinHandle<T>`]: the right to a process's outcome and its value.
//!
//! A handle keeps its slot from being reclaimed: the exit reason and the
//! body's return value stay readable until the handle is joined or dropped,
//! whichever comes after the process's finalize.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::any::Any;
use core::fmt;
use core::marker::PhantomData;

use crate::kernel::current::Here;
use crate::kernel::deadlock::{WaitKind, WaitSite};
use crate::kernel::error::{JoinError, SpawnError};
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::process;
use crate::kernel::runtime::Shared;
use crate::kernel::slab::Cold;
use crate::kernel::wait::Wait;
use crate::kernel::worker;

/// Spawns `f` as a process on the caller's worker. Its return value is
/// what [`JoinHandle::join`] gives back.
pub fn spawn<T, F>(f: F) -> Result<JoinHandle<T>, SpawnError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let here = Here::get();
    crate::kernel::coop::spend_in(here);
    let core = worker::core_in(&here).ok_or(SpawnError::NotInProcess)?;
    JoinHandle::spawn_in(&core.shared, core.id, f, here)
}

/// Spawns `f` as a process on worker `worker` of the caller's runtime.
pub fn spawn_on<T, F>(worker: usize, f: F) -> Result<JoinHandle<T>, SpawnError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let here = Here::get();
    crate::kernel::coop::spend_in(here);
    let core = worker::core_in(&here).ok_or(SpawnError::NotInProcess)?;
    JoinHandle::spawn_in(&core.shared, worker, f, here)
}

/// Owns the right to a process's outcome: the value its body returned, or
/// why it ended without one. Dropping it detaches the process; the slot is
/// reclaimed once the process is finalized and no handle remains.
///
/// `JoinHandle` without a type is `JoinHandle<()>`, the handle of a body
/// that returns nothing.
pub struct JoinHandle<T = ()> {
    pid: Pid,
    shared: Arc<Shared>,
    // `fn() -> T`: the handle gives a `T` out and holds none, so it is
    // `Send` and `Sync` whatever `T` is (spawning already demands
    // `T: Send`).
    _value: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("pid", &self.pid).finish_non_exhaustive()
    }
}

impl<T: Send + 'static> JoinHandle<T> {
    /// Spawns `f` on worker `worker` of `shared`; the body's return value
    /// is stashed for the handle as the body's last act.
    pub(crate) fn spawn<F>(shared: &Arc<Shared>, worker: usize, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
    {
        Self::spawn_in(shared, worker, f, Here::get())
    }

    /// [`spawn`](Self::spawn) from the worker record `here` the caller
    /// looked up.
    fn spawn_in<F>(shared: &Arc<Shared>, worker: usize, f: F, here: Here) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
    {
        // A `Box<()>` does not allocate: a body returning nothing costs
        // nothing here.
        let body = move || process::stash_value(Box::new(f()));
        let pid = shared.spawn_on_in(worker, Box::new(body), here)?;
        Ok(JoinHandle { pid, shared: shared.clone(), _value: PhantomData })
    }
}

impl<T: 'static> JoinHandle<T> {
    /// The process's pid.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Whether the process has ended (its exit is known and its death
    /// notifications are delivered).
    pub fn is_finished(&self) -> bool {
        let slot = self.shared.slot_of(self.pid);
        let finished = slot.cold.lock().notified;
        finished
    }

    /// The outcome without waiting: `Ok` with the outcome once the process
    /// has ended (and its death notifications are delivered), or the handle
    /// back while it runs.
    pub fn try_join(self) -> Result<Result<T, JoinError>, JoinHandle<T>> {
        let taken = {
            let slot = self.shared.slot_of(self.pid);
            let mut cold = slot.cold.lock();
            cold.notified.then(|| take_outcome::<T>(&mut cold))
        };
        taken.ok_or(self)
    }

    /// Parks the calling process (sleeps a plain thread) until this one
    /// ends and its death notifications (monitor `Down`s, link signals) are
    /// delivered, then returns the body's value, or why it ended without
    /// one ([`JoinError::Exited`]: panicked, stopped, or stopped by a
    /// link). On a worker's driver outside any process (a handler actor):
    /// `Err(NotInProcess)` unless already finished.
    #[track_caller]
    pub fn join(mut self) -> Result<T, JoinError> {
        let slot = self.shared.slot_of(self.pid);
        let site = WaitSite::here(WaitKind::Join);
        // Looked up once for the waits, the locks and the handle's release.
        let here = Here::get();
        // A join after the fact (the process has ended): an observation
        // point like any join, then one critical section takes the
        // outcome, gives the handle up and, if the slot is finalized,
        // reclaims it — no wait is opened.
        process::observe_stop_in(here);
        {
            let mut cold = slot.cold.lock_in(here);
            if cold.notified {
                let result = take_outcome::<T>(&mut cold);
                let pid = core::mem::replace(&mut self.pid, RELEASED);
                cold.handle = false;
                if cold.finalized {
                    self.shared.reclaim_locked(slot, cold, pid.index(), pid.generation(), here);
                }
                return result;
            }
        }
        loop {
            let wait = Wait::begin_in(here, site).ok();
            {
                let mut cold = slot.cold.lock_in(here);
                if cold.notified {
                    let result = take_outcome::<T>(&mut cold);
                    drop(cold);
                    if let Some(wait) = wait {
                        wait.retire_in(here);
                    }
                    self.release_in(here);
                    return result;
                }
                match &wait {
                    Some(wait) => cold.joiners.push(wait.waiter().joiner()),
                    None => return Err(JoinError::NotInProcess),
                }
            }
            if let Some(wait) = wait {
                wait.park();
            }
        }
    }
}

/// Takes the outcome of a notified process: its value on a normal exit,
/// else its exit reason.
fn take_outcome<T: 'static>(cold: &mut Cold) -> Result<T, JoinError> {
    // Looked at in place: a normal exit (the common case) clones and drops
    // no reason.
    match &cold.exit {
        None | Some(ExitReason::Normal) => match cold.value.take().map(|value| value.downcast::<T>()) {
            Some(Ok(value)) => Ok(*value),
            // A process that returned normally stashed its value, and a
            // handle's `T` is the body's return type; only a second take
            // (impossible: joining consumes the handle) finds nothing.
            Some(Err(_)) | None => Err(JoinError::Exited(ExitReason::Normal)),
        },
        Some(reason) => Err(reason.clone().into()),
    }
}

impl<T> JoinHandle<T> {
    /// Gives up the handle's right to the outcome (once: `pid` is made
    /// stale here, so the handle's drop does nothing more), from the
    /// worker record `here`: the slot is reclaimed if the process is
    /// finalized.
    fn release_in(&mut self, here: Here) {
        let pid = core::mem::replace(&mut self.pid, RELEASED);
        if pid == RELEASED {
            return;
        }
        let slot = self.shared.slot_of(pid);
        let (reclaim, value) = {
            let mut cold = slot.cold.lock_in(here);
            cold.handle = false;
            (cold.finalized, cold.value.take())
        };
        // An unjoined value is dropped here, outside the slot lock (its
        // destructor may take locks).
        drop::<Option<Box<dyn Any + Send>>>(value);
        if reclaim {
            self.shared.reclaim_in(pid.index(), pid.generation(), here);
        }
    }
}

/// The pid of a handle already released by `join`: no slot has index
/// `u32::MAX` (the slab keeps it as its queues' end-of-list marker).
const RELEASED: Pid = Pid::from_parts(u32::MAX, u32::MAX);

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // A joined handle was released by `join`: no look-up then.
        if self.pid != RELEASED {
            self.release_in(Here::get());
        }
    }
}
