//! One concept, one name: every call that takes a worker index answers an
//! index the runtime does not have with the typed `NoSuchWorker` (a spawn
//! with `SpawnError::NoSuchWorker`), never a panic or a made-up default;
//! the process cap is `max_processes` (handler actors count in it); the
//! inbox's errors are `InboxRecvError` / `InboxTryRecvError`, apart from
//! the channels' `RecvError` / `TryRecvError`, and say `NotInProcess` where
//! the channels do; type mismatches are counted as `type_mismatches`. On one
//! worker, four workers on one thread, and the four-thread Engine.

mod common;
use common::*;

use std::sync::{Arc, Mutex};

use smarm::actor::{InboxRecvError, InboxTryRecvError};
use smarm::{
    Actor, ActorAddress, Admin, Config, ConfigError, Ctx, NoSuchWorker, Server, SpawnError, Supervisor,
    SupervisorError,
};

/// Spawns a child on the worker it is sent, and reports the error.
struct Spawner(smarm::Sender<Result<smarm::Pid, SpawnError>>);

impl Actor for Spawner {
    type Msg = usize;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, worker: usize) {
        let _ = self.0.send(ctx.spawn_on(worker, Idle).map(|child| child.pid()));
    }
}

struct Idle;

impl Actor for Idle {
    type Msg = ();
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, (): ()) {
        ctx.stop_self();
    }
}

struct Quiet;

impl smarm::GenServer for Quiet {
    type Call = ();
    type Reply = ();
    type Cast = ();
    type Info = ();
    fn handle_call(&mut self, (): ()) {}
    fn handle_cast(&mut self, (): ()) {}
}

fn worker_indices(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let beyond = workers;
        let missing = NoSuchWorker(beyond);

        // Statistics and administration: `Ok` for each worker, the typed
        // error one past the last.
        for worker in 0..workers {
            assert!(rt.stats(worker).is_ok());
            assert_eq!(rt.worker_stats(worker).unwrap().worker, worker);
            assert!(rt.actor_stats(worker).is_ok());
            assert_eq!(rt.restarts(worker), Ok(0));
            assert!(rt.park_token(worker).is_ok());
        }
        assert_eq!(rt.stats(beyond).unwrap_err(), missing);
        assert_eq!(rt.worker_stats(beyond).unwrap_err(), missing);
        assert_eq!(rt.actor_stats(beyond).unwrap_err(), missing);
        assert_eq!(rt.restarts(beyond).unwrap_err(), missing);
        assert!(rt.park_token(beyond).is_err());
        assert_eq!(rt.admin(beyond, Admin::StopAll).unwrap_err(), missing);
        assert_eq!(rt.stats(usize::MAX).unwrap_err(), NoSuchWorker(usize::MAX));
        let text = missing.to_string();
        assert!(text.contains(&beyond.to_string()) && text.contains("worker_count"), "{text}");

        // Spawns say it as a spawn error, with the same name.
        assert_eq!(SpawnError::from(missing), SpawnError::NoSuchWorker(beyond));
        assert_eq!(rt.spawn_on(beyond, || ()).unwrap_err(), SpawnError::NoSuchWorker(beyond));
        assert_eq!(smarm::spawn_on(beyond, || ()).unwrap_err(), SpawnError::NoSuchWorker(beyond));
        assert_eq!(rt.spawn_actor_on(beyond, Idle).unwrap_err(), SpawnError::NoSuchWorker(beyond));
        assert_eq!(
            Server::new(Quiet).on_worker(beyond).start().unwrap_err(),
            SpawnError::NoSuchWorker(beyond)
        );
        assert_eq!(
            Supervisor::new().on_worker(beyond).start().unwrap_err(),
            SupervisorError::Spawn(SpawnError::NoSuchWorker(beyond))
        );
        // And from a handler.
        let (tx, rx) = smarm::channel();
        let spawner = rt.spawn_actor_on(next_worker(workers), Spawner(tx)).unwrap();
        spawner.send(beyond).unwrap();
        assert_eq!(rx.recv().unwrap(), Err(SpawnError::NoSuchWorker(beyond)));
        spawner.send(workers - 1).unwrap();
        let child = rx.recv().unwrap().unwrap();
        spawner.stop().unwrap();
        // The child ends on its first message.
        ActorAddress::from_pid(&rt, child).send(()).unwrap();
    });
}
drive_tests!(worker_indices => a_missing_worker_is_a_typed_error_1, a_missing_worker_is_a_typed_error_4, a_missing_worker_is_a_typed_error_engine);

/// `max_processes` caps processes and handler actors alike.
fn process_cap(drive: Drive) {
    let config = Config { worker_count: drive.workers(), max_processes: Some(3), ..Config::default() };
    assert_eq!(config.process_limit(), 3);
    smarm::run_with(config, || {
        let rt = smarm::current_runtime().unwrap();
        assert_eq!(rt.max_processes(), 3);
        // The root process holds one pid; an actor and a process two more.
        let actor = rt.spawn_actor(Idle).unwrap();
        let (_hold, park) = smarm::channel::<()>();
        let process = smarm::spawn(move || {
            let _ = park.recv();
        })
        .unwrap();
        assert_eq!(rt.spawn_actor(Idle).unwrap_err(), SpawnError::Full);
        assert_eq!(smarm::spawn(|| ()).unwrap_err(), SpawnError::Full);
        assert!(SpawnError::Full.to_string().contains("max_processes"));
        actor.send(()).unwrap();
        smarm::request_stop(process.pid()).unwrap();
        let _ = process.join();
    });
    let bad = Config { max_processes: Some(0), ..Config::default() };
    assert_eq!(bad.validate(), Err(ConfigError::MaxProcesses(0)));
    assert!(ConfigError::MaxProcesses(0).to_string().contains("max_processes"));
}

#[test]
fn max_processes_caps_processes_and_actors_1() {
    process_cap(Drive::Single(1));
}

#[test]
fn max_processes_caps_processes_and_actors_4() {
    process_cap(Drive::Single(4));
}

/// A handler that tries to wait on an inbox is told `NotInProcess`, as a
/// channel's `recv` tells it.
struct Waiter {
    inbox: smarm::Inbox<u8>,
    channel: smarm::Receiver<u8>,
    seen: Arc<Mutex<Option<(InboxRecvError, smarm::RecvError)>>>,
}

impl Actor for Waiter {
    type Msg = ();
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, (): ()) {
        *self.seen.lock().unwrap() = Some((self.inbox.recv().unwrap_err(), self.channel.recv().unwrap_err()));
        ctx.stop_self();
    }
}

fn inbox_names(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let inbox = rt.new_inbox::<u8>();
        assert_eq!(inbox.try_recv(), Err(InboxTryRecvError::Empty));
        assert_eq!(inbox.recv_timeout(ms(1)), Err(InboxRecvError::Timeout));
        let seen = Arc::new(Mutex::new(None));
        let (_tx, channel) = smarm::channel::<u8>();
        let waiter = rt
            .spawn_actor_on(
                next_worker(workers),
                Waiter { inbox: rt.new_inbox(), channel, seen: seen.clone() },
            )
            .unwrap();
        let down = smarm::monitor(waiter.pid());
        waiter.send(()).unwrap();
        down.rx.recv().unwrap();
        assert_eq!(
            seen.lock().unwrap().take(),
            Some((InboxRecvError::NotInProcess, smarm::RecvError::NotInProcess))
        );
    });
}
drive_tests!(inbox_names => a_handler_cannot_wait_on_an_inbox_or_a_channel_1, a_handler_cannot_wait_on_an_inbox_or_a_channel_4, a_handler_cannot_wait_on_an_inbox_or_a_channel_engine);

/// A wrong type is counted once as a type mismatch, at the call or at
/// delivery.
fn type_mismatches(drive: Drive) {
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let idle = rt.spawn_actor_on(0, Idle).unwrap();
        // Refused at the call: the typed address's untyped form knows the type.
        assert!(idle.address().send(7u64).is_err());
        // Refused at delivery: an address made from the pid alone does not.
        ActorAddress::from_pid(&rt, idle.pid()).send(7u64).unwrap();
        let start = smarm::now().unwrap();
        while rt.actor_stats(0).unwrap().type_mismatches < 2 {
            assert!(smarm::now().unwrap() - start < std::time::Duration::from_secs(10), "never counted");
            smarm::sleep(ms(1));
        }
        assert_eq!(rt.actor_stats(0).unwrap().type_mismatches, 2);
        idle.send(()).unwrap();
    });
}
drive_tests!(type_mismatches => type_mismatches_are_counted_1, type_mismatches_are_counted_4, type_mismatches_are_counted_engine);
