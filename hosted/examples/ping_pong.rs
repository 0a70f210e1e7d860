//! Two processes on one worker, a channel each way: the pinger sends a
//! number, the ponger sends it back, `N` times. Prints the round trips per
//! second; checks every answer.
//!
//! Run: `cargo run --release -p smarm --example ping_pong -- 1000000`
//! (default 100,000 round trips).

use std::time::Instant;

fn main() {
    let trips: u64 =
        std::env::args().nth(1).map_or(100_000, |n| n.parse().expect("N: a number of round trips"));
    let (elapsed, answered) = smarm::run(move || {
        let (to_ponger, from_pinger) = smarm::channel::<u64>();
        let (to_pinger, from_ponger) = smarm::channel::<u64>();
        // The ponger answers until the pinger hangs up, then reports how
        // many it answered.
        let ponger = smarm::spawn(move || {
            let mut answered = 0u64;
            while let Ok(n) = from_pinger.recv() {
                to_pinger.send(n + 1).expect("the pinger waits for its answer");
                answered += 1;
            }
            answered
        })
        .expect("spawn the ponger");
        let start = Instant::now();
        for n in 0..trips {
            to_ponger.send(n).expect("the ponger is alive");
            let back = from_ponger.recv().expect("the ponger answers");
            assert_eq!(back, n + 1, "round trip {n}");
        }
        let elapsed = start.elapsed();
        drop(to_ponger);
        (elapsed, ponger.join().expect("the ponger returns"))
    });
    assert_eq!(answered, trips, "every ping was answered");
    println!(
        "{trips} round trips in {:.1} ms: {:.0} ns each, {:.2} M round trips/s",
        elapsed.as_secs_f64() * 1e3,
        elapsed.as_nanos() as f64 / trips.max(1) as f64,
        trips as f64 / elapsed.as_secs_f64() / 1e6
    );
}
