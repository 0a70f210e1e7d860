//! Conformance kit: the checks every [`Platform`] backend must pass.
//!
//! A backend's tests call [`check_all`] with the backend and what it claims
//! to support ([`Capabilities`]), then the checks that need the host's help:
//! [`unpark_wakes_parked_driver`] (another thread) and
//! [`pipe_becomes_readable`] (a file descriptor pair). Each check returns
//! `Err(Violation)` naming the check and what went wrong; none panics.
//!
//! Timing checks are generous — noisy CI machines and emulators must pass —
//! but not blind: a park that returns before its deadline, or more than
//! [`LATE_SLACK`] after it, fails.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use core::fmt;

use crate::sync::Ordering;
use crate::{Event, Interest, Nanos, ParkToken, Platform, PollError, RawFd, StackGuard};

/// How late a park may return after its deadline (200 ms).
pub const LATE_SLACK: Nanos = 200_000_000;
/// How long a park with a pending wake may take to return (100 ms).
pub const PROMPT: Nanos = 100_000_000;
/// Stack size the kit uses when [`Capabilities::stack_size`] is 0.
pub const DEFAULT_STACK_SIZE: usize = 64 * 1024;

const MILLISECOND: Nanos = 1_000_000;

/// What a backend claims to support.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The first stack of an otherwise idle platform has a guard page.
    pub guard_pages: bool,
    /// File-descriptor readiness works (else every `poll_*` must be
    /// [`PollError::Unsupported`]).
    pub readiness: bool,
    /// Stack size to exercise (0 = [`DEFAULT_STACK_SIZE`]).
    pub stack_size: usize,
}

impl Capabilities {
    fn effective_stack_size(&self) -> usize {
        if self.stack_size == 0 {
            DEFAULT_STACK_SIZE
        } else {
            self.stack_size
        }
    }
}

/// A failed check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The check's function name.
    pub check: &'static str,
    /// What was seen.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "platform conformance check `{}` failed: {}", self.check, self.detail)
    }
}
impl core::error::Error for Violation {}

/// The result of one check.
pub type Outcome = Result<(), Violation>;

fn ensure(condition: bool, check: &'static str, detail: impl FnOnce() -> String) -> Outcome {
    if condition {
        Ok(())
    } else {
        Err(Violation { check, detail: detail() })
    }
}

/// Runs every check that needs nothing but the platform.
pub fn check_all(p: &dyn Platform, caps: Capabilities) -> Outcome {
    clock_is_monotonic(p)?;
    park_deadline_is_honoured(p)?;
    unpark_before_park_is_kept(p)?;
    stack_is_usable(p, caps)?;
    canary_is_intact(p, caps)?;
    stack_errors_are_typed(p)?;
    if caps.readiness {
        poll_without_registrations(p)?;
    } else {
        readiness_is_unsupported(p)?;
    }
    Ok(())
}

/// `now` never goes backwards over many reads, and advances over a short
/// wait.
pub fn clock_is_monotonic(p: &dyn Platform) -> Outcome {
    const CHECK: &str = "clock_is_monotonic";
    let start = p.now();
    let mut previous = start;
    for read in 0..10_000 {
        let now = p.now();
        ensure(now >= previous, CHECK, || format!("read {read}: {now} after {previous}"))?;
        previous = now;
    }
    let token = ParkToken::new();
    let deadline = p.now().saturating_add(2 * MILLISECOND);
    while p.now() < deadline {
        p.park(&token, Some(deadline));
    }
    let end = p.now();
    ensure(end > start, CHECK, || format!("clock did not advance across a park: {start} -> {end}"))
}

/// A park with a deadline and no wake returns no earlier than the deadline
/// and no later than [`LATE_SLACK`] after it, and the clock has advanced to
/// it. (The trait lets `park` return spuriously, but a backend that returns
/// early without a wake makes idle drivers spin, so the kit refuses it.)
pub fn park_deadline_is_honoured(p: &dyn Platform) -> Outcome {
    const CHECK: &str = "park_deadline_is_honoured";
    let token = ParkToken::new();
    for wait in [MILLISECOND, 20 * MILLISECOND] {
        let deadline = p.now().saturating_add(wait);
        p.park(&token, Some(deadline));
        let returned = p.now();
        ensure(returned >= deadline, CHECK, || {
            format!("park for {wait} ns returned {} ns early", deadline - returned)
        })?;
        ensure(returned - deadline < LATE_SLACK, CHECK, || {
            format!("park for {wait} ns returned {} ns late", returned - deadline)
        })?;
    }
    // A deadline already passed returns at once.
    let before = p.now();
    p.park(&token, Some(before.saturating_sub(1)));
    let after = p.now();
    ensure(after - before < PROMPT, CHECK, || format!("park with a past deadline took {} ns", after - before))
}

/// An `unpark` before `park` is remembered: the park returns promptly and
/// consumes it, so the next park sleeps until its deadline again.
pub fn unpark_before_park_is_kept(p: &dyn Platform) -> Outcome {
    const CHECK: &str = "unpark_before_park_is_kept";
    let token = ParkToken::new();
    p.unpark(&token);
    p.unpark(&token); // Two wakes before a park are one wake.
    let before = p.now();
    p.park(&token, Some(before.saturating_add(10_000 * MILLISECOND)));
    let after = p.now();
    ensure(after - before < PROMPT, CHECK, || {
        format!("park with a pending wake took {} ns to return", after - before)
    })?;
    ensure(token.state.load(Ordering::Relaxed) == 0, CHECK, || {
        format!("park left token state {} (expected 0: wake consumed)", token.state.load(Ordering::Relaxed))
    })?;
    let deadline = p.now().saturating_add(10 * MILLISECOND);
    p.park(&token, Some(deadline));
    let returned = p.now();
    ensure(returned >= deadline, CHECK, || {
        format!("a consumed wake woke a second park {} ns early", deadline - returned)
    })
}

/// A stack is at least the size asked for, its top is 16-byte aligned, and
/// every word from bottom to top can be written and read back. On a canary
/// stack, overwriting the bottom word must show as a broken canary.
pub fn stack_is_usable(p: &dyn Platform, caps: Capabilities) -> Outcome {
    const CHECK: &str = "stack_is_usable";
    let size = caps.effective_stack_size();
    let stack =
        p.allocate_stack(size).map_err(|error| Violation { check: CHECK, detail: format!("{error}") })?;
    let result = (|| {
        ensure(stack.size() >= size, CHECK, || format!("asked {size} bytes, got {}", stack.size()))?;
        ensure((stack.top() as usize).is_multiple_of(16), CHECK, || {
            format!("top {:p} is not 16-byte aligned", stack.top())
        })?;
        ensure((stack.bottom() as usize).is_multiple_of(8), CHECK, || {
            format!("bottom {:p} not 8-aligned", stack.bottom())
        })?;
        let words = stack.size() / 8;
        let base = stack.bottom().cast::<u64>();
        for index in 0..words {
            // SAFETY: `index < size / 8`, so the word lies inside the usable
            // range the handle owns, and `bottom` is 8-aligned (checked).
            unsafe { base.add(index).write_volatile(pattern(index)) };
        }
        for index in 0..words {
            // SAFETY: as above.
            let read = unsafe { base.add(index).read_volatile() };
            ensure(read == pattern(index), CHECK, || format!("word {index} read {read:#x}"))?;
        }
        if stack.guard() == StackGuard::Canary {
            ensure(!stack.canary_intact(), CHECK, || {
                "overwriting the bottom word left the canary intact".into()
            })?;
        }
        Ok(())
    })();
    // SAFETY: the stack came from `p` and nothing runs on it.
    unsafe { p.free_stack(stack) };
    result
}

fn pattern(index: usize) -> u64 {
    (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5A5_A5A5_5A5A_5A5A
}

/// A fresh stack has the protection the backend claims; a canary stack's
/// canary is intact when handed out, stays intact while the stack is used
/// above it, and is intact again on a stack recycled after its bottom was
/// overwritten.
pub fn canary_is_intact(p: &dyn Platform, caps: Capabilities) -> Outcome {
    const CHECK: &str = "canary_is_intact";
    let size = caps.effective_stack_size();
    let allocate =
        || p.allocate_stack(size).map_err(|error| Violation { check: CHECK, detail: format!("{error}") });
    let stack = allocate()?;
    let expected = if caps.guard_pages { StackGuard::GuardPage } else { StackGuard::Canary };
    let guard = stack.guard();
    let mut result =
        ensure(guard == expected, CHECK, || format!("first stack is {guard:?}, expected {expected:?}"));
    if result.is_ok() {
        result = ensure(stack.canary_intact(), CHECK, || "fresh stack has a broken canary".into());
    }
    if result.is_ok() {
        // Use the top half, as a running process would.
        let top = stack.top().cast::<u64>();
        for index in 1..=(stack.size() / 16) {
            // SAFETY: the word lies in the upper half of the usable range.
            unsafe { top.sub(index).write_volatile(pattern(index)) };
        }
        result = ensure(stack.canary_intact(), CHECK, || "using the top half broke the canary".into());
    }
    if guard == StackGuard::Canary {
        // SAFETY: the bottom word is inside the usable range; we break the
        // canary on purpose, as an overflow would.
        unsafe { stack.bottom().cast::<u64>().write_volatile(0) };
    }
    // SAFETY: the stack came from `p` and nothing runs on it.
    unsafe { p.free_stack(stack) };
    result?;
    let again = allocate()?;
    let intact = again.canary_intact();
    // SAFETY: as above.
    unsafe { p.free_stack(again) };
    ensure(intact, CHECK, || "a recycled stack came back with a broken canary".into())
}

/// Size 0 and an absurd size are typed errors, not panics.
pub fn stack_errors_are_typed(p: &dyn Platform) -> Outcome {
    const CHECK: &str = "stack_errors_are_typed";
    for size in [0, usize::MAX] {
        match p.allocate_stack(size) {
            Err(_) => {}
            Ok(stack) => {
                let got = stack.size();
                // SAFETY: the stack came from `p` and nothing runs on it.
                unsafe { p.free_stack(stack) };
                return Err(Violation {
                    check: CHECK,
                    detail: format!("size {size} gave a stack of {got} bytes"),
                });
            }
        }
    }
    Ok(())
}

/// A platform without readiness says so, with a typed error, everywhere.
pub fn readiness_is_unsupported(p: &dyn Platform) -> Outcome {
    const CHECK: &str = "readiness_is_unsupported";
    let mut events = [Event::default(); 4];
    let results = [
        p.poll_register(0, 1, Interest::READABLE),
        p.poll_modify(0, 1, Interest::READABLE),
        p.poll_deregister(0),
        p.poll(&mut events, Some(0)).map(|_| ()),
    ];
    for (index, result) in results.iter().enumerate() {
        ensure(*result == Err(PollError::Unsupported), CHECK, || format!("call {index} gave {result:?}"))?;
    }
    Ok(())
}

/// With nothing registered, a non-blocking poll finds nothing, a short
/// timed poll waits about its timeout, and removing an unknown descriptor is
/// [`PollError::NotRegistered`].
pub fn poll_without_registrations(p: &dyn Platform) -> Outcome {
    const CHECK: &str = "poll_without_registrations";
    let mut events = [Event::default(); 4];
    let fail = |error: PollError| Violation { check: CHECK, detail: format!("{error}") };
    let found = p.poll(&mut events, Some(0)).map_err(fail)?;
    ensure(found == 0, CHECK, || format!("non-blocking poll found {found} events"))?;
    let before = p.now();
    let found = p.poll(&mut events, Some(5 * MILLISECOND)).map_err(fail)?;
    let waited = p.now() - before;
    ensure(found == 0, CHECK, || format!("timed poll found {found} events"))?;
    ensure(waited < 5 * MILLISECOND + LATE_SLACK, CHECK, || format!("5 ms poll took {waited} ns"))?;
    let removed = p.poll_deregister(-1);
    ensure(removed == Err(PollError::NotRegistered), CHECK, || {
        format!("deregistering fd -1 gave {removed:?}")
    })
}

/// `unpark` from another thread wakes a driver parked on the token with a
/// far deadline. `spawn` runs a closure on a new thread (or core).
pub fn unpark_wakes_parked_driver(p: Arc<dyn Platform>, spawn: &dyn Fn(Box<dyn FnOnce() + Send>)) -> Outcome {
    const CHECK: &str = "unpark_wakes_parked_driver";
    let token = Arc::new(ParkToken::new());
    let (waker_platform, waker_token) = (Arc::clone(&p), Arc::clone(&token));
    let start = p.now();
    spawn(Box::new(move || {
        // Give the driver time to fall asleep, using the platform's own
        // sleep, then wake it.
        let idle = ParkToken::new();
        let until = waker_platform.now().saturating_add(30 * MILLISECOND);
        while waker_platform.now() < until {
            waker_platform.park(&idle, Some(until));
        }
        waker_platform.unpark(&waker_token);
    }));
    let far = start.saturating_add(10_000 * MILLISECOND);
    // A park may return spuriously; only the wake (or the far deadline)
    // ends the wait.
    let mut woken = false;
    while p.now() < far {
        p.park(&token, Some(far));
        if p.now() >= start.saturating_add(30 * MILLISECOND) {
            woken = true;
            break;
        }
    }
    let elapsed = p.now() - start;
    ensure(woken && elapsed < 2_000 * MILLISECOND, CHECK, || {
        format!("driver woke after {elapsed} ns (waker unparks after 30 ms)")
    })?;
    ensure(token.state.load(Ordering::Relaxed) == 0, CHECK, || {
        format!("token state {} after the wake (expected 0)", token.state.load(Ordering::Relaxed))
    })
}

/// Readiness on a descriptor pair: `read_fd` is empty at first,
/// `make_readable` (e.g. write a byte to the pipe's other end) makes it
/// readable. Checks one-shot delivery, re-arming with `poll_modify`, and the
/// typed errors for double registration and removal. Leaves `read_fd`
/// deregistered.
pub fn pipe_becomes_readable(p: &dyn Platform, read_fd: RawFd, make_readable: &dyn Fn()) -> Outcome {
    const CHECK: &str = "pipe_becomes_readable";
    const TOKEN: u64 = 0x5EED_0000_0000_0007;
    let fail = |error: PollError| Violation { check: CHECK, detail: format!("{error}") };
    let mut events = [Event::default(); 8];
    p.poll_register(read_fd, TOKEN, Interest::READABLE).map_err(fail)?;
    let again = p.poll_register(read_fd, TOKEN, Interest::READABLE);
    ensure(again == Err(PollError::AlreadyRegistered), CHECK, || format!("second register gave {again:?}"))?;
    let found = p.poll(&mut events, Some(0)).map_err(fail)?;
    ensure(found == 0, CHECK, || format!("empty pipe reported {found} events"))?;

    make_readable();
    let before = p.now();
    let found = p.poll(&mut events, Some(5_000 * MILLISECOND)).map_err(fail)?;
    let waited = p.now() - before;
    ensure(found == 1, CHECK, || format!("readable pipe reported {found} events"))?;
    let event = events[0];
    ensure(event.token == TOKEN && event.readable, CHECK, || format!("unexpected event {event:?}"))?;
    ensure(waited < PROMPT, CHECK, || format!("readiness took {waited} ns to report"))?;

    // One-shot: still readable, but not reported until re-armed.
    let found = p.poll(&mut events, Some(0)).map_err(fail)?;
    ensure(found == 0, CHECK, || format!("one-shot registration fired again ({found} events)"))?;
    p.poll_modify(read_fd, TOKEN + 1, Interest::READABLE).map_err(fail)?;
    let found = p.poll(&mut events, Some(1_000 * MILLISECOND)).map_err(fail)?;
    ensure(found == 1 && events[0].token == TOKEN + 1, CHECK, || {
        format!("re-armed registration gave {found} events, first {:?}", events[0])
    })?;

    p.poll_deregister(read_fd).map_err(fail)?;
    let removed = p.poll_deregister(read_fd);
    ensure(removed == Err(PollError::NotRegistered), CHECK, || {
        format!("second deregister gave {removed:?}")
    })?;
    let modified = p.poll_modify(read_fd, TOKEN, Interest::READABLE);
    ensure(modified == Err(PollError::NotRegistered), CHECK, || {
        format!("modify after removal gave {modified:?}")
    })
}
