//! Scenario `switch`: two contexts ping-pong through [`Arch::switch`].
//!
//! The boot stack and a heap-allocated stack take turns incrementing one
//! counter, each checking before its increment that the other side made
//! exactly its own: after round trip `i` the counter must be `2 * (i + 1)`.
//! A lost, doubled or misdirected switch shows up as a wrong count; clobbered
//! callee-saved state shows up as a wrong count, a wrong loop index or an
//! exception. The child's stack comes from `BarePlatform::allocate_stack`
//! (a canary stack), and its canary is checked afterwards. It also measures
//! the cost of one switch on the counter.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;

use smarm_arch::{Arch, Context, Native};
use smarm_platform::{Platform, Stack};

use crate::{board, PLATFORM};

/// Round trips (main → child → main); each is two switches.
const ROUND_TRIPS: u64 = 100_000;
/// Switches performed by a full run.
const SWITCHES: u64 = 2 * ROUND_TRIPS;
/// The child only increments a counter; 64 KiB is far more than it uses.
const CHILD_STACK_SIZE: usize = 64 * 1024;

/// What both sides share. Accessed only through a raw pointer on both
/// stacks: neither side holds a reference across a switch.
struct PingPong {
    /// The boot stack's context while the child runs.
    main: Context,
    /// The child's context while main runs.
    child: Context,
    /// Incremented once per turn by whichever side runs.
    counter: u64,
    /// Set by the child when it found the counter wrong: (expected, found).
    child_mismatch: Option<(u64, u64)>,
}

/// The child: on each turn check the counter is odd as expected, increment
/// it, switch back to main. Never returns; main stops switching to it.
///
/// # Safety
///
/// `arg` is a `*mut PingPong` that stays valid for as long as this context
/// can be resumed, and only one side runs at a time (guaranteed by the
/// switch itself).
unsafe extern "C" fn child_entry(arg: usize) -> ! {
    let state = arg as *mut PingPong;
    let mut expected = 1;
    loop {
        // SAFETY: `state` is valid (this fn's contract) and main is
        // suspended, so this side has the only live access; the two
        // contexts are distinct fields and main's was saved by the switch
        // that resumed us.
        unsafe {
            let found = (*state).counter;
            if found != expected && (*state).child_mismatch.is_none() {
                (*state).child_mismatch = Some((expected, found));
            }
            (*state).counter = found + 1;
            expected += 2;
            Native::switch(&raw mut (*state).child, &raw const (*state).main);
        }
    }
}

/// Runs the scenario: 100,000 round trips, then reports the count and the
/// cost per switch.
pub fn run() -> Result<(), String> {
    let stack = PLATFORM
        .allocate_stack(CHILD_STACK_SIZE)
        .map_err(|error| format!("no stack for the child: {error}"))?;
    let state = Box::into_raw(Box::new(PingPong {
        main: Context::empty(),
        child: Context::empty(),
        counter: 0,
        child_mismatch: None,
    }));
    // From here on `state` and `stack` must be freed on every path:
    // `ping_pong` does the work, this function owns the cleanup.
    let result = ping_pong(state, &stack);
    let canary_intact = stack.canary_intact();
    // SAFETY: `state` came from `Box::into_raw` above, and the child context
    // that also points at it is never resumed again (it stays suspended in
    // its switch while its stack is freed next).
    drop(unsafe { Box::from_raw(state) });
    // SAFETY: `stack` came from this platform's `allocate_stack`; the child
    // context on it is suspended for good and nothing switches to it again.
    unsafe { PLATFORM.free_stack(stack) };
    result?;
    if !canary_intact {
        return Err(format!("the child overflowed its {CHILD_STACK_SIZE}-byte stack (canary overwritten)"));
    }
    Ok(())
}

fn ping_pong(state: *mut PingPong, stack: &Stack) -> Result<(), String> {
    debug_assert!((stack.top() as usize).is_multiple_of(Native::STACK_ALIGN));
    // SAFETY: `stack.top()` is 16-aligned (= Native::STACK_ALIGN, asserted
    // above) with CHILD_STACK_SIZE writable bytes below it, owned by
    // `stack`, which outlives every switch to the child (the caller frees it
    // after this returns and never resumes the child). `state` is valid for
    // the same span.
    unsafe { (*state).child = Native::init_context(stack.top(), child_entry, state as usize) };

    let start = Native::timestamp();
    for round in 0..ROUND_TRIPS {
        let expected = 2 * round;
        // SAFETY: `state` is valid (owned by `run`), the child is suspended
        // (in init_context's frame or in its switch), so main has the only
        // live access; `child` holds a context that has not been resumed
        // since it was saved, on a stack that is still allocated.
        unsafe {
            let found = (*state).counter;
            if found != expected {
                return Err(format!("round {round}: main expected counter {expected}, found {found}"));
            }
            (*state).counter = found + 1;
            Native::switch(&raw mut (*state).main, &raw const (*state).child);
            if let Some((child_expected, child_found)) = (*state).child_mismatch {
                return Err(format!(
                    "round {round}: child expected counter {child_expected}, found {child_found}"
                ));
            }
        }
    }
    let elapsed = Native::timestamp() - start;

    // SAFETY: the child is suspended; main has the only live access.
    let count = unsafe { (*state).counter };
    if count != SWITCHES {
        return Err(format!("after {ROUND_TRIPS} round trips the counter is {count}, expected {SWITCHES}"));
    }
    let hundredths_per_switch = elapsed * 100 / SWITCHES;
    crate::println!(
        "switch: {count} switches ({ROUND_TRIPS} round trips) counted on both sides; \
         {elapsed} counter ticks, {}.{:02} ticks/switch, {} ns/switch \
         (counter at {} Hz; QEMU emulates the generic timer, so these are not CPU cycles)",
        hundredths_per_switch / 100,
        hundredths_per_switch % 100,
        board().ticks_to_nanos(elapsed) / SWITCHES,
        board().counter_frequency(),
    );
    Ok(())
}
