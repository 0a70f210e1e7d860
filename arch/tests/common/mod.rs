//! Helpers shared by the `arch/` integration tests: stacks the tests own.
#![allow(dead_code)] // each test crate uses a different subset

use smarm_arch::{Arch, Context, Native};

/// One 16-byte, 16-aligned unit of stack memory.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct StackUnit([u8; 16]);

/// A heap-allocated stack for a test context. It must outlive every switch
/// into the context that uses it.
pub struct Stack {
    memory: Box<[StackUnit]>,
}

/// Default size of a test stack: roomy enough for panics, backtraces and
/// formatting on the context's own stack.
pub const STACK_BYTES: usize = 256 * 1024;

impl Stack {
    pub fn new(bytes: usize) -> Self {
        let units = bytes.div_ceil(size_of::<StackUnit>());
        Stack { memory: vec![StackUnit([0; 16]); units].into_boxed_slice() }
    }

    /// Highest address (exclusive), aligned as `Native::STACK_ALIGN` asks.
    pub fn top(&mut self) -> *mut u8 {
        let range = self.memory.as_mut_ptr_range();
        let top = range.end.cast::<u8>();
        assert_eq!(top as usize % Native::STACK_ALIGN, 0, "test stack top must be aligned");
        top
    }
}

/// The two ways the tests move between their own context and a child: the
/// symmetric `switch` both ways, or the scheduler pair (`resume` in,
/// `suspend` out) the core uses. The switching tests run under both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seam {
    Switch,
    ResumeSuspend,
}

impl Seam {
    pub const ALL: [Seam; 2] = [Seam::Switch, Seam::ResumeSuspend];

    /// From the test's context into the child: `switch` or `resume`.
    ///
    /// # Safety
    ///
    /// The contract of [`Arch::switch`] (`main` saved into, `child` loaded).
    #[inline(always)]
    pub unsafe fn enter(self, main: *mut Context, child: *const Context) {
        // SAFETY: the caller's contract, which is that of both operations.
        unsafe {
            match self {
                Seam::Switch => Native::switch(main, child),
                Seam::ResumeSuspend => Native::resume(main, child),
            }
        }
    }

    /// From the child back to the test's context: `switch` or `suspend`.
    ///
    /// # Safety
    ///
    /// The contract of [`Arch::switch`] (`child` saved into, `main` loaded).
    #[inline(always)]
    pub unsafe fn leave(self, child: *mut Context, main: *const Context) {
        // SAFETY: the caller's contract, which is that of both operations.
        unsafe {
            match self {
                Seam::Switch => Native::switch(child, main),
                Seam::ResumeSuspend => Native::suspend(child, main),
            }
        }
    }
}
