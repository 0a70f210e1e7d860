//! The Engine: OS threads driving the workers, each thread the sole owner
//! of its [`Worker`]s and calling [`Worker::try_tick`] — no runtime lock
//! and no shared worker borrow on the hot path (worker spec §3).
//!
//! # Threads and workers
//!
//! Workers are logical; threads are what the CPUs run. The engine starts one
//! driver thread per worker, but no more than the CPUs the process may run
//! on ([`available_cpus`]: the affinity mask and the cgroup quota), unless
//! [`Builder::threads`] says otherwise. With fewer threads than workers,
//! thread `t` starts with workers `t`, `t + threads`, … — one bounded pass
//! of each in turn — and all of them signal its one park token
//! ([`Drivers::Grouped`]). A process still stays on its worker; only the
//! thread that runs the worker is shared. So more workers than CPUs cost
//! nothing at a hand-off: the message goes to a thread that is running (or
//! spinning), never to a sleeping one that the kernel must first schedule
//! onto a CPU another driver holds.
//!
//! # Drivers trade workers
//!
//! That layout is only where the drivers start ([`Builder::worker_handoff`],
//! on by default with more than one thread): between two rounds a driver
//! with nothing to do gives its idle workers to a running driver, and one
//! that keeps finding two of its workers busy gives one to an idle driver.
//! The rules and the hand-over protocol are in `engine/handoff.rs`.
//!
//! # Idle policy
//!
//! A driver whose passes did no work first *spins* for
//! `spin_budget_cycles` ticks of the timestamp counter, watching two
//! things: its workers' ingress queues (`Worker::has_ingress`: wakes,
//! spawns, handler actors' envelopes and admin commands), and its park
//! token's state word — the word `Platform::unpark` writes for anything
//! else (an installed extension, shutdown). An awake driver is *watching*
//! (`Runtime::watch_ingress`): a process woken or spawned onto one of its
//! workers, or a message for one of its actors, is only pushed into the
//! queue, where the spinner (or the next pass) finds it, and the token's
//! cache line stays where it is — no atomic swap on a line the other CPU
//! owns at every hop. When the token
//! turns `NOTIFIED` the spinner takes the wake and runs a pass at once: the
//! pusher paid one atomic swap and no system call, because only a driver
//! that has announced a sleep (`PARKED`) is woken with `FUTEX_WAKE` — and
//! so a burst of wakes into one driver costs at most one system call. The
//! budget (default
//! 100,000 ticks, ≈ 40 µs at 2.6 GHz) is about what a park and a wake cost
//! on a virtual machine, so spinning never costs more than the wake it
//! saves.
//!
//! A spinner never takes a CPU a driver with work needs: it spins only
//! while the awake drivers (running or spinning) fit on the CPUs, and at
//! most `max_spinners` at once (checked with one `n_spinning` atomic only
//! when that limit is below the driver count; otherwise the counter would
//! be one more cache line moving between CPUs at every hand-off). While it
//! spins it executes the CPU's spin hint (`pause` / `yield`), and a
//! `sched_yield` every [`YIELD_EVERY`] hints: when other processes crowd
//! the CPUs, the thread that would wake it may be queued behind it on its
//! core. When the
//! budget runs out — or it may not spin, or the budget is 0 — the driver
//! parks on the platform until its workers' next timer deadline or a wake.
//!
//! No wake is lost: a push is always ring-then-signal; a pass drains the
//! rings after the driver last consumed the token, and a wake that lands
//! after that stays in the token (`NOTIFIED`) until the spinner sees it or
//! `park` consumes it and returns at once. Before it sleeps a driver stops
//! watching (`Runtime::unwatch_ingress`: clear the flag, a `SeqCst` fence;
//! then it looks at the queues) while a waker pushes, fences and reads the
//! flag:
//! either the driver sees the push and runs a pass instead of sleeping, or
//! the waker sees the flag cleared and signals the token (the store-buffer
//! pattern; `smarm-core`'s loom model `watched_wake` checks it).
//!
//! # Shutdown
//!
//! The runtime is finished when no process is live and no external work
//! (io) is outstanding; pending timers of dead processes do not count. A
//! driver that finds nothing to do checks that (two atomic loads) and, if
//! so, wakes the thread waiting in [`Engine::block_on`] / [`Engine::wait`],
//! which sets the shutdown flag, wakes every driver and joins the threads.
//!
//! # Deadlocks
//!
//! A driver about to park writes its sleep word (a count of its sleeps and
//! whether this one has no deadline) before it parks; the last driver to
//! park with no deadline wakes the thread in `block_on` / `wait`, which
//! then looks for a deadlock (`Runtime::find_deadlock`, whose docs hold the
//! rule): the runtime's own threads are the drivers and itself, and a
//! driver counts as asleep only while its token reads `PARKED` and its
//! sleep word is unchanged from one look to the next. A look that finds
//! movement is made again after a while (1 ms, doubling up to 1 s) for as
//! long as every driver still sleeps with no deadline; a driver that wakes
//! ends that.
#![deny(unsafe_code)]

use std::fmt;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use smarm_arch::{Arch, Native};
use smarm_core::{Config, Drivers, Runtime, RuntimeParts, Worker};
use smarm_platform::linux::{EMPTY, NOTIFIED, PARKED};
use smarm_platform::{Nanos, ParkToken, Platform};

use crate::context::{self, HostContext, DEFAULT_IO_THREADS};
use crate::io::reactor::{Reactor, POLL_EVERY};
use crate::{DeadlockReport, RunError};
use smarm_platform::linux::LinuxPlatform;

/// Configures and starts an [`Engine`]. Every setting has a default; the
/// defaults are those of [`Config::default`], except the worker count, which
/// is the number of CPUs the process may run on:
///
/// | setting | default | meaning |
/// |---|---|---|
/// | [`workers`](Builder::workers) | [`available_cpus`] | logical workers |
/// | [`threads`](Builder::threads) | workers, at most [`available_cpus`] | OS threads driving them |
/// | [`worker_handoff`](Builder::worker_handoff) | on | the threads trade workers between rounds |
/// | [`ingress_budget`](Builder::ingress_budget) | 256 | items per ingress drain per pass (0 = unlimited) |
/// | [`process_budget`](Builder::process_budget) | 64 | processes resumed per pass (0 = unlimited) |
/// | [`max_processes`](Builder::max_processes) | no cap ([`MAX_PROCESSES`](crate::MAX_PROCESSES), 2^32 − 1) | most processes (handler actors included) alive at once; the slab grows to fit |
/// | [`stack_size`](Builder::stack_size) | 256 KiB | usable bytes per process stack (lazily committed; at least [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE), 64 KiB) |
/// | [`stack_pool_max`](Builder::stack_pool_max) | 16,384 | stacks kept for reuse |
/// | [`stack_keep_resident`](Builder::stack_keep_resident) | 16 KiB | bytes kept resident in a pooled stack |
/// | [`stack_release_after`](Builder::stack_release_after) | 50 ms | time an unused pooled stack stays resident (64 always do) |
/// | [`timeslice`](Builder::timeslice) | 2 ms | run time before an allocation (with [`PreemptingAlloc`](crate::PreemptingAlloc)) or `check!()` yields |
/// | [`coop_budget`](Builder::coop_budget) | 1,024 | a process yields at its 1,024th channel, mutex, spawn or actor-send operation since it switched in (0 = off) |
/// | [`spin_budget_cycles`](Builder::spin_budget_cycles) | 100,000 | timestamp ticks an idle driver spins before parking (0 = park at once) |
/// | [`max_spinners`](Builder::max_spinners) | threads / 2, at least 2 (1 with one thread) | drivers spinning at once |
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
    /// Driver threads; `None` = one per worker, at most one per CPU.
    threads: Option<usize>,
    /// Drivers trade workers (see [`Builder::worker_handoff`]).
    handoff: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// A builder with every setting at its default: [`Config::default`],
    /// except that the worker count is [`available_cpus`].
    pub fn new() -> Builder {
        let config = Config { worker_count: available_cpus(), ..Config::default() };
        Builder { config, io_threads: DEFAULT_IO_THREADS, threads: None, handoff: true }
    }

    /// Starts from `config` (every field of it, the worker count included)
    /// instead of the defaults.
    pub fn config(mut self, config: Config) -> Builder {
        self.config = config;
        self
    }

    /// Number of logical workers. Default: [`available_cpus`]. Any count
    /// from 1 to [`MAX_WORKERS`](smarm_core::MAX_WORKERS) works, more workers
    /// than CPUs included: see [`threads`](Builder::threads) for how they
    /// are driven then.
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

    /// Caps the processes alive at once, handler actors included (default:
    /// no cap but [`MAX_PROCESSES`](crate::MAX_PROCESSES)). Nothing is
    /// allocated for the cap; the slab grows with the processes.
    pub fn max_processes(mut self, count: usize) -> Builder {
        self.config.max_processes = Some(count);
        self
    }

    /// The old name of [`max_processes`](Self::max_processes).
    #[deprecated(note = "renamed to max_processes: it counts processes and handler actors alike")]
    pub fn max_actors(self, count: usize) -> Builder {
        self.max_processes(count)
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

    /// How long a pooled stack no spawn takes stays resident before its
    /// pages go back to the OS (64 idle stacks always stay resident).
    pub fn stack_release_after(mut self, after: Duration) -> Builder {
        self.config.stack_release_after = after;
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

    /// Number of OS threads driving the workers. Default: one per worker,
    /// but no more than [`available_cpus`]. With fewer threads than workers,
    /// thread `t` starts with workers `t`, `t + threads`, `t + 2 × threads`,
    /// …, one bounded pass of each in turn; a process still stays on its
    /// worker. Clamped to `1 ..= workers`. Later the threads may trade
    /// workers ([`worker_handoff`](Builder::worker_handoff)).
    ///
    /// Workers are logical: four workers on two CPUs run as two threads of
    /// two workers each, so a message between them is a hand-off between
    /// two running threads and not the wake of a sleeping one (on a virtual
    /// machine that wake can cost tens of microseconds). Ask for one thread
    /// per worker when a process may block its thread (a blocking system
    /// call outside [`block_on_io`](crate::io::block_on_io)) and the other
    /// workers of that thread must not wait for it.
    ///
    /// ```
    /// // Eight workers on however many CPUs there are; four threads.
    /// let engine = smarm::Engine::builder().workers(8).threads(4).build().unwrap();
    /// let workers = engine.block_on(|| {
    ///     let rt = smarm::current_runtime().unwrap();
    ///     let handles: Vec<_> = (0..8)
    ///         .map(|w| rt.spawn_on(w, || smarm::current_worker().unwrap()).unwrap())
    ///         .collect();
    ///     handles.len()
    /// });
    /// assert_eq!(workers.unwrap(), 8);
    /// ```
    pub fn threads(mut self, count: usize) -> Builder {
        self.threads = Some(count);
        self
    }

    /// Whether the driver threads trade workers (default: yes). A worker
    /// keeps its processes and actors for ever, but the thread that drives
    /// it may change between two passes: an idle driver gives its idle
    /// workers to a driver that is running, so work that goes back and
    /// forth between workers (a ping-pong, a ring of processes) runs on one
    /// thread without a hop between CPUs; and a driver whose passes take
    /// long with more than one of its workers busy gives one of them to an
    /// idle driver, so parallel work spreads back over the CPUs. A driver
    /// keeps a worker it was given for at least a millisecond.
    ///
    /// The rules, applied between two rounds (a round is one pass of each
    /// worker a driver holds):
    ///
    /// - a driver whose round found nothing to do gives its workers that
    ///   have no work queued (and that it has held for at least 1 ms) to a
    ///   driver whose last round found work;
    /// - a driver that has found more than one of its workers with work at
    ///   the start of every round for 50 µs gives one of them (held for at
    ///   least 1 ms) to a driver whose last round found nothing.
    ///
    /// Work that goes back and forth never has two workers with work at
    /// once, so it stays gathered. The move itself loses nothing: a
    /// worker's processes, actors, timers and queues go with it, and a
    /// wake that raced with the move still reaches whichever thread
    /// drives the worker.
    ///
    /// Turn it off to keep each worker on the thread that first drives it,
    /// as [`threads`](Builder::threads) lays them out.
    ///
    /// ```
    /// let engine = smarm::Engine::builder().workers(2).worker_handoff(false).build().unwrap();
    /// let rounds = engine.block_on(|| {
    ///     let rt = smarm::current_runtime().unwrap();
    ///     let (to_pong, from_ping) = smarm::channel::<u32>();
    ///     let (to_ping, from_pong) = smarm::channel::<u32>();
    ///     let pong = rt.spawn_on(1, move || from_ping.iter().for_each(|n| to_ping.send(n + 1).unwrap())).unwrap();
    ///     let mut n = 0;
    ///     for _ in 0..100 {
    ///         to_pong.send(n).unwrap();
    ///         n = from_pong.recv().unwrap();
    ///     }
    ///     drop(to_pong);
    ///     pong.join().unwrap();
    ///     n
    /// });
    /// assert_eq!(rounds.unwrap(), 100);
    /// ```
    pub fn worker_handoff(mut self, on: bool) -> Builder {
        self.handoff = on;
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
        Engine::start(self.config, self.io_threads, self.threads, self.handoff)
    }
}

/// The CPUs this process may run on: the affinity mask
/// (`sched_getaffinity`), lowered by a cgroup CPU quota where there is one
/// — what [`std::thread::available_parallelism`] reports; 1 if it cannot be
/// read. [`Engine::builder`]'s default worker count, and the most driver
/// threads it starts by default.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Spin hints between two `sched_yield`s of a spinning driver.
///
/// The drivers never outnumber the CPUs by default, but other processes
/// may: then the driver a spinner waits for can be queued behind it on its
/// CPU, and without a yield the wake arrives only when the budget runs out.
/// Measured on a 2-vCPU KVM guest with other processes compiling on the
/// same CPUs (load average 3.8), cross-worker handoff, spin budget 100,000
/// ticks: without yields p50 43 µs (the whole budget), with a yield every
/// 16 hints p50 about 1 µs. On a quiet machine the yields cost nothing
/// measurable (token ring on 2 workers, 300,000 hops: pause only 279–328
/// ns per hop, a yield every 16 hints 282–287 ns, a bare load loop 293–376
/// ns).
const YIELD_EVERY: u32 = 16;
/// Spins between two looks at the io poller while spinning (≈ 10 µs).
const POLL_EVERY_SPINS: u32 = 256;

/// What the drivers of one engine share with it.
struct EngineShared {
    shutdown: AtomicBool,
    /// Drivers spinning right now.
    n_spinning: AtomicUsize,
    /// Drivers not parked (running a pass or spinning).
    n_awake: AtomicUsize,
    max_spinners: usize,
    /// Driver threads.
    drivers: usize,
    /// CPUs the process may run on: a driver spins only while the awake
    /// drivers fit on them.
    cpus: usize,
    spin_budget: u64,
    /// The thread in `block_on` / `wait` sleeps here.
    main: ParkToken,
    /// Per driver, its sleeps so far and whether it sleeps now with no
    /// deadline: `(sleeps << 1) | FOREVER`. Written by the driver around
    /// each park, read by the deadlock look.
    sleeps: Box<[AtomicU64]>,
    /// A thread waits in `block_on` / `wait` (and looks for deadlocks).
    host_waiting: AtomicBool,
    /// Per driver, what the others see of it and hand it.
    boards: Box<[Board]>,
    /// The drivers trade workers ([`Builder::worker_handoff`], and more
    /// than one driver).
    handoff: bool,
    /// [`SPREAD_AFTER`] in timestamp ticks.
    spread_after: u64,
    /// [`HOLD`] in timestamp ticks.
    hold: u64,
}

/// The low bit of a driver's sleep word: it sleeps with no deadline.
const FOREVER: u64 = 1;

impl EngineShared {
    /// Driver `driver` is about to park, with no deadline if `forever`.
    /// Returns whether every driver now sleeps for ever (this one is the
    /// last to go), so the host should look for a deadlock.
    fn going_to_sleep(&self, driver: usize, forever: bool) -> bool {
        let word = &self.sleeps[driver];
        let next = ((word.load(Ordering::Relaxed) >> 1) + 1) << 1 | u64::from(forever);
        // SeqCst store, then a SeqCst fence before the park's token CAS:
        // a deadlock look that sees the token of this sleep also sees this
        // word (the fence is the release half of that pairing; see
        // `Engine::drivers_still`). And SeqCst against the other drivers'
        // words and `host_waiting`: of two drivers going to sleep at once,
        // at least one sees the other's word.
        word.store(next, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        forever && self.host_waiting.load(Ordering::SeqCst) && self.all_asleep_forever()
    }

    /// Driver `driver` is awake again.
    fn woke(&self, driver: usize) {
        let word = &self.sleeps[driver];
        word.store(word.load(Ordering::Relaxed) & !FOREVER, Ordering::SeqCst);
    }

    /// Whether every driver has announced a sleep with no deadline.
    fn all_asleep_forever(&self) -> bool {
        self.sleeps.iter().all(|word| word.load(Ordering::SeqCst) & FOREVER != 0)
    }
}

impl EngineShared {
    /// Spins on `token` and on `ingress` (whether the driver's workers have
    /// wakes, spawns or actor mail queued, which skip the token of a
    /// watching driver)
    /// for the budget if a spinner seat is free and the awake drivers leave
    /// a CPU for it. Returns whether a wake arrived (a token's is taken).
    fn spin(&self, token: &ParkToken, reactor: &Reactor, ingress: impl Fn() -> bool) -> bool {
        if self.spin_budget == 0 {
            return false;
        }
        // A spinner on a CPU a runnable driver needs delays the very work
        // it waits for. Relaxed: a heuristic bound, it guards no data.
        if self.n_awake.load(Ordering::Relaxed) > self.cpus {
            return false;
        }
        // The seat count is one more line moving between the drivers at
        // every hand-off: kept only when it can say no.
        let counted = self.max_spinners < self.drivers;
        // Relaxed: the counter only bounds how many spin; it guards no data.
        if counted && self.n_spinning.fetch_add(1, Ordering::Relaxed) >= self.max_spinners {
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
            // Wakes, spawns and mail into a watching driver's workers skip
            // the token: they show in the queues themselves.
            if ingress() {
                break true;
            }
            if Native::timestamp().wrapping_sub(start) >= self.spin_budget {
                break false;
            }
            spins += 1;
            if reactor.is_active() {
                // A runtime that waits on fds looks at its poller now and
                // then instead of yielding: readiness is the work most
                // likely to come.
                if spins.is_multiple_of(POLL_EVERY_SPINS) && reactor.poll_pending() {
                    break true;
                }
                Native::spin_hint();
            } else if spins.is_multiple_of(YIELD_EVERY) {
                std::thread::yield_now();
            } else {
                Native::spin_hint();
            }
        };
        if counted {
            self.n_spinning.fetch_sub(1, Ordering::Relaxed);
        }
        woke
    }

    /// Parks the driver on `token` until `deadline` or a wake — in the io
    /// poller, if the runtime waits on fds and no other driver sleeps
    /// there — counted out of the awake drivers meanwhile.
    fn park(&self, reactor: &Reactor, token: &ParkToken, deadline: Option<Nanos>) {
        self.n_awake.fetch_sub(1, Ordering::Relaxed);
        reactor.park(token, deadline);
        self.n_awake.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(all(test, loom))]
mod loom_models;

mod handoff;
use handoff::{Board, Held, HOLD, SPREAD_AFTER};

/// The default `max_spinners` for `drivers` driver threads: half of them,
/// at least two (one with one driver).
fn default_max_spinners(drivers: usize) -> usize {
    (drivers / 2).max(2).min(drivers.max(1))
}

/// A running multi-worker runtime: OS threads driving the workers (one per
/// worker, at most one per CPU by default).
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
///
/// ```
/// let engine = smarm::Engine::builder().workers(4).build().unwrap();
/// let per_worker = engine
///     .block_on(|| {
///         let rt = smarm::current_runtime().unwrap();
///         // Spawns through the handle go round-robin over the workers.
///         let handles: Vec<_> = (0..8).map(|_| rt.spawn(|| smarm::current_worker().unwrap()).unwrap()).collect();
///         let mut per_worker = [0; 4];
///         for handle in handles {
///             per_worker[handle.join().unwrap()] += 1;
///         }
///         per_worker
///     })
///     .unwrap();
/// assert_eq!(per_worker, [2, 2, 2, 2]);
/// ```
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
        Engine::start(config, DEFAULT_IO_THREADS, None, true)
    }

    fn start(
        config: Config,
        io_threads: usize,
        threads: Option<usize>,
        handoff: bool,
    ) -> Result<Engine, RunError> {
        let cpus = available_cpus();
        let drivers = threads.unwrap_or(cpus).clamp(1, config.worker_count.max(1));
        let spin_budget = config.spin_budget_cycles;
        let max_spinners = config.max_spinners.unwrap_or_else(|| default_max_spinners(drivers));
        let (parts, platform) = crate::build_parts(config, Drivers::Grouped(drivers))?;
        let RuntimeParts { runtime, workers } = parts;
        let context = HostContext::new(runtime.clone(), platform, io_threads);
        let shared = Arc::new(EngineShared {
            shutdown: AtomicBool::new(false),
            n_spinning: AtomicUsize::new(0),
            n_awake: AtomicUsize::new(drivers),
            max_spinners,
            drivers,
            cpus,
            spin_budget,
            main: ParkToken::new(),
            sleeps: (0..drivers).map(|_| AtomicU64::new(0)).collect(),
            host_waiting: AtomicBool::new(false),
            boards: (0..drivers).map(|_| Board::default()).collect(),
            handoff: handoff && drivers > 1,
            spread_after: runtime.timestamp_ticks(SPREAD_AFTER),
            hold: runtime.timestamp_ticks(HOLD),
        });
        // Driver `d` drives the workers whose wakes signal token `d`.
        let mut groups: Vec<Vec<Worker>> = (0..drivers).map(|_| Vec::new()).collect();
        for worker in workers {
            groups[worker.id() % drivers].push(worker);
        }
        let mut engine = Engine { runtime, shared, context, threads: Vec::with_capacity(drivers) };
        for (driver, group) in groups.into_iter().enumerate() {
            let runtime = engine.runtime.clone();
            let shared = engine.shared.clone();
            let context = engine.context.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("smarm-driver-{driver}"))
                .spawn(move || drive(driver, group, &runtime, &shared, context));
            match spawned {
                Ok(handle) => engine.threads.push(handle),
                // Dropping `engine` stops and joins the threads started so far.
                Err(error) => return Err(RunError::Thread(error.to_string())),
            }
        }
        Ok(engine)
    }

    /// Number of OS threads driving the workers (see
    /// [`Builder::threads`]).
    pub fn threads(&self) -> usize {
        self.threads.len()
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
    /// it could not be spawned, [`RunError::Deadlock`] if every process and
    /// handler actor is parked and nothing can wake one (see
    /// [`wait`](Engine::wait)).
    pub fn block_on<R, F>(mut self, root: F) -> Result<R, RunError>
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        let handle =
            self.runtime.spawn_on(0, crate::stop_all_if_root_panics(root)).map_err(RunError::Spawn)?;
        self.finish()?;
        RunError::from_root(handle)
    }

    /// Waits until the runtime is finished (no live process, no io
    /// outstanding), then stops and joins the driver threads.
    ///
    /// Errors: [`RunError::Deadlock`] if every process and handler actor
    /// is parked and nothing can wake one — no timer pending, no io
    /// outstanding, and no thread outside the runtime that could act (every
    /// other thread of the program asleep in a smarm wait with no
    /// deadline). A handler actor waits for messages for ever, so an actor
    /// nobody stops is reported once nothing else can send to it; the
    /// report names it. Before returning the error the engine asks every
    /// process and actor to stop, so their destructors run.
    ///
    /// ```
    /// struct Idle;
    /// impl smarm::Actor for Idle {
    ///     type Msg = ();
    ///     fn handle(&mut self, _: &mut smarm::Ctx<'_, Self>, (): ()) {}
    /// }
    ///
    /// let engine = smarm::Engine::builder().workers(2).build().unwrap();
    /// let idle = engine.runtime().spawn_actor(Idle).unwrap();
    /// idle.stop().unwrap();
    /// engine.wait().unwrap();
    /// ```
    pub fn wait(mut self) -> Result<(), RunError> {
        self.finish()
    }

    /// Requests a stop of every live process, waits until they have all
    /// ended, then stops and joins the driver threads. A process in a loop
    /// with no observation point (`check!()`, a yield, a park) never sees
    /// the request, and this never returns.
    pub fn shutdown(mut self) {
        self.runtime.stop_all();
        let _ = self.finish();
    }

    /// Waits until the runtime is finished, closes it (a spawn through a
    /// cloned handle from now on is `SpawnError::Closed`), drives the
    /// spawns that raced with the close to their end, and stops the
    /// driver threads. On a deadlock, stops every process first (a second
    /// deadlock among their destructors is left as it is).
    fn finish(&mut self) -> Result<(), RunError> {
        let deadlock = self.wait_finished().err();
        if deadlock.is_some() {
            self.runtime.stop_all();
            let _ = self.wait_finished();
        }
        self.runtime.close();
        let _ = self.wait_finished();
        self.stop_threads();
        deadlock.map_or(Ok(()), |report| Err(RunError::Deadlock(report)))
    }

    /// Sleeps until the runtime is finished, or deadlocked.
    ///
    /// The deadlock look is made here, on the waiting thread, whenever
    /// every driver sleeps with no deadline: the last driver to go to such
    /// a sleep wakes this thread. A look that finds something may still
    /// move (a thread outside the runtime awake, a wake in flight, a driver
    /// not yet in its sleep) is made again after a while, as long as every
    /// driver still sleeps.
    fn wait_finished(&self) -> Result<(), DeadlockReport> {
        let platform = self.context.platform.clone();
        // SeqCst: against the drivers' sleep words (see `going_to_sleep`).
        self.shared.host_waiting.store(true, Ordering::SeqCst);
        let mut recheck = crate::RECHECK_FIRST;
        let result = loop {
            if self.runtime.is_finished() {
                break Ok(());
            }
            let mut deadline = None;
            // With a socket or fd registered, readiness may still come: no
            // look, and no look again until a driver sleeps for ever anew.
            if self.shared.all_asleep_forever() && crate::io_idle(&self.context) {
                // Ours: the drivers, and this thread.
                let own = self.threads.len() + 1;
                if let Some(report) = crate::find_deadlock(&self.context, own, &mut || self.drivers_still()) {
                    break Err(report);
                }
                deadline = Some(platform.now().saturating_add(recheck.as_nanos() as u64));
                recheck = (recheck * 2).min(crate::RECHECK_MAX);
            } else {
                recheck = crate::RECHECK_FIRST;
            }
            // A driver that goes idle with the runtime finished (or that is
            // the last to sleep for ever) unparks us; a wake that lands
            // before the park makes it return at once.
            platform.park(&self.shared.main, deadline);
        };
        self.shared.host_waiting.store(false, Ordering::SeqCst);
        result
    }

    /// The deadlock look at the drivers: `None` unless every driver is
    /// asleep in a park with no deadline and no wake pending on its token;
    /// otherwise the sum of their sleep counts, which grows whenever one
    /// wakes and sleeps again.
    ///
    /// Per driver, the token is read before the sleep word, with a SeqCst
    /// fence between: the driver writes its word, fences, then moves its
    /// token to `PARKED`, so a token seen `PARKED` by a later sleep comes
    /// with that sleep's word, and two equal looks mean the driver never
    /// left the sleep in between. A token is `PARKED` only while its driver
    /// sleeps on it with no wake since it went to sleep: a wake swaps in
    /// `NOTIFIED`. (A driver sleeping in the io poller leaves its token
    /// `EMPTY`, so a runtime that polls is never reported; its sockets
    /// keep it from being reported anyway.)
    fn drivers_still(&self) -> Option<u64> {
        let mut sum = 0u64;
        for (driver, word) in self.shared.sleeps.iter().enumerate() {
            let Ok(token) = self.runtime.driver_token(driver) else { return None };
            if token.state.load(Ordering::SeqCst) != PARKED {
                return None;
            }
            fence(Ordering::SeqCst);
            let word = word.load(Ordering::SeqCst);
            if word & FOREVER == 0 {
                return None;
            }
            sum = sum.wrapping_add(word >> 1);
        }
        Some(sum)
    }

    fn stop_threads(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.shared.shutdown.store(true, Ordering::Release);
        for token in
            (0..self.runtime.driver_count()).filter_map(|driver| self.runtime.driver_token(driver).ok())
        {
            self.context.platform.unpark(token);
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

/// The driver loop of one thread: a bounded pass of each of its workers in
/// turn, then spin, then park on its token. Workers come and go between
/// rounds when the drivers trade them (`Builder::worker_handoff`).
fn drive(
    driver: usize,
    workers: Vec<Worker>,
    runtime: &Runtime,
    shared: &EngineShared,
    context: Arc<HostContext>,
) {
    // The overflow handler runs on the alternate signal stack; std's threads
    // normally have one already, and this keeps it (or makes one).
    let _alt_stack = smarm_platform::linux::ensure_alt_stack();
    let platform: Arc<LinuxPlatform> = context.platform.clone();
    let services = context.clone();
    let reactor = &services.reactor;
    let _entered = context::enter(context);
    let Ok(token) = runtime.driver_token(driver) else { return };
    debug_assert!(
        workers.iter().all(|worker| runtime.driver_of(worker.id()) == Ok(driver)),
        "a driver starts with the workers that signal its token"
    );
    let board = &shared.boards[driver];
    let mut held: Vec<Held> = workers.into_iter().map(|worker| Held { worker, since: 0 }).collect();
    // Per held worker, whether it had work as the round began.
    let mut pending: Vec<bool> = Vec::new();
    // Since when more than one held worker has had work at every round.
    let mut crowded_since: Option<u64> = None;
    let mut passes = 0u32;
    // Awake: wakes into our workers reach us through their queues, not the
    // token, until we unwatch before sleeping.
    let _ = runtime.watch_driver(driver);
    loop {
        if shared.shutdown.load(Ordering::Acquire) {
            break;
        }
        if board.has_mail() {
            shared.take_mail(driver, &mut held);
        }
        if shared.handoff && held.len() > 1 {
            pending.clear();
            pending.extend(held.iter().map(|entry| entry.worker.has_work()));
            if pending.iter().filter(|&&p| p).count() > 1 {
                let since = *crowded_since.get_or_insert_with(Native::timestamp);
                if shared.spread(runtime, driver, &mut held, &pending, since) {
                    crowded_since = None;
                }
            } else {
                crowded_since = None;
            }
        }
        let mut did = false;
        for entry in held.iter_mut() {
            did |= entry.worker.try_tick();
        }
        if did {
            board.set_running(true);
            passes = passes.wrapping_add(1);
            if passes.is_multiple_of(POLL_EVERY) {
                reactor.poll_pending();
            }
            continue;
        }
        board.set_running(false);
        if runtime.is_finished() {
            platform.unpark(&shared.main);
        }
        // A lone driver of a runtime that waits on fds has no other worker
        // to hear from quickly: it parks in the poller at once, where
        // pending readiness returns it at once too (one `epoll_wait` per
        // idle moment, as an event loop makes).
        let lone_poller = shared.drivers == 1 && reactor.is_active();
        // Otherwise readiness that came while the passes ran wakes
        // processes now rather than after a spin.
        if !lone_poller && reactor.poll_pending() {
            continue;
        }
        if shared.handoff {
            shared.gather(runtime, driver, &mut held);
        }
        let ingress = || board.has_mail() || held.iter().any(|entry| entry.worker.has_ingress());
        if !lone_poller && shared.spin(token, reactor, ingress) {
            continue;
        }
        if shared.shutdown.load(Ordering::Acquire) {
            break;
        }
        // From here on a wake signals the token. One that came while we
        // watched has not: run a pass for it instead of sleeping.
        let _ = runtime.unwatch_driver(driver);
        if ingress() {
            let _ = runtime.watch_driver(driver);
            continue;
        }
        let deadline = held.iter().filter_map(|entry| entry.worker.next_deadline()).min();
        if shared.going_to_sleep(driver, deadline.is_none()) {
            // The last driver to sleep with nothing to wake it: the host
            // looks for a deadlock.
            platform.unpark(&shared.main);
        }
        shared.park(reactor, token, deadline);
        shared.woke(driver);
        let _ = runtime.watch_driver(driver);
    }
    // Workers handed to us that we never took end here too, on a thread
    // that has the runtime's context.
    shared.take_mail(driver, &mut held);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use smarm_core::{Config, Drivers, NoSuchDriver, RuntimeParts};
    use smarm_platform::linux::{EMPTY, NOTIFIED};

    /// Two workers, one driver each, as the engine lays them out.
    fn two_drivers() -> RuntimeParts {
        let config = Config { worker_count: 2, ..Config::default() };
        crate::build_parts(config, Drivers::Grouped(2)).expect("parts").0
    }

    #[test]
    fn a_moved_worker_signals_its_new_driver() {
        let RuntimeParts { runtime, mut workers } = two_drivers();
        assert_eq!(runtime.driver_count(), 2);
        assert_eq!((runtime.driver_of(0), runtime.driver_of(1)), (Ok(0), Ok(1)));
        let tokens = [runtime.driver_token(0).unwrap(), runtime.driver_token(1).unwrap()];
        workers[1].move_to_driver(0).unwrap();
        assert_eq!(runtime.driver_of(1), Ok(0));
        assert!(std::ptr::eq(runtime.park_token(1).unwrap(), tokens[0]));

        // Driver 0 asleep (not watching): a spawn onto worker 1 signals
        // driver 0's token, not driver 1's.
        let handle = runtime.spawn_on(1, || 7).unwrap();
        assert_eq!(tokens[0].state.load(std::sync::atomic::Ordering::SeqCst), NOTIFIED);
        assert_eq!(tokens[1].state.load(std::sync::atomic::Ordering::SeqCst), EMPTY);
        tokens[0].state.store(EMPTY, std::sync::atomic::Ordering::SeqCst);

        // Driver 0 awake and watching: the next spawn signals no one and
        // waits in worker 1's queue, where driver 0 looks.
        runtime.watch_driver(0).unwrap();
        let second = runtime.spawn_on(1, || 8).unwrap();
        assert_eq!(tokens[0].state.load(std::sync::atomic::Ordering::SeqCst), EMPTY);
        assert_eq!(tokens[1].state.load(std::sync::atomic::Ordering::SeqCst), EMPTY);
        assert!(workers[1].has_ingress() && workers[1].has_work());
        runtime.unwatch_driver(0).unwrap();
        while workers[1].try_tick() {}
        assert!(!workers[1].has_work());
        assert!(matches!(handle.try_join(), Ok(Ok(7))));
        assert!(matches!(second.try_join(), Ok(Ok(8))));
    }

    #[test]
    fn driver_calls_name_a_driver_the_runtime_has() {
        let RuntimeParts { runtime, mut workers } = two_drivers();
        assert_eq!(workers[0].move_to_driver(2), Err(NoSuchDriver(2)));
        assert_eq!(runtime.driver_of(0), Ok(0), "a refused move changes nothing");
        assert!(runtime.driver_token(2).is_err());
        assert_eq!(runtime.watch_driver(2), Err(NoSuchDriver(2)));
        assert_eq!(runtime.unwatch_driver(9), Err(NoSuchDriver(9)));
        assert_eq!(runtime.notify_driver(2), Err(NoSuchDriver(2)));
        assert!(runtime.driver_of(2).is_err());
        assert!(NoSuchDriver(2).to_string().contains("driver 2"));
    }
}
