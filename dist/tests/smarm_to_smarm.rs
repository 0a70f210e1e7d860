//! Two smarm nodes talk through the distribution protocol, no BEAM.

mod common;

use std::time::Duration;

use common::{unique, Epmd, COOKIE, WAIT};
use smarm::gen_server::GenServer;
use smarm_dist::{atom, Atom, DistError, ErlPid, Incoming, Node, Term, ToTerm};

/// A handler actor that hands what it receives to the test.
struct Collector(smarm::Sender<(Option<ErlPid>, Term)>);

impl smarm::Actor for Collector {
    type Msg = Incoming;
    fn handle(&mut self, _: &mut smarm::Ctx<'_, Self>, incoming: Incoming) {
        if let Incoming::Message { from, term } = incoming {
            let _ = self.0.send((from, term));
        }
    }
}

struct Adder(i64);

impl GenServer for Adder {
    type Call = i64;
    type Reply = i64;
    type Cast = i64;
    type Info = ();
    fn handle_call(&mut self, add: i64) -> i64 {
        self.0 += add;
        self.0
    }
    fn handle_cast(&mut self, add: i64) {
        self.0 += add;
    }
}

/// How a scenario's runtime is driven: workers on the test's thread, or
/// the Engine's OS threads.
enum Drive {
    Single(usize),
    Threads(usize),
}

impl Drive {
    fn run(self, root: impl FnOnce() + Send + 'static) {
        match self {
            Drive::Single(n) => {
                smarm::run_with(smarm::Config { worker_count: n, ..Default::default() }, root)
            }
            Drive::Threads(n) => {
                let engine = smarm::Engine::builder().workers(n).build().expect("engine starts");
                engine.block_on(root).unwrap_or_else(|e| panic!("engine: {e}"))
            }
        }
    }
}

#[test]
fn two_smarm_nodes_send_call_monitor_and_link_on_one_worker() {
    two_smarm_nodes(Drive::Single(1));
}

#[test]
fn two_smarm_nodes_send_call_monitor_and_link_on_four_workers() {
    two_smarm_nodes(Drive::Single(4));
}

#[test]
fn two_smarm_nodes_send_call_monitor_and_link_on_the_engine() {
    two_smarm_nodes(Drive::Threads(4));
}

fn two_smarm_nodes(drive: Drive) {
    let epmd = Epmd::start();
    let options = epmd.options();
    drive.run(move || {
        let a = Node::start_with(&unique("a"), COOKIE, options.clone()).unwrap();
        let b = Node::start_with(&unique("b"), COOKIE, options).unwrap();
        // An echo process on a.
        let a2 = a.clone();
        let (ready_tx, ready_rx) = smarm::channel();
        let echo = smarm::spawn(move || {
            let mut mailbox = a2.mailbox().unwrap();
            mailbox.register("echo").unwrap();
            ready_tx.send(mailbox.pid().clone()).unwrap();
            while let Ok(Incoming::Message { term, .. }) = mailbox.recv() {
                let Ok((from, body)) = smarm_dist::FromTerm::from_term(term) else { break };
                let (from, body): (ErlPid, Term) = (from, body);
                if body == atom("crash") {
                    panic!("asked to crash");
                }
                mailbox.send(from, &body).unwrap();
            }
        })
        .unwrap();
        let echo_pid = ready_rx.recv().unwrap();
        assert_eq!(a.local_pid(&echo_pid), Some(echo.pid()));

        let mut mailbox = b.mailbox().unwrap();
        mailbox.trap_exits(true);
        mailbox.send(("echo", a.name()), &(mailbox.pid().clone(), "over the wire")).unwrap();
        assert_eq!(mailbox.recv_as::<String>(WAIT).unwrap(), "over the wire");
        assert_eq!(b.connected(), vec![a.name().to_string()]);

        // gen_server across: b calls a's Adder.
        let server = smarm::Server::new(Adder(0)).start().unwrap();
        smarm_dist::serve_gen_server(&a, "adder", server).unwrap();
        let sum: i64 = mailbox.call(("adder", a.name()), &40i64, WAIT).unwrap();
        assert_eq!(sum, 40);
        let sum: i64 = mailbox.call(("adder", a.name()), &2i64, WAIT).unwrap();
        assert_eq!(sum, 42);

        // An ActorAddress for a remote pid: sends go through b, the
        // runtime's remote sink.
        b.install_remote_sink().unwrap();
        let address = b.remote_address(&echo_pid);
        let term = (mailbox.pid().clone(), "through the sink").to_term();
        address.send(term).unwrap();
        assert_eq!(mailbox.recv_as::<String>(WAIT).unwrap(), "through the sink");
        // A payload that is not a term comes back.
        assert!(matches!(address.send(5u32), Err(smarm::ActorSendError::NoRoute(5))));

        // A handler actor registered by name on a receives a's REG_SENDs.
        let (seen_tx, seen_rx) = smarm::channel();
        let actor = smarm::spawn_actor(Collector(seen_tx)).unwrap();
        a.register_actor("collector", actor.address()).unwrap();
        assert!(matches!(a.register_actor("collector", actor.address()), Err(DistError::NameTaken(_))));
        mailbox.send(("collector", a.name()), &(Atom::from("note"), 7u8)).unwrap();
        let (from, term) = seen_rx.recv_timeout(WAIT).unwrap();
        assert_eq!(from, Some(mailbox.pid().clone()));
        assert_eq!(term, (Atom::from("note"), 7u8).to_term());
        actor.address().stop().unwrap();

        // b monitors and links to echo; echo crashes.
        let reference = mailbox.monitor(&echo_pid);
        mailbox.link(&echo_pid).unwrap();
        mailbox.send(&echo_pid, &(mailbox.pid().clone(), Atom::from("crash"))).unwrap();
        let mut kinds = Vec::new();
        for _ in 0..2 {
            match mailbox.recv_timeout(WAIT).unwrap() {
                Incoming::Down { reference: r, reason, .. } => {
                    assert_eq!(r, reference);
                    assert!(reason.to_string().contains("panic"), "{reason}");
                    kinds.push("down");
                }
                Incoming::Exit { from, reason } => {
                    assert_eq!(from, echo_pid);
                    assert!(reason.to_string().contains("panic"), "{reason}");
                    kinds.push("exit");
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        kinds.sort();
        assert_eq!(kinds, ["down", "exit"]);
        assert!(echo.join().is_err());

        // A monitor of the gone echo: noproc.
        let again = mailbox.monitor(&echo_pid);
        match mailbox.recv_timeout(WAIT).unwrap() {
            Incoming::Down { reference, reason, .. } => {
                assert_eq!(reference, again);
                assert_eq!(reason, atom("noproc"));
            }
            other => panic!("unexpected {other:?}"),
        }

        // a stops: b's monitor of a's adder is told noconnection.
        let watch = mailbox.monitor(("adder", a.name()));
        smarm::sleep(Duration::from_millis(50));
        a.stop();
        match mailbox.recv_timeout(WAIT).unwrap() {
            Incoming::Down { reference, reason, .. } => {
                assert_eq!(reference, watch);
                assert_eq!(reason, atom("noconnection"));
            }
            other => panic!("unexpected {other:?}"),
        }
        b.stop();
    });
}

#[test]
fn ticks_keep_an_idle_connection_up() {
    let epmd = Epmd::start();
    let options = smarm_dist::Options { ticktime: Duration::from_millis(400), ..epmd.options() };
    smarm::run(move || {
        let a = Node::start_with(&unique("a"), COOKIE, options.clone()).unwrap();
        let b = Node::start_with(&unique("b"), COOKIE, options).unwrap();
        b.connect(a.name()).unwrap();
        // Five tick times with no message: only the ticks keep it up.
        smarm::sleep(Duration::from_millis(2000));
        assert_eq!(b.connected(), vec![a.name().to_string()]);
        assert_eq!(a.connected(), vec![b.name().to_string()]);
        assert_eq!(b.last_disconnect(a.name()), None);
        a.stop();
        b.stop();
    });
}

#[test]
fn concurrent_first_sends_share_one_connection() {
    let epmd = Epmd::start();
    let options = epmd.options();
    smarm::run(move || {
        let a = Node::start_with(&unique("a"), COOKIE, options.clone()).unwrap();
        let b = Node::start_with(&unique("b"), COOKIE, options).unwrap();
        let mut inbox = a.mailbox().unwrap();
        inbox.register("inbox").unwrap();
        // Eight processes of b send at once, before any connection exists.
        let senders: Vec<_> = (0..8u8)
            .map(|i| {
                let b = b.clone();
                let to = a.name().to_string();
                smarm::spawn(move || {
                    let mailbox = b.mailbox().unwrap();
                    mailbox.send(("inbox", to.as_str()), &i).unwrap();
                })
                .unwrap()
            })
            .collect();
        for sender in senders {
            sender.join().unwrap();
        }
        let mut got: Vec<u8> = (0..8).map(|_| inbox.recv_as::<u8>(WAIT).unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, (0..8).collect::<Vec<u8>>());
        // One connection, never replaced.
        assert_eq!(b.connected(), vec![a.name().to_string()]);
        assert_eq!(b.last_disconnect(a.name()), None);
        assert_eq!(a.last_disconnect(b.name()), None);
        drop(inbox);
        a.stop();
        b.stop();
    });
}

#[test]
fn bad_starts_and_links_are_typed_errors() {
    // Outside a process.
    assert!(matches!(Node::start("outside", COOKIE), Err(DistError::NotInProcess)));
    let epmd = Epmd::start();
    let options = epmd.options();
    smarm::run(move || {
        assert!(matches!(Node::start_with("bad name", COOKIE, options.clone()), Err(DistError::BadName(_))));
        assert!(matches!(Node::start_with("a@b@c", COOKIE, options.clone()), Err(DistError::BadName(_))));
        let name = unique("twice");
        let first = Node::start_with(&name, COOKIE, options.clone()).unwrap();
        // The name is taken in epmd: refused, and the first node runs on.
        assert!(matches!(Node::start_with(&name, COOKIE, options.clone()), Err(DistError::Epmd(_))));
        let mailbox = first.mailbox().unwrap();
        assert!(matches!(first.mailbox(), Err(DistError::MailboxTaken)));
        // A link to a local pid that does not exist.
        let gone = smarm::spawn(|| ()).unwrap();
        let gone_pid = first.erl_pid(gone.pid());
        gone.join().unwrap();
        assert!(matches!(mailbox.link(&gone_pid), Err(DistError::NoProc(_))));
        // A node that is not registered anywhere.
        let unknown = format!("nobody@{}", common::host());
        assert!(matches!(first.connect(&unknown), Err(DistError::UnknownNode(_))));
        drop(mailbox);
        first.stop();
        assert!(matches!(first.mailbox(), Err(DistError::Stopped)));
    });
}
