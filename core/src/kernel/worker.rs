//! Workers: each owns a disjoint set of processes and advances them one
//! bounded pass at a time ([`Worker::try_tick`]). A worker is logical: its
//! host decides which thread calls `try_tick`, and may change its mind
//! between passes.
//!
//! The mutable state of a worker (`WorkerCore`) lives behind a raw
//! pointer, never behind a reference held across a switch: while a process
//! runs, the suspended `try_tick` frame and the process both reach the core
//! through that pointer (the process through the host's current-worker
//! hook).

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use core::fmt;
use core::ptr::{self, NonNull};

use smarm_arch::{Arch, Context, Native};
use smarm_platform::Nanos;

use crate::kernel::atomic::{AtomicU64, Ordering};
use crate::kernel::host::Outcome;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::{Admin, Shared};
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
pub(crate) struct WorkerCore {
    pub(crate) id: usize,
    pub(crate) shared: Arc<Shared>,
    pub(crate) ready: VecDeque<u32>,
    pub(crate) timers: Timers,
    /// The driver's context while a process runs.
    pub(crate) context: Context,
    /// Slot index and generation of the running process.
    pub(crate) running: Option<(u32, u32)>,
    pub(crate) reason: SwitchReason,
    /// Nesting depth of preemption-disabled sections.
    pub(crate) preempt_disabled: u32,
    /// The running process has opened a wait (`begin_wait`) and not yet
    /// parked or retired it. No preemption then: a yield would turn the
    /// word `Queued`, and a stamped wake landing on `Queued` is stale — the
    /// wake would be lost.
    pub(crate) wait_open: bool,
    /// Timestamp of the running process's first preemption check since it
    /// was resumed; 0 until then.
    pub(crate) slice_start: u64,
    /// The running process's cooperative budget left (`kernel::coop`);
    /// refilled at every resume, 0 when disabled.
    pub(crate) coop_budget: u32,
    stats: StatsSnapshot,
    live_here: u64,
    /// Runtime locks held on this driver, by class (lock-order checking).
    held_leaf: u8,
    held_channel: u8,
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
            id,
            shared,
            ready: VecDeque::new(),
            timers: Timers::default(),
            context: Context::empty(),
            running: None,
            reason: SwitchReason::Yield,
            preempt_disabled: 0,
            wait_open: false,
            slice_start: 0,
            coop_budget: 0,
            stats: StatsSnapshot::default(),
            live_here: 0,
            held_leaf: 0,
            held_channel: 0,
        });
        Worker { core: NonNull::from(alloc::boxed::Box::leak(core)) }
    }

    /// This worker's id (its index in the runtime).
    pub fn id(&self) -> usize {
        // SAFETY: the core is live while `self` is; no pass is running
        // during `&self` access from the owner.
        unsafe { (*self.core.as_ptr()).id }
    }

    /// Earliest timer deadline on this worker, for a host deciding how long
    /// its driver may sleep.
    pub fn next_deadline(&self) -> Option<Nanos> {
        // SAFETY: as in `id`.
        unsafe { (*self.core.as_ptr()).timers.next_deadline() }
    }

    /// Performs one bounded pass: drain ingress (each ring at most
    /// `worker_ingress_budget` items), fire due timers, run up to
    /// `process_budget` ready processes, publish statistics. Returns whether
    /// it did any work.
    pub fn try_tick(&mut self) -> bool {
        let core = self.core.as_ptr();
        // SAFETY: `&mut self` makes us the one driver; `shared` outlives
        // the pass because the core holds an Arc to it.
        let hooks = unsafe { (*Arc::as_ptr(&(*core).shared)).hooks };
        let previous = (hooks.get_current)();
        (hooks.set_current)(core.cast());
        // SAFETY: as above; `pass` never keeps a reference to the core
        // across a switch.
        let did = unsafe { pass(core) };
        (hooks.set_current)(previous);
        did
    }
}

/// One pass over `core`.
///
/// # Safety
///
/// The caller is the worker's only driver, has registered `core` as the
/// thread's current worker, and holds no reference into it.
unsafe fn pass(core: *mut WorkerCore) -> bool {
    // SAFETY: `shared` is behind an Arc the core keeps for its life; we
    // take a shared reference to the runtime, never to the core.
    let shared: &Shared = unsafe { &*Arc::as_ptr(&(*core).shared) };
    // SAFETY: as above: our core, read through the raw pointer.
    let id = unsafe { (*core).id };
    let ingress = &shared.workers[id];
    let budget = match shared.config.worker_ingress_budget {
        0 => usize::MAX,
        n => n,
    };
    let mut did = false;

    // 1. Ingress: spawns, wakes, admin commands.
    let mut n = 0;
    while n < budget {
        let Some(index) = ingress.spawn.pop() else { break };
        // SAFETY: our core; no reference to it is live.
        unsafe {
            (*core).ready.push_back(index);
            (*core).stats.spawned += 1;
            (*core).live_here += 1;
        }
        n += 1;
    }
    did |= n > 0;
    n = 0;
    while n < budget {
        let Some(index) = ingress.wake.pop() else { break };
        // SAFETY: as above.
        unsafe { (*core).ready.push_back(index) };
        n += 1;
    }
    did |= n > 0;
    n = 0;
    // Acquire pairs with the Release in `Runtime::admin`.
    while n < budget && ingress.admin_pending.load(Ordering::Acquire) > 0 {
        let Some(command) = ingress.admin.pop() else { break };
        ingress.admin_pending.fetch_sub(1, Ordering::Relaxed);
        match command {
            Admin::StopAll => stop_all_on(shared, id),
        }
        n += 1;
    }
    did |= n > 0;

    // 2. Timers due now.
    // SAFETY: as above.
    if unsafe { (*core).timers.len() } > 0 {
        let now = shared.platform.now();
        // SAFETY: as above; the borrow of `timers` ends before unpark_at,
        // which may push onto our ready queue.
        while let Some(entry) = unsafe { (*core).timers.pop_due(now) } {
            shared.unpark_at(entry.pid, entry.epoch);
            // SAFETY: as above.
            unsafe {
                (*core).stats.timers_fired += 1;
                if entry.reason == crate::kernel::timer::TimerReason::WaitTimeout {
                    (*core).stats.timeouts_fired += 1;
                }
            }
            did = true;
        }
    }

    // 3. Run ready processes. Those queued during this step (yields,
    // same-worker wakes, local spawns) wait for the next pass, so one pass
    // is finite.
    // SAFETY: as above.
    let queued = unsafe { (*core).ready.len() };
    let limit = match shared.config.process_budget {
        0 => queued,
        n => n.min(queued),
    };
    for _ in 0..limit {
        // SAFETY: as above.
        let Some(index) = (unsafe { (*core).ready.pop_front() }) else { break };
        // SAFETY: our contract, passed on.
        unsafe { run(core, shared, index) };
        did = true;
    }

    // 4. Statistics.
    // SAFETY: as above.
    unsafe {
        (*core).stats.passes += 1;
        let ready = (*core).ready.len() as u64;
        (*core).stats.ready = ready;
        (*core).stats.parked = (*core).live_here.saturating_sub(ready);
        let s = &shared.workers[id].stats;
        let local = (*core).stats;
        s.passes.store(local.passes, Ordering::Relaxed);
        s.switches.store(local.switches, Ordering::Relaxed);
        s.spawned.store(local.spawned, Ordering::Relaxed);
        s.exited.store(local.exited, Ordering::Relaxed);
        s.ready.store(local.ready, Ordering::Relaxed);
        s.parked.store(local.parked, Ordering::Relaxed);
        s.timers_fired.store(local.timers_fired, Ordering::Relaxed);
        s.timeouts_fired.store(local.timeouts_fired, Ordering::Relaxed);
    }
    did
}

/// Resumes the process in slot `index` until it yields, parks or exits.
///
/// # Safety
///
/// As for [`pass`].
unsafe fn run(core: *mut WorkerCore, shared: &Shared, index: u32) {
    let Some(slot) = shared.slot(index) else { return };
    let generation = slot.generation();
    let began = slot.state.begin_run(generation);
    debug_assert!(began.is_ok(), "ready queue held slot {index} that was not Queued");
    // SAFETY: our core, no reference to it live across the switch below:
    // everything is reached through the raw pointer.
    unsafe {
        (*core).running = Some((index, generation));
        // A resumed process has no open wait: a park ended it, a yield
        // never had one.
        (*core).wait_open = false;
        // The slice starts at the process's first preemption check.
        (*core).slice_start = 0;
        (*core).coop_budget = shared.config.coop_budget;
        (*core).stats.switches += 1;
        let save = ptr::addr_of_mut!((*core).context);
        let load = ptr::addr_of!((*slot.body.get()).context);
        // SAFETY: `load` is the process's context, made by init_context at
        // spawn or saved by its last switch out (`suspend`); its stack is
        // alive (owned by the slot until finalize). `save` is our own
        // context, which the process's `suspend` loads to come back here.
        Native::resume(save, load);
        (*core).running = None;
        // Track the deepest stack pointer seen at a switch out: finalize
        // uses it to decide whether the stack needs trimming.
        let body = slot.body.get();
        (*body).low_water = (*body).low_water.min((*body).context.sp);
        match (*core).reason {
            SwitchReason::Yield => (*core).ready.push_back(index),
            SwitchReason::Park => {}
            SwitchReason::Exit => {
                (*core).stats.exited += 1;
                (*core).live_here = (*core).live_here.saturating_sub(1);
                shared.finalize(index, generation);
            }
        }
    }
}

/// Requests a stop of every live process owned by worker `id`.
fn stop_all_on(shared: &Shared, id: usize) {
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
    shared.config.max_actors as u32
}

/// The calling thread's current worker core, if its driver belongs to
/// `shared` and it is worker `worker`.
pub(crate) fn current_core_of(shared: &Shared, worker: usize) -> Option<*mut WorkerCore> {
    let core = current_core()?;
    // SAFETY: a registered current core is live for the duration of the
    // pass that registered it, which encloses this call.
    let (id, same) = unsafe { ((*core).id, ptr::eq(Arc::as_ptr(&(*core).shared), shared)) };
    (same && id == worker).then_some(core)
}

/// The calling thread's current worker core, if a pass is running on it.
pub(crate) fn current_core() -> Option<*mut WorkerCore> {
    let hooks = crate::kernel::host::hooks()?;
    let p = (hooks.get_current)() as *mut WorkerCore;
    (!p.is_null()).then_some(p)
}

/// Adds a process spawned by the worker's own driver to its ready queue.
///
/// # Safety
///
/// As for [`push_ready`].
pub(crate) unsafe fn push_spawned(core: *mut WorkerCore, index: u32) {
    // SAFETY: per the contract.
    unsafe {
        push_ready(core, index);
        (*core).stats.spawned += 1;
        (*core).live_here += 1;
    }
}

/// Pushes a just-queued process onto the local ready queue.
///
/// # Safety
///
/// `core` is the calling thread's current worker and no reference into it
/// is live.
pub(crate) unsafe fn push_ready(core: *mut WorkerCore, index: u32) {
    // SAFETY: per the contract. Preemption is off for the push (a queue
    // operation): growing the queue allocates, and a preempting allocator
    // must not switch to this worker's driver — which pushes onto the same
    // queue — in the middle of it.
    unsafe {
        (*core).preempt_disabled += 1;
        (*core).ready.push_back(index);
        (*core).preempt_disabled -= 1;
    }
}

/// Ends the running process with `outcome` and switches to its worker for
/// good. Used at the end of every process and by hosts without unwinding
/// (a bare-metal panic handler abandons the running process with it).
///
/// Returns only if no process is running on this thread.
pub fn abandon_current(outcome: Outcome) {
    let Some(core) = current_core() else { return };
    // SAFETY: current core, live for the enclosing pass.
    let Some((index, generation)) = (unsafe { (*core).running }) else { return };
    // SAFETY: as above.
    let shared: &Shared = unsafe { &*Arc::as_ptr(&(*core).shared) };
    let Some(slot) = shared.slot(index) else { return };
    // A process abandoned without unwinding (a bare-metal panic or stop)
    // leaves its guards undropped: whatever preemption-off sections it had
    // open end with it. (A runtime lock it held stays held — a panic inside
    // a runtime critical section is a runtime bug, not a process fault.)
    // SAFETY: current core, live for the enclosing pass.
    unsafe {
        (*core).preempt_disabled = 0;
        (*core).held_leaf = 0;
        (*core).held_channel = 0;
        (*core).wait_open = false;
    }
    {
        let mut cold = slot.cold.lock();
        cold.outcome = Some(outcome);
        slot.state.finish(generation);
    }
    // SAFETY: our process is the running one; its context slot is ours to
    // save into, and the worker's context was saved by the `resume` in
    // `run` that is running us (the `suspend` returns there).
    unsafe {
        (*core).reason = SwitchReason::Exit;
        let save = ptr::addr_of_mut!((*slot.body.get()).context);
        let load = ptr::addr_of!((*core).context);
        Native::suspend(save, load);
    }
    // A finalized process is never resumed.
    unreachable!("smarm: a finished process was resumed");
}

/// Records a runtime lock acquisition on `core` (the current driver's, or
/// null off a worker) and checks the lock order (Leaf → Channel, at most one
/// of each). Bookkeeping only in debug builds.
#[inline]
pub(crate) fn note_lock_acquired(core: *mut WorkerCore, class: crate::kernel::spin::LockClass) {
    if !cfg!(debug_assertions) || core.is_null() {
        return;
    }
    // SAFETY: a non-null core comes from a live NoPreempt guard: the current
    // core, live for the enclosing pass; no reference into it is held.
    unsafe {
        match class {
            crate::kernel::spin::LockClass::Leaf => {
                debug_assert!(
                    (*core).held_leaf == 0 && (*core).held_channel == 0,
                    "lock order: a leaf lock taken under another leaf or a channel lock"
                );
                (*core).held_leaf += 1;
            }
            crate::kernel::spin::LockClass::Channel => {
                debug_assert!((*core).held_channel == 0, "lock order: a channel lock taken under another");
                (*core).held_channel += 1;
            }
        }
    }
}

/// Records a runtime lock release on `core` (debug builds only).
#[inline]
pub(crate) fn note_lock_released(core: *mut WorkerCore, class: crate::kernel::spin::LockClass) {
    if !cfg!(debug_assertions) || core.is_null() {
        return;
    }
    // SAFETY: as in `note_lock_acquired`.
    unsafe {
        match class {
            crate::kernel::spin::LockClass::Leaf => (*core).held_leaf = (*core).held_leaf.saturating_sub(1),
            crate::kernel::spin::LockClass::Channel => {
                (*core).held_channel = (*core).held_channel.saturating_sub(1)
            }
        }
    }
}
