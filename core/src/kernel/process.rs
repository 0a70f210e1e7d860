//! What a running process can do to itself: yield, park, sleep, spawn,
//! observe a stop request, and the wait protocol every blocking primitive
//! is built on.
//!
//! The wait protocol: a blocking primitive calls [`begin_wait`] *before*
//! taking any lock, registers the returned [`Waker`] with whatever will
//! wake it (one or many places), then either [`park`]s, or — when it finds
//! what it waited for while registering — calls [`retire_wait`] so every
//! registration it left behind is stale. Every wake is stamped with the
//! wait's epoch and consumes it, so at most one wake lands per wait and a
//! stale registration is one failed CAS. The only wildcard wake is
//! `request_stop`, and it is terminal. (A wait may also be opened under a
//! lock without observing a stop, `open_wait_unobserved`, if the stop is
//! observed after the lock is released and before the park.)

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::any::Any;
use core::ptr::{self, NonNull};
use core::time::Duration;

use smarm_arch::{Arch, Native};

use crate::kernel::asan;
use crate::kernel::current::Here;
use crate::kernel::deadlock::{WaitKind, WaitSite};
use crate::kernel::error::NotInProcess;
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::Shared;
use crate::kernel::slab::Slot;
use crate::kernel::state::{Park, State};
use crate::kernel::time::Instant;
use crate::kernel::timer::TimerReason;
use crate::kernel::worker::{self, SwitchReason, WorkerCore};

/// The process running on this thread, as seen from its own frames: its
/// worker core, runtime, slot index and generation.
///
/// A `Running` lives only in the frames of the process it names, and is
/// never stored. That is what makes its references sound: the process runs
/// only inside its worker's pass, whose core holds an `Arc` to the runtime;
/// a process still suspended when its worker or runtime is dropped is never
/// resumed, so a `Running` in its frames is never used again.
pub(crate) struct Running {
    core: NonNull<WorkerCore>,
    shared: NonNull<Shared>,
    /// Its slot, as its worker recorded it when it resumed the process.
    slot: NonNull<Slot>,
    index: u32,
    generation: u32,
}

impl Running {
    /// The running process of this thread's current worker, if any.
    #[inline]
    pub(crate) fn get() -> Option<Running> {
        Running::get_in(Here::get())
    }

    /// [`get`](Self::get) on the worker record `here` the caller already
    /// looked up.
    #[inline]
    pub(crate) fn get_in(here: Here) -> Option<Running> {
        let core = here.ptr()?.cast::<WorkerCore>();
        // SAFETY: from `core_ptr`; a `Running` lives only in the frames of
        // the process it names, which run inside their worker's pass.
        let (index, generation) = unsafe { worker::core_ref(core) }.current.running.get()?;
        // SAFETY: as above.
        let core_ref = unsafe { worker::core_ref(core) };
        let shared = NonNull::from(&*core_ref.shared);
        // Set with `running` (`worker::enter`): the running process's slot.
        let slot = core_ref.running_slot.get();
        Some(Running { core, shared, slot, index, generation })
    }

    /// The worker record of this thread, which runs the process: what
    /// `Here::get` returns in the process's frames, without the look-up.
    #[inline]
    pub(crate) fn here(&self) -> Here {
        // The record is the core's first field (`worker::core_ptr`).
        Here::of_running(self.core.cast())
    }

    /// The process's worker core.
    #[inline]
    fn core(&self) -> &WorkerCore {
        // SAFETY: see the type's doc: the core outlives every frame of a
        // process that can still run.
        unsafe { worker::core_ref(self.core) }
    }

    /// The process's runtime.
    #[inline]
    pub(crate) fn shared(&self) -> &Shared {
        // SAFETY: see the type's doc: the runtime outlives every frame of a
        // process that can still run.
        unsafe { self.shared.as_ref() }
    }

    /// The process's slot.
    #[inline]
    pub(crate) fn slot(&self) -> &Slot {
        debug_assert!(ptr::eq(self.slot.as_ptr(), self.shared().slot_of(self.pid())));
        // SAFETY: the worker recorded this slot when it resumed the process
        // this `Running` names (`worker::enter`); slots never move and are
        // freed only with the runtime, which outlives every frame of a
        // process that can still run (see the type's doc).
        unsafe { self.slot.as_ref() }
    }

    /// The process's pid.
    #[inline]
    pub(crate) fn pid(&self) -> Pid {
        Pid::from_parts(self.index, self.generation)
    }

    /// A counted handle to the process's runtime for a registration: one
    /// of its worker's spares if it has one (see `WorkerCore::keep_handle`).
    #[inline]
    fn registration_handle(&self) -> Arc<Shared> {
        self.core().runtime_handle()
    }

    /// Switches from the running process to the next process of its
    /// worker's pass (a direct hand-off), or back to its worker when there
    /// is none or the process is exiting.
    ///
    /// # Safety
    ///
    /// For a park, the state word was already moved out of `Running`; for
    /// an exit, this is the final switch (`finish`). A yield leaves the
    /// word `Running` (see `state`, "A yield writes nothing"): the process
    /// is then queued only by this switch, on its own worker's ready
    /// queue, from which only this thread takes — no waker can queue it.
    /// Either way nothing resumes the process before it has left.
    unsafe fn switch_out(&self, reason: SwitchReason) {
        let body = self.slot().body.get();
        let core = self.core();
        debug_assert!(
            reason != SwitchReason::Yield
                || matches!(self.slot().state.snapshot().state(), State::Running | State::RunningNotified),
            "a yield with the word out of Running"
        );
        debug_assert!(core.current.preempt.enabled(), "switch with preemption disabled (a lock held?)");
        // Under AddressSanitizer every switch goes through the worker: the
        // fiber annotations name the driver's stack as the one a process
        // leaves to, and a process-to-process switch would need both ends'
        // fake stacks threaded through the chain.
        #[cfg(not(smarm_asan))]
        if reason != SwitchReason::Exit {
            if let Some(next) = worker::hand_off(core, self.shared(), reason) {
                // SAFETY: 1. `next` is the context of the process `hand_off`
                //    just made running: made by init_context or saved by its
                //    last switch out, not resumed since, its stack owned by
                //    its live slot;
                // 2. the process's own context slot (`save`) is ours to save
                //    into, and distinct from `next` (another slot's);
                // 3. nothing resumes us before we have left (the contract:
                //    parked, or yielding onto this worker's own queue), and
                //    nothing else runs on this worker until the process we
                //    switch to switches out.
                unsafe { Native::hand_off(ptr::addr_of_mut!((*body).context), next) };
                worker::landed(self.core(), self.shared());
                return;
            }
        }
        core.reason.set(reason);
        let fake_stack = asan::process_to_driver(core.driver_stack.get(), reason == SwitchReason::Exit);
        let load = core.context.get().cast_const();
        // SAFETY: 1. the worker's context (`load`) was saved by the
        //    `resume` in `run` that is running this process (perhaps
        //    through a chain of hand-offs), so the `suspend` returns there;
        //    it is an UnsafeCell only the switch code touches;
        // 2. the process's own context slot (`save`) is ours to save into:
        //    the running process owns its body;
        // 3. no wake can resume us before we have left (the contract:
        //    parked, or queued by our worker only after this switch).
        unsafe { Native::suspend(ptr::addr_of_mut!((*body).context), load) };
        // Resumed, perhaps by another driver thread: its stack is where the
        // next switch out goes.
        self.core().driver_stack.set(asan::process_landed(fake_stack));
        worker::landed(self.core(), self.shared());
    }

    /// Ends the process with `reason` (refined by the reason a pending
    /// stop was requested with) and switches to its worker for the last
    /// time. Returns only if the process is resumed, which never happens.
    pub(crate) fn finish(&self, reason: ExitReason) {
        let slot = self.slot();
        // SAFETY: the running process owns its body.
        let value = unsafe { (*slot.body.get()).value.take() };
        {
            let mut cold = slot.cold.lock_in(self.here());
            let stop_reason = cold.stop_reason.take();
            cold.exit = Some(match reason {
                ExitReason::Stopped => stop_reason.unwrap_or(ExitReason::Stopped),
                reason => reason,
            });
            cold.value = value;
            slot.state.finish(self.generation);
        }
        // SAFETY: the word is Done: this is the final switch.
        unsafe { self.switch_out(SwitchReason::Exit) };
    }

    /// Observation point for `request_stop`: raises the stop (unwinding,
    /// or abandoning on a host without unwinding) the first time it is seen.
    fn observe_stop(&self) {
        if self.slot().claim_stop() {
            (self.shared().hooks.raise_stop)();
        }
    }
}

/// The entry of every process stack (`Arch::init_context` target).
///
/// # Safety
///
/// Called only by the first switch into a process context made by
/// `spawn_on`, on its worker's driver, with `index` its slot.
pub(crate) unsafe extern "C" fn entry(index: usize) -> ! {
    let driver_stack = asan::process_landed(asan::FakeStack::fresh());
    match Running::get() {
        Some(running) => {
            running.core().driver_stack.set(driver_stack);
            worker::landed(running.core(), running.shared());
            debug_assert_eq!(running.index as usize, index);
            // In a block of its own: a body that never runs (stopped first)
            // is dropped here, before the final switch, which never returns.
            let reason = {
                let slot = running.slot();
                // SAFETY: the running process owns its body's entry.
                let body = unsafe { (*slot.body.get()).entry.take() };
                // A stop requested before the first run ends the process
                // before its body starts: nothing of it has run, so nothing
                // unwinds.
                let stopped = slot.claim_stop();
                match body {
                    Some(f) if !stopped => (running.shared().hooks.run_process)(f),
                    Some(unrun) => {
                        drop(unrun);
                        ExitReason::Stopped
                    }
                    None => ExitReason::Normal,
                }
            };
            worker::abandon(running, reason);
        }
        None => worker::abandon_current(ExitReason::Normal),
    };
    // abandon_current returns only off a worker, which cannot happen here.
    loop {
        Native::spin_hint();
    }
}

/// Keeps the running process's return value for its `JoinHandle`. Called
/// by the spawn wrapper as the body's last act.
pub(crate) fn stash_value(value: Box<dyn Any + Send>) {
    if let Some(running) = Running::get() {
        // SAFETY: the running process owns its body.
        unsafe { (*running.slot().body.get()).value = Some(value) };
    }
}

/// The running process's actor-local table (`otp::local`): a pointer to
/// the field, never a reference — the table is the process's own, and the
/// caller dereferences it only from that process's frames.
#[allow(clippy::type_complexity)]
pub(crate) fn running_locals() -> Option<*mut alloc::vec::Vec<(usize, Box<dyn Any + Send>)>> {
    let running = Running::get()?;
    // SAFETY: the running process owns its slot body; no reference to the
    // body is made, only a pointer to one field.
    Some(unsafe { ptr::addr_of_mut!((*running.slot().body.get()).locals) })
}

/// The pid of the calling process; `None` outside a process.
pub fn self_pid() -> Option<Pid> {
    worker::with_core(|core| {
        core.current.running.get().map(|(index, generation)| Pid::from_parts(index, generation))
    })?
}

/// Gives the worker to the next ready process; the caller goes to the back
/// of its worker's ready queue. An observation point for `request_stop`.
/// Outside a process it does nothing.
pub fn yield_now() {
    let Some(running) = Running::get() else { return };
    running.observe_stop();
    // SAFETY: a yield (the word stays Running; see `switch_out`).
    unsafe { running.switch_out(SwitchReason::Yield) };
    running.observe_stop();
}

/// The cooperative budget's yield: [`yield_now`], except that a pending
/// stop is not raised while the process is already unwinding (a panic's
/// destructors may send): raising it there would abort the program.
pub(crate) fn yield_for_budget() {
    let Some(running) = Running::get() else { return };
    let unwinding = (running.shared().hooks.unwinding)();
    if !unwinding {
        running.observe_stop();
    }
    // SAFETY: a yield (the word stays Running; see `switch_out`).
    unsafe { running.switch_out(SwitchReason::Yield) };
    if !unwinding {
        running.observe_stop();
    }
}

/// Whether the running process may be preempted now and has used up its
/// timeslice. The slice starts at the first check after a resume (the
/// worker does not read the counter on every switch: on a VM that read is
/// a large part of a yield), so a process is preempted `timeslice` after
/// its first preemption point.
#[inline]
fn preemption_due() -> bool {
    worker::with_core(|core| {
        if !core.current.may_switch() {
            return false;
        }
        let now = Native::timestamp();
        if core.slice_start.get() == 0 {
            core.slice_start.set(now);
            return false;
        }
        now.wrapping_sub(core.slice_start.get()) >= core.shared.timeslice_ticks
    })
    .unwrap_or(false)
}

/// An observation point without yielding: raises a pending stop, and
/// yields if the process has used up its timeslice while preemption is
/// enabled. Put it in long loops that neither allocate nor block.
pub fn check() {
    let Some(running) = Running::get() else { return };
    running.observe_stop();
    if preemption_due() {
        yield_now();
    }
}

/// Yields if the running process has used up its timeslice and preemption
/// is enabled; for hosts' preemption points (e.g. an allocator wrapper).
/// Does not observe stops (an allocation is not a safe unwind point).
#[inline]
pub fn maybe_preempt() {
    if preemption_due() {
        let Some(running) = Running::get() else { return };
        // SAFETY: a yield (the word stays Running; see `switch_out`).
        unsafe { running.switch_out(SwitchReason::Yield) };
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
    /// [`wake`](Self::wake) from the worker record `here` the caller
    /// already looked up.
    #[inline]
    pub(crate) fn wake_in(&self, here: Here) -> bool {
        self.shared.unpark_at_in(self.pid, self.epoch, here)
    }
    /// [`wake_in`](Self::wake_in) by a registration that is used up: the
    /// handle it holds becomes a spare of the waking worker if that worker
    /// is of the same runtime (see `WorkerCore::keep_handle`).
    #[inline]
    pub(crate) fn wake_last_in(self, here: Here) -> bool {
        let landed = self.wake_in(here);
        if let Some(core) = worker::core_in(&here) {
            core.keep_handle(self.shared);
        }
        landed
    }
    /// Whether `self` and `other` belong to the same runtime.
    pub fn same_runtime(&self, other: &Waker) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

/// Opens a new wait for the calling process and returns its waker. Call it
/// before taking any lock: it is an observation point for `request_stop`.
/// A deadlock report names the wait as a bare park at the caller's line.
#[track_caller]
pub fn begin_wait() -> Result<Waker, NotInProcess> {
    begin_wait_at(WaitSite::here(WaitKind::Park))
}

/// [`begin_wait`], recording `site` as what the wait is for and where it
/// began (what a deadlock report says of the process while it parks).
pub fn begin_wait_at(site: WaitSite) -> Result<Waker, NotInProcess> {
    let running = Running::get().ok_or(NotInProcess)?;
    let slot = running.slot();
    slot.record_wait(site);
    let epoch = slot.state.begin_wait(running.generation);
    running.observe_stop();
    running.core().current.wait_open.set(true);
    Ok(Waker { shared: running.registration_handle(), pid: running.pid(), epoch })
}

/// [`begin_wait_at`] without a counted handle to the runtime: returns the
/// wait's pid and epoch. With `observe` false it does not observe a stop,
/// so it may be called under a runtime lock (nothing may unwind there);
/// the caller must then call [`observe_stop`] after releasing the lock and
/// before it parks, since the opening ate any wildcard notification a stop
/// request left. `None` outside a process.
#[inline]
pub(crate) fn open_wait(site: WaitSite, observe: bool) -> Option<(Pid, u32)> {
    open_wait_in(Here::get(), site, observe)
}

/// [`open_wait`] on the worker record `here` the caller already looked up.
#[inline]
pub(crate) fn open_wait_in(here: Here, site: WaitSite, observe: bool) -> Option<(Pid, u32)> {
    let running = Running::get_in(here)?;
    let slot = running.slot();
    slot.record_wait(site);
    let epoch = slot.state.begin_wait(running.generation);
    if observe {
        running.observe_stop();
    }
    running.core().current.wait_open.set(true);
    Some((running.pid(), epoch))
}

/// [`open_wait`] without observing a stop (see there), on the worker
/// record `here`, returning the wait's waker, to register under the lock
/// the caller holds.
#[inline]
///
/// The wait may reuse the word's epoch (`StateWord::begin_wait_reusing`):
/// a wake may then come from a registration of an earlier wait that was
/// opened and never ended, so the caller must take a wake as "look again".
pub(crate) fn open_wait_unobserved(here: Here, site: WaitSite) -> Option<Waker> {
    let running = Running::get_in(here)?;
    let slot = running.slot();
    slot.record_wait(site);
    let epoch = slot.state.begin_wait_reusing(running.generation);
    running.core().current.wait_open.set(true);
    Some(Waker { shared: running.registration_handle(), pid: running.pid(), epoch })
}

/// A waker for the wait `epoch` of `pid` if `pid` is the calling process,
/// with a counted handle to its runtime; `None` from anywhere else.
pub(crate) fn waker_of_running(pid: Pid, epoch: u32) -> Option<Waker> {
    let running = Running::get()?;
    (running.pid() == pid).then(|| Waker { shared: running.registration_handle(), pid, epoch })
}

/// Observation point for `request_stop` in the calling process (found
/// through the worker record `here` the caller looked up): raises a pending
/// stop the first time it is seen. Outside a process it does nothing.
#[inline]
pub(crate) fn observe_stop_in(here: Here) {
    if let Some(running) = Running::get_in(here) {
        running.observe_stop();
    }
}

/// Ends the current wait without parking: every registration it made is
/// now stale and a wake that already landed is eaten.
pub fn retire_wait() {
    retire_wait_in(Here::get());
}

/// [`retire_wait`] on the worker record `here` the caller already looked
/// up.
#[inline]
pub(crate) fn retire_wait_in(here: Here) {
    let Some(running) = Running::get_in(here) else { return };
    let _ = running.slot().state.retire_wait(running.generation);
    running.core().current.wait_open.set(false);
    running.observe_stop();
}

/// [`retire_wait`] without observing a stop: for a wait abandoned while
/// the process unwinds (a stop raised there would abort the program).
pub(crate) fn retire_wait_quietly() {
    let Some(running) = Running::get() else { return };
    let _ = running.slot().state.retire_wait(running.generation);
    running.core().current.wait_open.set(false);
}

/// Parks the calling process until a wake stamped with its current wait's
/// epoch lands (or a stop is requested, which raises on wake-up). Returns
/// at once if that wake already landed. Outside a process it does nothing.
pub fn park() {
    park_in(Here::get());
}

/// [`park`] on the worker record `here` the caller already looked up.
#[inline]
pub(crate) fn park_in(here: Here) {
    let Some(running) = Running::get_in(here) else { return };
    running.core().current.wait_open.set(false);
    match running.slot().state.park(running.generation) {
        // SAFETY: the word is Parked.
        Park::Parked => unsafe { running.switch_out(SwitchReason::Park) },
        Park::Notified => {}
    }
    running.observe_stop();
}

/// Arms a timer on the calling process's worker that wakes `waker`'s wait
/// at `deadline` (a `WaitTimeout`). Timers are never cancelled: if the
/// wait ends another way first, the timer fires as a stale no-op.
pub fn wake_at(waker: &Waker, deadline: Instant) -> Result<(), NotInProcess> {
    arm_timer(waker.pid, waker.epoch, deadline, TimerReason::WaitTimeout)
}

/// [`wake_at`] for the wait `epoch` of `pid`.
pub(crate) fn wake_wait_at(pid: Pid, epoch: u32, deadline: Instant) -> Result<(), NotInProcess> {
    arm_timer(pid, epoch, deadline, TimerReason::WaitTimeout)
}

/// Pushes a timer onto the current worker's heap.
fn arm_timer(pid: Pid, epoch: u32, deadline: Instant, reason: TimerReason) -> Result<(), NotInProcess> {
    worker::with_core(|core| {
        if core.current.running.get().is_none() {
            return Err(NotInProcess);
        }
        // Not preempted while the heap grows: the worker pops it between
        // runs.
        core.current.preempt.disable();
        core.timers.borrow_mut().push(deadline.as_nanos(), pid, epoch, reason);
        core.current.preempt.enable();
        Ok(())
    })
    .unwrap_or(Err(NotInProcess))
}

/// Parks the calling process until `deadline`.
#[track_caller]
pub fn sleep_until(deadline: Instant) -> Result<(), NotInProcess> {
    let (pid, epoch) = open_wait(WaitSite::here(WaitKind::Sleep), true).ok_or(NotInProcess)?;
    arm_timer(pid, epoch, deadline, TimerReason::Sleep)?;
    park();
    Ok(())
}

/// Parks the calling process for `duration`.
#[track_caller]
pub fn sleep(duration: Duration) -> Result<(), NotInProcess> {
    let now = now().ok_or(NotInProcess)?;
    sleep_until(now + duration)
}

/// The runtime's monotonic clock; `None` outside a process.
pub fn now() -> Option<Instant> {
    let running = Running::get()?;
    Some(Instant::from_nanos(running.shared().platform.now()))
}

/// The calling worker's runtime and id, if the thread is driving a worker.
pub(crate) fn current_shared() -> Option<(Arc<Shared>, usize)> {
    worker::with_core(|core| (core.shared.clone(), core.id))
}

/// Asks `pid` (of the caller's runtime) to stop. See
/// [`Runtime::request_stop`](crate::kernel::runtime::Runtime::request_stop).
pub fn request_stop(pid: Pid) -> Result<(), crate::kernel::error::NoProc> {
    let (shared, _) = current_shared().ok_or(crate::kernel::error::NoProc(pid))?;
    shared.request_stop(pid)
}

/// A handle to the runtime of the calling process.
pub fn current_runtime() -> Option<crate::kernel::runtime::Runtime> {
    let (shared, _) = current_shared()?;
    Some(crate::kernel::runtime::Runtime { shared })
}

/// The worker the calling process runs on.
pub fn current_worker() -> Option<usize> {
    worker::with_core(|core| core.id)
}
