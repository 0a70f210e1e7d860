//! Drivers trade workers (`Builder::worker_handoff`): work that goes back
//! and forth between two workers ends up on one driver thread, parallel
//! work spreads back over the threads, processes stay on their workers
//! through every move, and no message is lost or reordered on the way.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smarm::{Engine, Runtime};

/// How long a test waits for the drivers to move a worker before it fails
/// (a move takes milliseconds on an idle machine).
const PATIENCE: Duration = Duration::from_secs(60);

/// One engine at a time: the hand-off rules watch whether a driver is
/// running or idle, and four engines' threads crowding two CPUs blur that
/// for seconds.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `root` on a fresh engine, alone among this file's tests.
fn run<R: Send + 'static>(
    workers: usize,
    threads: usize,
    handoff: bool,
    root: impl FnOnce() -> R + Send + 'static,
) -> R {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|poison| poison.into_inner());
    let engine = Engine::builder().workers(workers).threads(threads).worker_handoff(handoff).build();
    engine.expect("engine starts").block_on(root).expect("the root returns")
}

/// Ping-pongs numbered messages between the calling process and one on
/// worker `to`, `rounds` times or until `stop` says so; checks that every
/// reply is the next number. Returns the rounds made.
fn ping_pong(rt: &Runtime, to: usize, rounds: u64, mut stop: impl FnMut(u64) -> bool) -> u64 {
    let (to_pong, from_ping) = smarm::channel::<u64>();
    let (to_ping, from_pong) = smarm::channel::<u64>();
    let pong = rt.spawn_on(to, move || {
        let home = smarm::current_worker().unwrap();
        let mut seen = 0u64;
        for n in from_ping.iter() {
            assert_eq!(smarm::current_worker(), Some(home), "a process stays on its worker");
            assert_eq!(n, seen, "messages arrive in order");
            seen += 1;
            to_ping.send(n + 1).unwrap();
        }
        seen
    });
    let pong = pong.expect("the pong spawns");
    let mut made = 0;
    while made < rounds && !stop(made) {
        to_pong.send(made).unwrap();
        assert_eq!(from_pong.recv(), Ok(made + 1), "every message in is a message out");
        made += 1;
    }
    drop(to_pong);
    assert_eq!(pong.join().unwrap(), made, "the pong answered every ping");
    made
}

/// Ping-pongs with the other of two workers until both are on one driver
/// (or [`PATIENCE`] runs out); returns the rounds made.
fn ping_pong_until_gathered(rt: &Runtime) -> u64 {
    let other = 1 - smarm::current_worker().unwrap();
    let start = Instant::now();
    ping_pong(rt, other, u64::MAX, |made| {
        made % 256 == 0 && (rt.driver_of(0) == rt.driver_of(1) || start.elapsed() > PATIENCE)
    })
}

/// Two workers, two threads: a ping-pong between them ends with both
/// workers on one driver, and the exchange loses nothing.
#[test]
fn a_ping_pong_gathers_on_one_driver() {
    let (rounds, drivers) = run(2, 2, true, || {
        let rt = smarm::current_runtime().unwrap();
        assert_eq!(rt.driver_count(), 2);
        let rounds = ping_pong_until_gathered(&rt);
        (rounds, (rt.driver_of(0).unwrap(), rt.driver_of(1).unwrap()))
    });
    assert!(rounds > 0);
    assert_eq!(drivers.0, drivers.1, "after {rounds} rounds the workers are still on drivers {drivers:?}");
}

/// With hand-off off, each worker stays on the thread that starts with it.
#[test]
fn without_handoff_workers_keep_their_driver() {
    let drivers = run(2, 2, false, || {
        let rt = smarm::current_runtime().unwrap();
        let here = smarm::current_worker().unwrap();
        let mut seen = Vec::new();
        ping_pong(&rt, 1 - here, 20_000, |made| {
            if made % 1_000 == 0 {
                seen.push((rt.driver_of(0).unwrap(), rt.driver_of(1).unwrap()));
            }
            false
        });
        seen
    });
    assert_eq!(drivers.len(), 20);
    assert!(drivers.iter().all(|&pair| pair == (0, 1)), "{drivers:?}");
}

/// Once a ping-pong has gathered both workers on one driver, two processes
/// that both keep running (one on each worker) spread them over the two
/// threads again.
#[test]
fn busy_workers_spread_over_the_threads() {
    let (spread, spins) = run(2, 2, true, || {
        let rt = smarm::current_runtime().unwrap();
        ping_pong_until_gathered(&rt);
        assert_eq!(rt.driver_of(0), rt.driver_of(1), "the ping-pong gathered the workers");

        let stop = Arc::new(AtomicBool::new(false));
        let spins = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let spinners: Vec<_> = (0..2)
            .map(|worker| {
                let (stop, spins) = (stop.clone(), spins.clone());
                rt.spawn_on(worker, move || {
                    while !stop.load(Ordering::Relaxed) {
                        spins[worker].fetch_add(1, Ordering::Relaxed);
                        smarm::yield_now();
                    }
                })
                .unwrap()
            })
            .collect();
        let start = Instant::now();
        let both_ran = || spins.iter().all(|count| count.load(Ordering::Relaxed) > 0);
        while (rt.driver_of(0) == rt.driver_of(1) || !both_ran()) && start.elapsed() < PATIENCE {
            smarm::sleep(Duration::from_millis(1));
        }
        let spread = rt.driver_of(0) != rt.driver_of(1);
        stop.store(true, Ordering::Relaxed);
        for spinner in spinners {
            spinner.join().unwrap();
        }
        (spread, [spins[0].load(Ordering::Relaxed), spins[1].load(Ordering::Relaxed)])
    });
    assert!(spread, "two busy workers stayed on one driver ({spins:?} spins)");
    assert!(spins[0] > 0 && spins[1] > 0, "{spins:?}");
}

/// A token goes round a ring of one process per worker, four workers on two
/// threads, while the drivers trade workers: every hop arrives, in order,
/// at a process still on its own worker.
#[test]
fn a_ring_over_four_workers_counts_every_hop() {
    const LAPS: u64 = 20_000;
    let hops = run(4, 2, true, || {
        let rt = smarm::current_runtime().unwrap();
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..4).map(|_| smarm::channel::<u64>()).unzip();
        let mut members = Vec::new();
        for (worker, inbox) in receivers.into_iter().enumerate() {
            let next = senders[(worker + 1) % 4].clone();
            members.push(
                rt.spawn_on(worker, move || {
                    let mut hops = 0u64;
                    let mut last = None;
                    for token in inbox.iter() {
                        assert_eq!(smarm::current_worker(), Some(worker), "a process stays on its worker");
                        assert!(last.is_none_or(|last| token == last + 4), "hops arrive in order");
                        last = Some(token);
                        hops += 1;
                        if token + 1 < 4 * LAPS {
                            next.send(token + 1).unwrap();
                        } else {
                            break;
                        }
                    }
                    hops
                })
                .unwrap(),
            );
        }
        senders[0].send(0).unwrap();
        drop(senders);
        members.into_iter().map(|member| member.join().unwrap()).collect::<Vec<_>>()
    });
    assert_eq!(hops, vec![LAPS; 4]);
}
