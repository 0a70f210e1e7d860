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

    /// Called by a producer after its push: whether it must signal the
    /// consumer's token (the consumer is not watching).
    #[inline]
    pub(crate) fn must_signal(&self) -> bool {
        // SeqCst: pairs with the fence in `end` (module docs).
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fences.
        !self.watching.load(Ordering::Relaxed)
    }
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
}
