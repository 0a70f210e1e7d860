//! Panic isolation for handler actors without unwinding.
//!
//! A hosted worker catches a panicking handler with `catch_unwind`. This
//! image has no unwinding, so [`catch_panic`] runs the handler's work on a
//! stack of its own: if it panics, the panic handler records the message
//! and switches straight back to the worker (see [`abandon`]), and the
//! frames left on that stack are abandoned — whatever they owned is leaked,
//! never dropped, and the actor is poisoned by the core as on any host.
//! Each core keeps one such stack, reused by every handler it runs.

use alloc::string::String;
use core::cell::UnsafeCell;
use core::ptr;

use smarm_arch::{Arch, Context, Native};
use smarm_platform::{Platform, Stack};

use crate::board::{this_core, CORES};
use crate::PLATFORM;

/// Bytes of each core's handler stack.
const HANDLER_STACK: usize = 64 * 1024;

/// One core's state for running handlers on their own stack.
struct Catch {
    /// The worker's context while a handler runs.
    driver: Context,
    /// The handler stack's context.
    handler: Context,
    /// The work to run, for the handler stack's entry.
    job: Option<*mut dyn FnMut()>,
    /// A handler is running on the handler stack.
    active: bool,
    /// Why it was abandoned, if it panicked.
    panicked: Option<String>,
    stack: Option<Stack>,
}

struct PerCore([UnsafeCell<Catch>; CORES]);

// SAFETY: core `k` touches only entry `k` (every access indexes by
// `this_core()`), and a core runs one thing at a time.
unsafe impl Sync for PerCore {}

static CATCH: PerCore = PerCore(
    [const {
        UnsafeCell::new(Catch {
            driver: Context::empty(),
            handler: Context::empty(),
            job: None,
            active: false,
            panicked: None,
            stack: None,
        })
    }; CORES],
);

fn this() -> *mut Catch {
    CATCH.0[this_core()].get()
}

/// Runs `f` on this core's handler stack; `Some(message)` if it panicked
/// (and was abandoned).
pub fn catch_panic(f: &mut dyn FnMut()) -> Option<String> {
    let catch = this();
    // SAFETY: this core's own entry (see `PerCore`); no reference to it
    // outlives this block or the switches below.
    unsafe {
        if (*catch).active {
            // Nested (a handler's work running more work): already caught.
            f();
            return None;
        }
        if (*catch).stack.is_none() {
            match PLATFORM.allocate_stack(HANDLER_STACK) {
                Ok(stack) => (*catch).stack = Some(stack),
                // No stack to spare: run in place, uncaught.
                Err(_) => {
                    f();
                    return None;
                }
            }
        }
        let top = (*catch).stack.as_ref().map_or(ptr::null_mut(), |s| s.top());
        // The borrow's lifetime is erased: the pointer is used only while
        // this call (which holds `f`) is suspended in the switch below.
        let job: *mut (dyn FnMut() + '_) = f;
        (*catch).job = Some(core::mem::transmute::<*mut (dyn FnMut() + '_), *mut dyn FnMut()>(job));
        (*catch).active = true;
        (*catch).panicked = None;
        // SAFETY: `top` is the 16-aligned top of a stack we own and nothing
        // runs on; `entry` never returns.
        (*catch).handler = Native::init_context(top, entry, 0);
        // SAFETY: `driver` is ours to save into; `handler` was just made.
        Native::resume(ptr::addr_of_mut!((*catch).driver), ptr::addr_of!((*catch).handler));
        (*catch).active = false;
        (*catch).job = None;
        (*catch).panicked.take()
    }
}

/// The handler stack's entry: runs the job, then switches back.
unsafe extern "C" fn entry(_: usize) -> ! {
    let catch = this();
    // SAFETY: set by `catch_panic`, which is suspended until we switch back.
    unsafe {
        if let Some(job) = (*catch).job {
            (*job)();
        }
        Native::suspend(ptr::addr_of_mut!((*catch).handler), ptr::addr_of!((*catch).driver));
    }
    unreachable!("an abandoned handler stack was resumed")
}

/// Whether a handler is running on this core's handler stack.
pub fn in_handler() -> bool {
    // SAFETY: this core's own entry.
    unsafe { (*this()).active }
}

/// Abandons the running handler with `message`: back to the worker, never
/// to return. Called by the panic handler when [`in_handler`].
pub fn abandon(message: String) -> ! {
    let catch = this();
    // SAFETY: this core's own entry; `driver` was saved by `catch_panic`,
    // which is suspended until this switch.
    unsafe {
        (*catch).panicked = Some(message);
        Native::suspend(ptr::addr_of_mut!((*catch).handler), ptr::addr_of!((*catch).driver));
    }
    unreachable!("an abandoned handler stack was resumed")
}
