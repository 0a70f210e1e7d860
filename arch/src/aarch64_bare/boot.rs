//! Reset and secondary-core entry: from the first instruction to the image's
//! `main`.
//!
//! Invariant kept: no Rust code runs on a core before it is at EL1 with the
//! MMU, the caches and FP/SIMD on, `SP_EL1` on its exception stack, `SP_EL0`
//! on its boot stack, `TPIDR_EL1` cleared and the vectors installed. The
//! entry code is assembly because none of that holds at reset.
//!
//! # What `_start` does, in order
//!
//! 1. Parks every core but the one with `MPIDR_EL1.Aff0 == 0` in a WFE loop
//!    (for loaders that release every core at once; QEMU `virt` with PSCI
//!    keeps the secondaries powered off until [`start_core`] asks for them,
//!    and they enter at `smarm_bare_secondary_entry` instead).
//! 2. If entered at EL2 (real boards, or QEMU `-M virt,virtualization=on`),
//!    configures EL2 just enough to run EL1 in AArch64 with the counters
//!    readable, and drops to EL1. EL3 or anything else is unsupported: it
//!    asks semihosting to exit with [`UNSUPPORTED_EL_EXIT_STATUS`] and parks.
//! 3. Turns the MMU on with the identity map ([`super::mmu`]), data and
//!    instruction caches included.
//! 4. Enables FP/SIMD (`CPACR_EL1.FPEN`): the `aarch64-unknown-none` target
//!    emits NEON for ordinary code, so this precedes any Rust.
//! 5. Clears `TPIDR_EL1`, the per-core pointer the image keeps its
//!    current-worker record in ([`thread_pointer`]).
//! 6. Points `SP_EL1` at the exception stack, then selects `SP_EL0` and
//!    points it at the boot stack. Ordinary code (and every green-thread
//!    stack it switches to) runs on `SP_EL0`; an exception switches the CPU
//!    to `SP_EL1` by itself, so the handler still has a good stack when the
//!    fault was a broken stack pointer.
//! 7. Zeroes `.bss` (`__bss_start..__bss_end`, 16 bytes at a time), then
//!    records the exception level it entered at (for [`start_core`]'s
//!    choice of PSCI conduit).
//! 8. Installs the vector table ([`super::vectors`]) in `VBAR_EL1`.
//! 9. Clears the frame pointer and link register (so backtraces end here)
//!    and calls `smarm_bare_main`.
//!
//! A secondary core (started by PSCI `CPU_ON` at
//! `smarm_bare_secondary_entry`, `x0` = its [`CoreBoot`]) runs steps 2–6
//! and 8–9 with the stacks its `CoreBoot` names (never `.bss` zeroing) and
//! calls `smarm_bare_secondary_main`.
//!
//! [`start_core`]: super::start_core
//! [`thread_pointer`]: super::thread_pointer

use core::arch::global_asm;
use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicU64, Ordering};

use aarch64_cpu::registers::{CurrentEL, CNTHCTL_EL2, CPACR_EL1, HCR_EL2, MPIDR_EL1, SPSR_EL2};

use super::semihosting::{ADP_STOPPED_APPLICATION_EXIT, SYS_EXIT};

/// `CPACR_EL1.FPEN` = 0b11: FP/SIMD instructions do not trap at EL1 or EL0.
const CPACR_EL1_FPEN: u64 = CPACR_EL1::FPEN::TrapNothing.value;

/// `MPIDR_EL1.Aff0`: the core number within its cluster.
pub(super) const MPIDR_AFF0_MASK: u64 = MPIDR_EL1::Aff0.mask << MPIDR_EL1::Aff0.shift;

/// `CurrentEL.EL`: where the exception level sits in `CurrentEL`.
const CURRENT_EL_SHIFT: usize = CurrentEL::EL.shift;
const CURRENT_EL_MASK: u64 = CurrentEL::EL.mask;
/// Exception level 1, where the runtime runs.
const EL1: u64 = CurrentEL::EL::EL1.value >> CURRENT_EL_SHIFT;
/// Exception level 2, which real boards (and QEMU with virtualization on)
/// enter at.
pub(super) const EL2: u64 = CurrentEL::EL::EL2.value >> CURRENT_EL_SHIFT;

/// `HCR_EL2.RW`: EL1 executes in AArch64.
const HCR_EL2_RW: u64 = HCR_EL2::RW::EL1IsAarch64.value;
/// `CNTHCTL_EL2.EL1PCTEN | EL1PCEN`: EL1 may read the physical counter and
/// timer without trapping to EL2.
const CNTHCTL_EL2_EL1_COUNTER_ACCESS: u64 =
    CNTHCTL_EL2::EL1PCTEN::SET.value | CNTHCTL_EL2::EL1PCEN::SET.value;
/// `CPTR_EL2` with its RES1 bits set and `TFP` clear: FP/SIMD at EL1 does not
/// trap to EL2. (The RES1 bits have no named field to build them from.)
const CPTR_EL2_NO_TRAPS: u64 = 0x33ff;
/// `SCTLR_EL1` with only its ARMv8.0 RES1 bits set (29, 28, 23, 22, 20, 11):
/// MMU, caches and alignment checks off, little-endian.
const SCTLR_EL1_RES1: u64 = 0x30d0_0800;
/// `SPSR_EL2` for the drop to EL1: mode EL1h (using `SP_EL1`) with D, A, I
/// and F masked.
const SPSR_EL1H_MASKED: u64 = SPSR_EL2::D::Masked.value
    | SPSR_EL2::A::Masked.value
    | SPSR_EL2::I::Masked.value
    | SPSR_EL2::F::Masked.value
    | SPSR_EL2::M::EL1h.value;

/// Exit status asked of semihosting when `_start` finds itself at an
/// exception level it does not support (EL0 or EL3).
pub const UNSUPPORTED_EL_EXIT_STATUS: i32 = 4;

// The asm uses these as logical or 16-bit move immediates.
const _: () = assert!(MPIDR_AFF0_MASK == 0xff);
const _: () = assert!(CURRENT_EL_MASK == 0b11 && EL1 == 1 && EL2 == 2);
const _: () = assert!(HCR_EL2_RW == 1 << 31);
const _: () = assert!(SPSR_EL1H_MASKED == (0b1111 << 6) | 0b0101);
const _: () = assert!(CPACR_EL1_FPEN == 0b11 << 20);
const _: () = assert!(SPSR_EL1H_MASKED <= u16::MAX as u64);
const _: () = assert!(SCTLR_EL1_RES1 <= u32::MAX as u64);

/// What a secondary core needs before any Rust runs on it: its two stacks.
/// The image fills one per core and hands it to [`start_core`]; the core's
/// entry code reads it (after turning its MMU on) and passes it on to
/// `smarm_bare_secondary_main`.
///
/// [`start_core`]: super::start_core
#[derive(Debug)]
#[repr(C)]
pub struct CoreBoot {
    /// Top of the core's boot stack (`SP_EL0`), 16-byte aligned.
    pub stack_top: usize,
    /// Top of the core's exception stack (`SP_EL1`), 16-byte aligned.
    pub exception_stack_top: usize,
    /// The image's number for the core (it need not be `MPIDR_EL1.Aff0`).
    pub core: usize,
}

// The entry code loads both stack tops with `ldr` at these offsets.
const _: () = assert!(offset_of!(CoreBoot, stack_top).is_multiple_of(8));
const _: () = assert!(offset_of!(CoreBoot, exception_stack_top).is_multiple_of(8));

/// The exception level the boot core entered `_start` at (1 or 2), stored
/// by `_start` once `.bss` is zeroed (this static lives there); 0 before.
static ENTRY_EXCEPTION_LEVEL: AtomicU64 = AtomicU64::new(0);
// `_start` stores it with a 64-bit `str`.
const _: () = assert!(size_of::<AtomicU64>() == 8);

/// Whether the boot core entered at EL2, read by the PSCI calls to pick
/// their conduit. Only meaningful once `_start` has run (always, for Rust).
pub(super) fn entered_at_el2() -> bool {
    // Relaxed: written once by `_start` on the boot core before any Rust
    // ran, and every core that can call this started after it.
    ENTRY_EXCEPTION_LEVEL.load(Ordering::Relaxed) == EL2
}

extern "C" {
    /// Defined by the image: the program, run once on the boot core.
    fn smarm_bare_main() -> !;
    /// Defined by the image: what each started secondary core runs.
    fn smarm_bare_secondary_main(boot: &'static CoreBoot) -> !;
    /// Defined below in assembly: where PSCI `CPU_ON` starts a secondary.
    pub(super) fn smarm_bare_secondary_entry();
}

// The reset entry, the secondary entry and their shared set-up; the
// sequence is in the module doc.
// INPUTS:  `_start`: nothing it relies on (x0 carries the DTB address from
//          QEMU's loader; it is not used). `smarm_bare_secondary_entry`:
//          x0 = the core's `CoreBoot` (PSCI's context id). Linker symbols:
//          __stack_top, __exception_stack_top, __bss_start, __bss_end.
// OUTPUTS: never returns; calls `smarm_bare_main` (boot core) or
//          `smarm_bare_secondary_main(x0 = CoreBoot)` on SP_EL0.
// OPTIONS: global_asm has none. It runs before any stack exists, so it uses
//          only x19..x24 (and x0/x1 for the semihosting call, x30 for the
//          call to `smarm_bare_mmu_enable`, which uses only x19/x20) and
//          system registers. x23 holds the `CoreBoot` (0 on the boot core)
//          from entry to the call, x24 the exception level entered at; the
//          EL2 drop (eret) preserves both.
global_asm!(
    r#"
    .section .text.boot, "ax"
    .global _start
    .type _start, %function
_start:
    // 1. Park secondary cores a loader released together with this one.
    mrs     x19, mpidr_el1
    and     x19, x19, #{aff0_mask}
    cbz     x19, 1f
0:  wfe
    b       0b
1:  mov     x23, xzr
    b       2f
    .size _start, . - _start

    .global smarm_bare_secondary_entry
    .type smarm_bare_secondary_entry, %function
smarm_bare_secondary_entry:
    mov     x23, x0

    // 2. Find out where we are: EL1 carries on, EL2 drops to EL1.
2:  mrs     x19, CurrentEL
    lsr     x19, x19, #{current_el_shift}
    and     x19, x19, #{current_el_mask}
    mov     x24, x19
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
    // 3. MMU and caches on (see the mmu module).
    bl      smarm_bare_mmu_enable

    // 4. FP/SIMD on, before any Rust code can use it.
    mrs     x19, cpacr_el1
    orr     x19, x19, #{cpacr_fpen}
    msr     cpacr_el1, x19
    isb

    // 5. No current worker on this core yet.
    msr     tpidr_el1, xzr

    // 6. SP_EL1 = exception stack; then run on SP_EL0 = boot stack.
    cbnz    x23, .Lsmarm_secondary_stacks
    adrp    x19, __exception_stack_top
    add     x19, x19, :lo12:__exception_stack_top
    mov     sp, x19
    msr     spsel, #0
    adrp    x19, __stack_top
    add     x19, x19, :lo12:__stack_top
    mov     sp, x19

    // 7. Zero .bss (boot core only); both ends are 16-byte aligned.
    adrp    x19, __bss_start
    add     x19, x19, :lo12:__bss_start
    adrp    x20, __bss_end
    add     x20, x20, :lo12:__bss_end
4:  cmp     x19, x20
    b.hs    41f
    stp     xzr, xzr, [x19], #16
    b       4b
    // Record the level the boot core entered at (it lives in .bss, so only
    // now): the PSCI calls pick their conduit from it.
41: adrp    x19, {entry_el}
    add     x19, x19, :lo12:{entry_el}
    str     x24, [x19]
    b       5f

.Lsmarm_secondary_stacks:
    ldr     x19, [x23, #{boot_exception_stack_top}]
    mov     sp, x19
    msr     spsel, #0
    ldr     x19, [x23, #{boot_stack_top}]
    mov     sp, x19

    // 8. Exception vectors.
5:  adrp    x19, smarm_bare_vectors
    add     x19, x19, :lo12:smarm_bare_vectors
    msr     vbar_el1, x19
    isb

    // 9. Enter the image with a terminated frame chain.
    mov     x29, xzr
    mov     x30, xzr
    cbnz    x23, 7f
    bl      {main}
6:  wfe
    b       6b
7:  mov     x0, x23
    bl      {secondary_main}
8:  wfe
    b       8b
    .size smarm_bare_secondary_entry, . - smarm_bare_secondary_entry
    "#,
    aff0_mask = const MPIDR_AFF0_MASK,
    current_el_shift = const CURRENT_EL_SHIFT,
    current_el_mask = const CURRENT_EL_MASK,
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
    boot_stack_top = const offset_of!(CoreBoot, stack_top),
    boot_exception_stack_top = const offset_of!(CoreBoot, exception_stack_top),
    entry_el = sym ENTRY_EXCEPTION_LEVEL,
    main = sym smarm_bare_main,
    secondary_main = sym smarm_bare_secondary_main,
);
