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

use smarm_platform::{Nanos, ParkToken};

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
    /// How a plain thread (one not running a process) blocks where a
    /// process would park: in a channel's `recv`, a `join`, a `select`.
    /// `None` on a host without threads to block (bare metal): there such
    /// calls return `NotInProcess` where they would wait.
    pub threads: Option<&'static ThreadHooks>,
}

/// How a host blocks and wakes plain threads, and the clock their
/// deadlines are on.
#[derive(Debug)]
pub struct ThreadHooks {
    /// Sleeps on `token` until it is woken or the deadline passes (on
    /// `now`). A wake that came before the sleep makes it return at once;
    /// a spurious return is allowed.
    pub park: fn(&ParkToken, Option<Nanos>),
    /// Wakes the thread sleeping (or about to sleep) on `token`.
    pub unpark: fn(&ParkToken),
    /// The monotonic clock, the same one the runtimes' platform reads, so
    /// a deadline means the same instant to a thread and to a process.
    pub now: fn() -> Nanos,
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

/// How plain threads block: the installed host's [`ThreadHooks`], or,
/// before any host is installed, the Linux platform's (with the `linux`
/// feature), so a thread can wait on a channel before the first runtime
/// is built. `None` on a host that cannot block threads.
#[inline]
pub(crate) fn thread_hooks() -> Option<&'static ThreadHooks> {
    match hooks() {
        Some(hooks) => hooks.threads,
        None => DEFAULT_THREADS,
    }
}

/// Plain threads on Linux sleep on a futex, on the platform's monotonic
/// clock (the one every Linux runtime reads).
#[cfg(feature = "linux")]
pub static LINUX_THREADS: ThreadHooks = ThreadHooks {
    park: smarm_platform::linux::park_token,
    unpark: smarm_platform::linux::unpark_token,
    now: smarm_platform::linux::monotonic_now,
};

#[cfg(feature = "linux")]
const DEFAULT_THREADS: Option<&'static ThreadHooks> = Some(&LINUX_THREADS);
#[cfg(not(feature = "linux"))]
const DEFAULT_THREADS: Option<&'static ThreadHooks> = None;
