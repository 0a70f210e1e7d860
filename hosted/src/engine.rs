//! The Engine: one OS thread per worker, each the sole owner of its
//! [`Worker`] and calling [`Worker::try_tick`] — no runtime lock and no
//! shared worker borrow on the hot path (worker spec §3).
//!
//! # Idle policy
//!
//! A driver whose pass did no work first *spins*: it watches its park
//! token's state word — the word `Platform::unpark` writes whenever
//! anything is pushed into the worker's ingress — for `spin_budget_cycles`
//! ticks of the timestamp counter, with at most `max_spinners` drivers
//! spinning at once (one `n_spinning` atomic). If the word turns `NOTIFIED`
//! it takes the wake and runs a pass at once: the pusher paid one atomic
//! swap and no system call, because only a driver that has announced a
//! sleep (`PARKED`) is woken with `FUTEX_WAKE`. Every [`YIELD_EVERY`]
//! spin hints the spinner calls `sched_yield`: on a machine with more
//! runnable threads than cores, the thread that would wake it may be
//! queued behind it on its core, and without the yield the wake would
//! arrive only when the budget runs out (measured: the handoff then costs
//! the whole budget). When the budget runs out —
//! or no spinner seat is free, or the budget is 0 — the driver parks on the
//! platform until its next timer deadline or a wake.
//!
//! No wake is lost: a push is always ring-then-unpark; a pass drains the
//! rings after the driver last consumed the token, and a wake that lands
//! after that stays in the token (`NOTIFIED`) until the spinner sees it or
//! `park` consumes it and returns at once.
//!
//! # Shutdown
//!
//! The runtime is finished when no process is live and no external work
//! (io) is outstanding; pending timers of dead processes do not count. A
//! driver that finds nothing to do checks that (two atomic loads) and, if
//! so, wakes the thread waiting in [`Engine::block_on`] / [`Engine::wait`],
//! which sets the shutdown flag, wakes every driver and joins the threads.
#![deny(unsafe_code)]

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use smarm_arch::{Arch, Native};
use smarm_core::{Config, Drivers, Runtime, RuntimeParts, Worker};
use smarm_platform::linux::{EMPTY, NOTIFIED};
use smarm_platform::{ParkToken, Platform};

use crate::context::{self, HostContext, DEFAULT_IO_THREADS};
use crate::RunError;
use smarm_platform::linux::LinuxPlatform;

/// Configures and starts an [`Engine`]. Every setting has a default; the
/// defaults are those of [`Config::default`]:
///
/// | setting | default | meaning |
/// |---|---|---|
/// | [`workers`](Builder::workers) | 1 | logical workers, one OS thread each |
/// | [`ingress_budget`](Builder::ingress_budget) | 256 | items per ingress drain per pass (0 = unlimited) |
/// | [`process_budget`](Builder::process_budget) | 64 | processes resumed per pass (0 = unlimited) |
/// | [`max_actors`](Builder::max_actors) | no cap ([`MAX_ACTORS`](crate::MAX_ACTORS), 2^32 − 1) | most processes alive at once; the slab grows to fit |
/// | [`stack_size`](Builder::stack_size) | 256 KiB | usable bytes per process stack (lazily committed; at least [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE), 64 KiB) |
/// | [`stack_pool_max`](Builder::stack_pool_max) | 16,384 | stacks kept for reuse |
/// | [`stack_keep_resident`](Builder::stack_keep_resident) | 16 KiB | bytes kept resident in a pooled stack |
/// | [`timeslice`](Builder::timeslice) | 2 ms | run time before an allocation (with [`PreemptingAlloc`](crate::PreemptingAlloc)) or `check!()` yields |
/// | [`coop_budget`](Builder::coop_budget) | 128 | a process yields at its 128th channel, mutex or spawn operation since it switched in (0 = off) |
/// | [`spin_budget_cycles`](Builder::spin_budget_cycles) | 20,000 | timestamp ticks an idle driver spins before parking (0 = park at once) |
/// | [`max_spinners`](Builder::max_spinners) | workers / 2, at least 2 (1 with one worker) | drivers spinning at once |
/// | [`io_threads`](Builder::io_threads) | 64 | most threads running `block_on_io` jobs at once |
///
/// ```
/// let engine = smarm::Engine::builder().workers(2).build().unwrap();
/// let sum = engine.block_on(|| {
///     let rt = smarm::current_runtime().unwrap();
///     let handles: Vec<_> = (0..4).map(|_| rt.spawn(|| smarm::yield_now()).unwrap()).collect();
///     handles.into_iter().map(|h| u32::from(h.join().is_ok())).sum::<u32>()
/// });
/// assert_eq!(sum.unwrap(), 4);
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    config: Config,
    io_threads: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// A builder with every setting at its default.
    pub fn new() -> Builder {
        Builder { config: Config::default(), io_threads: DEFAULT_IO_THREADS }
    }

    /// Starts from `config` (every field of it) instead of the defaults.
    pub fn config(mut self, config: Config) -> Builder {
        self.config = config;
        self
    }

    /// Number of logical workers, each driven by its own OS thread.
    pub fn workers(mut self, count: usize) -> Builder {
        self.config.worker_count = count;
        self
    }

    /// Items consumed per ingress ring per pass; 0 = unlimited.
    pub fn ingress_budget(mut self, items: usize) -> Builder {
        self.config.worker_ingress_budget = items;
        self
    }

    /// Processes resumed per pass of one worker; 0 = unlimited.
    pub fn process_budget(mut self, processes: usize) -> Builder {
        self.config.process_budget = processes;
        self
    }

    /// Mailbox entries one handler actor handles per pass; 0 = unlimited
    /// (see [`Config::actor_message_budget`]).
    pub fn actor_message_budget(mut self, entries: usize) -> Builder {
        self.config.actor_message_budget = entries;
        self
    }

    /// Caps the processes alive at once (default: no cap but
    /// [`MAX_ACTORS`](crate::MAX_ACTORS)). Nothing is allocated for the
    /// cap; the slab grows with the processes.
    pub fn max_actors(mut self, count: usize) -> Builder {
        self.config.max_actors = Some(count);
        self
    }

    /// Usable bytes of each process stack: at least
    /// [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE) (64 KiB), else
    /// [`build`](Builder::build) fails with `ConfigError::StackTooSmall`.
    /// The floor is what a panicking process needs: the panic hook, with
    /// backtrace capture under `RUST_BACKTRACE=1` or `full`, runs on the
    /// process's own stack and takes about 24 KiB there. Stacks are
    /// committed as they are touched, so a large size costs address space,
    /// not memory.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.config.stack_size = bytes;
        self
    }

    /// Stacks kept in the pool for reuse.
    pub fn stack_pool_max(mut self, count: usize) -> Builder {
        self.config.stack_pool_max = Some(count);
        self
    }

    /// Bytes from the top of a pooled stack kept resident.
    pub fn stack_keep_resident(mut self, bytes: usize) -> Builder {
        self.config.stack_keep_resident = bytes;
        self
    }

    /// Run time after which an allocation (with
    /// [`PreemptingAlloc`](crate::PreemptingAlloc)) or `check!()` yields.
    pub fn timeslice(mut self, timeslice: Duration) -> Builder {
        self.config.timeslice = timeslice;
        self
    }

    /// The cooperative budget: a process yields at its `operations`-th
    /// channel send or receive (`try_*` included), mutex lock or spawn since
    /// it last switched in, before doing it. 0 disables the budget.
    pub fn coop_budget(mut self, operations: u32) -> Builder {
        self.config.coop_budget = operations;
        self
    }

    /// Timestamp-counter ticks an idle driver spins before parking; 0 parks
    /// at once.
    pub fn spin_budget_cycles(mut self, cycles: u64) -> Builder {
        self.config.spin_budget_cycles = cycles;
        self
    }

    /// Most drivers spinning at once (at least 1 if spinning is on).
    pub fn max_spinners(mut self, count: usize) -> Builder {
        self.config.max_spinners = Some(count);
        self
    }

    /// Most io threads running [`block_on_io`](crate::io::block_on_io) jobs
    /// at once; further jobs queue.
    pub fn io_threads(mut self, count: usize) -> Builder {
        self.io_threads = count.max(1);
        self
    }

    /// The configuration built so far.
    pub fn as_config(&self) -> &Config {
        &self.config
    }

    /// Builds the runtime and starts one driver thread per worker. The
    /// workers idle until something is spawned.
    pub fn build(self) -> Result<Engine, RunError> {
        Engine::start(self.config, self.io_threads)
    }
}

/// Spin-hint iterations between two `sched_yield`s of a spinning driver.
/// When there are more runnable threads than cores, the thread that would
/// wake the spinner may be waiting for the spinner's core; a yield now and
/// then lets it run instead of burning the whole budget.
const YIELD_EVERY: u32 = 16;

/// What the drivers of one engine share with it.
struct EngineShared {
    shutdown: AtomicBool,
    /// Drivers spinning right now.
    n_spinning: AtomicUsize,
    max_spinners: usize,
    spin_budget: u64,
    /// The thread in `block_on` / `wait` sleeps here.
    main: ParkToken,
}

impl EngineShared {
    /// Spins on `token` for the budget if a spinner seat is free. Returns
    /// whether a wake arrived (and was taken).
    fn spin(&self, token: &ParkToken) -> bool {
        if self.spin_budget == 0 {
            return false;
        }
        // Relaxed: the counter only bounds how many spin; it guards no data.
        if self.n_spinning.fetch_add(1, Ordering::Relaxed) >= self.max_spinners {
            self.n_spinning.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        let start = Native::timestamp();
        let mut spins = 0u32;
        let woke = loop {
            // A cheap shared read while nothing happens; the CAS only when
            // the word changed. Acquire pairs with `unpark`'s Release swap:
            // the ring pushes made before the wake are visible to the pass.
            if token.state.load(Ordering::Relaxed) == NOTIFIED
                && token.state.compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                break true;
            }
            if Native::timestamp().wrapping_sub(start) >= self.spin_budget {
                break false;
            }
            spins += 1;
            if spins.is_multiple_of(YIELD_EVERY) {
                std::thread::yield_now();
            } else {
                Native::spin_hint();
            }
        };
        self.n_spinning.fetch_sub(1, Ordering::Relaxed);
        woke
    }
}

/// A running multi-worker runtime: one OS thread per worker.
///
/// Build it with [`Engine::builder`] (or [`crate::runtime::init`]), then
/// either enter it with [`block_on`](Engine::block_on) — which runs a root
/// process and returns its value once the runtime is finished — or spawn
/// through [`runtime`](Engine::runtime) and [`wait`](Engine::wait).
///
/// Dropping an engine that was not waited on stops its driver threads after
/// their current pass: processes still alive are abandoned (their stacks
/// are freed, their destructors do not run). Use
/// [`shutdown`](Engine::shutdown) to stop them properly.
pub struct Engine {
    runtime: Runtime,
    shared: Arc<EngineShared>,
    context: Arc<HostContext>,
    threads: Vec<JoinHandle<()>>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("workers", &self.runtime.worker_count())
            .field("live", &self.runtime.live())
            .field("external", &self.runtime.external())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// A builder with default settings.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// Builds and starts an engine from `config` with default io settings.
    pub fn new(config: Config) -> Result<Engine, RunError> {
        Engine::start(config, DEFAULT_IO_THREADS)
    }

    fn start(config: Config, io_threads: usize) -> Result<Engine, RunError> {
        let spin_budget = config.spin_budget_cycles;
        let max_spinners = config.effective_max_spinners();
        let (parts, platform) = crate::build_parts(config, Drivers::PerWorker)?;
        let RuntimeParts { runtime, workers } = parts;
        let context = HostContext::new(runtime.clone(), platform, io_threads);
        let shared = Arc::new(EngineShared {
            shutdown: AtomicBool::new(false),
            n_spinning: AtomicUsize::new(0),
            max_spinners,
            spin_budget,
            main: ParkToken::new(),
        });
        let mut engine = Engine { runtime, shared, context, threads: Vec::with_capacity(workers.len()) };
        for worker in workers {
            let id = worker.id();
            let runtime = engine.runtime.clone();
            let shared = engine.shared.clone();
            let context = engine.context.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("smarm-worker-{id}"))
                .spawn(move || drive(worker, &runtime, &shared, context));
            match spawned {
                Ok(handle) => engine.threads.push(handle),
                // Dropping `engine` stops and joins the threads started so far.
                Err(error) => return Err(RunError::Thread(error.to_string())),
            }
        }
        Ok(engine)
    }

    /// The runtime handle: spawn, stop, inspect.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Runs `root` as a process on worker 0, waits until the runtime is
    /// finished (no live process, no io outstanding), stops the driver
    /// threads and returns the root's value.
    ///
    /// Errors: [`RunError::Panicked`] with the root's panic message,
    /// [`RunError::Stopped`] if the root was stopped, [`RunError::Spawn`] if
    /// it could not be spawned.
    pub fn block_on<R, F>(mut self, root: F) -> Result<R, RunError>
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        let handle = self.runtime.spawn_on(0, root).map_err(RunError::Spawn)?;
        self.finish();
        RunError::from_root(handle)
    }

    /// Waits until the runtime is finished (no live process, no io
    /// outstanding), then stops and joins the driver threads.
    pub fn wait(mut self) {
        self.finish();
    }

    /// Requests a stop of every live process, waits until they have all
    /// ended, then stops and joins the driver threads. A process in a loop
    /// with no observation point (`check!()`, a yield, a park) never sees
    /// the request, and this never returns.
    pub fn shutdown(mut self) {
        self.runtime.stop_all();
        self.finish();
    }

    /// Waits until the runtime is finished, closes it (a spawn through a
    /// cloned handle from now on is `SpawnError::Closed`), drives the
    /// spawns that raced with the close to their end, and stops the
    /// driver threads.
    fn finish(&mut self) {
        self.wait_finished();
        self.runtime.close();
        self.wait_finished();
        self.stop_threads();
    }

    fn wait_finished(&self) {
        let platform = self.context.platform.clone();
        while !self.runtime.is_finished() {
            // A driver that goes idle with the runtime finished unparks us;
            // a wake that lands before the park makes it return at once.
            platform.park(&self.shared.main, None);
        }
    }

    fn stop_threads(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.shared.shutdown.store(true, Ordering::Release);
        for worker in 0..self.runtime.worker_count() {
            self.context.platform.unpark(self.runtime.park_token(worker));
        }
        for thread in self.threads.drain(..) {
            // A driver thread that panicked (a runtime bug) has already
            // printed why; nothing more to do with it here.
            let _ = thread.join();
        }
        self.context.shutdown();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.runtime.close();
        self.stop_threads();
    }
}

/// The driver loop of one worker thread.
fn drive(mut worker: Worker, runtime: &Runtime, shared: &EngineShared, context: Arc<HostContext>) {
    // The overflow handler runs on the alternate signal stack; std's threads
    // normally have one already, and this keeps it (or makes one).
    let _alt_stack = smarm_platform::linux::ensure_alt_stack();
    let platform: Arc<LinuxPlatform> = context.platform.clone();
    let _entered = context::enter(context);
    let token = runtime.park_token(worker.id());
    loop {
        if shared.shutdown.load(Ordering::Acquire) {
            break;
        }
        if worker.try_tick() {
            continue;
        }
        if runtime.is_finished() {
            platform.unpark(&shared.main);
        }
        if shared.spin(token) {
            continue;
        }
        if shared.shutdown.load(Ordering::Acquire) {
            break;
        }
        platform.park(token, worker.next_deadline());
    }
}
