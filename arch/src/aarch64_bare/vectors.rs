//! The exception vector table: every exception, reported to the image.
//!
//! Invariant kept: every exception taken at EL1 reaches the image's
//! `smarm_bare_exception` on the core's own exception stack (`SP_EL1`, set
//! by the boot code), with the interrupted registers saved in an
//! [`ExceptionFrame`] first — even when the fault was a broken `SP_EL0`.
//! Nothing returns from an exception.
//!
//! ```text
//!  VBAR_EL1 + 0x000  current EL, SP_EL0   sync | irq | fiq | serror   kind 0..3
//!           + 0x200  current EL, SP_ELx   sync | irq | fiq | serror   kind 4..7
//!           + 0x400  lower EL, AArch64    sync | irq | fiq | serror   kind 8..11
//!           + 0x600  lower EL, AArch32    sync | irq | fiq | serror   kind 12..15
//! ```
//!
//! Each 128-byte entry reserves an [`ExceptionFrame`] on `SP_EL1`, saves
//! x0/x1 into it, loads its own index into x0 and branches to the common
//! path, which saves the other registers plus `ELR_EL1`, `SPSR_EL1` and
//! `SP_EL0`, loads the syndrome registers into x1..x3 and calls
//! `smarm_bare_exception`. Nothing returns: the frame is kept for a debugger
//! attached to QEMU (`-s -S`), which can read the interrupted state from it.

use core::arch::global_asm;
use core::mem::{offset_of, size_of};

use aarch64_cpu::registers::ESR_EL1;

/// The vector table is 16 entries of 128 bytes, 2 KiB aligned.
const VECTOR_ENTRY_SIZE: usize = 128;
/// Number of entries in the vector table.
pub const VECTOR_COUNT: u64 = 16;
/// `VBAR_EL1` ignores the low 11 bits: the table must be 2 KiB aligned.
const VECTOR_TABLE_ALIGN: usize = 2048;
const _: () = assert!(VECTOR_ENTRY_SIZE * VECTOR_COUNT as usize == VECTOR_TABLE_ALIGN);

/// What the exception vectors leave on `SP_EL1` before calling
/// `smarm_bare_exception`: the interrupted general-purpose registers and
/// the state needed to resume it (not that anything does resume yet).
#[derive(Debug)]
#[repr(C)]
pub struct ExceptionFrame {
    /// x0..x30 at the moment of the exception.
    pub registers: [u64; 31],
    /// `SP_EL0`: the interrupted stack pointer when the fault came from
    /// ordinary code (vector kinds 0..3).
    pub sp_el0: u64,
    /// `ELR_EL1`: the address the exception would return to.
    pub elr: u64,
    /// `SPSR_EL1`: the interrupted PSTATE.
    pub spsr: u64,
}

/// Byte offset of x`n` in an [`ExceptionFrame`].
const fn register_offset(n: usize) -> usize {
    offset_of!(ExceptionFrame, registers) + n * size_of::<u64>()
}
const FRAME_SIZE: usize = size_of::<ExceptionFrame>();
// `sp` must stay 16-byte aligned (SCTLR_EL1.SA), and the frame must fit the
// signed 9-bit scaled / 12-bit unsigned immediates the asm uses.
const _: () = assert!(FRAME_SIZE.is_multiple_of(16));
const _: () = assert!(FRAME_SIZE < 4096);
// The asm stores pairs at the offsets below; stp/ldp need 8-byte multiples.
const _: () = assert!(register_offset(0).is_multiple_of(8));
const _: () = assert!(offset_of!(ExceptionFrame, elr) == offset_of!(ExceptionFrame, sp_el0) + 8);
const _: () = assert!(offset_of!(ExceptionFrame, spsr) == offset_of!(ExceptionFrame, elr) + 8);

/// Names the vector table entry `kind` (the first argument of
/// `smarm_bare_exception`), e.g. `"current EL with SP_EL0, synchronous"`.
pub fn vector_name(kind: u64) -> &'static str {
    const NAMES: [&str; VECTOR_COUNT as usize] = [
        "current EL with SP_EL0, synchronous",
        "current EL with SP_EL0, IRQ",
        "current EL with SP_EL0, FIQ",
        "current EL with SP_EL0, SError",
        "current EL with SP_ELx, synchronous",
        "current EL with SP_ELx, IRQ",
        "current EL with SP_ELx, FIQ",
        "current EL with SP_ELx, SError",
        "lower EL (AArch64), synchronous",
        "lower EL (AArch64), IRQ",
        "lower EL (AArch64), FIQ",
        "lower EL (AArch64), SError",
        "lower EL (AArch32), synchronous",
        "lower EL (AArch32), IRQ",
        "lower EL (AArch32), FIQ",
        "lower EL (AArch32), SError",
    ];
    match NAMES.get(kind as usize) {
        Some(name) => name,
        None => "unknown vector",
    }
}

/// `ESR_EL1.EC` (bits 31..=26): the exception class of syndrome `esr`.
pub fn exception_class(esr: u64) -> u64 {
    ESR_EL1::EC.read(esr)
}

extern "C" {
    /// Defined by the image: reports an exception and ends the program.
    fn smarm_bare_exception(kind: u64, esr: u64, far: u64, elr: u64) -> !;
}

// The vector table and its common path.
// INPUTS:  the CPU enters an entry on SP_EL1 with every general-purpose
//          register holding the interrupted value; ESR/FAR/ELR/SPSR_EL1
//          describe the exception.
// OUTPUTS: never returns; calls `smarm_bare_exception(kind, esr, far, elr)`
//          with an `ExceptionFrame` at the top of the exception stack.
// OPTIONS: global_asm has none. Offsets come from `offset_of!` on
//          `ExceptionFrame` (checked by the const asserts above).
global_asm!(
    r#"
    .macro SMARM_VECTOR_ENTRY kind
    .balign {entry_size}
    sub     sp, sp, #{frame_size}
    stp     x0, x1, [sp, #{r0}]
    mov     x0, #\kind
    b       smarm_bare_exception_common
    .endm

    .section .text.vectors, "ax"
    .balign {table_align}
    .global smarm_bare_vectors
smarm_bare_vectors:
    SMARM_VECTOR_ENTRY 0
    SMARM_VECTOR_ENTRY 1
    SMARM_VECTOR_ENTRY 2
    SMARM_VECTOR_ENTRY 3
    SMARM_VECTOR_ENTRY 4
    SMARM_VECTOR_ENTRY 5
    SMARM_VECTOR_ENTRY 6
    SMARM_VECTOR_ENTRY 7
    SMARM_VECTOR_ENTRY 8
    SMARM_VECTOR_ENTRY 9
    SMARM_VECTOR_ENTRY 10
    SMARM_VECTOR_ENTRY 11
    SMARM_VECTOR_ENTRY 12
    SMARM_VECTOR_ENTRY 13
    SMARM_VECTOR_ENTRY 14
    SMARM_VECTOR_ENTRY 15
    .purgem SMARM_VECTOR_ENTRY

    .balign {entry_size}
    .type smarm_bare_exception_common, %function
smarm_bare_exception_common:
    // x0 = kind (the entry's x0 is already in the frame), x1 saved too.
    stp     x2, x3, [sp, #{r2}]
    stp     x4, x5, [sp, #{r4}]
    stp     x6, x7, [sp, #{r6}]
    stp     x8, x9, [sp, #{r8}]
    stp     x10, x11, [sp, #{r10}]
    stp     x12, x13, [sp, #{r12}]
    stp     x14, x15, [sp, #{r14}]
    stp     x16, x17, [sp, #{r16}]
    stp     x18, x19, [sp, #{r18}]
    stp     x20, x21, [sp, #{r20}]
    stp     x22, x23, [sp, #{r22}]
    stp     x24, x25, [sp, #{r24}]
    stp     x26, x27, [sp, #{r26}]
    stp     x28, x29, [sp, #{r28}]
    str     x30, [sp, #{r30}]
    mrs     x9, sp_el0
    mrs     x10, elr_el1
    stp     x9, x10, [sp, #{sp_el0}]
    mrs     x9, spsr_el1
    str     x9, [sp, #{spsr}]

    mrs     x1, esr_el1
    mrs     x2, far_el1
    mrs     x3, elr_el1
    // Link the handler's frame chain to nothing: the interrupted frames are
    // in the ExceptionFrame, not reachable by unwinding.
    mov     x29, xzr
    mov     x30, xzr
    bl      {handler}
7:  wfe
    b       7b
    .size smarm_bare_exception_common, . - smarm_bare_exception_common
    "#,
    entry_size = const VECTOR_ENTRY_SIZE,
    table_align = const VECTOR_TABLE_ALIGN,
    frame_size = const FRAME_SIZE,
    r0 = const register_offset(0),
    r2 = const register_offset(2),
    r4 = const register_offset(4),
    r6 = const register_offset(6),
    r8 = const register_offset(8),
    r10 = const register_offset(10),
    r12 = const register_offset(12),
    r14 = const register_offset(14),
    r16 = const register_offset(16),
    r18 = const register_offset(18),
    r20 = const register_offset(20),
    r22 = const register_offset(22),
    r24 = const register_offset(24),
    r26 = const register_offset(26),
    r28 = const register_offset(28),
    r30 = const register_offset(30),
    sp_el0 = const offset_of!(ExceptionFrame, sp_el0),
    spsr = const offset_of!(ExceptionFrame, spsr),
    handler = sym smarm_bare_exception,
);
