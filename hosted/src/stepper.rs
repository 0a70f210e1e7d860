//! A single-threaded host driven pass by pass, for tests and for programs
//! that embed smarm in a loop of their own.

use std::sync::Arc;

use smarm_core::{Config, Drivers, Runtime, SingleThreadRuntime};

use crate::context::{self, EnterGuard, HostContext};
use crate::RunError;

/// Every worker of a runtime, advanced from the calling thread only when
/// asked: [`try_tick`](Stepper::try_tick) makes one pass of each worker in
/// id order. Deterministic, so a test can count passes.
///
/// ```
/// let mut stepper = smarm::Stepper::new(smarm::Config { worker_count: 2, ..Default::default() }).unwrap();
/// let handle = stepper.runtime().spawn(|| 6 * 7).unwrap();
/// while stepper.try_tick() {}
/// assert_eq!(handle.join().unwrap(), 42);
/// ```
pub struct Stepper {
    single: SingleThreadRuntime,
    context: Arc<HostContext>,
    _entered: EnterGuard,
}

impl std::fmt::Debug for Stepper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stepper").field("workers", &self.single.runtime().worker_count()).finish()
    }
}

impl Stepper {
    /// Builds a runtime of `config.worker_count` workers, all driven from
    /// this thread.
    pub fn new(config: Config) -> Result<Stepper, RunError> {
        let (parts, platform) = crate::build_parts(config, Drivers::Single)?;
        let context = HostContext::new(parts.runtime.clone(), platform, context::DEFAULT_IO_THREADS);
        let entered = context::enter(context.clone());
        Ok(Stepper { single: SingleThreadRuntime::new(parts), context, _entered: entered })
    }

    /// The runtime handle.
    pub fn runtime(&self) -> &Runtime {
        self.single.runtime()
    }

    /// Whether a wake, a spawn from outside or a handler actor's message
    /// waits for some worker's next pass (`Worker::has_ingress`).
    pub fn has_ingress(&self) -> bool {
        self.single.has_ingress()
    }

    /// One pass of every worker, in id order. Returns whether any did work.
    pub fn try_tick(&mut self) -> bool {
        self.single.try_tick()
    }

    /// Runs until nothing is live and no io is outstanding.
    pub fn run(&mut self) {
        self.single.run();
    }
}

impl Drop for Stepper {
    fn drop(&mut self) {
        self.single.runtime().close();
        self.context.shutdown();
    }
}
