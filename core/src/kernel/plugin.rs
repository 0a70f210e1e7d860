//! The seam through which a layer above the kernel runs its own work in
//! every worker's pass, and keeps *stackless* slots: pids whose body is not
//! a process but a value that layer drives (a handler actor).
//!
//! A runtime has at most one plugin, installed on first use. Each worker
//! makes its own state for it on its next pass and calls
//! [`WorkerPlugin::pass`] once per pass, after its processes ran. A
//! stackless slot sits `Parked` while its worker is not running it; a stop
//! request (the one wildcard wake) queues it like a process, and when the
//! worker pops it the kernel asks the plugin what to do
//! ([`WorkerPlugin::woken`]) instead of switching to a stack. The body's
//! end goes through the kernel's finalize like a process's: death hooks
//! (monitors, links, the registry) see one kind of pid.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::any::Any;

use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::Shared;

/// Work a layer above the kernel does in each worker's pass.
pub(crate) trait WorkerPlugin: Any + Send + Sync {
    /// The plugin's state for worker `worker`, made on that worker's first
    /// pass after the plugin is installed. Only that worker's driver
    /// touches it.
    fn worker_state(&self, shared: &Arc<Shared>, worker: usize) -> Box<dyn Any>;

    /// The plugin's share of one pass of worker `worker`, run after the
    /// worker's processes. `budget` is the configured ingress budget
    /// (`usize::MAX` for unlimited). Returns whether it did work or has
    /// work left that the next pass will do (so the driver must not park).
    fn pass(&self, shared: &Shared, worker: usize, state: &dyn Any, budget: usize) -> bool;

    /// The stackless body `pid` of this worker was queued (a stop request,
    /// or an end the plugin asked for while it was queued) and the worker
    /// has taken it off its queue. `Some(reason)`: end it now with that
    /// reason; `None`: it goes back to `Parked`.
    fn woken(&self, shared: &Shared, state: &dyn Any, pid: Pid) -> Option<ExitReason>;
}
