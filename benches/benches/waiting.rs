//! Waiting outside the scheduler's own world: a plain OS thread
//! ping-ponging with a process over smarm channels (beside two threads
//! over `std::sync::mpsc`), and `smarm::block_on` of a ready future inside
//! a process (beside tokio's current-thread `block_on`).
//!
//! Run: `cargo bench -p smarm-benches --bench waiting`.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

const TRIPS: u64 = 1_000;

/// `iterations × TRIPS` round trips between `main`'s process and a plain
/// thread, over two unbounded smarm channels.
fn smarm_thread_process(iterations: u64) -> Duration {
    smarm::run(move || {
        let (to_thread, from_process) = smarm::channel::<u64>();
        let (to_process, from_thread) = smarm::channel::<u64>();
        let peer = thread::spawn(move || {
            while let Ok(n) = from_process.recv() {
                if to_process.send(n + 1).is_err() {
                    break;
                }
            }
        });
        let start = Instant::now();
        for i in 0..iterations * TRIPS {
            to_thread.send(i).expect("thread alive");
            assert_eq!(from_thread.recv().expect("thread answers"), i + 1);
        }
        let elapsed = start.elapsed();
        drop(to_thread);
        // Joined through a channel so the only driver is never held in a
        // std join: the thread ends as soon as its receiver disconnects.
        let (done_tx, done) = smarm::channel();
        thread::spawn(move || done_tx.send(peer.join().is_ok()).unwrap());
        assert!(done.recv().unwrap());
        elapsed
    })
}

/// The same round trips between two threads over `std::sync::mpsc`.
fn std_thread_thread(iterations: u64) -> Duration {
    let (to_thread, from_main) = mpsc::channel::<u64>();
    let (to_main, from_thread) = mpsc::channel::<u64>();
    let peer = thread::spawn(move || {
        while let Ok(n) = from_main.recv() {
            if to_main.send(n + 1).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    for i in 0..iterations * TRIPS {
        to_thread.send(i).expect("thread alive");
        assert_eq!(from_thread.recv().expect("thread answers"), i + 1);
    }
    let elapsed = start.elapsed();
    drop(to_thread);
    peer.join().expect("peer");
    elapsed
}

fn thread_ping_pong(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("thread_ping_pong");
    group.throughput(criterion::Throughput::Elements(TRIPS));
    group.bench_function("smarm/thread_process", |bencher| bencher.iter_custom(smarm_thread_process));
    group.bench_function("std/mpsc_thread_thread", |bencher| bencher.iter_custom(std_thread_thread));
    group.finish();
}

fn block_on_ready(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("block_on_ready");
    group.bench_function("smarm/in_process", |bencher| {
        bencher.iter_custom(|iterations| {
            smarm::run(move || {
                let start = Instant::now();
                for i in 0..iterations {
                    std::hint::black_box(smarm::block_on(async move { std::hint::black_box(i) }).unwrap());
                }
                start.elapsed()
            })
        })
    });
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime");
    group.bench_function("tokio/current_thread", |bencher| {
        bencher.iter_custom(|iterations| {
            let start = Instant::now();
            for i in 0..iterations {
                std::hint::black_box(runtime.block_on(async move { std::hint::black_box(i) }));
            }
            start.elapsed()
        })
    });
    group.finish();
}

criterion_group!(benches, thread_ping_pong, block_on_ready);
criterion_main!(benches);
