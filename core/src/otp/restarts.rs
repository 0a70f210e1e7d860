//! How many children supervisors restarted, counted per worker: the figure
//! `ActorStats::restarts` and [`Runtime::restarts`] report.
//!
//! The counts live in one of the runtime's extension slots, made on first
//! use; a restart is charged to the worker of the supervisor that made it.

use alloc::boxed::Box;
use alloc::sync::Arc;

use crate::kernel::atomic::{AtomicU64, Ordering};
use crate::kernel::error::NoSuchWorker;
use crate::kernel::process;
use crate::kernel::runtime::{Runtime, Shared};

/// Restarts made by supervisors running on each worker.
struct RestartCounts {
    per_worker: Box<[AtomicU64]>,
}

/// The runtime's restart counts.
fn counts(shared: &Shared) -> Arc<RestartCounts> {
    shared.extension(|| RestartCounts {
        per_worker: shared.workers.iter().map(|_| AtomicU64::new(0)).collect(),
    })
}

/// Counts one restart on the calling process's worker (nothing outside a
/// process).
pub(crate) fn count_restart() {
    let (Some(runtime), Some(worker)) = (process::current_runtime(), process::current_worker()) else {
        return;
    };
    if let Some(count) = counts(&runtime.shared).per_worker.get(worker) {
        // Relaxed: a statistic, not synchronisation.
        count.fetch_add(1, Ordering::Relaxed);
    }
}

impl Runtime {
    /// Supervisor restarts made on worker `worker` so far.
    pub fn restarts(&self, worker: usize) -> Result<u64, NoSuchWorker> {
        let count = counts(&self.shared).per_worker.get(worker).map(|count| count.load(Ordering::Relaxed));
        count.ok_or(NoSuchWorker(worker))
    }
}
