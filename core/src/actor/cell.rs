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
pub(crate) enum Item<M> {
    Msg(M),
    Signal(Signal),
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

/// What one run of an actor did.
pub(crate) struct Ran {
    /// The actor ends with this reason (its `on_stop` has run).
    pub(crate) end: Option<ExitReason>,
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
    /// Runs `on_start` if it has not run, then up to `budget` entries.
    fn run(&mut self, env: &Env<'_>, budget: usize) -> Ran;
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
        });
        Install(StacklessCell::new(cell, Self::VIEW))
    }
}

impl<A: Actor> ErasedCell for Cell<A> {
    fn mailbox(&mut self) -> &mut dyn Any {
        &mut self.mailbox
    }

    fn push_signal(&mut self, signal: Signal) {
        self.mailbox.push_back(Item::Signal(signal));
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

    fn run(&mut self, env: &Env<'_>, budget: usize) -> Ran {
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
                Item::Signal(Signal::Down(down)) => {
                    self.last = "Down";
                    self.actor.handle_down(&mut ctx, down)
                }
                Item::Signal(Signal::Exit(signal)) => {
                    self.last = "ExitSignal";
                    self.actor.handle_exit(&mut ctx, signal)
                }
                Item::Signal(Signal::Stop(reason)) => ctx.stop = Some(reason),
            }
        }
        let end = ctx.stop.take();
        if let Some(reason) = &end {
            self.stopped = true;
            self.actor.on_stop(&mut ctx, reason);
        }
        Ran { end }
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
