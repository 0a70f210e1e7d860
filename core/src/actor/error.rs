//! Why a send to an actor, an inbox or a remote address failed, and why a
//! typed lookup by name found no actor.

use core::fmt;

use crate::kernel::pid::Pid;

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

/// Why [`Addr::whereis`](crate::actor::Addr::whereis) (or
/// [`Addr::lookup`](crate::actor::Addr::lookup)) found no actor of the
/// type asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorLookupError {
    /// No live process or actor is registered under the name.
    NotRegistered,
    /// The name's holder is a process, not a handler actor.
    NotAnActor(Pid),
    /// The name's holder is a handler actor of another type.
    WrongType {
        /// The holder.
        pid: Pid,
        /// The actor type asked for.
        expected: &'static str,
        /// The holder's actor type.
        found: &'static str,
    },
    /// Called outside a process and off any worker: use
    /// [`Addr::lookup`](crate::actor::Addr::lookup) with a runtime.
    NotInProcess,
}

impl fmt::Display for ActorLookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActorLookupError::NotRegistered => f.write_str("nothing live is registered under that name"),
            ActorLookupError::NotAnActor(pid) => {
                write!(f, "{pid} is a process, not a handler actor: reach it with a channel or a ServerRef")
            }
            ActorLookupError::WrongType { pid, expected, found } => {
                write!(f, "{pid} is an actor of type {found}, not {expected}")
            }
            ActorLookupError::NotInProcess => {
                f.write_str("whereis called outside a process: use Addr::lookup with a runtime")
            }
        }
    }
}

impl core::error::Error for ActorLookupError {}
