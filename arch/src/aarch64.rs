//! AArch64 AAPCS64 backend: a switch that saves twelve GPRs and eight FP registers.
//!
//! The plan is the one explained at length in the x86_64 backend
//! (`src/x86_64.rs`): a suspended context is only a stack pointer, and the
//! callee-saved registers live in a [`SwitchFrame`] on the suspended
//! context's own stack. The differences on AArch64:
//!
//! - `switch` and `resume` are naked functions that save the whole frame;
//!   only `suspend` is inline assembly that leaves the registers `asm!` can
//!   name to the compiler (x86_64 does that in all three, which is what
//!   brings its round trip level with corosensei's);
//!
//! - callee-saved state per AAPCS64 §6.1: x19–x28, the frame pointer x29,
//!   the link register x30 (it holds the resume address, since `bl` does not
//!   push one), sp, and the low 64 bits of v8–v15 (d8–d15). The upper halves
//!   of v8–v15 and every other vector register are caller-saved;
//! - FPCR (rounding mode, flush-to-zero, default NaN, trap enables) is not
//!   saved, for the reason the x86_64 backend gives for MXCSR ("Floating-point
//!   control state is not part of a context"): Rust code runs in the default
//!   environment, and a process that changes FPCR through `unsafe` code must
//!   restore it before it can be switched away. FPSR holds only cumulative
//!   status flags and is not saved either;
//! - `aarch64-unknown-none` emits NEON/FP code too, so d8–d15 are saved on
//!   bare metal as well;
//! - sp must be 16-aligned at *every* instruction that uses it as a base, not
//!   only at calls, so the frame size is a multiple of 16 and the entry
//!   function starts with sp ≡ 0 (mod 16);
//! - there is no return address on the stack: `ret` jumps to x30, so a fresh
//!   frame stores the trampoline's address in its x30 slot.
//!
//! # The stack, in three states
//!
//! ```text
//! Freshly initialised                 Suspended (inside switch)            Running
//! (by init_context)                   (ctx.sp points at the frame)         (after switch loaded it)
//!
//!  top ->+----------------------+      +----------------------+             +----------------------+
//!        | d8..d15    = 0       |      | ... caller frames ...|             | ... caller frames ...|
//!        | x30 (lr) = trampoline|      +----------------------+             +----------------------+
//!        | x29 (fp)   = 0       |      | d8..d15              |             | frames of whatever   |
//!        | x21..x28   = 0       |      | x30 = resume address |             |   the context runs   |
//!        | x20        = arg     |      | x29                  |             |   now; sp is live    |
//!        | x19        = entry   |      | x19..x28             |             |   and ctx.sp is      |
//!  sp -> +----------------------+ sp ->+----------------------+             |   stale              |
//!        |  free                |      |  free                |       sp -> |                      |
//!        v                      v      v                      v             v                      v
//! ```
//!
//! The frame layout, lowest address first, is exactly [`SwitchFrame`]:
//!
//! ```text
//!  sp + 0    x19, x20        sp + 48   x25, x26        sp + 96   d8, d9
//!  sp + 16   x21, x22        sp + 64   x27, x28        sp + 112  d10, d11
//!  sp + 32   x23, x24        sp + 80   x29, x30        sp + 128  d12, d13
//!                                                      sp + 144  d14, d15
//! ```
//!
//! A fresh frame sits at `top - 160`; after the restore sp = `top`, so the
//! trampoline and the entry function start with sp ≡ 0 (mod 16).
//!
//! # `resume` / `suspend`
//!
//! The asymmetric pair follows the x86_64 plan (see "Two ways through the
//! same frame" there). AArch64 predicts `ret` from a return stack pushed by
//! `bl` / `blr`, and `br` is an indirect branch predicted by its own
//! address, so:
//!
//! ```text
//!   scheduler stack                         process stack
//!   ---------------                         -------------
//!   bl context_resume     (x30 = A, return stack += A)
//!     stp frame, x30 slot = A
//!     sp -> *scheduler
//!     sp <- *target  ......................>  frame: x30 slot = L (or trampoline)
//!     ldp frame, `br x30` (indirect: no
//!                          return-stack pop)  L: process runs (balanced calls)
//!                                             suspend (inline asm, no bl):
//!                                               `adr` L' into the x30 slot,
//!                                               x19, x29 saved
//!                                               sp -> *current
//!     frame: x30 = A   <.....................   sp <- *scheduler
//!   A: back in the scheduler <-- `ret` -------  ldp frame, `ret` (pops A: hit)
//! ```
//!
//! `suspend` writes only the x19, x29 and x30 slots: asm! cannot name x19
//! (reserved by LLVM) or x29 (frame pointer), and x30 holds the resume
//! label. It declares x20–x28 clobbered, and clobber_abi("C") already
//! declares all of v0–v31 (the upper halves of v8–v15 are caller-saved), so
//! the compiler spills only the x20–x28 and d8–d15 it has live. Restoring
//! always loads the whole frame; the stale slots land in registers the asm
//! said were clobbered. `context_switch` and `context_resume` save the
//! whole frame, and any of the three can load what any of them saved.
//!
//! # The entry trampoline
//!
//! The first `ret` (or `resume`'s `br`) into a fresh context lands in [`trampoline`] with
//! x19 = entry, x20 = arg, x29 = 0. It moves the argument into x0 and
//! `blr`s the entry. x29 = 0 ends frame-record walks, and the CFI marks x30
//! (the return-address column) undefined, so DWARF unwinders stop there. A
//! return from the entry function hits `brk`.

use core::mem::{offset_of, size_of};

use crate::{Arch, Context, EntryFn};

/// The AArch64 AAPCS64 backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct Aarch64;

/// What [`context_switch`], [`context_resume`] and [`Aarch64::suspend`]
/// store on a suspending context's stack, lowest address first. `Context::sp` points at its first byte. Registers are in
/// `stp` / `ldp` pairs; the const assertions below check each pair is
/// adjacent.
#[repr(C)]
struct SwitchFrame {
    x19: usize,
    x20: usize,
    x21: usize,
    x22: usize,
    x23: usize,
    x24: usize,
    x25: usize,
    x26: usize,
    x27: usize,
    x28: usize,
    /// Frame pointer.
    x29: usize,
    /// Link register: where the context continues (the caller of the
    /// `switch` / `resume` that saved it, the label after a `suspend`, or
    /// [`trampoline`]).
    x30: usize,
    /// Low 64 bits of v8–v15.
    d8: u64,
    d9: u64,
    d10: u64,
    d11: u64,
    d12: u64,
    d13: u64,
    d14: u64,
    d15: u64,
}

const FRAME_SIZE: usize = size_of::<SwitchFrame>();
const STACK_ALIGNMENT: usize = 16;
const WORD: usize = size_of::<u64>();

/// `stp` / `ldp` of 64-bit registers take a signed, 8-scaled 7-bit offset.
const PAIR_OFFSET_MAX: usize = 504;

/// True when `second` directly follows `first`, so one `stp` / `ldp` at
/// `first` covers both, and the offset is encodable.
const fn is_pair(first: usize, second: usize) -> bool {
    second == first + WORD && first.is_multiple_of(WORD) && first <= PAIR_OFFSET_MAX
}

const _: () = {
    assert!(size_of::<usize>() == WORD);
    // sp must stay 16-aligned, both inside the switch and after the restore.
    assert!(FRAME_SIZE.is_multiple_of(STACK_ALIGNMENT));
    // `sub sp, sp, #FRAME_SIZE` takes a 12-bit immediate.
    assert!(FRAME_SIZE < 4096);
    assert!(is_pair(offset_of!(SwitchFrame, x19), offset_of!(SwitchFrame, x20)));
    assert!(is_pair(offset_of!(SwitchFrame, x21), offset_of!(SwitchFrame, x22)));
    assert!(is_pair(offset_of!(SwitchFrame, x23), offset_of!(SwitchFrame, x24)));
    assert!(is_pair(offset_of!(SwitchFrame, x25), offset_of!(SwitchFrame, x26)));
    assert!(is_pair(offset_of!(SwitchFrame, x27), offset_of!(SwitchFrame, x28)));
    assert!(is_pair(offset_of!(SwitchFrame, x29), offset_of!(SwitchFrame, x30)));
    assert!(is_pair(offset_of!(SwitchFrame, d8), offset_of!(SwitchFrame, d9)));
    assert!(is_pair(offset_of!(SwitchFrame, d10), offset_of!(SwitchFrame, d11)));
    assert!(is_pair(offset_of!(SwitchFrame, d12), offset_of!(SwitchFrame, d13)));
    assert!(is_pair(offset_of!(SwitchFrame, d14), offset_of!(SwitchFrame, d15)));
    // `ldr` / `str` of the context's sp: unsigned, 8-scaled 12-bit offset.
    assert!(offset_of!(Context, sp).is_multiple_of(WORD));
};

/// The body shared by [`context_switch`] and [`context_resume`]: save a
/// [`SwitchFrame`] on the current stack, store sp into `*x0`, load sp from
/// `*x1`, restore that frame, then leave with `$exit` (`ret` for the
/// symmetric switch, `br x30` for resume — see the module docs on return
/// prediction).
macro_rules! swap_frames_then {
    ($exit:literal) => {
        core::arch::naked_asm!(
            // Save the suspending side (the caller) onto its own stack.
            "sub sp, sp, #{frame_size}",
            "stp x19, x20, [sp, #{x19}]",
            "stp x21, x22, [sp, #{x21}]",
            "stp x23, x24, [sp, #{x23}]",
            "stp x25, x26, [sp, #{x25}]",
            "stp x27, x28, [sp, #{x27}]",
            "stp x29, x30, [sp, #{x29}]",
            "stp d8, d9, [sp, #{d8}]",
            "stp d10, d11, [sp, #{d10}]",
            "stp d12, d13, [sp, #{d12}]",
            "stp d14, d15, [sp, #{d14}]",
            // Swap stacks (sp cannot be the source of `str`, hence x9).
            "mov x9, sp",
            "str x9, [x0, #{context_sp}]",
            "ldr x9, [x1, #{context_sp}]",
            "mov sp, x9",
            // Restore the resuming side from its stack.
            "ldp d14, d15, [sp, #{d14}]",
            "ldp d12, d13, [sp, #{d12}]",
            "ldp d10, d11, [sp, #{d10}]",
            "ldp d8, d9, [sp, #{d8}]",
            "ldp x29, x30, [sp, #{x29}]",
            "ldp x27, x28, [sp, #{x27}]",
            "ldp x25, x26, [sp, #{x25}]",
            "ldp x23, x24, [sp, #{x23}]",
            "ldp x21, x22, [sp, #{x21}]",
            "ldp x19, x20, [sp, #{x19}]",
            "add sp, sp, #{frame_size}",
            $exit,
            frame_size = const FRAME_SIZE,
            x19 = const offset_of!(SwitchFrame, x19),
            x21 = const offset_of!(SwitchFrame, x21),
            x23 = const offset_of!(SwitchFrame, x23),
            x25 = const offset_of!(SwitchFrame, x25),
            x27 = const offset_of!(SwitchFrame, x27),
            x29 = const offset_of!(SwitchFrame, x29),
            d8 = const offset_of!(SwitchFrame, d8),
            d10 = const offset_of!(SwitchFrame, d10),
            d12 = const offset_of!(SwitchFrame, d12),
            d14 = const offset_of!(SwitchFrame, d14),
            context_sp = const offset_of!(Context, sp),
        )
    };
}

/// The switch proper.
///
/// On entry (AAPCS64, called with `bl` / `blr`):
/// - x0 = `save_into: *mut Context`
/// - x1 = `load_from: *const Context`
/// - x30 = return address into the caller; sp ≡ 0 (mod 16)
///
/// On the way out, sp, x19–x30 and d8–d15 are the other context's and `ret`
/// jumps to its x30. Clobbers x9 (caller-saved scratch), returns nothing.
///
/// # Safety
///
/// Same contract as [`Arch::switch`]: `save_into` is valid for writes,
/// `load_from` holds a resumable context whose stack is still allocated, and
/// the two do not alias.
#[unsafe(naked)]
unsafe extern "C" fn context_switch(save_into: *mut Context, load_from: *const Context) {
    // INPUTS:  x0 = save_into, x1 = load_from, x30 = return address.
    // OUTPUTS: none; x19–x30, d8–d15 and sp now belong to the context
    //          `load_from` described.
    // OPTIONS: naked (no prologue; the asm is the whole function). Clobbers
    //          only caller-saved state: x9.
    swap_frames_then!("ret")
}

/// The scheduler side of the asymmetric pair ([`Arch::resume`]).
///
/// On entry (AAPCS64, called with `bl` / `blr`):
/// - x0 = `scheduler: *mut Context` (saved into)
/// - x1 = `target: *const Context` (loaded)
/// - x30 = return address `A` into the caller; sp ≡ 0 (mod 16)
///
/// Saves a full [`SwitchFrame`] (x30 slot = `A`), loads the target's frame
/// and branches to its x30 with `br`, which leaves the return stack alone:
/// `A` is returned to by the `ret` of the `suspend` (or `switch`) that
/// loads `*scheduler`. Clobbers x9 (caller-saved scratch).
///
/// # Safety
///
/// Same contract as [`Arch::resume`].
#[unsafe(naked)]
unsafe extern "C" fn context_resume(scheduler: *mut Context, target: *const Context) {
    // INPUTS:  x0 = scheduler, x1 = target, x30 = return address.
    // OUTPUTS: none; x19–x30, d8–d15 and sp now belong to the target, and
    //          control is at its x30.
    // OPTIONS: naked (no prologue; the asm is the whole function). Clobbers
    //          only caller-saved state: x9.
    // An indirect branch, not a return: `A` stays on the return stack.
    swap_frames_then!("br x30")
}

/// First code a fresh context runs, reached by the `ret` of its first
/// [`context_switch`] or the `br` of its first [`context_resume`].
///
/// On entry (set up by [`Aarch64::init_context`]):
/// - x19 = entry function, x20 = its argument
/// - x29 = 0 (end of the frame-record chain)
/// - sp = `stack_top`, 16-aligned
///
/// # Safety
///
/// Never called directly; only ever the x30 of a fresh frame.
#[unsafe(naked)]
unsafe extern "C" fn trampoline() -> ! {
    // INPUTS:  x19 = entry, x20 = arg, x29 = 0, sp ≡ 0 (mod 16).
    // OUTPUTS: none; `entry` never returns.
    // OPTIONS: naked. Hand-written CFI: this is the outermost frame, so the
    //          return-address column (x30) is undefined and unwinders stop.
    core::arch::naked_asm!(
        ".cfi_startproc",
        ".cfi_undefined x30",
        "mov x0, x20",
        "blr x19",
        // `EntryFn` returns `!`; returning anyway is a bug worth a trap.
        "brk #1",
        ".cfi_endproc",
    )
}

// SAFETY: `context_switch` and `context_resume` save and restore x19–x29,
// x30, sp (via `Context::sp`) and d8–d15 — every callee-saved register in
// AAPCS64. FPCR is left alone, as the crate-level policy the trait contract
// refers to says. `suspend` saves x19, x29, sp and its resume address
// itself and declares x20–x28 and (through clobber_abi("C")) v8–v15
// clobbered, so the compiler preserves those. All three use one frame
// layout.
// `init_context` builds a frame that `context_switch` restores like any
// other and whose trampoline calls `entry(arg)` with sp ≡ 0 (mod 16); the
// const assertions above pin the layout the assembly relies on.
unsafe impl Arch for Aarch64 {
    const NAME: &'static str = "aarch64";
    const INIT_FRAME_SIZE: usize = FRAME_SIZE;
    const STACK_ALIGN: usize = STACK_ALIGNMENT;

    unsafe fn init_context(stack_top: *mut u8, entry: EntryFn, arg: usize) -> Context {
        debug_assert!((stack_top as usize).is_multiple_of(STACK_ALIGNMENT), "stack_top must be 16-aligned");
        let frame = SwitchFrame {
            x19: entry as usize,
            x20: arg,
            x21: 0,
            x22: 0,
            x23: 0,
            x24: 0,
            x25: 0,
            x26: 0,
            x27: 0,
            x28: 0,
            x29: 0,
            x30: trampoline as *const () as usize,
            d8: 0,
            d9: 0,
            d10: 0,
            d11: 0,
            d12: 0,
            d13: 0,
            d14: 0,
            d15: 0,
        };
        // SAFETY: the caller guarantees `stack_top` is 16-aligned with at
        // least `INIT_FRAME_SIZE` writable bytes below it, so the frame
        // pointer is in bounds and (16 ≥ align_of::<SwitchFrame>()) aligned.
        let frame_pointer = unsafe { stack_top.sub(FRAME_SIZE) }.cast::<SwitchFrame>();
        // SAFETY: as above: in bounds, aligned, writable.
        unsafe { frame_pointer.write(frame) };
        Context { sp: frame_pointer as usize }
    }

    #[inline(always)]
    unsafe fn switch(save_into: *mut Context, load_from: *const Context) {
        debug_assert!(!core::ptr::eq(save_into, load_from), "switch: save_into and load_from alias");
        // SAFETY: forwarded from this function's own contract, which is the
        // contract of `context_switch`.
        unsafe { context_switch(save_into, load_from) }
    }

    #[inline(always)]
    unsafe fn resume(scheduler: *mut Context, target: *const Context) {
        debug_assert!(!core::ptr::eq(scheduler, target), "resume: scheduler and target alias");
        // SAFETY: forwarded from this function's own contract, which is the
        // contract of `context_resume`.
        unsafe { context_resume(scheduler, target) }
    }

    #[inline(always)]
    unsafe fn suspend(current: *mut Context, scheduler: *const Context) {
        debug_assert!(!core::ptr::eq(current, scheduler), "suspend: current and scheduler alias");
        // INPUTS:  x0 = current (saved into), x1 = scheduler (loaded).
        // OUTPUTS: none. When the asm falls through (someone resumed
        //          `*current`), x19, x29 and sp are as they were; x20–x28
        //          and everything clobber_abi("C") names (x0–x17, x30,
        //          v0–v31 — so d8–d15 too) are declared clobbered, so the
        //          compiler keeps what it needs of them itself.
        // OPTIONS: none. Not `nostack`: the frame goes below sp, which is
        //          16-aligned at every instruction on AArch64. Not
        //          `nomem`/`readonly`: it writes `*current`, reads
        //          `*scheduler`, and the other side runs arbitrary code.
        // SAFETY: the caller's contract: `scheduler` holds a resumable
        // context whose stack is live, `current` is valid for writes and
        // distinct. The frame written is a full `SwitchFrame` (x20–x28 and
        // d8–d15 slots stale, see the module doc), so whoever loads
        // `*current` lands on label 2 with sp back at its value before the
        // asm.
        unsafe {
            core::arch::asm!(
                // Build this context's frame; its x30 slot is the label
                // below, where a later resume branches.
                "adr x9, 2f",
                "sub sp, sp, #{frame_size}",
                "str x19, [sp, #{x19}]",
                "stp x29, x9, [sp, #{x29}]",
                // Swap stacks.
                "mov x9, sp",
                "str x9, [x0, #{context_sp}]",
                "ldr x9, [x1, #{context_sp}]",
                "mov sp, x9",
                // Restore the scheduler from its stack.
                "ldp d14, d15, [sp, #{d14}]",
                "ldp d12, d13, [sp, #{d12}]",
                "ldp d10, d11, [sp, #{d10}]",
                "ldp d8, d9, [sp, #{d8}]",
                "ldp x29, x30, [sp, #{x29}]",
                "ldp x27, x28, [sp, #{x27}]",
                "ldp x25, x26, [sp, #{x25}]",
                "ldp x23, x24, [sp, #{x23}]",
                "ldp x21, x22, [sp, #{x21}]",
                "ldp x19, x20, [sp, #{x19}]",
                "add sp, sp, #{frame_size}",
                // x30 = the return address `context_resume`'s `bl` pushed
                // on the return stack: the return it predicts.
                "ret",
                // Resumed: sp is back where it was before the asm.
                "2:",
                frame_size = const FRAME_SIZE,
                x19 = const offset_of!(SwitchFrame, x19),
                x21 = const offset_of!(SwitchFrame, x21),
                x23 = const offset_of!(SwitchFrame, x23),
                x25 = const offset_of!(SwitchFrame, x25),
                x27 = const offset_of!(SwitchFrame, x27),
                x29 = const offset_of!(SwitchFrame, x29),
                d8 = const offset_of!(SwitchFrame, d8),
                d10 = const offset_of!(SwitchFrame, d10),
                d12 = const offset_of!(SwitchFrame, d12),
                d14 = const offset_of!(SwitchFrame, d14),
                context_sp = const offset_of!(Context, sp),
                in("x0") current,
                in("x1") scheduler,
                out("x20") _,
                out("x21") _,
                out("x22") _,
                out("x23") _,
                out("x24") _,
                out("x25") _,
                out("x26") _,
                out("x27") _,
                out("x28") _,
                clobber_abi("C"),
            );
        }
    }

    #[inline]
    fn timestamp() -> u64 {
        let ticks: u64;
        // INPUTS:  none.
        // OUTPUTS: `ticks` = CNTVCT_EL0.
        // OPTIONS: nomem, nostack, preserves_flags. The `isb` keeps the read
        //          from being executed ahead of earlier instructions, which
        //          would make intervals measured with it too short.
        // SAFETY: CNTVCT_EL0 is readable at EL0 on Linux and at EL1+ on bare
        // metal; reading it has no side effects.
        unsafe {
            core::arch::asm!(
                "isb",
                "mrs {ticks}, cntvct_el0",
                ticks = out(reg) ticks,
                options(nomem, nostack, preserves_flags),
            );
        }
        ticks
    }

    fn timestamp_frequency() -> Option<u64> {
        let frequency: u64;
        // INPUTS:  none.
        // OUTPUTS: `frequency` = CNTFRQ_EL0 (Hz; firmware-programmed).
        // OPTIONS: nomem, nostack, preserves_flags.
        // SAFETY: CNTFRQ_EL0 is readable at every exception level the
        // counter is; reading it has no side effects.
        unsafe {
            core::arch::asm!(
                "mrs {frequency}, cntfrq_el0",
                frequency = out(reg) frequency,
                options(nomem, nostack, preserves_flags),
            );
        }
        // Firmware that never programmed the register leaves it 0.
        (frequency != 0).then_some(frequency)
    }

    #[inline]
    fn spin_hint() {
        core::hint::spin_loop();
    }
}
