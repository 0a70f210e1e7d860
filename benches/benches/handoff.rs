//! Cross-worker handoff latency on the Engine: a process on worker 0 sends
//! a timestamp to a process on worker 1, which records how long the wake
//! took to reach it, then acknowledges so that the next round starts with
//! both workers idle. Run for the default spin budget and for 0 (park at
//! once).
//!
//! Run: `cargo bench -p smarm-benches --bench handoff` (prints p50 / p90 /
//! p99 / p99.9 per configuration). A benchmark, not a test: the figures
//! depend on the machine and on whatever else shares its cores.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smarm::{Config, Engine};

const WARMUP: usize = 2_000;
const ROUNDS: usize = 50_000;

/// One run: the delays seen by the process on worker 1, sorted, warm-up
/// rounds dropped.
fn measure(workers: usize, spin_budget_cycles: u64, max_spinners: Option<usize>) -> Vec<Duration> {
    let receiver_worker = workers - 1;
    let mut builder = Engine::builder().workers(workers).spin_budget_cycles(spin_budget_cycles);
    if let Some(max) = max_spinners {
        builder = builder.max_spinners(max);
    }
    let engine = builder.build().expect("engine starts");
    let delays = Arc::new(Mutex::new(Vec::new()));
    let out = delays.clone();
    engine
        .block_on(move || {
            let (to_receiver, inbox) = smarm::channel::<Instant>();
            let (to_sender, acks) = smarm::channel::<()>();
            let receiver = smarm::spawn_on(receiver_worker, move || {
                let mut seen = Vec::with_capacity(WARMUP + ROUNDS);
                while let Ok(sent) = inbox.recv() {
                    seen.push(sent.elapsed());
                    if to_sender.send(()).is_err() {
                        break;
                    }
                }
                *out.lock().expect("not poisoned") = seen;
            })
            .expect("spawn on the receiver's worker");
            let sender = smarm::spawn_on(0, move || {
                for _ in 0..WARMUP + ROUNDS {
                    to_receiver.send(Instant::now()).expect("receiver alive");
                    acks.recv().expect("receiver acknowledges");
                }
            })
            .expect("spawn on worker 0");
            sender.join().expect("sender");
            receiver.join().expect("receiver");
        })
        .expect("run");
    let mut delays = std::mem::take(&mut *delays.lock().expect("not poisoned"));
    delays.drain(..WARMUP.min(delays.len()));
    delays.sort_unstable();
    delays
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects nothing here.
    let default_budget = Config::default().spin_budget_cycles;
    let cpus = smarm::available_cpus();
    let configurations = [
        (2, "spin budget 0 (park at once)", 0, None),
        (2, "default spin budget and max_spinners", default_budget, None),
        (2, "default spin budget, max_spinners 1", default_budget, Some(1)),
        (cpus, "workers = CPUs, defaults", default_budget, None),
        (2 * cpus, "workers = 2 x CPUs, defaults", default_budget, None),
    ];
    for (workers, label, budget, max_spinners) in configurations {
        let delays = measure(workers, budget, max_spinners);
        println!(
            "handoff, {workers} workers, {label} ({budget} cycles), {} rounds: p50 {:?}  p90 {:?}  p99 {:?}  p99.9 {:?}",
            delays.len(),
            percentile(&delays, 0.50),
            percentile(&delays, 0.90),
            percentile(&delays, 0.99),
            percentile(&delays, 0.999),
        );
    }
}
