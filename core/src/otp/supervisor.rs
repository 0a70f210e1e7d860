//! Supervisors: processes that start children, watch them, and restart
//! them by policy.
//!
//! A supervisor is itself a process. It starts its children in start order
//! (the order of [`Supervisor::child`], then of [`SupervisorRef::start_child`]),
//! and when one dies:
//!
//! 1. the dead child's [`Restart`] policy decides whether anything restarts
//!    (`Permanent`: always; `Transient`: only after an abnormal death;
//!    `Temporary`: never, and the child is forgotten);
//! 2. the restart intensity is charged: more than `max_restarts` restarts
//!    within `within` stop the supervisor itself — it shuts its children
//!    down and ends abnormally (`ExitReason::Panicked` with a message saying
//!    so), for its own supervisor to handle;
//! 3. the [`Strategy`] decides which siblings are cycled with it
//!    (`OneForOne`: none; `OneForAll`: every running sibling; `RestForOne`:
//!    the running siblings started after it). The survivors are stopped in
//!    reverse start order, each awaited before the next is stopped, and then
//!    the dead child and the cycled survivors are restarted in start order
//!    (a cycled `Temporary` survivor is stopped and forgotten). The group
//!    restarts as one: if a start fails, the members already restarted are
//!    stopped again and the whole group is retried, each attempt charged to
//!    the intensity. Between attempts the supervisor keeps answering its
//!    requests (`which_children`, `start_child`, `stop`).
//!
//! [`SupervisorRef::stop`] is the ordered shutdown: every child stopped in
//! reverse start order, each awaited; then the supervisor exits normally.
//! Dropping the last `SupervisorRef` does the same (as a gen_server's closed
//! inbox does), so hold on to the reference for as long as the tree should
//! live.
//!
//! # Monitors, and a link as the safety net
//!
//! The supervisor watches each child with a **monitor**, not with a link:
//!
//! - Links carry only abnormal deaths, but a supervisor must see normal
//!   exits too: a `Permanent` child that returns is restarted, and a
//!   `Transient` child's normal exit must be told apart from its crash.
//! - A `Down` names the child's pid and carries its exact reason, on a
//!   channel of its own. Ordered shutdown needs "wait for *this* child"
//!   before stopping the next; one channel per child gives that with a
//!   plain `recv`, where a shared funnel would need a selective receive and
//!   would reorder the notices it skips.
//!
//! It also **links** to each child while trapping exits, for one case a
//! monitor cannot cover: the supervisor dying without running its shutdown.
//! On a host without unwinding a stop (or panic) abandons the process, so no
//! destructor runs; the link still stops every child. (With unwinding, a
//! drop guard asks the children to stop, in reverse start order, without
//! waiting: a process parked mid-unwind would leave its OS thread's panic
//! state raised for every other process that thread runs.) The `ExitSignal`s
//! the trapped links deliver are drained and ignored: the Down already says
//! everything.
//!
//! # Children
//!
//! A [`ChildSpec`] names a child and holds its start function, called in the
//! supervisor process at every (re)start. It returns anything that becomes a
//! [`Child`]: a [`JoinHandle`] (stopped with the exit signal
//! `ExitReason::Shutdown`, see below), a [`SupervisorRef`] (stopped
//! gracefully, with its own ordered shutdown), a
//! [`ServerRef`](crate::otp::gen_server::ServerRef) (stopped gracefully, so its
//! `terminate` runs in order). [`Shutdown`] bounds how long the supervisor
//! waits: after the timeout it kills the child (`ExitReason::Killed`, as the
//! child's monitors see) and waits, at most as long again, for it to end
//! before it goes on, as OTP waits for the `'DOWN'` after its kill.
//!
//! A plain child (one without a graceful stop of its own) is stopped as
//! OTP's `exit(Child, shutdown)` stops it: with the exit signal
//! `ExitReason::Shutdown` ([`link::exit`]). A child that does not
//! trap exits ends with that reason at its next observation point; one that
//! traps exits receives it as an [`ExitSignal`] from the supervisor and may
//! clean up and end on its own — it is killed only when its timeout
//! expires (never, with [`Shutdown::Infinity`]). A `Transient` child that
//! ends with this reason is not restarted.
//!
//! # What a kill can do
//!
//! Killing a process requests its stop: it unwinds (running its
//! destructors) at its next observation point — a yield, a park,
//! `check!()`, an allocation under the preempting allocator. A child that
//! never reaches one cannot be ended by anyone, and this is the known limit
//! of the wait after a kill: where OTP waits for the `'DOWN'` without a
//! bound, the supervisor waits at most the child's timeout again, then goes
//! on; that child keeps its worker busy. So does a killed child whose
//! cleanup outlasts that second wait (and a [`Shutdown::Brutal`] one, which
//! is not waited for): it may still be unwinding while the next child is
//! stopped, or while its replacement starts — a start that needs something
//! the old one holds (a registered name, say) fails and is retried like any
//! failed start.
//!
//! Invariant: a child is running exactly when the supervisor holds an
//! unconsumed monitor for it; every path that consumes the Down clears the
//! child's running state in the same step.
#![deny(unsafe_code)]

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::kernel::error::{JoinError, SpawnError};
use crate::kernel::exit::ExitReason;
use crate::kernel::join::JoinHandle;
use crate::kernel::pid::Pid;
use crate::kernel::process;
use crate::kernel::time::Instant;
use crate::kernel::trace::{self, TraceEvent};
use crate::kernel::wait;
use crate::otp::link::{self, ExitSignal};
use crate::otp::monitor::{self, Monitor};
use crate::otp::registry::RegisterError;
use crate::sync::channel::{channel, Receiver, RecvTimeoutError, Selectable, Sender, TryRecvError};
use crate::sync::select::{Never, Select};

/// Which siblings are cycled when a child is restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Only the dead child is restarted.
    #[default]
    OneForOne,
    /// Every running sibling is stopped (reverse start order) and all of
    /// them are restarted with the dead child (start order).
    OneForAll,
    /// The running siblings started after the dead child are stopped
    /// (reverse start order) and restarted with it (start order).
    RestForOne,
}

/// Whether a child is restarted when it dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Restart {
    /// Always restarted.
    #[default]
    Permanent,
    /// Restarted only after an abnormal death (anything but a normal
    /// return, [`ExitReason::is_abnormal`]), except the supervisor's own
    /// shutdown signal, [`ExitReason::Shutdown`]: as OTP's `transient`, a
    /// child that ends with `shutdown` is not restarted.
    Transient,
    /// Never restarted; forgotten once it dies.
    Temporary,
}

impl Restart {
    /// Whether a child with this policy is restarted after dying with
    /// `reason`.
    pub fn restarts_after(self, reason: &ExitReason) -> bool {
        match self {
            Restart::Permanent => true,
            Restart::Transient => reason.is_abnormal() && !is_shutdown(reason),
            Restart::Temporary => false,
        }
    }
}

/// How a child is stopped when the supervisor cycles it or shuts down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Kill at once (`ExitReason::Killed`) and go on without waiting.
    Brutal,
    /// Ask gracefully (a graceful stop for servers and supervisors, the
    /// exit signal `ExitReason::Shutdown` for a plain process),
    /// wait at most this long for it to die, then kill it and wait at most
    /// this long again for it to end (a process that never reaches an
    /// observation point cannot be ended: see the module docs), then go
    /// on.
    Timeout(Duration),
    /// Ask gracefully and wait as long as it takes (the default for a child
    /// that is itself a supervisor: its own shutdown takes what it takes).
    Infinity,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::Timeout(Duration::from_secs(5))
    }
}

/// A started child, as a start function returns it: its pid, and how to
/// ask it to stop gracefully.
pub struct Child {
    pid: Pid,
    stop: Option<Box<dyn FnOnce() + Send>>,
    handle: Option<JoinHandle>,
}

impl Child {
    /// A child known only by its pid: stopped with the exit signal
    /// `ExitReason::Shutdown` (see the module docs). If it
    /// has already exited by the time the supervisor watches it, its exit
    /// reads as `NoProc` (abnormal); return a [`JoinHandle`] instead to have
    /// the real outcome.
    pub fn new(pid: Pid) -> Child {
        Child { pid, stop: None, handle: None }
    }

    /// A child with a graceful stop: `stop` is called (in the supervisor
    /// process, once) to ask it to end; it must not block. The closure may
    /// own whatever keeps the child alive (a server's reference).
    pub fn with_stop(pid: Pid, stop: impl FnOnce() + Send + 'static) -> Child {
        Child { pid, stop: Some(Box::new(stop)), handle: None }
    }

    /// The child's pid.
    pub fn pid(&self) -> Pid {
        self.pid
    }
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Child")
            .field("pid", &self.pid)
            .field("graceful_stop", &self.stop.is_some())
            .finish_non_exhaustive()
    }
}

impl From<JoinHandle> for Child {
    /// The supervisor keeps the handle: if the child is already gone when
    /// the supervisor starts watching it, the handle still tells a normal
    /// exit from a panic.
    fn from(handle: JoinHandle) -> Child {
        Child { pid: handle.pid(), stop: None, handle: Some(handle) }
    }
}

impl From<SupervisorRef> for Child {
    fn from(supervisor: SupervisorRef) -> Child {
        let pid = supervisor.pid;
        Child::with_stop(pid, move || {
            let _ = supervisor.control.send(Control::Stop);
        })
    }
}

/// Why a child's start function failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartError {
    /// The child's process could not be spawned.
    Spawn(SpawnError),
    /// The child is a supervisor that could not start.
    Supervisor(Box<SupervisorError>),
    /// A one-shot child (`start_under`) was asked to start a second time.
    AlreadyStarted,
    /// The start function refused, with its reason (a resource it needs is
    /// not there yet, say). The supervisor retries like any failed start.
    Failed(String),
    /// The child could not be registered under its name
    /// ([`Server::start_registered`](crate::otp::gen_server::Server::start_registered)).
    Name(RegisterError),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Failed(reason) => write!(f, "the start function failed: {reason}"),
            StartError::Name(e) => write!(f, "the child could not take its name: {e}"),
            StartError::Spawn(e) => write!(f, "{e}"),
            StartError::Supervisor(e) => write!(f, "child supervisor failed to start: {e}"),
            StartError::AlreadyStarted => f.write_str(
                "a one-shot child cannot be restarted: give the supervisor a ChildSpec with a start function",
            ),
        }
    }
}
impl core::error::Error for StartError {}

impl From<SpawnError> for StartError {
    fn from(e: SpawnError) -> Self {
        StartError::Spawn(e)
    }
}

impl From<SupervisorError> for StartError {
    fn from(e: SupervisorError) -> Self {
        StartError::Supervisor(Box::new(e))
    }
}

/// Why a supervisor operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SupervisorError {
    /// The supervisor's own process could not be spawned.
    Spawn(SpawnError),
    /// A child failed to start; the supervisor stopped the children it had
    /// started (for `start`) or left the others running (for `start_child`).
    ChildStart {
        /// The child's name.
        child: String,
        /// Why.
        error: StartError,
    },
    /// Two children with one name: names identify children, so they must
    /// be unique within a supervisor.
    DuplicateName(String),
    /// The supervisor has exited.
    NoProc(Pid),
    /// Called on a worker's driver outside any process (a handler actor),
    /// where waiting for the reply would stall the worker.
    NotInProcess,
    /// Called from the supervisor's own process (a start function), which
    /// would wait for itself forever.
    CallingSelf,
}

impl fmt::Display for SupervisorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SupervisorError::Spawn(e) => write!(f, "cannot spawn the supervisor: {e}"),
            SupervisorError::ChildStart { child, error } => {
                write!(f, "child {child:?} failed to start: {error}")
            }
            SupervisorError::DuplicateName(name) => {
                write!(f, "two children named {name:?}: child names must be unique")
            }
            SupervisorError::NoProc(pid) => write!(f, "supervisor {pid} has exited"),
            SupervisorError::NotInProcess => f.write_str(
                "supervisor call made on a worker's driver outside any process, where it cannot wait",
            ),
            SupervisorError::CallingSelf => {
                f.write_str("a supervisor called itself (from a start function): it would wait forever")
            }
        }
    }
}
impl core::error::Error for SupervisorError {}

impl From<SpawnError> for SupervisorError {
    fn from(e: SpawnError) -> Self {
        SupervisorError::Spawn(e)
    }
}

type StartFn = Box<dyn FnMut() -> Result<Child, StartError> + Send>;

/// How to start (and restart) one child.
pub struct ChildSpec {
    name: String,
    start: StartFn,
    restart: Restart,
    shutdown: Shutdown,
}

impl ChildSpec {
    /// A `Permanent` child named `name`, started by `start` — in the
    /// supervisor process, at every (re)start. `start` returns anything
    /// that becomes a [`Child`], e.g. `|| smarm::spawn(work)`.
    pub fn new<F, C, E>(name: impl Into<String>, mut start: F) -> ChildSpec
    where
        F: FnMut() -> Result<C, E> + Send + 'static,
        C: Into<Child>,
        E: Into<StartError>,
    {
        ChildSpec {
            name: name.into(),
            start: Box::new(move || start().map(Into::into).map_err(Into::into)),
            restart: Restart::default(),
            shutdown: Shutdown::default(),
        }
    }

    /// A `Permanent` child that is itself a supervisor, built afresh by
    /// `factory` at every (re)start. Its shutdown waits as long as its own
    /// ordered shutdown takes ([`Shutdown::Infinity`]).
    pub fn supervisor<F>(name: impl Into<String>, mut factory: F) -> ChildSpec
    where
        F: FnMut() -> Supervisor + Send + 'static,
    {
        ChildSpec::new(name, move || factory().start()).shutdown(Shutdown::Infinity)
    }

    /// Sets the restart policy.
    pub fn restart(mut self, restart: Restart) -> ChildSpec {
        self.restart = restart;
        self
    }

    /// Sets how the child is stopped.
    pub fn shutdown(mut self, shutdown: Shutdown) -> ChildSpec {
        self.shutdown = shutdown;
        self
    }

    /// The child's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSpec")
            .field("name", &self.name)
            .field("restart", &self.restart)
            .field("shutdown", &self.shutdown)
            .finish_non_exhaustive()
    }
}

/// One child as [`SupervisorRef::which_children`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildInfo {
    /// The child's name.
    pub name: String,
    /// Its pid while it runs; `None` for a `Transient` child that ended
    /// normally (it stays in the list, not running).
    pub pid: Option<Pid>,
    /// Its restart policy.
    pub restart: Restart,
}

/// A supervisor's configuration; [`start`](Supervisor::start) it.
#[derive(Debug)]
pub struct Supervisor {
    strategy: Strategy,
    max_restarts: u32,
    within: Duration,
    children: Vec<ChildSpec>,
    worker: Option<usize>,
}

impl Default for Supervisor {
    fn default() -> Self {
        Supervisor::new()
    }
}

impl Supervisor {
    /// `OneForOne`, at most 3 restarts within 5 seconds, no children.
    pub fn new() -> Supervisor {
        Supervisor {
            strategy: Strategy::OneForOne,
            max_restarts: 3,
            within: Duration::from_secs(5),
            children: Vec::new(),
            worker: None,
        }
    }

    /// Sets the restart strategy.
    pub fn strategy(mut self, strategy: Strategy) -> Supervisor {
        self.strategy = strategy;
        self
    }

    /// Sets the restart intensity: more than `max_restarts` restarts within
    /// `within` stop the supervisor (abnormally). `max_restarts == 0` means
    /// the first restart already does; a zero `within` never fills (no two
    /// restarts are ever that close), so it disables the limit.
    pub fn intensity(mut self, max_restarts: u32, within: Duration) -> Supervisor {
        self.max_restarts = max_restarts;
        self.within = within;
        self
    }

    /// Adds a child; children start in the order they are added.
    pub fn child(mut self, spec: ChildSpec) -> Supervisor {
        self.children.push(spec);
        self
    }

    /// Runs the supervisor process on worker `worker` (default: the
    /// caller's).
    pub fn on_worker(mut self, worker: usize) -> Supervisor {
        self.worker = Some(worker);
        self
    }

    /// Spawns the supervisor and waits until it has started every child, in
    /// order. If a child fails to start, the ones already started are
    /// stopped (reverse order) and the error names the child.
    pub fn start(self) -> Result<SupervisorRef, SupervisorError> {
        process::self_pid().ok_or(SupervisorError::NotInProcess)?;
        for (i, spec) in self.children.iter().enumerate() {
            if self.children[..i].iter().any(|other| other.name == spec.name) {
                return Err(SupervisorError::DuplicateName(spec.name.clone()));
            }
        }
        let (control_tx, control_rx) = channel();
        let (init_tx, init_rx) = channel();
        let worker = self.worker;
        let body = move || supervise(self, control_rx, init_tx);
        let handle = match worker {
            Some(worker) => crate::kernel::join::spawn_on(worker, body),
            None => crate::kernel::join::spawn(body),
        }?;
        let pid = handle.pid();
        drop(handle);
        match init_rx.recv() {
            Ok(Ok(())) => Ok(SupervisorRef { pid, control: control_tx }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(SupervisorError::NoProc(pid)),
        }
    }

    /// Starts the supervisor as a child named `name` of `parent`, which
    /// stops it in its ordered shutdown. The child is `Temporary`: this
    /// configuration is consumed by the first start, so there is nothing to
    /// restart it from — for a restartable child supervisor give the parent
    /// a [`ChildSpec::supervisor`] instead.
    pub fn start_under(self, parent: &SupervisorRef, name: &str) -> Result<SupervisorRef, SupervisorError> {
        start_once(parent, name, Shutdown::Infinity, move || self.start().map_err(StartError::from))
    }
}

/// Starts a one-shot, `Temporary` child of `parent` with `start` and hands
/// back what `start` returned.
pub(crate) fn start_once<R, F>(
    parent: &SupervisorRef,
    name: &str,
    shutdown: Shutdown,
    start: F,
) -> Result<R, SupervisorError>
where
    R: Clone + Send + Into<Child> + 'static,
    F: FnOnce() -> Result<R, StartError> + Send + 'static,
{
    let (tx, rx) = channel::<R>();
    let mut start = Some(start);
    let spec = ChildSpec::new(name, move || {
        let start = start.take().ok_or(StartError::AlreadyStarted)?;
        let started = start()?;
        let _ = tx.send(started.clone());
        Ok::<R, StartError>(started)
    })
    .restart(Restart::Temporary)
    .shutdown(shutdown);
    parent.start_child(spec)?;
    rx.try_recv().map_err(|_| SupervisorError::NoProc(parent.pid))
}

/// A request to the supervisor process.
enum Control {
    WhichChildren(Sender<Vec<ChildInfo>>),
    StartChild(ChildSpec, Sender<Result<Pid, SupervisorError>>),
    Stop,
}

/// A handle to a running supervisor. Cloneable; when the last clone is
/// dropped the supervisor shuts down (ordered) and exits normally.
#[derive(Debug, Clone)]
#[must_use = "dropping the last SupervisorRef shuts the supervisor down"]
pub struct SupervisorRef {
    pid: Pid,
    control: Sender<Control>,
}

impl SupervisorRef {
    /// The supervisor's pid (monitor it to see it end).
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Sends a request and waits for the reply.
    fn request<R: Send>(&self, make: impl FnOnce(Sender<R>) -> Control) -> Result<R, SupervisorError> {
        if !wait::can_wait() {
            return Err(SupervisorError::NotInProcess);
        }
        if process::self_pid() == Some(self.pid) {
            return Err(SupervisorError::CallingSelf);
        }
        let (tx, rx) = channel();
        self.control.send(make(tx)).map_err(|_| SupervisorError::NoProc(self.pid))?;
        // The supervisor drops the reply sender if it dies first.
        rx.recv().map_err(|_| SupervisorError::NoProc(self.pid))
    }

    /// The children in start order, with their pids while they run.
    pub fn which_children(&self) -> Result<Vec<ChildInfo>, SupervisorError> {
        self.request(Control::WhichChildren)
    }

    /// The pid of the running child named `name` (`Ok(None)` if there is
    /// no such child or it is not running).
    pub fn child_pid(&self, name: &str) -> Result<Option<Pid>, SupervisorError> {
        let children = self.which_children()?;
        Ok(children.into_iter().find(|c| c.name == name).and_then(|c| c.pid))
    }

    /// Adds a child after the existing ones and starts it; returns its pid.
    pub fn start_child(&self, spec: ChildSpec) -> Result<Pid, SupervisorError> {
        self.request(|reply| Control::StartChild(spec, reply))?
    }

    /// Ordered shutdown: the supervisor stops its children in reverse start
    /// order, each awaited, and exits normally; this returns once it has.
    /// Outside a process (or from the supervisor itself) it only asks.
    pub fn stop(&self) -> Result<(), SupervisorError> {
        let me = process::self_pid();
        let watch = (me.is_some() && me != Some(self.pid)).then(|| monitor::monitor(self.pid));
        self.control.send(Control::Stop).map_err(|_| SupervisorError::NoProc(self.pid))?;
        if let Some(watch) = watch {
            let _ = watch.rx.recv();
        }
        Ok(())
    }
}

/// A running child, as the supervisor holds it.
struct Running {
    pid: Pid,
    monitor: Monitor,
    stop: Option<Box<dyn FnOnce() + Send>>,
    handle: Option<JoinHandle>,
}

struct Entry {
    spec: ChildSpec,
    running: Option<Running>,
}

/// Why the supervisor loop ended.
enum Exit {
    /// `stop()` was called.
    Stop,
    /// Every `SupervisorRef` was dropped.
    Orphaned,
    /// The restart intensity was exceeded; the message to die with.
    Intensity(String),
}

/// The supervisor process's state. Dropping it (on the unwind path: a
/// stop or a panic) asks every running child to stop, in reverse start
/// order, without waiting — a process must not park while it unwinds.
struct State {
    strategy: Strategy,
    max_restarts: u32,
    within: Duration,
    children: Vec<Entry>,
    /// Times of the restarts within the intensity window, oldest first.
    restarts: VecDeque<Instant>,
    /// Children (indices, in start order) stopped for a restart whose
    /// start has not yet succeeded: retried between requests.
    pending: Vec<usize>,
}

impl Drop for State {
    fn drop(&mut self) {
        for entry in self.children.iter_mut().rev() {
            if let Some(running) = entry.running.take() {
                let _ = process::request_stop(running.pid);
            }
        }
    }
}

/// The supervisor process's body.
fn supervise(config: Supervisor, control: Receiver<Control>, init: Sender<Result<(), SupervisorError>>) {
    // Trapping, so a child's crash reaches us as a Down, not as our stop.
    let trap = link::trap_exit();
    let mut state = State {
        strategy: config.strategy,
        max_restarts: config.max_restarts,
        within: config.within,
        children: config.children.into_iter().map(|spec| Entry { spec, running: None }).collect(),
        restarts: VecDeque::new(),
        pending: Vec::new(),
    };
    for index in 0..state.children.len() {
        if let Err(error) = state.start_child(index) {
            let child = state.children[index].spec.name.clone();
            state.shutdown();
            let _ = init.send(Err(SupervisorError::ChildStart { child, error }));
            return;
        }
    }
    let _ = init.send(Ok(()));
    drop(init);
    let exit = state.run(control, trap);
    state.shutdown();
    if let Exit::Intensity(message) = exit {
        // Abnormal on purpose: the supervisor's own monitors and its
        // supervisor see a crash, with the reason in the message.
        panic!("{message}");
    }
}

/// The arms of the supervisor's `Select`: `Down(i)` is child `i`'s
/// monitor (never ready while the child is not running).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Arm {
    Down(usize),
    Control,
    Trap,
}

impl State {
    /// The supervisor's arms in priority order: Downs (in start order),
    /// then requests, then the exit signals nobody needs.
    fn arms(&self, trap: bool) -> Select<Arm> {
        let mut select = Select::with_capacity(self.children.len() + 2);
        for index in 0..self.children.len() {
            select.add(Arm::Down(index));
        }
        select.add(Arm::Control);
        if trap {
            select.add(Arm::Trap);
        }
        select
    }

    fn run(&mut self, control: Receiver<Control>, trap: Option<Receiver<ExitSignal>>) -> Exit {
        let mut trap = trap;
        let mut select = self.arms(trap.is_some());
        loop {
            if !self.pending.is_empty() {
                if let Err(exit) = self.retry_pending() {
                    return exit;
                }
            }
            // Rebuilt only when the set of children changes size; a
            // message costs no allocation.
            if select.len() != self.children.len() + 1 + usize::from(trap.is_some()) {
                select = self.arms(trap.is_some());
            }
            let resolve = |arm: Arm| -> &dyn Selectable {
                match arm {
                    Arm::Down(index) => match &self.children[index].running {
                        Some(running) => &running.monitor.rx,
                        // Not running (between a death and its restart).
                        None => &Never,
                    },
                    Arm::Control => &control,
                    Arm::Trap => match &trap {
                        Some(trap) => trap,
                        None => &Never,
                    },
                }
            };
            let picked = if self.pending.is_empty() {
                select.wait(resolve)
            } else {
                // A restart is pending: answer what is there, then try it
                // again.
                match select.wait_timeout(RETRY_BACKOFF, resolve) {
                    Some(arm) => arm,
                    None => continue,
                }
            };
            match picked {
                Arm::Down(index) => {
                    let Some(running) = &self.children[index].running else { continue };
                    let reason = match running.monitor.rx.try_recv() {
                        Ok(down) => down.reason,
                        Err(TryRecvError::Empty) => continue,
                        // The monitor went away without a Down: treat the
                        // child as gone, reason unknown.
                        Err(TryRecvError::Disconnected) => ExitReason::NoProc,
                    };
                    if let Err(exit) = self.child_died(index, reason) {
                        return exit;
                    }
                }
                Arm::Control => match control.try_recv() {
                    Ok(Control::Stop) => return Exit::Stop,
                    Ok(Control::WhichChildren(reply)) => {
                        let _ = reply.send(self.which_children());
                    }
                    Ok(Control::StartChild(spec, reply)) => {
                        let _ = reply.send(self.add_child(spec));
                    }
                    Err(TryRecvError::Empty) => {}
                    // The closed arm would be ready forever; it also means
                    // nobody can reach us any more.
                    Err(TryRecvError::Disconnected) => return Exit::Orphaned,
                },
                Arm::Trap => {
                    if let Some(exits) = &trap {
                        loop {
                            match exits.try_recv() {
                                Ok(_) => {}
                                Err(TryRecvError::Empty) => break,
                                Err(TryRecvError::Disconnected) => {
                                    trap = None;
                                    break;
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    fn which_children(&self) -> Vec<ChildInfo> {
        self.children
            .iter()
            .map(|entry| ChildInfo {
                name: entry.spec.name.clone(),
                pid: entry.running.as_ref().map(|r| r.pid),
                restart: entry.spec.restart,
            })
            .collect()
    }

    fn add_child(&mut self, spec: ChildSpec) -> Result<Pid, SupervisorError> {
        if self.children.iter().any(|entry| entry.spec.name == spec.name) {
            return Err(SupervisorError::DuplicateName(spec.name));
        }
        self.children.push(Entry { spec, running: None });
        let index = self.children.len() - 1;
        match self.start_child(index) {
            Ok(pid) => Ok(pid),
            Err(error) => {
                let entry = self.children.remove(index);
                Err(SupervisorError::ChildStart { child: entry.spec.name, error })
            }
        }
    }

    /// Starts child `index` and starts watching it.
    fn start_child(&mut self, index: usize) -> Result<Pid, StartError> {
        let entry = &mut self.children[index];
        debug_assert!(entry.running.is_none(), "child {:?} started twice", entry.spec.name);
        let Child { pid, stop, handle } = (entry.spec.start)()?;
        // Monitor first: if the child is already gone, the Down says so
        // (NoProc, refined through the handle when there is one).
        let monitor = monitor::monitor(pid);
        let _ = link::link(pid);
        entry.running = Some(Running { pid, monitor, stop, handle });
        Ok(pid)
    }

    /// Stops child `index` if it runs and waits for its death, at most as
    /// long as its [`Shutdown`] allows; then kills it and waits for its
    /// death at most as long again, and goes on.
    fn stop_child(&mut self, index: usize) {
        let entry = &mut self.children[index];
        let Some(Running { pid, monitor, stop, handle }) = entry.running.take() else { return };
        let ask = |stop: Option<Box<dyn FnOnce() + Send>>| match stop {
            Some(stop) => stop(),
            // OTP's exit(Child, shutdown): a child trapping exits gets it
            // as a message, and may clean up and end on its own.
            None => {
                let _ = link::exit(pid, ExitReason::Shutdown);
            }
        };
        match entry.spec.shutdown {
            Shutdown::Brutal => kill(pid),
            Shutdown::Timeout(timeout) => {
                ask(stop);
                match monitor.rx.recv_timeout(timeout) {
                    Ok(_) | Err(RecvTimeoutError::Disconnected | RecvTimeoutError::NotInProcess) => {}
                    Err(RecvTimeoutError::Timeout) => {
                        kill(pid);
                        // As OTP waits for the 'DOWN' after its kill: the
                        // next child is not stopped while this one still
                        // unwinds. Bounded, because a child that never
                        // reaches an observation point never ends.
                        let _ = monitor.rx.recv_timeout(timeout);
                    }
                }
            }
            Shutdown::Infinity => {
                ask(stop);
                let _ = monitor.rx.recv();
            }
        }
        // A child that was killed and not waited for (or not long enough)
        // is reclaimed when it ends: dropping its handle detaches it.
        drop(handle);
    }

    /// Ordered shutdown: every running child, reverse start order, awaited.
    fn shutdown(&mut self) {
        for index in (0..self.children.len()).rev() {
            self.stop_child(index);
        }
    }

    /// Charges one restart to the intensity window.
    fn charge_restart(&mut self) -> Result<(), Exit> {
        let now = process::now().unwrap_or(Instant::from_nanos(0));
        crate::otp::restarts::count_restart();
        self.restarts.push_back(now);
        while self.restarts.front().is_some_and(|&t| now - t > self.within) {
            self.restarts.pop_front();
        }
        if self.restarts.len() > self.max_restarts as usize {
            let me = process::self_pid().map_or(String::new(), |pid| format!(" {pid}"));
            return Err(Exit::Intensity(format!(
                "supervisor{me}: restart intensity exceeded (more than {} restarts within {:?}); \
                 children shut down",
                self.max_restarts, self.within
            )));
        }
        Ok(())
    }

    /// Child `index` died with `reason`: apply its restart policy and the
    /// strategy.
    fn child_died(&mut self, index: usize, reason: ExitReason) -> Result<(), Exit> {
        let Some(running) = self.children[index].running.take() else { return Ok(()) };
        let reason = match (reason, running.handle) {
            // Gone before we watched it: its handle knows how it ended.
            (ExitReason::NoProc, Some(handle)) => match handle.join() {
                Ok(()) => ExitReason::Normal,
                Err(JoinError::Exited(reason)) => reason,
                Err(JoinError::NotInProcess) => ExitReason::NoProc,
            },
            (reason, _) => reason,
        };
        let policy = self.children[index].spec.restart;
        if !policy.restarts_after(&reason) {
            if policy == Restart::Temporary {
                self.children.remove(index);
                // Indices after it move down by one.
                for j in self.pending.iter_mut().filter(|j| **j > index) {
                    *j -= 1;
                }
            }
            return Ok(());
        }
        if let Some(supervisor) = process::self_pid() {
            let child = &self.children[index].spec.name;
            trace::emit(|| TraceEvent::Restart { supervisor, child, pid: running.pid, reason: &reason });
        }
        self.charge_restart()?;
        let cycled: Vec<usize> = match self.strategy {
            Strategy::OneForOne => alloc::vec![index],
            Strategy::OneForAll => (0..self.children.len()).collect(),
            Strategy::RestForOne => (index..self.children.len()).collect(),
        }
        .into_iter()
        .filter(|&j| j == index || self.children[j].running.is_some())
        .collect();
        for &j in cycled.iter().rev() {
            self.stop_child(j);
        }
        // Cycled `Temporary` survivors are forgotten, the rest restart as
        // one group (together with any group still pending).
        let mut group: Vec<usize> = cycled
            .iter()
            .copied()
            .filter(|&j| j == index || self.children[j].spec.restart != Restart::Temporary)
            .chain(self.pending.drain(..))
            .collect();
        let forgotten: Vec<usize> = cycled.iter().copied().filter(|j| !group.contains(j)).collect();
        for &j in forgotten.iter().rev() {
            self.children.remove(j);
        }
        for j in group.iter_mut() {
            *j -= forgotten.iter().filter(|&&f| f < *j).count();
        }
        group.sort_unstable();
        group.dedup();
        self.pending = group;
        self.retry_pending()
    }

    /// Starts the pending group in start order. If a start fails, the
    /// members already started are stopped again (reverse order) and the
    /// attempt is charged to the intensity; the group stays pending and the
    /// run loop retries it after answering its requests.
    fn retry_pending(&mut self) -> Result<(), Exit> {
        let group = core::mem::take(&mut self.pending);
        let mut started = Vec::with_capacity(group.len());
        for &j in &group {
            if self.children[j].running.is_some() {
                continue;
            }
            match self.start_child(j) {
                Ok(_) => started.push(j),
                Err(_) => {
                    for &k in started.iter().rev() {
                        self.stop_child(k);
                    }
                    self.pending = group;
                    return self.charge_restart();
                }
            }
        }
        Ok(())
    }
}

/// How long the supervisor waits for requests between two attempts at a
/// pending restart.
const RETRY_BACKOFF: Duration = Duration::from_millis(1);

/// Whether `reason` is the supervisor's shutdown signal, which a
/// `Transient` child treats as a normal end.
fn is_shutdown(reason: &ExitReason) -> bool {
    matches!(reason, ExitReason::Shutdown)
}

/// Kills `pid` (`ExitReason::Killed`) without waiting for it to end.
fn kill(pid: Pid) {
    let _ = link::exit(pid, ExitReason::Killed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restart_policy_decides_on_the_reason() {
        let panicked = ExitReason::Panicked("boom".into());
        for (policy, normal, abnormal) in [
            (Restart::Permanent, true, true),
            (Restart::Transient, false, true),
            (Restart::Temporary, false, false),
        ] {
            assert_eq!(policy.restarts_after(&ExitReason::Normal), normal, "{policy:?}");
            assert_eq!(policy.restarts_after(&panicked), abnormal, "{policy:?}");
            assert_eq!(policy.restarts_after(&ExitReason::Stopped), abnormal, "{policy:?}");
            assert_eq!(
                policy.restarts_after(&ExitReason::Shutdown),
                policy == Restart::Permanent,
                "{policy:?}"
            );
            let other = ExitReason::Other("shutdown".into());
            assert_eq!(policy.restarts_after(&other), abnormal, "{policy:?}");
        }
    }

    #[test]
    fn errors_name_the_child_and_the_cause() {
        let e =
            SupervisorError::ChildStart { child: "db".into(), error: StartError::Spawn(SpawnError::Full) };
        let text = alloc::string::ToString::to_string(&e);
        assert!(text.contains("\"db\"") && text.contains("slab is full"), "{text}");
        let nested = StartError::from(SupervisorError::DuplicateName("x".into()));
        assert!(alloc::string::ToString::to_string(&nested).contains("unique"));
    }
}
