//! The services around the actors: extensions, the remote-sink seam, the
//! external sender, administration, statistics, and one view of
//! everything running.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::time::Duration;

pub use crate::actor::extension::{
    AlreadySet, RemoteEnvelope, RemoteSink, RuntimeExtension, SpawnInfo, WorkerCtx, WorkerExtension,
};

use crate::actor::addr::{ActorAddress, Addr};
use crate::actor::cell::{with_erased, ErasedCell};
use crate::actor::error::ActorSendError;
use crate::actor::handler::{Actor, Ctx};
use crate::actor::inbox::{ask_detached, ask_with, new_inbox, Ask, Inbox, ReplyTo};
use crate::actor::route::{end, route_admin};
use crate::actor::system::{bump, ActorStats, ActorSystem, Env};
use crate::actor::timer::TimerRef;
use crate::kernel::atomic::Ordering;
use crate::kernel::current;
use crate::kernel::error::{NoProc, NoSuchWorker};
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::Runtime;
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::stackless::NoCell;
use crate::kernel::state::State;
use crate::kernel::worker::StatsSnapshot;

/// A `Send + Sync` handle for threads that are not workers to send to
/// actors and inboxes. Sends go through the target worker's transfer queue;
/// one thread's sends to one target arrive in order.
#[derive(Clone, Debug)]
pub struct ExternalSender {
    runtime: Runtime,
}

impl ExternalSender {
    /// Sends `msg` to `to`.
    pub fn send<A: Actor>(&self, to: &Addr<A>, msg: A::Msg) -> Result<(), ActorSendError<A::Msg>> {
        debug_assert!(alloc::sync::Arc::ptr_eq(&to.runtime().shared, &self.runtime.shared));
        to.send(msg)
    }

    /// Sends `msg` through an untyped address.
    pub fn send_to<M: Send + 'static>(&self, to: &ActorAddress, msg: M) -> Result<(), ActorSendError<M>> {
        to.send(msg)
    }

    /// Sends from outside the runtime so far (all external threads).
    pub fn external_sends(&self) -> u64 {
        ActorSystem::get(&self.runtime.shared).map_or(0, |s| s.external_sends.load(Ordering::Relaxed))
    }
}

/// Where the runtime stands, as seen from a handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SystemInfo {
    /// The caller's worker (as [`Ctx::worker`] says).
    pub worker: usize,
    /// Workers in the runtime (as [`Runtime::worker_count`] says).
    pub worker_count: usize,
    /// The old name of [`worker`](Self::worker), filled alike. A field
    /// cannot have an alias, so this one stays until it is removed.
    #[deprecated(note = "renamed to worker, as Ctx::worker and WorkerStats::worker name it")]
    pub worker_id: usize,
    /// The old name of [`worker_count`](Self::worker_count), filled alike.
    #[deprecated(note = "renamed to worker_count, as Runtime::worker_count names it")]
    pub num_workers: usize,
    /// Actors installed across the workers: the caller's worker counted
    /// as it stands, the others as of their last passes.
    pub total_actors: u64,
    /// Time since the runtime's actor system started.
    pub uptime: Duration,
}

/// One worker's statistics: its processes and its actors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// The worker's id.
    pub worker: usize,
    /// Its processes (as of its last pass).
    pub processes: StatsSnapshot,
    /// Its actors (as of its last pass).
    pub actors: ActorStats,
}

/// An actor's state, as its worker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorStatus {
    /// Spawned, not installed on its worker yet.
    Starting,
    /// Has mail to handle.
    Runnable,
    /// Nothing to handle.
    Idle,
    /// Suspended by an admin command: mail waits.
    Suspended,
}

/// What a worker knows of one of its actors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorInfo {
    /// The actor's pid.
    pub pid: Pid,
    /// Its worker.
    pub worker: usize,
    /// The actor's type name ("" while starting).
    pub type_name: &'static str,
    /// Who spawned it, if anyone.
    pub parent: Option<Pid>,
    /// Entries waiting in its mailbox.
    pub mailbox_depth: usize,
    /// Its state.
    pub status: ActorStatus,
    /// Entries it has handled.
    pub handled: u64,
    /// Type name of the last entry it handled ("" before the first).
    pub last_message: &'static str,
}

/// What the runtime knows of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// The process's pid.
    pub pid: Pid,
    /// Its registered name.
    pub name: Option<String>,
    /// Its worker.
    pub worker: usize,
    /// Its state word's state (`Queued`, `Running`, `Parked`, …).
    pub state: State,
    /// Its linked peers.
    pub links: Vec<Pid>,
    /// Death hooks registered on it: its monitors, plus one for its links
    /// and one for its registered name when it has them.
    pub monitors: usize,
    /// Whether it traps exits.
    pub trapping: bool,
    /// Deepest stack use seen at a switch out, in bytes.
    pub stack_high_water: usize,
}

impl Runtime {
    /// An inbox: an address code outside the actors receives on.
    pub fn new_inbox<M: Send + 'static>(&self) -> Inbox<M> {
        new_inbox(self)
    }

    /// Sends `make(reply_to)` to `target` and returns the pending reply.
    ///
    /// ```no_run
    /// # use smarm_core as smarm;
    /// # use smarm::actor::{Actor, Ctx, ReplyTo};
    /// struct Echo;
    /// impl Actor for Echo {
    ///     type Msg = (u32, ReplyTo<u32>);
    ///     fn handle(&mut self, _: &mut Ctx<'_, Self>, (n, reply): (u32, ReplyTo<u32>)) {
    ///         let _ = reply.send(n);
    ///     }
    /// }
    /// # fn demo(rt: &smarm::Runtime) {
    /// let echo = rt.spawn_actor(Echo).unwrap();
    /// assert_eq!(rt.ask(&echo, |reply| (7, reply)).wait().unwrap(), 7);
    /// # }
    /// ```
    pub fn ask<A: Actor, R: Send + 'static>(
        &self,
        target: &Addr<A>,
        make: impl FnOnce(ReplyTo<R>) -> A::Msg,
    ) -> Ask<R> {
        ask_with(self, target.pid(), |reply| target.send(make(reply)).is_ok())
    }

    /// A handle for threads that are not workers to send to actors.
    pub fn external_sender(&self) -> ExternalSender {
        ActorSystem::of(&self.shared);
        ExternalSender { runtime: self.clone() }
    }

    /// Sets the runtime's extension (once). Each worker makes its worker
    /// extension on its next pass.
    pub fn set_extension(&self, extension: Arc<dyn RuntimeExtension>) -> Result<(), AlreadySet> {
        let system = ActorSystem::of(&self.shared);
        let mut slot = system.extension.lock();
        if slot.is_some() {
            return Err(AlreadySet);
        }
        *slot = Some(extension);
        drop(slot);
        system.has_extension.store(true, Ordering::Release);
        for worker in 0..self.worker_count() {
            self.shared.notify(worker);
        }
        Ok(())
    }

    /// Sets where sends to remote addresses go (once).
    pub fn set_remote_sink(&self, sink: Arc<dyn RemoteSink>) -> Result<(), AlreadySet> {
        let system = ActorSystem::of(&self.shared);
        let mut slot = system.remote.lock();
        if slot.is_some() {
            return Err(AlreadySet);
        }
        *slot = Some(sink);
        Ok(())
    }

    /// Statistics of worker `worker`: its processes and its actors, as of
    /// its last pass.
    ///
    /// ```no_run
    /// # use smarm_core as smarm;
    /// fn report(runtime: &smarm::Runtime) {
    ///     for worker in 0..runtime.worker_count() {
    ///         let stats = runtime.worker_stats(worker).expect("a worker of this runtime");
    ///         println!("worker {worker}: {} passes, {} actors", stats.processes.passes, stats.actors.actors);
    ///     }
    ///     // A worker the runtime does not have is an error, not a panic.
    ///     assert!(runtime.worker_stats(runtime.worker_count()).is_err());
    /// }
    /// ```
    pub fn worker_stats(&self, worker: usize) -> Result<WorkerStats, NoSuchWorker> {
        Ok(WorkerStats { worker, processes: self.stats(worker)?, actors: self.actor_stats(worker)? })
    }

    /// Sends from threads that drive no worker, so far.
    pub fn external_sends(&self) -> u64 {
        ActorSystem::get(&self.shared).map_or(0, |s| s.external_sends.load(Ordering::Relaxed))
    }

    /// What actor `pid`'s worker knows of it, asked through the worker's
    /// admin queue (never behind a message backlog). `None` in the reply:
    /// it has ended.
    pub fn inspect(&self, pid: Pid) -> Ask<Option<ActorInfo>> {
        let (ask, reply) = ask_detached();
        match self.shared.stackless_worker(pid) {
            Some(worker) => route_admin(
                &self.shared,
                worker,
                None,
                Box::new(move |env: &Env<'_>| {
                    let _ = reply.send(info(env, pid));
                }),
            ),
            None => {
                let _ = reply.send(None);
            }
        }
        ask
    }

    /// Ends actor `pid` now, ahead of its mail (`on_stop` runs with
    /// `reason`; what is queued is dropped and counted), through its
    /// worker's admin queue. `Err(NoProc)` if it is not a live actor.
    pub fn stop_actor(&self, pid: Pid, reason: ExitReason) -> Result<(), NoProc> {
        let worker = self.shared.stackless_worker(pid).ok_or(NoProc(pid))?;
        route_admin(
            &self.shared,
            worker,
            Some(pid),
            Box::new(move |env: &Env<'_>| stop_now(env, pid, reason)),
        );
        Ok(())
    }

    /// Cancels an actor's `timer` from outside its handlers, through the
    /// owner's worker's admin queue (never behind its mail). The reply
    /// says whether it was still pending, as
    /// [`Ctx::cancel_timer`](crate::actor::Ctx::cancel_timer) would: `true`
    /// means its message is dropped and never sent; `false` that it had
    /// fired for the last time, was cancelled, or that its owner has ended
    /// (taking its timers with it).
    pub fn cancel_timer(&self, timer: &TimerRef) -> Ask<bool> {
        let (ask, reply) = ask_detached();
        let timer = *timer;
        match self.shared.stackless_worker(timer.owner()) {
            Some(worker) => route_admin(
                &self.shared,
                worker,
                Some(timer.owner()),
                Box::new(move |env: &Env<'_>| {
                    let removed = env.local.timers.borrow_mut().cancel(&timer);
                    let pending = removed.is_some();
                    // Dropped outside the borrow of the table.
                    drop(removed);
                    let _ = reply.send(pending);
                }),
            ),
            None => {
                let _ = reply.send(false);
            }
        }
        ask
    }

    /// Suspends actor `pid`: its mail waits until [`resume`](Self::resume).
    /// The reply says whether it was found.
    pub fn suspend(&self, pid: Pid) -> Ask<bool> {
        self.set_suspended(pid, true)
    }

    /// Resumes a suspended actor. The reply says whether it was found.
    pub fn resume(&self, pid: Pid) -> Ask<bool> {
        self.set_suspended(pid, false)
    }

    fn set_suspended(&self, pid: Pid, on: bool) -> Ask<bool> {
        let (ask, reply) = ask_detached();
        match self.shared.stackless_worker(pid) {
            Some(worker) => route_admin(
                &self.shared,
                worker,
                Some(pid),
                Box::new(move |env: &Env<'_>| {
                    let _ = reply.send(set_suspended(env, pid, on));
                }),
            ),
            None => {
                let _ = reply.send(false);
            }
        }
        ask
    }

    /// Runs `f` on actor `addr`'s state, on its worker, between messages —
    /// to read it or to replace it — and replies with what `f` returns
    /// (`None`: the actor has ended).
    pub fn with_state<A, R, F>(&self, addr: &Addr<A>, f: F) -> Ask<Option<R>>
    where
        A: Actor,
        R: Send + 'static,
        F: FnOnce(&mut A) -> R + Send + 'static,
    {
        let (ask, reply) = ask_detached();
        let pid = addr.pid();
        match self.shared.stackless_worker(pid) {
            Some(worker) => route_admin(
                &self.shared,
                worker,
                Some(pid),
                Box::new(move |env: &Env<'_>| {
                    let mut f = Some(f);
                    let result = with_actor(env, pid, &mut |any: &mut dyn Any| {
                        let f = f.take()?;
                        any.downcast_mut::<A>().map(f)
                    });
                    let _ = reply.send(result);
                }),
            ),
            None => {
                let _ = reply.send(None);
            }
        }
        ask
    }

    /// Every actor of every worker, asked of all workers at once; the reply
    /// comes when all have answered, sorted by pid.
    pub fn list_actors(&self) -> Ask<Vec<ActorInfo>> {
        self.broadcast(list)
    }

    /// Every live process of every worker (pid, registered name, worker,
    /// state, links, monitors, trapping, stack high-water mark), asked of
    /// all workers at once and sorted by pid. With
    /// [`list_actors`](Self::list_actors), one view of everything running.
    pub fn list_processes(&self) -> Ask<Vec<ProcessInfo>> {
        let runtime = self.clone();
        self.broadcast(move |env| processes(env, &runtime))
    }

    /// Runs `each` on every worker (admin queue) and replies with the
    /// concatenation once all have run.
    fn broadcast<T, F>(&self, each: F) -> Ask<Vec<T>>
    where
        T: Send + 'static + Ord,
        F: Fn(&Env<'_>) -> Vec<T> + Send + Sync + 'static,
    {
        let (ask, reply) = ask_detached();
        let workers = self.worker_count();
        let gather = Arc::new(RuntimeMutex::leaf((Vec::new(), workers, Some(reply))));
        let each = Arc::new(each);
        for worker in 0..workers {
            let gather = gather.clone();
            let each = each.clone();
            route_admin(
                &self.shared,
                worker,
                None,
                Box::new(move |env: &Env<'_>| {
                    let mine = each(env);
                    let done = {
                        let mut g = gather.lock();
                        g.0.extend(mine);
                        g.1 -= 1;
                        if g.1 == 0 {
                            g.2.take().map(|reply| (core::mem::take(&mut g.0), reply))
                        } else {
                            None
                        }
                    };
                    if let Some((mut all, reply)) = done {
                        all.sort();
                        let _ = reply.send(all);
                    }
                }),
            );
        }
        ask
    }
}

impl PartialOrd for ActorInfo {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ActorInfo {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.pid.cmp(&other.pid)
    }
}
impl PartialOrd for ProcessInfo {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ProcessInfo {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.pid.cmp(&other.pid)
    }
}

/// The system as seen by a worker, for `Ctx::system_info`.
pub(crate) fn system_info(env: &Env<'_>) -> SystemInfo {
    let shared = env.shared;
    let runtime = &env.local.runtime;
    let system = ActorSystem::of(shared);
    // This worker's count as it stands (the caller is among them); the
    // others' as they last published it.
    let here = env.local.worker;
    let total_actors = (0..runtime.worker_count())
        .map(|w| {
            if w == here {
                env.local.counters.actors.get()
            } else {
                runtime.actor_stats(w).map_or(0, |stats| stats.actors)
            }
        })
        .sum();
    // The deprecated fields are filled too.
    #[allow(deprecated)]
    SystemInfo {
        worker: env.local.worker,
        worker_count: runtime.worker_count(),
        worker_id: env.local.worker,
        num_workers: runtime.worker_count(),
        total_actors,
        uptime: Duration::from_nanos(shared.platform.now().saturating_sub(system.started)),
    }
}

impl<A: Actor> Ctx<'_, A> {
    /// Where the runtime stands: this worker, the worker count, the actors
    /// across the workers, the uptime.
    pub fn system_info(&self) -> SystemInfo {
        system_info(self.env)
    }
}

/// What the worker knows of actor `pid`, for an admin command.
fn info(env: &Env<'_>, pid: Pid) -> Option<ActorInfo> {
    let worker = env.local.worker;
    match with_erased(env.driver, pid, |cell| describe(worker, pid, cell)) {
        Ok(info) => Some(info),
        Err(NoCell::Pending) => Some(ActorInfo {
            pid,
            worker,
            type_name: "",
            parent: None,
            mailbox_depth: 0,
            status: ActorStatus::Starting,
            handled: 0,
            last_message: "",
        }),
        Err(_) => None,
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
fn list(env: &Env<'_>) -> Vec<ActorInfo> {
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
fn processes(env: &Env<'_>, runtime: &Runtime) -> Vec<ProcessInfo> {
    let shared = env.shared;
    let mut out = Vec::new();
    for index in 0..shared.slot_count() {
        let Some(view) = env.driver.process_view(index) else { continue };
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
fn stop_now(env: &Env<'_>, pid: Pid, reason: ExitReason) {
    let panic = with_erased(env.driver, pid, |cell| {
        current::as_handler(pid, || (env.shared.hooks.catch_panic)(&mut || cell.stop(env, &reason)))
    });
    match panic {
        Ok(Some(message)) => {
            bump(&env.local.counters.panics, 1);
            end(env, pid, ExitReason::Panicked(message), false);
        }
        Ok(None) => end(env, pid, reason, true),
        Err(_) => {}
    }
}

/// Suspends or resumes actor `pid`; whether it was found.
fn set_suspended(env: &Env<'_>, pid: Pid, on: bool) -> bool {
    with_erased(env.driver, pid, |cell| {
        *cell.suspended() = on;
        if !on && cell.len() > 0 {
            env.local.mark_runnable(pid, cell.queued());
        }
    })
    .is_ok()
}

/// Runs `f` on actor `pid`'s value (admin `with_state`), under the panic
/// guard: a panicking `f` poisons the actor like a panicking handler.
fn with_actor<R>(env: &Env<'_>, pid: Pid, f: &mut dyn FnMut(&mut dyn Any) -> Option<R>) -> Option<R> {
    let mut result = None;
    let panic = with_erased(env.driver, pid, |cell| {
        current::as_handler(pid, || (env.shared.hooks.catch_panic)(&mut || result = f(cell.actor_any())))
    })
    .ok()?;
    if let Some(message) = panic {
        bump(&env.local.counters.panics, 1);
        end(env, pid, ExitReason::Panicked(message), false);
        return None;
    }
    result
}
