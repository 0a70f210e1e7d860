//! Four worker threads, a thousand processes: each sleeps a little, sums a
//! slice of numbers, and reports back over a channel.
//!
//! Run: `cargo run -p smarm --example multi_worker`

use std::time::Duration;

fn main() {
    let engine = smarm::Engine::builder().workers(4).build().expect("engine starts");
    let total = engine
        .block_on(|| {
            let rt = smarm::current_runtime().expect("in a process");
            let (tx, rx) = smarm::channel::<(usize, u64)>();
            for p in 0..1_000u64 {
                let tx = tx.clone();
                // Spawns through the handle go round-robin over the workers.
                rt.spawn(move || {
                    smarm::sleep(Duration::from_millis(p % 10));
                    let sum: u64 = (p * 1_000..(p + 1) * 1_000).sum();
                    let worker = smarm::current_worker().expect("on a worker");
                    tx.send((worker, sum)).expect("root is listening");
                })
                .expect("spawn");
            }
            drop(tx);
            let mut per_worker = [0usize; 4];
            let mut total = 0u64;
            while let Ok((worker, sum)) = rx.recv() {
                per_worker[worker] += 1;
                total += sum;
            }
            println!("processes per worker: {per_worker:?}");
            total
        })
        .expect("root returns");
    let n = 1_000_000u64;
    assert_eq!(total, n * (n - 1) / 2);
    println!("sum of 0..{n} = {total}");
}
