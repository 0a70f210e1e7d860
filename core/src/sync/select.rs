//! Waiting on several channels at once: [`select`] over a slice of arms,
//! and [`Select`], a set of arms built once and waited on many times.
//!
//! `select` opens one wait, registers its [`Waiter`] in each arm in priority
//! order, and parks once (a process parks, a plain thread sleeps). There is no cancellation pass: when one arm wins,
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

use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::kernel::deadlock::{WaitKind, WaitSite};
use crate::kernel::time::Instant;
use crate::kernel::wait::{self, Wait, Waiter};
use crate::sync::channel::Selectable;

fn first_ready<'a>(count: usize, arm: impl Fn(usize) -> &'a dyn Selectable) -> Option<usize> {
    (0..count).find(|&i| arm(i).is_ready())
}

/// Parks the calling process until one of `arms` is ready and returns the
/// lowest ready index; then `try_recv` on that arm returns at once (the
/// receiver is single, so nobody can take it first).
///
/// With no arms it parks until stopped, like an empty `receive`. A plain
/// thread sleeps where a process parks; on a worker's driver outside any
/// process (a handler) it spins.
#[track_caller]
pub fn select(arms: &[&dyn Selectable]) -> usize {
    loop {
        if let Some(i) = wait(arms.len(), |i| arms[i], None, WaitSite::here(WaitKind::Select)) {
            return i;
        }
    }
}

/// [`select`] with a timeout: `None` if no arm became ready within
/// `timeout`. On a worker's driver outside any process it checks once.
#[track_caller]
pub fn select_timeout(arms: &[&dyn Selectable], timeout: Duration) -> Option<usize> {
    let Some(now) = wait::now() else { return first_ready(arms.len(), |i| arms[i]) };
    wait(arms.len(), |i| arms[i], Some(now + timeout), WaitSite::here(WaitKind::Select))
}

/// One select over `count` arms, arm `i` being `arm(i)`: `Some(index)`
/// when an arm is ready, `None` when the deadline passed first.
fn wait<'a>(
    count: usize,
    arm: impl Fn(usize) -> &'a dyn Selectable,
    deadline: Option<Instant>,
    site: WaitSite,
) -> Option<usize> {
    if let Some(i) = first_ready(count, &arm) {
        return Some(i);
    }
    loop {
        let Ok(mut wait) = Wait::begin_at(site) else {
            // A driver outside a process: it must not sleep; poll.
            use smarm_arch::Arch;
            smarm_arch::Native::spin_hint();
            if let Some(i) = first_ready(count, &arm) {
                return Some(i);
            }
            continue;
        };
        if let Some(deadline) = deadline {
            if wait.expired(Some(deadline)) {
                wait.retire();
                return first_ready(count, &arm);
            }
            // The deadline wakes this wait only; if an arm wins first it is
            // a stale no-op.
            wait.wake_at(deadline);
        }
        let waiter = wait.waiter();
        if (0..count).any(|i| arm(i).register(&waiter)) {
            // Ready at registration: retire the wait so the registrations
            // already made in earlier arms are inert.
            wait.retire();
            if let Some(i) = first_ready(count, &arm) {
                return Some(i);
            }
            continue;
        }
        wait.park();
        if let Some(i) = first_ready(count, &arm) {
            return Some(i);
        }
        // No arm is ready: with precise wakes only the deadline timer can
        // have woken us; the loop head reports the timeout.
    }
}

/// A set of arms built once and waited on many times, in the spirit of
/// crossbeam-channel's `Select`: nothing is allocated per wait.
///
/// Arms are named by keys of the caller's choosing (`K`), in priority
/// order: [`add`](Select::add) appends one, [`remove`](Select::remove)
/// takes one out. The arms themselves stay where the caller keeps them; a
/// wait is given a function from key to arm, so the set can name arms in
/// containers that change between waits (a vector of monitors, say)
/// without borrowing them across those changes.
///
/// A wait returns the key of the first ready arm in priority order; then
/// `try_recv` on that arm returns at once — except on a rendezvous channel
/// whose waiting sender was stopped in between and withdrew its value:
/// treat `Empty` there as a spurious wake and wait again. A closed arm is
/// ready forever:
/// `remove` it once seen closed, or it starves every arm after it.
///
/// ```no_run
/// # use smarm_core as smarm;
/// use smarm::{channel, Select};
///
/// #[derive(Clone, Copy, PartialEq, Debug)]
/// enum Arm { Control, Data }
///
/// let (_control_tx, control) = channel::<&'static str>();
/// let (_data_tx, data) = channel::<u64>();
/// let mut select = Select::new();
/// select.add(Arm::Control); // first: it wins when both are ready
/// select.add(Arm::Data);
/// loop {
///     let picked = select.wait(|arm| match arm {
///         Arm::Control => &control as &dyn smarm::Selectable,
///         Arm::Data => &data,
///     });
///     match picked {
///         Arm::Control => match control.try_recv() {
///             Ok(command) => println!("command {command}"),
///             Err(_) => break, // closed: nothing more will come
///         },
///         Arm::Data => match data.try_recv() {
///             Ok(value) => println!("data {value}"),
///             Err(_) => { select.remove(Arm::Data); }
///         },
///     }
/// }
/// ```
pub struct Select<K> {
    keys: Vec<K>,
}

impl<K> Default for Select<K> {
    fn default() -> Self {
        Select { keys: Vec::new() }
    }
}

impl<K: fmt::Debug> fmt::Debug for Select<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Select").field("arms", &self.keys).finish()
    }
}

impl<K: Copy + PartialEq> Select<K> {
    /// An empty set.
    pub fn new() -> Select<K> {
        Select { keys: Vec::new() }
    }

    /// An empty set with room for `arms` arms before it allocates.
    pub fn with_capacity(arms: usize) -> Select<K> {
        Select { keys: Vec::with_capacity(arms) }
    }

    /// Adds arm `key` after every arm already in the set (lowest priority).
    pub fn add(&mut self, key: K) {
        self.keys.push(key);
    }

    /// Adds arm `key` at priority `position` (0 is first); arms from there
    /// on move one place down. A `position` past the end appends.
    pub fn insert(&mut self, position: usize, key: K) {
        self.keys.insert(position.min(self.keys.len()), key);
    }

    /// Removes arm `key`; `false` if it was not in the set.
    pub fn remove(&mut self, key: K) -> bool {
        match self.keys.iter().position(|k| *k == key) {
            Some(i) => {
                self.keys.remove(i);
                true
            }
            None => false,
        }
    }

    /// Whether arm `key` is in the set.
    pub fn contains(&self, key: K) -> bool {
        self.keys.contains(&key)
    }

    /// The arms' keys, in priority order.
    pub fn keys(&self) -> &[K] {
        &self.keys
    }

    /// How many arms the set has.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the set has no arm.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key of the first ready arm, without parking.
    pub fn try_ready<'a>(&self, arm: impl Fn(K) -> &'a dyn Selectable) -> Option<K> {
        first_ready(self.keys.len(), |i| arm(self.keys[i])).map(|i| self.keys[i])
    }

    /// Parks the calling process (sleeps a plain thread) until an arm is
    /// ready and returns its key (the first ready one in priority order).
    /// With no arm it parks until stopped; on a worker's driver outside any
    /// process it spins.
    #[track_caller]
    pub fn wait<'a>(&self, arm: impl Fn(K) -> &'a dyn Selectable) -> K {
        loop {
            if let Some(i) =
                wait(self.keys.len(), |i| arm(self.keys[i]), None, WaitSite::here(WaitKind::Select))
            {
                return self.keys[i];
            }
        }
    }

    /// [`wait`](Select::wait) with a timeout: `None` if no arm became ready
    /// within `timeout`. On a worker's driver outside any process it checks
    /// once.
    #[track_caller]
    pub fn wait_timeout<'a>(&self, timeout: Duration, arm: impl Fn(K) -> &'a dyn Selectable) -> Option<K> {
        let resolve = |i: usize| arm(self.keys[i]);
        let found = match wait::now() {
            Some(now) => {
                wait(self.keys.len(), resolve, Some(now + timeout), WaitSite::here(WaitKind::Select))
            }
            None => first_ready(self.keys.len(), resolve),
        };
        found.map(|i| self.keys[i])
    }
}

/// An arm that is never ready: a placeholder for a key whose arm is gone
/// for now (a supervisor's child between a death and its restart).
#[derive(Debug, Clone, Copy, Default)]
pub struct Never;

impl Selectable for Never {
    fn is_ready(&self) -> bool {
        false
    }
    fn register(&self, _waiter: &Waiter) -> bool {
        false
    }
}
