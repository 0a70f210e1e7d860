//! x86_64 System V backend: a switch that saves six GPRs and two control words.
//!
//! This file carries the long explanation of how a context switch works in
//! smarm; the AArch64 backend follows the same plan and refers back here.
//!
//! # What is saved, and where
//!
//! A suspended context is a stack pointer and nothing else ([`Context`]).
//! Everything the System V ABI calls callee-saved is pushed onto the
//! suspended context's *own* stack, as one [`SwitchFrame`], by [`context_switch`]:
//!
//! - the six callee-saved GPRs rbx, rbp, r12, r13, r14, r15;
//! - MXCSR, whose control bits (rounding mode, FTZ, DAZ, exception masks) are
//!   callee-saved. Its status bits are caller-saved, so saving and restoring
//!   the whole register with `stmxcsr` / `ldmxcsr` is correct and simpler
//!   than masking;
//! - the x87 control word (precision and rounding control), also callee-saved;
//! - rsp itself, implicitly: it is the value stored in [`Context::sp`];
//! - rip, implicitly: it is the return address that the `call` into
//!   [`context_switch`] pushed just above the frame, so `ret` resumes the context.
//!
//! Everything else (rax, rcx, rdx, rsi, rdi, r8–r11, all of xmm/ymm/zmm, the
//! x87 register stack, flags) is caller-saved: the compiler already assumes a
//! call to [`context_switch`] destroys it, so the switch does not spend a cycle on it.
//!
//! # The stack, in three states
//!
//! Addresses grow upwards; the stack grows downwards. `top` is the
//! 16-aligned `stack_top` given to [`X86_64::init_context`].
//!
//! ```text
//! Freshly initialised                 Suspended (inside switch)            Running
//! (by init_context)                   (ctx.sp points at the frame)         (after switch loaded it)
//!
//!  top ->+----------------------+      +----------------------+             +----------------------+
//!        | trampoline (ret addr)|      | ... caller frames ...|             | ... caller frames ...|
//!        | rbp        = 0       |      +----------------------+             +----------------------+
//!        | rbx        = entry   |      | return address into  |             | frames of whatever   |
//!        | r12        = arg     |      |   the caller of      |             |   the context runs   |
//!        | r13..r15   = 0       |      |   switch             |             |   now; rsp is live   |
//!        | mxcsr, x87 CW        |      | rbp, rbx, r12..r15   |             |   and ctx.sp is      |
//!        |   (ABI defaults)     |      | mxcsr, x87 CW        |             |   stale (never read  |
//!  sp -> +----------------------+ sp ->+----------------------+             |   until the next     |
//!        |  free                |      |  free                |      rsp -> |   save overwrites it)|
//!        v                      v      v                      v             v                      v
//! ```
//!
//! The frame layout, lowest address first, is exactly [`SwitchFrame`]:
//!
//! ```text
//!  sp + 0   mxcsr (u32), x87 control word (u16), padding (u16)
//!  sp + 8   r15
//!  sp + 16  r14
//!  sp + 24  r13
//!  sp + 32  r12
//!  sp + 40  rbx
//!  sp + 48  rbp
//!  sp + 56  return address  (pushed by `call context_switch`; in a fresh
//!                            frame, the trampoline's address)
//! ```
//!
//! `context_switch` is entered by `call`, so rsp ≡ 8 (mod 16) at its first
//! instruction; subtracting the 56-byte save area leaves the saved sp
//! 16-aligned. A fresh frame is laid out at `top - 64` so that it looks
//! exactly like a suspended one: after the restore and the `ret`, rsp = `top`
//! (16-aligned) inside the trampoline, and the trampoline's `call entry`
//! pushes 8 bytes, so `entry` starts with rsp ≡ 8 (mod 16) as the ABI wants.
//!
//! # The entry trampoline
//!
//! The first `ret` into a fresh context lands in [`trampoline`], which moves
//! the argument (parked in r12) into rdi and calls the entry function (parked
//! in rbx). rbp is 0, so frame-pointer walks stop at the entry function, and
//! the trampoline's CFI marks the return address (rip) undefined, so DWARF
//! unwinders and debuggers stop there too instead of walking into whatever
//! lies above `top`. The entry function must never return; if it did, the
//! `ud2` after the call traps.

use core::mem::{offset_of, size_of};

use crate::{Arch, Context, EntryFn};

/// The x86_64 System V backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct X86_64;

/// Power-on default of MXCSR: all exceptions masked, round to nearest, no
/// FTZ/DAZ. A fresh context starts with it.
const MXCSR_DEFAULT: u32 = 0x1F80;

/// Power-on default of the x87 control word (as set by `fninit`): all
/// exceptions masked, 64-bit precision, round to nearest.
const X87_CONTROL_WORD_DEFAULT: u16 = 0x037F;

/// What [`context_switch`] pushes onto a suspending context's stack, lowest address
/// first. `Context::sp` points at its first byte.
#[repr(C)]
struct SwitchFrame {
    /// Saved with `stmxcsr`; only the control bits matter to the ABI.
    mxcsr: u32,
    /// Saved with `fnstcw`.
    x87_control_word: u16,
    /// Keeps the GPR slots 8-aligned.
    _padding: u16,
    r15: usize,
    r14: usize,
    r13: usize,
    r12: usize,
    rbx: usize,
    rbp: usize,
    /// Where the final `ret` of [`context_switch`] goes: back into the caller of the
    /// switch that suspended this context, or into [`trampoline`].
    return_address: usize,
}

/// Bytes [`context_switch`] reserves below its return address.
const SAVE_AREA_SIZE: usize = offset_of!(SwitchFrame, return_address);
/// Bytes a fresh frame occupies below `stack_top`.
const FRAME_SIZE: usize = size_of::<SwitchFrame>();
const STACK_ALIGNMENT: usize = 16;

const _: () = {
    // The return address is the last word, directly above the save area: it
    // is the word `call context_switch` pushed.
    assert!(FRAME_SIZE == SAVE_AREA_SIZE + size_of::<usize>());
    // `switch` starts at rsp ≡ 8 (mod 16); after reserving the save area the
    // saved sp is 16-aligned.
    assert!((SAVE_AREA_SIZE + size_of::<usize>()).is_multiple_of(STACK_ALIGNMENT));
    // A fresh frame sits at `stack_top - FRAME_SIZE`, which must be a valid
    // (16-aligned) sp, and the `ret` leaves rsp = stack_top.
    assert!(FRAME_SIZE.is_multiple_of(STACK_ALIGNMENT));
    // The control-word slot must fit the 4-byte `stmxcsr` / 2-byte `fnstcw`
    // stores without touching the GPR slots.
    assert!(offset_of!(SwitchFrame, mxcsr) + size_of::<u32>() <= offset_of!(SwitchFrame, x87_control_word));
    assert!(offset_of!(SwitchFrame, x87_control_word) + size_of::<u16>() <= offset_of!(SwitchFrame, r15));
    assert!(size_of::<usize>() == 8);
};

/// The switch proper.
///
/// On entry (System V, called with `call`):
/// - rdi = `save_into: *mut Context`
/// - rsi = `load_from: *const Context`
/// - [rsp] = return address into the caller; rsp ≡ 8 (mod 16)
///
/// On the way out, rsp is the other context's, its callee-saved registers
/// are restored and `ret` pops its return address. rdi / rsi are clobbered
/// (caller-saved), nothing is returned.
///
/// # Safety
///
/// Same contract as [`Arch::switch`]: `save_into` is valid for writes,
/// `load_from` holds a resumable context whose stack is still allocated, and
/// the two do not alias.
#[unsafe(naked)]
unsafe extern "C" fn context_switch(save_into: *mut Context, load_from: *const Context) {
    // INPUTS:  rdi = save_into, rsi = load_from, [rsp] = return address.
    // OUTPUTS: none; every callee-saved register and rsp now belong to the
    //          context `load_from` described.
    // OPTIONS: naked (no prologue; the asm is the whole function). Clobbers
    //          only caller-saved state: flags.
    core::arch::naked_asm!(
        // Save the suspending side onto its own stack.
        "sub rsp, {save_area}",
        "mov [rsp + {rbp}], rbp",
        "mov [rsp + {rbx}], rbx",
        "mov [rsp + {r12}], r12",
        "mov [rsp + {r13}], r13",
        "mov [rsp + {r14}], r14",
        "mov [rsp + {r15}], r15",
        "stmxcsr [rsp + {mxcsr}]",
        "fnstcw [rsp + {x87_cw}]",
        // Swap stacks.
        "mov [rdi + {context_sp}], rsp",
        "mov rsp, [rsi + {context_sp}]",
        // Restore the resuming side from its stack.
        "ldmxcsr [rsp + {mxcsr}]",
        "fldcw [rsp + {x87_cw}]",
        "mov r15, [rsp + {r15}]",
        "mov r14, [rsp + {r14}]",
        "mov r13, [rsp + {r13}]",
        "mov r12, [rsp + {r12}]",
        "mov rbx, [rsp + {rbx}]",
        "mov rbp, [rsp + {rbp}]",
        "add rsp, {save_area}",
        "ret",
        save_area = const SAVE_AREA_SIZE,
        mxcsr = const offset_of!(SwitchFrame, mxcsr),
        x87_cw = const offset_of!(SwitchFrame, x87_control_word),
        r15 = const offset_of!(SwitchFrame, r15),
        r14 = const offset_of!(SwitchFrame, r14),
        r13 = const offset_of!(SwitchFrame, r13),
        r12 = const offset_of!(SwitchFrame, r12),
        rbx = const offset_of!(SwitchFrame, rbx),
        rbp = const offset_of!(SwitchFrame, rbp),
        context_sp = const offset_of!(Context, sp),
    )
}

/// First code a fresh context runs, reached by the `ret` of its first
/// [`context_switch`].
///
/// On entry (set up by [`X86_64::init_context`]):
/// - rbx = entry function, r12 = its argument
/// - rbp = 0 (end of the frame-pointer chain)
/// - rsp = `stack_top`, 16-aligned
///
/// # Safety
///
/// Never called directly; only ever the return address of a fresh frame.
#[unsafe(naked)]
unsafe extern "C" fn trampoline() -> ! {
    // INPUTS:  rbx = entry, r12 = arg, rbp = 0, rsp ≡ 0 (mod 16).
    // OUTPUTS: none; `entry` never returns.
    // OPTIONS: naked. Hand-written CFI: this is the outermost frame, so the
    //          return-address column (rip) is undefined and unwinders stop.
    core::arch::naked_asm!(
        ".cfi_startproc",
        ".cfi_undefined rip",
        "mov rdi, r12",
        "call rbx",
        // `EntryFn` returns `!`; returning anyway is a bug worth a trap.
        "ud2",
        ".cfi_endproc",
    )
}

/// Reads the time-stamp counter.
fn read_tsc() -> u64 {
    // SAFETY: `rdtsc` exists on every x86_64 CPU, reads a counter and has no
    // memory effects. (`_rdtsc` is an intrinsic; it compiles to the single
    // instruction, with EDX:EAX combined into the u64 result.)
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// TSC ticks per second from CPUID leaf 0x15 (TSC / core crystal clock
/// ratio): `crystal_hz * numerator / denominator`. `None` when the leaf is
/// missing or the CPU leaves any of the three values 0 (which the SDM allows
/// and many CPUs and hypervisors do).
fn tsc_frequency_from_cpuid() -> Option<u64> {
    use core::arch::x86_64::__cpuid;

    const TSC_LEAF: u32 = 0x15;
    let max_leaf = __cpuid(0).eax;
    if max_leaf < TSC_LEAF {
        return None;
    }
    let leaf = __cpuid(TSC_LEAF);
    let (denominator, numerator, crystal_hz) = (leaf.eax, leaf.ebx, leaf.ecx);
    if denominator == 0 || numerator == 0 || crystal_hz == 0 {
        return None;
    }
    Some(u64::from(crystal_hz) * u64::from(numerator) / u64::from(denominator))
}

// SAFETY: `switch` saves and restores rbx, rbp, r12–r15, rsp (via
// `Context::sp`), rip (via the return address), MXCSR and the x87 control
// word — every piece of callee-saved state in the System V ABI.
// `init_context` builds a frame that `switch` restores like any other and
// whose trampoline calls `entry(arg)` with rsp ≡ 8 (mod 16); the const
// assertions above pin the layout the assembly relies on.
unsafe impl Arch for X86_64 {
    const NAME: &'static str = "x86_64";
    const INIT_FRAME_SIZE: usize = FRAME_SIZE;
    const STACK_ALIGN: usize = STACK_ALIGNMENT;

    unsafe fn init_context(stack_top: *mut u8, entry: EntryFn, arg: usize) -> Context {
        debug_assert!((stack_top as usize).is_multiple_of(STACK_ALIGNMENT), "stack_top must be 16-aligned");
        let frame = SwitchFrame {
            mxcsr: MXCSR_DEFAULT,
            x87_control_word: X87_CONTROL_WORD_DEFAULT,
            _padding: 0,
            r15: 0,
            r14: 0,
            r13: 0,
            r12: arg,
            rbx: entry as usize,
            rbp: 0,
            return_address: trampoline as *const () as usize,
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
        // contract of `switch`.
        unsafe { context_switch(save_into, load_from) }
    }

    #[inline]
    fn timestamp() -> u64 {
        read_tsc()
    }

    fn timestamp_frequency() -> Option<u64> {
        tsc_frequency_from_cpuid()
    }

    #[inline]
    fn spin_hint() {
        core::hint::spin_loop();
    }
}
