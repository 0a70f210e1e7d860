//! Segmented storage: a table of values addressed by a `u32` index that
//! grows by appending, never moves what it holds, and is looked up
//! without a lock. The slab keeps its slots here; the wake queues thread
//! their links through it.
//!
//! A fixed table of segment pointers, where segment 0 and segment 1 hold
//! [`FIRST_SEGMENT`] values and each later one twice as many as the one
//! before. A segment is allocated when the first value that falls in it is
//! appended, and nothing is moved or freed while the table lives — so a
//! `&T` stays valid, and looking up an index is two loads and a little
//! arithmetic. Memory follows the most values ever held (rounded up to a
//! segment boundary for the address space, to a page for what is
//! resident), not a configured size.

use crate::kernel::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

/// Slots in segment 0 (and in segment 1; segment `k ≥ 1` holds
/// `FIRST_SEGMENT << (k - 1)`). 1,024 slots: small enough that a runtime
/// with a handful of processes costs a few hundred KiB of address space
/// and a few pages of memory, large enough that the doubling reaches a
/// million slots in 11 segments. Two under loom, so that a model crosses
/// segment boundaries after a few pushes.
#[cfg(not(loom))]
pub(crate) const FIRST_SEGMENT: usize = 1024;
#[cfg(loom)]
pub(crate) const FIRST_SEGMENT: usize = 2;
const FIRST_BITS: u32 = FIRST_SEGMENT.trailing_zeros();
const _: () = assert!(FIRST_SEGMENT.is_power_of_two());

/// Bits of the index space the segment table covers: a pid's index is a
/// `u32`. Under loom, four (sixteen entries), so the table stays small.
#[cfg(not(loom))]
const INDEX_BITS: u32 = 32;
#[cfg(loom)]
const INDEX_BITS: u32 = 4;

/// Segments in the table: enough for every index below `2^INDEX_BITS`
/// (23 for 32 bits: 1,024 + 1,024 + 2,048 + … + 2^31).
pub(crate) const SEGMENT_COUNT: usize = (INDEX_BITS - FIRST_BITS + 1) as usize;

/// The most values a [`Segments`] can hold: every index below
/// `2^INDEX_BITS` except the last, `u32::MAX`, which the queues use as
/// their end-of-list marker.
pub(crate) const SEGMENTS_MAX_LEN: usize = ((1u64 << INDEX_BITS) - 1) as usize;

/// Which segment holds `index`, and where in it.
#[inline]
const fn locate(index: usize) -> (usize, usize) {
    let high = index >> FIRST_BITS;
    if high == 0 {
        (0, index)
    } else {
        let segment = (usize::BITS - high.leading_zeros()) as usize;
        (segment, index - (FIRST_SEGMENT << (segment - 1)))
    }
}

/// Values in segment `segment`.
#[inline]
const fn segment_len(segment: usize) -> usize {
    if segment == 0 {
        FIRST_SEGMENT
    } else {
        FIRST_SEGMENT << (segment - 1)
    }
}

/// Why [`Segments::push`] refused a value (the value is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GrowError {
    /// Every index is taken ([`SEGMENTS_MAX_LEN`]).
    Full,
    /// A new segment could not be allocated.
    OutOfMemory,
}

/// An append-only array in segments of doubling size: a value never moves
/// once it is in, and [`get`](Segments::get) is lock-free and O(1). See the
/// [module docs](self).
///
/// # Publication
///
/// One pusher at a time (the caller serialises them) writes the value into
/// its segment — allocating the segment first, publishing its pointer with
/// a Release store — and then publishes the value by storing the new length
/// with Release. A reader loads the length with Acquire: an index below it
/// names a value whose write (and whose segment pointer's store) happened
/// before, so the segment pointer can be loaded Relaxed. Loom's
/// `slab_growth_races_lookup` fails with the length stored Relaxed.
pub(crate) struct Segments<T> {
    /// Segment `k`'s first value, or null until it is allocated.
    segments: [AtomicPtr<T>; SEGMENT_COUNT],
    /// Values written and published: indices `0..len` are initialised.
    len: AtomicUsize,
}

// SAFETY: the table hands out `&T` to any thread (so `T: Sync`) and drops
// the values on whichever thread drops it (so `T: Send`); the pointers
// themselves are only published and read through atomics.
unsafe impl<T: Send + Sync> Sync for Segments<T> {}
// SAFETY: as above: moving the table moves ownership of its values.
unsafe impl<T: Send> Send for Segments<T> {}

impl<T> Segments<T> {
    /// An empty table: no segment is allocated.
    pub(crate) fn new() -> Self {
        Segments {
            segments: core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
            len: AtomicUsize::new(0),
        }
    }

    /// Values pushed so far.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Segments allocated so far (they are kept until the table is dropped).
    pub(crate) fn segments_allocated(&self) -> usize {
        self.segments.iter().take_while(|s| !s.load(Ordering::Relaxed).is_null()).count()
    }

    /// Values the allocated segments have room for.
    pub(crate) fn allocated_len(&self) -> usize {
        (0..self.segments_allocated()).map(segment_len).sum()
    }

    /// The value at `index`, if one was pushed there. Lock-free.
    #[inline]
    pub(crate) fn get(&self, index: u32) -> Option<&T> {
        let index = index as usize;
        // Acquire pairs with the Release in `push`: the value's write and
        // its segment's pointer happened before.
        if index >= self.len.load(Ordering::Acquire) {
            return None;
        }
        let (segment, offset) = locate(index);
        let base = self.segments[segment].load(Ordering::Relaxed);
        debug_assert!(!base.is_null(), "index {index} below len in a missing segment");
        // SAFETY: `index < len`, so segment `segment` was allocated with
        // `segment_len(segment) > offset` values and the value at `offset`
        // was written before `len` was published (Acquire above); values
        // never move and are dropped only with `self`, which outlives the
        // returned reference; only shared references are ever made to it.
        Some(unsafe { &*base.add(offset) })
    }

    /// Appends `value` and returns its index, allocating its segment if it
    /// is the segment's first.
    ///
    /// # Errors
    ///
    /// [`GrowError::Full`] when [`SEGMENTS_MAX_LEN`] values are in;
    /// [`GrowError::OutOfMemory`] when the segment cannot be allocated.
    ///
    /// # Safety
    ///
    /// No other `push` on the same table runs concurrently (callers hold a
    /// lock across it).
    pub(crate) unsafe fn push(&self, value: T) -> Result<u32, GrowError> {
        // Relaxed: only pushers store `len`, and the caller serialises them.
        let index = self.len.load(Ordering::Relaxed);
        if index >= SEGMENTS_MAX_LEN {
            return Err(GrowError::Full);
        }
        let (segment, offset) = locate(index);
        let mut base = self.segments[segment].load(Ordering::Relaxed);
        if base.is_null() {
            debug_assert_eq!(offset, 0);
            base = allocate::<T>(segment_len(segment)).ok_or(GrowError::OutOfMemory)?;
            // Release: a reader that sees the pointer through any path sees
            // the allocation; readers normally reach it through `len`.
            self.segments[segment].store(base, Ordering::Release);
        }
        // SAFETY: `offset < segment_len(segment)` (from `locate`), the
        // segment is allocated for that many `T`s, and no reader touches the
        // value until `len` below publishes it; no other pusher runs (this
        // fn's contract).
        unsafe { base.add(offset).write(value) };
        self.len.store(index + 1, Ordering::Release);
        Ok(index as u32)
    }

    /// Calls `f` on every value, with exclusive access.
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(&mut T)) {
        let len = self.len.load(Ordering::Relaxed);
        for index in 0..len {
            let (segment, offset) = locate(index);
            let base = self.segments[segment].load(Ordering::Relaxed);
            // SAFETY: `index < len`: the value is initialised; `&mut self`
            // excludes every other access.
            f(unsafe { &mut *base.add(offset) });
        }
    }
}

/// Uninitialised room for `count` values of `T`, or `None`. Untouched
/// pages of a large segment cost address space only.
fn allocate<T>(count: usize) -> Option<*mut T> {
    let layout = core::alloc::Layout::array::<T>(count).ok()?;
    if layout.size() == 0 {
        return Some(core::ptr::NonNull::<T>::dangling().as_ptr());
    }
    // SAFETY: the layout has a non-zero size (checked above).
    let base = unsafe { alloc::alloc::alloc(layout) };
    (!base.is_null()).then_some(base.cast::<T>())
}

impl<T> Drop for Segments<T> {
    fn drop(&mut self) {
        self.for_each_mut(|value| {
            // SAFETY: each initialised value is dropped exactly once, here,
            // and never touched again.
            unsafe { core::ptr::drop_in_place(value) }
        });
        for (segment, pointer) in self.segments.iter().enumerate() {
            let base = pointer.load(Ordering::Relaxed);
            if base.is_null() || core::mem::size_of::<T>() == 0 {
                continue;
            }
            let layout = core::alloc::Layout::array::<T>(segment_len(segment))
                .expect("the layout was valid when the segment was allocated");
            // SAFETY: `base` came from `allocate` with this very layout and
            // is freed once; its values were dropped above.
            unsafe { alloc::alloc::dealloc(base.cast(), layout) };
        }
    }
}

impl<T: crate::kernel::ring::Linked> crate::kernel::ring::Links for Segments<T> {
    #[inline]
    fn link(&self, index: u32) -> &AtomicU32 {
        match self.get(index) {
            Some(value) => value.link(),
            None => panic!("smarm: queue link {index} is not in the slab (a runtime bug)"),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::sync::Arc;
    use alloc::vec::Vec;

    /// Counts its drops in the shared counter.
    struct Guard(Arc<AtomicUsize>);

    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Segment sizes double after the first two, and every index maps to
    /// the segment and offset that a walk through the segments gives.
    #[test]
    fn locate_walks_the_segments_in_order() {
        let mut index = 0usize;
        for segment in 0..SEGMENT_COUNT.min(12) {
            let expected = if segment == 0 { FIRST_SEGMENT } else { FIRST_SEGMENT << (segment - 1) };
            assert_eq!(segment_len(segment), expected);
            for offset in [0, 1, expected / 2, expected - 1] {
                assert_eq!(locate(index + offset), (segment, offset), "index {}", index + offset);
            }
            index += expected;
        }
        // The last index of the space is in the last segment, at its end.
        let last = SEGMENTS_MAX_LEN;
        assert_eq!(locate(last), (SEGMENT_COUNT - 1, segment_len(SEGMENT_COUNT - 1) - 1));
        let total: usize = (0..SEGMENT_COUNT).map(segment_len).sum();
        assert_eq!(total, SEGMENTS_MAX_LEN + 1, "the table covers the u32 index space");
    }

    /// Growth across several segments: every value stays where it was
    /// pushed (its address does not move), a lookup past the end is `None`,
    /// and dropping the table drops every value once.
    #[test]
    fn segments_grow_without_moving_and_drop_once() {
        let count = if cfg!(miri) { 3 * FIRST_SEGMENT + 5 } else { 20 * FIRST_SEGMENT + 5 };
        let drops = Arc::new(AtomicUsize::new(0));
        let table: Segments<(usize, Guard)> = Segments::new();
        assert_eq!(table.segments_allocated(), 0);
        assert!(table.get(0).is_none());
        let mut addresses = Vec::new();
        for value in 0..count {
            // SAFETY: one pusher (this test).
            let index = unsafe { table.push((value, Guard(drops.clone()))) };
            assert_eq!(index, Ok(value as u32));
            addresses.push(core::ptr::from_ref(table.get(value as u32).expect("just pushed")) as usize);
            assert!(table.get(value as u32 + 1).is_none());
        }
        assert_eq!(table.len(), count);
        for (value, &address) in addresses.iter().enumerate() {
            let entry = table.get(value as u32).expect("pushed");
            assert_eq!(entry.0, value);
            assert_eq!(core::ptr::from_ref(entry) as usize, address, "value {value} moved");
        }
        // Room for at least `count`, at most twice that (plus the first).
        let room = table.allocated_len();
        assert!(room >= count && room <= 2 * count + FIRST_SEGMENT, "{room} for {count}");
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        drop(table);
        assert_eq!(drops.load(Ordering::Relaxed), count);
    }
}

#[cfg(all(test, loom))]
mod loom_models;
