//! The slab: one slot per process, addressed by `Pid = (index, generation)`.
//!
//! A slot holds the process's state word, its owning worker, its stop
//! flag, its queue link, the body only its worker touches (context, stack,
//! entry, locals) and the cold state under a leaf lock (exit reason,
//! joiners, handle and finalize flags, death hooks).
//!
//! Invariant: a slot is (re)initialised by exactly one function,
//! `Slot::reset`, which every path that recycles a slot calls; a new field
//! added to `SlotBody` or `Cold` is reset by construction.
//!
//! # Segments
//!
//! The slots live in [`Segments`]: a fixed table of segment pointers, where
//! segment 0 and segment 1 hold [`FIRST_SEGMENT`] slots and each later one
//! twice as many as the one before. The slab grows by appending a slot; a
//! segment is allocated when the first slot that falls in it is appended,
//! and nothing is ever moved or freed while the slab lives — so a `&Slot`
//! stays valid, and looking up an index is two loads and a little
//! arithmetic, without a lock. The slab's memory follows the most slots
//! ever in use at once (rounded up to a segment boundary for the address
//! space, to a page for what is resident), not a configured size.
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::any::Any;
use core::cell::UnsafeCell;

use smarm_arch::Context;
use smarm_platform::Stack;

use crate::kernel::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, AtomicUsize, Ordering};
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::state::StateWord;

/// A boxed process body.
pub(crate) type Entry = Box<dyn FnOnce() + Send + 'static>;

/// The slot's stop flag values.
pub(crate) const STOP_NONE: u8 = 0;
/// A stop was requested and not yet observed.
pub(crate) const STOP_REQUESTED: u8 = 1;
/// The stop was observed and is unwinding: observation points stay quiet.
pub(crate) const STOP_RAISED: u8 = 2;

/// What only the owning worker (and the process itself, which runs on it)
/// touches: no lock, no atomics.
pub(crate) struct SlotBody {
    pub(crate) context: Context,
    pub(crate) stack: Option<Stack>,
    pub(crate) entry: Option<Entry>,
    /// Actor-local values (`ActorLocal`), keyed by the address of their
    /// static key; dropped with the slot.
    pub(crate) locals: Vec<(usize, Box<dyn core::any::Any + Send>)>,
    /// Lowest saved stack pointer seen at a switch out (`usize::MAX` before
    /// the first): a cheap high-water mark of stack use.
    pub(crate) low_water: usize,
    /// The body's return value, stashed as its last act, until the exit
    /// moves it to `Cold::value`.
    pub(crate) value: Option<Box<dyn Any + Send>>,
    /// The stackless body's state, owned by the plugin of the slot's
    /// worker; installed by that worker after the spawn.
    pub(crate) cell: Option<Box<dyn Any + Send>>,
}

impl Default for SlotBody {
    fn default() -> Self {
        SlotBody {
            context: Context::empty(),
            stack: None,
            entry: None,
            locals: Vec::new(),
            low_water: usize::MAX,
            value: None,
            cell: None,
        }
    }
}

/// Cold per-slot state, under the slot's leaf lock.
#[derive(Default)]
pub(crate) struct Cold {
    /// How the process ended; set, with the state word's `finish`, when it
    /// switches out for the last time. From then on no death hook can be
    /// added.
    pub(crate) exit: Option<ExitReason>,
    /// The body's return value, for the `JoinHandle` (normal exits only).
    pub(crate) value: Option<Box<dyn Any + Send>>,
    /// `(pid, epoch)` of processes parked in `join` on this one.
    pub(crate) joiners: Vec<(Pid, u32)>,
    /// A `JoinHandle` is outstanding: the slot may not be reclaimed.
    pub(crate) handle: bool,
    /// The worker has finalized the process.
    pub(crate) finalized: bool,
    /// Finalize has run the death hooks: from here on `join` may return.
    /// The exit reason alone is not enough — it is set before the process
    /// switches out for the last time, and on another thread a joiner could
    /// see it before finalize has run.
    pub(crate) notified: bool,
    /// Run once at finalize, after the stack is recycled and before joiners
    /// are woken; removable by id until then.
    pub(crate) death_hooks: Vec<(DeathHookId, DeathHook)>,
    /// The reason a pending stop was requested with: what the process's
    /// death reports if it ends stopped (a link's `Linked`, an exit
    /// signal's reason). `None`: plain `Stopped`.
    pub(crate) stop_reason: Option<ExitReason>,
}

/// A notification run once when a process dies: the runtime, the dead
/// process's pid, and why it died. Runs on the dead process's worker, with
/// no runtime lock held; it may take locks, send, and stop other processes,
/// but never parks.
pub(crate) type DeathHook = Box<dyn FnOnce(&crate::kernel::runtime::Shared, Pid, &ExitReason) + Send>;

/// Names one registered death hook, for removing it before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct DeathHookId(pub(crate) u64);

/// One process slot.
pub(crate) struct Slot {
    pub(crate) state: StateWord,
    /// Index of the owning worker; written before the spawn's `claim`
    /// (whose Release publishes it) and constant while the slot is live.
    pub(crate) worker: AtomicUsize,
    pub(crate) stop: AtomicU8,
    /// The slot holds a stackless body (a handler actor): no stack, no
    /// context; its worker's plugin runs it (`kernel::plugin`). Written
    /// before the spawn's claim, like `worker`, and constant while live.
    pub(crate) stackless: AtomicBool,
    /// The next entry while the slot sits in the intrusive list of a
    /// worker's wake or spawn queue ([`WakeQueue`](crate::kernel::ring::WakeQueue)):
    /// a process is in at most one queue at a time, so one link is enough.
    pub(crate) link: AtomicU32,
    pub(crate) body: UnsafeCell<SlotBody>,
    pub(crate) cold: RuntimeMutex<Cold>,
}

// SAFETY: `body` is touched only by the owning worker's driver (and the
// process it runs, on the same driver), or by a spawner that holds the slot
// exclusively (popped from the free list, state Vacant) before the `claim`
// that publishes it; everything else is atomic or behind `cold`'s lock.
unsafe impl Sync for Slot {}
// SAFETY: as above; a slot moves between threads only inside the slab.
unsafe impl Send for Slot {}

impl Slot {
    pub(crate) fn new() -> Slot {
        Slot {
            // Generations start at 1 so that no pid's overflow tag
            // (`(generation << 32) | index`) is 0, the platform's "unknown".
            state: StateWord::new(1),
            worker: AtomicUsize::new(0),
            stop: AtomicU8::new(STOP_NONE),
            stackless: AtomicBool::new(false),
            link: AtomicU32::new(crate::kernel::ring::NIL),
            body: UnsafeCell::new(SlotBody::default()),
            cold: RuntimeMutex::leaf(Cold::default()),
        }
    }

    /// Returns the slot to its vacant contents — the one place that does.
    ///
    /// # Safety
    ///
    /// The caller owns the slot's body: the process is `Done` and finalized
    /// (or the slot was never used) and no driver will touch `body` again
    /// until the next spawn claims the slot.
    pub(crate) unsafe fn reset(&self, cold: &mut Cold) {
        // SAFETY: exclusive ownership of `body` per this fn's contract.
        unsafe { *self.body.get() = SlotBody::default() };
        *cold = Cold::default();
        self.stop.store(STOP_NONE, Ordering::Relaxed);
        self.stackless.store(false, Ordering::Relaxed);
        self.worker.store(0, Ordering::Relaxed);
        // A reclaimed slot is in no queue: the link is dead until the next
        // push writes it; reset anyway so a stale link is never read.
        self.link.store(crate::kernel::ring::NIL, Ordering::Relaxed);
    }

    pub(crate) fn generation(&self) -> u32 {
        self.state.snapshot().generation()
    }
}

impl crate::kernel::ring::Linked for Slot {
    #[inline]
    fn link(&self) -> &AtomicU32 {
        &self.link
    }
}

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

/// The slot's own bookkeeping, without a runtime: what a fresh slot holds,
/// that `reset` drops everything a finished process left behind exactly
/// once, and that a recycled slot's generation moves on.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::kernel::state::State;
    use alloc::sync::Arc;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Counts its drops in the shared counter.
    struct Guard(Arc<AtomicUsize>);

    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Everything a finished process can leave in its slot, each owning a
    /// guard of `drops`: seven guards in all (the entry, two locals, the
    /// stashed and the exit value, two death hooks).
    fn fill(slot: &Slot, drops: &Arc<AtomicUsize>) {
        let guard = || Guard(drops.clone());
        // SAFETY: the test owns the slot; no process runs on it.
        let body = unsafe { &mut *slot.body.get() };
        let entry_guard = guard();
        body.entry = Some(Box::new(move || drop(entry_guard)));
        body.locals.push((1, Box::new(guard())));
        body.locals.push((2, Box::new(guard())));
        body.value = Some(Box::new(guard()));
        body.low_water = 4096;
        let mut cold = slot.cold.lock();
        cold.exit = Some(ExitReason::Normal);
        cold.value = Some(Box::new(guard()));
        cold.joiners = vec![(Pid::from_parts(3, 1), 5)];
        cold.handle = true;
        cold.finalized = true;
        cold.notified = true;
        for id in [9, 10] {
            let hook_guard = guard();
            cold.death_hooks.push((DeathHookId(id), Box::new(move |_, _, _| drop(hook_guard))));
        }
        cold.stop_reason = Some(ExitReason::Stopped);
        drop(cold);
        slot.stop.store(STOP_RAISED, Ordering::Relaxed);
        slot.worker.store(3, Ordering::Relaxed);
    }

    /// Whether the slot holds nothing but a vacant slot's contents.
    fn assert_vacant_contents(slot: &Slot) {
        // SAFETY: the test owns the slot; no process runs on it.
        let body = unsafe { &*slot.body.get() };
        assert!(body.stack.is_none() && body.entry.is_none() && body.value.is_none());
        assert!(body.locals.is_empty());
        assert_eq!(body.low_water, usize::MAX);
        let cold = slot.cold.lock();
        assert!(cold.exit.is_none() && cold.value.is_none() && cold.stop_reason.is_none());
        assert!(cold.joiners.is_empty() && cold.death_hooks.is_empty());
        assert!(!cold.handle && !cold.finalized && !cold.notified);
        drop(cold);
        assert_eq!(slot.stop.load(Ordering::Relaxed), STOP_NONE);
        assert_eq!(slot.worker.load(Ordering::Relaxed), 0);
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

    /// A reset slot holds no heap memory: the vectors of the cold state and
    /// the body are dropped, not just cleared (a reclaimed slot keeps no
    /// allocation of its last process).
    #[test]
    fn reset_frees_the_slots_heap() {
        let drops = Arc::new(AtomicUsize::new(0));
        let slot = Slot::new();
        fill(&slot, &drops);
        {
            let mut cold = slot.cold.lock();
            cold.joiners.reserve(64);
            cold.death_hooks.reserve(64);
            // SAFETY: the test owns the slot; no process runs on it.
            unsafe { (*slot.body.get()).locals.reserve(64) };
            // SAFETY: as above.
            unsafe { slot.reset(&mut cold) };
            assert_eq!(cold.joiners.capacity(), 0);
            assert_eq!(cold.death_hooks.capacity(), 0);
        }
        // SAFETY: as above.
        assert_eq!(unsafe { (*slot.body.get()).locals.capacity() }, 0);
    }

    #[test]
    fn a_new_slot_is_vacant_at_generation_one() {
        let slot = Slot::new();
        assert_eq!(slot.generation(), 1);
        assert_eq!(slot.state.snapshot().state(), State::Vacant);
        assert_vacant_contents(&slot);
    }

    #[test]
    fn reset_drops_what_a_process_left_exactly_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let slot = Slot::new();
        fill(&slot, &drops);
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        let mut cold = slot.cold.lock();
        // SAFETY: the test owns the slot; no process runs on it.
        unsafe { slot.reset(&mut cold) };
        drop(cold);
        assert_eq!(drops.load(Ordering::Relaxed), 7, "every guard dropped by reset");
        assert_vacant_contents(&slot);
        drop(slot);
        assert_eq!(drops.load(Ordering::Relaxed), 7, "nothing dropped twice");
    }

    #[test]
    fn a_dropped_slot_drops_what_it_holds_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let slot = Slot::new();
        fill(&slot, &drops);
        drop(slot);
        assert_eq!(drops.load(Ordering::Relaxed), 7);
    }

    /// A slot's whole cycle, as spawn, run, exit, finalize and reclaim
    /// drive it, many times over: the generation moves on by one per use,
    /// and a pid of an earlier use is refused by every transition.
    #[test]
    fn recycling_moves_the_generation_on() {
        let rounds: u32 = if cfg!(miri) { 20 } else { 1_000 };
        let drops = Arc::new(AtomicUsize::new(0));
        let slot = Slot::new();
        for round in 0..rounds {
            let generation = slot.generation();
            assert_eq!(generation, 1 + round);
            assert!(slot.state.claim(generation).is_ok());
            fill(&slot, &drops);
            assert!(slot.state.begin_run(generation).is_ok());
            slot.state.finish(generation);
            let mut cold = slot.cold.lock();
            // SAFETY: the "process" is Done; the test owns the slot.
            unsafe { slot.reset(&mut cold) };
            assert!(slot.state.reclaim(generation).is_ok());
            drop(cold);
            assert_vacant_contents(&slot);
            let stale = generation;
            assert!(slot.state.claim(stale).is_err(), "a stale pid cannot claim");
            assert!(slot.state.reclaim(stale).is_err(), "a stale pid cannot reclaim");
            assert!(!slot.state.snapshot().is_alive(stale));
        }
        assert_eq!(slot.generation(), 1 + rounds);
        assert_eq!(drops.load(Ordering::Relaxed), 7 * rounds as usize);
    }
}

#[cfg(all(test, loom))]
mod loom_models;
