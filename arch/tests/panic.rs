//! Panics and backtraces inside a context: a panic is caught at the entry
//! function and switching keeps working; a backtrace taken inside a context
//! ends at its entry instead of walking off the top of its stack.

mod common;

use std::backtrace::Backtrace;
use std::panic::{self, AssertUnwindSafe};

use common::{Seam, Stack, STACK_BYTES};
use smarm_arch::{Arch, Context, Native};

/// How one turn of the child ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Pending,
    Returned(u32),
    Panicked(String),
}

struct Shared {
    seam: Seam,
    main: Context,
    child: Context,
    turn: u32,
    outcome: Outcome,
}

/// The work of one turn: panics on turn 1.
fn work(turn: u32) -> u32 {
    if turn == 1 {
        panic!("deliberate panic on turn {turn}");
    }
    turn * 10
}

unsafe extern "C" fn catching_entry(arg: usize) -> ! {
    let shared = arg as *mut Shared;
    loop {
        // SAFETY: main keeps `*shared` alive while it can switch here and is
        // suspended while this runs.
        let turn = unsafe { (*shared).turn };
        let outcome = match panic::catch_unwind(AssertUnwindSafe(|| work(turn))) {
            Ok(value) => Outcome::Returned(value),
            Err(payload) => Outcome::Panicked(
                payload
                    .downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| "<non-string payload>".to_owned()),
            ),
        };
        // SAFETY: as above; both contexts are valid.
        unsafe {
            (*shared).outcome = outcome;
            (*shared).seam.leave(&raw mut (*shared).child, &raw const (*shared).main);
        }
    }
}

#[test]
fn panic_is_caught_at_entry_and_switching_continues() {
    panic_is_caught_at_entry(Seam::Switch);
}

#[test]
fn panic_is_caught_at_entry_and_suspend_works_afterwards() {
    panic_is_caught_at_entry(Seam::ResumeSuspend);
}

fn panic_is_caught_at_entry(seam: Seam) {
    let mut stack = Stack::new(STACK_BYTES);
    let shared = Box::into_raw(Box::new(Shared {
        seam,
        main: Context::empty(),
        child: Context::empty(),
        turn: 0,
        outcome: Outcome::Pending,
    }));
    // SAFETY: the stack is aligned, large, and outlives every switch into it.
    unsafe { (*shared).child = Native::init_context(stack.top(), catching_entry, shared as usize) };

    let mut outcomes = Vec::new();
    for turn in 0..4 {
        // SAFETY: `shared` is live and the child suspended.
        unsafe {
            (*shared).turn = turn;
            (*shared).outcome = Outcome::Pending;
            seam.enter(&raw mut (*shared).main, &raw const (*shared).child);
            outcomes.push(std::mem::replace(&mut (*shared).outcome, Outcome::Pending));
        }
    }

    assert_eq!(
        outcomes,
        [
            Outcome::Returned(0),
            Outcome::Panicked("deliberate panic on turn 1".to_owned()),
            Outcome::Returned(20),
            Outcome::Returned(30),
        ]
    );
    // SAFETY: the child is suspended for good.
    drop(unsafe { Box::from_raw(shared) });
    drop(stack);
}

struct BacktraceHome {
    seam: Seam,
    main: Context,
    child: Context,
    rendered: String,
}

#[inline(never)]
fn capture_inside_context() -> String {
    Backtrace::force_capture().to_string()
}

unsafe extern "C" fn backtrace_entry(arg: usize) -> ! {
    let home = arg as *mut BacktraceHome;
    let rendered = capture_inside_context();
    // SAFETY: the test keeps `*home` alive and is suspended while this runs.
    unsafe {
        (*home).rendered = rendered;
        (*home).seam.leave(&raw mut (*home).child, &raw const (*home).main);
    }
    unreachable!("never resumed");
}

#[test]
fn backtrace_inside_a_context_stops_at_its_entry() {
    backtrace_stops_at_entry(Seam::Switch);
}

#[test]
fn backtrace_inside_a_resumed_context_stops_at_its_entry() {
    backtrace_stops_at_entry(Seam::ResumeSuspend);
}

#[inline(never)]
fn backtrace_stops_at_entry(seam: Seam) {
    // On the test thread's own stack, the walk reaches the test harness...
    let outside = capture_inside_context();
    assert!(outside.contains("backtrace_stops_at_entry"), "{outside}");

    let mut stack = Stack::new(STACK_BYTES);
    let mut home = Box::new(BacktraceHome {
        seam,
        main: Context::empty(),
        child: Context::empty(),
        rendered: String::new(),
    });
    let home_pointer: *mut BacktraceHome = &raw mut *home;
    // SAFETY: the stack outlives the only switch into the context; `home`
    // outlives the switch.
    unsafe {
        (*home_pointer).child = Native::init_context(stack.top(), backtrace_entry, home_pointer as usize);
        seam.enter(&raw mut (*home_pointer).main, &raw const (*home_pointer).child);
    }
    let inside = std::mem::take(&mut home.rendered);

    // ...inside a context it reaches the entry function and stops there:
    // nothing from the thread that switched in, nothing past the trampoline.
    assert!(inside.contains("capture_inside_context"), "{inside}");
    assert!(inside.contains("backtrace_entry"), "{inside}");
    assert!(!inside.contains("backtrace_stops_at_entry"), "{inside}");
    let frames: Vec<&str> = inside.lines().filter(|line| is_frame_line(line)).collect();
    assert!(frames.len() < 32, "{} frames: the walk did not stop at the entry\n{inside}", frames.len());
    // The outermost frame is the trampoline, whose CFI ends the walk.
    let outermost = frames.last().copied().unwrap_or_default();
    assert!(outermost.contains("trampoline"), "outermost frame {outermost:?}\n{inside}");
    drop(stack);
}

/// `Backtrace`'s rendering numbers frames as "  N: symbol"; source
/// locations follow on "at ..." lines.
fn is_frame_line(line: &str) -> bool {
    line.trim_start()
        .split_once(':')
        .is_some_and(|(number, _)| !number.is_empty() && number.bytes().all(|byte| byte.is_ascii_digit()))
}
