//! Runtime events for an external tracer: spawns, exits (with the reason),
//! stop requests and supervisor restarts, of processes and handler actors
//! alike.
//!
//! One tracer per program image, set once with [`set_tracer`] (the hosted
//! crate's `tracing` feature sets one that forwards to the `tracing`
//! ecosystem). Unset, each event point costs one atomic load. The tracer is
//! called on the thread where the event happens, often with runtime state
//! half-way through a change: it must not block, spawn, send or take the
//! runtime's locks — record and return.

use crate::kernel::exit::ExitReason;
use crate::kernel::once::OnceRef;
use crate::kernel::pid::Pid;

/// One runtime event, as a tracer sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum TraceEvent<'a> {
    /// A process or handler actor was created on `worker`, by `parent` (the
    /// spawning process or actor, if any).
    Spawn {
        /// The new pid.
        pid: Pid,
        /// The worker it lives on.
        worker: usize,
        /// Who spawned it.
        parent: Option<Pid>,
    },
    /// A process or handler actor ended; its death notifications follow.
    Exit {
        /// The pid that ended.
        pid: Pid,
        /// Why (`Panicked` carries the panic message).
        reason: &'a ExitReason,
    },
    /// A stop was requested of `pid` (by `request_stop`, a link, an exit
    /// signal or a supervisor); it ends at its next observation point.
    StopRequested {
        /// The pid asked to stop.
        pid: Pid,
    },
    /// A supervisor is restarting child `child`, which ended with `reason`
    /// (its strategy may cycle siblings with it).
    Restart {
        /// The supervisor's pid.
        supervisor: Pid,
        /// The child's name.
        child: &'a str,
        /// The pid that ended.
        pid: Pid,
        /// Why it ended.
        reason: &'a ExitReason,
    },
}

/// A tracer: called with every event.
pub type Tracer = fn(&TraceEvent<'_>);

static TRACER: OnceRef<Tracer> = OnceRef::new();

/// Sets the program's tracer; `false` if a different one is already set
/// (the first wins, for the life of the program).
///
/// ```
/// # use smarm_core as smarm;
/// use smarm::kernel::trace::{set_tracer, TraceEvent};
///
/// fn ignore(_: &TraceEvent<'_>) {}
/// static IGNORE: smarm::kernel::trace::Tracer = ignore;
/// assert!(set_tracer(&IGNORE));
/// assert!(set_tracer(&IGNORE), "setting the same tracer again is fine");
/// ```
pub fn set_tracer(tracer: &'static Tracer) -> bool {
    TRACER.set(tracer)
}

/// Whether a tracer is set.
#[inline]
pub(crate) fn enabled() -> bool {
    TRACER.get().is_some()
}

/// Hands the event `make` builds to the tracer, if one is set (`make` runs
/// only then).
#[inline]
pub(crate) fn emit<'a>(make: impl FnOnce() -> TraceEvent<'a>) {
    if let Some(tracer) = TRACER.get() {
        tracer(&make());
    }
}
