//! How a process ends on the runtime's side: the finalize sequence (exit
//! reason, stack back to the pool, death hooks, joiners woken), the
//! reclaiming of its slot, and the death hooks that monitors, links and
//! handles register.
//!
//! Finalize order: exit reason set and `Done` under the slot lock → stack
//! recycled → death hooks → joiners woken → slot reclaimed only when no
//! handle is outstanding.

use alloc::vec::Vec;

use smarm_platform::Stack;

use crate::kernel::atomic::Ordering;
use crate::kernel::current::Here;
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::Shared;
use crate::kernel::slab::{Cold, DeathHook, DeathHookId, Joiner, Slot};
use crate::kernel::spin::RuntimeGuard;
use crate::kernel::state::State;
use crate::kernel::trace::{self, TraceEvent};

impl Shared {
    /// Wakes everyone waiting in `join` on a process that is now ended.
    fn wake_joiners(&self, joiners: Vec<Joiner>) {
        for joiner in joiners {
            match joiner {
                Joiner::Process(pid, epoch) => {
                    self.unpark_at(pid, epoch);
                }
                Joiner::Thread(wait) => {
                    wait.wake();
                }
                Joiner::Task(waker) => waker.wake(),
            }
        }
    }

    /// Runs the finalize sequence for a process that has switched out for
    /// the last time. Called by its worker's driver.
    pub(crate) fn finalize(&self, index: u32, generation: u32) {
        // The driver's worker record, looked up once for every lock below.
        let here = Here::get();
        let slot = self.slot_at(index);
        let pid = Pid::from_parts(index, generation);
        // SAFETY: the process is Done and will never run again; its worker
        // (the caller) owns the body.
        let (stack, low_water) = unsafe {
            let body = &mut *slot.body.get();
            (body.stack.take(), body.low_water)
        };
        if let Some(stack) = stack {
            self.trim_if_deep(&stack, low_water);
            self.recycle_stack(stack, here);
        }
        let (reason, hooks) = {
            let mut cold = slot.cold.lock_in(here);
            if cold.death_hooks.is_empty() {
                // Nobody to notify (the common case): everything the three
                // steps below do under the lock happens in this one section.
                cold.notified = true;
                cold.finalized = true;
                let joiners = core::mem::take(&mut cold.joiners);
                let reclaim = !cold.handle;
                let traced = trace::enabled().then(|| cold.exit.clone().unwrap_or(ExitReason::Normal));
                drop(cold);
                if let Some(reason) = &traced {
                    trace::emit(|| TraceEvent::Exit { pid, reason });
                }
                // Before the joiners wake: `live` is exact when `join`
                // returns.
                self.live.fetch_sub(1, Ordering::AcqRel);
                self.wake_joiners(joiners);
                if reclaim {
                    self.reclaim_in(index, generation, here);
                }
                return;
            }
            // The exit reason was set (under this lock) by the exiting
            // process; from then on no death hook can be added.
            let reason = cold.exit.clone().unwrap_or(ExitReason::Normal);
            (reason, core::mem::take(&mut cold.death_hooks))
        };
        trace::emit(|| TraceEvent::Exit { pid, reason: &reason });
        for (_, hook) in hooks {
            hook(self, pid, &reason);
        }
        // Notifications are out: joiners may go. Those that arrive from now
        // on return at once; those that came before are taken here.
        // Before anyone can see the process as ended (`notified`): `live`
        // is exact when `join` returns.
        self.live.fetch_sub(1, Ordering::AcqRel);
        let joiners = {
            let mut cold = slot.cold.lock_in(here);
            cold.notified = true;
            core::mem::take(&mut cold.joiners)
        };
        self.wake_joiners(joiners);
        // Last: mark finalized and decide, in the same critical section as
        // the handle's drop decides, which of the two reclaims.
        let reclaim = {
            let mut cold = slot.cold.lock_in(here);
            cold.finalized = true;
            !cold.handle
        };
        if reclaim {
            self.reclaim_in(index, generation, here);
        }
    }

    /// Releases the deep pages of a recycled stack when the process was
    /// seen below the high-water mark (`stack_keep_resident` from the top)
    /// at a switch out. Shallow processes — nearly all — cost no syscall.
    /// Depth reached and left between two switches is not seen; such a
    /// stack keeps its pages until a later process on it is seen deep.
    fn trim_if_deep(&self, stack: &Stack, low_water: usize) {
        let mark = (stack.top() as usize).saturating_sub(self.config.stack_keep_resident);
        if low_water < mark {
            self.platform.trim_stack(stack, self.config.stack_keep_resident);
        }
    }

    /// Returns a finalized slot with no outstanding handle to the free
    /// list, from the worker record `here` the caller looked up.
    pub(crate) fn reclaim_in(&self, index: u32, generation: u32, here: Here) {
        let slot = self.slot_at(index);
        self.reclaim_locked(slot, slot.cold.lock_in(here), index, generation, here);
    }

    /// [`reclaim_in`](Self::reclaim_in) for the caller that holds the
    /// slot's lock already (`cold`, the guard of `slot`, which is at
    /// `index`) and has seen it finalized with no handle left; the lock is
    /// released here.
    pub(crate) fn reclaim_locked(
        &self,
        slot: &Slot,
        mut cold: RuntimeGuard<'_, Cold>,
        index: u32,
        generation: u32,
        here: Here,
    ) {
        debug_assert!(cold.finalized && !cold.handle);
        // A value nobody joined is dropped after the lock (its destructor
        // may take locks).
        let unjoined = cold.value.take();
        // SAFETY: finalized and unhandled: no one else touches the body.
        unsafe { slot.reset(&mut cold) };
        // The generation moves on under the slot lock (see request_stop).
        let reclaimed = slot.state.reclaim(generation);
        debug_assert!(reclaimed.is_ok(), "reclaim of a slot that is not Done({generation})");
        drop(cold);
        drop(unjoined);
        self.free.lock_in(here).push(index);
    }

    /// Registers a death hook on a live process and returns its id; `Err`
    /// with the hook back if the process has already died (or the pid is
    /// stale).
    pub(crate) fn on_death(&self, pid: Pid, hook: DeathHook) -> Result<DeathHookId, DeathHook> {
        let Some(slot) = self.slot(pid.index()) else { return Err(hook) };
        let id = DeathHookId(self.next_hook_id());
        let mut cold = slot.cold.lock();
        let snap = slot.state.snapshot();
        if snap.generation() != pid.generation() || snap.state() == State::Vacant || cold.exit.is_some() {
            return Err(hook);
        }
        cold.death_hooks.push((id, hook));
        Ok(id)
    }

    /// Removes death hook `id` from `pid`; `true` if it was removed before
    /// it ran (it never will), `false` if it has run, is running, or was
    /// never there.
    pub(crate) fn remove_death_hook(&self, pid: Pid, id: DeathHookId) -> bool {
        let Some(slot) = self.slot(pid.index()) else { return false };
        let removed = {
            let mut cold = slot.cold.lock();
            if slot.state.snapshot().generation() != pid.generation() {
                return false;
            }
            let position = cold.death_hooks.iter().position(|(hook, _)| *hook == id);
            // `remove`, not `swap_remove`: hooks run in registration order.
            position.map(|i| cold.death_hooks.remove(i).1)
        };
        // Dropped outside the slot lock: a hook's captures may take locks.
        removed.is_some()
    }

    /// Whether `pid` names a process that has not been finalized.
    pub(crate) fn is_alive(&self, pid: Pid) -> bool {
        let Some(slot) = self.slot(pid.index()) else { return false };
        let snap = slot.state.snapshot();
        snap.generation() == pid.generation() && !matches!(snap.state(), State::Vacant | State::Done)
    }
}
