//! A deliberately plain [`Platform`] on the Rust standard library alone:
//! the second port of smarm, and the worked example of `PORTING.md`.
//!
//! - **Stacks** come from the global allocator, 16-byte aligned, with no
//!   guard page: each is a [`StackGuard::Canary`] stack with
//!   [`STACK_CANARY`] in its lowest word, which the core checks whenever a
//!   process switches out.
//! - **Time** is [`std::time::Instant`], counted from the platform's
//!   creation.
//! - **Parking** is one [`Mutex`] and [`Condvar`] shared by every driver of
//!   the platform: a driver sleeps on the condition variable until its
//!   token holds a wake or its deadline passes.
//! - **No readiness**: the `poll_*` methods keep their defaults, which
//!   answer [`PollError::Unsupported`](smarm_platform::PollError::Unsupported).
//! - **Overflow reports** go to standard error, then the process aborts.
//!
//! No `epoll`, no futex, no `mmap`: what it needs, any std target has.
//!
//! ```
//! use smarm_platform::conformance::{check_all, Capabilities};
//! use smarm_platform_plain::PlainPlatform;
//!
//! let platform = PlainPlatform::new();
//! check_all(&platform, PlainPlatform::CAPABILITIES).expect("the plain platform conforms");
//! ```

use std::alloc::{alloc, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use smarm_platform::conformance::Capabilities;
use smarm_platform::{
    Nanos, OverflowEvidence, OverflowReport, ParkToken, Platform, Stack, StackError, StackGuard, STACK_CANARY,
};

/// Alignment of every stack (the SysV and AAPCS64 call alignment).
const STACK_ALIGN: usize = 16;

/// The plain platform (see the crate doc).
#[derive(Debug)]
pub struct PlainPlatform {
    origin: Instant,
    /// Guards the sleep of every parked driver; held while a parker checks
    /// its token and while an unparker publishes a wake, so that no wake
    /// falls between the check and the sleep.
    sleepers: Mutex<()>,
    wake: Condvar,
}

impl Default for PlainPlatform {
    fn default() -> Self {
        PlainPlatform::new()
    }
}

impl PlainPlatform {
    /// What this platform offers, for the conformance kit: canary stacks
    /// and no readiness.
    pub const CAPABILITIES: Capabilities =
        Capabilities { guard_pages: false, readiness: false, stack_size: 0 };

    /// A platform whose clock starts now.
    pub fn new() -> PlainPlatform {
        PlainPlatform { origin: Instant::now(), sleepers: Mutex::new(()), wake: Condvar::new() }
    }

    fn layout(size: usize) -> Result<Layout, StackError> {
        if size == 0 {
            return Err(StackError::InvalidSize(size));
        }
        let rounded = size.checked_next_multiple_of(STACK_ALIGN).ok_or(StackError::InvalidSize(size))?;
        Layout::from_size_align(rounded, STACK_ALIGN).map_err(|_| StackError::InvalidSize(size))
    }

    /// Takes a pending wake off `token`, if there is one.
    fn take_wake(token: &ParkToken) -> bool {
        // Acquire pairs with the Release in `unpark`: what the waker wrote
        // before waking is visible once the wake is taken.
        token.state.compare_exchange(1, 0, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }
}

impl Platform for PlainPlatform {
    fn name(&self) -> &'static str {
        "plain"
    }

    fn now(&self) -> Nanos {
        // u64 nanoseconds last 584 years from the platform's creation.
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn allocate_stack(&self, size: usize) -> Result<Stack, StackError> {
        let layout = Self::layout(size)?;
        // SAFETY: `layout` has a non-zero size (checked in `layout`).
        let memory = unsafe { alloc(layout) };
        let bottom = NonNull::new(memory).ok_or(StackError::OutOfMemory)?;
        // SAFETY: the allocation is at least 16 bytes, 16-aligned, and ours.
        unsafe { bottom.as_ptr().cast::<u64>().write(STACK_CANARY) };
        // SAFETY: a fresh allocation owned by the handle; its top is
        // 16-aligned (aligned start, size a multiple of 16); it carries the
        // canary and has no guard page, as `Canary` says.
        Ok(unsafe { Stack::from_raw(bottom, layout.size(), StackGuard::Canary) })
    }

    unsafe fn free_stack(&self, stack: Stack) {
        // `allocate_stack` made the size a valid multiple of the alignment,
        // so this rebuilds the very layout it allocated with.
        let Ok(layout) = Layout::from_size_align(stack.size(), STACK_ALIGN) else { return };
        // SAFETY: per the contract, `stack` came from `allocate_stack`
        // (this layout) and nothing runs on it any more.
        unsafe { dealloc(stack.bottom(), layout) };
    }

    fn report_overflow(&self, stack: &Stack, tag: u64, evidence: OverflowEvidence) -> ! {
        eprintln!("{}", OverflowReport::new(stack, tag, evidence));
        std::process::abort()
    }

    fn park(&self, token: &ParkToken, deadline: Option<Nanos>) {
        let mut guard = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if Self::take_wake(token) {
                return;
            }
            let now = self.now();
            guard = match deadline {
                Some(deadline) if now >= deadline => return,
                Some(deadline) => {
                    let timeout = Duration::from_nanos(deadline - now);
                    self.wake.wait_timeout(guard, timeout).unwrap_or_else(PoisonError::into_inner).0
                }
                None => self.wake.wait(guard).unwrap_or_else(PoisonError::into_inner),
            };
        }
    }

    fn unpark(&self, token: &ParkToken) {
        // Release: see `take_wake`. Published under the lock, so a parker
        // either sees it before it sleeps or is asleep and gets the notify.
        let _guard = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
        token.state.store(1, Ordering::Release);
        self.wake.notify_all();
    }
}
