//! Wake rings: bounded, non-blocking queues that carry wakes into a worker,
//! and the wake queues built from them.
//!
//! A wake from another thread reaches the target worker through that
//! worker's wake ring. This module owns the
//! [`Ring`] contract and its three implementations, all compiled in every
//! build so the benches can compare them:
//!
//! | feature      | type                     | order                    |
//! |--------------|--------------------------|--------------------------|
//! | `rq-mutex`   | [`LockedRing`]            | FIFO                     |
//! | `rq-mpmc`    | [`MpmcRing`] (default)   | FIFO                     |
//! | `rq-striped` | [`StripedRing`]          | FIFO per stripe only     |
//!
//! The feature picks only the alias [`WakeRing`]; with several enabled the
//! precedence is `rq-striped` > `rq-mpmc` > `rq-mutex`, and with none
//! `rq-mpmc` is used.
//!
//! # Why a worker's wake queue cannot overflow
//!
//! A process is put in a wake queue only by the waker that moved its state
//! word to `Queued`, and leaves it only when the worker pops it and then
//! claims it (`Queued` → `Running`). Every wake transition is a CAS that
//! consumes the wait's epoch, so between those two points no second wake can
//! land: **each process is in at most one queue, at most once**.
//!
//! The ring is therefore not sized to the slab (which has no fixed size:
//! it grows by segments). A worker's wake and spawn queues are
//! `WakeQueue`s (`intrusive.rs`): a ring of [`WAKE_RING_CAPACITY`] entries, with an
//! intrusive list threaded through the slots behind it for whatever does
//! not fit — one link per slot suffices because of the invariant above. A
//! push never fails and never allocates; see `intrusive.rs` for the list
//! and its loom models.
//!
//! A ring push still needs one property from each implementation, now for
//! performance rather than safety: **a push returns `Err` only if, at some
//! instant during the call, `capacity()` values occupied the ring**, so
//! the list takes only real bursts. [`LockedRing`] has it trivially.
//! [`MpmcRing`] and [`StripedRing`] have it when each ring has one consumer
//! (a worker drains only its own queues): with several consumers, a
//! consumer stalled mid-pop pins its cell while later cells are freed, and
//! a push can find that cell busy with fewer values inside. See each type
//! for its argument.
//!
//! # Preemption
//!
//! Queue operations must run with preemption disabled. The lock-free rings
//! hand a cell from producer to consumer in two steps (claim a position,
//! then publish the value); a process preempted between them leaves its cell
//! unpublished, and every consumer behind that cell sees an empty ring until
//! the process runs again — which, if the stalled process is waiting to be
//! popped from this very ring, is never. [`LockedRing`] has the same hazard in
//! the form of a held spin lock.
//!
//! # Non-blocking contract
//!
//! No operation waits for another thread: one that finds a cell not yet
//! published (or not yet released) returns `None`/`Err` instead of spinning
//! on it. A compare-and-swap that loses a race retries, but only because
//! another thread made progress. This is also what keeps the loom models
//! finite.

use core::ops::{Deref, DerefMut};

pub(crate) mod envelope;
mod intrusive;
pub mod locked;
pub mod mpmc;
pub(crate) mod mpsc;
pub(crate) mod recycle;
pub mod striped;
pub(crate) mod watch;

pub use intrusive::WAKE_RING_CAPACITY;
#[cfg(all(test, loom))]
pub(crate) use intrusive::{test_node, IntrusiveQueue};
pub(crate) use intrusive::{Linked, Links, WakeQueue, NIL};

pub use locked::LockedRing;

/// A ring's memory could not be allocated (or its capacity overflows
/// `usize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocError;

impl core::fmt::Display for AllocError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("out of memory for a ring")
    }
}
impl core::error::Error for AllocError {}
pub use mpmc::MpmcRing;
pub use striped::StripedRing;

/// A bounded multi-producer multi-consumer queue that never blocks.
pub trait Ring<T: Send>: Send + Sync {
    /// A ring that holds at least `capacity` values. Implementations may
    /// round up (to a power of two, to whole stripes); [`capacity`] reports
    /// the real bound.
    ///
    /// [`capacity`]: Ring::capacity
    fn with_capacity(capacity: usize) -> Self
    where
        Self: Sized;

    /// [`with_capacity`](Ring::with_capacity) without aborting: `Err` when
    /// the memory cannot be had.
    fn try_with_capacity(capacity: usize) -> Result<Self, AllocError>
    where
        Self: Sized;

    /// How many values the ring holds when full.
    fn capacity(&self) -> usize;

    /// Appends `value`, or gives it back as `Err(value)` when the ring is
    /// full. Never blocks.
    ///
    /// # Errors
    ///
    /// `Err(value)` when the ring is full; the caller keeps the value.
    fn push(&self, value: T) -> Result<(), T>;

    /// Removes a value, or `None` when the ring is empty or the next value's
    /// producer has not finished publishing it. Never blocks.
    fn pop(&self) -> Option<T>;

    /// Whether no value is published at the consumer's position. For the
    /// ring's one consumer: a push that finished before this call (as the
    /// caller's fences order them) is seen; one still in progress may be
    /// missed, as by [`pop`](Ring::pop).
    fn is_empty(&self) -> bool;
}

cfg_if::cfg_if! {
    if #[cfg(feature = "rq-striped")] {
        /// The ring behind every worker's wake ring, chosen by the `rq-*`
        /// features (here: `rq-striped`).
        pub type WakeRing<T> = StripedRing<T>;
    } else if #[cfg(feature = "rq-mpmc")] {
        /// The ring behind every worker's wake ring, chosen by the `rq-*`
        /// features (here: `rq-mpmc`).
        pub type WakeRing<T> = MpmcRing<T>;
    } else if #[cfg(feature = "rq-mutex")] {
        /// The ring behind every worker's wake ring, chosen by the `rq-*`
        /// features (here: `rq-mutex`).
        pub type WakeRing<T> = LockedRing<T>;
    } else {
        /// The ring behind every worker's wake ring, chosen by the `rq-*`
        /// features (here: none, so the default `rq-mpmc`).
        pub type WakeRing<T> = MpmcRing<T>;
    }
}

/// Aligns (and so pads) a value to its own 128-byte block.
///
/// 128 rather than 64: x86's adjacent-line prefetcher pulls cache lines in
/// pairs, and several aarch64 cores have 128-byte lines. Producer and
/// consumer counters in separate blocks do not false-share.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

const _: () = assert!(core::mem::align_of::<CachePadded<u8>>() == 128);

impl<T> Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for CachePadded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// Checks every implementation against the [`Ring`] contract; each ring's
/// own test module calls these.
#[cfg(all(test, not(loom)))]
pub(crate) mod contract {
    use super::Ring;
    use crate::kernel::atomic::{AtomicUsize, Ordering};
    use alloc::vec::Vec;

    /// Counts how many times a value is dropped.
    #[derive(Debug)]
    pub(crate) struct DropCounter<'a>(pub(crate) &'a AtomicUsize);

    impl Drop for DropCounter<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Fills the ring, checks that one more push hands its value back, and
    /// that every accepted value comes out again. Returns what came out, in
    /// pop order.
    pub(crate) fn full_returns_value<R: Ring<usize>>(ring: &R) -> Vec<usize> {
        let capacity = ring.capacity();
        for value in 0..capacity {
            assert_eq!(ring.push(value), Ok(()), "push {value} of {capacity}");
        }
        assert_eq!(ring.push(capacity), Err(capacity));
        assert_eq!(ring.push(capacity + 1), Err(capacity + 1));
        let mut out = Vec::new();
        while let Some(value) = ring.pop() {
            out.push(value);
        }
        assert_eq!(out.len(), capacity);
        out
    }

    /// A new ring and a drained ring are empty, and say so; a ring
    /// holding a value is not, whichever cell the value sits in.
    pub(crate) fn empty_returns_none<R: Ring<usize>>(ring: &R) {
        assert!(ring.is_empty());
        assert_eq!(ring.pop(), None);
        for round in 0..2 * ring.capacity() {
            assert_eq!(ring.push(round), Ok(()));
            assert!(!ring.is_empty(), "a value is waiting (round {round})");
            assert_eq!(ring.pop(), Some(round));
            assert!(ring.is_empty(), "drained (round {round})");
            assert_eq!(ring.pop(), None);
        }
    }

    /// Goes round the ring many times at every fill level from 1 to full,
    /// so every cell is reused with every phase of the counters. `fifo`
    /// also checks the order. Under miri each fill level goes round the
    /// ring just over once: every cell is still reused at every level.
    pub(crate) fn wraparound<R: Ring<usize>>(ring: &R, fifo: bool) {
        let capacity = ring.capacity();
        let mut next_in = 0usize;
        for batch in 1..=capacity {
            let mut expected = Vec::new();
            let rounds = if cfg!(miri) { capacity.div_ceil(batch) + 1 } else { (4 * capacity).max(8) };
            for _ in 0..rounds {
                for _ in 0..batch {
                    assert_eq!(ring.push(next_in), Ok(()));
                    expected.push(next_in);
                    next_in += 1;
                }
                let mut got = Vec::new();
                for _ in 0..batch {
                    got.push(ring.pop().expect("a pushed value is there"));
                }
                assert_eq!(ring.pop(), None);
                if !fifo {
                    got.sort_unstable();
                }
                assert_eq!(got, expected);
                expected.clear();
            }
        }
    }

    /// Dropping a ring drops each value still inside it exactly once, and
    /// values popped earlier are not dropped again.
    pub(crate) fn drop_drains<'a, R: Ring<DropCounter<'a>>>(ring: R, drops: &'a AtomicUsize) {
        let capacity = ring.capacity();
        for _ in 0..capacity {
            assert!(ring.push(DropCounter(drops)).is_ok());
        }
        // A refused value comes back to the caller, who drops it.
        let refused = ring.push(DropCounter(drops));
        assert!(refused.is_err());
        drop(refused);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        let popped = ring.pop().expect("full ring");
        drop(popped);
        assert_eq!(drops.load(Ordering::Relaxed), 2);
        drop(ring);
        assert_eq!(drops.load(Ordering::Relaxed), capacity + 1);
    }

    /// Four producers push distinct values (retrying while the ring is
    /// full) and four consumers pop until all are accounted for. Every value
    /// must come out exactly once. With `per_producer_fifo`, each consumer
    /// must also see each producer's values in push order.
    pub(crate) fn stress<R: Ring<usize>>(ring: &R, per_producer_fifo: bool) {
        use std::{eprintln, thread}; // this module is cfg(test) only

        const PRODUCERS: usize = 4;
        const CONSUMERS: usize = 4;
        let per_producer: usize = if cfg!(miri) { 50 } else { 25_000 };
        let total = PRODUCERS * per_producer;
        let popped = AtomicUsize::new(0);
        let full_retries = AtomicUsize::new(0);
        let empty_retries = AtomicUsize::new(0);

        let seen: Vec<Vec<usize>> = thread::scope(|scope| {
            for producer in 0..PRODUCERS {
                let full_retries = &full_retries;
                scope.spawn(move || {
                    for index in 0..per_producer {
                        let mut value = producer * per_producer + index;
                        while let Err(back) = ring.push(value) {
                            value = back;
                            full_retries.fetch_add(1, Ordering::Relaxed);
                            thread::yield_now();
                        }
                    }
                });
            }
            let consumers: Vec<_> = (0..CONSUMERS)
                .map(|_| {
                    let (popped, empty_retries) = (&popped, &empty_retries);
                    scope.spawn(move || {
                        let mut mine = Vec::new();
                        while popped.load(Ordering::Relaxed) < total {
                            match ring.pop() {
                                Some(value) => {
                                    mine.push(value);
                                    popped.fetch_add(1, Ordering::Relaxed);
                                }
                                None => {
                                    empty_retries.fetch_add(1, Ordering::Relaxed);
                                    thread::yield_now();
                                }
                            }
                        }
                        mine
                    })
                })
                .collect();
            consumers.into_iter().map(|consumer| consumer.join().expect("consumer panicked")).collect()
        });

        assert_eq!(ring.pop(), None, "nothing is left over");
        if per_producer_fifo {
            for mine in &seen {
                let mut last = [None::<usize>; PRODUCERS];
                for &value in mine {
                    let producer = value / per_producer;
                    assert!(last[producer] < Some(value), "producer {producer}'s values out of order");
                    last[producer] = Some(value);
                }
            }
        }
        let mut all: Vec<usize> = seen.into_iter().flatten().collect();
        assert_eq!(all.len(), total, "count of values popped");
        all.sort_unstable();
        for (expected, &value) in all.iter().enumerate() {
            assert_eq!(value, expected, "a value was lost or duplicated");
        }
        eprintln!(
            "stress: {total} values through capacity {}, {} full retries, {} empty retries",
            ring.capacity(),
            full_retries.load(Ordering::Relaxed),
            empty_retries.load(Ordering::Relaxed),
        );
    }
}

/// Pieces shared by the loom models of every ring.
///
/// A model may have only one thread at a time in a retry loop (a consumer
/// polling an empty ring, or a producer retrying a full one). Loom explores
/// every schedule after a `yield_now`, so two threads yielding in turn while
/// a third sits between claim and publish is an infinite schedule to it —
/// the very stall the module docs warn about, which preemption-free callers
/// do not have.
#[cfg(all(test, loom))]
pub(crate) mod loom_contract {
    use super::Ring;
    use alloc::vec::Vec;
    use loom::sync::Arc;
    use loom::thread;

    /// Pushes `value`, yielding to the model while the ring is full.
    pub(crate) fn push_until_accepted<R: Ring<usize>>(ring: &R, mut value: usize) {
        while let Err(back) = ring.push(value) {
            value = back;
            thread::yield_now();
        }
    }

    /// Pops `count` values, yielding to the model whenever a value is still
    /// in flight.
    pub(crate) fn pop_count<R: Ring<usize>>(ring: &R, count: usize) -> Vec<usize> {
        let mut out = Vec::new();
        while out.len() < count {
            match ring.pop() {
                Some(value) => out.push(value),
                None => thread::yield_now(),
            }
        }
        out
    }

    /// Two producers (one value each) race one consumer through a ring
    /// built with `capacity`; every value comes out exactly once and the
    /// ring is empty afterwards.
    pub(crate) fn push_pop_race<R: Ring<usize> + 'static>(capacity: usize) {
        loom::model(move || {
            let ring = Arc::new(R::with_capacity(capacity));
            let first = {
                let ring = ring.clone();
                thread::spawn(move || push_until_accepted(&*ring, 1))
            };
            let second = {
                let ring = ring.clone();
                thread::spawn(move || push_until_accepted(&*ring, 2))
            };
            let mut got = pop_count(&*ring, 2);
            first.join().expect("producer panicked");
            second.join().expect("producer panicked");
            got.sort_unstable();
            assert_eq!(got, [1, 2]);
            assert_eq!(ring.pop(), None);
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn wake_ring_alias_follows_features() {
        fn name<R>() -> &'static str {
            core::any::type_name::<R>()
        }
        let expected = if cfg!(feature = "rq-striped") {
            name::<StripedRing<u32>>()
        } else if cfg!(feature = "rq-mpmc") || !cfg!(feature = "rq-mutex") {
            name::<MpmcRing<u32>>()
        } else {
            name::<LockedRing<u32>>()
        };
        assert_eq!(name::<WakeRing<u32>>(), expected);
    }

    #[test]
    fn cache_padded_separates_neighbours() {
        struct Pair {
            a: CachePadded<u64>,
            b: CachePadded<u64>,
        }
        let pair = Pair { a: CachePadded(1), b: CachePadded(2) };
        let distance = (&pair.b as *const _ as usize).abs_diff(&pair.a as *const _ as usize);
        assert!(distance >= 128);
        assert_eq!(*pair.a + *pair.b, 3);
    }
}
