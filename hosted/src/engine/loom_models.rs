//! A loom model of how the deadlock look reads a sleeping driver: its
//! park token first, then (after a fence) its sleep word, before and after
//! the scan; equal looks must mean that no wake was pending on the driver
//! while the scan ran.
//!
//! The driver and its token are modelled here with loom's atomics, step
//! for step as `drive` and the Linux park token do them: a driver writes
//! its sleep word, fences, moves its token `EMPTY` → `PARKED` and sleeps
//! until the token changes. One driver sleeps; the other, awake, pushes
//! work for it ("pending"), swaps `NOTIFIED` into its token, then goes to
//! sleep itself; the woken driver takes the wake, clears its word's
//! `FOREVER` bit, drains the work, and goes to sleep again with a new word.
//! (A waker outside the drivers is a thread, which the thread count sees.)
//!
//! Theorem (`equal_looks_mean_no_wake_pending_during_the_scan`): if both
//! looks see the driver asleep with the same word, the work the waker
//! pushes was not pending at the scan (between the looks). Fails if the
//! look reads the word before the token (`word_first_misses_a_wake` shows
//! it): the first read can catch the old sleep's word and the second the
//! new sleep's `PARKED`, so a wake and the whole pass it caused slip
//! between them unseen. Both models run with a preemption bound of 3, the
//! least at which the broken order fails.

use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

const EMPTY: u32 = 0;
const NOTIFIED: u32 = 1;
const PARKED: u32 = 2;
const FOREVER: u64 = 1;

struct Driver {
    word: AtomicU64,
    token: AtomicU32,
    /// Work pushed for the driver and not yet drained.
    pending: AtomicBool,
}

impl Driver {
    /// `going_to_sleep` then the token's park, up to the sleep itself.
    /// Returns whether it sleeps (false: a wake was already there, taken).
    fn sleep(&self, sleeps: u64) -> bool {
        self.word.store(sleeps << 1 | FOREVER, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.token.compare_exchange(EMPTY, PARKED, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            return true;
        }
        self.token.store(EMPTY, Ordering::Release);
        false
    }

    /// Sleeps until woken, takes the wake, and `woke`.
    fn wait_and_wake(&self, sleeps: u64) {
        while self.token.load(Ordering::Acquire) == PARKED {
            thread::yield_now();
        }
        self.token.store(EMPTY, Ordering::Release);
        self.word.store(sleeps << 1, Ordering::SeqCst);
    }

    /// The deadlock look at this driver.
    fn look(&self, word_first: bool) -> Option<u64> {
        let (token, word) = if word_first {
            let word = self.word.load(Ordering::SeqCst);
            fence(Ordering::SeqCst);
            (self.token.load(Ordering::SeqCst), word)
        } else {
            let token = self.token.load(Ordering::SeqCst);
            fence(Ordering::SeqCst);
            (token, self.word.load(Ordering::SeqCst))
        };
        (token == PARKED && word & FOREVER != 0).then_some(word >> 1)
    }
}

/// The look at every driver: `Some(sum of sleep counts)` if all sleep.
fn look_all(drivers: &[&Driver], word_first: bool) -> Option<u64> {
    drivers.iter().try_fold(0, |sum, driver| Some(sum + driver.look(word_first)?))
}

fn model(word_first: bool, preemptions: Option<usize>) {
    let mut builder = loom::model::Builder::new();
    if preemptions.is_some() {
        builder.preemption_bound = preemptions;
    }
    builder.check(move || {
        let new_driver = || {
            Arc::new(Driver {
                word: AtomicU64::new(0),
                token: AtomicU32::new(EMPTY),
                pending: AtomicBool::new(false),
            })
        };
        // `sleeper` is asleep for ever before anything else happens;
        // `waker` is awake, running a process that sends to it.
        let (sleeper, waker) = (new_driver(), new_driver());
        assert!(sleeper.sleep(1));
        let sleeper_runs = {
            let sleeper = sleeper.clone();
            thread::spawn(move || {
                sleeper.wait_and_wake(1);
                // Its pass drains what woke it; then it sleeps again.
                sleeper.pending.store(false, Ordering::SeqCst);
                let _ = sleeper.sleep(2);
            })
        };
        let waker_runs = {
            let (sleeper, waker) = (sleeper.clone(), waker.clone());
            thread::spawn(move || {
                // Ring, then unpark; then this driver has nothing left and
                // sleeps for ever too.
                sleeper.pending.store(true, Ordering::SeqCst);
                let _ = sleeper.token.swap(NOTIFIED, Ordering::Release);
                let _ = waker.sleep(1);
            })
        };
        let drivers = [&*sleeper, &*waker];
        let before = look_all(&drivers, word_first);
        let pending_at_scan = sleeper.pending.load(Ordering::SeqCst);
        let after = look_all(&drivers, word_first);
        if before.is_some() && before == after {
            assert!(!pending_at_scan, "equal looks, yet a wake was pending during the scan");
        }
        waker_runs.join().unwrap();
        sleeper_runs.join().unwrap();
    });
}

#[test]
fn equal_looks_mean_no_wake_pending_during_the_scan() {
    model(false, Some(3));
}

/// The broken order, kept to show the model can fail (the failing
/// interleaving needs more preemptions than the suite's bound).
#[test]
#[should_panic(expected = "a wake was pending")]
fn word_first_misses_a_wake() {
    model(true, Some(3));
}
