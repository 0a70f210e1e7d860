//! The machinery behind handler actors: the runtime-wide [`ActorSystem`]
//! (the kernel's worker plugin, holding each worker's ingress queues and
//! published statistics) and each worker's [`Local`] state (runnable list,
//! `pending_local`, staged spawns, held envelopes), with the pass that
//! advances them.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::cell::{Cell as StdCell, RefCell};

use crate::actor::cell::{ErasedCell, Item, Signal};
use crate::actor::envelope::{Envelope, Payload};
use crate::actor::inbox::ErasedInbox;
use crate::actor::services::{
    ActorInfo, ActorStatus, ProcessInfo, RemoteSink, RuntimeExtension, SpawnInfo, WorkerCtx, WorkerExtension,
};
use crate::kernel::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::plugin::WorkerPlugin;
use crate::kernel::preempt::NoPreempt;
use crate::kernel::ring::mpsc::Mpsc;
use crate::kernel::runtime::{Runtime, Shared};
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::worker;
use alloc::collections::BTreeMap;
use smarm_arch::{Arch, Native};

/// One busy pass in this many is timed (and counts for this many).
const PASS_SAMPLE: u64 = 16;

/// One worker's ingress: transfer (messages and signals from other workers
/// and from outside), spawn and admin queues, and its published statistics.
pub(crate) struct Ingress {
    pub(crate) transfer: Mpsc,
    pub(crate) spawn: Mpsc,
    pub(crate) admin: Mpsc,
    pub(crate) stats: Published,
}

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
    pub(crate) mismatches: AtomicU64,
    pub(crate) panics: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) stopped: AtomicU64,
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
    pub(crate) mismatches: StdCell<u64>,
    pub(crate) panics: StdCell<u64>,
    pub(crate) dropped: StdCell<u64>,
    pub(crate) stopped: StdCell<u64>,
}

fn bump(counter: &StdCell<u64>, by: u64) {
    counter.set(counter.get() + by);
}

fn shrink(counter: &StdCell<u64>, by: u64) {
    counter.set(counter.get().saturating_sub(by));
}

/// The runtime's actor machinery: the kernel's worker plugin.
pub(crate) struct ActorSystem {
    pub(crate) ingress: Box<[Ingress]>,
    /// Inboxes by id, for sends through untyped addresses.
    pub(crate) inboxes: RuntimeMutex<BTreeMap<u64, Arc<dyn ErasedInbox>>>,
    pub(crate) next_inbox: AtomicU64,
    /// Sends from threads that drive no worker.
    pub(crate) external_sends: AtomicU64,
    /// The runtime extension, once set.
    pub(crate) extension: RuntimeMutex<Option<Arc<dyn RuntimeExtension>>>,
    pub(crate) has_extension: AtomicBool,
    /// Where sends to remote addresses go, once set.
    pub(crate) remote: RuntimeMutex<Option<Arc<dyn RemoteSink>>>,
    /// When the runtime's actor system started (platform clock).
    pub(crate) started: u64,
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
            inboxes: RuntimeMutex::leaf(BTreeMap::new()),
            next_inbox: AtomicU64::new(1),
            external_sends: AtomicU64::new(0),
            extension: RuntimeMutex::leaf(None),
            has_extension: AtomicBool::new(false),
            remote: RuntimeMutex::leaf(None),
            started,
            ingress: (0..workers)
                .map(|_| Ingress {
                    transfer: Mpsc::new(),
                    spawn: Mpsc::new(),
                    admin: Mpsc::new(),
                    stats: Published::default(),
                })
                .collect(),
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
}

impl Drop for ActorSystem {
    fn drop(&mut self) {
        for ingress in self.ingress.iter() {
            for queue in [&ingress.transfer, &ingress.spawn, &ingress.admin] {
                // SAFETY: dropping: no other consumer or producer is left.
                while let Some(envelope) = unsafe { Envelope::pop_from(queue) } {
                    drop(envelope);
                }
            }
        }
    }
}

/// One worker's actor state; only its driver touches it.
pub(crate) struct Local {
    pub(crate) worker: usize,
    pub(crate) runtime: Runtime,
    /// Actors with entries to handle, each at most once (its cell's
    /// `queued` flag).
    runnable: RefCell<VecDeque<Pid>>,
    /// Same-worker sends of this pass, delivered at its end.
    pub(crate) pending_local: RefCell<Vec<Envelope>>,
    /// Actors spawned on this worker by its own handlers and processes.
    pub(crate) local_spawns: RefCell<VecDeque<Envelope>>,
    /// Envelopes for actors spawned but not installed yet, per target in
    /// arrival order; the target's install releases them.
    held: RefCell<BTreeMap<Pid, VecDeque<Envelope>>>,
    /// Actors that ended while a stop request had them queued: the kernel
    /// asks for them through `woken`.
    ending: RefCell<Vec<(Pid, ExitReason)>>,
    pub(crate) counters: Counters,
    /// This worker's extension, made on its first pass after the runtime
    /// extension is set.
    pub(crate) extension: RefCell<Option<Box<dyn WorkerExtension>>>,
}

impl Local {
    /// The calling thread's worker state if it drives `shared`'s worker
    /// `worker`, passed to `f`.
    pub(crate) fn with_current<R>(shared: &Shared, worker: usize, f: impl FnOnce(&Local) -> R) -> Option<R> {
        worker::with_core(|core| {
            if !core.is(shared, worker) {
                return None;
            }
            let local = core.plugin_state()?.downcast_ref::<Local>()?;
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
            let local = core.plugin_state()?.downcast_ref::<Local>()?;
            Some(f(local))
        })
        .flatten()
    }

    fn mark_runnable(&self, pid: Pid, cell: &mut dyn ErasedCell) {
        let queued = cell.queued();
        if !*queued {
            *queued = true;
            self.runnable.borrow_mut().push_back(pid);
        }
    }
}

/// What a handler's context reaches: its worker's state and the runtime.
pub(crate) struct Env<'a> {
    pub(crate) local: &'a Local,
    pub(crate) shared: &'a Shared,
}

/// Where a pid's cell stands on its worker.
enum Lookup<'a> {
    Installed(&'a mut dyn ErasedCell),
    /// Spawned, not installed yet: the slot's empty cell.
    Pending(*mut Option<Box<dyn Any + Send>>),
    /// No live actor of this worker.
    Dead,
}

/// Finds `pid`'s cell.
///
/// # Safety
///
/// On the driver of `local`'s worker, outside any process and any handler
/// of `pid`, with no other reference to `pid`'s cell live while the
/// result is.
unsafe fn lookup<'a>(shared: &'a Shared, local: &Local, pid: Pid) -> Lookup<'a> {
    if shared.stackless_worker(pid) != Some(local.worker) {
        return Lookup::Dead;
    }
    let Some(cell) = shared.stackless_cell(pid.index()) else { return Lookup::Dead };
    // SAFETY: the slot holds a live stackless body of this worker and we
    // are its driver, outside its handlers (the contract).
    match unsafe { &mut *cell } {
        Some(boxed) => match boxed.downcast_mut::<Box<dyn ErasedCell>>() {
            Some(cell) => Lookup::Installed(&mut **cell),
            None => Lookup::Dead,
        },
        None => Lookup::Pending(cell),
    }
}

/// Takes `pid`'s cell out of its slot.
///
/// # Safety
///
/// As [`lookup`].
unsafe fn take_cell(shared: &Shared, local: &Local, pid: Pid) -> Option<Box<dyn ErasedCell>> {
    if shared.stackless_worker(pid) != Some(local.worker) {
        return None;
    }
    let cell = shared.stackless_cell(pid.index())?;
    // SAFETY: as in `lookup`.
    let boxed = unsafe { (*cell).take() }?;
    boxed.downcast::<Box<dyn ErasedCell>>().ok().map(|cell| *cell)
}

/// A message for an actor whose message type is `M`.
pub(crate) struct Msg<M>(pub(crate) M);

impl<M: Send + 'static> Payload for Msg<M> {
    fn deliver(self, dest: Pid, local: &Local, shared: &Shared) -> Result<(), Self> {
        // SAFETY: deliveries run on the worker's driver in the pass,
        // outside every handler.
        match unsafe { lookup(shared, local, dest) } {
            Lookup::Installed(cell) => {
                match cell.mailbox().downcast_mut::<VecDeque<Item<M>>>() {
                    Some(mailbox) => {
                        mailbox.push_back(Item::Msg(self.0));
                        bump(&local.counters.depth, 1);
                        local.mark_runnable(dest, cell);
                    }
                    None => bump(&local.counters.mismatches, 1),
                }
                Ok(())
            }
            Lookup::Pending(_) => Err(self),
            Lookup::Dead => {
                bump(&local.counters.dropped, 1);
                Ok(())
            }
        }
    }
}

/// A signal for an actor.
pub(crate) struct Sig(pub(crate) Signal);

impl Payload for Sig {
    fn deliver(self, dest: Pid, local: &Local, shared: &Shared) -> Result<(), Self> {
        // SAFETY: as for `Msg`.
        match unsafe { lookup(shared, local, dest) } {
            Lookup::Installed(cell) => {
                cell.push_signal(self.0);
                bump(&local.counters.depth, 1);
                local.mark_runnable(dest, cell);
                Ok(())
            }
            Lookup::Pending(_) => Err(self),
            Lookup::Dead => Ok(()),
        }
    }
}

/// A spawned actor's cell, to install in its reserved slot.
pub(crate) struct Install(pub(crate) Box<dyn ErasedCell>);

impl Payload for Install {
    fn deliver(self, dest: Pid, local: &Local, shared: &Shared) -> Result<(), Self> {
        // SAFETY: as for `Msg`.
        if let Lookup::Pending(slot) = unsafe { lookup(shared, local, dest) } {
            let boxed: Box<dyn Any + Send> = Box::new(self.0);
            // SAFETY: the reserved slot's empty cell, ours (see lookup).
            unsafe { *slot = Some(boxed) };
            bump(&local.counters.actors, 1);
            // Runnable at once: `on_start` runs in the next run step.
            // SAFETY: as above.
            if let Lookup::Installed(cell) = unsafe { lookup(shared, local, dest) } {
                let info = SpawnInfo {
                    pid: dest,
                    worker: local.worker,
                    type_name: cell.type_name(),
                    parent: cell.parent(),
                };
                local.mark_runnable(dest, cell);
                crate::kernel::trace::emit(|| crate::kernel::trace::TraceEvent::Spawn {
                    pid: dest,
                    worker: local.worker,
                    parent: info.parent,
                });
                if let Some(extension) = ActorSystem::get(shared).and_then(ActorSystem::extension) {
                    extension.on_spawn(&info);
                }
            }
        }
        // A stop that got there first ended the reservation: the cell is
        // dropped here, its actor never started.
        Ok(())
    }
}

/// A command run on the worker's driver, in the admin step of its pass.
pub(crate) struct AdminCmd {
    command: Box<dyn FnOnce(&Env<'_>) + Send>,
    /// Whether the command is about its envelope's target: such a command
    /// is held, like mail, while that actor is reserved but not installed
    /// (a spawn on the caller's own worker installs at the end of the
    /// pass), so it is never run against an actor that does not exist yet.
    targeted: bool,
}

impl Payload for AdminCmd {
    fn deliver(self, dest: Pid, local: &Local, shared: &Shared) -> Result<(), Self> {
        if self.targeted {
            // SAFETY: deliveries run on the worker's driver in the pass,
            // outside every handler.
            if let Lookup::Pending(_) = unsafe { lookup(shared, local, dest) } {
                return Err(self);
            }
        }
        (self.command)(&Env { local, shared });
        Ok(())
    }
}

/// What the worker knows of actor `pid`, for an admin command.
pub(crate) fn info(env: &Env<'_>, pid: Pid) -> Option<ActorInfo> {
    let worker = env.local.worker;
    // SAFETY: admin commands run in the pass's ingress step, on the
    // worker's driver, outside every handler.
    match unsafe { lookup(env.shared, env.local, pid) } {
        Lookup::Installed(cell) => Some(describe(worker, pid, cell)),
        Lookup::Pending(_) => Some(ActorInfo {
            pid,
            worker,
            type_name: "",
            parent: None,
            mailbox_depth: 0,
            status: ActorStatus::Starting,
            handled: 0,
            last_message: "",
        }),
        Lookup::Dead => None,
    }
}

fn describe(worker: usize, pid: Pid, cell: &mut dyn ErasedCell) -> ActorInfo {
    let status = if *cell.suspended() {
        ActorStatus::Suspended
    } else if cell.len() > 0 {
        ActorStatus::Runnable
    } else {
        ActorStatus::Idle
    };
    ActorInfo {
        pid,
        worker,
        type_name: cell.type_name(),
        parent: cell.parent(),
        mailbox_depth: cell.len(),
        status,
        handled: cell.handled(),
        last_message: cell.last_message(),
    }
}

/// Every actor of this worker (the admin step of its pass).
pub(crate) fn list(env: &Env<'_>) -> Vec<ActorInfo> {
    let shared = env.shared;
    let mut out = Vec::new();
    for index in 0..shared.slot_count() {
        let Some(pid) = shared.stackless_pid(index) else { continue };
        if shared.stackless_worker(pid) != Some(env.local.worker) {
            continue;
        }
        if let Some(info) = info(env, pid) {
            out.push(info);
        }
    }
    out
}

/// Every live process of this worker (the admin step of its pass).
pub(crate) fn processes(env: &Env<'_>, runtime: &Runtime) -> Vec<ProcessInfo> {
    let shared = env.shared;
    let mut out = Vec::new();
    for index in 0..shared.slot_count() {
        // SAFETY: admin commands run on this worker's driver, outside any
        // process.
        let Some(view) = (unsafe { shared.process_view(index, env.local.worker) }) else { continue };
        let (links, trapping) = runtime.links_of(view.pid);
        out.push(ProcessInfo {
            pid: view.pid,
            name: runtime.name_of(view.pid),
            worker: env.local.worker,
            state: view.state,
            links,
            monitors: view.death_hooks,
            trapping,
            stack_high_water: view.stack_used,
        });
    }
    out
}

/// Ends actor `pid` now (admin stop), ahead of its mail.
pub(crate) fn stop_now(env: &Env<'_>, pid: Pid, reason: ExitReason) {
    // SAFETY: the admin step, outside every handler.
    let Lookup::Installed(cell) = (unsafe { lookup(env.shared, env.local, pid) }) else { return };
    let mut stopped = None;
    let panic = (env.shared.hooks.catch_panic)(&mut || {
        cell.stop(env, &reason);
        stopped = Some(());
    });
    let system = ActorSystem::of(env.shared);
    match panic {
        Some(message) => {
            bump(&env.local.counters.panics, 1);
            system.end(env, pid, ExitReason::Panicked(message), false);
        }
        None => system.end(env, pid, reason, true),
    }
}

/// Suspends or resumes actor `pid`; whether it was found.
pub(crate) fn set_suspended(env: &Env<'_>, pid: Pid, on: bool) -> bool {
    // SAFETY: the admin step, outside every handler.
    let Lookup::Installed(cell) = (unsafe { lookup(env.shared, env.local, pid) }) else { return false };
    *cell.suspended() = on;
    if !on && cell.len() > 0 {
        env.local.mark_runnable(pid, cell);
    }
    true
}

/// Runs `f` on actor `pid`'s value (admin `with_state`), under the panic
/// guard: a panicking `f` poisons the actor like a panicking handler.
pub(crate) fn with_actor<R>(
    env: &Env<'_>,
    pid: Pid,
    f: &mut dyn FnMut(&mut dyn Any) -> Option<R>,
) -> Option<R> {
    // SAFETY: the admin step, outside every handler.
    let Lookup::Installed(cell) = (unsafe { lookup(env.shared, env.local, pid) }) else { return None };
    let mut result = None;
    let panic = (env.shared.hooks.catch_panic)(&mut || result = f(cell.actor_any()));
    if let Some(message) = panic {
        bump(&env.local.counters.panics, 1);
        ActorSystem::of(env.shared).end(env, pid, ExitReason::Panicked(message), false);
        return None;
    }
    result
}

/// Why a deposit failed: the target is not a live actor (the envelope
/// and its payload are dropped).
pub(crate) struct NoActor;

/// Routes `envelope` to its target's worker: `pending_local` when the
/// caller drives that worker, else the worker's transfer queue (and a
/// wake for its driver).
pub(crate) fn deposit(shared: &Shared, envelope: Envelope) -> Result<(), NoActor> {
    let Some(worker) = shared.stackless_worker(envelope.dest()) else { return Err(NoActor) };
    deposit_on(shared, worker, envelope);
    Ok(())
}

/// Routes `envelope` to `worker`, the worker of its (live) target, with
/// one look at the calling thread's current worker.
pub(crate) fn deposit_on(shared: &Shared, worker: usize, envelope: Envelope) {
    // Preemption off: a push into a RefCell the driver also uses, or a
    // producer cut half-way through the queue, must not be switched out.
    let _np = NoPreempt::new();
    let mut envelope = Some(envelope);
    let on_a_worker = Local::with_any(shared, |local| {
        if local.worker == worker {
            if let Some(envelope) = envelope.take() {
                local.pending_local.borrow_mut().push(envelope);
            }
            bump(&local.counters.local_sends, 1);
        } else {
            bump(&local.counters.cross_sends, 1);
        }
    });
    if let Some(envelope) = envelope {
        if on_a_worker.is_none() {
            count_external(shared);
        }
        envelope.push_onto(&ActorSystem::of(shared).ingress[worker].transfer);
        shared.notify(worker);
    }
}

/// Counts a send from a thread that drives no worker.
pub(crate) fn count_external(shared: &Shared) {
    if let Some(system) = ActorSystem::get(shared) {
        system.external_sends.fetch_add(1, Ordering::Relaxed);
    }
}

/// Queues the install of a reserved actor on `worker`: staged locally when
/// the caller drives that worker, else through its spawn queue.
pub(crate) fn route_install(shared: &Shared, worker: usize, envelope: Envelope) {
    let system = ActorSystem::of(shared);
    let _np = NoPreempt::new();
    let mut envelope = Some(envelope);
    Local::with_current(shared, worker, |local| {
        if let Some(envelope) = envelope.take() {
            local.local_spawns.borrow_mut().push_back(envelope);
        }
    });
    if let Some(envelope) = envelope {
        envelope.push_onto(&system.ingress[worker].spawn);
        shared.notify(worker);
    }
}

/// Queues `command` on `worker`'s admin queue. With a `target`, the
/// command waits for that actor's install if it is not installed yet, in
/// order with the target's mail.
pub(crate) fn route_admin(
    shared: &Shared,
    worker: usize,
    target: Option<Pid>,
    command: Box<dyn FnOnce(&Env<'_>) + Send>,
) {
    let system = ActorSystem::of(shared);
    let _np = NoPreempt::new();
    let dest = target.unwrap_or(Pid::from_parts(0, 0));
    Envelope::new(dest, AdminCmd { command, targeted: target.is_some() })
        .push_onto(&system.ingress[worker].admin);
    shared.notify(worker);
}

/// Delivers what was sent on this worker to its own actors and staged in
/// `pending_local`. Returns whether there was any.
fn deliver_pending_local(local: &Local, shared: &Shared) -> bool {
    let mut pending = core::mem::take(&mut *local.pending_local.borrow_mut());
    if pending.is_empty() {
        return false;
    }
    for envelope in pending.drain(..) {
        deliver_or_hold(envelope, local, shared);
    }
    // Keep the buffer's capacity for the next pass (unless a delivery
    // staged more meanwhile).
    let mut staged = local.pending_local.borrow_mut();
    if staged.is_empty() {
        core::mem::swap(&mut *staged, &mut pending);
    }
    true
}

/// Drains up to `budget` envelopes of `queue` into their targets. Returns
/// how many it took.
fn drain(queue: &Mpsc, budget: usize, local: &Local, shared: &Shared) -> usize {
    let mut n = 0;
    while n < budget {
        // SAFETY: the worker's driver is its queues' one consumer, and
        // only envelopes are pushed.
        let Some(envelope) = (unsafe { Envelope::pop_from(queue) }) else { break };
        n += 1;
        deliver_or_hold(envelope, local, shared);
    }
    n
}

/// Delivers `envelope`, or holds it while its target is reserved but not
/// installed yet. A delivery that installs an actor releases the mail held
/// for it, in arrival order, before anything else can reach it: each
/// envelope is looked at once, whatever the number of pending targets.
fn deliver_or_hold(envelope: Envelope, local: &Local, shared: &Shared) {
    let dest = envelope.dest();
    match envelope.deliver(local, shared) {
        Err(envelope) => local.held.borrow_mut().entry(dest).or_default().push_back(envelope),
        Ok(()) => {
            let waiting = {
                let mut held = local.held.borrow_mut();
                if held.is_empty() {
                    return;
                }
                held.remove(&dest)
            };
            for envelope in waiting.into_iter().flatten() {
                // Installed now, so each one is delivered (or dropped and
                // counted if the actor is already gone).
                deliver_or_hold(envelope, local, shared);
            }
        }
    }
}

impl ActorSystem {
    /// Runs one actor up to the message budget; ends it if it stopped or
    /// panicked.
    fn run_one(&self, env: &Env<'_>, pid: Pid) {
        let budget = match env.shared.config.actor_message_budget {
            0 => usize::MAX,
            n => n,
        };
        // SAFETY: the pass, on the worker's driver, outside every handler.
        let Lookup::Installed(cell) = (unsafe { lookup(env.shared, env.local, pid) }) else { return };
        *cell.queued() = false;
        if *cell.suspended() {
            // Its mail waits; `resume` makes it runnable again.
            return;
        }
        let mut ran = None;
        let before = cell.len();
        let panic = (env.shared.hooks.catch_panic)(&mut || ran = Some(cell.run(env, budget)));
        let local = env.local;
        // Entries taken, the one a panic interrupted included.
        let taken = before.saturating_sub(cell.len()) as u64;
        bump(&local.counters.handled, taken);
        shrink(&local.counters.depth, taken);
        match (panic, ran) {
            (Some(message), _) => {
                bump(&local.counters.panics, 1);
                self.end(env, pid, ExitReason::Panicked(message), false);
            }
            (None, Some(ran)) => match ran.end {
                Some(reason) => self.end(env, pid, reason, true),
                None if cell.len() > 0 => local.mark_runnable(pid, cell),
                None => {}
            },
            (None, None) => {}
        }
    }

    /// Ends actor `pid`: its cell leaves the slot, what is left in its
    /// mailbox is dropped and counted, and the kernel finalizes its pid.
    pub(crate) fn end(&self, env: &Env<'_>, pid: Pid, reason: ExitReason, graceful: bool) {
        let local = env.local;
        if let Some(extension) = self.extension() {
            extension.on_actor_death(pid, &reason);
        }
        // SAFETY: the pass, on the worker's driver, outside every handler.
        if let Some(mut cell) = unsafe { take_cell(env.shared, local, pid) } {
            let dropped = cell.clear();
            bump(&local.counters.dropped, dropped as u64);
            shrink(&local.counters.depth, dropped as u64);
            // The actor's own destructor may panic: it dies alone.
            let mut cell = Some(cell);
            let _ = (env.shared.hooks.catch_panic)(&mut || drop(cell.take()));
        }
        local.counters.actors.set(local.counters.actors.get().saturating_sub(1));
        if graceful {
            bump(&local.counters.stopped, 1);
        }
        if !env.shared.end_stackless(pid, reason.clone()) {
            local.ending.borrow_mut().push((pid, reason));
        }
    }

    /// The runtime extension, if set.
    pub(crate) fn extension(&self) -> Option<Arc<dyn RuntimeExtension>> {
        if !self.has_extension.load(Ordering::Acquire) {
            return None;
        }
        self.extension.lock().clone()
    }

    /// Pass step 2: the worker's extension.
    fn extension_step(&self, local: &Local) -> bool {
        if !self.has_extension.load(Ordering::Acquire) {
            return false;
        }
        if local.extension.borrow().is_none() {
            let made = self.extension().and_then(|e| e.create_worker_extension(local.worker));
            let Some(made) = made else { return false };
            *local.extension.borrow_mut() = Some(made);
        }
        // Taken out while it runs: its `on_tick` may send, which touches
        // this worker's state.
        let Some(mut extension) = local.extension.borrow_mut().take() else { return false };
        let mut ctx = WorkerCtx::new(local.worker, &local.runtime);
        let did = extension.on_tick(&mut ctx);
        let pending = extension.has_pending_work();
        *local.extension.borrow_mut() = Some(extension);
        did || pending
    }

    fn publish(&self, local: &Local) {
        let s = &self.ingress[local.worker].stats;
        let c = &local.counters;
        c.unpublished.set(false);
        let depth = c.depth.get();
        s.actors.store(c.actors.get(), Ordering::Relaxed);
        s.mailbox_depth.store(depth, Ordering::Relaxed);
        s.handled.store(c.handled.get(), Ordering::Relaxed);
        s.local_sends.store(c.local_sends.get(), Ordering::Relaxed);
        s.cross_sends.store(c.cross_sends.get(), Ordering::Relaxed);
        s.inbox_sends.store(c.inbox_sends.get(), Ordering::Relaxed);
        s.restarts.store(c.restarts.get(), Ordering::Relaxed);
        s.pass_ticks.store(c.pass_ticks.get(), Ordering::Relaxed);
        s.transfers_in.store(c.transfers_in.get(), Ordering::Relaxed);
        s.mismatches.store(c.mismatches.get(), Ordering::Relaxed);
        s.panics.store(c.panics.get(), Ordering::Relaxed);
        s.dropped.store(c.dropped.get(), Ordering::Relaxed);
        s.stopped.store(c.stopped.get(), Ordering::Relaxed);
    }
}

impl WorkerPlugin for ActorSystem {
    fn worker_state(&self, shared: &Arc<Shared>, worker: usize) -> Box<dyn Any> {
        let runtime = Runtime { shared: shared.clone() };
        Box::new(Local {
            worker,
            runtime,
            runnable: RefCell::new(VecDeque::new()),
            pending_local: RefCell::new(Vec::new()),
            local_spawns: RefCell::new(VecDeque::new()),
            held: RefCell::new(BTreeMap::new()),
            ending: RefCell::new(Vec::new()),
            counters: Counters::default(),
            extension: RefCell::new(None),
        })
    }

    fn pass(&self, shared: &Shared, worker: usize, state: &dyn Any, budget: usize) -> bool {
        let Some(local) = state.downcast_ref::<Local>() else { return false };
        let ingress = &self.ingress[worker];
        // SAFETY: the worker's driver is its queues' one consumer.
        let queues_empty =
            unsafe { ingress.spawn.is_empty() && ingress.admin.is_empty() && ingress.transfer.is_empty() };
        if queues_empty
            && local.runnable.borrow().is_empty()
            && local.local_spawns.borrow().is_empty()
            && local.pending_local.borrow().is_empty()
            && !self.has_extension.load(Ordering::Relaxed)
        {
            // Nothing to do: no clock read; statistics go out if the last
            // busy passes left some unpublished.
            if local.counters.unpublished.get() {
                self.publish(local);
            }
            return false;
        }
        let env = Env { local, shared };
        let mut did = false;
        // Pass time is sampled: every 16th busy pass is timed and counts
        // for 16 (reading the counter costs tens of nanoseconds on some
        // virtual machines, a large share of a short pass).
        let passes = local.counters.busy_passes.get();
        local.counters.busy_passes.set(passes.wrapping_add(1));
        let began = (passes % PASS_SAMPLE == 0).then(<Native as Arch>::timestamp);

        // 1. Ingress: spawns (each releasing the mail held for it), admin,
        //    then transfers — each drain bounded by the ingress budget.
        did |= drain(&ingress.spawn, budget, local, shared) > 0;
        did |= drain(&ingress.admin, budget, local, shared) > 0;
        // What this worker's processes sent to its actors since the last
        // pass goes in before the mail from other workers: a process that
        // sends to a local actor and then to a remote one, whose handler
        // writes back to the first, must see its message arrive first
        // (happened-before holds along such chains).
        did |= deliver_pending_local(local, shared);
        let transfers = drain(&ingress.transfer, budget, local, shared);
        bump(&local.counters.transfers_in, transfers as u64);
        did |= transfers > 0;

        // 2. The worker's extension.
        did |= self.extension_step(local);

        // 3. Each runnable actor, up to the message budget. Those made
        //    runnable from here on wait for the next pass.
        let runnable = local.runnable.borrow().len();
        for _ in 0..runnable {
            let next = local.runnable.borrow_mut().pop_front();
            let Some(pid) = next else { break };
            self.run_one(&env, pid);
            did = true;
        }

        // 4. Children spawned by this pass's handlers exist before the
        //    messages staged for them are delivered.
        let mut n = 0;
        while n < budget {
            let next = local.local_spawns.borrow_mut().pop_front();
            let Some(envelope) = next else { break };
            // An install is never held; it releases its target's mail.
            deliver_or_hold(envelope, local, shared);
            n += 1;
            did = true;
        }

        // 5. Same-worker sends, eligible from the next pass.
        did |= deliver_pending_local(local, shared);

        // 6. Statistics: every 16th busy pass, and on the first idle one.
        if let Some(began) = began {
            let spent = <Native as Arch>::timestamp().wrapping_sub(began);
            bump(&local.counters.pass_ticks, spent.saturating_mul(PASS_SAMPLE));
        }
        if passes % PASS_SAMPLE == 0 {
            self.publish(local);
        } else {
            local.counters.unpublished.set(true);
        }
        did || !local.runnable.borrow().is_empty()
            || !local.local_spawns.borrow().is_empty()
            || !local.pending_local.borrow().is_empty()
    }

    fn woken(&self, shared: &Shared, state: &dyn Any, pid: Pid) -> Option<ExitReason> {
        let local = state.downcast_ref::<Local>()?;
        // An end decided here changes the counters outside the busy part
        // of a pass: the plugin's share of this same pass, idle or not,
        // publishes them.
        local.counters.unpublished.set(true);
        {
            let mut ending = local.ending.borrow_mut();
            if let Some(i) = ending.iter().position(|(p, _)| *p == pid) {
                return Some(ending.swap_remove(i).1);
            }
        }
        // A stop request.
        let reason = shared.stop_requested(pid).unwrap_or(ExitReason::Stopped);
        if let Some(extension) = self.extension() {
            extension.on_actor_death(pid, &reason);
        }
        let env = Env { local, shared };
        // SAFETY: on the worker's driver, outside every handler (the
        // kernel calls `woken` from its run step).
        if let Some(mut cell) = unsafe { take_cell(shared, local, pid) } {
            let dropped = cell.clear();
            bump(&local.counters.dropped, dropped as u64);
            shrink(&local.counters.depth, dropped as u64);
            local.counters.actors.set(local.counters.actors.get().saturating_sub(1));
            bump(&local.counters.stopped, 1);
            let mut cell = Some(cell);
            let panic = (shared.hooks.catch_panic)(&mut || {
                if let Some(mut cell) = cell.take() {
                    cell.stop(&env, &reason);
                }
            });
            if let Some(message) = panic {
                bump(&local.counters.panics, 1);
                return Some(ExitReason::Panicked(message));
            }
        }
        Some(reason)
    }
}
