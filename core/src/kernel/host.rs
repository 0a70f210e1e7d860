//! The hooks a host gives the core: where the running worker is recorded
//! for the calling thread, how a process body runs (panic capture), and how
//! a stop request unwinds.
//!
//! The core never names a thread or an OS, so it cannot own a thread-local.
//! The host does: the hosted crate keeps the pointer in a `thread_local!`,
//! a bare-metal image in a static (one core) or a per-core array. The
//! pointer is read afresh at every use and never borrowed across a switch:
//! a process may resume on another OS thread.

use alloc::boxed::Box;

use crate::kernel::exit::ExitReason;

/// What a host supplies. One set per process image, installed with
/// [`install`] before any runtime runs.
#[derive(Debug)]
pub struct HostHooks {
    /// Returns the calling thread's current-worker pointer (null if none).
    pub get_current: fn() -> *mut (),
    /// Sets the calling thread's current-worker pointer.
    pub set_current: fn(*mut ()),
    /// Runs a process body and reports how it ended: `Normal`, `Stopped`
    /// or `Panicked`. Hosted: under `catch_unwind`, mapping the stop
    /// sentinel to `ExitReason::Stopped`. A host without unwinding calls
    /// the body and returns `Normal`; its panic handler uses
    /// [`abandon_current`](crate::abandon_current).
    pub run_process: fn(Box<dyn FnOnce() + Send>) -> ExitReason,
    /// Ends the running process because a stop was requested. Hosted:
    /// unwinds with the stop sentinel (destructors run). Bare: abandons the
    /// process.
    pub raise_stop: fn() -> !,
    /// Whether the calling thread is unwinding (a panic's destructors are
    /// running): a stop is not raised then, since raising it would abort
    /// the program. Hosted: `std::thread::panicking`. A host without
    /// unwinding returns `false`.
    pub unwinding: fn() -> bool,
    /// Runs a handler actor's work and reports a panic in it: `None` if
    /// `f` returned, `Some(message)` if it panicked. Hosted: under
    /// `catch_unwind`. A host without unwinding calls `f` and returns
    /// `None`; a panic there never comes back (its panic handler decides
    /// what happens to the worker).
    pub catch_panic: fn(&mut dyn FnMut()) -> Option<alloc::string::String>,
}

static HOOKS: crate::kernel::once::OnceRef<HostHooks> = crate::kernel::once::OnceRef::new();

/// Installs the host's hooks. The first call wins; later calls with other
/// hooks are ignored and return `false`.
pub fn install(hooks: &'static HostHooks) -> bool {
    HOOKS.set(hooks)
}

/// The installed hooks, if any.
#[inline]
pub(crate) fn hooks() -> Option<&'static HostHooks> {
    HOOKS.get()
}
