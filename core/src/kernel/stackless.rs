//! The kernel's side of stackless bodies (the handler actors of the layer
//! above): reserving a slot with no stack, ending it from its worker's
//! driver, looking it up, and the one worker plugin that runs them in
//! every pass.

use crate::kernel::atomic::Ordering;
use crate::kernel::error::SpawnError;
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::plugin::WorkerPlugin;
use crate::kernel::preempt::NoPreempt;
use crate::kernel::runtime::Shared;
use crate::kernel::slab::STOP_NONE;
use crate::kernel::state::{State, Unpark};
use alloc::boxed::Box;
use alloc::sync::Arc;
use core::any::Any;

impl Shared {
    /// Takes a slot for a stackless body on worker `worker` and returns
    /// its pid. The slot is `Parked` with no stack; it counts in `live`
    /// until it ends ([`Shared::end_stackless`], or a stop). The caller
    /// (the plugin) installs the body's cell on that worker's next pass.
    pub(crate) fn reserve_stackless(&self, worker: usize) -> Result<Pid, SpawnError> {
        if worker >= self.workers.len() {
            return Err(SpawnError::NoSuchWorker(worker));
        }
        let _np = NoPreempt::new();
        let index = self.take_slot()?;
        let slot = self.slot_at(index);
        let generation = slot.generation();
        slot.stackless.store(true, Ordering::Relaxed);
        slot.worker.store(worker, Ordering::Relaxed);
        // Release (inside the claim) publishes the body flag and the worker.
        let claimed = slot.state.claim_parked(generation);
        debug_assert!(claimed.is_ok(), "free-list slot {index} was not Vacant");
        Ok(Pid::from_parts(index, generation))
    }

    /// The cell of stackless slot `index`, where its worker's plugin keeps
    /// the body's state. Dereferencing the pointer is sound only on the
    /// driver of the slot's worker, outside any process, with no other
    /// reference to the cell live; the slot must hold a stackless body of
    /// a live generation (the cell is dropped when the slot is reclaimed).
    pub(crate) fn stackless_cell(&self, index: u32) -> Option<*mut Option<Box<dyn Any + Send>>> {
        let slot = self.slot(index)?;
        // SAFETY: only a raw pointer to the field is formed here; the
        // caller's obligations above govern its use.
        Some(unsafe { core::ptr::addr_of_mut!((*slot.body.get()).cell) })
    }

    /// Ends stackless body `pid` with `reason`, from its worker's driver
    /// outside [`WorkerPlugin::woken`]: `true` if it is now finalized;
    /// `false` if it is queued (a stop request got there first) — the
    /// worker will call `woken` for it, which should then end it.
    pub(crate) fn end_stackless(&self, pid: Pid, reason: ExitReason) -> bool {
        let Some(slot) = self.slot(pid.index()) else { return false };
        if slot.state.unpark(pid.generation()) != Unpark::Enqueue {
            return false;
        }
        // The wildcard wake made it Queued and gave us the right to it.
        let ran = slot.state.begin_run(pid.generation());
        debug_assert!(ran.is_ok(), "a stackless slot we just queued was taken");
        self.finish_stackless(pid, reason);
        true
    }

    /// Ends the `Running` stackless body `pid` with `reason` (refined by a
    /// pending stop's reason, as a process's `Stopped` is) and finalizes
    /// it. Called on its worker's driver.
    pub(crate) fn finish_stackless(&self, pid: Pid, reason: ExitReason) {
        let slot = self.slot_of(pid);
        // The cell is the plugin's: whatever it left is dropped off the
        // slot lock (a body's destructor may take locks).
        // SAFETY: the body is Running on the calling driver, which owns it.
        let cell = unsafe { (*slot.body.get()).cell.take() };
        drop(cell);
        {
            let mut cold = slot.cold.lock();
            let stop_reason = cold.stop_reason.take();
            cold.exit = Some(match reason {
                ExitReason::Stopped => stop_reason.unwrap_or(ExitReason::Stopped),
                reason => reason,
            });
            slot.state.finish(pid.generation());
        }
        self.finalize(pid.index(), pid.generation());
    }

    /// The reason a stop was requested of `pid` with, if one was and the
    /// pid is current: `Stopped` unless a link or an exit signal named
    /// another.
    pub(crate) fn stop_requested(&self, pid: Pid) -> Option<ExitReason> {
        let slot = self.slot(pid.index())?;
        if slot.stop.load(Ordering::Acquire) == STOP_NONE {
            return None;
        }
        let cold = slot.cold.lock();
        if slot.state.snapshot().generation() != pid.generation() {
            return None;
        }
        Some(cold.stop_reason.clone().unwrap_or(ExitReason::Stopped))
    }

    /// The worker of the live stackless body `pid`.
    pub(crate) fn stackless_worker(&self, pid: Pid) -> Option<usize> {
        let slot = self.slot(pid.index())?;
        // One snapshot: its Acquire pairs with the claim's Release, which
        // published the flag and the worker, both constant while live.
        let snap = slot.state.snapshot();
        if snap.generation() != pid.generation()
            || matches!(snap.state(), State::Vacant | State::Done)
            || !slot.stackless.load(Ordering::Relaxed)
        {
            return None;
        }
        Some(slot.worker.load(Ordering::Relaxed))
    }

    /// The pid of the live stackless body in slot `index`, if any.
    pub(crate) fn stackless_pid(&self, index: u32) -> Option<Pid> {
        let slot = self.slot(index)?;
        let pid = Pid::from_parts(index, slot.state.snapshot().generation());
        self.is_stackless(pid).then_some(pid)
    }

    /// Slots in the slab (live or not).
    pub(crate) fn slot_count(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Whether `pid` names a live stackless body.
    pub(crate) fn is_stackless(&self, pid: Pid) -> bool {
        let Some(slot) = self.slot(pid.index()) else { return false };
        // The snapshot's Acquire pairs with the claim's Release, which
        // published the flag; re-checked after reading it, so a reclaim
        // in between is not mistaken for the pid's body.
        self.is_alive(pid)
            && slot.stackless.load(Ordering::Relaxed)
            && slot.state.snapshot().generation() == pid.generation()
    }

    /// Installs the runtime's worker plugin, once, and returns the one
    /// installed: the first caller's `make` wins (a racing loser's value
    /// is dropped unused). `None` if the installed plugin is not a `T`.
    pub(crate) fn install_plugin<T: WorkerPlugin>(&self, make: impl FnOnce() -> T) -> Option<&T> {
        if self.plugin.load(Ordering::Acquire).is_null() {
            let plugin: Arc<dyn WorkerPlugin> = Arc::new(make());
            let boxed = Box::into_raw(Box::new(plugin));
            // Release publishes the box to readers that Acquire the pointer.
            let won = self.plugin.compare_exchange(
                core::ptr::null_mut(),
                boxed,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            if won.is_err() {
                // SAFETY: `boxed` came from `Box::into_raw` just above and
                // was never published.
                drop(unsafe { Box::from_raw(boxed) });
            }
        }
        self.plugin_as::<T>()
    }

    /// The installed plugin, if any.
    pub(crate) fn plugin(&self) -> Option<&Arc<dyn WorkerPlugin>> {
        // Acquire pairs with the Release of the install.
        let p = self.plugin.load(Ordering::Acquire);
        // SAFETY: a non-null pointer is a box published once by
        // `install_plugin` and freed only when the runtime drops.
        unsafe { p.as_ref() }
    }

    /// The installed plugin as a `T`, if it is one.
    pub(crate) fn plugin_as<T: WorkerPlugin>(&self) -> Option<&T> {
        let plugin: &dyn Any = &**self.plugin()?;
        plugin.downcast_ref::<T>()
    }
}
