//! The two ways the image ends badly: a CPU exception and a panic. Both print
//! what they know on the console and exit through semihosting with a
//! non-zero status, so `qemu/run-bare.sh` fails.
//!
//! Invariant: neither report runs twice. A fault inside the report (a broken
//! UART, a panic while formatting) exits at once with the same status
//! instead of recursing forever; a nested exception says so through
//! semihosting rather than the UART.

use core::panic::PanicInfo;
use core::sync::atomic::{AtomicBool, Ordering};

use smarm_arch::aarch64_bare::{exception_class, semihosting_write0, vector_name};
use smarm_platform::bare::Board;

use crate::board;

/// Exit status after a CPU exception.
pub const EXCEPTION_EXIT_STATUS: i32 = 3;
/// Exit status after a panic (the status Rust uses for a panicking test).
pub const PANIC_EXIT_STATUS: i32 = 101;

/// Set by the first report; a second one exits without printing.
static REPORTING: AtomicBool = AtomicBool::new(false);

/// Returns whether this is the first report. AcqRel: orders nothing else,
/// but makes the flag a plain one-shot latch on any memory model.
fn first_report() -> bool {
    !REPORTING.swap(true, Ordering::AcqRel)
}

/// Called by the vector table in `smarm_arch::aarch64_bare` for every
/// exception (interrupts are masked, so in practice: synchronous faults and
/// SErrors).
#[no_mangle]
pub extern "C" fn smarm_bare_exception(kind: u64, esr: u64, far: u64, elr: u64) -> ! {
    if !first_report() {
        // The UART or the formatting may be what faulted: say it through
        // the debugger channel instead.
        semihosting_write0(c"exception while reporting an earlier fault or panic\n");
    } else {
        let class = exception_class(esr);
        crate::println!("exception: {} (vector {kind})", vector_name(kind));
        crate::println!("  class {class:#04x} ({})", describe_class(class));
        crate::println!("  ESR_EL1 {esr:#018x}  FAR_EL1 {far:#018x}  ELR_EL1 {elr:#018x}");
    }
    board().exit(EXCEPTION_EXIT_STATUS)
}

/// The exception classes a runtime bug is likely to raise.
fn describe_class(class: u64) -> &'static str {
    match class {
        0x00 => "unknown reason, e.g. an undefined instruction",
        0x07 => "FP/SIMD access trapped",
        0x0e => "illegal execution state",
        0x15 => "SVC from AArch64",
        0x20 => "instruction abort from a lower EL",
        0x21 => "instruction abort, same EL",
        0x22 => "PC alignment fault",
        0x24 => "data abort from a lower EL",
        0x25 => "data abort, same EL",
        0x26 => "SP alignment fault",
        0x2f => "SError",
        0x3c => "BRK instruction",
        _ => "see the Arm ARM, ESR_ELx.EC",
    }
}

/// Prints the panic and exits non-zero. This is the image-wide version; the
/// scheduler's version (abandon the panicking process, carry on) comes with
/// the scheduler scenarios.
#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    if first_report() {
        crate::println!("{info}");
    }
    board().exit(PANIC_EXIT_STATUS)
}
