//! The running worker's record: what the kernel's leaves may know about the
//! worker that drives the calling thread, without naming the scheduler.
//!
//! While a pass runs, its worker registers its core with the host's
//! current-worker hook. The core is `#[repr(C)]` and starts with a
//! [`Current`]: which process runs, the preemption-off sections and runtime
//! locks it holds, whether it has a wait open, and its cooperative budget.
//! The leaves (preemption guards, the budget, the runtime locks) read that
//! record through [`with`]; the scheduler reaches the whole core through
//! `worker::with_core`, which reads the same pointer. Both hold shared
//! references, possibly at once (the pass is suspended inside `run` while
//! its process executes), so every field here is a `Cell`.

use core::cell::Cell;
use core::ptr::NonNull;

/// What a worker records about the code it runs, for the kernel's leaves.
///
/// The first field of the worker's core: a pointer registered with the
/// host's `set_current` hook points at a `Current` (at offset zero of the
/// core). Nothing else is ever registered.
#[derive(Debug)]
pub(crate) struct Current {
    /// Slot index and generation of the running process.
    pub(crate) running: Cell<Option<(u32, u32)>>,
    /// Preemption-disabled sections and runtime locks held.
    pub(crate) preempt: PreemptState,
    /// The running process has opened a wait (`begin_wait`) and not yet
    /// parked or retired it. No preemption then: a yield would turn the
    /// word `Queued`, and a stamped wake landing on `Queued` is stale — the
    /// wake would be lost.
    pub(crate) wait_open: Cell<bool>,
    /// The running process's cooperative budget left (`kernel::coop`):
    /// refilled at every resume, 0 when disabled.
    pub(crate) coop_budget: Cell<u32>,
    /// Yields the running process for a spent budget: the scheduler's
    /// yield, which the budget (a leaf) cannot name.
    pub(crate) yield_spent: fn(),
    /// The handler actor whose code the driver runs now (outside any
    /// process), for crash reports.
    pub(crate) handling: Cell<Option<crate::kernel::pid::Pid>>,
}

impl Current {
    /// A record with nothing running, for a worker whose spent-budget
    /// yield is `yield_spent`.
    pub(crate) fn new(yield_spent: fn()) -> Current {
        Current {
            running: Cell::new(None),
            preempt: PreemptState::default(),
            wait_open: Cell::new(false),
            coop_budget: Cell::new(0),
            yield_spent,
            handling: Cell::new(None),
        }
    }

    /// Whether the running process may be switched out at a check or a
    /// budget yield: one runs, no preemption-off section is open, no wait
    /// is open.
    #[inline]
    pub(crate) fn may_switch(&self) -> bool {
        self.running.get().is_some() && self.preempt.enabled() && !self.wait_open.get()
    }
}

/// What a worker tracks about the sections its running code is in.
#[derive(Debug, Default)]
pub(crate) struct PreemptState {
    /// Nesting depth of preemption-disabled sections.
    disabled: Cell<u32>,
    /// Runtime leaf locks held (debug builds only).
    pub(crate) held_leaf: Cell<u8>,
    /// Runtime channel locks held (debug builds only).
    pub(crate) held_channel: Cell<u8>,
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

/// The pointer the calling thread's worker registered, if a pass is
/// running on it: the address of its core, whose first field is a
/// [`Current`].
#[inline]
pub(crate) fn registered() -> Option<NonNull<Current>> {
    let hooks = crate::kernel::host::hooks()?;
    NonNull::new((hooks.get_current)().cast::<Current>())
}

/// The calling thread's worker record, looked up once for a run of
/// runtime operations (a send: its budget, its lock, its wake) instead of
/// once per operation: each lookup is a call through the host's
/// current-worker hook.
///
/// Kept only in the frames of the code that looked it up, like the
/// references [`record_ref`] gives: on a worker's driver that code runs
/// inside the pass; in a process it runs only inside its worker's passes
/// (a process stays on the worker it was spawned on, whose core does not
/// move), across its parks and yields included. `None` on a thread that
/// drives no worker.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Here(Option<NonNull<Current>>);

impl Here {
    /// The calling thread's worker record now.
    #[inline]
    pub(crate) fn get() -> Here {
        Here(registered())
    }

    /// The record of a worker whose pass runs on this thread now, as a
    /// caller that already holds it (a running process's own core) names
    /// it: what [`get`](Self::get) would return, without the look-up.
    #[inline]
    pub(crate) fn of_running(record: NonNull<Current>) -> Here {
        debug_assert_eq!(registered(), Some(record), "a record that is not the thread's current one");
        Here(Some(record))
    }

    /// The registered pointer, if any.
    #[inline]
    pub(crate) fn ptr(self) -> Option<NonNull<Current>> {
        self.0
    }

    /// The record, if the thread drives a worker.
    #[inline]
    pub(crate) fn record(&self) -> Option<&Current> {
        // SAFETY: the pointer came from `registered` in the frames holding
        // `self`, which run only inside that worker's passes (see the type's
        // doc), so `record_ref`'s contract holds for the borrow of `self`.
        self.0.map(|record| unsafe { record_ref(record) })
    }
}

/// Runs `f` as the code of handler actor `pid` (see [`handling_actor`]):
/// the record says so until `f` returns. `f` must not unwind (the actor
/// layer runs handler code under the host's `catch_panic`).
pub(crate) fn as_handler<R>(pid: crate::kernel::pid::Pid, f: impl FnOnce() -> R) -> R {
    let previous = with(|current| current.handling.replace(Some(pid))).flatten();
    let result = f();
    with(|current| current.handling.set(previous));
    result
}

/// The handler actor whose code runs now on the calling thread's worker
/// (its `handle`, its `stopped`), if any: what a crash report names when
/// a handler panics, as it names the process when a process does.
pub fn handling_actor() -> Option<crate::kernel::pid::Pid> {
    with(|current| current.handling.get()).flatten()
}

/// Runs `f` on the current worker's record; `None` off a worker.
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&Current) -> R) -> Option<R> {
    let record = registered()?;
    // SAFETY: the pointer was registered for the pass now running on this
    // thread, points at the record at the start of that worker's core, and
    // is used within this call, inside that pass (see `record_ref`).
    Some(f(unsafe { record_ref(record) }))
}

/// The record behind a pointer that [`registered`] returned.
///
/// # Safety
///
/// `record` came from [`registered`] on a thread driving its worker, and
/// the reference is used only while that worker's pass can still be
/// running the code that holds it: by the pass itself, or by a process of
/// that worker (a process runs only inside its worker's pass, and one
/// still suspended when the worker is dropped is never resumed). The core
/// is freed only when the `Worker` drops, which needs `&mut` and so cannot
/// happen during a pass; it is only ever reached through shared
/// references, so this reference may coexist with the pass's and with any
/// other.
#[inline]
pub(crate) unsafe fn record_ref<'a>(record: NonNull<Current>) -> &'a Current {
    // SAFETY: per the contract.
    unsafe { record.as_ref() }
}
