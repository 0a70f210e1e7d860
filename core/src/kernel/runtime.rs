//! The shared side of a runtime: the slab of slots, the stack pool, the
//! per-worker ingress rings, and the cloneable [`Runtime`] handle.
//!
//! Invariants kept here:
//! - A slot is (re)initialised by exactly one function, `Slot::reset`,
//!   which every path that recycles a slot calls; a new field added to
//!   `SlotBody` or `Cold` is reset by construction.
//! - Finalize order: outcome set and `Done` under the slot lock → stack
//!   recycled → death notifications → joiners woken → slot reclaimed only
//!   when no handle is outstanding.
//! - A process sits in at most one ready queue or ring at a time (the state
//!   word's `Queued` transition is what entitles a push), so rings sized to
//!   the slab cannot overflow; pushes assert it.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::fmt;

use smarm_arch::{Arch, Context, Native};
use smarm_platform::{ParkToken, Platform, Stack};

use crate::kernel::atomic::{AtomicU8, AtomicUsize, Ordering};
use crate::kernel::config::{Config, ConfigError};
use crate::kernel::error::{NoProc, SpawnError};
use crate::kernel::host::{self, HostHooks, Outcome};
use crate::kernel::join::JoinHandle;
use crate::kernel::pid::Pid;
use crate::kernel::process;
use crate::kernel::ring::{LockedRing, Ring, WakeRing};
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::state::{State, StateWord, Unpark};
use crate::kernel::worker::{Worker, WorkerStats};
use crate::otp::monitor::{DownReason, ExitSignal, LinkAction};
use crate::otp::registry::Registry;
use crate::sync::channel::Sender;

/// A boxed process body.
pub(crate) type Entry = Box<dyn FnOnce() + Send + 'static>;

/// The slot's stop flag values.
pub(crate) const STOP_NONE: u8 = 0;
/// A stop was requested and not yet observed.
pub(crate) const STOP_REQUESTED: u8 = 1;
/// The stop was observed and is unwinding: observation points stay quiet.
pub(crate) const STOP_RAISED: u8 = 2;

/// What only the owning worker (and the process itself, which runs on it)
/// touches: no lock, no atomics.
pub(crate) struct SlotBody {
    pub(crate) context: Context,
    pub(crate) stack: Option<Stack>,
    pub(crate) entry: Option<Entry>,
    /// Actor-local values (`ActorLocal`), keyed by the address of their
    /// static key; dropped with the slot.
    pub(crate) locals: Vec<(usize, Box<dyn core::any::Any + Send>)>,
    /// Lowest saved stack pointer seen at a switch out (`usize::MAX` before
    /// the first): a cheap high-water mark of stack use.
    pub(crate) low_water: usize,
}

impl Default for SlotBody {
    fn default() -> Self {
        SlotBody {
            context: Context::empty(),
            stack: None,
            entry: None,
            locals: Vec::new(),
            low_water: usize::MAX,
        }
    }
}

/// Cold per-slot state, under the slot's leaf lock.
#[derive(Default)]
pub(crate) struct Cold {
    pub(crate) outcome: Option<Outcome>,
    /// `(pid, epoch)` of processes parked in `join` on this one.
    pub(crate) joiners: Vec<(Pid, u32)>,
    /// A [`JoinHandle`] is outstanding: the slot may not be reclaimed.
    pub(crate) handle: bool,
    /// The worker has finalized the process.
    pub(crate) finalized: bool,
    /// Finalize has delivered the death notifications (monitors, links):
    /// from here on `join` may return. The outcome alone is not enough — it
    /// is set before the process switches out for the last time, and on
    /// another thread a joiner could see it before finalize has run.
    pub(crate) notified: bool,
    /// Death hooks run at finalize, after the stack is recycled and before
    /// joiners are woken (monitors, links).
    pub(crate) on_death: Vec<DeathHook>,
    /// Linked processes (both sides record the link).
    pub(crate) links: Vec<Pid>,
    /// Where exit signals go while the process traps exits.
    pub(crate) trap: Option<Sender<ExitSignal>>,
    /// Why the process was stopped, when a link stopped it.
    pub(crate) stop_cause: Option<(Pid, DownReason)>,
}

/// A notification run once when a process dies, with its pid and outcome.
pub(crate) type DeathHook = Box<dyn FnOnce(Pid, &DownReason) + Send>;

/// One process slot.
pub(crate) struct Slot {
    pub(crate) state: StateWord,
    /// Index of the owning worker; written before the spawn's `claim`
    /// (whose Release publishes it) and constant while the slot is live.
    pub(crate) worker: AtomicUsize,
    pub(crate) stop: AtomicU8,
    pub(crate) body: UnsafeCell<SlotBody>,
    pub(crate) cold: RuntimeMutex<Cold>,
}

// SAFETY: `body` is touched only by the owning worker's driver (and the
// process it runs, on the same driver), or by a spawner that holds the slot
// exclusively (popped from the free list, state Vacant) before the `claim`
// that publishes it; everything else is atomic or behind `cold`'s lock.
unsafe impl Sync for Slot {}
// SAFETY: as above; a slot moves between threads only inside the slab.
unsafe impl Send for Slot {}

impl Slot {
    fn new() -> Slot {
        Slot {
            // Generations start at 1 so that no pid's overflow tag
            // (`(generation << 32) | index`) is 0, the platform's "unknown".
            state: StateWord::new(1),
            worker: AtomicUsize::new(0),
            stop: AtomicU8::new(STOP_NONE),
            body: UnsafeCell::new(SlotBody::default()),
            cold: RuntimeMutex::leaf(Cold::default()),
        }
    }

    /// Returns the slot to its vacant contents — the one place that does.
    ///
    /// # Safety
    ///
    /// The caller owns the slot's body: the process is `Done` and finalized
    /// (or the slot was never used) and no driver will touch `body` again
    /// until the next spawn claims the slot.
    unsafe fn reset(&self, cold: &mut Cold) {
        // SAFETY: exclusive ownership of `body` per this fn's contract.
        unsafe { *self.body.get() = SlotBody::default() };
        *cold = Cold::default();
        self.stop.store(STOP_NONE, Ordering::Relaxed);
        self.worker.store(0, Ordering::Relaxed);
    }

    pub(crate) fn generation(&self) -> u32 {
        self.state.snapshot().generation()
    }
}

/// Per-worker shared state: the producer side of its ingress rings.
pub(crate) struct WorkerShared {
    /// Wakes from other drivers: slot indices now `Queued`.
    pub(crate) wake: WakeRing<u32>,
    /// Spawns from outside the worker: slot indices claimed `Queued`.
    pub(crate) spawn: WakeRing<u32>,
    /// Administrative commands.
    pub(crate) admin: LockedRing<Admin>,
    /// Commands pushed into `admin` and not yet taken: lets a pass skip the
    /// admin ring's lock when it is empty (the common case).
    pub(crate) admin_pending: AtomicUsize,
    /// Which park token this worker's driver sleeps on.
    pub(crate) token: usize,
    pub(crate) stats: WorkerStats,
}

/// A command for one worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admin {
    /// Request a stop of every live process owned by the worker.
    StopAll,
}

/// How the runtime's workers are driven, which decides which park token a
/// wake for each worker signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drivers {
    /// One driver per worker (the hosted engine): one token each.
    PerWorker,
    /// One driver for every worker (`SingleThreadRuntime`, bare metal): one
    /// shared token.
    Single,
}

/// Everything a runtime shares between its handle, its workers and the
/// processes' wakers.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) platform: Arc<dyn Platform>,
    pub(crate) hooks: &'static HostHooks,
    slots: Box<[Slot]>,
    free: RuntimeMutex<Vec<u32>>,
    stacks: RuntimeMutex<Vec<Stack>>,
    pub(crate) workers: Box<[WorkerShared]>,
    pub(crate) tokens: Box<[ParkToken]>,
    /// Processes spawned and not yet finalized.
    live: AtomicUsize,
    /// Work outstanding outside any worker (io in flight): holds the
    /// runtime open like a live process does.
    external: AtomicUsize,
    rr: AtomicUsize,
    /// `config.timeslice` in `Arch::timestamp` ticks.
    pub(crate) timeslice_ticks: u64,
    next_monitor: crate::kernel::atomic::AtomicU64,
    /// Registered names (a leaf lock).
    pub(crate) registry: RuntimeMutex<Registry>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("workers", &self.workers.len())
            .field("max_actors", &self.slots.len())
            .field("live", &self.live.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Why a runtime could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildError {
    /// The configuration is invalid.
    Config(ConfigError),
    /// Different host hooks are already installed in this process image.
    HostConflict,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Config(e) => write!(f, "invalid runtime configuration: {e}"),
            BuildError::HostConflict => {
                f.write_str("another host's hooks are installed: one host kind per process image")
            }
        }
    }
}
impl core::error::Error for BuildError {}

impl From<ConfigError> for BuildError {
    fn from(e: ConfigError) -> Self {
        BuildError::Config(e)
    }
}

/// The linear construction bundle: one runtime handle and its workers.
/// Consumed by exactly one host, so no two hosts can drive the same workers.
#[derive(Debug)]
pub struct RuntimeParts {
    /// The shared handle.
    pub runtime: Runtime,
    /// The workers, in id order.
    pub workers: Vec<Worker>,
}

impl RuntimeParts {
    /// Builds a runtime: the slab, the rings, and `config.worker_count`
    /// workers, for a host that installs `hooks` and drives them as
    /// `drivers` says.
    pub fn new(
        config: Config,
        platform: Arc<dyn Platform>,
        hooks: &'static HostHooks,
        drivers: Drivers,
    ) -> Result<RuntimeParts, BuildError> {
        config.validate()?;
        if !host::install(hooks) {
            return Err(BuildError::HostConflict);
        }
        let n = config.max_actors;
        let slots: Box<[Slot]> = (0..n).map(|_| Slot::new()).collect();
        // Popped from the end: index 0 is handed out first.
        let free: Vec<u32> = (0..n as u32).rev().collect();
        let token_count = match drivers {
            Drivers::PerWorker => config.worker_count,
            Drivers::Single => 1,
        };
        let workers: Box<[WorkerShared]> = (0..config.worker_count)
            .map(|id| WorkerShared {
                wake: WakeRing::with_capacity(n),
                spawn: WakeRing::with_capacity(n),
                admin: LockedRing::with_capacity(64),
                admin_pending: AtomicUsize::new(0),
                token: if drivers == Drivers::Single { 0 } else { id },
                stats: WorkerStats::default(),
            })
            .collect();
        let timeslice_ticks = timeslice_ticks(&config, &*platform);
        let tokens: Box<[ParkToken]> = (0..token_count).map(|_| ParkToken::new()).collect();
        let shared = Arc::new(Shared {
            config,
            platform,
            hooks,
            slots,
            free: RuntimeMutex::leaf(free),
            stacks: RuntimeMutex::leaf(Vec::new()),
            workers,
            tokens,
            live: AtomicUsize::new(0),
            external: AtomicUsize::new(0),
            rr: AtomicUsize::new(0),
            timeslice_ticks,
            next_monitor: crate::kernel::atomic::AtomicU64::new(1),
            registry: RuntimeMutex::leaf(Registry::default()),
        });
        let workers = (0..shared.workers.len()).map(|id| Worker::new(id, shared.clone())).collect();
        Ok(RuntimeParts { runtime: Runtime { shared }, workers })
    }
}

/// Converts the timeslice to timestamp-counter ticks: from the counter's
/// advertised frequency, or else by timing the counter against the
/// platform clock for a fraction of a millisecond.
fn timeslice_ticks(config: &Config, platform: &dyn Platform) -> u64 {
    let nanos = u64::try_from(config.timeslice.as_nanos()).unwrap_or(u64::MAX);
    let per_second = Native::timestamp_frequency().unwrap_or_else(|| {
        let (t0, c0) = (platform.now(), Native::timestamp());
        let mut t1 = t0;
        while t1.saturating_sub(t0) < 200_000 {
            Native::spin_hint();
            t1 = platform.now();
        }
        let ticks = Native::timestamp().wrapping_sub(c0);
        ((ticks as u128 * 1_000_000_000) / (t1 - t0).max(1) as u128) as u64
    });
    ((nanos as u128 * per_second as u128) / 1_000_000_000).min(u64::MAX as u128) as u64
}

/// The stack of a slot being spawned.
fn stack_of(slot: &Slot) -> &Stack {
    // SAFETY: called only by the spawner, which owns the Vacant slot's body
    // and has just stored the stack.
    let stack = unsafe { (*slot.body.get()).stack.as_ref() };
    stack.expect("spawn stores the stack before tagging it")
}

impl Shared {
    /// The slot a pid names, if the index is in range (the generation is
    /// checked by each transition, atomically).
    pub(crate) fn slot(&self, index: u32) -> Option<&Slot> {
        self.slots.get(index as usize)
    }

    /// The slot of a pid this runtime handed out (its index is in range).
    pub(crate) fn slot_of(&self, pid: Pid) -> &Slot {
        &self.slots[pid.index() as usize]
    }

    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    pub(crate) fn external(&self) -> usize {
        self.external.load(Ordering::Acquire)
    }

    /// Spawns `entry` on worker `worker`.
    pub(crate) fn spawn_on(self: &Arc<Self>, worker: usize, entry: Entry) -> Result<JoinHandle, SpawnError> {
        if worker >= self.workers.len() {
            return Err(SpawnError::NoSuchWorker(worker));
        }
        // The platform's stack allocator takes its own locks and may
        // allocate: a preempting allocator must not switch us out in there.
        let _np = process::NoPreempt::new();
        let index = self.free.lock().pop().ok_or(SpawnError::Full)?;
        let stack = match self.take_stack() {
            Ok(stack) => stack,
            Err(e) => {
                self.free.lock().push(index);
                return Err(SpawnError::Stack(e));
            }
        };
        let slot = &self.slots[index as usize];
        let generation = slot.generation();
        // SAFETY: 1. `stack.top()` is 16-aligned and the range below it is
        //    owned by `stack`, which the slot keeps until the process is
        //    finalized (it never runs after that);
        //    2. `process::entry` never returns.
        let context = unsafe { Native::init_context(stack.top(), process::entry, index as usize) };
        // SAFETY: we popped `index` from the free list, so the slot is
        // Vacant and ours alone until `claim` publishes it.
        unsafe {
            let body = &mut *slot.body.get();
            body.context = context;
            body.stack = Some(stack);
            body.entry = Some(entry);
        }
        slot.cold.lock().handle = true;
        slot.worker.store(worker, Ordering::Relaxed);
        self.platform.set_stack_tag(stack_of(slot), Pid::from_parts(index, generation).to_bits());
        // Release (inside claim) publishes body, worker and cold to the
        // worker that pops the index.
        let claimed = slot.state.claim(generation);
        debug_assert!(claimed.is_ok(), "free-list slot {index} was not Vacant");
        self.live.fetch_add(1, Ordering::AcqRel);
        let pid = Pid::from_parts(index, generation);
        self.route_spawn(worker, index);
        Ok(JoinHandle::new(pid, self.clone()))
    }

    fn route_spawn(&self, worker: usize, index: u32) {
        if let Some(core) = crate::kernel::worker::current_core_of(self, worker) {
            // SAFETY: `current_core_of` returned the calling driver's own
            // worker, which is not borrowed across this call.
            unsafe { crate::kernel::worker::push_spawned(core, index) };
            return;
        }
        let ring = &self.workers[worker].spawn;
        // Queue operations run with preemption disabled: a producer switched
        // out mid-publish would stall the consumer behind its cell.
        let _np = process::NoPreempt::new();
        let pushed = ring.push(index);
        assert!(pushed.is_ok(), "spawn ring overflow: a process was enqueued twice");
        self.notify(worker);
    }

    /// Round-robin worker choice for spawns through the handle.
    pub(crate) fn next_worker(&self) -> usize {
        self.rr.fetch_add(1, Ordering::Relaxed) % self.workers.len()
    }

    fn take_stack(&self) -> Result<Stack, smarm_platform::StackError> {
        if let Some(stack) = self.stacks.lock().pop() {
            return Ok(stack);
        }
        self.platform.allocate_stack(self.config.stack_size)
    }

    /// Returns a finished process's stack to the pool (trimmed), or to the
    /// platform when the pool is full.
    pub(crate) fn recycle_stack(&self, stack: Stack) {
        let mut pool = self.stacks.lock();
        if pool.len() < self.config.stack_pool_max.unwrap_or(crate::kernel::config::DEFAULT_STACK_POOL_MAX) {
            pool.push(stack);
            drop(pool);
        } else {
            drop(pool);
            // SAFETY: the stack came from this platform and its process is
            // finished: nothing runs on it or will be switched to.
            unsafe { self.platform.free_stack(stack) };
        }
    }

    /// Epoch-stamped wake of `pid`'s wait `epoch`. Returns whether the wake
    /// landed (the process was queued or notified).
    pub(crate) fn unpark_at(&self, pid: Pid, epoch: u32) -> bool {
        let Some(slot) = self.slot(pid.index()) else { return false };
        match slot.state.unpark_at(pid.generation(), epoch) {
            Unpark::Enqueue => {
                self.enqueue(slot, pid.index());
                true
            }
            Unpark::Notified => true,
            Unpark::Stale => false,
        }
    }

    /// The wildcard wake, for `request_stop` only.
    fn unpark_for_stop(&self, pid: Pid) {
        let Some(slot) = self.slot(pid.index()) else { return };
        if slot.state.unpark(pid.generation()) == Unpark::Enqueue {
            self.enqueue(slot, pid.index());
        }
    }

    /// Puts a process that just became `Queued` on its worker's queue: the
    /// local ready queue when we are its driver, else its wake ring.
    fn enqueue(&self, slot: &Slot, index: u32) {
        let worker = slot.worker.load(Ordering::Relaxed);
        if let Some(core) = crate::kernel::worker::current_core_of(self, worker) {
            // SAFETY: the calling driver's own worker, not borrowed across
            // this call.
            unsafe { crate::kernel::worker::push_ready(core, index) };
            return;
        }
        // Preemption disabled across the push (see `route_spawn`).
        let _np = process::NoPreempt::new();
        let pushed = self.workers[worker].wake.push(index);
        assert!(pushed.is_ok(), "wake ring overflow: a process was enqueued twice");
        self.notify(worker);
    }

    /// Wakes the driver of `worker` if it is parked.
    pub(crate) fn notify(&self, worker: usize) {
        let token = &self.tokens[self.workers[worker].token];
        self.platform.unpark(token);
    }

    /// Sets the stop flag of `pid` and wakes it: the one wildcard wake.
    pub(crate) fn request_stop(&self, pid: Pid) -> Result<(), NoProc> {
        self.request_stop_because(pid, None)
    }

    /// `request_stop`, recording why (a link) for the process's monitors.
    fn request_stop_because(&self, pid: Pid, cause: Option<(Pid, DownReason)>) -> Result<(), NoProc> {
        let slot = self.slot(pid.index()).ok_or(NoProc(pid))?;
        let _np = process::NoPreempt::new();
        {
            // Under the slot lock, so a concurrent reclaim (which resets the
            // flag and moves the generation on under the same lock) cannot
            // let the flag leak into the slot's next process.
            let mut cold = slot.cold.lock();
            let snap = slot.state.snapshot();
            if snap.generation() != pid.generation()
                || matches!(snap.state(), State::Vacant | State::Done)
                || cold.outcome.is_some()
            {
                return Err(NoProc(pid));
            }
            if cold.stop_cause.is_none() && slot.stop.load(Ordering::Acquire) == STOP_NONE {
                cold.stop_cause = cause;
            }
            let _ =
                slot.stop.compare_exchange(STOP_NONE, STOP_REQUESTED, Ordering::AcqRel, Ordering::Acquire);
        }
        self.unpark_for_stop(pid);
        Ok(())
    }

    pub(crate) fn next_monitor_id(&self) -> u64 {
        self.next_monitor.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs `f` on the cold state of a live `pid` (`Err` if it is dead).
    fn with_live_cold<R>(&self, pid: Pid, f: impl FnOnce(&mut Cold) -> R) -> Result<R, NoProc> {
        let slot = self.slot(pid.index()).ok_or(NoProc(pid))?;
        let mut cold = slot.cold.lock();
        let snap = slot.state.snapshot();
        if snap.generation() != pid.generation() || snap.state() == State::Vacant || cold.outcome.is_some() {
            return Err(NoProc(pid));
        }
        Ok(f(&mut cold))
    }

    /// Links `a` and `b` (both sides record it; one leaf lock at a time).
    pub(crate) fn link(&self, a: Pid, b: Pid) -> Result<(), NoProc> {
        if a == b {
            return self.with_live_cold(a, |_| ());
        }
        self.with_live_cold(a, |cold| {
            if !cold.links.contains(&b) {
                cold.links.push(b);
            }
        })?;
        let linked = self.with_live_cold(b, |cold| {
            if !cold.links.contains(&a) {
                cold.links.push(a);
            }
        });
        if linked.is_err() {
            // `b` is dead: undo our side; its finalize never saw us.
            let _ = self.with_live_cold(a, |cold| cold.links.retain(|p| *p != b));
        }
        linked
    }

    /// Removes the link between `a` and `b` on both sides.
    pub(crate) fn unlink(&self, a: Pid, b: Pid) {
        let _ = self.with_live_cold(a, |cold| cold.links.retain(|p| *p != b));
        let _ = self.with_live_cold(b, |cold| cold.links.retain(|p| *p != a));
    }

    /// Installs the trap-exit sender of a live process.
    pub(crate) fn set_trap(&self, pid: Pid, tx: Sender<ExitSignal>) -> Result<(), NoProc> {
        self.with_live_cold(pid, |cold| cold.trap = Some(tx))
    }

    /// Tells linked `peer` that `dead` died with `reason`.
    fn propagate_exit(&self, peer: Pid, dead: Pid, reason: &DownReason) {
        let action = self
            .with_live_cold(peer, |cold| {
                cold.links.retain(|p| *p != dead);
                match (&cold.trap, reason.is_abnormal()) {
                    (_, false) => LinkAction::Nothing,
                    (Some(tx), true) => LinkAction::Signal(tx.clone()),
                    (None, true) => LinkAction::Stop,
                }
            })
            .unwrap_or(LinkAction::Nothing);
        match action {
            LinkAction::Nothing => {}
            LinkAction::Signal(tx) => {
                let _ = tx.send(ExitSignal { from: dead, reason: reason.clone() });
            }
            LinkAction::Stop => {
                let _ = self.request_stop_because(peer, Some((dead, reason.clone())));
            }
        }
    }

    /// Runs the finalize sequence for a process that has switched out for
    /// the last time. Called by its worker's driver.
    pub(crate) fn finalize(&self, index: u32, generation: u32) {
        let slot = &self.slots[index as usize];
        let pid = Pid::from_parts(index, generation);
        // SAFETY: the process is Done and will never run again; its worker
        // (the caller) owns the body.
        let (stack, low_water) = unsafe {
            let body = &mut *slot.body.get();
            (body.stack.take(), body.low_water)
        };
        if let Some(stack) = stack {
            self.trim_if_deep(&stack, low_water);
            self.recycle_stack(stack);
        }
        let (reason, hooks, links, trap) = {
            let mut cold = slot.cold.lock();
            if cold.on_death.is_empty() && cold.links.is_empty() && cold.trap.is_none() {
                // Nobody to notify (the common case): everything the three
                // steps below do under the lock happens in this one section.
                cold.notified = true;
                cold.finalized = true;
                let joiners = core::mem::take(&mut cold.joiners);
                let reclaim = !cold.handle;
                drop(cold);
                for (joiner, epoch) in joiners {
                    self.unpark_at(joiner, epoch);
                }
                self.live.fetch_sub(1, Ordering::AcqRel);
                if reclaim {
                    self.reclaim(index, generation);
                }
                return;
            }
            // The outcome was set (under this lock) by the exiting process;
            // from then on no death hook or link can be added.
            let outcome = cold.outcome.clone().unwrap_or(Outcome::Normal);
            let reason = DownReason::from_outcome(&outcome, cold.stop_cause.as_ref());
            (reason, core::mem::take(&mut cold.on_death), core::mem::take(&mut cold.links), cold.trap.take())
        };
        // Outside the slot lock: dropping a sender may take a channel lock.
        drop(trap);
        for hook in hooks {
            hook(pid, &reason);
        }
        for peer in links {
            self.propagate_exit(peer, pid, &reason);
        }
        // Notifications are out: joiners may go. Those that arrive from now
        // on return at once; those that came before are taken here.
        let joiners = {
            let mut cold = slot.cold.lock();
            cold.notified = true;
            core::mem::take(&mut cold.joiners)
        };
        for (joiner, epoch) in joiners {
            self.unpark_at(joiner, epoch);
        }
        self.live.fetch_sub(1, Ordering::AcqRel);
        // Last: mark finalized and decide, in the same critical section as
        // the handle's drop decides, which of the two reclaims.
        let reclaim = {
            let mut cold = slot.cold.lock();
            cold.finalized = true;
            !cold.handle
        };
        if reclaim {
            self.reclaim(index, generation);
        }
    }

    /// Releases the deep pages of a recycled stack when the process was
    /// seen below the high-water mark (`stack_keep_resident` from the top)
    /// at a switch out. Shallow processes — nearly all — cost no syscall.
    /// Depth reached and left between two switches is not seen; such a
    /// stack keeps its pages until a later process on it is seen deep.
    fn trim_if_deep(&self, stack: &Stack, low_water: usize) {
        let mark = (stack.top() as usize).saturating_sub(self.config.stack_keep_resident);
        if low_water < mark {
            self.platform.trim_stack(stack, self.config.stack_keep_resident);
        }
    }

    /// Returns a finalized slot with no outstanding handle to the free list.
    pub(crate) fn reclaim(&self, index: u32, generation: u32) {
        let slot = &self.slots[index as usize];
        {
            let mut cold = slot.cold.lock();
            debug_assert!(cold.finalized && !cold.handle);
            // SAFETY: finalized and unhandled: no one else touches the body.
            unsafe { slot.reset(&mut cold) };
            // The generation moves on under the slot lock (see request_stop).
            let reclaimed = slot.state.reclaim(generation);
            debug_assert!(reclaimed.is_ok(), "reclaim of a slot that is not Done({generation})");
        }
        self.free.lock().push(index);
    }

    /// Registers a death hook on a live process; `Err` with the hook back
    /// if it has already died (or the pid is stale).
    pub(crate) fn on_death(&self, pid: Pid, hook: DeathHook) -> Result<(), DeathHook> {
        let Some(slot) = self.slot(pid.index()) else { return Err(hook) };
        let mut cold = slot.cold.lock();
        let snap = slot.state.snapshot();
        if snap.generation() != pid.generation() || snap.state() == State::Vacant || cold.outcome.is_some() {
            return Err(hook);
        }
        cold.on_death.push(hook);
        Ok(())
    }

    /// Whether `pid` names a process that has not been finalized.
    pub(crate) fn is_alive(&self, pid: Pid) -> bool {
        let Some(slot) = self.slot(pid.index()) else { return false };
        let snap = slot.state.snapshot();
        snap.generation() == pid.generation() && !matches!(snap.state(), State::Vacant | State::Done)
    }

    fn free_slots(&self) -> usize {
        self.free.lock().len()
    }

    fn pooled_stacks(&self) -> usize {
        self.stacks.lock().len()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        for stack in self.stacks.get_mut().drain(..) {
            // SAFETY: pooled stacks belong to no process.
            unsafe { self.platform.free_stack(stack) };
        }
        for slot in self.slots.iter_mut() {
            // A runtime dropped with processes still suspended: their stacks
            // are abandoned (their destructors cannot run without resuming
            // them), but the memory goes back.
            if let Some(stack) = slot.body.get_mut().stack.take() {
                // SAFETY: with the last handle gone, nothing can switch to
                // the process any more.
                unsafe { self.platform.free_stack(stack) };
            }
        }
    }
}

/// A cloneable handle to a runtime: spawns, stops, and inspects.
#[derive(Clone, Debug)]
pub struct Runtime {
    pub(crate) shared: Arc<Shared>,
}

impl Runtime {
    /// Spawns `f` as a process on the next worker, round-robin.
    pub fn spawn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<JoinHandle, SpawnError> {
        let worker = self.shared.next_worker();
        self.shared.spawn_on(worker, Box::new(f))
    }

    /// Spawns `f` as a process on worker `worker`.
    pub fn spawn_on<F: FnOnce() + Send + 'static>(
        &self,
        worker: usize,
        f: F,
    ) -> Result<JoinHandle, SpawnError> {
        self.shared.spawn_on(worker, Box::new(f))
    }

    /// Asks `pid` to stop: it unwinds at its next observation point (a
    /// yield, `check!()`, or the wake-up of any park) and ends as
    /// `Stopped`. The only wildcard wake.
    pub fn request_stop(&self, pid: Pid) -> Result<(), NoProc> {
        self.shared.request_stop(pid)
    }

    /// Whether `pid` is alive (not yet finalized).
    pub fn is_alive(&self, pid: Pid) -> bool {
        self.shared.is_alive(pid)
    }

    /// Processes spawned and not yet finalized.
    pub fn live(&self) -> usize {
        self.shared.live()
    }

    /// Work outside any worker that holds the runtime open (io in flight).
    pub fn external(&self) -> usize {
        self.shared.external()
    }

    /// Marks one piece of external work started (io). Pair with
    /// [`Runtime::external_done`].
    pub fn external_begin(&self) {
        self.shared.external.fetch_add(1, Ordering::AcqRel);
    }

    /// Marks one piece of external work finished.
    pub fn external_done(&self) {
        self.shared.external.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether the runtime has nothing left to do: no live process and no
    /// external work.
    pub fn is_finished(&self) -> bool {
        self.shared.live() == 0 && self.shared.external() == 0
    }

    /// Number of workers.
    pub fn worker_count(&self) -> usize {
        self.shared.workers.len()
    }

    /// The configuration the runtime was built with.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The platform the runtime runs on.
    pub fn platform(&self) -> &Arc<dyn Platform> {
        &self.shared.platform
    }

    /// The park token worker `worker`'s driver sleeps on.
    pub fn park_token(&self, worker: usize) -> &ParkToken {
        &self.shared.tokens[self.shared.workers[worker].token]
    }

    /// Statistics of worker `worker`, as of its last completed pass.
    pub fn stats(&self, worker: usize) -> crate::kernel::worker::StatsSnapshot {
        self.shared.workers[worker].stats.snapshot()
    }

    /// Sends an administrative command to a worker; `false` if its admin
    /// ring is full (try again after its next pass) or there is no such
    /// worker.
    pub fn admin(&self, worker: usize, command: Admin) -> bool {
        let Some(w) = self.shared.workers.get(worker) else { return false };
        let ok = w.admin.push(command).is_ok();
        if ok {
            // Release: a pass that sees the count sees the command.
            w.admin_pending.fetch_add(1, Ordering::Release);
        }
        if ok {
            self.shared.notify(worker);
        }
        ok
    }

    /// Requests a stop of every live process on every worker.
    pub fn stop_all(&self) {
        for worker in 0..self.worker_count() {
            while !self.admin(worker, Admin::StopAll) {
                smarm_arch::Native::spin_hint();
            }
        }
    }

    /// Free slots in the slab (for tests and diagnostics).
    pub fn free_slots(&self) -> usize {
        self.shared.free_slots()
    }

    /// Stacks waiting in the pool (for tests and diagnostics).
    pub fn pooled_stacks(&self) -> usize {
        self.shared.pooled_stacks()
    }

    /// Capacity of the slab.
    pub fn max_actors(&self) -> usize {
        self.shared.slots.len()
    }
}
