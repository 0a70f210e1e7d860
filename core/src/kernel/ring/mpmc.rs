//! A bounded lock-free MPMC ring after Dmitry Vyukov's design.
//!
//! Each cell carries a sequence number that says whose turn it is. With
//! capacity `C` (a power of two, at least 2) and a position `p` (a counter
//! that only grows, wrapping at `usize::MAX`), cell `p % C` cycles through:
//!
//! ```text
//!   sequence == p          free: the producer of position p may write
//!   sequence == p + 1      published: the consumer of position p may read
//!   sequence == p + C      released: free for the producer of p + C
//! ```
//!
//! Producers claim positions by advancing `tail`, consumers by advancing
//! `head`, each with a compare-and-swap that is attempted only after the
//! cell's sequence showed that the position is ready; the sequence store
//! (Release) then hands the cell to the other side. `head` and `tail` sit in
//! separate cache blocks so producers and consumers do not false-share.
//!
//! # Invariant
//!
//! A cell's value is initialised exactly when its sequence is `p + 1` for the
//! position `p` that maps to it, and only the thread that claimed `p` touches
//! the value in between (the writer before the Release, the reader after the
//! Acquire). `Drop` relies on it to drop exactly the positions `head..tail`.
//!
//! # Capacity bound
//!
//! A push at position `p` fails only when cell `p % C` has not been released
//! by the consumer of `p - C`. With one consumer, which releases positions in
//! order, positions `p - C .. p` are then all occupied (claimed by a producer
//! and not yet released): `C` values were in the ring during the call, as the
//! module argument in [`super`] requires. With several consumers the
//! consumer of `p - C` may be the only one still busy, so the bound is not
//! exact; wake rings have one consumer.
//!
//! The bound also needs `tail` to carry memory: a producer that sees `tail`
//! at `p` must see every cell release that happened before the push that
//! moved it there, or it could report "full" on a stale view of a cell that
//! was freed before `tail` even reached `p`. Hence Release/Acquire on
//! `tail` (and, mirrored, on `head`) although data safety needs them only on
//! the sequence numbers; loom's `mpmc_requeue_never_overflows` fails with
//! Relaxed there.

use super::AllocError;
use super::{CachePadded, Ring};
use crate::kernel::atomic::{AtomicUsize, Ordering, UnsafeCell};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::mem::MaybeUninit;

/// One slot of the ring: a sequence number and a value that is initialised
/// exactly while the sequence says "published".
struct Cell<T> {
    sequence: AtomicUsize,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// A bounded lock-free MPMC ring; see the [module docs](self).
pub struct MpmcRing<T> {
    /// Next position a consumer will claim.
    head: CachePadded<AtomicUsize>,
    /// Next position a producer will claim.
    tail: CachePadded<AtomicUsize>,
    /// `capacity` cells; position `p` lives in `cells[p & mask]`.
    cells: Box<[Cell<T>]>,
    mask: usize,
}

// SAFETY: the ring moves `T`s between threads, so it is `Send` and `Sync`
// exactly when `T: Send`. Every access to a cell's value is made by the one
// thread that claimed the cell's position (see the module invariant), and
// the sequence number's Release/Acquire pair orders the writer before the
// reader, so no two threads ever access the same value concurrently.
unsafe impl<T: Send> Send for MpmcRing<T> {}
// SAFETY: as for `Send`: shared access only ever gives one thread at a time
// access to a value, and the values themselves are only moved, never shared.
unsafe impl<T: Send> Sync for MpmcRing<T> {}

impl<T> MpmcRing<T> {
    /// A ring holding `capacity` values, rounded up to a power of two and
    /// to at least 2 (a one-cell ring cannot tell "published" from
    /// "released").
    ///
    /// # Panics
    ///
    /// If the rounded capacity does not fit in `usize`.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        match Self::try_new(capacity) {
            Ok(ring) => ring,
            Err(_) => panic!("MpmcRing of capacity {capacity}: out of memory"),
        }
    }

    /// [`new`](MpmcRing::new) without aborting: `Err` when the cells cannot
    /// be allocated (or the capacity overflows `usize`).
    pub fn try_new(capacity: usize) -> Result<Self, AllocError> {
        let capacity = capacity.max(2).checked_next_power_of_two().ok_or(AllocError)?;
        let mut cells: Vec<Cell<T>> = Vec::new();
        cells.try_reserve_exact(capacity).map_err(|_| AllocError)?;
        cells.extend((0..capacity).map(|position| Cell {
            sequence: AtomicUsize::new(position),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }));
        Ok(MpmcRing {
            head: CachePadded(AtomicUsize::new(0)),
            tail: CachePadded(AtomicUsize::new(0)),
            cells: cells.into_boxed_slice(),
            mask: capacity - 1,
        })
    }

    /// How many values the ring holds when full.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Appends `value`, or hands it back when the cell at the tail is not
    /// yet free (the ring is full, or the consumer of that cell's previous
    /// round has not finished reading it).
    ///
    /// # Errors
    ///
    /// `Err(value)` gives the value back when there is no room.
    pub fn push(&self, value: T) -> Result<(), T> {
        // Acquire pairs with the Release of the CAS that wrote this `tail`:
        // every cell release that producer had seen, we see too. Data
        // safety does not need it (the cell's sequence and the CAS decide
        // who may write), but the capacity bound does: without it we could
        // learn that `tail` moved on while still seeing a cell as
        // unreleased that its consumer released before that move, and
        // report "full" with room to spare (loom finds this one).
        let mut position = self.tail.load(Ordering::Acquire);
        loop {
            let cell = &self.cells[position & self.mask];
            // Acquire pairs with the Release in `pop` that released this
            // cell: the previous consumer's read of the value happens before
            // our write below.
            let sequence = cell.sequence.load(Ordering::Acquire);
            let lag = sequence.wrapping_sub(position) as isize;
            if lag == 0 {
                // The CAS arbitrates which producer owns `position` (the
                // modification order of `tail` gives it to exactly one); the
                // data hand-off is ordered by the cell's sequence, not by
                // `tail`. Release on success and Acquire on failure carry
                // what each producer has seen of cell releases along `tail`,
                // for the capacity bound (see the load above).
                match self.tail.compare_exchange(
                    position,
                    position.wrapping_add(1),
                    Ordering::Release,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        // SAFETY: winning the CAS made us the only producer of
                        // `position`, and the sequence was `position`, so the
                        // cell is free: no consumer reads it until we publish
                        // below, and the previous consumer has finished (the
                        // Acquire above). The value is uninitialised, so
                        // writing over it leaks nothing.
                        cell.value.with_mut(|slot| unsafe { (*slot).write(value) });
                        // Release publishes the value to the consumer whose
                        // Acquire load sees `position + 1`.
                        cell.sequence.store(position.wrapping_add(1), Ordering::Release);
                        return Ok(());
                    }
                    // Another producer took `position`; try where it left
                    // `tail`. Each retry means someone else made progress.
                    Err(current) => position = current,
                }
            } else if lag < 0 {
                // The cell still holds (or is still being read for) the value
                // from `position - capacity`: full, as far as we may wait.
                return Err(value);
            } else {
                // The cell has moved past `position`: other producers pushed
                // since we read `tail`. Our Acquire above synchronised with
                // the store that advanced the sequence, which follows their
                // CAS on `tail`, so this load sees a newer `tail`. Acquire
                // as for the first load.
                position = self.tail.load(Ordering::Acquire);
            }
        }
    }

    /// Removes the value at the head, or `None` when the ring is empty or
    /// that value's producer has not finished publishing it.
    pub fn pop(&self) -> Option<T> {
        // Acquire, mirroring `push`: having seen `head` move on, we also see
        // the publications its movers had seen, so `None` is not reported
        // for a value that the consumer before us already found published.
        let mut position = self.head.load(Ordering::Acquire);
        loop {
            let cell = &self.cells[position & self.mask];
            // Acquire pairs with the Release in `push` that published the
            // value: the producer's write happens before our read.
            let sequence = cell.sequence.load(Ordering::Acquire);
            let lag = sequence.wrapping_sub(position.wrapping_add(1)) as isize;
            if lag == 0 {
                // The CAS picks the one consumer of `position`; the hand-off
                // is ordered by the cell's sequence. Release/Acquire as in
                // `push`, mirroring the load above.
                match self.head.compare_exchange(
                    position,
                    position.wrapping_add(1),
                    Ordering::Release,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        // SAFETY: winning the CAS made us the only consumer of
                        // `position`, and the sequence `position + 1` (read
                        // with Acquire) says its producer wrote the value and
                        // that the write is visible. No producer writes the
                        // cell again until we release it below, and we move
                        // the value out exactly once.
                        let value = cell.value.with(|slot| unsafe { (*slot).assume_init_read() });
                        // Release hands the cell to the producer of
                        // `position + capacity`, after our read.
                        cell.sequence
                            .store(position.wrapping_add(self.mask).wrapping_add(1), Ordering::Release);
                        return Some(value);
                    }
                    Err(current) => position = current,
                }
            } else if lag < 0 {
                // Nothing published at `position`: empty, or its producer is
                // between claiming and publishing. Do not wait for it.
                return None;
            } else {
                // Other consumers took `position`; the Acquire above makes
                // their advance of `head` visible (as in `push`). Acquire as
                // for the first load.
                position = self.head.load(Ordering::Acquire);
            }
        }
    }

    /// Whether no value is published at the head: what [`pop`](Self::pop)
    /// would find, without taking it (it reads the head and that cell's
    /// sequence, nothing a producer writes unless it publishes there).
    pub fn is_empty(&self) -> bool {
        // Acquire as in `pop`.
        let position = self.head.load(Ordering::Acquire);
        let cell = &self.cells[position & self.mask];
        // Acquire pairs with the publishing Release in `push`.
        cell.sequence.load(Ordering::Acquire) != position.wrapping_add(1)
    }

    /// How many positions are claimed and not yet released, as seen by a
    /// caller with `&mut self` (so nothing is in flight).
    fn len_exclusive(&mut self) -> usize {
        // Relaxed: `&mut self` proves that no other thread is using the ring,
        // and whatever gave us `&mut` ordered their operations before us.
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        tail.wrapping_sub(head)
    }
}

impl<T> Drop for MpmcRing<T> {
    fn drop(&mut self) {
        debug_assert!(self.len_exclusive() <= self.capacity());
        // With `&mut self` no push or pop is in flight, so every position in
        // `head..tail` is published and `pop` returns each of them once.
        while let Some(value) = self.pop() {
            drop(value);
        }
        debug_assert_eq!(self.len_exclusive(), 0, "an unpublished cell survived to drop");
    }
}

impl<T> fmt::Debug for MpmcRing<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MpmcRing")
            .field("capacity", &self.capacity())
            // Relaxed: a diagnostic snapshot, not used for decisions.
            .field("head", &self.head.load(Ordering::Relaxed))
            .field("tail", &self.tail.load(Ordering::Relaxed))
            .finish()
    }
}

impl<T: Send> Ring<T> for MpmcRing<T> {
    fn with_capacity(capacity: usize) -> Self {
        MpmcRing::new(capacity)
    }
    fn try_with_capacity(capacity: usize) -> Result<Self, AllocError> {
        MpmcRing::try_new(capacity)
    }
    fn capacity(&self) -> usize {
        MpmcRing::capacity(self)
    }
    fn push(&self, value: T) -> Result<(), T> {
        MpmcRing::push(self, value)
    }
    fn pop(&self) -> Option<T> {
        MpmcRing::pop(self)
    }
    fn is_empty(&self) -> bool {
        MpmcRing::is_empty(self)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::contract;
    use super::*;

    #[test]
    fn capacity_rounds_up_to_power_of_two() {
        assert_eq!(MpmcRing::<u8>::new(0).capacity(), 2);
        assert_eq!(MpmcRing::<u8>::new(1).capacity(), 2);
        assert_eq!(MpmcRing::<u8>::new(2).capacity(), 2);
        assert_eq!(MpmcRing::<u8>::new(5).capacity(), 8);
        assert_eq!(MpmcRing::<u8>::new(16384).capacity(), 16384);
    }

    #[test]
    fn fifo() {
        let ring = MpmcRing::new(8);
        let out = contract::full_returns_value(&ring);
        assert_eq!(out, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn full_returns_value() {
        let ring = MpmcRing::new(3);
        contract::full_returns_value(&ring);
        contract::full_returns_value(&ring);
    }

    #[test]
    fn empty_returns_none() {
        contract::empty_returns_none(&MpmcRing::new(2));
    }

    #[test]
    fn wraparound() {
        contract::wraparound(&MpmcRing::new(2), true);
        contract::wraparound(&MpmcRing::new(8), true);
    }

    #[test]
    fn wraparound_across_usize_max() {
        let mut ring = MpmcRing::new(4);
        let start = usize::MAX - 5;
        *ring.head = AtomicUsize::new(start);
        *ring.tail = AtomicUsize::new(start);
        for (index, cell) in ring.cells.iter_mut().enumerate() {
            // The position in `start..start + 4` that maps to this cell.
            let offset = index.wrapping_sub(start) & 3;
            cell.sequence = AtomicUsize::new(start.wrapping_add(offset));
        }
        contract::wraparound(&ring, true);
    }

    #[test]
    fn drop_drops_remaining_once() {
        let drops = AtomicUsize::new(0);
        contract::drop_drains(MpmcRing::new(4), &drops);
    }

    #[test]
    fn stress_mpmc() {
        contract::stress(&MpmcRing::new(64), true);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::super::loom_contract::{pop_count, push_pop_race, push_until_accepted};
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Two producers and one consumer race through a two-cell ring.
    #[test]
    fn mpmc_push_pop_race() {
        push_pop_race::<MpmcRing<usize>>(2);
    }

    /// One producer pushes three values through a two-cell ring while the
    /// consumer drains it: cell 0 is reused while the consumer may still be
    /// releasing it. FIFO holds.
    #[test]
    fn mpmc_wraparound_race() {
        loom::model(|| {
            let ring = Arc::new(MpmcRing::new(2));
            let producer = {
                let ring = ring.clone();
                thread::spawn(move || {
                    for value in 0..3 {
                        push_until_accepted(&*ring, value);
                    }
                })
            };
            assert_eq!(pop_count(&*ring, 3), [0, 1, 2]);
            producer.join().expect("producer panicked");
            assert_eq!(ring.pop(), None);
        });
    }

    /// Two consumers race for the values of one producer: each value goes
    /// to exactly one of them.
    #[test]
    fn mpmc_two_consumers_race() {
        loom::model(|| {
            let ring = Arc::new(MpmcRing::new(2));
            ring.push(1).expect("empty ring");
            let other = {
                let ring = ring.clone();
                thread::spawn(move || ring.pop())
            };
            ring.push(2).expect("room for two");
            let mine = ring.pop();
            let theirs = other.join().expect("consumer panicked");
            let mut got: Vec<usize> = [mine, theirs, ring.pop()].into_iter().flatten().collect();
            got.sort_unstable();
            assert_eq!(got, [1, 2]);
        });
    }

    /// The wake-ring bound: with one consumer, a push never fails while at
    /// most `capacity` distinct values circulate, even when the consumer
    /// re-pushes what it pops (a woken process parking and being woken
    /// again) while another producer pushes.
    #[test]
    fn mpmc_requeue_never_overflows() {
        loom::model(|| {
            let ring = Arc::new(MpmcRing::new(2));
            ring.push(1).expect("empty ring");
            let producer = {
                let ring = ring.clone();
                thread::spawn(move || ring.push(2).expect("two values fit in two cells"))
            };
            if let Some(value) = ring.pop() {
                ring.push(value).expect("two values fit in two cells");
            }
            producer.join().expect("producer panicked");
            let mut got = pop_count(&*ring, 2);
            got.sort_unstable();
            assert_eq!(got, [1, 2]);
        });
    }
}
