//! Reaching a gen_server by its registered name: `Server::start_registered`,
//! `ServerRef::whereis` / `lookup` (typed, restarted servers included),
//! `ChildSpec::server`, and the `WeakSender` the directory holds. On one
//! worker, four workers on one thread, and the four-thread Engine.

mod common;
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use smarm::{
    CallError, ChildSpec, GenServer, RegisterError, Server, ServerLookupError, ServerRef, StartError,
    Supervisor, TerminateReason,
};

/// Counts calls; `Some(true)` panics; counts its `terminate`s.
struct Counter {
    calls: u64,
    terminated: Arc<AtomicUsize>,
}

impl Counter {
    fn new(terminated: &Arc<AtomicUsize>) -> Counter {
        Counter { calls: 0, terminated: terminated.clone() }
    }
}

impl GenServer for Counter {
    type Call = bool;
    type Reply = u64;
    type Cast = ();
    type Info = ();
    fn handle_call(&mut self, crash: bool) -> u64 {
        assert!(!crash, "crash on request");
        self.calls += 1;
        self.calls
    }
    fn handle_cast(&mut self, (): ()) {}
    fn terminate(&mut self, _: TerminateReason) {
        self.terminated.fetch_add(1, Ordering::SeqCst);
    }
}

/// Another server type, to be looked up under the wrong type.
struct Echo;

impl GenServer for Echo {
    type Call = u8;
    type Reply = u8;
    type Cast = ();
    type Info = ();
    fn handle_call(&mut self, n: u8) -> u8 {
        n
    }
    fn handle_cast(&mut self, (): ()) {}
}

fn found_by_name(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let terminated = Arc::new(AtomicUsize::new(0));
        let server = Server::new(Counter::new(&terminated))
            .on_worker(1 % workers)
            .start_registered("counter")
            .unwrap();
        assert_eq!(smarm::whereis("counter"), Some(server.pid()));
        let found = ServerRef::<Counter>::whereis("counter").unwrap();
        assert_eq!(found.pid(), server.pid());
        assert_eq!(found.call(false), Ok(1));
        assert_eq!(server.call(false), Ok(2));

        // The wrong type, an unknown name, a process that is no server.
        let wrong = ServerRef::<Echo>::whereis("counter").unwrap_err();
        assert_eq!(
            wrong,
            ServerLookupError::WrongType {
                pid: server.pid(),
                expected: std::any::type_name::<Echo>(),
                found: std::any::type_name::<Counter>(),
            }
        );
        assert!(wrong.to_string().contains("Counter") && wrong.to_string().contains("Echo"), "{wrong}");
        assert_eq!(ServerRef::<Counter>::whereis("nobody").unwrap_err(), ServerLookupError::NotRegistered);
        let (_hold, park) = smarm::channel::<()>();
        let plain = smarm::spawn(move || {
            let _ = park.recv();
        })
        .unwrap();
        smarm::register("plain", plain.pid()).unwrap();
        assert_eq!(
            ServerRef::<Counter>::whereis("plain").unwrap_err(),
            ServerLookupError::NotAServer(plain.pid())
        );

        // The name is taken: the second server is stopped, terminate run.
        let second = Server::new(Counter::new(&terminated)).start_registered("counter");
        assert_eq!(second.unwrap_err(), StartError::Name(RegisterError::NameTaken { holder: server.pid() }));
        assert_eq!(terminated.load(Ordering::SeqCst), 1);

        // Stopped: the name goes with it.
        server.stop().unwrap();
        drop((server, found));
        assert_eq!(ServerRef::<Counter>::whereis("counter").unwrap_err(), ServerLookupError::NotRegistered);
        assert_eq!(terminated.load(Ordering::SeqCst), 2);
        smarm::request_stop(plain.pid()).unwrap();
        let _ = plain.join();
    });
}
drive_tests!(found_by_name => a_registered_server_is_found_by_name_1, a_registered_server_is_found_by_name_4, a_registered_server_is_found_by_name_engine);

/// A supervised, registered server crashes; `whereis` finds the restarted
/// one, with fresh state.
fn restarted_by_name(drive: Drive) {
    drive.run(|| {
        let terminated = Arc::new(AtomicUsize::new(0));
        let spec = {
            let terminated = terminated.clone();
            ChildSpec::new("counter", move || {
                Server::new(Counter::new(&terminated)).start_registered("counter")
            })
        };
        let sup = Supervisor::new().child(spec).start().unwrap();
        let first = ServerRef::<Counter>::whereis("counter").unwrap();
        assert_eq!(first.call(false), Ok(1));
        assert_eq!(first.call(true), Err(CallError::Dead(first.pid())));
        // The supervisor restarts it under the same name.
        let second = loop {
            match ServerRef::<Counter>::whereis("counter") {
                Ok(found) if found.pid() != first.pid() => break found,
                _ => smarm::sleep(ms(1)),
            }
        };
        assert_eq!(second.call(false), Ok(1), "fresh state");
        drop((first, second));
        sup.stop().unwrap();
        assert_eq!(ServerRef::<Counter>::whereis("counter").unwrap_err(), ServerLookupError::NotRegistered);
    });
}
drive_tests!(restarted_by_name => a_restarted_server_is_found_by_name_1, a_restarted_server_is_found_by_name_4, a_restarted_server_is_found_by_name_engine);

/// `ChildSpec::server` builds a fresh server at every start: no `Result`
/// to spell out.
fn child_spec_server(drive: Drive) {
    drive.run(|| {
        let terminated = Arc::new(AtomicUsize::new(0));
        let spec = {
            let terminated = terminated.clone();
            ChildSpec::server("echo-counter", move || Server::new(Counter::new(&terminated)))
        };
        let sup = Supervisor::new().child(spec).start().unwrap();
        let pid = sup.child_pid("echo-counter").unwrap().expect("started");
        assert!(smarm::current_runtime().unwrap().is_alive(pid));
        sup.stop().unwrap();
        assert_eq!(terminated.load(Ordering::SeqCst), 1);
    });
}
drive_tests!(child_spec_server => child_spec_server_starts_a_server_1, child_spec_server_starts_a_server_4, child_spec_server_starts_a_server_engine);

/// From outside any process, through a runtime handle.
#[test]
fn looked_up_from_outside_through_a_runtime() {
    let engine = smarm::Engine::builder().workers(2).build().unwrap();
    let (ready_tx, ready) = smarm::channel();
    let owner = engine
        .runtime()
        .spawn(move || {
            let server = Server::new(Echo).start_registered("echo").unwrap();
            ready_tx.send(()).unwrap();
            // Keeps the server referenced until stopped.
            smarm::sleep(ms(600_000));
            drop(server);
        })
        .unwrap();
    ready.recv().unwrap();
    assert_eq!(ServerRef::<Echo>::whereis("echo").unwrap_err(), ServerLookupError::NotInProcess);
    let echo = ServerRef::<Echo>::lookup(engine.runtime(), "echo").unwrap();
    assert_eq!(echo.call(7), Ok(7));
    drop(echo);
    drop(owner);
    engine.shutdown();
}

/// A weak sender does not keep a channel open, and never revives it.
#[test]
fn a_weak_sender_does_not_keep_the_channel_open() {
    smarm::run(|| {
        let (tx, rx) = smarm::channel::<u32>();
        let weak = tx.downgrade();
        let reader = smarm::spawn(move || rx.iter().collect::<Vec<_>>()).unwrap();
        weak.upgrade().unwrap().send(1).unwrap();
        tx.send(2).unwrap();
        drop(tx);
        // The receiver sees the end though `weak` lives.
        assert_eq!(reader.join().unwrap(), [1, 2]);
        assert!(weak.upgrade().is_none());
    });
}
