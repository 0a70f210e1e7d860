//! Loom models of the state word's wake protocol: each is a theorem the
//! scheduler relies on, checked under every interleaving loom explores.

use super::*;
use loom::sync::Arc;
use loom::thread;

const G: u32 = 7;

/// A process of incarnation `G` that has been spawned and is running.
fn running() -> Arc<StateWord> {
    let w = StateWord::new(G);
    w.claim(G).unwrap();
    w.begin_run(G).unwrap();
    Arc::new(w)
}

/// The worker's side of an `Enqueue`: wait until the process is queued,
/// then run it.
fn run_once_queued(w: &StateWord) {
    while w.snapshot().state() != State::Queued {
        thread::yield_now();
    }
    w.begin_run(G).unwrap();
}

#[test]
fn at_most_one_wake_per_wait() {
    loom::model(|| {
        let w = running();
        let e = w.begin_wait(G);
        let wakers: [_; 2] = core::array::from_fn(|_| {
            let w = w.clone();
            thread::spawn(move || w.unpark_at(G, e))
        });

        let park = w.park(G);
        let results = wakers.map(|h| h.join().unwrap());
        let landed = results.iter().filter(|r| **r != Unpark::Stale).count();
        assert_eq!(landed, 1, "{results:?}");

        let end = w.snapshot();
        match park {
            Park::Parked => {
                assert!(results.contains(&Unpark::Enqueue), "{results:?}");
                assert_eq!(end, Snapshot::pack(G, e + 1, State::Queued));
            }
            Park::Notified => {
                assert!(results.contains(&Unpark::Notified), "{results:?}");
                assert_eq!(end, Snapshot::pack(G, e + 1, State::Running));
            }
        }
    });
}

#[test]
fn consumed_epoch_never_wakes() {
    loom::model(|| {
        let w = running();
        let first = w.begin_wait(G);
        let waker = {
            let w = w.clone();
            // The wake of the first wait, then the same stamp again: the
            // second one races the owner's next wait.
            thread::spawn(move || (w.unpark_at(G, first), w.unpark_at(G, first)))
        };

        if w.park(G) == Park::Parked {
            run_once_queued(&w);
        }
        let second = w.begin_wait(G);
        assert_ne!(second, first);
        let park = w.park(G);

        let (wake, replay) = waker.join().unwrap();
        assert_ne!(wake, Unpark::Stale, "the first wait's wake lands");
        assert_eq!(replay, Unpark::Stale, "a consumed epoch never wakes");
        assert_eq!(park, Park::Parked, "the second wait saw no wake");
        assert_eq!(w.snapshot(), Snapshot::pack(G, second, State::Parked));
        assert_eq!(w.unpark_at(G, second), Unpark::Enqueue, "its own wake still lands");
    });
}

#[test]
fn retire_eats_late_arm_notification() {
    loom::model(|| {
        let w = running();
        let e = w.begin_wait(G);
        let arm = {
            let w = w.clone();
            // A losing arm's registration firing at some point.
            thread::spawn(move || w.unpark_at(G, e))
        };

        let ate = w.retire_wait(G);
        let after = w.snapshot();
        assert_eq!(after.state(), State::Running, "no notification survives retire_wait");
        assert_eq!(after.epoch(), if ate { e + 2 } else { e + 1 });

        // A new wait of the same process: the old wake must not short-circuit it.
        let next = w.begin_wait(G);
        let park = w.park(G);

        let late = arm.join().unwrap();
        assert_eq!(late == Unpark::Notified, ate, "the arm landed iff retire_wait ate it");
        assert_ne!(late, Unpark::Enqueue);
        assert_eq!(park, Park::Parked);
        assert_eq!(w.snapshot(), Snapshot::pack(G, next, State::Parked));
    });
}

#[test]
fn park_racing_unpark_never_loses_the_wake() {
    for wildcard in [false, true] {
        loom::model(move || {
            let w = running();
            let e = w.begin_wait(G);
            let waker = {
                let w = w.clone();
                thread::spawn(move || if wildcard { w.unpark(G) } else { w.unpark_at(G, e) })
            };

            let park = w.park(G);
            let wake = waker.join().unwrap();
            let end = w.snapshot();
            match (park, wake) {
                (Park::Parked, Unpark::Enqueue) => {
                    assert_eq!(end, Snapshot::pack(G, e + 1, State::Queued))
                }
                (Park::Notified, Unpark::Notified) => {
                    assert_eq!(end, Snapshot::pack(G, e + 1, State::Running))
                }
                other => panic!("lost or doubled wake: {other:?}, word {end}"),
            }
        });
    }
}

#[test]
fn generation_check_is_atomic_with_every_transition() {
    // The old incarnation is the last one before the generation wraps.
    const OLD: u32 = u32::MAX;
    const NEW: u32 = 0;
    loom::model(|| {
        let w = StateWord::new(OLD);
        w.claim(OLD).unwrap();
        w.begin_run(OLD).unwrap();
        let stale_epoch = w.begin_wait(OLD);
        let w = Arc::new(w);

        let stale = {
            let w = w.clone();
            thread::spawn(move || (w.unpark_at(OLD, stale_epoch), w.unpark(OLD), w.claim(OLD)))
        };

        // The old process exits, its slot is reclaimed and reused, and the
        // new process waits on the very epoch the stale stamp carries.
        w.finish(OLD);
        assert_eq!(w.reclaim(OLD), Ok(Snapshot::pack(NEW, 0, State::Vacant)));
        w.claim(NEW).unwrap();
        w.begin_run(NEW).unwrap();
        let epoch = w.begin_wait(NEW);
        assert_eq!(epoch, stale_epoch, "only the generation tells the two waits apart");
        let park = w.park(NEW);

        let (at, wildcard, claim) = stale.join().unwrap();
        assert_eq!(park, Park::Parked, "no stale wake reached the new process");
        assert!(claim.is_err());
        assert_ne!(at, Unpark::Enqueue);
        assert_ne!(wildcard, Unpark::Enqueue);
        assert_eq!(w.snapshot(), Snapshot::pack(NEW, epoch, State::Parked));
    });
}

/// A yield leaves the word `Running` while the process sits in its own
/// worker's ready queue. A stop's wildcard wake and a stale stamped wake
/// racing the worker's `resume` never queue it a second time, and the
/// stop's notification survives the resume (the process observes it at
/// its next wait). A `resume` that wrote `Running` over a yielded word
/// would drop that notification; loom finds the order that shows it.
#[test]
fn a_yielded_process_is_queued_once_and_keeps_a_stop() {
    loom::model(|| {
        let w = running();
        // The last wait before the yield, retired: its stamp is stale now.
        let e = w.begin_wait(G);
        assert!(!w.retire_wait(G));
        let stop = {
            let w = w.clone();
            thread::spawn(move || w.unpark(G))
        };
        let stale = {
            let w = w.clone();
            thread::spawn(move || w.unpark_at(G, e))
        };
        // The worker takes the yielded process off its queue.
        let resumed = w.resume(G).expect("a yielded word resumes");
        assert!(matches!(resumed.state(), State::Running | State::RunningNotified));
        assert_eq!(stop.join().unwrap(), Unpark::Notified, "the stop must not queue it again");
        assert_eq!(stale.join().unwrap(), Unpark::Stale);
        assert_eq!(w.snapshot().state(), State::RunningNotified, "the stop's notification was lost");
    });
}

/// `begin_run` is a load and a store, not a CAS: sound only while nothing
/// else writes a `Queued` word. A wake racing the resume (a duplicate of the
/// wake that queued the process, and a stop's wildcard wake) either finds
/// `Queued` and changes nothing, or finds `Running` and its notification
/// stays in the word.
#[test]
fn begin_run_racing_wakes_keeps_their_notification() {
    loom::model(|| {
        let w = running();
        let e = w.begin_wait(G);
        assert_eq!(w.park(G), Park::Parked);
        assert_eq!(w.unpark_at(G, e), Unpark::Enqueue);
        let racer = {
            let w = w.clone();
            thread::spawn(move || (w.unpark_at(G, e), w.unpark(G)))
        };

        // The worker resumes the process it took off its queue.
        let began = w.begin_run(G).unwrap();
        assert_eq!(began.state(), State::Running);

        let (stamped, wildcard) = racer.join().unwrap();
        assert_eq!(stamped, Unpark::Stale, "the stamp was consumed by the wake that queued it");
        assert_ne!(wildcard, Unpark::Enqueue, "a running process was enqueued");
        // Every wake that landed moved the epoch on, and no write was lost
        // to the resume's store.
        let landed = [stamped, wildcard].iter().filter(|r| **r != Unpark::Stale).count() as u32;
        let end = w.snapshot();
        assert_eq!(end.epoch(), e + 1 + landed, "a landed wake was overwritten: word {end}");
        if wildcard == Unpark::Notified {
            assert_eq!(end.state(), State::RunningNotified);
        }
    });
}

/// A wait that reuses the word's epoch (`begin_wait_reusing`) racing a
/// stop's wildcard wake and its own waker: the wait still ends with its
/// epoch consumed, so no registration of it can land once it is over.
#[test]
fn reused_epoch_wait_ends_consumed() {
    loom::model(|| {
        let w = running();
        let (tx, rx) = loom::sync::mpsc::channel::<u32>();
        let stopper = {
            let w = w.clone();
            thread::spawn(move || w.unpark(G))
        };
        let waker = {
            let w = w.clone();
            thread::spawn(move || {
                let e = rx.recv().unwrap();
                w.unpark_at(G, e)
            })
        };

        // A yield, so the stop's wake is also explored landing before the
        // wait opens (loom does not otherwise preempt this thread first).
        thread::yield_now();
        let e = w.begin_wait_reusing(G);
        tx.send(e).unwrap();
        if w.park(G) == Park::Parked {
            run_once_queued(&w);
        }
        // The wait is over.
        let after = w.snapshot();
        assert_ne!(after.epoch(), e, "a wait ended with its epoch still live: word {after}");
        let _ = (stopper.join().unwrap(), waker.join().unwrap());
        assert!(w.snapshot().epoch() != e);
    });
}
