//! What a fresh context's entry function sees: a correctly aligned stack and
//! its argument intact.

mod common;

use std::cell::Cell;
use std::hint::black_box;
use std::ptr;

use common::{Seam, Stack, STACK_BYTES};
use smarm_arch::{Arch, Context, Native};

/// sp modulo 16 at the first instruction of a function, per the ABI: x86_64
/// enters with a return address pushed onto a 16-aligned stack; AArch64 keeps
/// sp 16-aligned at all times.
#[cfg(target_arch = "x86_64")]
const SP_AT_ENTRY_MOD_16: usize = 8;
#[cfg(target_arch = "aarch64")]
const SP_AT_ENTRY_MOD_16: usize = 0;

/// What an entry function reports back to the test before switching home.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Report {
    argument: usize,
    sp_at_entry: usize,
    aligned_local_address: usize,
}

/// The contexts of the test running on this thread. Entry functions find
/// them here because their one argument is what is under test.
struct Home {
    seam: Seam,
    main: Context,
    child: Context,
    report: Report,
}

thread_local! {
    static HOME: Cell<*mut Home> = const { Cell::new(ptr::null_mut()) };
}

/// Reports and switches home, for good.
fn report_and_go_home(report: Report) -> ! {
    let home = HOME.with(Cell::get);
    assert!(!home.is_null());
    // SAFETY: the test set `HOME` to a `Home` it keeps alive until after the
    // child's last switch, and is suspended while the child runs.
    unsafe {
        (*home).report = report;
        (*home).seam.leave(&raw mut (*home).child, &raw const (*home).main);
    }
    unreachable!("the test never resumes a context that reported");
}

/// Over-aligned to exactly the ABI stack alignment: the compiler places it
/// assuming sp is aligned and does not re-align the frame, so a misaligned
/// entry shows up in its address.
#[repr(C, align(16))]
struct Aligned16([u8; 16]);

/// Records sp at its very first instruction, then continues in
/// [`entry_body`] with the stack exactly as the trampoline left it (`jmp` /
/// `b` push nothing).
///
/// # Safety
///
/// Only called by a context's trampoline.
#[unsafe(naked)]
unsafe extern "C" fn sp_recording_entry(argument: usize) -> ! {
    // INPUTS:  first argument register = argument; sp as the trampoline
    //          left it.
    // OUTPUTS: second argument register = sp; tail-jumps to `entry_body`.
    // OPTIONS: naked.
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!("mov rsi, rsp", "jmp {body}", body = sym entry_body);
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!("mov x1, sp", "b {body}", body = sym entry_body);
}

extern "C" fn entry_body(argument: usize, sp_at_entry: usize) -> ! {
    let local = Aligned16([0; 16]);
    let aligned_local_address = black_box(&local) as *const Aligned16 as usize;
    report_and_go_home(Report { argument, sp_at_entry, aligned_local_address })
}

unsafe extern "C" fn plain_entry(argument: usize) -> ! {
    report_and_go_home(Report { argument, ..Report::default() })
}

/// Runs a fresh context on `stack_top` until it reports, entering and
/// leaving it through `seam`.
fn run_once(seam: Seam, stack_top: *mut u8, entry: smarm_arch::EntryFn, argument: usize) -> Report {
    let mut home =
        Box::new(Home { seam, main: Context::empty(), child: Context::empty(), report: Report::default() });
    let home_pointer: *mut Home = &raw mut *home;
    HOME.with(|cell| cell.set(home_pointer));
    // SAFETY: callers pass an aligned top of a live stack that outlives this
    // call, which is the last use of the context; `home` outlives the switch.
    unsafe {
        (*home_pointer).child = Native::init_context(stack_top, entry, argument);
        seam.enter(&raw mut (*home_pointer).main, &raw const (*home_pointer).child);
    }
    HOME.with(|cell| cell.set(ptr::null_mut()));
    home.report
}

#[test]
fn stack_is_aligned_at_entry() {
    stack_is_aligned_at_entry_through(Seam::Switch);
}

#[test]
fn stack_is_aligned_at_entry_through_resume() {
    stack_is_aligned_at_entry_through(Seam::ResumeSuspend);
}

fn stack_is_aligned_at_entry_through(seam: Seam) {
    let mut stack = Stack::new(STACK_BYTES);
    let top = stack.top();
    // Every 16-aligned top residue modulo 64, so a layout that only works
    // for 32- or 64-aligned tops fails too.
    for steps in 0..4 {
        // SAFETY: stays within the stack and keeps 16-alignment.
        let stack_top = unsafe { top.sub(steps * Native::STACK_ALIGN) };
        let report = run_once(seam, stack_top, sp_recording_entry, steps);
        assert_eq!(report.argument, steps);
        assert_eq!(
            report.sp_at_entry % 16,
            SP_AT_ENTRY_MOD_16,
            "sp at entry = {:#x} for stack top {stack_top:p}",
            report.sp_at_entry
        );
        assert_eq!(
            report.aligned_local_address % 16,
            0,
            "16-aligned local at {:#x}",
            report.aligned_local_address
        );
        // The entry frame lies within the stack, at or below its top
        // (AArch64 enters with sp = top; x86_64 below the pushed return
        // address).
        assert!(report.sp_at_entry <= stack_top as usize);
        assert!(stack_top as usize - report.sp_at_entry <= Native::INIT_FRAME_SIZE + 64);
    }
    drop(stack);
}

#[test]
fn argument_arrives_intact() {
    argument_arrives_intact_through(Seam::Switch);
}

#[test]
fn argument_arrives_intact_through_resume() {
    argument_arrives_intact_through(Seam::ResumeSuspend);
}

fn argument_arrives_intact_through(seam: Seam) {
    let mut stack = Stack::new(STACK_BYTES);
    for argument in [0xDEAD_BEEF_CAFE_F00D_u64 as usize, 0, usize::MAX, 1 << 63, 0x8000_0001] {
        let report = run_once(seam, stack.top(), plain_entry, argument);
        assert_eq!(report.argument, argument, "argument {argument:#x} arrived as {:#x}", report.argument);
    }
    drop(stack);
}
