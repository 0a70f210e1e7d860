//! What a running process can do to itself: yield, park, sleep, spawn,
//! observe a stop request, and the wait protocol every blocking primitive
//! is built on.
//!
//! The wait protocol (ROADMAP v0.7): a blocking primitive calls
//! [`begin_wait`] *before* taking any lock, registers the returned
//! [`Waker`] with whatever will wake it (one or many places), then either
//! [`park`]s, or — when it finds what it waited for while registering —
//! calls [`retire_wait`] so every registration it left behind is stale.
//! Every wake is stamped with the wait's epoch and consumes it, so at most
//! one wake lands per wait and a stale registration is one failed CAS.
//! The only wildcard wake is `request_stop`, and it is terminal.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::ptr;
use core::time::Duration;

use smarm_arch::{Arch, Native};

use crate::kernel::atomic::Ordering;
use crate::kernel::error::{NotInProcess, SpawnError};
use crate::kernel::host::Outcome;
use crate::kernel::join::JoinHandle;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::{Shared, Slot, STOP_RAISED, STOP_REQUESTED};
use crate::kernel::state::Park;
use crate::kernel::time::Instant;
use crate::kernel::timer::TimerReason;
use crate::kernel::worker::{abandon_current, current_core, SwitchReason, WorkerCore};

/// Disables preemption on the calling worker for its lifetime; nests.
/// Every runtime critical section holds one: a process preempted while
/// holding a runtime lock would stall every other contender.
#[derive(Debug)]
#[must_use = "preemption is re-enabled when the guard is dropped"]
pub struct NoPreempt {
    core: *mut WorkerCore,
}

impl NoPreempt {
    /// Disables preemption until the guard drops (a no-op off a worker).
    #[inline]
    #[allow(clippy::new_without_default)]
    pub fn new() -> NoPreempt {
        let core = current_core().unwrap_or(ptr::null_mut());
        if !core.is_null() {
            // SAFETY: the current core is live for the enclosing pass, and
            // the guard cannot outlive a switch (it is never held across a
            // park: see `park`'s debug assertion).
            unsafe { (*core).preempt_disabled += 1 };
        }
        NoPreempt { core }
    }

    /// The worker core this guard holds preemption off on (null off a
    /// worker).
    #[inline]
    pub(crate) fn core(&self) -> *mut WorkerCore {
        self.core
    }
}

impl Drop for NoPreempt {
    #[inline]
    fn drop(&mut self) {
        if !self.core.is_null() {
            // SAFETY: as in `new`.
            unsafe { (*self.core).preempt_disabled -= 1 };
        }
    }
}

/// The running process on this thread: its worker core, runtime, slot and
/// generation.
fn running() -> Option<(*mut WorkerCore, &'static Shared, &'static Slot, u32)> {
    let core = current_core()?;
    // SAFETY: the current core is live for the enclosing pass.
    let (index, generation) = unsafe { (*core).running }?;
    // SAFETY: the core holds an Arc to the runtime for its whole life, and
    // the running process cannot outlive its worker's pass. The 'static is
    // a local fiction: callers never store these references.
    let shared: &'static Shared = unsafe { &*Arc::as_ptr(&(*core).shared) };
    let slot = shared.slot(index)?;
    Some((core, shared, slot, generation))
}

/// Switches from the running process back to its worker.
///
/// # Safety
///
/// `core` is the current core, `slot` the running process's slot, and the
/// state word was already moved out of `Running` (yield / park), or this
/// is the final switch.
unsafe fn switch_out(core: *mut WorkerCore, slot: &Slot, reason: SwitchReason) {
    // SAFETY: per the contract; no reference into the core is live. The
    // worker's context was saved by the `resume` in `run` that is running
    // this process, so the `suspend` returns there.
    unsafe {
        debug_assert_eq!((*core).preempt_disabled, 0, "switch with preemption disabled (a lock held?)");
        (*core).reason = reason;
        let save = ptr::addr_of_mut!((*slot.body.get()).context);
        let load = ptr::addr_of!((*core).context);
        Native::suspend(save, load);
    }
}

/// Observation point for `request_stop`: raises the stop (unwinding, or
/// abandoning on a host without unwinding) the first time it is seen.
fn observe_stop(shared: &Shared, slot: &Slot) {
    // Acquire pairs with the AcqRel that set the flag in request_stop.
    if slot.stop.load(Ordering::Acquire) == STOP_REQUESTED
        && slot
            .stop
            .compare_exchange(STOP_REQUESTED, STOP_RAISED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        (shared.hooks.raise_stop)();
    }
}

/// The entry of every process stack (`Arch::init_context` target).
///
/// # Safety
///
/// Called only by the first switch into a process context made by
/// `spawn_on`, on its worker's driver, with `index` its slot.
pub(crate) unsafe extern "C" fn entry(index: usize) -> ! {
    let outcome = match running() {
        Some((_, shared, slot, _)) => {
            debug_assert_eq!(slot as *const Slot, shared.slot(index as u32).map_or(ptr::null(), |s| s));
            // SAFETY: the running process owns its body's entry.
            let body = unsafe { (*slot.body.get()).entry.take() };
            // A stop requested before the first run ends the process before
            // its body starts: nothing of it has run, so nothing unwinds.
            let stopped = slot
                .stop
                .compare_exchange(STOP_REQUESTED, STOP_RAISED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            match body {
                Some(_) if stopped => Outcome::Stopped,
                Some(f) => (shared.hooks.run_process)(f),
                None => Outcome::Normal,
            }
        }
        None => Outcome::Normal,
    };
    abandon_current(outcome);
    // abandon_current returns only off a worker, which cannot happen here.
    loop {
        Native::spin_hint();
    }
}

/// The pid of the calling process; `None` outside a process.
pub fn self_pid() -> Option<Pid> {
    let core = current_core()?;
    // SAFETY: current core, live for the enclosing pass.
    let (index, generation) = unsafe { (*core).running }?;
    Some(Pid::from_parts(index, generation))
}

/// Gives the worker to the next ready process; the caller goes to the back
/// of its worker's ready queue. An observation point for `request_stop`.
/// Outside a process it does nothing.
pub fn yield_now() {
    let Some((core, shared, slot, generation)) = running() else { return };
    observe_stop(shared, slot);
    slot.state.yield_now(generation);
    // SAFETY: current core and running slot; the word is Queued.
    unsafe { switch_out(core, slot, SwitchReason::Yield) };
    observe_stop(shared, slot);
}

/// Whether the running process has used up its timeslice. The slice starts
/// at the first check after a resume (the worker does not read the counter
/// on every switch: on a VM that read is a large part of a yield), so a
/// process is preempted `timeslice` after its first preemption point.
///
/// # Safety
///
/// `core` is the current core, live for the enclosing pass.
#[inline]
unsafe fn slice_used_up(core: *mut WorkerCore, timeslice_ticks: u64) -> bool {
    let now = Native::timestamp();
    // SAFETY: per the contract; no reference into the core is held.
    unsafe {
        if (*core).slice_start == 0 {
            (*core).slice_start = now;
            return false;
        }
        now.wrapping_sub((*core).slice_start) >= timeslice_ticks
    }
}

/// An observation point without yielding: raises a pending stop, and
/// yields if the process has used up its timeslice while preemption is
/// enabled. Put it in long loops that neither allocate nor block.
pub fn check() {
    let Some((core, shared, slot, _)) = running() else { return };
    observe_stop(shared, slot);
    // SAFETY: current core, live for the enclosing pass.
    let due = unsafe {
        (*core).preempt_disabled == 0 && !(*core).wait_open && slice_used_up(core, shared.timeslice_ticks)
    };
    if due {
        yield_now();
    }
}

/// Yields if the running process has used up its timeslice and preemption
/// is enabled; for hosts' preemption points (e.g. an allocator wrapper).
/// Does not observe stops (an allocation is not a safe unwind point).
#[inline]
pub fn maybe_preempt() {
    let Some(core) = current_core() else { return };
    // SAFETY: current core, live for the enclosing pass.
    let due = unsafe {
        (*core).running.is_some()
            && (*core).preempt_disabled == 0
            && !(*core).wait_open
            && slice_used_up(core, (*Arc::as_ptr(&(*core).shared)).timeslice_ticks)
    };
    if due {
        let Some((core, _, slot, generation)) = running() else { return };
        slot.state.yield_now(generation);
        // SAFETY: current core and running slot; the word is Queued.
        unsafe { switch_out(core, slot, SwitchReason::Yield) };
    }
}

/// A registration handle for one wait of one process: wakes that wait and
/// nothing else, at most once across all its clones.
#[derive(Clone)]
pub struct Waker {
    shared: Arc<Shared>,
    pid: Pid,
    epoch: u32,
}

impl core::fmt::Debug for Waker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Waker").field("pid", &self.pid).field("epoch", &self.epoch).finish()
    }
}

impl Waker {
    /// The waiting process.
    pub fn pid(&self) -> Pid {
        self.pid
    }
    /// The wait's epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }
    /// Wakes the wait if it is still the current one; returns whether the
    /// wake landed. Callable from any thread.
    pub fn wake(&self) -> bool {
        self.shared.unpark_at(self.pid, self.epoch)
    }
    /// Whether `self` and `other` belong to the same runtime.
    pub fn same_runtime(&self, other: &Waker) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

/// Opens a new wait for the calling process and returns its waker. Call it
/// before taking any lock: it is an observation point for `request_stop`.
pub fn begin_wait() -> Result<Waker, NotInProcess> {
    let (core, shared, slot, generation) = running().ok_or(NotInProcess)?;
    let epoch = slot.state.begin_wait(generation);
    observe_stop(shared, slot);
    // SAFETY: current core, live for the enclosing pass.
    unsafe { (*core).wait_open = true };
    // SAFETY: current core, live for the enclosing pass.
    let (index, _) = unsafe { (*core).running }.ok_or(NotInProcess)?;
    Ok(Waker { shared: shared_arc(core), pid: Pid::from_parts(index, generation), epoch })
}

fn shared_arc(core: *mut WorkerCore) -> Arc<Shared> {
    // SAFETY: current core, live for the enclosing pass.
    unsafe { (*core).shared.clone() }
}

/// Ends the current wait without parking: every registration it made is
/// now stale and a wake that already landed is eaten.
pub fn retire_wait() {
    let Some((core, shared, slot, generation)) = running() else { return };
    let _ = slot.state.retire_wait(generation);
    // SAFETY: current core, live for the enclosing pass.
    unsafe { (*core).wait_open = false };
    observe_stop(shared, slot);
}

/// Parks the calling process until a wake stamped with its current wait's
/// epoch lands (or a stop is requested, which raises on wake-up). Returns
/// at once if that wake already landed. Outside a process it does nothing.
pub fn park() {
    let Some((core, shared, slot, generation)) = running() else { return };
    // SAFETY: current core, live for the enclosing pass.
    unsafe { (*core).wait_open = false };
    match slot.state.park(generation) {
        // SAFETY: current core and running slot; the word is Parked.
        Park::Parked => unsafe { switch_out(core, slot, SwitchReason::Park) },
        Park::Notified => {}
    }
    observe_stop(shared, slot);
}

/// Arms a timer on the calling process's worker that wakes `waker`'s wait
/// at `deadline` (a `WaitTimeout`). Timers are never cancelled: if the
/// wait ends another way first, the timer fires as a stale no-op.
pub fn wake_at(waker: &Waker, deadline: Instant) -> Result<(), NotInProcess> {
    let (core, ..) = running().ok_or(NotInProcess)?;
    // Not preempted while the heap grows: the worker pops it between runs.
    let _no_preempt = NoPreempt::new();
    // SAFETY: current core; no reference into it is live.
    unsafe { (*core).timers.push(deadline.as_nanos(), waker.pid, waker.epoch, TimerReason::WaitTimeout) };
    Ok(())
}

/// Parks the calling process until `deadline`.
pub fn sleep_until(deadline: Instant) -> Result<(), NotInProcess> {
    let waker = begin_wait()?;
    let (core, ..) = running().ok_or(NotInProcess)?;
    {
        // Not preempted while the heap grows (nor inside the open wait).
        let _no_preempt = NoPreempt::new();
        // SAFETY: current core; no reference into it is live.
        unsafe { (*core).timers.push(deadline.as_nanos(), waker.pid, waker.epoch, TimerReason::Sleep) };
    }
    park();
    Ok(())
}

/// Parks the calling process for `duration`.
pub fn sleep(duration: Duration) -> Result<(), NotInProcess> {
    let now = now().ok_or(NotInProcess)?;
    sleep_until(now + duration)
}

/// The runtime's monotonic clock; `None` outside a process.
pub fn now() -> Option<Instant> {
    let (_, shared, ..) = running()?;
    Some(Instant::from_nanos(shared.platform.now()))
}

/// Spawns `f` as a process on the caller's worker.
pub fn spawn<F: FnOnce() + Send + 'static>(f: F) -> Result<JoinHandle, SpawnError> {
    crate::kernel::coop::spend();
    let core = current_core().ok_or(SpawnError::NotInProcess)?;
    // SAFETY: current core, live for the enclosing pass.
    let worker = unsafe { (*core).id };
    shared_arc(core).spawn_on(worker, Box::new(f))
}

/// Spawns `f` as a process on worker `worker` of the caller's runtime.
pub fn spawn_on<F: FnOnce() + Send + 'static>(worker: usize, f: F) -> Result<JoinHandle, SpawnError> {
    crate::kernel::coop::spend();
    let core = current_core().ok_or(SpawnError::NotInProcess)?;
    shared_arc(core).spawn_on(worker, Box::new(f))
}

/// Asks `pid` (of the caller's runtime) to stop. See
/// [`Runtime::request_stop`](crate::Runtime::request_stop).
pub fn request_stop(pid: Pid) -> Result<(), crate::kernel::error::NoProc> {
    let core = current_core().ok_or(crate::kernel::error::NoProc(pid))?;
    shared_arc(core).request_stop(pid)
}

/// A handle to the runtime of the calling process.
pub fn current_runtime() -> Option<crate::Runtime> {
    let core = current_core()?;
    Some(crate::Runtime { shared: shared_arc(core) })
}

/// The worker the calling process runs on.
pub fn current_worker() -> Option<usize> {
    let core = current_core()?;
    // SAFETY: current core, live for the enclosing pass.
    Some(unsafe { (*core).id })
}
