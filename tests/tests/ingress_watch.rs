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
    assert_eq!(rt.has_ingress(1), Ok(false));
    to_child.send(41).unwrap();
    assert_eq!(rt.has_ingress(1), Ok(true), "the wake waits in worker 1's queue");
    assert_eq!(token_state(&rt, 1), 0, "a watched driver's token is not written");
    // Going to sleep now would miss it: `unwatch_ingress` says so.
    assert_eq!(rt.unwatch_ingress(1), Ok(true));
    while stepper.try_tick() {}
    assert_eq!(from_child.try_recv(), Ok(42), "the woken process ran");
    assert_eq!(rt.has_ingress(1), Ok(false));
    assert_eq!(rt.unwatch_ingress(1), Ok(false), "nothing pending: the driver may sleep");

    // Not watching: the same wake signals the token.
    let (to_child, from_child) = parked_receiver(&mut stepper);
    assert_eq!(rt.unwatch_ingress(1), Ok(false));
    consume_token(&rt, 1);
    to_child.send(1).unwrap();
    assert_ne!(token_state(&rt, 1), 0, "an unwatched driver is signalled");
    while stepper.try_tick() {}
    assert_eq!(from_child.try_recv(), Ok(2));

    // A spawn from outside is ingress too.
    consume_token(&rt, 1);
    rt.watch_ingress(1).unwrap();
    let handle = rt.spawn_on(1, || 7).unwrap();
    assert_eq!(rt.has_ingress(1), Ok(true), "the spawn waits in worker 1's queue");
    assert_eq!(token_state(&rt, 1), 0, "a spawn skips a watched driver's token");
    assert_eq!(rt.unwatch_ingress(1), Ok(true));
    while stepper.try_tick() {}
    assert_eq!(handle.join(), Ok(7));
}

#[test]
fn watching_a_worker_that_does_not_exist_is_a_typed_error() {
    let stepper = Stepper::new(Config { worker_count: 2, ..Default::default() }).unwrap();
    let rt = stepper.runtime();
    assert_eq!(rt.watch_ingress(2), Err(NoSuchWorker(2)));
    assert_eq!(rt.unwatch_ingress(2), Err(NoSuchWorker(2)));
    assert_eq!(rt.has_ingress(usize::MAX), Err(NoSuchWorker(usize::MAX)));
}
