//! The seams of the actor layer: a runtime extension told of every
//! actor's start and end, with one worker extension per worker, and the
//! remote sink a transport to other nodes plugs in.

use alloc::boxed::Box;
use core::any::Any;
use core::fmt;

use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::Runtime;

/// What the runtime tells its extension about a new actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnInfo {
    /// The actor's pid.
    pub pid: Pid,
    /// Its worker.
    pub worker: usize,
    /// Its type name.
    pub type_name: &'static str,
    /// Who spawned it (an actor or a process), if anyone.
    pub parent: Option<Pid>,
}

/// A runtime-wide extension: told of every actor's start and end, and
/// asked for one [`WorkerExtension`] per worker. Set once per runtime with
/// [`Runtime::set_extension`].
pub trait RuntimeExtension: Send + Sync + 'static {
    /// An actor was installed on its worker (called there, before its
    /// `on_start`).
    fn on_spawn(&self, info: &SpawnInfo) {
        let _ = info;
    }

    /// An actor ended (called on its worker).
    fn on_actor_death(&self, pid: Pid, reason: &ExitReason) {
        let _ = (pid, reason);
    }

    /// Worker `worker`'s extension, made on that worker's next pass.
    fn create_worker_extension(&self, worker: usize) -> Option<Box<dyn WorkerExtension>> {
        let _ = worker;
        None
    }
}

/// Work of an extension on one worker, in every pass after the ingress
/// drains and before the actors run. Lives on its worker: it is never
/// touched by two threads.
pub trait WorkerExtension: 'static {
    /// Whether it has work the next pass must do (so the worker does not
    /// park).
    fn has_pending_work(&self) -> bool {
        false
    }

    /// One step; returns whether it did work.
    fn on_tick(&mut self, ctx: &mut WorkerCtx<'_>) -> bool;
}

/// What a worker extension sees.
#[derive(Debug)]
pub struct WorkerCtx<'a> {
    worker: usize,
    runtime: &'a Runtime,
}

impl WorkerCtx<'_> {
    pub(crate) fn new(worker: usize, runtime: &Runtime) -> WorkerCtx<'_> {
        WorkerCtx { worker, runtime }
    }

    /// The worker.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// The runtime (send to actors, spawn, inspect).
    pub fn runtime(&self) -> &Runtime {
        self.runtime
    }
}

/// Where a runtime sends messages for addresses that are neither its
/// actors nor its inboxes: a transport to other nodes plugs in here.
///
/// A transport gives its peers' actors [`ActorAddress::remote`](crate::actor::ActorAddress::remote) addresses
/// (a node number and an id of its choosing); a send to one reaches
/// [`RemoteSink::deliver`] with the payload still typed-erased and the
/// type's name, to serialize and ship. On the receiving node the transport
/// decodes the message and sends it to the local `Addr` it names. No sink
/// installed: such a send is `ActorSendError::NoRoute` with the message
/// back.
pub trait RemoteSink: Send + Sync + 'static {
    /// Takes one message for a remote address; `Err` hands it back (the
    /// sender gets `NoRoute`).
    fn deliver(&self, envelope: RemoteEnvelope) -> Result<(), RemoteEnvelope>;
}

/// A message for a remote address.
pub struct RemoteEnvelope {
    /// The node the address names.
    pub node: u64,
    /// The id on that node.
    pub id: u64,
    /// The message.
    pub payload: Box<dyn Any + Send>,
    /// The message's type name.
    pub type_name: &'static str,
}

impl fmt::Debug for RemoteEnvelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteEnvelope")
            .field("node", &self.node)
            .field("id", &self.id)
            .field("type_name", &self.type_name)
            .finish_non_exhaustive()
    }
}

/// The extension or sink was set already: each is set once per runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlreadySet;

impl fmt::Display for AlreadySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("already set for this runtime: set it once, before spawning")
    }
}
impl core::error::Error for AlreadySet {}
