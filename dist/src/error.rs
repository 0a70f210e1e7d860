//! The node's errors: each says what failed and what to do.

use std::fmt;
use std::io;

use crate::term::{ConvertError, ErlPid, Term};

/// Why a node could not start, reach a peer or send.
///
/// ```
/// let error = smarm_dist::DistError::BadName("no spaces allowed".into());
/// assert!(error.to_string().contains("node name"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum DistError {
    /// The node name is not `name` or `name@host`.
    BadName(String),
    /// Called outside a smarm process (the node's calls park their caller).
    NotInProcess,
    /// epmd could not be reached or refused the registration.
    Epmd(String),
    /// The peer node is not registered with epmd on its host.
    UnknownNode(String),
    /// The peer closed the connection during the handshake: the cookies
    /// differ, or it refuses this node.
    Refused {
        /// The peer.
        node: String,
        /// What the handshake saw.
        reason: String,
    },
    /// The handshake with the peer failed for another reason.
    Handshake {
        /// The peer.
        node: String,
        /// What failed.
        reason: String,
    },
    /// A socket error.
    Io(io::Error),
    /// The node has been stopped.
    Stopped,
    /// A name is registered already on this node.
    NameTaken(String),
    /// The calling process has a mailbox already.
    MailboxTaken,
    /// A local process that does not exist (a link to it was refused).
    NoProc(ErlPid),
}

impl fmt::Display for DistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DistError::BadName(name) => {
                write!(f, "bad node name {name:?}: use `name` or `name@host` (letters, digits, `_`, `-`)")
            }
            DistError::NotInProcess => f.write_str("call this from inside a smarm process"),
            DistError::Epmd(reason) => write!(f, "epmd: {reason} (is `epmd -daemon` running?)"),
            DistError::UnknownNode(node) => write!(f, "node {node} is not registered with epmd on its host"),
            DistError::Refused { node, reason } => {
                write!(f, "{node} closed the handshake ({reason}): check that both nodes use the same cookie")
            }
            DistError::Handshake { node, reason } => write!(f, "handshake with {node} failed: {reason}"),
            DistError::Io(e) => write!(f, "socket error: {e}"),
            DistError::Stopped => f.write_str("the node has been stopped"),
            DistError::NameTaken(name) => write!(f, "the name {name} is registered already on this node"),
            DistError::MailboxTaken => f.write_str("this process has a mailbox already: use that one"),
            DistError::NoProc(pid) => {
                write!(f, "no process {pid:?} on this node (ended, or of an earlier run)")
            }
        }
    }
}

impl std::error::Error for DistError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DistError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for DistError {
    fn from(e: io::Error) -> Self {
        DistError::Io(e)
    }
}

/// Why a call to a gen_server across the border failed.
///
/// ```
/// let error = smarm_dist::CallError::Timeout;
/// assert!(error.to_string().contains("no reply"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum CallError {
    /// No reply within the timeout.
    Timeout,
    /// The server died or could not be reached before replying; the
    /// reason as Erlang gives it (`noproc`, `noconnection`, …).
    Exit(Term),
    /// The reply did not convert into the expected type; it is handed back.
    Convert(ConvertError),
    /// The request could not be sent.
    Dist(DistError),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Timeout => f.write_str("no reply within the timeout: the server may be busy or gone"),
            CallError::Exit(reason) => write!(f, "the server exited before replying: {reason}"),
            CallError::Convert(e) => write!(f, "the reply did not convert: {e}"),
            CallError::Dist(e) => write!(f, "the request could not be sent: {e}"),
        }
    }
}

impl std::error::Error for CallError {}

impl From<DistError> for CallError {
    fn from(e: DistError) -> Self {
        CallError::Dist(e)
    }
}

/// Why a receive on a mailbox returned nothing.
///
/// ```
/// let error = smarm_dist::RecvError::Timeout;
/// assert!(error.to_string().contains("timeout"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecvError {
    /// Nothing arrived within the timeout.
    Timeout,
    /// The node was stopped: nothing more will arrive.
    Stopped,
    /// Called outside a smarm process.
    NotInProcess,
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Timeout => f.write_str("nothing arrived within the timeout"),
            RecvError::Stopped => f.write_str("the node was stopped: nothing more will arrive"),
            RecvError::NotInProcess => f.write_str("receive from inside a smarm process"),
        }
    }
}

impl std::error::Error for RecvError {}
