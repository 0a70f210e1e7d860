//! Spawn + join: start 10,000 processes that do nothing, then join them all,
//! against the peers a user would pick instead:
//!
//! - `smarm/spawn_join`: [`smarm::spawn`] / `JoinHandle::join` from a root
//!   process under [`smarm::run`] (one worker, default configuration);
//! - `tokio/spawn_await`: `tokio::spawn` and `.await` on each handle, on a
//!   `current_thread` runtime;
//! - `may/spawn_join`: `may::coroutine::spawn` and `join` from a root
//!   coroutine, on a one-worker `may` runtime;
//! - `std_thread/spawn_join`: `std::thread::spawn` and `join` — only 1,000
//!   of them, the measured time multiplied by 10, so that every figure is
//!   the cost of 10,000.
//!
//! All 10,000 are alive at once (spawned before the first join), as in a
//! fan-out. One criterion iteration is one such batch; each runtime is
//! started once per sample, outside the timed region.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

mod common;

/// Processes, tasks or coroutines per iteration.
const SPAWNS: usize = 10_000;
/// OS threads per iteration; the figure is scaled up to `SPAWNS`.
const THREAD_SPAWNS: usize = 1_000;

fn smarm_spawn_join(iterations: u64) -> Duration {
    smarm::run(move || {
        let mut handles = Vec::with_capacity(SPAWNS);
        // One untimed batch first: each sample starts a fresh runtime, whose
        // stack pool is empty, while the peers' runtimes (and allocators)
        // are reused warm across samples.
        for index in 0..SPAWNS {
            handles.push(
                smarm::spawn(move || {
                    black_box(index);
                })
                .expect("10,000 fit in the slab"),
            );
        }
        for handle in handles.drain(..) {
            handle.join().expect("an empty process exits normally");
        }
        let start = Instant::now();
        for _ in 0..iterations {
            for index in 0..SPAWNS {
                handles.push(
                    smarm::spawn(move || {
                        black_box(index);
                    })
                    .expect("10,000 fit in the slab"),
                );
            }
            for handle in handles.drain(..) {
                handle.join().expect("an empty process exits normally");
            }
        }
        start.elapsed()
    })
}

fn tokio_spawn_await(runtime: &tokio::runtime::Runtime, iterations: u64) -> Duration {
    runtime.block_on(async move {
        let start = Instant::now();
        let mut handles = Vec::with_capacity(SPAWNS);
        for _ in 0..iterations {
            for index in 0..SPAWNS {
                handles.push(tokio::spawn(async move {
                    {
                        black_box(index);
                    }
                }));
            }
            for handle in handles.drain(..) {
                handle.await.expect("an empty task exits normally");
            }
        }
        start.elapsed()
    })
}

fn may_spawn_join(iterations: u64) -> Duration {
    common::may_spawn(move || {
        let start = Instant::now();
        let mut handles = Vec::with_capacity(SPAWNS);
        for _ in 0..iterations {
            for index in 0..SPAWNS {
                handles.push(common::may_spawn(move || {
                    black_box(index);
                }));
            }
            for handle in handles.drain(..) {
                handle.join().expect("an empty coroutine exits normally");
            }
        }
        start.elapsed()
    })
    .join()
    .expect("the root coroutine exits normally")
}

fn thread_spawn_join(iterations: u64) -> Duration {
    let start = Instant::now();
    let mut handles = Vec::with_capacity(THREAD_SPAWNS);
    for _ in 0..iterations {
        for index in 0..THREAD_SPAWNS {
            handles.push(std::thread::spawn(move || {
                black_box(index);
            }));
        }
        for handle in handles.drain(..) {
            handle.join().expect("an empty thread exits normally");
        }
    }
    start.elapsed() * (SPAWNS / THREAD_SPAWNS) as u32
}

fn spawn_join(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("spawn_join_10k");
    common::short_iterations(&mut group);
    group.bench_function("smarm/spawn_join", |bencher| bencher.iter_custom(smarm_spawn_join));

    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime starts");
    group.bench_function("tokio/spawn_await", |bencher| {
        bencher.iter_custom(|iterations| tokio_spawn_await(&runtime, iterations))
    });

    // may's configuration is global and read when its scheduler first
    // starts: one worker, to match the others.
    may::config().set_workers(1);
    group.bench_function("may/spawn_join", |bencher| bencher.iter_custom(may_spawn_join));

    group.bench_function("std_thread/spawn_join", |bencher| bencher.iter_custom(thread_spawn_join));
    group.finish();
}

criterion_group!(benches, spawn_join);
criterion_main!(benches);
