//! The baseline ring: a `VecDeque` behind a [`SpinLock`].
//!
//! Every operation takes the lock, so the ring is trivially FIFO and its
//! capacity bound is exact for any number of consumers: a push fails only if
//! the deque held `capacity` values while the push held the lock. The deque
//! is allocated at full capacity up front, so a push never allocates.
//!
//! "Never blocks" here means that no operation waits for anything but the
//! lock, and the lock is held only for a deque operation; like every ring,
//! it must be used with preemption disabled (see [`super`]), or a holder
//! switched out mid-section stalls every other thread on the lock.

use super::AllocError;
use super::Ring;
use crate::kernel::spin::SpinLock;
use alloc::collections::VecDeque;
use core::fmt;

/// A bounded FIFO queue under a spin lock; see the [module docs](self).
pub struct LockedRing<T> {
    queue: SpinLock<VecDeque<T>>,
    capacity: usize,
}

impl<T> LockedRing<T> {
    /// A ring holding exactly `capacity` values (no rounding).
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        LockedRing { queue: SpinLock::new(VecDeque::with_capacity(capacity)), capacity }
    }

    /// [`new`](LockedRing::new) without aborting: `Err` when the queue
    /// cannot be allocated.
    pub fn try_new(capacity: usize) -> Result<Self, AllocError> {
        let mut queue = VecDeque::new();
        queue.try_reserve_exact(capacity).map_err(|_| AllocError)?;
        Ok(LockedRing { queue: SpinLock::new(queue), capacity })
    }

    /// How many values the ring holds when full.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Appends `value`, or hands it back when the ring is full.
    ///
    /// # Errors
    ///
    /// `Err(value)` gives the value back when there is no room.
    pub fn push(&self, value: T) -> Result<(), T> {
        let mut queue = self.queue.lock();
        debug_assert!(queue.len() <= self.capacity);
        if queue.len() == self.capacity {
            return Err(value);
        }
        queue.push_back(value);
        Ok(())
    }

    /// Removes the oldest value, or `None` when the ring is empty.
    pub fn pop(&self) -> Option<T> {
        self.queue.lock().pop_front()
    }
}

impl<T> fmt::Debug for LockedRing<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `try_lock`: formatting must not spin on a held lock.
        let len = self.queue.try_lock().map(|queue| queue.len());
        f.debug_struct("LockedRing").field("capacity", &self.capacity).field("len", &len).finish()
    }
}

impl<T: Send> Ring<T> for LockedRing<T> {
    fn with_capacity(capacity: usize) -> Self {
        LockedRing::new(capacity)
    }
    fn try_with_capacity(capacity: usize) -> Result<Self, AllocError> {
        LockedRing::try_new(capacity)
    }
    fn capacity(&self) -> usize {
        LockedRing::capacity(self)
    }
    fn push(&self, value: T) -> Result<(), T> {
        LockedRing::push(self, value)
    }
    fn pop(&self) -> Option<T> {
        LockedRing::pop(self)
    }
    fn is_empty(&self) -> bool {
        self.queue.lock().is_empty()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::contract;
    use super::*;
    use crate::kernel::atomic::AtomicUsize;
    use alloc::vec::Vec;

    #[test]
    fn capacity_is_exact() {
        assert_eq!(LockedRing::<u8>::new(0).capacity(), 0);
        assert_eq!(LockedRing::<u8>::new(5).capacity(), 5);
        assert_eq!(LockedRing::<u8>::new(0).push(1), Err(1));
    }

    #[test]
    fn fifo() {
        let ring = LockedRing::new(5);
        let out = contract::full_returns_value(&ring);
        assert_eq!(out, (0..5).collect::<Vec<_>>());
    }

    #[test]
    fn full_returns_value() {
        let ring = LockedRing::new(3);
        contract::full_returns_value(&ring);
        contract::full_returns_value(&ring);
    }

    #[test]
    fn empty_returns_none() {
        contract::empty_returns_none(&LockedRing::new(1));
    }

    #[test]
    fn wraparound() {
        contract::wraparound(&LockedRing::new(1), true);
        contract::wraparound(&LockedRing::new(7), true);
    }

    #[test]
    fn push_never_allocates_past_capacity() {
        let ring = LockedRing::new(8);
        let allocated = ring.queue.lock().capacity();
        contract::wraparound(&ring, true);
        assert_eq!(ring.queue.lock().capacity(), allocated);
    }

    #[test]
    fn drop_drops_remaining_once() {
        let drops = AtomicUsize::new(0);
        contract::drop_drains(LockedRing::new(4), &drops);
    }

    #[test]
    fn stress_mutex() {
        contract::stress(&LockedRing::new(64), true);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::super::loom_contract::pop_count;
    use super::*;
    use alloc::vec::Vec;
    use loom::sync::Arc;
    use loom::thread;

    // These models have two threads and no retry loops, because loom cannot
    // finish a model of `SpinLock` otherwise. Its waiting loop reads `locked`
    // with Relaxed and yields; loom lets each read return any store not
    // older than the last one seen, so a waiter racing a thread that locks
    // and unlocks in a loop (a consumer polling an empty ring) can read a
    // fresh `true` forever, and with three contenders loom can keep
    // scheduling the two waiters instead of the holder. Neither is a bug on
    // hardware; both make the model infinite.

    /// A producer pushes twice into a one-value ring while the consumer pops
    /// once. The first push always fits; the second fits exactly when the
    /// pop took the first value. Nothing is lost, and order is FIFO.
    #[test]
    fn mutex_push_pop_race() {
        loom::model(|| {
            let ring = Arc::new(LockedRing::new(1));
            let producer = {
                let ring = ring.clone();
                thread::spawn(move || [ring.push(1), ring.push(2)])
            };
            let popped = ring.pop();
            let [first, second] = producer.join().expect("producer panicked");
            assert_eq!(first, Ok(()));
            let accepted: Vec<usize> = match second {
                Ok(()) => {
                    assert_eq!(popped, Some(1), "the second push fit, so the pop made room");
                    [1, 2].into()
                }
                Err(back) => {
                    assert_eq!(back, 2);
                    [1].into()
                }
            };
            let mut got: Vec<usize> = popped.into_iter().collect();
            got.extend(pop_count(&*ring, accepted.len() - got.len()));
            assert_eq!(got, accepted);
            assert_eq!(ring.pop(), None);
        });
    }

    /// Two producers race for the last free place: exactly one wins, and
    /// the loser gets its own value back.
    #[test]
    fn mutex_two_producers_race() {
        loom::model(|| {
            let ring = Arc::new(LockedRing::new(2));
            ring.push(0).expect("empty ring");
            let spawn_push = |value: usize| {
                let ring = ring.clone();
                thread::spawn(move || ring.push(value))
            };
            let (first, second) = (spawn_push(1), spawn_push(2));
            let results =
                [first.join().expect("producer panicked"), second.join().expect("producer panicked")];
            let refused: Vec<usize> = results.iter().filter_map(|result| result.err()).collect();
            assert_eq!(refused.len(), 1, "exactly one push is refused: {results:?}");
            let mut got = pop_count(&*ring, 2);
            got.push(refused[0]);
            got.sort_unstable();
            assert_eq!(got, [0, 1, 2]);
        });
    }
}
