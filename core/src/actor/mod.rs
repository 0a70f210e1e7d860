//! Handler actors: a struct with a `handle` method per message and no
//! stack of its own, pinned to a worker and driven by that worker's pass
//! next to its processes.
//!
//! A process costs a stack; a handler actor costs its value and a mailbox,
//! so a million of them is cheap. Both kinds are one system: an actor has
//! a [`Pid`](crate::kernel::pid::Pid) like a process, so monitors, links, exit signals, the
//! registry and supervisors see no difference.
//!
//! ```no_run
//! # use smarm_core as smarm;
//! use smarm::actor::{Actor, Ctx};
//!
//! /// Counts what it is sent and reports the total to whoever asks.
//! struct Counter { total: u64 }
//!
//! enum Msg { Add(u64), Report(smarm::Sender<u64>) }
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
//! # fn demo(runtime: &smarm::Runtime) {
//! let counter = runtime.spawn_actor(Counter { total: 0 }).unwrap();
//! counter.send(Msg::Add(2)).unwrap();
//! # }
//! ```
//!
//! # Delivery
//!
//! A send to an actor of the sender's own worker, from a handler (or a
//! timer, or other code of the pass) or from a process, goes straight
//! into the target's mailbox; one to the sender itself, or one to an
//! actor not installed yet, is staged in the worker's `pending_local`
//! list and reaches the mailbox at the end of the current pass. Either
//! way it is never run recursively: a target the send made runnable
//! handles it after the sending handler has returned — later in the same
//! pass (up to 64 such runs a pass) for a send straight into its mailbox,
//! on the next pass for a staged one — or, sent by a process, in the
//! worker's pass after the process switches out. A send from anywhere
//! else (another worker, the runtime handle, a thread outside the
//! runtime) moves one envelope into the
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
//! Each pass of a worker begins with its admin queue (the runtime's own
//! commands and the actors' administration share it), before its
//! processes run. After its processes: fire the actor timers that are due
//! (their messages are sends from this worker), drain the spawn queue, deliver
//! what the processes staged in `pending_local`, drain the transfer queue
//! (each drain, the admin one too, at most `worker_ingress_budget`
//! entries); run each runnable actor for up to `actor_message_budget`
//! entries, then up to 64 more runs of actors their sends made runnable;
//! install the actors its handlers spawned; deliver `pending_local`;
//! publish statistics. A worker with nothing to do parks
//! like one without actors.
//!
//! # Lifecycle
//!
//! [`Actor::on_start`] runs once, before the first message;
//! [`Ctx::stop_self`] ends the actor after the current message (what is
//! left in the mailbox is dropped and counted) and runs
//! [`Actor::on_stop`]; [`Addr::stop`] queues a stop behind the messages
//! already sent; a stop request ([`Runtime::request_stop`](crate::kernel::runtime::Runtime::request_stop), a linked
//! death, an exit signal) ends it at its worker's next pass, also with
//! `on_stop`. A panicking handler *poisons* its actor: the actor is
//! dropped without `on_stop`, its mailbox is cleared and counted, its
//! monitors and links are told `Panicked` with the message, and the worker
//! and every other actor go on. (On a host without unwinding a panic does
//! not come back to the worker; see the host's documentation.)
//!
//! An actor's timers ([`Ctx::send_after`], [`Ctx::send_interval`]) end
//! with it, however it ends: their messages are dropped, never delivered.
//!
//! An actor counts in [`Runtime::live`](crate::kernel::runtime::Runtime::live) until it ends, as a process does:
//! a host that runs until nothing is live waits for actors too — stop them
//! ([`Addr::stop`], [`Runtime::stop_all`](crate::kernel::runtime::Runtime::stop_all)) when the program is done.
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

// The files import one another one way only (checked by
// scripts/check-layers.sh): extension, error → system → handler → cell →
// route → pass, inbox → addr → services; this file only re-exports.
mod addr;
pub(crate) mod cell;
mod error;
mod extension;
mod handler;
pub mod inbox;
mod pass;
pub(crate) mod route;
pub mod services;
pub(crate) mod system;
mod timer;

pub use addr::{spawn_actor, ActorAddress, ActorMonitor, Addr};
pub use error::{ActorLookupError, ActorSendError};
pub use handler::{Actor, Ctx};
pub use inbox::{Ask, Disconnected, Inbox, InboxAddr, InboxRecv, InboxRecvError, InboxTryRecvError, ReplyTo};
#[allow(deprecated)]
pub use inbox::{RecvError, TryRecvError};
pub use services::{
    ActorInfo, ActorStatus, AlreadySet, ExternalSender, ProcessInfo, RemoteEnvelope, RemoteSink,
    RuntimeExtension, SpawnInfo, SystemInfo, WorkerCtx, WorkerExtension, WorkerStats,
};
pub use system::ActorStats;
pub use timer::{TimerError, TimerRef};
