//! Why a send to an actor, an inbox or a remote address failed.

use core::fmt;

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
