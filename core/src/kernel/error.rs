//! The core's error types. Each says what happened and what to do.

use core::fmt;
use smarm_platform::StackError;

use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;

/// Why a spawn failed. Nothing was started; the closure was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnError {
    /// The cap on processes alive at once, handler actors included, is
    /// reached (`Config::max_processes`, or the pid index space
    /// `MAX_PROCESSES`): wait for processes to exit or raise the cap.
    Full,
    /// The slab needed a new segment and the memory could not be had: wait
    /// for processes to exit (their slots are reused) or free memory.
    OutOfMemory,
    /// No stack could be had for the process.
    Stack(StackError),
    /// The named worker does not exist in this runtime.
    NoSuchWorker(usize),
    /// Called outside any process, with no runtime handle to spawn through.
    NotInProcess,
    /// The runtime has finished (its host closed it): no process would
    /// ever run. Spawn into a running runtime.
    Closed,
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::Full => {
                f.write_str("process slab is full (the max_processes cap is reached): raise or unset max_processes, or wait for exits")
            }
            SpawnError::OutOfMemory => {
                f.write_str("out of memory for the process slab: wait for exits or free memory")
            }
            SpawnError::Stack(e) => write!(f, "no stack for the new process: {e}"),
            SpawnError::NoSuchWorker(w) => write!(f, "no worker {w} in this runtime"),
            SpawnError::NotInProcess => {
                f.write_str("spawn called outside a process: spawn through a Runtime handle instead")
            }
            SpawnError::Closed => f.write_str(
                "the runtime has finished and accepts no more processes: spawn into a running one",
            ),
        }
    }
}
impl core::error::Error for SpawnError {}

/// A worker index the runtime does not have: its workers are numbered
/// `0 .. worker_count()`. Every call that takes a worker index says so
/// with this (a spawn with [`SpawnError::NoSuchWorker`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoSuchWorker(pub usize);

impl fmt::Display for NoSuchWorker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no worker {} in this runtime: workers are numbered from 0 to worker_count() - 1", self.0)
    }
}
impl core::error::Error for NoSuchWorker {}

/// A driver index the runtime does not have: its drivers (the threads
/// that sleep on its park tokens) are numbered `0 .. driver_count()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoSuchDriver(pub usize);

impl fmt::Display for NoSuchDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no driver {} in this runtime: drivers are numbered from 0 to driver_count() - 1", self.0)
    }
}
impl core::error::Error for NoSuchDriver {}

impl From<NoSuchWorker> for SpawnError {
    fn from(NoSuchWorker(worker): NoSuchWorker) -> SpawnError {
        SpawnError::NoSuchWorker(worker)
    }
}

/// The process named by a pid has exited (or never existed): Erlang's
/// `noproc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoProc(pub Pid);

impl fmt::Display for NoProc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no process {}: it has exited or never existed", self.0)
    }
}
impl core::error::Error for NoProc {}

/// Why a `join` did not return the process's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinError {
    /// The process ended without a value: it panicked, was stopped, or was
    /// stopped by a linked process's death. The reason is the one its
    /// monitors see (converted with `From<ExitReason>`).
    Exited(ExitReason),
    /// `join` would wait on a worker's driver outside any process (a
    /// handler actor), where waiting would stall the worker: use
    /// `try_join`.
    NotInProcess,
}

impl JoinError {
    /// Whether the process panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Exited(reason) if reason.is_panic())
    }

    /// Whether the process was stopped from outside: by `request_stop`, a
    /// link, or an exit signal.
    pub fn is_stopped(&self) -> bool {
        matches!(
            self,
            JoinError::Exited(
                ExitReason::Stopped | ExitReason::Linked { .. } | ExitReason::Killed | ExitReason::Other(_)
            )
        )
    }

    /// The panic message, if the process panicked.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Exited(reason) => reason.panic_message(),
            JoinError::NotInProcess => None,
        }
    }

    /// The exit reason, if the process ended.
    pub fn reason(&self) -> Option<&ExitReason> {
        match self {
            JoinError::Exited(reason) => Some(reason),
            JoinError::NotInProcess => None,
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Exited(reason) => write!(f, "process ended without a value: {reason}"),
            JoinError::NotInProcess => {
                f.write_str("join would wait, on a worker's driver outside any process: use try_join")
            }
        }
    }
}
impl core::error::Error for JoinError {}

impl From<ExitReason> for JoinError {
    /// A death without a value, as `join` reports it.
    fn from(reason: ExitReason) -> JoinError {
        JoinError::Exited(reason)
    }
}

/// A call that needs a process, or a wait, was made where there is none.
///
/// Every blocking call of smarm — a channel's `recv` and full or
/// rendezvous `send`, `select`, the mutex, `join`, a monitor's `Down`, a
/// gen_server `call`, `block_on` — parks the calling
/// process, and on a plain OS thread (`main`, a thread of your own) blocks
/// the thread, with timed variants honouring their deadline either way.
/// Waiting has no meaning, and these calls return `NotInProcess` (the
/// `NotInProcess` variant of their error) where they would wait, in two
/// places only:
///
/// - **on a worker's driver outside any process** — inside a handler
///   actor's `handle`, a worker extension, a host hook — where sleeping
///   would stall every process of that worker (there the non-waiting part
///   still runs: a message already queued is returned, an uncontended
///   lock is taken);
/// - **on a host that cannot block threads** (bare metal, the plain
///   platform's tests), for code outside a process.
///
/// Calls that act on the caller as a process — `spawn` on the caller's
/// worker, `self_pid`, `register`, `trap_exit`, an `ActorLocal` — say
/// `NotInProcess` anywhere outside a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotInProcess;

impl fmt::Display for NotInProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("this call needs a process (or a wait) and was made where there is none")
    }
}
impl core::error::Error for NotInProcess {}
