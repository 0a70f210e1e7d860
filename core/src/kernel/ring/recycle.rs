//! Recycled envelope blocks: a per-worker cache of freed nodes in a few
//! size classes, and each worker's *home*, where nodes it made come back
//! to when another thread is done with them.
//!
//! A block is raw memory of one size class, aligned to [`BLOCK_ALIGN`],
//! that starts with a [`Link`]. A worker's [`BlockCache`] hands blocks out
//! and takes them back without the allocator:
//!
//! - **local frees** (a node made and consumed on the same worker) go
//!   straight onto the cache's free list of their class;
//! - **remote frees** (a node made on worker A, consumed on worker B) are
//!   pushed onto A's [`Home`]: one intrusive MPSC list per class (the
//!   envelope queue's own [`Mpsc`]: one `swap` and one store, no lock).
//!   A takes them back into its cache when its free list of that class
//!   runs dry, or when it [`trim`](BlockCache::trim)s, so a block is
//!   always returned to the heap of the thread that allocated it and the
//!   allocator's own cross-thread free path is never taken in steady
//!   state.
//!
//! Both are bounded: a free list holds at most [`CACHE_CAP`] blocks of a
//! class (a local free past that goes back to the allocator), a refill
//! takes at most [`CACHE_CAP`] from the home, and a trim gives the
//! allocator whatever the home holds beyond that. A home holds only
//! blocks its own cache made, so it never holds more than that worker's
//! peak of nodes in flight. The cache frees its lists when dropped, the
//! home its lists when dropped.
//!
//! Every block is an ordinary allocation of its class's layout, so any
//! thread may also give one straight back to the allocator: recycling is
//! never required for memory safety, only for speed. That is what a node
//! dropped undelivered does (it may be dropped with its runtime, after its
//! home is gone).
//!
//! A cache holds its whole *family* of homes (the runtime's, one per
//! worker) in an `Arc`, so a block it releases goes to a home only if
//! that home is one of its family ([`BlockCache::family_home`]), which it
//! keeps alive: no caller has to vouch for a home's life.

use alloc::alloc::{alloc, dealloc, handle_alloc_error};
use alloc::sync::Arc;
use core::alloc::Layout;
use core::cell::Cell;
use core::ptr::{self, NonNull};

use crate::kernel::atomic::{AtomicBool, Ordering};
use crate::kernel::ring::mpsc::{Link, Mpsc};

/// The number of size classes.
pub(crate) const CLASSES: usize = 4;
/// Each class's block size in bytes; a node larger than the last is
/// allocated alone.
const CLASS_SIZE: [usize; CLASSES] = [64, 128, 192, 256];
/// Every block's alignment; a node aligned more strictly is allocated
/// alone.
pub(crate) const BLOCK_ALIGN: usize = 16;
/// The most blocks of one class a cache keeps (and takes from its home
/// at once).
pub(crate) const CACHE_CAP: usize = 256;

/// The size class of a node of `layout`, if it has one.
pub(crate) const fn class_of(layout: Layout) -> Option<u8> {
    if layout.align() > BLOCK_ALIGN {
        return None;
    }
    let mut class = 0;
    while class < CLASSES {
        if layout.size() <= CLASS_SIZE[class] {
            return Some(class as u8);
        }
        class += 1;
    }
    None
}

/// The layout of every block of `class`.
pub(crate) fn block_layout(class: u8) -> Layout {
    match Layout::from_size_align(CLASS_SIZE[usize::from(class)], BLOCK_ALIGN) {
        Ok(layout) => layout,
        Err(_) => unreachable!("the class sizes are valid layouts"),
    }
}

/// Allocates one block of `class`.
pub(crate) fn allocate_block(class: u8) -> NonNull<u8> {
    let layout = block_layout(class);
    // SAFETY: a class layout has a non-zero size.
    let block = unsafe { alloc(layout) };
    match NonNull::new(block) {
        Some(block) => block,
        None => handle_alloc_error(layout),
    }
}

/// Gives one block of `class` back to the allocator.
///
/// # Safety
///
/// `block` came from [`allocate_block`] with the same `class`, holds
/// nothing that needs dropping, and is not used again.
pub(crate) unsafe fn free_block(block: NonNull<u8>, class: u8) {
    // SAFETY: per the contract: allocated with this layout.
    unsafe { dealloc(block.as_ptr(), block_layout(class)) };
}

/// Where a worker's blocks come back to from other threads: one intrusive
/// MPSC list per class. Any thread pushes; the worker's cache alone takes.
pub(crate) struct Home {
    returned: [Mpsc; CLASSES],
    /// A cache has claimed the right to take from the lists.
    claimed: AtomicBool,
}

impl Home {
    pub(crate) fn new() -> Home {
        Home { returned: core::array::from_fn(|_| Mpsc::new()), claimed: AtomicBool::new(false) }
    }

    /// Returns `block` of `class` to this home, from any thread.
    ///
    /// # Safety
    ///
    /// `block` came from [`allocate_block`] with `class`, starts with a live [`Link`], holds nothing else that
    /// needs dropping, and is in no list; the caller gives it up.
    pub(crate) unsafe fn give_back(&self, block: NonNull<Link>, class: u8) {
        // SAFETY: per the contract; the list owns the block from here on.
        unsafe { self.returned[usize::from(class)].push(block) };
    }

    /// Takes one returned block of `class`.
    ///
    /// # Safety
    ///
    /// The caller is this home's one taker (its worker's cache, or its
    /// owner once no thread can give back).
    unsafe fn take(&self, class: u8) -> Option<NonNull<Link>> {
        // SAFETY: one consumer, per the contract.
        unsafe { self.returned[usize::from(class)].pop() }
    }

    /// Whether no block of `class` is waiting (or a return is half done).
    ///
    /// # Safety
    ///
    /// As [`take`](Self::take).
    unsafe fn is_empty(&self, class: u8) -> bool {
        // SAFETY: one consumer, per the contract.
        unsafe { self.returned[usize::from(class)].is_empty() }
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        for class in 0..CLASSES as u8 {
            // SAFETY: `&mut self`: no thread gives back any more, and we
            // are the one taker; every block came from `allocate_block`
            // with this class and holds nothing to drop.
            while let Some(block) = unsafe { self.take(class) } {
                // SAFETY: as above.
                unsafe { free_block(block.cast(), class) };
            }
        }
    }
}

/// One worker's cache of free blocks, by class. Only its worker uses it
/// (it is not `Sync`); other threads reach its [`Home`]. It holds its
/// family of homes (one per worker of a runtime) alive, so a block it
/// releases can go to any of them.
pub(crate) struct BlockCache {
    homes: Arc<[Home]>,
    /// This cache's home in `homes`.
    index: usize,
    /// Whether this cache is the home's one taker (the first cache made
    /// for it). Another one still sends its blocks there, and never
    /// takes.
    takes: bool,
    /// Each class's free list, threaded through the blocks' first word.
    free: [Cell<*mut u8>; CLASSES],
    len: [Cell<usize>; CLASSES],
}

impl BlockCache {
    /// A cache whose blocks come back to `homes[index]`. The first cache
    /// made for a home takes from it; any later one only gives back to it.
    ///
    /// # Panics
    ///
    /// If `index` is not a home of `homes` (a caller's bug).
    pub(crate) fn new(homes: Arc<[Home]>, index: usize) -> BlockCache {
        let claimed = homes[index].claimed.swap(true, Ordering::AcqRel);
        BlockCache {
            homes,
            index,
            takes: !claimed,
            free: core::array::from_fn(|_| Cell::new(ptr::null_mut())),
            len: core::array::from_fn(|_| Cell::new(0)),
        }
    }

    /// The home the cache's blocks come back to.
    pub(crate) fn home(&self) -> &Home {
        &self.homes[self.index]
    }

    /// The home of this cache's family at `home`, if it is one: alive as
    /// long as the cache is. A pointer to any other home (another
    /// runtime's, perhaps gone) is `None`.
    pub(crate) fn family_home(&self, home: *const Home) -> Option<&Home> {
        let size = core::mem::size_of::<Home>();
        let offset = home.addr().checked_sub(self.homes.as_ptr().addr())?;
        if !offset.is_multiple_of(size) {
            return None;
        }
        self.homes.get(offset / size)
    }

    /// The number of free blocks of `class` held here.
    #[cfg(test)]
    pub(crate) fn len(&self, class: u8) -> usize {
        self.len[usize::from(class)].get()
    }

    /// A block of `class`: a free one, else one taken back from the home,
    /// else a new one.
    pub(crate) fn take(&self, class: u8) -> NonNull<u8> {
        let c = usize::from(class);
        if self.free[c].get().is_null() {
            self.refill(class, CACHE_CAP);
        }
        match NonNull::new(self.free[c].get()) {
            Some(block) => {
                // SAFETY: a free block's first word is the next free one
                // (written by `put`); the block is ours.
                let next = unsafe { block.cast::<*mut u8>().as_ptr().read() };
                self.free[c].set(next);
                self.len[c].set(self.len[c].get() - 1);
                block
            }
            None => allocate_block(class),
        }
    }

    /// Keeps `block` of `class` for reuse, or frees it if the list is full.
    ///
    /// # Safety
    ///
    /// `block` came from [`allocate_block`] with `class`, holds nothing
    /// that needs dropping, is in no list, and the caller gives it up.
    pub(crate) unsafe fn put(&self, block: NonNull<u8>, class: u8) {
        let c = usize::from(class);
        if self.len[c].get() >= CACHE_CAP {
            // SAFETY: per the contract.
            unsafe { free_block(block, class) };
            return;
        }
        // SAFETY: the block is ours and at least a word large and aligned.
        unsafe { block.cast::<*mut u8>().as_ptr().write(self.free[c].get()) };
        self.free[c].set(block.as_ptr());
        self.len[c].set(self.len[c].get() + 1);
    }

    /// Takes up to `most` blocks of `class` back from the home.
    fn refill(&self, class: u8, most: usize) {
        if !self.takes {
            return;
        }
        for _ in 0..most {
            // SAFETY: the cache is its home's one taker (`takes`).
            let Some(block) = (unsafe { self.home().take(class) }) else { break };
            // SAFETY: a returned block came from `allocate_block` with
            // `class` and holds only its link (`give_back`'s contract).
            unsafe { self.put(block.cast(), class) };
        }
    }

    /// Takes back what the home holds: up to the cap into the free lists,
    /// the rest to the allocator. Keeps the home from holding a past peak
    /// of blocks while this worker sends nothing.
    pub(crate) fn trim(&self) {
        if !self.takes {
            return;
        }
        for class in 0..CLASSES as u8 {
            // SAFETY: the cache is its home's one taker (`takes`).
            if unsafe { self.home().is_empty(class) } {
                continue;
            }
            // SAFETY: as above.
            while let Some(block) = unsafe { self.home().take(class) } {
                // SAFETY: as in `refill`; a full list frees it.
                unsafe { self.put(block.cast(), class) };
            }
        }
    }
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        for class in 0..CLASSES as u8 {
            let c = usize::from(class);
            let mut block = self.free[c].replace(ptr::null_mut());
            while let Some(free) = NonNull::new(block) {
                // SAFETY: a free block's first word is the next one.
                block = unsafe { free.cast::<*mut u8>().as_ptr().read() };
                // SAFETY: every free block came from `allocate_block` with
                // this class and holds nothing to drop.
                unsafe { free_block(free, class) };
            }
            self.len[c].set(0);
        }
    }
}

/// Bounds, reuse and the way home, without a runtime (run under miri too).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::boxed::Box;
    use alloc::vec::Vec;

    /// Gives `block` back to `home` as another thread would.
    fn give_back(home: &Home, block: NonNull<u8>, class: u8) {
        // SAFETY: a block has room for a link at its start.
        unsafe { block.cast::<Link>().as_ptr().write(Link::new()) };
        // SAFETY: allocated by a cache of `home` with `class`; given up.
        unsafe { home.give_back(block.cast(), class) };
    }

    #[test]
    fn classes_cover_small_aligned_layouts_only() {
        assert_eq!(class_of(Layout::new::<[u8; 1]>()), Some(0));
        assert_eq!(class_of(Layout::new::<[u64; 8]>()), Some(0));
        assert_eq!(class_of(Layout::new::<[u64; 9]>()), Some(1));
        assert_eq!(class_of(Layout::new::<[u8; 256]>()), Some(3));
        assert_eq!(class_of(Layout::new::<[u8; 257]>()), None);
        assert_eq!(class_of(Layout::from_size_align(32, 64).unwrap()), None);
    }

    #[test]
    fn a_freed_block_is_reused() {
        let homes: Arc<[Home]> = Arc::from([Home::new()]);
        let cache = BlockCache::new(homes.clone(), 0);
        let a = cache.take(1);
        // SAFETY: from `take(1)`, holds nothing, given up.
        unsafe { cache.put(a, 1) };
        assert_eq!(cache.len(1), 1);
        assert_eq!(cache.take(1), a, "the free block comes back first");
        assert_eq!(cache.len(1), 0);
        // SAFETY: as above.
        unsafe { cache.put(a, 1) };
        drop(cache);
        drop(homes);
    }

    #[test]
    fn the_cache_is_bounded() {
        let homes: Arc<[Home]> = Arc::from([Home::new()]);
        let cache = BlockCache::new(homes.clone(), 0);
        let blocks: Vec<_> = (0..CACHE_CAP + 10).map(|_| cache.take(0)).collect();
        for block in blocks {
            // SAFETY: from `take(0)`, holds nothing, given up.
            unsafe { cache.put(block, 0) };
        }
        assert_eq!(cache.len(0), CACHE_CAP, "the excess went to the allocator");
        // A home holding more than the cap: a trim keeps the cap only.
        let more: Vec<_> = (0..CACHE_CAP + 10).map(|_| allocate_block(2)).collect();
        for block in more {
            give_back(&homes[0], block, 2);
        }
        cache.trim();
        assert_eq!(cache.len(2), CACHE_CAP);
        // SAFETY: the cache is the home's one taker.
        assert!(unsafe { homes[0].is_empty(2) }, "a trim empties the home");
        drop(cache);
    }

    #[test]
    fn blocks_freed_elsewhere_come_home() {
        extern crate std;
        let homes: Arc<[Home]> = Arc::from([Home::new()]);
        let cache = BlockCache::new(homes.clone(), 0);
        let blocks: Vec<_> = (0..8).map(|_| cache.take(0)).collect();
        let addresses: Vec<usize> = blocks.iter().map(|b| b.as_ptr().addr()).collect();
        // Another thread frees them: they go to the home, not the cache.
        let home_ref = &homes[0];
        /// A block handed to another thread (raw pointers are not `Send`).
        struct Handed(NonNull<u8>);
        // SAFETY: the block is given up by this thread; only the receiver
        // touches it.
        unsafe impl Send for Handed {}
        std::thread::scope(|scope| {
            let blocks: Vec<Handed> = blocks.into_iter().map(Handed).collect();
            scope.spawn(move || {
                for Handed(block) in blocks {
                    give_back(home_ref, block, 0);
                }
            });
        });
        assert_eq!(cache.len(0), 0);
        // The next takes drain the home: the same blocks, no new ones.
        let mut again: Vec<NonNull<u8>> = (0..8).map(|_| cache.take(0)).collect();
        again.sort_unstable_by_key(|block| block.as_ptr().addr());
        let mut addresses = addresses;
        addresses.sort_unstable();
        let again_addresses: Vec<usize> = again.iter().map(|block| block.as_ptr().addr()).collect();
        assert_eq!(again_addresses, addresses, "every block came home and was reused");
        for block in again {
            // SAFETY: from `take(0)`, holds nothing, given up.
            unsafe { cache.put(block, 0) };
        }
        drop(cache);
    }

    #[test]
    fn a_home_frees_what_it_holds_when_dropped() {
        let home = Box::new(Home::new());
        for class in 0..CLASSES as u8 {
            for _ in 0..3 {
                give_back(&home, allocate_block(class), class);
            }
        }
        // Leaks would show under miri.
        drop(home);
    }
}

/// The home's return lists under loom: two threads give blocks back while
/// the home's cache takes them. Each comes home once, with what its last
/// user wrote visible. Fails (a causality violation on the block's
/// contents) with the list's producer swap `Relaxed`.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use alloc::vec::Vec;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// A block as a consumer leaves it: its link, then what it wrote last.
    #[repr(C)]
    struct Block {
        link: Link,
        value: UnsafeCell<u32>,
    }

    /// The home, shared by the threads (its cache lives on the model's
    /// main thread).
    struct Shared(Home);
    // SAFETY: the home's lists are MPSC: any thread gives back.
    unsafe impl Sync for Shared {}
    // SAFETY: as above.
    unsafe impl Send for Shared {}

    #[test]
    fn blocks_given_back_from_two_threads_come_home_once() {
        loom::model(|| {
            let home = Arc::new(Shared(Home::new()));
            let returners: Vec<_> = (0..2u32)
                .map(|v| {
                    let home = home.clone();
                    thread::spawn(move || {
                        let block = allocate_block(0).cast::<Block>();
                        // SAFETY: a fresh block, large and aligned enough.
                        unsafe {
                            block.as_ptr().write(Block { link: Link::new(), value: UnsafeCell::new(0) })
                        };
                        // The last user's write, before the block goes home.
                        // SAFETY: the block is this thread's until given back.
                        unsafe { block.as_ref() }.value.with_mut(|p| unsafe { *p = 10 + v });
                        // SAFETY: allocated with class 0; given up.
                        unsafe { home.0.give_back(block.cast(), 0) };
                    })
                })
                .collect();
            let mut seen = Vec::new();
            let mut drain = |seen: &mut Vec<u32>| {
                // SAFETY: this thread is the home's one taker.
                while let Some(block) = unsafe { home.0.take(0) } {
                    let block = block.cast::<Block>();
                    // SAFETY: came home: ours; the giver's write must be
                    // ordered before this read.
                    let value = unsafe { block.as_ref() }.value.with(|p| unsafe { *p });
                    seen.push(value);
                    // SAFETY: ours; dropped once, then freed (class 0).
                    unsafe {
                        ptr::drop_in_place(block.as_ptr());
                        free_block(block.cast(), 0);
                    }
                }
            };
            drain(&mut seen);
            thread::yield_now();
            drain(&mut seen);
            for returner in returners {
                returner.join().expect("returner panicked");
            }
            drain(&mut seen);
            seen.sort_unstable();
            assert_eq!(seen, [10, 11], "each block comes home once");
        });
    }
}
