//! A driver that watches its workers' ingress (`Runtime::watch_ingress`)
//! is not signalled on its park token for wakes and spawns: they wait in
//! the worker's queues, where `has_ingress` sees them, and `unwatch_ingress`
//! reports them so that the driver does not sleep past them. A driver that
//! does not watch is signalled as before.

use std::sync::atomic::Ordering;

use smarm::{Config, NoSuchWorker, Runtime, Stepper};

fn token_state(rt: &Runtime, worker: usize) -> u32 {
    rt.park_token(worker).unwrap().state.load(Ordering::SeqCst)
}

/// Takes any pending wake off the token, as its driver does when it wakes
/// (the stepper never sleeps on it, so nothing else does).
fn consume_token(rt: &Runtime, worker: usize) {
    rt.park_token(worker).unwrap().state.store(0, Ordering::SeqCst);
}

/// Spawns a process on worker 1 that waits for one message, and steps
/// until it is parked; returns the sender that wakes it.
fn parked_receiver(stepper: &mut Stepper) -> (smarm::Sender<u32>, smarm::Receiver<u32>) {
    let (to_child, inbox) = smarm::channel::<u32>();
    let (to_test, from_child) = smarm::channel::<u32>();
    stepper
        .runtime()
        .spawn_on(1, move || {
            let value = inbox.recv().unwrap();
            to_test.send(value + 1).unwrap();
        })
        .unwrap();
    while stepper.try_tick() {}
    (to_child, from_child)
}

#[test]
fn a_watching_driver_is_not_signalled_and_is_told_before_it_sleeps() {
    let mut stepper = Stepper::new(Config { worker_count: 2, ..Default::default() }).unwrap();
    let rt = stepper.runtime().clone();

    // Watching: the wake lands in the queue, the token is untouched.
    let (to_child, from_child) = parked_receiver(&mut stepper);
    consume_token(&rt, 1);
    rt.watch_ingress(1).unwrap();
    assert!(!stepper.has_ingress());
    to_child.send(41).unwrap();
    assert!(stepper.has_ingress(), "the wake waits in worker 1's queue");
    assert_eq!(token_state(&rt, 1), 0, "a watched driver's token is not written");
    // Going to sleep now would miss it: after `unwatch_ingress` it is
    // still there to see.
    assert_eq!(rt.unwatch_ingress(1), Ok(()));
    assert!(stepper.has_ingress());
    rt.watch_ingress(1).unwrap();
    while stepper.try_tick() {}
    assert_eq!(from_child.try_recv(), Ok(42), "the woken process ran");
    assert!(!stepper.has_ingress());
    assert_eq!(rt.unwatch_ingress(1), Ok(()));
    assert!(!stepper.has_ingress(), "nothing pending: the driver may sleep");

    // Not watching: the same wake signals the token.
    let (to_child, from_child) = parked_receiver(&mut stepper);
    consume_token(&rt, 1);
    to_child.send(1).unwrap();
    assert_ne!(token_state(&rt, 1), 0, "an unwatched driver is signalled");
    while stepper.try_tick() {}
    assert_eq!(from_child.try_recv(), Ok(2));

    // A spawn from outside is ingress too.
    consume_token(&rt, 1);
    rt.watch_ingress(1).unwrap();
    let handle = rt.spawn_on(1, || 7).unwrap();
    assert!(stepper.has_ingress(), "the spawn waits in worker 1's queue");
    assert_eq!(token_state(&rt, 1), 0, "a spawn skips a watched driver's token");
    while stepper.try_tick() {}
    assert_eq!(handle.join(), Ok(7));

    // So is a handler actor's message.
    struct Echo(smarm::Sender<u32>);
    impl smarm::Actor for Echo {
        type Msg = u32;
        fn handle(&mut self, _ctx: &mut smarm::Ctx<'_, Self>, msg: u32) {
            let _ = self.0.send(msg * 2);
        }
    }
    let (to_test, from_actor) = smarm::channel();
    let addr = rt.spawn_actor_on(1, Echo(to_test)).unwrap();
    while stepper.try_tick() {}
    consume_token(&rt, 1);
    assert!(!stepper.has_ingress());
    addr.send(21).unwrap();
    assert!(stepper.has_ingress(), "the envelope waits in worker 1's lane");
    assert_eq!(token_state(&rt, 1), 0, "mail skips a watched driver's token");
    while stepper.try_tick() {}
    assert_eq!(from_actor.try_recv(), Ok(42));
    rt.unwatch_ingress(1).unwrap();
    consume_token(&rt, 1);
    addr.send(1).unwrap();
    assert_ne!(token_state(&rt, 1), 0, "mail signals an unwatched driver");
    while stepper.try_tick() {}
    assert_eq!(from_actor.try_recv(), Ok(2));
}

#[test]
fn watching_a_worker_that_does_not_exist_is_a_typed_error() {
    let stepper = Stepper::new(Config { worker_count: 2, ..Default::default() }).unwrap();
    let rt = stepper.runtime();
    assert_eq!(rt.watch_ingress(2), Err(NoSuchWorker(2)));
    assert_eq!(rt.unwatch_ingress(2), Err(NoSuchWorker(2)));
    assert_eq!(rt.watch_ingress(usize::MAX), Err(NoSuchWorker(usize::MAX)));
}
