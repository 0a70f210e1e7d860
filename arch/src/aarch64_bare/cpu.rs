//! What a core does between runs: wait (WFE / WFI), wake others (SEV),
//! order its memory accesses against devices (DSB), and set the virtual
//! timer that ends a WFI.
//!
//! Invariant kept: every wait is a compiler barrier, so a caller's re-check
//! of memory after it is never hoisted above it, and a wake (SEV) never has
//! the stores it announces sunk below it. That is why WFE, WFI and SEV are
//! written here instead of taken from `aarch64-cpu`, whose versions are
//! `nomem` and so promise the compiler they touch no memory. The timer and
//! the barriers have no such need and use `aarch64-cpu`.

use core::arch::asm;

use aarch64_cpu::asm::barrier;
use aarch64_cpu::registers::{Writeable, CNTV_CTL_EL0, CNTV_CVAL_EL0};

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

/// Arms the EL1 virtual timer to fire when the virtual counter
/// (`CNTVCT_EL0`, the counter behind `Native::timestamp`) reaches
/// `compare`: its interrupt output goes high from then until
/// [`virtual_timer_disarm`]. The output is an interrupt *line*; it wakes a
/// [`wait_for_interrupt`] only through an interrupt controller configured to
/// forward it (the board's job).
pub fn virtual_timer_arm(compare: u64) {
    // The virtual timer registers are accessible at EL1; writing them
    // changes only the timer's output line, which the image uses for nothing
    // but waking WFI (interrupts stay masked). The `isb` makes the new
    // compare value and control take effect before any later WFI.
    CNTV_CVAL_EL0.set(compare);
    CNTV_CTL_EL0.write(CNTV_CTL_EL0::ENABLE::SET + CNTV_CTL_EL0::IMASK::CLEAR);
    barrier::isb(barrier::SY);
}

/// Disarms the EL1 virtual timer: its interrupt output goes low.
pub fn virtual_timer_disarm() {
    // `isb` so the line is low before the caller clears the interrupt's
    // pending state.
    CNTV_CTL_EL0.set(0);
    barrier::isb(barrier::SY);
}

/// `DSB SY`: every memory access before it — to RAM and to device
/// registers — completes before any access after it. The board needs it
/// between "publish a wake in RAM" and "raise an interrupt at the GIC"
/// (and between "clear the interrupt" and "re-check RAM"): a barrier of
/// the atomics' kind (`DMB`) does not order a Normal-memory store against
/// a Device write's side effect at another core.
pub fn data_synchronization_barrier() {
    // aarch64-cpu's `dsb` is `asm!` with only `nostack`: a compiler barrier
    // too, so accesses are not moved across it.
    barrier::dsb(barrier::SY);
}
