//! The shared side of a runtime — the slab of slots, the stack pool, the
//! per-worker ingress rings, spawn and wake routing, extension slots —
//! and its construction. The stackless API is in `kernel::stackless`; how
//! a process ends (finalize, reclaim, death hooks) in `kernel::death`; the
//! methods of the public [`Runtime`] handle in `kernel::handle`.
//!
//! Invariants kept here:
//! - A process sits in at most one ready queue or wake/spawn queue at a time
//!   (the state word's `Queued` transition is what entitles a push), so the
//!   intrusive lists behind the rings need one link per slot and can never
//!   be full (`kernel::ring::WakeQueue`).
//! - The slab grows by segments and never shrinks while the runtime lives:
//!   a slot index is taken from the free list, or else appended (up to the
//!   configured cap, or [`MAX_PROCESSES`](crate::kernel::config::MAX_PROCESSES)).
//!   The free list's capacity covers every slot, so giving a slot back
//!   never allocates.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::fmt;

use smarm_arch::{Arch, Native};
use smarm_platform::{Nanos, ParkToken, Platform, Stack};

use crate::kernel::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use crate::kernel::config::{Config, ConfigError};
use crate::kernel::current::Here;
use crate::kernel::error::{NoProc, SpawnError};
use crate::kernel::exit::ExitReason;
use crate::kernel::extension::Extensions;
use crate::kernel::host::{self, HostHooks};
use crate::kernel::pid::Pid;
use crate::kernel::preempt::NoPreempt;
use crate::kernel::ring::watch::{self, Watch};
use crate::kernel::ring::{CachePadded, WakeQueue};
use crate::kernel::segments::{GrowError, Segments};
use crate::kernel::slab::{Entry, Slot, STOP_NONE, STOP_REQUESTED};
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::stackless::{Lanes, WorkerPlugin};
use crate::kernel::state::{State, Unpark};
use crate::kernel::trace::{self, TraceEvent};
use crate::kernel::worker::{self, Worker, WorkerStats};
/// Per-worker shared state: the producer side of its ingress rings.
pub(crate) struct WorkerShared {
    /// Wakes from other drivers: slot indices now `Queued`.
    pub(crate) wake: WakeQueue,
    /// Spawns from outside the worker: slot indices claimed `Queued`.
    pub(crate) spawn: WakeQueue,
    /// Envelopes for the stackless bodies of this worker, and the admin
    /// commands of the kernel and of its plugin (one admin lane).
    pub(crate) lanes: Lanes,
    /// Which park token this worker's driver sleeps on. Fixed at build
    /// time unless the host moves the worker to another driver
    /// ([`Worker::move_to_driver`]).
    pub(crate) token: AtomicUsize,
    /// Written by the worker's driver at every pass: in its own cache block,
    /// away from `token`, which every waker of this worker reads.
    pub(crate) stats: CachePadded<WorkerStats>,
}

/// What a worker knows of one of its processes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProcessView {
    pub(crate) pid: Pid,
    pub(crate) state: State,
    pub(crate) death_hooks: usize,
    pub(crate) stack_used: usize,
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
    ///
    /// This is where the drivers start: a host may later give a worker to
    /// another driver ([`Worker::move_to_driver`](crate::Worker::move_to_driver)).
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

    /// The driver (and park token) worker `worker` starts with.
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
    /// The slab: grows by segments, never moves a slot.
    pub(crate) slots: Segments<Slot>,
    /// Indices of reclaimed slots, reused before the slab grows. Its
    /// capacity is kept at least the slab's length (see `grow`).
    pub(super) free: RuntimeMutex<Vec<u32>>,
    /// Most slots in use at once: `Config::max_processes`, or `MAX_PROCESSES`.
    pub(super) limit: usize,
    pub(super) stacks: RuntimeMutex<StackPool>,
    /// When the stack pool next looks for idle stacks to release (see
    /// [`StackPool`]); [`NO_RELEASE_DUE`] while it holds no more than the
    /// stacks it always keeps resident. Written under the pool's lock, read
    /// without it by idle workers.
    stack_release_due: AtomicU64,
    pub(crate) workers: Box<[WorkerShared]>,
    /// One per driver, each in its own cache block: a driver spins reading
    /// its token while other drivers swap theirs, and tokens packed into one
    /// line would move that line between CPUs at every hand-off.
    pub(crate) tokens: Box<[CachePadded<ParkToken>]>,
    /// One per driver, beside its token: set while the driver is awake and
    /// will look at its workers' ingress queues before it sleeps
    /// ([`Shared::watch`]). A push into a watched worker then skips the
    /// token, whose line would otherwise move to the waker and back at
    /// every hop; only the driver writes its flag, so the line stays
    /// shared in the wakers' caches.
    watched: Box<[CachePadded<Watch>]>,
    /// Processes spawned and not yet finalized.
    pub(super) live: AtomicUsize,
    /// Work outstanding outside any worker (io in flight): holds the
    /// runtime open like a live process does.
    pub(super) external: AtomicUsize,
    /// The host has finished with the runtime: spawns are refused.
    pub(super) closed: AtomicBool,
    pub(super) rr: AtomicUsize,
    /// `config.timeslice` in `Arch::timestamp` ticks.
    pub(crate) timeslice_ticks: u64,
    /// Source of death-hook ids (and so of monitor ids).
    pub(super) next_hook: AtomicU64,
    /// Per-runtime values of the layers above the kernel.
    pub(super) extensions: Extensions,
    /// The worker plugin (handler actors) once installed: a boxed `Arc`,
    /// set once, freed with the runtime.
    pub(super) plugin: AtomicPtr<Arc<dyn WorkerPlugin>>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("workers", &self.workers.len())
            .field("max_processes", &self.limit)
            .field("slab_len", &self.slots.len())
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
    /// A worker's rings could not be allocated: lower `worker_count`.
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
                f.write_str("not enough memory for the workers' rings: lower worker_count")
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
        let limit = config.process_limit();
        // Every allocation sized by the configuration is fallible: an
        // absurd size is a typed error, never an abort. The slab and the
        // free list start empty and grow with the processes.
        let oom = |_| BuildError::OutOfMemory;
        let token_count = drivers.driver_count(config.worker_count);
        let mut workers: Vec<WorkerShared> = Vec::new();
        workers.try_reserve_exact(config.worker_count).map_err(oom)?;
        for id in 0..config.worker_count {
            workers.push(WorkerShared {
                wake: WakeQueue::try_new().map_err(|_| BuildError::OutOfMemory)?,
                spawn: WakeQueue::try_new().map_err(|_| BuildError::OutOfMemory)?,
                lanes: Lanes::new(),
                token: AtomicUsize::new(drivers.driver_of(id, config.worker_count)),
                stats: CachePadded(WorkerStats::default()),
            });
        }
        let workers = workers.into_boxed_slice();
        let timeslice_ticks = timeslice_ticks(&config, &*platform);
        let tokens: Box<[CachePadded<ParkToken>]> =
            (0..token_count).map(|_| CachePadded(ParkToken::new())).collect();
        let watched: Box<[CachePadded<Watch>]> =
            (0..token_count).map(|_| CachePadded(Watch::default())).collect();
        let shared = Arc::new(Shared {
            config,
            platform,
            hooks,
            slots: Segments::new(),
            free: RuntimeMutex::leaf(Vec::new()),
            limit,
            stacks: RuntimeMutex::leaf(StackPool::default()),
            stack_release_due: AtomicU64::new(NO_RELEASE_DUE),
            workers,
            tokens,
            watched,
            live: AtomicUsize::new(0),
            external: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            rr: AtomicUsize::new(0),
            timeslice_ticks,
            next_hook: AtomicU64::new(1),
            extensions: Extensions::default(),
            plugin: AtomicPtr::new(core::ptr::null_mut()),
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
    #[inline]
    pub(crate) fn slot(&self, index: u32) -> Option<&Slot> {
        self.slots.get(index)
    }

    /// The slot at an index this runtime handed out (it is in the slab).
    #[inline]
    pub(crate) fn slot_at(&self, index: u32) -> &Slot {
        match self.slots.get(index) {
            Some(slot) => slot,
            None => panic!("smarm: slot {index} is not in the slab (a runtime bug)"),
        }
    }

    /// The slot of a pid this runtime handed out (its index is in range).
    #[inline]
    pub(crate) fn slot_of(&self, pid: Pid) -> &Slot {
        self.slot_at(pid.index())
    }

    /// A fresh slot index for a spawn, with the free-list lock held: the
    /// slab grows by one slot (and by a segment when the slot opens one),
    /// unless the cap is reached.
    pub(super) fn grow(&self, free: &mut Vec<u32>) -> Result<u32, SpawnError> {
        let len = self.slots.len();
        if len >= self.limit {
            return Err(SpawnError::Full);
        }
        // Room in the free list for every slot, this one included: giving a
        // slot back (`reclaim`, a failed spawn) then never allocates.
        let missing = (len + 1).saturating_sub(free.len());
        free.try_reserve(missing).map_err(|_| SpawnError::OutOfMemory)?;
        // SAFETY: pushes are serialised by the free-list lock, which the
        // caller holds (`free` is borrowed from its guard).
        match unsafe { self.slots.push(Slot::new()) } {
            Ok(index) => Ok(index),
            Err(GrowError::Full) => Err(SpawnError::Full),
            Err(GrowError::OutOfMemory) => Err(SpawnError::OutOfMemory),
        }
    }

    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    pub(crate) fn external(&self) -> usize {
        self.external.load(Ordering::Acquire)
    }

    /// Spawns `entry` on worker `worker`. The slot keeps a handle mark: the
    /// caller owns the right to its outcome (a `JoinHandle`). `here` is the
    /// caller's worker record, looked up by the caller: it serves all the
    /// spawn's locks, and stays the caller's, as preemption is off from
    /// here on.
    pub(crate) fn spawn_on_in(&self, worker: usize, entry: Entry, here: Here) -> Result<Pid, SpawnError> {
        if worker >= self.workers.len() {
            return Err(SpawnError::NoSuchWorker(worker));
        }
        // The platform's stack allocator takes its own locks and may
        // allocate: a preempting allocator must not switch us out in there.
        let _np = NoPreempt::in_here(here);
        let index = self.take_slot_in(here)?;
        let stack = match self.take_stack_in(here) {
            Ok(stack) => stack,
            Err(e) => {
                self.free.lock_in(here).push(index);
                self.live.fetch_sub(1, Ordering::AcqRel);
                return Err(SpawnError::Stack(e));
            }
        };
        // A recycled stack may carry an earlier process's ASan poison.
        crate::kernel::asan::forget_stack(&stack);
        let slot = self.slot_at(index);
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
        slot.cold.lock_in(here).handle = true;
        slot.worker.store(worker, Ordering::Relaxed);
        self.platform.set_stack_tag(stack_of(slot), Pid::from_parts(index, generation).to_bits());
        // Release (inside claim) publishes body, worker and cold to the
        // worker that pops the index.
        let claimed = slot.state.claim(generation);
        debug_assert!(claimed.is_ok(), "free-list slot {index} was not Vacant");
        let pid = Pid::from_parts(index, generation);
        // Before it can run: its Spawn comes before its Exit.
        trace::emit(|| TraceEvent::Spawn { pid, worker, parent: crate::kernel::process::self_pid() });
        self.route_spawn_in(worker, index, here);
        Ok(pid)
    }

    /// Takes a vacant slot off the free list and counts it live.
    pub(super) fn take_slot(&self) -> Result<u32, SpawnError> {
        self.take_slot_in(Here::get())
    }

    /// [`take_slot`](Self::take_slot) from the worker record `here` the
    /// caller already looked up.
    fn take_slot_in(&self, here: Here) -> Result<u32, SpawnError> {
        let mut free = self.free.lock_in(here);
        // Under the free-list lock, as `close` sets it: a spawn either
        // counts in `live` before `close` returns, or is refused.
        if self.closed.load(Ordering::Acquire) {
            return Err(SpawnError::Closed);
        }
        let index = match free.pop() {
            Some(index) => index,
            None => self.grow(&mut free)?,
        };
        self.live.fetch_add(1, Ordering::AcqRel);
        Ok(index)
    }

    /// Nanoseconds in `ticks` of the timestamp counter (`Arch::timestamp`),
    /// from the calibration made for the timeslice.
    pub(crate) fn ticks_to_nanos(&self, ticks: u64) -> u64 {
        let nanos = u64::try_from(self.config.timeslice.as_nanos()).unwrap_or(u64::MAX);
        if self.timeslice_ticks == 0 {
            return 0;
        }
        ((ticks as u128 * nanos as u128) / self.timeslice_ticks as u128).min(u64::MAX as u128) as u64
    }

    /// Ticks of the timestamp counter in `nanos` nanoseconds: the inverse
    /// of [`ticks_to_nanos`](Self::ticks_to_nanos).
    pub(crate) fn nanos_to_ticks(&self, nanos: u64) -> u64 {
        let slice = u64::try_from(self.config.timeslice.as_nanos()).unwrap_or(u64::MAX);
        if slice == 0 {
            return nanos;
        }
        ((nanos as u128 * self.timeslice_ticks as u128) / slice as u128).min(u64::MAX as u128) as u64
    }

    /// What worker `worker`'s driver knows of the live process in slot
    /// `index`, if the slot holds a live process (not a stackless body) of
    /// that worker.
    ///
    /// # Safety
    ///
    /// Called on the driver of `worker`, outside any process (the body's
    /// stack mark is written by that driver at every switch out).
    pub(crate) unsafe fn process_view(&self, index: u32, worker: usize) -> Option<ProcessView> {
        let slot = self.slot(index)?;
        let snap = slot.state.snapshot();
        if matches!(snap.state(), State::Vacant | State::Done)
            || slot.worker.load(Ordering::Relaxed) != worker
            || slot.stackless.load(Ordering::Relaxed)
        {
            return None;
        }
        let pid = Pid::from_parts(index, snap.generation());
        // SAFETY: the owning driver outside any process (the contract):
        // nothing writes the body meanwhile.
        let (top, low) = unsafe {
            let body = &*slot.body.get();
            (body.stack.as_ref().map(|s| s.top() as usize), body.low_water)
        };
        let stack_used = match top {
            Some(top) if low != usize::MAX => top.saturating_sub(low),
            _ => 0,
        };
        let hooks = slot.cold.lock().death_hooks.len();
        Some(ProcessView { pid, state: snap.state(), death_hooks: hooks, stack_used })
    }

    /// Queues a fresh spawn on `worker`: among the running process's spawns
    /// when the caller drives that worker (`here`, looked up by the
    /// caller), else through the worker's spawn ring.
    fn route_spawn_in(&self, worker: usize, index: u32, here: Here) {
        if let Some(core) = worker::core_in(&here) {
            if core.is(self, worker) {
                core.push_spawned(index);
                return;
            }
        }
        // Queue operations run with preemption disabled: a producer switched
        // out mid-publish would stall the consumer behind its cell.
        let _np = NoPreempt::in_here(here);
        self.workers[worker].spawn.push(&self.slots, index);
        self.signal(worker);
    }

    /// Round-robin worker choice for spawns through the handle.
    pub(crate) fn next_worker(&self) -> usize {
        self.rr.fetch_add(1, Ordering::Relaxed) % self.workers.len()
    }

    fn take_stack_in(&self, here: Here) -> Result<Stack, smarm_platform::StackError> {
        if let Some(stack) = self.stacks.lock_in(here).pop() {
            return Ok(stack);
        }
        self.platform.allocate_stack(self.config.stack_size)
    }

    /// Returns a finished process's stack to the pool, or to the platform
    /// when the pool is full. Every [`RELEASE_CHECK_EVERY`] returns, the
    /// pool also looks for idle stacks to release (see [`StackPool`]), so a
    /// runtime that never runs out of work releases them too.
    pub(crate) fn recycle_stack(&self, stack: Stack, here: Here) {
        let mut pool = self.stacks.lock_in(here);
        if pool.stacks.len()
            < self.config.stack_pool_max.unwrap_or(crate::kernel::config::DEFAULT_STACK_POOL_MAX)
        {
            pool.push(stack);
            if pool.returned.is_multiple_of(RELEASE_CHECK_EVERY) {
                self.release_idle_stacks_in(&mut pool);
            } else if self.stack_release_due.load(Ordering::Relaxed) == NO_RELEASE_DUE
                && pool.warm() > WARM_STACK_FLOOR
            {
                // The pool now holds stacks it may release: idle workers
                // look at the end of the current window.
                self.stack_release_due.store(pool.window_end(self.release_after()), Ordering::Relaxed);
            }
            drop(pool);
        } else {
            drop(pool);
            // SAFETY: the stack came from this platform and its process is
            // finished: nothing runs on it or will be switched to.
            unsafe { self.platform.free_stack(stack) };
        }
    }

    /// When the stack pool next wants to look for idle stacks to release,
    /// if it holds any it may release: a driver with nothing to do sleeps
    /// no longer than this, then calls
    /// [`release_idle_stacks`](Self::release_idle_stacks).
    pub(crate) fn stack_release_due(&self) -> Option<Nanos> {
        match self.stack_release_due.load(Ordering::Relaxed) {
            NO_RELEASE_DUE => None,
            due => Some(due),
        }
    }

    /// Gives back the resident pages of pooled stacks that no spawn took
    /// for [`Config::stack_release_after`], if that time has come (cheap
    /// otherwise: one relaxed load). Called by a worker that ran out of
    /// work.
    pub(crate) fn release_idle_stacks(&self) {
        let Some(due) = self.stack_release_due() else { return };
        if self.platform.now() < due {
            return;
        }
        let mut pool = self.stacks.lock();
        self.release_idle_stacks_in(&mut pool);
    }

    fn release_idle_stacks_in(&self, pool: &mut StackPool) {
        let due = pool.release_idle(self.platform.now(), self.release_after(), &*self.platform);
        self.stack_release_due.store(due.unwrap_or(NO_RELEASE_DUE), Ordering::Relaxed);
    }

    fn release_after(&self) -> Nanos {
        u64::try_from(self.config.stack_release_after.as_nanos()).unwrap_or(u64::MAX)
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

    /// [`unpark_at`](Self::unpark_at) from the worker record `here` the
    /// caller already looked up.
    #[inline]
    pub(crate) fn unpark_at_in(&self, pid: Pid, epoch: u32, here: Here) -> bool {
        let Some(slot) = self.slot(pid.index()) else { return false };
        match slot.state.unpark_at(pid.generation(), epoch) {
            Unpark::Enqueue => {
                self.enqueue_in(slot, pid.index(), here);
                true
            }
            Unpark::Notified => true,
            Unpark::Stale => false,
        }
    }

    /// The wildcard wake, for `request_stop` only.
    pub(super) fn unpark_for_stop(&self, pid: Pid) {
        let Some(slot) = self.slot(pid.index()) else { return };
        if slot.state.unpark(pid.generation()) == Unpark::Enqueue {
            self.enqueue(slot, pid.index());
        }
    }

    /// Puts a process that just became `Queued` on its worker's queue: the
    /// local ready queue when we are its driver, else its wake ring.
    pub(super) fn enqueue(&self, slot: &Slot, index: u32) {
        self.enqueue_in(slot, index, Here::get());
    }

    /// [`enqueue`](Self::enqueue) from the worker record `here` the caller
    /// already looked up.
    #[inline]
    pub(super) fn enqueue_in(&self, slot: &Slot, index: u32, here: Here) {
        let worker = slot.worker.load(Ordering::Relaxed);
        if let Some(core) = worker::core_in(&here) {
            if core.is(self, worker) {
                core.push_ready(index);
                return;
            }
        }
        // Preemption disabled across the push (see `route_spawn`).
        let _np = NoPreempt::in_here(here);
        self.workers[worker].wake.push(&self.slots, index);
        self.signal(worker);
    }

    /// Tells the driver of `worker` that one of its ingress queues (wake,
    /// spawn, a handler actors' lane) has just been pushed: nothing when the
    /// driver watches them, else its token.
    pub(crate) fn signal(&self, worker: usize) {
        // Fence, then read which driver holds the worker and whether it
        // watches: either that driver's look before it sleeps sees the
        // push, or this sees its watch ended (`ring::watch`); and a driver
        // that has just been handed the worker sees the push in its first
        // pass, or this reads the new driver (`Worker::move_to_driver`).
        watch::after_push();
        // Relaxed: ordered by the fences.
        let token = self.workers[worker].token.load(Ordering::Relaxed);
        if !self.watched[token].0.is_watching() {
            self.platform.unpark(&self.tokens[token]);
        }
    }

    /// The driver (and park token) worker `worker` signals now.
    pub(crate) fn token_of(&self, worker: usize) -> usize {
        // Relaxed: a stale driver only costs a wake that finds nothing; the
        // pushes that must not be lost go through `signal`.
        self.workers[worker].token.load(Ordering::Relaxed)
    }

    /// Driver `driver` is awake and will look at the ingress of every
    /// worker it drives before it sleeps: pushes into them skip its token
    /// until [`unwatch`](Self::unwatch).
    pub(crate) fn watch(&self, driver: usize) {
        self.watched[driver].0.begin();
    }

    /// Driver `driver` is about to sleep: pushes signal its token again.
    /// The caller looks at its workers' ingress afterwards
    /// (`Worker::has_ingress`): a push that skipped the token is seen there.
    pub(crate) fn unwatch(&self, driver: usize) {
        self.watched[driver].0.end();
    }

    /// Called after publishing something driver `driver` looks at before
    /// it sleeps (as it looks at its queues): signals its token unless it
    /// watches.
    pub(crate) fn notify_driver(&self, driver: usize) {
        watch::after_push();
        if !self.watched[driver].0.is_watching() {
            self.platform.unpark(&self.tokens[driver]);
        }
    }

    /// Wakes the driver of `worker` if it is parked.
    pub(crate) fn notify(&self, worker: usize) {
        let token = &self.tokens[self.token_of(worker)];
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
        trace::emit(|| TraceEvent::StopRequested { pid });
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

    /// Slots that can still be taken: the cap less the slots in use.
    pub(super) fn free_slots(&self) -> usize {
        let free = self.free.lock();
        let in_use = self.slots.len() - free.len();
        self.limit - in_use
    }

    pub(super) fn pooled_stacks(&self) -> usize {
        self.stacks.lock().stacks.len()
    }

    pub(super) fn warm_stacks(&self) -> usize {
        let pool = self.stacks.lock();
        pool.stacks.len() - pool.cold
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let plugin = self.plugin.load(Ordering::Acquire);
        if !plugin.is_null() {
            // SAFETY: published once by `install_plugin` from
            // `Box::into_raw`; nothing reads it once the runtime drops.
            drop(unsafe { Box::from_raw(plugin) });
        }
        for stack in self.stacks.get_mut().stacks.drain(..) {
            // SAFETY: pooled stacks belong to no process.
            unsafe { self.platform.free_stack(stack) };
        }
        let platform = &self.platform;
        self.slots.for_each_mut(|slot| {
            // A runtime dropped with processes still suspended: their stacks
            // are abandoned (their destructors cannot run without resuming
            // them), but the memory goes back.
            if let Some(stack) = slot.body.get_mut().stack.take() {
                // SAFETY: with the last handle gone, nothing can switch to
                // the process any more.
                unsafe { platform.free_stack(stack) };
            }
        });
    }
}

/// A cloneable handle to a runtime: spawns, stops, and inspects.
#[derive(Clone, Debug)]
pub struct Runtime {
    pub(crate) shared: Arc<Shared>,
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

/// Idle stacks a pool keeps resident however long they sit unused.
pub(crate) const WARM_STACK_FLOOR: usize = 64;
/// Stacks returned to the pool between two looks for idle stacks to
/// release made on the way (besides those of idle workers).
const RELEASE_CHECK_EVERY: u64 = 256;
/// `Shared::stack_release_due` when nothing is to be released.
const NO_RELEASE_DUE: Nanos = Nanos::MAX;

/// The runtime's idle stacks, reused before new ones are mapped.
///
/// Policy: a stack returned to the pool stays *warm* (its top pages
/// resident, ready to run on) while spawns keep taking it; one that no
/// spawn took for a whole window of [`Config::stack_release_after`] is
/// *cooled*: the platform releases all its resident pages
/// (`Platform::trim_stack` with nothing kept, `madvise(MADV_DONTNEED)` on
/// Linux) and keeps the mapping, so a spawn that takes a cold stack pays a
/// few page faults and no mapping. The [`WARM_STACK_FLOOR`] stacks on top
/// always stay warm.
///
/// The pool is a stack (last returned, first taken), so the stacks a
/// program keeps reusing stay on top and the ones below the lowest point
/// the pool's height reached in a window were not taken in it: at the end
/// of a window those are cooled (bottom first, warm ones above cold ones)
/// and a new window starts. A burst of spawns that ends therefore leaves
/// its stacks warm for the next burst, and gives their pages back once
/// the program has gone a window without needing them — the way
/// allocators decay their free memory, rather than cooling stacks as the
/// burst's processes exit (which made every following burst page-fault).
#[derive(Debug, Default)]
pub(crate) struct StackPool {
    /// Cold stacks at the bottom (`..cold`), warm ones above.
    stacks: Vec<Stack>,
    cold: usize,
    /// The lowest the pool's height has been in the current window.
    low: usize,
    /// When the current window began.
    window_start: Nanos,
    /// Stacks returned so far.
    returned: u64,
}

impl StackPool {
    fn pop(&mut self) -> Option<Stack> {
        let stack = self.stacks.pop()?;
        self.cold = self.cold.min(self.stacks.len());
        self.low = self.low.min(self.stacks.len());
        Some(stack)
    }

    fn push(&mut self, stack: Stack) {
        self.stacks.push(stack);
        self.returned = self.returned.wrapping_add(1);
    }

    /// Stacks whose pages are resident.
    fn warm(&self) -> usize {
        self.stacks.len() - self.cold
    }

    fn window_end(&self, window: Nanos) -> Nanos {
        self.window_start.saturating_add(window)
    }

    /// At or after the end of the current window, cools the stacks no
    /// spawn took in it (all but the [`WARM_STACK_FLOOR`] on top) and
    /// starts a new window. Returns when to look again, if some stacks
    /// beyond the floor are still warm.
    fn release_idle(&mut self, now: Nanos, window: Nanos, platform: &dyn Platform) -> Option<Nanos> {
        if now >= self.window_end(window) {
            let untouched = self.low.min(self.stacks.len().saturating_sub(WARM_STACK_FLOOR));
            while self.cold < untouched {
                platform.trim_stack(&self.stacks[self.cold], 0);
                self.cold += 1;
            }
            self.low = self.stacks.len();
            self.window_start = now;
        }
        debug_assert!(self.cold <= self.stacks.len());
        (self.warm() > WARM_STACK_FLOOR).then(|| self.window_end(window))
    }
}
