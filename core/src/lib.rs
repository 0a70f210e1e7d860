//! smarm-core: the `no_std` heart of smarm.
//!
//! It owns the slab of process slots and their state words, the per-worker
//! ready queues, ingress rings and timers, the stackful processes and the
//! wait protocol they block through. It only *transitions*: a host drives
//! it by calling [`Worker::try_tick`] — the hosted engine from one OS
//! thread per worker, [`SingleThreadRuntime`] from one thread, a bare-metal
//! image from its boot loop.
//!
//! Design principles:
//! - **One word per process.** A slot's state, epoch and generation live in
//!   one `AtomicU64` ([`kernel::state::StateWord`]); every transition is one CAS
//!   that checks its precondition, the generation included.
//! - **Wakes are precise.** Every wake is stamped with the wait's epoch and
//!   consumes it; the only wildcard wake is the terminal `request_stop`.
//! - **Workers own their processes.** A process is pinned to one worker;
//!   other threads reach it only through that worker's rings.
//! - **Limits are errors.** A full slab, a stale pid, a closed channel are
//!   typed errors, never panics.
//! - **No OS.** Nothing here names a thread or an OS: time, stacks and
//!   parking come from [`smarm_platform::Platform`], the current worker and
//!   panic capture from the host's [`HostHooks`].
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]
#![deny(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

extern crate alloc;
#[cfg(any(test, loom))]
extern crate std;

pub mod actor;
pub mod kernel;
pub mod otp;
pub mod sync;

pub use actor::{
    spawn_actor, Actor, ActorAddress, ActorInfo, ActorLookupError, ActorMonitor, ActorSendError, ActorStats,
    Addr, Ctx,
};
#[allow(deprecated)]
pub use kernel::config::MAX_ACTORS;
pub use kernel::config::{Config, ConfigError, MAX_PROCESSES, MAX_WORKERS, MIN_BARE_STACK_SIZE};
pub use kernel::current::handling_actor;
pub use kernel::error::{JoinError, NoProc, NoSuchDriver, NoSuchWorker, NotInProcess, SpawnError};
pub use kernel::exit::ExitReason;
pub use kernel::host::HostHooks;
pub use kernel::join::{spawn, spawn_on, JoinHandle};
pub use kernel::pid::Pid;
pub use kernel::preempt::NoPreempt;
pub use kernel::process::{
    begin_wait, check, current_runtime, current_worker, maybe_preempt, now, park, request_stop, retire_wait,
    self_pid, sleep, sleep_until, wake_at, yield_now, Waker,
};
pub use kernel::runtime::{Admin, BuildError, Drivers, Runtime, RuntimeParts};
pub use kernel::single::SingleThreadRuntime;
pub use kernel::time::Instant;
pub use kernel::wait::Waiter;
pub use kernel::worker::{abandon_current, StatsSnapshot, Worker};
pub use otp::gen_server::{
    CallError, GenServer, Server, ServerCtx, ServerLookupError, ServerRef, TerminateReason, Watcher,
};
pub use otp::link::{exit, link, trap_exit, unlink, ExitSignal};
pub use otp::monitor::{demonitor, monitor, Down, Monitor, MonitorId};
pub use otp::registry::{name_of, register, unregister, whereis, RegisterError};
pub use otp::supervisor::{
    Child, ChildInfo, ChildSpec, Restart, Shutdown, StartError, Strategy, Supervisor, SupervisorError,
    SupervisorRef,
};
pub use sync::block_on::{block_on, CannotBlock};
pub use sync::channel::{
    bounded, channel, IntoIter, Iter, Receiver, RecvError, RecvTimeoutError, Selectable, SendError,
    SendTimeoutError, Sender, TryIter, TryRecvError, TrySendError, WeakSender,
};
pub use sync::mutex::{LockError, Mutex, MutexGuard};
pub use sync::select::{select, select_timeout, Never, Select};
