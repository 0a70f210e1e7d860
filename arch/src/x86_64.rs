//! x86_64 System V backend: a switch that saves six general-purpose registers.
//!
//! This file carries the long explanation of how a context switch works in
//! smarm; the AArch64 backend follows the same plan and refers back here.
//!
//! # What is saved, and where
//!
//! A suspended context is a stack pointer and nothing else ([`Context`]).
//! The callee-saved registers of the System V ABI are pushed onto the
//! suspended context's *own* stack, as one [`SwitchFrame`], by [`context_switch`]:
//!
//! - the six callee-saved GPRs rbx, rbp, r12, r13, r14, r15;
//! - rsp itself, implicitly: it is the value stored in [`Context::sp`];
//! - rip, implicitly: it is the return address that the `call` into
//!   [`context_switch`] pushed just above the frame, so `ret` resumes the context.
//!
//! Everything else (rax, rcx, rdx, rsi, rdi, r8–r11, all of xmm/ymm/zmm, the
//! x87 register stack, flags) is caller-saved: the compiler already assumes a
//! call to [`context_switch`] destroys it, so the switch does not spend a cycle on it.
//!
//! # Floating-point control state is not part of a context
//!
//! The ABI also calls the control bits of MXCSR (rounding mode, FTZ, DAZ,
//! exception masks) and the x87 control word callee-saved. The switch does
//! not save them — nor does the AArch64 backend save FPCR — because Rust
//! code may assume the default floating-point environment: nothing safe
//! changes it, and the compiler folds and reorders floating-point code as if
//! round-to-nearest with every exception masked were always in force. Every
//! context therefore runs in the default environment, and preserving it
//! across a switch would copy the same value from one side to the other, for
//! about half of a round trip (`ldmxcsr` is slow even when it rewrites the
//! value already there). corosensei makes the same choice.
//!
//! The consequence for a process that changes MXCSR or the x87 control word
//! through `unsafe` code or assembly: the change belongs to the *thread*,
//! not to the process. It leaks into whatever context runs next on that
//! thread, and does not follow the process to another worker. Such a process
//! must restore the default before anything that can switch away (a yield,
//! a receive, any blocking call) — the same obligation the Rust ABI already
//! puts on it at every call into code it did not write. The status flags
//! (MXCSR bits 0–5, the x87 status word) are caller-saved and carry no
//! promise either way.
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
//!        | (padding)            |      | rbp, rbx, r12..r15   |             |   and ctx.sp is      |
//!  sp -> +----------------------+      | (padding)            |             |   stale (never read  |
//!        |  free                | sp ->+----------------------+             |   until the next     |
//!        v                      v      |  free                |      rsp -> |   save overwrites it)|
//!                                      v                      v             v                      v
//! ```
//!
//! The frame layout, lowest address first, is exactly [`SwitchFrame`]:
//!
//! ```text
//!  sp + 0   padding (never read or written)
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
//! instruction; subtracting the 56-byte save area (the padding word
//! included) leaves the saved sp 16-aligned. A fresh frame is laid out at
//! `top - 64` so that it looks exactly like a suspended one: after the
//! restore and the `ret`, rsp = `top` (16-aligned) inside the trampoline,
//! and the trampoline's `call entry` pushes 8 bytes, so `entry` starts with
//! rsp ≡ 8 (mod 16) as the ABI wants. The padding costs no instruction; it
//! keeps every saved sp 16-aligned and the fresh frame a whole number of
//! [`Arch::STACK_ALIGN`] units.
//!
//! # Two ways through the same frame: `switch`, and `resume` / `suspend`
//!
//! [`context_switch`] is symmetric: entered by `call`, it leaves by `ret`
//! to the *other* side's saved return address. The CPU's return-stack
//! buffer (RSB) predicted the `ret` from the `call` it just saw, so every
//! symmetric switch is a mispredicted return: ~20 ns of the ~50 ns round
//! trip measured on the development VM.
//!
//! A scheduler does not need symmetry: a worker always *resumes* a process
//! and a process always *suspends* back to its worker. The pair keeps
//! calls and returns balanced by giving each transfer the right branch:
//!
//! ```text
//!   scheduler stack                         process stack
//!   ---------------                         -------------
//!   call context_resume   (RSB += A)
//!     push frame, ret addr = A
//!     sp -> *scheduler
//!     sp <- *target  ......................>  frame: ret addr = L (or trampoline)
//!     pop frame, `jmp L`  (indirect jump:     (no RSB entry used)
//!                          predicted by
//!                          the BTB)           L: process runs, makes and returns
//!                                                from calls of its own (balanced)
//!                                             suspend (inline asm, no call):
//!                                               push frame, ret addr = L'
//!                                               sp -> *current
//!     frame: ret addr = A  <.................   sp <- *scheduler
//!   A: back in the scheduler <-- `ret` -------  pop frame, `ret`  (RSB -= A: hit)
//! ```
//!
//! So the `call` of [`context_resume`] is matched by the `ret` of the
//! `suspend` that comes back, and the entry into the process is an
//! indirect `jmp`, which the branch-target buffer predicts from the jump's
//! own address. The balance holds when the process suspends from the same
//! call depth it was resumed at (the round trip the benches measure); a
//! process suspending from deeper inside its own calls still returns
//! correctly, but the RSB then holds the process's return addresses above
//! `A`, and those returns mispredict — unavoidable with one RSB and two
//! stacks.
//!
//! All three entries write and read the one [`SwitchFrame`] layout, so any
//! of them can load a context any of them saved, and a fresh frame from
//! [`X86_64::init_context`] works for `switch` and `resume` alike (after
//! `resume`'s `jmp`, rsp = `top` in the trampoline exactly as after
//! `switch`'s `ret`). What differs is who fills the slots:
//!
//! ```text
//!  slot            context_switch     context_resume     suspend (inline asm)
//!  return address  pushed by `call`   pushed by `call`   `lea` of the label
//!                                                         after the asm
//!  rbp, rbx        saved              saved              saved (asm! cannot
//!                                                         name them)
//!  r12..r15        saved              saved              NOT written: the asm
//!                                                         declares them
//!                                                         clobbered, so the
//!                                                         compiler spills
//!                                                         only what is live
//! ```
//!
//! Restoring always loads all six GPRs; slots `suspend` left stale land in
//! registers its asm told the compiler were clobbered anyway.
//!
//! # The entry trampoline
//!
//! The first `ret` (or `resume`'s `jmp`) into a fresh context lands in [`trampoline`], which moves
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

/// What [`context_switch`], [`context_resume`] and [`X86_64::suspend`] push
/// onto a suspending context's stack, lowest address first. `Context::sp`
/// points at its first byte. No floating-point control state: see "Floating-
/// point control state is not part of a context" in the module doc.
#[repr(C)]
struct SwitchFrame {
    /// Never read or written: makes the frame a whole number of 16-byte
    /// units, so every saved sp is 16-aligned like a fresh frame's.
    _padding: usize,
    r15: usize,
    r14: usize,
    r13: usize,
    r12: usize,
    rbx: usize,
    rbp: usize,
    /// Where the context continues: back into the caller of the `switch` /
    /// `resume` that suspended it, to the label after a `suspend`, or into
    /// [`trampoline`].
    return_address: usize,
}

/// Bytes [`context_switch`] / [`context_resume`] reserve below the return
/// address their `call` pushed.
const SAVE_AREA_SIZE: usize = offset_of!(SwitchFrame, return_address);
/// Bytes a fresh frame occupies below `stack_top`.
const FRAME_SIZE: usize = size_of::<SwitchFrame>();
const STACK_ALIGNMENT: usize = 16;

const _: () = {
    assert!(size_of::<usize>() == 8);
    // The return address is the last word, directly above the save area: it
    // is the word `call context_switch` pushed.
    assert!(FRAME_SIZE == SAVE_AREA_SIZE + size_of::<usize>());
    // `switch` / `resume` start at rsp ≡ 8 (mod 16); after reserving the
    // save area the saved sp is 16-aligned. `suspend` starts at rsp ≡ 0 and
    // reserves the whole frame, so its saved sp is 16-aligned too.
    assert!((SAVE_AREA_SIZE + size_of::<usize>()).is_multiple_of(STACK_ALIGNMENT));
    // A fresh frame sits at `stack_top - FRAME_SIZE`, which must be a valid
    // (16-aligned) sp, and the `ret` leaves rsp = stack_top.
    assert!(FRAME_SIZE.is_multiple_of(STACK_ALIGNMENT));
    // The padding is the lowest word and every register slot an 8-aligned
    // word above it, so the `mov`s address whole slots.
    assert!(offset_of!(SwitchFrame, _padding) == 0);
    assert!(offset_of!(SwitchFrame, r15).is_multiple_of(size_of::<usize>()));
    assert!(offset_of!(SwitchFrame, rbp) + size_of::<usize>() == SAVE_AREA_SIZE);
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
    // OUTPUTS: none; every callee-saved GPR and rsp now belong to the
    //          context `load_from` described.
    // OPTIONS: naked (no prologue; the asm is the whole function). Clobbers
    //          no register the caller may rely on; leaves MXCSR and the x87
    //          control word alone (module doc).
    core::arch::naked_asm!(
        // Save the suspending side onto its own stack.
        "sub rsp, {save_area}",
        "mov [rsp + {rbp}], rbp",
        "mov [rsp + {rbx}], rbx",
        "mov [rsp + {r12}], r12",
        "mov [rsp + {r13}], r13",
        "mov [rsp + {r14}], r14",
        "mov [rsp + {r15}], r15",
        // Swap stacks.
        "mov [rdi + {context_sp}], rsp",
        "mov rsp, [rsi + {context_sp}]",
        // Restore the resuming side from its stack.
        "mov r15, [rsp + {r15}]",
        "mov r14, [rsp + {r14}]",
        "mov r13, [rsp + {r13}]",
        "mov r12, [rsp + {r12}]",
        "mov rbx, [rsp + {rbx}]",
        "mov rbp, [rsp + {rbp}]",
        "add rsp, {save_area}",
        "ret",
        save_area = const SAVE_AREA_SIZE,
        r15 = const offset_of!(SwitchFrame, r15),
        r14 = const offset_of!(SwitchFrame, r14),
        r13 = const offset_of!(SwitchFrame, r13),
        r12 = const offset_of!(SwitchFrame, r12),
        rbx = const offset_of!(SwitchFrame, rbx),
        rbp = const offset_of!(SwitchFrame, rbp),
        context_sp = const offset_of!(Context, sp),
    )
}

/// The scheduler side of the asymmetric pair ([`Arch::resume`]).
///
/// On entry (System V, called with `call`):
/// - rdi = `scheduler: *mut Context` (saved into)
/// - rsi = `target: *const Context` (loaded)
/// - [rsp] = return address `A` into the caller; rsp ≡ 8 (mod 16)
///
/// Saves a full [`SwitchFrame`] whose return address is `A`, loads the
/// target's frame and *jumps* (not returns) to its return address, leaving
/// rsp where that frame's return address was popped. `A` is returned to
/// later by the `ret` of the `suspend` (or `switch`) that loads
/// `*scheduler`, which is the return the RSB expects. Clobbers rcx
/// (caller-saved).
///
/// # Safety
///
/// Same contract as [`Arch::resume`].
#[unsafe(naked)]
unsafe extern "C" fn context_resume(scheduler: *mut Context, target: *const Context) {
    // INPUTS:  rdi = scheduler, rsi = target, [rsp] = return address.
    // OUTPUTS: none; every callee-saved GPR and rsp now belong to the
    //          target, and control is at the target's resume address.
    // OPTIONS: naked (no prologue; the asm is the whole function). Clobbers
    //          only caller-saved state: rcx. Leaves MXCSR and the x87
    //          control word alone (module doc).
    core::arch::naked_asm!(
        // Save the scheduler onto its own stack; `call` already pushed the
        // return address slot.
        "sub rsp, {save_area}",
        "mov [rsp + {rbp}], rbp",
        "mov [rsp + {rbx}], rbx",
        "mov [rsp + {r12}], r12",
        "mov [rsp + {r13}], r13",
        "mov [rsp + {r14}], r14",
        "mov [rsp + {r15}], r15",
        // Swap stacks.
        "mov [rdi + {context_sp}], rsp",
        "mov rsp, [rsi + {context_sp}]",
        // Restore the target from its stack.
        "mov r15, [rsp + {r15}]",
        "mov r14, [rsp + {r14}]",
        "mov r13, [rsp + {r13}]",
        "mov r12, [rsp + {r12}]",
        "mov rbx, [rsp + {rbx}]",
        "mov rbp, [rsp + {rbp}]",
        // Pop the whole frame and jump to its return address: no RSB entry
        // is consumed, so `A` stays on top for the suspend's `ret`.
        "mov rcx, [rsp + {return_address}]",
        "add rsp, {frame_size}",
        "jmp rcx",
        save_area = const SAVE_AREA_SIZE,
        frame_size = const FRAME_SIZE,
        r15 = const offset_of!(SwitchFrame, r15),
        r14 = const offset_of!(SwitchFrame, r14),
        r13 = const offset_of!(SwitchFrame, r13),
        r12 = const offset_of!(SwitchFrame, r12),
        rbx = const offset_of!(SwitchFrame, rbx),
        rbp = const offset_of!(SwitchFrame, rbp),
        return_address = const offset_of!(SwitchFrame, return_address),
        context_sp = const offset_of!(Context, sp),
    )
}

/// First code a fresh context runs, reached by the `ret` of its first
/// [`context_switch`] or the `jmp` of its first [`context_resume`].
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

// SAFETY: `switch` and `resume` save and restore rbx, rbp, r12–r15, rsp
// (via `Context::sp`) and rip (via the return address) — every callee-saved
// register of the System V ABI. The floating-point control state (MXCSR,
// the x87 control word) is left alone, as the crate-level policy the trait
// contract refers to says. `suspend` saves rbx, rbp, rsp and rip itself and
// declares r12–r15 clobbered, so the compiler preserves those. All three
// use one frame layout.
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
        // INPUTS:  rdi = current (saved into), rsi = scheduler (loaded).
        // OUTPUTS: none. When the asm falls through (someone resumed
        //          `*current`), rbx, rbp and rsp are as they were; r12–r15
        //          and everything clobber_abi("C") names (rax, rcx, rdx,
        //          rsi, rdi, r8–r11, all vector and x87 data registers,
        //          flags) are declared clobbered, so the compiler keeps what
        //          it needs of them itself. MXCSR and the x87 control word
        //          are left alone (module doc).
        // OPTIONS: none. Not `nostack`: the frame is pushed below rsp, which
        //          asm! guarantees is aligned for a call (≡ 0 mod 16), so the
        //          saved sp is 16-aligned like one saved by `context_resume`.
        //          Not `nomem`/`readonly`: it writes `*current`, reads
        //          `*scheduler`, and the other side runs arbitrary code.
        // SAFETY: the caller's contract: `scheduler` holds a resumable
        // context whose stack is live, `current` is valid for writes and
        // distinct. The frame written is a full `SwitchFrame` (r12–r15
        // slots stale, see the module doc), so whoever loads `*current`
        // lands on label 2 with rsp back at its value before the asm.
        unsafe {
            core::arch::asm!(
                // Build this context's frame; its return address is the
                // label below, where a later resume jumps.
                "lea rax, [rip + 2f]",
                "sub rsp, {frame_size}",
                "mov [rsp + {return_address}], rax",
                "mov [rsp + {rbp}], rbp",
                "mov [rsp + {rbx}], rbx",
                // Swap stacks.
                "mov [rdi + {context_sp}], rsp",
                "mov rsp, [rsi + {context_sp}]",
                // Restore the scheduler from its stack.
                "mov r15, [rsp + {r15}]",
                "mov r14, [rsp + {r14}]",
                "mov r13, [rsp + {r13}]",
                "mov r12, [rsp + {r12}]",
                "mov rbx, [rsp + {rbx}]",
                "mov rbp, [rsp + {rbp}]",
                // Pops the return address `context_resume`'s call pushed:
                // the return the RSB predicts.
                "add rsp, {save_area}",
                "ret",
                // Resumed: rsp is back where it was before the asm.
                "2:",
                save_area = const SAVE_AREA_SIZE,
                frame_size = const FRAME_SIZE,
                r15 = const offset_of!(SwitchFrame, r15),
                r14 = const offset_of!(SwitchFrame, r14),
                r13 = const offset_of!(SwitchFrame, r13),
                r12 = const offset_of!(SwitchFrame, r12),
                rbx = const offset_of!(SwitchFrame, rbx),
                rbp = const offset_of!(SwitchFrame, rbp),
                return_address = const offset_of!(SwitchFrame, return_address),
                context_sp = const offset_of!(Context, sp),
                in("rdi") current,
                in("rsi") scheduler,
                out("r12") _,
                out("r13") _,
                out("r14") _,
                out("r15") _,
                clobber_abi("C"),
            );
        }
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
