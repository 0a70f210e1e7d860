//! Every callee-saved register survives a switch away and back, even when the
//! other context overwrites all of them.
//!
//! One asm routine, [`transfer_with_registers`], is used by both sides: it
//! loads a full set of callee-saved values from a pattern, calls the
//! transfer it is given, and on resumption stores what the registers hold
//! into a record. Main runs it with [`PATTERN`]; the child runs it with
//! [`CLOBBER`], every value different. If the transfer forgot any register,
//! main would read back the child's value for it (and the child main's).
//!
//! Run twice: with `switch` on both sides, and with `resume` (main) /
//! `suspend` (child). `suspend` is inline asm that leaves some registers to
//! the compiler; its C wrapper [`suspend_c`] is where the compiler must save
//! them, so a clobber missing from the asm shows up here too.

mod common;

use core::mem::offset_of;
#[cfg(target_arch = "aarch64")]
use std::cell::Cell;

use common::{Stack, STACK_BYTES};
use smarm_arch::{Arch, Context, Native};

/// A transfer with a C ABI, so assembly can `call` / `blr` it.
type TransferFn = unsafe extern "C" fn(*mut Context, *const Context);

/// The switch with a C ABI, so assembly can `call` / `bl` it.
///
/// On AArch64 Linux every non-leaf function keeps a frame record, so this
/// wrapper saves and restores x29 itself: a switch that forgot x29 would go
/// unnoticed by the register patterns. The wrapper therefore checks its own
/// frame pointer across the switch — the place where such a switch would
/// break real callers (frame-pointer unwinding, locals addressed off x29).
/// [`resume_c`] and [`suspend_c`] do the same.
///
/// # Safety
///
/// The contract of [`Arch::switch`].
unsafe extern "C" fn switch_c(save_into: *mut Context, load_from: *const Context) {
    #[cfg(target_arch = "aarch64")]
    let frame_pointer_before = frame_pointer();
    // SAFETY: forwarded from this function's contract.
    unsafe { Native::switch(save_into, load_from) }
    #[cfg(target_arch = "aarch64")]
    note_frame_pointer(frame_pointer_before);
}

/// [`Arch::resume`] with a C ABI.
///
/// # Safety
///
/// The contract of [`Arch::resume`].
unsafe extern "C" fn resume_c(scheduler: *mut Context, target: *const Context) {
    #[cfg(target_arch = "aarch64")]
    let frame_pointer_before = frame_pointer();
    // SAFETY: forwarded from this function's contract.
    unsafe { Native::resume(scheduler, target) }
    #[cfg(target_arch = "aarch64")]
    note_frame_pointer(frame_pointer_before);
}

/// [`Arch::suspend`] with a C ABI: the compiler saves here whatever the
/// inline asm declares clobbered and the C ABI calls callee-saved.
///
/// # Safety
///
/// The contract of [`Arch::suspend`].
unsafe extern "C" fn suspend_c(current: *mut Context, scheduler: *const Context) {
    #[cfg(target_arch = "aarch64")]
    let frame_pointer_before = frame_pointer();
    // SAFETY: forwarded from this function's contract.
    unsafe { Native::suspend(current, scheduler) }
    #[cfg(target_arch = "aarch64")]
    note_frame_pointer(frame_pointer_before);
}

/// Counts a transfer after which the wrapper's frame pointer changed.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn note_frame_pointer(before: usize) {
    if frame_pointer() != before {
        FRAME_POINTER_CHANGES.with(|changes| changes.set(changes.get() + 1));
    }
}

#[cfg(target_arch = "aarch64")]
thread_local! {
    /// Transfers after which a wrapper found its frame pointer changed. Per
    /// thread: both contexts of a test run on its thread, and the tests run
    /// in parallel.
    static FRAME_POINTER_CHANGES: Cell<usize> = const { Cell::new(0) };
}

/// The current x29.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn frame_pointer() -> usize {
    let value: usize;
    // INPUTS:  none.
    // OUTPUTS: `value` = x29.
    // OPTIONS: nomem, nostack, preserves_flags. Not `pure`, so the compiler
    //          keeps both reads on their side of the switch.
    // SAFETY: reads a register, nothing else.
    unsafe {
        core::arch::asm!("mov {value}, x29", value = out(reg) value, options(nomem, nostack, preserves_flags))
    };
    value
}

#[cfg(target_arch = "x86_64")]
mod registers {
    use super::*;

    /// Every System V callee-saved general-purpose register, plus rsp
    /// around the switch. The floating-point control state (MXCSR, the x87
    /// control word) is not part of a context (see the crate docs), so it
    /// is neither set here nor compared.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    #[repr(C)]
    pub struct Registers {
        pub rbx: u64,
        pub rbp: u64,
        pub r12: u64,
        pub r13: u64,
        pub r14: u64,
        pub r15: u64,
        /// rsp just before the call (inside the routine) and just after.
        pub sp_before: u64,
        pub sp_after: u64,
    }

    pub const PATTERN: Registers = Registers {
        rbx: 0x0101_0101_0101_0b0b,
        rbp: 0x0202_0202_0202_0b0b,
        r12: 0x1212_1212_1212_1212,
        r13: 0x1313_1313_1313_1313,
        r14: 0x1414_1414_1414_1414,
        r15: 0x1515_1515_1515_1515,
        sp_before: 0,
        sp_after: 0,
    };

    pub const CLOBBER: Registers = Registers {
        rbx: 0x6b6b_6b6b_6b6b_6b6b,
        rbp: 0x6c6c_6c6c_6c6c_6c6c,
        r12: 0x6d6d_6d6d_6d6d_6d6d,
        r13: 0x6e6e_6e6e_6e6e_6e6e,
        r14: 0x6f6f_6f6f_6f6f_6f6f,
        r15: 0x7070_7070_7070_7070,
        sp_before: 0,
        sp_after: 0,
    };

    /// Loads `pattern` into every callee-saved register, transfers from
    /// `save_into` to `load_from` with `transfer`, and when resumed stores
    /// the registers into `*record`. Leaves the caller's registers as they
    /// were.
    ///
    /// # Safety
    ///
    /// The contract of `transfer` (that of [`Arch::switch`]); `record`
    /// valid for writes.
    #[inline(never)]
    pub unsafe fn transfer_with_registers(
        transfer: TransferFn,
        save_into: *mut Context,
        load_from: *const Context,
        pattern: &Registers,
        record: *mut Registers,
    ) {
        // INPUTS:  rdi = save_into, rsi = load_from, rdx = pattern,
        //          rcx = record, r8 = transfer.
        // OUTPUTS: *record. rbx and rbp (which asm! may not name) are saved
        //          on the stack and restored; r12–r15 are declared
        //          clobbered; the call clobbers the C ABI's caller-saved set.
        // OPTIONS: none: the block uses the stack (pushes, a call), so it
        //          relies on asm!'s guarantee that rsp is call-aligned on
        //          entry; 16 + 16 bytes keep it aligned for the call.
        // SAFETY: the transfer's contract is the caller's; `pattern` is a
        // valid reference, `record` valid for writes. Everything the block
        // changes and may not leave changed is restored before it ends.
        unsafe {
            core::arch::asm!(
                "push rbp",
                "push rbx",
                "sub rsp, 16",
                "mov [rsp + 8], rcx",
                "mov rbx, [rdx + {rbx}]",
                "mov rbp, [rdx + {rbp}]",
                "mov r12, [rdx + {r12}]",
                "mov r13, [rdx + {r13}]",
                "mov r14, [rdx + {r14}]",
                "mov r15, [rdx + {r15}]",
                "mov [rcx + {sp_before}], rsp",
                "call r8",
                "mov rax, [rsp + 8]",
                "mov [rax + {sp_after}], rsp",
                "mov [rax + {rbx}], rbx",
                "mov [rax + {rbp}], rbp",
                "mov [rax + {r12}], r12",
                "mov [rax + {r13}], r13",
                "mov [rax + {r14}], r14",
                "mov [rax + {r15}], r15",
                "add rsp, 16",
                "pop rbx",
                "pop rbp",
                rbx = const offset_of!(Registers, rbx),
                rbp = const offset_of!(Registers, rbp),
                r12 = const offset_of!(Registers, r12),
                r13 = const offset_of!(Registers, r13),
                r14 = const offset_of!(Registers, r14),
                r15 = const offset_of!(Registers, r15),
                sp_before = const offset_of!(Registers, sp_before),
                sp_after = const offset_of!(Registers, sp_after),
                in("rdi") save_into,
                in("rsi") load_from,
                in("rdx") pattern as *const Registers,
                in("rcx") record,
                in("r8") transfer,
                out("r12") _,
                out("r13") _,
                out("r14") _,
                out("r15") _,
                clobber_abi("C"),
            );
        }
    }

    /// `actual` without the stack-pointer bookkeeping.
    pub fn comparable(actual: Registers) -> Registers {
        Registers { sp_before: 0, sp_after: 0, ..actual }
    }
}

#[cfg(target_arch = "aarch64")]
mod registers {
    use super::*;

    /// Every AAPCS64 callee-saved register but x30, plus sp around the
    /// switch. (x30 holds the return address of the call to the switch:
    /// returning to the right instruction is its check.)
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    #[repr(C)]
    pub struct Registers {
        pub x19: u64,
        pub x20: u64,
        pub x21: u64,
        pub x22: u64,
        pub x23: u64,
        pub x24: u64,
        pub x25: u64,
        pub x26: u64,
        pub x27: u64,
        pub x28: u64,
        pub x29: u64,
        pub padding: u64,
        pub d8: u64,
        pub d9: u64,
        pub d10: u64,
        pub d11: u64,
        pub d12: u64,
        pub d13: u64,
        pub d14: u64,
        pub d15: u64,
        /// sp just before the call (inside the routine) and just after.
        pub sp_before: u64,
        pub sp_after: u64,
    }

    /// `ldp` / `stp` pairs below rely on these fields being adjacent.
    const _: () = {
        const fn adjacent(first: usize, second: usize) -> bool {
            second == first + 8
        }
        assert!(adjacent(offset_of!(Registers, x19), offset_of!(Registers, x20)));
        assert!(adjacent(offset_of!(Registers, x21), offset_of!(Registers, x22)));
        assert!(adjacent(offset_of!(Registers, x23), offset_of!(Registers, x24)));
        assert!(adjacent(offset_of!(Registers, x25), offset_of!(Registers, x26)));
        assert!(adjacent(offset_of!(Registers, x27), offset_of!(Registers, x28)));
        assert!(adjacent(offset_of!(Registers, d8), offset_of!(Registers, d9)));
        assert!(adjacent(offset_of!(Registers, d10), offset_of!(Registers, d11)));
        assert!(adjacent(offset_of!(Registers, d12), offset_of!(Registers, d13)));
        assert!(adjacent(offset_of!(Registers, d14), offset_of!(Registers, d15)));
    };

    pub const PATTERN: Registers = Registers {
        x19: 0x1919_1919_1919_1919,
        x20: 0x2020_2020_2020_2020,
        x21: 0x2121_2121_2121_2121,
        x22: 0x2222_2222_2222_2222,
        x23: 0x2323_2323_2323_2323,
        x24: 0x2424_2424_2424_2424,
        x25: 0x2525_2525_2525_2525,
        x26: 0x2626_2626_2626_2626,
        x27: 0x2727_2727_2727_2727,
        x28: 0x2828_2828_2828_2828,
        x29: 0x2929_2929_2929_2929,
        padding: 0,
        d8: 0x0808_0808_0808_0808,
        d9: 0x0909_0909_0909_0909,
        d10: 0x1010_1010_1010_1010,
        d11: 0x1111_1111_1111_1111,
        d12: 0x1212_1212_1212_1212,
        d13: 0x1313_1313_1313_1313,
        d14: 0x1414_1414_1414_1414,
        d15: 0x1515_1515_1515_1515,
        sp_before: 0,
        sp_after: 0,
    };

    pub const CLOBBER: Registers = Registers {
        x19: 0x9191_9191_9191_9191,
        x20: 0x9292_9292_9292_9292,
        x21: 0x9393_9393_9393_9393,
        x22: 0x9494_9494_9494_9494,
        x23: 0x9595_9595_9595_9595,
        x24: 0x9696_9696_9696_9696,
        x25: 0x9797_9797_9797_9797,
        x26: 0x9898_9898_9898_9898,
        x27: 0x9999_9999_9999_9999,
        x28: 0x9a9a_9a9a_9a9a_9a9a,
        x29: 0x9b9b_9b9b_9b9b_9b9b,
        padding: 0,
        d8: 0xd8d8_d8d8_d8d8_d8d8,
        d9: 0xd9d9_d9d9_d9d9_d9d9,
        d10: 0xdada_dada_dada_dada,
        d11: 0xdbdb_dbdb_dbdb_dbdb,
        d12: 0xdcdc_dcdc_dcdc_dcdc,
        d13: 0xdddd_dddd_dddd_dddd,
        d14: 0xdede_dede_dede_dede,
        d15: 0xdfdf_dfdf_dfdf_dfdf,
        sp_before: 0,
        sp_after: 0,
    };

    /// Loads `pattern` into every callee-saved register, transfers from
    /// `save_into` to `load_from` with `transfer`, and when resumed stores
    /// the registers into `*record`. Leaves the caller's registers as they
    /// were.
    ///
    /// # Safety
    ///
    /// The contract of `transfer` (that of [`Arch::switch`]); `record`
    /// valid for writes.
    #[inline(never)]
    pub unsafe fn transfer_with_registers(
        transfer: TransferFn,
        save_into: *mut Context,
        load_from: *const Context,
        pattern: &Registers,
        record: *mut Registers,
    ) {
        // INPUTS:  x0 = save_into, x1 = load_from, x2 = pattern,
        //          x3 = record.
        // OUTPUTS: *record. x19 and x29 (which asm! may not name) are saved
        //          on the stack and restored; x20–x28 are declared
        //          clobbered; clobber_abi("C") covers x0–x17, x30 and all of
        //          v0–v31 (so d8–d15 too, as their upper halves are
        //          caller-saved).
        // OPTIONS: none: the block uses the stack and makes a call; sp is
        //          16-aligned throughout (32-byte spill area).
        // SAFETY: the transfer's contract is the caller's; `pattern` is a
        // valid reference, `record` valid for writes. Everything the block
        // changes and may not leave changed is restored before it ends.
        unsafe {
            core::arch::asm!(
                "sub sp, sp, #32",
                "stp x19, x29, [sp]",
                "str x3, [sp, #16]",
                "ldp x19, x20, [x2, #{x19}]",
                "ldp x21, x22, [x2, #{x21}]",
                "ldp x23, x24, [x2, #{x23}]",
                "ldp x25, x26, [x2, #{x25}]",
                "ldp x27, x28, [x2, #{x27}]",
                "ldr x29, [x2, #{x29}]",
                "ldp d8, d9, [x2, #{d8}]",
                "ldp d10, d11, [x2, #{d10}]",
                "ldp d12, d13, [x2, #{d12}]",
                "ldp d14, d15, [x2, #{d14}]",
                "mov x9, sp",
                "str x9, [x3, #{sp_before}]",
                "blr x4",
                "ldr x9, [sp, #16]",
                "mov x10, sp",
                "str x10, [x9, #{sp_after}]",
                "stp x19, x20, [x9, #{x19}]",
                "stp x21, x22, [x9, #{x21}]",
                "stp x23, x24, [x9, #{x23}]",
                "stp x25, x26, [x9, #{x25}]",
                "stp x27, x28, [x9, #{x27}]",
                "str x29, [x9, #{x29}]",
                "stp d8, d9, [x9, #{d8}]",
                "stp d10, d11, [x9, #{d10}]",
                "stp d12, d13, [x9, #{d12}]",
                "stp d14, d15, [x9, #{d14}]",
                "ldp x19, x29, [sp]",
                "add sp, sp, #32",
                x19 = const offset_of!(Registers, x19),
                x21 = const offset_of!(Registers, x21),
                x23 = const offset_of!(Registers, x23),
                x25 = const offset_of!(Registers, x25),
                x27 = const offset_of!(Registers, x27),
                x29 = const offset_of!(Registers, x29),
                d8 = const offset_of!(Registers, d8),
                d10 = const offset_of!(Registers, d10),
                d12 = const offset_of!(Registers, d12),
                d14 = const offset_of!(Registers, d14),
                sp_before = const offset_of!(Registers, sp_before),
                sp_after = const offset_of!(Registers, sp_after),
                in("x0") save_into,
                in("x1") load_from,
                in("x2") pattern as *const Registers,
                in("x3") record,
                in("x4") transfer,
                out("x20") _,
                out("x21") _,
                out("x22") _,
                out("x23") _,
                out("x24") _,
                out("x25") _,
                out("x26") _,
                out("x27") _,
                out("x28") _,
                clobber_abi("C"),
            );
        }
    }

    /// `actual` without the stack-pointer bookkeeping.
    pub fn comparable(actual: Registers) -> Registers {
        Registers { sp_before: 0, sp_after: 0, ..actual }
    }
}

use registers::{comparable, transfer_with_registers, Registers, CLOBBER, PATTERN};

const ROUNDS: usize = 3;

struct Shared {
    /// How the child goes back to main: `switch_c` or `suspend_c`.
    leave: TransferFn,
    main: Context,
    child: Context,
    /// What the child found in its registers each time it was resumed.
    child_records: [Registers; ROUNDS],
    child_resumes: usize,
}

unsafe extern "C" fn clobbering_child(arg: usize) -> ! {
    let shared = arg as *mut Shared;
    let mut record = Registers::default();
    loop {
        // SAFETY: main keeps `*shared` alive while it can switch here and is
        // suspended while this runs; both contexts are valid; `record` is a
        // local.
        unsafe {
            let leave = (*shared).leave;
            transfer_with_registers(
                leave,
                &raw mut (*shared).child,
                &raw const (*shared).main,
                &CLOBBER,
                &mut record,
            );
            let resumes = (*shared).child_resumes;
            if resumes < ROUNDS {
                (*shared).child_records[resumes] = record;
            }
            (*shared).child_resumes = resumes + 1;
        }
    }
}

#[test]
fn every_callee_saved_register_survives_a_clobbering_context() {
    survives_a_clobbering_context(switch_c, switch_c);
}

#[test]
fn every_callee_saved_register_survives_resume_and_suspend() {
    survives_a_clobbering_context(resume_c, suspend_c);
}

/// Main enters the child with `enter`; the child leaves with `leave`.
fn survives_a_clobbering_context(enter: TransferFn, leave: TransferFn) {
    #[cfg(target_arch = "aarch64")]
    FRAME_POINTER_CHANGES.with(|changes| changes.set(0));
    // Sanity: the two sets differ in every field, or a forgotten register
    // could go unnoticed.
    let (pattern, clobber) = (comparable(PATTERN), comparable(CLOBBER));
    assert_ne!(pattern, clobber);

    let mut stack = Stack::new(STACK_BYTES);
    let shared = Box::into_raw(Box::new(Shared {
        leave,
        main: Context::empty(),
        child: Context::empty(),
        child_records: [Registers::default(); ROUNDS],
        child_resumes: 0,
    }));
    // SAFETY: the stack is aligned, large, and outlives every switch into it.
    unsafe { (*shared).child = Native::init_context(stack.top(), clobbering_child, shared as usize) };

    for round in 0..ROUNDS {
        let mut record = Registers::default();
        // SAFETY: `shared` is live and the child suspended; the child
        // context is resumable.
        unsafe {
            transfer_with_registers(
                enter,
                &raw mut (*shared).main,
                &raw const (*shared).child,
                &PATTERN,
                &mut record,
            )
        };
        assert_eq!(record.sp_before, record.sp_after, "main's sp changed across the switch (round {round})");
        assert_eq!(comparable(record), pattern, "main's registers after round {round}");
    }

    // SAFETY: the child is suspended for good.
    let shared = unsafe { Box::from_raw(shared) };
    // The child was resumed ROUNDS - 1 times (its first run was a fresh
    // start, the last switch left it suspended).
    assert_eq!(shared.child_resumes, ROUNDS - 1);
    for (resume, record) in shared.child_records[..ROUNDS - 1].iter().enumerate() {
        assert_eq!(
            record.sp_before, record.sp_after,
            "child's sp changed across the switch (resume {resume})"
        );
        assert_eq!(comparable(*record), clobber, "child's registers after resume {resume}");
    }
    #[cfg(target_arch = "aarch64")]
    assert_eq!(FRAME_POINTER_CHANGES.with(Cell::get), 0, "transfers that changed the caller's x29");
    drop(stack);
}
