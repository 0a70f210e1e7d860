//! The one door to the running worker's core.
//!
//! While a pass runs, the worker's `WorkerCore` is reached from two places
//! at once: the pass itself (suspended inside `run` while a process
//! executes) and the process, which finds the core through the host's
//! current-worker hook. Both hold shared references; everything in the
//! core that changes is a `Cell` or `RefCell`, so the two never conflict
//! and a call made from inside another (an allocation that reaches a
//! preemption check while a queue grows) is fine. Every access goes
//! through [`with`]; the switch code uses [`core_ptr`] to reach the saved
//! contexts.

use core::ptr::NonNull;

use crate::kernel::worker::WorkerCore;

/// The calling thread's current worker core, if a pass is running on it.
#[inline]
pub(crate) fn core_ptr() -> Option<NonNull<WorkerCore>> {
    let hooks = crate::kernel::host::hooks()?;
    NonNull::new((hooks.get_current)().cast::<WorkerCore>())
}

/// Runs `f` on the current worker's core; `None` off a worker.
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&WorkerCore) -> R) -> Option<R> {
    let core = core_ptr()?;
    // SAFETY: the pointer was registered for the pass now running on this
    // thread and we use it within this call, inside that pass.
    Some(f(unsafe { core_ref(core) }))
}

/// The core behind a pointer that [`core_ptr`] returned.
///
/// # Safety
///
/// `core` came from [`core_ptr`] on a thread driving its worker, and the
/// reference is used only while that worker's pass can still be running
/// the code that holds it: by the pass itself, or by a process of that
/// worker (a process runs only inside its worker's pass, and one still
/// suspended when the worker is dropped is never resumed). The core is
/// freed only when the `Worker` drops, which needs `&mut` and so cannot
/// happen during a pass; and it is only ever reached through shared
/// references (its changing fields are `Cell`s), so this reference may
/// coexist with the pass's and with any other.
#[inline]
pub(crate) unsafe fn core_ref<'a>(core: NonNull<WorkerCore>) -> &'a WorkerCore {
    // SAFETY: per the contract.
    unsafe { core.as_ref() }
}
