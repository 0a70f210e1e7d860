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

use core::cell::Cell;
use core::ptr::NonNull;

use crate::kernel::current;
use crate::kernel::worker::WorkerCore;

/// What a worker tracks about the sections its running code is in.
#[derive(Debug, Default)]
pub(crate) struct PreemptState {
    /// Nesting depth of preemption-disabled sections.
    disabled: Cell<u32>,
    /// Runtime leaf locks held (debug builds only).
    held_leaf: Cell<u8>,
    /// Runtime channel locks held (debug builds only).
    held_channel: Cell<u8>,
}

impl PreemptState {
    /// Opens a preemption-disabled section.
    #[inline]
    pub(crate) fn disable(&self) {
        self.disabled.set(self.disabled.get() + 1);
    }

    /// Closes a preemption-disabled section.
    #[inline]
    pub(crate) fn enable(&self) {
        debug_assert!(self.disabled.get() > 0, "preemption enabled more often than disabled");
        self.disabled.set(self.disabled.get().saturating_sub(1));
    }

    /// Whether preemption is enabled (no section is open).
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.disabled.get() == 0
    }

    /// Forgets every open section: a process abandoned without unwinding
    /// (a bare-metal panic or stop) never drops its guards.
    pub(crate) fn reset(&self) {
        self.disabled.set(0);
        self.held_leaf.set(0);
        self.held_channel.set(0);
    }
}

/// Disables preemption on the calling worker for its lifetime; nests.
/// Every runtime critical section holds one: a process preempted while
/// holding a runtime lock would stall every other contender.
#[derive(Debug)]
#[must_use = "preemption is re-enabled when the guard is dropped"]
pub struct NoPreempt {
    /// The worker whose count the guard raised (`None` off a worker).
    core: Option<NonNull<WorkerCore>>,
}

impl NoPreempt {
    /// Disables preemption until the guard drops (a no-op off a worker).
    #[inline]
    #[allow(clippy::new_without_default)]
    pub fn new() -> NoPreempt {
        let core = current::core_ptr();
        if let Some(core) = core {
            // SAFETY: from `core_ptr`, used now, inside the current pass.
            unsafe { current::core_ref(core) }.preempt.disable();
        }
        NoPreempt { core }
    }
}

impl Drop for NoPreempt {
    #[inline]
    fn drop(&mut self) {
        if let Some(core) = self.core {
            // SAFETY: the guard never outlives a switch (no park or yield
            // happens with preemption off: `switch_out` asserts it), so it
            // drops inside the pass that made it.
            unsafe { current::core_ref(core) }.preempt.enable();
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
    current::with(|core| {
        let held = &core.preempt;
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
    current::with(|core| {
        let held = match class {
            LockClass::Leaf => &core.preempt.held_leaf,
            LockClass::Channel => &core.preempt.held_channel,
        };
        held.set(held.get().saturating_sub(1));
    });
}
