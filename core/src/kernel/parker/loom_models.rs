//! Loom models of a thread's wait: a wake racing the thread's own end of
//! the wait (its deadline, or finding what it waited for).
//!
//! The hooks here sleep by yielding to loom (a spurious return, which
//! `park` must tolerate) and read a clock that is always past the
//! deadline, so the deadline branch races every wake.
//!
//! Theorems (one named test each):
//! - `wake_racing_deadline`: exactly one of the wake and the deadline
//!   wins, and both sides agree which — `park` reports a landed wake iff
//!   `wake` returned true. Fails if `park`'s deadline branch reports "not
//!   woken" without its compare-and-swap (a landed wake would be lost).
//! - `wake_racing_retire`: after `retire`, a wake either landed before it
//!   (and the state says so) or fails; a wake never lands on a retired
//!   wait. Fails if `wake` stores `WOKEN` unconditionally.
//! - `wake_ends_untimed_park`: a park without deadline returns, woken,
//!   whatever the interleaving with the wake.
//! - `a_woken_sleeper_is_never_counted_asleep`: once a wake of an untimed
//!   park has landed, the deadlock look's count of sleeping threads does
//!   not include the woken thread (it may briefly read one less than the
//!   truth), and it is back to zero when both are done. Fails if the
//!   sleeper counts itself before its `Waiting` → `Sleeping`
//!   compare-and-swap (undoing it when a wake won first): the waker then
//!   returns while the count still says the thread sleeps, and a deadlock
//!   look at that moment would be wrong.

use loom::sync::Arc;
use loom::thread;

use super::{ThreadWait, RETIRED, WOKEN};
use crate::kernel::atomic::Ordering;
use crate::kernel::host::ThreadHooks;
use smarm_platform::{Nanos, ParkToken};

fn park_yield(_: &ParkToken, _: Option<Nanos>) {
    thread::yield_now();
}

fn unpark_nothing(_: &ParkToken) {}

fn late_clock() -> Nanos {
    Nanos::MAX
}

static HOOKS: ThreadHooks = ThreadHooks { park: park_yield, unpark: unpark_nothing, now: late_clock };

#[test]
fn wake_racing_deadline() {
    loom::model(|| {
        let wait = Arc::new(ThreadWait::with_hooks(&HOOKS));
        let waker = {
            let wait = wait.clone();
            thread::spawn(move || wait.wake())
        };
        let woken = wait.park(Some(0));
        let landed = waker.join().unwrap();
        assert_eq!(woken, landed, "the thread and its waker disagree on who won");
    });
}

#[test]
fn wake_racing_retire() {
    loom::model(|| {
        let wait = Arc::new(ThreadWait::with_hooks(&HOOKS));
        let waker = {
            let wait = wait.clone();
            thread::spawn(move || wait.wake())
        };
        wait.retire();
        let landed = waker.join().unwrap();
        let state = wait.state.load(Ordering::Acquire);
        assert_eq!(landed, state == WOKEN);
        assert!(landed || state == RETIRED);
    });
}

#[test]
fn wake_ends_untimed_park() {
    loom::model(|| {
        let wait = Arc::new(ThreadWait::with_hooks(&HOOKS));
        let waker = {
            let wait = wait.clone();
            thread::spawn(move || wait.wake())
        };
        assert!(wait.park(None));
        assert!(waker.join().unwrap());
    });
}

#[test]
fn a_woken_sleeper_is_never_counted_asleep() {
    use crate::kernel::deadlock::thread_events;
    loom::model(|| {
        let wait = Arc::new(ThreadWait::with_hooks(&HOOKS));
        let waker = {
            let wait = wait.clone();
            thread::spawn(move || {
                let landed = wait.wake();
                // The only sleeper is the one just woken: at most "one
                // less than none" (wrapped), never one.
                let (asleep, _) = thread_events();
                assert_ne!(asleep, 1, "a woken thread is still counted asleep");
                landed
            })
        };
        assert!(wait.park(None));
        assert!(waker.join().unwrap());
        assert_eq!(thread_events().0, 0, "the count of sleeping threads drifted");
    });
}
