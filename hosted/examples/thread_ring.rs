//! A token ring across workers: 503 processes, each forwarding a counter to
//! the next until it reaches zero (the Savina "thread ring"). With more
//! than one worker, the processes are spread round-robin and nearly every
//! hop wakes a process on another worker.
//!
//! Run: `cargo run --release -p smarm --example thread_ring -- [workers] [hops] [threads]`
//! (defaults: as many workers as CPUs, 1,000,000 hops, the engine's
//! default threads: one per worker, at most one per CPU).

use std::time::Instant;

const RING: usize = 503;

fn main() {
    let mut args = std::env::args().skip(1);
    let workers: Option<usize> = args.next().and_then(|arg| arg.parse().ok());
    let hops: u64 = args.next().and_then(|arg| arg.parse().ok()).unwrap_or(1_000_000);
    let mut builder = smarm::Engine::builder();
    if let Some(workers) = workers {
        builder = builder.workers(workers);
    }
    if let Some(threads) = args.next().and_then(|arg| arg.parse().ok()) {
        builder = builder.threads(threads);
    }
    let workers = builder.as_config().worker_count;
    let engine = builder.build().expect("engine starts");
    let threads = engine.threads();
    let (elapsed, last) = engine
        .block_on(move || {
            let runtime = smarm::current_runtime().expect("in a process");
            let (done, finished) = smarm::channel::<usize>();
            let (first, mut from) = smarm::channel::<u64>();
            for member in 0..RING {
                let (to, next) = if member == RING - 1 {
                    (first.clone(), None)
                } else {
                    let (to, next) = smarm::channel();
                    (to, Some(next))
                };
                let done = done.clone();
                let mine = from;
                // Spawns through the handle go round-robin over the workers.
                runtime
                    .spawn(move || {
                        while let Ok(token) = mine.recv() {
                            if token == 0 {
                                let _ = done.send(member);
                                return;
                            }
                            if to.send(token - 1).is_err() {
                                return;
                            }
                        }
                    })
                    .expect("spawn");
                match next {
                    Some(next) => from = next,
                    None => break,
                }
            }
            let start = Instant::now();
            first.send(hops).expect("ring alive");
            drop(first);
            let last = finished.recv().expect("a member reports the last hop");
            (start.elapsed(), last)
        })
        .expect("root returns");
    assert_eq!(last as u64, hops % RING as u64);
    println!(
        "{hops} hops over {RING} processes on {workers} workers, {threads} threads: {elapsed:?} ({:.0} ns per hop)",
        elapsed.as_nanos() as f64 / hops as f64
    );
}
