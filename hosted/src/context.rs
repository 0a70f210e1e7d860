//! The hosted services of one runtime — its io thread pool and its fd
//! reactor — and the thread-local that lets a process find them.
//!
//! Every thread that drives workers of a runtime (an Engine driver thread,
//! or the thread inside `smarm::run`) enters the runtime's context for the
//! duration. A process always runs on a driver of its runtime, so it finds
//! the context through the thread-local. The thread-local is read afresh at
//! each use and never borrowed across a switch point: the `Arc` is cloned
//! out and the borrow ends before the caller can park.
#![deny(unsafe_code)]

use std::cell::RefCell;
use std::sync::Arc;

use smarm_core::Runtime;
use smarm_platform::Platform;

use crate::io::pool::IoPool;
use crate::io::reactor::Reactor;
use smarm_platform::linux::LinuxPlatform;

/// Default cap on io threads of one runtime.
pub(crate) const DEFAULT_IO_THREADS: usize = 64;

/// One runtime's hosted services.
#[derive(Debug)]
pub(crate) struct HostContext {
    pub(crate) runtime: Runtime,
    pub(crate) platform: Arc<LinuxPlatform>,
    pub(crate) pool: IoPool,
    pub(crate) reactor: Reactor,
}

impl HostContext {
    pub(crate) fn new(runtime: Runtime, platform: Arc<LinuxPlatform>, io_threads: usize) -> Arc<HostContext> {
        Arc::new(HostContext {
            runtime,
            pool: IoPool::new(io_threads),
            reactor: Reactor::new(platform.clone()),
            platform,
        })
    }

    /// Ends one piece of external work (an io job). If that leaves the
    /// runtime finished, every driver is woken so its host notices: an io
    /// job whose process was stopped can be the last thing holding the
    /// runtime open, and its completion is not a wake of any process.
    pub(crate) fn external_done(&self) {
        self.runtime.external_done();
        if self.runtime.is_finished() {
            for token in
                (0..self.runtime.worker_count()).filter_map(|worker| self.runtime.park_token(worker).ok())
            {
                self.platform.unpark(token);
            }
        }
    }

    /// Stops the io threads and joins them. Io
    /// jobs still running (their processes were abandoned) are detached.
    pub(crate) fn shutdown(&self) {
        self.pool.shutdown(self.runtime.external() == 0);
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<HostContext>>> = const { RefCell::new(None) };
}

/// The context of the runtime whose driver runs on this thread.
pub(crate) fn current() -> Option<Arc<HostContext>> {
    CURRENT.try_with(|current| current.borrow().clone()).ok().flatten()
}

/// Makes `context` current on this thread until the guard drops (which
/// restores the previous one).
pub(crate) fn enter(context: Arc<HostContext>) -> EnterGuard {
    let previous = CURRENT.with(|current| current.replace(Some(context)));
    EnterGuard { previous }
}

/// Restores the previous context on drop.
#[derive(Debug)]
pub(crate) struct EnterGuard {
    previous: Option<Arc<HostContext>>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        let _ = CURRENT.try_with(|current| current.replace(previous));
    }
}
