//! A ring striped over several [`MpmcRing`]s to spread producer contention.
//!
//! Each push takes a ticket from a shared counter (one `fetch_add`, which
//! never fails, instead of a CAS loop on one shared `tail`) and goes to
//! stripe `ticket % STRIPES`, trying the following stripes if that one is
//! full. Pops scan the stripes from a rotating cursor that moves one past
//! the stripe it last took from, so an uncontended consumer takes stripes in
//! the same round-robin order that tickets fill them.
//!
//! # Order
//!
//! FIFO holds only per stripe. Two values pushed one after the other may
//! land in different stripes, and the consumer can take the later one first
//! (its stripe comes up first under the cursor, or the earlier one is still
//! being published). A wake ring does not need more: wakes of different
//! processes are unordered anyway.
//!
//! # Capacity bound
//!
//! The module argument in [`super`] needs: a push fails only if the whole
//! ring was full at some instant during the call. Seeing every stripe full
//! one after the other is not enough — between two looks the consumer may
//! pop a value from a stripe already checked and its process may be pushed
//! again into one not checked yet, so the push would fail with room to
//! spare. Pops therefore count themselves in `popped`, and a push that finds
//! every stripe full rescans if the count moved during its scan. If it did
//! not move, each stripe stayed full from its look to the end of the scan,
//! except that (with one consumer) at most one pop can have released its
//! cell without having counted itself yet: at the end `capacity - 1` values
//! were in the ring, plus the one mid-pop, whose process is still queued and
//! so distinct from the one being pushed — `capacity + 1` processes in all,
//! more than a slab of `capacity` holds. Each rescan follows a completed pop,
//! so a push still never waits for another thread.

use super::AllocError;
use super::{CachePadded, MpmcRing, Ring};
use crate::kernel::atomic::{AtomicUsize, Ordering};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

/// How many stripes a ring has (a power of two). Two under loom, to keep
/// the models small.
pub const STRIPES: usize = if cfg!(loom) { 2 } else { 4 };

const _: () = assert!(STRIPES.is_power_of_two());

/// A bounded MPMC ring striped over [`STRIPES`] Vyukov rings; see the
/// [module docs](self).
pub struct StripedRing<T> {
    /// Push tickets; a push starts at stripe `ticket % STRIPES`.
    tickets: CachePadded<AtomicUsize>,
    /// The stripe the next pop looks at first; only a hint.
    cursor: CachePadded<AtomicUsize>,
    /// How many pops have completed; read by pushes that find every stripe
    /// full, to tell "full" from "a consumer made room while we looked".
    popped: CachePadded<AtomicUsize>,
    stripes: Box<[MpmcRing<T>]>,
}

impl<T> StripedRing<T> {
    /// A ring holding at least `capacity` values: [`STRIPES`] stripes of
    /// `capacity / STRIPES` (rounded up to a power of two, at least 2).
    ///
    /// # Panics
    ///
    /// If the rounded capacity does not fit in `usize`.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        match Self::try_new(capacity) {
            Ok(ring) => ring,
            Err(_) => panic!("StripedRing of capacity {capacity}: out of memory"),
        }
    }

    /// [`new`](StripedRing::new) without aborting: `Err` when the stripes
    /// cannot be allocated (or the capacity overflows `usize`).
    pub fn try_new(capacity: usize) -> Result<Self, AllocError> {
        let per_stripe = capacity.div_ceil(STRIPES);
        let mut stripes: Vec<MpmcRing<T>> = Vec::new();
        stripes.try_reserve_exact(STRIPES).map_err(|_| AllocError)?;
        for _ in 0..STRIPES {
            stripes.push(MpmcRing::try_new(per_stripe)?);
        }
        if stripes[0].capacity().checked_mul(STRIPES).is_none() {
            return Err(AllocError);
        }
        Ok(StripedRing {
            tickets: CachePadded(AtomicUsize::new(0)),
            cursor: CachePadded(AtomicUsize::new(0)),
            popped: CachePadded(AtomicUsize::new(0)),
            stripes: stripes.into_boxed_slice(),
        })
    }

    /// How many values the ring holds when full: the sum over its stripes.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.stripes[0].capacity() * STRIPES
    }

    /// Appends `value` to some stripe, or hands it back when the whole ring
    /// was full (see the module docs for what "was full" guarantees).
    ///
    /// # Errors
    ///
    /// `Err(value)` gives the value back when there is no room.
    pub fn push(&self, mut value: T) -> Result<(), T> {
        // Relaxed: the ticket only spreads pushes over stripes; nothing is
        // published through it.
        let first = self.tickets.fetch_add(1, Ordering::Relaxed);
        // Acquire pairs with the Release increment in `pop`: every pop
        // counted here has released its cell before our scan looks at it,
        // so a later equal count means no counted pop happened in between.
        let mut popped_before = self.popped.load(Ordering::Acquire);
        loop {
            for offset in 0..STRIPES {
                let stripe = &self.stripes[first.wrapping_add(offset) % STRIPES];
                match stripe.push(value) {
                    Ok(()) => return Ok(()),
                    Err(back) => value = back,
                }
            }
            // Acquire: as above, for the next scan if there is one.
            let popped_after = self.popped.load(Ordering::Acquire);
            if popped_after == popped_before {
                return Err(value);
            }
            // A consumer completed a pop while we scanned: room may have
            // opened behind us. Rescan; each rescan is paid for by a pop.
            popped_before = popped_after;
        }
    }

    /// Removes a value from the first non-empty stripe at or after the
    /// cursor, or `None` when no stripe had a published value.
    pub fn pop(&self) -> Option<T> {
        // Relaxed: the cursor is a fairness hint. A stale value only changes
        // which stripe is looked at first.
        let start = self.cursor.load(Ordering::Relaxed);
        for offset in 0..STRIPES {
            let index = start.wrapping_add(offset) % STRIPES;
            if let Some(value) = self.stripes[index].pop() {
                // Relaxed: see above.
                self.cursor.store(index.wrapping_add(1), Ordering::Relaxed);
                // Release orders our release of the cell (inside the stripe's
                // `pop`) before the count, for pushes that Acquire-load it.
                self.popped.fetch_add(1, Ordering::Release);
                return Some(value);
            }
        }
        None
    }
}

impl<T> fmt::Debug for StripedRing<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StripedRing")
            .field("capacity", &self.capacity())
            .field("stripes", &self.stripes)
            // Relaxed: diagnostic snapshots.
            .field("tickets", &self.tickets.load(Ordering::Relaxed))
            .field("popped", &self.popped.load(Ordering::Relaxed))
            .finish()
    }
}

impl<T: Send> Ring<T> for StripedRing<T> {
    fn with_capacity(capacity: usize) -> Self {
        StripedRing::new(capacity)
    }
    fn try_with_capacity(capacity: usize) -> Result<Self, AllocError> {
        StripedRing::try_new(capacity)
    }
    fn capacity(&self) -> usize {
        StripedRing::capacity(self)
    }
    fn push(&self, value: T) -> Result<(), T> {
        StripedRing::push(self, value)
    }
    fn pop(&self) -> Option<T> {
        StripedRing::pop(self)
    }
    fn is_empty(&self) -> bool {
        self.stripes.iter().all(MpmcRing::is_empty)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::contract;
    use super::*;

    #[test]
    fn capacity_is_whole_stripes() {
        assert_eq!(StripedRing::<u8>::new(0).capacity(), 2 * STRIPES);
        assert_eq!(StripedRing::<u8>::new(1).capacity(), 2 * STRIPES);
        assert_eq!(StripedRing::<u8>::new(3 * STRIPES).capacity(), 4 * STRIPES);
        assert_eq!(StripedRing::<u8>::new(16384).capacity(), 16384);
        assert_eq!(StripedRing::<u8>::new(16385).capacity(), 32768);
    }

    /// Uncontended, the cursor follows the tickets round-robin, so a single
    /// producer and a single consumer see FIFO (not promised in general).
    #[test]
    fn uncontended_order_is_ticket_order() {
        let ring = StripedRing::new(16);
        for value in 0..10 {
            ring.push(value).expect("room");
        }
        let out: Vec<_> = core::iter::from_fn(|| ring.pop()).collect();
        assert_eq!(out, (0..10).collect::<Vec<_>>());
    }

    /// A push whose home stripe is full goes to the next one, so the ring
    /// fills completely whatever the ticket pattern.
    #[test]
    fn full_stripe_spills_to_next() {
        let ring = StripedRing::new(2 * STRIPES);
        // Fill, drain only stripe 0's values, refill: the refills have
        // tickets pointing at every stripe but only stripe 0 has room.
        for value in 0..ring.capacity() {
            ring.push(value).expect("room");
        }
        let stripe0: Vec<_> = core::iter::from_fn(|| ring.stripes[0].pop()).collect();
        assert_eq!(stripe0.len(), 2);
        for value in 100..102 {
            ring.push(value).expect("stripe 0 has room");
        }
        assert_eq!(ring.push(999), Err(999));
    }

    #[test]
    fn full_returns_value() {
        let ring = StripedRing::new(8);
        let mut out = contract::full_returns_value(&ring);
        out.sort_unstable();
        assert_eq!(out, (0..ring.capacity()).collect::<Vec<_>>());
        contract::full_returns_value(&ring);
    }

    #[test]
    fn empty_returns_none() {
        contract::empty_returns_none(&StripedRing::new(8));
    }

    #[test]
    fn wraparound() {
        contract::wraparound(&StripedRing::new(0), false);
        contract::wraparound(&StripedRing::new(32), false);
    }

    #[test]
    fn drop_drops_remaining_once() {
        let drops = AtomicUsize::new(0);
        contract::drop_drains(StripedRing::new(8), &drops);
    }

    #[test]
    fn stress_striped() {
        contract::stress(&StripedRing::new(64), false);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::super::loom_contract::{pop_count, push_pop_race};
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Two producers and one consumer race through a two-stripe ring with
    /// two cells per stripe.
    #[test]
    fn striped_push_pop_race() {
        push_pop_race::<StripedRing<usize>>(2 * STRIPES);
    }

    /// The rescan. The ring is full but for one cell, in stripe 1, and the
    /// producer's ticket sends it to stripe 0 first. Meanwhile the consumer
    /// pops from stripe 0 and pushes the value back with a ticket for
    /// stripe 1, so the producer can find stripe 0 full and then stripe 1
    /// full. With as many values as cells, neither push may fail.
    #[test]
    fn striped_requeue_never_overflows() {
        loom::model(|| {
            let ring = Arc::new(StripedRing::new(2 * STRIPES));
            let capacity = ring.capacity();
            for value in 0..capacity {
                ring.push(value).expect("room");
            }
            // Setup only: take a value out behind the ring's back, so the
            // next ticket (the producer's) points at a full stripe.
            let taken = ring.stripes[1].pop().expect("stripe 1 is full");
            assert_eq!(ring.tickets.load(Ordering::Relaxed) % STRIPES, 0);
            let producer = {
                let ring = ring.clone();
                thread::spawn(move || ring.push(taken).expect("capacity values fit"))
            };
            let value = ring.pop().expect("the ring is not empty");
            ring.push(value).expect("capacity values fit");
            producer.join().expect("producer panicked");
            let mut got = pop_count(&*ring, capacity);
            got.sort_unstable();
            assert_eq!(got, (0..capacity).collect::<Vec<_>>());
        });
    }
}
