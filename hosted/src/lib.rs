//! smarm: Erlang-style actors on stackful green threads.
//!
//! A *process* is a closure running on its own small stack, written as
//! plain blocking code. It is pinned to one logical worker for life, and
//! blocks by parking — never the OS thread. This crate is what a std binary
//! links: it supplies the host side of `smarm-core` (the current worker in
//! a thread-local, panic capture with `catch_unwind`, the Linux platform)
//! and the entry points:
//!
//! - [`run`] / [`run_with`]: every worker driven from the calling thread,
//!   deterministically — for tests and simple programs.
//! - [`Engine`] (built with [`Engine::builder`] or [`runtime::init`]): one
//!   OS thread per worker, with a spinning idle policy — the multi-core
//!   runtime.
//!
//! Around them: [`io`] (blocking jobs on io threads, fd readiness),
//! [`PreemptingAlloc`] (preemption at allocation), [`ActorLocal`] /
//! [`local!`] (storage that travels with a process), stack-overflow reports
//! naming the process, and a panic hook naming it too.
//!
//! ```
//! let total = smarm::run(|| {
//!     let handles: Vec<_> = (0..10).map(|_| smarm::spawn(|| smarm::yield_now()).unwrap()).collect();
//!     handles.into_iter().map(|h| h.join()).filter(Result::is_ok).count()
//! });
//! assert_eq!(total, 10);
//! ```
//!
//! # Thread-locals
//!
//! A process may be resumed on a different OS thread than the one it was
//! suspended on (hosts are free to move a worker between threads). Never
//! hold a `thread_local!` borrow — or anything derived from the current
//! thread — across a switch point: a yield, a park (any blocking call), a
//! `check!()`, or, with [`PreemptingAlloc`], any allocation. For state that
//! belongs to a process, use [`ActorLocal`].
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]

mod alloc;
mod context;
mod engine;
mod host;
pub mod io;
mod stepper;

use std::sync::Arc;

pub use alloc::PreemptingAlloc;
pub use engine::{available_cpus, Builder, Engine};
pub use host::StopSentinel;
/// Handler actors (re-exported from `smarm-core`).
pub use smarm_core::actor;
pub use smarm_core::actor::{
    ActorStatus, Ask, ExternalSender, Inbox, InboxAddr, ProcessInfo, RemoteEnvelope, RemoteSink, ReplyTo,
    RuntimeExtension, SpawnInfo, SystemInfo, WorkerCtx, WorkerExtension, WorkerStats,
};
/// A process's state word state, as `list_processes` reports it.
pub use smarm_core::kernel::state::State as ProcessState;
pub use smarm_core::otp::local::ActorLocal;
/// Supervisors and gen_server (re-exported from `smarm-core`).
pub use smarm_core::otp::{gen_server, supervisor};
pub use smarm_core::{
    begin_wait, current_runtime, current_worker, maybe_preempt, park, request_stop, retire_wait, self_pid,
    spawn, spawn_on, wake_at, yield_now, Admin, BuildError, Config, ConfigError, ExitReason, Instant,
    JoinError, JoinHandle, NoPreempt, NoProc, NotInProcess, Pid, Runtime, SpawnError, StatsSnapshot, Waker,
    MAX_ACTORS, MAX_WORKERS,
};
/// Process primitives: channels, select, the actor mutex, monitors, links
/// and the registry (re-exported from `smarm-core`).
pub use smarm_core::{
    bounded, channel, demonitor, exit, link, monitor, name_of, register, select, select_timeout, trap_exit,
    unlink, unregister, whereis, Down, ExitSignal, IntoIter, Iter, LockError, Monitor, MonitorId, Mutex,
    MutexGuard, Never, Receiver, RecvError, RecvTimeoutError, RegisterError, Select, Selectable, SendError,
    SendTimeoutError, Sender, TryIter, TryRecvError, TrySendError,
};
pub use smarm_core::{
    spawn_actor, Actor, ActorAddress, ActorInfo, ActorMonitor, ActorSendError, ActorStats, Addr, Ctx,
};
pub use smarm_core::{
    CallError, Child, ChildInfo, ChildSpec, GenServer, Restart, Server, ServerCtx, ServerRef, Shutdown,
    StartError, Strategy, Supervisor, SupervisorError, SupervisorRef, TerminateReason, Watcher,
};
use smarm_core::{Drivers, RuntimeParts, SingleThreadRuntime};
pub use stepper::Stepper;

use smarm_platform::linux::LinuxPlatform;

/// The entry point for the multi-threaded runtime: `smarm::runtime::init(config)`.
pub mod runtime {
    #![deny(unsafe_code)]
    use crate::{Config, Engine, RunError};

    /// Builds and starts an [`Engine`] from `config`: one OS thread per
    /// worker (`config.worker_count`), idle policy from
    /// `config.spin_budget_cycles` and `config.max_spinners`. Equivalent to
    /// `Engine::builder().config(config).build()`.
    pub fn init(config: Config) -> Result<Engine, RunError> {
        Engine::new(config)
    }
}

/// Declares actor-local storage: statics of type [`ActorLocal`], each
/// process seeing its own value, lazily initialised by the expression.
///
/// ```
/// smarm::local! {
///     /// Requests served by this process.
///     static SERVED: u64 = 0;
/// }
/// smarm::run(|| {
///     SERVED.with_mut(|n| *n += 1);
///     smarm::yield_now();
///     assert_eq!(SERVED.get(), Ok(1));
/// });
/// ```
#[macro_export]
macro_rules! local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident : $t:ty = $init:expr; $($rest:tt)*) => {
        $(#[$attr])* $vis static $name: $crate::ActorLocal<$t> = $crate::ActorLocal::new(|| $init);
        $crate::local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident : $t:ty = $init:expr) => {
        $(#[$attr])* $vis static $name: $crate::ActorLocal<$t> = $crate::ActorLocal::new(|| $init);
    };
}

/// An observation point for `request_stop` (and a preemption point) for
/// loops that neither allocate nor block. A tight loop without one cannot
/// be stopped.
#[macro_export]
macro_rules! check {
    () => {
        $crate::check_point()
    };
}

/// The function behind [`check!`].
#[doc(hidden)]
pub fn check_point() {
    smarm_core::check();
}

/// Parks the calling process for `duration`; outside a process, sleeps the
/// thread.
pub fn sleep(duration: std::time::Duration) {
    if smarm_core::sleep(duration).is_err() {
        std::thread::sleep(duration);
    }
}

/// Parks the calling process until `deadline` on the runtime clock
/// ([`now`]). Outside a process: `Err(NotInProcess)`.
pub fn sleep_until(deadline: Instant) -> Result<(), NotInProcess> {
    smarm_core::sleep_until(deadline)
}

/// The runtime's monotonic clock, inside a process.
pub fn now() -> Option<Instant> {
    smarm_core::now()
}

/// Why [`try_run`] did not return the root's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The runtime could not be built.
    Build(BuildError),
    /// The platform could not be set up; the reason.
    Platform(String),
    /// The root process panicked; its message.
    Panicked(String),
    /// The root process was stopped before returning.
    Stopped,
    /// The root could not be spawned.
    Spawn(SpawnError),
    /// An OS thread for a worker could not be started; the reason.
    Thread(String),
}

impl RunError {
    /// The root's value, or why there is none, once the runtime finished.
    pub(crate) fn from_root<R: Send + 'static>(handle: JoinHandle<R>) -> Result<R, RunError> {
        match handle.try_join() {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(JoinError::Exited(ExitReason::Panicked(message)))) => Err(RunError::Panicked(message)),
            Ok(Err(_)) | Err(_) => Err(RunError::Stopped),
        }
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Build(e) => write!(f, "{e}"),
            RunError::Platform(e) => write!(f, "platform setup failed: {e}"),
            RunError::Panicked(m) => write!(f, "root process panicked: {m}"),
            RunError::Stopped => f.write_str("root process was stopped"),
            RunError::Spawn(e) => write!(f, "{e}"),
            RunError::Thread(e) => write!(f, "cannot start a worker thread: {e}"),
        }
    }
}
impl std::error::Error for RunError {}

/// The smallest `stack_size` the hosted runtime accepts: 64 KiB.
///
/// A panicking process runs std's panic hook on its own stack, and with
/// `RUST_BACKTRACE=1` or `full` the hook captures and symbolises a
/// backtrace there: measured at about 22 KiB on x86_64 and 24 KiB on
/// aarch64 below the panicking frame, for the first panic of the program
/// (which also loads the debug information). 64 KiB leaves room for that
/// and for the process's own frames, and costs only address space: stacks
/// are committed page by page as they are touched. The core alone would
/// accept 16 KiB ([`smarm_core::MIN_STACK_SIZE`]), which a panic with a
/// backtrace overflows.
pub const MIN_STACK_SIZE: usize = 64 * 1024;

/// Builds runtime parts for the hosted platform, after the process-wide
/// setup every hosted runtime needs: the host hooks, the stack-overflow
/// handler and the panic hook.
pub(crate) fn build_parts(
    config: Config,
    drivers: Drivers,
) -> Result<(RuntimeParts, Arc<LinuxPlatform>), RunError> {
    config.validate_with_min_stack(MIN_STACK_SIZE).map_err(|e| RunError::Build(BuildError::Config(e)))?;
    smarm_platform::linux::install_overflow_handler()
        .map_err(|e| RunError::Platform(format!("cannot install the stack-overflow handler: {e}")))?;
    host::install_panic_hook();
    let platform = Arc::new(LinuxPlatform::new().map_err(|e| RunError::Platform(e.to_string()))?);
    let parts =
        RuntimeParts::new(config, platform.clone(), &host::HOOKS, drivers).map_err(RunError::Build)?;
    Ok((parts, platform))
}

/// Runs `root` as the root process of a fresh single-threaded runtime
/// (`config.worker_count` workers, all driven from the calling thread,
/// deterministically) and returns its value once every process has exited.
pub fn try_run_with<R, F>(config: Config, root: F) -> Result<R, RunError>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    let (parts, platform) = build_parts(config, Drivers::Single)?;
    let context = context::HostContext::new(parts.runtime.clone(), platform, context::DEFAULT_IO_THREADS);
    let _entered = context::enter(context.clone());
    let _alt_stack = smarm_platform::linux::ensure_alt_stack();
    let mut single = SingleThreadRuntime::new(parts);
    let handle = single.runtime().spawn_on(0, stop_all_if_root_panics(root)).map_err(RunError::Spawn)?;
    single.run();
    // Finished: refuse spawns from cloned handles, then drive the ones
    // that raced with the close to their end.
    single.runtime().close();
    single.run();
    context.shutdown();
    RunError::from_root(handle)
}

/// Wraps a root process's body: if it panics, every other process and
/// actor of the runtime is asked to stop, so the host that waits for the
/// runtime to finish reports the panic instead of waiting on them.
pub(crate) fn stop_all_if_root_panics<R, F>(root: F) -> impl FnOnce() -> R + Send + 'static
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    struct Guard;
    impl Drop for Guard {
        fn drop(&mut self) {
            if std::thread::panicking() {
                if let Some(runtime) = smarm_core::current_runtime() {
                    runtime.stop_all();
                }
            }
        }
    }
    move || {
        let _guard = Guard;
        root()
    }
}

/// [`try_run_with`] on the default one-worker configuration.
pub fn try_run<R, F>(root: F) -> Result<R, RunError>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    try_run_with(Config::default(), root)
}

/// Runs `root` as the root process of a fresh one-worker runtime on the
/// calling thread and returns its value once every process has exited.
/// Scheduling is deterministic: tests may rely on the order.
///
/// # Panics
///
/// If the root process panics, every other process and actor is asked to
/// stop, and `run` panics with the root's message (as
/// `std::thread::scope` does); if the runtime cannot start, with the
/// reason. Use [`try_run`] to get these as a `Result`.
pub fn run<R, F>(root: F) -> R
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    match try_run(root) {
        Ok(value) => value,
        Err(e) => panic!("smarm::run: {e}"),
    }
}

/// [`run`] with a configuration (e.g. several workers, all driven from the
/// calling thread).
///
/// # Panics
///
/// As [`run`].
pub fn run_with<R, F>(config: Config, root: F) -> R
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    match try_run_with(config, root) {
        Ok(value) => value,
        Err(e) => panic!("smarm::run: {e}"),
    }
}
