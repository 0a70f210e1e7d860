//! Addresses and spawning: [`Addr`] (typed), [`ActorAddress`] (untyped:
//! an actor, an inbox or a remote address), how a handler's context
//! spawns, monitors, traps exits and sets timers, and [`spawn_actor`].

use alloc::boxed::Box;
use core::any::TypeId;
use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;

use crate::actor::cell::{Cell, Signal};
use crate::actor::error::{ActorLookupError, ActorSendError};
use crate::actor::extension::RemoteEnvelope;
use crate::actor::handler::{Actor, Ctx};
use crate::actor::inbox::{ask_with, count_inbox_send, Ask, Inbox, Inboxes, ReplyTo};
use crate::actor::route::{deposit, deposit_msg, route_install, Sig};
use crate::actor::system::{ActorSystem, Envelope};
use crate::actor::timer::{deadline_after, Fire, TimerError, TimerRef};
use crate::kernel::atomic::Ordering;
use crate::kernel::current::Here;
use crate::kernel::error::{NoProc, SpawnError};
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::process;
use crate::kernel::runtime::{Runtime, Shared};
use crate::kernel::slab::DeathHookId;
use crate::kernel::time::Instant;
use crate::otp::link::{ExitSignal, Trap};
use crate::otp::monitor::{Down, MonitorId};
use crate::otp::registry::RegisterError;
use crate::otp::supervisor::Child;

impl<'a, A: Actor> Ctx<'a, A> {
    /// This actor's address.
    pub fn addr(&self) -> Addr<A> {
        Addr::new(self.pid, self.env.local.runtime.clone())
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

    /// Traps exits (`true`): a linked death or an exit signal reaches
    /// [`Actor::handle_exit`] in the mailbox instead of ending the actor
    /// (`Killed` still ends it). `false` stops trapping.
    pub fn trap_exit(&mut self, trap: bool) {
        let trap = trap.then(|| exit_trap(self.env.local.runtime.clone(), self.pid));
        let _ = self.env.local.runtime.set_trap(self.pid, trap);
    }
}

/// A one-shot timer's payload: moved to its target when it fires.
struct Once<M> {
    to: Pid,
    msg: Option<M>,
}

impl<M: Send + 'static> Fire for Once<M> {
    fn fire(&mut self, shared: &Shared) -> bool {
        match self.msg.take() {
            Some(msg) => send_to(shared, self.to, msg).is_ok(),
            None => false,
        }
    }
}

/// An interval's payload: a clone of it is sent at each firing; the
/// original goes when the interval is cancelled.
struct Every<M> {
    to: Pid,
    msg: M,
}

impl<M: Clone + Send + 'static> Fire for Every<M> {
    fn fire(&mut self, shared: &Shared) -> bool {
        send_to(shared, self.to, self.msg.clone()).is_ok()
    }
}

/// Timers: a message to this actor, or to any actor, later or every
/// period, kept on this actor's worker.
///
/// A timer belongs to the actor that sets it, whatever its target: that
/// actor cancels it ([`cancel_timer`](Ctx::cancel_timer); from outside its
/// handlers, [`Runtime::cancel_timer`]), and it is cancelled when that
/// actor ends — stopped, panicked or killed, a
/// restarted actor included (its successor is another actor). A cancelled
/// timer's message is dropped, once, on the worker; a fired one is sent
/// like any send from this worker, so it is handled after what this
/// handler sent the same target before setting it, and a message to an
/// actor that has ended is dropped (and counted in the worker's
/// `dropped`).
///
/// Deadlines are on the runtime's clock ([`now`](Ctx::now)). A timer fires
/// at the first pass of its worker at or after its deadline, never
/// before; timers due at the same pass fire by deadline, then in the order
/// they were set. A delay past the clock's range (about 584 years) is
/// clamped to its end: such a timer never fires, and goes with its actor.
///
/// ```no_run
/// # use smarm_core as smarm;
/// use core::time::Duration;
/// use smarm::actor::{Actor, Ctx, TimerRef};
///
/// /// Ends itself after a second without a message.
/// struct Idle { timeout: Option<TimerRef> }
///
/// enum Msg { Work(u32), Timeout }
///
/// impl Actor for Idle {
///     type Msg = Msg;
///     fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
///         self.timeout = Some(ctx.send_after(Duration::from_secs(1), Msg::Timeout));
///     }
///     fn handle(&mut self, ctx: &mut Ctx<'_, Self>, msg: Msg) {
///         match msg {
///             Msg::Work(_) => {
///                 // Every message pushes the deadline back.
///                 if let Some(old) = self.timeout.take() {
///                     ctx.cancel_timer(&old);
///                 }
///                 self.timeout = Some(ctx.send_after(Duration::from_secs(1), Msg::Timeout));
///             }
///             Msg::Timeout => ctx.stop_self(),
///         }
///     }
/// }
///
/// # fn demo(runtime: &smarm::Runtime) {
/// let idle = runtime.spawn_actor(Idle { timeout: None }).unwrap();
/// idle.send(Msg::Work(1)).unwrap();
/// # }
/// ```
impl<'a, A: Actor> Ctx<'a, A> {
    /// Now, on the runtime's clock (the one timers and `sleep` use).
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.env.shared.platform.now())
    }

    /// Sends `msg` to this actor after `delay` (zero: at this worker's
    /// next pass).
    pub fn send_after(&mut self, delay: Duration, msg: A::Msg) -> TimerRef {
        self.set_timer(delay, None, Box::new(Once { to: self.pid, msg: Some(msg) }))
    }

    /// Sends `msg` to `to` after `delay`.
    pub fn send_after_to<B: Actor>(&mut self, to: &Addr<B>, delay: Duration, msg: B::Msg) -> TimerRef {
        self.set_timer(delay, None, Box::new(Once { to: to.pid, msg: Some(msg) }))
    }

    /// Sends a clone of `msg` to this actor every `period`, the first one
    /// period from now, until cancelled or this actor ends. A tick late by
    /// more than a period (a busy worker) is not caught up: the next comes
    /// a period after it.
    ///
    /// # Errors
    ///
    /// [`TimerError::ZeroPeriod`], with `msg`, for a zero period.
    pub fn send_interval(&mut self, period: Duration, msg: A::Msg) -> Result<TimerRef, TimerError<A::Msg>>
    where
        A::Msg: Clone,
    {
        if period.is_zero() {
            return Err(TimerError::ZeroPeriod(msg));
        }
        Ok(self.set_timer(period, Some(period), Box::new(Every { to: self.pid, msg })))
    }

    /// [`send_interval`](Self::send_interval) to `to`.
    ///
    /// # Errors
    ///
    /// [`TimerError::ZeroPeriod`], with `msg`, for a zero period.
    pub fn send_interval_to<B: Actor>(
        &mut self,
        to: &Addr<B>,
        period: Duration,
        msg: B::Msg,
    ) -> Result<TimerRef, TimerError<B::Msg>>
    where
        B::Msg: Clone,
    {
        if period.is_zero() {
            return Err(TimerError::ZeroPeriod(msg));
        }
        Ok(self.set_timer(period, Some(period), Box::new(Every { to: to.pid, msg })))
    }

    /// Cancels `timer` if it is still pending: `true` if it was (its
    /// message is dropped now and never sent; an interval sends no more).
    /// `false` if it has fired (a one-shot timer's message may be in the
    /// mailbox, still to be handled), was cancelled already, or is another
    /// actor's.
    pub fn cancel_timer(&mut self, timer: &TimerRef) -> bool {
        if timer.owner() != self.pid {
            return false;
        }
        let removed = self.env.local.timers.borrow_mut().cancel(timer);
        let pending = removed.is_some();
        // Dropped outside the borrow of the table.
        drop(removed);
        pending
    }

    fn set_timer(&mut self, delay: Duration, period: Option<Duration>, fire: Box<dyn Fire>) -> TimerRef {
        let deadline = deadline_after(self.env.shared.platform.now(), delay);
        // A period is at least one nanosecond (a zero one was refused).
        let period = period.map(|p| u64::try_from(p.as_nanos()).unwrap_or(u64::MAX).max(1));
        self.env.local.timers.borrow_mut().insert(self.pid, deadline, period, fire)
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
    ///
    /// From a process this spends one unit of its cooperative budget (see
    /// [`kernel::coop`](crate::kernel::coop)), so it may yield first; from a
    /// handler it never yields.
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

    /// Sends `make(reply_to)` and returns the pending reply (see
    /// [`Runtime::ask`]).
    pub fn ask<R: Send + 'static>(&self, make: impl FnOnce(ReplyTo<R>) -> A::Msg) -> Ask<R> {
        ask_with(&self.runtime, self.pid, |reply| self.send(make(reply)).is_ok())
    }

    /// Registers the actor under `name` in its runtime's registry, so that
    /// [`Addr::whereis`] finds it (see
    /// [`register`](crate::otp::registry::register)).
    pub fn register(&self, name: &str) -> Result<(), RegisterError> {
        self.runtime.register(name, self.pid)
    }

    /// The actor registered under `name` in the calling process's (or
    /// handler's) runtime, as a typed address. After a supervisor restarts
    /// a registered actor (its start function registering the new one),
    /// this finds the new one.
    ///
    /// ```no_run
    /// # use smarm_core as smarm;
    /// use smarm::actor::{Actor, ActorLookupError, Ctx, ReplyTo};
    /// use smarm::Addr;
    ///
    /// /// Replies with what it is sent, doubled.
    /// struct Doubler;
    /// impl Actor for Doubler {
    ///     type Msg = (u32, ReplyTo<u32>);
    ///     fn handle(&mut self, _: &mut Ctx<'_, Self>, (n, reply): (u32, ReplyTo<u32>)) {
    ///         let _ = reply.send(2 * n);
    ///     }
    /// }
    ///
    /// /// Another actor type.
    /// struct Quiet;
    /// impl Actor for Quiet {
    ///     type Msg = ();
    ///     fn handle(&mut self, _: &mut Ctx<'_, Self>, (): ()) {}
    /// }
    ///
    /// // In a process:
    /// # fn demo() {
    /// let doubler = smarm::spawn_actor(Doubler).unwrap();
    /// doubler.register("doubler").unwrap();
    ///
    /// let found = Addr::<Doubler>::whereis("doubler").unwrap();
    /// assert_eq!(found.ask(|reply| (21, reply)).wait().unwrap(), 42);
    /// // The name is held by a `Doubler`, not a `Quiet`.
    /// assert!(matches!(
    ///     Addr::<Quiet>::whereis("doubler"),
    ///     Err(ActorLookupError::WrongType { .. })
    /// ));
    /// doubler.stop().unwrap();
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ActorLookupError::NotRegistered`] if nothing live holds the name;
    /// [`ActorLookupError::NotAnActor`] if a process holds it;
    /// [`ActorLookupError::WrongType`] if an actor of another type holds
    /// it; [`ActorLookupError::NotInProcess`] outside a process and off
    /// any worker (use [`lookup`](Self::lookup) with a runtime handle).
    pub fn whereis(name: &str) -> Result<Addr<A>, ActorLookupError> {
        let runtime = process::current_runtime().ok_or(ActorLookupError::NotInProcess)?;
        Self::lookup(&runtime, name)
    }

    /// [`whereis`](Self::whereis) in `runtime`, from anywhere.
    pub fn lookup(runtime: &Runtime, name: &str) -> Result<Addr<A>, ActorLookupError> {
        let pid = runtime.whereis(name).ok_or(ActorLookupError::NotRegistered)?;
        let Some(body_type) = runtime.shared.stackless_type(pid) else {
            // A process; or an actor that ended since the registry looked.
            return Err(match runtime.is_alive(pid) {
                true => ActorLookupError::NotAnActor(pid),
                false => ActorLookupError::NotRegistered,
            });
        };
        if (body_type.id)() != TypeId::of::<A>() {
            return Err(ActorLookupError::WrongType {
                pid,
                expected: core::any::type_name::<A>(),
                found: (body_type.name)(),
            });
        }
        Ok(Addr::new(pid, runtime.clone()))
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
    /// (counted in the worker's `type_mismatches`) rather than at the call.
    pub fn from_pid(runtime: &Runtime, pid: Pid) -> ActorAddress {
        ActorAddress::new(Target::Local(pid), runtime, None)
    }

    /// A remote address: `id` on node `node`, as a transport numbers them.
    /// Sends go to the runtime's [`RemoteSink`](crate::actor::RemoteSink); with none installed they
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
                    system.stats[worker].refused.fetch_add(1, Ordering::Relaxed);
                }
                return Err(ActorSendError::WrongType(msg));
            }
        }
        match self.target {
            Target::Local(pid) => send_to(shared, pid, msg),
            Target::Inbox(id) => {
                let Some(inbox) = Inboxes::of(shared).get(id) else {
                    return Err(ActorSendError::NoActor(msg));
                };
                count_inbox_send(shared);
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

fn send_to<M: Send + 'static>(shared: &Shared, pid: Pid, msg: M) -> Result<(), ActorSendError<M>> {
    // One look at the worker for the budget and the delivery. A budgeted
    // operation in a process, like a channel send: a process that floods
    // an actor of its own worker lets it run every `coop_budget` sends.
    // Nothing in a handler (its worker's driver).
    let here = Here::get();
    crate::kernel::coop::spend_in(here);
    // The target is looked up before anything is allocated: a send to a
    // dead actor hands the message straight back.
    let Some(worker) = shared.stackless_worker(pid) else { return Err(ActorSendError::NoActor(msg)) };
    deposit_msg(shared, worker, pid, msg, here);
    Ok(())
}

fn spawn_in<A: Actor>(
    runtime: &Runtime,
    worker: usize,
    actor: A,
    parent: Option<Pid>,
) -> Result<Addr<A>, SpawnError> {
    let shared = &runtime.shared;
    let pid = shared.reserve_stackless(worker, Cell::<A>::TYPE)?;
    route_install(shared, worker, Envelope::new(pid, Cell::install(pid, actor, parent)));
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
}

/// Spawns `actor` from a process, on the process's worker.
/// `Err(SpawnError::NotInProcess)` outside a process.
pub fn spawn_actor<A: Actor>(actor: A) -> Result<Addr<A>, SpawnError> {
    let runtime = process::current_runtime().ok_or(SpawnError::NotInProcess)?;
    let worker = process::current_worker().ok_or(SpawnError::NotInProcess)?;
    spawn_in(&runtime, worker, actor, process::self_pid())
}

impl<M: Send + 'static> Inbox<M> {
    /// The untyped address, routed through the runtime's inbox registry.
    ///
    /// Untyped addresses are not counted as senders: once one has been
    /// made, this inbox never reports `Disconnected::NoSenders` (see
    /// [`recv`](Self::recv)).
    pub fn address(&self) -> ActorAddress {
        self.stop_counting();
        ActorAddress::new(
            Target::Inbox(self.id()),
            self.runtime(),
            Some((core::any::TypeId::of::<M>(), core::any::type_name::<M>())),
        )
    }
}
