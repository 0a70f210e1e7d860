//! The bare-metal backend: everything by polling, over a [`Board`].
//!
//! [`BarePlatform`] builds the [`Platform`] on a board's clock and event
//! primitives plus the global allocator:
//!
//! - **Stacks come from `alloc::alloc`, 16-byte aligned, with no guard
//!   page.** There is no MMU setup here to make one, so every stack is a
//!   [`StackGuard::Canary`] stack: [`STACK_CANARY`] sits at its lowest word
//!   and the core checks it on switch-out. An overflow is noticed after the
//!   fact, and one that jumps past the canary can corrupt whatever the heap
//!   placed below the stack before it is noticed. Size stacks generously.
//! - **Parking polls**: check the token, check the deadline,
//!   [`Board::wait_for_event`], repeat. `unpark` sets the token and calls
//!   [`Board::send_event`]. The token holds only 0 (empty) and 1 (wake
//!   pending).
//! - **No readiness**: the `poll_*` methods keep their defaults, which
//!   answer [`PollError::Unsupported`](crate::PollError::Unsupported).
//! - **Overflow reports** go to [`Board::write`], and the program ends with
//!   [`Board::exit`]`(`[`OVERFLOW_EXIT_STATUS`]`)`.

use alloc::alloc::{alloc, dealloc, Layout};
use core::fmt::{self, Write};
use core::ptr::NonNull;

use crate::sync::Ordering;
use crate::STACK_CANARY;
use crate::{Nanos, OverflowEvidence, OverflowReport, ParkToken, Platform, Stack, StackError, StackGuard};

/// What a bare-metal image supplies to the `bare` platform: a clock, a
/// console and a way to end. Everything else (stacks, parking) the backend
/// builds on top of `alloc` and polling.
pub trait Board: Send + Sync + 'static {
    /// Monotonic time in nanoseconds since boot.
    fn now(&self) -> Nanos;
    /// Writes bytes to the console (e.g. a PL011 UART).
    fn write(&self, bytes: &[u8]);
    /// Ends the program with `status` (0 = success), e.g. semihosting SYS_EXIT.
    fn exit(&self, status: i32) -> !;
    /// Waits for an event or interrupt (e.g. WFE), or returns at once. Used by
    /// idle parking between deadline checks; must not sleep past a few
    /// milliseconds unless an event wakes it.
    fn wait_for_event(&self) {}
    /// Signals other cores waiting in `wait_for_event` (e.g. SEV).
    fn send_event(&self) {}
}

/// The status [`Platform::report_overflow`] ends the program with: 134,
/// what a shell shows for a Linux program that aborted (128 + SIGABRT).
pub const OVERFLOW_EXIT_STATUS: i32 = 134;

/// Formats straight onto a board's console, without a buffer.
struct Console<'a, B: Board>(&'a B);

impl<B: Board> Write for Console<'_, B> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.0.write(text.as_bytes());
        Ok(())
    }
}

/// Alignment of bare stacks (AAPCS64 and SysV both ask 16 at a call).
const STACK_ALIGN: usize = 16;

/// The polling platform over board `B` (see the module doc).
#[derive(Debug)]
pub struct BarePlatform<B: Board> {
    board: B,
}

impl<B: Board> BarePlatform<B> {
    /// A platform on `board`.
    pub const fn new(board: B) -> Self {
        BarePlatform { board }
    }

    /// The board underneath.
    pub fn board(&self) -> &B {
        &self.board
    }

    fn layout(size: usize) -> Result<Layout, StackError> {
        if size == 0 {
            return Err(StackError::InvalidSize(size));
        }
        let rounded =
            size.checked_add(STACK_ALIGN - 1).ok_or(StackError::InvalidSize(size))? & !(STACK_ALIGN - 1);
        Layout::from_size_align(rounded, STACK_ALIGN).map_err(|_| StackError::InvalidSize(size))
    }
}

impl<B: Board> Platform for BarePlatform<B> {
    fn name(&self) -> &'static str {
        "bare"
    }

    fn now(&self) -> Nanos {
        self.board.now()
    }

    fn allocate_stack(&self, size: usize) -> Result<Stack, StackError> {
        let layout = Self::layout(size)?;
        // SAFETY: `layout` has a non-zero size (checked in `layout`).
        let memory = unsafe { alloc(layout) };
        let bottom = NonNull::new(memory).ok_or(StackError::OutOfMemory)?;
        // SAFETY: the allocation is at least 16 bytes, 16-aligned, and ours.
        unsafe { bottom.as_ptr().cast::<u64>().write(STACK_CANARY) };
        // SAFETY: the range is a fresh allocation owned by the handle, its
        // top is 16-aligned (aligned start, size a multiple of 16), and it
        // carries the canary and no guard page, as `Canary` says.
        Ok(unsafe { Stack::from_raw(bottom, layout.size(), StackGuard::Canary) })
    }

    unsafe fn free_stack(&self, stack: Stack) {
        let Ok(layout) = Self::layout(stack.size()) else {
            debug_assert!(false, "bare stack of impossible size {}", stack.size());
            return;
        };
        // SAFETY: the caller promises `stack` came from `allocate_stack`,
        // which allocated exactly this layout (its size is already rounded,
        // so rounding again is the identity), and that it is dead.
        unsafe { dealloc(stack.bottom(), layout) };
    }

    fn report_overflow(&self, stack: &Stack, tag: u64, evidence: OverflowEvidence) -> ! {
        // The console cannot fail in a way worth acting on: the program ends
        // either way.
        let _ = writeln!(Console(&self.board), "{}", OverflowReport::new(stack, tag, evidence));
        self.board.exit(OVERFLOW_EXIT_STATUS)
    }

    fn park(&self, token: &ParkToken, deadline: Option<Nanos>) {
        loop {
            // Acquire pairs with the Release in `unpark`.
            if token.state.compare_exchange(1, 0, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return;
            }
            if deadline.is_some_and(|deadline| self.board.now() >= deadline) {
                return;
            }
            self.board.wait_for_event();
        }
    }

    fn unpark(&self, token: &ParkToken) {
        // Release: what the waker wrote before is visible to the parker that
        // consumes the wake.
        token.state.store(1, Ordering::Release);
        self.board.send_event();
    }
}
