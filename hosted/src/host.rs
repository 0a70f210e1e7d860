//! The hosted side of the core's hooks: the current worker in a
//! thread-local, panic capture with `catch_unwind`, and the stop sentinel.

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};

use smarm_core::{ExitReason, HostHooks};

/// The payload a stopped process unwinds with. Zero-sized; caught at the
/// process entry and reported as `ExitReason::Stopped`. Raised with
/// `resume_unwind`, so the panic hook never sees (or prints) it.
#[derive(Debug, Clone, Copy)]
pub struct StopSentinel;

thread_local! {
    static CURRENT: Cell<*mut ()> = const { Cell::new(std::ptr::null_mut()) };
}

fn get_current() -> *mut () {
    CURRENT.with(Cell::get)
}

fn set_current(worker: *mut ()) {
    CURRENT.with(|c| c.set(worker));
}

fn run_process(body: Box<dyn FnOnce() + Send>) -> ExitReason {
    match panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(()) => ExitReason::Normal,
        Err(payload) if payload.is::<StopSentinel>() => ExitReason::Stopped,
        Err(payload) => ExitReason::Panicked(panic_message(&*payload)),
    }
}

fn catch_panic(f: &mut dyn FnMut()) -> Option<String> {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => None,
        Err(payload) => Some(panic_message(&*payload)),
    }
}

fn raise_stop() -> ! {
    panic::resume_unwind(Box::new(StopSentinel))
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "Box<dyn Any>".to_owned()
    }
}

/// The hooks every hosted runtime installs.
pub(crate) static HOOKS: HostHooks = HostHooks {
    get_current,
    set_current,
    run_process,
    raise_stop,
    unwinding: std::thread::panicking,
    catch_panic,
    threads: Some(&smarm_core::kernel::host::LINUX_THREADS),
};

/// Installs (once per process image) a panic hook that names the process
/// before the previous hook prints its usual report, whose "thread" line
/// names only the worker's OS thread. Panics outside processes print as
/// before; the stop sentinel never reaches any hook.
pub(crate) fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            // One format for both kinds of actor: kind, pid, worker; the
            // previous hook then prints the message and the location.
            let worker = || smarm_core::current_worker().map_or(String::new(), |w| format!(" on worker {w}"));
            if let Some(pid) = smarm_core::self_pid() {
                eprintln!("smarm: process {pid}{} panicked:", worker());
            } else if let Some(pid) = smarm_core::handling_actor() {
                eprintln!("smarm: handler actor {pid}{} panicked:", worker());
            }
            previous(info);
        }));
    });
}
