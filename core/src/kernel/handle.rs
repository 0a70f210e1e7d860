//! The public [`Runtime`] handle: spawning through it, stops, exits and
//! what it reports of the running system.

use alloc::sync::Arc;

use smarm_platform::{ParkToken, Platform};

use crate::kernel::atomic::Ordering;
use crate::kernel::config::Config;
use crate::kernel::error::{NoProc, NoSuchDriver, NoSuchWorker, SpawnError};
use crate::kernel::join::JoinHandle;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::{Admin, Runtime};
use crate::kernel::slab::Slot;
use crate::kernel::stackless::{DriverEnvelope, Lane};

impl Runtime {
    /// Spawns `f` as a process on the next worker, round-robin. Its return
    /// value is what [`JoinHandle::join`] gives back.
    pub fn spawn<T, F>(&self, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let worker = self.shared.next_worker();
        JoinHandle::spawn(&self.shared, worker, f)
    }

    /// Spawns `f` as a process on worker `worker`.
    pub fn spawn_on<T, F>(&self, worker: usize, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        JoinHandle::spawn(&self.shared, worker, f)
    }

    /// Asks `pid` to stop: it unwinds at its next observation point (a
    /// yield, `check!()`, or the wake-up of any park) and ends as
    /// `Stopped`. The only wildcard wake.
    pub fn request_stop(&self, pid: Pid) -> Result<(), NoProc> {
        self.shared.request_stop(pid)
    }

    /// Whether `pid` is alive (not yet finalized).
    pub fn is_alive(&self, pid: Pid) -> bool {
        self.shared.is_alive(pid)
    }

    /// Processes spawned and not yet finalized. Exact as seen by a process
    /// whose `join` has just returned: the joined process no longer counts.
    pub fn live(&self) -> usize {
        self.shared.live()
    }

    /// Work outside any worker that holds the runtime open (io in flight).
    pub fn external(&self) -> usize {
        self.shared.external()
    }

    /// Marks one piece of external work started (io). Pair with
    /// [`Runtime::external_done`].
    pub fn external_begin(&self) {
        self.shared.external.fetch_add(1, Ordering::AcqRel);
    }

    /// Marks one piece of external work finished.
    pub fn external_done(&self) {
        self.shared.external.fetch_sub(1, Ordering::AcqRel);
    }

    /// Refuses every spawn from now on (`SpawnError::Closed`), for a host
    /// that has finished with the runtime. A spawn that raced with the call
    /// either was refused or counts in [`live`](Runtime::live) when this
    /// returns, so a host that closes, then waits until the runtime is
    /// finished, leaves no process behind. Irreversible.
    pub fn close(&self) {
        let _free = self.shared.free.lock();
        self.shared.closed.store(true, Ordering::Release);
    }

    /// Whether [`close`](Runtime::close) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Whether the runtime has nothing left to do: no live process and no
    /// external work.
    pub fn is_finished(&self) -> bool {
        self.shared.live() == 0 && self.shared.external() == 0
    }

    /// Number of workers.
    pub fn worker_count(&self) -> usize {
        self.shared.workers.len()
    }

    /// The configuration the runtime was built with.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The platform the runtime runs on.
    pub fn platform(&self) -> &Arc<dyn Platform> {
        &self.shared.platform
    }

    /// `Ok` if the runtime has worker `worker`.
    pub(crate) fn check_worker(&self, worker: usize) -> Result<(), NoSuchWorker> {
        match worker < self.shared.workers.len() {
            true => Ok(()),
            false => Err(NoSuchWorker(worker)),
        }
    }

    /// The park token worker `worker`'s driver sleeps on (the token of
    /// [`driver_of`](Self::driver_of)`(worker)`).
    pub fn park_token(&self, worker: usize) -> Result<&ParkToken, NoSuchWorker> {
        self.check_worker(worker)?;
        Ok(&self.shared.tokens[self.shared.token_of(worker)])
    }

    /// How many drivers (park tokens) the runtime was built for: the
    /// [`Drivers`](crate::Drivers) layout's count.
    pub fn driver_count(&self) -> usize {
        self.shared.tokens.len()
    }

    /// The driver that drives worker `worker` now: the one its wakes
    /// signal. Set by the [`Drivers`](crate::Drivers) layout at build time
    /// and moved by [`Worker::move_to_driver`](crate::Worker::move_to_driver).
    pub fn driver_of(&self, worker: usize) -> Result<usize, NoSuchWorker> {
        self.check_worker(worker)?;
        Ok(self.shared.token_of(worker))
    }

    /// Ticks of the timestamp counter (`Arch::timestamp`) in `duration`,
    /// from the runtime's calibration of the counter: for a host that
    /// times its drivers with the counter rather than the clock.
    pub fn timestamp_ticks(&self, duration: core::time::Duration) -> u64 {
        self.shared.nanos_to_ticks(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX))
    }

    /// The park token driver `driver` sleeps on.
    pub fn driver_token(&self, driver: usize) -> Result<&ParkToken, NoSuchDriver> {
        self.shared.tokens.get(driver).map(|token| &token.0).ok_or(NoSuchDriver(driver))
    }

    /// [`watch_ingress`](Self::watch_ingress) by driver: driver `driver`
    /// is awake and looks at the ingress of every worker it drives before
    /// it sleeps. For a host whose drivers may hold no worker for a while
    /// (see [`Worker::move_to_driver`](crate::Worker::move_to_driver)).
    pub fn watch_driver(&self, driver: usize) -> Result<(), NoSuchDriver> {
        self.check_driver(driver)?;
        self.shared.watch(driver);
        Ok(())
    }

    /// [`unwatch_ingress`](Self::unwatch_ingress) by driver: called before
    /// driver `driver` sleeps; it then looks at its workers' ingress (and
    /// at anything else it was [notified](Self::notify_driver) of) once
    /// more, and sleeps only if nothing is there.
    pub fn unwatch_driver(&self, driver: usize) -> Result<(), NoSuchDriver> {
        self.check_driver(driver)?;
        self.shared.unwatch(driver);
        Ok(())
    }

    /// Signals driver `driver` after publishing something it looks at
    /// before it sleeps, as a wake does for a worker's queues: nothing if
    /// the driver watches (it will look), else its park token. A host uses
    /// it to hand a worker to a driver: publish the worker where that
    /// driver looks, then call this.
    pub fn notify_driver(&self, driver: usize) -> Result<(), NoSuchDriver> {
        self.check_driver(driver)?;
        self.shared.notify_driver(driver);
        Ok(())
    }

    fn check_driver(&self, driver: usize) -> Result<(), NoSuchDriver> {
        match driver < self.shared.tokens.len() {
            true => Ok(()),
            false => Err(NoSuchDriver(driver)),
        }
    }

    /// Marks the driver of worker `worker` (the thread that sleeps on its
    /// [`park_token`](Self::park_token)) as awake and watching: until
    /// [`unwatch_ingress`](Self::unwatch_ingress), wakes, spawns and
    /// handler-actor mail pushed into the workers on that token skip the
    /// token, and the driver promises to unwatch before it sleeps. A
    /// spinning driver then notices work through its workers'
    /// [`Worker::has_ingress`](crate::Worker::has_ingress) instead of its
    /// token, and no pusher writes the token's cache line.
    ///
    /// Optional: a driver that never watches is signalled on its token for
    /// every push, as before.
    ///
    /// ```
    /// # use smarm_core::{Runtime, Worker};
    /// # fn driver(runtime: &Runtime, worker: &mut Worker) -> Result<(), smarm_core::NoSuchWorker> {
    /// let id = worker.id();
    /// runtime.watch_ingress(id)?;
    /// while worker.try_tick() || worker.has_ingress() {}
    /// runtime.unwatch_ingress(id)?;
    /// if !worker.has_ingress() {
    ///     // Safe to sleep on `park_token(id)`: any later push signals it.
    /// }
    /// runtime.watch_ingress(id)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn watch_ingress(&self, worker: usize) -> Result<(), NoSuchWorker> {
        self.check_worker(worker)?;
        self.shared.watch(self.shared.token_of(worker));
        Ok(())
    }

    /// Ends [`watch_ingress`](Self::watch_ingress) for the driver of worker
    /// `worker`, before it sleeps on its park token: from here on pushes
    /// signal the token. A push made while it watched did not: the driver
    /// must look at [`Worker::has_ingress`](crate::Worker::has_ingress) of
    /// each of its workers after this call (which fences, so every push
    /// that finished before it is seen) and run a pass instead of sleeping
    /// if one has some.
    pub fn unwatch_ingress(&self, worker: usize) -> Result<(), NoSuchWorker> {
        self.check_worker(worker)?;
        self.shared.unwatch(self.shared.token_of(worker));
        Ok(())
    }

    /// Statistics of worker `worker`'s processes, as of its last completed
    /// pass.
    pub fn stats(&self, worker: usize) -> Result<crate::kernel::worker::StatsSnapshot, NoSuchWorker> {
        let ingress = self.shared.workers.get(worker).ok_or(NoSuchWorker(worker))?;
        Ok(ingress.stats.snapshot())
    }

    /// Sends an administrative command to a worker, run at the start of
    /// its next pass.
    pub fn admin(&self, worker: usize, command: Admin) -> Result<(), NoSuchWorker> {
        self.check_worker(worker)?;
        let envelope = DriverEnvelope::new(Pid::from_parts(0, 0), command);
        self.shared.push_stackless(worker, Lane::Admin, envelope);
        Ok(())
    }

    /// Requests a stop of every live process on every worker.
    pub fn stop_all(&self) {
        for worker in 0..self.worker_count() {
            // Every index below the count is a worker.
            let _ = self.admin(worker, Admin::StopAll);
        }
    }

    /// Slots that can still be taken before a spawn is
    /// `SpawnError::Full`: [`max_processes`](Runtime::max_processes) less the
    /// processes whose slots are in use (for tests and diagnostics). Equal
    /// to `max_processes()` once every process is gone and every handle
    /// dropped.
    pub fn free_slots(&self) -> usize {
        self.shared.free_slots()
    }

    /// Slots the slab has made so far: the most in use at once, since the
    /// runtime was built. Their segments are kept (reclaimed slots are
    /// reused) until the runtime is dropped; see [`slab_bytes`](Runtime::slab_bytes).
    pub fn slab_len(&self) -> usize {
        self.shared.slots.len()
    }

    /// Bytes of address space the slab's segments take (allocated room,
    /// used or not; pages never touched are not resident). Kept until the
    /// runtime is dropped.
    pub fn slab_bytes(&self) -> usize {
        self.shared.slots.allocated_len() * core::mem::size_of::<Slot>()
    }

    /// Stacks waiting in the pool (for tests and diagnostics).
    pub fn pooled_stacks(&self) -> usize {
        self.shared.pooled_stacks()
    }

    /// Pooled stacks still holding resident pages (for tests and
    /// diagnostics); the others were given back to the OS (see the pool's
    /// policy on `Config::stack_pool_max`).
    ///
    /// ```
    /// # use smarm_core as smarm;
    /// fn report(runtime: &smarm::Runtime) {
    ///     println!("{} of {} idle stacks resident", runtime.warm_stacks(), runtime.pooled_stacks());
    /// }
    /// ```
    pub fn warm_stacks(&self) -> usize {
        self.shared.warm_stacks()
    }

    /// The most processes alive at once, handler actors included:
    /// `Config::max_processes` when set, else
    /// [`MAX_PROCESSES`](crate::kernel::config::MAX_PROCESSES), the pid index
    /// space.
    pub fn max_processes(&self) -> usize {
        self.shared.limit
    }

    /// The old name of [`max_processes`](Self::max_processes).
    #[deprecated(note = "renamed to max_processes: it counts processes and handler actors alike")]
    pub fn max_actors(&self) -> usize {
        self.max_processes()
    }
}

impl Runtime {
    /// A report naming every parked process and idle handler actor, if the
    /// runtime is deadlocked: nothing is running and nothing can wake
    /// anyone (the rule is in [`deadlock`](crate::kernel::deadlock)'s
    /// docs). `None` when it may still move, or when the platform cannot
    /// count the program's threads. For hosts, at the point where every
    /// driver would otherwise sleep with no deadline.
    ///
    /// The host vouches for its part of the rule:
    /// - `own_threads`: the program's threads it accounts for — its
    ///   drivers, and a thread blocked in its wait for this runtime;
    /// - `drivers`: a look at its drivers, called before and after the
    ///   scan: `None` if a driver is awake, has a timer or io to wait for,
    ///   or has a wake pending on its token; otherwise a value that
    ///   changes whenever any driver wakes (so two equal looks mean none
    ///   woke in between).
    ///
    /// Every process is read once, so the cost is linear in the slab: a
    /// host calls it only when its drivers are about to sleep for ever.
    pub fn find_deadlock(
        &self,
        own_threads: usize,
        drivers: &mut dyn FnMut() -> Option<u64>,
    ) -> Option<crate::kernel::deadlock::DeadlockReport> {
        use crate::kernel::deadlock::{self, DeadlockReport, IdleActor, ParkedProcess};
        use crate::kernel::state::State;

        let shared = &self.shared;
        let threads_before = deadlock::thread_events();
        let count_before = shared.platform.threads()?;
        if own_threads.checked_add(threads_before.0) != Some(count_before) {
            // A thread that is neither ours nor asleep in a wait may act.
            return None;
        }
        let drivers_before = drivers()?;
        if shared.external() != 0 || shared.live() == 0 {
            return None;
        }
        let mut report = DeadlockReport::default();
        for index in 0..shared.slots.len() as u32 {
            let Some(slot) = shared.slot(index) else { break };
            // Acquire: the process's wait record, stored before its park,
            // is visible once its parked word is.
            let snap = slot.state.snapshot();
            let pid = Pid::from_parts(index, snap.generation());
            match snap.state() {
                State::Vacant | State::Done => {}
                State::Parked if slot.stackless.load(Ordering::Relaxed) => {
                    report.actors.push(IdleActor { pid, name: None });
                }
                State::Parked => {
                    let (kind, location) = slot.wait_site();
                    report.processes.push(ParkedProcess { pid, kind, location, name: None });
                }
                // Ready, running, or woken and in flight.
                State::Queued | State::Running | State::RunningNotified => return None,
            }
        }
        let settled = drivers() == Some(drivers_before)
            && shared.external() == 0
            && deadlock::thread_events() == threads_before
            && shared.platform.threads() == Some(count_before);
        let anyone = !(report.processes.is_empty() && report.actors.is_empty());
        (settled && anyone).then_some(report)
    }
}
