//! gen_server: a process that owns a state and serves calls, casts,
//! out-of-band messages and monitor Downs, one at a time.
//!
//! The server owns four kinds of arm and waits on them with one
//! [`Select`], in priority order:
//!
//! 1. **Downs** of the monitors it watches, in the order it started
//!    watching them → [`GenServer::handle_down`]. A Down retires its arm
//!    (monitors are one-shot).
//! 2. **Control**: monitors handed over by [`ServerCtx::watch`] /
//!    [`Watcher::watch`] from a handler. Down arms are dynamic because
//!    monitors are: a handler that spawns a worker watches it there and
//!    then, so the arm set cannot be fixed at start.
//! 3. **Infos**: the static receivers given with [`Server::with_info`] →
//!    [`GenServer::handle_info`], in the order they were given.
//! 4. **The inbox**: calls and casts from [`ServerRef`]s, in send order.
//!
//! System messages preempt: a hot inbox cannot starve a death notice.
//! A closed arm (every sender gone) is ready forever, so the loop drops it
//! once seen — except the inbox: when every `ServerRef` is gone nobody can
//! talk to the server any more, and it shuts down gracefully.
//!
//! [`GenServer::terminate`] runs from a drop guard that owns the state, so
//! it runs however the server ends: [`ServerRef::stop`], the last reference
//! dropped, a `request_stop`, or a panicking handler (on hosts that unwind;
//! a host without unwinding abandons the process and nothing runs).
//!
//! A call is a send on the inbox plus a receive on a one-shot reply
//! channel. Server death needs no monitor to be seen: the reply sender is
//! dropped as the server unwinds (or with its queued inbox), and the caller
//! gets [`CallError::Dead`]. After `call_timeout` gives up, the request is
//! still handled; the late reply's send fails harmlessly.
#![deny(unsafe_code)]

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::fmt;
use core::time::Duration;

use crate::kernel::deadlock::WaitKind;
use crate::kernel::error::{NoProc, SpawnError};
use crate::kernel::pid::Pid;
use crate::kernel::process;
use crate::kernel::runtime::{Runtime, Shared};
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::wait;
use crate::otp::monitor::{self, Down, Monitor, MonitorId};
use crate::otp::supervisor::{self, Child, ChildSpec, Shutdown, StartError, SupervisorError, SupervisorRef};
use crate::sync::channel::{
    channel, channel_waited_as, Receiver, RecvError, RecvTimeoutError, Selectable, Sender, TryRecvError,
    WeakSender,
};
use crate::sync::select::Select;

/// A server's behaviour. The state is `self`; the handlers run in the
/// server process, one message at a time.
pub trait GenServer: Send + 'static {
    /// A request that expects a reply.
    type Call: Send + 'static;
    /// The reply to a [`Call`](GenServer::Call).
    type Reply: Send + 'static;
    /// A fire-and-forget message.
    type Cast: Send + 'static;
    /// An out-of-band message from the static info channels.
    type Info: Send + 'static;

    /// Runs first, in the server process, before any message. Keep
    /// `ctx.watcher()` to watch monitors from later handlers.
    fn init(&mut self, ctx: &ServerCtx) {
        let _ = ctx;
    }

    /// Handles a call; the return value is the reply.
    fn handle_call(&mut self, request: Self::Call) -> Self::Reply;

    /// Handles a cast.
    fn handle_cast(&mut self, message: Self::Cast);

    /// Handles a message from an info channel.
    fn handle_info(&mut self, info: Self::Info) {
        let _ = info;
    }

    /// Handles the Down of a watched monitor.
    fn handle_down(&mut self, ctx: &ServerCtx, down: Down) {
        let _ = (ctx, down);
    }

    /// Runs once when the server ends, however it ends. On the unwind path
    /// (`reason` is [`TerminateReason::Unwinding`]) it runs inside a
    /// destructor: it must not panic, and should not block.
    fn terminate(&mut self, reason: TerminateReason) {
        let _ = reason;
    }
}

/// Why a server is ending, as [`GenServer::terminate`] is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminateReason {
    /// [`ServerRef::stop`] was called (or its supervisor stopped it).
    Requested,
    /// Every [`ServerRef`] was dropped: nobody can reach the server.
    Dropped,
    /// The server is unwinding: a handler panicked or it was stopped with
    /// `request_stop`.
    Unwinding,
}

/// What the server's handlers can do besides handling: say who they are,
/// and watch monitors.
#[derive(Debug)]
pub struct ServerCtx {
    pid: Pid,
    watcher: Watcher,
}

impl ServerCtx {
    /// The server's pid.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// A cloneable handle that adds Down arms to this server; store it (from
    /// `init`) to watch monitors from any handler.
    pub fn watcher(&self) -> Watcher {
        self.watcher.clone()
    }

    /// Watches `monitor`: its Down arrives at [`GenServer::handle_down`].
    pub fn watch(&self, monitor: Monitor) -> Result<(), NoProc> {
        self.watcher.watch(monitor)
    }

    /// Monitors `pid` and watches the monitor; returns its id.
    pub fn monitor(&self, pid: Pid) -> Result<MonitorId, NoProc> {
        self.watcher.monitor(pid)
    }
}

/// Adds Down arms to a server (the control arm's sending side).
#[derive(Debug, Clone)]
pub struct Watcher {
    server: Pid,
    control: Sender<Monitor>,
}

impl Watcher {
    /// The server this watcher feeds.
    pub fn server(&self) -> Pid {
        self.server
    }

    /// Hands `monitor` to the server: its Down arrives at
    /// [`GenServer::handle_down`]. `Err(NoProc)` if the server has ended
    /// (the monitor is dropped).
    pub fn watch(&self, monitor: Monitor) -> Result<(), NoProc> {
        self.control.send(monitor).map_err(|_| NoProc(self.server))
    }

    /// Monitors `pid` and hands the monitor to the server; returns its id.
    pub fn monitor(&self, pid: Pid) -> Result<MonitorId, NoProc> {
        let monitor = monitor::monitor(pid);
        let id = monitor.id;
        self.watch(monitor)?;
        Ok(id)
    }
}

/// What travels on the inbox.
enum Envelope<G: GenServer> {
    Call(G::Call, Sender<G::Reply>),
    Cast(G::Cast),
    Stop,
}

/// Why a call returned no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// The server had already ended: the request was not delivered.
    NoProc(Pid),
    /// The server ended before replying (it died handling the request, or
    /// with the request still queued).
    Dead(Pid),
    /// No reply within the timeout. The request may still be handled; its
    /// late reply is dropped.
    Timeout,
    /// Called on a worker's driver outside any process (a handler actor),
    /// where waiting would stall the worker.
    NotInProcess,
    /// The server called itself, which would wait forever.
    CallingSelf,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::NoProc(pid) => write!(f, "server {pid} has exited: the request was not delivered"),
            CallError::Dead(pid) => write!(f, "server {pid} ended before replying"),
            CallError::Timeout => {
                f.write_str("no reply within the timeout (the request may still be handled)")
            }
            CallError::NotInProcess => {
                f.write_str("call made on a worker's driver outside any process, where it cannot wait")
            }
            CallError::CallingSelf => {
                f.write_str("a server called itself: it would wait forever (handle it inline instead)")
            }
        }
    }
}
impl core::error::Error for CallError {}

/// A server to start: its initial state and static info channels.
pub struct Server<G: GenServer> {
    state: G,
    infos: Vec<Receiver<G::Info>>,
    worker: Option<usize>,
}

impl<G: GenServer> fmt::Debug for Server<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server").field("infos", &self.infos.len()).field("worker", &self.worker).finish()
    }
}

impl<G: GenServer> Server<G> {
    /// A server with initial state `state`.
    pub fn new(state: G) -> Server<G> {
        Server { state, infos: Vec::new(), worker: None }
    }

    /// Adds a static info channel: its messages go to
    /// [`GenServer::handle_info`]. Info channels rank in the order added.
    pub fn with_info(mut self, info: Receiver<G::Info>) -> Server<G> {
        self.infos.push(info);
        self
    }

    /// Runs the server on worker `worker` (default: the caller's).
    pub fn on_worker(mut self, worker: usize) -> Server<G> {
        self.worker = Some(worker);
        self
    }

    /// Spawns the server. It runs `init` first, then serves; calls made
    /// meanwhile wait in the inbox.
    pub fn start(self) -> Result<ServerRef<G>, SpawnError> {
        let Server { state, infos, worker } = self;
        let (inbox_tx, inbox) = channel::<Envelope<G>>();
        let body = move || serve(state, inbox, infos);
        let handle = match worker {
            Some(worker) => crate::kernel::join::spawn_on(worker, body),
            None => crate::kernel::join::spawn(body),
        }?;
        if let Some(runtime) = process::current_runtime() {
            // Listed for `whereis`. A server that already ended (and so
            // could not unlist itself) is unlisted here.
            let servers = runtime.shared.servers();
            servers.insert(handle.pid(), &inbox_tx, core::any::type_name::<G>());
            if !runtime.is_alive(handle.pid()) {
                servers.remove(handle.pid());
            }
        }
        Ok(ServerRef { pid: handle.pid(), inbox: inbox_tx })
    }

    /// [`start`](Self::start), then registers the server under `name`
    /// (see [`register`](crate::otp::registry::register)), so that
    /// [`ServerRef::whereis`] finds it — a restarted one too, when a
    /// supervisor's start function calls this. The name is bound before
    /// this returns.
    ///
    /// # Errors
    ///
    /// [`StartError::Spawn`] if the server could not be spawned;
    /// [`StartError::Name`] if the name is taken (the server is stopped,
    /// `terminate` included, before this returns).
    pub fn start_registered(self, name: &str) -> Result<ServerRef<G>, StartError> {
        let server = self.start()?;
        if let Err(e) = crate::otp::registry::register(name, server.pid) {
            let _ = server.stop();
            return Err(StartError::Name(e));
        }
        Ok(server)
    }

    /// Starts the server as a child named `name` of `supervisor`, which
    /// stops it (gracefully, `terminate` included) in its ordered shutdown.
    /// The child is `Temporary`: the state is consumed by this start, so
    /// there is nothing to restart it from — for a restartable server give
    /// the supervisor a `ChildSpec` whose start function builds a fresh one.
    pub fn start_under(
        self,
        supervisor: &SupervisorRef,
        name: &str,
    ) -> Result<ServerRef<G>, SupervisorError> {
        supervisor::start_once(supervisor, name, Shutdown::default(), move || {
            self.start().map_err(StartError::from)
        })
    }
}

impl ChildSpec {
    /// A `Permanent` child that is a gen_server, built afresh by `factory`
    /// at every (re)start and started with [`Server::start`] — no `Result`
    /// to spell out. For one that restarts under a registered name, use
    /// `ChildSpec::new(name, || Server::new(..).start_registered(name))`.
    pub fn server<G, F>(name: impl Into<String>, mut factory: F) -> ChildSpec
    where
        G: GenServer,
        F: FnMut() -> Server<G> + Send + 'static,
    {
        ChildSpec::new(name, move || factory().start())
    }
}

/// Why [`ServerRef::whereis`] found no server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerLookupError {
    /// No live process is registered under the name.
    NotRegistered,
    /// The name's holder is not a running server: a plain process, or a
    /// server no reference keeps alive any more.
    NotAServer(Pid),
    /// The name's holder is a running server of another type.
    WrongType {
        /// The holder.
        pid: Pid,
        /// The server type asked for.
        expected: &'static str,
        /// The holder's server type.
        found: &'static str,
    },
    /// Called outside a process: use [`ServerRef::lookup`] with a runtime.
    NotInProcess,
}

impl fmt::Display for ServerLookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerLookupError::NotRegistered => f.write_str("no live process is registered under that name"),
            ServerLookupError::NotAServer(pid) => write!(f, "{pid} is not a running server"),
            ServerLookupError::WrongType { pid, expected, found } => {
                write!(f, "{pid} is a server of type {found}, not {expected}")
            }
            ServerLookupError::NotInProcess => {
                f.write_str("whereis called outside a process: use ServerRef::lookup with a runtime")
            }
        }
    }
}
impl core::error::Error for ServerLookupError {}

/// The runtime's running servers' inboxes, by pid, held weakly (so the
/// directory never keeps a server alive) and type-erased (the lookup
/// names the type). An entry goes when its server ends, or, if it ended
/// first, at the next insert that finds it dead.
struct Directory(RuntimeMutex<BTreeMap<Pid, Listed>>);

/// A server's directory entry: its inbox, weakly, and its type's name.
struct Listed {
    inbox: Box<dyn Any + Send>,
    type_name: &'static str,
}

/// Why the directory gave no inbox.
enum Unfound {
    /// No entry, or its server has gone.
    Gone,
    /// A server of the named type.
    Other(&'static str),
}

impl Shared {
    fn servers(&self) -> Arc<Directory> {
        self.extension(|| Directory(RuntimeMutex::leaf(BTreeMap::new())))
    }
}

impl Directory {
    fn insert<M: Send + 'static>(&self, pid: Pid, inbox: &Sender<M>, type_name: &'static str) {
        self.0.lock().insert(pid, Listed { inbox: Box::new(inbox.downgrade()), type_name });
    }

    fn remove(&self, pid: Pid) {
        let gone = self.0.lock().remove(&pid);
        // Dropped outside the lock.
        drop(gone);
    }

    fn find<M: Send + 'static>(&self, pid: Pid) -> Result<Sender<M>, Unfound> {
        let weak = {
            let directory = self.0.lock();
            let listed = directory.get(&pid).ok_or(Unfound::Gone)?;
            match listed.inbox.downcast_ref::<WeakSender<M>>() {
                Some(weak) => weak.clone(),
                None => return Err(Unfound::Other(listed.type_name)),
            }
        };
        weak.upgrade().ok_or(Unfound::Gone)
    }
}

/// Removes the server's directory entry however it ends.
struct Unlisted(Option<(Arc<Directory>, Pid)>);

impl Drop for Unlisted {
    fn drop(&mut self) {
        if let Some((directory, pid)) = self.0.take() {
            directory.remove(pid);
        }
    }
}

/// A handle to a running server. Cloneable; when the last clone is dropped
/// the server shuts down (gracefully, `terminate` with
/// [`TerminateReason::Dropped`]).
pub struct ServerRef<G: GenServer> {
    pid: Pid,
    inbox: Sender<Envelope<G>>,
}

impl<G: GenServer> Clone for ServerRef<G> {
    fn clone(&self) -> Self {
        ServerRef { pid: self.pid, inbox: self.inbox.clone() }
    }
}

impl<G: GenServer> fmt::Debug for ServerRef<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerRef").field("pid", &self.pid).finish_non_exhaustive()
    }
}

impl<G: GenServer> ServerRef<G> {
    /// The server's pid.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The server registered under `name` in the calling process's
    /// runtime, as a typed reference (see
    /// [`Server::start_registered`]). After a supervisor restarts a
    /// registered server, this finds the new one.
    ///
    /// # Errors
    ///
    /// [`ServerLookupError::NotRegistered`] if no live process holds the name;
    /// [`ServerLookupError::NotAServer`] if its holder is not a running server
    /// (another kind of process, or one no reference keeps alive any
    /// more); [`ServerLookupError::WrongType`] if it is a server of another
    /// type; [`ServerLookupError::NotInProcess`]
    /// outside a process (use [`lookup`](Self::lookup) with a runtime
    /// handle).
    pub fn whereis(name: &str) -> Result<ServerRef<G>, ServerLookupError> {
        let runtime = process::current_runtime().ok_or(ServerLookupError::NotInProcess)?;
        Self::lookup(&runtime, name)
    }

    /// [`whereis`](Self::whereis) in `runtime`, from anywhere.
    pub fn lookup(runtime: &Runtime, name: &str) -> Result<ServerRef<G>, ServerLookupError> {
        let pid = runtime.whereis(name).ok_or(ServerLookupError::NotRegistered)?;
        let inbox = runtime.shared.servers().find::<Envelope<G>>(pid).map_err(|unfound| match unfound {
            Unfound::Gone => ServerLookupError::NotAServer(pid),
            Unfound::Other(found) => {
                ServerLookupError::WrongType { pid, expected: core::any::type_name::<G>(), found }
            }
        })?;
        Ok(ServerRef { pid, inbox })
    }

    /// Sends `request` and returns the reply; the caller parks meanwhile (a
    /// plain thread sleeps). From a handler actor: `NotInProcess`, and the
    /// request is not sent.
    #[track_caller]
    pub fn call(&self, request: G::Call) -> Result<G::Reply, CallError> {
        let reply = self.send_call(request)?;
        reply.recv().map_err(|e| match e {
            RecvError::Disconnected => CallError::Dead(self.pid),
            RecvError::NotInProcess => CallError::NotInProcess,
        })
    }

    /// [`call`](Self::call), giving up after `timeout`.
    #[track_caller]
    pub fn call_timeout(&self, request: G::Call, timeout: Duration) -> Result<G::Reply, CallError> {
        let reply = self.send_call(request)?;
        // Dropping `reply` on a timeout makes the late reply's send fail.
        reply.recv_timeout(timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => CallError::Timeout,
            RecvTimeoutError::Disconnected => CallError::Dead(self.pid),
            RecvTimeoutError::NotInProcess => CallError::NotInProcess,
        })
    }

    fn send_call(&self, request: G::Call) -> Result<Receiver<G::Reply>, CallError> {
        if !wait::can_wait() {
            return Err(CallError::NotInProcess);
        }
        if process::self_pid() == Some(self.pid) {
            return Err(CallError::CallingSelf);
        }
        let (tx, rx) = channel_waited_as(WaitKind::Call);
        self.inbox.send(Envelope::Call(request, tx)).map_err(|_| CallError::NoProc(self.pid))?;
        Ok(rx)
    }

    /// Sends `message` without waiting. `Err(NoProc)` if the server has
    /// ended (the message is dropped).
    pub fn cast(&self, message: G::Cast) -> Result<(), NoProc> {
        self.inbox.send(Envelope::Cast(message)).map_err(|_| NoProc(self.pid))
    }

    /// Stops the server after the messages already in its inbox: it runs
    /// `terminate` with [`TerminateReason::Requested`] and exits normally;
    /// this returns once it has. Outside a process (or from the server
    /// itself) it only asks.
    pub fn stop(&self) -> Result<(), NoProc> {
        let me = process::self_pid();
        let watch = (me.is_some() && me != Some(self.pid)).then(|| monitor::monitor(self.pid));
        self.inbox.send(Envelope::Stop).map_err(|_| NoProc(self.pid))?;
        if let Some(watch) = watch {
            let _ = watch.rx.recv();
        }
        Ok(())
    }
}

impl<G: GenServer> From<ServerRef<G>> for Child {
    /// A supervised server is stopped gracefully; the child keeps a
    /// reference, so the server lives as long as it is supervised.
    fn from(server: ServerRef<G>) -> Child {
        let pid = server.pid;
        Child::with_stop(pid, move || {
            let _ = server.inbox.send(Envelope::Stop);
        })
    }
}

/// Owns the state; runs `terminate` when dropped, on every path out.
struct Terminate<G: GenServer> {
    server: G,
    reason: TerminateReason,
}

impl<G: GenServer> Drop for Terminate<G> {
    fn drop(&mut self) {
        self.server.terminate(self.reason);
    }
}

/// The server process's body.
fn serve<G: GenServer>(state: G, inbox: Receiver<Envelope<G>>, infos: Vec<Receiver<G::Info>>) {
    let Some(pid) = process::self_pid() else { return };
    let _unlisted = Unlisted(process::current_runtime().map(|runtime| (runtime.shared.servers(), pid)));
    let (control_tx, control) = channel::<Monitor>();
    let ctx = ServerCtx { pid, watcher: Watcher { server: pid, control: control_tx } };
    // Declared after `ctx` and the receivers, so dropped before them:
    // `terminate` runs while the arms are still there.
    let mut guard = Terminate { server: state, reason: TerminateReason::Unwinding };
    guard.server.init(&ctx);
    let reason = serve_loop(&mut guard.server, &ctx, &inbox, &control, infos);
    guard.reason = reason;
}

/// The arms of the server loop's `Select`. `Down(i)` and `Info(i)` are
/// positions in their vectors: the keys `Down(0..downs.len())` and
/// `Info(0..infos.len())` are always exactly the ones in the set.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Arm {
    Down(usize),
    Control,
    Info(usize),
    Inbox,
}

fn serve_loop<G: GenServer>(
    server: &mut G,
    ctx: &ServerCtx,
    inbox: &Receiver<Envelope<G>>,
    control: &Receiver<Monitor>,
    infos: Vec<Receiver<G::Info>>,
) -> TerminateReason {
    let mut infos = infos;
    let mut downs: Vec<Monitor> = Vec::new();
    // Priority: Downs (oldest monitor first), control, infos, the inbox.
    // Built once; it changes only when a monitor or an info channel comes
    // or goes, so a message costs no allocation.
    let mut select = Select::with_capacity(infos.len() + 2);
    select.add(Arm::Control);
    for index in 0..infos.len() {
        select.add(Arm::Info(index));
    }
    select.add(Arm::Inbox);
    loop {
        let picked = select.wait(|arm| match arm {
            Arm::Down(index) => &downs[index].rx as &dyn Selectable,
            Arm::Control => control,
            Arm::Info(index) => &infos[index],
            Arm::Inbox => inbox,
        });
        match picked {
            Arm::Down(index) => match downs[index].rx.try_recv() {
                Ok(down) => {
                    downs.remove(index);
                    select.remove(Arm::Down(downs.len()));
                    server.handle_down(ctx, down);
                }
                Err(TryRecvError::Empty) => {}
                // A monitor closed without a Down (cancelled): drop it.
                Err(TryRecvError::Disconnected) => {
                    downs.remove(index);
                    select.remove(Arm::Down(downs.len()));
                }
            },
            Arm::Control => match control.try_recv() {
                Ok(monitor) => {
                    // Downs come first, oldest first: the new one goes last
                    // among them.
                    select.insert(downs.len(), Arm::Down(downs.len()));
                    downs.push(monitor);
                }
                Err(TryRecvError::Empty) => {}
                // The closed arm would be ready forever.
                Err(TryRecvError::Disconnected) => {
                    select.remove(Arm::Control);
                }
            },
            Arm::Info(index) => match infos[index].try_recv() {
                Ok(info) => server.handle_info(info),
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => {
                    infos.remove(index);
                    select.remove(Arm::Info(infos.len()));
                }
            },
            Arm::Inbox => match inbox.try_recv() {
                Ok(Envelope::Call(request, reply)) => {
                    let answer = server.handle_call(request);
                    // The caller may have timed out: the reply is dropped.
                    let _ = reply.send(answer);
                }
                Ok(Envelope::Cast(message)) => server.handle_cast(message),
                Ok(Envelope::Stop) => return TerminateReason::Requested,
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => return TerminateReason::Dropped,
            },
        }
    }
}
