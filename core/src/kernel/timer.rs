//! Per-worker timers: a min-heap of `(deadline, pid, epoch, reason)`, and
//! the earliest deadline of the worker plugin's own timers.
//!
//! Timers are never cancelled. An entry whose wait has ended (the process
//! was woken another way, or has exited) carries a consumed epoch, so firing
//! it is one failed CAS in `unpark_at` and nothing else: a stale entry is a
//! no-op by construction. Entries are only pushed by processes of the owning
//! worker (a process always runs on its worker), so the heap needs no lock.
//!
//! The worker plugin (the handler actors' layer) keeps timers that can be
//! cancelled, with a payload each, in its own worker state, and fires them
//! in its share of the pass. The kernel holds only their earliest deadline
//! (`plugin_deadline`), set by the plugin at the end of each of its passes,
//! so that `Timers::next_deadline` — what a host sleeps
//! until — wakes the worker for them too.

use alloc::collections::BinaryHeap;
use core::cmp::Ordering;

use smarm_platform::Nanos;

use crate::kernel::pid::Pid;

/// Why a timer was set (kept for tracing and statistics; every reason
/// fires the same way: an epoch-stamped wake).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerReason {
    /// `sleep` / `sleep_until`.
    Sleep,
    /// The deadline of a wait that can also end another way
    /// (`recv_timeout`, `select_timeout`, `lock_timeout`).
    WaitTimeout,
}

/// One pending timer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimerEntry {
    pub(crate) deadline: Nanos,
    /// Insertion order: entries with equal deadlines fire first-in first-out.
    seq: u64,
    pub(crate) pid: Pid,
    pub(crate) epoch: u32,
    pub(crate) reason: TimerReason,
}

impl PartialEq for TimerEntry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for TimerEntry {}
impl PartialOrd for TimerEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for TimerEntry {
    /// Reversed, so the std max-heap pops the earliest deadline first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.deadline, other.seq).cmp(&(self.deadline, self.seq))
    }
}

/// A worker's timer heap.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<TimerEntry>,
    next_seq: u64,
    /// The earliest deadline of the plugin's timers, if it has any.
    plugin_deadline: Option<Nanos>,
}

impl Timers {
    pub(crate) fn push(&mut self, deadline: Nanos, pid: Pid, epoch: u32, reason: TimerReason) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(TimerEntry { deadline, seq, pid, epoch, reason });
    }

    /// Earliest deadline, the plugin's included, if any.
    pub(crate) fn next_deadline(&self) -> Option<Nanos> {
        let heap = self.heap.peek().map(|t| t.deadline);
        match (heap, self.plugin_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Records the earliest deadline of the plugin's timers (`None`: it has
    /// none).
    pub(crate) fn set_plugin_deadline(&mut self, deadline: Option<Nanos>) {
        self.plugin_deadline = deadline;
    }

    /// Removes and returns the earliest entry if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Nanos) -> Option<TimerEntry> {
        if self.heap.peek()?.deadline <= now {
            self.heap.pop()
        } else {
            None
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_deadline_then_insertion_order() {
        let mut t = Timers::default();
        let p = |i| Pid::from_parts(i, 0);
        t.push(30, p(1), 0, TimerReason::Sleep);
        t.push(10, p(2), 0, TimerReason::Sleep);
        t.push(20, p(3), 0, TimerReason::WaitTimeout);
        t.push(10, p(4), 0, TimerReason::Sleep);
        assert_eq!(t.next_deadline(), Some(10));
        assert!(t.pop_due(5).is_none());
        let order: alloc::vec::Vec<u32> =
            core::iter::from_fn(|| t.pop_due(100)).map(|e| e.pid.index()).collect();
        assert_eq!(order, [2, 4, 3, 1]);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn the_plugin_deadline_counts_in_the_next_deadline() {
        let mut t = Timers::default();
        assert_eq!(t.next_deadline(), None);
        t.set_plugin_deadline(Some(50));
        assert_eq!(t.next_deadline(), Some(50));
        t.push(30, Pid::from_parts(1, 0), 0, TimerReason::Sleep);
        assert_eq!(t.next_deadline(), Some(30));
        t.set_plugin_deadline(Some(20));
        assert_eq!(t.next_deadline(), Some(20));
        t.set_plugin_deadline(None);
        assert_eq!(t.next_deadline(), Some(30));
        // The plugin's timers are its own: the heap never pops them.
        assert_eq!(t.len(), 1);
    }
}
