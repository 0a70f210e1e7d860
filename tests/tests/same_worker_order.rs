//! Scheduling on one worker when its processes switch among themselves:
//! yields keep round-robin order, a fresh spawn runs as soon as its parent
//! switches out, and a group of processes that never stop yielding to each
//! other still lets timers and other threads' messages through.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Three processes yielding in turn are resumed in the order they queued:
/// the exact trace, round by round.
#[test]
fn yields_go_round_robin() {
    const ROUNDS: usize = 50;
    let trace = Arc::new(Mutex::new(Vec::new()));
    let out = trace.clone();
    smarm::run(move || {
        let handles: Vec<_> = (0..3)
            .map(|who| {
                let trace = out.clone();
                smarm::spawn(move || {
                    for _ in 0..ROUNDS {
                        trace.lock().unwrap().push(who);
                        smarm::yield_now();
                    }
                })
                .unwrap()
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
    });
    let trace = trace.lock().unwrap();
    let expected: Vec<usize> = (0..ROUNDS).flat_map(|_| 0..3).collect();
    assert_eq!(*trace, expected);
}

/// A process that spawns and then yields hands the worker to its spawns
/// (in spawn order) before the processes already queued, which then run in
/// the order they queued.
#[test]
fn spawns_run_before_the_queue() {
    let trace = Arc::new(Mutex::new(Vec::new()));
    let out = trace.clone();
    smarm::run(move || {
        // Runs first (the root's first spawn) and yields at once, so it
        // waits in the ready queue while the parent runs.
        let waiting = {
            let trace = out.clone();
            smarm::spawn(move || {
                smarm::yield_now();
                trace.lock().unwrap().push("queued");
            })
            .unwrap()
        };
        let parent = {
            let trace = out.clone();
            smarm::spawn(move || {
                let children: Vec<_> = ["first child", "second child"]
                    .into_iter()
                    .map(|name| {
                        let trace = trace.clone();
                        smarm::spawn(move || trace.lock().unwrap().push(name)).unwrap()
                    })
                    .collect();
                trace.lock().unwrap().push("parent yields");
                smarm::yield_now();
                trace.lock().unwrap().push("parent resumed");
                for child in children {
                    child.join().unwrap();
                }
            })
            .unwrap()
        };
        parent.join().unwrap();
        waiting.join().unwrap();
    });
    let trace = trace.lock().unwrap();
    assert_eq!(*trace, ["parent yields", "first child", "second child", "queued", "parent resumed"]);
}

/// Two processes that only ever yield to each other do not starve the
/// worker's timers (a sleeper ends their loop) nor its ingress (a thread's
/// message ends it in the second half).
#[test]
fn a_yielding_pair_lets_timers_and_ingress_through() {
    smarm::run(|| {
        for ingress in [false, true] {
            let stop = Arc::new(AtomicBool::new(false));
            let yields = Arc::new(Mutex::new([0u64; 2]));
            let yielders: Vec<_> = (0..2)
                .map(|who| {
                    let (stop, yields) = (stop.clone(), yields.clone());
                    smarm::spawn(move || {
                        while !stop.load(Ordering::Acquire) {
                            yields.lock().unwrap()[who] += 1;
                            smarm::yield_now();
                        }
                    })
                    .unwrap()
                })
                .collect();
            // Wait (through the timers) until the pair is under way: on a
            // slow host (an emulator) the root could otherwise be woken
            // before either had run at all.
            while yields.lock().unwrap().contains(&0) {
                smarm::sleep(Duration::from_millis(1));
            }
            if ingress {
                let (tx, rx) = smarm::channel::<()>();
                let thread = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(5));
                    tx.send(()).unwrap();
                });
                rx.recv().unwrap();
                thread.join().unwrap();
            } else {
                smarm::sleep(Duration::from_millis(5));
            }
            stop.store(true, Ordering::Release);
            for yielder in yielders {
                yielder.join().unwrap();
            }
            // Both went on yielding while the root slept or waited.
            let after = *yields.lock().unwrap();
            assert!(after[0] > 1 && after[1] > 1, "both yielders ran: {after:?}");
        }
    });
}
