//! The Savina thread ring: 503 processes in a ring, each with a channel
//! from its predecessor; one token goes round for 1,000,000 hops.
//!
//! `thread_ring` — one criterion iteration is the whole run of hops:
//!
//! - `smarm/workers_{1,2,4,8}`: the multi-threaded [`smarm::Engine`] with
//!   that many workers, the 503 processes spawned through the runtime
//!   handle (round-robin over the workers, as a user gets them), default
//!   idle policy. With more than one worker nearly every hop crosses to
//!   another worker; with 4 and 8 workers on a 2-CPU machine the workers
//!   outnumber the CPUs.
//! - `tokio/multi_thread_2`: 503 tasks on a two-worker `multi_thread`
//!   runtime, unbounded `tokio::sync::mpsc` channels — tokio places them.
//! - `tokio/current_thread`: the same on one thread.
//!
//! Runtimes and the ring are built outside the timed region: the time runs
//! from the first send of the token to its arrival after the last hop.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

mod common;

/// Processes in the ring.
const RING: usize = 503;

/// Hops per iteration (fewer in quick mode, where figures are not
/// measurements).
fn hops() -> u64 {
    if smarm_benches::measure::quick() {
        100_000
    } else {
        1_000_000
    }
}

/// One ring member: forwards the token, one less each hop, until it reaches
/// 0; then reports and hangs up, which closes the ring behind it.
fn smarm_member(from: smarm::Receiver<u64>, to: smarm::Sender<u64>, done: smarm::Sender<Instant>) {
    while let Ok(token) = from.recv() {
        if token == 0 {
            let _ = done.send(Instant::now());
            return;
        }
        if to.send(black_box(token - 1)).is_err() {
            return;
        }
    }
}

fn smarm_ring(workers: usize, iterations: u64) -> Duration {
    let hops = iterations * hops();
    let engine = smarm::Engine::builder().workers(workers).build().expect("engine starts");
    engine
        .block_on(move || {
            let runtime = smarm::current_runtime().expect("inside the engine");
            let (done, finished) = smarm::channel();
            let (first, mut from) = smarm::channel::<u64>();
            let mut members = Vec::with_capacity(RING);
            for _ in 0..RING - 1 {
                let (to, next) = smarm::channel();
                let done = done.clone();
                members.push(runtime.spawn(move || smarm_member(from, to, done)).expect("spawn member"));
                from = next;
            }
            let closing = first.clone();
            members.push(runtime.spawn(move || smarm_member(from, closing, done)).expect("spawn member"));
            let start = Instant::now();
            first.send(hops).expect("ring alive");
            drop(first);
            let end = finished.recv().expect("a member reports the last hop");
            for member in members {
                member.join().expect("member exits normally");
            }
            end - start
        })
        .expect("engine runs")
}

fn tokio_ring(runtime: &tokio::runtime::Runtime, iterations: u64) -> Duration {
    let hops = iterations * hops();
    runtime.block_on(async move {
        let (done, mut finished) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        let (first, mut from) = tokio::sync::mpsc::unbounded_channel::<u64>();
        let mut members = Vec::with_capacity(RING);
        for index in 0..RING {
            let (to, next) = if index == RING - 1 {
                (first.clone(), None)
            } else {
                let (to, next) = tokio::sync::mpsc::unbounded_channel();
                (to, Some(next))
            };
            let done = done.clone();
            let mut mine = from;
            members.push(tokio::spawn(async move {
                while let Some(token) = mine.recv().await {
                    if token == 0 {
                        let _ = done.send(Instant::now());
                        return;
                    }
                    if to.send(black_box(token - 1)).is_err() {
                        return;
                    }
                }
            }));
            match next {
                Some(next) => from = next,
                None => break,
            }
        }
        let start = Instant::now();
        first.send(hops).expect("ring alive");
        drop(first);
        let end = finished.recv().await.expect("a member reports the last hop");
        for member in members {
            member.await.expect("member exits normally");
        }
        end - start
    })
}

fn thread_ring(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("thread_ring");
    common::long_iterations(&mut group, 10, Duration::from_secs(5));
    for workers in [1, 2, 4, 8] {
        group.bench_function(format!("smarm/workers_{workers}"), |bencher| {
            bencher.iter_custom(|iterations| smarm_ring(workers, iterations))
        });
    }
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("tokio runtime starts");
    group.bench_function("tokio/multi_thread_2", |bencher| {
        bencher.iter_custom(|iterations| tokio_ring(&runtime, iterations))
    });
    drop(runtime);
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime starts");
    group.bench_function("tokio/current_thread", |bencher| {
        bencher.iter_custom(|iterations| tokio_ring(&runtime, iterations))
    });
    group.finish();
}

criterion_group!(benches, thread_ring);
criterion_main!(benches);
