//! An actor's cell: the actor value, its mailbox and lifecycle flags, kept
//! in its slot (one allocation) and touched only by its worker's driver,
//! through the kernel's [`Driver`].

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use core::any::{Any, TypeId};

use crate::actor::handler::{Actor, Ctx};
use crate::actor::system::Env;
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::stackless::{BodyType, CellRef, Driver, NoCell, StacklessCell};
use crate::otp::link::ExitSignal;
use crate::otp::monitor::Down;

/// A mailbox entry: a message, or a signal from the runtime.
///
/// A signal is boxed: signals are rare, and unboxed the largest of them
/// (a `Down` with its reason) would set the size of every entry, so each
/// message would move several times its own bytes in and out of the
/// mailbox. Boxed, an `Item<u64>` is two words.
pub(crate) enum Item<M> {
    Msg(M),
    Signal(Box<Signal>),
}

/// What the runtime tells an actor through its mailbox, in order with its
/// messages.
#[derive(Debug)]
pub(crate) enum Signal {
    /// A monitored pid died.
    Down(Down),
    /// A linked pid died (the actor traps exits), or an exit signal.
    Exit(ExitSignal),
    /// Stop once the messages before this one are handled.
    Stop(ExitReason),
}

/// What one turn of an actor in its worker's run step did. Two words, so
/// that it comes back in registers: how the actor ends, the rare case, is
/// kept in its cell for [`ErasedCell::take_end`].
#[derive(Clone, Copy)]
pub(crate) struct Turn {
    /// Mailbox entries taken, the one a panic interrupted included.
    pub(crate) taken: u64,
    /// The actor ends: its cell holds how.
    pub(crate) ended: bool,
}

/// How a turn ended its actor.
pub(crate) enum TurnEnd {
    /// A handler panicked, with this message.
    Panicked(alloc::string::String),
    /// The actor stopped with this reason (its `on_stop` has run).
    Stopped(ExitReason),
}

/// A cell with its actor type erased.
pub(crate) trait ErasedCell: Send {
    /// The mailbox, a `VecDeque<Item<A::Msg>>`.
    fn mailbox(&mut self) -> &mut dyn Any;
    /// Appends a signal.
    fn push_signal(&mut self, signal: Signal);
    /// Entries waiting.
    fn len(&self) -> usize;
    /// In its worker's runnable list.
    fn queued(&mut self) -> &mut bool;
    /// Messages handled so far.
    fn handled(&self) -> u64;
    /// One turn in the run step of its worker's pass (one dynamic call
    /// for all of it): off the runnable list; unless suspended,
    /// `on_start` if it has not run, then up to `budget` entries, as the
    /// driver's handler and under the host's panic catch; back on the
    /// worker's `later` list if entries are left.
    fn turn(&mut self, env: &Env<'_>, budget: usize) -> Turn;
    /// How the last turn ended the actor, if it did.
    fn take_end(&mut self) -> Option<TurnEnd>;
    /// Ends the actor from outside its handlers (a stop request): runs
    /// `on_stop` once, if it started.
    fn stop(&mut self, env: &Env<'_>, reason: &ExitReason);
    /// Drops every waiting entry; returns how many.
    fn clear(&mut self) -> usize;
    /// The actor's type name.
    fn type_name(&self) -> &'static str;
    /// Not run while set (admin suspend); messages wait.
    fn suspended(&mut self) -> &mut bool;
    /// Who spawned it: the actor or process, if any.
    fn parent(&self) -> Option<Pid>;
    /// Type name of the last entry it handled ("" before the first).
    fn last_message(&self) -> &'static str;
    /// The actor value, for admin commands that know its type.
    fn actor_any(&mut self) -> &mut dyn Any;
}

pub(crate) struct Cell<A: Actor> {
    actor: A,
    pid: Pid,
    mailbox: VecDeque<Item<A::Msg>>,
    started: bool,
    stopped: bool,
    queued: bool,
    suspended: bool,
    handled: u64,
    parent: Option<Pid>,
    last: &'static str,
    /// How its last turn ended it, until the run step takes it.
    end: Option<TurnEnd>,
}

/// A spawned actor's cell, to install in its reserved slot: the one
/// allocation of the actor, and how to read it.
pub(crate) struct Install(pub(crate) StacklessCell);

/// How a cell the kernel keeps as `dyn Any` is read as an [`ErasedCell`]:
/// the `'static` description stored beside it, one per actor type.
pub(crate) struct View {
    get: for<'c> fn(CellRef<'c>) -> Option<&'c mut dyn ErasedCell>,
    own: fn(StacklessCell) -> Option<Box<dyn ErasedCell>>,
}

#[inline]
fn get<A: Actor>(cell: CellRef<'_>) -> Option<&mut dyn ErasedCell> {
    cell.value::<Cell<A>>().map(|cell| cell as &mut dyn ErasedCell)
}

fn own<A: Actor>(cell: StacklessCell) -> Option<Box<dyn ErasedCell>> {
    cell.into_value::<Cell<A>>().map(|cell| cell as Box<dyn ErasedCell>)
}

/// Runs `f` on `pid`'s installed cell, lent by the driver of its worker.
#[inline]
pub(crate) fn with_erased<R>(
    driver: &Driver<'_>,
    pid: Pid,
    f: impl FnOnce(&mut dyn ErasedCell) -> R,
) -> Result<R, NoCell> {
    let found = driver.with_cell(pid, |cell| {
        let view = cell.meta::<View>()?;
        (view.get)(cell).map(f)
    })?;
    // A cell the actor layer did not describe is no actor's.
    found.ok_or(NoCell::Dead)
}

/// Takes `pid`'s installed cell out of its slot.
pub(crate) fn take_erased(driver: &Driver<'_>, pid: Pid) -> Option<Box<dyn ErasedCell>> {
    let cell = driver.take_cell(pid)?;
    (cell.meta::<View>()?.own)(cell)
}

impl<A: Actor> Cell<A> {
    const VIEW: &'static View = &View { get: get::<A>, own: own::<A> };

    /// The actor's type, kept in its slot for lookups from any thread.
    pub(crate) const TYPE: &'static BodyType =
        &BodyType { id: TypeId::of::<A>, name: core::any::type_name::<A> };

    /// The install of a new actor: its cell, boxed once.
    pub(crate) fn install(pid: Pid, actor: A, parent: Option<Pid>) -> Install {
        let cell = Box::new(Cell {
            actor,
            pid,
            mailbox: VecDeque::new(),
            started: false,
            stopped: false,
            queued: false,
            suspended: false,
            handled: 0,
            parent,
            last: "",
            end: None,
        });
        Install(StacklessCell::new(cell, Self::VIEW))
    }

    /// Runs `on_start` if it has not run, then up to `budget` entries. If
    /// the actor stops, its `on_stop` runs and `end` says why.
    fn run(&mut self, env: &Env<'_>, budget: usize) {
        let mut ctx = Ctx::new(env, self.pid);
        let mut handled = 0;
        if !self.started {
            self.started = true;
            self.actor.on_start(&mut ctx);
        }
        while ctx.stop.is_none() && handled < budget {
            let Some(item) = self.mailbox.pop_front() else { break };
            handled += 1;
            self.handled += 1;
            match item {
                Item::Msg(msg) => {
                    self.last = core::any::type_name::<A::Msg>();
                    self.actor.handle(&mut ctx, msg)
                }
                Item::Signal(signal) => match *signal {
                    Signal::Down(down) => {
                        self.last = "Down";
                        self.actor.handle_down(&mut ctx, down)
                    }
                    Signal::Exit(signal) => {
                        self.last = "ExitSignal";
                        self.actor.handle_exit(&mut ctx, signal)
                    }
                    Signal::Stop(reason) => ctx.stop = Some(reason),
                },
            }
        }
        if let Some(reason) = ctx.stop.take() {
            self.stopped = true;
            self.actor.on_stop(&mut ctx, &reason);
            self.end = Some(TurnEnd::Stopped(reason));
        }
    }
}

impl<A: Actor> ErasedCell for Cell<A> {
    fn mailbox(&mut self) -> &mut dyn Any {
        &mut self.mailbox
    }

    fn push_signal(&mut self, signal: Signal) {
        self.mailbox.push_back(Item::Signal(Box::new(signal)));
    }

    fn len(&self) -> usize {
        self.mailbox.len()
    }

    fn queued(&mut self) -> &mut bool {
        &mut self.queued
    }

    fn handled(&self) -> u64 {
        self.handled
    }

    fn turn(&mut self, env: &Env<'_>, budget: usize) -> Turn {
        self.queued = false;
        if self.suspended {
            // Its mail waits; `resume` makes it runnable again.
            return Turn { taken: 0, ended: false };
        }
        let before = self.mailbox.len();
        let panic =
            env.driver.as_handler(self.pid, || (env.shared.hooks.catch_panic)(&mut || self.run(env, budget)));
        let taken = before.saturating_sub(self.mailbox.len()) as u64;
        // Each case looked at in place: what ends an actor (a panic's
        // message, a stop's reason) is never moved on the way, only its
        // presence tested.
        if let Some(message) = panic {
            self.end = Some(TurnEnd::Panicked(message));
            return Turn { taken, ended: true };
        }
        if self.end.is_some() {
            return Turn { taken, ended: true };
        }
        if !self.mailbox.is_empty() {
            // Its budget is spent: behind the rest, from the next pass
            // (`Local::later`).
            self.queued = true;
            env.local.later.borrow_mut().push_back(self.pid);
        }
        Turn { taken, ended: false }
    }

    fn take_end(&mut self) -> Option<TurnEnd> {
        self.end.take()
    }

    fn stop(&mut self, env: &Env<'_>, reason: &ExitReason) {
        if self.started && !self.stopped {
            self.stopped = true;
            let mut ctx = Ctx::new(env, self.pid);
            self.actor.on_stop(&mut ctx, reason);
        }
    }

    fn clear(&mut self) -> usize {
        let n = self.mailbox.len();
        self.mailbox.clear();
        n
    }

    fn type_name(&self) -> &'static str {
        core::any::type_name::<A>()
    }

    fn suspended(&mut self) -> &mut bool {
        &mut self.suspended
    }

    fn parent(&self) -> Option<Pid> {
        self.parent
    }

    fn last_message(&self) -> &'static str {
        self.last
    }

    fn actor_any(&mut self) -> &mut dyn Any {
        &mut self.actor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mailbox_entry_is_no_larger_than_its_message_and_a_tag() {
        // A signal must not set the size of every entry.
        assert!(core::mem::size_of::<Item<u64>>() <= 2 * core::mem::size_of::<u64>());
        assert!(core::mem::size_of::<Item<[u64; 4]>>() <= 5 * core::mem::size_of::<u64>());
    }
}
