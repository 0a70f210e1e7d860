//! The cooperative budget: a process yields after a fixed number of
//! resource operations, so a process that never parks cannot keep its
//! worker forever.
//!
//! A loop of sends on an unbounded channel, of `try_recv`s or of spawns
//! never blocks, so without help it keeps its worker until it ends — and the
//! receiver that would drain its channel, or whoever would make its
//! `try_recv` succeed, may sit in the same worker's ready queue. Preemption
//! by allocation (a host's preempting allocator, `check()`) bounds that by
//! time; the budget bounds it by operations, with neither a clock nor an
//! allocator.
//!
//! Each worker keeps one counter for the process it runs. The worker sets
//! it to [`Config::coop_budget`](crate::Config::coop_budget)
//! every time it resumes a process; every budgeted operation — channel
//! sends and receives and their `try_*` forms, mutex `lock` / `try_lock`,
//! `spawn` / `spawn_on`, a process's sends to handler actors — calls
//! [`spend`] first, which decrements it. The
//! operation that finds the counter at its last unit yields (going to the
//! back of the ready queue, like [`yield_now`](crate::yield_now)) before it does its work;
//! the resume refills the counter. A process with a budget of `B` thus
//! yields at its `B`-th budgeted operation since it was resumed; a park, a
//! yield or a preemption in between refills it, so a process that blocks
//! now and then never pays for the budget beyond the decrement. `0`
//! disables it.
//!
//! The yield is that of [`check`](crate::check): never
//! while a wait is open (a yield would turn the state word `Queued` and
//! lose the wake the wait expects) nor while preemption is disabled (a
//! runtime lock may be held). An operation that finds the budget spent at
//! such a moment does not yield, and the counter stays at its last unit so
//! the next operation tries again. On a worker's driver between
//! processes (a handler actor's turn) there is nothing to yield: the
//! counter, which the last process left there, is turned off once spent,
//! until the next resume refills it. Like [`yield_now`](crate::yield_now), the budget yield is
//! an observation point for `request_stop` — a sending loop can be stopped —
//! except while the process is already unwinding (a destructor that sends
//! during a panic): raising a stop there would abort the program, so the
//! stop waits for the next observation point after the unwind.
//!
//! The fast path is a thread-local read of the current worker and a
//! decrement; nothing reads the clock.
//!
//! ```
//! # use smarm_core as smarm;
//! use smarm::kernel::coop;
//!
//! // A primitive of one's own can spend the budget like the built-in ones
//! // do; outside a process it does nothing.
//! fn poll_my_resource() -> Option<u32> {
//!     coop::spend();
//!     None
//! }
//! assert_eq!(poll_my_resource(), None);
//! assert_eq!(coop::remaining(), None);
//! ```

use crate::kernel::current;

/// The default [`Config::coop_budget`](crate::Config::coop_budget):
/// operations a process makes between two switches before it yields.
///
/// At 10–50 ns an operation, 1,024 of them keep a worker for tens of
/// microseconds, far below the 2 ms timeslice, so a loop that never parks
/// still lets the processes beside it run often. A smaller budget costs the
/// common fan-out shape dearly: a process sending to many parked receivers
/// yields every `budget` sends, and each receiver wakes for a handful of
/// messages instead of a batch (Savina's fork-join throughput ran twice as
/// long at 128). tokio's task budget is 128, but tokio does not count
/// unbounded sends, which this budget does.
pub const DEFAULT_COOP_BUDGET: u32 = 1024;

/// Spends one unit of the running process's budget, yielding first if it
/// is the last (see the module docs). Outside a process, with the budget
/// disabled, or with a wait open or preemption disabled, it does not
/// yield.
#[inline]
pub fn spend() {
    spend_in(current::Here::get());
}

/// [`spend`] on the worker record `here` the caller already looked up.
#[inline]
pub(crate) fn spend_in(here: current::Here) {
    let exhausted = here.record().map(|record| match record.coop_budget.get() {
        // Disabled (or, on the driver between processes, spent down: the
        // next resume refills it).
        0 => false,
        1 => true,
        left => {
            record.coop_budget.set(left - 1);
            false
        }
    });
    if exhausted == Some(true) {
        yield_spent(here);
    }
}

/// The slow path of [`spend`]: yields if a process runs and may switch.
/// On a worker's driver between processes (a handler actor's turn) there
/// is nothing to yield: the budget is turned off there until the next
/// resume refills it, so the driver's later operations stop at the
/// counter instead of coming here each time.
#[cold]
#[inline(never)]
fn yield_spent(here: current::Here) {
    let Some(record) = here.record() else { return };
    if record.running.get().is_none() {
        record.coop_budget.set(0);
        return;
    }
    // The same conditions as `check`'s: a yield with a wait open would lose
    // the wake; with preemption disabled a runtime lock may be held.
    if record.may_switch() {
        // The worker refills the counter when it resumes us.
        (record.yield_spent)();
    }
}

/// The running process's budget left: `Some(n)` while a process runs on
/// this thread (`Some(0)` when the budget is disabled), `None` elsewhere.
pub fn remaining() -> Option<u32> {
    current::with(|record| record.running.get().map(|_| record.coop_budget.get()))?
}
