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
//!    fault ([`crate::Platform::report_overflow`]) and aborts. An overflow that jumps past the canary can reach the
//!    neighbouring stack before it is noticed; that is the price of the
//!    millionth process, and why guard pages come first.
//! 4. Canary stacks are never unmapped while the platform lives: `free_stack`
//!    releases their pages (`MADV_DONTNEED`) and puts them on a per-size free
//!    list, and the next allocation of that size takes them from there. The
//!    free lists reserve room for every stack carved, so giving one back never
//!    allocates. Chunks are unmapped when the platform is dropped with no
//!    canary stack outstanding, and leaked otherwise (a `Stack` must not
//!    dangle because its platform went away).
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
/// Chunks are kept below this many bytes (fewer stacks per chunk for large
/// stacks, at least one).
pub const CHUNK_BYTES: usize = 64 << 20;
/// Largest stack we try to map.
pub const MAX_STACK_SIZE: usize = 1 << 40;
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
    /// Bottoms of free stacks. Capacity ≥ every stack of this size carved.
    free: Vec<usize>,
    carved: usize,
}

#[derive(Debug, Default)]
struct Pool {
    classes: Vec<SizeClass>,
    /// Every chunk mapping: start and length.
    chunks: Vec<(usize, usize)>,
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
            let bottom = pool.class_mut(rounded).and_then(|class| class.free.pop());
            if bottom.is_some() {
                pool.outstanding += 1;
            }
            bottom
        };
        let bottom = match reused {
            Some(bottom) => bottom,
            None => self.carve_chunk(rounded, requested)?,
        };
        // SAFETY: `bottom` starts a free, page-aligned, `rounded`-byte stack
        // in a live chunk mapping, now owned by the handle made below.
        unsafe { (bottom as *mut u64).write(STACK_CANARY) };
        let Some(bottom) = NonNull::new(bottom as *mut u8) else {
            return Err(StackError::OutOfMemory);
        };
        // SAFETY: the range is a read-write part of a chunk owned by this
        // allocator and handed to no one else; its top is page-aligned; it
        // has no guard page and carries the canary.
        Ok(unsafe { Stack::from_raw(bottom, rounded, StackGuard::Canary) })
    }

    /// Maps a chunk of `rounded`-byte stacks, files all but one on the free
    /// list and returns the bottom of that one (counted as outstanding).
    fn carve_chunk(&self, rounded: usize, requested: usize) -> Result<usize, StackError> {
        let count = (CHUNK_BYTES / rounded).clamp(1, CHUNK_STACKS);
        let length = count.checked_mul(rounded).ok_or(StackError::InvalidSize(requested))?;
        let base = map_anonymous(length).map_err(|error| map_error(error, requested))?;
        let mut pool = self.pool.lock();
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
            class.free.extend((0..count - 1).rev().map(|index| base + index * rounded));
            Some(())
        })();
        if booked.is_none() {
            drop(pool);
            // SAFETY: the chunk was mapped above and nothing refers to it.
            unsafe { libc::munmap(base as *mut libc::c_void, length) };
            return Err(StackError::OutOfMemory);
        }
        pool.chunks.push((base, length));
        pool.outstanding += 1;
        Ok(base + (count - 1) * rounded)
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
                // SAFETY: the stack's range lies inside a chunk we mapped;
                // its contents are dead.
                unsafe { libc::madvise(stack.bottom().cast(), stack.size(), libc::MADV_DONTNEED) };
                let mut pool = self.pool.lock();
                let Some(class) = pool.class_mut(stack.size()) else {
                    debug_assert!(false, "canary stack of unknown size {} freed", stack.size());
                    return;
                };
                // Capacity for every carved stack was reserved when carving.
                if class.free.len() < class.free.capacity() {
                    class.free.push(bottom);
                }
                pool.outstanding = pool.outstanding.saturating_sub(1);
            }
        }
    }

    pub(crate) fn trim(&self, stack: &Stack, keep_top_bytes: usize) {
        let page = page_size();
        let Some(keep) = round_up(keep_top_bytes, page) else { return };
        let bottom = stack.bottom() as usize;
        // A canary stack keeps its bottom page, where the canary lives.
        let release_from = match stack.guard() {
            StackGuard::GuardPage => bottom,
            StackGuard::Canary => bottom + page,
        };
        let release_to = (stack.top() as usize).saturating_sub(keep);
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
        for &(base, length) in &pool.chunks {
            // SAFETY: no canary stack is outstanding, so no one refers to the
            // chunk memory any more.
            unsafe { libc::munmap(base as *mut libc::c_void, length) };
        }
        pool.chunks.clear();
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
    fn zero_budget_means_canary_only_and_large_stacks_get_small_chunks() {
        let allocator = StackAllocator::new(0);
        let big = allocator.allocate(CHUNK_BYTES).unwrap();
        assert_eq!(big.guard(), StackGuard::Canary);
        assert!(big.canary_intact());
        // SAFETY: allocated above, never run on.
        unsafe { allocator.free(big) };
    }
}
