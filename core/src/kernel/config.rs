//! Runtime configuration, fixed before the first spawn.

use core::time::Duration;

/// How a runtime is shaped. Every field has a documented default
/// ([`Config::default`]); hosts may ignore the fields that concern only
/// them (the core ignores the idle-policy fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Number of logical workers. Default 1. Each owns a disjoint set of
    /// processes for their whole life.
    pub worker_count: usize,
    /// Maximum items consumed by one drain of one ingress ring per pass
    /// (wake, spawn, admin); `0` means unlimited. Default 256.
    pub worker_ingress_budget: usize,
    /// Maximum processes resumed from the ready queue in one pass of one
    /// worker; `0` means unlimited. Default 64. A process runs until it
    /// parks, yields or exits; one queued during the pass (a yield, a wake
    /// from a process of the same worker) may run again in the same pass
    /// while the budget lasts. With `0`, a pass resumes only what was ready
    /// when it began.
    ///
    /// The same number bounds the *fresh spawns* a pass runs (64 when this
    /// is `0`): what a process spawns on its own worker runs as soon as it
    /// switches out, before older ready processes, in spawn order, the
    /// newest batch first (so a tree is walked depth first and holds only
    /// its frontier alive). The order is deterministic on one thread.
    pub process_budget: usize,
    /// Maximum mailbox entries one handler actor handles in one pass of its
    /// worker; `0` means unlimited. Default 256. An actor with more left is
    /// runnable again on the next pass, after every other runnable actor
    /// of its worker has had its turn.
    ///
    /// Keep it at least `worker_ingress_budget`: a pass can take in that
    /// many messages for one actor from other workers, and an actor that
    /// handles fewer carries the difference over in its mailbox, which
    /// then grows by it every pass of a long stream (the stream otherwise
    /// waits in the worker's transfer lane, a chain its senders built).
    pub actor_message_budget: usize,
    /// An optional cap on the processes alive at once — every pid counts:
    /// stackful processes and handler actors alike. Default `None`: no cap
    /// but the pid index space, [`MAX_PROCESSES`] (4,294,967,295). Spawning
    /// beyond the cap is `SpawnError::Full`.
    ///
    /// Nothing is allocated for the cap: the slab grows in segments of
    /// doubling size as processes are spawned (memory follows the most
    /// processes alive at once, about 350 bytes per slot on 64-bit targets), and its
    /// segments are kept for reuse until the runtime is dropped.
    ///
    /// ```
    /// # use smarm_core as smarm;
    /// use smarm::Config;
    /// // At most 10,000 processes alive at once.
    /// let capped = Config { max_processes: Some(10_000), ..Config::default() };
    /// assert_eq!(capped.process_limit(), 10_000);
    /// assert_eq!(Config::default().process_limit(), smarm::MAX_PROCESSES);
    /// ```
    pub max_processes: Option<usize>,
    /// The old name of [`max_processes`](Self::max_processes), still
    /// honoured: used when `max_processes` is `None` (and checked the same
    /// way, as [`ConfigError::MaxActors`]). A field cannot have an alias,
    /// so this one stays until it is removed; set `max_processes` instead.
    #[deprecated(note = "renamed to max_processes: it counts processes and handler actors alike")]
    pub max_actors: Option<usize>,
    /// Usable bytes of each process stack. Default 256 KiB (lazily
    /// committed: a process that touches one page costs one page).
    ///
    /// At least [`MIN_BARE_STACK_SIZE`] (16 KiB), and at least what the host
    /// asks for: a host runs a panicking process's panic machinery on the
    /// process's own stack, and std's — the panic hook with backtrace
    /// capture and symbolisation, `RUST_BACKTRACE=1` or `full` — was
    /// measured to take about 22 KiB (x86_64) and 24 KiB (aarch64) below
    /// the panicking frame. The hosted runtime therefore refuses stacks
    /// below 64 KiB; a bare-metal host without unwinding or backtraces
    /// keeps the 16 KiB floor. Whatever the size, a process that panics
    /// needs that headroom below its deepest frame.
    pub stack_size: usize,
    /// Stacks kept in the pool for reuse before extra ones are freed back
    /// to the platform. `None` (the default) keeps up to 16,384 — as many
    /// as were ever in use at once, below that — so a spawn after the first
    /// burst maps nothing. A pooled stack keeps its top pages resident (see
    /// `stack_keep_resident`) until it has sat unused in the pool for
    /// `stack_release_after`; then it gives all its resident pages back to
    /// the OS and keeps only its mapping (64 idle stacks always stay
    /// resident). Raise it for spawn-heavy programs with many live
    /// processes, lower it to map less.
    pub stack_pool_max: Option<usize>,
    /// Bytes from the top of a recycled stack kept resident; deeper pages
    /// are released to the OS when the stack returns to the pool.
    /// Default 16 KiB.
    pub stack_keep_resident: usize,
    /// How long a pooled stack stays resident while no spawn takes it.
    /// Default 50 ms. A burst of spawns that ends leaves its stacks warm
    /// for the next burst; once this much time passes with fewer spawns
    /// than idle stacks, the ones no spawn took give their pages back to
    /// the OS (all but 64). Checked when a worker runs out of work (a
    /// driver with idle stacks to release sleeps at most until then) and
    /// every 256 stacks returned to the pool, so a runtime that never goes
    /// idle releases them too.
    pub stack_release_after: Duration,
    /// Time a process may run before an allocation (or `check!()`) yields
    /// it, when preemption is enabled by the host. Default 2 ms.
    pub timeslice: Duration,
    /// The cooperative budget: a process yields at its `coop_budget`-th
    /// budgeted operation (channel sends and receives and their `try_*`
    /// forms, mutex `lock` / `try_lock`, spawns, sends to handler actors)
    /// since it was last resumed,
    /// before performing it, so a process that never parks cannot starve
    /// the others on its worker. Refilled at every resume; no clock is
    /// read. `0` disables it; every other value is valid. Default 1,024
    /// ([`DEFAULT_COOP_BUDGET`](crate::kernel::coop::DEFAULT_COOP_BUDGET));
    /// see [`kernel::coop`](crate::kernel::coop).
    pub coop_budget: u32,
    /// Timestamp-counter cycles an idle worker spins before parking (hosted
    /// engine). `0` parks at once. Default 100,000 (≈ 40 µs at 2.6 GHz):
    /// about what parking and being woken costs on a virtual machine whose
    /// idle CPU halts, so an idle driver spins no longer than the wake it
    /// saves would have cost.
    pub spin_budget_cycles: u64,
    /// Most driver threads spinning at once (hosted engine). Default: half
    /// the driver threads, at least 2 (1 with one). `None` picks that
    /// default at build time.
    pub max_spinners: Option<usize>,
}

impl Default for Config {
    // The deprecated field is part of the value.
    #[allow(deprecated)]
    fn default() -> Self {
        Config {
            worker_count: 1,
            worker_ingress_budget: 256,
            process_budget: 64,
            actor_message_budget: 256,
            max_processes: None,
            max_actors: None,
            stack_size: 256 * 1024,
            stack_pool_max: None,
            stack_keep_resident: 16 * 1024,
            stack_release_after: Duration::from_millis(50),
            timeslice: Duration::from_millis(2),
            coop_budget: crate::kernel::coop::DEFAULT_COOP_BUDGET,
            spin_budget_cycles: 100_000,
            max_spinners: None,
        }
    }
}

/// Why a [`Config`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigError {
    /// `worker_count` must be at least 1.
    NoWorkers,
    /// `worker_count` is above [`MAX_WORKERS`].
    TooManyWorkers(usize),
    /// `max_processes`, when set, must be at least 1 and at most
    /// [`MAX_PROCESSES`].
    MaxProcesses(usize),
    /// The deprecated `max_actors`, when set (and `max_processes` is not),
    /// must be at least 1 and at most [`MAX_PROCESSES`].
    #[deprecated(note = "max_actors was renamed to max_processes, checked as ConfigError::MaxProcesses")]
    MaxActors(usize),
    /// `stack_size` is below the smallest the runtime's host accepts.
    StackTooSmall {
        /// The configured size.
        size: usize,
        /// The smallest size accepted.
        minimum: usize,
    },
}

impl core::fmt::Display for ConfigError {
    #[allow(deprecated)]
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::NoWorkers => f.write_str("worker_count must be at least 1"),
            ConfigError::TooManyWorkers(n) => {
                write!(f, "worker_count {n} out of range: use 1 ..= {MAX_WORKERS}")
            }
            ConfigError::MaxProcesses(n) => {
                write!(f, "max_processes {n} out of range: use 1 ..= {MAX_PROCESSES}")
            }
            ConfigError::MaxActors(n) => write!(
                f,
                "max_actors {n} out of range: use 1 ..= {MAX_PROCESSES} (and set max_processes, its new name)"
            ),
            ConfigError::StackTooSmall { size, minimum } => write!(
                f,
                "stack_size {size} too small: use at least {minimum} bytes ({} KiB)",
                minimum.div_ceil(1024)
            ),
        }
    }
}
impl core::error::Error for ConfigError {}

/// The most workers a runtime may have. Each costs a driver (an OS thread
/// under the hosted engine) and two ingress rings of
/// [`WAKE_RING_CAPACITY`](crate::kernel::ring::WAKE_RING_CAPACITY) entries.
pub const MAX_WORKERS: usize = 1024;

/// The most processes a runtime can hold at once: the pid index space,
/// 2^32 − 1 = 4,294,967,295 (a pid's index is a `u32`, and index
/// `u32::MAX` is the wake queues' end-of-list marker), handler actors
/// included. This is the limit when `Config::max_processes` is `None`;
/// memory for the slab is taken as it grows, and a segment that cannot be
/// allocated fails that spawn with `SpawnError::OutOfMemory`, never an
/// abort.
pub const MAX_PROCESSES: usize = crate::kernel::segments::SEGMENTS_MAX_LEN;

/// The old name of [`MAX_PROCESSES`].
#[deprecated(note = "renamed to MAX_PROCESSES: it counts processes and handler actors alike")]
pub const MAX_ACTORS: usize = MAX_PROCESSES;

/// The smallest `stack_size` the core accepts from any host (a bare-metal
/// host, which does not unwind, needs no more): room for the
/// process entry, the switch and the exit path, with margin. Hosts may ask
/// for more ([`Config::validate_with_min_stack`]); see `Config::stack_size`.
pub const MIN_BARE_STACK_SIZE: usize = 16 * 1024;

/// The pool bound used when `Config::stack_pool_max` is `None`.
pub const DEFAULT_STACK_POOL_MAX: usize = 16_384;

impl Config {
    /// Checks the configuration against the core's own limits
    /// (`stack_size` at least [`MIN_BARE_STACK_SIZE`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_with_min_stack(MIN_BARE_STACK_SIZE)
    }

    /// Checks the configuration, with `stack_size` at least `min_stack`
    /// (and never below [`MIN_BARE_STACK_SIZE`]): for hosts whose processes need
    /// more stack than the core does.
    pub fn validate_with_min_stack(&self, min_stack: usize) -> Result<(), ConfigError> {
        let minimum = min_stack.max(MIN_BARE_STACK_SIZE);
        if self.worker_count == 0 {
            return Err(ConfigError::NoWorkers);
        }
        if self.worker_count > MAX_WORKERS {
            return Err(ConfigError::TooManyWorkers(self.worker_count));
        }
        let out_of_range = |cap: usize| cap == 0 || cap > MAX_PROCESSES;
        match self.max_processes {
            Some(cap) if out_of_range(cap) => return Err(ConfigError::MaxProcesses(cap)),
            Some(_) => {}
            #[allow(deprecated)]
            None => {
                if let Some(cap) = self.max_actors.filter(|&cap| out_of_range(cap)) {
                    return Err(ConfigError::MaxActors(cap));
                }
            }
        }
        if self.stack_size < minimum {
            return Err(ConfigError::StackTooSmall { size: self.stack_size, minimum });
        }
        Ok(())
    }

    /// The most processes (handler actors included) alive at once:
    /// `max_processes`, or the deprecated `max_actors`, or
    /// [`MAX_PROCESSES`] when neither is set.
    pub fn process_limit(&self) -> usize {
        #[allow(deprecated)]
        let cap = self.max_processes.or(self.max_actors);
        cap.unwrap_or(MAX_PROCESSES).min(MAX_PROCESSES)
    }

    /// The old name of [`process_limit`](Self::process_limit).
    #[deprecated(note = "renamed to process_limit")]
    pub fn actor_limit(&self) -> usize {
        self.process_limit()
    }

    /// `max_spinners`, or its default: half the workers, but at least two
    /// (one when there is one worker). With a single spinner, two workers
    /// handing work back and forth race for the one slot and the loser
    /// parks: on an idle VM a futex wake then costs ~50 µs instead of ~1 µs
    /// (benches/benches/handoff.rs).
    pub fn effective_max_spinners(&self) -> usize {
        self.max_spinners.unwrap_or((self.worker_count / 2).max(2).min(self.worker_count.max(1)))
    }
}
