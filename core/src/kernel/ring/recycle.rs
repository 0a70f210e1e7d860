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
//!   gathered by B's cache into a chain per (home, class) and pushed onto
//!   A's [`Home`] a chain at a time ([`RETURN_BATCH`] blocks, or fewer
//!   when B [`flush`](BlockCache::flush)es at the end of a pass): one
//!   compare-and-swap per chain on a list per class, no lock. A takes a
//!   home list whole, with one swap, when its free list of that class runs
//!   dry, and splices it onto the free list walking only the chains' first
//!   and last blocks; or when it [`trim`](BlockCache::trim)s. So a block
//!   is always returned to the heap of the thread that allocated it, and
//!   the allocator's own cross-thread free path is never taken in steady
//!   state.
//!
//! A free list grows with the blocks that come back to it: it never holds
//! more than the worker's peak of its own blocks in flight (a cache only
//! ever holds blocks it made, and a home only blocks its cache made), so
//! a burst of sends is served from it the next time without the
//! allocator. A [`trim`](BlockCache::trim) (an idle worker's) takes the
//! home's blocks back; after [`TRIMS_BEFORE_SHRINK`] trims in a row
//! without the cache running dry it gives the allocator whatever it holds
//! beyond [`CACHE_CAP`] a class. The cache
//! frees its lists and its chains on their way home when dropped, the
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
//! that home is one of its family ([`BlockCache::family_index`]), which it
//! keeps alive: no caller has to vouch for a home's life.

use alloc::alloc::{alloc, dealloc, handle_alloc_error};
use alloc::boxed::Box;
use alloc::sync::Arc;
use core::alloc::Layout;
use core::cell::Cell;
use core::ptr::{self, NonNull};

use crate::kernel::atomic::{AtomicBool, AtomicPtr, Ordering};
use crate::kernel::ring::mpsc::Link;

/// The number of size classes.
pub(crate) const CLASSES: usize = 4;
/// Each class's block size in bytes; a node larger than the last is
/// allocated alone.
const CLASS_SIZE: [usize; CLASSES] = [64, 128, 192, 256];
/// Every block's alignment; a node aligned more strictly is allocated
/// alone.
pub(crate) const BLOCK_ALIGN: usize = 16;
/// The most blocks of one class a trimmed cache keeps.
pub(crate) const CACHE_CAP: usize = 256;
/// The trims in a row, without the cache running dry in between, after
/// which a trim gives the allocator what the cache holds beyond
/// [`CACHE_CAP`] a class: a burst's blocks are kept for the next burst
/// while the worker only pauses between them.
pub(crate) const TRIMS_BEFORE_SHRINK: u32 = 64;
/// The blocks of one class a cache gathers for another worker's home
/// before it pushes them there in one chain.
pub(crate) const RETURN_BATCH: usize = 32;

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

/// Frees every block of the list that starts at `first`, linked through
/// their links to a null one.
///
/// # Safety
///
/// The list is the caller's: blocks of `class` from [`allocate_block`],
/// each starting with a live [`Link`] and holding nothing else to drop,
/// none used again.
unsafe fn free_list(mut first: *mut Link, class: u8) {
    while let Some(block) = NonNull::new(first) {
        // SAFETY: a block of the list, ours (the contract).
        first = unsafe { block.as_ref() }.next();
        // SAFETY: as above; freed once.
        unsafe { free_block(block.cast(), class) };
    }
}

/// What the first block of a chain on its way home carries after its
/// link: the chain's length and its last block.
#[repr(C)]
struct ChainHead {
    link: Link,
    len: usize,
    last: *mut Link,
}

const _: () = assert!(core::mem::size_of::<Home>() == 128, "a home fills its own padded block");

const _: () = assert!(
    core::mem::size_of::<ChainHead>() <= CLASS_SIZE[0] && core::mem::align_of::<ChainHead>() <= BLOCK_ALIGN,
    "every block has room for a chain head"
);

/// Where a worker's blocks come back to from other threads: one list per
/// class, of chains linked end to first. Any thread pushes a chain (one
/// compare-and-swap); the worker's cache takes a whole list (one swap).
/// Taking only whole lists is what keeps the push safe from the ABA
/// problem: a push's compare-and-swap succeeds only onto the list's
/// current first block, whichever chain that block now starts.
///
/// Each home has a 128-byte block of its own (the size of the runtime's
/// cache-line padding): other workers compare-and-swap its lists while
/// its worker swaps them, and the homes of a family sit side by side in
/// one slice, where two in one line would make one worker's returns
/// invalidate another's. It also makes a home's index in its family a
/// shift of the offset ([`BlockCache::family_index`]).
#[repr(align(128))]
pub(crate) struct Home {
    returned: [AtomicPtr<Link>; CLASSES],
    /// A cache has claimed the right to take from the lists.
    claimed: AtomicBool,
}

impl Home {
    pub(crate) fn new() -> Home {
        Home {
            returned: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            claimed: AtomicBool::new(false),
        }
    }

    /// Returns the chain `first` … `last` of `len` blocks of `class`,
    /// linked first to last through their links, to this home, from any
    /// thread.
    ///
    /// # Safety
    ///
    /// Every block of the chain came from [`allocate_block`] with `class`,
    /// starts with a live [`Link`], holds nothing else that needs
    /// dropping, and is in no other list; the links lead from `first` to
    /// `last` through `len` blocks. The caller gives them up.
    pub(crate) unsafe fn give_back(&self, first: NonNull<Link>, last: NonNull<Link>, len: usize, class: u8) {
        let head = first.cast::<ChainHead>().as_ptr();
        // SAFETY: the chain is ours until the push below publishes it; a
        // block has room for a chain head (checked above), whose link is
        // the block's own and stays as it is.
        unsafe {
            ptr::addr_of_mut!((*head).len).write(len);
            ptr::addr_of_mut!((*head).last).write(last.as_ptr());
        }
        let list = &self.returned[usize::from(class)];
        let mut now = list.load(Ordering::Relaxed);
        loop {
            // SAFETY: `last` is ours until the push succeeds.
            unsafe { last.as_ref() }.set_next(now);
            // Release publishes the chain (its links and head, the blocks'
            // last contents) to the taker's Acquire swap; every push is a
            // read-modify-write, so an earlier push's Release is carried
            // through to it too.
            match list.compare_exchange_weak(now, first.as_ptr(), Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(current) => now = current,
            }
        }
    }

    /// Takes every block of `class` returned so far: the first of a list
    /// of chains, each linked to the next, the last one's last block to
    /// null.
    ///
    /// # Safety
    ///
    /// The caller is this home's one taker (its worker's cache, or its
    /// owner once no thread can give back).
    unsafe fn take_all(&self, class: u8) -> *mut Link {
        let list = &self.returned[usize::from(class)];
        if list.load(Ordering::Relaxed).is_null() {
            return ptr::null_mut();
        }
        // Acquire pairs with the pushes' Release.
        list.swap(ptr::null_mut(), Ordering::Acquire)
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        for class in 0..CLASSES as u8 {
            // SAFETY: `&mut self`: no thread gives back any more, and we
            // are the one taker; every block came from `allocate_block`
            // with this class, starts with its link and holds nothing else
            // to drop; the chains are linked end to first.
            unsafe { free_list(self.take_all(class), class) };
        }
    }
}

/// Blocks gathered for one home, one class: a chain linked first to last.
struct Outgoing {
    first: Cell<*mut Link>,
    last: Cell<*mut Link>,
    len: Cell<usize>,
}

impl Outgoing {
    fn new() -> Outgoing {
        Outgoing { first: Cell::new(ptr::null_mut()), last: Cell::new(ptr::null_mut()), len: Cell::new(0) }
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
    /// Each class's free list, threaded through the blocks' links.
    free: [Cell<*mut Link>; CLASSES],
    len: [Cell<usize>; CLASSES],
    /// Blocks of other homes, gathered per home and class on their way
    /// there.
    outgoing: Box<[[Outgoing; CLASSES]]>,
    /// Some chain of `outgoing` is not empty.
    pending: Cell<bool>,
    /// Trims since a class last ran dry.
    trims: Cell<u32>,
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
        let outgoing = (0..homes.len()).map(|_| core::array::from_fn(|_| Outgoing::new())).collect();
        BlockCache {
            homes,
            index,
            takes: !claimed,
            free: core::array::from_fn(|_| Cell::new(ptr::null_mut())),
            len: core::array::from_fn(|_| Cell::new(0)),
            outgoing,
            pending: Cell::new(false),
            trims: Cell::new(0),
        }
    }

    /// The home the cache's blocks come back to.
    pub(crate) fn home(&self) -> &Home {
        &self.homes[self.index]
    }

    /// The index in this cache's family of the home at `home`, if it is
    /// one of them. A pointer to any other home (another runtime's,
    /// perhaps gone) is `None`.
    pub(crate) fn family_index(&self, home: *const Home) -> Option<usize> {
        let size = core::mem::size_of::<Home>();
        let offset = home.addr().checked_sub(self.homes.as_ptr().addr())?;
        if !offset.is_multiple_of(size) {
            return None;
        }
        let index = offset / size;
        (index < self.homes.len()).then_some(index)
    }

    /// The number of free blocks of `class` held here.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn len(&self, class: u8) -> usize {
        self.len[usize::from(class)].get()
    }

    /// A block of `class`: a free one, else one taken back from the home,
    /// else a new one.
    #[inline]
    pub(crate) fn take(&self, class: u8) -> NonNull<u8> {
        let c = usize::from(class);
        if self.free[c].get().is_null() {
            self.trims.set(0);
            self.refill(class);
        }
        match NonNull::new(self.free[c].get()) {
            Some(block) => {
                // SAFETY: a free block starts with a link to the next free
                // one (written by `put`, or by its giver and published by
                // the home's swap); the block is ours.
                let next = unsafe { block.as_ref() }.next();
                self.free[c].set(next);
                self.len[c].set(self.len[c].get() - 1);
                block.cast()
            }
            None => allocate_block(class),
        }
    }

    /// Keeps `block` of `class` for reuse.
    ///
    /// # Safety
    ///
    /// `block` came from [`allocate_block`] with `class`, holds nothing
    /// that needs dropping, is in no list, and the caller gives it up.
    #[inline]
    pub(crate) unsafe fn put(&self, block: NonNull<u8>, class: u8) {
        let c = usize::from(class);
        // SAFETY: the block is ours, large and aligned enough for a link.
        unsafe { block.cast::<Link>().as_ptr().write(Link::to(self.free[c].get())) };
        self.free[c].set(block.as_ptr().cast());
        self.len[c].set(self.len[c].get() + 1);
    }

    /// Sends `block` of `class` towards home `home` of this cache's family
    /// (another worker's): it joins the chain gathered for that home, which
    /// goes there once it is [`RETURN_BATCH`] blocks long, or at the next
    /// [`flush`](Self::flush).
    ///
    /// # Safety
    ///
    /// `block` came from [`allocate_block`] with `class` by a cache of
    /// home `home`, starts with a live [`Link`], holds nothing else that
    /// needs dropping, is in no list, and the caller gives it up.
    #[inline]
    pub(crate) unsafe fn send_home(&self, home: usize, block: NonNull<Link>, class: u8) {
        let out = &self.outgoing[home][usize::from(class)];
        // SAFETY: the block is ours (the contract).
        unsafe { block.as_ref() }.set_next(out.first.get());
        if out.len.get() == 0 {
            out.last.set(block.as_ptr());
        }
        out.first.set(block.as_ptr());
        out.len.set(out.len.get() + 1);
        self.pending.set(true);
        if out.len.get() >= RETURN_BATCH {
            self.push_chain(home, class);
        }
    }

    /// Pushes the chain gathered for `home` and `class`, if any, there.
    fn push_chain(&self, home: usize, class: u8) {
        let out = &self.outgoing[home][usize::from(class)];
        let (Some(first), Some(last)) = (NonNull::new(out.first.get()), NonNull::new(out.last.get())) else {
            return;
        };
        let len = out.len.replace(0);
        out.first.set(ptr::null_mut());
        out.last.set(ptr::null_mut());
        // SAFETY: the chain's blocks were made by caches of that home with
        // `class` and given up to us (`send_home`), linked first to last.
        unsafe { self.homes[home].give_back(first, last, len, class) };
    }

    /// Pushes every chain gathered so far to its home: blocks delivered
    /// here do not wait for a full chain once the worker has nothing more
    /// to deliver.
    pub(crate) fn flush(&self) {
        if !self.pending.replace(false) {
            return;
        }
        for home in 0..self.homes.len() {
            for class in 0..CLASSES as u8 {
                self.push_chain(home, class);
            }
        }
    }

    /// Takes every block of `class` back from the home onto the free list.
    fn refill(&self, class: u8) {
        if !self.takes {
            return;
        }
        // SAFETY: the cache is its home's one taker (`takes`).
        let taken = unsafe { self.home().take_all(class) };
        let Some(first) = NonNull::new(taken) else { return };
        let c = usize::from(class);
        let mut chain = first;
        let mut total = 0;
        loop {
            let head = chain.cast::<ChainHead>().as_ptr();
            // SAFETY: the list is ours (taken); each chain starts with the
            // head its giver wrote before the push, which the swap made
            // visible.
            let (len, last) = unsafe { ((*head).len, (*head).last) };
            total += len;
            // SAFETY: `last` is the chain's last block, ours too.
            let last = unsafe { &*last };
            match NonNull::new(last.next()) {
                Some(next) => chain = next,
                None => {
                    // The end of the list: the free list goes behind it.
                    last.set_next(self.free[c].get());
                    break;
                }
            }
        }
        self.free[c].set(first.as_ptr());
        self.len[c].set(self.len[c].get() + total);
    }

    /// Pushes the chains gathered for other homes, takes back what the home
    /// holds, and, at the [`TRIMS_BEFORE_SHRINK`]th trim in a row without
    /// the cache running dry, gives the allocator whatever the free lists
    /// hold beyond [`CACHE_CAP`] a class: a worker that stays idle keeps
    /// no past peak of blocks.
    pub(crate) fn trim(&self) {
        self.flush();
        let trims = self.trims.get().saturating_add(1);
        self.trims.set(trims);
        for class in 0..CLASSES as u8 {
            self.refill(class);
            if trims < TRIMS_BEFORE_SHRINK {
                continue;
            }
            let c = usize::from(class);
            while self.len[c].get() > CACHE_CAP {
                let Some(block) = NonNull::new(self.free[c].get()) else { break };
                // SAFETY: a free block starts with a link to the next one.
                self.free[c].set(unsafe { block.as_ref() }.next());
                self.len[c].set(self.len[c].get() - 1);
                // SAFETY: every free block came from `allocate_block` with
                // this class and holds nothing to drop.
                unsafe { free_block(block.cast(), class) };
            }
        }
    }
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        for class in 0..CLASSES as u8 {
            let c = usize::from(class);
            // SAFETY: every free block came from `allocate_block` with this
            // class, starts with its link and holds nothing else to drop.
            unsafe { free_list(self.free[c].replace(ptr::null_mut()), class) };
            self.len[c].set(0);
            for out in self.outgoing.iter() {
                let out = &out[c];
                // The chain ends at `last`, whose link is not cut: cut it.
                if let Some(last) = NonNull::new(out.last.get()) {
                    // SAFETY: the chain's blocks are ours until pushed.
                    unsafe { last.as_ref() }.set_next(ptr::null_mut());
                }
                out.last.set(ptr::null_mut());
                out.len.set(0);
                // SAFETY: as for the free lists: blocks given up to us.
                unsafe { free_list(out.first.replace(ptr::null_mut()), class) };
            }
        }
    }
}

/// Bounds, reuse and the way home, without a runtime (run under miri too).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// Gives `blocks` back to `home` in one chain, as another worker's
    /// cache would.
    fn give_back(home: &Home, blocks: &[NonNull<u8>], class: u8) {
        let mut next = ptr::null_mut();
        for block in blocks.iter().rev() {
            // SAFETY: a block has room for a link at its start.
            unsafe { block.cast::<Link>().as_ptr().write(Link::to(next)) };
            next = block.as_ptr().cast();
        }
        let (Some(first), Some(last)) = (blocks.first(), blocks.last()) else { return };
        // SAFETY: allocated with `class`, linked first to last above,
        // given up.
        unsafe { home.give_back(first.cast(), last.cast(), blocks.len(), class) };
    }

    /// The caches of a runtime of `n` workers.
    fn family(n: usize) -> (Arc<[Home]>, Vec<BlockCache>) {
        let homes: Arc<[Home]> = (0..n).map(|_| Home::new()).collect();
        let caches = (0..n).map(|index| BlockCache::new(homes.clone(), index)).collect();
        (homes, caches)
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
        let (_homes, caches) = family(1);
        let cache = &caches[0];
        let a = cache.take(1);
        // SAFETY: from `take(1)`, holds nothing, given up.
        unsafe { cache.put(a, 1) };
        assert_eq!(cache.len(1), 1);
        assert_eq!(cache.take(1), a, "the free block comes back first");
        assert_eq!(cache.len(1), 0);
        // SAFETY: as above.
        unsafe { cache.put(a, 1) };
    }

    #[test]
    fn the_cache_grows_with_a_burst_and_a_trim_bounds_it() {
        let (homes, caches) = family(1);
        let cache = &caches[0];
        let blocks: Vec<_> = (0..CACHE_CAP + 10).map(|_| cache.take(0)).collect();
        for block in blocks {
            // SAFETY: from `take(0)`, holds nothing, given up.
            unsafe { cache.put(block, 0) };
        }
        assert_eq!(cache.len(0), CACHE_CAP + 10, "the whole burst is kept for the next one");
        let again: Vec<_> = (0..CACHE_CAP + 10).map(|_| cache.take(0)).collect();
        assert_eq!(cache.len(0), 0, "and served from the cache");
        for block in again {
            // SAFETY: as above.
            unsafe { cache.put(block, 0) };
        }
        for _ in 1..TRIMS_BEFORE_SHRINK {
            cache.trim();
        }
        assert_eq!(cache.len(0), CACHE_CAP + 10, "a pause between bursts keeps the blocks");
        cache.trim();
        assert_eq!(cache.len(0), CACHE_CAP, "a long one gives the excess to the allocator");
        // Running dry starts the count again.
        let blocks: Vec<_> = (0..CACHE_CAP + 1).map(|_| cache.take(0)).collect();
        for block in blocks {
            // SAFETY: as above.
            unsafe { cache.put(block, 0) };
        }
        cache.trim();
        assert_eq!(cache.len(0), CACHE_CAP + 1);
        // A home holding more than the cap: trims take it all back, and in
        // the end keep the cap only.
        let more: Vec<_> = (0..CACHE_CAP + 10).map(|_| allocate_block(2)).collect();
        give_back(&homes[0], &more[..7], 2);
        give_back(&homes[0], &more[7..], 2);
        cache.trim();
        assert_eq!(cache.len(2), CACHE_CAP + 10);
        for _ in 0..TRIMS_BEFORE_SHRINK {
            cache.trim();
        }
        assert_eq!(cache.len(2), CACHE_CAP);
        // SAFETY: the cache is the home's one taker.
        assert!(unsafe { homes[0].take_all(2) }.is_null(), "a trim empties the home");
    }

    #[test]
    fn chains_from_the_home_are_spliced_whole() {
        let (homes, caches) = family(1);
        let cache = &caches[0];
        let blocks: Vec<_> = (0..10).map(|_| allocate_block(1)).collect();
        give_back(&homes[0], &blocks[..3], 1);
        give_back(&homes[0], &blocks[3..4], 1);
        give_back(&homes[0], &blocks[4..], 1);
        let mut taken: Vec<usize> = (0..10).map(|_| cache.take(1).as_ptr().addr()).collect();
        assert_eq!(cache.len(1), 0, "the count matched the chains' lengths");
        let mut addresses: Vec<usize> = blocks.iter().map(|b| b.as_ptr().addr()).collect();
        taken.sort_unstable();
        addresses.sort_unstable();
        assert_eq!(taken, addresses, "every block came home once");
        for address in taken {
            let block = blocks.iter().find(|b| b.as_ptr().addr() == address).copied().unwrap();
            // SAFETY: taken from the cache, holds nothing, given up.
            unsafe { cache.put(block, 1) };
        }
    }

    #[test]
    fn blocks_freed_elsewhere_come_home() {
        extern crate std;
        let (_homes, mut caches) = family(2);
        let other = caches.pop().unwrap();
        let cache = caches.pop().unwrap();
        let count = RETURN_BATCH + 8;
        let blocks: Vec<_> = (0..count).map(|_| cache.take(0)).collect();
        let mut addresses: Vec<usize> = blocks.iter().map(|b| b.as_ptr().addr()).collect();
        /// A block handed to another thread (raw pointers are not `Send`).
        struct Handed(NonNull<u8>);
        // SAFETY: the block is given up by this thread; only the receiver
        // touches it.
        unsafe impl Send for Handed {}
        /// The other worker's cache, used by one thread at a time.
        struct Lent(BlockCache);
        // SAFETY: the cache moves to the other thread and back whole; one
        // thread at a time uses it.
        unsafe impl Send for Lent {}
        let lent = Lent(other);
        let blocks: Vec<Handed> = blocks.into_iter().map(Handed).collect();
        let lent = std::thread::spawn(move || {
            let lent = lent;
            for Handed(block) in blocks {
                // SAFETY: a block has room for its link.
                unsafe { block.cast::<Link>().as_ptr().write(Link::new()) };
                // SAFETY: made by the cache of home 0, given up. The
                // first `RETURN_BATCH` go home as one chain on their own.
                unsafe { lent.0.send_home(0, block.cast(), 0) };
            }
            lent
        })
        .join()
        .unwrap();
        assert_eq!(cache.len(0), 0);
        let first: Vec<NonNull<u8>> = (0..RETURN_BATCH).map(|_| cache.take(0)).collect();
        assert_eq!(cache.len(0), 0, "a full chain came home without a flush");
        lent.0.flush();
        let rest: Vec<NonNull<u8>> = (0..8).map(|_| cache.take(0)).collect();
        let mut again: Vec<usize> = first.iter().chain(&rest).map(|b| b.as_ptr().addr()).collect();
        again.sort_unstable();
        addresses.sort_unstable();
        assert_eq!(again, addresses, "every block came home and was reused");
        for block in first.into_iter().chain(rest) {
            // SAFETY: from `take(0)`, holds nothing, given up.
            unsafe { cache.put(block, 0) };
        }
    }

    #[test]
    fn what_a_cache_or_home_holds_is_freed_when_dropped() {
        let (homes, caches) = family(2);
        for class in 0..CLASSES as u8 {
            let blocks: Vec<_> = (0..3).map(|_| allocate_block(class)).collect();
            give_back(&homes[0], &blocks, class);
            // Blocks on their way home when their carrier drops.
            for _ in 0..3 {
                let block = allocate_block(class);
                // SAFETY: a block has room for its link.
                unsafe { block.cast::<Link>().as_ptr().write(Link::new()) };
                // SAFETY: given up to the cache of home 1.
                unsafe { caches[1].send_home(0, block.cast(), class) };
            }
        }
        // Leaks would show under miri.
        drop(caches);
        drop(homes);
    }
}

/// The home's return lists under loom: two threads give chains of
/// blocks back while the home's cache takes them. Each block comes home
/// once, with what its last user wrote visible. Fails (a causality
/// violation on a block's contents) with the push's compare-and-swap
/// `Relaxed`, or with the take's swap `Relaxed`.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use alloc::vec::Vec;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// A block as a consumer leaves it: its link, room for a chain head,
    /// then what it wrote last.
    #[repr(C)]
    struct Block {
        link: Link,
        head: [usize; 2],
        value: UnsafeCell<u32>,
    }

    /// The home, shared by the threads (its cache lives on the model's
    /// main thread).
    struct Shared(Home);
    // SAFETY: any thread gives back to a home.
    unsafe impl Sync for Shared {}
    // SAFETY: as above.
    unsafe impl Send for Shared {}

    /// A fresh block holding `value`, written as its last user would.
    fn block(value: u32) -> NonNull<Link> {
        let block = allocate_block(0).cast::<Block>();
        // SAFETY: a fresh block, large and aligned enough.
        unsafe { block.as_ptr().write(Block { link: Link::new(), head: [0; 2], value: UnsafeCell::new(0) }) };
        // SAFETY: the block is this thread's until given back.
        unsafe { block.as_ref() }.value.with_mut(|p| unsafe { *p = value });
        block.cast()
    }

    /// Takes what the home holds, reads each block's value and frees it.
    fn drain(home: &Home, seen: &mut Vec<u32>) {
        // SAFETY: the model's main thread is the home's one taker.
        let mut next = unsafe { home.take_all(0) };
        while let Some(link) = NonNull::new(next) {
            // SAFETY: taken: ours. The chain heads and links were written
            // before the pushes; the list is linked end to first.
            next = unsafe { link.as_ref() }.next();
            let block = link.cast::<Block>();
            // SAFETY: the giver's write must be ordered before this read.
            let value = unsafe { block.as_ref() }.value.with(|p| unsafe { *p });
            seen.push(value);
            // SAFETY: ours; dropped once, then freed (class 0).
            unsafe {
                ptr::drop_in_place(block.as_ptr());
                free_block(block.cast(), 0);
            }
        }
    }

    #[test]
    fn chains_given_back_from_two_threads_come_home_once() {
        assert!(core::mem::size_of::<Block>() <= CLASS_SIZE[0]);
        loom::model(|| {
            let home = Arc::new(Shared(Home::new()));
            let givers: Vec<_> = (0..2u32)
                .map(|t| {
                    let home = home.clone();
                    thread::spawn(move || {
                        // A chain of two: first → last.
                        let (first, last) = (block(10 * t + 1), block(10 * t + 2));
                        // SAFETY: both ours.
                        unsafe { first.as_ref() }.set_next(last.as_ptr());
                        // SAFETY: allocated with class 0, linked first to
                        // last, given up.
                        unsafe { home.0.give_back(first, last, 2, 0) };
                    })
                })
                .collect();
            let mut seen = Vec::new();
            drain(&home.0, &mut seen);
            thread::yield_now();
            drain(&home.0, &mut seen);
            for giver in givers {
                giver.join().expect("giver panicked");
            }
            drain(&home.0, &mut seen);
            seen.sort_unstable();
            assert_eq!(seen, [1, 2, 11, 12], "each block comes home once");
        });
    }
}
