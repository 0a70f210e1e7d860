//! The rings alone: the three wake-ring candidates of
//! `smarm_core::ring` — [`LockedRing`], [`MpmcRing`] (Vyukov) and
//! [`StripedRing`] — swept over 1, 2 and 4 threads, with nothing of the
//! runtime around them.
//!
//! - `rq_micro/pairs/<threads>t/<ring>`: every thread pushes one value and
//!   pops one, [`OPS`] times; a symmetric MPMC load.
//! - `rq_micro/mpsc/<threads>t/<ring>`: `threads - 1` producers push
//!   [`OPS`] values each and one consumer pops them all — the wake ring's
//!   real shape (any thread wakes, the owning worker drains).
//!
//! One criterion iteration is one such round, from the moment all threads
//! pass a barrier to the moment the last finishes; the threads are started
//! once per sample. A full ring (push refused) or an empty one (pop finds
//! nothing, or a value still being published) is retried after a
//! `spin_loop` hint, and after a thread yield every 64th retry, so that with
//! 4 threads on fewer cores a preempted producer gets to finish.

use std::hint::{black_box, spin_loop};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use smarm_core::kernel::ring::{LockedRing, MpmcRing, Ring, StripedRing};

mod common;

/// Operations per thread per iteration.
const OPS: usize = 10_000;
/// Ring capacity: that of a worker's wake ring
/// (`smarm_core::kernel::ring::WAKE_RING_CAPACITY`, with an intrusive list
/// behind it for overflow); small enough to stay in cache and large enough
/// never to fill in `pairs`.
const CAPACITY: usize = 1_024;

/// Waits politely: spin a little, yield now and then.
fn back_off(retries: &mut u32) {
    *retries += 1;
    if retries.is_multiple_of(64) {
        std::thread::yield_now();
    } else {
        spin_loop();
    }
}

fn push<R: Ring<usize>>(ring: &R, mut value: usize) {
    let mut retries = 0;
    while let Err(refused) = ring.push(value) {
        value = refused;
        back_off(&mut retries);
    }
}

fn pop<R: Ring<usize>>(ring: &R) -> usize {
    let mut retries = 0;
    loop {
        if let Some(value) = ring.pop() {
            return value;
        }
        back_off(&mut retries);
    }
}

/// Runs `iterations` rounds of `round(thread_index, ring)` on `threads`
/// threads sharing one ring; returns the time from the barrier to the last
/// thread's end, summed over the rounds.
fn time_rounds<R, F>(threads: usize, iterations: u64, round: F) -> Duration
where
    R: Ring<usize> + 'static,
    F: Fn(usize, &R) + Send + Sync + 'static,
{
    let ring = Arc::new(R::with_capacity(CAPACITY));
    let round = Arc::new(round);
    // Two barriers per round: everyone starts together, everyone has ended.
    let barrier = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|index| {
            let (ring, round, barrier) = (ring.clone(), round.clone(), barrier.clone());
            std::thread::spawn(move || {
                for _ in 0..iterations {
                    barrier.wait();
                    round(index, &ring);
                    barrier.wait();
                }
            })
        })
        .collect();
    let mut total = Duration::ZERO;
    for _ in 0..iterations {
        barrier.wait();
        let start = Instant::now();
        barrier.wait();
        total += start.elapsed();
    }
    for worker in workers {
        worker.join().expect("a ring thread exits normally");
    }
    assert!(ring.pop().is_none(), "every value pushed was popped");
    total
}

fn pairs<R: Ring<usize> + 'static>(threads: usize, iterations: u64) -> Duration {
    time_rounds::<R, _>(threads, iterations, |index, ring| {
        for op in 0..OPS {
            push(ring, index * OPS + op);
            black_box(pop(ring));
        }
    })
}

fn mpsc<R: Ring<usize> + 'static>(threads: usize, iterations: u64) -> Duration {
    let producers = threads - 1;
    time_rounds::<R, _>(threads, iterations, move |index, ring| {
        if index == 0 {
            let mut sum = 0usize;
            for _ in 0..producers * OPS {
                sum = sum.wrapping_add(pop(ring));
            }
            black_box(sum);
        } else {
            for op in 0..OPS {
                push(ring, index * OPS + op);
            }
        }
    })
}

fn sweep(criterion: &mut Criterion) {
    for threads in [1, 2, 4] {
        let mut group = criterion.benchmark_group(format!("rq_micro/pairs/{threads}t"));
        common::short_iterations(&mut group);
        group.bench_function("mutex", |bencher| {
            bencher.iter_custom(|n| pairs::<LockedRing<usize>>(threads, n))
        });
        group.bench_function("mpmc", |bencher| bencher.iter_custom(|n| pairs::<MpmcRing<usize>>(threads, n)));
        group.bench_function("striped", |bencher| {
            bencher.iter_custom(|n| pairs::<StripedRing<usize>>(threads, n))
        });
        group.finish();
    }
    for threads in [2, 4] {
        let mut group = criterion.benchmark_group(format!("rq_micro/mpsc/{threads}t"));
        common::short_iterations(&mut group);
        group.bench_function("mutex", |bencher| {
            bencher.iter_custom(|n| mpsc::<LockedRing<usize>>(threads, n))
        });
        group.bench_function("mpmc", |bencher| bencher.iter_custom(|n| mpsc::<MpmcRing<usize>>(threads, n)));
        group.bench_function("striped", |bencher| {
            bencher.iter_custom(|n| mpsc::<StripedRing<usize>>(threads, n))
        });
        group.finish();
    }
}

criterion_group!(benches, sweep);
criterion_main!(benches);
