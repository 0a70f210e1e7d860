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
//! claim_parked  spawner        Vacant(g, e)                        Parked(g, e)   (stackless)
//! begin_run     worker         Queued(g, e)                        Running(g, e)
//! resume        worker         Queued(g, e)                        Running(g, e)
//!                              Running | RunningNotified (g, e)    unchanged (a yield)
//! begin_wait    owner          Running | RunningNotified (g, e)    Running(g, e+1), returns e+1
//! begin_wait_   owner          Running(g, e)                       unchanged, returns e
//!   reusing                    RunningNotified (g, e)              as begin_wait
//! park          owner          Running(g, e)                       Parked(g, e)              Park::Parked
//!                              RunningNotified(g, e)               Running(g, e)             Park::Notified
//! unpark_at     waker (g, e)   Parked(g, e)                        Queued(g, e+1)            Unpark::Enqueue
//!                              Running(g, e)                       RunningNotified(g, e+1)   Unpark::Notified
//! unpark        request_stop   as unpark_at, whatever the epoch
//! retire_wait   owner          Running | RunningNotified (g, e)    Running(g, e+1)
//! clear_notify  owner          RunningNotified(g, e)               Running(g, e)
//! finish        owner          Running | RunningNotified (g, e)    Done(g, e)
//! reclaim       finaliser      Done(g, e)                          Vacant(g+1, 0)
//! ```
//!
//! # Invariants this module keeps
//!
//! 1. **Every change is one CAS whose precondition is checked inside the CAS
//!    loop**, against the very value the CAS replaces. The generation check is
//!    therefore atomic with every transition: an operation stamped with a stale
//!    generation cannot touch the slot's next incarnation. The one exception
//!    is `begin_run`, a load and a store: a `Queued` word has a single writer
//!    (no other transition's precondition accepts `Queued`, so every other
//!    party that reads it changes nothing), and that writer is the worker
//!    that took the pid off its queue.
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
//! [`finish`](StateWord::finish)) can only
//! fail on a runtime bug; they `debug_assert!` and, in release builds, leave
//! the word untouched and return the answer that does not switch away.
//!
//! A wait is the span from `begin_wait` to `park` (or `retire_wait`). No
//! yield may happen inside it: the process would not be parked when the
//! wake lands, and the wake would be left as a notification for a later
//! park. Registration therefore runs with preemption disabled.
//!
//! # A yield writes nothing
//!
//! A process that yields keeps its word `Running` (or `RunningNotified`):
//! its worker puts it on its own ready queue, and [`StateWord::resume`]
//! takes it off again without a write. Nothing else can queue it in
//! between — a stamped wake needs an open wait, which a yield never has
//! (its epoch has moved past every registration), and the stop's wildcard
//! wake of a `Running` word only leaves a notification. So a yield costs
//! no atomic read-modify-write at either end, and a process is still
//! queued at most once.
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
    #[inline]
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

    /// `Vacant(g)` → `Parked(g, e)`: a spawn takes the slot for a stackless
    /// body (a handler actor), which sits `Parked` whenever its worker is
    /// not running it. Nothing is enqueued: only the wildcard wake of a
    /// stop (or the body's own end) ever queues it.
    ///
    /// Rejected unless the slot is vacant and awaiting exactly `generation`.
    pub fn claim_parked(&self, generation: u32) -> Result<Snapshot, Rejected> {
        self.transition(|current| {
            if current.is(generation, State::Vacant) {
                let next = current.with_state(State::Parked);
                Ok((next, Ok(next)))
            } else {
                Err(Err(Rejected { transition: "claim_parked", generation, found: current }))
            }
        })
    }

    /// `Queued(g, e)` → `Running(g, e)`: a worker took the pid off its ready
    /// queue and is about to switch to it.
    ///
    /// Since a process is enqueued at most once, a rejection is a runtime bug
    /// (a duplicated or forged queue entry); the worker must not run the process.
    pub fn begin_run(&self, generation: u32) -> Result<Snapshot, Rejected> {
        // Acquire: takes the writes of the transition that queued the
        // process (its spawn or its wake).
        let current = self.snapshot();
        if !current.is(generation, State::Queued) {
            return Err(Rejected { transition: "begin_run", generation, found: current });
        }
        let next = current.with_state(State::Running);
        // No CAS: nothing but this transition writes a `Queued` word (every
        // other one rejects it without writing), and only the worker that
        // took the pid off its queue makes it, so the word is still
        // `current`. Release: a waker that finds the process `Running`
        // acquires this store in its CAS, with the writes before it.
        self.word.store(next.0, Ordering::Release);
        Ok(next)
    }

    /// A worker took the pid off its ready queue and is about to switch to
    /// it: `Queued(g, e)` → `Running(g, e)` for a woken or spawned process;
    /// for one that yielded (still `Running` or `RunningNotified`, see the
    /// module docs) the word is left as it is and no write is made.
    ///
    /// Rejected for any other state, or another generation: a runtime bug
    /// (a duplicated or forged queue entry); the worker must not run it.
    #[inline]
    pub fn resume(&self, generation: u32) -> Result<Snapshot, Rejected> {
        // Acquire, as a transition's: takes the writes of whoever queued
        // the process, or (for a yield) of its own last run.
        let current = self.snapshot();
        match current.state() {
            State::Running | State::RunningNotified if current.matches_generation(generation) => Ok(current),
            _ => self.begin_run(generation).map_err(|rejected| Rejected { transition: "resume", ..rejected }),
        }
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

    /// Owner only. Opens a wait like [`begin_wait`](Self::begin_wait), but
    /// on `Running(e)` without writing the word: the wait takes `e` itself.
    /// On anything else (a notification present) it is `begin_wait`.
    ///
    /// Sound because every wait ends by moving the epoch on: the wake that
    /// lands consumes it (whether it parks or leaves `RunningNotified`), and
    /// [`retire_wait`](Self::retire_wait) bumps it. So the epoch of a
    /// `Running` word is that of no open wait, and every registration made
    /// before with a stamp still matching it is from a wait opened with
    /// `begin_wait` and never ended — which only the public `begin_wait`
    /// can leave (a misuse). Such a registration may then wake the new wait
    /// instead: callers must treat a wake as "look again", as the channel's
    /// receive loop does.
    pub fn begin_wait_reusing(&self, generation: u32) -> u32 {
        let current = self.snapshot();
        if current.is(generation, State::Running) {
            return current.epoch();
        }
        self.begin_wait(generation)
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

    /// `finish`: `Running` / `RunningNotified` → `to`, epoch kept.
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
mod tests;

#[cfg(all(test, loom))]
mod loom_models;
