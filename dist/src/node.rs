//! The node: epmd registration, connections, the process model the wire
//! lacks (who links to and monitors whom), and dispatch of incoming control
//! messages.
//!
//! One lock (`Inner::state`) holds every table; it is taken for short,
//! allocation-light sections that never wait, under a `NoPreempt` guard so
//! a preempted holder cannot stall a contender on its worker. A frame is
//! written by its sender when the connection's socket is free, and queued
//! behind the write under way otherwise (see the `outbox` module); a
//! connection's reader process decodes and dispatches straight into the
//! receiving mailbox.
//!
//! Invariant: a link or monitor that names a remote node is in the tables
//! only while that node's connection is, or is removed together with it —
//! so every remote link and monitor is told `noconnection` exactly once
//! when its connection goes.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use erl_dist::epmd::{EpmdClient, NodeEntry, DEFAULT_EPMD_PORT};
use erl_dist::handshake::{ClientSideHandshake, HandshakeError, HandshakeStatus, ServerSideHandshake};
use erl_dist::message::Message;
use erl_dist::node::{Creation, LocalNode, NodeName};
use erl_dist::term::PidOrAtom;
use erl_dist::DistributionFlags;
use smarm::{ExitReason, NoPreempt, Pid, Runtime};

use crate::error::{CallError, DistError, RecvError};
use crate::outbox::{self, FlushError, Outbox, Room};
use crate::term::{atom, Atom, ErlPid, ErlRef, FixInteger, FromTerm, Term, ToTerm, Tuple};
use crate::transport::{self, Listener, Stream};

/// How long a send waits for another process's connect to the same peer.
const DIAL_WAIT: Duration = Duration::from_secs(15);

/// The largest frame accepted from a peer: a longer one is malformed.
const MAX_FRAME: usize = 64 << 20;

/// The reader's buffer: what one `read` may take at most (a frame longer
/// than this grows it for as long as it takes).
const READ_BUFFER: usize = 64 * 1024;

/// The default [`Options::send_queue_limit`]: Erlang's default
/// `dist_buf_busy_limit`.
const SEND_QUEUE_LIMIT: usize = 1024 * 1024;

/// A local process as the wire names it: its smarm pid's index and
/// generation (an Erlang pid's id and serial).
type LocalId = (u32, u32);

fn local_id(pid: Pid) -> LocalId {
    (pid.index(), pid.generation())
}

/// How a node starts.
///
/// ```
/// let options = smarm_dist::Options { ticktime: std::time::Duration::from_secs(10), ..Default::default() };
/// assert!(!options.published);
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// The tick time: a tick goes out when nothing else was sent for a
    /// quarter of it, and a peer silent for all of it is dropped
    /// (Erlang's `net_ticktime`, 60 s by default).
    pub ticktime: Duration,
    /// Register as a normal (published) node rather than a hidden one.
    /// A published node takes part in `global`'s protocol, which this crate
    /// does not speak; hidden nodes are reached all the same by name.
    pub published: bool,
    /// Where to listen for peers (port 0: any free port).
    pub listen: SocketAddr,
    /// The port epmd listens on.
    pub epmd_port: u16,
    /// Run `epmd -daemon` if no epmd answers.
    pub start_epmd: bool,
    /// Bytes queued on one connection at which a process's send parks
    /// until the queue is written out (1 MiB by default, as Erlang's
    /// `dist_buf_busy_limit`). Frames queue only while another write to
    /// the same peer is under way or the socket is full; a frame is never
    /// split or refused for its size. Sends through
    /// [`Node::remote_address`] addresses do not park: at the limit they
    /// are handed back (`ActorSendError::NoRoute`). The node's own frames
    /// (exit signals, monitor messages, ticks) are never held back.
    pub send_queue_limit: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ticktime: Duration::from_secs(60),
            published: false,
            listen: SocketAddr::from(([0, 0, 0, 0], 0)),
            epmd_port: DEFAULT_EPMD_PORT,
            start_epmd: true,
            send_queue_limit: SEND_QUEUE_LIMIT,
        }
    }
}

/// Something a mailbox receives.
///
/// ```
/// use smarm_dist::{Incoming, atom};
/// let incoming = Incoming::Message { from: None, term: atom("hello") };
/// assert!(matches!(incoming, Incoming::Message { .. }));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A message; `from` when the sender named itself (a registered send).
    Message {
        /// The sender, when known.
        from: Option<ErlPid>,
        /// The message.
        term: Term,
    },
    /// An exit signal from a linked process, for a mailbox that traps
    /// exits (Erlang's `{'EXIT', From, Reason}`).
    Exit {
        /// The process that exited (or the remote end of a lost link).
        from: ErlPid,
        /// Why (`noconnection` when the connection was lost).
        reason: Term,
    },
    /// A monitored process died (Erlang's `{'DOWN', Ref, process, Who, Reason}`).
    Down {
        /// The monitor's reference.
        reference: ErlRef,
        /// The monitored process: a pid, or `{Name, Node}`.
        who: Term,
        /// Why (`noproc`, `noconnection`, or its exit reason).
        reason: Term,
    },
}

/// Where a message goes: a pid, or a name on a node.
///
/// ```
/// use smarm_dist::Dest;
/// let dest = Dest::from(("kv", "beam@localhost"));
/// assert!(matches!(dest, Dest::Name { .. }));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Dest {
    /// A process.
    Pid(ErlPid),
    /// The process registered as `name` on `node`.
    Name {
        /// The registered name.
        name: String,
        /// The node (`name@host`).
        node: String,
    },
}

impl From<ErlPid> for Dest {
    fn from(pid: ErlPid) -> Self {
        Dest::Pid(pid)
    }
}

impl From<&ErlPid> for Dest {
    fn from(pid: &ErlPid) -> Self {
        Dest::Pid(pid.clone())
    }
}

impl From<(&str, &str)> for Dest {
    fn from((name, node): (&str, &str)) -> Self {
        Dest::Name { name: name.to_string(), node: node.to_string() }
    }
}

impl Dest {
    fn node(&self) -> &str {
        match self {
            Dest::Pid(pid) => &pid.node.name,
            Dest::Name { node, .. } => node,
        }
    }

    fn who(&self) -> Term {
        match self {
            Dest::Pid(pid) => Term::from(pid.clone()),
            Dest::Name { name, node } => Term::from(Tuple::from(vec![atom(name), atom(node)])),
        }
    }
}

/// Why a connection was closed, as the node records it.
///
/// ```
/// let reason = smarm_dist::DisconnectReason::Silent;
/// assert!(reason.to_string().contains("tick"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// The peer closed it.
    Closed,
    /// Nothing arrived for the tick time.
    Silent,
    /// A frame could not be read: the connection is closed rather than
    /// guessed at.
    Malformed(String),
    /// A socket error.
    Io(String),
    /// The peer reconnected (it restarted): the old connection is gone.
    Replaced,
    /// This node stopped.
    Stopped,
}

impl std::fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DisconnectReason::Closed => f.write_str("closed by the peer"),
            DisconnectReason::Silent => f.write_str("no tick or message within the tick time"),
            DisconnectReason::Malformed(why) => write!(f, "malformed frame: {why}"),
            DisconnectReason::Io(why) => write!(f, "socket error: {why}"),
            DisconnectReason::Replaced => f.write_str("replaced by a new connection from the same node"),
            DisconnectReason::Stopped => f.write_str("this node stopped"),
        }
    }
}

struct Conn {
    serial: u64,
    peer: String,
    stream: Stream,
    outbox: Outbox,
    /// Milliseconds since the node's start when something last arrived.
    last_heard: AtomicU64,
}

struct MailboxEntry {
    serial: u64,
    tx: smarm::Sender<Incoming>,
    trap: Arc<AtomicBool>,
}

struct OutMonitor {
    local: LocalId,
    node: String,
    who: Term,
}

struct InMonitor {
    watcher: ErlPid,
    local: LocalId,
    /// As the watcher named it (a pid, or a registered name).
    target: PidOrAtom,
    reference: ErlRef,
}

#[derive(Default)]
struct State {
    conns: HashMap<String, Arc<Conn>>,
    connecting: HashSet<String>,
    mailboxes: HashMap<LocalId, MailboxEntry>,
    names: HashMap<String, LocalId>,
    actor_names: HashMap<String, smarm::ActorAddress>,
    links: HashSet<(LocalId, ErlPid)>,
    monitors_out: HashMap<Vec<u32>, OutMonitor>,
    monitors_in: HashMap<Vec<u32>, InMonitor>,
    watched: HashSet<LocalId>,
    processes: HashSet<Pid>,
    disconnects: HashMap<String, DisconnectReason>,
    remote_nodes: Vec<(String, u32)>,
}

pub(crate) struct Inner {
    name: String,
    node_name: NodeName,
    creation: u32,
    cookie: String,
    flags: DistributionFlags,
    options: Options,
    runtime: Runtime,
    started: Instant,
    stopped: AtomicBool,
    serials: AtomicU64,
    epmd: Mutex<Option<Stream>>,
    port: u16,
    state: Mutex<State>,
}

/// A lock on the node's tables, with preemption off while it is held.
struct Locked<'a> {
    guard: MutexGuard<'a, State>,
    _no_preempt: NoPreempt,
}

impl std::ops::Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.guard
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

/// A smarm node in an Erlang cluster.
///
/// Started inside a smarm process, it registers with epmd, listens for
/// peers, connects to them on demand and keeps each connection ticking.
/// Processes take part through a [`Mailbox`]. The node's own processes
/// (acceptor, one reader and one writer per connection, death watchers)
/// run until [`Node::stop`]: `smarm::run` returns only after it.
///
/// ```no_run
/// use smarm_dist::{Node, atom};
/// smarm::run(|| {
///     let node = Node::start("demo", "secret").unwrap();
///     let mailbox = node.mailbox().unwrap();
///     mailbox.send(("logger", "beam@localhost"), &atom("hello")).unwrap();
///     node.stop();
/// });
/// ```
#[derive(Clone)]
pub struct Node {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("name", &self.inner.name).field("port", &self.inner.port).finish()
    }
}

/// This machine's short host name, as `erl -sname` takes it.
fn short_hostname() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    match host.trim().split('.').next() {
        Some(short) if !short.is_empty() => short.to_string(),
        _ => "localhost".to_string(),
    }
}

fn valid_part(part: &str) -> bool {
    !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

fn epmd_addr(host: &str, port: u16) -> Result<SocketAddr, DistError> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| DistError::Epmd(format!("cannot resolve {host}: {e}")))?
        .next()
        .ok_or_else(|| DistError::Epmd(format!("{host} has no address")))
}

fn handshake_error(node: &str, e: HandshakeError) -> DistError {
    match e {
        HandshakeError::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            DistError::Refused { node: node.to_string(), reason: "connection closed".to_string() }
        }
        HandshakeError::CookieMismatch => {
            DistError::Refused { node: node.to_string(), reason: "cookie mismatch".to_string() }
        }
        other => DistError::Handshake { node: node.to_string(), reason: other.to_string() },
    }
}

/// Sends `message` on `conn` (see [`Outbox::send`] for `room`).
fn send_frame(conn: &Conn, message: Message, room: Room) -> Result<(), DistError> {
    let frame = frame(message)?;
    conn.outbox.send(&conn.stream, &frame, room).map_err(|e| match e {
        outbox::SendError::Closed => DistError::Io(std::io::Error::other("the connection closed")),
        outbox::SendError::Full => {
            DistError::Io(std::io::Error::other("the connection's send queue is full"))
        }
    })
}

fn frame(message: Message) -> Result<Vec<u8>, DistError> {
    let mut buffer = Vec::with_capacity(128);
    buffer.extend_from_slice(&[0, 0, 0, 0, 112]);
    message
        .write_into(&mut buffer)
        .map_err(|e| DistError::Io(std::io::Error::other(format!("cannot encode: {e}"))))?;
    let length = u32::try_from(buffer.len() - 4)
        .map_err(|_| DistError::Io(std::io::Error::other("message too large")))?;
    buffer[..4].copy_from_slice(&length.to_be_bytes());
    Ok(buffer)
}

/// Erlang's exit reason term for a smarm exit reason: `normal`,
/// `shutdown` (also for a stopped process), `killed`, `noproc`,
/// `noconnection`, `{panic, Message}`, and a reason of the sender's choosing
/// as an atom.
///
/// ```
/// use smarm::ExitReason;
/// use smarm_dist::{atom, reason_to_term};
/// assert_eq!(reason_to_term(&ExitReason::NoConnection), atom("noconnection"));
/// assert_eq!(reason_to_term(&ExitReason::Other("timeout".into())), atom("timeout"));
/// ```
pub fn reason_to_term(reason: &ExitReason) -> Term {
    match reason {
        ExitReason::Normal => atom("normal"),
        ExitReason::Stopped | ExitReason::Shutdown => atom("shutdown"),
        ExitReason::Killed => atom("killed"),
        ExitReason::NoProc => atom("noproc"),
        ExitReason::NoConnection => atom("noconnection"),
        ExitReason::Panicked(message) => Term::from(Tuple::from(vec![atom("panic"), message.to_term()])),
        ExitReason::Linked { reason, .. } => reason_to_term(reason),
        // Erlang's reasons are mostly atoms, and `term_to_reason` reads an
        // atom back as `Other`: the round trip keeps it an atom. Text too
        // long for an atom travels as a binary.
        ExitReason::Other(text) if text.chars().count() <= 255 => atom(text),
        ExitReason::Other(text) => text.to_term(),
    }
}

/// The smarm exit reason for an Erlang exit reason term (`kill` and
/// `killed` are both `Killed`; an atom smarm has no variant for is
/// `Other(name)`, any other term `Other` of its text).
///
/// ```
/// use smarm::ExitReason;
/// use smarm_dist::{atom, term_to_reason};
/// assert_eq!(term_to_reason(&atom("noconnection")), ExitReason::NoConnection);
/// assert_eq!(term_to_reason(&atom("boom")), ExitReason::Other("boom".into()));
/// ```
pub fn term_to_reason(reason: &Term) -> ExitReason {
    match reason {
        Term::Atom(a) => match a.name.as_str() {
            "normal" => ExitReason::Normal,
            "killed" | "kill" => ExitReason::Killed,
            "shutdown" => ExitReason::Shutdown,
            "noproc" => ExitReason::NoProc,
            "noconnection" => ExitReason::NoConnection,
            other => ExitReason::Other(other.to_string()),
        },
        other => ExitReason::Other(other.to_string()),
    }
}

impl Node {
    /// Starts a node named `name` (`name` or `name@host`; the host is this
    /// machine's short name, as `erl -sname` uses) with `cookie`, on the
    /// default [`Options`]. Call it from a smarm process. If no epmd
    /// answers, it runs `epmd -daemon` (which keeps running after the
    /// node stops, as with `erl`).
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     println!("{} is up", node.name());
    ///     node.stop();
    /// });
    /// ```
    pub fn start(name: &str, cookie: &str) -> Result<Node, DistError> {
        Node::start_with(name, cookie, Options::default())
    }

    /// [`Node::start`] with `options`.
    ///
    /// ```no_run
    /// use smarm_dist::{Node, Options};
    /// smarm::run(|| {
    ///     let options = Options { ticktime: std::time::Duration::from_secs(8), ..Default::default() };
    ///     let node = Node::start_with("demo", "secret", options).unwrap();
    ///     node.stop();
    /// });
    /// ```
    pub fn start_with(name: &str, cookie: &str, options: Options) -> Result<Node, DistError> {
        let runtime = smarm::current_runtime().ok_or(DistError::NotInProcess)?;
        let (alive, host) = match name.split_once('@') {
            Some((alive, host)) => (alive.to_string(), host.to_string()),
            None => (name.to_string(), short_hostname()),
        };
        if !valid_part(&alive) || !valid_part(&host) || alive.contains('.') {
            return Err(DistError::BadName(name.to_string()));
        }
        let full = format!("{alive}@{host}");
        let node_name: NodeName = full.parse().map_err(|_| DistError::BadName(name.to_string()))?;
        let listener = Listener::bind(options.listen)?;
        let port = listener.port()?;

        let epmd_at = epmd_addr("127.0.0.1", options.epmd_port)?;
        let epmd = match Stream::connect(epmd_at) {
            Ok(stream) => stream,
            Err(_) if options.start_epmd => start_epmd(epmd_at)?,
            Err(e) => return Err(DistError::Epmd(format!("cannot reach epmd at {epmd_at}: {e}"))),
        };
        let entry = if options.published {
            NodeEntry::new(&alive, port)
        } else {
            NodeEntry::new_hidden(&alive, port)
        };
        let (epmd, creation) = transport::run(EpmdClient::new(epmd).register(entry))?
            .map_err(|e| DistError::Epmd(format!("cannot register {alive}: {e}")))?;

        let mut flags = DistributionFlags::mandatory()
            | DistributionFlags::DIST_MONITOR
            | DistributionFlags::DIST_MONITOR_NAME;
        if options.published {
            flags |= DistributionFlags::PUBLISHED;
        }
        let inner = Arc::new(Inner {
            name: full,
            node_name,
            creation: creation.get(),
            cookie: cookie.to_string(),
            flags,
            options,
            runtime,
            started: Instant::now(),
            stopped: AtomicBool::new(false),
            serials: AtomicU64::new(1),
            epmd: Mutex::new(Some(epmd)),
            port,
            state: Mutex::new(State::default()),
        });
        let node = Node { inner };
        let acceptor = node.clone();
        node.spawn(move || acceptor.accept_loop(listener))?;
        Ok(node)
    }

    /// This node's name, `name@host`.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     assert!(node.name().starts_with("demo@"));
    ///     node.stop();
    /// });
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The port the node listens on (as registered with epmd).
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     assert_ne!(node.port(), 0);
    ///     node.stop();
    /// });
    /// ```
    pub fn port(&self) -> u16 {
        self.inner.port
    }

    /// The Erlang pid of the local smarm process `pid`: the same process
    /// always gets the same pid, and [`Node::local_pid`] maps it back.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let me = smarm::self_pid().unwrap();
    ///     assert_eq!(node.local_pid(&node.erl_pid(me)), Some(me));
    ///     node.stop();
    /// });
    /// ```
    pub fn erl_pid(&self, pid: Pid) -> ErlPid {
        ErlPid::new(self.inner.name.as_str(), pid.index(), pid.generation(), self.inner.creation)
    }

    /// The local smarm process an Erlang pid names, if it is one of this
    /// node's (this incarnation's) pids.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let other = smarm_dist::ErlPid::new("beam@localhost", 1, 0, 1);
    ///     assert_eq!(node.local_pid(&other), None);
    ///     node.stop();
    /// });
    /// ```
    pub fn local_pid(&self, pid: &ErlPid) -> Option<Pid> {
        (pid.node.name == self.inner.name && pid.creation == self.inner.creation)
            .then(|| Pid::from_parts(pid.id, pid.serial))
    }

    /// A mailbox for the calling process: its Erlang pid is
    /// [`Node::erl_pid`] of the process. One per process.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let mailbox = node.mailbox().unwrap();
    ///     assert_eq!(mailbox.pid(), &node.erl_pid(smarm::self_pid().unwrap()));
    ///     node.stop();
    /// });
    /// ```
    pub fn mailbox(&self) -> Result<Mailbox, DistError> {
        let me = smarm::self_pid().ok_or(DistError::NotInProcess)?;
        if self.inner.stopped.load(Ordering::Acquire) {
            return Err(DistError::Stopped);
        }
        let id = local_id(me);
        let (tx, rx) = smarm::channel();
        let trap = Arc::new(AtomicBool::new(false));
        let serial = self.inner.serials.fetch_add(1, Ordering::Relaxed);
        {
            let mut state = self.lock();
            if state.mailboxes.contains_key(&id) {
                return Err(DistError::MailboxTaken);
            }
            state.mailboxes.insert(id, MailboxEntry { serial, tx, trap: trap.clone() });
        }
        self.watch(id);
        Ok(Mailbox {
            node: self.clone(),
            pid: self.erl_pid(me),
            id,
            serial,
            rx,
            stash: VecDeque::new(),
            trap,
        })
    }

    /// Why the connection to `node` last closed, if it has.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     assert_eq!(node.last_disconnect("beam@localhost"), None);
    ///     node.stop();
    /// });
    /// ```
    pub fn last_disconnect(&self, node: &str) -> Option<DisconnectReason> {
        self.lock().disconnects.get(node).cloned()
    }

    /// The peers connected now.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     assert!(node.connected().is_empty());
    ///     node.stop();
    /// });
    /// ```
    pub fn connected(&self) -> Vec<String> {
        let mut peers: Vec<String> = self.lock().conns.keys().cloned().collect();
        peers.sort();
        peers
    }

    /// Connects to `node` now (sends connect on demand anyway); `Ok` once
    /// the handshake is done.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "wrong-cookie").unwrap();
    ///     // A typed error; the node keeps running.
    ///     assert!(node.connect("beam@localhost").is_err());
    ///     node.stop();
    /// });
    /// ```
    pub fn connect(&self, node: &str) -> Result<(), DistError> {
        self.connection(node).map(|_| ())
    }

    /// Closes the connection to `node`, if any: its links and monitors are
    /// told `noconnection`, as if the peer had gone.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     node.disconnect("beam@localhost");
    ///     node.stop();
    /// });
    /// ```
    pub fn disconnect(&self, node: &str) {
        let conn = self.lock().conns.get(node).cloned();
        if let Some(conn) = conn {
            self.teardown(&conn, DisconnectReason::Closed);
        }
    }

    /// Stops the node: closes every connection (links and monitors across
    /// them are told `noconnection`), unregisters from epmd and ends the
    /// node's processes. Mailboxes receive nothing more.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     node.stop();
    ///     assert!(node.mailbox().is_err());
    /// });
    /// ```
    pub fn stop(&self) {
        if self.inner.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        let conns: Vec<Arc<Conn>> = self.lock().conns.values().cloned().collect();
        for conn in conns {
            self.teardown(&conn, DisconnectReason::Stopped);
        }
        if let Some(epmd) = self.inner.epmd.lock().unwrap_or_else(|e| e.into_inner()).take() {
            epmd.shutdown();
        }
        let processes: Vec<Pid> = {
            let mut state = self.lock();
            state.mailboxes.clear();
            state.names.clear();
            state.actor_names.clear();
            state.processes.drain().collect()
        };
        let me = smarm::self_pid();
        for pid in processes {
            if Some(pid) != me {
                let _ = self.inner.runtime.request_stop(pid);
            }
        }
    }

    /// An [`ActorAddress`](smarm::ActorAddress) for the remote process
    /// `pid`: a `send` of a [`Term`] to it goes out through this node
    /// (once [`Node::install_remote_sink`] has run). Any other payload
    /// type comes back as `NoRoute`.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     node.install_remote_sink().unwrap();
    ///     let pid = smarm_dist::ErlPid::new("beam@localhost", 80, 0, 1);
    ///     let address = node.remote_address(&pid);
    ///     let _ = address.send(smarm_dist::atom("hello"));
    ///     node.stop();
    /// });
    /// ```
    pub fn remote_address(&self, pid: &ErlPid) -> smarm::ActorAddress {
        let key = (pid.node.name.clone(), pid.creation);
        let index = {
            let mut state = self.lock();
            match state.remote_nodes.iter().position(|k| *k == key) {
                Some(index) => index,
                None => {
                    state.remote_nodes.push(key);
                    state.remote_nodes.len() - 1
                }
            }
        };
        let id = u64::from(pid.id) | (u64::from(pid.serial) << 32);
        smarm::ActorAddress::remote(&self.inner.runtime, index as u64, id)
    }

    /// Registers the handler actor at `address` as `name` on this node:
    /// what Erlang sends to `{Name, Node}` reaches the actor as an
    /// [`Incoming`] (its message type must be `Incoming`). The name goes
    /// when the actor ends.
    ///
    /// ```no_run
    /// use smarm::{Actor, Ctx};
    /// use smarm_dist::Incoming;
    /// struct Logger;
    /// impl Actor for Logger {
    ///     type Msg = Incoming;
    ///     fn handle(&mut self, _: &mut Ctx<'_, Self>, incoming: Incoming) {
    ///         println!("{incoming:?}");
    ///     }
    /// }
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let logger = smarm::spawn_actor(Logger).unwrap();
    ///     node.register_actor("logger", logger.address()).unwrap();
    ///     node.stop();
    /// });
    /// ```
    pub fn register_actor(&self, name: &str, address: smarm::ActorAddress) -> Result<(), DistError> {
        let mut state = self.lock();
        if state.names.contains_key(name) || state.actor_names.contains_key(name) {
            return Err(DistError::NameTaken(name.to_string()));
        }
        state.actor_names.insert(name.to_string(), address);
        Ok(())
    }

    /// Makes this node the runtime's [`RemoteSink`](smarm::RemoteSink):
    /// sends to [`Node::remote_address`] addresses go out through it. Once
    /// per runtime.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     assert!(node.install_remote_sink().is_ok());
    ///     assert!(node.install_remote_sink().is_err());
    ///     node.stop();
    /// });
    /// ```
    pub fn install_remote_sink(&self) -> Result<(), smarm::actor::AlreadySet> {
        self.inner.runtime.set_remote_sink(Arc::new(Sink { node: self.clone() }))
    }

    fn lock(&self) -> Locked<'_> {
        let no_preempt = NoPreempt::new();
        let guard = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        Locked { guard, _no_preempt: no_preempt }
    }

    /// A quarter of the tick time (at least a millisecond): how often an
    /// idle connection ticks and a silent one is looked at.
    fn tick_interval(&self) -> Duration {
        (self.inner.options.ticktime / 4).max(Duration::from_millis(1))
    }

    fn now_ms(&self) -> u64 {
        self.inner.started.elapsed().as_millis() as u64
    }

    /// Spawns one of the node's own processes (ended by `stop`).
    fn spawn(&self, body: impl FnOnce() + Send + 'static) -> Result<Pid, DistError> {
        let node = self.clone();
        let handle = self
            .inner
            .runtime
            .spawn(move || {
                body();
                if let Some(me) = smarm::self_pid() {
                    node.lock().processes.remove(&me);
                }
            })
            .map_err(|e| DistError::Io(std::io::Error::other(e.to_string())))?;
        let pid = handle.pid();
        let mut state = self.lock();
        // A process that already ended removed nothing; do not record it.
        if self.inner.runtime.is_alive(pid) {
            state.processes.insert(pid);
        }
        Ok(pid)
    }

    fn accept_loop(&self, listener: Listener) {
        while !self.inner.stopped.load(Ordering::Acquire) {
            let stream = match listener.accept() {
                Ok(stream) => stream,
                Err(e) => {
                    eprintln!("smarm-dist {}: accept failed: {e}", self.inner.name);
                    smarm::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let node = self.clone();
            let _ = self.spawn(move || node.accept_one(stream));
        }
    }

    fn local_node(&self) -> LocalNode {
        let mut local = LocalNode::new(self.inner.node_name.clone(), Creation::new(self.inner.creation));
        local.flags = self.inner.flags;
        local
    }

    fn accept_one(&self, stream: Stream) {
        let mut handshake = ServerSideHandshake::new(stream.clone(), self.local_node(), &self.inner.cookie);
        let peer = match transport::run(handshake.execute_recv_name()) {
            Ok(Ok(Some(peer))) => peer.to_string(),
            Ok(Ok(None)) => {
                eprintln!("smarm-dist {}: a peer asked for a dynamic name; refused", self.inner.name);
                stream.shutdown();
                return;
            }
            Ok(Err(e)) => {
                eprintln!("smarm-dist {}: incoming handshake failed: {e}", self.inner.name);
                stream.shutdown();
                return;
            }
            Err(e) => {
                eprintln!("smarm-dist {}: incoming handshake failed: {e}", self.inner.name);
                return;
            }
        };
        // A simultaneous connect: the greater name's attempt wins.
        let status = {
            let state = self.lock();
            if state.connecting.contains(&peer) && self.inner.name > peer {
                HandshakeStatus::Nok
            } else if state.connecting.contains(&peer) {
                HandshakeStatus::OkSimultaneous
            } else {
                HandshakeStatus::Ok
            }
        };
        match transport::run(handshake.execute_rest(status)) {
            Ok(Ok((stream, _))) => {
                if let Err(e) = self.install(stream, peer) {
                    eprintln!("smarm-dist {}: cannot start the connection: {e}", self.inner.name);
                }
            }
            Ok(Err(e)) => {
                eprintln!("smarm-dist {}: incoming handshake from {peer} failed: {e}", self.inner.name);
                stream.shutdown();
            }
            Err(e) => eprintln!("smarm-dist {}: incoming handshake from {peer} failed: {e}", self.inner.name),
        }
    }

    /// The connection to `peer`, made if there is none.
    fn connection(&self, peer: &str) -> Result<Arc<Conn>, DistError> {
        if self.inner.stopped.load(Ordering::Acquire) {
            return Err(DistError::Stopped);
        }
        if let Some(conn) = self.lock().conns.get(peer) {
            return Ok(conn.clone());
        }
        let Some((alive, host)) = peer.split_once('@') else {
            return Err(DistError::BadName(peer.to_string()));
        };
        if smarm::self_pid().is_none() {
            return Err(DistError::NotInProcess);
        }
        // One dial per peer at a time: a second connection would replace
        // the first and tell its links and monitors `noconnection`. Others
        // wait for the dial in progress, then use its connection (or dial
        // again if it failed).
        let deadline = Instant::now() + DIAL_WAIT;
        loop {
            {
                let mut state = self.lock();
                if let Some(conn) = state.conns.get(peer) {
                    return Ok(conn.clone());
                }
                if state.connecting.insert(peer.to_string()) {
                    break;
                }
            }
            if Instant::now() > deadline {
                let reason = "another connect to it did not finish in time".to_string();
                return Err(DistError::Handshake { node: peer.to_string(), reason });
            }
            smarm::sleep(Duration::from_millis(1));
        }
        let result = self.dial(peer, alive, host);
        self.lock().connecting.remove(peer);
        match result {
            Ok(conn) => Ok(conn),
            // The peer's own connect may have won a simultaneous race.
            Err(e @ (DistError::Handshake { .. } | DistError::Refused { .. })) => {
                self.wait_for_incoming(peer).ok_or(e)
            }
            Err(e) => Err(e),
        }
    }

    fn wait_for_incoming(&self, peer: &str) -> Option<Arc<Conn>> {
        for _ in 0..20 {
            if let Some(conn) = self.lock().conns.get(peer) {
                return Some(conn.clone());
            }
            smarm::sleep(Duration::from_millis(10));
        }
        None
    }

    fn dial(&self, peer: &str, alive: &str, host: &str) -> Result<Arc<Conn>, DistError> {
        let epmd = Stream::connect(epmd_addr(host, self.inner.options.epmd_port)?)
            .map_err(|e| DistError::Epmd(format!("cannot reach epmd on {host}: {e}")))?;
        let entry = transport::run(EpmdClient::new(epmd).get_node(alive))?
            .map_err(|e| DistError::Epmd(e.to_string()))?
            .ok_or_else(|| DistError::UnknownNode(peer.to_string()))?;
        let addr = epmd_addr(host, entry.port)?;
        let stream = Stream::connect(addr)?;
        let mut handshake = ClientSideHandshake::new(stream.clone(), self.local_node(), &self.inner.cookie);
        let result = transport::run(async {
            handshake.execute_send_name(erl_dist::LOWEST_DISTRIBUTION_PROTOCOL_VERSION).await?;
            handshake.execute_rest(true).await
        })?;
        match result {
            Ok((stream, _)) => self.install(stream, peer.to_string()),
            Err(e) => {
                stream.shutdown();
                Err(handshake_error(peer, e))
            }
        }
    }

    /// Puts a connection whose handshake is done in the table and starts
    /// its reader and writer.
    fn install(&self, stream: Stream, peer: String) -> Result<Arc<Conn>, DistError> {
        // The writer process looks at the peer's silence between waits for
        // room on a full socket.
        stream.set_write_timeout(Some(self.tick_interval()))?;
        let (outbox, kicks) = Outbox::new(self.inner.options.send_queue_limit);
        let conn = Arc::new(Conn {
            serial: self.inner.serials.fetch_add(1, Ordering::Relaxed),
            peer: peer.clone(),
            stream,
            outbox,
            last_heard: AtomicU64::new(self.now_ms()),
        });
        let old = self.lock().conns.insert(peer.clone(), conn.clone());
        if let Some(old) = old {
            // The peer restarted and reconnected before the old connection
            // was found dead.
            self.teardown_removed(&old, DisconnectReason::Replaced);
        }
        self.lock().disconnects.remove(&peer);
        let writer = self.clone();
        let writer_conn = conn.clone();
        self.spawn(move || writer.write_loop(&writer_conn, kicks))?;
        let reader = self.clone();
        let reader_conn = conn.clone();
        self.spawn(move || reader.read_loop(&reader_conn))?;
        Ok(conn)
    }

    /// The connection's writer process: finishes the writes a full socket
    /// cut short (see the `outbox` module), sends ticks on a quiet
    /// connection and drops a silent one.
    fn write_loop(&self, conn: &Arc<Conn>, kicks: smarm::Receiver<()>) {
        let interval = self.tick_interval();
        let silent = || {
            let silent_ms = self.now_ms().saturating_sub(conn.last_heard.load(Ordering::Acquire));
            silent_ms > self.inner.options.ticktime.as_millis() as u64
        };
        loop {
            if silent() {
                self.teardown(conn, DisconnectReason::Silent);
                return;
            }
            match kicks.recv_timeout(interval) {
                Ok(()) => match conn.outbox.flush(&conn.stream, silent) {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(FlushError::Silent) => {
                        self.teardown(conn, DisconnectReason::Silent);
                        return;
                    }
                    Err(FlushError::Io(e)) => {
                        self.teardown(conn, DisconnectReason::Io(e.to_string()));
                        return;
                    }
                },
                Err(smarm::RecvTimeoutError::Timeout) => {
                    // A tick only when nothing else went out meanwhile.
                    if !conn.outbox.take_sent()
                        && conn.outbox.send(&conn.stream, &[0; 4], Room::Always).is_err()
                    {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    }

    /// The connection's reader process: reads what is there (one `read`
    /// per batch of frames, straight into the frame buffer), decodes each
    /// whole frame and delivers it to its mailbox.
    fn read_loop(&self, conn: &Arc<Conn>) {
        let mut buffer = vec![0u8; READ_BUFFER];
        // Unread frames are `buffer[start..end]`.
        let (mut start, mut end) = (0, 0);
        loop {
            // Dispatch every whole frame in the buffer.
            let mut wanted = 4;
            loop {
                let available = &buffer[start..end];
                if available.len() < 4 {
                    break;
                }
                let length =
                    u32::from_be_bytes([available[0], available[1], available[2], available[3]]) as usize;
                if length > MAX_FRAME {
                    self.teardown(conn, DisconnectReason::Malformed(format!("a frame of {length} bytes")));
                    return;
                }
                if available.len() < 4 + length {
                    wanted = 4 + length;
                    break;
                }
                let body = &available[4..4 + length];
                if !body.is_empty() {
                    if body[0] != 112 {
                        let why = format!("pass-through tag {} instead of 112", body[0]);
                        self.teardown(conn, DisconnectReason::Malformed(why));
                        return;
                    }
                    match Message::read_from(&mut &body[1..]) {
                        Ok(message) => self.dispatch(conn, message),
                        Err(e) => {
                            self.teardown(conn, DisconnectReason::Malformed(e.to_string()));
                            return;
                        }
                    }
                }
                start += 4 + length;
            }
            // Keep the unread part at the front, with room for the frame
            // under way (and the normal size back once a long one is done).
            buffer.copy_within(start..end, 0);
            end -= start;
            start = 0;
            if buffer.len() < wanted {
                buffer.resize(wanted, 0);
            } else if buffer.len() > READ_BUFFER && end.max(wanted) <= READ_BUFFER {
                buffer.truncate(READ_BUFFER);
                buffer.shrink_to_fit();
            }
            // Room for at least one byte: a zero-length read would look like the end.
            debug_assert!(end < buffer.len());
            match conn.stream.read_some(&mut buffer[end..]) {
                Ok(0) => {
                    self.teardown(conn, DisconnectReason::Closed);
                    return;
                }
                Ok(n) => {
                    conn.last_heard.store(self.now_ms(), Ordering::Release);
                    conn.outbox.heard();
                    end += n;
                }
                Err(e) => {
                    self.teardown(conn, DisconnectReason::Io(e.to_string()));
                    return;
                }
            }
        }
    }

    /// Takes `conn` out of the table (if it is still there) and tells its
    /// links and monitors.
    fn teardown(&self, conn: &Arc<Conn>, reason: DisconnectReason) {
        let current = {
            let mut state = self.lock();
            match state.conns.get(&conn.peer) {
                Some(c) if c.serial == conn.serial => state.conns.remove(&conn.peer),
                _ => None,
            }
        };
        if current.is_some() {
            self.teardown_removed(conn, reason);
        } else {
            conn.outbox.close();
            conn.stream.shutdown();
        }
    }

    fn teardown_removed(&self, conn: &Arc<Conn>, reason: DisconnectReason) {
        conn.outbox.close();
        conn.stream.shutdown();
        if reason != DisconnectReason::Stopped {
            eprintln!("smarm-dist {}: connection to {} closed: {reason}", self.inner.name, conn.peer);
        }
        let peer = conn.peer.as_str();
        let (links, monitors) = {
            let mut state = self.lock();
            state.disconnects.insert(peer.to_string(), reason);
            let links: Vec<(LocalId, ErlPid)> =
                state.links.iter().filter(|(_, remote)| remote.node.name == peer).cloned().collect();
            for link in &links {
                state.links.remove(link);
            }
            let out: Vec<Vec<u32>> =
                state.monitors_out.iter().filter(|(_, m)| m.node == peer).map(|(k, _)| k.clone()).collect();
            let monitors: Vec<(Vec<u32>, OutMonitor)> =
                out.into_iter().filter_map(|k| state.monitors_out.remove(&k).map(|m| (k, m))).collect();
            state.monitors_in.retain(|_, m| m.watcher.node.name != peer);
            (links, monitors)
        };
        for (local, remote) in links {
            self.exit_local(local, remote, atom("noconnection"), false);
        }
        for (id, monitor) in monitors {
            let reference = self.reference_with(id);
            let down = Incoming::Down { reference, who: monitor.who, reason: atom("noconnection") };
            self.deliver(monitor.local, down);
        }
    }

    fn reference_with(&self, id: Vec<u32>) -> ErlRef {
        ErlRef { node: Atom::from(self.inner.name.as_str()), id, creation: self.inner.creation }
    }

    fn new_reference(&self) -> ErlRef {
        let n = self.inner.serials.fetch_add(1, Ordering::Relaxed);
        self.reference_with(vec![n as u32, (n >> 32) as u32, self.inner.started.elapsed().subsec_nanos()])
    }

    /// Sends a control message to `peer`, connecting if needed; a
    /// process's own send, which parks while the connection's queue is at
    /// its limit.
    fn send_control(&self, peer: &str, message: Message) -> Result<(), DistError> {
        let conn = self.connection(peer)?;
        send_frame(&conn, message, Room::Wait)
    }

    fn deliver(&self, local: LocalId, incoming: Incoming) {
        let tx = self.lock().mailboxes.get(&local).map(|m| m.tx.clone());
        if let Some(tx) = tx {
            let _ = tx.send(incoming);
        }
    }

    fn deliver_named(&self, name: &str, incoming: Incoming) -> bool {
        let (tx, actor) = {
            let state = self.lock();
            let tx = state.names.get(name).and_then(|id| state.mailboxes.get(id)).map(|m| m.tx.clone());
            (tx, state.actor_names.get(name).cloned())
        };
        if let Some(tx) = tx {
            return tx.send(incoming).is_ok();
        }
        let Some(actor) = actor else { return false };
        if actor.send(incoming).is_ok() {
            return true;
        }
        // The actor has ended: its name goes with it.
        let mut state = self.lock();
        if state.actor_names.get(name).is_some_and(|a| *a == actor) {
            state.actor_names.remove(name);
        }
        false
    }

    fn local_of(&self, pid: &ErlPid) -> Option<LocalId> {
        self.local_pid(pid).map(local_id)
    }

    /// An exit signal from `from` reaches local process `local`, with
    /// Erlang's rules: a trapping mailbox receives it; `normal` is dropped;
    /// `kill` sent by `exit/2` cannot be trapped; anything else ends the
    /// process with that reason.
    fn exit_local(&self, local: LocalId, from: ErlPid, reason: Term, from_exit2: bool) {
        let is_kill = from_exit2 && matches!(&reason, Term::Atom(a) if a.name == "kill");
        let trap = self.lock().mailboxes.get(&local).map(|m| (m.tx.clone(), m.trap.load(Ordering::Acquire)));
        let pid = Pid::from_parts(local.0, local.1);
        match trap {
            Some((tx, true)) if !is_kill => {
                let _ = tx.send(Incoming::Exit { from, reason });
            }
            _ => {
                let reason = if is_kill { ExitReason::Killed } else { term_to_reason(&reason) };
                let _ = self.inner.runtime.exit(pid, pid, reason);
            }
        }
    }

    /// Makes sure a death watcher runs for `local`: its death is told to
    /// its remote links and monitors.
    fn watch(&self, local: LocalId) {
        if !self.lock().watched.insert(local) {
            return;
        }
        let node = self.clone();
        let pid = Pid::from_parts(local.0, local.1);
        let monitor = self.inner.runtime.monitor(pid);
        let spawned = self.spawn(move || {
            let reason = match monitor.rx.recv() {
                Ok(down) => down.reason,
                Err(_) => return,
            };
            node.local_died(local, &reason);
        });
        if spawned.is_err() {
            self.lock().watched.remove(&local);
        }
    }

    fn local_died(&self, local: LocalId, reason: &ExitReason) {
        let me = self.erl_pid(Pid::from_parts(local.0, local.1));
        let reason = reason_to_term(reason);
        let (links, monitors) = {
            let mut state = self.lock();
            state.watched.remove(&local);
            state.mailboxes.remove(&local);
            state.names.retain(|_, id| *id != local);
            let links: Vec<ErlPid> =
                state.links.iter().filter(|(l, _)| *l == local).map(|(_, r)| r.clone()).collect();
            for remote in &links {
                state.links.remove(&(local, remote.clone()));
            }
            let ids: Vec<Vec<u32>> =
                state.monitors_in.iter().filter(|(_, m)| m.local == local).map(|(k, _)| k.clone()).collect();
            let monitors: Vec<InMonitor> =
                ids.into_iter().filter_map(|k| state.monitors_in.remove(&k)).collect();
            state.monitors_out.retain(|_, m| m.local != local);
            (links, monitors)
        };
        for remote in links {
            let node = remote.node.name.clone();
            let _ = self.send_existing(&node, Message::exit(me.clone(), remote, reason.clone()));
        }
        for monitor in monitors {
            let node = monitor.watcher.node.name.clone();
            let message =
                Message::monitor_p_exit(monitor.target, monitor.watcher, monitor.reference, reason.clone());
            let _ = self.send_existing(&node, message);
        }
    }

    /// Sends on an existing connection only (a signal for a peer that is
    /// gone is moot), never waiting for room: the node's own frames.
    fn send_existing(&self, peer: &str, message: Message) -> Result<(), DistError> {
        let conn = self.lock().conns.get(peer).cloned().ok_or(DistError::Stopped)?;
        send_frame(&conn, message, Room::Always)
    }

    fn dispatch(&self, conn: &Arc<Conn>, message: Message) {
        match message {
            Message::Tick => {}
            Message::Send(m) => self.to_pid(&m.to_pid, Incoming::Message { from: None, term: m.message }),
            Message::SendTt(m) => self.to_pid(&m.to_pid, Incoming::Message { from: None, term: m.message }),
            Message::SendSender(m) => {
                self.to_pid(&m.to_pid, Incoming::Message { from: Some(m.from_pid), term: m.message })
            }
            Message::SendSenderTt(m) => {
                self.to_pid(&m.to_pid, Incoming::Message { from: Some(m.from_pid), term: m.message })
            }
            Message::RegSend(m) => self.reg_send(conn, m.from_pid, &m.to_name.name, m.message),
            Message::RegSendTt(m) => self.reg_send(conn, m.from_pid, &m.to_name.name, m.message),
            Message::AliasSend(_) | Message::AliasSendTt(_) => {}
            Message::Link(m) => self.remote_link(conn, m.from_pid, &m.to_pid),
            Message::Unlink(m) => self.remote_unlink(&m.from_pid, &m.to_pid),
            Message::UnlinkId(m) => {
                self.remote_unlink(&m.from_pid, &m.to_pid);
                let ack = Message::unlink_id_ack(m.id, m.to_pid, m.from_pid);
                let _ = self.send_existing(&conn.peer, ack);
            }
            Message::UnlinkIdAck(_) | Message::NodeLink(_) | Message::GroupLeader(_) => {}
            Message::Exit(m) => self.remote_exit(m.from_pid, &m.to_pid, m.reason, false),
            Message::ExitTt(m) => self.remote_exit(m.from_pid, &m.to_pid, m.reason, false),
            Message::PayloadExit(m) => self.remote_exit(m.from_pid, &m.to_pid, m.reason, false),
            Message::PayloadExitTt(m) => self.remote_exit(m.from_pid, &m.to_pid, m.reason, false),
            Message::Exit2(m) => self.remote_exit(m.from_pid, &m.to_pid, m.reason, true),
            Message::Exit2Tt(m) => self.remote_exit(m.from_pid, &m.to_pid, m.reason, true),
            Message::PayloadExit2(m) => self.remote_exit(m.from_pid, &m.to_pid, m.reason, true),
            Message::PayloadExit2Tt(m) => self.remote_exit(m.from_pid, &m.to_pid, m.reason, true),
            Message::MonitorP(m) => self.remote_monitor(conn, m.from_pid, m.to_proc, m.reference),
            Message::DemonitorP(m) => {
                self.lock().monitors_in.remove(&m.reference.id);
            }
            Message::MonitorPExit(m) => self.monitor_fired(m.reference, m.from_proc, m.reason),
            Message::PayloadMonitorPExit(m) => self.monitor_fired(m.reference, m.from_proc, m.reason),
            Message::SpawnRequest(m) => {
                let reply = Message::spawn_reply(
                    m.req_id,
                    m.from_pid,
                    FixInteger::from(0),
                    PidOrAtom::Atom(Atom::from("notsup")),
                );
                let _ = self.send_existing(&conn.peer, reply);
            }
            Message::SpawnRequestTt(m) => {
                let reply = Message::spawn_reply(
                    m.req_id,
                    m.from_pid,
                    FixInteger::from(0),
                    PidOrAtom::Atom(Atom::from("notsup")),
                );
                let _ = self.send_existing(&conn.peer, reply);
            }
            Message::SpawnReply(_) | Message::SpawnReplyTt(_) => {}
        }
    }

    fn to_pid(&self, to: &ErlPid, incoming: Incoming) {
        if let Some(local) = self.local_of(to) {
            self.deliver(local, incoming);
        }
    }

    fn reg_send(&self, conn: &Arc<Conn>, from: ErlPid, name: &str, message: Term) {
        if self.deliver_named(name, Incoming::Message { from: Some(from.clone()), term: message.clone() }) {
            return;
        }
        // `net_adm:ping/1` asks net_kernel whether this node accepts it.
        if name == "net_kernel" {
            if let Some((tag, _)) = gen_call_parts(&message) {
                let reply = Term::from(Tuple::from(vec![tag, atom("yes")]));
                let _ = self.send_existing(&conn.peer, Message::send(from, reply));
            }
        }
    }

    fn remote_link(&self, conn: &Arc<Conn>, from: ErlPid, to: &ErlPid) {
        let local = self.local_of(to).filter(|l| self.inner.runtime.is_alive(Pid::from_parts(l.0, l.1)));
        match local {
            Some(local) => {
                self.lock().links.insert((local, from));
                self.watch(local);
            }
            None => {
                let _ = self.send_existing(&conn.peer, Message::exit(to.clone(), from, atom("noproc")));
            }
        }
    }

    fn remote_unlink(&self, from: &ErlPid, to: &ErlPid) {
        if let Some(local) = self.local_of(to) {
            self.lock().links.remove(&(local, from.clone()));
        }
    }

    fn remote_exit(&self, from: ErlPid, to: &ErlPid, reason: Term, exit2: bool) {
        let Some(local) = self.local_of(to) else { return };
        if !exit2 {
            // A link's exit signal: the link is gone with it.
            if !self.lock().links.remove(&(local, from.clone())) {
                return;
            }
        }
        self.exit_local(local, from, reason, exit2);
    }

    fn remote_monitor(&self, conn: &Arc<Conn>, from: ErlPid, to: PidOrAtom, reference: ErlRef) {
        // net_kernel is answered by the node itself and never dies while
        // the connection lives (a ping's call monitors it).
        if matches!(&to, PidOrAtom::Atom(name) if name.name == "net_kernel") {
            return;
        }
        let local = match &to {
            PidOrAtom::Pid(pid) => self.local_of(pid),
            PidOrAtom::Atom(name) => self.lock().names.get(&name.name).copied(),
        }
        .filter(|l| self.inner.runtime.is_alive(Pid::from_parts(l.0, l.1)));
        match local {
            Some(local) => {
                let monitor = InMonitor { watcher: from, local, target: to, reference: reference.clone() };
                self.lock().monitors_in.insert(reference.id, monitor);
                self.watch(local);
            }
            None => {
                let message = Message::monitor_p_exit(to, from, reference, atom("noproc"));
                let _ = self.send_existing(&conn.peer, message);
            }
        }
    }

    fn monitor_fired(&self, reference: ErlRef, _from: PidOrAtom, reason: Term) {
        let monitor = self.lock().monitors_out.remove(&reference.id);
        if let Some(monitor) = monitor {
            self.deliver(monitor.local, Incoming::Down { reference, who: monitor.who, reason });
        }
    }
}

/// `{'$gen_call', {From, Tag}, Request}`'s tag and request.
fn gen_call_parts(message: &Term) -> Option<(Term, Term)> {
    let Term::Tuple(t) = message else { return None };
    match t.elements.as_slice() {
        [Term::Atom(a), Term::Tuple(from), request] if a.name == "$gen_call" && from.elements.len() == 2 => {
            Some((from.elements[1].clone(), request.clone()))
        }
        _ => None,
    }
}

fn start_epmd(at: SocketAddr) -> Result<Stream, DistError> {
    // `epmd -daemon` forks and its first process exits at once: wait for
    // that exit in short sleeps, never blocking the worker.
    let mut child = std::process::Command::new("epmd")
        .arg("-daemon")
        .spawn()
        .map_err(|e| DistError::Epmd(format!("cannot run `epmd -daemon`: {e}")))?;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => smarm::sleep(Duration::from_millis(5)),
            Err(e) => return Err(DistError::Epmd(format!("cannot run `epmd -daemon`: {e}"))),
        }
    };
    if !status.success() {
        return Err(DistError::Epmd(format!("`epmd -daemon` failed: {status}")));
    }
    for _ in 0..100 {
        if let Ok(stream) = Stream::connect(at) {
            return Ok(stream);
        }
        smarm::sleep(Duration::from_millis(20));
    }
    Err(DistError::Epmd(format!("epmd started but does not answer at {at}")))
}

/// A process's place in the cluster: its Erlang pid, what it receives,
/// and how it sends, links, monitors and calls across nodes.
///
/// Dropping the mailbox unregisters it (messages to its pid are then
/// dropped, as Erlang drops messages to a dead pid); its process's death
/// is still told to its remote links and monitors.
///
/// ```no_run
/// use std::time::Duration;
/// use smarm_dist::{Atom, Incoming, Node};
/// smarm::run(|| {
///     let node = Node::start("client", "secret").unwrap();
///     let mut mailbox = node.mailbox().unwrap();
///     mailbox.trap_exits(true);
///     let reference = mailbox.monitor(("logger", "beam@localhost"));
///     let count: Result<u64, _> = mailbox.call(("counter", "beam@localhost"), &Atom::from("get"), Duration::from_secs(5));
///     if let Ok(Incoming::Down { reference: r, reason, .. }) = mailbox.recv_timeout(Duration::from_secs(1)) {
///         assert_eq!(r, reference);
///         println!("logger went down: {reason}");
///     }
///     node.stop();
/// });
/// ```
pub struct Mailbox {
    node: Node,
    pid: ErlPid,
    id: LocalId,
    serial: u64,
    rx: smarm::Receiver<Incoming>,
    stash: VecDeque<Incoming>,
    trap: Arc<AtomicBool>,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox").field("pid", &self.pid).finish_non_exhaustive()
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        let mut state = self.node.lock();
        if state.mailboxes.get(&self.id).is_some_and(|m| m.serial == self.serial) {
            state.mailboxes.remove(&self.id);
            let id = self.id;
            state.names.retain(|_, owner| *owner != id);
        }
    }
}

impl Mailbox {
    /// This mailbox's Erlang pid.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let mailbox = node.mailbox().unwrap();
    ///     assert_eq!(mailbox.pid().node.name, node.name());
    ///     node.stop();
    /// });
    /// ```
    pub fn pid(&self) -> &ErlPid {
        &self.pid
    }

    /// The node this mailbox belongs to.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let mailbox = node.mailbox().unwrap();
    ///     assert_eq!(mailbox.node().name(), node.name());
    ///     node.stop();
    /// });
    /// ```
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Registers this mailbox as `name` on its node: `{Name, Node} ! Msg`
    /// from Erlang reaches it.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let mailbox = node.mailbox().unwrap();
    ///     mailbox.register("echo").unwrap();
    ///     node.stop();
    /// });
    /// ```
    pub fn register(&self, name: &str) -> Result<(), DistError> {
        let mut state = self.node.lock();
        if state.names.contains_key(name) || state.actor_names.contains_key(name) {
            return Err(DistError::NameTaken(name.to_string()));
        }
        state.names.insert(name.to_string(), self.id);
        Ok(())
    }

    /// Makes exit signals from linked processes arrive as
    /// [`Incoming::Exit`] instead of ending the process (Erlang's
    /// `process_flag(trap_exit, true)`).
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let mailbox = node.mailbox().unwrap();
    ///     mailbox.trap_exits(true);
    ///     node.stop();
    /// });
    /// ```
    pub fn trap_exits(&self, trap: bool) {
        self.trap.store(trap, Ordering::Release);
    }

    /// Sends `message` to `to` (a pid, or `(name, node)`), connecting to
    /// its node if needed. As in Erlang, a send to a process that does not
    /// exist is not an error; a node that cannot be reached is.
    ///
    /// ```no_run
    /// use smarm_dist::{Atom, Node};
    /// smarm::run(|| {
    ///     let node = Node::start("demo", "secret").unwrap();
    ///     let mailbox = node.mailbox().unwrap();
    ///     mailbox.send(("echo", "beam@localhost"), &(Atom::from("hello"), 1u32)).unwrap();
    ///     node.stop();
    /// });
    /// ```
    pub fn send(&self, to: impl Into<Dest>, message: &impl ToTerm) -> Result<(), DistError> {
        let to = to.into();
        let term = message.to_term();
        let node = &self.node;
        match &to {
            Dest::Pid(pid) if pid.node.name == node.inner.name => {
                let incoming = Incoming::Message { from: Some(self.pid.clone()), term };
                node.to_pid(pid, incoming);
                Ok(())
            }
            Dest::Name { name, node: at } if *at == node.inner.name => {
                node.deliver_named(name, Incoming::Message { from: Some(self.pid.clone()), term });
                Ok(())
            }
            Dest::Pid(pid) => node.send_control(&pid.node.name, Message::send(pid.clone(), term)),
            Dest::Name { name, node: at } => {
                node.send_control(at, Message::reg_send(self.pid.clone(), Atom::from(name.as_str()), term))
            }
        }
    }

    /// Links this mailbox's process with the remote process `pid`: if
    /// either ends abnormally, the other is ended too (or, trapping exits,
    /// told). A link to a process that does not exist ends this one with
    /// `noproc`; to an unreachable node, with `noconnection`.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let mailbox = node.mailbox().unwrap();
    ///     mailbox.trap_exits(true);
    ///     let _ = mailbox.link(&smarm_dist::ErlPid::new("beam@localhost", 80, 0, 1));
    ///     node.stop();
    /// });
    /// ```
    pub fn link(&self, pid: &ErlPid) -> Result<(), DistError> {
        let node = &self.node;
        if pid.node.name == node.inner.name {
            // A pid of this node's earlier incarnation names nobody.
            let local = node.local_pid(pid).ok_or_else(|| DistError::NoProc(pid.clone()))?;
            return node
                .inner
                .runtime
                .link(Pid::from_parts(self.id.0, self.id.1), local)
                .map_err(|_| DistError::NoProc(pid.clone()));
        }
        node.lock().links.insert((self.id, pid.clone()));
        match node.send_control(&pid.node.name, Message::link(self.pid.clone(), pid.clone())) {
            Ok(()) => Ok(()),
            Err(e) => {
                if node.lock().links.remove(&(self.id, pid.clone())) {
                    node.exit_local(self.id, pid.clone(), atom("noconnection"), false);
                }
                Err(e)
            }
        }
    }

    /// Removes the link with `pid`, if any.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let mailbox = node.mailbox().unwrap();
    ///     mailbox.unlink(&smarm_dist::ErlPid::new("beam@localhost", 80, 0, 1));
    ///     node.stop();
    /// });
    /// ```
    pub fn unlink(&self, pid: &ErlPid) {
        let node = &self.node;
        if node.lock().links.remove(&(self.id, pid.clone())) {
            let id = Term::from(FixInteger::from(
                node.inner.serials.fetch_add(1, Ordering::Relaxed) as i32 & 0xffff,
            ));
            let _ = node.send_existing(&pid.node.name, Message::unlink_id(id, self.pid.clone(), pid.clone()));
        }
    }

    /// Monitors `who` (a pid, or `(name, node)`): one [`Incoming::Down`]
    /// with the returned reference arrives when it ends — at once with
    /// `noproc` if it does not exist, `noconnection` if its node is lost
    /// or cannot be reached.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let mut mailbox = node.mailbox().unwrap();
    ///     let reference = mailbox.monitor(("logger", "beam@localhost"));
    ///     let down = mailbox.recv_timeout(std::time::Duration::from_secs(1));
    ///     node.stop();
    /// });
    /// ```
    pub fn monitor(&self, who: impl Into<Dest>) -> ErlRef {
        let who = who.into();
        let node = &self.node;
        let reference = node.new_reference();
        let peer = who.node().to_string();
        if peer == node.inner.name {
            self.monitor_local(&who, reference.clone());
            return reference;
        }
        let monitor = OutMonitor { local: self.id, node: peer.clone(), who: who.who() };
        node.lock().monitors_out.insert(reference.id.clone(), monitor);
        let target = match &who {
            Dest::Pid(pid) => PidOrAtom::Pid(pid.clone()),
            Dest::Name { name, .. } => PidOrAtom::Atom(Atom::from(name.as_str())),
        };
        let message = Message::monitor_p(self.pid.clone(), target, reference.clone());
        if node.send_control(&peer, message).is_err() {
            node.monitor_fired(reference.clone(), PidOrAtom::Atom(Atom::from("")), atom("noconnection"));
        }
        reference
    }

    fn monitor_local(&self, who: &Dest, reference: ErlRef) {
        let node = self.node.clone();
        let target = match who {
            Dest::Pid(pid) => node.local_pid(pid),
            Dest::Name { name, .. } => node.lock().names.get(name).map(|l| Pid::from_parts(l.0, l.1)),
        };
        let tx = node.lock().mailboxes.get(&self.id).map(|m| m.tx.clone());
        let (Some(tx), who) = (tx, who.who()) else { return };
        let Some(target) = target else {
            let _ = tx.send(Incoming::Down { reference, who, reason: atom("noproc") });
            return;
        };
        let monitor = node.inner.runtime.monitor(target);
        let _ = node.spawn(move || {
            if let Ok(down) = monitor.rx.recv() {
                let _ = tx.send(Incoming::Down { reference, who, reason: reason_to_term(&down.reason) });
            }
        });
    }

    /// Stops the monitor `reference`: no `Down` for it arrives after this
    /// (one already received stays).
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let mailbox = node.mailbox().unwrap();
    ///     let reference = mailbox.monitor(("logger", "beam@localhost"));
    ///     mailbox.demonitor(&reference);
    ///     node.stop();
    /// });
    /// ```
    pub fn demonitor(&self, reference: &ErlRef) {
        let node = &self.node;
        let Some(monitor) = node.lock().monitors_out.remove(&reference.id) else { return };
        let target = match &monitor.who {
            Term::Pid(pid) => PidOrAtom::Pid(pid.clone()),
            Term::Tuple(t) => match t.elements.first() {
                Some(Term::Atom(name)) => PidOrAtom::Atom(name.clone()),
                _ => return,
            },
            _ => return,
        };
        let _ = node
            .send_existing(&monitor.node, Message::demonitor_p(self.pid.clone(), target, reference.clone()));
    }

    /// The next thing that arrives, waiting as long as it takes.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("echo", "secret").unwrap();
    ///     let mut mailbox = node.mailbox().unwrap();
    ///     mailbox.register("echo").unwrap();
    ///     if let Ok(smarm_dist::Incoming::Message { from: Some(from), term }) = mailbox.recv() {
    ///         mailbox.send(from, &term).unwrap();
    ///     }
    ///     node.stop();
    /// });
    /// ```
    pub fn recv(&mut self) -> Result<Incoming, RecvError> {
        if let Some(incoming) = self.stash.pop_front() {
            return Ok(incoming);
        }
        self.rx.recv().map_err(|_| RecvError::Stopped)
    }

    /// The next thing that arrives within `timeout`.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let mut mailbox = node.mailbox().unwrap();
    ///     let nothing = mailbox.recv_timeout(std::time::Duration::from_millis(10));
    ///     assert_eq!(nothing, Err(smarm_dist::RecvError::Timeout));
    ///     node.stop();
    /// });
    /// ```
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Incoming, RecvError> {
        if let Some(incoming) = self.stash.pop_front() {
            return Ok(incoming);
        }
        self.rx.recv_timeout(timeout).map_err(|e| match e {
            smarm::RecvTimeoutError::Timeout => RecvError::Timeout,
            smarm::RecvTimeoutError::Disconnected => RecvError::Stopped,
            _ => RecvError::NotInProcess,
        })
    }

    /// The next message (not an exit or a down) that converts into `T`,
    /// within `timeout`; other arrivals wait for later receives, in order.
    ///
    /// ```no_run
    /// smarm::run(|| {
    ///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
    ///     let mut mailbox = node.mailbox().unwrap();
    ///     let number: Option<u64> = mailbox.recv_as(std::time::Duration::from_millis(10)).ok();
    ///     node.stop();
    /// });
    /// ```
    pub fn recv_as<T: FromTerm>(&mut self, timeout: Duration) -> Result<T, RecvError> {
        let deadline = Instant::now() + timeout;
        let mut skipped = VecDeque::new();
        let result = loop {
            let next = match self.stash.pop_front() {
                Some(incoming) => Ok(incoming),
                None => self.recv_deadline(deadline),
            };
            match next {
                Ok(Incoming::Message { from, term }) => match T::from_term(term) {
                    Ok(value) => break Ok(value),
                    Err(e) => skipped.push_back(Incoming::Message { from, term: e.into_term() }),
                },
                Ok(other) => skipped.push_back(other),
                Err(e) => break Err(e),
            }
        };
        skipped.append(&mut self.stash);
        self.stash = skipped;
        result
    }

    fn recv_deadline(&mut self, deadline: Instant) -> Result<Incoming, RecvError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return match self.rx.try_recv() {
                Ok(incoming) => Ok(incoming),
                Err(_) => Err(RecvError::Timeout),
            };
        }
        self.rx.recv_timeout(left).map_err(|e| match e {
            smarm::RecvTimeoutError::Timeout => RecvError::Timeout,
            smarm::RecvTimeoutError::Disconnected => RecvError::Stopped,
            _ => RecvError::NotInProcess,
        })
    }

    /// Calls the gen_server `server` (a pid, or `(name, node)`) as
    /// `gen_server:call/3` does: sends `{'$gen_call', {Self, Ref}, Request}`
    /// and waits for `{Ref, Reply}` within `timeout`, watching the server
    /// with a monitor so that its death (`noproc`, `noconnection`) is an
    /// error at once. Other arrivals wait for later receives, in order.
    ///
    /// ```no_run
    /// use smarm_dist::{Atom, Node};
    /// smarm::run(|| {
    ///     let node = Node::start("demo", "secret").unwrap();
    ///     let mut mailbox = node.mailbox().unwrap();
    ///     let reply: Result<u64, _> =
    ///         mailbox.call(("counter", "beam@localhost"), &Atom::from("get"), std::time::Duration::from_secs(5));
    ///     node.stop();
    /// });
    /// ```
    pub fn call<R: FromTerm>(
        &mut self,
        server: impl Into<Dest>,
        request: &impl ToTerm,
        timeout: Duration,
    ) -> Result<R, CallError> {
        let server = server.into();
        let deadline = Instant::now() + timeout;
        let reference = self.monitor(server.clone());
        let tag = Term::from(reference.clone());
        let from = Term::from(Tuple::from(vec![Term::from(self.pid.clone()), tag.clone()]));
        let message = Term::from(Tuple::from(vec![atom("$gen_call"), from, request.to_term()]));
        if let Err(e) = self.send(server, &message) {
            self.demonitor(&reference);
            return Err(CallError::Dist(e));
        }
        let mut skipped = VecDeque::new();
        let result = loop {
            let next = match self.stash.pop_front() {
                Some(incoming) => Ok(incoming),
                None => self.recv_deadline(deadline),
            };
            match next {
                Ok(Incoming::Message { term: Term::Tuple(mut t), .. })
                    if t.elements.len() == 2 && t.elements[0] == tag =>
                {
                    // Two elements: the tag, then the reply.
                    let reply = t.elements.pop().unwrap_or_else(|| atom("undefined"));
                    break R::from_term(reply).map_err(CallError::Convert);
                }
                Ok(Incoming::Down { reference: r, reason, .. }) if r == reference => {
                    break Err(CallError::Exit(reason));
                }
                Ok(other) => skipped.push_back(other),
                Err(RecvError::Timeout) => break Err(CallError::Timeout),
                Err(_) => break Err(CallError::Dist(DistError::Stopped)),
            }
        };
        self.demonitor(&reference);
        skipped.append(&mut self.stash);
        self.stash = skipped;
        result
    }
}

/// The node as the runtime's remote sink.
struct Sink {
    node: Node,
}

impl smarm::RemoteSink for Sink {
    fn deliver(&self, envelope: smarm::RemoteEnvelope) -> Result<(), smarm::RemoteEnvelope> {
        let key = self.node.lock().remote_nodes.get(envelope.node as usize).cloned();
        let Some((node, creation)) = key else { return Err(envelope) };
        if !envelope.payload.is::<Term>() {
            return Err(envelope);
        }
        let pid = ErlPid::new(node.as_str(), envelope.id as u32, (envelope.id >> 32) as u32, creation);
        let conn = self.node.lock().conns.get(&node).cloned();
        if conn.as_ref().is_some_and(|conn| conn.outbox.is_full()) {
            // A sink cannot park (the sender may be a handler actor): at
            // the connection's limit the message goes back.
            return Err(envelope);
        }
        let payload = match envelope.payload.downcast::<Term>() {
            Ok(payload) => *payload,
            Err(payload) => return Err(smarm::RemoteEnvelope { payload, ..envelope }),
        };
        let message = Message::send(pid, payload);
        match conn {
            Some(conn) => {
                // Encoding a term never fails; a closed connection drops the
                // message, as a send to a lost node does in Erlang.
                let _ = send_frame(&conn, message, Room::Always);
            }
            None => {
                // Connecting waits, and a sink must not (the sender may be a
                // handler actor): a node process connects and sends.
                let sender = self.node.clone();
                let _ = self.node.spawn(move || {
                    let _ = sender.send_control(&node, message);
                });
            }
        }
        Ok(())
    }
}

/// Serves Erlang's `gen_server:call({Name, Node}, Request)` on the smarm
/// [`GenServer`](smarm::GenServer) `server`: a process registered as `name`
/// on `node` converts each request with [`FromTerm`], calls the server and
/// replies with the reply's [`ToTerm`]. A request that does not convert is
/// answered `{error, {badarg, Request}}`; casts (`{'$gen_cast', Msg}`) are
/// forwarded. Returns the bridge process's pid.
///
/// ```no_run
/// use smarm::gen_server::GenServer;
/// struct Counter(u64);
/// impl GenServer for Counter {
///     type Call = u64;
///     type Reply = u64;
///     type Cast = u64;
///     type Info = ();
///     fn handle_call(&mut self, add: u64) -> u64 { self.0 += add; self.0 }
///     fn handle_cast(&mut self, add: u64) { self.0 += add; }
/// }
/// smarm::run(|| {
///     let node = smarm_dist::Node::start("demo", "secret").unwrap();
///     let server = smarm::Server::new(Counter(0)).start().unwrap();
///     smarm_dist::serve_gen_server(&node, "counter", server).unwrap();
///     node.stop();
/// });
/// ```
pub fn serve_gen_server<G>(node: &Node, name: &str, server: smarm::ServerRef<G>) -> Result<Pid, DistError>
where
    G: smarm::GenServer,
    G::Call: FromTerm,
    G::Reply: ToTerm,
    G::Cast: FromTerm,
{
    let (ready_tx, ready_rx) = smarm::channel::<Result<(), DistError>>();
    let bridge_node = node.clone();
    let name = name.to_string();
    let pid = node.spawn(move || {
        let mut mailbox = match bridge_node.mailbox() {
            Ok(mailbox) => mailbox,
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        if let Err(e) = mailbox.register(&name) {
            let _ = ready_tx.send(Err(e));
            return;
        }
        let _ = ready_tx.send(Ok(()));
        while let Ok(incoming) = mailbox.recv() {
            let Incoming::Message { term, .. } = incoming else { continue };
            bridge_one(&mailbox, &server, term);
        }
    })?;
    match ready_rx.recv() {
        Ok(result) => result.map(|()| pid),
        Err(_) => Err(DistError::Stopped),
    }
}

fn bridge_one<G>(mailbox: &Mailbox, server: &smarm::ServerRef<G>, term: Term)
where
    G: smarm::GenServer,
    G::Call: FromTerm,
    G::Reply: ToTerm,
    G::Cast: FromTerm,
{
    let Term::Tuple(t) = term else { return };
    match t.elements.as_slice() {
        [Term::Atom(a), Term::Tuple(from), request] if a.name == "$gen_call" && from.elements.len() == 2 => {
            let (Term::Pid(caller), tag) = (&from.elements[0], &from.elements[1]) else { return };
            let reply = match G::Call::from_term(request.clone()) {
                Ok(request) => match server.call(request) {
                    Ok(reply) => reply.to_term(),
                    // The server is gone: the caller's monitor tells it.
                    Err(_) => return,
                },
                Err(e) => Term::from(Tuple::from(vec![
                    atom("error"),
                    Term::from(Tuple::from(vec![atom("badarg"), e.into_term()])),
                ])),
            };
            let _ = mailbox.send(caller, &Term::from(Tuple::from(vec![tag.clone(), reply])));
        }
        [Term::Atom(a), message] if a.name == "$gen_cast" => {
            if let Ok(message) = G::Cast::from_term(message.clone()) {
                let _ = server.cast(message);
            }
        }
        _ => {}
    }
}
