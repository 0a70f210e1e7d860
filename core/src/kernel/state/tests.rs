//! Unit tests of the state word: every transition, its preconditions and
//! the generation check.

use super::*;
use alloc::format;

const G: u32 = 7;

/// A word holding exactly `(generation, epoch, state)`.
fn word(generation: u32, epoch: u32, state: State) -> StateWord {
    let w = StateWord::new(0);
    w.word.store(Snapshot::pack(generation, epoch, state).0, Ordering::Relaxed);
    w
}

fn snap(generation: u32, epoch: u32, state: State) -> Snapshot {
    Snapshot::pack(generation, epoch, state)
}

const ALL: [State; 6] =
    [State::Vacant, State::Queued, State::Running, State::RunningNotified, State::Parked, State::Done];

#[test]
fn packing_round_trips_every_field() {
    for state in ALL {
        for (generation, epoch) in [(0, 0), (G, 5), (u32::MAX, EPOCH_MAX)] {
            let s = snap(generation, epoch, state);
            assert_eq!((s.generation(), s.epoch(), s.state()), (generation, epoch, state));
        }
    }
    assert_eq!(snap(G, EPOCH_MAX + 1, State::Parked).epoch(), 0, "epoch is taken modulo 2^24");
}

#[test]
fn new_is_vacant_at_epoch_zero() {
    assert_eq!(StateWord::new(G).snapshot(), snap(G, 0, State::Vacant));
}

#[test]
fn display_and_debug() {
    let s = snap(3, 9, State::Parked);
    assert_eq!(format!("{s}"), "g=3 e=9 Parked");
    assert_eq!(format!("{s:?}"), "Snapshot(g=3 e=9 Parked)");
    assert_eq!(format!("{:?}", word(3, 9, State::Parked)), "StateWord(Snapshot(g=3 e=9 Parked))");
}

#[test]
fn helpers() {
    let s = snap(G, 2, State::Parked);
    assert!(s.matches_generation(G) && !s.matches_generation(G + 1));
    assert!(s.is(G, State::Parked) && !s.is(G, State::Queued) && !s.is(G + 1, State::Parked));
    for state in ALL {
        let alive = !matches!(state, State::Vacant | State::Done);
        assert_eq!(snap(G, 0, state).is_alive(G), alive, "{state:?}");
        assert!(!snap(G, 0, state).is_alive(G + 1));
    }
}

#[test]
fn claim() {
    let w = StateWord::new(G);
    assert_eq!(w.claim(G), Ok(snap(G, 0, State::Queued)));
    assert_eq!(w.snapshot(), snap(G, 0, State::Queued));
}

#[test]
fn claim_parked_takes_a_vacant_slot_straight_to_parked() {
    let w = StateWord::new(G);
    assert_eq!(w.claim_parked(G), Ok(snap(G, 0, State::Parked)));
    // Only the wildcard wake queues it; a stamped wake of another epoch
    // does not.
    assert_eq!(w.unpark_at(G, 7), Unpark::Stale);
    assert_eq!(w.unpark(G), Unpark::Enqueue);
    assert!(w.snapshot().is(G, State::Queued));
    // Not twice, and not with a stale generation.
    let fresh = StateWord::new(G);
    assert!(fresh.claim_parked(G + 1).is_err());
    assert!(fresh.claim(G).is_ok());
    assert!(fresh.claim_parked(G).is_err());
}

#[test]
fn claim_rejects_wrong_generation_and_non_vacant() {
    let w = StateWord::new(G);
    let err = w.claim(G + 1).unwrap_err();
    assert_eq!(
        (err.transition(), err.generation(), err.found()),
        ("claim", G + 1, snap(G, 0, State::Vacant))
    );
    assert!(format!("{err}").contains("stale"));
    for state in ALL.into_iter().filter(|s| *s != State::Vacant) {
        let w = word(G, 4, state);
        let err = w.claim(G).unwrap_err();
        assert_eq!(err.found(), snap(G, 4, state));
        assert!(format!("{err}").contains("not allowed"));
        assert_eq!(w.snapshot(), snap(G, 4, state), "a rejected claim writes nothing");
    }
}

#[test]
fn begin_run() {
    let w = word(G, 3, State::Queued);
    assert_eq!(w.begin_run(G), Ok(snap(G, 3, State::Running)));
    assert_eq!(w.snapshot(), snap(G, 3, State::Running));
}

#[test]
fn begin_run_rejects_wrong_generation_and_non_queued() {
    let w = word(G, 3, State::Queued);
    assert_eq!(w.begin_run(G - 1).unwrap_err().found(), snap(G, 3, State::Queued));
    for state in ALL.into_iter().filter(|s| *s != State::Queued) {
        let w = word(G, 3, state);
        assert_eq!(w.begin_run(G).unwrap_err().transition(), "begin_run");
        assert_eq!(w.snapshot(), snap(G, 3, state));
    }
}

#[test]
fn begin_wait_bumps_the_epoch_and_returns_it() {
    let w = word(G, 3, State::Running);
    assert_eq!(w.begin_wait(G), 4);
    assert_eq!(w.snapshot(), snap(G, 4, State::Running));
}

#[test]
fn begin_wait_reusing_takes_the_running_epoch_without_a_write() {
    let w = word(G, 3, State::Running);
    assert_eq!(w.begin_wait_reusing(G), 3);
    assert_eq!(w.snapshot(), snap(G, 3, State::Running));
    // Its wake consumes the epoch, so the next such wait gets a new one.
    assert_eq!(w.unpark_at(G, 3), Unpark::Notified);
    assert_eq!(w.park(G), Park::Notified);
    assert_eq!(w.begin_wait_reusing(G), 4);
    assert_eq!(w.unpark_at(G, 3), Unpark::Stale, "the first wait's stamp is consumed");
}

#[test]
fn begin_wait_reusing_eats_a_wildcard_notification() {
    let w = word(G, 3, State::Running);
    assert_eq!(w.unpark(G), Unpark::Notified);
    assert_eq!(w.begin_wait_reusing(G), 5);
    assert_eq!(w.snapshot(), snap(G, 5, State::Running));
    assert_eq!(w.park(G), Park::Parked, "the eaten notification does not short-circuit the wait");
}

#[test]
fn begin_wait_eats_a_wildcard_notification() {
    let w = word(G, 3, State::Running);
    assert_eq!(w.unpark(G), Unpark::Notified);
    assert_eq!(w.begin_wait(G), 5);
    assert_eq!(w.snapshot(), snap(G, 5, State::Running));
    assert_eq!(w.park(G), Park::Parked, "the eaten notification does not short-circuit the wait");
}

#[test]
fn park() {
    let w = word(G, 3, State::Running);
    assert_eq!(w.park(G), Park::Parked);
    assert_eq!(w.snapshot(), snap(G, 3, State::Parked));
}

#[test]
fn park_after_a_landed_wake_continues() {
    let w = word(G, 3, State::RunningNotified);
    assert_eq!(w.park(G), Park::Notified);
    assert_eq!(w.snapshot(), snap(G, 3, State::Running));
}

#[test]
fn unpark_at_parked_enqueues_and_consumes() {
    let w = word(G, 3, State::Parked);
    assert_eq!(w.unpark_at(G, 3), Unpark::Enqueue);
    assert_eq!(w.snapshot(), snap(G, 4, State::Queued));
    assert_eq!(w.unpark_at(G, 3), Unpark::Stale, "the epoch was consumed");
}

#[test]
fn unpark_at_running_notifies_and_consumes() {
    let w = word(G, 3, State::Running);
    assert_eq!(w.unpark_at(G, 3), Unpark::Notified);
    assert_eq!(w.snapshot(), snap(G, 4, State::RunningNotified));
    assert_eq!(w.unpark_at(G, 3), Unpark::Stale);
    assert_eq!(w.unpark_at(G, 4), Unpark::Stale, "RunningNotified takes no wake");
}

#[test]
fn unpark_at_rejections_change_nothing() {
    // Epoch mismatch, generation mismatch, and every state that takes no wake.
    let mut cases = alloc::vec![
        (word(G, 3, State::Parked), G, 2),
        (word(G, 3, State::Parked), G, 4),
        (word(G, 3, State::Running), G, 2),
        (word(G, 3, State::Parked), G + 1, 3),
        (word(G, 3, State::Running), G - 1, 3),
        (word(G, 3, State::Parked), G, 3 + (1 << EPOCH_BITS)),
    ];
    for state in [State::Vacant, State::Queued, State::RunningNotified, State::Done] {
        cases.push((word(G, 3, state), G, 3));
    }
    for (w, generation, epoch) in cases {
        let before = w.snapshot();
        assert_eq!(w.unpark_at(generation, epoch), Unpark::Stale, "{before} ← ({generation}, {epoch})");
        assert_eq!(w.snapshot(), before);
    }
}

#[test]
fn unpark_wildcard() {
    let w = word(G, 3, State::Parked);
    assert_eq!(w.unpark(G), Unpark::Enqueue);
    assert_eq!(w.snapshot(), snap(G, 4, State::Queued));

    let w = word(G, 3, State::Running);
    assert_eq!(w.unpark(G), Unpark::Notified);
    assert_eq!(w.snapshot(), snap(G, 4, State::RunningNotified));

    for state in [State::Vacant, State::Queued, State::RunningNotified, State::Done] {
        let w = word(G, 3, state);
        assert_eq!(w.unpark(G), Unpark::Stale);
        assert_eq!(w.snapshot(), snap(G, 3, state));
    }
    for state in [State::Parked, State::Running] {
        let w = word(G, 3, state);
        assert_eq!(w.unpark(G + 1), Unpark::Stale, "generation mismatch");
        assert_eq!(w.snapshot(), snap(G, 3, state));
    }
}

#[test]
fn retire_wait_bumps_and_eats() {
    let w = word(G, 3, State::Running);
    assert!(!w.retire_wait(G));
    assert_eq!(w.snapshot(), snap(G, 4, State::Running));
    assert_eq!(w.unpark_at(G, 3), Unpark::Stale, "the retired wait's registrations are stale");

    let w = word(G, 3, State::RunningNotified);
    assert!(w.retire_wait(G));
    assert_eq!(w.snapshot(), snap(G, 4, State::Running));
}

#[test]
fn clear_notify() {
    let w = word(G, 3, State::RunningNotified);
    assert!(w.clear_notify(G));
    assert_eq!(w.snapshot(), snap(G, 3, State::Running));
    assert!(!w.clear_notify(G), "no-op on Running");
    assert_eq!(w.snapshot(), snap(G, 3, State::Running));
}

#[test]
fn resume_runs_a_queued_word_and_leaves_a_yielded_one() {
    let w = word(G, 3, State::Queued);
    assert_eq!(w.resume(G), Ok(snap(G, 3, State::Running)));
    assert_eq!(w.snapshot(), snap(G, 3, State::Running));
    // A yielded process kept its word: nothing is written, the epoch and a
    // pending notification stay.
    for state in [State::Running, State::RunningNotified] {
        let w = word(G, 3, state);
        assert_eq!(w.resume(G), Ok(snap(G, 3, state)));
        assert_eq!(w.snapshot(), snap(G, 3, state));
    }
}

#[test]
fn resume_rejects_what_no_ready_queue_holds() {
    for state in [State::Vacant, State::Parked, State::Done] {
        let w = word(G, 3, state);
        assert!(w.resume(G).is_err(), "{state:?}");
        assert_eq!(w.snapshot(), snap(G, 3, state), "{state:?} untouched");
    }
    let w = word(G, 3, State::Queued);
    assert!(w.resume(G + 1).is_err(), "another generation");
    assert_eq!(w.snapshot(), snap(G, 3, State::Queued));
}

#[test]
fn a_yielded_process_cannot_be_queued_again() {
    // A yield leaves the word Running, with no wait open: a stale stamped
    // wake dies, and the stop's wildcard wake leaves a notification
    // instead of a second queue entry.
    let w = word(G, 3, State::Running);
    let e = w.begin_wait(G);
    assert!(!w.retire_wait(G), "no wake had landed");
    assert_eq!(w.unpark_at(G, e), Unpark::Stale);
    assert_eq!(w.unpark(G), Unpark::Notified);
    assert_eq!(w.resume(G).map(|s| s.state()), Ok(State::RunningNotified));
}

#[test]
fn finish() {
    for state in [State::Running, State::RunningNotified] {
        let w = word(G, 3, state);
        w.finish(G);
        assert_eq!(w.snapshot(), snap(G, 3, State::Done));
        assert_eq!(w.unpark_at(G, 3), Unpark::Stale);
        assert_eq!(w.unpark(G), Unpark::Stale);
    }
}

#[test]
fn reclaim_bumps_the_generation_and_resets() {
    let w = word(G, 3, State::Done);
    assert_eq!(w.reclaim(G), Ok(snap(G + 1, 0, State::Vacant)));
    assert_eq!(w.snapshot().0, StateWord::new(G + 1).snapshot().0);
    assert_eq!(w.reclaim(G).unwrap_err().found(), snap(G + 1, 0, State::Vacant), "double reclaim");
    assert!(w.claim(G).is_err(), "the old pid cannot claim");
    assert!(w.claim(G + 1).is_ok());
}

#[test]
fn reclaim_rejects_wrong_generation_and_non_done() {
    let w = word(G, 3, State::Done);
    assert_eq!(w.reclaim(G + 1).unwrap_err().found(), snap(G, 3, State::Done));
    for state in ALL.into_iter().filter(|s| *s != State::Done) {
        let w = word(G, 3, state);
        assert_eq!(w.reclaim(G).unwrap_err().transition(), "reclaim");
        assert_eq!(w.snapshot(), snap(G, 3, state));
    }
}

#[test]
fn generation_wraps() {
    let w = word(u32::MAX, 3, State::Done);
    assert_eq!(w.reclaim(u32::MAX), Ok(snap(0, 0, State::Vacant)));
    assert!(w.claim(0).is_ok());
}

#[test]
fn epoch_wraps_at_2_pow_24() {
    let top = EPOCH_MAX;
    assert_eq!(top, (1 << 24) - 1);

    let w = word(G, top - 1, State::Running);
    assert_eq!(w.begin_wait(G), top);
    assert_eq!(w.begin_wait(G), 0, "begin_wait wraps");
    assert_eq!(w.snapshot(), snap(G, 0, State::Running), "the wrap does not carry into the generation");

    let w = word(G, top, State::Parked);
    assert_eq!(w.unpark_at(G, top), Unpark::Enqueue);
    assert_eq!(w.snapshot(), snap(G, 0, State::Queued));

    let w = word(G, top, State::Running);
    assert_eq!(w.unpark_at(G, top), Unpark::Notified);
    assert_eq!(w.snapshot(), snap(G, 0, State::RunningNotified));
    assert_eq!(w.park(G), Park::Notified);
    assert_eq!(w.snapshot(), snap(G, 0, State::Running));

    let w = word(G, top, State::RunningNotified);
    assert!(w.retire_wait(G));
    assert_eq!(w.snapshot(), snap(G, 0, State::Running));

    let w = word(G, top, State::Parked);
    assert_eq!(w.unpark(G), Unpark::Enqueue);
    assert_eq!(w.snapshot(), snap(G, 0, State::Queued));
}

#[test]
fn a_whole_life() {
    let w = StateWord::new(G);
    w.claim(G).unwrap();
    w.begin_run(G).unwrap();
    // A wait that parks and is woken.
    let e = w.begin_wait(G);
    assert_eq!(w.park(G), Park::Parked);
    assert_eq!(w.unpark_at(G, e), Unpark::Enqueue);
    w.begin_run(G).unwrap();
    // A wait whose wake lands before the park.
    let e = w.begin_wait(G);
    assert_eq!(w.unpark_at(G, e), Unpark::Notified);
    assert_eq!(w.park(G), Park::Notified);
    // A yield: the word stays Running, and its worker resumes it.
    assert_eq!(w.resume(G).map(|s| s.state()), Ok(State::Running));
    w.finish(G);
    assert_eq!(w.reclaim(G), Ok(snap(G + 1, 0, State::Vacant)));
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "owner-only `park`")]
fn park_off_cpu_is_a_bug() {
    let _ = word(G, 3, State::Queued).park(G);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "owner-only `begin_wait`")]
fn begin_wait_with_wrong_generation_is_a_bug() {
    let _ = word(G, 3, State::Running).begin_wait(G + 1);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "owner-only `retire_wait`")]
fn retire_wait_while_parked_is_a_bug() {
    let _ = word(G, 3, State::Parked).retire_wait(G);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "owner-only `clear_notify`")]
fn clear_notify_while_parked_is_a_bug() {
    let _ = word(G, 3, State::Parked).clear_notify(G);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "owner-only `finish`")]
fn finish_twice_is_a_bug() {
    word(G, 3, State::Done).finish(G);
}

/// Release builds: an owner-only transition whose precondition fails
/// writes nothing and answers "do not switch away".
#[test]
#[cfg(not(debug_assertions))]
fn owner_bugs_write_nothing_in_release() {
    let w = word(G, 3, State::Queued);
    assert_eq!(w.park(G), Park::Notified);
    assert_eq!(w.begin_wait(G), 3);
    assert!(!w.retire_wait(G));
    assert!(!w.clear_notify(G));
    w.finish(G);
    assert_eq!(w.park(G + 1), Park::Notified);
    assert_eq!(w.snapshot(), snap(G, 3, State::Queued));
}
