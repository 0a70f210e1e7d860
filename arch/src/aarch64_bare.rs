//! Bare-metal AArch64 boot: the reset entry, the secondary-core entry, the
//! exception vectors and the few instructions a board needs (semihosting,
//! PSCI, WFE / SEV / WFI, barriers, the virtual timer, the core's identity).
//!
//! Compiled only for `aarch64-unknown-none` with the `bare-boot` feature, and
//! used by exactly one program: the bare image in `qemu/image/`. It lives here
//! because inline assembly lives only in `smarm-arch`.
//!
//! # The contract with the image
//!
//! The image links against three `extern "C"` symbols that it must define
//! (`#[no_mangle]`); a link-time symbol is acceptable because the image is
//! the only user, and a missing one is a link error, not a silent default:
//!
//! - `smarm_bare_main() -> !` — called once on the boot core, on the boot
//!   stack, with the MMU and caches on, FP/SIMD enabled, `.bss` zeroed and
//!   the vectors installed;
//! - `smarm_bare_secondary_main(boot: &'static CoreBoot) -> !` — called on
//!   each core started with [`start_core`], on the stacks its [`CoreBoot`]
//!   names, set up like the boot core (MMU, FP/SIMD, vectors);
//! - `smarm_bare_exception(kind, esr, far, elr) -> !` — called for *every*
//!   exception, on the calling core's exception stack; `kind` is the vector
//!   index (see [`vector_name`]), the rest are `ESR_EL1`, `FAR_EL1`,
//!   `ELR_EL1`.
//!
//! And the linker script (`linker/qemu-virt.ld`) must define the symbols
//! `__stack_top`, `__exception_stack_top`, `__bss_start` and `__bss_end`
//! (all 16-byte aligned), and place `.text.boot` at the load address.
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
//! 3. Turns the MMU on with the identity map described below, data and
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
//! 8. Installs the vector table in `VBAR_EL1`.
//! 9. Clears the frame pointer and link register (so backtraces end here)
//!    and calls `smarm_bare_main`.
//!
//! A secondary core (started by PSCI `CPU_ON` at
//! `smarm_bare_secondary_entry`, `x0` = its [`CoreBoot`]) runs steps 2–6
//! and 8–9 with the stacks its `CoreBoot` names (never `.bss` zeroing) and
//! calls `smarm_bare_secondary_main`.
//!
//! Interrupts stay masked (`DAIF` as reset left it): the bare runtime polls,
//! and a pending interrupt only ends a WFI.
//!
//! # The identity map
//!
//! One level-1 table (4 KiB granule, 39-bit VA, `TTBR0_EL1`) of 1 GiB
//! blocks, virtual = physical, shared by every core:
//!
//! ```text
//!  0x0000_0000..0x4000_0000  Device-nGnRnE, never executable   (GIC, PL011, …)
//!  0x4000_0000..0x8000_0000  Normal, write-back cacheable,      (RAM: the image,
//!                            inner shareable, executable          stacks, heap)
//!  everything else           unmapped: an access faults
//! ```
//!
//! Normal memory is what exclusive loads/stores (every atomic, the
//! allocator's lock, the runtime's rings) are architecturally defined on,
//! and inner shareable makes the cores' caches coherent with each other.
//! The table is constant data in `.rodata`; nothing writes it at run time.
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
use core::sync::atomic::{AtomicU64, Ordering};

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

/// `MAIR_EL1`: attribute 0 = Device-nGnRnE (`0x00`), attribute 1 = Normal,
/// inner and outer write-back non-transient, read- and write-allocate
/// (`0xff`).
const MAIR_EL1_VALUE: u64 = 0xff << 8;
/// `AttrIndx` of the device attribute in [`MAIR_EL1_VALUE`].
const ATTR_DEVICE: u64 = 0;
/// `AttrIndx` of the normal-memory attribute in [`MAIR_EL1_VALUE`].
const ATTR_NORMAL: u64 = 1;
/// `TCR_EL1`: `T0SZ` = 25 (39-bit VA, so the walk starts at level 1 with
/// 1 GiB entries), `IRGN0` = `ORGN0` = write-back write-allocate,
/// `SH0` = inner shareable, `TG0` = 4 KiB, `EPD1` (no `TTBR1_EL1` walks),
/// `IPS` = 32 bits (every address the image touches is below 4 GiB).
const TCR_EL1_VALUE: u64 = 25 | (0b01 << 8) | (0b01 << 10) | (0b11 << 12) | (1 << 23);
/// A level-1 block descriptor: `0b01` in bits 1..0.
const DESCRIPTOR_BLOCK: u64 = 0b01;
/// Descriptor `AF`: the access flag (set, so the first access does not fault).
const DESCRIPTOR_AF: u64 = 1 << 10;
/// Descriptor `SH` = inner shareable.
const DESCRIPTOR_INNER_SHAREABLE: u64 = 0b11 << 8;
/// Descriptor `PXN | UXN`: never executable.
const DESCRIPTOR_NEVER_EXECUTE: u64 = (1 << 53) | (1 << 54);
/// Bytes mapped by one level-1 block.
const GIB: u64 = 1 << 30;
/// The device block: the first GiB (the GIC at 0x0800_0000, the PL011 at
/// 0x0900_0000 and the rest of QEMU `virt`'s low MMIO).
const DEVICE_BLOCK: u64 = DESCRIPTOR_BLOCK | (ATTR_DEVICE << 2) | DESCRIPTOR_AF | DESCRIPTOR_NEVER_EXECUTE;
/// The RAM block: the second GiB (QEMU `virt`'s RAM starts at 0x4000_0000).
const RAM_BLOCK: u64 =
    GIB | DESCRIPTOR_BLOCK | (ATTR_NORMAL << 2) | DESCRIPTOR_AF | DESCRIPTOR_INNER_SHAREABLE;
/// Entries in a 4 KiB-granule translation table.
const TABLE_ENTRIES: usize = 512;
/// `SCTLR_EL1.M | C | I`: MMU, data cache, instruction cache.
const SCTLR_EL1_MMU_AND_CACHES: u64 = (1 << 0) | (1 << 2) | (1 << 12);

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

/// What a secondary core needs before any Rust runs on it: its two stacks.
/// The image fills one per core and hands it to [`start_core`]; the core's
/// entry code reads it (after turning its MMU on) and passes it on to
/// `smarm_bare_secondary_main`.
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

extern "C" {
    /// Defined by the image: the program, run once on the boot core.
    fn smarm_bare_main() -> !;
    /// Defined by the image: what each started secondary core runs.
    fn smarm_bare_secondary_main(boot: &'static CoreBoot) -> !;
    /// Defined by the image: reports an exception and ends the program.
    fn smarm_bare_exception(kind: u64, esr: u64, far: u64, elr: u64) -> !;
    /// Defined below in assembly: where PSCI `CPU_ON` starts a secondary.
    fn smarm_bare_secondary_entry();
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
//          only x19..x24 (and x0/x1 for the semihosting call) and system
//          registers. x23 holds the `CoreBoot` (0 on the boot core) from
//          entry to the call, x24 the exception level entered at; the EL2
//          drop (eret) preserves both.
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
    and     x19, x19, #3
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
    // 3. MMU on: attributes, translation control, the table; forget any
    //    stale translations and instructions, then enable.
    mov     x19, #({mair} & 0xffff)
    movk    x19, #(({mair} >> 16) & 0xffff), lsl #16
    msr     mair_el1, x19
    mov     x19, #({tcr} & 0xffff)
    movk    x19, #(({tcr} >> 16) & 0xffff), lsl #16
    msr     tcr_el1, x19
    adrp    x19, smarm_bare_page_table
    add     x19, x19, :lo12:smarm_bare_page_table
    msr     ttbr0_el1, x19
    isb
    tlbi    vmalle1
    ic      iallu
    dsb     nsh
    isb
    mrs     x19, sctlr_el1
    mov     x20, #{sctlr_mmu}
    orr     x19, x19, x20
    msr     sctlr_el1, x19
    isb

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
    // now): `start_core` picks the PSCI conduit from it.
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

    // The identity map (see the module doc): 1 GiB level-1 blocks.
    .section .rodata.smarm_bare_page_table, "a"
    .balign 4096
    .global smarm_bare_page_table
smarm_bare_page_table:
    .quad   {device_block}
    .quad   {ram_block}
    .fill   {table_entries} - 2, 8, 0
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
    mair = const MAIR_EL1_VALUE,
    tcr = const TCR_EL1_VALUE,
    sctlr_mmu = const SCTLR_EL1_MMU_AND_CACHES,
    cpacr_fpen = const CPACR_EL1_FPEN,
    boot_stack_top = const offset_of!(CoreBoot, stack_top),
    boot_exception_stack_top = const offset_of!(CoreBoot, exception_stack_top),
    device_block = const DEVICE_BLOCK,
    ram_block = const RAM_BLOCK,
    table_entries = const TABLE_ENTRIES,
    entry_el = sym ENTRY_EXCEPTION_LEVEL,
    main = sym smarm_bare_main,
    secondary_main = sym smarm_bare_secondary_main,
);

// The values the set-up code loads with two instructions must fit 32 bits.
const _: () = assert!(MAIR_EL1_VALUE <= u32::MAX as u64);
const _: () = assert!(TCR_EL1_VALUE <= u32::MAX as u64);
// `mov x20, #imm` takes a 16-bit immediate.
const _: () = assert!(SCTLR_EL1_MMU_AND_CACHES <= u16::MAX as u64);

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
/// This is what an idle core sleeps in: pair it with [`virtual_timer_arm`]
/// and a GIC that forwards the virtual timer's PPI, and the core sleeps
/// until the deadline; another core ends the sleep early by raising a
/// software-generated interrupt at it (SEV would not: it ends WFE only).
/// (QEMU's TCG implements WFE as a bare yield that never sleeps; WFI with a
/// pending-interrupt source does halt the vCPU.)
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

/// `MPIDR_EL1.Aff0` of the calling core: its number within its cluster
/// (0..=3 on QEMU `virt -smp 4`, whose GICv2 machine puts up to eight cores
/// in cluster 0).
pub fn core_index() -> usize {
    let mpidr: u64;
    // INPUTS:  none.
    // OUTPUTS: `mpidr` = MPIDR_EL1.
    // OPTIONS: nomem, nostack, preserves_flags; not `pure`: the value is
    //          the *calling core's*, and a green thread may be resumed on
    //          another core between two calls, so two reads must not be
    //          merged across code that may switch.
    // SAFETY: MPIDR_EL1 is readable at EL1 and reading it has no effect.
    unsafe { asm!("mrs {}, mpidr_el1", out(reg) mpidr, options(nomem, nostack, preserves_flags)) };
    (mpidr & MPIDR_AFF0_MASK) as usize
}

/// The calling core's `TPIDR_EL1`: a pointer-sized register each core has
/// for itself, which nothing but the image uses (the boot code clears it on
/// every core before Rust runs). The bare host keeps the core's
/// current-worker pointer in it.
pub fn thread_pointer() -> usize {
    let value: usize;
    // INPUTS:  none.
    // OUTPUTS: `value` = TPIDR_EL1.
    // OPTIONS: nostack, preserves_flags; not nomem / pure, so it is neither
    //          hoisted above nor merged with a `set_thread_pointer` the
    //          compiler cannot see (another function's, before a switch).
    // SAFETY: TPIDR_EL1 is an ordinary read/write register at EL1.
    unsafe { asm!("mrs {}, tpidr_el1", out(reg) value, options(nostack, preserves_flags)) };
    value
}

/// Sets the calling core's `TPIDR_EL1` (see [`thread_pointer`]).
pub fn set_thread_pointer(value: usize) {
    // INPUTS:  `value`.
    // OUTPUTS: none (TPIDR_EL1).
    // OPTIONS: nostack, preserves_flags; not nomem, for the reason given in
    //          `thread_pointer`.
    // SAFETY: TPIDR_EL1 is an ordinary read/write register at EL1 with no
    // architectural meaning; only this module's callers interpret it.
    unsafe { asm!("msr tpidr_el1, {}", in(reg) value, options(nostack, preserves_flags)) };
}

/// `DSB SY`: every memory access before it — to RAM and to device
/// registers — completes before any access after it. The board needs it
/// between "publish a wake in RAM" and "raise an interrupt at the GIC"
/// (and between "clear the interrupt" and "re-check RAM"): a barrier of
/// the atomics' kind (`DMB`) does not order a Normal-memory store against
/// a Device write's side effect at another core.
pub fn data_synchronization_barrier() {
    // INPUTS:  none.
    // OUTPUTS: none.
    // OPTIONS: nostack, preserves_flags; not nomem: it is a compiler
    //          barrier too, so accesses are not moved across it.
    // SAFETY: a barrier only waits.
    unsafe { asm!("dsb sy", options(nostack, preserves_flags)) };
}

/// PSCI 0.2 `CPU_ON`, SMC64 calling convention.
const PSCI_CPU_ON_64: u64 = 0xc400_0003;

/// Why PSCI refused to start a core (the PSCI return codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PsciError {
    /// `NOT_SUPPORTED`: the firmware (here: QEMU) has no `CPU_ON`.
    NotSupported,
    /// `INVALID_PARAMETERS`: no core has that MPIDR (fewer cores than
    /// asked for: run QEMU with `-smp 4`).
    InvalidParameters,
    /// `DENIED`.
    Denied,
    /// `ALREADY_ON`: the core runs already (a loader started every core).
    AlreadyOn,
    /// `ON_PENDING`: a `CPU_ON` for the core is in progress.
    OnPending,
    /// `INTERNAL_FAILURE`.
    InternalFailure,
    /// `INVALID_ADDRESS`: the entry point was refused.
    InvalidAddress,
    /// Any other code.
    Other(i32),
}

impl core::fmt::Display for PsciError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PsciError::NotSupported => f.write_str("PSCI CPU_ON is not supported by the firmware"),
            PsciError::InvalidParameters => {
                f.write_str("no such core (PSCI INVALID_PARAMETERS): start QEMU with -smp 4")
            }
            PsciError::Denied => f.write_str("PSCI denied CPU_ON"),
            PsciError::AlreadyOn => f.write_str("the core is already on (started by the loader?)"),
            PsciError::OnPending => f.write_str("a CPU_ON for the core is already pending"),
            PsciError::InternalFailure => f.write_str("PSCI internal failure"),
            PsciError::InvalidAddress => f.write_str("PSCI refused the entry point address"),
            PsciError::Other(code) => write!(f, "PSCI CPU_ON returned {code}"),
        }
    }
}

impl core::error::Error for PsciError {}

/// Starts the core whose `MPIDR_EL1` affinity fields are `target_mpidr`
/// with PSCI `CPU_ON`. The conduit is the one QEMU `virt` advertises in its
/// device tree (`/psci method`) for a guest without firmware: `HVC` when
/// the machine boots the guest at EL1 (the default), `SMC` when it boots it
/// at EL2 (`virtualization=on`; the image has dropped to EL1 since, and
/// QEMU takes the `SMC` from EL1 as its PSCI call). The core enters
/// `smarm_bare_secondary_entry`, sets itself up like the boot core on the
/// stacks in `boot`, and calls the image's
/// `smarm_bare_secondary_main(boot)`.
///
/// Returns once PSCI has accepted the request; the core may not have run a
/// single instruction yet (the image waits for it to check in).
///
/// # Safety
///
/// 1. `boot.stack_top` and `boot.exception_stack_top` are 16-byte aligned
///    tops of memory reserved for that core's stacks for the rest of the
///    program (nothing else reads or writes it);
/// 2. the image's `smarm_bare_secondary_main` is ready to run on a new core
///    (whatever it shares with the running cores is synchronised);
/// 3. the platform implements PSCI over HVC for a guest booted at EL1 and
///    over SMC for one booted at EL2 (QEMU `virt` without `secure=on`);
///    elsewhere the call is undefined or reaches firmware or a hypervisor
///    that does something else.
pub unsafe fn start_core(target_mpidr: u64, boot: &'static CoreBoot) -> Result<(), PsciError> {
    let entry = smarm_bare_secondary_entry as *const () as usize;
    let context = boot as *const CoreBoot as usize;
    let status: u64;
    // Relaxed: written once by `_start` on this (the boot) core.
    let through_smc = ENTRY_EXCEPTION_LEVEL.load(Ordering::Relaxed) == EL2;
    // INPUTS:  x0 = PSCI function id (CPU_ON, SMC64), x1 = target MPIDR,
    //          x2 = entry point (physical = virtual: identity map),
    //          x3 = context id (arrives in the new core's x0).
    // OUTPUTS: x0 = PSCI status (0 = success, negative = error).
    // OPTIONS: nostack; clobber_abi("C") because the SMC calling convention
    //          lets the callee change x4..x17 (QEMU changes only x0). Not
    //          nomem: the started core reads `boot` and the image's memory,
    //          so every store before the call must be emitted before it.
    // SAFETY: the caller's conditions 1–3: the new core runs only on the
    // memory `boot` reserves for it, and the conduit reaches PSCI.
    unsafe {
        if through_smc {
            asm!(
                "smc #0",
                inlateout("x0") PSCI_CPU_ON_64 => status,
                in("x1") target_mpidr,
                in("x2") entry,
                in("x3") context,
                options(nostack),
                clobber_abi("C"),
            );
        } else {
            asm!(
                "hvc #0",
                inlateout("x0") PSCI_CPU_ON_64 => status,
                in("x1") target_mpidr,
                in("x2") entry,
                in("x3") context,
                options(nostack),
                clobber_abi("C"),
            );
        }
    }
    match status as u32 as i32 {
        0 => Ok(()),
        -1 => Err(PsciError::NotSupported),
        -2 => Err(PsciError::InvalidParameters),
        -3 => Err(PsciError::Denied),
        -4 => Err(PsciError::AlreadyOn),
        -5 => Err(PsciError::OnPending),
        -6 => Err(PsciError::InternalFailure),
        -9 => Err(PsciError::InvalidAddress),
        code => Err(PsciError::Other(code)),
    }
}

/// Whether the calling core runs with the MMU and both caches on
/// (`SCTLR_EL1.M`, `C` and `I`), as the boot code leaves every core.
pub fn mmu_and_caches_enabled() -> bool {
    let sctlr: u64;
    // INPUTS:  none.
    // OUTPUTS: `sctlr` = SCTLR_EL1.
    // OPTIONS: nomem, nostack, preserves_flags: a register read with no
    //          side effect.
    // SAFETY: SCTLR_EL1 is readable at EL1 and reading it has no effect.
    unsafe { asm!("mrs {}, sctlr_el1", out(reg) sctlr, options(nomem, nostack, preserves_flags)) };
    sctlr & SCTLR_EL1_MMU_AND_CACHES == SCTLR_EL1_MMU_AND_CACHES
}
