//! Bare-metal AArch64 boot: the reset entry, the exception vectors and the
//! few instructions a board needs (semihosting, WFE / SEV / WFI, the virtual
//! timer).
//!
//! Compiled only for `aarch64-unknown-none` with the `bare-boot` feature, and
//! used by exactly one program: the bare image in `qemu/image/`. It lives here
//! because inline assembly lives only in `smarm-arch`.
//!
//! # The contract with the image
//!
//! The image links against two `extern "C"` symbols that it must define
//! (`#[no_mangle]`); a link-time symbol is acceptable because the image is
//! the only user, and a missing one is a link error, not a silent default:
//!
//! - `smarm_bare_main() -> !` — called once on the boot core, on the boot
//!   stack, with FP/SIMD enabled, `.bss` zeroed and the vectors installed;
//! - `smarm_bare_exception(kind, esr, far, elr) -> !` — called for *every*
//!   exception, on the dedicated exception stack; `kind` is the vector index
//!   (see [`vector_name`]), the rest are `ESR_EL1`, `FAR_EL1`, `ELR_EL1`.
//!
//! And the linker script (`linker/qemu-virt.ld`) must define the symbols
//! `__stack_top`, `__exception_stack_top`, `__bss_start` and `__bss_end`
//! (all 16-byte aligned), and place `.text.boot` at the load address.
//!
//! # What `_start` does, in order
//!
//! 1. Parks every core but the one with `MPIDR_EL1.Aff0 == 0` in a WFE loop
//!    (the runtime drives workers from the boot core only, for now).
//! 2. If entered at EL2 (real boards, or QEMU `-M virt,virtualization=on`),
//!    configures EL2 just enough to run EL1 in AArch64 with the counters
//!    readable, and drops to EL1. EL3 or anything else is unsupported: it
//!    asks semihosting to exit with [`UNSUPPORTED_EL_EXIT_STATUS`] and parks.
//! 3. Enables FP/SIMD (`CPACR_EL1.FPEN`): the `aarch64-unknown-none` target
//!    emits NEON for ordinary code, so this precedes any Rust.
//! 4. Points `SP_EL1` at the exception stack, then selects `SP_EL0` and
//!    points it at the boot stack. Ordinary code (and every green-thread
//!    stack it switches to) runs on `SP_EL0`; an exception switches the CPU
//!    to `SP_EL1` by itself, so the handler still has a good stack when the
//!    fault was a broken stack pointer.
//! 5. Zeroes `.bss` (`__bss_start..__bss_end`, 16 bytes at a time).
//! 6. Installs the vector table in `VBAR_EL1`.
//! 7. Clears the frame pointer and link register (so backtraces end here)
//!    and calls `smarm_bare_main`.
//!
//! Interrupts stay masked (`DAIF` as reset left it): the bare runtime polls.
//! The MMU and caches stay off; on QEMU that is fine, on real hardware
//! exclusive loads/stores (atomics) want normal cacheable memory, which
//! needs the MMU on — later work, with the board that needs it.
//!
//! # The exception vector table
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

use core::arch::{asm, global_asm};
use core::mem::{offset_of, size_of};

/// `CPACR_EL1.FPEN` = 0b11: FP/SIMD instructions do not trap at EL1 or EL0.
const CPACR_EL1_FPEN: u64 = 0b11 << 20;

/// `MPIDR_EL1.Aff0`: the core number within its cluster.
const MPIDR_AFF0_MASK: u64 = 0xff;

/// `CurrentEL` keeps the exception level in bits 3..=2.
const CURRENT_EL_SHIFT: u64 = 2;
/// Exception level 1, where the runtime runs.
const EL1: u64 = 1;
/// Exception level 2, which real boards (and QEMU with virtualization on)
/// enter at.
const EL2: u64 = 2;

/// `HCR_EL2.RW`: EL1 executes in AArch64.
const HCR_EL2_RW: u64 = 1 << 31;
/// `CNTHCTL_EL2.EL1PCTEN | EL1PCEN`: EL1 may read the physical counter and
/// timer without trapping to EL2.
const CNTHCTL_EL2_EL1_COUNTER_ACCESS: u64 = 0b11;
/// `CPTR_EL2` with its RES1 bits set and `TFP` clear: FP/SIMD at EL1 does not
/// trap to EL2.
const CPTR_EL2_NO_TRAPS: u64 = 0x33ff;
/// `SCTLR_EL1` with only its ARMv8.0 RES1 bits set (29, 28, 23, 22, 20, 11):
/// MMU, caches and alignment checks off, little-endian.
const SCTLR_EL1_RES1: u64 = 0x30d0_0800;
/// `SPSR_EL2` for the drop to EL1: mode EL1h (`M = 0b0101`, i.e. using
/// `SP_EL1`) with D, A, I and F masked (`0b1111 << 6`).
const SPSR_EL1H_MASKED: u64 = (0b1111 << 6) | 0b0101;

/// Exit status asked of semihosting when `_start` finds itself at an
/// exception level it does not support (EL0 or EL3).
pub const UNSUPPORTED_EL_EXIT_STATUS: i32 = 4;

/// The vector table is 16 entries of 128 bytes, 2 KiB aligned.
const VECTOR_ENTRY_SIZE: usize = 128;
/// Number of entries in the vector table.
pub const VECTOR_COUNT: u64 = 16;
/// `VBAR_EL1` ignores the low 11 bits: the table must be 2 KiB aligned.
const VECTOR_TABLE_ALIGN: usize = 2048;
const _: () = assert!(VECTOR_ENTRY_SIZE * VECTOR_COUNT as usize == VECTOR_TABLE_ALIGN);

/// Semihosting operation `SYS_WRITE0`: write a NUL-terminated string to the
/// host's console.
const SYS_WRITE0: u64 = 0x04;
/// Semihosting operation `SYS_EXIT`: end the program.
const SYS_EXIT: u64 = 0x18;
/// `ADP_Stopped_ApplicationExit`: the reason code of a normal exit. With the
/// AArch64 (extended) form of `SYS_EXIT`, the second word of the block is
/// the process exit status the host reports.
const ADP_STOPPED_APPLICATION_EXIT: u64 = 0x2_0026;

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

/// `ESR_EL1.EC` (bits 31..=26): the exception class.
pub fn exception_class(esr: u64) -> u64 {
    (esr >> 26) & 0x3f
}

extern "C" {
    /// Defined by the image: the program, run once on the boot core.
    fn smarm_bare_main() -> !;
    /// Defined by the image: reports an exception and ends the program.
    fn smarm_bare_exception(kind: u64, esr: u64, far: u64, elr: u64) -> !;
}

// The reset entry; the sequence is in the module doc.
// INPUTS:  none it relies on (x0 carries the DTB address from QEMU's loader;
//          it is not used). Linker symbols: __stack_top,
//          __exception_stack_top, __bss_start, __bss_end.
// OUTPUTS: never returns; calls `smarm_bare_main` on SP_EL0.
// OPTIONS: global_asm has none. It runs before any stack exists, so it uses
//          only x19..x22 (and x0/x1 for the semihosting call) and system
//          registers.
global_asm!(
    r#"
    .section .text.boot, "ax"
    .global _start
    .type _start, %function
_start:
    // 1. Park secondary cores.
    mrs     x19, mpidr_el1
    and     x19, x19, #{aff0_mask}
    cbz     x19, 2f
1:  wfe
    b       1b

    // 2. Find out where we are: EL1 carries on, EL2 drops to EL1.
2:  mrs     x19, CurrentEL
    lsr     x19, x19, #{current_el_shift}
    and     x19, x19, #3
    cmp     x19, #{el1}
    b.eq    .Lsmarm_at_el1
    cmp     x19, #{el2}
    b.eq    .Lsmarm_from_el2

    // Unsupported exception level: ask semihosting to exit, then park. The
    // exit block is built in x20/x21 and stored just below the image's
    // boot stack, the only memory known to be RAM this early.
    adrp    x20, __stack_top
    add     x20, x20, :lo12:__stack_top
    mov     x21, #({adp_exit} & 0xffff)
    movk    x21, #({adp_exit} >> 16), lsl #16
    mov     x22, #{unsupported_status}
    stp     x21, x22, [x20, #-16]
    sub     x1, x20, #16
    mov     w0, #{sys_exit}
    hlt     #0xf000
3:  wfe
    b       3b

.Lsmarm_from_el2:
    mov     x19, #{hcr_el2_rw}
    msr     hcr_el2, x19
    mrs     x19, cnthctl_el2
    orr     x19, x19, #{cnthctl_el1_access}
    msr     cnthctl_el2, x19
    msr     cntvoff_el2, xzr
    mov     x19, #{cptr_el2}
    msr     cptr_el2, x19
    mov     x19, #({sctlr_el1} & 0xffff)
    movk    x19, #({sctlr_el1} >> 16), lsl #16
    msr     sctlr_el1, x19
    mov     x19, #{spsr_el1h}
    msr     spsr_el2, x19
    adr     x19, .Lsmarm_at_el1
    msr     elr_el2, x19
    eret

.Lsmarm_at_el1:
    // 3. FP/SIMD on, before any Rust code can use it.
    mrs     x19, cpacr_el1
    orr     x19, x19, #{cpacr_fpen}
    msr     cpacr_el1, x19
    isb

    // 4. SP_EL1 = exception stack; then run on SP_EL0 = boot stack.
    adrp    x19, __exception_stack_top
    add     x19, x19, :lo12:__exception_stack_top
    mov     sp, x19
    msr     spsel, #0
    adrp    x19, __stack_top
    add     x19, x19, :lo12:__stack_top
    mov     sp, x19

    // 5. Zero .bss; both ends are 16-byte aligned (linker script).
    adrp    x19, __bss_start
    add     x19, x19, :lo12:__bss_start
    adrp    x20, __bss_end
    add     x20, x20, :lo12:__bss_end
4:  cmp     x19, x20
    b.hs    5f
    stp     xzr, xzr, [x19], #16
    b       4b

    // 6. Exception vectors.
5:  adrp    x19, smarm_bare_vectors
    add     x19, x19, :lo12:smarm_bare_vectors
    msr     vbar_el1, x19
    isb

    // 7. Enter the image with a terminated frame chain.
    mov     x29, xzr
    mov     x30, xzr
    bl      {main}
6:  wfe
    b       6b
    .size _start, . - _start
    "#,
    aff0_mask = const MPIDR_AFF0_MASK,
    current_el_shift = const CURRENT_EL_SHIFT,
    el1 = const EL1,
    el2 = const EL2,
    adp_exit = const ADP_STOPPED_APPLICATION_EXIT,
    unsupported_status = const UNSUPPORTED_EL_EXIT_STATUS,
    sys_exit = const SYS_EXIT,
    hcr_el2_rw = const HCR_EL2_RW,
    cnthctl_el1_access = const CNTHCTL_EL2_EL1_COUNTER_ACCESS,
    cptr_el2 = const CPTR_EL2_NO_TRAPS,
    sctlr_el1 = const SCTLR_EL1_RES1,
    spsr_el1h = const SPSR_EL1H_MASKED,
    cpacr_fpen = const CPACR_EL1_FPEN,
    main = sym smarm_bare_main,
);

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

/// One semihosting call: operation `op` with argument `arg` (a pointer to
/// the operation's parameter block or string). Returns the host's x0.
///
/// # Safety
///
/// `arg` must be what operation `op` expects (for the operations used here:
/// a pointer to memory that stays valid and readable for the call). The
/// program must run under a semihosting host (QEMU `-semihosting`, or a
/// debugger): without one, `hlt` is an undefined instruction and raises a
/// synchronous exception.
unsafe fn semihosting_call(op: u64, arg: usize) -> u64 {
    let result: u64;
    // INPUTS:  w0 = operation, x1 = argument.
    // OUTPUTS: x0 = the host's result.
    // OPTIONS: nostack (touches no stack), preserves_flags (the host changes
    //          no guest flags); not nomem / readonly / pure: the host reads
    //          the block `arg` points to and may have effects (exit, write).
    // SAFETY: the caller guarantees `arg` suits `op` and that a host is
    // attached.
    unsafe {
        asm!(
            "hlt #0xf000",
            inout("x0") op => result,
            in("x1") arg,
            options(nostack, preserves_flags),
        );
    }
    result
}

/// Ends the program through semihosting `SYS_EXIT` (AArch64 extended form):
/// QEMU exits with `status` as its own exit status. If no host takes the
/// call, the core parks in WFE forever.
pub fn semihosting_exit(status: i32) -> ! {
    // The block must stay readable while the host reads it: a local lives
    // until the end of this never-returning function.
    let block: [u64; 2] = [ADP_STOPPED_APPLICATION_EXIT, status as u32 as u64];
    // SAFETY: `block` is the two-word {reason, status} block SYS_EXIT's
    // extended form expects, alive for the call. The image is started with
    // semihosting enabled (qemu/run-bare.sh passes -semihosting); without it
    // the exception handler reports the undefined instruction instead.
    unsafe {
        semihosting_call(SYS_EXIT, block.as_ptr() as usize);
    }
    loop {
        wait_for_event();
    }
}

/// Writes a NUL-terminated string to the semihosting host's console. Useful
/// before (or instead of) a UART.
pub fn semihosting_write0(text: &core::ffi::CStr) {
    // SAFETY: `text` is NUL-terminated and borrowed for the call, which is
    // what SYS_WRITE0 reads; the semihosting host requirement is the same as
    // for `semihosting_exit` above.
    unsafe {
        semihosting_call(SYS_WRITE0, text.as_ptr() as usize);
    }
}

/// Waits for an event (WFE): returns after a SEV from any core, an
/// interrupt becoming pending, or spuriously. Callers loop on a condition.
pub fn wait_for_event() {
    // INPUTS:  none.
    // OUTPUTS: none.
    // OPTIONS: nostack, preserves_flags; deliberately not nomem, so it stays
    //          a compiler barrier and the caller's re-check of memory is not
    //          hoisted above the wait.
    // SAFETY: WFE only pauses the core.
    unsafe { asm!("wfe", options(nostack, preserves_flags)) }
}

/// Signals an event (SEV) to every core, waking those in
/// [`wait_for_event`].
pub fn send_event() {
    // INPUTS:  none.
    // OUTPUTS: none.
    // OPTIONS: nostack, preserves_flags; not nomem, so stores made before it
    //          (the condition the waiter checks) are not sunk past it by the
    //          compiler (ordering between cores is the caller's atomics' job).
    // SAFETY: SEV only sets the event register of every core.
    unsafe { asm!("sev", options(nostack, preserves_flags)) }
}

/// Waits for an interrupt (WFI): returns once an interrupt is pending at the
/// core, *even while `PSTATE.I` masks it* (the image runs with interrupts
/// masked, so nothing is taken: the core just resumes after the WFI), or
/// spuriously. Callers loop on a condition.
///
/// This is what an idle single core sleeps in: pair it with
/// [`virtual_timer_arm`] and a GIC that forwards the virtual timer's PPI,
/// and the core sleeps until the deadline. (QEMU's TCG implements WFE as a
/// bare yield that never sleeps; WFI with a pending-interrupt source does
/// halt the vCPU.)
pub fn wait_for_interrupt() {
    // INPUTS:  none.
    // OUTPUTS: none.
    // OPTIONS: nostack, preserves_flags; not nomem, for the same reason as
    //          `wait_for_event`: the caller re-reads memory after the wait.
    // SAFETY: WFI only pauses the core until an interrupt is pending; with
    // interrupts masked none is taken, so no handler runs.
    unsafe { asm!("wfi", options(nostack, preserves_flags)) }
}

/// `CNTV_CTL_EL0.ENABLE`: the virtual timer compares (with `IMASK` clear,
/// its output line goes high once `CNTVCT_EL0 >= CNTV_CVAL_EL0`).
const CNTV_CTL_ENABLE: u64 = 1 << 0;

/// Arms the EL1 virtual timer to fire when the virtual counter
/// (`CNTVCT_EL0`, the counter behind `Native::timestamp`) reaches
/// `compare`: its interrupt output goes high from then until
/// [`virtual_timer_disarm`]. The output is an interrupt *line*; it wakes a
/// [`wait_for_interrupt`] only through an interrupt controller configured to
/// forward it (the board's job).
pub fn virtual_timer_arm(compare: u64) {
    // INPUTS:  `compare` = the counter value to fire at; `enable` = the
    //          control word (ENABLE set, IMASK clear).
    // OUTPUTS: none (system registers only).
    // OPTIONS: nomem (no memory is read or written), nostack,
    //          preserves_flags. The `isb` makes the new compare value and
    //          control take effect before any later WFI.
    // SAFETY: the virtual timer registers are accessible at EL1 (and at EL0
    // only if CNTKCTL_EL1 allows it, which is irrelevant here); writing them
    // changes only the timer's output line, which the image uses for
    // nothing but waking WFI (interrupts stay masked).
    unsafe {
        asm!(
            "msr cntv_cval_el0, {compare}",
            "msr cntv_ctl_el0, {enable}",
            "isb",
            compare = in(reg) compare,
            enable = in(reg) CNTV_CTL_ENABLE,
            options(nomem, nostack, preserves_flags),
        );
    }
}

/// Disarms the EL1 virtual timer: its interrupt output goes low.
pub fn virtual_timer_disarm() {
    // INPUTS:  none.
    // OUTPUTS: none (system registers only).
    // OPTIONS: nomem, nostack, preserves_flags; `isb` so the line is low
    //          before the caller clears the interrupt's pending state.
    // SAFETY: as in `virtual_timer_arm`: only the timer's output changes.
    unsafe { asm!("msr cntv_ctl_el0, xzr", "isb", options(nomem, nostack, preserves_flags)) }
}
