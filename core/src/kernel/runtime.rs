//! The shared side of a runtime — the slab of slots, the stack pool, the
//! per-worker ingress rings, death hooks, extension slots — and the
//! cloneable [`Runtime`] handle.
//!
//! Invariants kept here:
//! - Finalize order: exit reason set and `Done` under the slot lock →
//!   stack recycled → death hooks → joiners woken → slot reclaimed only
//!   when no handle is outstanding.
//! - A process sits in at most one ready queue or ring at a time (the state
//!   word's `Queued` transition is what entitles a push), so rings sized to
//!   the slab cannot overflow; pushes assert it.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::fmt;

use smarm_arch::{Arch, Native};
use smarm_platform::{ParkToken, Platform, Stack};

use crate::kernel::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::kernel::config::{Config, ConfigError};
use crate::kernel::current;
use crate::kernel::error::{NoProc, SpawnError};
use crate::kernel::exit::ExitReason;
use crate::kernel::extension::Extensions;
use crate::kernel::host::{self, HostHooks};
use crate::kernel::join::JoinHandle;
use crate::kernel::pid::Pid;
use crate::kernel::preempt::NoPreempt;
use crate::kernel::ring::{CachePadded, LockedRing, Ring, WakeRing};
use crate::kernel::slab::{DeathHook, DeathHookId, Entry, Slot, STOP_NONE, STOP_REQUESTED};
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::state::{State, Unpark};
use crate::kernel::worker::{Worker, WorkerStats};
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
    /// Written by the worker's driver at every pass: in its own cache block,
    /// away from `token`, which every waker of this worker reads.
    pub(crate) stats: CachePadded<WorkerStats>,
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
    /// `n` drivers (at least 1, at most one per worker), driver `d` driving
    /// the workers `w` with `w % n == d` (the hosted engine when workers
    /// outnumber the CPUs): worker `w` signals token `w % n`, so a burst of
    /// wakes into any of one driver's workers costs it one signal.
    /// `Grouped(worker_count)` is [`PerWorker`](Drivers::PerWorker),
    /// `Grouped(1)` is [`Single`](Drivers::Single).
    Grouped(usize),
}

impl Drivers {
    /// How many park tokens (one per driver) `worker_count` workers driven
    /// this way need: between 1 and `worker_count.max(1)`.
    pub fn driver_count(self, worker_count: usize) -> usize {
        let workers = worker_count.max(1);
        match self {
            Drivers::PerWorker => workers,
            Drivers::Single => 1,
            Drivers::Grouped(n) => n.clamp(1, workers),
        }
    }

    /// The driver (and park token) of worker `worker`.
    pub fn driver_of(self, worker: usize, worker_count: usize) -> usize {
        worker % self.driver_count(worker_count)
    }
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
    /// One per driver, each in its own cache block: a driver spins reading
    /// its token while other drivers swap theirs, and tokens packed into one
    /// line would move that line between CPUs at every hand-off.
    pub(crate) tokens: Box<[CachePadded<ParkToken>]>,
    /// Processes spawned and not yet finalized.
    live: AtomicUsize,
    /// Work outstanding outside any worker (io in flight): holds the
    /// runtime open like a live process does.
    external: AtomicUsize,
    /// The host has finished with the runtime: spawns are refused.
    closed: AtomicBool,
    rr: AtomicUsize,
    /// `config.timeslice` in `Arch::timestamp` ticks.
    pub(crate) timeslice_ticks: u64,
    /// Source of death-hook ids (and so of monitor ids).
    next_hook: AtomicU64,
    /// Per-runtime values of the layers above the kernel.
    extensions: Extensions,
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
    /// The slab or a worker's rings could not be allocated: lower
    /// `max_actors` or `worker_count`.
    OutOfMemory,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Config(e) => write!(f, "invalid runtime configuration: {e}"),
            BuildError::HostConflict => {
                f.write_str("another host's hooks are installed: one host kind per process image")
            }
            BuildError::OutOfMemory => {
                f.write_str("not enough memory for the slab and rings: lower max_actors or worker_count")
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
        // Every allocation sized by the configuration is fallible: an
        // absurd size is a typed error, never an abort.
        let oom = |_| BuildError::OutOfMemory;
        let mut slots: Vec<Slot> = Vec::new();
        slots.try_reserve_exact(n).map_err(oom)?;
        slots.extend((0..n).map(|_| Slot::new()));
        let slots = slots.into_boxed_slice();
        // Popped from the end: index 0 is handed out first.
        let mut free: Vec<u32> = Vec::new();
        free.try_reserve_exact(n).map_err(oom)?;
        free.extend((0..n as u32).rev());
        let token_count = drivers.driver_count(config.worker_count);
        let mut workers: Vec<WorkerShared> = Vec::new();
        workers.try_reserve_exact(config.worker_count).map_err(oom)?;
        for id in 0..config.worker_count {
            workers.push(WorkerShared {
                wake: WakeRing::try_with_capacity(n).map_err(|_| BuildError::OutOfMemory)?,
                spawn: WakeRing::try_with_capacity(n).map_err(|_| BuildError::OutOfMemory)?,
                admin: LockedRing::with_capacity(64),
                admin_pending: AtomicUsize::new(0),
                token: drivers.driver_of(id, config.worker_count),
                stats: CachePadded(WorkerStats::default()),
            });
        }
        let workers = workers.into_boxed_slice();
        let timeslice_ticks = timeslice_ticks(&config, &*platform);
        let tokens: Box<[CachePadded<ParkToken>]> =
            (0..token_count).map(|_| CachePadded(ParkToken::new())).collect();
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
            closed: AtomicBool::new(false),
            rr: AtomicUsize::new(0),
            timeslice_ticks,
            next_hook: AtomicU64::new(1),
            extensions: Extensions::default(),
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

    /// Spawns `entry` on worker `worker`. The slot keeps a handle mark: the
    /// caller owns the right to its outcome (a `JoinHandle`).
    pub(crate) fn spawn_on(&self, worker: usize, entry: Entry) -> Result<Pid, SpawnError> {
        if worker >= self.workers.len() {
            return Err(SpawnError::NoSuchWorker(worker));
        }
        // The platform's stack allocator takes its own locks and may
        // allocate: a preempting allocator must not switch us out in there.
        let _np = NoPreempt::new();
        let index = {
            let mut free = self.free.lock();
            // Under the free-list lock, as `close` sets it: a spawn either
            // counts in `live` before `close` returns, or is refused.
            if self.closed.load(Ordering::Acquire) {
                return Err(SpawnError::Closed);
            }
            let index = free.pop().ok_or(SpawnError::Full)?;
            self.live.fetch_add(1, Ordering::AcqRel);
            index
        };
        let stack = match self.take_stack() {
            Ok(stack) => stack,
            Err(e) => {
                self.free.lock().push(index);
                self.live.fetch_sub(1, Ordering::AcqRel);
                return Err(SpawnError::Stack(e));
            }
        };
        // A recycled stack may carry an earlier process's ASan poison.
        crate::kernel::asan::forget_stack(&stack);
        let slot = &self.slots[index as usize];
        let generation = slot.generation();
        // SAFETY: 1. `stack.top()` is 16-aligned and the range below it is
        //    owned by `stack`, which the slot keeps until the process is
        //    finalized (it never runs after that);
        //    2. `process::entry` never returns.
        let context =
            unsafe { Native::init_context(stack.top(), crate::kernel::process::entry, index as usize) };
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
        let pid = Pid::from_parts(index, generation);
        self.route_spawn(worker, index);
        Ok(pid)
    }

    fn route_spawn(&self, worker: usize, index: u32) {
        let local = current::with(|core| {
            core.is(self, worker) && {
                core.push_spawned(index);
                true
            }
        });
        if local == Some(true) {
            return;
        }
        let ring = &self.workers[worker].spawn;
        // Queue operations run with preemption disabled: a producer switched
        // out mid-publish would stall the consumer behind its cell.
        let _np = NoPreempt::new();
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
        let local = current::with(|core| {
            core.is(self, worker) && {
                core.push_ready(index);
                true
            }
        });
        if local == Some(true) {
            return;
        }
        // Preemption disabled across the push (see `route_spawn`).
        let _np = NoPreempt::new();
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
        self.request_stop_with(pid, None)
    }

    /// `request_stop`, recording the reason the process's death will
    /// report if it ends stopped (`None`: plain `Stopped`). The first
    /// recorded reason wins, but `Killed` overrides any other.
    pub(crate) fn request_stop_with(&self, pid: Pid, reason: Option<ExitReason>) -> Result<(), NoProc> {
        let slot = self.slot(pid.index()).ok_or(NoProc(pid))?;
        let _np = NoPreempt::new();
        {
            // Under the slot lock, so a concurrent reclaim (which resets the
            // flag and moves the generation on under the same lock) cannot
            // let the flag leak into the slot's next process.
            let mut cold = slot.cold.lock();
            let snap = slot.state.snapshot();
            if snap.generation() != pid.generation()
                || matches!(snap.state(), State::Vacant | State::Done)
                || cold.exit.is_some()
            {
                return Err(NoProc(pid));
            }
            // The first reason wins, except that a kill overrides a
            // gentler reason still pending: the death reports `Killed`.
            let kill = reason == Some(ExitReason::Killed);
            if kill || (cold.stop_reason.is_none() && slot.stop.load(Ordering::Acquire) == STOP_NONE) {
                cold.stop_reason = reason;
            }
            let _ =
                slot.stop.compare_exchange(STOP_NONE, STOP_REQUESTED, Ordering::AcqRel, Ordering::Acquire);
        }
        self.unpark_for_stop(pid);
        Ok(())
    }

    /// A fresh id for a death hook (or a monitor).
    pub(crate) fn next_hook_id(&self) -> u64 {
        self.next_hook.fetch_add(1, Ordering::Relaxed)
    }

    /// The runtime's extension value of type `T`, made by `init` on first
    /// use.
    pub(crate) fn extension<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        self.extensions.get_or_init(init)
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
        let (reason, hooks) = {
            let mut cold = slot.cold.lock();
            if cold.death_hooks.is_empty() {
                // Nobody to notify (the common case): everything the three
                // steps below do under the lock happens in this one section.
                cold.notified = true;
                cold.finalized = true;
                let joiners = core::mem::take(&mut cold.joiners);
                let reclaim = !cold.handle;
                drop(cold);
                // Before the joiners wake: `live` is exact when `join`
                // returns.
                self.live.fetch_sub(1, Ordering::AcqRel);
                for (joiner, epoch) in joiners {
                    self.unpark_at(joiner, epoch);
                }
                if reclaim {
                    self.reclaim(index, generation);
                }
                return;
            }
            // The exit reason was set (under this lock) by the exiting
            // process; from then on no death hook can be added.
            let reason = cold.exit.clone().unwrap_or(ExitReason::Normal);
            (reason, core::mem::take(&mut cold.death_hooks))
        };
        for (_, hook) in hooks {
            hook(self, pid, &reason);
        }
        // Notifications are out: joiners may go. Those that arrive from now
        // on return at once; those that came before are taken here.
        // Before anyone can see the process as ended (`notified`): `live`
        // is exact when `join` returns.
        self.live.fetch_sub(1, Ordering::AcqRel);
        let joiners = {
            let mut cold = slot.cold.lock();
            cold.notified = true;
            core::mem::take(&mut cold.joiners)
        };
        for (joiner, epoch) in joiners {
            self.unpark_at(joiner, epoch);
        }
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
        let unjoined = {
            let mut cold = slot.cold.lock();
            debug_assert!(cold.finalized && !cold.handle);
            // A value nobody joined is dropped after the lock (its
            // destructor may take locks).
            let unjoined = cold.value.take();
            // SAFETY: finalized and unhandled: no one else touches the body.
            unsafe { slot.reset(&mut cold) };
            // The generation moves on under the slot lock (see request_stop).
            let reclaimed = slot.state.reclaim(generation);
            debug_assert!(reclaimed.is_ok(), "reclaim of a slot that is not Done({generation})");
            unjoined
        };
        drop(unjoined);
        self.free.lock().push(index);
    }

    /// Registers a death hook on a live process and returns its id; `Err`
    /// with the hook back if the process has already died (or the pid is
    /// stale).
    pub(crate) fn on_death(&self, pid: Pid, hook: DeathHook) -> Result<DeathHookId, DeathHook> {
        let Some(slot) = self.slot(pid.index()) else { return Err(hook) };
        let id = DeathHookId(self.next_hook_id());
        let mut cold = slot.cold.lock();
        let snap = slot.state.snapshot();
        if snap.generation() != pid.generation() || snap.state() == State::Vacant || cold.exit.is_some() {
            return Err(hook);
        }
        cold.death_hooks.push((id, hook));
        Ok(id)
    }

    /// Removes death hook `id` from `pid`; `true` if it was removed before
    /// it ran (it never will), `false` if it has run, is running, or was
    /// never there.
    pub(crate) fn remove_death_hook(&self, pid: Pid, id: DeathHookId) -> bool {
        let Some(slot) = self.slot(pid.index()) else { return false };
        let removed = {
            let mut cold = slot.cold.lock();
            if slot.state.snapshot().generation() != pid.generation() {
                return false;
            }
            let position = cold.death_hooks.iter().position(|(hook, _)| *hook == id);
            // `remove`, not `swap_remove`: hooks run in registration order.
            position.map(|i| cold.death_hooks.remove(i).1)
        };
        // Dropped outside the slot lock: a hook's captures may take locks.
        removed.is_some()
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
    /// Spawns `f` as a process on the next worker, round-robin. Its return
    /// value is what [`JoinHandle::join`] gives back.
    pub fn spawn<T, F>(&self, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let worker = self.shared.next_worker();
        JoinHandle::spawn(&self.shared, worker, f)
    }

    /// Spawns `f` as a process on worker `worker`.
    pub fn spawn_on<T, F>(&self, worker: usize, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        JoinHandle::spawn(&self.shared, worker, f)
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

    /// Processes spawned and not yet finalized. Exact as seen by a process
    /// whose `join` has just returned: the joined process no longer counts.
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

    /// Refuses every spawn from now on (`SpawnError::Closed`), for a host
    /// that has finished with the runtime. A spawn that raced with the call
    /// either was refused or counts in [`live`](Runtime::live) when this
    /// returns, so a host that closes, then waits until the runtime is
    /// finished, leaves no process behind. Irreversible.
    pub fn close(&self) {
        let _free = self.shared.free.lock();
        self.shared.closed.store(true, Ordering::Release);
    }

    /// Whether [`close`](Runtime::close) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Drivers;

    #[test]
    fn grouped_drivers_split_the_workers_round_robin() {
        assert_eq!(Drivers::PerWorker.driver_count(4), 4);
        assert_eq!(Drivers::Single.driver_count(4), 1);
        assert_eq!(Drivers::Grouped(2).driver_count(4), 2);
        // Clamped to 1 ..= workers.
        assert_eq!(Drivers::Grouped(0).driver_count(4), 1);
        assert_eq!(Drivers::Grouped(9).driver_count(4), 4);
        let of: [usize; 5] = core::array::from_fn(|w| Drivers::Grouped(2).driver_of(w, 5));
        assert_eq!(of, [0, 1, 0, 1, 0]);
        for w in 0..5 {
            assert_eq!(Drivers::PerWorker.driver_of(w, 5), w);
            assert_eq!(Drivers::Single.driver_of(w, 5), 0);
        }
    }
}
