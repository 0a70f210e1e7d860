//! `top` for a smarm runtime: once a second, a table of the workers (passes,
//! context switches, spawns, exits, ready and parked processes) and of the
//! live processes (pid, registered name, worker, state, links, monitors,
//! whether it traps exits, stack high-water mark), while a synthetic load
//! runs on a four-worker Engine: ping-pong pairs, sleepers, a registered
//! logger that traps exits, linked workers, a monitor, and short-lived
//! processes spawned all the time.
//!
//! Run: `cargo run -p smarm --example top -- 5` (seconds; default 5).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WORKERS: usize = 4;

/// Starts the load; it runs until `stop` is set.
fn load(rt: &smarm::Runtime, stop: &Arc<AtomicBool>) {
    // Ping-pong pairs across workers.
    for w in 0..WORKERS {
        let (to_b, from_a) = smarm::channel::<u64>();
        let (to_a, from_b) = smarm::channel::<u64>();
        let stop = stop.clone();
        rt.spawn_on(w, move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                to_b.send(n).expect("partner alive");
                n = from_b.recv().expect("partner answers");
            }
        })
        .expect("spawn");
        rt.spawn_on((w + 1) % WORKERS, move || {
            while let Ok(n) = from_a.recv() {
                if to_a.send(n + 1).is_err() {
                    break;
                }
            }
        })
        .expect("spawn");
    }
    // A registered logger that traps exits, linked to two workers.
    let stop_logger = stop.clone();
    rt.spawn_on(0, move || {
        smarm::register("logger", smarm::self_pid().expect("a process")).expect("the name is free");
        let exits = smarm::trap_exit().expect("in a process");
        for _ in 0..2 {
            let stop = stop_logger.clone();
            let worker = smarm::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    smarm::sleep(Duration::from_millis(20));
                }
            })
            .expect("spawn");
            smarm::link(worker.pid()).expect("alive");
        }
        while !stop_logger.load(Ordering::Relaxed) {
            let _ = exits.recv_timeout(Duration::from_millis(50));
        }
    })
    .expect("spawn");
    // A sleeper watched by a monitor, and a stream of short-lived processes.
    let stop_spawner = stop.clone();
    rt.spawn_on(1, move || {
        let stop = stop_spawner.clone();
        let sleeper = smarm::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                smarm::sleep(Duration::from_millis(100));
            }
        })
        .expect("spawn");
        let _watch = smarm::monitor(sleeper.pid());
        while !stop_spawner.load(Ordering::Relaxed) {
            let batch: Vec<_> = (0..100u64).map(|i| smarm::spawn(move || i * i).expect("spawn")).collect();
            let _: u64 = batch.into_iter().map(|h| h.join().expect("joins")).sum();
            smarm::sleep(Duration::from_millis(10));
        }
    })
    .expect("spawn");
}

fn print_tables(rt: &smarm::Runtime, second: u64) -> usize {
    println!("\n-- second {second} ----------------------------------------------------------------");
    println!(
        "{:<7} {:>10} {:>12} {:>10} {:>10} {:>6} {:>7}",
        "worker", "passes", "switches", "spawned", "exited", "ready", "parked"
    );
    for w in 0..rt.worker_count() {
        let s = rt.worker_stats(w).expect("a worker of this runtime").processes;
        println!(
            "{w:<7} {:>10} {:>12} {:>10} {:>10} {:>6} {:>7}",
            s.passes, s.switches, s.spawned, s.exited, s.ready, s.parked
        );
    }
    let processes = rt.list_processes().wait().expect("every worker answers");
    println!(
        "{:<9} {:<8} {:>6} {:<16} {:>5} {:>8} {:>5} {:>10}",
        "pid", "name", "worker", "state", "links", "monitors", "traps", "stack used"
    );
    for p in processes.iter().take(16) {
        println!(
            "{:<9} {:<8} {:>6} {:<16} {:>5} {:>8} {:>5} {:>10}",
            p.pid.to_string(),
            p.name.as_deref().unwrap_or("-"),
            p.worker,
            format!("{:?}", p.state),
            p.links.len(),
            p.monitors,
            if p.trapping { "yes" } else { "no" },
            p.stack_high_water
        );
    }
    if processes.len() > 16 {
        println!("... and {} more", processes.len() - 16);
    }
    processes.len()
}

fn main() {
    let seconds: u64 = std::env::args().nth(1).map_or(5, |n| n.parse().expect("a number of seconds"));
    let engine = smarm::Engine::builder().workers(WORKERS).build().expect("engine starts");
    let rt = engine.runtime().clone();
    let stop = Arc::new(AtomicBool::new(false));
    load(&rt, &stop);
    let start = Instant::now();
    let mut seen_logger = false;
    for second in 1..=seconds {
        let next = start + Duration::from_secs(second);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let live = print_tables(&rt, second);
        assert!(live >= 2 * WORKERS, "the load's processes are listed: {live}");
        seen_logger |= smarm::Runtime::whereis(&rt, "logger").is_some();
    }
    assert!(seen_logger, "the registered logger was seen");
    stop.store(true, Ordering::Relaxed);
    engine.wait().unwrap();
    assert_eq!(rt.live(), 0, "every process ended");
    println!("\nload stopped; every process ended");
}
