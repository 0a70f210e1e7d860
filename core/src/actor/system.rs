//! The runtime's actor state and each worker's: [`ActorSystem`] (the
//! kernel's worker plugin: each worker's published statistics, the
//! extension and remote-sink slots) and [`Local`] (one worker's runnable
//! list, staged sends and spawns, held envelopes and counters), with
//! [`Env`], what a handler's context reaches, and [`ActorStats`].

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::{Cell as StdCell, RefCell};

use crate::actor::extension::{RemoteSink, RuntimeExtension, WorkerExtension};
use crate::actor::timer::ActorTimers;
use crate::kernel::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::kernel::current::Here;
use crate::kernel::error::NoSuchWorker;
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::ring::recycle::{BlockCache, Home};
use crate::kernel::runtime::{Runtime, Shared};
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::stackless::{Driver, DriverEnvelope};
use crate::kernel::worker;

/// One envelope for an actor (a message, a signal, an install, an admin
/// command), delivered on its worker's driver.
pub(crate) type Envelope = DriverEnvelope;

/// Actor counters of one worker as of its last pass (Relaxed: statistics).
#[derive(Default)]
pub(crate) struct Published {
    pub(crate) actors: AtomicU64,
    pub(crate) mailbox_depth: AtomicU64,
    pub(crate) handled: AtomicU64,
    pub(crate) local_sends: AtomicU64,
    pub(crate) cross_sends: AtomicU64,
    pub(crate) inbox_sends: AtomicU64,
    pub(crate) transfers_in: AtomicU64,
    pub(crate) restarts: AtomicU64,
    /// Timestamp-counter ticks (converted to time when read).
    pub(crate) pass_ticks: AtomicU64,
    /// Type mismatches found at delivery.
    pub(crate) type_mismatches: AtomicU64,
    pub(crate) panics: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) stopped: AtomicU64,
    /// Timers pending.
    pub(crate) timers: AtomicU64,
    /// Type mismatches refused at the sender (an untyped address that knew
    /// the target's type), counted on the target's worker.
    pub(crate) refused: AtomicU64,
}

/// A worker's running counters.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) actors: StdCell<u64>,
    pub(crate) handled: StdCell<u64>,
    pub(crate) local_sends: StdCell<u64>,
    pub(crate) cross_sends: StdCell<u64>,
    pub(crate) inbox_sends: StdCell<u64>,
    pub(crate) transfers_in: StdCell<u64>,
    pub(crate) restarts: StdCell<u64>,
    /// Timestamp-counter ticks spent in the actor part of passes
    /// (sampled: see `PASS_SAMPLE`).
    pub(crate) pass_ticks: StdCell<u64>,
    /// Passes that had actor work.
    pub(crate) busy_passes: StdCell<u64>,
    /// Counters changed since they were last published.
    pub(crate) unpublished: StdCell<bool>,
    /// Entries in the mailboxes of this worker's actors.
    pub(crate) depth: StdCell<u64>,
    pub(crate) type_mismatches: StdCell<u64>,
    pub(crate) panics: StdCell<u64>,
    pub(crate) dropped: StdCell<u64>,
    pub(crate) stopped: StdCell<u64>,
}

/// The runtime's actor machinery: the kernel's worker plugin.
pub(crate) struct ActorSystem {
    /// Each worker's published counters.
    pub(crate) stats: Box<[Published]>,
    /// Sends from threads that drive no worker.
    pub(crate) external_sends: AtomicU64,
    /// The runtime extension, once set.
    pub(crate) extension: RuntimeMutex<Option<Arc<dyn RuntimeExtension>>>,
    pub(crate) has_extension: AtomicBool,
    /// Where sends to remote addresses go, once set.
    pub(crate) remote: RuntimeMutex<Option<Arc<dyn RemoteSink>>>,
    /// When the runtime's actor system started (platform clock).
    pub(crate) started: u64,
    /// Each worker's home for envelope blocks: where the blocks its cache
    /// made come back to when another worker has delivered them. They
    /// live as long as the runtime, so a delivery on any worker can reach
    /// them.
    pub(crate) homes: Arc<[Home]>,
}

impl ActorSystem {
    /// The runtime's actor system, installed on first use.
    pub(crate) fn of(shared: &Shared) -> &ActorSystem {
        if let Some(system) = Self::get(shared) {
            return system;
        }
        let workers = shared.workers.len();
        let started = shared.platform.now();
        let system = shared.install_plugin(|| ActorSystem {
            external_sends: AtomicU64::new(0),
            extension: RuntimeMutex::leaf(None),
            has_extension: AtomicBool::new(false),
            remote: RuntimeMutex::leaf(None),
            started,
            stats: (0..workers).map(|_| Published::default()).collect(),
            homes: (0..workers).map(|_| Home::new()).collect(),
        });
        match system {
            Some(system) => system,
            // The actor system is the only plugin the core installs.
            None => unreachable!("a runtime's worker plugin is its actor system"),
        }
    }

    /// The actor system, if one was installed.
    pub(crate) fn get(shared: &Shared) -> Option<&ActorSystem> {
        shared.plugin_as::<ActorSystem>()
    }

    /// The runtime extension, if set.
    pub(crate) fn extension(&self) -> Option<Arc<dyn RuntimeExtension>> {
        if !self.has_extension.load(Ordering::Acquire) {
            return None;
        }
        self.extension.lock().clone()
    }
}

/// One worker's actor state; only its driver touches it.
pub(crate) struct Local {
    pub(crate) worker: usize,
    pub(crate) runtime: Runtime,
    /// Actors with entries to handle, each at most once (its cell's
    /// `queued` flag).
    pub(crate) runnable: RefCell<VecDeque<Pid>>,
    /// Actors that used their whole message budget in the current pass's
    /// run step and still have entries: runnable again from the next pass
    /// (so a hot actor runs once a pass, while the step goes on with the
    /// actors that sends made runnable). Empty outside the run step.
    pub(crate) later: RefCell<VecDeque<Pid>>,
    /// Same-worker sends that could not go straight into their target's
    /// mailbox (a process's, an actor's to itself, one to an actor not
    /// installed yet), delivered at the end of the pass.
    pub(crate) pending_local: RefCell<Vec<Envelope>>,
    /// Actors spawned on this worker by its own handlers and processes.
    pub(crate) local_spawns: RefCell<VecDeque<Envelope>>,
    /// Envelopes for actors spawned but not installed yet, per target in
    /// arrival order; the target's install releases them.
    pub(crate) held: RefCell<BTreeMap<Pid, VecDeque<Envelope>>>,
    /// Actors that ended while a stop request had them queued: the kernel
    /// asks for them through `woken`.
    pub(crate) ending: RefCell<Vec<(Pid, ExitReason)>>,
    pub(crate) counters: Counters,
    /// The timers this worker's actors set.
    pub(crate) timers: RefCell<ActorTimers>,
    /// The earliest timer deadline last given to the kernel.
    pub(crate) timer_deadline: StdCell<Option<smarm_platform::Nanos>>,
    /// This worker's extension, made on its first pass after the runtime
    /// extension is set.
    pub(crate) extension: RefCell<Option<Box<dyn WorkerExtension>>>,
    /// Envelope blocks for the messages this worker sends: a local send
    /// allocates nothing in steady state, and a block delivered on
    /// another worker comes back here through this worker's home.
    pub(crate) cache: BlockCache,
}

impl Local {
    /// The state of `worker`, whose envelope blocks come back to its home
    /// in `homes` (the actor system's, one per worker).
    pub(crate) fn new(worker: usize, runtime: Runtime, homes: Arc<[Home]>) -> Local {
        Local {
            cache: BlockCache::new(homes, worker),
            worker,
            runtime,
            runnable: RefCell::new(VecDeque::new()),
            later: RefCell::new(VecDeque::new()),
            pending_local: RefCell::new(Vec::new()),
            local_spawns: RefCell::new(VecDeque::new()),
            held: RefCell::new(BTreeMap::new()),
            ending: RefCell::new(Vec::new()),
            counters: Counters::default(),
            timers: RefCell::new(ActorTimers::default()),
            timer_deadline: StdCell::new(None),
            extension: RefCell::new(None),
        }
    }

    /// This worker's actor state, as the kernel keeps it for the driver.
    #[inline]
    pub(crate) fn of<'a>(driver: &Driver<'a>) -> Option<&'a Local> {
        driver.state::<Local>()
    }

    /// The calling thread's worker state if it drives `shared`'s worker
    /// `worker`, passed to `f`.
    pub(crate) fn with_current<R>(shared: &Shared, worker: usize, f: impl FnOnce(&Local) -> R) -> Option<R> {
        worker::with_core(|core| {
            if !core.is(shared, worker) {
                return None;
            }
            let local = core.plugin_state::<Local>()?;
            Some(f(local))
        })
        .flatten()
    }

    /// The calling thread's worker state for `shared`, whatever worker.
    pub(crate) fn with_any<R>(shared: &Shared, f: impl FnOnce(&Local) -> R) -> Option<R> {
        worker::with_core(|core| {
            if !core.is(shared, core.id) {
                return None;
            }
            let local = core.plugin_state::<Local>()?;
            Some(f(local))
        })
        .flatten()
    }

    /// The calling thread's worker state for `shared`, whatever worker,
    /// passed to `f` with that worker's driver if no process runs (a
    /// handler, or other code of the worker's pass).
    #[inline]
    pub(crate) fn with_any_here<R>(
        shared: &Shared,
        f: impl FnOnce(&Local, Option<&Driver<'_>>) -> R,
    ) -> Option<R> {
        Driver::with_state_in(shared, Here::get(), |local: &Local, driver| f(local, driver))
    }

    /// Puts `pid` on the runnable list unless its cell's `queued` flag
    /// says it is there.
    pub(crate) fn mark_runnable(&self, pid: Pid, queued: &mut bool) {
        if !*queued {
            *queued = true;
            self.runnable.borrow_mut().push_back(pid);
        }
    }

    /// Cancels every timer of `pid`, which has ended: their messages are
    /// dropped here, outside the borrow of the table (a message's
    /// destructor may send).
    pub(crate) fn cancel_timers(&self, pid: Pid) {
        if self.timers.borrow().is_empty() {
            return;
        }
        let gone = self.timers.borrow_mut().cancel_all(pid);
        drop(gone);
    }

    /// Holds `envelope` until its target, reserved but not installed yet,
    /// is installed.
    pub(crate) fn hold(&self, envelope: Envelope) {
        self.held.borrow_mut().entry(envelope.dest()).or_default().push_back(envelope);
    }
}

/// What a handler's context reaches: its worker's state, the runtime, and
/// the driver (through which only the pass reaches cells).
pub(crate) struct Env<'a> {
    pub(crate) local: &'a Local,
    pub(crate) shared: &'a Shared,
    pub(crate) driver: &'a Driver<'a>,
}

impl<'a> Env<'a> {
    pub(crate) fn new(local: &'a Local, driver: &'a Driver<'a>) -> Env<'a> {
        Env { local, shared: driver.shared(), driver }
    }
}

pub(crate) fn bump(counter: &StdCell<u64>, by: u64) {
    counter.set(counter.get() + by);
}

pub(crate) fn shrink(counter: &StdCell<u64>, by: u64) {
    counter.set(counter.get().saturating_sub(by));
}

/// Counts a send from a thread that drives no worker.
pub(crate) fn count_external(shared: &Shared) {
    if let Some(system) = ActorSystem::get(shared) {
        system.external_sends.fetch_add(1, Ordering::Relaxed);
    }
}

impl Runtime {
    /// Statistics of worker `worker`'s actors (see [`ActorStats`] for when
    /// they are published).
    pub fn actor_stats(&self, worker: usize) -> Result<ActorStats, NoSuchWorker> {
        let restarts = self.restarts(worker)?;
        let Some(system) = ActorSystem::get(&self.shared) else {
            return Ok(ActorStats { restarts, ..ActorStats::default() });
        };
        let Some(s) = system.stats.get(worker) else { return Err(NoSuchWorker(worker)) };
        let load = |c: &crate::kernel::atomic::AtomicU64| c.load(Ordering::Relaxed);
        let type_mismatches = load(&s.type_mismatches) + load(&s.refused);
        // The deprecated field is filled too, with the same count.
        #[allow(deprecated)]
        Ok(ActorStats {
            actors: load(&s.actors),
            mailbox_depth: load(&s.mailbox_depth),
            handled: load(&s.handled),
            local_sends: load(&s.local_sends),
            cross_sends: load(&s.cross_sends),
            inbox_sends: load(&s.inbox_sends),
            restarts,
            pass_time: core::time::Duration::from_nanos(self.shared.ticks_to_nanos(load(&s.pass_ticks))),
            transfers_in: load(&s.transfers_in),
            type_mismatches,
            mismatches: type_mismatches,
            panics: load(&s.panics),
            dropped: load(&s.dropped),
            stopped: load(&s.stopped),
            timers: load(&s.timers),
        })
    }
}

/// One worker's actor counters, published every 16th pass with actor work
/// and at the first pass without: exact once the worker is idle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ActorStats {
    /// Actors installed and not ended.
    pub actors: u64,
    /// Entries waiting in the mailboxes of its runnable actors.
    pub mailbox_depth: u64,
    /// Mailbox entries handled (messages and signals).
    pub handled: u64,
    /// Sends from this worker to its own actors (straight into the
    /// mailbox, or staged in `pending_local`).
    pub local_sends: u64,
    /// Sends from this worker (a handler or a process) into another
    /// worker's transfer queue.
    pub cross_sends: u64,
    /// Sends from this worker into inboxes.
    pub inbox_sends: u64,
    /// Envelopes taken from its transfer queue (from other workers and
    /// from outside).
    pub transfers_in: u64,
    /// Type mismatches: messages refused for their type, at the sender (an
    /// untyped address that knew the type) or at delivery.
    pub type_mismatches: u64,
    /// The old name of [`type_mismatches`](Self::type_mismatches), filled
    /// with the same count. A field cannot have an alias, so this one stays
    /// until it is removed; read `type_mismatches` instead.
    #[deprecated(note = "renamed to type_mismatches")]
    pub mismatches: u64,
    /// Actors poisoned by a panicking handler.
    pub panics: u64,
    /// Messages dropped: left in the mailbox of an ended actor, or sent to
    /// one that ended before delivery.
    pub dropped: u64,
    /// Actors that ended other than by panicking.
    pub stopped: u64,
    /// Timers its actors set that have not fired for the last time nor
    /// been cancelled (an actor's go when it ends).
    pub timers: u64,
    /// Supervisor restarts made on this worker.
    pub restarts: u64,
    /// Time spent in the actor part of this worker's passes (estimated
    /// from every 16th pass with actor work).
    pub pass_time: core::time::Duration,
}
