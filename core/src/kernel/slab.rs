//! The slab: one slot per process, addressed by `Pid = (index, generation)`.
//!
//! A slot holds the process's state word, its owning worker, its stop
//! flag, the body only its worker touches (context, stack, entry, locals)
//! and the cold state under a leaf lock (exit reason, joiners, handle and
//! finalize flags, death hooks).
//!
//! Invariant: a slot is (re)initialised by exactly one function,
//! `Slot::reset`, which every path that recycles a slot calls; a new field
//! added to `SlotBody` or `Cold` is reset by construction.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::any::Any;
use core::cell::UnsafeCell;

use smarm_arch::Context;
use smarm_platform::Stack;

use crate::kernel::atomic::{AtomicU8, AtomicUsize, Ordering};
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::spin::RuntimeMutex;
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
        }
    }
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
    /// `(pid, epoch)` of processes parked in `join` on this one.
    pub(crate) joiners: Vec<(Pid, u32)>,
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
            body: UnsafeCell::new(SlotBody::default()),
            cold: RuntimeMutex::leaf(Cold::default()),
        }
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
        self.worker.store(0, Ordering::Relaxed);
    }

    pub(crate) fn generation(&self) -> u32 {
        self.state.snapshot().generation()
    }
}
