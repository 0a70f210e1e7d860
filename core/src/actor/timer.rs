//! Actor timers: a message sent later ([`Ctx::send_after`]) or every period
//! ([`Ctx::send_interval`]), kept on the setting actor's worker — one entry
//! in that worker's table, no thread and no process per timer.
//!
//! The table is indexed twice: by deadline, for firing in order, and by
//! owner, so that a cancel and an actor's end remove its entries without a
//! scan. Invariants, checked in debug builds: the two indexes hold the same
//! timers; an entry is removed exactly once (fired for the last time,
//! cancelled, or its owner ended), and its payload — the message — is
//! dropped exactly once, when it is removed or delivered. The kernel only
//! learns the earliest deadline, so the host wakes the worker for it.
//!
//! [`Ctx::send_after`]: crate::actor::Ctx::send_after
//! [`Ctx::send_interval`]: crate::actor::Ctx::send_interval

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use smarm_platform::Nanos;

use crate::kernel::pid::Pid;
use crate::kernel::runtime::Shared;

/// A pending timer, as [`Ctx::send_after`](crate::actor::Ctx::send_after)
/// and [`Ctx::send_interval`](crate::actor::Ctx::send_interval) return it:
/// cancel it with [`Ctx::cancel_timer`](crate::actor::Ctx::cancel_timer)
/// from the actor's handlers, or with
/// [`Runtime::cancel_timer`](crate::kernel::runtime::Runtime::cancel_timer)
/// from anywhere. It only names the timer (it is `Copy`); dropping it
/// cancels nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerRef {
    owner: Pid,
    id: u64,
}

impl TimerRef {
    /// The actor that set the timer (and alone can cancel it).
    pub fn owner(&self) -> Pid {
        self.owner
    }
}

/// Why a timer was not set; the message is handed back.
#[derive(PartialEq, Eq)]
pub enum TimerError<M> {
    /// An interval's period must be longer than zero: a zero period would
    /// fire on every pass of the worker.
    ZeroPeriod(M),
}

impl<M> TimerError<M> {
    /// The message that was not scheduled.
    pub fn into_inner(self) -> M {
        match self {
            TimerError::ZeroPeriod(m) => m,
        }
    }
}

impl<M> fmt::Debug for TimerError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimerError::ZeroPeriod(_) => f.write_str("ZeroPeriod(..)"),
        }
    }
}

impl<M> fmt::Display for TimerError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimerError::ZeroPeriod(_) => f.write_str(
                "an interval's period must be longer than zero: use send_after for a single message",
            ),
        }
    }
}

impl<M> core::error::Error for TimerError<M> {}

/// What a timer does when it fires: sends its message (a one-shot timer
/// moves it, an interval sends a clone) to its target. Dropping it drops
/// the message.
pub(crate) trait Fire: Send {
    /// Sends the message. Returns whether the target took it (a dead
    /// target's copy is dropped).
    fn fire(&mut self, shared: &Shared) -> bool;
}

/// `delay` as nanoseconds past `now`, clamped to the end of the clock.
pub(crate) fn deadline_after(now: Nanos, delay: Duration) -> Nanos {
    let delay = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
    now.saturating_add(delay)
}

struct Entry {
    owner: Pid,
    id: u64,
    /// `Some` for an interval.
    period: Option<Nanos>,
    fire: Box<dyn Fire>,
}

/// One worker's actor timers; only its driver touches them.
#[derive(Default)]
pub(crate) struct ActorTimers {
    /// By `(deadline, id)`: ids grow, so equal deadlines fire in the order
    /// they were set.
    by_deadline: BTreeMap<(Nanos, u64), Entry>,
    /// By `(owner, id)`, to the deadline the entry is filed under.
    by_owner: BTreeMap<(Pid, u64), Nanos>,
    next_id: u64,
}

/// A timer that came due, taken out of the table to be fired.
pub(crate) struct Due {
    deadline: Nanos,
    entry: Entry,
}

impl Due {
    /// Fires it: `true` if its target took the message.
    pub(crate) fn fire(&mut self, shared: &Shared) -> bool {
        self.entry.fire.fire(shared)
    }
}

impl ActorTimers {
    /// Files a timer of `owner` due at `deadline` (then every `period`).
    pub(crate) fn insert(
        &mut self,
        owner: Pid,
        deadline: Nanos,
        period: Option<Nanos>,
        fire: Box<dyn Fire>,
    ) -> TimerRef {
        debug_assert!(period != Some(0), "a zero period reached the timer table");
        let id = self.next_id;
        self.next_id += 1;
        self.by_deadline.insert((deadline, id), Entry { owner, id, period, fire });
        self.by_owner.insert((owner, id), deadline);
        self.check();
        TimerRef { owner, id }
    }

    /// Removes `timer` if it is still pending and gives its payload back
    /// (to be dropped by the caller, outside any borrow of the table).
    pub(crate) fn cancel(&mut self, timer: &TimerRef) -> Option<Box<dyn Fire>> {
        let deadline = self.by_owner.remove(&(timer.owner, timer.id))?;
        let entry = self.by_deadline.remove(&(deadline, timer.id));
        debug_assert!(entry.is_some(), "timer indexes out of step");
        self.check();
        entry.map(|entry| entry.fire)
    }

    /// Removes every timer of `owner` and gives their payloads back.
    pub(crate) fn cancel_all(&mut self, owner: Pid) -> Vec<Box<dyn Fire>> {
        let ids: Vec<(u64, Nanos)> =
            self.by_owner.range((owner, 0)..=(owner, u64::MAX)).map(|(&(_, id), &at)| (id, at)).collect();
        let mut gone = Vec::with_capacity(ids.len());
        for (id, deadline) in ids {
            self.by_owner.remove(&(owner, id));
            if let Some(entry) = self.by_deadline.remove(&(deadline, id)) {
                gone.push(entry.fire);
            }
        }
        self.check();
        gone
    }

    /// Takes the earliest timer if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Nanos) -> Option<Due> {
        let (&(deadline, id), _) = self.by_deadline.first_key_value()?;
        if deadline > now {
            return None;
        }
        let entry = self.by_deadline.remove(&(deadline, id))?;
        let filed = self.by_owner.remove(&(entry.owner, id));
        debug_assert_eq!(filed, Some(deadline), "timer indexes out of step");
        Some(Due { deadline, entry })
    }

    /// Files a fired interval again, one period after its last deadline —
    /// or, if it is so late that this has passed too, one period after
    /// `now` (missed ticks are skipped, not caught up in a burst). Hands a
    /// one-shot timer back, to be dropped.
    pub(crate) fn rearm(&mut self, due: Due, now: Nanos) -> Option<Box<dyn Fire>> {
        let Some(period) = due.entry.period else { return Some(due.entry.fire) };
        let mut next = due.deadline.saturating_add(period);
        if next <= now {
            next = now.saturating_add(period);
        }
        let Entry { owner, id, .. } = due.entry;
        self.by_owner.insert((owner, id), next);
        self.by_deadline.insert((next, id), due.entry);
        self.check();
        None
    }

    /// The earliest deadline, if any timer is pending.
    pub(crate) fn next_deadline(&self) -> Option<Nanos> {
        self.by_deadline.first_key_value().map(|(&(deadline, _), _)| deadline)
    }

    /// Timers pending.
    pub(crate) fn len(&self) -> usize {
        self.by_deadline.len()
    }

    /// Whether no timer is pending.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_deadline.is_empty()
    }

    fn check(&self) {
        debug_assert_eq!(self.by_deadline.len(), self.by_owner.len(), "timer indexes out of step");
    }
}

/// Filing, firing order, cancelling and re-arming, without a runtime.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::sync::Arc;
    use alloc::vec;
    use core::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// Records its firings into a log and counts its drop.
    struct Probe {
        name: u32,
        log: Arc<Mutex<Vec<u32>>>,
        drops: Arc<AtomicUsize>,
    }

    impl Fire for Probe {
        fn fire(&mut self, _: &Shared) -> bool {
            self.log.lock().unwrap().push(self.name);
            true
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn probe(name: u32, log: &Arc<Mutex<Vec<u32>>>, drops: &Arc<AtomicUsize>) -> Box<dyn Fire> {
        Box::new(Probe { name, log: log.clone(), drops: drops.clone() })
    }

    /// The firing order without a runtime: what `pop_due` hands out.
    fn due_order(t: &mut ActorTimers, now: Nanos) -> Vec<u64> {
        core::iter::from_fn(|| t.pop_due(now)).map(|due| due.entry.id).collect()
    }

    #[test]
    fn due_timers_come_out_by_deadline_then_in_the_order_set() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let drops = Arc::new(AtomicUsize::new(0));
        let mut t = ActorTimers::default();
        let a = Pid::from_parts(1, 0);
        t.insert(a, 30, None, probe(0, &log, &drops));
        t.insert(a, 10, None, probe(1, &log, &drops));
        t.insert(a, 10, None, probe(2, &log, &drops));
        assert_eq!(t.next_deadline(), Some(10));
        assert!(t.pop_due(9).is_none());
        assert_eq!(due_order(&mut t, 100), vec![1, 2, 0]);
        assert!(t.is_empty());
        assert_eq!(drops.load(Ordering::SeqCst), 3, "each payload dropped once");
    }

    #[test]
    fn a_cancel_removes_once_and_an_end_removes_only_its_owners() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let drops = Arc::new(AtomicUsize::new(0));
        let mut t = ActorTimers::default();
        let (a, b) = (Pid::from_parts(1, 0), Pid::from_parts(2, 0));
        let first = t.insert(a, 10, None, probe(0, &log, &drops));
        t.insert(a, 20, Some(5), probe(1, &log, &drops));
        t.insert(b, 15, None, probe(2, &log, &drops));
        assert!(t.cancel(&first).is_some());
        assert!(t.cancel(&first).is_none(), "a second cancel finds nothing");
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(t.cancel_all(a).len(), 1);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        assert_eq!(t.next_deadline(), Some(15), "the other owner's timer stays");
    }

    #[test]
    fn an_interval_rearms_a_period_on_and_skips_missed_ticks() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let drops = Arc::new(AtomicUsize::new(0));
        let mut t = ActorTimers::default();
        let a = Pid::from_parts(1, 0);
        let every = t.insert(a, 10, Some(10), probe(0, &log, &drops));
        let due = t.pop_due(12).unwrap();
        assert!(t.rearm(due, 12).is_none());
        assert_eq!(t.next_deadline(), Some(20), "on schedule: the last deadline plus a period");
        let due = t.pop_due(55).unwrap();
        assert!(t.rearm(due, 55).is_none());
        assert_eq!(t.next_deadline(), Some(65), "late: a period after now, no burst");
        assert!(t.cancel(&every).is_some());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_deadline_past_the_clock_is_clamped() {
        assert_eq!(deadline_after(5, Duration::from_nanos(10)), 15);
        assert_eq!(deadline_after(5, Duration::MAX), u64::MAX);
        assert_eq!(deadline_after(u64::MAX - 1, Duration::from_secs(1)), u64::MAX);
    }
}
