//! Channel ping-pong: a pinger sends a number, a ponger sends it back.
//!
//! `ping_pong_same_worker` — 100,000 round trips, both ends on one worker:
//!
//! - `smarm/channel`: two processes under [`smarm::run`], unbounded
//!   [`smarm::channel`]s;
//! - `tokio/mpsc`: two tasks on a `current_thread` runtime, unbounded
//!   `tokio::sync::mpsc` channels;
//! - `may/mpsc`: two coroutines on a one-worker `may` runtime,
//!   `may::sync::mpsc` channels.
//!
//! `ping_pong_two_workers` — 10,000 round trips with the ends on two
//! threads (fewer trips: a cross-thread wake costs microseconds):
//!
//! - `smarm/engine_channel`: the multi-threaded [`smarm::Engine`] with two
//!   workers, pinger on worker 0, ponger on worker 1 (`spawn_on`), default
//!   idle policy (spin, then park);
//! - `tokio/multi_thread_mpsc`: a two-worker `multi_thread` runtime with
//!   both ends spawned as tasks — tokio places them, as it would for a user;
//! - `crossbeam/threads`: two OS threads and `crossbeam-channel`s.
//!
//! One criterion iteration is the whole batch of round trips. Runtimes are
//! started once per sample, outside the timed region.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

mod common;

/// Round trips per iteration on one worker.
const SAME_WORKER_TRIPS: u64 = 100_000;
/// Round trips per iteration across two workers.
const CROSS_WORKER_TRIPS: u64 = 10_000;

/// The pinger's side, for smarm: `trips` round trips through `to_ponger`
/// and `from_ponger`.
fn smarm_ping(trips: u64, to_ponger: &smarm::Sender<u64>, from_ponger: &smarm::Receiver<u64>) {
    for trip in 0..trips {
        to_ponger.send(trip).expect("ponger alive");
        let back = from_ponger.recv().expect("ponger answers");
        debug_assert_eq!(back, trip);
    }
}

/// The ponger's side, for smarm: echoes until the pinger hangs up.
fn smarm_pong(from_pinger: smarm::Receiver<u64>, to_pinger: smarm::Sender<u64>) {
    while let Ok(value) = from_pinger.recv() {
        if to_pinger.send(black_box(value)).is_err() {
            break;
        }
    }
}

fn smarm_same_worker(iterations: u64) -> Duration {
    smarm::run(move || {
        let (to_ponger, from_pinger) = smarm::channel();
        let (to_pinger, from_ponger) = smarm::channel();
        let ponger = smarm::spawn(move || smarm_pong(from_pinger, to_pinger)).expect("spawn ponger");
        let start = Instant::now();
        smarm_ping(iterations * SAME_WORKER_TRIPS, &to_ponger, &from_ponger);
        let elapsed = start.elapsed();
        drop(to_ponger);
        ponger.join().expect("ponger exits normally");
        elapsed
    })
}

fn smarm_two_workers(iterations: u64) -> Duration {
    let engine = smarm::Engine::builder().workers(2).build().expect("engine starts");
    engine
        .block_on(move || {
            let (to_ponger, from_pinger) = smarm::channel();
            let (to_pinger, from_ponger) = smarm::channel();
            // A join handle carries no value: the pinger reports its time here.
            let (report, elapsed) = smarm::channel();
            let ponger =
                smarm::spawn_on(1, move || smarm_pong(from_pinger, to_pinger)).expect("spawn ponger");
            let pinger = smarm::spawn_on(0, move || {
                let start = Instant::now();
                smarm_ping(iterations * CROSS_WORKER_TRIPS, &to_ponger, &from_ponger);
                report.send(start.elapsed()).expect("root waits for the time");
            })
            .expect("spawn pinger");
            let elapsed = elapsed.recv().expect("pinger reports");
            pinger.join().expect("pinger exits normally");
            ponger.join().expect("ponger exits normally");
            elapsed
        })
        .expect("engine runs")
}

fn may_same_worker(iterations: u64) -> Duration {
    let (to_ponger, from_pinger) = may::sync::mpsc::channel::<u64>();
    let (to_pinger, from_ponger) = may::sync::mpsc::channel::<u64>();
    let ponger = common::may_spawn(move || {
        while let Ok(value) = from_pinger.recv() {
            if to_pinger.send(black_box(value)).is_err() {
                break;
            }
        }
    });
    let pinger = common::may_spawn(move || {
        let start = Instant::now();
        for trip in 0..iterations * SAME_WORKER_TRIPS {
            to_ponger.send(trip).expect("ponger alive");
            let back = from_ponger.recv().expect("ponger answers");
            debug_assert_eq!(back, trip);
        }
        start.elapsed()
    });
    let elapsed = pinger.join().expect("pinger exits normally");
    ponger.join().expect("ponger exits normally");
    elapsed
}

fn crossbeam_threads(iterations: u64) -> Duration {
    let (to_ponger, from_pinger) = crossbeam_channel::unbounded::<u64>();
    let (to_pinger, from_ponger) = crossbeam_channel::unbounded::<u64>();
    let ponger = std::thread::spawn(move || {
        while let Ok(value) = from_pinger.recv() {
            if to_pinger.send(black_box(value)).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    for trip in 0..iterations * CROSS_WORKER_TRIPS {
        to_ponger.send(trip).expect("ponger alive");
        let back = from_ponger.recv().expect("ponger answers");
        debug_assert_eq!(back, trip);
    }
    let elapsed = start.elapsed();
    drop(to_ponger);
    ponger.join().expect("ponger exits normally");
    elapsed
}

fn same_worker(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("ping_pong_same_worker");
    common::short_iterations(&mut group);
    group.bench_function("smarm/channel", |bencher| bencher.iter_custom(smarm_same_worker));

    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime starts");
    group.bench_function("tokio/mpsc", |bencher| {
        bencher.iter_custom(|iterations| common::tokio_ping_pong(&runtime, iterations * SAME_WORKER_TRIPS))
    });

    // may's configuration is global and read when its scheduler first
    // starts: one worker, to keep both ends on it.
    may::config().set_workers(1);
    group.bench_function("may/mpsc", |bencher| bencher.iter_custom(may_same_worker));
    group.finish();
}

fn two_workers(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("ping_pong_two_workers");
    common::short_iterations(&mut group);
    group.bench_function("smarm/engine_channel", |bencher| bencher.iter_custom(smarm_two_workers));

    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("tokio runtime starts");
    group.bench_function("tokio/multi_thread_mpsc", |bencher| {
        bencher.iter_custom(|iterations| common::tokio_ping_pong(&runtime, iterations * CROSS_WORKER_TRIPS))
    });

    group.bench_function("crossbeam/threads", |bencher| bencher.iter_custom(crossbeam_threads));
    group.finish();
}

criterion_group!(benches, same_worker, two_workers);
criterion_main!(benches);
