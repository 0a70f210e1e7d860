//! The runtime per wake ring: three workloads on the
//! two-worker [`smarm::Engine`], measured with whichever ring this build's
//! `rq-*` feature selected. `benches/run.sh` builds and runs this bench
//! once per feature; each build names its results after the ring it really
//! has (`smarm_core::kernel::ring::WakeRing`), so the runs sit side by side.
//!
//! - `rq_runtime/yield_storm/<ring>`: 64 processes, 32 per worker, each
//!   yielding 1,000 times.
//! - `rq_runtime/ping_pong_pairs/<ring>`: 8 pairs, the two ends of each on
//!   different workers, 1,000 round trips each over smarm channels: every
//!   wake crosses workers, through the wake ring.
//! - `rq_runtime/spawn_storm/<ring>`: a root on worker 0 spawns 10,000
//!   empty processes alternately on both workers (half of them through the
//!   other worker's spawn ring) and joins them.
//!
//! One criterion iteration is one workload; the engine is started once per
//! sample, outside the timed region.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

mod common;

const WORKERS: usize = 2;
const YIELDERS: usize = 64;
const YIELDS: usize = 1_000;
const PAIRS: usize = 8;
const TRIPS: usize = 1_000;
const SPAWNS: usize = 10_000;

/// The ring behind the wake rings in this build: `mutex`, `mpmc` or
/// `striped`.
fn ring_name() -> &'static str {
    let name = std::any::type_name::<smarm_core::kernel::ring::WakeRing<u32>>();
    // Module name → the feature (and results) name: the lock-based ring
    // lives in `ring::locked`, selected by `rq-mutex`.
    [("locked", "mutex"), ("mpmc", "mpmc"), ("striped", "striped")]
        .into_iter()
        .find(|(module, _)| name.contains(&format!("::{module}::")))
        .map(|(_, ring)| ring)
        .unwrap_or_else(|| panic!("unknown wake ring {name}"))
}

/// Runs `workload` `iterations` times inside one two-worker engine and
/// returns the time it took, engine start and stop excluded.
fn on_engine(iterations: u64, workload: fn()) -> Duration {
    let engine = smarm::Engine::builder().workers(WORKERS).build().expect("engine starts");
    engine
        .block_on(move || {
            let start = Instant::now();
            for _ in 0..iterations {
                workload();
            }
            start.elapsed()
        })
        .expect("engine runs")
}

fn yield_storm() {
    let handles: Vec<_> = (0..YIELDERS)
        .map(|index| {
            smarm::spawn_on(index % WORKERS, || {
                for _ in 0..YIELDS {
                    smarm::yield_now();
                }
            })
            .expect("spawn a yielder")
        })
        .collect();
    for handle in handles {
        handle.join().expect("a yielder exits normally");
    }
}

fn ping_pong_pairs() {
    let mut handles = Vec::with_capacity(2 * PAIRS);
    for pair in 0..PAIRS {
        let (to_ponger, from_pinger) = smarm::channel::<usize>();
        let (to_pinger, from_ponger) = smarm::channel::<usize>();
        let ponger = smarm::spawn_on((pair + 1) % WORKERS, move || {
            while let Ok(value) = from_pinger.recv() {
                if to_pinger.send(value).is_err() {
                    break;
                }
            }
        });
        let pinger = smarm::spawn_on(pair % WORKERS, move || {
            for trip in 0..TRIPS {
                to_ponger.send(trip).expect("ponger alive");
                assert_eq!(from_ponger.recv().expect("ponger answers"), trip);
            }
        });
        handles.push(ponger.expect("spawn a ponger"));
        handles.push(pinger.expect("spawn a pinger"));
    }
    for handle in handles {
        handle.join().expect("a ping-pong process exits normally");
    }
}

fn spawn_storm() {
    let handles: Vec<_> = (0..SPAWNS)
        .map(|index| smarm::spawn_on(index % WORKERS, || {}).expect("10,000 fit in the slab"))
        .collect();
    for handle in handles {
        handle.join().expect("an empty process exits normally");
    }
}

fn rq_runtime(criterion: &mut Criterion) {
    let ring = ring_name();
    let workloads: [(&str, fn()); 3] =
        [("yield_storm", yield_storm), ("ping_pong_pairs", ping_pong_pairs), ("spawn_storm", spawn_storm)];
    for (name, workload) in workloads {
        let mut group = criterion.benchmark_group(format!("rq_runtime/{name}"));
        common::short_iterations(&mut group);
        group.bench_function(ring, |bencher| {
            bencher.iter_custom(|iterations| on_engine(iterations, workload))
        });
        group.finish();
    }
}

criterion_group!(benches, rq_runtime);
criterion_main!(benches);
