//! The [`Actor`] trait and the context its handlers get ([`Ctx`]); the
//! context's spawning, monitoring and addressing live with the addresses.

use core::fmt;
use core::marker::PhantomData;

use crate::actor::system::Env;
use crate::kernel::error::NoProc;
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::Runtime;
use crate::otp::link::ExitSignal;
use crate::otp::monitor::Down;

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
    pub(crate) env: &'a Env<'a>,
    pub(crate) pid: Pid,
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

    /// The worker this actor lives on.
    pub fn worker(&self) -> usize {
        self.env.local.worker
    }

    /// The runtime this actor lives in.
    pub fn runtime(&self) -> &Runtime {
        &self.env.local.runtime
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

    /// Links this actor with `peer`: if either dies abnormally the other
    /// ends too (or, trapping exits, is told).
    pub fn link(&mut self, peer: Pid) -> Result<(), NoProc> {
        self.env.local.runtime.link(self.pid, peer)
    }

    /// Removes the link with `peer`, if any.
    pub fn unlink(&mut self, peer: Pid) {
        self.env.local.runtime.unlink(self.pid, peer);
    }

    /// Registers this actor under `name` (see the registry).
    pub fn register(&mut self, name: &str) -> Result<(), crate::otp::registry::RegisterError> {
        self.env.local.runtime.register(name, self.pid)
    }
}
