//! Stack memory for the Linux backend, under a mapping budget.
//!
//! # Why a budget
//!
//! Linux caps the mappings (VMAs) of a process at `vm.max_map_count`
//! (65,530 by default). A stack with its own guard page is two mappings —
//! the PROT_NONE guard and the read-write stack cannot merge — so one guarded
//! mapping per stack would stop a default machine near 32,000 stacks, far
//! short of a million processes.
//!
//! # The policy
//!
//! 1. `vm.max_map_count` is read once per process (fallback 65,530).
//!    [`RESERVED_MAPPINGS`] of it are left to the rest of the process
//!    (libraries, heap arenas, thread stacks). Of what remains, **half** may
//!    be spent on guard-page stacks: the process-wide guard budget is
//!    `(max_map_count - RESERVED_MAPPINGS) / 2 / 2` stacks (14,334 by
//!    default), capped by the overflow registry's capacity. The other half
//!    stays free for canary chunks (one mapping per chunk) and for growth
//!    elsewhere. Each platform instance may also have its own, smaller
//!    budget ([`super::LinuxPlatform::with_guard_budget`]).
//! 2. While both budgets allow, a stack is its own mapping with a PROT_NONE
//!    guard page directly below the usable range
//!    ([`StackGuard::GuardPage`]); overflow faults and is reported by the
//!    overflow handler. `free_stack` unmaps it.
//! 3. Beyond the budget — or if the kernel refuses a guarded mapping with
//!    ENOMEM, which is what running out of mappings looks like — a stack is
//!    carved from a chunk mapping holding up to [`CHUNK_STACKS`] stacks of
//!    one size ([`StackGuard::Canary`]). No guard page: [`STACK_CANARY`] is
//!    written at the lowest usable word and the core checks it whenever the
//!    process switches out; a broken canary is reported like a guard-page
//!    fault ([`crate::Platform::report_overflow`]) and aborts. An overflow
//!    that jumps past the canary can reach the neighbouring stack before it
//!    is noticed; that is the price of the millionth process, and why guard
//!    pages come first.
//! 4. The canary costs no page of its own. The stacks of a chunk are laid
//!    out back to back, each shifted down by [`CANARY_BYTES`], so that a
//!    stack's lowest 16 bytes (its canary) are the last 16 bytes of the page
//!    that holds the top of the stack below it — a page that stack touches
//!    anyway. A chunk starts with one page that holds only the canary of its
//!    lowest stack. A parked process with a shallow stack therefore keeps
//!    one resident page, not two (its top and its canary's).
//! 5. Canary stacks are never unmapped while the platform lives: `free_stack`
//!    releases their pages (`MADV_DONTNEED`) except the two partial pages at
//!    either end — the one holding this stack's canary (the top page of the
//!    stack below) and its own top page (holding the canary of the stack
//!    above) — and puts them on a per-size free list, and the next allocation
//!    of that size takes them from there. The free lists reserve room for
//!    every stack carved, so giving one back never allocates. Chunks are
//!    unmapped when the platform is dropped with no canary stack outstanding,
//!    and leaked otherwise (a `Stack` must not dangle because its platform
//!    went away).
//!
//! All mappings are `MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
//! MAP_STACK`: address space is reserved, memory is committed only where
//! touched. No path aborts or panics: every failure is a [`StackError`].

use core::ptr::{self, NonNull};

use alloc::vec::Vec;

use super::overflow;
use super::sys::{errno, page_size, read_decimal_file, round_up};
use crate::sync::{AtomicUsize, Ordering, SpinLock};
use crate::{Stack, StackError, StackGuard, STACK_CANARY};

/// Mappings left to the rest of the process before guard stacks get any.
pub const RESERVED_MAPPINGS: usize = 8192;
/// Mappings a guard-page stack costs (guard + stack).
pub const MAPPINGS_PER_GUARDED_STACK: usize = 2;
/// Most canary stacks carved from one chunk mapping.
pub const CHUNK_STACKS: usize = 64;
const _: () = assert!(CHUNK_STACKS <= u64::BITS as usize, "a chunk's live set is one u64");
/// Chunks are kept below this many bytes (fewer stacks per chunk for large
/// stacks, at least one).
pub const CHUNK_BYTES: usize = 64 << 20;
/// Largest stack we try to map.
pub const MAX_STACK_SIZE: usize = 1 << 40;
/// How far below its slot a canary stack starts: its canary (the lowest
/// word, kept 16-byte aligned) lies in the top page of the stack below.
pub const CANARY_BYTES: usize = 16;
/// `vm.max_map_count` when /proc will not say.
pub const DEFAULT_MAX_MAP_COUNT: usize = 65_530;

/// `vm.max_map_count`, read once (0 = not read yet).
static MAX_MAP_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Guard-page stacks alive in the whole process, over all platforms.
static LIVE_GUARDED_IN_PROCESS: AtomicUsize = AtomicUsize::new(0);

/// `vm.max_map_count` of this process, read on first use.
pub fn max_map_count() -> usize {
    let cached = MAX_MAP_COUNT.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    let read = read_decimal_file(b"/proc/sys/vm/max_map_count\0")
        .and_then(|count| usize::try_from(count).ok())
        .filter(|&count| count > 0)
        .unwrap_or(DEFAULT_MAX_MAP_COUNT);
    // Racing first readers store the same value.
    MAX_MAP_COUNT.store(read, Ordering::Relaxed);
    read
}

/// How many guard-page stacks the whole process may hold (see the module
/// doc).
pub fn process_guard_budget() -> usize {
    let spare = max_map_count().saturating_sub(RESERVED_MAPPINGS);
    (spare / 2 / MAPPINGS_PER_GUARDED_STACK).min(overflow::REGISTRY_CAPACITY)
}

/// Increments `counter` if it is below `limit`.
fn take_one(counter: &AtomicUsize, limit: usize) -> bool {
    // Relaxed: the counters are budgets, not guards for other memory.
    counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < limit).then_some(n + 1)).is_ok()
}

/// Stacks of one size, carved from chunks.
#[derive(Debug)]
struct SizeClass {
    size: usize,
    /// Free stacks: bottom and chunk index. Capacity ≥ every stack of this
    /// size carved.
    free: Vec<(usize, usize)>,
    carved: usize,
}

/// One chunk mapping and which of its stacks are handed out.
#[derive(Debug)]
struct Chunk {
    mapped: usize,
    length: usize,
    /// Bottom of stack 0 (`CANARY_BYTES` below the end of the first page).
    base: usize,
    size: usize,
    count: usize,
    /// Bit `i`: stack `i` is handed out (`count <= CHUNK_STACKS = 64`).
    live: u64,
}

impl Chunk {
    fn is_live(&self, index: usize) -> bool {
        index < self.count && self.live & (1 << index) != 0
    }
}

#[derive(Debug, Default)]
struct Pool {
    classes: Vec<SizeClass>,
    /// Every chunk mapping.
    chunks: Vec<Chunk>,
    /// Canary stacks handed out and not given back.
    outstanding: usize,
}

impl Pool {
    fn class_mut(&mut self, size: usize) -> Option<&mut SizeClass> {
        self.classes.iter_mut().find(|class| class.size == size)
    }
}

/// The stack allocator of one [`super::LinuxPlatform`].
#[derive(Debug)]
pub(crate) struct StackAllocator {
    guard_budget: usize,
    live_guarded: AtomicUsize,
    pool: SpinLock<Pool>,
}

impl StackAllocator {
    pub(crate) fn new(guard_budget: usize) -> Self {
        StackAllocator {
            guard_budget,
            live_guarded: AtomicUsize::new(0),
            pool: SpinLock::new(Pool::default()),
        }
    }

    pub(crate) fn guard_budget(&self) -> usize {
        self.guard_budget
    }

    pub(crate) fn live_guarded(&self) -> usize {
        self.live_guarded.load(Ordering::Relaxed)
    }

    pub(crate) fn allocate(&self, size: usize) -> Result<Stack, StackError> {
        let page = page_size();
        if size == 0 || size > MAX_STACK_SIZE {
            return Err(StackError::InvalidSize(size));
        }
        let rounded = round_up(size, page).ok_or(StackError::InvalidSize(size))?;
        if self.reserve_guarded() {
            match map_guarded(rounded, page) {
                Ok(stack) => return Ok(stack),
                Err(error) => {
                    self.release_guarded();
                    // ENOMEM here usually means "out of mappings": fall back
                    // to a chunk, which costs at most one new mapping.
                    if error != libc::ENOMEM {
                        return Err(map_error(error, size));
                    }
                }
            }
        }
        self.allocate_canary(rounded, size)
    }

    fn reserve_guarded(&self) -> bool {
        if !take_one(&self.live_guarded, self.guard_budget) {
            return false;
        }
        if !take_one(&LIVE_GUARDED_IN_PROCESS, process_guard_budget()) {
            self.live_guarded.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    fn release_guarded(&self) {
        self.live_guarded.fetch_sub(1, Ordering::Relaxed);
        LIVE_GUARDED_IN_PROCESS.fetch_sub(1, Ordering::Relaxed);
    }

    fn allocate_canary(&self, rounded: usize, requested: usize) -> Result<Stack, StackError> {
        let reused = {
            let mut pool = self.pool.lock();
            let taken = pool.class_mut(rounded).and_then(|class| class.free.pop());
            if let Some((bottom, chunk)) = taken {
                pool.outstanding += 1;
                let chunk_ref = &mut pool.chunks[chunk];
                chunk_ref.live |= 1 << ((bottom - chunk_ref.base) / rounded);
            }
            taken
        };
        let (bottom, chunk) = match reused {
            Some(taken) => taken,
            None => self.carve_chunk(rounded, requested)?,
        };
        // SAFETY: `bottom` starts a free `rounded`-byte stack in a live
        // chunk mapping (16-byte aligned, see `carve_chunk`), now owned by
        // the handle made below.
        unsafe { (bottom as *mut u64).write(STACK_CANARY) };
        let Some(bottom) = NonNull::new(bottom as *mut u8) else {
            return Err(StackError::OutOfMemory);
        };
        // SAFETY: the range is a read-write part of a chunk owned by this
        // allocator and handed to no one else; its top is 16-byte aligned
        // (`CANARY_BYTES` below a page boundary); it has no guard page and
        // carries the canary.
        Ok(unsafe { Stack::from_raw(bottom, rounded, StackGuard::Canary) }.with_backend_word(chunk + 1))
    }

    /// Maps a chunk of `rounded`-byte stacks, files all but one on the free
    /// list and returns that one (counted as outstanding): its bottom and
    /// chunk index.
    fn carve_chunk(&self, rounded: usize, requested: usize) -> Result<(usize, usize), StackError> {
        let count = (CHUNK_BYTES / rounded).clamp(1, CHUNK_STACKS);
        // One page in front: it holds the lowest stack's canary.
        let page = page_size();
        let length = count
            .checked_mul(rounded)
            .and_then(|stacks| stacks.checked_add(page))
            .ok_or(StackError::InvalidSize(requested))?;
        let mapped = map_anonymous(length).map_err(|error| map_error(error, requested))?;
        // Stack `i` is `[base + i * rounded, base + (i + 1) * rounded)`: its
        // canary is the last 16 bytes of the first page or of the stack
        // below's top page, and the highest top ends 16 bytes short of the
        // mapping's end.
        let base = mapped + page - CANARY_BYTES;
        let mut pool = self.pool.lock();
        let index = pool.chunks.len();
        let booked = (|| {
            pool.chunks.try_reserve(1).ok()?;
            if pool.class_mut(rounded).is_none() {
                pool.classes.try_reserve(1).ok()?;
                pool.classes.push(SizeClass { size: rounded, free: Vec::new(), carved: 0 });
            }
            let class = pool.class_mut(rounded)?;
            let carved = class.carved.checked_add(count)?;
            class.free.try_reserve(carved - class.free.len()).ok()?;
            class.carved = carved;
            // Hand out the top stack; the lower ones go on the free list,
            // lowest last so it is taken next.
            class.free.extend((0..count - 1).rev().map(|i| (base + i * rounded, index)));
            Some(())
        })();
        if booked.is_none() {
            drop(pool);
            // SAFETY: the chunk was mapped above and nothing refers to it.
            unsafe { libc::munmap(mapped as *mut libc::c_void, length) };
            return Err(StackError::OutOfMemory);
        }
        pool.chunks.push(Chunk { mapped, length, base, size: rounded, count, live: 1 << (count - 1) });
        pool.outstanding += 1;
        Ok((base + (count - 1) * rounded, index))
    }

    /// # Safety
    ///
    /// `stack` came from this allocator's `allocate` and nothing runs on it
    /// or will be switched to it again.
    pub(crate) unsafe fn free(&self, stack: Stack) {
        let page = page_size();
        let bottom = stack.bottom() as usize;
        match stack.guard() {
            StackGuard::GuardPage => {
                let guard_start = bottom - page;
                if let Some(slot) = stack.backend_word().checked_sub(1) {
                    overflow::unregister(slot, guard_start);
                }
                // SAFETY: guard page plus stack are exactly the mapping made
                // by `map_guarded`, which the caller gives up.
                unsafe { libc::munmap(guard_start as *mut libc::c_void, stack.size() + page) };
                self.release_guarded();
            }
            StackGuard::Canary => {
                // The whole pages strictly inside the stack are its own.
                let top = stack.top() as usize;
                let inner_from = (bottom + CANARY_BYTES).next_multiple_of(page);
                let inner_to = top / page * page;
                release(inner_from, inner_to);
                let mut pool = self.pool.lock();
                let Some(chunk) = stack.backend_word().checked_sub(1).filter(|&c| c < pool.chunks.len())
                else {
                    debug_assert!(false, "canary stack of unknown chunk freed");
                    return;
                };
                let (below_live, above_live) = {
                    let chunk = &mut pool.chunks[chunk];
                    let index = (bottom - chunk.base) / chunk.size;
                    chunk.live &= !(1 << index);
                    (index > 0 && chunk.is_live(index - 1), chunk.is_live(index + 1))
                };
                // The partial pages at either end: the one holding this
                // stack's canary is the top page of the stack below (or the
                // chunk's first page), and this stack's top page holds the
                // canary of the stack above. Each is released only when the
                // stack sharing it is not handed out; under the lock, so
                // that neighbour is not handed out (and its canary written)
                // in between.
                if !below_live {
                    release(inner_from - page, inner_from);
                }
                if !above_live {
                    release(inner_to, inner_to + page);
                }
                let Some(class) = pool.class_mut(stack.size()) else {
                    debug_assert!(false, "canary stack of unknown size {} freed", stack.size());
                    return;
                };
                // Capacity for every carved stack was reserved when carving.
                if class.free.len() < class.free.capacity() {
                    class.free.push((bottom, chunk));
                }
                pool.outstanding = pool.outstanding.saturating_sub(1);
            }
        }
    }

    pub(crate) fn trim(&self, stack: &Stack, keep_top_bytes: usize) {
        let page = page_size();
        let Some(keep) = round_up(keep_top_bytes, page) else { return };
        let bottom = stack.bottom() as usize;
        // A canary stack keeps the (partial) page holding its canary.
        let release_from = match stack.guard() {
            StackGuard::GuardPage => bottom,
            StackGuard::Canary => (bottom + CANARY_BYTES).next_multiple_of(page),
        };
        let release_to = (stack.top() as usize).saturating_sub(keep) / page * page;
        if release_to <= release_from {
            return;
        }
        // SAFETY: a page-aligned range inside the stack's own mapping;
        // MADV_DONTNEED keeps the mapping and refills with zero pages on
        // touch, which is all a trimmed stack promises.
        unsafe {
            libc::madvise(release_from as *mut libc::c_void, release_to - release_from, libc::MADV_DONTNEED)
        };
    }

    pub(crate) fn set_tag(&self, stack: &Stack, tag: u64) {
        if stack.guard() != StackGuard::GuardPage {
            return;
        }
        if let Some(slot) = stack.backend_word().checked_sub(1) {
            overflow::set_tag(slot, stack.bottom() as usize - page_size(), tag);
        }
    }
}

impl Drop for StackAllocator {
    fn drop(&mut self) {
        let pool = self.pool.get_mut();
        if pool.outstanding != 0 {
            return;
        }
        for chunk in &pool.chunks {
            // SAFETY: no canary stack is outstanding, so no one refers to the
            // chunk memory any more.
            unsafe { libc::munmap(chunk.mapped as *mut libc::c_void, chunk.length) };
        }
        pool.chunks.clear();
    }
}

/// Releases the resident pages of `[from, to)` (page-aligned, inside a
/// chunk, holding nothing live); a no-op on an empty range.
fn release(from: usize, to: usize) {
    if to > from {
        // SAFETY: per the contract, a page-aligned range of a chunk mapping
        // whose contents are dead; MADV_DONTNEED keeps the mapping and
        // refills with zero pages on touch.
        unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_DONTNEED) };
    }
}

fn map_error(error: i32, requested: usize) -> StackError {
    match error {
        libc::EINVAL | libc::EOVERFLOW => StackError::InvalidSize(requested),
        _ => StackError::OutOfMemory,
    }
}

/// A fresh, lazily committed read-write anonymous mapping; returns its
/// start or the errno.
fn map_anonymous(length: usize) -> Result<usize, i32> {
    // SAFETY: an anonymous private mapping at an address of the kernel's
    // choosing touches no existing memory.
    let base = unsafe {
        libc::mmap(
            ptr::null_mut(),
            length,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        Err(errno())
    } else {
        Ok(base as usize)
    }
}

/// A guard page plus `rounded` usable bytes, registered for overflow
/// reports; the errno on failure.
fn map_guarded(rounded: usize, page: usize) -> Result<Stack, i32> {
    let length = rounded.checked_add(page).ok_or(libc::EINVAL)?;
    let base = map_anonymous(length)?;
    // SAFETY: the first page of the mapping just made, which nothing uses.
    if unsafe { libc::mprotect(base as *mut libc::c_void, page, libc::PROT_NONE) } != 0 {
        let error = errno();
        // SAFETY: the mapping just made, which nothing uses.
        unsafe { libc::munmap(base as *mut libc::c_void, length) };
        return Err(error);
    }
    let bottom = base + page;
    // Slot + 1, so that 0 means "not registered".
    let word = overflow::register(base, rounded).map_or(0, |slot| slot + 1);
    let Some(bottom) = NonNull::new(bottom as *mut u8) else {
        return Err(libc::ENOMEM);
    };
    // SAFETY: `[bottom, bottom + rounded)` is a fresh read-write mapping
    // owned by the returned handle, its top is page-aligned, and the page
    // below is PROT_NONE.
    Ok(unsafe { Stack::from_raw(bottom, rounded, StackGuard::GuardPage) }.with_backend_word(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_follows_max_map_count() {
        let count = max_map_count();
        assert!(count > 0);
        assert_eq!(
            process_guard_budget(),
            (count.saturating_sub(RESERVED_MAPPINGS) / 4).min(overflow::REGISTRY_CAPACITY)
        );
    }

    #[test]
    fn bad_sizes_are_typed_errors() {
        let allocator = StackAllocator::new(4);
        assert_eq!(allocator.allocate(0).unwrap_err(), StackError::InvalidSize(0));
        assert_eq!(allocator.allocate(usize::MAX).unwrap_err(), StackError::InvalidSize(usize::MAX));
    }

    #[test]
    fn a_canary_lives_in_the_top_page_of_the_stack_below() {
        let page = page_size();
        let allocator = StackAllocator::new(0);
        // One whole chunk, highest stack first.
        let mut stacks: Vec<Stack> =
            (0..CHUNK_STACKS).map(|_| allocator.allocate(4 * page).unwrap()).collect();
        stacks.sort_by_key(|stack| core::cmp::Reverse(stack.bottom() as usize));
        for pair in stacks.windows(2) {
            let (above, below) = (&pair[0], &pair[1]);
            assert_eq!(below.top(), above.bottom(), "stacks of a chunk are back to back");
            let canary_page = above.bottom() as usize / page;
            let top_page_below = (below.top() as usize - 1) / page;
            assert_eq!(canary_page, top_page_below, "the canary shares the top page of the stack below");
        }
        for stack in &stacks {
            assert_eq!(stack.top() as usize % 16, 0);
            assert!(stack.canary_intact());
        }
        // Freeing the middle stack releases its pages but neither its
        // neighbours' canaries (the one above lives in its top page) nor
        // their contents.
        let rest = stacks.split_off(3);
        let mut stacks = stacks.into_iter();
        let (above, middle, below) = (stacks.next().unwrap(), stacks.next().unwrap(), stacks.next().unwrap());
        let word_below = below.top().wrapping_sub(8).cast::<u64>();
        // SAFETY: the top word of a stack this test owns and does not run on.
        unsafe { word_below.write(42) };
        // SAFETY: allocated above, never run on.
        unsafe { allocator.free(middle) };
        assert!(above.canary_intact(), "freeing the stack below wiped the canary above it");
        assert!(below.canary_intact());
        // SAFETY: as above.
        assert_eq!(unsafe { word_below.read() }, 42);
        // Trimming keeps the canary too.
        allocator.trim(&above, 0);
        assert!(above.canary_intact(), "trimming released the canary's page");
        // SAFETY: allocated above, never run on.
        unsafe {
            allocator.free(above);
            allocator.free(below);
        }
        for stack in rest {
            // SAFETY: allocated above, never run on.
            unsafe { allocator.free(stack) };
        }
    }

    /// Resident pages of `[start, start + length)`.
    fn resident_pages(start: usize, length: usize) -> usize {
        let page = page_size();
        let mut vector = vec![0u8; length.div_ceil(page)];
        // SAFETY: a mapped, page-aligned range; `vector` has one byte per
        // page.
        let status = unsafe { libc::mincore(start as *mut libc::c_void, length, vector.as_mut_ptr()) };
        assert_eq!(status, 0);
        vector.iter().filter(|&&byte| byte & 1 != 0).count()
    }

    #[test]
    fn a_chunk_whose_stacks_are_all_free_holds_no_memory() {
        let page = page_size();
        let allocator = StackAllocator::new(0);
        let stacks: Vec<Stack> = (0..CHUNK_STACKS).map(|_| allocator.allocate(4 * page).unwrap()).collect();
        let (mapped, length) = {
            let pool = allocator.pool.lock();
            assert_eq!(pool.chunks.len(), 1);
            (pool.chunks[0].mapped, pool.chunks[0].length)
        };
        for stack in &stacks {
            // SAFETY: every word of a stack this test owns and does not
            // run on, the canary excepted.
            unsafe { core::ptr::write_bytes(stack.bottom().add(8), 0xAB, stack.size() - 8) };
        }
        assert_eq!(resident_pages(mapped, length), length / page, "every page touched");
        // Free every other stack: their inner pages go, the shared edge
        // pages stay (each holds a live neighbour's canary or top).
        let (even, odd): (Vec<_>, Vec<_>) = stacks.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
        for (_, stack) in even {
            // SAFETY: allocated above, never run on.
            unsafe { allocator.free(stack) };
        }
        for (_, stack) in &odd {
            assert!(stack.canary_intact());
        }
        let half = resident_pages(mapped, length);
        assert!(half < length / page && half > CHUNK_STACKS, "{half} pages resident");
        for (_, stack) in odd {
            // SAFETY: allocated above, never run on.
            unsafe { allocator.free(stack) };
        }
        assert_eq!(resident_pages(mapped, length), 0, "the last free released the shared pages");
    }

    #[test]
    fn zero_budget_means_canary_only_and_large_stacks_get_small_chunks() {
        let allocator = StackAllocator::new(0);
        let big = allocator.allocate(CHUNK_BYTES).unwrap();
        assert_eq!(big.guard(), StackGuard::Canary);
        assert!(big.canary_intact());
        // SAFETY: allocated above, never run on.
        unsafe { allocator.free(big) };
    }
}
