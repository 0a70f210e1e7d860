//! Bare-metal AArch64: everything between reset and the image's `main`, and
//! the few instructions a board needs afterwards.
//!
//! Compiled only for `aarch64-unknown-none` with the `bare-boot` feature, and
//! used by exactly one program: the bare image in `qemu/image/`. It lives here
//! because inline assembly lives only in `smarm-arch`.
//!
//! One module per concern, each keeping one invariant:
//!
//! - [`boot`] — the reset and secondary-core entries: no Rust runs before
//!   the core is at EL1 with the MMU, caches and FP/SIMD on and both stacks
//!   set;
//! - [`mmu`] — the identity map and the routine that turns it on: the table
//!   is constant and maps RAM as Normal memory, so atomics work;
//! - [`vectors`] — the exception vector table: every exception reaches the
//!   image's handler on a good stack, with the interrupted state saved;
//! - [`semihosting`] — console output and exit through the debug host;
//! - [`psci`] — PSCI calls through the conduit QEMU advertises for the
//!   exception level the image booted at;
//! - [`smp`] — starting the other cores and telling cores apart (their
//!   number, their per-core pointer);
//! - [`cpu`] — waiting (WFE / WFI), waking (SEV), barriers and the virtual
//!   timer.
//!
//! Everything a caller needs is re-exported here, so the image names it as
//! `aarch64_bare::start_core`, `aarch64_bare::semihosting_exit`, and so on.
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
//! Interrupts stay masked (`DAIF` as reset left it): the bare runtime polls,
//! and a pending interrupt only ends a WFI.

pub mod boot;
pub mod cpu;
pub mod mmu;
pub mod psci;
pub mod semihosting;
pub mod smp;
pub mod vectors;

pub use boot::{CoreBoot, UNSUPPORTED_EL_EXIT_STATUS};
pub use cpu::{
    data_synchronization_barrier, send_event, virtual_timer_arm, virtual_timer_disarm, wait_for_event,
    wait_for_interrupt,
};
pub use mmu::mmu_and_caches_enabled;
pub use psci::PsciError;
pub use semihosting::{semihosting_exit, semihosting_write0};
pub use smp::{core_index, set_thread_pointer, start_core, thread_pointer};
pub use vectors::{exception_class, vector_name, ExceptionFrame, VECTOR_COUNT};
