//! The explicit single-thread host: one thread advances every worker in
//! turn, deterministically. Used by tests, by `smarm::run`, and by the
//! bare-metal boot loop.

use alloc::vec::Vec;

use crate::kernel::runtime::{Runtime, RuntimeParts};
use crate::kernel::worker::Worker;

/// Drives all workers of a runtime from the calling thread.
///
/// Order is deterministic: each round calls `try_tick` on worker 0, 1, …
/// in turn, and each worker runs its ready queue first-in first-out.
#[derive(Debug)]
pub struct SingleThreadRuntime {
    runtime: Runtime,
    workers: Vec<Worker>,
}

impl SingleThreadRuntime {
    /// Takes ownership of the runtime's workers. Build the parts with
    /// `Drivers::Single` so every wake signals the one token this host
    /// sleeps on.
    pub fn new(parts: RuntimeParts) -> SingleThreadRuntime {
        SingleThreadRuntime { runtime: parts.runtime, workers: parts.workers }
    }

    /// The runtime handle.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Whether any worker has ingress waiting for its next pass (wakes,
    /// spawns, handler actors' mail): [`Worker::has_ingress`].
    pub fn has_ingress(&self) -> bool {
        self.workers.iter().any(Worker::has_ingress)
    }

    /// One round: one pass of every worker. Returns whether any did work.
    pub fn try_tick(&mut self) -> bool {
        let mut did = false;
        for worker in &mut self.workers {
            did |= worker.try_tick();
        }
        did
    }

    /// Earliest timer deadline across the workers.
    pub fn next_deadline(&self) -> Option<u64> {
        self.workers.iter().filter_map(Worker::next_deadline).min()
    }

    /// Runs until no process is live and no external work is outstanding.
    /// When nothing is ready it sleeps on the platform until the next timer
    /// deadline or a wake from another thread (io completions, external
    /// senders).
    ///
    /// A process that parks with nothing left that could wake it keeps the
    /// runtime open forever: this loop does not look for deadlocks. A host
    /// that wants a report calls
    /// [`Runtime::find_deadlock`](crate::kernel::runtime::Runtime::find_deadlock)
    /// where its driver would sleep with no deadline (the hosted `run`
    /// does).
    pub fn run(&mut self) {
        loop {
            if self.try_tick() {
                continue;
            }
            if self.runtime.is_finished() {
                return;
            }
            // A wake or spawn pushed after this round's drain has also
            // signalled the token, so the park below returns at once.
            let deadline = self.next_deadline();
            let platform = self.runtime.platform().clone();
            // Worker 0 exists: a runtime has at least one worker.
            if let Ok(token) = self.runtime.park_token(0) {
                platform.park(token, deadline);
            }
        }
    }
}
