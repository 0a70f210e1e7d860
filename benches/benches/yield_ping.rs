//! Yield ping: two processes on one worker yield to each other, 100,000
//! yields in all (50,000 each), against the peers a user would pick instead:
//!
//! - `smarm/yield_now`: two processes under [`smarm::run`] (one worker)
//!   calling [`smarm::yield_now`];
//! - `may/yield_now`: two coroutines on a one-worker `may` runtime calling
//!   `may::coroutine::yield_now`;
//! - `tokio/yield_now`: two tasks on a `current_thread` runtime awaiting
//!   `tokio::task::yield_now`.
//!
//! One criterion iteration is the whole workload: spawn the two, let them
//! yield, join both. Every runtime is started once per sample, outside the
//! timed region (`iter_custom`), so the figure is the workload alone.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

mod common;

/// Yields in one iteration, both processes together.
const YIELDS: usize = 100_000;
const PER_PROCESS: usize = YIELDS / 2;

fn smarm_yield_ping(iterations: u64) -> Duration {
    smarm::run(move || {
        let start = Instant::now();
        for _ in 0..iterations {
            let spawn_yielder = || {
                smarm::spawn(|| {
                    for _ in 0..PER_PROCESS {
                        smarm::yield_now();
                    }
                })
                .expect("two processes fit in the default slab")
            };
            let (first, second) = (spawn_yielder(), spawn_yielder());
            first.join().expect("yielder exits normally");
            second.join().expect("yielder exits normally");
        }
        start.elapsed()
    })
}

fn may_yield_ping(iterations: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iterations {
        let spawn_yielder = || {
            common::may_spawn(|| {
                for _ in 0..PER_PROCESS {
                    may::coroutine::yield_now();
                }
            })
        };
        let (first, second) = (spawn_yielder(), spawn_yielder());
        first.join().expect("yielder exits normally");
        second.join().expect("yielder exits normally");
    }
    start.elapsed()
}

fn tokio_yield_ping(runtime: &tokio::runtime::Runtime, iterations: u64) -> Duration {
    runtime.block_on(async move {
        let start = Instant::now();
        for _ in 0..iterations {
            let spawn_yielder = || {
                tokio::spawn(async {
                    for _ in 0..PER_PROCESS {
                        tokio::task::yield_now().await;
                    }
                })
            };
            let (first, second) = (spawn_yielder(), spawn_yielder());
            first.await.expect("yielder exits normally");
            second.await.expect("yielder exits normally");
        }
        start.elapsed()
    })
}

fn yield_ping(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("yield_ping");
    common::short_iterations(&mut group);
    group.bench_function("smarm/yield_now", |bencher| bencher.iter_custom(smarm_yield_ping));

    // may's configuration is global and read when its scheduler first
    // starts: one worker, to match the other two.
    may::config().set_workers(1);
    group.bench_function("may/yield_now", |bencher| bencher.iter_custom(may_yield_ping));

    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime starts");
    group.bench_function("tokio/yield_now", |bencher| {
        bencher.iter_custom(|iterations| tokio_yield_ping(&runtime, black_box(iterations)))
    });
    group.finish();
}

criterion_group!(benches, yield_ping);
criterion_main!(benches);
