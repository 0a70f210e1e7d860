//! The slab: one slot per process, addressed by `Pid = (index, generation)`.
//!
//! A slot holds the process's state word, its owning worker, its stop
//! flag, its queue link, the body only its worker touches (context, stack,
//! entry, locals) and the cold state under a leaf lock (exit reason,
//! joiners, handle and finalize flags, death hooks).
//!
//! Invariant: a slot is (re)initialised by exactly one function,
//! `Slot::reset`, which every path that recycles a slot calls; a new field
//! added to `SlotBody` or `Cold` is reset by construction.
//!
//! The slots live in [`Segments`](crate::kernel::segments::Segments):
//! storage that grows by appending and never moves a slot, so a `&Slot`
//! stays valid and a lookup takes no lock.
use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::cell::UnsafeCell;
use core::panic::Location;
use core::ptr;

use smarm_arch::Context;
use smarm_platform::Stack;

use crate::kernel::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, AtomicUsize, Ordering};
use crate::kernel::deadlock::{WaitKind, WaitSite};
use crate::kernel::exit::ExitReason;
use crate::kernel::parker::ThreadWait;
use crate::kernel::pid::Pid;
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::stackless::{BodyType, StacklessCell};
use crate::kernel::state::StateWord;

/// A boxed process body.
pub(crate) type Entry = Box<dyn FnOnce() + Send + 'static>;

/// The slot's stop flag values.
pub(crate) const STOP_NONE: u8 = 0;
/// A stop was requested and not yet observed.
pub(crate) const STOP_REQUESTED: u8 = 1;
/// The stop was observed and is unwinding: observation points stay quiet.
pub(crate) const STOP_RAISED: u8 = 2;

/// What only the owning worker (and the process itself, which runs on it)
/// touches: no lock, no atomics.
pub(crate) struct SlotBody {
    pub(crate) context: Context,
    pub(crate) stack: Option<Stack>,
    pub(crate) entry: Option<Entry>,
    /// Actor-local values (`ActorLocal`), keyed by the address of their
    /// static key; dropped with the slot.
    pub(crate) locals: Vec<(usize, Box<dyn core::any::Any + Send>)>,
    /// Lowest saved stack pointer seen at a switch out (`usize::MAX` before
    /// the first): a cheap high-water mark of stack use.
    pub(crate) low_water: usize,
    /// The body's return value, stashed as its last act, until the exit
    /// moves it to `Cold::value`.
    pub(crate) value: Option<Box<dyn Any + Send>>,
    /// The stackless body's state, owned by the plugin of the slot's
    /// worker; installed by that worker after the spawn and reached only
    /// through its driver (`kernel::stackless::Driver`).
    pub(crate) cell: Option<StacklessCell>,
}

impl Default for SlotBody {
    fn default() -> Self {
        SlotBody {
            context: Context::empty(),
            stack: None,
            entry: None,
            locals: Vec::new(),
            low_water: usize::MAX,
            value: None,
            cell: None,
        }
    }
}

/// One waiter in `join`: a process's wait (`(pid, epoch)`), or a plain
/// thread's.
#[derive(Debug)]
pub(crate) enum Joiner {
    Process(Pid, u32),
    Thread(Arc<ThreadWait>),
    Task(core::task::Waker),
}

/// Cold per-slot state, under the slot's leaf lock.
#[derive(Default)]
pub(crate) struct Cold {
    /// How the process ended; set, with the state word's `finish`, when it
    /// switches out for the last time. From then on no death hook can be
    /// added.
    pub(crate) exit: Option<ExitReason>,
    /// The body's return value, for the `JoinHandle` (normal exits only).
    pub(crate) value: Option<Box<dyn Any + Send>>,
    /// Who waits in `join` on this process.
    pub(crate) joiners: Vec<Joiner>,
    /// A `JoinHandle` is outstanding: the slot may not be reclaimed.
    pub(crate) handle: bool,
    /// The worker has finalized the process.
    pub(crate) finalized: bool,
    /// Finalize has run the death hooks: from here on `join` may return.
    /// The exit reason alone is not enough — it is set before the process
    /// switches out for the last time, and on another thread a joiner could
    /// see it before finalize has run.
    pub(crate) notified: bool,
    /// Run once at finalize, after the stack is recycled and before joiners
    /// are woken; removable by id until then.
    pub(crate) death_hooks: Vec<(DeathHookId, DeathHook)>,
    /// The reason a pending stop was requested with: what the process's
    /// death reports if it ends stopped (a link's `Linked`, an exit
    /// signal's reason). `None`: plain `Stopped`.
    pub(crate) stop_reason: Option<ExitReason>,
}

/// A notification run once when a process dies: the runtime, the dead
/// process's pid, and why it died. Runs on the dead process's worker, with
/// no runtime lock held; it may take locks, send, and stop other processes,
/// but never parks.
pub(crate) type DeathHook = Box<dyn FnOnce(&crate::kernel::runtime::Shared, Pid, &ExitReason) + Send>;

/// Names one registered death hook, for removing it before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct DeathHookId(pub(crate) u64);

/// One process slot.
pub(crate) struct Slot {
    pub(crate) state: StateWord,
    /// Index of the owning worker; written before the spawn's `claim`
    /// (whose Release publishes it) and constant while the slot is live.
    pub(crate) worker: AtomicUsize,
    pub(crate) stop: AtomicU8,
    /// The slot holds a stackless body (a handler actor): no stack, no
    /// context; its worker's plugin runs it (`kernel::stackless`). Written
    /// before the spawn's claim, like `worker`, and constant while live.
    pub(crate) stackless: AtomicBool,
    /// A stackless body's type, as its plugin described it at the spawn
    /// (null for a process): readable from any thread, unlike the body.
    /// Always null or a `&'static BodyType`; written before the spawn's
    /// claim, like `worker`, and constant while live.
    pub(crate) body_type: AtomicPtr<BodyType>,
    /// The next entry while the slot sits in the intrusive list of a
    /// worker's wake or spawn queue ([`WakeQueue`](crate::kernel::ring::WakeQueue)):
    /// a process is in at most one queue at a time, so one link is enough.
    pub(crate) link: AtomicU32,
    /// The kind of the process's current (or last) wait, a `WaitKind`
    /// byte; with `wait_at`, written by the process when it opens a wait
    /// and read by a deadlock look while it is parked (Relaxed: the park's
    /// state-word transition orders them for a reader that saw it parked).
    pub(crate) wait_kind: AtomicU8,
    /// The source line of that wait's blocking call; null if none.
    pub(crate) wait_at: AtomicPtr<Location<'static>>,
    pub(crate) body: UnsafeCell<SlotBody>,
    pub(crate) cold: RuntimeMutex<Cold>,
}

// SAFETY: `body` is touched only by the owning worker's driver (and the
// process it runs, on the same driver), or by a spawner that holds the slot
// exclusively (popped from the free list, state Vacant) before the `claim`
// that publishes it; everything else is atomic or behind `cold`'s lock.
unsafe impl Sync for Slot {}
// SAFETY: as above; a slot moves between threads only inside the slab.
unsafe impl Send for Slot {}

impl Slot {
    pub(crate) fn new() -> Slot {
        Slot {
            // Generations start at 1 so that no pid's overflow tag
            // (`(generation << 32) | index`) is 0, the platform's "unknown".
            state: StateWord::new(1),
            worker: AtomicUsize::new(0),
            stop: AtomicU8::new(STOP_NONE),
            stackless: AtomicBool::new(false),
            body_type: AtomicPtr::new(core::ptr::null_mut()),
            link: AtomicU32::new(crate::kernel::ring::NIL),
            wait_kind: AtomicU8::new(WaitKind::Other as u8),
            wait_at: AtomicPtr::new(ptr::null_mut()),
            body: UnsafeCell::new(SlotBody::default()),
            cold: RuntimeMutex::leaf(Cold::default()),
        }
    }

    /// Claims a stop requested and not yet observed, marking it raised:
    /// `true` for the one caller that claims it, which then acts on it
    /// (raises it, or ends a process that has not started).
    ///
    /// Read first: the exchange is an atomic write, and almost every call
    /// finds no stop pending.
    #[inline]
    pub(crate) fn claim_stop(&self) -> bool {
        // Acquire pairs with the AcqRel that requested the stop
        // (`Shared::request_stop_with`).
        self.stop.load(Ordering::Acquire) == STOP_REQUESTED
            && self
                .stop
                .compare_exchange(STOP_REQUESTED, STOP_RAISED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    /// Returns the slot to its vacant contents — the one place that does.
    ///
    /// # Safety
    ///
    /// The caller owns the slot's body: the process is `Done` and finalized
    /// (or the slot was never used) and no driver will touch `body` again
    /// until the next spawn claims the slot.
    pub(crate) unsafe fn reset(&self, cold: &mut Cold) {
        // SAFETY: exclusive ownership of `body` per this fn's contract.
        unsafe { *self.body.get() = SlotBody::default() };
        *cold = Cold::default();
        self.stop.store(STOP_NONE, Ordering::Relaxed);
        self.stackless.store(false, Ordering::Relaxed);
        self.body_type.store(core::ptr::null_mut(), Ordering::Relaxed);
        self.worker.store(0, Ordering::Relaxed);
        // A reclaimed slot is in no queue: the link is dead until the next
        // push writes it; reset anyway so a stale link is never read.
        self.link.store(crate::kernel::ring::NIL, Ordering::Relaxed);
        self.wait_kind.store(WaitKind::Other as u8, Ordering::Relaxed);
        self.wait_at.store(ptr::null_mut(), Ordering::Relaxed);
    }

    /// Records where the process's new wait began: two stores.
    #[inline]
    pub(crate) fn record_wait(&self, site: WaitSite) {
        self.wait_kind.store(site.kind as u8, Ordering::Relaxed);
        // The pointer is only ever read back as a shared reference.
        self.wait_at.store(ptr::from_ref(site.location).cast_mut(), Ordering::Relaxed);
    }

    /// Where the process's current (or last) wait began.
    pub(crate) fn wait_site(&self) -> (WaitKind, Option<&'static Location<'static>>) {
        let kind = WaitKind::from_bits(self.wait_kind.load(Ordering::Relaxed));
        let at = self.wait_at.load(Ordering::Relaxed);
        // SAFETY: `wait_at` holds null or a pointer made from a
        // `&'static Location` by `record_wait`.
        (kind, unsafe { at.cast_const().as_ref() })
    }

    pub(crate) fn generation(&self) -> u32 {
        self.state.snapshot().generation()
    }
}

impl crate::kernel::ring::Linked for Slot {
    #[inline]
    fn link(&self) -> &AtomicU32 {
        &self.link
    }
}

/// The slot's own bookkeeping, without a runtime: what a fresh slot holds,
/// that `reset` drops everything a finished process left behind exactly
/// once, and that a recycled slot's generation moves on.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::kernel::state::State;
    use alloc::sync::Arc;
    use alloc::vec;

    /// Counts its drops in the shared counter.
    struct Guard(Arc<AtomicUsize>);

    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Everything a finished process (or a stackless body) can leave in its
    /// slot, each owning a guard of `drops`: eight guards in all (the entry,
    /// two locals, the stashed and the exit value, a stackless cell, two
    /// death hooks).
    fn fill(slot: &Slot, drops: &Arc<AtomicUsize>) {
        let guard = || Guard(drops.clone());
        // SAFETY: the test owns the slot; no process runs on it.
        let body = unsafe { &mut *slot.body.get() };
        let entry_guard = guard();
        body.entry = Some(Box::new(move || drop(entry_guard)));
        body.locals.push((1, Box::new(guard())));
        body.locals.push((2, Box::new(guard())));
        body.value = Some(Box::new(guard()));
        body.cell = Some(StacklessCell::new(Box::new(guard()), &()));
        body.low_water = 4096;
        let mut cold = slot.cold.lock();
        cold.exit = Some(ExitReason::Normal);
        cold.value = Some(Box::new(guard()));
        cold.joiners = vec![Joiner::Process(Pid::from_parts(3, 1), 5)];
        cold.handle = true;
        cold.finalized = true;
        cold.notified = true;
        for id in [9, 10] {
            let hook_guard = guard();
            cold.death_hooks.push((DeathHookId(id), Box::new(move |_, _, _| drop(hook_guard))));
        }
        cold.stop_reason = Some(ExitReason::Stopped);
        drop(cold);
        slot.stop.store(STOP_RAISED, Ordering::Relaxed);
        slot.worker.store(3, Ordering::Relaxed);
    }

    /// Whether the slot holds nothing but a vacant slot's contents.
    fn assert_vacant_contents(slot: &Slot) {
        // SAFETY: the test owns the slot; no process runs on it.
        let body = unsafe { &*slot.body.get() };
        assert!(body.stack.is_none() && body.entry.is_none() && body.value.is_none());
        assert!(body.cell.is_none());
        assert!(body.locals.is_empty());
        assert_eq!(body.low_water, usize::MAX);
        let cold = slot.cold.lock();
        assert!(cold.exit.is_none() && cold.value.is_none() && cold.stop_reason.is_none());
        assert!(cold.joiners.is_empty() && cold.death_hooks.is_empty());
        assert!(!cold.handle && !cold.finalized && !cold.notified);
        drop(cold);
        assert_eq!(slot.stop.load(Ordering::Relaxed), STOP_NONE);
        assert_eq!(slot.worker.load(Ordering::Relaxed), 0);
    }

    /// A reset slot holds no heap memory: the vectors of the cold state and
    /// the body are dropped, not just cleared (a reclaimed slot keeps no
    /// allocation of its last process).
    #[test]
    fn reset_frees_the_slots_heap() {
        let drops = Arc::new(AtomicUsize::new(0));
        let slot = Slot::new();
        fill(&slot, &drops);
        {
            let mut cold = slot.cold.lock();
            cold.joiners.reserve(64);
            cold.death_hooks.reserve(64);
            // SAFETY: the test owns the slot; no process runs on it.
            unsafe { (*slot.body.get()).locals.reserve(64) };
            // SAFETY: as above.
            unsafe { slot.reset(&mut cold) };
            assert_eq!(cold.joiners.capacity(), 0);
            assert_eq!(cold.death_hooks.capacity(), 0);
        }
        // SAFETY: as above.
        assert_eq!(unsafe { (*slot.body.get()).locals.capacity() }, 0);
    }

    #[test]
    fn a_new_slot_is_vacant_at_generation_one() {
        let slot = Slot::new();
        assert_eq!(slot.generation(), 1);
        assert_eq!(slot.state.snapshot().state(), State::Vacant);
        assert_vacant_contents(&slot);
    }

    #[test]
    fn reset_drops_what_a_process_left_exactly_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let slot = Slot::new();
        fill(&slot, &drops);
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        let mut cold = slot.cold.lock();
        // SAFETY: the test owns the slot; no process runs on it.
        unsafe { slot.reset(&mut cold) };
        drop(cold);
        assert_eq!(drops.load(Ordering::Relaxed), 8, "every guard dropped by reset");
        assert_vacant_contents(&slot);
        drop(slot);
        assert_eq!(drops.load(Ordering::Relaxed), 8, "nothing dropped twice");
    }

    #[test]
    fn a_dropped_slot_drops_what_it_holds_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let slot = Slot::new();
        fill(&slot, &drops);
        drop(slot);
        assert_eq!(drops.load(Ordering::Relaxed), 8);
    }

    /// A slot's whole cycle, as spawn, run, exit, finalize and reclaim
    /// drive it, many times over: the generation moves on by one per use,
    /// and a pid of an earlier use is refused by every transition.
    #[test]
    fn recycling_moves_the_generation_on() {
        let rounds: u32 = if cfg!(miri) { 20 } else { 1_000 };
        let drops = Arc::new(AtomicUsize::new(0));
        let slot = Slot::new();
        for round in 0..rounds {
            let generation = slot.generation();
            assert_eq!(generation, 1 + round);
            assert!(slot.state.claim(generation).is_ok());
            fill(&slot, &drops);
            assert!(slot.state.begin_run(generation).is_ok());
            slot.state.finish(generation);
            let mut cold = slot.cold.lock();
            // SAFETY: the "process" is Done; the test owns the slot.
            unsafe { slot.reset(&mut cold) };
            assert!(slot.state.reclaim(generation).is_ok());
            drop(cold);
            assert_vacant_contents(&slot);
            let stale = generation;
            assert!(slot.state.claim(stale).is_err(), "a stale pid cannot claim");
            assert!(slot.state.reclaim(stale).is_err(), "a stale pid cannot reclaim");
            assert!(!slot.state.snapshot().is_alive(stale));
        }
        assert_eq!(slot.generation(), 1 + rounds);
        assert_eq!(drops.load(Ordering::Relaxed), 8 * rounds as usize);
    }
}
