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
