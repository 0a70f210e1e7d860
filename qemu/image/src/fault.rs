//! CPU exceptions and panics.
//!
//! A CPU exception, and a panic outside any process, end the image: they
//! print what they know on the console and exit through semihosting with a
//! non-zero status, so `qemu/run-bare.sh` fails.
//!
//! A panic *inside* a process is that process's death, not the image's:
//! there is no unwinding on bare metal, so the handler formats the message
//! into a `String` (the one allocation a panic costs; acceptable here, and a
//! panic while doing it is caught as a nested panic below) and abandons the
//! process with `abandon_current(ExitReason::Panicked(message))`. The core marks
//! it `Done`, switches back to its worker and never resumes it; the worker
//! finalizes it exactly as after a hosted `catch_unwind` (monitors get
//! `ExitReason::Panicked(message)`, links propagate, `join` returns
//! `Err(Panicked)`), and the other processes carry on. Nothing on the
//! abandoned stack is dropped.
//!
//! Invariant: no report runs twice. A fault inside a report (a broken UART,
//! a panic while formatting) exits at once with the same status instead of
//! recursing forever; a nested exception says so through semihosting rather
//! than the UART. A panic while abandoning a process (while formatting its
//! message, or inside the core's abandon path) is a nested panic and ends
//! the image.

use alloc::string::ToString;
use core::panic::PanicInfo;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use smarm_core::ExitReason;

use smarm_arch::aarch64_bare::{exception_class, semihosting_write0, vector_name};
use smarm_platform::bare::Board;

use crate::board;
use crate::board::{this_core, CORES};

/// Exit status after a CPU exception.
pub const EXCEPTION_EXIT_STATUS: i32 = 3;
/// Exit status after a panic (the status Rust uses for a panicking test).
pub const PANIC_EXIT_STATUS: i32 = 101;

/// Set by the first report; a second one exits without printing.
static REPORTING: AtomicBool = AtomicBool::new(false);

/// Per core: `Pid::to_bits() + 1` of the process the panic handler is
/// abandoning in the current pass there; 0 for none. A panic in a process
/// already recorded here is nested — formatting its message or the abandon
/// path itself panicked — and ends the image instead of recursing. A
/// successful abandon switches away and never clears it, so the driver
/// loop does, after every pass ([`end_of_pass`]): pids are unique within
/// one runtime, and a pass runs only one runtime's processes.
static ABANDONING: [AtomicU64; CORES] = [const { AtomicU64::new(0) }; CORES];

/// Forgets the processes abandoned on this core in the pass that just ended
/// (see [`ABANDONING`]). Called by the driver loops after every `try_tick`.
pub fn end_of_pass() {
    // Relaxed: each core reads and writes only its own, in program order.
    ABANDONING[this_core()].store(0, Ordering::Relaxed);
}

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

/// Abandons the panicking process (see the module doc); outside a process,
/// or for a nested panic, prints the panic and exits non-zero.
#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    if crate::handler::in_handler() && smarm_core::self_pid().is_none() {
        let message = info.message().to_string();
        crate::println!("actor handler panicked: {message} (abandoned)");
        crate::handler::abandon(message);
    }
    if let Some(pid) = smarm_core::self_pid() {
        let key = pid.to_bits().wrapping_add(1);
        // Relaxed: this core's own record; it only tells a nested panic apart.
        if ABANDONING[this_core()].swap(key, Ordering::Relaxed) != key {
            let message = info.message().to_string();
            match info.location() {
                Some(at) => crate::println!("process {pid} panicked at {at}: {message} (abandoned)"),
                None => crate::println!("process {pid} panicked: {message} (abandoned)"),
            }
            smarm_core::abandon_current(ExitReason::Panicked(message));
            // abandon_current returns only when no process is running,
            // which `self_pid` just ruled out: fall through to the fatal
            // report if the core ever breaks that.
        } else if first_report() {
            crate::println!("nested panic in process {pid} while abandoning it after its panic:");
            crate::println!("{info}");
            board().exit(PANIC_EXIT_STATUS)
        }
    }
    if first_report() {
        crate::println!("{info}");
    }
    board().exit(PANIC_EXIT_STATUS)
}
