//! x86_64 System V backend: a switch that stores rbx, rbp, rsp and rip.
//!
//! This file carries the long explanation of how a context switch works in
//! smarm; the AArch64 backend follows the same plan and refers back here.
//!
//! # What is saved, and where
//!
//! A suspended context is a stack pointer and nothing else ([`Context`]).
//! All three transfers — [`X86_64::switch`], [`X86_64::resume`] and
//! [`X86_64::suspend`] — are inline assembly expanded into their caller, and
//! each keeps the System V callee-saved registers in one of three ways:
//!
//! - rbx and rbp, which `asm!` may not name (LLVM reserves them), are stored
//!   in a [`SwitchFrame`] on the suspending context's *own* stack;
//! - rsp is the value stored in [`Context::sp`], and rip is the frame's
//!   return address, so the context continues right after its asm block;
//! - r12–r15 are declared clobbered: the compiler saves around the asm
//!   exactly those it holds something live in (often none), instead of the
//!   switch saving all four every time.
//!
//! Everything else (rax, rcx, rdx, rsi, rdi, r8–r11, all of xmm/ymm/zmm, the
//! x87 register stack, flags) is caller-saved, and `clobber_abi("C")` tells
//! the compiler so. A transfer therefore costs two stores, two loads, the
//! stack swap and its branches — the same work corosensei does.
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
//! Freshly initialised                 Suspended (inside a transfer)        Running
//! (by init_context)                   (ctx.sp points at the frame)         (after a transfer loaded it)
//!
//!  top ->+----------------------+      +----------------------+             +----------------------+
//!        | trampoline (ret addr)|      | ... caller frames ...|             | ... caller frames ...|
//!        | rbp        = arg     |      +----------------------+             +----------------------+
//!        | rbx        = entry   |      | return address: just |             | frames of whatever   |
//!        | (padding)            |      |   past the asm block |             |   the context runs   |
//!  sp -> +----------------------+      | rbp, rbx             |             |   now; rsp is live   |
//!        |  free                |      | (padding)            |             |   and ctx.sp is      |
//!        v                      v sp ->+----------------------+             |   stale (never read  |
//!                                      |  free                |             |   until the next     |
//!                                      v                      v      rsp -> |   save overwrites it)|
//!                                                                           v                      v
//! ```
//!
//! The frame layout, lowest address first, is exactly [`SwitchFrame`]:
//!
//! ```text
//!  sp + 0   padding (never read or written)
//!  sp + 8   rbx
//!  sp + 16  rbp
//!  sp + 24  return address  (pushed by the `call` in `switch` / `resume`,
//!                            stored by `suspend`; in a fresh frame, the
//!                            trampoline's address)
//! ```
//!
//! `asm!` guarantees rsp ≡ 0 (mod 16) when a block starts. `switch` and
//! `resume` begin with a `call`, which pushes the return address (rsp ≡ 8),
//! then reserve the 24-byte save area, leaving the saved sp 16-aligned;
//! `suspend` reserves the whole 32-byte frame, with the same result. The
//! padding costs no instruction: it keeps every saved sp 16-aligned and the
//! fresh frame a whole number of [`Arch::STACK_ALIGN`] units. A fresh frame
//! is laid out at `top - 32` so that it looks exactly like a suspended one:
//! after the restore, rsp = `top` (16-aligned) inside the trampoline, whose
//! `call entry` pushes 8 bytes, so `entry` starts with rsp ≡ 8 (mod 16) as
//! the ABI wants.
//!
//! # Two ways through the same frame: `switch`, and `resume` / `suspend`
//!
//! `switch` is symmetric: its `call` pushes its own return address, and it
//! leaves by `ret` to the *other* side's saved return address. The CPU's
//! return-stack buffer (RSB) predicted that `ret` from the `call` it just
//! saw, so every symmetric switch is a mispredicted return: most of its
//! round trip (about 17 ns against about 3 ns for the pair below,
//! measured on the development VM).
//!
//! A scheduler does not need symmetry: a worker always *resumes* a process
//! and a process always *suspends* back to its worker. The pair keeps
//! calls and returns balanced by giving each transfer the right branch:
//!
//! ```text
//!   scheduler stack                         process stack
//!   ---------------                         -------------
//!   resume: `call` into its own body
//!           (RSB += A)
//!     push frame, ret addr = A
//!     sp -> *scheduler
//!     sp <- *target  ......................>  frame: ret addr = L (or trampoline)
//!     pop frame, `jmp L`  (indirect jump:     (no RSB entry used)
//!                          predicted by
//!                          the BTB)           L: process runs, makes and returns
//!                                                from calls of its own (balanced)
//!                                             suspend (no call):
//!                                               push frame, ret addr = L'
//!                                               sp -> *current
//!     frame: ret addr = A  <.................   sp <- *scheduler
//!   A: `jmp` out of the    <-- `ret` -------  pop frame, `ret`  (RSB -= A: hit)
//!      asm block
//! ```
//!
//! So the `call` in `resume` is matched by the `ret` of the `suspend` that
//! comes back, and the entry into the process is an indirect `jmp`, which
//! the branch-target buffer predicts from the jump's own address. The
//! balance holds when the process suspends from the same call depth it was
//! resumed at (the round trip the benches measure); a process suspending
//! from deeper inside its own calls still returns correctly, but the RSB
//! then holds the process's return addresses above `A`, and those returns
//! mispredict — unavoidable with one RSB and two stacks.
//!
//! All three write and read the one [`SwitchFrame`] layout, so any of them
//! can load a context any of them saved, and a fresh frame from
//! [`X86_64::init_context`] works for `switch` and `resume` alike (after
//! `resume`'s `jmp`, rsp = `top` in the trampoline exactly as after
//! `switch`'s `ret`). They differ only in how the return address gets into
//! the frame (a `call`, or `suspend`'s `lea` of the label after its block)
//! and how they leave (`ret`, or `resume`'s `jmp`).
//!
//! # The entry trampoline
//!
//! The first `ret` (or `resume`'s `jmp`) into a fresh context lands in
//! [`trampoline`], which moves the argument (parked in rbp) into rdi, clears
//! rbp and calls the entry function (parked in rbx). With rbp 0,
//! frame-pointer walks stop at the entry function, and the trampoline's CFI
//! marks the return address (rip) undefined, so DWARF unwinders and
//! debuggers stop there too instead of walking into whatever lies above
//! `top`. The entry function must never return; if it did, the `ud2` after
//! the call traps.

use core::mem::{offset_of, size_of};

use crate::{Arch, Context, EntryFn};

/// The x86_64 System V backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct X86_64;

/// What [`X86_64::switch`], [`X86_64::resume`] and [`X86_64::suspend`] push
/// onto a suspending context's stack, lowest address first. `Context::sp`
/// points at its first byte. r12–r15 are not in it (the asm declares them
/// clobbered), and neither is the floating-point control state (see the
/// module doc).
#[repr(C)]
struct SwitchFrame {
    /// Never read or written: makes the frame a whole number of 16-byte
    /// units, so every saved sp is 16-aligned like a fresh frame's.
    _padding: usize,
    /// The suspended context's rbx; a fresh frame's entry function.
    rbx: usize,
    /// The suspended context's rbp; a fresh frame's entry argument.
    rbp: usize,
    /// Where the context continues: just past the asm block that suspended
    /// it, or [`trampoline`].
    return_address: usize,
}

/// Bytes `switch` / `resume` reserve below the return address their `call`
/// pushed.
const SAVE_AREA_SIZE: usize = offset_of!(SwitchFrame, return_address);
/// Bytes a frame occupies, return address included.
const FRAME_SIZE: usize = size_of::<SwitchFrame>();
const STACK_ALIGNMENT: usize = 16;

const _: () = {
    assert!(size_of::<usize>() == 8);
    // The return address is the last word, directly above the save area: it
    // is the word a `call` pushes.
    assert!(FRAME_SIZE == SAVE_AREA_SIZE + size_of::<usize>());
    // A block starts at rsp ≡ 0 (mod 16). `switch` / `resume` then `call`
    // (≡ 8) and reserve the save area; `suspend` reserves the whole frame.
    // Either way the saved sp is 16-aligned.
    assert!((SAVE_AREA_SIZE + size_of::<usize>()).is_multiple_of(STACK_ALIGNMENT));
    // A fresh frame sits at `stack_top - FRAME_SIZE`, which must be a valid
    // (16-aligned) sp, and the restore leaves rsp = stack_top.
    assert!(FRAME_SIZE.is_multiple_of(STACK_ALIGNMENT));
    // The padding is the lowest word; the register slots are whole words
    // above it, the return address last.
    assert!(offset_of!(SwitchFrame, _padding) == 0);
    assert!(offset_of!(SwitchFrame, rbx).is_multiple_of(size_of::<usize>()));
    assert!(offset_of!(SwitchFrame, rbp).is_multiple_of(size_of::<usize>()));
    assert!(offset_of!(SwitchFrame, rbp) + size_of::<usize>() == SAVE_AREA_SIZE);
};

/// First code a fresh context runs, reached by the `ret` of its first
/// `switch` or the `jmp` of its first `resume`.
///
/// On entry (set up by [`X86_64::init_context`]):
/// - rbx = entry function, rbp = its argument
/// - rsp = `stack_top`, 16-aligned
///
/// # Safety
///
/// Never called directly; only ever the return address of a fresh frame.
#[unsafe(naked)]
unsafe extern "C" fn trampoline() -> ! {
    // INPUTS:  rbx = entry, rbp = arg, rsp ≡ 0 (mod 16).
    // OUTPUTS: none; `entry` never returns.
    // OPTIONS: naked. Hand-written CFI: this is the outermost frame, so the
    //          return-address column (rip) is undefined and unwinders stop.
    //          rbp is cleared before the call, so the entry function's frame
    //          record ends the frame-pointer chain.
    core::arch::naked_asm!(
        ".cfi_startproc",
        ".cfi_undefined rip",
        "mov rdi, rbp",
        "xor ebp, ebp",
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

// SAFETY: each of `switch`, `resume` and `suspend` stores rbx and rbp in
// its frame and loads the other side's, keeps rsp in `Context::sp` and rip
// as the frame's return address, and declares r12–r15 and the caller-saved
// set clobbered, so the compiler preserves whatever of those it needs:
// together, every callee-saved register of the System V ABI. The
// floating-point control state (MXCSR, the x87 control word) is left alone,
// as the crate-level policy the trait contract refers to says. All three use
// one frame layout and leave rsp 16-aligned in it. `init_context` builds a
// frame that they restore like any other and whose trampoline calls
// `entry(arg)` with rsp ≡ 8 (mod 16); the const assertions above pin the
// layout the assembly relies on.
unsafe impl Arch for X86_64 {
    const NAME: &'static str = "x86_64";
    const INIT_FRAME_SIZE: usize = FRAME_SIZE;
    const STACK_ALIGN: usize = STACK_ALIGNMENT;

    unsafe fn init_context(stack_top: *mut u8, entry: EntryFn, arg: usize) -> Context {
        debug_assert!((stack_top as usize).is_multiple_of(STACK_ALIGNMENT), "stack_top must be 16-aligned");
        let frame = SwitchFrame {
            _padding: 0,
            rbx: entry as usize,
            rbp: arg,
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
        // INPUTS:  rdi = save_into, rsi = load_from.
        // OUTPUTS: none. When the block ends (someone loaded `*save_into`),
        //          rbx, rbp and rsp are as they were; r12–r15 and everything
        //          clobber_abi("C") names (rax, rcx, rdx, rsi, rdi, r8–r11,
        //          all vector and x87 data registers, flags) are declared
        //          clobbered, so the compiler keeps what it needs of them
        //          itself. MXCSR and the x87 control word are left alone.
        // OPTIONS: none. Not `nostack`: the `call` pushes the return address
        //          and the frame goes below it. Not `nomem`/`readonly`: it
        //          writes `*save_into`, reads `*load_from`, and the other
        //          side runs arbitrary code.
        // SAFETY: the caller's contract: `load_from` holds a resumable
        // context whose stack is live, `save_into` is valid for writes and
        // distinct. The frame written is a full `SwitchFrame` whose return
        // address is the `jmp` after the `call`, so whoever loads
        // `*save_into` continues at label 2 with rsp back at its value
        // before the block.
        unsafe {
            core::arch::asm!(
                // The return address this context continues at: the `jmp`.
                "call 3f",
                "jmp 2f",
                // Save this context onto its own stack.
                "3:",
                "sub rsp, {save_area}",
                "mov [rsp + {rbx}], rbx",
                "mov [rsp + {rbp}], rbp",
                // Swap stacks.
                "mov [rdi + {context_sp}], rsp",
                "mov rsp, [rsi + {context_sp}]",
                // Restore the other one and return into it.
                "mov rbx, [rsp + {rbx}]",
                "mov rbp, [rsp + {rbp}]",
                "add rsp, {save_area}",
                "ret",
                // Back: rsp is where it was before the block.
                "2:",
                save_area = const SAVE_AREA_SIZE,
                rbx = const offset_of!(SwitchFrame, rbx),
                rbp = const offset_of!(SwitchFrame, rbp),
                context_sp = const offset_of!(Context, sp),
                in("rdi") save_into,
                in("rsi") load_from,
                out("r12") _,
                out("r13") _,
                out("r14") _,
                out("r15") _,
                clobber_abi("C"),
            );
        }
    }

    #[inline(always)]
    unsafe fn resume(scheduler: *mut Context, target: *const Context) {
        debug_assert!(!core::ptr::eq(scheduler, target), "resume: scheduler and target alias");
        // INPUTS:  rdi = scheduler (saved into), rsi = target (loaded).
        // OUTPUTS: none; as for `switch`: rbx, rbp and rsp are preserved,
        //          r12–r15 and the clobber_abi("C") set are declared
        //          clobbered, MXCSR and the x87 control word left alone.
        // OPTIONS: none, for the reasons given in `switch`.
        // SAFETY: the caller's contract: `target` holds a resumable context
        // whose stack is live, `scheduler` is valid for writes and distinct.
        // The frame written is a full `SwitchFrame` whose return address is
        // the `jmp` after the `call`, so whoever loads `*scheduler` continues
        // at label 2 with rsp back at its value before the block.
        unsafe {
            core::arch::asm!(
                // The return address the scheduler continues at (the `jmp`),
                // pushed by a real `call` so the RSB holds it for the `ret`
                // of the suspend that comes back.
                "call 3f",
                "jmp 2f",
                // Save the scheduler onto its own stack.
                "3:",
                "sub rsp, {save_area}",
                "mov [rsp + {rbx}], rbx",
                "mov [rsp + {rbp}], rbp",
                // Swap stacks.
                "mov [rdi + {context_sp}], rsp",
                "mov rsp, [rsi + {context_sp}]",
                // Restore the target, pop its whole frame and jump to its
                // return address: no RSB entry is consumed, so the one the
                // `call` pushed stays on top for the suspend's `ret`.
                "mov rbx, [rsp + {rbx}]",
                "mov rbp, [rsp + {rbp}]",
                "mov rcx, [rsp + {return_address}]",
                "add rsp, {frame_size}",
                "jmp rcx",
                // Back: rsp is where it was before the block.
                "2:",
                save_area = const SAVE_AREA_SIZE,
                frame_size = const FRAME_SIZE,
                rbx = const offset_of!(SwitchFrame, rbx),
                rbp = const offset_of!(SwitchFrame, rbp),
                return_address = const offset_of!(SwitchFrame, return_address),
                context_sp = const offset_of!(Context, sp),
                in("rdi") scheduler,
                in("rsi") target,
                out("r12") _,
                out("r13") _,
                out("r14") _,
                out("r15") _,
                clobber_abi("C"),
            );
        }
    }

    #[inline(always)]
    unsafe fn suspend(current: *mut Context, scheduler: *const Context) {
        debug_assert!(!core::ptr::eq(current, scheduler), "suspend: current and scheduler alias");
        // INPUTS:  rdi = current (saved into), rsi = scheduler (loaded).
        // OUTPUTS: none; as for `switch`: rbx, rbp and rsp are preserved,
        //          r12–r15 and the clobber_abi("C") set are declared
        //          clobbered, MXCSR and the x87 control word left alone.
        // OPTIONS: none. Not `nostack`: the frame goes below rsp. Not
        //          `nomem`/`readonly`, for the reasons given in `switch`.
        // SAFETY: the caller's contract: `scheduler` holds a resumable
        // context whose stack is live, `current` is valid for writes and
        // distinct. The frame written is a full `SwitchFrame` whose return
        // address is label 2, so whoever loads `*current` lands there with
        // rsp back at its value before the block.
        unsafe {
            core::arch::asm!(
                // Build this context's frame; its return address is the
                // label below, where a later resume jumps. No `call`: the
                // `ret` below must pop the entry `resume`'s `call` pushed.
                "lea rax, [rip + 2f]",
                "sub rsp, {frame_size}",
                "mov [rsp + {return_address}], rax",
                "mov [rsp + {rbx}], rbx",
                "mov [rsp + {rbp}], rbp",
                // Swap stacks.
                "mov [rdi + {context_sp}], rsp",
                "mov rsp, [rsi + {context_sp}]",
                // Restore the scheduler and return into it: the return the
                // RSB predicts.
                "mov rbx, [rsp + {rbx}]",
                "mov rbp, [rsp + {rbp}]",
                "add rsp, {save_area}",
                "ret",
                // Resumed: rsp is back where it was before the block.
                "2:",
                save_area = const SAVE_AREA_SIZE,
                frame_size = const FRAME_SIZE,
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

    #[inline(always)]
    unsafe fn hand_off(current: *mut Context, target: *const Context) {
        debug_assert!(!core::ptr::eq(current, target), "hand_off: current and target alias");
        // INPUTS:  rdi = current (saved into), rsi = target (loaded).
        // OUTPUTS: none; as for `switch`: rbx, rbp and rsp are preserved,
        //          r12–r15 and the clobber_abi("C") set are declared
        //          clobbered, MXCSR and the x87 control word left alone.
        // OPTIONS: none. Not `nostack`: the frame goes below rsp. Not
        //          `nomem`/`readonly`, for the reasons given in `switch`.
        // SAFETY: the caller's contract: `target` holds a resumable context
        // whose stack is live, `current` is valid for writes and distinct.
        // The frame written is `suspend`'s (return address: label 2); the
        // load is `resume`'s, which enters any frame the switches write, a
        // fresh one included. Neither half calls or returns, so the RSB
        // still holds the call of the `resume` that began the chain.
        unsafe {
            core::arch::asm!(
                "lea rax, [rip + 2f]",
                "sub rsp, {frame_size}",
                "mov [rsp + {return_address}], rax",
                "mov [rsp + {rbx}], rbx",
                "mov [rsp + {rbp}], rbp",
                "mov [rdi + {context_sp}], rsp",
                "mov rsp, [rsi + {context_sp}]",
                "mov rbx, [rsp + {rbx}]",
                "mov rbp, [rsp + {rbp}]",
                "mov rcx, [rsp + {return_address}]",
                "add rsp, {frame_size}",
                // An indirect jump, predicted per site: a yield lands at
                // the same place in every process.
                "jmp rcx",
                "2:",
                frame_size = const FRAME_SIZE,
                rbx = const offset_of!(SwitchFrame, rbx),
                rbp = const offset_of!(SwitchFrame, rbp),
                return_address = const offset_of!(SwitchFrame, return_address),
                context_sp = const offset_of!(Context, sp),
                in("rdi") current,
                in("rsi") target,
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
