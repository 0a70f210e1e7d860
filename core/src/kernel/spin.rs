//! Runtime locks: a spin lock that never parks the OS thread.
//!
//! Runtime critical sections are short and never switch, so a test-and-test-
//! and-set lock is the right tool on every platform (including bare metal,
//! where there is nothing to block on). Callers that may run inside a
//! process must hold a preemption guard for the span of the guard: a holder
//! switched out mid-section would stall every other contender.

use crate::kernel::atomic::{spin_loop, AtomicBool, Ordering, UnsafeCell};
use crate::kernel::preempt::{self, LockClass, NoPreempt};

/// A spin lock protecting a `T`.
#[derive(Debug)]
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out at most one guard at a time, so `&SpinLock<T>`
// gives exclusive access to `T` across threads exactly like `Mutex<T>`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: owning the lock is owning the `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// A new, unlocked lock.
    #[cfg(not(loom))]
    pub const fn new(value: T) -> Self {
        SpinLock { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// A new, unlocked lock (loom's constructors are not `const`).
    #[cfg(loom)]
    pub fn new(value: T) -> Self {
        SpinLock { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// Takes the lock if it is free, without waiting.
    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        // Acquire pairs with the Release in `SpinGuard::drop`: the previous
        // holder's writes to `value` are visible to us.
        if self.locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            Some(SpinGuard { lock: self })
        } else {
            None
        }
    }

    /// Takes the lock, spinning while it is held.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        loop {
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            // Test before test-and-set: spin on a shared read so the cache
            // line is not bounced while the holder works. (Under loom, one
            // yield per failed attempt keeps the model's branches finite.)
            #[cfg(not(loom))]
            while self.locked.load(Ordering::Relaxed) {
                spin_loop();
            }
            #[cfg(loom)]
            spin_loop();
        }
    }

    /// Mutable access without locking: `&mut self` proves exclusivity.
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` means no guard exists and none can be made.
        self.value.with_mut(|p| unsafe { &mut *p })
    }
}

/// Exclusive access to the value of a [`SpinLock`]; unlocks on drop.
#[derive(Debug)]
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> core::ops::Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while `locked` is held by us.
        self.lock.value.with(|p| unsafe { &*p })
    }
}

impl<T> core::ops::DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while `locked` is held by us, and
        // `&mut self` makes this the only reference through the guard.
        self.lock.value.with_mut(|p| unsafe { &mut *p })
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        // Release publishes our writes to the next acquirer.
        self.lock.locked.store(false, Ordering::Release);
    }
}

/// A runtime lock: a [`SpinLock`] of a [`LockClass`] whose guard also
/// disables preemption for its span.
#[derive(Debug)]
pub struct RuntimeMutex<T> {
    class: LockClass,
    inner: SpinLock<T>,
}

impl<T> RuntimeMutex<T> {
    /// A new leaf lock.
    pub fn leaf(value: T) -> Self {
        RuntimeMutex { class: LockClass::Leaf, inner: SpinLock::new(value) }
    }

    /// A new channel lock.
    pub fn channel(value: T) -> Self {
        RuntimeMutex { class: LockClass::Channel, inner: SpinLock::new(value) }
    }

    /// Takes the lock (preemption disabled until the guard drops).
    pub fn lock(&self) -> RuntimeGuard<'_, T> {
        let no_preempt = NoPreempt::new();
        preempt::note_lock_acquired(self.class);
        RuntimeGuard { guard: self.inner.lock(), class: self.class, _preempt: no_preempt }
    }

    /// [`lock`](Self::lock) on the worker record `here` the caller already
    /// looked up.
    #[inline]
    pub(crate) fn lock_in(&self, here: crate::kernel::current::Here) -> RuntimeGuard<'_, T> {
        let no_preempt = NoPreempt::in_here(here);
        preempt::note_lock_acquired(self.class);
        RuntimeGuard { guard: self.inner.lock(), class: self.class, _preempt: no_preempt }
    }

    /// Mutable access without locking.
    pub fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut()
    }
}

/// Guard of a [`RuntimeMutex`].
#[derive(Debug)]
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct RuntimeGuard<'a, T> {
    guard: SpinGuard<'a, T>,
    class: LockClass,
    // Dropped after `guard` (fields drop in order): preemption comes back
    // only once the lock is free.
    _preempt: NoPreempt,
}

impl<T> core::ops::Deref for RuntimeGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> core::ops::DerefMut for RuntimeGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for RuntimeGuard<'_, T> {
    fn drop(&mut self) {
        preempt::note_lock_released(self.class);
    }
}
