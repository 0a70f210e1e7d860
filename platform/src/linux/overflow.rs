//! Stack-overflow reports: a process-wide registry of guard pages and the
//! SIGSEGV / SIGBUS handler that reads it.
//!
//! Invariant: the handler reads only atomics and the stack it runs on — no
//! allocation, no lock, no libc call that is not async-signal-safe
//! (`write`, `sigaction`, `raise`). Everything that allocates or locks
//! (registering and removing guards) runs outside signal context.
//!
//! # The registry
//!
//! Slots live in segments of [`SEGMENT_ENTRIES`] entries, allocated on
//! demand and never freed, hung off a fixed table of [`SEGMENTS`] atomic
//! pointers — up to [`REGISTRY_CAPACITY`] guard pages. An entry is
//! published by storing its guard address last (Release); the handler loads
//! that address first (Acquire) and only then reads size and tag. Removal
//! stores 0 into the guard address. Free slot numbers sit on a
//! spin-locked stack whose capacity is reserved at registration, so removal
//! never allocates.
//!
//! # Tags
//!
//! Each entry carries a `u64` tag (see [`crate::stack_tag`]): the core stores
//! `(generation << 32) | index` of the process on that stack, and the report
//! prints it as `index.generation`; tag 0 prints as `unknown`.
//!
//! # Reports
//!
//! A fault inside a registered guard page prints one line to stderr,
//!
//! ```text
//! smarm: stack overflow in process 5.2 (stack bottom 0x7f3a0c001000, size 262144 bytes) — fault at 0x7f3a0c000ff8
//! ```
//!
//! (the [`OverflowReport`] line, shared with the other ways an overflow is
//! found), then restores the default SIGSEGV / SIGBUS action and returns: the
//! faulting access runs again and the process dies of SIGSEGV with a core
//! dump showing the overflowing frame. A fault anywhere else goes to the
//! handler that was installed before ours (Rust's std has one for thread
//! stacks); if there was none, the default action is restored and the signal
//! raised again, so an ordinary crash stays an ordinary crash.
//!
//! The handler runs on the faulting thread's alternate signal stack: without
//! one ([`ensure_alt_stack`]), a handler for an overflow would run on the
//! exhausted stack itself and the kernel would kill the process without a
//! report.
//!
//! An overflow of a canary stack (no guard page) is found by the core when
//! the process switches out, not by a fault; [`crate::Platform::report_overflow`] prints the
//! same line for it, naming the evidence instead of a fault address, and
//! aborts.

use core::fmt::Write;
use core::marker::PhantomData;
use core::ptr;

use alloc::vec::Vec;

use super::sys::{cached_page_size, errno, page_size, write_all, MessageBuffer, OsError};
use crate::sync::{AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering, SpinLock};
use crate::{OverflowEvidence, OverflowReport};

/// Entries per registry segment.
pub const SEGMENT_ENTRIES: usize = 4096;
/// Segments in the registry table.
pub const SEGMENTS: usize = 256;
/// Most guard pages that can be registered at once (1,048,576).
pub const REGISTRY_CAPACITY: usize = SEGMENT_ENTRIES * SEGMENTS;

/// One registered guard page.
struct Entry {
    /// Lowest address of the guard page; 0 = slot unused.
    guard_start: AtomicUsize,
    /// Usable bytes of the stack directly above the guard page.
    stack_size: AtomicUsize,
    /// The owner's tag (0 = unknown).
    tag: AtomicU64,
}

impl Entry {
    const fn new() -> Self {
        Entry { guard_start: AtomicUsize::new(0), stack_size: AtomicUsize::new(0), tag: AtomicU64::new(0) }
    }
}

/// Each pointer is null or the first of `SEGMENT_ENTRIES` entries that live
/// for the rest of the process.
static SEGMENT_TABLE: [AtomicPtr<Entry>; SEGMENTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SEGMENTS];
/// Slot numbers below this have been handed out at least once (and their
/// segment is published); the handler scans `0..HIGH_WATER`.
static HIGH_WATER: AtomicUsize = AtomicUsize::new(0);
/// Slot numbers free for reuse.
static FREE_SLOTS: SpinLock<Vec<u32>> = SpinLock::new(Vec::new());

fn entry(slot: usize) -> Option<&'static Entry> {
    let segment = SEGMENT_TABLE.get(slot / SEGMENT_ENTRIES)?.load(Ordering::Acquire);
    if segment.is_null() {
        return None;
    }
    // SAFETY: a non-null table pointer (loaded with Acquire, pairing with the
    // Release that published it) points to `SEGMENT_ENTRIES` initialised
    // entries that are never freed, and `slot % SEGMENT_ENTRIES` is in
    // bounds.
    Some(unsafe { &*segment.add(slot % SEGMENT_ENTRIES) })
}

/// Records the guard page at `guard_start` below a stack of `stack_size`
/// bytes. Returns the slot, or `None` when the registry is full or memory
/// for a new segment cannot be had: the guard page still protects, the
/// report is just less specific.
pub(crate) fn register(guard_start: usize, stack_size: usize) -> Option<usize> {
    debug_assert!(guard_start != 0);
    let mut free = FREE_SLOTS.lock();
    let slot = match free.pop() {
        Some(slot) => slot as usize,
        None => {
            let slot = HIGH_WATER.load(Ordering::Relaxed);
            if slot >= REGISTRY_CAPACITY {
                return None;
            }
            let table_entry = SEGMENT_TABLE.get(slot / SEGMENT_ENTRIES)?;
            if table_entry.load(Ordering::Relaxed).is_null() {
                let mut segment: Vec<Entry> = Vec::new();
                segment.try_reserve_exact(SEGMENT_ENTRIES).ok()?;
                segment.extend((0..SEGMENT_ENTRIES).map(|_| Entry::new()));
                let leaked: &'static mut [Entry] = segment.leak();
                // Release: the handler's Acquire load sees initialised entries.
                table_entry.store(leaked.as_mut_ptr(), Ordering::Release);
            }
            // Reserve room to give the slot back later without allocating.
            let additional = slot + 1 - free.len();
            free.try_reserve(additional).ok()?;
            // Release: a scan that sees the new high water sees the segment.
            HIGH_WATER.store(slot + 1, Ordering::Release);
            slot
        }
    };
    drop(free);
    let Some(found) = entry(slot) else {
        debug_assert!(false, "registry slot {slot} handed out without a segment");
        return None;
    };
    found.stack_size.store(stack_size, Ordering::Relaxed);
    found.tag.store(0, Ordering::Relaxed);
    // Release: whoever sees this address sees the size and tag above.
    found.guard_start.store(guard_start, Ordering::Release);
    Some(slot)
}

/// Forgets the guard page at `guard_start` held in `slot`.
pub(crate) fn unregister(slot: usize, guard_start: usize) {
    let Some(found) = entry(slot) else { return };
    if found.guard_start.compare_exchange(guard_start, 0, Ordering::AcqRel, Ordering::Relaxed).is_err() {
        debug_assert!(false, "registry slot {slot} does not hold guard {guard_start:#x}");
        return;
    }
    let mut free = FREE_SLOTS.lock();
    // Capacity for every slot ever handed out was reserved in `register`.
    if free.len() < free.capacity() {
        free.push(slot as u32);
    }
}

/// Sets the tag of the guard page at `guard_start` held in `slot`.
pub(crate) fn set_tag(slot: usize, guard_start: usize, tag: u64) {
    let Some(found) = entry(slot) else { return };
    if found.guard_start.load(Ordering::Acquire) == guard_start {
        // Relaxed: the tag is advisory; the handler reads whatever is there.
        found.tag.store(tag, Ordering::Relaxed);
    }
}

/// What the registry knows about a guard page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GuardHit {
    pub(crate) guard_start: usize,
    pub(crate) stack_size: usize,
    pub(crate) tag: u64,
}

/// The registered guard page containing `address`. Async-signal-safe.
pub(crate) fn lookup(address: usize) -> Option<GuardHit> {
    let page = cached_page_size();
    let high_water = HIGH_WATER.load(Ordering::Acquire);
    for slot in 0..high_water {
        let Some(found) = entry(slot) else { continue };
        let guard_start = found.guard_start.load(Ordering::Acquire);
        if guard_start != 0 && address >= guard_start && address - guard_start < page {
            return Some(GuardHit {
                guard_start,
                stack_size: found.stack_size.load(Ordering::Relaxed),
                tag: found.tag.load(Ordering::Relaxed),
            });
        }
    }
    None
}

/// Formats the report line (newline included) for a fault at
/// `fault_address` in `hit`. Async-signal-safe.
pub(crate) fn format_report(hit: GuardHit, fault_address: usize, page: usize) -> MessageBuffer {
    format_line(OverflowReport {
        tag: hit.tag,
        stack_bottom: hit.guard_start.wrapping_add(page),
        stack_size: hit.stack_size,
        evidence: OverflowEvidence::Fault(fault_address),
    })
}

/// `report` and a newline, in a buffer. Async-signal-safe: the formatting
/// neither allocates nor locks, and text that does not fit is cut off.
fn format_line(report: OverflowReport) -> MessageBuffer {
    let mut message = MessageBuffer::new();
    // The buffer's writer never fails; it cuts off instead.
    let _ = writeln!(message, "{report}");
    message
}

/// Prints `report` on stderr as the fault handler would and aborts: the
/// Linux backend's [`crate::Platform::report_overflow`]. Used for
/// overflows found at a switch out (canary stacks, the stack-pointer check),
/// which no fault announced.
pub(crate) fn report_and_abort(report: OverflowReport) -> ! {
    let message = format_line(report);
    write_all(libc::STDERR_FILENO, message.as_bytes());
    // SAFETY: abort has no preconditions; it ends the process with SIGABRT
    // (and a core dump where enabled) without running anything of ours.
    unsafe { libc::abort() }
}

// ---------------------------------------------------------------------------
// The handler.

/// The handlers that were installed before ours, indexed by [`signal_index`]:
/// `sa_sigaction` and `sa_flags`. Written before ours is installed, read by
/// ours.
static PREVIOUS_HANDLER: [AtomicUsize; 2] = [const { AtomicUsize::new(libc::SIG_DFL) }; 2];
static PREVIOUS_FLAGS: [AtomicUsize; 2] = [const { AtomicUsize::new(0) }; 2];

/// 0 = not installed, 1 = being installed, 2 = installed.
static INSTALL_STATE: AtomicU8 = AtomicU8::new(0);

const HANDLED_SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

fn signal_index(signal: libc::c_int) -> usize {
    usize::from(signal != libc::SIGSEGV)
}

/// Installs the process-wide SIGSEGV and SIGBUS handler that reports
/// overflows of registered guard pages (see the module doc). Idempotent and
/// thread-safe. Each thread that runs processes also needs
/// [`ensure_alt_stack`].
pub fn install_overflow_handler() -> Result<(), OsError> {
    // Cache the page size now: the handler must not make system calls to
    // learn it.
    let _ = page_size();
    loop {
        match INSTALL_STATE.compare_exchange(0, 1, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => break,
            Err(2) => return Ok(()),
            Err(_) => core::hint::spin_loop(),
        }
    }
    for signal in HANDLED_SIGNALS {
        // SAFETY: all-zero is a valid `sigaction` (SIG_DFL, empty mask).
        let mut previous: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: a null new action only queries; `previous` is writable.
        if unsafe { libc::sigaction(signal, ptr::null(), &mut previous) } != 0 {
            let error = errno();
            INSTALL_STATE.store(0, Ordering::Release);
            return Err(OsError(error));
        }
        let index = signal_index(signal);
        if previous.sa_sigaction != on_fault as *const () as usize {
            PREVIOUS_HANDLER[index].store(previous.sa_sigaction, Ordering::Relaxed);
            PREVIOUS_FLAGS[index].store(previous.sa_flags as usize, Ordering::Relaxed);
        }
        // SAFETY: all-zero is a valid `sigaction`; the fields are set below.
        let mut action: libc::sigaction = unsafe { core::mem::zeroed() };
        action.sa_sigaction = on_fault as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `action.sa_mask` is a valid sigset to initialise.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: `action` is fully initialised and names an
        // `extern "C" fn(c_int, *mut siginfo_t, *mut c_void)` as SA_SIGINFO
        // requires; the previous action was saved above.
        if unsafe { libc::sigaction(signal, &action, ptr::null_mut()) } != 0 {
            let error = errno();
            INSTALL_STATE.store(0, Ordering::Release);
            return Err(OsError(error));
        }
    }
    INSTALL_STATE.store(2, Ordering::Release);
    Ok(())
}

/// Puts the default action back for both signals. Async-signal-safe.
fn restore_default_actions() {
    for signal in HANDLED_SIGNALS {
        // SAFETY: all-zero is SIG_DFL with an empty mask and no flags.
        let action: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: `action` is a valid, initialised sigaction.
        unsafe { libc::sigaction(signal, &action, ptr::null_mut()) };
    }
}

extern "C" fn on_fault(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let fault_address = if info.is_null() {
        0
    } else {
        // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers,
        // and SIGSEGV / SIGBUS carry a fault address.
        unsafe { (*info).si_addr() as usize }
    };
    if let Some(hit) = lookup(fault_address) {
        let message = format_report(hit, fault_address, cached_page_size());
        write_all(libc::STDERR_FILENO, message.as_bytes());
        // Returning re-runs the faulting access, which now takes the
        // default action: death by SIGSEGV, core dump at the real frame.
        restore_default_actions();
        return;
    }
    let index = signal_index(signal);
    let previous = PREVIOUS_HANDLER[index].load(Ordering::Relaxed);
    let flags = PREVIOUS_FLAGS[index].load(Ordering::Relaxed) as libc::c_int;
    if previous == libc::SIG_DFL || previous == libc::SIG_IGN {
        // An ignored hardware fault would loop forever: treat it as default.
        restore_default_actions();
        // The signal is blocked while we run, so the raise stays pending and
        // kills the process as soon as we return, whether the fault was a
        // real access or a `kill`.
        // SAFETY: raise is async-signal-safe.
        unsafe { libc::raise(signal) };
        return;
    }
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO, so
        // its value is a function of exactly this signature, and we pass
        // along the arguments the kernel gave us.
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { core::mem::transmute(previous) };
        handler(signal, info, context);
    } else {
        // SAFETY: without SA_SIGINFO the previous value is a plain
        // `extern "C" fn(c_int)` handler (SIG_DFL / SIG_IGN handled above).
        let handler: extern "C" fn(libc::c_int) = unsafe { core::mem::transmute(previous) };
        handler(signal);
    }
}

// ---------------------------------------------------------------------------
// Alternate signal stacks.

/// Smallest alternate stack we accept from someone else (std's threads have
/// one of at least this size).
const MIN_ALT_STACK: usize = 8 * 1024;
/// Usable size of an alternate stack we make ourselves.
const ALT_STACK_SIZE: usize = 64 * 1024;

/// The calling thread's alternate signal stack, as arranged by
/// [`ensure_alt_stack`]. If this handle made the stack, dropping it (on the
/// same thread: the handle is not `Send`) puts the previous one back and
/// unmaps ours; if the thread already had a suitable stack, dropping does
/// nothing. Bind it (`let _alt = …`, not `let _ = …`) or [`AltStack::leak`]
/// it: dropping it at once takes the stack away again.
#[derive(Debug)]
#[must_use = "dropping the handle removes the alternate stack it installed"]
pub struct AltStack {
    /// Our mapping (guard page included): start and length.
    mapping: Option<(usize, usize)>,
    previous: libc::stack_t,
    _same_thread: PhantomData<*mut ()>,
}

impl AltStack {
    /// Whether this handle installed a stack of its own (rather than finding
    /// a suitable one in place).
    pub fn installed_here(&self) -> bool {
        self.mapping.is_some()
    }

    /// Keeps the alternate stack for the rest of the thread's life. Its
    /// memory (64 KiB of address space, committed only where a handler ran)
    /// is not reclaimed when the thread exits.
    pub fn leak(self) {
        core::mem::forget(self);
    }
}

/// Makes sure the calling thread has an alternate signal stack, so the
/// overflow handler can run when a process's stack is exhausted. Call it on
/// every thread that runs processes, and keep the returned handle alive for
/// as long as the thread runs them.
pub fn ensure_alt_stack() -> Result<AltStack, OsError> {
    // SAFETY: all-zero is a valid stack_t to be overwritten.
    let mut current: libc::stack_t = unsafe { core::mem::zeroed() };
    // SAFETY: a null new stack only queries; `current` is writable.
    if unsafe { libc::sigaltstack(ptr::null(), &mut current) } != 0 {
        return Err(OsError(errno()));
    }
    if current.ss_flags & libc::SS_DISABLE == 0 && current.ss_size >= MIN_ALT_STACK {
        return Ok(AltStack { mapping: None, previous: current, _same_thread: PhantomData });
    }
    let page = page_size();
    let length = ALT_STACK_SIZE + page;
    // SAFETY: an anonymous private mapping at an address of the kernel's
    // choosing touches no existing memory.
    let base = unsafe {
        libc::mmap(
            ptr::null_mut(),
            length,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(OsError(errno()));
    }
    // A guard page below the alternate stack too: a runaway handler faults
    // instead of scribbling. Failure to protect is not fatal.
    // SAFETY: the first page of the mapping we just made.
    unsafe { libc::mprotect(base, page, libc::PROT_NONE) };
    let stack = libc::stack_t {
        // SAFETY: `page < length`, so this stays inside the mapping.
        ss_sp: unsafe { base.cast::<u8>().add(page) }.cast(),
        ss_flags: 0,
        ss_size: ALT_STACK_SIZE,
    };
    // SAFETY: `stack` describes writable memory owned by the returned handle.
    if unsafe { libc::sigaltstack(&stack, ptr::null_mut()) } != 0 {
        let error = errno();
        // SAFETY: unmapping the mapping made above, which no one uses.
        unsafe { libc::munmap(base, length) };
        return Err(OsError(error));
    }
    Ok(AltStack { mapping: Some((base as usize, length)), previous: current, _same_thread: PhantomData })
}

impl Drop for AltStack {
    fn drop(&mut self) {
        let Some((base, length)) = self.mapping else { return };
        let mut restore = self.previous;
        // SS_ONSTACK is a status bit, not an input.
        restore.ss_flags &= !libc::SS_ONSTACK;
        if restore.ss_flags & libc::SS_DISABLE != 0 {
            restore = libc::stack_t { ss_sp: ptr::null_mut(), ss_flags: libc::SS_DISABLE, ss_size: 0 };
        }
        // SAFETY: `restore` is the stack this thread had before (or
        // "disabled"), which outlives this call.
        if unsafe { libc::sigaltstack(&restore, ptr::null_mut()) } != 0 {
            // Still in use (we are on it): leak the mapping rather than free
            // memory the kernel may deliver signals onto.
            return;
        }
        // SAFETY: the mapping made in `ensure_alt_stack`, no longer the
        // thread's alternate stack.
        unsafe { libc::munmap(base as *mut libc::c_void, length) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_names_pid_size_and_addresses() {
        let hit = GuardHit { guard_start: 0x1000, stack_size: 262_144, tag: crate::stack_tag(5, 2) };
        let message = format_report(hit, 0x1ff8, 0x1000);
        assert_eq!(
            core::str::from_utf8(message.as_bytes()).unwrap(),
            "smarm: stack overflow in process 5.2 (stack bottom 0x2000, size 262144 bytes) \u{2014} fault at 0x1ff8\n"
        );
        let untagged = format_report(GuardHit { tag: 0, ..hit }, 0x1ff8, 0x1000);
        assert!(core::str::from_utf8(untagged.as_bytes()).unwrap().contains("in process unknown ("));
    }

    #[test]
    fn switch_out_reports_share_the_line() {
        let report = |evidence| OverflowReport {
            tag: crate::stack_tag(7, 1),
            stack_bottom: 0x4000,
            stack_size: 65_536,
            evidence,
        };
        let canary = format_line(report(OverflowEvidence::CanaryOverwritten));
        assert_eq!(
            core::str::from_utf8(canary.as_bytes()).unwrap(),
            "smarm: stack overflow in process 7.1 (stack bottom 0x4000, size 65536 bytes) \u{2014} canary overwritten (seen at a switch out)\n"
        );
        let sp = format_line(report(OverflowEvidence::StackPointer(0x3f00)));
        assert!(core::str::from_utf8(sp.as_bytes())
            .unwrap()
            .ends_with("\u{2014} stack pointer 0x3f00 below the stack (seen at a switch out)\n"));
    }

    #[test]
    fn registry_round_trip() {
        // Addresses that no real mapping uses in this test process.
        let guard = 0x10_0000_0000usize;
        let slot = register(guard, 8192).unwrap();
        set_tag(slot, guard, 7);
        let hit = lookup(guard + 8).unwrap();
        assert_eq!((hit.guard_start, hit.stack_size, hit.tag), (guard, 8192, 7));
        assert!(lookup(guard + cached_page_size()).is_none_or(|other| other.guard_start != guard));
        unregister(slot, guard);
        assert!(lookup(guard + 8).is_none_or(|other| other.guard_start != guard));
    }
}
