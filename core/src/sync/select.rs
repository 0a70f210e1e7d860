//! Waiting on several channels at once (ROADMAP v0.7 §3–4).
//!
//! `select` opens one wait, registers its [`Waker`](crate::kernel::process::Waker) in each arm in priority
//! order, and parks once. There is no cancellation pass: when one arm wins,
//! the registrations left in the others carry a consumed epoch and are
//! inert — the next send on them fires one failed CAS and moves on. When an
//! arm is already ready at registration time the wait is retired before
//! returning, so none of the earlier arms' registrations can notify a later
//! wait.
//!
//! Arms are scanned in order: the lowest ready index wins (priority, like
//! the clauses of an Erlang `receive`); there is no fairness promise. A
//! closed arm (every sender gone, nothing queued) counts as ready forever:
//! once observed, drop it from the arm set, or it starves every arm after
//! it.

use core::time::Duration;

use crate::kernel::process;
use crate::kernel::time::Instant;
use crate::sync::channel::Selectable;

fn first_ready(arms: &[&dyn Selectable]) -> Option<usize> {
    arms.iter().position(|arm| arm.is_ready())
}

/// Parks the calling process until one of `arms` is ready and returns the
/// lowest ready index; then `try_recv` on that arm returns at once (the
/// receiver is single, so nobody can take it first).
///
/// With no arms it parks until stopped, like an empty `receive`. Outside a
/// process it spins.
pub fn select(arms: &[&dyn Selectable]) -> usize {
    loop {
        if let Some(i) = wait(arms, None) {
            return i;
        }
    }
}

/// [`select`] with a timeout: `None` if no arm became ready within
/// `timeout`. Outside a process (no runtime clock) it checks once.
pub fn select_timeout(arms: &[&dyn Selectable], timeout: Duration) -> Option<usize> {
    let Some(now) = process::now() else { return first_ready(arms) };
    wait(arms, Some(now + timeout))
}

/// One select: `Some(index)` when an arm is ready, `None` when the deadline
/// passed first.
fn wait(arms: &[&dyn Selectable], deadline: Option<Instant>) -> Option<usize> {
    if let Some(i) = first_ready(arms) {
        return Some(i);
    }
    loop {
        let Ok(waker) = process::begin_wait() else {
            // Not a process: nothing to park; poll.
            use smarm_arch::Arch;
            smarm_arch::Native::spin_hint();
            if let Some(i) = first_ready(arms) {
                return Some(i);
            }
            continue;
        };
        if let Some(deadline) = deadline {
            if process::now().is_some_and(|now| now >= deadline) {
                process::retire_wait();
                return first_ready(arms);
            }
            // The timer is the select's own stamped waker; if an arm wins
            // first it fires later as a stale no-op.
            let _ = process::wake_at(&waker, deadline);
        }
        if arms.iter().any(|arm| arm.register(&waker)) {
            // Ready at registration: retire the wait so the registrations
            // already made in earlier arms are inert.
            process::retire_wait();
            if let Some(i) = first_ready(arms) {
                return Some(i);
            }
            continue;
        }
        process::park();
        if let Some(i) = first_ready(arms) {
            return Some(i);
        }
        // No arm is ready: with precise wakes only the deadline timer can
        // have woken us; the loop head reports the timeout.
    }
}
