//! AddressSanitizer's view of process stacks: the fiber annotations
//! around every switch, and a clean shadow for every recycled stack.
//!
//! ASan keeps, per thread, the bounds of "the" stack and a fake stack (the
//! frames it moves off the real stack to catch use-after-return). Neither
//! follows a switch made in assembly. Unannotated, ASan takes a process
//! stack for part of the driver thread's: the unpoisoning it does before a
//! `noreturn` call (a panic starting to unwind) is refused as out of range,
//! and every report names the wrong stack.
//!
//! The protocol, for every switch: `__sanitizer_start_switch_fiber` before
//! it, naming the stack about to run and saving the current fake stack
//! (or, on a context's final switch, passing no save slot so its fake stack
//! is freed); `__sanitizer_finish_switch_fiber` right after a switch lands,
//! restoring the fake stack saved by the landing context and learning the
//! stack that was left. A process's first landing is in `process::entry`,
//! with no fake stack to restore; every landing returns the driver's stack,
//! which the scheduler records in the worker's core: that is where the process's next
//! switch out goes (a worker may change driver threads between passes, so
//! the range is refreshed on every landing, never cached).
//!
//! Annotations alone are not enough: the frames a process has live at its
//! final switch never return, so their poison (redzones, out-of-scope
//! locals) stays in the shadow of its stack. The next process on that
//! stack, recycled from the pool, would trip over it as a false
//! stack-use-after-scope or stack-buffer-overflow; [`forget_stack`] clears
//! a stack's shadow before it is handed to a new process.
//!
//! All of this is compiled only with `--cfg smarm_asan` (the ASan job sets
//! it with `-Zsanitizer=address`); otherwise every item here is empty and
//! inlines to nothing.

#[cfg(smarm_asan)]
use core::ffi::c_void;

use smarm_platform::Stack;

#[cfg(smarm_asan)]
extern "C" {
    fn __sanitizer_start_switch_fiber(fake_stack_save: *mut *mut c_void, bottom: *const c_void, size: usize);
    fn __sanitizer_finish_switch_fiber(
        fake_stack_save: *mut c_void,
        bottom_old: *mut *const c_void,
        size_old: *mut usize,
    );
    fn __asan_unpoison_memory_region(addr: *const c_void, size: usize);
}

/// A stack as ASan sees it: lowest address and size (empty without ASan).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StackRange {
    #[cfg(smarm_asan)]
    bottom: usize,
    #[cfg(smarm_asan)]
    size: usize,
}

/// The fake stack a context saved when it switched away, to restore when
/// it is switched back to (empty without ASan).
#[must_use = "hand it to the matching landing call"]
pub(crate) struct FakeStack {
    #[cfg(smarm_asan)]
    saved: *mut c_void,
}

impl FakeStack {
    /// A fresh context's: nothing to restore.
    #[inline(always)]
    pub(crate) fn fresh() -> FakeStack {
        FakeStack {
            #[cfg(smarm_asan)]
            saved: core::ptr::null_mut(),
        }
    }
}

/// Before the driver switches into a process that runs on `stack` (`None`:
/// a process without a stack of its own, which ASan cannot tell apart).
#[inline(always)]
pub(crate) fn driver_to_process(stack: Option<&Stack>) -> FakeStack {
    #[cfg(smarm_asan)]
    {
        let mut fake = FakeStack::fresh();
        let (bottom, size) = stack.map_or((core::ptr::null(), 0), |s| (s.bottom().cast_const(), s.size()));
        // SAFETY: the save slot is a live local; the range is the process's
        // stack, which its slot owns while the process is live.
        unsafe { __sanitizer_start_switch_fiber(&mut fake.saved, bottom.cast(), size) };
        fake
    }
    #[cfg(not(smarm_asan))]
    {
        let _ = stack;
        FakeStack::fresh()
    }
}

/// Right after the switch back to the driver has landed.
#[inline(always)]
pub(crate) fn driver_landed(fake: FakeStack) {
    #[cfg(smarm_asan)]
    // SAFETY: a switch was started (by the process's `process_to_driver`)
    // and this is its landing; `fake.saved` is what this context's own
    // start call saved. The stack left behind is the process's, which the
    // driver already knows.
    unsafe {
        __sanitizer_finish_switch_fiber(fake.saved, core::ptr::null_mut(), core::ptr::null_mut())
    };
    #[cfg(not(smarm_asan))]
    let _ = fake;
}

/// Before the running process switches back to its worker's driver, which
/// runs on `driver` (as the process's last landing returned it); `last`:
/// the process will never be resumed, so its fake stack is freed.
#[inline(always)]
pub(crate) fn process_to_driver(driver: StackRange, last: bool) -> FakeStack {
    #[cfg(smarm_asan)]
    {
        let mut fake = FakeStack::fresh();
        let save: *mut *mut c_void = if last { core::ptr::null_mut() } else { &mut fake.saved };
        // SAFETY: the save slot is a live local or null (final switch); the
        // range is the driver's stack as learned at this process's last
        // landing, and the driver is suspended on it in `run`.
        unsafe { __sanitizer_start_switch_fiber(save, driver.bottom as *const c_void, driver.size) };
        fake
    }
    #[cfg(not(smarm_asan))]
    {
        let _ = (driver, last);
        FakeStack::fresh()
    }
}

/// Right after a switch into a process has landed (in `process::entry` for
/// its first run, with [`FakeStack::fresh`]): restores the process's fake
/// stack and returns the driver's stack, for the process's next switch out.
#[inline(always)]
#[must_use = "the driver's stack is where the next switch out goes"]
pub(crate) fn process_landed(fake: FakeStack) -> StackRange {
    #[cfg(smarm_asan)]
    {
        let mut driver = StackRange::default();
        let mut bottom: *const c_void = core::ptr::null();
        // SAFETY: the driver started this switch (`driver_to_process`);
        // `fake.saved` is null for a fresh process or what its last switch
        // out saved. The out-pointers are live locals.
        unsafe { __sanitizer_finish_switch_fiber(fake.saved, &mut bottom, &mut driver.size) };
        driver.bottom = bottom as usize;
        driver
    }
    #[cfg(not(smarm_asan))]
    {
        let _ = fake;
        StackRange::default()
    }
}

/// Clears whatever poison an earlier user of `stack` left in ASan's shadow
/// memory (the frames that were live at its final switch), so a process
/// starting on a recycled stack starts clean.
#[inline(always)]
pub(crate) fn forget_stack(stack: &Stack) {
    #[cfg(smarm_asan)]
    // SAFETY: the range is `stack`'s own usable memory, and no process runs
    // on it (the caller is about to hand it to a new one).
    unsafe {
        __asan_unpoison_memory_region(stack.bottom().cast_const().cast(), stack.size())
    };
    #[cfg(not(smarm_asan))]
    let _ = stack;
}
