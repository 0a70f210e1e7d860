//! Helpers shared by the integration tests: how a scenario is driven, and
//! a trace recorder.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use smarm::Config;

pub mod fork;

/// How a test is driven: every worker from this thread, deterministically
/// (`run_with`), or one OS thread per worker (the multi-threaded Engine).
#[derive(Debug, Clone, Copy)]
pub enum Drive {
    Single(usize),
    Threads(usize),
}

impl Drive {
    pub fn workers(self) -> usize {
        match self {
            Drive::Single(n) | Drive::Threads(n) => n,
        }
    }

    pub fn run<R: Send + 'static>(self, root: impl FnOnce() -> R + Send + 'static) -> R {
        match self {
            Drive::Single(n) => smarm::run_with(Config { worker_count: n, ..Config::default() }, root),
            Drive::Threads(n) => {
                let engine = smarm::Engine::builder().workers(n).build().expect("engine starts");
                engine.block_on(root).unwrap_or_else(|e| panic!("engine: {e}"))
            }
        }
    }
}

/// Declares one `#[test]` per way of driving a scenario `fn(Drive)`: one
/// worker, four workers on one thread, four OS threads.
#[macro_export]
macro_rules! drive_tests {
    ($scenario:ident => $one:ident, $four_workers:ident, $four_threads:ident) => {
        #[test]
        fn $one() {
            $scenario($crate::common::Drive::Single(1));
        }
        #[test]
        fn $four_workers() {
            $scenario($crate::common::Drive::Single(4));
        }
        #[test]
        fn $four_threads() {
            $scenario($crate::common::Drive::Threads(4));
        }
    };
}

/// The worker after the caller's: another worker when there are several.
pub fn next_worker(workers: usize) -> usize {
    (smarm::current_worker().unwrap() + 1) % workers
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub type Trace = Arc<Mutex<Vec<String>>>;

pub fn record(t: &Trace, event: impl Into<String>) {
    t.lock().unwrap().push(event.into());
}
