//! The actors' share of each worker's pass: the kernel's worker plugin
//! ([`WorkerPlugin`] for [`ActorSystem`]) — fire due timers, drain the
//! lanes, run the worker extension, run each runnable actor up to its
//! budget, install this pass's spawns, deliver same-worker sends, publish
//! statistics — and the end of an actor a stop request queued.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::any::Any;

use crate::actor::cell::{take_erased, with_erased, TurnEnd};
use crate::actor::extension::WorkerCtx;
use crate::actor::route::{deliver_or_hold, end};
use crate::actor::system::{bump, shrink, ActorSystem, Env, Local};
use crate::kernel::atomic::Ordering;
use crate::kernel::current;
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::{Runtime, Shared};
use crate::kernel::stackless::{Driver, Lane, WorkerPlugin};
use smarm_arch::{Arch, Native};

/// One busy pass in this many is timed (and counts for this many).
const PASS_SAMPLE: u64 = 16;

/// Actors a pass may run beyond those runnable when its run step began:
/// the targets of its handlers' same-worker sends, each after the handler
/// that sent to it has returned. A message between two actors of one
/// worker then costs a run, not a whole pass, while the pass stays
/// bounded (processes, timers and ingress still come round).
const CHAINED_RUNS: usize = 64;

/// Delivers what was sent on this worker to its own actors and staged in
/// `pending_local`. Returns whether there was any.
fn deliver_pending_local(local: &Local, driver: &Driver<'_>) -> bool {
    // Looked at before it is taken: taking an empty list would drop its
    // capacity, and the next pass's sends would grow it again.
    if local.pending_local.borrow().is_empty() {
        return false;
    }
    let mut pending = core::mem::take(&mut *local.pending_local.borrow_mut());
    for envelope in pending.drain(..) {
        deliver_or_hold(envelope, local, driver);
    }
    // Keep the buffer's capacity for the next pass (unless a delivery
    // staged more meanwhile).
    let mut staged = local.pending_local.borrow_mut();
    if staged.is_empty() {
        core::mem::swap(&mut *staged, &mut pending);
    }
    true
}

/// Installs up to `budget` actors spawned on this worker from this
/// worker (by its processes or its handlers). Returns whether there was
/// any.
fn install_local_spawns(budget: usize, local: &Local, driver: &Driver<'_>) -> bool {
    let mut n = 0;
    while n < budget {
        let next = local.local_spawns.borrow_mut().pop_front();
        let Some(envelope) = next else { break };
        // An install is never held; it releases its target's mail.
        deliver_or_hold(envelope, local, driver);
        n += 1;
    }
    n > 0
}

/// Drains up to `budget` envelopes of `lane` into their targets. Returns
/// how many it took.
fn drain(lane: Lane, budget: usize, local: &Local, driver: &Driver<'_>) -> usize {
    let mut n = 0;
    while n < budget {
        let Some(envelope) = driver.pop(lane) else { break };
        n += 1;
        deliver_or_hold(envelope, local, driver);
    }
    n
}

impl ActorSystem {
    /// Runs one actor up to the message budget; ends it if it stopped or
    /// panicked.
    fn run_one(&self, env: &Env<'_>, pid: Pid) {
        let budget = match env.shared.config.actor_message_budget {
            0 => usize::MAX,
            n => n,
        };
        let Ok(turn) = with_erased(env.driver, pid, |cell| cell.turn(env, budget)) else { return };
        let local = env.local;
        bump(&local.counters.handled, turn.taken);
        shrink(&local.counters.depth, turn.taken);
        if !turn.ended {
            return;
        }
        match with_erased(env.driver, pid, |cell| cell.take_end()).ok().flatten() {
            Some(TurnEnd::Panicked(message)) => {
                bump(&local.counters.panics, 1);
                end(env, pid, ExitReason::Panicked(message), false);
            }
            Some(TurnEnd::Stopped(reason)) => end(env, pid, reason, true),
            None => debug_assert!(false, "a turn that ended its actor left no end"),
        }
    }

    /// Pass step 2: the worker's extension.
    fn extension_step(&self, local: &Local) -> bool {
        if !self.has_extension.load(Ordering::Acquire) {
            return false;
        }
        if local.extension.borrow().is_none() {
            let made = self.extension().and_then(|e| e.create_worker_extension(local.worker));
            let Some(made) = made else { return false };
            *local.extension.borrow_mut() = Some(made);
        }
        // Taken out while it runs: its `on_tick` may send, which touches
        // this worker's state.
        let Some(mut extension) = local.extension.borrow_mut().take() else { return false };
        let mut ctx = WorkerCtx::new(local.worker, &local.runtime);
        let did = extension.on_tick(&mut ctx);
        let pending = extension.has_pending_work();
        *local.extension.borrow_mut() = Some(extension);
        did || pending
    }

    /// Pass step 0: fires the timers due now, each message sent as a send
    /// from this worker (so it reaches a local target at the end of this
    /// pass). Returns whether any fired.
    fn timer_step(&self, local: &Local, driver: &Driver<'_>) -> bool {
        if local.timers.borrow().is_empty() {
            return false;
        }
        let now = driver.now();
        let mut fired = false;
        loop {
            // Each timer is taken in its own borrow of the table, which
            // ends before its message is sent.
            let due = local.timers.borrow_mut().pop_due(now);
            let Some(mut due) = due else { break };
            fired = true;
            if !due.fire(driver.shared()) {
                bump(&local.counters.dropped, 1);
            }
            let spent = local.timers.borrow_mut().rearm(due, now);
            drop(spent);
        }
        fired
    }

    /// Gives the kernel the earliest timer deadline of this worker, if it
    /// changed, so that the host wakes the worker for it.
    fn publish_timer_deadline(&self, local: &Local, driver: &Driver<'_>) {
        let next = local.timers.borrow().next_deadline();
        if local.timer_deadline.replace(next) != next {
            driver.set_timer_deadline(next);
        }
    }

    fn publish(&self, local: &Local) {
        let s = &self.stats[local.worker];
        let c = &local.counters;
        c.unpublished.set(false);
        let depth = c.depth.get();
        s.actors.store(c.actors.get(), Ordering::Relaxed);
        s.mailbox_depth.store(depth, Ordering::Relaxed);
        s.handled.store(c.handled.get(), Ordering::Relaxed);
        s.local_sends.store(c.local_sends.get(), Ordering::Relaxed);
        s.cross_sends.store(c.cross_sends.get(), Ordering::Relaxed);
        s.inbox_sends.store(c.inbox_sends.get(), Ordering::Relaxed);
        s.restarts.store(c.restarts.get(), Ordering::Relaxed);
        s.pass_ticks.store(c.pass_ticks.get(), Ordering::Relaxed);
        s.transfers_in.store(c.transfers_in.get(), Ordering::Relaxed);
        s.type_mismatches.store(c.type_mismatches.get(), Ordering::Relaxed);
        s.panics.store(c.panics.get(), Ordering::Relaxed);
        s.dropped.store(c.dropped.get(), Ordering::Relaxed);
        s.stopped.store(c.stopped.get(), Ordering::Relaxed);
        s.timers.store(local.timers.borrow().len() as u64, Ordering::Relaxed);
    }
}

impl WorkerPlugin for ActorSystem {
    fn worker_state(&self, shared: &Arc<Shared>, worker: usize) -> Box<dyn Any> {
        Box::new(Local::new(worker, Runtime { shared: shared.clone() }, self.homes.clone()))
    }

    fn pass(&self, driver: &Driver<'_>, budget: usize) -> bool {
        let Some(local) = Local::of(driver) else { return false };
        // 0. Timers due now: their messages join this pass's sends.
        let fired = self.timer_step(local, driver);
        if !fired
            && driver.is_empty(Lane::Install)
            && driver.is_empty(Lane::Mail)
            && local.runnable.borrow().is_empty()
            && local.local_spawns.borrow().is_empty()
            && local.pending_local.borrow().is_empty()
            && !self.has_extension.load(Ordering::Relaxed)
        {
            // Nothing to do (the clock was read only if timers are
            // pending). Envelope blocks of other workers delivered here go
            // home, and those that came home here return to the cache (the
            // excess to the allocator once the worker has been idle a
            // while). Statistics go out if the last
            // busy passes (or an admin command) left some unpublished.
            local.cache.trim();
            if local.counters.unpublished.get() {
                self.publish(local);
            }
            // An admin stop or a stop request may have cancelled timers.
            self.publish_timer_deadline(local, driver);
            return false;
        }
        let env = Env::new(local, driver);
        let mut did = fired;
        // Pass time is sampled: every 16th busy pass is timed and counts
        // for 16 (reading the counter costs tens of nanoseconds on some
        // virtual machines, a large share of a short pass).
        let passes = local.counters.busy_passes.get();
        local.counters.busy_passes.set(passes.wrapping_add(1));
        let began = (passes % PASS_SAMPLE == 0).then(<Native as Arch>::timestamp);

        // 1. Ingress: installs (each releasing the mail held for it) —
        //    from other workers, then those this worker's processes made
        //    since the last pass, so their mail, staged just after, finds
        //    them installed rather than waiting in `held` — then
        //    transfers; each drain bounded by the ingress budget. (Admin
        //    commands ran at the start of the pass, in the kernel's admin
        //    step.) What this worker's processes sent to its actors since
        //    the last pass goes in before the mail from other workers: a
        //    process that sends to a local actor and then to a remote one,
        //    whose handler writes back to the first, must see its message
        //    arrive first (happened-before holds along such chains).
        did |= drain(Lane::Install, budget, local, driver) > 0;
        did |= install_local_spawns(budget, local, driver);
        did |= deliver_pending_local(local, driver);
        let transfers = drain(Lane::Mail, budget, local, driver);
        bump(&local.counters.transfers_in, transfers as u64);
        did |= transfers > 0;

        // 2. The worker's extension.
        did |= self.extension_step(local);

        // 3. Each runnable actor, up to the message budget; then, up to
        //    `CHAINED_RUNS` more, those the handlers' sends made runnable
        //    (each after its sender's handler returned: never recursive).
        //    An actor that spends its budget goes to `later`: once a pass.
        let runnable = local.runnable.borrow().len();
        for _ in 0..runnable + CHAINED_RUNS {
            let next = local.runnable.borrow_mut().pop_front();
            let Some(pid) = next else { break };
            self.run_one(&env, pid);
            did = true;
        }
        {
            let mut later = local.later.borrow_mut();
            if !later.is_empty() {
                local.runnable.borrow_mut().extend(later.drain(..));
            }
        }

        // 4. Children spawned by this pass's handlers exist before the
        //    messages staged for them are delivered.
        did |= install_local_spawns(budget, local, driver);

        // 5. Same-worker sends that were staged, eligible from the next pass.
        did |= deliver_pending_local(local, driver);

        // 6. Envelope blocks of other workers delivered in this pass go
        //    home (those that filled a chain went already).
        local.cache.flush();

        // 7. Statistics: every 16th busy pass, and on the first idle one.
        if let Some(began) = began {
            let spent = <Native as Arch>::timestamp().wrapping_sub(began);
            bump(&local.counters.pass_ticks, spent.saturating_mul(PASS_SAMPLE));
        }
        if passes % PASS_SAMPLE == 0 {
            self.publish(local);
        } else {
            local.counters.unpublished.set(true);
        }
        self.publish_timer_deadline(local, driver);
        did || !local.runnable.borrow().is_empty()
            || !local.local_spawns.borrow().is_empty()
            || !local.pending_local.borrow().is_empty()
    }

    fn woken(&self, driver: &Driver<'_>, pid: Pid) -> Option<ExitReason> {
        let local = Local::of(driver)?;
        // An end decided here changes the counters outside the busy part
        // of a pass: the plugin's share of this same pass, idle or not,
        // publishes them.
        local.counters.unpublished.set(true);
        {
            let mut ending = local.ending.borrow_mut();
            if let Some(i) = ending.iter().position(|(p, _)| *p == pid) {
                return Some(ending.swap_remove(i).1);
            }
        }
        // A stop request.
        let shared = driver.shared();
        let reason = shared.stop_requested(pid).unwrap_or(ExitReason::Stopped);
        if let Some(extension) = self.extension() {
            extension.on_actor_death(pid, &reason);
        }
        let env = Env::new(local, driver);
        if let Some(mut cell) = take_erased(driver, pid) {
            let dropped = cell.clear();
            bump(&local.counters.dropped, dropped as u64);
            shrink(&local.counters.depth, dropped as u64);
            local.counters.actors.set(local.counters.actors.get().saturating_sub(1));
            bump(&local.counters.stopped, 1);
            let mut cell = Some(cell);
            let panic = current::as_handler(pid, || {
                (shared.hooks.catch_panic)(&mut || {
                    if let Some(mut cell) = cell.take() {
                        cell.stop(&env, &reason);
                    }
                })
            });
            // Its timers go after `on_stop`, which may have set some.
            local.cancel_timers(pid);
            if let Some(message) = panic {
                bump(&local.counters.panics, 1);
                return Some(ExitReason::Panicked(message));
            }
        }
        Some(reason)
    }
}
