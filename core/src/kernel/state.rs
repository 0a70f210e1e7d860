//! The slot state word: one atomic that says who a slot belongs to and what it is doing.
//!
//! Every slot of the slab carries one [`StateWord`], a single `AtomicU64`:
//!
//! ```text
//!  63                              32 31                        8 7        0
//! +----------------------------------+---------------------------+----------+
//! |            generation            |     epoch (24, wraps)     |  state   |
//! +----------------------------------+---------------------------+----------+
//! ```
//!
//! * The **generation** names the incarnation of the slot; a `Pid` is
//!   `(index, generation)`. [`StateWord::reclaim`] bumps it, so a pid that
//!   outlives its process can never act on the slot's next occupant.
//! * The **epoch** names the process's current *wait*. [`StateWord::begin_wait`]
//!   bumps it and returns it; every registration with a waker carries
//!   `(pid, epoch)`, and every successful wake bumps it again (consumes it).
//! * The **state** is one of [`State`].
//!
//! ```text
//! transition    made by        from                                to
//! claim         spawner        Vacant(g, e)                        Queued(g, e)
//! begin_run     worker         Queued(g, e)                        Running(g, e)
//! begin_wait    owner          Running | RunningNotified (g, e)    Running(g, e+1), returns e+1
//! park          owner          Running(g, e)                       Parked(g, e)              Park::Parked
//!                              RunningNotified(g, e)               Running(g, e)             Park::Notified
//! unpark_at     waker (g, e)   Parked(g, e)                        Queued(g, e+1)            Unpark::Enqueue
//!                              Running(g, e)                       RunningNotified(g, e+1)   Unpark::Notified
//! unpark        request_stop   as unpark_at, whatever the epoch
//! retire_wait   owner          Running | RunningNotified (g, e)    Running(g, e+1)
//! clear_notify  owner          RunningNotified(g, e)               Running(g, e)
//! yield_now     owner          Running | RunningNotified (g, e)    Queued(g, e)
//! finish        owner          Running | RunningNotified (g, e)    Done(g, e)
//! reclaim       finaliser      Done(g, e)                          Vacant(g+1, 0)
//! ```
//!
//! # Invariants this module keeps
//!
//! 1. **Every change is one CAS whose precondition is checked inside the CAS
//!    loop**, against the very value the CAS replaces. The generation check is
//!    therefore atomic with every transition: an operation stamped with a stale
//!    generation cannot touch the slot's next incarnation.
//! 2. **At most one wake lands per wait.** A stamped wake ([`StateWord::unpark_at`])
//!    lands only on `Parked(e)` or `Running(e)` with a matching epoch, and
//!    landing bumps the epoch; a second wake with the same stamp finds `e+1`
//!    and dies at one failed comparison, with no change to the word. This is
//!    what makes a `select`'s losing registrations harmless without a
//!    cancellation pass.
//! 3. **A wake is never lost.** A wake that lands while the owner is still
//!    running leaves `RunningNotified`, and the owner's [`StateWord::park`]
//!    observes it in the same CAS that would otherwise have parked.
//! 4. **The only wildcard wake is [`StateWord::unpark`]**, reserved for the
//!    terminal `request_stop`, which never returns control to the code that
//!    parked.
//!
//! # Who may call what
//!
//! Transitions made by someone holding only a pid (a spawner, a waker, the
//! worker popping its ready queue, the finaliser) return a `#[must_use]`
//! typed result: their precondition can fail for honest reasons (a stale pid,
//! a wake that lost the race). Transitions the running process makes on its
//! own slot ([`begin_wait`](StateWord::begin_wait), [`park`](StateWord::park),
//! [`retire_wait`](StateWord::retire_wait), [`clear_notify`](StateWord::clear_notify),
//! [`yield_now`](StateWord::yield_now), [`finish`](StateWord::finish)) can only
//! fail on a runtime bug; they `debug_assert!` and, in release builds, leave
//! the word untouched and return the answer that does not switch away.
//!
//! A wait is the span from `begin_wait` to `park` (or `retire_wait`). No
//! `yield_now` may happen inside it: a wake stamped with the open epoch would
//! find `Queued` and be rejected, and a landed notification would be dropped.
//! Registration therefore runs with preemption disabled.
//!
//! # Memory ordering
//!
//! Every successful transition is `AcqRel`: the state word is the hand-off
//! point between a process and whoever acts on it next (the worker that runs
//! it, the waker that wakes it, the finaliser that reclaims it), so each
//! transition both publishes the writes that led to it and acquires the
//! writes of the transition it replaced. Rejected CASes and snapshots are
//! `Acquire`: a caller may act on what it saw (report `NoProc`, treat a pid
//! as dead), so it must see the writes that produced that state.

use core::fmt;

use crate::kernel::atomic::{AtomicU64, Ordering};

/// Bits `0..8` of the word: the [`State`] as its `u8` discriminant.
const STATE_MASK: u64 = 0xFF;

/// Bit offset of the epoch.
const EPOCH_SHIFT: u32 = 8;

/// Width of the epoch. Epochs wrap, so two waits of one process alias only
/// after `2^24` epoch bumps (each wait takes at most two: `begin_wait` and
/// the wake that consumes it) while a registration of the older one is still
/// outstanding.
const EPOCH_BITS: u32 = 24;

/// The largest epoch; the next one is 0.
const EPOCH_MAX: u32 = (1 << EPOCH_BITS) - 1;

/// Bits `8..32` of the word: the epoch of the current wait.
const EPOCH_MASK: u64 = (EPOCH_MAX as u64) << EPOCH_SHIFT;

/// Bit offset of the generation, which fills the high half of the word.
const GENERATION_SHIFT: u32 = 32;

// The three fields tile the word exactly: no overlap, no gap.
const _: () = assert!(STATE_MASK & EPOCH_MASK == 0);
const _: () = assert!(EPOCH_SHIFT + EPOCH_BITS == GENERATION_SHIFT);
const _: () = assert!(STATE_MASK | EPOCH_MASK | ((u32::MAX as u64) << GENERATION_SHIFT) == u64::MAX);

/// What a slot is doing.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Free: no process lives here. The generation is the one the next
    /// spawn will get.
    Vacant = 0,
    /// In exactly one worker's ready queue (or wake ring), waiting to run.
    /// A process is enqueued at most once, which is what bounds the rings.
    Queued = 1,
    /// On a worker, running.
    Running = 2,
    /// Running, and a wake for its current wait has already landed: the next
    /// `park` returns at once instead of switching away.
    RunningNotified = 3,
    /// Switched away, waiting for a wake stamped with the word's epoch.
    Parked = 4,
    /// Exited; the slot awaits reclamation (death notifications go first).
    Done = 5,
}

impl State {
    /// Decodes the low byte of a word.
    ///
    /// Words are only ever built from a `State`, so an unknown byte means the
    /// word was corrupted by something outside this module.
    const fn from_bits(bits: u8) -> State {
        match bits {
            0 => State::Vacant,
            1 => State::Queued,
            2 => State::Running,
            3 => State::RunningNotified,
            4 => State::Parked,
            5 => State::Done,
            _ => panic!("state word: corrupt state byte"),
        }
    }

    /// `Running` or `RunningNotified`: the process is on a worker.
    const fn is_running(self) -> bool {
        matches!(self, State::Running | State::RunningNotified)
    }
}

/// One observed value of a [`StateWord`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Snapshot(u64);

impl Snapshot {
    /// Packs the three fields. `epoch` is taken modulo `2^24`.
    const fn pack(generation: u32, epoch: u32, state: State) -> Snapshot {
        Snapshot(
            ((generation as u64) << GENERATION_SHIFT)
                | (((epoch & EPOCH_MAX) as u64) << EPOCH_SHIFT)
                | state as u64,
        )
    }

    /// The incarnation of the slot.
    #[inline]
    pub const fn generation(self) -> u32 {
        (self.0 >> GENERATION_SHIFT) as u32
    }

    /// The epoch of the current (or last) wait, in `0..2^24`.
    #[inline]
    pub const fn epoch(self) -> u32 {
        ((self.0 & EPOCH_MASK) >> EPOCH_SHIFT) as u32
    }

    /// What the slot is doing.
    #[inline]
    pub const fn state(self) -> State {
        State::from_bits((self.0 & STATE_MASK) as u8)
    }

    /// Whether this is the incarnation `generation`.
    #[inline]
    pub const fn matches_generation(self, generation: u32) -> bool {
        self.generation() == generation
    }

    /// Whether this is incarnation `generation` in `state`.
    #[inline]
    pub fn is(self, generation: u32, state: State) -> bool {
        self.matches_generation(generation) && self.state() == state
    }

    /// Whether incarnation `generation` is a live process: spawned and not yet
    /// exited. A pid whose slot says otherwise is stale (`NoProc`).
    #[inline]
    pub fn is_alive(self, generation: u32) -> bool {
        self.matches_generation(generation) && !matches!(self.state(), State::Vacant | State::Done)
    }

    /// The same word with another state.
    const fn with_state(self, state: State) -> Snapshot {
        Snapshot((self.0 & !STATE_MASK) | state as u64)
    }

    /// The same word with the epoch advanced by one (wrapping at `2^24`) and
    /// another state.
    const fn next_epoch(self, state: State) -> Snapshot {
        Snapshot::pack(self.generation(), self.epoch().wrapping_add(1), state)
    }
}

impl fmt::Display for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "g={} e={} {:?}", self.generation(), self.epoch(), self.state())
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Snapshot({self})")
    }
}

/// A transition whose precondition did not hold; the word was not changed.
///
/// For a caller holding a pid this almost always means the pid is stale
/// (`found.generation()` differs): the process it named has exited, and the
/// caller should treat it as gone. With a matching generation it means the
/// runtime asked a slot for a transition its state does not allow — a bug in
/// the caller, worth reporting with this value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejected {
    transition: &'static str,
    generation: u32,
    found: Snapshot,
}

impl Rejected {
    /// The transition that was refused (`"claim"`, `"begin_run"`, `"reclaim"`).
    pub const fn transition(&self) -> &'static str {
        self.transition
    }

    /// The generation the caller asked for.
    pub const fn generation(&self) -> u32 {
        self.generation
    }

    /// The word the precondition was checked against.
    pub const fn found(&self) -> Snapshot {
        self.found
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.found.matches_generation(self.generation) {
            write!(
                f,
                "state word: `{}` is not allowed from {}; the runtime asked the slot for an illegal transition",
                self.transition, self.found
            )
        } else {
            write!(
                f,
                "state word: `{}` for generation {} found {}; the pid is stale, its process is gone",
                self.transition, self.generation, self.found
            )
        }
    }
}

impl core::error::Error for Rejected {}

/// What a wake did.
#[must_use = "on `Enqueue` the caller must put the pid on its worker's queue, or the process never runs again"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unpark {
    /// The process was parked and is now `Queued`: the caller must enqueue
    /// the pid on the process's worker, exactly once.
    Enqueue,
    /// The process was running; it is now `RunningNotified` and its next
    /// `park` returns at once. Nothing to enqueue.
    Notified,
    /// The wake did not land and the word is unchanged: wrong generation,
    /// consumed epoch, or a state that does not take wakes (`Queued`,
    /// `RunningNotified`, `Done`, `Vacant`).
    Stale,
}

/// What a park did.
#[must_use = "on `Parked` the worker must switch away from the process; on `Notified` it must not"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Park {
    /// The process is `Parked`: switch away; a stamped wake will enqueue it.
    Parked,
    /// A wake for this wait had already landed; the process is `Running`
    /// again and continues without switching.
    Notified,
}

/// The state word of one slot. See the [module docs](self).
pub struct StateWord {
    word: AtomicU64,
}

impl StateWord {
    /// A vacant slot whose next process will be incarnation `generation`, epoch 0.
    #[cfg(not(loom))]
    pub const fn new(generation: u32) -> StateWord {
        StateWord { word: AtomicU64::new(Snapshot::pack(generation, 0, State::Vacant).0) }
    }

    /// A vacant slot whose next process will be incarnation `generation`, epoch 0
    /// (loom's constructors are not `const`).
    #[cfg(loom)]
    pub fn new(generation: u32) -> StateWord {
        StateWord { word: AtomicU64::new(Snapshot::pack(generation, 0, State::Vacant).0) }
    }

    /// The current value. It may be stale by the time it is looked at; only a
    /// transition decides anything.
    #[inline]
    pub fn snapshot(&self) -> Snapshot {
        // Acquire: a reader may act on what it sees (e.g. a Done slot means the
        // process's exit is complete), so it takes the writes behind it.
        Snapshot(self.word.load(Ordering::Acquire))
    }

    /// Runs one CAS loop. `step` sees the current word and either names the
    /// next word with the result to return once it is stored, or rejects with
    /// the result to return without writing. The precondition is re-checked
    /// on every retry against the value the failed CAS observed, so no
    /// transition acts on a stale read.
    #[inline]
    fn transition<R>(&self, mut step: impl FnMut(Snapshot) -> Result<(Snapshot, R), R>) -> R {
        // Acquire: if `step` rejects on this very read, the caller acts on it
        // (see `snapshot`); if it accepts, the CAS below re-validates it.
        let mut current = Snapshot(self.word.load(Ordering::Acquire));
        loop {
            let (next, result) = match step(current) {
                Ok(accepted) => accepted,
                Err(rejected) => return rejected,
            };
            match self.word.compare_exchange_weak(
                current.0,
                next.0,
                // AcqRel on success: the word hands the process from one party
                // to the next (spawner → worker, waker → worker, process →
                // waker, process → finaliser), so a transition publishes the
                // writes before it and acquires those of the one it replaces.
                Ordering::AcqRel,
                // Acquire on failure: the observed value feeds `step` again and
                // may become a rejection the caller acts on.
                Ordering::Acquire,
            ) {
                Ok(_) => return result,
                Err(actual) => current = Snapshot(actual),
            }
        }
    }

    /// `Vacant(g)` → `Queued(g, e)`: a spawn takes the slot. The caller then
    /// enqueues the pid on the chosen worker.
    ///
    /// Rejected unless the slot is vacant and awaiting exactly `generation`.
    pub fn claim(&self, generation: u32) -> Result<Snapshot, Rejected> {
        self.transition(|current| {
            if current.is(generation, State::Vacant) {
                let next = current.with_state(State::Queued);
                Ok((next, Ok(next)))
            } else {
                Err(Err(Rejected { transition: "claim", generation, found: current }))
            }
        })
    }

    /// `Queued(g, e)` → `Running(g, e)`: a worker took the pid off its ready
    /// queue and is about to switch to it.
    ///
    /// Since a process is enqueued at most once, a rejection is a runtime bug
    /// (a duplicated or forged queue entry); the worker must not run the process.
    pub fn begin_run(&self, generation: u32) -> Result<Snapshot, Rejected> {
        self.transition(|current| {
            if current.is(generation, State::Queued) {
                let next = current.with_state(State::Running);
                Ok((next, Ok(next)))
            } else {
                Err(Err(Rejected { transition: "begin_run", generation, found: current }))
            }
        })
    }

    /// Owner only. Opens a wait: `Running(e)` or `RunningNotified(e)` →
    /// `Running(e+1)`, and returns `e+1`, the epoch every registration of this
    /// wait must carry.
    ///
    /// A notification present here can only be left by the wildcard
    /// [`unpark`](Self::unpark) (every stamped wake of an earlier wait was
    /// consumed by its `park` or eaten by its `retire_wait`); it is eaten so
    /// it cannot short-circuit this wait, which would make a stamped wake of
    /// this wait land as `Stale`. The stop flag that wildcard wake announces
    /// was published before it, and this CAS acquires it: the caller
    /// re-observes the stop flag after `begin_wait` and before parking.
    pub fn begin_wait(&self, generation: u32) -> u32 {
        self.open_epoch(generation, "begin_wait").0
    }

    /// Owner only. Ends the current wait: `Running(g, e)` → `Parked(g, e)` and
    /// [`Park::Parked`] (switch away), or, if a wake already landed,
    /// `RunningNotified(g, e)` → `Running(g, e)` and [`Park::Notified`]
    /// (continue). The epoch is not touched: the landed wake already consumed
    /// this wait's epoch.
    pub fn park(&self, generation: u32) -> Park {
        self.transition(|current| {
            if !current.matches_generation(generation) {
                owner_bug("park", generation, current);
                return Err(Park::Notified);
            }
            match current.state() {
                State::Running => Ok((current.with_state(State::Parked), Park::Parked)),
                State::RunningNotified => Ok((current.with_state(State::Running), Park::Notified)),
                _ => {
                    owner_bug("park", generation, current);
                    Err(Park::Notified)
                }
            }
        })
    }

    /// A stamped wake for the wait `epoch` of incarnation `generation`, which
    /// it consumes: `Parked(g, e)` → `Queued(g, e+1)` ([`Unpark::Enqueue`]) or
    /// `Running(g, e)` → `RunningNotified(g, e+1)` ([`Unpark::Notified`]).
    /// Anything else is [`Unpark::Stale`] and changes nothing.
    pub fn unpark_at(&self, generation: u32, epoch: u32) -> Unpark {
        self.transition(|current| {
            if !current.matches_generation(generation) || current.epoch() != epoch {
                return Err(Unpark::Stale);
            }
            wake(current)
        })
    }

    /// The wildcard wake, reserved for the terminal `request_stop`: as
    /// [`unpark_at`](Self::unpark_at) with whatever epoch the word holds.
    /// Only the generation is checked.
    pub fn unpark(&self, generation: u32) -> Unpark {
        self.transition(|current| {
            if !current.matches_generation(generation) {
                return Err(Unpark::Stale);
            }
            wake(current)
        })
    }

    /// Owner only. Closes a wait that ends without parking (a `select` that
    /// found an arm ready while registering): `Running(e)` or
    /// `RunningNotified(e)` → `Running(e+1)`. The bump makes every outstanding
    /// registration of the wait stale; a notification that already landed is
    /// eaten so the next wait's `park` is not short-circuited by it.
    ///
    /// Returns whether a notification was eaten. The caller re-observes the
    /// stop flag afterwards, as after [`begin_wait`](Self::begin_wait) — the
    /// same transition, with another name at another point of the protocol.
    pub fn retire_wait(&self, generation: u32) -> bool {
        self.open_epoch(generation, "retire_wait").1
    }

    /// Owner only. `RunningNotified(e)` → `Running(e)`, returning `true`;
    /// `false` and no change if `Running`. The epoch is not touched.
    pub fn clear_notify(&self, generation: u32) -> bool {
        self.transition(|current| {
            if current.is(generation, State::RunningNotified) {
                Ok((current.with_state(State::Running), true))
            } else {
                if !current.is(generation, State::Running) {
                    owner_bug("clear_notify", generation, current);
                }
                Err(false)
            }
        })
    }

    /// Owner only. `Running(e)` or `RunningNotified(e)` → `Queued(e)`: the
    /// process gives up the worker, which re-enqueues it. The epoch is kept;
    /// a notification is dropped, which is sound only outside a wait (see the
    /// module docs).
    pub fn yield_now(&self, generation: u32) {
        self.owner_step("yield_now", generation, State::Queued)
    }

    /// Owner only. `Running` or `RunningNotified` → `Done(g)`: the process
    /// exited. Wakes from now on are `Stale`; the slot is reclaimed once the
    /// death notifications are out.
    pub fn finish(&self, generation: u32) {
        self.owner_step("finish", generation, State::Done)
    }

    /// `Done(g)` → `Vacant(g+1, 0)`: the slot is free for the next spawn, as
    /// if made by `StateWord::new(g + 1)`. Returns the new word.
    ///
    /// The generation wraps: a pid kept across `2^32` reuses of one slot would
    /// alias its slot's newest process. Rejected unless the word is `Done(g)`,
    /// which also catches a double reclaim.
    pub fn reclaim(&self, generation: u32) -> Result<Snapshot, Rejected> {
        self.transition(|current| {
            if current.is(generation, State::Done) {
                let next = Snapshot::pack(generation.wrapping_add(1), 0, State::Vacant);
                Ok((next, Ok(next)))
            } else {
                Err(Err(Rejected { transition: "reclaim", generation, found: current }))
            }
        })
    }

    /// `begin_wait` and `retire_wait`: `Running(e)` / `RunningNotified(e)` →
    /// `Running(e+1)`. Returns the new epoch and whether a notification was eaten.
    fn open_epoch(&self, generation: u32, transition: &'static str) -> (u32, bool) {
        self.transition(|current| {
            if current.matches_generation(generation) && current.state().is_running() {
                let next = current.next_epoch(State::Running);
                Ok((next, (next.epoch(), current.state() == State::RunningNotified)))
            } else {
                owner_bug(transition, generation, current);
                Err((current.epoch(), false))
            }
        })
    }

    /// `yield_now` and `finish`: `Running` / `RunningNotified` → `to`, epoch kept.
    fn owner_step(&self, transition: &'static str, generation: u32, to: State) {
        self.transition(|current| {
            if current.matches_generation(generation) && current.state().is_running() {
                Ok((current.with_state(to), ()))
            } else {
                owner_bug(transition, generation, current);
                Err(())
            }
        })
    }
}

impl fmt::Debug for StateWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("StateWord").field(&self.snapshot()).finish()
    }
}

/// The landing half of both wakes, once the stamp has matched.
fn wake(current: Snapshot) -> Result<(Snapshot, Unpark), Unpark> {
    match current.state() {
        State::Parked => Ok((current.next_epoch(State::Queued), Unpark::Enqueue)),
        State::Running => Ok((current.next_epoch(State::RunningNotified), Unpark::Notified)),
        State::Vacant | State::Queued | State::RunningNotified | State::Done => Err(Unpark::Stale),
    }
}

/// An owner-only transition found a word it cannot have produced: the
/// runtime lost track of its own process. Loud in debug builds; release
/// builds leave the word alone and carry on.
#[inline]
#[track_caller]
fn owner_bug(transition: &'static str, generation: u32, found: Snapshot) {
    debug_assert!(false, "state word: owner-only `{transition}` for generation {generation} found {found}");
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::format;

    const G: u32 = 7;

    /// A word holding exactly `(generation, epoch, state)`.
    fn word(generation: u32, epoch: u32, state: State) -> StateWord {
        let w = StateWord::new(0);
        w.word.store(Snapshot::pack(generation, epoch, state).0, Ordering::Relaxed);
        w
    }

    fn snap(generation: u32, epoch: u32, state: State) -> Snapshot {
        Snapshot::pack(generation, epoch, state)
    }

    const ALL: [State; 6] =
        [State::Vacant, State::Queued, State::Running, State::RunningNotified, State::Parked, State::Done];

    #[test]
    fn packing_round_trips_every_field() {
        for state in ALL {
            for (generation, epoch) in [(0, 0), (G, 5), (u32::MAX, EPOCH_MAX)] {
                let s = snap(generation, epoch, state);
                assert_eq!((s.generation(), s.epoch(), s.state()), (generation, epoch, state));
            }
        }
        assert_eq!(snap(G, EPOCH_MAX + 1, State::Parked).epoch(), 0, "epoch is taken modulo 2^24");
    }

    #[test]
    fn new_is_vacant_at_epoch_zero() {
        assert_eq!(StateWord::new(G).snapshot(), snap(G, 0, State::Vacant));
    }

    #[test]
    fn display_and_debug() {
        let s = snap(3, 9, State::Parked);
        assert_eq!(format!("{s}"), "g=3 e=9 Parked");
        assert_eq!(format!("{s:?}"), "Snapshot(g=3 e=9 Parked)");
        assert_eq!(format!("{:?}", word(3, 9, State::Parked)), "StateWord(Snapshot(g=3 e=9 Parked))");
    }

    #[test]
    fn helpers() {
        let s = snap(G, 2, State::Parked);
        assert!(s.matches_generation(G) && !s.matches_generation(G + 1));
        assert!(s.is(G, State::Parked) && !s.is(G, State::Queued) && !s.is(G + 1, State::Parked));
        for state in ALL {
            let alive = !matches!(state, State::Vacant | State::Done);
            assert_eq!(snap(G, 0, state).is_alive(G), alive, "{state:?}");
            assert!(!snap(G, 0, state).is_alive(G + 1));
        }
    }

    #[test]
    fn claim() {
        let w = StateWord::new(G);
        assert_eq!(w.claim(G), Ok(snap(G, 0, State::Queued)));
        assert_eq!(w.snapshot(), snap(G, 0, State::Queued));
    }

    #[test]
    fn claim_rejects_wrong_generation_and_non_vacant() {
        let w = StateWord::new(G);
        let err = w.claim(G + 1).unwrap_err();
        assert_eq!(
            (err.transition(), err.generation(), err.found()),
            ("claim", G + 1, snap(G, 0, State::Vacant))
        );
        assert!(format!("{err}").contains("stale"));
        for state in ALL.into_iter().filter(|s| *s != State::Vacant) {
            let w = word(G, 4, state);
            let err = w.claim(G).unwrap_err();
            assert_eq!(err.found(), snap(G, 4, state));
            assert!(format!("{err}").contains("not allowed"));
            assert_eq!(w.snapshot(), snap(G, 4, state), "a rejected claim writes nothing");
        }
    }

    #[test]
    fn begin_run() {
        let w = word(G, 3, State::Queued);
        assert_eq!(w.begin_run(G), Ok(snap(G, 3, State::Running)));
        assert_eq!(w.snapshot(), snap(G, 3, State::Running));
    }

    #[test]
    fn begin_run_rejects_wrong_generation_and_non_queued() {
        let w = word(G, 3, State::Queued);
        assert_eq!(w.begin_run(G - 1).unwrap_err().found(), snap(G, 3, State::Queued));
        for state in ALL.into_iter().filter(|s| *s != State::Queued) {
            let w = word(G, 3, state);
            assert_eq!(w.begin_run(G).unwrap_err().transition(), "begin_run");
            assert_eq!(w.snapshot(), snap(G, 3, state));
        }
    }

    #[test]
    fn begin_wait_bumps_the_epoch_and_returns_it() {
        let w = word(G, 3, State::Running);
        assert_eq!(w.begin_wait(G), 4);
        assert_eq!(w.snapshot(), snap(G, 4, State::Running));
    }

    #[test]
    fn begin_wait_eats_a_wildcard_notification() {
        let w = word(G, 3, State::Running);
        assert_eq!(w.unpark(G), Unpark::Notified);
        assert_eq!(w.begin_wait(G), 5);
        assert_eq!(w.snapshot(), snap(G, 5, State::Running));
        assert_eq!(w.park(G), Park::Parked, "the eaten notification does not short-circuit the wait");
    }

    #[test]
    fn park() {
        let w = word(G, 3, State::Running);
        assert_eq!(w.park(G), Park::Parked);
        assert_eq!(w.snapshot(), snap(G, 3, State::Parked));
    }

    #[test]
    fn park_after_a_landed_wake_continues() {
        let w = word(G, 3, State::RunningNotified);
        assert_eq!(w.park(G), Park::Notified);
        assert_eq!(w.snapshot(), snap(G, 3, State::Running));
    }

    #[test]
    fn unpark_at_parked_enqueues_and_consumes() {
        let w = word(G, 3, State::Parked);
        assert_eq!(w.unpark_at(G, 3), Unpark::Enqueue);
        assert_eq!(w.snapshot(), snap(G, 4, State::Queued));
        assert_eq!(w.unpark_at(G, 3), Unpark::Stale, "the epoch was consumed");
    }

    #[test]
    fn unpark_at_running_notifies_and_consumes() {
        let w = word(G, 3, State::Running);
        assert_eq!(w.unpark_at(G, 3), Unpark::Notified);
        assert_eq!(w.snapshot(), snap(G, 4, State::RunningNotified));
        assert_eq!(w.unpark_at(G, 3), Unpark::Stale);
        assert_eq!(w.unpark_at(G, 4), Unpark::Stale, "RunningNotified takes no wake");
    }

    #[test]
    fn unpark_at_rejections_change_nothing() {
        // Epoch mismatch, generation mismatch, and every state that takes no wake.
        let mut cases = alloc::vec![
            (word(G, 3, State::Parked), G, 2),
            (word(G, 3, State::Parked), G, 4),
            (word(G, 3, State::Running), G, 2),
            (word(G, 3, State::Parked), G + 1, 3),
            (word(G, 3, State::Running), G - 1, 3),
            (word(G, 3, State::Parked), G, 3 + (1 << EPOCH_BITS)),
        ];
        for state in [State::Vacant, State::Queued, State::RunningNotified, State::Done] {
            cases.push((word(G, 3, state), G, 3));
        }
        for (w, generation, epoch) in cases {
            let before = w.snapshot();
            assert_eq!(w.unpark_at(generation, epoch), Unpark::Stale, "{before} ← ({generation}, {epoch})");
            assert_eq!(w.snapshot(), before);
        }
    }

    #[test]
    fn unpark_wildcard() {
        let w = word(G, 3, State::Parked);
        assert_eq!(w.unpark(G), Unpark::Enqueue);
        assert_eq!(w.snapshot(), snap(G, 4, State::Queued));

        let w = word(G, 3, State::Running);
        assert_eq!(w.unpark(G), Unpark::Notified);
        assert_eq!(w.snapshot(), snap(G, 4, State::RunningNotified));

        for state in [State::Vacant, State::Queued, State::RunningNotified, State::Done] {
            let w = word(G, 3, state);
            assert_eq!(w.unpark(G), Unpark::Stale);
            assert_eq!(w.snapshot(), snap(G, 3, state));
        }
        for state in [State::Parked, State::Running] {
            let w = word(G, 3, state);
            assert_eq!(w.unpark(G + 1), Unpark::Stale, "generation mismatch");
            assert_eq!(w.snapshot(), snap(G, 3, state));
        }
    }

    #[test]
    fn retire_wait_bumps_and_eats() {
        let w = word(G, 3, State::Running);
        assert!(!w.retire_wait(G));
        assert_eq!(w.snapshot(), snap(G, 4, State::Running));
        assert_eq!(w.unpark_at(G, 3), Unpark::Stale, "the retired wait's registrations are stale");

        let w = word(G, 3, State::RunningNotified);
        assert!(w.retire_wait(G));
        assert_eq!(w.snapshot(), snap(G, 4, State::Running));
    }

    #[test]
    fn clear_notify() {
        let w = word(G, 3, State::RunningNotified);
        assert!(w.clear_notify(G));
        assert_eq!(w.snapshot(), snap(G, 3, State::Running));
        assert!(!w.clear_notify(G), "no-op on Running");
        assert_eq!(w.snapshot(), snap(G, 3, State::Running));
    }

    #[test]
    fn yield_now_keeps_the_epoch() {
        for state in [State::Running, State::RunningNotified] {
            let w = word(G, 3, state);
            w.yield_now(G);
            assert_eq!(w.snapshot(), snap(G, 3, State::Queued));
        }
    }

    #[test]
    fn finish() {
        for state in [State::Running, State::RunningNotified] {
            let w = word(G, 3, state);
            w.finish(G);
            assert_eq!(w.snapshot(), snap(G, 3, State::Done));
            assert_eq!(w.unpark_at(G, 3), Unpark::Stale);
            assert_eq!(w.unpark(G), Unpark::Stale);
        }
    }

    #[test]
    fn reclaim_bumps_the_generation_and_resets() {
        let w = word(G, 3, State::Done);
        assert_eq!(w.reclaim(G), Ok(snap(G + 1, 0, State::Vacant)));
        assert_eq!(w.snapshot().0, StateWord::new(G + 1).snapshot().0);
        assert_eq!(w.reclaim(G).unwrap_err().found(), snap(G + 1, 0, State::Vacant), "double reclaim");
        assert!(w.claim(G).is_err(), "the old pid cannot claim");
        assert!(w.claim(G + 1).is_ok());
    }

    #[test]
    fn reclaim_rejects_wrong_generation_and_non_done() {
        let w = word(G, 3, State::Done);
        assert_eq!(w.reclaim(G + 1).unwrap_err().found(), snap(G, 3, State::Done));
        for state in ALL.into_iter().filter(|s| *s != State::Done) {
            let w = word(G, 3, state);
            assert_eq!(w.reclaim(G).unwrap_err().transition(), "reclaim");
            assert_eq!(w.snapshot(), snap(G, 3, state));
        }
    }

    #[test]
    fn generation_wraps() {
        let w = word(u32::MAX, 3, State::Done);
        assert_eq!(w.reclaim(u32::MAX), Ok(snap(0, 0, State::Vacant)));
        assert!(w.claim(0).is_ok());
    }

    #[test]
    fn epoch_wraps_at_2_pow_24() {
        let top = EPOCH_MAX;
        assert_eq!(top, (1 << 24) - 1);

        let w = word(G, top - 1, State::Running);
        assert_eq!(w.begin_wait(G), top);
        assert_eq!(w.begin_wait(G), 0, "begin_wait wraps");
        assert_eq!(w.snapshot(), snap(G, 0, State::Running), "the wrap does not carry into the generation");

        let w = word(G, top, State::Parked);
        assert_eq!(w.unpark_at(G, top), Unpark::Enqueue);
        assert_eq!(w.snapshot(), snap(G, 0, State::Queued));

        let w = word(G, top, State::Running);
        assert_eq!(w.unpark_at(G, top), Unpark::Notified);
        assert_eq!(w.snapshot(), snap(G, 0, State::RunningNotified));
        assert_eq!(w.park(G), Park::Notified);
        assert_eq!(w.snapshot(), snap(G, 0, State::Running));

        let w = word(G, top, State::RunningNotified);
        assert!(w.retire_wait(G));
        assert_eq!(w.snapshot(), snap(G, 0, State::Running));

        let w = word(G, top, State::Parked);
        assert_eq!(w.unpark(G), Unpark::Enqueue);
        assert_eq!(w.snapshot(), snap(G, 0, State::Queued));
    }

    #[test]
    fn a_whole_life() {
        let w = StateWord::new(G);
        w.claim(G).unwrap();
        w.begin_run(G).unwrap();
        // A wait that parks and is woken.
        let e = w.begin_wait(G);
        assert_eq!(w.park(G), Park::Parked);
        assert_eq!(w.unpark_at(G, e), Unpark::Enqueue);
        w.begin_run(G).unwrap();
        // A wait whose wake lands before the park.
        let e = w.begin_wait(G);
        assert_eq!(w.unpark_at(G, e), Unpark::Notified);
        assert_eq!(w.park(G), Park::Notified);
        // A yield.
        w.yield_now(G);
        w.begin_run(G).unwrap();
        w.finish(G);
        assert_eq!(w.reclaim(G), Ok(snap(G + 1, 0, State::Vacant)));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "owner-only `park`")]
    fn park_off_cpu_is_a_bug() {
        let _ = word(G, 3, State::Queued).park(G);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "owner-only `begin_wait`")]
    fn begin_wait_with_wrong_generation_is_a_bug() {
        let _ = word(G, 3, State::Running).begin_wait(G + 1);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "owner-only `retire_wait`")]
    fn retire_wait_while_parked_is_a_bug() {
        let _ = word(G, 3, State::Parked).retire_wait(G);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "owner-only `clear_notify`")]
    fn clear_notify_while_parked_is_a_bug() {
        let _ = word(G, 3, State::Parked).clear_notify(G);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "owner-only `yield_now`")]
    fn yield_now_while_queued_is_a_bug() {
        word(G, 3, State::Queued).yield_now(G);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "owner-only `finish`")]
    fn finish_twice_is_a_bug() {
        word(G, 3, State::Done).finish(G);
    }

    /// Release builds: an owner-only transition whose precondition fails
    /// writes nothing and answers "do not switch away".
    #[test]
    #[cfg(not(debug_assertions))]
    fn owner_bugs_write_nothing_in_release() {
        let w = word(G, 3, State::Queued);
        assert_eq!(w.park(G), Park::Notified);
        assert_eq!(w.begin_wait(G), 3);
        assert!(!w.retire_wait(G));
        assert!(!w.clear_notify(G));
        w.yield_now(G);
        w.finish(G);
        assert_eq!(w.park(G + 1), Park::Notified);
        assert_eq!(w.snapshot(), snap(G, 3, State::Queued));
    }
}

/// Loom models of the wake protocol. Each one races the owner's own
/// transitions against wakers and checks the invariants of the module docs
/// in every interleaving.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    const G: u32 = 7;

    /// A process of incarnation `G` that has been spawned and is running.
    fn running() -> Arc<StateWord> {
        let w = StateWord::new(G);
        w.claim(G).unwrap();
        w.begin_run(G).unwrap();
        Arc::new(w)
    }

    /// The worker's side of an `Enqueue`: wait until the process is queued,
    /// then run it.
    fn run_once_queued(w: &StateWord) {
        while w.snapshot().state() != State::Queued {
            thread::yield_now();
        }
        w.begin_run(G).unwrap();
    }

    #[test]
    fn at_most_one_wake_per_wait() {
        loom::model(|| {
            let w = running();
            let e = w.begin_wait(G);
            let wakers: [_; 2] = core::array::from_fn(|_| {
                let w = w.clone();
                thread::spawn(move || w.unpark_at(G, e))
            });

            let park = w.park(G);
            let results = wakers.map(|h| h.join().unwrap());
            let landed = results.iter().filter(|r| **r != Unpark::Stale).count();
            assert_eq!(landed, 1, "{results:?}");

            let end = w.snapshot();
            match park {
                Park::Parked => {
                    assert!(results.contains(&Unpark::Enqueue), "{results:?}");
                    assert_eq!(end, Snapshot::pack(G, e + 1, State::Queued));
                }
                Park::Notified => {
                    assert!(results.contains(&Unpark::Notified), "{results:?}");
                    assert_eq!(end, Snapshot::pack(G, e + 1, State::Running));
                }
            }
        });
    }

    #[test]
    fn consumed_epoch_never_wakes() {
        loom::model(|| {
            let w = running();
            let first = w.begin_wait(G);
            let waker = {
                let w = w.clone();
                // The wake of the first wait, then the same stamp again: the
                // second one races the owner's next wait.
                thread::spawn(move || (w.unpark_at(G, first), w.unpark_at(G, first)))
            };

            if w.park(G) == Park::Parked {
                run_once_queued(&w);
            }
            let second = w.begin_wait(G);
            assert_ne!(second, first);
            let park = w.park(G);

            let (wake, replay) = waker.join().unwrap();
            assert_ne!(wake, Unpark::Stale, "the first wait's wake lands");
            assert_eq!(replay, Unpark::Stale, "a consumed epoch never wakes");
            assert_eq!(park, Park::Parked, "the second wait saw no wake");
            assert_eq!(w.snapshot(), Snapshot::pack(G, second, State::Parked));
            assert_eq!(w.unpark_at(G, second), Unpark::Enqueue, "its own wake still lands");
        });
    }

    #[test]
    fn retire_eats_late_arm_notification() {
        loom::model(|| {
            let w = running();
            let e = w.begin_wait(G);
            let arm = {
                let w = w.clone();
                // A losing arm's registration firing at some point.
                thread::spawn(move || w.unpark_at(G, e))
            };

            let ate = w.retire_wait(G);
            let after = w.snapshot();
            assert_eq!(after.state(), State::Running, "no notification survives retire_wait");
            assert_eq!(after.epoch(), if ate { e + 2 } else { e + 1 });

            // A new wait of the same process: the old wake must not short-circuit it.
            let next = w.begin_wait(G);
            let park = w.park(G);

            let late = arm.join().unwrap();
            assert_eq!(late == Unpark::Notified, ate, "the arm landed iff retire_wait ate it");
            assert_ne!(late, Unpark::Enqueue);
            assert_eq!(park, Park::Parked);
            assert_eq!(w.snapshot(), Snapshot::pack(G, next, State::Parked));
        });
    }

    #[test]
    fn park_racing_unpark_never_loses_the_wake() {
        for wildcard in [false, true] {
            loom::model(move || {
                let w = running();
                let e = w.begin_wait(G);
                let waker = {
                    let w = w.clone();
                    thread::spawn(move || if wildcard { w.unpark(G) } else { w.unpark_at(G, e) })
                };

                let park = w.park(G);
                let wake = waker.join().unwrap();
                let end = w.snapshot();
                match (park, wake) {
                    (Park::Parked, Unpark::Enqueue) => {
                        assert_eq!(end, Snapshot::pack(G, e + 1, State::Queued))
                    }
                    (Park::Notified, Unpark::Notified) => {
                        assert_eq!(end, Snapshot::pack(G, e + 1, State::Running))
                    }
                    other => panic!("lost or doubled wake: {other:?}, word {end}"),
                }
            });
        }
    }

    #[test]
    fn generation_check_is_atomic_with_every_transition() {
        // The old incarnation is the last one before the generation wraps.
        const OLD: u32 = u32::MAX;
        const NEW: u32 = 0;
        loom::model(|| {
            let w = StateWord::new(OLD);
            w.claim(OLD).unwrap();
            w.begin_run(OLD).unwrap();
            let stale_epoch = w.begin_wait(OLD);
            let w = Arc::new(w);

            let stale = {
                let w = w.clone();
                thread::spawn(move || (w.unpark_at(OLD, stale_epoch), w.unpark(OLD), w.claim(OLD)))
            };

            // The old process exits, its slot is reclaimed and reused, and the
            // new process waits on the very epoch the stale stamp carries.
            w.finish(OLD);
            assert_eq!(w.reclaim(OLD), Ok(Snapshot::pack(NEW, 0, State::Vacant)));
            w.claim(NEW).unwrap();
            w.begin_run(NEW).unwrap();
            let epoch = w.begin_wait(NEW);
            assert_eq!(epoch, stale_epoch, "only the generation tells the two waits apart");
            let park = w.park(NEW);

            let (at, wildcard, claim) = stale.join().unwrap();
            assert_eq!(park, Park::Parked, "no stale wake reached the new process");
            assert!(claim.is_err());
            assert_ne!(at, Unpark::Enqueue);
            assert_ne!(wildcard, Unpark::Enqueue);
            assert_eq!(w.snapshot(), Snapshot::pack(NEW, epoch, State::Parked));
        });
    }
}
