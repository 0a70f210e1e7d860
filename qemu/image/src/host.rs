//! The bare-metal host of the core runtime: the [`HostHooks`] for cores
//! without unwinding, the [`Platform`] handle the runtimes hold, the boot
//! loop that drives a [`SingleThreadRuntime`] until no process is live, and
//! the per-core loop that drives one [`Worker`] of an SMP runtime.
//!
//! - **Current worker**: per core, in the core's own `TPIDR_EL1`
//!   ([`aarch64_bare::thread_pointer`]); the boot code clears it on every
//!   core before Rust runs.
//! - **Process bodies** run as plain calls: there is nothing to catch, a
//!   returning body is `ExitReason::Normal`. A panicking one never returns:
//!   the image's panic handler (`fault.rs`) abandons it with
//!   `ExitReason::Panicked`.
//! - **Stops** cannot unwind either: `raise_stop` abandons the process with
//!   `ExitReason::Stopped`. Nothing on its stack is dropped (see the README's
//!   panic policy for what that leaks).
//! - **Idle**: the driver parks on the platform, whose bare backend waits in
//!   [`Board::wait_for_event`](smarm_platform::bare::Board::wait_for_event);
//!   [`HostPlatform::park`] hands the park's
//!   deadline to the board first, so the wait sleeps in WFI until the next
//!   timer (capped at `MAX_IDLE_WAIT`) instead of spinning.
//! - **Cross-core wakes**: a core parks with its token recorded in
//!   [`PARKED_ON`]; [`HostPlatform::unpark`] sets the token (the platform's
//!   `unpark`) and then raises the board's wake SGI at every *other* core
//!   parked on that token. The two sides are a store-buffering pair with a
//!   `SeqCst` fence on each side: the parker records itself, fences, then
//!   checks the token; the waker sets the token, fences, then reads the
//!   record. At least one of them sees the other's store, so either the
//!   parker finds the token set without sleeping or the waker raises the
//!   SGI (which ends a WFI that has not even started yet: it stays pending).
//!
//! Invariant: the current-worker pointer is non-null exactly while a
//! `try_tick` pass runs (the core sets and restores it around each pass);
//! the hooks never keep it across a switch, they read it afresh. A process
//! never changes cores: its worker is pinned to one.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use core::sync::atomic::{fence, AtomicPtr, Ordering};

use smarm_arch::aarch64_bare;
use smarm_core::{
    Config, Drivers, ExitReason, HostHooks, Runtime, RuntimeParts, SingleThreadRuntime, Worker,
};
use smarm_platform::{
    Event, Interest, Nanos, OverflowEvidence, ParkToken, Platform, PollError, RawFd, Stack, StackError,
};

use crate::board::{this_core, CORES};
use crate::{board, PLATFORM};

fn get_current() -> *mut () {
    // The calling core's register: the worker it is driving (null between
    // passes). Nothing to order: only this core writes or reads it.
    aarch64_bare::thread_pointer() as *mut ()
}

fn set_current(worker: *mut ()) {
    aarch64_bare::set_thread_pointer(worker as usize);
}

/// Per core: the token its driver is parked on (null when not parked).
/// Read by [`HostPlatform::unpark`] on other cores to decide whom to wake.
static PARKED_ON: [AtomicPtr<ParkToken>; CORES] = [const { AtomicPtr::new(core::ptr::null_mut()) }; CORES];

fn run_process(body: Box<dyn FnOnce() + Send>) -> ExitReason {
    // No unwinding: a panic does not come back here (the panic handler
    // abandons the process), so reaching the end means a normal return.
    body();
    ExitReason::Normal
}

fn raise_stop() -> ! {
    // Called at an observation point of the running process, so there is a
    // process to abandon and the call does not return.
    smarm_core::abandon_current(ExitReason::Stopped);
    unreachable!("raise_stop outside a process");
}

/// The hooks every runtime in the image installs (the core keeps the first
/// set it is given; every runtime passes this same one).
/// Nothing unwinds on this host.
fn unwinding() -> bool {
    false
}

static HOOKS: HostHooks = HostHooks {
    get_current,
    set_current,
    run_process,
    raise_stop,
    unwinding,
    // A handler actor's work runs on a stack of its own, abandoned if it
    // panics (see `handler`).
    catch_panic: crate::handler::catch_panic,
    // No plain threads here: every core drives workers.
    threads: None,
};

/// The [`Platform`] the runtimes hold: forwards to the image's static
/// [`PLATFORM`] (the runtime wants an `Arc<dyn Platform>`, the console and
/// the fault handlers want the board without one), and brackets `park` with
/// the board's idle deadline.
#[derive(Debug)]
pub struct HostPlatform;

impl Platform for HostPlatform {
    fn name(&self) -> &'static str {
        PLATFORM.name()
    }

    fn now(&self) -> Nanos {
        PLATFORM.now()
    }

    fn allocate_stack(&self, size: usize) -> Result<Stack, StackError> {
        PLATFORM.allocate_stack(size)
    }

    unsafe fn free_stack(&self, stack: Stack) {
        // SAFETY: our caller's contract is the same one, and every stack
        // this platform hands out came from `PLATFORM`.
        unsafe { PLATFORM.free_stack(stack) }
    }

    fn trim_stack(&self, stack: &Stack, keep_top_bytes: usize) {
        PLATFORM.trim_stack(stack, keep_top_bytes);
    }

    fn set_stack_tag(&self, stack: &Stack, tag: u64) {
        PLATFORM.set_stack_tag(stack, tag);
    }

    fn report_overflow(&self, stack: &Stack, tag: u64, evidence: OverflowEvidence) -> ! {
        PLATFORM.report_overflow(stack, tag, evidence)
    }

    fn park(&self, token: &ParkToken, deadline: Option<Nanos>) {
        let core = this_core();
        board().set_idle_deadline(deadline);
        // Relaxed + the fence: the parker's half of the pair in the module
        // doc. The fence orders this store before the token checks inside
        // `PLATFORM.park`.
        PARKED_ON[core].store(token as *const ParkToken as *mut ParkToken, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        PLATFORM.park(token, deadline);
        // Relaxed: a waker that still sees the record sends one SGI too
        // many, which only ends one WFI early.
        PARKED_ON[core].store(core::ptr::null_mut(), Ordering::Relaxed);
        board().set_idle_deadline(None);
    }

    fn unpark(&self, token: &ParkToken) {
        PLATFORM.unpark(token);
        // The waker's half of the pair: the token store (Release, inside
        // `PLATFORM.unpark`) is ordered before the reads of the records.
        fence(Ordering::SeqCst);
        let me = this_core();
        let token: *const ParkToken = token;
        for (core, parked) in PARKED_ON.iter().enumerate() {
            // Relaxed: ordered by the fence above (see the module doc).
            if core != me && core::ptr::eq(parked.load(Ordering::Relaxed), token) {
                board().wake_core(core);
            }
        }
    }

    fn poll_register(&self, fd: RawFd, token: u64, interest: Interest) -> Result<(), PollError> {
        PLATFORM.poll_register(fd, token, interest)
    }

    fn poll_modify(&self, fd: RawFd, token: u64, interest: Interest) -> Result<(), PollError> {
        PLATFORM.poll_modify(fd, token, interest)
    }

    fn poll_deregister(&self, fd: RawFd) -> Result<(), PollError> {
        PLATFORM.poll_deregister(fd)
    }

    fn poll(&self, events: &mut [Event], timeout: Option<Nanos>) -> Result<usize, PollError> {
        PLATFORM.poll(events, timeout)
    }
}

/// The configuration the scenarios run with: one worker, a slab of 4,096,
/// and 32 KiB stacks, so 1,000 live processes take 32 MiB of the 64 MiB
/// heap (canary stacks, no guard pages: see the README).
pub fn config() -> Config {
    Config { stack_size: 32 * 1024, stack_pool_max: Some(1024), ..Config::default() }
}

/// A fresh runtime of `config.worker_count` workers, one driver (core)
/// each: [`Drivers::PerWorker`], so each worker has its own park token.
pub fn per_core_runtime(config: Config) -> Result<RuntimeParts, String> {
    let platform: Arc<dyn Platform> = Arc::new(HostPlatform);
    RuntimeParts::new(config, platform, &HOOKS, Drivers::PerWorker)
        .map_err(|error| format!("runtime build failed: {error}"))
}

/// A fresh runtime on the bare host, driven from the calling (boot) code.
pub fn runtime(config: Config) -> Result<SingleThreadRuntime, String> {
    let platform: Arc<dyn Platform> = Arc::new(HostPlatform);
    let parts = RuntimeParts::new(config, platform, &HOOKS, Drivers::Single)
        .map_err(|error| format!("runtime build failed: {error}"))?;
    Ok(SingleThreadRuntime::new(parts))
}

/// The boot loop: `try_tick` until no process is live; when a round did
/// nothing, park on the platform until the next timer deadline.
///
/// With one driver (this runtime's only one) and interrupts masked,
/// nothing outside a pass can wake a process, so a round that did nothing with no timer pending and live
/// processes is a deadlock: reported as an error instead of sleeping until
/// the runner's timeout.
pub fn drive(runtime: &mut SingleThreadRuntime) -> Result<(), String> {
    let handle: Runtime = runtime.runtime().clone();
    let platform = handle.platform().clone();
    loop {
        let did = runtime.try_tick();
        crate::fault::end_of_pass();
        if did {
            continue;
        }
        if handle.is_finished() {
            return Ok(());
        }
        let Some(deadline) = runtime.next_deadline() else {
            return Err(format!(
                "deadlock: {} processes live, none ready and no timer pending",
                handle.live()
            ));
        };
        // Worker 0 exists: a runtime has at least one worker.
        if let Ok(token) = handle.park_token(0) {
            platform.park(token, Some(deadline));
        }
    }
}

/// One core's driver loop for one worker of a [`Drivers::PerWorker`]
/// runtime: `try_tick` until no process is live anywhere; when a pass did
/// nothing, park on the worker's own token until its next timer deadline
/// (or `give_up_at`, if sooner), or until another core wakes it.
///
/// Unlike [`drive`], "nothing ready, no timer" is not a deadlock here:
/// another core may wake this worker. The driver that sees the runtime
/// finished unparks every worker, so the others see it too instead of
/// sleeping on. `give_up_at` (platform nanoseconds) is the watchdog the
/// boot core uses so that a lost wake fails the scenario instead of
/// hanging until the runner's timeout.
pub fn drive_worker(worker: &mut Worker, handle: &Runtime, give_up_at: Option<Nanos>) -> Result<(), String> {
    let platform = handle.platform().clone();
    let token = handle.park_token(worker.id()).map_err(|e| format!("{e}"))?;
    loop {
        let did = worker.try_tick();
        crate::fault::end_of_pass();
        if did {
            continue;
        }
        if handle.is_finished() {
            for token in (0..handle.worker_count()).filter_map(|other| handle.park_token(other).ok()) {
                platform.unpark(token);
            }
            return Ok(());
        }
        let deadline = match (worker.next_deadline(), give_up_at) {
            (Some(next), Some(limit)) => Some(next.min(limit)),
            (next, limit) => next.or(limit),
        };
        if give_up_at.is_some_and(|limit| platform.now() >= limit) {
            return Err(format!(
                "watchdog: worker {} on core {} gave up with {} processes live",
                worker.id(),
                this_core(),
                handle.live()
            ));
        }
        platform.park(token, deadline);
    }
}
