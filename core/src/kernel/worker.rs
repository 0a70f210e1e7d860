//! Workers: each owns a disjoint set of processes and advances them one
//! bounded pass at a time ([`Worker::try_tick`]). A worker is logical: its
//! host decides which thread calls `try_tick`, and may change its mind
//! between passes.
//!
//! The mutable state of a worker (`WorkerCore`) lives behind a raw
//! pointer, never behind a reference held across a switch: while a process
//! runs, the suspended `try_tick` frame keeps only that pointer, and the
//! process reaches the core through the `current` module.

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::cell::{Cell, OnceCell, RefCell, UnsafeCell};
use core::fmt;
use core::ptr::{self, NonNull};

use smarm_arch::{Arch, Context, Native};
use smarm_platform::{Nanos, OverflowEvidence, Stack};

use crate::kernel::asan;
use crate::kernel::atomic::{AtomicU64, Ordering};
use crate::kernel::current::{self, Current};
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::Shared;
use crate::kernel::slab::{Slot, SlotBody};
use crate::kernel::stackless::{self, OnWorker};
use crate::kernel::timer::Timers;

/// Why a process switched back to its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SwitchReason {
    /// It yielded: put it at the back of the ready queue.
    Yield,
    /// It parked: a wake will queue it.
    Park,
    /// It finished: finalize it.
    Exit,
}

/// Counters published at the end of every pass (Relaxed: they are
/// statistics, not synchronisation).
#[derive(Debug, Default)]
pub(crate) struct WorkerStats {
    passes: AtomicU64,
    switches: AtomicU64,
    spawned: AtomicU64,
    exited: AtomicU64,
    ready: AtomicU64,
    parked: AtomicU64,
    timers_fired: AtomicU64,
    timeouts_fired: AtomicU64,
}

/// A worker's statistics as of its last completed pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Passes made.
    pub passes: u64,
    /// Switches into processes.
    pub switches: u64,
    /// Processes that started on this worker.
    pub spawned: u64,
    /// Processes finalized on this worker.
    pub exited: u64,
    /// Processes in the ready queue at the end of the last pass.
    pub ready: u64,
    /// Live processes that are neither ready nor running (parked, or woken
    /// and in flight through a ring).
    pub parked: u64,
    /// Timers fired by this worker (sleeps and wait deadlines, stale or not).
    pub timers_fired: u64,
    /// Of those, wait deadlines (`recv_timeout`, `select_timeout`, …).
    pub timeouts_fired: u64,
}

impl WorkerStats {
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            passes: self.passes.load(Ordering::Relaxed),
            switches: self.switches.load(Ordering::Relaxed),
            spawned: self.spawned.load(Ordering::Relaxed),
            exited: self.exited.load(Ordering::Relaxed),
            ready: self.ready.load(Ordering::Relaxed),
            parked: self.parked.load(Ordering::Relaxed),
            timers_fired: self.timers_fired.load(Ordering::Relaxed),
            timeouts_fired: self.timeouts_fired.load(Ordering::Relaxed),
        }
    }
}

/// The mutable state of one worker.
///
/// Reached through shared references only (the pass, and the process it
/// runs through [`with_core`], both hold one at once), so every field that
/// changes is a `Cell` or `RefCell`; the saved driver context is an
/// `UnsafeCell` that only the switch code touches, through raw pointers.
///
/// `repr(C)` with the [`Current`] record first: the pointer registered as
/// the thread's current worker is the core's address, which the kernel's
/// leaves read as the record alone (`current::with`).
#[repr(C)]
pub(crate) struct WorkerCore {
    /// What the kernel's leaves may know of this worker (the running
    /// process, its preemption-off sections, open wait and budget).
    pub(crate) current: Current,
    pub(crate) id: usize,
    pub(crate) shared: Arc<Shared>,
    /// The running process's slot (set with `current.running`; stale
    /// otherwise). Slots never move, so a process reaches its own slot in
    /// one load instead of a segment look-up, at every wait and stop
    /// observation.
    pub(crate) running_slot: Cell<NonNull<Slot>>,
    pub(crate) ready: RefCell<VecDeque<u32>>,
    /// Processes spawned here by processes of this worker, not yet run: a
    /// stack of batches whose top (the vector's end) runs next. A batch is
    /// one process's spawns between two of its switches, kept in spawn
    /// order (stored reversed); the newest batch is on top. See [`pass`].
    fresh: RefCell<Vec<u32>>,
    /// The running process's spawns so far, in order; moved onto `fresh`
    /// when it switches out.
    spawned_now: RefCell<Vec<u32>>,
    pub(crate) timers: RefCell<Timers>,
    /// The driver's context while a process runs.
    pub(crate) context: UnsafeCell<Context>,
    /// The driver's stack, for AddressSanitizer's switch annotations
    /// (empty unless built with `--cfg smarm_asan`).
    #[cfg_attr(not(smarm_asan), allow(dead_code))]
    pub(crate) driver_stack: Cell<asan::StackRange>,
    pub(crate) reason: Cell<SwitchReason>,
    /// Timestamp of the running process's first preemption check since it
    /// was resumed; 0 until then.
    pub(crate) slice_start: Cell<u64>,
    /// What is left of the running pass's budgets for ready processes and
    /// fresh spawns: 0 outside its step that runs processes, which ends
    /// every chain of direct hand-offs (see [`hand_off`]).
    ready_left: Cell<usize>,
    fresh_left: Cell<usize>,
    /// The process that handed the worker directly to the running one and
    /// whose switch out is not yet finished, with its slot: its landing
    /// ([`landed`]) checks its stack.
    outgoing: Cell<Option<(NonNull<Slot>, Pid)>>,
    stats: RefCell<StatsSnapshot>,
    live_here: Cell<u64>,
    /// The runtime's worker plugin and this worker's state for it, set on
    /// the first pass after the plugin is installed.
    plugin: OnceCell<OnWorker>,
    /// Counted handles to this worker's runtime (`shared`), kept from the
    /// registrations that wakes on this worker used up, for the next ones
    /// made here: a registration's handle then costs no reference-count
    /// update when one process wakes another of its worker. At most
    /// [`SPARE_HANDLES`].
    spare_handles: RefCell<Vec<Arc<Shared>>>,
}

/// Spare runtime handles a worker keeps (see `WorkerCore::spare_handles`).
const SPARE_HANDLES: usize = 8;

impl WorkerCore {
    /// Whether this is worker `worker` of the runtime at `shared`.
    #[inline]
    pub(crate) fn is(&self, shared: &Shared, worker: usize) -> bool {
        self.id == worker && ptr::eq(Arc::as_ptr(&self.shared), shared)
    }

    /// Pushes a just-queued process onto the local ready queue. Preemption
    /// is off for the push: growing the queue allocates, and a preempting
    /// allocator must not switch to this worker's driver — which pushes
    /// onto the same queue — in the middle of it.
    #[inline]
    pub(crate) fn push_ready(&self, index: u32) {
        self.current.preempt.disable();
        self.ready.borrow_mut().push_back(index);
        self.current.preempt.enable();
    }

    /// A counted handle to this worker's runtime, for a registration made
    /// here: a spare one if the worker has it, else a new clone.
    #[inline]
    pub(crate) fn runtime_handle(&self) -> Arc<Shared> {
        let spare = self.spare_handles.borrow_mut().pop();
        spare.unwrap_or_else(|| self.shared.clone())
    }

    /// Takes back `handle`, a counted handle a wake on this worker is done
    /// with, as a spare if it is to this worker's runtime and there is
    /// room (it is dropped otherwise).
    #[inline]
    pub(crate) fn keep_handle(&self, handle: Arc<Shared>) {
        if Arc::ptr_eq(&handle, &self.shared) {
            let mut spare = self.spare_handles.borrow_mut();
            if spare.len() < SPARE_HANDLES {
                spare.push(handle);
            }
        }
    }

    /// This worker's state for the runtime's plugin, if it has made it and
    /// it is a `T`.
    #[inline]
    pub(crate) fn plugin_state<T: Any>(&self) -> Option<&T> {
        self.stackless()?.state::<T>()
    }

    /// The plugin and this worker's state for it, made now if the plugin
    /// was installed since the last pass.
    #[inline]
    pub(crate) fn stackless(&self) -> Option<&OnWorker> {
        match self.plugin.get() {
            Some(on) => Some(on),
            // A runtime of processes alone has no plugin: answered here,
            // without the call (twice a pass).
            None if self.shared.plugin().is_none() => None,
            None => self.make_stackless(),
        }
    }

    /// [`stackless`](Self::stackless)'s first call after the plugin was
    /// installed.
    #[cold]
    #[inline(never)]
    fn make_stackless(&self) -> Option<&OnWorker> {
        let plugin = self.shared.plugin()?.clone();
        let on = OnWorker::new(plugin, &self.shared, self.id);
        Some(self.plugin.get_or_init(|| on))
    }

    /// Adds a process spawned on this worker from this worker's thread. A
    /// spawn by the running process joins its batch of fresh spawns, which
    /// runs as soon as it switches out; any other (the plugin's, a host's)
    /// goes to the back of the ready queue.
    #[inline]
    pub(crate) fn push_spawned(&self, index: u32) {
        if self.current.running.get().is_some() {
            // Preemption is off for the push, as in `push_ready`.
            self.current.preempt.disable();
            self.spawned_now.borrow_mut().push(index);
            self.current.preempt.enable();
        } else {
            self.push_ready(index);
        }
        self.stats.borrow_mut().spawned += 1;
        self.live_here.set(self.live_here.get() + 1);
    }
}

// The registered pointer is read as a `Current` by the leaves.
const _: () = assert!(core::mem::offset_of!(WorkerCore, current) == 0);

/// The calling thread's current worker core, if a pass is running on it.
#[inline]
pub(crate) fn core_ptr() -> Option<NonNull<WorkerCore>> {
    // The registered pointer is a core's address (`Worker::try_tick`); its
    // record is only its first field.
    current::registered().map(NonNull::cast)
}

/// Runs `f` on the current worker's core; `None` off a worker.
#[inline]
pub(crate) fn with_core<R>(f: impl FnOnce(&WorkerCore) -> R) -> Option<R> {
    let core = core_ptr()?;
    // SAFETY: the pointer was registered for the pass now running on this
    // thread and we use it within this call, inside that pass.
    Some(f(unsafe { core_ref(core) }))
}

/// The core of the worker record `here`, if the thread drives a worker.
#[inline]
pub(crate) fn core_in(here: &current::Here) -> Option<&WorkerCore> {
    // The registered pointer is a core's address (see `core_ptr`).
    let core = here.ptr()?.cast::<WorkerCore>();
    // SAFETY: `here` is kept only in the frames of the code that looked it
    // up, which run inside that worker's passes (see `Here`), and the
    // reference lives no longer than the borrow of `here`.
    Some(unsafe { core_ref(core) })
}

/// The core behind a pointer that [`core_ptr`] returned.
///
/// # Safety
///
/// As for `current::record_ref`: `core` came from [`core_ptr`] on a thread
/// driving its worker, and the reference is used only while that worker's
/// pass can still be running the code that holds it (the pass itself, or
/// a process of that worker). The core is freed only when the `Worker`
/// drops, which needs `&mut` and so cannot happen during a pass; it is only
/// ever reached through shared references.
#[inline]
pub(crate) unsafe fn core_ref<'a>(core: NonNull<WorkerCore>) -> &'a WorkerCore {
    // SAFETY: per the contract.
    unsafe { core.as_ref() }
}

/// One logical worker, owned by exactly one driver at a time.
pub struct Worker {
    core: NonNull<WorkerCore>,
}

// SAFETY: a Worker is driven by one owner at a time (`try_tick` takes
// `&mut self`); the core it points to moves with it. Processes suspended
// on it resume only through it.
unsafe impl Send for Worker {}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker").field("id", &self.id()).finish_non_exhaustive()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // SAFETY: `core` came from `Box::into_raw` in `Worker::new` and is
        // freed only here; `&mut self` means no pass is running.
        drop(unsafe { alloc::boxed::Box::from_raw(self.core.as_ptr()) });
    }
}

impl Worker {
    pub(crate) fn new(id: usize, shared: Arc<Shared>) -> Worker {
        let core = alloc::boxed::Box::new(WorkerCore {
            current: Current::new(crate::kernel::process::yield_for_budget),
            id,
            shared,
            running_slot: Cell::new(NonNull::dangling()),
            ready: RefCell::new(VecDeque::new()),
            fresh: RefCell::new(Vec::new()),
            spawned_now: RefCell::new(Vec::new()),
            timers: RefCell::new(Timers::default()),
            context: UnsafeCell::new(Context::empty()),
            driver_stack: Cell::new(asan::StackRange::default()),
            reason: Cell::new(SwitchReason::Yield),
            slice_start: Cell::new(0),
            ready_left: Cell::new(0),
            fresh_left: Cell::new(0),
            outgoing: Cell::new(None),
            stats: RefCell::new(StatsSnapshot::default()),
            live_here: Cell::new(0),
            plugin: OnceCell::new(),
            spare_handles: RefCell::new(Vec::with_capacity(SPARE_HANDLES)),
        });
        Worker { core: NonNull::from(alloc::boxed::Box::leak(core)) }
    }

    /// The core.
    fn core(&self) -> &WorkerCore {
        // SAFETY: the core is live while `self` is (freed only in `drop`),
        // and it is only ever reached through shared references.
        unsafe { self.core.as_ref() }
    }

    /// This worker's id (its index in the runtime).
    pub fn id(&self) -> usize {
        self.core().id
    }

    /// Whether anything waits in this worker's ingress for its next pass:
    /// a wake, a spawn from elsewhere, or a handler actor's envelope or
    /// admin command. A driver that watches its ingress
    /// ([`Runtime::watch_ingress`](crate::Runtime::watch_ingress)) spins on
    /// this, and looks at it once more after
    /// [`Runtime::unwatch_ingress`](crate::Runtime::unwatch_ingress) before
    /// it sleeps: every push that finished before that call is seen.
    pub fn has_ingress(&self) -> bool {
        let core = self.core();
        let ingress = &core.shared.workers[core.id];
        // SAFETY: the lanes' one consumer is this worker's pass, which runs
        // only inside `try_tick(&mut self)`; a `Worker` is not `Sync`, so
        // while we hold `&self` no pass of it runs on another thread, and
        // none runs on this one (we are not inside `try_tick`).
        let mail = unsafe { ingress.lanes.has_any() };
        !(ingress.wake.is_empty() && ingress.spawn.is_empty()) || mail
    }

    /// Whether this worker's next pass has work: a process ready to run
    /// (queued by a yield, a wake or a spawn of its own), or anything in
    /// its ingress ([`has_ingress`](Self::has_ingress)). Timers falling due
    /// are not counted. A host with several workers per thread reads it
    /// before a round to see how many of them have work at once.
    pub fn has_work(&self) -> bool {
        let core = self.core();
        // Not inside a pass (`&self`, and passes need `&mut self`), so no
        // borrow of the queues is live; were one, the worker is busy.
        let ready = core.ready.try_borrow().map_or(true, |ready| !ready.is_empty());
        let fresh = core.fresh.try_borrow().map_or(true, |fresh| !fresh.is_empty());
        ready || fresh || self.has_ingress()
    }

    /// Moves this worker's signals to driver `driver`, before its owner
    /// gives it to that driver: from here on its wakes, spawns and mail
    /// signal (or, while it watches, skip) `driver`'s park token. Only a
    /// host whose drivers trade workers calls it (a process never notices:
    /// it stays on its worker, only the thread driving the worker changes).
    ///
    /// The protocol, which loses no wake:
    ///
    /// 1. the old driver calls this, *then* publishes the worker where the
    ///    new driver looks (through a lock, or a release store the new
    ///    driver reads with acquire) and calls
    ///    [`Runtime::notify_driver`](crate::Runtime::notify_driver);
    /// 2. the new driver takes it and, like for all its workers, looks at
    ///    its [`has_ingress`](Self::has_ingress) after
    ///    [`Runtime::unwatch_driver`](crate::Runtime::unwatch_driver) and
    ///    before it sleeps.
    ///
    /// A push that read the old driver (and skipped the signal because the
    /// old driver watched) came before the new driver's unwatch, so its
    /// last look sees it; one that reads the new driver signals it as for
    /// its own workers.
    ///
    /// ```
    /// # use smarm_core as smarm;
    /// # use smarm::RuntimeParts;
    /// # fn demo(parts: RuntimeParts) -> Result<(), smarm::NoSuchDriver> {
    /// let RuntimeParts { runtime, mut workers } = parts;
    /// let mut worker = workers.remove(1);
    /// worker.move_to_driver(0)?;
    /// // ... hand `worker` to driver 0's thread, then:
    /// runtime.notify_driver(0)?;
    /// assert_eq!(runtime.driver_of(1), Ok(0));
    /// // On driver 0's thread, among its other workers:
    /// while worker.try_tick() {}
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// Errors: [`NoSuchDriver`](crate::NoSuchDriver) if the runtime has no
    /// driver `driver` ([`Runtime::driver_count`](crate::Runtime::driver_count));
    /// nothing changes then.
    pub fn move_to_driver(&mut self, driver: usize) -> Result<(), crate::NoSuchDriver> {
        let core = self.core();
        if driver >= core.shared.tokens.len() {
            return Err(crate::NoSuchDriver(driver));
        }
        // Relaxed: the hand-over that follows publishes it to the new
        // driver, whose unwatch fence then orders it before any producer
        // fence that comes later (loom model `wake_into_a_moving_worker`).
        core.shared.workers[core.id].token.store(driver, Ordering::Relaxed);
        Ok(())
    }

    /// Earliest timer deadline on this worker, for a host deciding how long
    /// its driver may sleep. It includes the time the runtime's stack pool
    /// next looks for idle stacks to release, if it holds any: a pass with
    /// nothing to do at or after it releases them.
    pub fn next_deadline(&self) -> Option<Nanos> {
        let core = self.core();
        let timers = core.timers.borrow().next_deadline();
        match (timers, core.shared.stack_release_due()) {
            (Some(timer), Some(release)) => Some(timer.min(release)),
            (timer, release) => timer.or(release),
        }
    }

    /// Performs one bounded pass: drain ingress (each ring at most
    /// `worker_ingress_budget` items), fire due timers, run up to
    /// `process_budget` ready processes, publish statistics. Returns whether
    /// it did any work.
    pub fn try_tick(&mut self) -> bool {
        let core = self.core();
        let hooks = core.shared.hooks;
        let previous = (hooks.get_current)();
        (hooks.set_current)(self.core.as_ptr().cast());
        // Restored on every way out of the pass, an unwinding panic from a
        // host extension included: a pointer left behind would name this
        // worker after it is freed.
        let _restore = RestoreCurrent { set_current: hooks.set_current, previous };
        let did = pass(core, &core.shared);
        if !did {
            // Out of work: a moment to give idle stacks' pages back.
            core.shared.release_idle_stacks();
        }
        did
    }
}

/// Puts the thread's previous current-worker pointer back when dropped.
struct RestoreCurrent {
    set_current: fn(*mut ()),
    previous: *mut (),
}

impl Drop for RestoreCurrent {
    fn drop(&mut self) {
        (self.set_current)(self.previous);
    }
}

/// One pass over `core`, which the caller (its one driver) has registered
/// as the thread's current worker.
fn pass(core: &WorkerCore, shared: &Shared) -> bool {
    let id = core.id;
    let ingress = &shared.workers[id];
    let budget = match shared.config.worker_ingress_budget {
        0 => usize::MAX,
        n => n,
    };
    let mut did = false;

    // 1. Ingress: spawns, wakes, admin commands.
    let mut n = 0;
    while n < budget {
        let Some(index) = ingress.spawn.pop(&shared.slots) else { break };
        core.ready.borrow_mut().push_back(index);
        core.stats.borrow_mut().spawned += 1;
        core.live_here.set(core.live_here.get() + 1);
        n += 1;
    }
    did |= n > 0;
    n = 0;
    while n < budget {
        let Some(index) = ingress.wake.pop(&shared.slots) else { break };
        core.ready.borrow_mut().push_back(index);
        n += 1;
    }
    did |= n > 0;
    did |= stackless::admin_step(core, shared, budget);

    // 2. Timers due now. Each is popped in its own borrow of the heap,
    // which ends before `unpark_at` (it may push onto our ready queue).
    if core.timers.borrow().len() > 0 {
        let now = shared.platform.now();
        loop {
            let due = core.timers.borrow_mut().pop_due(now);
            let Some(entry) = due else { break };
            shared.unpark_at(entry.pid, entry.epoch);
            let mut stats = core.stats.borrow_mut();
            stats.timers_fired += 1;
            if entry.reason == crate::kernel::timer::TimerReason::WaitTimeout {
                stats.timeouts_fired += 1;
            }
            did = true;
        }
    }

    // 3. Run ready processes: up to `process_budget` resumes, including
    // processes queued during this step (a yield, a same-worker wake), so
    // a message between two processes of this worker does not cost a whole
    // pass per hop; with the budget at 0 (unlimited), only those queued
    // before the step, so a pass stays finite. Fresh spawns: when a process
    // switches out, what it spawned runs next, before the ready queue, in
    // spawn order (depth first over batches, like a LIFO slot that keeps
    // each batch's order). A tree of processes then holds only the path
    // being worked on and its pending siblings instead of every node at
    // once. At most `process_budget` (64 when unlimited) fresh processes
    // run per pass, so the ready queue still advances every pass.
    let limit = match shared.config.process_budget {
        0 => core.ready.borrow().len(),
        n => n,
    };
    let fresh_budget = match shared.config.process_budget {
        0 => FRESH_PER_PASS,
        n => n,
    };
    // A process that yields or parks may hand the worker straight to the
    // next one (`hand_off`), taking it off these same budgets: the pass
    // then sees one `run` for the whole chain.
    core.ready_left.set(limit);
    core.fresh_left.set(fresh_budget);
    while let Some((index, slot)) = take_next(core, shared, false) {
        run(core, shared, index, slot);
        did = true;
    }
    core.ready_left.set(0);
    core.fresh_left.set(0);

    // 4. The plugin's share (handler actors).
    did |= stackless::plugin_step(core, shared, budget);

    // 5. Statistics.
    let ready = (core.ready.borrow().len() + core.fresh.borrow().len()) as u64;
    let mut stats = core.stats.borrow_mut();
    stats.passes += 1;
    stats.ready = ready;
    stats.parked = core.live_here.get().saturating_sub(ready);
    let s = &shared.workers[id].stats;
    s.passes.store(stats.passes, Ordering::Relaxed);
    s.switches.store(stats.switches, Ordering::Relaxed);
    s.spawned.store(stats.spawned, Ordering::Relaxed);
    s.exited.store(stats.exited, Ordering::Relaxed);
    s.ready.store(stats.ready, Ordering::Relaxed);
    s.parked.store(stats.parked, Ordering::Relaxed);
    s.timers_fired.store(stats.timers_fired, Ordering::Relaxed);
    s.timeouts_fired.store(stats.timeouts_fired, Ordering::Relaxed);
    did
}

/// Fresh spawns run per pass when `process_budget` is 0 (unlimited).
const FRESH_PER_PASS: usize = 64;
/// Fresh spawns waiting to run at which a pass whose fresh budget is spent
/// ends rather than resume more ready processes.
const FRESH_BACKLOG: usize = 256;

/// The next process step 3 runs, with its slot, taken off its queue and
/// its budget: the newest fresh spawn while the fresh budget lasts, else
/// the front of the ready queue while the pass's budget lasts. With
/// `stackful_only`, `None` (and nothing taken) if that process has no
/// stack of its own.
#[inline(always)]
fn take_next<'s>(core: &WorkerCore, shared: &'s Shared, stackful_only: bool) -> Option<(u32, &'s Slot)> {
    // Every index in this worker's queues is one of the runtime's slots.
    let stackless = |slot: &Slot| stackful_only && slot.stackless.load(Ordering::Relaxed);
    if core.fresh_left.get() > 0 {
        let mut fresh = core.fresh.borrow_mut();
        if let Some(&index) = fresh.last() {
            let slot = shared.slot_at(index);
            if stackless(slot) {
                return None;
            }
            fresh.pop();
            core.fresh_left.set(core.fresh_left.get() - 1);
            return Some((index, slot));
        }
    }
    // Spawns are outrunning the fresh budget: end the pass here, so the
    // next one runs a budget's worth of them before their spawner runs (and
    // spawns) again. Otherwise a process that spawns in a loop gains a
    // whole batch per resume while only the budget's worth runs, and the
    // live set (each with its stack) grows without bound. A small backlog
    // is the normal state of a tree of processes (the pending siblings
    // along the path being worked on): the ready queue, whose processes
    // fold finished subtrees, goes on then.
    if core.fresh.borrow().len() >= FRESH_BACKLOG {
        return None;
    }
    if core.ready_left.get() > 0 {
        let mut ready = core.ready.borrow_mut();
        if let Some(&index) = ready.front() {
            let slot = shared.slot_at(index);
            if stackless(slot) {
                return None;
            }
            ready.pop_front();
            core.ready_left.set(core.ready_left.get() - 1);
            return Some((index, slot));
        }
    }
    None
}

/// Resumes the process in slot `index` until it (or the last process of a
/// chain of direct hand-offs that began with it) switches back here:
/// yields, parks or exits.
fn run(core: &WorkerCore, shared: &Shared, index: u32, slot: &Slot) {
    if slot.stackless.load(Ordering::Relaxed) {
        let generation = slot.generation();
        let began = slot.state.begin_run(generation);
        debug_assert!(began.is_ok(), "ready queue held slot {index} that was not Queued");
        stackless::run_stackless(core, shared, Pid::from_parts(index, generation));
        return;
    }
    let body = enter(core, shared, slot, index);
    let save = core.context.get();
    // SAFETY: 1. `load` is the process's context, made by init_context at
    //    spawn or saved by its last switch out; its stack is alive (owned
    //    by the slot until finalize);
    // 2. `save` is our own context, which the process's `suspend` loads to
    //    come back here; no reference to it is live (it is an UnsafeCell
    //    reached only by the switch code);
    // 3. the slot's body belongs to this worker while the process is live,
    //    and the process is not running now (we are): the ASan annotation
    //    may read the stack's bounds.
    unsafe {
        let fake_stack = asan::driver_to_process((*body).stack.as_ref());
        Native::resume(save, ptr::addr_of!((*body).context));
        asan::driver_landed(fake_stack);
    }
    // The process that switched back: `index`, or the last of a chain of
    // direct hand-offs that began with it.
    let Some((index, generation)) = core.current.running.get() else {
        unreachable!("smarm: a process switched back to its worker with none running")
    };
    debug_assert!(core.outgoing.get().is_none(), "a hand-off was not finished by its landing");
    // SAFETY: `running_slot` was set with `running` (`enter`) to that
    // process's slot, and slots never move while the runtime lives.
    let slot = unsafe { core.running_slot.get().as_ref() };
    debug_assert!(ptr::eq(slot, shared.slot_at(index)), "running_slot is not the running process's slot");
    // SAFETY: as above, the process is live and suspended, its body this
    // worker's; this is the only reference to it.
    unsafe { switched_out(shared, &mut *slot.body.get(), Pid::from_parts(index, generation)) };
    core.current.running.set(None);
    batch_spawns(core);
    match core.reason.get() {
        SwitchReason::Yield => core.ready.borrow_mut().push_back(index),
        SwitchReason::Park => {}
        SwitchReason::Exit => {
            core.stats.borrow_mut().exited += 1;
            core.live_here.set(core.live_here.get().saturating_sub(1));
            shared.finalize(index, generation);
        }
    }
}

/// Makes the stackful process in `slot` (at `index`, taken off a queue)
/// the running one: `Queued` → `Running` (a process that yielded is still
/// `Running`: no write), a fresh slice and budget, one more switch counted.
/// Returns its body, whose context the caller loads next.
#[inline]
fn enter(core: &WorkerCore, shared: &Shared, slot: &Slot, index: u32) -> *mut SlotBody {
    let generation = slot.generation();
    let began = slot.state.resume(generation);
    debug_assert!(began.is_ok(), "ready queue held slot {index} that was neither Queued nor yielded");
    core.current.running.set(Some((index, generation)));
    core.running_slot.set(NonNull::from(slot));
    // A resumed process has no open wait: a park ended it, a yield never
    // had one.
    core.current.wait_open.set(false);
    // The slice starts at the process's first preemption check.
    core.slice_start.set(0);
    core.current.coop_budget.set(shared.config.coop_budget);
    core.stats.borrow_mut().switches += 1;
    slot.body.get()
}

/// The running process's spawns become the newest batch of fresh spawns:
/// reversed, so the first spawned is on top.
#[inline]
fn batch_spawns(core: &WorkerCore) {
    let mut spawned = core.spawned_now.borrow_mut();
    if !spawned.is_empty() {
        core.fresh.borrow_mut().extend(spawned.drain(..).rev());
    }
}

/// What every switch out of process `pid` ends with, wherever it lands:
/// the deepest stack pointer seen at a switch out is tracked (finalize
/// uses it to decide whether the stack needs trimming) and the stack is
/// checked for an overflow.
#[inline]
fn switched_out(shared: &Shared, body: &mut SlotBody, pid: Pid) {
    body.low_water = body.low_water.min(body.context.sp);
    check_stack(shared, body, pid);
}

/// A direct hand-off from the running process, which is yielding (its word
/// still `Running`) or parking (`Parked`), to the next process of this
/// worker's pass: does for the running process what `run` does after a
/// switch back (its spawns become the newest batch, a yield goes to the
/// back of the ready queue), makes the next one running, and returns the
/// context to load. The caller switches to it from the running process and
/// then calls [`landed`]. `None`, with nothing changed but the spawns'
/// batching, when the pass has nothing (or only a process without a stack)
/// to run next: the caller switches back to the worker as before.
///
/// The chain is bounded by the pass's budgets, so ingress, timers and the
/// plugin's share still come round.
#[cfg_attr(smarm_asan, allow(dead_code))]
#[inline(always)]
pub(crate) fn hand_off(core: &WorkerCore, shared: &Shared, reason: SwitchReason) -> Option<*const Context> {
    debug_assert!(reason != SwitchReason::Exit, "an exit switches back to its worker, which finalizes it");
    let (index, generation) = core.current.running.get()?;
    // Not preempted while the queues grow (see `WorkerCore::push_ready`).
    core.current.preempt.disable();
    batch_spawns(core);
    let Some((next, next_slot)) = take_next(core, shared, true) else {
        core.current.preempt.enable();
        return None;
    };
    if reason == SwitchReason::Yield {
        // Nothing resumes it before the switch below: only this thread
        // takes from this queue, and it is busy switching.
        core.ready.borrow_mut().push_back(index);
    }
    // The running process's slot (`enter` set it with `running`).
    core.outgoing.set(Some((core.running_slot.get(), Pid::from_parts(index, generation))));
    let body = enter(core, shared, next_slot, next);
    core.current.preempt.enable();
    // SAFETY: a pointer to one field, no reference made.
    Some(unsafe { ptr::addr_of!((*body).context) })
}

/// Right after a switch into a process has landed (in the process's last
/// switch out, or at its entry): finishes the switch out of the process
/// that handed the worker over, if it was a direct hand-off.
#[inline]
pub(crate) fn landed(core: &WorkerCore, shared: &Shared) {
    let Some((slot, pid)) = core.outgoing.take() else { return };
    // SAFETY: `slot` is the slot of the process that handed over (slots
    // never move while the runtime lives); that process is suspended (its
    // context was saved by the switch that landed here) and its body is
    // this worker's; this is the only reference to it.
    unsafe { switched_out(shared, &mut *slot.as_ref().body.get(), pid) };
}

/// Ends the program with the platform's overflow report if the process
/// that just switched out (for any reason, its exit included) overran its
/// stack: its saved stack pointer lies below the stack, or the canary of a
/// canary stack is gone. The stack-pointer check costs one comparison and
/// also catches a process that switched out while deep below a canary its
/// frames skipped without writing. (A guard-page stack faults first.) Runs
/// before this worker runs anything else, so a parked neighbour whose stack
/// the overflow reached is not resumed by it.
#[inline]
fn check_stack(shared: &Shared, body: &SlotBody, pid: Pid) {
    let Some(stack) = body.stack.as_ref() else { return };
    let sp = body.context.sp;
    let evidence = if sp < stack.bottom() as usize {
        OverflowEvidence::StackPointer(sp)
    } else if !stack.canary_intact() {
        OverflowEvidence::CanaryOverwritten
    } else {
        return;
    };
    overflowed(shared, stack, pid, evidence)
}

#[cold]
#[inline(never)]
fn overflowed(shared: &Shared, stack: &Stack, pid: Pid, evidence: OverflowEvidence) -> ! {
    shared.platform.report_overflow(stack, pid.to_bits(), evidence)
}

/// Requests a stop of every live process owned by worker `id`.
pub(crate) fn stop_all_on(shared: &Shared, id: usize) {
    for index in 0..shared_slot_count(shared) {
        let Some(slot) = shared.slot(index) else { break };
        if slot.worker.load(Ordering::Relaxed) != id {
            continue;
        }
        let snap = slot.state.snapshot();
        let _ = shared.request_stop(Pid::from_parts(index, snap.generation()));
    }
}

fn shared_slot_count(shared: &Shared) -> u32 {
    // The slab never holds more than `u32::MAX` slots (`MAX_PROCESSES`).
    shared.slots.len() as u32
}

/// Ends the running process with `reason` and switches to its worker for
/// good. Used at the end of every process and by hosts without unwinding
/// (a bare-metal panic handler abandons the running process with it).
///
/// Returns only if no process is running on this thread.
pub fn abandon_current(reason: ExitReason) {
    let Some(running) = crate::kernel::process::Running::get() else { return };
    abandon(running, reason)
}

/// [`abandon_current`] for the running process `running`, which the
/// caller (its own frames) already holds.
pub(crate) fn abandon(running: crate::kernel::process::Running, reason: ExitReason) -> ! {
    // A process abandoned without unwinding (a bare-metal panic or stop)
    // leaves its guards undropped: whatever preemption-off sections it had
    // open end with it. (A runtime lock it held stays held — a panic inside
    // a runtime critical section is a runtime bug, not a process fault.)
    if let Some(record) = running.here().record() {
        record.preempt.reset();
        record.wait_open.set(false);
    }
    running.finish(reason);
    // A finalized process is never resumed.
    unreachable!("smarm: a finished process was resumed");
}
