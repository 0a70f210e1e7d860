//! Semihosting: console output and program exit through the debug host
//! (QEMU `-semihosting`).
//!
//! Invariant kept: a semihosting call is made only with the parameter block
//! its operation expects, alive for the whole call. Without a host the `hlt`
//! is an undefined instruction, which the vectors report like any other
//! exception.

use core::arch::asm;

/// Semihosting operation `SYS_WRITE0`: write a NUL-terminated string to the
/// host's console.
const SYS_WRITE0: u64 = 0x04;
/// Semihosting operation `SYS_EXIT`: end the program.
pub(super) const SYS_EXIT: u64 = 0x18;
/// `ADP_Stopped_ApplicationExit`: the reason code of a normal exit. With the
/// AArch64 (extended) form of `SYS_EXIT`, the second word of the block is
/// the process exit status the host reports.
pub(super) const ADP_STOPPED_APPLICATION_EXIT: u64 = 0x2_0026;

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
        super::wait_for_event();
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
