//! A smarm node against a real BEAM (`erl`), each behaviour both ways.

mod common;

use std::time::Duration;

use common::{control, unique, Beam, Epmd, COOKIE, WAIT};
use smarm::gen_server::GenServer;
use smarm_dist::{atom, Atom, CallError, DistError, ErlPid, FromTerm, Incoming, Node, Term, ToTerm};

#[test]
fn messages_cross_both_ways() {
    let epmd = Epmd::start();
    let beam = Beam::start(&epmd, COOKIE);
    let options = epmd.options();
    let beam_name = beam.name.clone();
    smarm::run(move || {
        let node = Node::start_with(&unique("smarm"), COOKIE, options).unwrap();
        let mut mailbox = node.mailbox().unwrap();
        mailbox.register("inbox").unwrap();
        // smarm -> BEAM (a registered name) -> smarm (a pid).
        let payload = (Atom::from("hello"), vec![1u32, 2, 3], "text");
        mailbox.send(("echo", beam_name.as_str()), &(mailbox.pid().clone(), &payload)).unwrap();
        let (from, back): (ErlPid, (Atom, Vec<u32>, String)) = mailbox.recv_as(WAIT).unwrap();
        assert_eq!(from.node.name, beam_name);
        assert_eq!(back, (Atom::from("hello"), vec![1, 2, 3], "text".to_string()));
        // BEAM -> smarm by name.
        let dest = (Atom::from("inbox"), Atom::from(node.name()));
        let result = control(&mut mailbox, &beam_name, (Atom::from("send"), dest, 42u8));
        assert_eq!(result, atom("ok"));
        assert_eq!(mailbox.recv_as::<u8>(WAIT).unwrap(), 42);
        node.stop();
    });
}

#[test]
fn a_wrong_cookie_is_a_typed_error_and_the_node_keeps_running() {
    let epmd = Epmd::start();
    let beam = Beam::start(&epmd, COOKIE);
    let options = epmd.options();
    let beam_name = beam.name.clone();
    let good_options = options.clone();
    smarm::run(move || {
        let node = Node::start_with(&unique("smarm"), "not-the-cookie", options).unwrap();
        match node.connect(&beam_name) {
            Err(DistError::Refused { node: peer, .. }) => assert_eq!(peer, beam_name),
            other => panic!("expected Refused, got {other:?}"),
        }
        // The other way: the BEAM (asked through a node with its cookie)
        // connects to this one and is refused.
        let good = Node::start_with(&unique("good"), COOKIE, good_options).unwrap();
        let mut good_mailbox = good.mailbox().unwrap();
        let result = control(&mut good_mailbox, &beam_name, (Atom::from("ping"), Atom::from(node.name())));
        assert_eq!(result, atom("pang"));
        let result = control(&mut good_mailbox, &beam_name, (Atom::from("ping"), Atom::from(good.name())));
        assert_eq!(result, atom("pong"));
        drop(good_mailbox);
        good.stop();
        // Still running: a mailbox, a local send, a local receive.
        let mut mailbox = node.mailbox().unwrap();
        mailbox.send(mailbox.pid().clone(), &7u8).unwrap();
        assert_eq!(mailbox.recv_as::<u8>(WAIT).unwrap(), 7);
        assert!(node.connected().is_empty());
        node.stop();
    });
}

#[test]
fn a_term_that_does_not_convert_is_handed_back() {
    let epmd = Epmd::start();
    let beam = Beam::start(&epmd, COOKIE);
    let options = epmd.options();
    let beam_name = beam.name.clone();
    smarm::run(move || {
        let node = Node::start_with(&unique("smarm"), COOKIE, options).unwrap();
        let mut mailbox = node.mailbox().unwrap();
        mailbox
            .send(("echo", beam_name.as_str()), &(mailbox.pid().clone(), Atom::from("not_a_number")))
            .unwrap();
        let Incoming::Message { term, .. } = mailbox.recv_timeout(WAIT).unwrap() else { panic!("a message") };
        let error = <(ErlPid, u64)>::from_term(term.clone()).unwrap_err();
        assert_eq!(error.into_term(), term);
        node.stop();
    });
}

struct Kv(std::collections::HashMap<String, i64>);

impl GenServer for Kv {
    type Call = (Atom, String, Option<i64>);
    type Reply = Option<i64>;
    type Cast = ();
    type Info = ();
    fn handle_call(&mut self, (op, key, value): Self::Call) -> Option<i64> {
        match (op.name.as_str(), value) {
            ("put", Some(v)) => self.0.insert(key, v),
            _ => self.0.get(&key).copied(),
        }
    }
    fn handle_cast(&mut self, (): ()) {}
}

#[test]
fn gen_server_calls_cross_both_ways() {
    let epmd = Epmd::start();
    let beam = Beam::start(&epmd, COOKIE);
    let options = epmd.options();
    let beam_name = beam.name.clone();
    smarm::run(move || {
        let node = Node::start_with(&unique("smarm"), COOKIE, options).unwrap();
        let mut mailbox = node.mailbox().unwrap();
        // smarm calls an Erlang gen_server.
        let peer_kv = ("peer_kv", beam_name.as_str());
        let put = (Atom::from("put"), Atom::from("k"), 5u8);
        let ok: Atom = mailbox.call(peer_kv, &put, WAIT).unwrap();
        assert_eq!(ok, Atom::from("ok"));
        let got: u8 = mailbox.call(peer_kv, &(Atom::from("get"), Atom::from("k")), WAIT).unwrap();
        assert_eq!(got, 5);
        // A server that dies while serving: an exit, not a timeout.
        match mailbox.call::<Term>(peer_kv, &Atom::from("crash"), WAIT) {
            Err(CallError::Exit(reason)) => assert_eq!(reason, atom("crashed")),
            other => panic!("expected an exit, got {other:?}"),
        }
        // A process that never replies: a timeout, and the mailbox stays usable.
        match mailbox.call::<Term>(("echo", beam_name.as_str()), &1u8, Duration::from_millis(200)) {
            Err(CallError::Timeout) => {}
            other => panic!("expected a timeout, got {other:?}"),
        }
        // A name nobody holds: noproc at once.
        match mailbox.call::<Term>(("nobody", beam_name.as_str()), &1u8, WAIT) {
            Err(CallError::Exit(reason)) => assert_eq!(reason, atom("noproc")),
            other => panic!("expected noproc, got {other:?}"),
        }
        // Erlang calls a smarm GenServer registered as kv.
        let server = smarm::Server::new(Kv(Default::default())).start().unwrap();
        smarm_dist::serve_gen_server(&node, "kv", server).unwrap();
        let dest = (Atom::from("kv"), Atom::from(node.name()));
        let call = |mailbox: &mut smarm_dist::Mailbox, request: Term| {
            control(mailbox, &beam_name, (Atom::from("call"), dest.clone(), request))
        };
        let put = (Atom::from("put"), "a", 41i64).to_term();
        assert_eq!(call(&mut mailbox, put), atom("undefined"));
        let get = (Atom::from("get"), "a", Atom::from("undefined")).to_term();
        assert_eq!(call(&mut mailbox, get), 41i64.to_term());
        // A request of the wrong shape gets an error reply, and the bridge lives on.
        let reply = call(&mut mailbox, atom("bad"));
        assert_eq!(reply, (Atom::from("error"), (Atom::from("badarg"), Atom::from("bad"))).to_term());
        node.stop();
    });
}

#[test]
fn monitors_and_links_cross_both_ways() {
    let epmd = Epmd::start();
    let beam = Beam::start(&epmd, COOKIE);
    let options = epmd.options();
    let beam_name = beam.name.clone();
    smarm::run(move || {
        let node = Node::start_with(&unique("smarm"), COOKIE, options).unwrap();
        let mut mailbox = node.mailbox().unwrap();
        mailbox.trap_exits(true);
        // smarm monitors and links to an Erlang process that then dies.
        let victim = ErlPid::from_term(control(&mut mailbox, &beam_name, atom("victim"))).unwrap();
        let reference = mailbox.monitor(&victim);
        mailbox.link(&victim).unwrap();
        mailbox.send(&victim, &(Atom::from("die"), Atom::from("boom"))).unwrap();
        let mut seen = Vec::new();
        for _ in 0..2 {
            match mailbox.recv_timeout(WAIT).unwrap() {
                Incoming::Down { reference: r, reason, .. } => {
                    assert_eq!(r, reference);
                    seen.push(("down", reason));
                }
                Incoming::Exit { from, reason } => {
                    assert_eq!(from, victim);
                    seen.push(("exit", reason));
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        seen.sort_by_key(|(kind, _)| *kind);
        assert_eq!(seen, vec![("down", atom("boom")), ("exit", atom("boom"))]);

        // A monitor of a process that does not exist: noproc.
        let gone = mailbox.monitor(("nobody", beam_name.as_str()));
        match mailbox.recv_timeout(WAIT).unwrap() {
            Incoming::Down { reference, reason, .. } => {
                assert_eq!(reference, gone);
                assert_eq!(reason, atom("noproc"));
            }
            other => panic!("unexpected {other:?}"),
        }

        // Erlang monitors and links to smarm processes that then end.
        let (go_tx, go_rx) = smarm::channel::<()>();
        let watched = smarm::spawn(move || {
            let _ = go_rx.recv();
            panic!("ends abnormally");
        })
        .unwrap();
        let watched_pid = node.erl_pid(watched.pid());
        control(&mut mailbox, &beam_name, (Atom::from("watch"), watched_pid.clone()));
        control(&mut mailbox, &beam_name, (Atom::from("link_to"), watched_pid));
        go_tx.send(()).unwrap();
        let _ = watched.join();
        let mut reasons = [
            mailbox_tagged(&mut mailbox, &["down", "exit"]),
            mailbox_tagged(&mut mailbox, &["down", "exit"]),
        ];
        reasons.sort();
        assert_eq!(reasons[0].0, "down");
        assert_eq!(reasons[1].0, "exit");
        assert!(reasons[0].1.starts_with("{'panic',"), "{}", reasons[0].1);

        // Erlang monitors a smarm process by its registered name.
        let named_node = node.clone();
        let (named_tx, named_rx) = smarm::channel::<()>();
        let (up_tx, up_rx) = smarm::channel::<()>();
        let named = smarm::spawn(move || {
            let mailbox = named_node.mailbox().unwrap();
            mailbox.register("named_victim").unwrap();
            up_tx.send(()).unwrap();
            let _ = named_rx.recv();
            drop(mailbox);
            smarm::exit(smarm::self_pid().unwrap(), smarm::ExitReason::Other("by_name".into())).unwrap();
            smarm::sleep(Duration::from_secs(30));
        })
        .unwrap();
        up_rx.recv().unwrap();
        let by_name = (Atom::from("named_victim"), Atom::from(node.name()));
        control(&mut mailbox, &beam_name, (Atom::from("watch"), by_name));
        named_tx.send(()).unwrap();
        let _ = named.join();
        let (tag, reason) = mailbox_tagged(&mut mailbox, &["down"]);
        assert_eq!((tag.as_str(), reason.as_str()), ("down", "'by_name'"));

        // An Erlang exit/2 ends a linked smarm process that does not trap.
        let node2 = node.clone();
        let (pid_tx, pid_rx) = smarm::channel();
        let target = smarm::spawn(move || {
            let mailbox = node2.mailbox().unwrap();
            pid_tx.send(mailbox.pid().clone()).unwrap();
            smarm::sleep(Duration::from_secs(30));
        })
        .unwrap();
        let target_pid = pid_rx.recv().unwrap();
        control(&mut mailbox, &beam_name, (Atom::from("kill"), target_pid, Atom::from("stop_now")));
        match target.join() {
            Err(smarm::JoinError::Exited(smarm::ExitReason::Other(reason))) => assert_eq!(reason, "stop_now"),
            other => panic!("expected an exit with stop_now, got {other:?}"),
        }
        node.stop();
    });
}

fn mailbox_tagged(mailbox: &mut smarm_dist::Mailbox, tags: &[&str]) -> (String, String) {
    match mailbox.recv_timeout(WAIT).unwrap() {
        Incoming::Message { term: Term::Tuple(t), .. } => {
            let Term::Atom(tag) = &t.elements[0] else { panic!("a tagged tuple") };
            assert!(tags.contains(&tag.name.as_str()), "{tag:?}");
            (tag.name.clone(), t.elements[1].to_string())
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_lost_connection_is_noconnection_and_a_restarted_node_is_reconnected() {
    let epmd = Epmd::start();
    let short = unique("beam");
    let mut beam = Beam::start_named(&epmd, &short, COOKIE);
    let options = epmd.options();
    let beam_name = beam.name.clone();
    let (to_test, from_node) = std::sync::mpsc::channel::<&'static str>();
    let (to_node, from_test) = std::sync::mpsc::channel::<()>();
    let runner = std::thread::spawn(move || {
        smarm::run(move || {
            let node = Node::start_with(&unique("smarm"), COOKIE, options).unwrap();
            let mut mailbox = node.mailbox().unwrap();
            mailbox.trap_exits(true);
            let victim = ErlPid::from_term(control(&mut mailbox, &beam_name, atom("victim"))).unwrap();
            let reference = mailbox.monitor(&victim);
            mailbox.link(&victim).unwrap();
            to_test.send("kill the node").unwrap();
            let mut reasons = Vec::new();
            for _ in 0..2 {
                match mailbox.recv_timeout(WAIT).unwrap() {
                    Incoming::Down { reference: r, reason, .. } if r == reference => reasons.push(reason),
                    Incoming::Exit { from, reason } if from == victim => reasons.push(reason),
                    other => panic!("unexpected {other:?}"),
                }
            }
            assert_eq!(reasons, vec![atom("noconnection"), atom("noconnection")]);
            assert!(node.last_disconnect(&beam_name).is_some());
            to_test.send("restart it").unwrap();
            from_test.recv().unwrap();
            // Reconnected on demand; the old incarnation's pid is noproc.
            let again = mailbox.monitor(&victim);
            match mailbox.recv_timeout(WAIT).unwrap() {
                Incoming::Down { reference, reason, .. } => {
                    assert_eq!(reference, again);
                    assert_eq!(reason, atom("noproc"));
                }
                other => panic!("unexpected {other:?}"),
            }
            assert_eq!(
                control(&mut mailbox, &beam_name, (Atom::from("ping"), Atom::from(node.name()))),
                atom("pong")
            );
            node.stop();
        })
    });
    assert_eq!(from_node.recv_timeout(WAIT).unwrap(), "kill the node");
    beam.kill();
    assert_eq!(from_node.recv_timeout(WAIT).unwrap(), "restart it");
    // epmd forgets the name once the old node's registration socket closes.
    let deadline = std::time::Instant::now() + WAIT;
    while epmd.registered(&short) {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    let _beam = Beam::start_named(&epmd, &short, COOKIE);
    to_node.send(()).unwrap();
    runner.join().unwrap();
}
