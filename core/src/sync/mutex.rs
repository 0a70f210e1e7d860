//! An actor-level mutex: contention parks the process, not the thread (a
//! plain thread that contends sleeps).
//!
//! Hand-off is FIFO: unlocking with waiters queued gives the lock directly
//! to the first one (the lock stays held across the hand-off, so nobody can
//! barge in). `lock_timeout` resolves the race between its timer and a
//! grant grant-first: a waiter that wakes to find itself granted owns the
//! lock, even if its deadline has passed — a grant that lands is never lost.
//! A waiter stopped while parked removes itself, or passes on a grant it
//! received, as it unwinds.

use alloc::collections::VecDeque;
use core::cell::UnsafeCell;
use core::fmt;
use core::ops::{Deref, DerefMut};
use core::time::Duration;

use crate::kernel::deadlock::{WaitKind, WaitSite};
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::time::Instant;
use crate::kernel::wait::{self, Wait, Waiter};

struct LockState {
    locked: bool,
    waiters: VecDeque<Waiter>,
    /// The waiter the lock was handed to, not yet collected by it.
    granted: Option<Waiter>,
}

/// A mutual-exclusion lock for processes.
pub struct Mutex<T: ?Sized> {
    state: RuntimeMutex<LockState>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and `state` admits one
// guard at a time; `T: Send` because the guard may be taken in any process
// on any thread.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}
// SAFETY: owning the mutex is owning the `T`.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}

impl<T: ?Sized> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mutex").finish_non_exhaustive()
    }
}

/// `lock_timeout` gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockError {
    /// The deadline passed without a grant.
    Timeout,
    /// Called on a worker's driver outside any process (a handler actor),
    /// where waiting would stall the worker.
    NotInProcess,
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Timeout => f.write_str("timed out waiting for the mutex"),
            LockError::NotInProcess => f.write_str("lock_timeout called outside a process"),
        }
    }
}
impl core::error::Error for LockError {}

/// Exclusive access to a [`Mutex`]'s value; unlocks (handing off FIFO) on
/// drop. Never hold it across a long wait: it parks others.
pub struct MutexGuard<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T> Mutex<T> {
    /// An unlocked mutex.
    pub fn new(value: T) -> Self {
        Mutex {
            state: RuntimeMutex::channel(LockState {
                locked: false,
                waiters: VecDeque::new(),
                granted: None,
            }),
            value: UnsafeCell::new(value),
        }
    }

    /// The value, consuming the mutex.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Takes the lock if it is free. Spends one unit of the cooperative
    /// budget ([`kernel::coop`](crate::kernel::coop)).
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        crate::kernel::coop::spend();
        self.try_acquire()
    }

    /// `try_lock` without spending the budget (the blocking paths spend
    /// once per call, not once per attempt).
    fn try_acquire(&self) -> Option<MutexGuard<'_, T>> {
        let mut st = self.state.lock();
        if st.locked {
            None
        } else {
            st.locked = true;
            Some(MutexGuard { mutex: self })
        }
    }

    /// Takes the lock, parking the process (sleeping a plain thread) while
    /// another holds it. On a worker's driver outside any process it spins.
    /// Spends one unit of the cooperative budget.
    #[track_caller]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        crate::kernel::coop::spend();
        let site = WaitSite::here(WaitKind::Mutex);
        loop {
            match self.lock_until(None, site) {
                Ok(guard) => return guard,
                Err(LockError::NotInProcess) => {
                    if let Some(guard) = self.try_acquire() {
                        return guard;
                    }
                    use smarm_arch::Arch;
                    smarm_arch::Native::spin_hint();
                }
                Err(LockError::Timeout) => {}
            }
        }
    }

    /// Takes the lock, giving up after `timeout`. Spends one unit of the
    /// cooperative budget.
    #[track_caller]
    pub fn lock_timeout(&self, timeout: Duration) -> Result<MutexGuard<'_, T>, LockError> {
        crate::kernel::coop::spend();
        if let Some(guard) = self.try_acquire() {
            return Ok(guard);
        }
        let now = wait::now().ok_or(LockError::NotInProcess)?;
        self.lock_until(Some(now + timeout), WaitSite::here(WaitKind::Mutex))
    }

    fn lock_until(&self, deadline: Option<Instant>, site: WaitSite) -> Result<MutexGuard<'_, T>, LockError> {
        if let Some(guard) = self.try_acquire() {
            return Ok(guard);
        }
        loop {
            let mut wait = Wait::begin_at(site).map_err(|_| LockError::NotInProcess)?;
            let me = wait.waiter();
            if let Some(deadline) = deadline {
                wait.wake_at(deadline);
            }
            {
                let mut st = self.state.lock();
                if !st.locked {
                    st.locked = true;
                    drop(st);
                    // The guard exists before retire_wait, which raises a
                    // stop requested (from another thread) since begin_wait:
                    // unwinding then drops it and the lock is handed on
                    // instead of staying held by nobody.
                    let guard = MutexGuard { mutex: self };
                    wait.retire();
                    return Ok(guard);
                }
                st.waiters.push_back(me.clone());
            }
            let cancel = CancelOnUnwind { mutex: self, me, armed: true };
            wait.park();
            let mut cancel = cancel;
            cancel.armed = false;
            let me = &cancel.me;
            let mut st = self.state.lock();
            if st.granted.as_ref().is_some_and(|granted| granted.same_wait(me)) {
                // Grant first: it landed, so it is ours, deadline or not.
                st.granted = None;
                return Ok(MutexGuard { mutex: self });
            }
            // Not granted: the deadline woke us. Leave the queue.
            st.waiters.retain(|w| !w.same_wait(me));
            drop(st);
            if let Some(deadline) = deadline {
                if wait::now().is_some_and(|now| now >= deadline) {
                    return Err(LockError::Timeout);
                }
            }
        }
    }

    /// Releases the lock: hands it to the first waiter, or frees it.
    fn unlock(&self) {
        let mut st = self.state.lock();
        if let Some(next) = st.waiters.pop_front() {
            st.granted = Some(next.clone());
            drop(st);
            // If the wake is stale (its timer already woke it), the waiter
            // still finds the grant when it re-checks under the lock.
            next.wake();
        } else {
            st.locked = false;
        }
    }
}

/// Cleans up a waiter that unwinds (stop) out of its park.
struct CancelOnUnwind<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    me: Waiter,
    armed: bool,
}

impl<T: ?Sized> Drop for CancelOnUnwind<'_, T> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut st = self.mutex.state.lock();
        if st.granted.as_ref().is_some_and(|granted| granted.same_wait(&self.me)) {
            // We were handed the lock as we were stopped: pass it on.
            st.granted = None;
            drop(st);
            self.mutex.unlock();
        } else {
            let me = &self.me;
            st.waiters.retain(|w| !w.same_wait(me));
        }
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while the mutex is held by its
        // owner, so no other reference to the value exists.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { &mut *self.mutex.value.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.mutex.unlock();
    }
}
