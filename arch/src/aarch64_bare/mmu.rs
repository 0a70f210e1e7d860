//! The identity map: one constant translation table, and the routine that
//! turns the MMU on with it.
//!
//! Invariant kept: every core translates through the same constant table,
//! which maps RAM as Normal, cacheable, inner-shareable memory — the memory
//! type exclusive loads/stores (every atomic, the allocator's lock, the
//! runtime's rings) are architecturally defined on, and the one that keeps
//! the cores' caches coherent with each other. Nothing writes the table at
//! run time.
//!
//! One level-1 table (4 KiB granule, 39-bit VA, `TTBR0_EL1`) of 1 GiB
//! blocks, virtual = physical:
//!
//! ```text
//!  0x0000_0000..0x4000_0000  Device-nGnRnE, never executable   (GIC, PL011, …)
//!  0x4000_0000..0x8000_0000  Normal, write-back cacheable,      (RAM: the image,
//!                            inner shareable, executable          stacks, heap)
//!  everything else           unmapped: an access faults
//! ```

use core::arch::global_asm;

use aarch64_cpu::registers::{Readable, SCTLR_EL1};

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
const SCTLR_EL1_MMU_AND_CACHES: u64 =
    SCTLR_EL1::M::Enable.value | SCTLR_EL1::C::Cacheable.value | SCTLR_EL1::I::Cacheable.value;

/// A level-1 translation table: 512 descriptors, 4 KiB aligned as
/// `TTBR0_EL1` requires.
#[repr(C, align(4096))]
struct TranslationTable([u64; TABLE_ENTRIES]);

/// The identity map (see the module doc). Immutable, so it sits in
/// `.rodata` and the MMU reads it as the loader left it.
static IDENTITY_MAP: TranslationTable = {
    let mut entries = [0; TABLE_ENTRIES];
    entries[0] = DEVICE_BLOCK;
    entries[1] = RAM_BLOCK;
    TranslationTable(entries)
};

// The values the routine loads with two instructions must fit 32 bits.
const _: () = assert!(MAIR_EL1_VALUE <= u32::MAX as u64);
const _: () = assert!(TCR_EL1_VALUE <= u32::MAX as u64);
// `mov x20, #imm` takes a 16-bit immediate.
const _: () = assert!(SCTLR_EL1_MMU_AND_CACHES == (1 << 0) | (1 << 2) | (1 << 12));
const _: () = assert!(SCTLR_EL1_MMU_AND_CACHES <= u16::MAX as u64);
// Block `n` maps the `n`th GiB, so entry 1 is the RAM at 0x4000_0000.
const _: () = assert!(RAM_BLOCK & !(GIB - 1) == GIB);

// `smarm_bare_mmu_enable`: programs MAIR / TCR / TTBR0 with the identity
// map, forgets stale translations and instructions, then turns the MMU and
// both caches on. Called with `bl` by the entry code of every core, at EL1,
// before any stack exists.
// INPUTS:  x30 = return address. The MMU is off.
// OUTPUTS: the MMU and caches are on; returns with `ret`.
// OPTIONS: global_asm has none. A leaf without a stack: it clobbers only
//          x19 and x20, which the entry code does not hold anything in
//          across the call.
global_asm!(
    r#"
    .section .text.boot, "ax"
    .global smarm_bare_mmu_enable
    .type smarm_bare_mmu_enable, %function
smarm_bare_mmu_enable:
    mov     x19, #({mair} & 0xffff)
    movk    x19, #(({mair} >> 16) & 0xffff), lsl #16
    msr     mair_el1, x19
    mov     x19, #({tcr} & 0xffff)
    movk    x19, #(({tcr} >> 16) & 0xffff), lsl #16
    msr     tcr_el1, x19
    adrp    x19, {table}
    add     x19, x19, :lo12:{table}
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
    ret
    .size smarm_bare_mmu_enable, . - smarm_bare_mmu_enable
    "#,
    mair = const MAIR_EL1_VALUE,
    tcr = const TCR_EL1_VALUE,
    sctlr_mmu = const SCTLR_EL1_MMU_AND_CACHES,
    table = sym IDENTITY_MAP,
);

/// Whether the calling core runs with the MMU and both caches on
/// (`SCTLR_EL1.M`, `C` and `I`), as the boot code leaves every core.
pub fn mmu_and_caches_enabled() -> bool {
    SCTLR_EL1.matches_all(SCTLR_EL1::M::Enable + SCTLR_EL1::C::Cacheable + SCTLR_EL1::I::Cacheable)
}
