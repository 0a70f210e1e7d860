//! Preemption guards and runtime-lock bookkeeping for the running worker.
//!
//! A process must not be switched out while it holds a runtime lock or is
//! in the middle of a queue operation: every contender would spin until it
//! is resumed. [`NoPreempt`] marks such a section on the current worker
//! (sections nest), and preemption points — `check()`, a preempting
//! allocator's `maybe_preempt()` — honour it. Runtime locks hold one for
//! their whole span and record, in debug builds, which class of lock is
//! held so the lock order (Leaf → Channel, one of each) is asserted at
//! every acquisition.

use core::ptr::NonNull;

use crate::kernel::current::{self, Current};

/// Disables preemption on the calling worker for its lifetime; nests.
/// Every runtime critical section holds one: a process preempted while
/// holding a runtime lock would stall every other contender.
#[derive(Debug)]
#[must_use = "preemption is re-enabled when the guard is dropped"]
pub struct NoPreempt {
    /// The record of the worker whose count the guard raised (`None` off a
    /// worker).
    record: Option<NonNull<Current>>,
}

impl NoPreempt {
    /// Disables preemption until the guard drops (a no-op off a worker).
    #[inline]
    #[allow(clippy::new_without_default)]
    pub fn new() -> NoPreempt {
        let record = current::registered();
        if let Some(record) = record {
            // SAFETY: from `registered`, used now, inside the current pass.
            unsafe { current::record_ref(record) }.preempt.disable();
        }
        NoPreempt { record }
    }

    /// [`new`](Self::new) on the worker record `here` the caller already
    /// looked up.
    #[inline]
    pub(crate) fn in_here(here: current::Here) -> NoPreempt {
        if let Some(record) = here.record() {
            record.preempt.disable();
        }
        NoPreempt { record: here.ptr() }
    }
}

impl Drop for NoPreempt {
    #[inline]
    fn drop(&mut self) {
        if let Some(record) = self.record {
            // SAFETY: the guard never outlives a switch (no park or yield
            // happens with preemption off: `switch_out` asserts it), so it
            // drops inside the pass that made it.
            unsafe { current::record_ref(record) }.preempt.enable();
        }
    }
}

/// The two classes of runtime lock. The order is Leaf → Channel, at most
/// one of each held at once: a channel lock may be taken under a leaf lock
/// (a death hook clones a sender under a table lock), nothing is taken
/// under a channel lock, and two leaves never nest. Checked with
/// `debug_assert!` at every acquisition made on a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockClass {
    /// Cold per-slot state, free list, stack pool, extension tables.
    Leaf,
    /// A channel's (or actor mutex's) state.
    Channel,
}

/// Records a runtime lock acquisition on the current worker and checks the
/// lock order. Bookkeeping only in debug builds.
#[inline]
pub(crate) fn note_lock_acquired(class: LockClass) {
    if !cfg!(debug_assertions) {
        return;
    }
    current::with(|record| {
        let held = &record.preempt;
        match class {
            LockClass::Leaf => {
                debug_assert!(
                    held.held_leaf.get() == 0 && held.held_channel.get() == 0,
                    "lock order: a leaf lock taken under another leaf or a channel lock"
                );
                held.held_leaf.set(held.held_leaf.get() + 1);
            }
            LockClass::Channel => {
                debug_assert!(held.held_channel.get() == 0, "lock order: a channel lock taken under another");
                held.held_channel.set(held.held_channel.get() + 1);
            }
        }
    });
}

/// Records a runtime lock release on the current worker (debug builds only).
#[inline]
pub(crate) fn note_lock_released(class: LockClass) {
    if !cfg!(debug_assertions) {
        return;
    }
    current::with(|record| {
        let held = match class {
            LockClass::Leaf => &record.preempt.held_leaf,
            LockClass::Channel => &record.preempt.held_channel,
        };
        held.set(held.get().saturating_sub(1));
    });
}
