//! How work reaches an actor: the envelope payloads (a message, a signal,
//! an install, an admin command), each delivered on the target's worker,
//! and the routes from a sender to that worker — straight into the
//! target's mailbox, or `pending_local`, when the sender drives it, else
//! one of its lanes.

use alloc::boxed::Box;
use alloc::collections::VecDeque;

use crate::actor::cell::{take_erased, with_erased, ErasedCell, Install, Item, Signal};
use crate::actor::extension::SpawnInfo;
use crate::actor::system::{bump, count_external, ActorSystem, Env, Envelope, Local};
use crate::kernel::current::Here;
use crate::kernel::pid::Pid;
use crate::kernel::preempt::NoPreempt;
use crate::kernel::ring::envelope::Deliver;
use crate::kernel::runtime::Shared;
use crate::kernel::stackless::{Driver, Lane, NoCell, OnDriver};

/// A message for an actor whose message type is `M`.
pub(crate) struct Msg<M>(pub(crate) M);

/// Moves `msg` into the mailbox of `cell` (actor `dest` of `local`'s
/// worker) if it takes `M`s, and makes the actor runnable; else counts a
/// type mismatch and leaves `msg` for the caller to drop (outside the
/// loan: a message's destructor may send).
fn push_msg<M: Send + 'static>(cell: &mut dyn ErasedCell, local: &Local, dest: Pid, msg: &mut Option<M>) {
    match cell.mailbox().downcast_mut::<VecDeque<Item<M>>>() {
        Some(mailbox) => {
            if let Some(msg) = msg.take() {
                mailbox.push_back(Item::Msg(msg));
            }
            bump(&local.counters.depth, 1);
            local.mark_runnable(dest, cell.queued());
        }
        None => bump(&local.counters.type_mismatches, 1),
    }
}

impl<M: Send + 'static> Deliver<OnDriver> for Msg<M> {
    fn deliver(self, dest: Pid, driver: &Driver<'_>) -> Result<(), Self> {
        let Some(local) = Local::of(driver) else { return Ok(()) };
        let mut msg = Some(self.0);
        let found = with_erased(driver, dest, |cell| push_msg(cell, local, dest, &mut msg));
        match (found, msg) {
            (Err(NoCell::Pending), Some(msg)) => Err(Msg(msg)),
            (Err(_), Some(_)) => {
                bump(&local.counters.dropped, 1);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// A signal for an actor.
pub(crate) struct Sig(pub(crate) Signal);

impl Deliver<OnDriver> for Sig {
    fn deliver(self, dest: Pid, driver: &Driver<'_>) -> Result<(), Self> {
        let Some(local) = Local::of(driver) else { return Ok(()) };
        let mut signal = Some(self.0);
        let found = with_erased(driver, dest, |cell| {
            if let Some(signal) = signal.take() {
                cell.push_signal(signal);
            }
            bump(&local.counters.depth, 1);
            local.mark_runnable(dest, cell.queued());
        });
        match (found, signal) {
            (Err(NoCell::Pending), Some(signal)) => Err(Sig(signal)),
            _ => Ok(()),
        }
    }
}

impl Deliver<OnDriver> for Install {
    fn deliver(self, dest: Pid, driver: &Driver<'_>) -> Result<(), Self> {
        let Some(local) = Local::of(driver) else { return Ok(()) };
        // A stop that got there first ended the reservation: the cell is
        // dropped here (given back by `install`), its actor never started.
        if driver.install(dest, self.0).is_err() {
            return Ok(());
        }
        bump(&local.counters.actors, 1);
        // Runnable at once: `on_start` runs in the next run step.
        let parent = with_erased(driver, dest, |cell| {
            local.mark_runnable(dest, cell.queued());
            cell.parent()
        });
        let Ok(parent) = parent else { return Ok(()) };
        crate::kernel::trace::emit(|| crate::kernel::trace::TraceEvent::Spawn {
            pid: dest,
            worker: local.worker,
            parent,
        });
        if let Some(extension) = ActorSystem::get(driver.shared()).and_then(ActorSystem::extension) {
            // Only an extension is told the type: looked up for it alone.
            let type_name = with_erased(driver, dest, |cell| cell.type_name()).unwrap_or("");
            extension.on_spawn(&SpawnInfo { pid: dest, worker: local.worker, type_name, parent });
        }
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

impl Deliver<OnDriver> for AdminCmd {
    fn deliver(self, dest: Pid, driver: &Driver<'_>) -> Result<(), Self> {
        // No actor system on this worker: the command (and the reply
        // handle it owns) is dropped; an asker sees `NoReply`.
        let Some(local) = Local::of(driver) else { return Ok(()) };
        if self.targeted && driver.cell_state(dest) == Err(NoCell::Pending) {
            // Held with the target's mail; its install releases it.
            local.hold(Envelope::new(dest, self));
            return Ok(());
        }
        (self.command)(&Env::new(local, driver));
        // Run outside the busy part of a pass: the plugin's share of this
        // pass publishes what the command changed, idle or not.
        local.counters.unpublished.set(true);
        Ok(())
    }
}

/// Why a deposit failed: the target is not a live actor (the envelope
/// and its payload are dropped).
pub(crate) struct NoActor;

/// Routes `envelope` to its target's worker: delivered at once or staged
/// in `pending_local` when the caller drives that worker, else the worker's mail lane (and a wake for
/// its driver).
pub(crate) fn deposit(shared: &Shared, envelope: Envelope) -> Result<(), NoActor> {
    let Some(worker) = shared.stackless_worker(envelope.dest()) else { return Err(NoActor) };
    deposit_on(shared, worker, envelope);
    Ok(())
}

/// Routes `envelope` to `worker`, the worker of its (live) target, with
/// one look at the calling thread's current worker.
pub(crate) fn deposit_on(shared: &Shared, worker: usize, envelope: Envelope) {
    // Preemption off: a push into a RefCell the driver also uses must not
    // be switched out.
    let _np = NoPreempt::new();
    let mut envelope = Some(envelope);
    let on_a_worker = Local::with_any_here(shared, |local, driver| {
        if local.worker == worker {
            if let Some(envelope) = envelope.take() {
                if let Err(envelope) = deliver_here(driver, local, envelope) {
                    local.pending_local.borrow_mut().push(envelope);
                }
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
        shared.push_stackless(worker, Lane::Mail, envelope);
    }
}

/// Delivers `envelope` at once from the pass of its target's worker (a
/// handler, a timer, a hook: not a process, which stages its sends): `Err`
/// gives it back to be staged, when no driver can be had here or the
/// target is lent out (an actor's send to itself) or not installed yet.
/// Staged sends from a handler are only ever those, so each sender's
/// messages keep their order: a target is lent out only while it runs,
/// and is installed only between its worker's handler runs.
fn deliver_here(driver: Option<&Driver<'_>>, local: &Local, envelope: Envelope) -> Result<(), Envelope> {
    let Some(driver) = driver else { return Err(envelope) };
    if driver.cell_state(envelope.dest()).is_err() {
        return Err(envelope);
    }
    envelope.deliver_in(driver, &local.cache)
}

/// Moves `msg` straight into the mailbox of `dest`, an actor of `local`'s
/// worker, from that worker's pass or one of its processes: `Ok(None)`.
/// `Ok(Some(msg))` gives back a message refused (for its type, or because
/// its target has ended; counted) for the caller to drop once it has let
/// the driver go: its destructor may send, or block. `Err` gives it back
/// to be staged (see [`deliver_here`] and [`deposit_msg`]).
fn deliver_msg_here<M: Send + 'static>(
    driver: &Driver<'_>,
    local: &Local,
    dest: Pid,
    msg: M,
) -> Result<Option<M>, M> {
    let mut msg = Some(msg);
    let found = with_erased(driver, dest, |cell| push_msg(cell, local, dest, &mut msg));
    match (found, msg) {
        (_, None) => Ok(None),
        (Ok(()), Some(msg)) => Ok(Some(msg)),
        (Err(NoCell::Dead), Some(msg)) => {
            bump(&local.counters.dropped, 1);
            Ok(Some(msg))
        }
        (Err(NoCell::Pending | NoCell::Lent), Some(msg)) => Err(msg),
    }
}

/// Sends `msg` to `dest`, a live actor on `worker`. From that worker (a
/// handler in its pass, or one of its processes) it goes straight into
/// the mailbox; when the target is lent out or not installed, it is
/// staged in `pending_local` in a block of the worker's cache (no
/// allocation in steady state); from another worker it goes in such a
/// block to `worker`'s mail lane, and from any other thread boxed.
///
/// A process's messages keep their order as a handler's do (see
/// [`deliver_here`]): it never finds a cell lent out (cells are lent only
/// in the pass), and a target it found not installed is installed only by
/// a pass, which delivers everything staged before any process runs
/// again.
///
/// `here` is the caller's worker record, looked up by the caller.
pub(crate) fn deposit_msg<M: Send + 'static>(shared: &Shared, worker: usize, dest: Pid, msg: M, here: Here) {
    // Preemption off: the cache and `pending_local` are the driver's too,
    // and a process holds the driver only while it cannot be switched out
    // (nothing below blocks or runs user code).
    let np = NoPreempt::in_here(here);
    let mut msg = Some(msg);
    let mut cross = None;
    let mut refused = None;
    Driver::with_state_for_send_in(shared, here, |local: &Local, driver| {
        let Some(msg) = msg.take() else { return };
        if local.worker == worker {
            bump(&local.counters.local_sends, 1);
            match deliver_msg_here(driver, local, dest, msg) {
                Ok(gone) => {
                    if gone.is_some() {
                        // Counted with no work left for the pass: its
                        // next look, idle or not, publishes the count.
                        local.counters.unpublished.set(true);
                    }
                    refused = gone;
                }
                Err(msg) => {
                    let envelope = Envelope::new_in(&local.cache, dest, Msg(msg));
                    local.pending_local.borrow_mut().push(envelope);
                }
            }
        } else {
            bump(&local.counters.cross_sends, 1);
            cross = Some(Envelope::new_in(&local.cache, dest, Msg(msg)));
        }
    });
    if refused.is_some() {
        // Dropped with the driver let go and preemption back on.
        drop(np);
        drop(refused);
        return;
    }
    let envelope = match (cross, msg) {
        (Some(envelope), _) => envelope,
        (None, Some(msg)) => {
            count_external(shared);
            Envelope::new(dest, Msg(msg))
        }
        (None, None) => return,
    };
    shared.push_stackless(worker, Lane::Mail, envelope);
}

/// Queues the install of a reserved actor on `worker`: staged locally when
/// the caller drives that worker, else through its install lane.
pub(crate) fn route_install(shared: &Shared, worker: usize, envelope: Envelope) {
    ActorSystem::of(shared);
    let _np = NoPreempt::new();
    let mut envelope = Some(envelope);
    Local::with_current(shared, worker, |local| {
        if let Some(envelope) = envelope.take() {
            local.local_spawns.borrow_mut().push_back(envelope);
        }
    });
    if let Some(envelope) = envelope {
        shared.push_stackless(worker, Lane::Install, envelope);
    }
}

/// Queues `command` on `worker`'s admin lane. With a `target`, the
/// command waits for that actor's install if it is not installed yet, in
/// order with the target's mail.
pub(crate) fn route_admin(
    shared: &Shared,
    worker: usize,
    target: Option<Pid>,
    command: Box<dyn FnOnce(&Env<'_>) + Send>,
) {
    ActorSystem::of(shared);
    let dest = target.unwrap_or(Pid::from_parts(0, 0));
    shared.push_stackless(
        worker,
        Lane::Admin,
        Envelope::new(dest, AdminCmd { command, targeted: target.is_some() }),
    );
}

/// Delivers `envelope`, or holds it while its target is reserved but not
/// installed yet. A delivery that installs an actor releases the mail held
/// for it, in arrival order, before anything else can reach it: each
/// envelope is looked at once, whatever the number of pending targets.
pub(crate) fn deliver_or_hold(envelope: Envelope, local: &Local, driver: &Driver<'_>) {
    let dest = envelope.dest();
    match envelope.deliver_in(driver, &local.cache) {
        Err(envelope) => local.hold(envelope),
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
                deliver_or_hold(envelope, local, driver);
            }
        }
    }
}

/// Ends actor `pid`: its cell leaves the slot, what is left in its
/// mailbox is dropped and counted, and the kernel finalizes its pid.
pub(crate) fn end(env: &Env<'_>, pid: Pid, reason: crate::kernel::exit::ExitReason, graceful: bool) {
    let local = env.local;
    if let Some(extension) = ActorSystem::of(env.shared).extension() {
        extension.on_actor_death(pid, &reason);
    }
    if let Some(mut cell) = take_erased(env.driver, pid) {
        let dropped = cell.clear();
        bump(&local.counters.dropped, dropped as u64);
        crate::actor::system::shrink(&local.counters.depth, dropped as u64);
        // The actor's own destructor may panic: it dies alone.
        let mut cell = Some(cell);
        let _ = (env.shared.hooks.catch_panic)(&mut || drop(cell.take()));
    }
    // Its timers go with it (after `on_stop`, which may have set some):
    // nothing is delivered for a dead actor.
    local.cancel_timers(pid);
    local.counters.actors.set(local.counters.actors.get().saturating_sub(1));
    if graceful {
        bump(&local.counters.stopped, 1);
    }
    if !env.driver.end(pid, reason.clone()) {
        local.ending.borrow_mut().push((pid, reason));
    }
}
