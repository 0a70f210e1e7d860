//! Handler actors: a struct with a `handle` method per message and no
//! stack of its own, pinned to a worker and driven by that worker's pass
//! next to its processes.
//!
//! A process costs a stack; a handler actor costs its value and a mailbox,
//! so a million of them is cheap. Both kinds are one system: an actor has
//! a [`Pid`] like a process, so monitors, links, exit signals, the
//! registry and supervisors see no difference.
//!
//! ```no_run
//! use smarm_core::actor::{Actor, Ctx};
//!
//! /// Counts what it is sent and reports the total to whoever asks.
//! struct Counter { total: u64 }
//!
//! enum Msg { Add(u64), Report(smarm_core::Sender<u64>) }
//!
//! impl Actor for Counter {
//!     type Msg = Msg;
//!     fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, msg: Msg) {
//!         match msg {
//!             Msg::Add(n) => self.total += n,
//!             // A handler never parks: `try_send` (a reply channel is
//!             // unbounded, so it only fails if the asker has gone).
//!             Msg::Report(reply) => { let _ = reply.try_send(self.total); }
//!         }
//!     }
//! }
//!
//! # fn demo(runtime: &smarm_core::Runtime) {
//! let counter = runtime.spawn_actor(Counter { total: 0 }).unwrap();
//! counter.send(Msg::Add(2)).unwrap();
//! # }
//! ```
//!
//! # Delivery
//!
//! A send from the target's own worker (a handler or a process there) is
//! staged in the worker's `pending_local` list and reaches the mailbox at
//! the end of the current pass — never run recursively, eligible on the
//! next pass. A send from anywhere else (another worker, the runtime
//! handle, a thread outside the runtime) moves one envelope into the
//! target worker's transfer queue and wakes its driver. The message is
//! moved, never cloned. Per (sender, target) pair, messages arrive in the
//! order they were sent; across senders the order is unspecified, except
//! that causality is kept: a process that sends `a` to an actor on its
//! own worker and then sends `b` anywhere else, after which a handler
//! reached through `b` writes `c` to the first actor, has `a` handled
//! before `c` (what processes sent is delivered before the mail from other
//! workers). "Configure by message, then start" works. A
//! successful send means the runtime accepted the message: a stop, a panic
//! or a type mismatch may still keep it from being handled (each counted
//! in the worker's statistics).
//!
//! # The pass
//!
//! Each pass of a worker, after its processes: drain the spawn and admin
//! queues, deliver what the processes staged in `pending_local`, drain
//! the transfer queue (each drain at most `worker_ingress_budget`
//! entries); run
//! each runnable actor for up to `actor_message_budget` entries; install
//! the actors its handlers spawned; deliver `pending_local`; publish
//! statistics. A worker with nothing to do parks like one without actors.
//!
//! # Lifecycle
//!
//! [`Actor::on_start`] runs once, before the first message;
//! [`Ctx::stop_self`] ends the actor after the current message (what is
//! left in the mailbox is dropped and counted) and runs
//! [`Actor::on_stop`]; [`Addr::stop`] queues a stop behind the messages
//! already sent; a stop request ([`Runtime::request_stop`], a linked
//! death, an exit signal) ends it at its worker's next pass, also with
//! `on_stop`. A panicking handler *poisons* its actor: the actor is
//! dropped without `on_stop`, its mailbox is cleared and counted, its
//! monitors and links are told `Panicked` with the message, and the worker
//! and every other actor go on. (On a host without unwinding a panic does
//! not come back to the worker; see the host's documentation.)
//!
//! An actor counts in [`Runtime::live`] until it ends, as a process does:
//! a host that runs until nothing is live waits for actors too — stop them
//! ([`Addr::stop`], [`Runtime::stop_all`]) when the program is done.
//!
//! # Handlers never park
//!
//! A handler runs on its worker's own stack, between processes: it must
//! not block. Send to processes over unbounded channels (their `send`
//! never blocks), or with `try_send` / `send_timeout` on bounded ones: a
//! full channel is then a typed error with the message handed back
//! (`TrySendError::Full`, `SendTimeoutError::NotInProcess`). Plain `send`
//! on a full bounded channel, like every blocking call outside a process,
//! does not park: it spins the worker's thread, which stalls every process
//! and actor of that worker — never use it in a handler. `recv`, `sleep`
//! and `lock` return their `NotInProcess` errors. Talk to other actors by
//! message.

pub(crate) mod cell;
pub(crate) mod envelope;
pub mod inbox;
pub mod services;
pub(crate) mod system;

pub use inbox::{Ask, Disconnected, Inbox, InboxAddr, InboxRecv, RecvError, ReplyTo, TryRecvError};
pub use services::{
    ActorInfo, ActorStatus, AlreadySet, ExternalSender, ProcessInfo, RemoteEnvelope, RemoteSink,
    RuntimeExtension, SpawnInfo, SystemInfo, WorkerCtx, WorkerExtension, WorkerStats,
};

use alloc::boxed::Box;
use core::any::TypeId;
use core::fmt;
use core::marker::PhantomData;

use crate::actor::cell::{Cell, Signal};
use crate::actor::envelope::Envelope;
use crate::actor::system::{deposit, route_install, ActorSystem, Env, Install, Msg, Sig};
use crate::kernel::atomic::Ordering;
use crate::kernel::error::{NoProc, SpawnError};
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::process;
use crate::kernel::runtime::{Runtime, Shared};
use crate::kernel::slab::DeathHookId;
use crate::otp::link::{ExitSignal, Trap};
use crate::otp::monitor::{Down, MonitorId};
use crate::otp::supervisor::Child;

/// A handler actor: state plus one `handle` call per message.
///
/// Every method but `handle` has a no-op default. All run on the actor's
/// worker, one at a time: an actor's state is never touched by two
/// threads at once.
pub trait Actor: Send + Sized + 'static {
    /// What the actor is sent.
    type Msg: Send + 'static;

    /// Handles one message.
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, msg: Self::Msg);

    /// Runs once, before the first message.
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        let _ = ctx;
    }

    /// Runs once when the actor ends other than by panicking, with why.
    fn on_stop(&mut self, ctx: &mut Ctx<'_, Self>, reason: &ExitReason) {
        let _ = (ctx, reason);
    }

    /// A pid this actor monitors ([`Ctx::monitor`]) has died.
    fn handle_down(&mut self, ctx: &mut Ctx<'_, Self>, down: Down) {
        let _ = (ctx, down);
    }

    /// An exit signal reached this actor while it traps exits
    /// ([`Ctx::trap_exit`]): a linked pid died abnormally, or someone
    /// called `exit` on it. The default ignores it.
    fn handle_exit(&mut self, ctx: &mut Ctx<'_, Self>, signal: ExitSignal) {
        let _ = (ctx, signal);
    }
}

/// What a handler can do besides changing its state: its own address,
/// spawning, stopping, monitoring and linking.
pub struct Ctx<'a, A: Actor> {
    env: &'a Env<'a>,
    pid: Pid,
    pub(crate) stop: Option<ExitReason>,
    _actor: PhantomData<fn(A)>,
}

impl<A: Actor> fmt::Debug for Ctx<'_, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ctx").field("pid", &self.pid).field("worker", &self.env.local.worker).finish()
    }
}

impl<'a, A: Actor> Ctx<'a, A> {
    pub(crate) fn new(env: &'a Env<'a>, pid: Pid) -> Ctx<'a, A> {
        Ctx { env, pid, stop: None, _actor: PhantomData }
    }

    /// This actor's pid.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// This actor's address.
    pub fn addr(&self) -> Addr<A> {
        Addr::new(self.pid, self.env.local.runtime.clone())
    }

    /// The worker this actor lives on.
    pub fn worker(&self) -> usize {
        self.env.local.worker
    }

    /// The runtime this actor lives in.
    pub fn runtime(&self) -> &Runtime {
        &self.env.local.runtime
    }

    /// Spawns `actor` on this actor's worker. It is installed at the end of
    /// this pass, before this pass's same-worker messages are delivered, so
    /// messages sent to it right away are not lost.
    pub fn spawn<B: Actor>(&mut self, actor: B) -> Result<Addr<B>, SpawnError> {
        spawn_in(&self.env.local.runtime, self.env.local.worker, actor, Some(self.pid))
    }

    /// Spawns `actor` on worker `worker`.
    pub fn spawn_on<B: Actor>(&mut self, worker: usize, actor: B) -> Result<Addr<B>, SpawnError> {
        spawn_in(&self.env.local.runtime, worker, actor, Some(self.pid))
    }

    /// Ends this actor once the current message is handled (`Normal`):
    /// what is left in its mailbox is dropped and counted, then
    /// [`Actor::on_stop`] runs.
    pub fn stop_self(&mut self) {
        self.stop_with(ExitReason::Normal);
    }

    /// As [`stop_self`](Self::stop_self), with the reason monitors and
    /// links see.
    pub fn stop_with(&mut self, reason: ExitReason) {
        if self.stop.is_none() {
            self.stop = Some(reason);
        }
    }

    /// Monitors `target` (a process or an actor): [`Actor::handle_down`]
    /// gets one [`Down`] when it dies — at once, with `NoProc`, if it
    /// already has.
    pub fn monitor(&mut self, target: Pid) -> ActorMonitor {
        monitor_from(self.env.shared, self.pid, target)
    }

    /// Removes a monitor; `true` if it had not fired (it never will).
    pub fn demonitor(&mut self, monitor: ActorMonitor) -> bool {
        match monitor.hook {
            Some(hook) => self.env.shared.remove_death_hook(monitor.target, hook),
            None => false,
        }
    }

    /// Links this actor with `peer`: if either dies abnormally the other
    /// ends too (or, trapping exits, is told).
    pub fn link(&mut self, peer: Pid) -> Result<(), NoProc> {
        self.env.local.runtime.link(self.pid, peer)
    }

    /// Removes the link with `peer`, if any.
    pub fn unlink(&mut self, peer: Pid) {
        self.env.local.runtime.unlink(self.pid, peer);
    }

    /// Traps exits (`true`): a linked death or an exit signal reaches
    /// [`Actor::handle_exit`] in the mailbox instead of ending the actor
    /// (`Killed` still ends it). `false` stops trapping.
    pub fn trap_exit(&mut self, trap: bool) {
        let trap = trap.then(|| exit_trap(self.env.local.runtime.clone(), self.pid));
        let _ = self.env.local.runtime.set_trap(self.pid, trap);
    }

    /// Where the runtime stands: this worker, the worker count, the actors
    /// across the workers, the uptime.
    pub fn system_info(&self) -> SystemInfo {
        services::system_info(self.env)
    }

    /// Registers this actor under `name` (see the registry).
    pub fn register(&mut self, name: &str) -> Result<(), crate::otp::registry::RegisterError> {
        self.env.local.runtime.register(name, self.pid)
    }
}

/// An actor's monitor of a pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActorMonitor {
    /// Names the [`Down`] it delivers.
    pub id: MonitorId,
    /// The monitored pid.
    pub target: Pid,
    hook: Option<DeathHookId>,
}

fn monitor_from(shared: &Shared, watcher: Pid, target: Pid) -> ActorMonitor {
    let id = MonitorId(shared.next_hook_id());
    let hook = Box::new(move |shared: &Shared, dead: Pid, reason: &ExitReason| {
        let down = Down { id, pid: dead, reason: reason.clone() };
        let _ = deposit(shared, Envelope::new(watcher, Sig(Signal::Down(down))));
    });
    match shared.on_death(target, hook) {
        Ok(hook) => ActorMonitor { id, target, hook: Some(hook) },
        Err(_) => {
            let down = Down { id, pid: target, reason: ExitReason::NoProc };
            let _ = deposit(shared, Envelope::new(watcher, Sig(Signal::Down(down))));
            ActorMonitor { id, target, hook: None }
        }
    }
}

fn exit_trap(runtime: Runtime, pid: Pid) -> Trap {
    Trap::Hook(alloc::sync::Arc::new(move |signal: ExitSignal| {
        let _ = deposit(&runtime.shared, Envelope::new(pid, Sig(Signal::Exit(signal))));
    }))
}

/// A typed address of an actor of type `A`: its `send` takes only
/// `A::Msg`. Cloneable, `Send` and `Sync`; usable from handlers, processes
/// and plain threads.
pub struct Addr<A: Actor> {
    pid: Pid,
    runtime: Runtime,
    _actor: PhantomData<fn(A::Msg)>,
}

impl<A: Actor> Clone for Addr<A> {
    fn clone(&self) -> Self {
        Addr::new(self.pid, self.runtime.clone())
    }
}

impl<A: Actor> fmt::Debug for Addr<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Addr<{}>({})", core::any::type_name::<A>(), self.pid)
    }
}

impl<A: Actor> PartialEq for Addr<A> {
    fn eq(&self, other: &Self) -> bool {
        self.pid == other.pid && alloc::sync::Arc::ptr_eq(&self.runtime.shared, &other.runtime.shared)
    }
}
impl<A: Actor> Eq for Addr<A> {}

impl<A: Actor> Addr<A> {
    fn new(pid: Pid, runtime: Runtime) -> Addr<A> {
        Addr { pid, runtime, _actor: PhantomData }
    }

    /// The actor's pid.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The runtime the actor lives in.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Sends `msg`. `Err` hands it back if the actor has ended.
    pub fn send(&self, msg: A::Msg) -> Result<(), ActorSendError<A::Msg>> {
        send_to(&self.runtime.shared, self.pid, msg)
    }

    /// Queues a stop behind the messages already sent from here: the
    /// actor handles them, then ends `Stopped` (its `on_stop` runs).
    pub fn stop(&self) -> Result<(), NoProc> {
        let envelope = Envelope::new(self.pid, Sig(Signal::Stop(ExitReason::Stopped)));
        deposit(&self.runtime.shared, envelope).map_err(|_| NoProc(self.pid))
    }

    /// Whether the actor is alive.
    pub fn is_alive(&self) -> bool {
        self.runtime.shared.is_stackless(self.pid)
    }

    /// The untyped address, for routing and administration.
    pub fn address(&self) -> ActorAddress {
        ActorAddress::new(
            Target::Local(self.pid),
            &self.runtime,
            Some((TypeId::of::<A::Msg>(), core::any::type_name::<A::Msg>())),
        )
    }
}

impl<A: Actor> From<Addr<A>> for Child {
    /// A supervised actor: stopped gracefully with [`Addr::stop`].
    fn from(addr: Addr<A>) -> Child {
        let pid = addr.pid;
        Child::with_stop(pid, move || {
            let _ = addr.stop();
        })
    }
}

/// What an untyped address names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Target {
    /// An actor of this runtime.
    Local(Pid),
    /// An inbox of this runtime.
    Inbox(u64),
    /// Something on another node, reached through the remote sink.
    Remote { node: u64, id: u64 },
}

/// An untyped address, for routing and administration: an actor or an
/// inbox of this runtime, or a remote address a transport handles — and
/// the message type it takes, when known. A send of another type is
/// refused with [`ActorSendError::WrongType`] and counted, never a panic.
#[derive(Clone)]
pub struct ActorAddress {
    target: Target,
    runtime: Runtime,
    accepts: Option<(TypeId, &'static str)>,
}

impl fmt::Debug for ActorAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let accepts = self.accepts.map_or("?", |(_, name)| name);
        match self.target {
            Target::Local(pid) => write!(f, "ActorAddress({pid}, accepts {accepts})"),
            Target::Inbox(id) => write!(f, "ActorAddress(inbox #{id}, accepts {accepts})"),
            Target::Remote { node, id } => write!(f, "ActorAddress(node {node} #{id}, accepts {accepts})"),
        }
    }
}

impl PartialEq for ActorAddress {
    fn eq(&self, other: &Self) -> bool {
        self.target == other.target && alloc::sync::Arc::ptr_eq(&self.runtime.shared, &other.runtime.shared)
    }
}
impl Eq for ActorAddress {}

impl ActorAddress {
    pub(crate) fn new(
        target: Target,
        runtime: &Runtime,
        accepts: Option<(TypeId, &'static str)>,
    ) -> ActorAddress {
        ActorAddress { target, runtime: runtime.clone(), accepts }
    }

    /// The address of the actor `pid` in `runtime`, its message type
    /// unknown: a send of the wrong type is then refused on delivery
    /// (counted in the worker's `mismatches`) rather than at the call.
    pub fn from_pid(runtime: &Runtime, pid: Pid) -> ActorAddress {
        ActorAddress::new(Target::Local(pid), runtime, None)
    }

    /// A remote address: `id` on node `node`, as a transport numbers them.
    /// Sends go to the runtime's [`RemoteSink`]; with none installed they
    /// are `ActorSendError::NoRoute`.
    pub fn remote(runtime: &Runtime, node: u64, id: u64) -> ActorAddress {
        ActorAddress::new(Target::Remote { node, id }, runtime, None)
    }

    /// The actor's pid, if the address names an actor of this runtime.
    pub fn pid(&self) -> Option<Pid> {
        match self.target {
            Target::Local(pid) => Some(pid),
            _ => None,
        }
    }

    /// The name of the message type the target takes, when known.
    pub fn accepts(&self) -> Option<&'static str> {
        self.accepts.map(|(_, name)| name)
    }

    /// Sends `msg` if the target takes an `M`: an actor through its
    /// worker, an inbox through the runtime's inbox registry, a remote
    /// address through the remote sink.
    pub fn send<M: Send + 'static>(&self, msg: M) -> Result<(), ActorSendError<M>> {
        let shared = &self.runtime.shared;
        if let Some((accepted, _)) = self.accepts {
            if accepted != TypeId::of::<M>() {
                let worker = match self.target {
                    Target::Local(pid) => shared.stackless_worker(pid),
                    _ => None,
                };
                if let (Some(worker), Some(system)) = (worker, ActorSystem::get(shared)) {
                    system.ingress[worker].stats.refused.fetch_add(1, Ordering::Relaxed);
                }
                return Err(ActorSendError::WrongType(msg));
            }
        }
        match self.target {
            Target::Local(pid) => send_to(shared, pid, msg),
            Target::Inbox(id) => {
                let inbox = ActorSystem::of(shared).inboxes.lock().get(&id).cloned();
                let Some(inbox) = inbox else { return Err(ActorSendError::NoActor(msg)) };
                inbox::count_inbox_send(shared);
                inbox.push_any(Box::new(msg)).map_err(|payload| match payload.downcast::<M>() {
                    Ok(m) => ActorSendError::NoActor(*m),
                    // `push_any` gives back what it was given.
                    Err(_) => unreachable!("an inbox gave back another payload"),
                })
            }
            Target::Remote { node, id } => {
                let sink = ActorSystem::of(shared).remote.lock().clone();
                let Some(sink) = sink else { return Err(ActorSendError::NoRoute(msg)) };
                let envelope = RemoteEnvelope {
                    node,
                    id,
                    payload: Box::new(msg),
                    type_name: core::any::type_name::<M>(),
                };
                sink.deliver(envelope).map_err(|envelope| match envelope.payload.downcast::<M>() {
                    Ok(m) => ActorSendError::NoRoute(*m),
                    Err(_) => unreachable!("a remote sink gave back another payload"),
                })
            }
        }
    }

    /// Queues a stop behind the messages already sent from here (actors
    /// only).
    pub fn stop(&self) -> Result<(), NoProc> {
        let Target::Local(pid) = self.target else { return Err(NoProc(Pid::from_parts(0, 0))) };
        let envelope = Envelope::new(pid, Sig(Signal::Stop(ExitReason::Stopped)));
        deposit(&self.runtime.shared, envelope).map_err(|_| NoProc(pid))
    }
}

/// Why a send to an actor failed; the message is handed back.
#[derive(PartialEq, Eq)]
pub enum ActorSendError<M> {
    /// No live actor at the address (it ended, or the pid is a process's).
    NoActor(M),
    /// The target takes another message type.
    WrongType(M),
    /// A remote address, and no remote sink installed (or the sink
    /// refused the message).
    NoRoute(M),
}

impl<M> ActorSendError<M> {
    /// The message that was not sent.
    pub fn into_inner(self) -> M {
        match self {
            ActorSendError::NoActor(m) | ActorSendError::WrongType(m) | ActorSendError::NoRoute(m) => m,
        }
    }
}

impl<M> fmt::Debug for ActorSendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActorSendError::NoActor(_) => f.write_str("NoActor(..)"),
            ActorSendError::WrongType(_) => f.write_str("WrongType(..)"),
            ActorSendError::NoRoute(_) => f.write_str("NoRoute(..)"),
        }
    }
}

impl<M> fmt::Display for ActorSendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActorSendError::NoActor(_) => {
                f.write_str("nothing live at this address: the actor or inbox has ended")
            }
            ActorSendError::WrongType(_) => f.write_str("the target takes another message type"),
            ActorSendError::NoRoute(_) => {
                f.write_str("no route to the remote address: install a RemoteSink (a transport)")
            }
        }
    }
}

impl<M> core::error::Error for ActorSendError<M> {}

fn send_to<M: Send + 'static>(shared: &Shared, pid: Pid, msg: M) -> Result<(), ActorSendError<M>> {
    // The target is looked up before anything is allocated: a send to a
    // dead actor hands the message straight back.
    let Some(worker) = shared.stackless_worker(pid) else { return Err(ActorSendError::NoActor(msg)) };
    system::deposit_on(shared, worker, Envelope::new(pid, Msg(msg)));
    Ok(())
}

fn spawn_in<A: Actor>(
    runtime: &Runtime,
    worker: usize,
    actor: A,
    parent: Option<Pid>,
) -> Result<Addr<A>, SpawnError> {
    let shared = &runtime.shared;
    let pid = shared.reserve_stackless(worker)?;
    route_install(shared, worker, Envelope::new(pid, Install(Cell::boxed(pid, actor, parent))));
    Ok(Addr::new(pid, runtime.clone()))
}

impl Runtime {
    /// Spawns `actor` on the next worker, round-robin.
    pub fn spawn_actor<A: Actor>(&self, actor: A) -> Result<Addr<A>, SpawnError> {
        spawn_in(self, self.shared.next_worker(), actor, process::self_pid())
    }

    /// Spawns `actor` on worker `worker`.
    pub fn spawn_actor_on<A: Actor>(&self, worker: usize, actor: A) -> Result<Addr<A>, SpawnError> {
        spawn_in(self, worker, actor, process::self_pid())
    }

    /// Per-worker actor statistics of worker `worker` (see [`ActorStats`]
    /// for when they are published).
    pub fn actor_stats(&self, worker: usize) -> ActorStats {
        let Some(system) = ActorSystem::get(&self.shared) else {
            return ActorStats { restarts: self.restarts(worker), ..ActorStats::default() };
        };
        let Some(ingress) = system.ingress.get(worker) else { return ActorStats::default() };
        let s = &ingress.stats;
        let load = |c: &crate::kernel::atomic::AtomicU64| c.load(Ordering::Relaxed);
        ActorStats {
            actors: load(&s.actors),
            mailbox_depth: load(&s.mailbox_depth),
            handled: load(&s.handled),
            local_sends: load(&s.local_sends),
            cross_sends: load(&s.cross_sends),
            inbox_sends: load(&s.inbox_sends),
            restarts: self.restarts(worker),
            pass_time: core::time::Duration::from_nanos(self.shared.ticks_to_nanos(load(&s.pass_ticks))),
            transfers_in: load(&s.transfers_in),
            mismatches: load(&s.mismatches) + load(&s.refused),
            panics: load(&s.panics),
            dropped: load(&s.dropped),
            stopped: load(&s.stopped),
        }
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
    /// Sends staged in `pending_local` (from this worker to itself).
    pub local_sends: u64,
    /// Sends from this worker (a handler or a process) into another
    /// worker's transfer queue.
    pub cross_sends: u64,
    /// Sends from this worker into inboxes.
    pub inbox_sends: u64,
    /// Envelopes taken from its transfer queue (from other workers and
    /// from outside).
    pub transfers_in: u64,
    /// Messages refused for their type: at the sender (an untyped address
    /// that knew the type) or at delivery.
    pub mismatches: u64,
    /// Actors poisoned by a panicking handler.
    pub panics: u64,
    /// Messages dropped: left in the mailbox of an ended actor, or sent to
    /// one that ended before delivery.
    pub dropped: u64,
    /// Actors that ended other than by panicking.
    pub stopped: u64,
    /// Supervisor restarts made on this worker.
    pub restarts: u64,
    /// Time spent in the actor part of this worker's passes (estimated
    /// from every 16th pass with actor work).
    pub pass_time: core::time::Duration,
}

/// Spawns `actor` from a process, on the process's worker.
/// `Err(SpawnError::NotInProcess)` outside a process.
pub fn spawn_actor<A: Actor>(actor: A) -> Result<Addr<A>, SpawnError> {
    let runtime = process::current_runtime().ok_or(SpawnError::NotInProcess)?;
    let worker = process::current_worker().ok_or(SpawnError::NotInProcess)?;
    spawn_in(&runtime, worker, actor, process::self_pid())
}
