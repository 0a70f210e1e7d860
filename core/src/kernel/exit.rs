//! Why a process ended: the one vocabulary for a death.
//!
//! A host reports how a process body ended with an [`ExitReason`]
//! (`Normal`, `Stopped` or `Panicked`); the kernel refines `Stopped` with
//! the reason the stop was requested with, if any (a linked process's
//! death arrives as `Linked`); monitors, linked peers and supervisors see
//! that same value, and [`JoinHandle::join`](crate::JoinHandle::join)
//! hands every non-normal one back inside
//! [`JoinError::Exited`](crate::JoinError::Exited) through
//! one `From`.

use alloc::boxed::Box;
use alloc::string::String;
use core::fmt;

use crate::kernel::pid::Pid;

/// Why a process ended, as its joiner, its monitors and its linked peers
/// see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitReason {
    /// Its body returned.
    Normal,
    /// It was stopped (`request_stop`), or abandoned by a host without
    /// unwinding.
    Stopped,
    /// It panicked; the panic message.
    Panicked(String),
    /// It was stopped because a linked process died abnormally.
    Linked {
        /// The linked process that died.
        peer: Pid,
        /// Why that process died.
        reason: Box<ExitReason>,
    },
    /// It did not exist when it was monitored or linked to (Erlang's
    /// `noproc`).
    NoProc,
    /// It was ended by an untrappable exit signal (Erlang's `kill`, seen as
    /// `killed`). Sending it: `exit(pid, ExitReason::Killed)`.
    Killed,
    /// It was shut down by its supervisor (Erlang's `shutdown`): the exit
    /// signal a supervisor sends a plain child it stops. A child that traps
    /// exits receives it as a message and may clean up first; a `Transient`
    /// child ending with it is not restarted.
    Shutdown,
    /// The connection to its node was lost (Erlang's `noconnection`): the
    /// reason a distribution transport gives every link and monitor that
    /// crossed the lost connection.
    NoConnection,
    /// It was ended by an exit signal with a reason of the sender's
    /// choosing (`exit(pid, ExitReason::Other("timeout".into()))`).
    Other(String),
}

impl ExitReason {
    /// Whether this death propagates over links: anything but `Normal`.
    pub fn is_abnormal(&self) -> bool {
        !matches!(self, ExitReason::Normal)
    }

    /// Whether the process panicked (directly, not through a link).
    pub fn is_panic(&self) -> bool {
        matches!(self, ExitReason::Panicked(_))
    }

    /// The panic message, if the process panicked.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            ExitReason::Panicked(message) => Some(message),
            _ => None,
        }
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitReason::Normal => f.write_str("normal"),
            ExitReason::Stopped => f.write_str("stopped"),
            ExitReason::Panicked(m) => write!(f, "panicked: {m}"),
            ExitReason::Linked { peer, reason } => write!(f, "linked process {peer} died ({reason})"),
            ExitReason::NoProc => f.write_str("noproc"),
            ExitReason::Killed => f.write_str("killed"),
            ExitReason::Shutdown => f.write_str("shutdown"),
            ExitReason::NoConnection => f.write_str("noconnection"),
            ExitReason::Other(reason) => write!(f, "exit: {reason}"),
        }
    }
}
