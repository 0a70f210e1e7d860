//! A million round trips between two contexts, with a counter that each side
//! checks before handing it to the other: once with `switch` both ways, once
//! with `resume` in and `suspend` out.

mod common;

use common::{Seam, Stack, STACK_BYTES};
use smarm_arch::{Arch, Context, Native};

const ROUND_TRIPS: u64 = if cfg!(miri) { 100 } else { 1_000_000 };

/// State both contexts reach through a raw pointer. Neither side holds a
/// reference across a switch; every access is a raw read or write.
struct Shared {
    seam: Seam,
    main: Context,
    child: Context,
    /// Odd while the child owes a reply, even when main owns it.
    counter: u64,
    /// Round trips the child completed, counted on the child's own stack and
    /// published here.
    child_rounds: u64,
    /// First value the child saw that it did not expect, if any.
    child_mismatch: Option<(u64, u64)>,
}

unsafe extern "C" fn child_entry(arg: usize) -> ! {
    let shared = arg as *mut Shared;
    // Lives on the child's stack: it surviving a million switches is part of
    // what the test checks.
    let mut rounds: u64 = 0;
    loop {
        // SAFETY: `shared` points at the `Shared` that main keeps alive for
        // as long as it switches into this context; main is suspended while
        // this runs, so the accesses do not race, and no reference outlives
        // the switch.
        unsafe {
            let counter = (*shared).counter;
            let expected = 2 * rounds + 1;
            if counter != expected && (*shared).child_mismatch.is_none() {
                (*shared).child_mismatch = Some((expected, counter));
            }
            (*shared).counter = counter + 1;
            rounds += 1;
            (*shared).child_rounds = rounds;
            (*shared).seam.leave(&raw mut (*shared).child, &raw const (*shared).main);
        }
    }
}

#[test]
fn a_million_round_trips_keep_the_counter_in_step() {
    round_trips(Seam::Switch);
}

#[test]
fn a_million_resume_suspend_round_trips_keep_the_counter_in_step() {
    round_trips(Seam::ResumeSuspend);
}

fn round_trips(seam: Seam) {
    let mut stack = Stack::new(STACK_BYTES);
    let shared = Box::into_raw(Box::new(Shared {
        seam,
        main: Context::empty(),
        child: Context::empty(),
        counter: 0,
        child_rounds: 0,
        child_mismatch: None,
    }));
    // SAFETY: the stack is 16-aligned, 256 KiB, and outlives every switch
    // into the context (it is dropped at the end of this function, after the
    // last switch).
    unsafe { (*shared).child = Native::init_context(stack.top(), child_entry, shared as usize) };

    for round in 0..ROUND_TRIPS {
        // SAFETY: `shared` is live (freed below); the child is suspended
        // whenever main runs, so these accesses do not race. `child` holds a
        // context from `init_context` or from the child's last switch.
        unsafe {
            let counter = (*shared).counter;
            assert_eq!(counter, 2 * round, "main saw the wrong counter before round {round}");
            (*shared).counter = counter + 1;
            seam.enter(&raw mut (*shared).main, &raw const (*shared).child);
            assert_eq!((*shared).counter, 2 * round + 2, "main saw the wrong counter after round {round}");
        }
    }

    // SAFETY: the child is suspended for good; nothing else points at
    // `shared` any more.
    let shared = unsafe { Box::from_raw(shared) };
    assert_eq!(shared.child_mismatch, None, "child saw (expected, actual)");
    assert_eq!(shared.child_rounds, ROUND_TRIPS);
    assert_eq!(shared.counter, 2 * ROUND_TRIPS);
    drop(stack);
}
