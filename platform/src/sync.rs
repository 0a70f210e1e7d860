//! The one place this crate takes its atomics and locks from.
//!
//! Everything else imports from here, never from `core::sync::atomic`, so a
//! model checker can be swapped in at a single point. The only lock is
//! [`SpinLock`], kept for short, allocation-light bookkeeping on paths that
//! are never reached from a signal handler (stack pools, the guard
//! registry's free list).

#[allow(unused_imports)]
pub(crate) use core::sync::atomic::{
    fence, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

#[cfg(all(feature = "linux", target_os = "linux"))]
pub(crate) use self::spin::SpinLock;

#[cfg(all(feature = "linux", target_os = "linux"))]
mod spin {
    use core::cell::UnsafeCell;
    use core::ops::{Deref, DerefMut};

    use super::{AtomicU8, Ordering};

    /// A test-and-test-and-set lock for critical sections of a few dozen
    /// instructions. Not reentrant; never take it in a signal handler.
    pub(crate) struct SpinLock<T> {
        /// 0 = free, 1 = held.
        held: AtomicU8,
        value: UnsafeCell<T>,
    }

    // SAFETY: the lock hands out access to `value` to one thread at a time
    // (acquire/release on `held`), so sharing the lock is as safe as sending
    // the value.
    unsafe impl<T: Send> Sync for SpinLock<T> {}

    impl<T> SpinLock<T> {
        pub(crate) const fn new(value: T) -> Self {
            SpinLock { held: AtomicU8::new(0), value: UnsafeCell::new(value) }
        }

        pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
            loop {
                // Acquire pairs with the Release in `SpinGuard::drop`: the
                // previous holder's writes to `value` are visible to us.
                if self.held.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                    return SpinGuard { lock: self };
                }
                while self.held.load(Ordering::Relaxed) != 0 {
                    core::hint::spin_loop();
                }
            }
        }

        /// Access without locking, through exclusive ownership.
        pub(crate) fn get_mut(&mut self) -> &mut T {
            self.value.get_mut()
        }
    }

    impl<T> core::fmt::Debug for SpinLock<T> {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("SpinLock").field("held", &(self.held.load(Ordering::Relaxed) != 0)).finish()
        }
    }

    pub(crate) struct SpinGuard<'a, T> {
        lock: &'a SpinLock<T>,
    }

    impl<T> Deref for SpinGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            // SAFETY: the guard exists only while `held` is 1 and was set by
            // this guard's `lock`, so no other reference to `value` exists.
            unsafe { &*self.lock.value.get() }
        }
    }

    impl<T> DerefMut for SpinGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            // SAFETY: as in `deref`; `&mut self` makes this the only access
            // through the guard.
            unsafe { &mut *self.lock.value.get() }
        }
    }

    impl<T> Drop for SpinGuard<'_, T> {
        fn drop(&mut self) {
            // Release publishes our writes to the next holder's Acquire.
            self.lock.held.store(0, Ordering::Release);
        }
    }
}
