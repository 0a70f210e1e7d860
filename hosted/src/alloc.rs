//! Preemption at allocation: a global-allocator wrapper that turns every
//! allocation of a process into a preemption point.
//!
//! The yield happens *before* the inner allocator is called, so no
//! allocator lock is ever held across a switch. It is skipped when:
//! - the calling thread is not running a process (drivers, io threads,
//!   other threads);
//! - preemption is disabled ([`smarm_core::NoPreempt`] — every runtime lock
//!   and queue operation holds one);
//! - the thread is panicking (a panic's allocations must not switch: the
//!   panic count is per OS thread, and another process resumed on it would
//!   see itself "panicking");
//! - the process has not used up its timeslice (`Config::timeslice`).
//!
//! Reentrancy: the check reads a const thread-local cell, the worker's own
//! fields and the timestamp counter; it never allocates, so calling it from
//! inside `alloc` cannot recurse.

use std::alloc::{GlobalAlloc, Layout};

/// A [`GlobalAlloc`] that yields the running process when its timeslice is
/// used up, then delegates to `A`. Opt-in:
///
/// ```
/// #[global_allocator]
/// static ALLOCATOR: smarm::PreemptingAlloc<std::alloc::System> = smarm::PreemptingAlloc::new(std::alloc::System);
/// # fn main() {}
/// ```
///
/// With it, a CPU-bound process that allocates cannot starve the other
/// processes of its worker. A loop that does not allocate needs
/// [`check!`](crate::check) for the same effect.
///
/// # Every allocation is a switch point
///
/// Code running in a process must then not hold a *std* lock (or a
/// `RefCell`/`thread_local!` borrow) across an allocation that another
/// process of the same worker might contend for: the holder can be switched
/// out mid-section, and a contender on the same OS thread would block the
/// thread the holder needs to resume on. Take such locks around code that
/// does not allocate, hold a [`NoPreempt`](crate::NoPreempt) guard across
/// the section, or use smarm's own primitives, which do this for you.
#[derive(Debug, Default, Clone, Copy)]
pub struct PreemptingAlloc<A> {
    inner: A,
}

impl<A> PreemptingAlloc<A> {
    /// Wraps `inner` (usually [`std::alloc::System`]).
    pub const fn new(inner: A) -> PreemptingAlloc<A> {
        PreemptingAlloc { inner }
    }

    /// The wrapped allocator.
    pub const fn inner(&self) -> &A {
        &self.inner
    }
}

/// The preemption point. Not inlined into every allocation site: the common
/// case (not in a process) is a couple of loads.
#[inline]
fn preemption_point() {
    if !std::thread::panicking() {
        smarm_core::maybe_preempt();
    }
}

// SAFETY: every method forwards to `A` with the caller's arguments
// unchanged; the preemption point before it runs no allocator code and
// leaves no allocator state half-changed, so `A`'s guarantees are ours.
unsafe impl<A: GlobalAlloc> GlobalAlloc for PreemptingAlloc<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        preemption_point();
        // SAFETY: forwarded contract (`layout` has a non-zero size).
        unsafe { self.inner.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        preemption_point();
        // SAFETY: forwarded contract.
        unsafe { self.inner.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        preemption_point();
        // SAFETY: forwarded contract (`ptr` came from this allocator, which
        // is `A`, with `layout`).
        unsafe { self.inner.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // No preemption point: deallocation runs in destructors, unwinding
        // included, and is cheap; yielding there buys no fairness.
        // SAFETY: forwarded contract.
        unsafe { self.inner.dealloc(ptr, layout) }
    }
}
