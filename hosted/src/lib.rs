//! smarm: Erlang-style actors on stackful green threads.
//!
//! A *process* is a closure running on its own small stack, written as
//! plain blocking code. It is pinned to one logical worker for life, and
//! blocks by parking — never the OS thread. This crate is what a std binary
//! links: it supplies the host side of `smarm-core` (the current worker in
//! a thread-local, panic capture with `catch_unwind`, the Linux platform)
//! and the entry points.
//!
//! ```
//! let total = smarm::run(|| {
//!     let handles: Vec<_> = (0..10).map(|_| smarm::spawn(|| smarm::yield_now()).unwrap()).collect();
//!     handles.into_iter().map(|h| h.join()).filter(Result::is_ok).count()
//! });
//! assert_eq!(total, 10);
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod host;

use std::sync::Arc;

pub use host::StopSentinel;
pub use smarm_core::{
    begin_wait, current_runtime, current_worker, maybe_preempt, park, request_stop, retire_wait, self_pid,
    spawn, spawn_on, wake_at, yield_now, Admin, BuildError, Config, ConfigError, Instant, JoinError,
    JoinHandle, NoProc, NotInProcess, Outcome, Pid, Runtime, SpawnError, StatsSnapshot, Waker,
};
/// Process primitives: channels, select, the actor mutex, monitors, links
/// and the registry (re-exported from `smarm-core`).
pub use smarm_core::{
    bounded, channel, demonitor, link, monitor, name_of, register, select, select_timeout, trap_exit, unlink,
    unregister, whereis, Down, DownReason, ExitSignal, LockError, Monitor, MonitorId, Mutex, MutexGuard,
    Receiver, RecvError, RecvTimeoutError, RegisterError, Selectable, SendError, Sender, TryRecvError,
    TrySendError,
};
use smarm_core::{Drivers, RuntimeParts, SingleThreadRuntime};
use smarm_platform::linux::LinuxPlatform;

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
    /// The platform could not be set up (OS error number).
    Platform(String),
    /// The root process panicked; its message.
    Panicked(String),
    /// The root process was stopped before returning.
    Stopped,
    /// The root could not be spawned.
    Spawn(SpawnError),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Build(e) => write!(f, "{e}"),
            RunError::Platform(e) => write!(f, "platform setup failed: {e}"),
            RunError::Panicked(m) => write!(f, "root process panicked: {m}"),
            RunError::Stopped => f.write_str("root process was stopped"),
            RunError::Spawn(e) => write!(f, "{e}"),
        }
    }
}
impl std::error::Error for RunError {}

/// Builds runtime parts for the hosted platform.
pub(crate) fn build_parts(config: Config, drivers: Drivers) -> Result<RuntimeParts, RunError> {
    let platform = LinuxPlatform::new().map_err(|e| RunError::Platform(e.to_string()))?;
    RuntimeParts::new(config, Arc::new(platform), &host::HOOKS, drivers).map_err(RunError::Build)
}

/// Runs `root` as the root process of a fresh single-threaded runtime
/// (`config.worker_count` workers, all driven from the calling thread,
/// deterministically) and returns its value once every process has exited.
pub fn try_run_with<R, F>(config: Config, root: F) -> Result<R, RunError>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    let parts = build_parts(config, Drivers::Single)?;
    let mut single = SingleThreadRuntime::new(parts);
    let result = Arc::new(std::sync::Mutex::new(None));
    let slot = result.clone();
    let handle = single
        .runtime()
        .spawn_on(0, move || {
            let value = root();
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
        })
        .map_err(RunError::Spawn)?;
    single.run();
    match handle.try_join() {
        Some(Ok(())) => {
            result.lock().unwrap_or_else(|p| p.into_inner()).take().ok_or(RunError::Stopped)
        }
        Some(Err(JoinError::Panicked(message))) => Err(RunError::Panicked(message)),
        Some(Err(JoinError::NotInProcess)) | None => Err(RunError::Stopped),
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
/// If the root process panics, `run` panics with its message (as
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
