//! The bare-metal host of the core runtime: the [`HostHooks`] for one core
//! without unwinding, the [`Platform`] handle the runtime holds, and the
//! boot loop that drives a [`SingleThreadRuntime`] until no process is live.
//!
//! - **Current worker**: one core, so the pointer lives in a static
//!   `AtomicPtr` (a per-core array once there are more cores).
//! - **Process bodies** run as plain calls: there is nothing to catch, a
//!   returning body is `Outcome::Normal`. A panicking one never returns:
//!   the image's panic handler (`fault.rs`) abandons it with
//!   `Outcome::Panicked`.
//! - **Stops** cannot unwind either: `raise_stop` abandons the process with
//!   `Outcome::Stopped`. Nothing on its stack is dropped (see the README's
//!   panic policy for what that leaks).
//! - **Idle**: the driver parks on the platform, whose bare backend waits in
//!   [`Board::wait_for_event`]; [`HostPlatform::park`] hands the park's
//!   deadline to the board first, so the wait sleeps in WFI until the next
//!   timer (capped at `MAX_IDLE_WAIT`) instead of spinning.
//!
//! Invariant: the current-worker pointer is non-null exactly while a
//! `try_tick` pass runs (the core sets and restores it around each pass);
//! the hooks never keep it across a switch, they read it afresh.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use core::sync::atomic::{AtomicPtr, Ordering};

use smarm_core::{Config, Drivers, HostHooks, Outcome, Runtime, RuntimeParts, SingleThreadRuntime};
use smarm_platform::{Event, Interest, Nanos, ParkToken, Platform, PollError, RawFd, Stack, StackError};

use crate::{board, PLATFORM};

/// The running worker's core, as the runtime registered it (null between
/// passes).
static CURRENT: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

fn get_current() -> *mut () {
    // Relaxed: one core writes and reads it, in program order; it publishes
    // nothing (the core reaches the worker through it only on this core).
    CURRENT.load(Ordering::Relaxed)
}

fn set_current(worker: *mut ()) {
    // Relaxed: see `get_current`.
    CURRENT.store(worker, Ordering::Relaxed);
}

fn run_process(body: Box<dyn FnOnce() + Send>) -> Outcome {
    // No unwinding: a panic does not come back here (the panic handler
    // abandons the process), so reaching the end means a normal return.
    body();
    Outcome::Normal
}

fn raise_stop() -> ! {
    // Called at an observation point of the running process, so there is a
    // process to abandon and the call does not return.
    smarm_core::abandon_current(Outcome::Stopped);
    unreachable!("raise_stop outside a process");
}

/// The hooks every runtime in the image installs (the core keeps the first
/// set it is given; every runtime passes this same one).
static HOOKS: HostHooks = HostHooks { get_current, set_current, run_process, raise_stop };

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

    fn park(&self, token: &ParkToken, deadline: Option<Nanos>) {
        board().set_idle_deadline(deadline);
        PLATFORM.park(token, deadline);
        board().set_idle_deadline(None);
    }

    fn unpark(&self, token: &ParkToken) {
        PLATFORM.unpark(token);
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
    Config { max_actors: 4096, stack_size: 32 * 1024, stack_pool_max: 1024, ..Config::default() }
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
/// On one core with interrupts masked nothing outside a pass can wake a
/// process, so a round that did nothing with no timer pending and live
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
        platform.park(handle.park_token(0), Some(deadline));
    }
}
