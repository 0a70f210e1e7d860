//! The old names of renamed items still compile (with a deprecation
//! warning, allowed here) and mean what their new names mean:
//! `smarm::actor::RecvError` / `TryRecvError` (now `InboxRecvError` /
//! `InboxTryRecvError`, with `InHandler` now `NotInProcess`),
//! `MAX_ACTORS` / `max_actors` / `actor_limit` (now `MAX_PROCESSES` /
//! `max_processes` / `process_limit`; the deprecated `Config::max_actors`
//! field is honoured when `max_processes` is unset),
//! `ActorStats::mismatches` (now `type_mismatches`, filled alike) and
//! `SystemInfo::worker_id` / `num_workers` (now `worker` / `worker_count`).
#![allow(deprecated)]

mod common;
use common::*;

use smarm::actor::{InboxRecvError, InboxTryRecvError, RecvError, TryRecvError};
use smarm::{Actor, ActorAddress, Config, ConfigError, Ctx, SpawnError};

struct Idle;

impl Actor for Idle {
    type Msg = ();
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, (): ()) {
        ctx.stop_self();
    }
}

#[test]
fn the_old_inbox_error_names_are_the_new_types() {
    let timeout: RecvError = InboxRecvError::Timeout;
    assert_eq!(timeout, RecvError::Timeout);
    let empty: TryRecvError = InboxTryRecvError::Empty;
    assert_eq!(empty, TryRecvError::Empty);
    // The old variant name, in an expression and in a pattern.
    assert_eq!(RecvError::InHandler, InboxRecvError::NotInProcess);
    assert!(matches!(InboxRecvError::NotInProcess, RecvError::InHandler));
    assert!(matches!(InboxRecvError::NotInProcess, InboxRecvError::InHandler));
    assert!(!matches!(InboxRecvError::Timeout, RecvError::InHandler));
}

#[test]
fn the_old_process_cap_names_still_work() {
    assert_eq!(smarm::MAX_ACTORS, smarm::MAX_PROCESSES);
    let old = Config { max_actors: Some(2), ..Config::default() };
    assert_eq!(old.actor_limit(), 2);
    assert_eq!(old.process_limit(), 2, "the old field is honoured");
    // The new field wins when both are set.
    let both = Config { max_actors: Some(2), max_processes: Some(5), ..Config::default() };
    assert_eq!(both.process_limit(), 5);
    // A bad old field is reported under its own name.
    let bad = Config { max_actors: Some(0), ..Config::default() };
    assert_eq!(bad.validate(), Err(ConfigError::MaxActors(0)));
    assert!(ConfigError::MaxActors(0).to_string().contains("max_processes"));
    let engine = smarm::Engine::builder().workers(1).max_actors(7).build().unwrap();
    assert_eq!(engine.runtime().max_actors(), 7);
    assert_eq!(engine.runtime().max_processes(), 7);
    engine.shutdown();

    // Honoured by a running runtime: the root and one actor fill a cap of 2.
    smarm::run_with(old, || {
        let rt = smarm::current_runtime().unwrap();
        assert_eq!(rt.max_actors(), 2);
        let idle = rt.spawn_actor(Idle).unwrap();
        assert_eq!(rt.spawn_actor(Idle).unwrap_err(), SpawnError::Full);
        idle.send(()).unwrap();
    });
}

#[test]
fn the_old_mismatch_count_is_filled() {
    smarm::run(|| {
        let rt = smarm::current_runtime().unwrap();
        let idle = rt.spawn_actor_on(0, Idle).unwrap();
        ActorAddress::from_pid(&rt, idle.pid()).send(7u64).unwrap();
        let start = smarm::now().unwrap();
        while rt.actor_stats(0).unwrap().type_mismatches < 1 {
            assert!(smarm::now().unwrap() - start < std::time::Duration::from_secs(10), "never counted");
            smarm::sleep(ms(1));
        }
        let stats = rt.actor_stats(0).unwrap();
        assert_eq!(stats.mismatches, stats.type_mismatches);
        idle.send(()).unwrap();
    });
}

/// Reports its `system_info` through the old field names and the new.
struct Informer(smarm::Sender<[usize; 4]>);

impl Actor for Informer {
    type Msg = ();
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, (): ()) {
        let info = ctx.system_info();
        let _ = self.0.send([info.worker_id, info.worker, info.num_workers, info.worker_count]);
        ctx.stop_self();
    }
}

#[test]
fn the_old_system_info_fields_are_filled() {
    let config = Config { worker_count: 3, ..Config::default() };
    smarm::run_with(config, || {
        let rt = smarm::current_runtime().unwrap();
        let (tx, rx) = smarm::channel();
        rt.spawn_actor_on(2, Informer(tx)).unwrap().send(()).unwrap();
        assert_eq!(rx.recv().unwrap(), [2, 2, 3, 3]);
    });
}
