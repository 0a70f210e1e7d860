//! What several bench binaries share: spawning a `may` coroutine, and the
//! timing settings of groups whose iterations are long.
//!
//! Each bench binary includes this with `mod common;` and uses what it
//! needs.
#![allow(dead_code)]

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, SamplingMode};

/// Spawns `body` as a coroutine on may's global scheduler.
pub fn may_spawn<F, T>(body: F) -> may::coroutine::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // SAFETY: may's contract for a coroutine body: (1) it must not touch
    // thread-local storage, since the coroutine may move between worker
    // threads — every body in these benches is plain arithmetic, yields and
    // may's own channels; (2) it must fit its stack (may's default, 32 KiB
    // on 64-bit) — none recurses or keeps large locals.
    unsafe { may::coroutine::spawn(body) }
}

/// Settings for a group whose iterations take tens of milliseconds or more:
/// `samples` flat samples, each about one iteration, after a short warm-up.
/// Left alone in quick mode, where `benches/run.sh` sets criterion's minimum
/// timings on the command line and these would override them.
pub fn long_iterations(group: &mut BenchmarkGroup<'_, WallTime>, samples: usize, measurement: Duration) {
    if smarm_benches::measure::quick() {
        group.sampling_mode(SamplingMode::Flat);
        return;
    }
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(samples);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(measurement);
}

/// Settings for a group of iterations from a fraction of a millisecond to a
/// few hundred: 20 flat samples over 3 s after a 1 s warm-up. Criterion's
/// default linear sampling runs 5,050 iterations for its 100 samples
/// whatever the time budget — over an hour for a 1 s iteration.
pub fn short_iterations(group: &mut BenchmarkGroup<'_, WallTime>) {
    long_iterations(group, 20, Duration::from_secs(3));
}

/// The tokio peer of the ping-pong benches: two tasks and two unbounded
/// mpsc channels, `trips` round trips, timed inside the pinger.
pub fn tokio_ping_pong(runtime: &tokio::runtime::Runtime, trips: u64) -> Duration {
    use std::hint::black_box;
    use std::time::Instant;
    runtime.block_on(async move {
        let (to_ponger, mut from_pinger) = tokio::sync::mpsc::unbounded_channel::<u64>();
        let (to_pinger, mut from_ponger) = tokio::sync::mpsc::unbounded_channel::<u64>();
        let ponger = tokio::spawn(async move {
            while let Some(value) = from_pinger.recv().await {
                if to_pinger.send(black_box(value)).is_err() {
                    break;
                }
            }
        });
        let pinger = tokio::spawn(async move {
            let start = Instant::now();
            for trip in 0..trips {
                to_ponger.send(trip).expect("ponger alive");
                let back = from_ponger.recv().await.expect("ponger answers");
                debug_assert_eq!(back, trip);
            }
            start.elapsed()
        });
        let elapsed = pinger.await.expect("pinger exits normally");
        ponger.await.expect("ponger exits normally");
        elapsed
    })
}

/// Skynet's fan-out: every inner node has this many children.
pub const SKYNET_FAN_OUT: u64 = 10;

/// The sum of the leaves' numbers, `0..leaves`.
pub fn skynet_total(leaves: u64) -> u64 {
    leaves * (leaves - 1) / 2
}

/// The tokio skynet node: a boxed future, since an async fn cannot spawn
/// itself.
fn tokio_node(
    first: u64,
    leaves: u64,
    parent: tokio::sync::mpsc::UnboundedSender<u64>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async move {
        if leaves == 1 {
            let _ = parent.send(first);
            return;
        }
        let (to_me, mut inbox) = tokio::sync::mpsc::unbounded_channel();
        let share = leaves / SKYNET_FAN_OUT;
        for child in 0..SKYNET_FAN_OUT {
            tokio::spawn(tokio_node(first + child * share, share, to_me.clone()));
        }
        drop(to_me);
        let mut sum = 0;
        for _ in 0..SKYNET_FAN_OUT {
            sum += inbox.recv().await.expect("every child reports");
        }
        let _ = parent.send(sum);
    })
}

/// The tokio peer of the skynet benches: `iterations` trees of `leaves`
/// leaves as tasks and channels on `runtime`.
pub fn tokio_skynet(runtime: &tokio::runtime::Runtime, iterations: u64, leaves: u64) -> Duration {
    use std::hint::black_box;
    use std::time::Instant;
    runtime.block_on(async move {
        let start = Instant::now();
        for _ in 0..iterations {
            let (to_root, mut result) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(tokio_node(0, black_box(leaves), to_root));
            assert_eq!(result.recv().await.expect("the tree reports"), skynet_total(leaves));
        }
        start.elapsed()
    })
}
