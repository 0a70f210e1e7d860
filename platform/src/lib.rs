//! What smarm needs from its environment, and nothing more.
//!
//! A port of smarm to a new OS or board implements [`Platform`] and passes
//! the conformance kit in [`conformance`]. Two backends ship here:
//! `linux` (feature `linux`: libc clock, mmap'd stacks with guard pages,
//! futex parking, epoll readiness) and [`bare`] (polling, over a small
//! [`bare::Board`] trait a bare-metal image supplies).
//!
//! The trait is object-safe: the core holds a `&'static dyn Platform` /
//! `Arc<dyn Platform>` and never names a backend.
#![cfg_attr(not(test), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]

extern crate alloc;

pub mod bare;
pub mod conformance;
#[cfg(all(feature = "linux", target_os = "linux"))]
pub mod linux;
mod sync;

use core::fmt;
use core::ptr::NonNull;

use crate::sync::AtomicU32;

/// Nanoseconds on the platform's monotonic clock (arbitrary origin).
pub type Nanos = u64;

/// A file descriptor (or the platform's equivalent readiness handle).
pub type RawFd = i32;

/// How a stack is protected against overflow.
///
/// A word wide, like the other fields of [`Stack`]: a stack handle is
/// moved at every spawn and exit, and a byte-wide field's padding is
/// copied with overlapping narrow moves that stall the copy's loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum StackGuard {
    /// An inaccessible page sits directly below the usable range: an
    /// overflow faults.
    GuardPage,
    /// No guard page; a canary word sits at the lowest usable address and
    /// is checked with [`Stack::canary_intact`] (on switch-out).
    Canary,
}

/// Value written at the bottom of a [`StackGuard::Canary`] stack.
pub const STACK_CANARY: u64 = 0x5AA5_C0DE_F00D_5AA5;

/// A stack handed out by [`Platform::allocate_stack`]. Usable memory is
/// `[bottom, bottom + size)`; the stack grows down from `top()`.
#[derive(Debug)]
pub struct Stack {
    bottom: NonNull<u8>,
    size: usize,
    guard: StackGuard,
    /// Bookkeeping private to the backend that made the stack (the Linux
    /// backend keeps its guard-registry slot here); 0 from [`Stack::from_raw`].
    backend_word: usize,
}

// SAFETY: a Stack is an owned handle to memory no one else references; it
// may be handed between threads like a Box.
unsafe impl Send for Stack {}

impl Stack {
    /// Wraps a raw range.
    ///
    /// # Safety
    ///
    /// `[bottom, bottom + size)` must be writable memory owned exclusively by
    /// the returned `Stack` until it is given back to the platform that made
    /// it, `bottom + size` must be 16-byte aligned, and `guard` must describe
    /// the protection truthfully.
    pub unsafe fn from_raw(bottom: NonNull<u8>, size: usize, guard: StackGuard) -> Stack {
        Stack { bottom, size, guard, backend_word: 0 }
    }
    /// Attaches backend bookkeeping (see the field doc). Safe: backends treat
    /// the word as a hint they validate, never as a pointer.
    #[cfg_attr(not(all(feature = "linux", target_os = "linux")), allow(dead_code))]
    pub(crate) fn with_backend_word(mut self, word: usize) -> Stack {
        self.backend_word = word;
        self
    }
    #[cfg_attr(not(all(feature = "linux", target_os = "linux")), allow(dead_code))]
    pub(crate) fn backend_word(&self) -> usize {
        self.backend_word
    }
    /// Lowest usable address.
    pub fn bottom(&self) -> *mut u8 {
        self.bottom.as_ptr()
    }
    /// One past the highest usable address (16-byte aligned).
    pub fn top(&self) -> *mut u8 {
        self.bottom.as_ptr().wrapping_add(self.size)
    }
    /// Usable bytes.
    pub fn size(&self) -> usize {
        self.size
    }
    /// How overflow is detected on this stack.
    pub fn guard(&self) -> StackGuard {
        self.guard
    }
    /// For a [`StackGuard::Canary`] stack, whether the canary at the bottom
    /// is intact; always `true` for a guard-page stack.
    pub fn canary_intact(&self) -> bool {
        match self.guard {
            StackGuard::GuardPage => true,
            // SAFETY: the bottom word lies inside the usable range this
            // handle owns; it is 8-byte aligned because allocators hand out
            // page- or 16-aligned ranges.
            StackGuard::Canary => unsafe {
                (self.bottom.as_ptr() as *const u64).read_volatile() == STACK_CANARY
            },
        }
    }
}

/// What showed that a process overran its stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverflowEvidence {
    /// An access faulted in the guard page below the stack, at this
    /// address.
    Fault(usize),
    /// The canary at the bottom of a [`StackGuard::Canary`] stack was
    /// overwritten, as seen when the process switched out.
    CanaryOverwritten,
    /// The stack pointer saved when the process switched out (this value)
    /// lay below the stack's usable bottom.
    StackPointer(usize),
}

/// One stack-overflow report: the line every backend prints, whatever
/// caught the overflow. Its [`Display`](fmt::Display) form (no trailing
/// newline) is
///
/// ```text
/// smarm: stack overflow in process 5.2 (stack bottom 0x7f3a0c001000, size 262144 bytes) — fault at 0x7f3a0c000ff8
/// ```
///
/// where `5.2` is the tag's `index.generation` (see [`stack_tag`]; tag 0
/// prints as `unknown`) and the part after the dash names the
/// [`OverflowEvidence`]. Formatting allocates nothing and takes no lock, so
/// a signal handler may use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverflowReport {
    /// The owner's tag, as given to [`Platform::set_stack_tag`].
    pub tag: u64,
    /// Lowest usable address of the stack.
    pub stack_bottom: usize,
    /// Usable bytes of the stack.
    pub stack_size: usize,
    /// What showed the overflow.
    pub evidence: OverflowEvidence,
}

impl OverflowReport {
    /// The report for `stack`, owned by `tag`.
    pub fn new(stack: &Stack, tag: u64, evidence: OverflowEvidence) -> OverflowReport {
        OverflowReport { tag, stack_bottom: stack.bottom() as usize, stack_size: stack.size(), evidence }
    }
}

impl fmt::Display for OverflowReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("smarm: stack overflow in process ")?;
        if self.tag == 0 {
            f.write_str("unknown")?;
        } else {
            write!(f, "{}.{}", self.tag & 0xffff_ffff, self.tag >> 32)?;
        }
        write!(f, " (stack bottom {:#x}, size {} bytes) \u{2014} ", self.stack_bottom, self.stack_size)?;
        match self.evidence {
            OverflowEvidence::Fault(address) => write!(f, "fault at {address:#x}"),
            OverflowEvidence::CanaryOverwritten => f.write_str("canary overwritten (seen at a switch out)"),
            OverflowEvidence::StackPointer(sp) => {
                write!(f, "stack pointer {sp:#x} below the stack (seen at a switch out)")
            }
        }
    }
}

/// Why a stack could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackError {
    /// The size is zero or too large to map.
    InvalidSize(usize),
    /// The platform is out of memory (or mappings) for stacks.
    OutOfMemory,
}

impl fmt::Display for StackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StackError::InvalidSize(n) => {
                write!(f, "invalid stack size {n}: use a non-zero size below the address space")
            }
            StackError::OutOfMemory => {
                f.write_str("out of memory for stacks: lower max_processes or stack_size")
            }
        }
    }
}
impl core::error::Error for StackError {}

/// The word an idle worker driver parks on. A wake that arrives before the
/// park is remembered (the token is set) and makes the next park return at
/// once.
///
/// One driver parks on a token at a time; any number of threads may unpark
/// it.
#[derive(Debug, Default)]
pub struct ParkToken {
    /// 0 = no wake pending, 1 = wake pending. Backends may park on it as a
    /// futex word and may use further values while a driver sleeps (the
    /// Linux backend uses 2 = "a driver sleeps here", so that an `unpark`
    /// with nobody asleep costs no system call).
    pub state: AtomicU32,
}

impl ParkToken {
    /// A token with no pending wake.
    pub const fn new() -> Self {
        ParkToken { state: AtomicU32::new(0) }
    }
}

/// Readiness interest for a file descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    /// Wake when readable (or hung up).
    pub readable: bool,
    /// Wake when writable.
    pub writable: bool,
}

impl Interest {
    /// Readable only.
    pub const READABLE: Interest = Interest { readable: true, writable: false };
    /// Writable only.
    pub const WRITABLE: Interest = Interest { readable: false, writable: true };
}

/// One readiness event from [`Platform::poll`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Event {
    /// The token given at registration.
    pub token: u64,
    /// Readable (or hung up / error).
    pub readable: bool,
    /// Writable.
    pub writable: bool,
    /// The peer will send nothing more, or the socket failed (hang-up,
    /// read hang-up, error): reads return at once from now on, whatever
    /// later edges say.
    pub read_closed: bool,
    /// The socket hung up or failed: writes return at once (with the
    /// error) from now on.
    pub write_closed: bool,
}

/// Why a readiness operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollError {
    /// This platform has no file-descriptor readiness.
    Unsupported,
    /// The descriptor is already registered.
    AlreadyRegistered,
    /// The descriptor is not registered (or not valid).
    NotRegistered,
    /// The OS said no; the value is its error number.
    Os(i32),
}

impl fmt::Display for PollError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PollError::Unsupported => f.write_str("this platform has no file-descriptor readiness"),
            PollError::AlreadyRegistered => f.write_str("file descriptor already registered with the poller"),
            PollError::NotRegistered => f.write_str("file descriptor not registered with the poller"),
            PollError::Os(e) => write!(f, "readiness poll failed: os error {e}"),
        }
    }
}
impl core::error::Error for PollError {}

/// The tag for [`Platform::set_stack_tag`] naming the process
/// `index.generation`: `(generation << 32) | index`. Tag 0 means "unknown",
/// so pid `0.0` cannot be told from an untagged stack; the core starts
/// generations at 1.
pub const fn stack_tag(index: u32, generation: u32) -> u64 {
    ((generation as u64) << 32) | index as u64
}

/// What smarm needs from its environment.
///
/// All methods take `&self` so the trait is object-safe.
pub trait Platform: Send + Sync + 'static {
    /// Short name ("linux", "bare").
    fn name(&self) -> &'static str;

    /// Monotonic time in nanoseconds. Never goes backwards.
    fn now(&self) -> Nanos;

    /// Allocates a stack with at least `size` usable bytes, guarded by a
    /// guard page where the platform can, else by a canary.
    fn allocate_stack(&self, size: usize) -> Result<Stack, StackError>;

    /// Gives a stack back.
    ///
    /// # Safety
    ///
    /// `stack` must come from this platform's `allocate_stack`, and no
    /// context may run on it or be switched to again.
    unsafe fn free_stack(&self, stack: Stack);

    /// Releases the resident pages of `stack` below `keep_top_bytes` from
    /// its top (e.g. `madvise(MADV_DONTNEED)`), keeping the mapping. Used by
    /// stack pools on recycled stacks. Default: does nothing.
    fn trim_stack(&self, stack: &Stack, keep_top_bytes: usize) {
        let _ = (stack, keep_top_bytes);
    }

    /// Labels `stack` with `tag` so that an overflow report can name its
    /// owner; the core passes [`stack_tag`]`(index, generation)` of the
    /// process running on it, and 0 ("unknown") when the stack goes back to
    /// a pool. Default: does nothing (backends without overflow reports).
    fn set_stack_tag(&self, stack: &Stack, tag: u64) {
        let _ = (stack, tag);
    }

    /// Reports that the process tagged `tag` (see [`Platform::set_stack_tag`])
    /// overran `stack`, as `evidence` shows, and ends the program: the memory
    /// below the stack may be corrupt, so nothing else may run. The report is
    /// the [`OverflowReport`] line, the same one a guard-page fault prints.
    /// Called by the core when a process switches out with its stack pointer
    /// below `stack` or its canary gone. Linux: the line on stderr, then
    /// `abort`. Bare: the line on the board console, then
    /// [`bare::Board::exit`] with [`bare::OVERFLOW_EXIT_STATUS`].
    fn report_overflow(&self, stack: &Stack, tag: u64, evidence: OverflowEvidence) -> !;

    /// Parks the calling driver until `token` is woken or `deadline` (on
    /// [`Platform::now`]'s clock) passes; may return spuriously. Consumes a
    /// pending wake: a wake delivered before this call makes it return at
    /// once.
    fn park(&self, token: &ParkToken, deadline: Option<Nanos>);

    /// Wakes a driver parked (or about to park) on `token`.
    fn unpark(&self, token: &ParkToken);

    /// How many threads of execution the program has right now (OS
    /// threads, cores running code), or `None` if the platform cannot
    /// tell. A runtime reports a deadlock only when every one of them is
    /// accounted for (its own drivers, threads asleep in a smarm wait), so
    /// `None` — the default — means a deadlock is never reported, never a
    /// false one.
    fn threads(&self) -> Option<usize> {
        None
    }

    /// Registers `fd` for readiness `interest`, reported with `token`.
    /// Registrations are one-shot: after an event fires, `modify` re-arms.
    /// Default: [`PollError::Unsupported`] (a platform without readiness
    /// implements none of the four `poll` methods).
    fn poll_register(&self, fd: RawFd, token: u64, interest: Interest) -> Result<(), PollError> {
        let _ = (fd, token, interest);
        Err(PollError::Unsupported)
    }

    /// Registers `fd` once for both readiness directions, edge-triggered,
    /// reported with `token`: an event fires each time the descriptor
    /// becomes readable or writable (or hangs up, or errs) and the
    /// registration stays until [`poll_deregister`](Self::poll_deregister).
    /// The caller caches the readiness and clears it itself when a call
    /// says the descriptor would block. Default: [`PollError::Unsupported`].
    fn poll_register_edge(&self, fd: RawFd, token: u64) -> Result<(), PollError> {
        let _ = (fd, token);
        Err(PollError::Unsupported)
    }

    /// Re-arms / changes a registration. Default: [`PollError::Unsupported`].
    fn poll_modify(&self, fd: RawFd, token: u64, interest: Interest) -> Result<(), PollError> {
        let _ = (fd, token, interest);
        Err(PollError::Unsupported)
    }

    /// Removes a registration. Default: [`PollError::Unsupported`].
    fn poll_deregister(&self, fd: RawFd) -> Result<(), PollError> {
        let _ = fd;
        Err(PollError::Unsupported)
    }

    /// Waits up to `timeout` (None = forever, Some(0) = don't block) for
    /// readiness events; fills `events` and returns how many. Default:
    /// [`PollError::Unsupported`].
    fn poll(&self, events: &mut [Event], timeout: Option<Nanos>) -> Result<usize, PollError> {
        let _ = (events, timeout);
        Err(PollError::Unsupported)
    }

    /// [`park`](Self::park) that watches readiness meanwhile: the driver
    /// sleeps until a wake on `token`, `deadline`, or readiness events,
    /// which it gets in `events` (their count is returned; a wake or the
    /// deadline returns 0). This is how idle drivers poll io without a
    /// thread of its own: at most one driver at a time sleeps in the
    /// poller (the *poller seat*); while another holds it, this parks as
    /// `park` does and returns 0. `unpark` of the seat holder's token
    /// interrupts its poll. Default: [`PollError::Unsupported`] (the caller
    /// then parks with `park`).
    fn park_polling(
        &self,
        token: &ParkToken,
        deadline: Option<Nanos>,
        events: &mut [Event],
    ) -> Result<usize, PollError> {
        let _ = (token, deadline, events);
        Err(PollError::Unsupported)
    }

    /// Takes pending readiness events without blocking, for a busy driver
    /// that polls every so often. Returns 0 at once when another driver
    /// holds the poller seat (it sees the events itself). Default:
    /// [`PollError::Unsupported`].
    fn poll_pending(&self, events: &mut [Event]) -> Result<usize, PollError> {
        let _ = events;
        Err(PollError::Unsupported)
    }
}
