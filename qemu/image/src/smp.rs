//! The secondary cores: started once with PSCI `CPU_ON`, then each waits
//! for a [`Job`] from the boot core, runs it, hands the result back, and
//! waits again.
//!
//! Nothing runs on the secondaries until the first SMP scenario asks for
//! them ([`start_secondaries`]): the single-core scenarios run on the boot
//! core alone, exactly as before.
//!
//! Each core has a [`CoreSlot`] with two one-item mailboxes, `posted`
//! (boot core → secondary) and `finished` (back). A mailbox holds a
//! `Box<Job>` as a raw pointer: whoever swaps a non-null pointer out owns
//! the job, so exactly one core touches it at a time. Every store into a
//! mailbox is followed by the board's wake SGI at the core that takes it
//! out, and every taker re-checks its mailbox after each idle wait, so a
//! job is never missed (the same publish-then-raise / clear-then-recheck
//! order as the board's module doc describes).
//!
//! Invariant: a core's `posted` mailbox is written only by the boot core and
//! emptied only by that core; `finished` the other way round.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use smarm_arch::aarch64_bare::{self, CoreBoot};
use smarm_platform::bare::Board;
use smarm_platform::Nanos;

use crate::board;
use crate::board::{this_core, CORES};

/// How long the boot core waits for a started core to check in.
const CHECK_IN_TIMEOUT: Nanos = 1_000_000_000;

/// Work for one core, and the place its result comes back in.
pub struct Job {
    work: Option<Box<dyn FnOnce() -> Result<(), String> + Send>>,
    result: Option<Result<(), String>>,
}

/// One core's state, as the boot core and that core share it.
struct CoreSlot {
    /// Set by the core once it runs Rust and its GIC state is set up.
    online: AtomicBool,
    /// A job for the core (null: none).
    posted: AtomicPtr<Job>,
    /// A job the core has run, result filled in (null: none).
    finished: AtomicPtr<Job>,
}

static CORE_SLOTS: [CoreSlot; CORES] = [const {
    CoreSlot {
        online: AtomicBool::new(false),
        posted: AtomicPtr::new(ptr::null_mut()),
        finished: AtomicPtr::new(ptr::null_mut()),
    }
}; CORES];

/// Set once every secondary has checked in.
static STARTED: AtomicBool = AtomicBool::new(false);

extern "C" {
    // From linker/qemu-virt.ld: the secondaries' stack region, and (as
    // symbol *addresses*) its layout. Only their addresses are used.
    static __secondary_stacks_start: u8;
    static __secondary_stacks_end: u8;
    static __secondary_cores: u8;
    static __secondary_exception_stack_size: u8;
    static __secondary_stack_size: u8;
}

/// Starts cores 1..[`CORES`] with PSCI (once; later calls return at once)
/// and waits until each has checked in. Boot core only.
pub fn start_secondaries() -> Result<(), String> {
    debug_assert_eq!(this_core(), 0, "secondaries are started from the boot core");
    // Relaxed: only the boot core reads or writes it.
    if STARTED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let start = ptr::addr_of!(__secondary_stacks_start) as usize;
    let end = ptr::addr_of!(__secondary_stacks_end) as usize;
    let cores = ptr::addr_of!(__secondary_cores) as usize;
    let exception_size = ptr::addr_of!(__secondary_exception_stack_size) as usize;
    let stack_size = ptr::addr_of!(__secondary_stack_size) as usize;
    let per_core = exception_size + stack_size;
    if cores != CORES - 1
        || end - start != cores * per_core
        || !per_core.is_multiple_of(16)
        || !start.is_multiple_of(16)
    {
        return Err(format!(
            "the linker script reserves stacks for {cores} secondaries of {per_core} bytes \
             at {start:#x}..{end:#x}; the image wants {} 16-byte-aligned ones",
            CORES - 1
        ));
    }
    for core in 1..CORES {
        let base = start + (core - 1) * per_core;
        let boot: &'static CoreBoot = Box::leak(Box::new(CoreBoot {
            exception_stack_top: base + exception_size,
            stack_top: base + per_core,
            core,
        }));
        // SAFETY: 1. both tops are 16-byte aligned (checked above) and lie
        //    in core `core`'s own share of the linker script's
        //    `.secondary_stacks` region, which nothing else uses; the core
        //    is started once (STARTED);
        // 2. `smarm_bare_secondary_main` shares only atomics (the slots,
        //    the board) and the locked heap with the other cores;
        // 3. QEMU `virt` without secure/virtualization advertises PSCI
        //    over HVC, and qemu/run-bare.sh runs it that way.
        // Core `core`'s MPIDR is Aff0 = `core` (QEMU `virt`, GICv2).
        unsafe { aarch64_bare::start_core(core as u64, boot) }
            .map_err(|error| format!("starting core {core} with PSCI CPU_ON: {error}"))?;
    }
    let give_up_at = board().now() + CHECK_IN_TIMEOUT;
    for (core, slot) in CORE_SLOTS.iter().enumerate().skip(1) {
        // Acquire pairs with the Release in `smarm_bare_secondary_main`.
        while !slot.online.load(Ordering::Acquire) {
            if board().now() >= give_up_at {
                return Err(format!("core {core} was started but never checked in"));
            }
            board().wait_for_event();
        }
    }
    STARTED.store(true, Ordering::Relaxed);
    Ok(())
}

/// Hands `work` to core `core` (a started secondary that has no job).
pub fn post(core: usize, work: Box<dyn FnOnce() -> Result<(), String> + Send>) -> Result<(), String> {
    let slot = CORE_SLOTS.get(core).filter(|_| core != 0).ok_or(format!("no secondary core {core}"))?;
    // Acquire: see `start_secondaries`.
    if !slot.online.load(Ordering::Acquire) {
        return Err(format!("core {core} is not running"));
    }
    let job = Box::into_raw(Box::new(Job { work: Some(work), result: None }));
    // Release: the job's contents are visible to the core that takes it.
    if slot.posted.compare_exchange(ptr::null_mut(), job, Ordering::Release, Ordering::Relaxed).is_err() {
        // SAFETY: `job` came from `Box::into_raw` just above and was not
        // published (the exchange failed).
        drop(unsafe { Box::from_raw(job) });
        return Err(format!("core {core} has a job already"));
    }
    board().wake_core(core);
    Ok(())
}

/// Waits until core `core` has run the job [`post`]ed to it and returns the
/// job's result; gives up at `give_up_at` (platform nanoseconds).
pub fn wait_for(core: usize, give_up_at: Nanos) -> Result<(), String> {
    let slot = CORE_SLOTS.get(core).ok_or(format!("no core {core}"))?;
    loop {
        // Acquire pairs with the Release in `smarm_bare_secondary_main`:
        // the result written there is visible here.
        let job = slot.finished.swap(ptr::null_mut(), Ordering::Acquire);
        if !job.is_null() {
            // SAFETY: a non-null `finished` is a `Box<Job>` the core gave
            // back and no longer touches; the swap made us its only owner.
            let job = unsafe { Box::from_raw(job) };
            return job.result.unwrap_or_else(|| Err(format!("core {core} returned its job unrun")));
        }
        if board().now() >= give_up_at {
            return Err(format!("core {core} did not finish its job in time"));
        }
        board().wait_for_event();
    }
}

/// What each secondary core runs, on its own stacks, once `_start`'s
/// secondary path has set it up (MMU, FP/SIMD, vectors): set up its GIC
/// state, check in, then run posted jobs forever.
#[no_mangle]
pub extern "C" fn smarm_bare_secondary_main(boot: &'static CoreBoot) -> ! {
    let core = this_core();
    if core != boot.core {
        // A panic outside any process ends the image with a report.
        panic!("core {core} started with the boot block of core {}", boot.core);
    }
    board().init_core();
    let slot = &CORE_SLOTS[core];
    // Release: this core's set-up happens before the boot core relies on it.
    slot.online.store(true, Ordering::Release);
    board().wake_core(0);
    loop {
        // Acquire pairs with the Release in `post`.
        let job = slot.posted.swap(ptr::null_mut(), Ordering::Acquire);
        if job.is_null() {
            board().wait_for_event();
            continue;
        }
        // SAFETY: a non-null `posted` is a `Box<Job>` from `post`; the swap
        // made this core its only user until it is stored in `finished`.
        let job_ref = unsafe { &mut *job };
        let result = match job_ref.work.take() {
            Some(work) => work(),
            None => Err(format!("core {core} was posted an empty job")),
        };
        job_ref.result = Some(result);
        // Release: the result is visible to the boot core's `wait_for`.
        slot.finished.store(job, Ordering::Release);
        board().wake_core(0);
    }
}
