//! A consumer's promise to look at its queues before it sleeps, so that
//! producers may skip its wake-up signal while it is awake.
//!
//! A driver that is awake reads its wake and spawn queues anyway (every
//! pass, and while it spins), so a producer that pushes into them need not
//! also write the driver's park token — a cache line that would move to
//! the producer's CPU and back at every cross-worker hop. [`Watch`] is the
//! flag that says so, and the two fences that keep a wake from being lost
//! when the driver goes to sleep just as a producer skips the signal:
//!
//! - producer ([`Watch::must_signal`] after its push): fence, read the flag;
//!   signal the token if it is clear;
//! - consumer ([`Watch::end`] before it sleeps): clear the flag, fence;
//!   then look at the queues and sleep only if they are empty.
//!
//! The `SeqCst` fences are totally ordered. If the consumer's comes after
//! the producer's, the consumer's look sees the push (it was made before
//! the producer's fence); otherwise the producer's read comes after the
//! consumer's fence and sees the flag cleared. Either the consumer stays
//! awake for the push or the producer signals the token it sleeps on.
//! The loom model `watched_wake` below checks both orders.

use crate::kernel::atomic::{fence, AtomicBool, Ordering};

/// Whether a queue's consumer is awake and watching it; see the
/// [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct Watch {
    watching: AtomicBool,
}

impl Watch {
    /// The consumer is awake and will call [`end`](Self::end) before it
    /// sleeps. Consumer only.
    pub(crate) fn begin(&self) {
        // Relaxed: a producer that misses the store signals the token, as
        // without a watch. Written only when it changes, so that producers
        // keep the line in their caches.
        if !self.watching.load(Ordering::Relaxed) {
            self.watching.store(true, Ordering::Relaxed);
        }
    }

    /// The consumer is about to sleep. It looks at its queues after this
    /// call and sleeps only if they are empty: a push that skipped the
    /// signal is seen there. Consumer only.
    pub(crate) fn end(&self) {
        self.watching.store(false, Ordering::Relaxed);
        // SeqCst: pairs with the fence in `must_signal` (module docs).
        fence(Ordering::SeqCst);
    }

    /// Read by a producer after [`after_push`]: whether the consumer
    /// watches (then the producer skips its signal).
    #[inline]
    pub(crate) fn is_watching(&self) -> bool {
        // Relaxed: ordered by the fences.
        self.watching.load(Ordering::Relaxed)
    }

    /// Called by a producer after its push: whether it must signal the
    /// consumer's token (the consumer is not watching).
    #[cfg(all(test, loom))]
    pub(crate) fn must_signal(&self) -> bool {
        after_push();
        !self.is_watching()
    }
}

/// The producer's fence, after its push and before it reads which consumer
/// to signal and whether that one watches.
#[inline]
pub(crate) fn after_push() {
    // SeqCst: pairs with the fence in `Watch::end` (module docs).
    fence(Ordering::SeqCst);
}

#[cfg(all(test, loom))]
mod models {
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;
    use loom::thread;

    use super::Watch;
    use crate::kernel::ring::MpmcRing;

    /// A producer pushes and signals only an unwatched consumer; the
    /// consumer, watching, looks at its queue, then ends its watch and
    /// "sleeps" when the queue looks empty. A consumer that sleeps with the
    /// value unseen must have been signalled — else the wake is lost.
    /// (Weakening either fence in `Watch` to anything below `SeqCst` makes
    /// loom find the lost wake.)
    #[test]
    fn watched_wake() {
        loom::model(|| {
            let ring = Arc::new(MpmcRing::<u32>::new(2));
            let watch = Arc::new(Watch::default());
            let token = Arc::new(AtomicBool::new(false));
            watch.begin();
            let producer = {
                let (ring, watch, token) = (ring.clone(), watch.clone(), token.clone());
                thread::spawn(move || {
                    ring.push(7).expect("room");
                    if watch.must_signal() {
                        token.store(true, Ordering::Release);
                    }
                })
            };
            // A spinning look, then the watch ends.
            let mut got = ring.pop();
            let slept = got.is_none() && {
                watch.end();
                ring.is_empty()
            };
            producer.join().unwrap();
            if slept {
                // Asleep with the value unseen: only the token wakes it.
                assert!(token.load(Ordering::Acquire), "a wake was lost: asleep, not signalled");
            }
            if got.is_none() {
                got = ring.pop();
            }
            assert_eq!(got, Some(7));
        });
    }

    /// A worker moves from driver 1 to driver 0 while a producer pushes
    /// into it. The producer signals the driver it reads, unless that one
    /// watches. Driver 1 re-points the worker, then hands it over (a
    /// release store; the engine's is a mutex), then sleeps without looking
    /// at it. Driver 0, once the worker arrives, looks at its queue, ends
    /// its watch, looks again and "sleeps" when it is empty: a value unseen
    /// then must have signalled driver 0's token. No fence beyond the
    /// watch's own is needed: if the producer read the old driver, its
    /// fence precedes driver 0's `end` fence (the re-pointing happens
    /// before that one), so driver 0's last look sees the push. Re-pointing
    /// the worker after the hand-over instead of before makes loom find
    /// the lost wake.
    #[test]
    fn wake_into_a_moving_worker() {
        use loom::sync::atomic::AtomicUsize;

        use super::after_push;

        loom::model(|| {
            let ring = Arc::new(MpmcRing::<u32>::new(2));
            let watched = Arc::new([Watch::default(), Watch::default()]);
            let signalled = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
            let driver_of = Arc::new(AtomicUsize::new(1));
            let handed = Arc::new(AtomicBool::new(false));
            watched[0].begin();
            watched[1].begin();
            let producer = {
                let (ring, watched, signalled, driver_of) =
                    (ring.clone(), watched.clone(), signalled.clone(), driver_of.clone());
                thread::spawn(move || {
                    ring.push(7).expect("room");
                    after_push();
                    let driver = driver_of.load(Ordering::Relaxed);
                    if !watched[driver].is_watching() {
                        signalled[driver].store(true, Ordering::Release);
                    }
                })
            };
            let old = {
                let (watched, driver_of, handed) = (watched.clone(), driver_of.clone(), handed.clone());
                thread::spawn(move || {
                    driver_of.store(0, Ordering::Relaxed);
                    handed.store(true, Ordering::Release);
                    // Holds no worker now: ends its watch and sleeps.
                    watched[1].end();
                })
            };
            // Driver 0: takes the worker when it is handed over.
            while !handed.load(Ordering::Acquire) {
                thread::yield_now();
            }
            let mut got = ring.pop();
            let slept = got.is_none() && {
                watched[0].end();
                ring.is_empty()
            };
            producer.join().unwrap();
            old.join().unwrap();
            if slept {
                assert!(
                    signalled[0].load(Ordering::Acquire),
                    "a wake was lost: the new driver sleeps, not signalled"
                );
            }
            if got.is_none() {
                got = ring.pop();
            }
            assert_eq!(got, Some(7));
        });
    }
}
