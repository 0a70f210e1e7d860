//! A set-once `&'static T`, readable without locking.

use core::marker::PhantomData;
use core::sync::atomic::{AtomicPtr, Ordering};

/// Holds one `&'static T`, set at most once.
pub(crate) struct OnceRef<T: 'static> {
    ptr: AtomicPtr<T>,
    _marker: PhantomData<&'static T>,
}

impl<T: Sync + 'static> OnceRef<T> {
    pub(crate) const fn new() -> Self {
        OnceRef { ptr: AtomicPtr::new(core::ptr::null_mut()), _marker: PhantomData }
    }

    /// Stores `value` if nothing is stored yet (or the same value is).
    pub(crate) fn set(&self, value: &'static T) -> bool {
        let new = value as *const T as *mut T;
        // Release publishes the referent's initialisation to readers that
        // Acquire-load the pointer.
        match self.ptr.compare_exchange(core::ptr::null_mut(), new, Ordering::Release, Ordering::Acquire) {
            Ok(_) => true,
            Err(existing) => existing == new,
        }
    }

    #[inline]
    pub(crate) fn get(&self) -> Option<&'static T> {
        // Acquire pairs with the Release in `set`.
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: a non-null pointer was stored from a `&'static T` in `set`
        // and is never changed or freed afterwards.
        unsafe { p.as_ref() }
    }
}
