//! More than one core: starting the others, and telling cores apart.
//!
//! Invariant kept: a secondary core is started only with a [`CoreBoot`] that
//! names stacks reserved for it alone, and enters through the boot module's
//! secondary entry, so it is set up like the boot core before any Rust runs
//! on it. Each core's identity ([`core_index`]) and per-core pointer
//! ([`thread_pointer`]) are read fresh on every call: a green thread may be
//! resumed on another core between two calls.
//!
//! `TPIDR_EL1` is accessed with hand-written `asm!` rather than through
//! `aarch64-cpu`, whose accessors are `nomem`: the pointer names memory the
//! host reads through it, and a read must not be moved across the
//! `set_thread_pointer` another function made before a switch.

use core::arch::asm;

use aarch64_cpu::registers::{Readable, MPIDR_EL1};

use super::boot::{smarm_bare_secondary_entry, CoreBoot, MPIDR_AFF0_MASK};
use super::psci::{self, PsciError};

/// Starts the core whose `MPIDR_EL1` affinity fields are `target_mpidr`
/// with PSCI `CPU_ON`, through the conduit the [`super::psci`] module
/// picks. The core enters `smarm_bare_secondary_entry`, sets itself up like
/// the boot core on the stacks in `boot`, and calls the image's
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
    let entry = smarm_bare_secondary_entry as *const () as u64;
    let context = boot as *const CoreBoot as u64;
    // SAFETY: the entry is the boot module's secondary entry, written to run
    // with the MMU off and no stack, and `context` is the `CoreBoot` it
    // expects; the caller's conditions 1–3 cover the rest: the new core runs
    // only on the memory `boot` reserves for it, and the conduit reaches
    // PSCI.
    unsafe { psci::cpu_on(target_mpidr, entry, context) }
}

/// `MPIDR_EL1.Aff0` of the calling core: its number within its cluster
/// (0..=3 on QEMU `virt -smp 4`, whose GICv2 machine puts up to eight cores
/// in cluster 0).
pub fn core_index() -> usize {
    // aarch64-cpu reads MPIDR_EL1 with `nomem` but not `pure`: never merged
    // with another read, which matters because a green thread may be
    // resumed on another core between two calls.
    (MPIDR_EL1.get() & MPIDR_AFF0_MASK) as usize
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
