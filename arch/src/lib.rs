//! Stack switching for smarm: the one crate that speaks assembly.
//!
//! The core depends on the [`Arch`] trait only. Each supported architecture
//! is one zero-sized type implementing it, and [`Native`] names the one for
//! the target being compiled; building for any other architecture is a
//! compile error, not a link error.
//!
//! What an `Arch` owns:
//! - the saved state of a suspended context, which is nothing but its stack
//!   pointer ([`Context`]): callee-saved registers live on its own stack;
//! - preparing a fresh stack so that the first switch into it calls an entry
//!   function with one machine-word argument ([`Arch::init_context`]);
//! - the switch itself, saving exactly the ABI's callee-saved registers, in
//!   two forms over one frame layout: the symmetric [`Arch::switch`], and the
//!   asymmetric pair a scheduler uses, [`Arch::resume`] / [`Arch::suspend`],
//!   which keeps the CPU's return-address prediction balanced, and
//!   [`Arch::hand_off`] between two contexts a scheduler resumed;
//! - a cycle / timestamp counter and a spin-loop hint.
//!
//! # Floating-point control state is not part of a context
//!
//! One policy for every backend: a switch saves and restores the
//! callee-saved general-purpose registers and, on AArch64, the callee-saved
//! FP/SIMD registers d8–d15, but *not* the floating-point control state —
//! MXCSR and the x87 control word on x86_64, FPCR on AArch64 — nor the
//! status flags (MXCSR's low bits, the x87 status word, FPSR).
//!
//! Rust code may assume the default floating-point environment (round to
//! nearest, exceptions masked, no flush-to-zero): nothing safe changes it,
//! and the compiler folds and reorders floating-point arithmetic as if it
//! never changed. Every context therefore runs in the environment its thread
//! started with, and saving it at a switch would copy the same value from
//! one side to the other at a price (on x86_64, `ldmxcsr` alone is a large
//! part of a round trip). corosensei makes the same choice.
//!
//! Code that changes the floating-point environment through `unsafe` code or
//! assembly owns the consequences: the change belongs to the thread (or core)
//! that runs it, not to the context. It is seen by whichever context runs
//! there next and does not follow a context resumed elsewhere. Such code
//! must restore the default before anything that can switch away, exactly
//! as it must before calling code that assumes the default. The x86_64
//! backend's module documentation explains the trade-off in detail.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]

/// Entry point of a fresh context. It receives the argument given to
/// [`Arch::init_context`] and must never return: a finished context switches
/// away for the last time instead.
pub type EntryFn = unsafe extern "C" fn(arg: usize) -> !;

/// A suspended context: the stack pointer at which its callee-saved
/// registers were pushed. A default (zero) `Context` is a valid *save* target
/// for the first switch out of a thread's original stack.
#[derive(Debug, Default)]
#[repr(C)]
pub struct Context {
    /// Saved stack pointer; 0 if the context was never saved. Not cleared
    /// when the context is resumed: while it runs, the value is stale.
    pub sp: usize,
}

impl Context {
    /// An empty context, to be filled by the first [`Arch::switch`] out of it.
    pub const fn empty() -> Self {
        Context { sp: 0 }
    }
}

/// The architecture seam.
///
/// # Safety
///
/// Implementors promise that [`Arch::switch`], [`Arch::resume`] and
/// [`Arch::suspend`] each preserve, for their caller, *every* register the
/// platform ABI calls callee-saved (the callee-saved FP/SIMD registers
/// included), that any of them can load a context any of them saved, and
/// that [`Arch::init_context`] lays out a stack on which the first `switch`
/// or `resume` calls the entry function with the argument intact and the
/// stack aligned as the ABI demands at a call. The floating-point control
/// state is the one exception, and must be left untouched: see "Floating-point
/// control state is not part of a context" in the crate documentation.
pub unsafe trait Arch {
    /// Human-readable name ("x86_64", "aarch64").
    const NAME: &'static str;
    /// Bytes of the fresh stack consumed by [`Arch::init_context`]'s frame.
    const INIT_FRAME_SIZE: usize;
    /// Required alignment of a stack top passed to [`Arch::init_context`].
    const STACK_ALIGN: usize;

    /// Prepares a fresh stack whose highest address (exclusive) is
    /// `stack_top`, so that the first [`Arch::switch`] loading the returned
    /// context calls `entry(arg)`.
    ///
    /// # Safety
    ///
    /// `stack_top` must be aligned to [`Arch::STACK_ALIGN`] and the memory
    /// below it must be writable and large enough for the entry frame and
    /// everything `entry` runs. The stack must stay allocated for as long as
    /// the context can be switched to.
    unsafe fn init_context(stack_top: *mut u8, entry: EntryFn, arg: usize) -> Context;

    /// Saves the current callee-saved state onto the current stack, stores
    /// the resulting stack pointer in `*save_into`, then loads `*load_from`
    /// and resumes it. Returns when someone switches back to `*save_into`.
    ///
    /// # Safety
    ///
    /// `load_from` must hold a context produced by [`Arch::init_context`] or
    /// by an earlier `switch`, that has not been resumed since, whose stack
    /// is still allocated. `save_into` must be valid for writes. The two may
    /// not alias.
    unsafe fn switch(save_into: *mut Context, load_from: *const Context);

    /// The scheduler side of the asymmetric pair: saves the caller's
    /// callee-saved state into `*scheduler`, then runs `target` until it
    /// calls [`Arch::suspend`] back to `*scheduler`. The scheduler's resume
    /// address is pushed by a real call (into the backend's switch code, or
    /// within the inlined assembly), whose return is executed by the
    /// `suspend` (or `switch`) that loads `*scheduler` again, so the CPU's
    /// return-address predictor sees a balanced call / return whenever the
    /// target suspends from the frame `resume` entered it at (no calls still
    /// open).
    ///
    /// `target` may be fresh (from [`Arch::init_context`]) or saved by any
    /// of `switch`, `resume` or `suspend`: all three share one frame layout.
    ///
    /// # Safety
    ///
    /// The contract of [`Arch::switch`], with `scheduler` as `save_into` and
    /// `target` as `load_from`.
    unsafe fn resume(scheduler: *mut Context, target: *const Context);

    /// The process side of the asymmetric pair: saves the running context
    /// into `*current` and returns to `*scheduler` — normally the context
    /// the [`Arch::resume`] that entered this one saved. Inlined into the
    /// caller, so no call of its own disturbs the return-address predictor:
    /// its final `ret` pairs with the `call` of that `resume`. Returns when
    /// someone resumes `*current`.
    ///
    /// Callee-saved registers the compiler can name are declared clobbered
    /// instead of saved, so the compiler keeps (spills) only those live
    /// across the call; the rest are saved by the switch itself. (The
    /// x86_64 backend does the same in `switch` and `resume`.)
    ///
    /// # Safety
    ///
    /// The contract of [`Arch::switch`], with `current` as `save_into` and
    /// `scheduler` as `load_from`.
    unsafe fn suspend(current: *mut Context, scheduler: *const Context);

    /// A switch between two contexts that a scheduler entered with
    /// [`Arch::resume`]: saves the running context into `*current` and
    /// runs `target` (fresh, or saved by any of the switches), leaving the
    /// return-address predictor as it found it. A chain of hand-offs
    /// started by one `resume` then ends with the [`Arch::suspend`] whose
    /// return pairs with that `resume`'s call. The default is
    /// [`Arch::switch`], whose call and return are balanced but whose
    /// return lands somewhere the predictor did not expect; a backend may
    /// do better (x86_64 jumps, with no call and no return).
    ///
    /// # Safety
    ///
    /// The contract of [`Arch::switch`], with `current` as `save_into` and
    /// `target` as `load_from`.
    #[inline(always)]
    unsafe fn hand_off(current: *mut Context, target: *const Context) {
        // SAFETY: forwarded from this function's own contract.
        unsafe { Self::switch(current, target) }
    }

    /// A cheap monotonic cycle / timestamp counter (rdtsc, cntvct_el0).
    fn timestamp() -> u64;

    /// Ticks per second of [`Arch::timestamp`], where the hardware says.
    fn timestamp_frequency() -> Option<u64>;

    /// Hint to the CPU that the caller is spinning.
    fn spin_hint();
}

#[cfg(all(target_arch = "aarch64", target_os = "none", feature = "bare-boot"))]
pub mod aarch64_bare;

cfg_if::cfg_if! {
    if #[cfg(target_arch = "x86_64")] {
        mod x86_64;
        pub use crate::x86_64::X86_64;
        /// The backend for the architecture being compiled.
        pub type Native = X86_64;
    } else if #[cfg(target_arch = "aarch64")] {
        mod aarch64;
        pub use crate::aarch64::Aarch64;
        /// The backend for the architecture being compiled.
        pub type Native = Aarch64;
    } else {
        compile_error!("smarm-arch supports x86_64 (System V) and aarch64 (AAPCS64) only");
    }
}
