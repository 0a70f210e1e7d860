//! smarm nodes in an Erlang cluster: the Erlang distribution protocol on
//! smarm processes.
//!
//! A [`Node`] registers with epmd, listens for peers and connects to them
//! on demand, with the handshake both ways and ticks on idle connections.
//! BEAM nodes and smarm nodes then address each other's processes:
//!
//! - **Identity.** A smarm process is an Erlang pid of its node
//!   ([`Node::erl_pid`], stable both ways); remote pids ([`ErlPid`]),
//!   references ([`ErlRef`]) and `{Name, Node}` addresses ([`Dest`]) are
//!   types. [`Node::remote_address`] gives an
//!   [`ActorAddress`](smarm::ActorAddress) whose sends go out through the
//!   node, as the runtime's `RemoteSink`.
//! - **Messages** are Erlang terms ([`Term`]); [`ToTerm`] and [`FromTerm`]
//!   convert Rust values, and a term of the wrong shape is a
//!   [`ConvertError`] holding the term.
//! - **A process takes part through a [`Mailbox`]**: send to a pid or a
//!   name, receive, register a name, link, monitor, trap exits, and call
//!   a gen_server ([`Mailbox::call`]) — with Erlang's rules, and
//!   `noconnection` for every link and monitor across a lost connection.
//! - **gen_server across the border**: [`serve_gen_server`] serves
//!   `gen_server:call({Name, Node}, Request)` on a smarm `GenServer`.
//!
//! Two smarm nodes speak the same protocol to each other; no BEAM is needed.
//!
//! ```no_run
//! use smarm_dist::{Incoming, Node};
//! smarm::run(|| {
//!     let node = Node::start("echo", "secret").unwrap();
//!     let mut mailbox = node.mailbox().unwrap();
//!     mailbox.register("echo").unwrap();
//!     // From Erlang: {echo, 'echo@host'} ! {self(), hello}.
//!     if let Ok(Incoming::Message { term, .. }) = mailbox.recv() {
//!         let (from, word): (smarm_dist::ErlPid, smarm_dist::Atom) = smarm_dist::FromTerm::from_term(term).unwrap();
//!         mailbox.send(from, &word).unwrap();
//!     }
//!     node.stop();
//! });
//! ```
//!
//! epmd: [`Node::start`] runs `epmd -daemon` when none answers on the
//! loopback (as `erl -sname` does); it keeps running after the node stops.

#![forbid(unsafe_code)]

mod error;
mod node;
mod outbox;
mod term;
mod transport;

pub use error::{CallError, DistError, RecvError};
pub use node::{
    reason_to_term, serve_gen_server, term_to_reason, Dest, DisconnectReason, Incoming, Mailbox, Node,
    Options,
};
pub use term::{atom, Atom, Binary, ConvertError, ErlPid, ErlRef, FromTerm, List, Map, Term, ToTerm, Tuple};
