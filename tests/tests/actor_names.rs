//! Reaching a handler actor by its registered name: `Addr::whereis` /
//! `Addr::lookup` give a typed address, a name held by an actor of
//! another type is `ActorLookupError::WrongType` naming both types, and a
//! supervised actor restarted under its name is found again and answers
//! `ask`. On one worker, four workers on one thread, and the four-thread
//! Engine.

mod common;
use common::*;

use std::time::Duration;

use smarm::actor::ReplyTo;
use smarm::{Actor, ActorLookupError, Addr, ChildSpec, Ctx, StartError, Supervisor};

/// Counts what it is asked; `Crash` panics.
#[derive(Default)]
struct Counter {
    calls: u64,
}

enum CounterMsg {
    Count(ReplyTo<u64>),
    Crash,
    /// Looks a name up as a `Counter`, from inside its handler.
    Find(&'static str, ReplyTo<Result<smarm::Pid, ActorLookupError>>),
}

impl Actor for Counter {
    type Msg = CounterMsg;
    fn handle(&mut self, _: &mut Ctx<'_, Self>, msg: CounterMsg) {
        match msg {
            CounterMsg::Count(reply) => {
                self.calls += 1;
                let _ = reply.send(self.calls);
            }
            CounterMsg::Crash => panic!("crash on request"),
            CounterMsg::Find(name, reply) => {
                let _ = reply.send(Addr::<Counter>::whereis(name).map(|found| found.pid()));
            }
        }
    }
}

/// Another actor type, to be looked up under the wrong type.
struct Echo;

impl Actor for Echo {
    type Msg = (u8, ReplyTo<u8>);
    fn handle(&mut self, _: &mut Ctx<'_, Self>, (n, reply): (u8, ReplyTo<u8>)) {
        let _ = reply.send(n);
    }
}

fn found_by_name(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let counter = rt.spawn_actor_on(next_worker(workers), Counter::default()).unwrap();
        counter.register("counter").unwrap();
        assert_eq!(smarm::whereis("counter"), Some(counter.pid()));

        let found = Addr::<Counter>::whereis("counter").unwrap();
        assert_eq!(found, counter);
        assert_eq!(found.ask(CounterMsg::Count).wait(), Ok(1));
        assert_eq!(rt.ask(&counter, CounterMsg::Count).wait(), Ok(2));
        // From a handler, on the actor's own worker.
        assert_eq!(counter.ask(|reply| CounterMsg::Find("counter", reply)).wait(), Ok(Ok(counter.pid())));

        // The wrong type, named both ways.
        let wrong = Addr::<Echo>::whereis("counter").unwrap_err();
        assert_eq!(
            wrong,
            ActorLookupError::WrongType {
                pid: counter.pid(),
                expected: std::any::type_name::<Echo>(),
                found: std::any::type_name::<Counter>(),
            }
        );
        let text = wrong.to_string();
        assert!(text.contains("Counter") && text.contains("Echo"), "{text}");

        // An actor of the other type under another name.
        let echo = rt.spawn_actor(Echo).unwrap();
        echo.register("echo").unwrap();
        assert_eq!(Addr::<Echo>::whereis("echo").unwrap().ask(|reply| (7, reply)).wait(), Ok(7));
        assert!(matches!(
            counter.ask(|reply| CounterMsg::Find("echo", reply)).wait(),
            Ok(Err(ActorLookupError::WrongType { .. }))
        ));

        // An unknown name, and a process under a name.
        assert_eq!(Addr::<Counter>::whereis("nobody").unwrap_err(), ActorLookupError::NotRegistered);
        let (_hold, park) = smarm::channel::<()>();
        let plain = smarm::spawn(move || {
            let _ = park.recv();
        })
        .unwrap();
        smarm::register("plain", plain.pid()).unwrap();
        assert_eq!(Addr::<Counter>::whereis("plain").unwrap_err(), ActorLookupError::NotAnActor(plain.pid()));

        // Stopped: the name goes with it.
        let down = smarm::monitor(counter.pid());
        counter.stop().unwrap();
        down.rx.recv().unwrap();
        assert_eq!(Addr::<Counter>::whereis("counter").unwrap_err(), ActorLookupError::NotRegistered);
        echo.stop().unwrap();
        smarm::request_stop(plain.pid()).unwrap();
        let _ = plain.join();
    });
}
drive_tests!(found_by_name => a_registered_actor_is_found_by_name_1, a_registered_actor_is_found_by_name_4, a_registered_actor_is_found_by_name_engine);

/// Starts a `Counter` on the next worker, registered under `name` before
/// the supervisor sees it (stopped again if the name is taken).
fn start_registered(name: &'static str) -> Result<Addr<Counter>, StartError> {
    let rt = smarm::current_runtime().expect("a supervisor starts its children in its process");
    let counter = rt.spawn_actor(Counter::default())?;
    if let Err(e) = counter.register(name) {
        let _ = counter.stop();
        return Err(StartError::Name(e));
    }
    Ok(counter)
}

/// A supervised actor registered under a name crashes; the supervisor
/// restarts it under the same name, and `whereis` + `ask` reach the new
/// one, with fresh state.
fn restarted_by_name(drive: Drive) {
    drive.run(|| {
        let sup = Supervisor::new()
            .child(ChildSpec::new("counter", || start_registered("counter")))
            .start()
            .unwrap();
        let first = Addr::<Counter>::whereis("counter").unwrap();
        assert_eq!(first.ask(CounterMsg::Count).wait(), Ok(1));
        assert_eq!(first.ask(CounterMsg::Count).wait(), Ok(2));
        let down = smarm::monitor(first.pid());
        first.send(CounterMsg::Crash).unwrap();
        down.rx.recv().unwrap();
        assert!(first.ask(CounterMsg::Count).wait().is_err(), "the first one is gone");
        // The supervisor restarts it under the same name.
        let start = smarm::now().unwrap();
        let second = loop {
            match Addr::<Counter>::whereis("counter") {
                Ok(found) if found.pid() != first.pid() => break found,
                _ => {
                    assert!(smarm::now().unwrap() - start < Duration::from_secs(10), "never restarted");
                    smarm::sleep(ms(1));
                }
            }
        };
        assert_eq!(second.ask(CounterMsg::Count).wait(), Ok(1), "fresh state");
        sup.stop().unwrap();
        assert_eq!(Addr::<Counter>::whereis("counter").unwrap_err(), ActorLookupError::NotRegistered);
    });
}
drive_tests!(restarted_by_name => a_restarted_actor_is_found_by_name_1, a_restarted_actor_is_found_by_name_4, a_restarted_actor_is_found_by_name_engine);

/// From outside any process, through a runtime handle.
#[test]
fn looked_up_from_outside_through_a_runtime() {
    let engine = smarm::Engine::builder().workers(2).build().unwrap();
    let echo = engine.runtime().spawn_actor_on(1, Echo).unwrap();
    echo.register("echo").unwrap();
    assert_eq!(Addr::<Echo>::whereis("echo").unwrap_err(), ActorLookupError::NotInProcess);
    let found = Addr::<Echo>::lookup(engine.runtime(), "echo").unwrap();
    assert_eq!(found.ask(|reply| (9, reply)).wait(), Ok(9));
    assert!(matches!(
        Addr::<Counter>::lookup(engine.runtime(), "echo"),
        Err(ActorLookupError::WrongType { .. })
    ));
    echo.stop().unwrap();
    engine.shutdown();
}
