//! Chains of hand-offs between two contexts that a scheduler resumes: every
//! way a context can be saved (`hand_off`, `suspend`, fresh) is entered by a
//! `hand_off`, and every way it can be entered is left by one, with each
//! side's stack-local count checked against the shared record.

mod common;

use common::{Stack, STACK_BYTES};
use smarm_arch::{Arch, Context, Native};

const ROUNDS: usize = if cfg!(miri) { 30 } else { 300_000 };

/// State every context reaches through a raw pointer; no reference lives
/// across a switch.
struct Shared {
    main: Context,
    children: [Context; 2],
    /// Which child should be running now, as whoever switched to it said.
    expected: usize,
    /// Hand-offs still to make in this round before suspending to main.
    hand_offs_left: usize,
    /// Steps (landings) each child counted on its own stack, published.
    steps: [u64; 2],
    /// Steps each child should have counted, kept by the switching side.
    expected_steps: [u64; 2],
    /// First mismatch seen by a child: (child, what it found).
    mismatch: Option<(usize, &'static str)>,
}

unsafe extern "C" fn child_entry(arg: usize) -> ! {
    let shared = (arg & !1) as *mut Shared;
    let me = arg & 1;
    let mut steps: u64 = 0;
    loop {
        // SAFETY: `shared` outlives every switch into this context; only one
        // context runs at a time, and no reference outlives a switch.
        unsafe {
            steps += 1;
            (*shared).steps[me] = steps;
            if (*shared).expected != me && (*shared).mismatch.is_none() {
                (*shared).mismatch = Some((me, "landed in the wrong context"));
            }
            if steps != (*shared).expected_steps[me] && (*shared).mismatch.is_none() {
                (*shared).mismatch = Some((me, "a stack-local count went astray"));
            }
            let own = &raw mut (*shared).children[me];
            if (*shared).hand_offs_left > 0 {
                (*shared).hand_offs_left -= 1;
                let other = 1 - me;
                (*shared).expected = other;
                (*shared).expected_steps[other] += 1;
                Native::hand_off(own, &raw const (*shared).children[other]);
            } else {
                Native::suspend(own, &raw const (*shared).main);
            }
        }
    }
}

#[test]
fn chains_of_hand_offs_land_where_they_should() {
    let mut stacks = [Stack::new(STACK_BYTES), Stack::new(STACK_BYTES)];
    let shared = Box::into_raw(Box::new(Shared {
        main: Context::empty(),
        children: [Context::empty(), Context::empty()],
        expected: 0,
        hand_offs_left: 0,
        steps: [0; 2],
        expected_steps: [0; 2],
        mismatch: None,
    }));
    for (child, stack) in stacks.iter_mut().enumerate() {
        // SAFETY: the stacks are 16-aligned, 256 KiB, and outlive every
        // switch into their contexts; `Box` keeps `Shared` 2-aligned, so the
        // low bit of the argument is free for the child's number.
        unsafe {
            (*shared).children[child] =
                Native::init_context(stack.top(), child_entry, shared as usize | child);
        }
    }
    for round in 0..ROUNDS {
        // Alternating the child resumed and varying the chain's length
        // (0, 1, 2 hand-offs) enters contexts saved by `suspend` and by
        // `hand_off`, and fresh ones, through both `resume` and `hand_off`.
        let child = round % 2;
        // SAFETY: `shared` is live; both children are suspended whenever
        // main runs, so every context holds a resumable one.
        unsafe {
            (*shared).hand_offs_left = round % 3;
            (*shared).expected = child;
            (*shared).expected_steps[child] += 1;
            Native::resume(&raw mut (*shared).main, &raw const (*shared).children[child]);
            assert_eq!((*shared).mismatch, None, "round {round}");
            assert_eq!((*shared).hand_offs_left, 0, "round {round}: the chain ended early");
        }
    }
    // SAFETY: no context runs; the children are never resumed again.
    let shared = unsafe { Box::from_raw(shared) };
    assert_eq!(shared.steps, shared.expected_steps);
    assert!(shared.steps[0] > ROUNDS as u64 / 2 && shared.steps[1] > ROUNDS as u64 / 2);
}
