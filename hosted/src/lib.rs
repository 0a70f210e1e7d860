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
//! Around them: [`net`] (TCP, UDP and Unix sockets whose blocking calls
//! park the process), [`io`] (blocking jobs on io threads, fd readiness),
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
//! # Processes or handler actors
//!
//! Two kinds of actor share one runtime, one pid space, and one set of
//! monitors, links, names and supervisors:
//!
//! - A **process** ([`spawn`], [`spawn_on`]) has its own stack and runs
//!   blocking-style code: `recv`, [`select`], [`sleep`], [`Mutex`], socket
//!   reads through [`io`], `join`. Reach for one when the logic reads as a
//!   sequence of waits — a connection, a protocol, a worker that does a job
//!   at a time. It costs a slot and a stack (one resident page while it is
//!   shallow).
//! - A **handler actor** ([`Actor`], [`spawn_actor`]) has no stack: a
//!   `handle` method the worker calls once per message, on the worker's own
//!   stack. Reach for one when the logic is a state machine reacting to
//!   messages — counters, routers, registries, caches — and there are very
//!   many of them: it costs a boxed struct and a mailbox. It must not block
//!   (there is nothing to park); it sends, spawns and replies instead.
//!
//! A process talks to an actor through its [`Addr`]; an actor answers a
//! process through an [`InboxAddr`] or a [`ReplyTo`] (an [`Ask`]).
//!
//! # Supervision
//!
//! Failures are contained, observed and repaired, as in Erlang/OTP:
//!
//! - A panic ends its process only: its `join` reports
//!   [`JoinError::Exited`] with [`ExitReason::Panicked`] and the message.
//! - [`monitor`] delivers one [`Down`] with the exact reason; [`link`] ties
//!   two lives together (an abnormal end stops the partner), unless the
//!   partner calls [`trap_exit`] and receives [`ExitSignal`]s instead.
//! - [`Supervisor`] starts children, watches them, restarts them by
//!   [`Strategy`] (one-for-one, one-for-all, rest-for-one) within a restart
//!   intensity, and shuts them down in order; supervisors nest.
//! - [`GenServer`] is the request/response server: `call` (with a
//!   timeout), `cast`, info messages and monitor `Down`s, with `terminate`
//!   run however it ends; a supervisor can own one.
//!
//! # Preemption, and its limits
//!
//! Scheduling is cooperative at every blocking call (and every few channel
//! operations, [`Config::coop_budget`]), and preemptive at two kinds of
//! points: [`check!`] and, with [`PreemptingAlloc`] as the global
//! allocator, every allocation — a process past its [`Config::timeslice`]
//! yields there. A loop that neither blocks, allocates nor calls `check!()`
//! is never preempted and keeps its worker; it also cannot be stopped
//! ([`request_stop`] is observed at those same points). Put `check!()` in
//! such loops. Preemption never happens while a runtime lock is held
//! ([`NoPreempt`]).
//!
//! # Plain threads and futures
//!
//! Every blocking call — `recv`, a full `send`, [`select`], the
//! [`Mutex`], `join`, a monitor's `Down`, a gen_server `call` — parks a
//! process, and blocks a plain OS thread (`main`, a thread of your own)
//! the way std's calls do. So `main` can wait on what processes produce:
//!
//! ```
//! let (tx, rx) = smarm::channel::<u32>();
//! let runtime = std::thread::spawn(move || {
//!     smarm::run(move || {
//!         for i in 1..=3 {
//!             tx.send(i).unwrap();
//!             smarm::sleep(std::time::Duration::from_millis(1));
//!         }
//!     })
//! });
//! // This thread sleeps in `recv` until each message comes, then sees the
//! // channel close when the process ends.
//! let got: Vec<u32> = rx.iter().collect();
//! assert_eq!(got, [1, 2, 3]);
//! runtime.join().unwrap();
//! ```
//!
//! [`block_on`] runs a future inside a process: the process parks between
//! polls and the future's waker wakes it from any thread, so an async
//! library's futures run in a process unchanged (its page has an example).
//!
//! # Io
//!
//! [`net`] gives sockets shaped like `std::net`: `TcpListener::accept`,
//! `Read` / `Write` on a `TcpStream`, `UdpSocket::recv_from`, Unix sockets —
//! each call that would block parks the calling process (its worker runs
//! others; the workers themselves poll the sockets' readiness), honours the
//! socket's read and write timeouts, and blocks the thread when called
//! outside a process. A socket's readiness is also a `select` arm.
//!
//! [`io`] lets a process do blocking io without blocking its worker:
//! [`io::block_on_io`] runs a blocking call on an io thread and parks the
//! process until it returns; [`io::read`], [`io::write_all`] and
//! [`io::wait_readable`] park the process on a nonblocking descriptor's
//! readiness — for descriptors you bring yourself.
//!
//! # Bare metal
//!
//! All of the above except `net`, `io` and the Engine's threads is `smarm-core`,
//! which is `no_std` + `alloc`: the same scheduler runs on a bare AArch64
//! board. A port implements one trait, `smarm_platform::Platform` (stacks,
//! clock, parking), supplies `HostHooks` and drives the workers from its
//! boot loop. The repository's `PORTING.md` walks through a port, and
//! `platform-plain/` is a complete one in 146 lines.
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
pub mod net;

/// The README's Rust blocks, compiled and run as doc tests so that none can
/// rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
mod stepper;
#[cfg(feature = "tracing")]
mod tracing_bridge;

use std::sync::Arc;

pub use alloc::PreemptingAlloc;
pub use engine::{available_cpus, Builder, Engine};
pub use host::StopSentinel;
/// Handler actors (re-exported from `smarm-core`).
pub use smarm_core::actor;
pub use smarm_core::actor::{
    ActorStatus, Ask, ExternalSender, Inbox, InboxAddr, InboxRecvError, InboxTryRecvError, ProcessInfo,
    RemoteEnvelope, RemoteSink, ReplyTo, RuntimeExtension, SpawnInfo, SystemInfo, WorkerCtx, WorkerExtension,
    WorkerStats,
};
/// Deadlock reports: what `run`, `block_on` and `Engine::wait` end with
/// when every process is parked and nothing can wake one.
pub use smarm_core::kernel::deadlock::{DeadlockReport, IdleActor, ParkedProcess, WaitKind};
/// A process's state word state, as `list_processes` reports it.
pub use smarm_core::kernel::state::State as ProcessState;
// Supervisors and gen_server, each module with its own documentation.
pub use smarm_core::otp::{gen_server, supervisor};
#[allow(deprecated)]
pub use smarm_core::MAX_ACTORS;
pub use smarm_core::{
    begin_wait, current_runtime, current_worker, maybe_preempt, park, request_stop, retire_wait, self_pid,
    spawn_on, wake_at, yield_now, Admin, BuildError, Config, ConfigError, ExitReason, Instant, JoinError,
    JoinHandle, NoPreempt, NoProc, NoSuchDriver, NoSuchWorker, NotInProcess, Pid, Runtime, SpawnError,
    StatsSnapshot, Waker, MAX_PROCESSES, MAX_WORKERS,
};
// Process primitives: channels, select, the actor mutex, monitors, links
// and the registry (each with its own documentation).
pub use smarm_core::{
    bounded, demonitor, exit, name_of, select_timeout, unlink, unregister, CannotBlock, Down, ExitSignal,
    IntoIter, Iter, LockError, Monitor, MonitorId, MutexGuard, Never, Receiver, RecvError, RecvTimeoutError,
    RegisterError, Select, Selectable, SendError, SendTimeoutError, Sender, TryIter, TryRecvError,
    TrySendError, Waiter, WeakSender,
};
pub use smarm_core::{
    ActorAddress, ActorInfo, ActorLookupError, ActorMonitor, ActorSendError, ActorStats, Addr, Ctx,
};
pub use smarm_core::{
    CallError, Child, ChildInfo, ChildSpec, Restart, Server, ServerCtx, ServerLookupError, Shutdown,
    StartError, Strategy, SupervisorError, SupervisorRef, TerminateReason, Watcher,
};
// The entry points, each with an example (shown on the item's page above
// its own documentation).

/// Spawns a process on the caller's worker; its [`JoinHandle`] gives back what the process returns.
///
/// ```
/// let doubled = smarm::run(|| {
///     let child = smarm::spawn(|| 21 * 2).unwrap();
///     child.join().unwrap()
/// });
/// assert_eq!(doubled, 42);
/// ```
#[doc(inline)]
pub use smarm_core::spawn;

/// An unbounded channel between processes, used like `std::sync::mpsc::channel`.
///
/// ```
/// let sum = smarm::run(|| {
///     let (tx, rx) = smarm::channel::<u32>();
///     for i in 1..=3 {
///         let tx = tx.clone();
///         smarm::spawn(move || tx.send(i).unwrap()).unwrap();
///     }
///     drop(tx);
///     // `recv` parks this process (not the thread) until a message comes;
///     // it fails once every sender is gone.
///     std::iter::from_fn(|| rx.recv().ok()).sum::<u32>()
/// });
/// assert_eq!(sum, 6);
/// ```
#[doc(inline)]
pub use smarm_core::channel;

/// Parks until one of several receivers is ready and returns its index, in priority order.
///
/// ```
/// let got = smarm::run(|| {
///     let (_quiet_tx, quiet) = smarm::channel::<&str>();
///     let (loud_tx, loud) = smarm::channel::<&str>();
///     smarm::spawn(move || loud_tx.send("hello").unwrap()).unwrap();
///     // Parks until one arm is ready; returns its index.
///     match smarm::select(&[&quiet, &loud]) {
///         0 => quiet.try_recv().unwrap(),
///         _ => loud.try_recv().unwrap(),
///     }
/// });
/// assert_eq!(got, "hello");
/// ```
#[doc(inline)]
pub use smarm_core::select;

/// Runs a future to its end: inside a process the process parks between polls; on a plain thread the thread sleeps.
///
/// The future's waker wakes the process from any thread, so an async
/// library runs inside a process unchanged. In a handler actor it never
/// blocks: it polls once and hands a pending future back
/// ([`CannotBlock`]).
///
/// ```
/// use std::future::Future;
/// use std::pin::Pin;
/// use std::sync::{Arc, Mutex};
/// use std::task::{Context, Poll, Waker};
///
/// // A one-shot value set by another thread, as an async library would
/// // deliver it.
/// #[derive(Default)]
/// struct Slot(Mutex<(Option<u32>, Option<Waker>)>);
/// struct Get(Arc<Slot>);
/// impl Future for Get {
///     type Output = u32;
///     fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
///         let mut slot = self.0 .0.lock().unwrap();
///         match slot.0.take() {
///             Some(value) => Poll::Ready(value),
///             None => {
///                 slot.1 = Some(cx.waker().clone());
///                 Poll::Pending
///             }
///         }
///     }
/// }
///
/// let got = smarm::run(|| {
///     let slot = Arc::new(Slot::default());
///     let setter = slot.clone();
///     std::thread::spawn(move || {
///         std::thread::sleep(std::time::Duration::from_millis(5));
///         let waker = {
///             let mut slot = setter.0.lock().unwrap();
///             slot.0 = Some(42);
///             slot.1.take()
///         };
///         waker.into_iter().for_each(Waker::wake);
///     });
///     // The process parks here; its worker runs others meanwhile.
///     smarm::block_on(Get(slot)).unwrap()
/// });
/// assert_eq!(got, 42);
/// ```
#[doc(inline)]
pub use smarm_core::block_on;

/// A mutex whose contended `lock` parks the process, not the thread (FIFO hand-off).
///
/// ```
/// use std::sync::Arc;
///
/// let total = smarm::run(|| {
///     let counter = Arc::new(smarm::Mutex::new(0u32));
///     let workers: Vec<_> = (0..4)
///         .map(|_| {
///             let counter = counter.clone();
///             smarm::spawn(move || {
///                 for _ in 0..100 {
///                     // A contended lock parks the process, not the thread.
///                     *counter.lock() += 1;
///                     smarm::yield_now();
///                 }
///             })
///             .unwrap()
///         })
///         .collect();
///     workers.into_iter().for_each(|w| w.join().unwrap());
///     let total = *counter.lock();
///     total
/// });
/// assert_eq!(total, 400);
/// ```
#[doc(inline)]
pub use smarm_core::Mutex;

/// Watches a process: one [`Down`] message arrives when it dies, with its [`ExitReason`].
///
/// ```
/// use smarm::ExitReason;
///
/// let reason = smarm::run(|| {
///     let worker = smarm::spawn(|| smarm::sleep(std::time::Duration::from_millis(1))).unwrap();
///     let watch = smarm::monitor(worker.pid());
///     // One `Down` per monitor, with the exact exit reason.
///     watch.rx.recv().unwrap().reason
/// });
/// assert_eq!(reason, ExitReason::Normal);
/// ```
#[doc(inline)]
pub use smarm_core::monitor;

/// Links the calling process with another: an abnormal death of either ends the other (unless it traps exits).
///
/// ```
/// use smarm::ExitReason;
///
/// let outcome = smarm::run(|| {
///     let (_keep, never) = smarm::channel::<()>();
///     // A partner that waits forever, linked to a middle process that
///     // ends abnormally: the link takes the partner down too.
///     let partner = smarm::spawn(move || { let _ = never.recv(); }).unwrap();
///     let partner_pid = partner.pid();
///     let middle = smarm::spawn(move || {
///         smarm::link(partner_pid).unwrap();
///         smarm::exit(smarm::self_pid().unwrap(), ExitReason::Other("failed".into())).unwrap();
///         smarm::yield_now();
///     })
///     .unwrap();
///     let _ = middle.join();
///     partner.join()
/// });
/// assert!(matches!(outcome, Err(smarm::JoinError::Exited(ExitReason::Linked { .. }))));
/// ```
#[doc(inline)]
pub use smarm_core::link;

/// Turns exit signals sent to the calling process into [`ExitSignal`] messages instead of ending it.
///
/// ```
/// use smarm::ExitReason;
///
/// let reason = smarm::run(|| {
///     // Exit signals from links arrive as messages instead of ending us.
///     let signals = smarm::trap_exit().unwrap();
///     let (go, wait) = smarm::channel::<()>();
///     let child = smarm::spawn(move || {
///         wait.recv().unwrap();
///         panic!("child failed");
///     })
///     .unwrap();
///     smarm::link(child.pid()).unwrap();
///     go.send(()).unwrap();
///     signals.recv().unwrap().reason
/// });
/// assert_eq!(reason, ExitReason::Panicked("child failed".into()));
/// ```
#[doc(inline)]
pub use smarm_core::trap_exit;

/// Registers a live process under a name, for [`whereis`] to find.
///
/// ```
/// smarm::run(|| {
///     let (_keep, never) = smarm::channel::<()>();
///     let server = smarm::spawn(move || { let _ = never.recv(); }).unwrap();
///     smarm::register("server", server.pid()).unwrap();
///     assert_eq!(smarm::whereis("server"), Some(server.pid()));
///     // One name per pid, one pid per name.
///     assert!(smarm::register("server", smarm::self_pid().unwrap()).is_err());
///     smarm::request_stop(server.pid()).unwrap();
///     let _ = server.join();
///     // A dead process's name is free again.
///     assert_eq!(smarm::whereis("server"), None);
/// });
/// ```
#[doc(inline)]
pub use smarm_core::register;

/// The pid registered under a name, if one is.
///
/// ```
/// smarm::run(|| {
///     assert_eq!(smarm::whereis("nobody"), None);
///     smarm::register("me", smarm::self_pid().unwrap()).unwrap();
///     assert_eq!(smarm::whereis("me"), smarm::self_pid());
/// });
/// ```
#[doc(inline)]
pub use smarm_core::whereis;

/// Supervisors: a process that starts children, watches them and restarts them by policy.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use smarm::{ChildSpec, Strategy, Supervisor};
///
/// let starts = smarm::run(|| {
///     let starts = Arc::new(AtomicU32::new(0));
///     let counted = starts.clone();
///     let sup = Supervisor::new()
///         .strategy(Strategy::OneForOne)
///         .intensity(5, Duration::from_secs(1))
///         .child(ChildSpec::new("worker", move || {
///             let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
///             smarm::spawn(move || {
///                 // The first start crashes; the restart keeps running.
///                 if first {
///                     smarm::exit(smarm::self_pid().unwrap(), smarm::ExitReason::Other("crash".into())).unwrap();
///                 }
///                 loop { smarm::sleep(Duration::from_millis(10)); }
///             })
///         }))
///         .start()
///         .unwrap();
///     while starts.load(Ordering::SeqCst) < 2 {
///         smarm::sleep(Duration::from_millis(1));
///     }
///     assert!(sup.child_pid("worker").unwrap().is_some());
///     sup.stop().unwrap(); // ordered shutdown
///     starts.load(Ordering::SeqCst)
/// });
/// assert_eq!(starts, 2);
/// ```
#[doc(inline)]
pub use smarm_core::Supervisor;

/// Erlang's gen_server: a process that serves calls, casts and info messages from a state.
///
/// ```
/// use smarm::{GenServer, Server};
///
/// /// A counter: `cast` adds, `call` reads.
/// struct Counter(u64);
///
/// impl GenServer for Counter {
///     type Call = ();
///     type Reply = u64;
///     type Cast = u64;
///     type Info = ();
///     fn handle_call(&mut self, (): ()) -> u64 {
///         self.0
///     }
///     fn handle_cast(&mut self, n: u64) {
///         self.0 += n;
///     }
/// }
///
/// let total = smarm::run(|| {
///     let counter = Server::new(Counter(0)).start().unwrap();
///     counter.cast(2).unwrap();
///     counter.cast(3).unwrap();
///     // A call is answered after the casts sent before it.
///     let total = counter.call(()).unwrap();
///     counter.stop().unwrap();
///     total
/// });
/// assert_eq!(total, 5);
/// ```
#[doc(inline)]
pub use smarm_core::GenServer;

/// A handle to a running gen_server; [`ServerRef::whereis`] finds a registered one by name, restarted or not.
///
/// ```
/// use smarm::{ChildSpec, GenServer, Server, ServerRef, Supervisor};
///
/// struct Counter(u64);
/// impl GenServer for Counter {
///     type Call = ();
///     type Reply = u64;
///     type Cast = ();
///     type Info = ();
///     fn handle_call(&mut self, (): ()) -> u64 {
///         self.0 += 1;
///         self.0
///     }
///     fn handle_cast(&mut self, (): ()) {}
/// }
///
/// let counts = smarm::run(|| {
///     // Supervised and registered: each (re)start registers the new server.
///     let sup = Supervisor::new()
///         .child(ChildSpec::new("counter", || Server::new(Counter(0)).start_registered("counter")))
///         .start()
///         .unwrap();
///     let counter = ServerRef::<Counter>::whereis("counter").unwrap();
///     let first = (counter.call(()).unwrap(), counter.call(()).unwrap());
///     sup.stop().unwrap();
///     first
/// });
/// assert_eq!(counts, (1, 2));
/// ```
#[doc(inline)]
pub use smarm_core::ServerRef;

/// A value local to each process, that travels with it across threads (see [`local!`]).
///
/// ```
/// smarm::local! {
///     /// This process's request count.
///     static REQUESTS: u32 = 0;
/// }
///
/// let counts = smarm::run(|| {
///     let a = smarm::spawn(|| { REQUESTS.with_mut(|n| *n += 2); REQUESTS.get().unwrap() }).unwrap();
///     let b = smarm::spawn(|| { REQUESTS.with_mut(|n| *n += 5); REQUESTS.get().unwrap() }).unwrap();
///     // Each process sees its own value, wherever it runs.
///     (a.join().unwrap(), b.join().unwrap(), REQUESTS.get().unwrap())
/// });
/// assert_eq!(counts, (2, 5, 0));
/// ```
#[doc(inline)]
pub use smarm_core::otp::local::ActorLocal;

/// A handler actor: a struct with a handler per message and no stack of its own.
///
/// ```
/// use smarm::{Actor, Ctx};
///
/// /// Sums what it is sent; answers `Total` through an inbox address.
/// struct Summer {
///     sum: u64,
///     report: smarm::InboxAddr<u64>,
/// }
///
/// enum Msg {
///     Add(u64),
///     Total,
/// }
///
/// impl Actor for Summer {
///     type Msg = Msg;
///     fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, msg: Msg) {
///         match msg {
///             Msg::Add(n) => self.sum += n,
///             Msg::Total => { let _ = self.report.send(self.sum); }
///         }
///     }
/// }
///
/// let engine = smarm::Engine::builder().workers(2).build().unwrap();
/// let rt = engine.runtime().clone();
/// let inbox = rt.new_inbox::<u64>();
/// let summer = rt.spawn_actor(Summer { sum: 0, report: inbox.addr() }).unwrap();
/// for n in 1..=10 {
///     summer.send(Msg::Add(n)).unwrap();
/// }
/// summer.send(Msg::Total).unwrap();
/// assert_eq!(inbox.recv().unwrap(), 55);
/// summer.stop().unwrap();
/// engine.wait().unwrap();
/// ```
#[doc(inline)]
pub use smarm_core::Actor;

/// Runtime events for a tracer of your own (spawns, exits, stop requests,
/// restarts); the `tracing` feature installs one that forwards them to the
/// `tracing` ecosystem.
pub use smarm_core::kernel::trace;
/// Spawns a handler actor on the calling process's worker.
///
/// ```
/// let answer = smarm::run(|| {
///     struct Echo(smarm::InboxAddr<u32>);
///     impl smarm::Actor for Echo {
///         type Msg = u32;
///         fn handle(&mut self, ctx: &mut smarm::Ctx<'_, Self>, n: u32) {
///             let _ = self.0.send(n + 1);
///             ctx.stop_self();
///         }
///     }
///     let rt = smarm::current_runtime().unwrap();
///     let inbox = rt.new_inbox::<u32>();
///     // From a process: the actor lands on this process's worker.
///     let echo = smarm::spawn_actor(Echo(inbox.addr())).unwrap();
///     echo.send(41).unwrap();
///     inbox.recv().unwrap()
/// });
/// assert_eq!(answer, 42);
/// ```
#[doc(inline)]
pub use smarm_core::spawn_actor;
use smarm_core::{Drivers, RuntimeParts, SingleThreadRuntime};
pub use stepper::Stepper;

use smarm_platform::linux::{LinuxPlatform, NOTIFIED};

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
///
/// ```
/// use std::time::Duration;
///
/// let order = smarm::run(|| {
///     let (tx, rx) = smarm::channel();
///     for (name, ms) in [("slow", 20), ("fast", 5)] {
///         let tx = tx.clone();
///         // Each sleeper parks; the worker runs the others meanwhile.
///         smarm::spawn(move || {
///             smarm::sleep(Duration::from_millis(ms));
///             tx.send(name).unwrap();
///         })
///         .unwrap();
///     }
///     drop(tx);
///     std::iter::from_fn(|| rx.recv().ok()).collect::<Vec<_>>()
/// });
/// assert_eq!(order, ["fast", "slow"]);
/// ```
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
    /// Every process and handler actor was parked and nothing could wake
    /// one: the report names each and what it waited on. The runtime
    /// asked them all to stop before it returned (their destructors ran).
    Deadlock(DeadlockReport),
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
            RunError::Deadlock(report) => write!(f, "{report}"),
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
/// accept 16 KiB ([`smarm_core::MIN_BARE_STACK_SIZE`]), which a panic with a
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
    #[cfg(feature = "tracing")]
    tracing_bridge::install();
    let platform = Arc::new(LinuxPlatform::new().map_err(|e| RunError::Platform(e.to_string()))?);
    let parts =
        RuntimeParts::new(config, platform.clone(), &host::HOOKS, drivers).map_err(RunError::Build)?;
    Ok((parts, platform))
}

/// Runs `root` as the root process of a fresh single-threaded runtime
/// (`config.worker_count` workers, all driven from the calling thread,
/// deterministically) and returns its value once every process has exited.
/// Errors: as [`try_run`].
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
    let deadlock = drive_single(&mut single, &context);
    if deadlock.is_some() {
        // Nothing can wake them: stop them all, so their destructors run
        // (a second deadlock among the destructors is left as it is).
        single.runtime().stop_all();
        let _ = drive_single(&mut single, &context);
    }
    // Finished: refuse spawns from cloned handles, then drive the ones
    // that raced with the close to their end.
    single.runtime().close();
    let _ = drive_single(&mut single, &context);
    context.shutdown();
    if let Some(report) = deadlock {
        return Err(RunError::Deadlock(report));
    }
    RunError::from_root(handle)
}

/// How long an idle host waits before it looks for a deadlock again after
/// a look found something that may still move (a thread outside the
/// runtime awake, a wake in flight); doubled after each such look up to
/// [`RECHECK_MAX`], and back to this once the runtime does work.
pub(crate) const RECHECK_FIRST: std::time::Duration = std::time::Duration::from_millis(1);
/// The longest wait between two looks for a deadlock.
pub(crate) const RECHECK_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether no socket or fd is registered with the runtime's poller: a
/// registered one may become ready, so the runtime is not deadlocked.
pub(crate) fn io_idle(context: &context::HostContext) -> bool {
    context.reactor.waited_fds() == 0 && context.reactor.edge.registered() == 0
}

/// Looks for a deadlock of a runtime whose drivers are about to sleep with
/// no deadline, after the host checked its own part (`own_threads`,
/// `drivers`: see `Runtime::find_deadlock`): io must be idle too. Fills in
/// the registered names.
pub(crate) fn find_deadlock(
    context: &context::HostContext,
    own_threads: usize,
    drivers: &mut dyn FnMut() -> Option<u64>,
) -> Option<DeadlockReport> {
    if !io_idle(context) {
        return None;
    }
    let runtime = &context.runtime;
    let mut report = runtime.find_deadlock(own_threads, drivers)?;
    // The runtime is still, so nothing renames its processes meanwhile.
    for process in &mut report.processes {
        process.name = runtime.name_of(process.pid);
    }
    for actor in &mut report.actors {
        actor.name = runtime.name_of(actor.pid);
    }
    Some(report)
}

/// `SingleThreadRuntime::run`, with the io poller in the loop: runs until
/// no process is live and no external work is outstanding; a busy loop
/// takes pending readiness every few rounds, an idle one parks in the
/// poller until readiness, the next timer or a wake.
///
/// Where it would sleep with no deadline it first looks for a deadlock
/// (the one thread driving every worker is the only thread the runtime
/// owns) and returns the report if there is one. If the look finds that
/// something may still move, the sleep gets a deadline after all, so the
/// look is made again if nothing else happens (a thread outside the
/// runtime may go to sleep in a wait in the meantime).
fn drive_single(single: &mut SingleThreadRuntime, context: &context::HostContext) -> Option<DeadlockReport> {
    let reactor = &context.reactor;
    let mut rounds = 0u32;
    let mut recheck = RECHECK_FIRST;
    loop {
        if single.try_tick() {
            rounds = rounds.wrapping_add(1);
            if rounds.is_multiple_of(io::reactor::POLL_EVERY) {
                reactor.poll_pending();
            }
            recheck = RECHECK_FIRST;
            continue;
        }
        if single.runtime().is_finished() {
            return None;
        }
        // A wake or spawn pushed after this round's drain has also
        // signalled the token, and pending readiness is reported at once,
        // so the park returns at once for either.
        // Worker 0 exists: a runtime has at least one worker.
        let Ok(token) = single.runtime().park_token(0) else { unreachable!("a runtime has worker 0") };
        let mut deadline = single.next_deadline();
        // With a socket or fd registered, readiness may still come: no
        // look until the next idle moment.
        if deadline.is_none() && io_idle(context) {
            // The driver is this thread, and it is not running anything:
            // it is still as long as no wake is pending on its token.
            let mut driver =
                || (token.state.load(std::sync::atomic::Ordering::SeqCst) != NOTIFIED).then_some(0);
            if let Some(report) = find_deadlock(context, 1, &mut driver) {
                return Some(report);
            }
            let now = single.runtime().platform().now();
            deadline = Some(now.saturating_add(recheck.as_nanos() as u64));
            recheck = (recheck * 2).min(RECHECK_MAX);
        }
        reactor.park(token, deadline);
    }
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
///
/// Errors: as [`run`] panics — [`RunError::Panicked`] with the root's
/// panic message, [`RunError::Deadlock`] when every process is parked and
/// nothing can wake one, and the reasons a runtime cannot start.
///
/// ```no_run
/// // Run as the only thread of a program: any other thread awake (a test
/// // harness's, say) could still send, and then nothing is reported.
/// let result = smarm::try_run(|| {
///     let (_tx, rx) = smarm::channel::<u32>();
///     // The sender is ours and we are parked: nobody can send.
///     rx.recv()
/// });
/// match result {
///     Err(smarm::RunError::Deadlock(report)) => {
///         assert_eq!(report.processes[0].kind, smarm::WaitKind::ChannelRecv);
///         eprintln!("{report}"); // "... <0.1> waits on channel recv at src/main.rs:7:8"
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
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
/// reason. If every process is parked and nothing can wake one — no timer
/// pending, no io outstanding, every other thread of the program asleep in
/// a smarm wait with no deadline — every process is asked to stop and `run`
/// panics with the deadlock report, which names each parked process, what
/// it waits on and the line of its blocking call (see
/// [`RunError::Deadlock`]). Use [`try_run`] to get these as a `Result`.
///
/// ```
/// let answer = smarm::run(|| {
///     let child = smarm::spawn(|| 6 * 7).unwrap();
///     child.join().unwrap()
/// });
/// assert_eq!(answer, 42);
/// ```
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
///
/// ```
/// let config = smarm::Config { worker_count: 2, ..smarm::Config::default() };
/// let workers = smarm::run_with(config, || {
///     let other = smarm::spawn_on(1, || smarm::current_worker().unwrap()).unwrap();
///     (smarm::current_worker().unwrap(), other.join().unwrap())
/// });
/// assert_eq!(workers, (0, 1));
/// ```
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
