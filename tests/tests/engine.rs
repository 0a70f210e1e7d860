//! The multi-threaded Engine through the public API: entry and result,
//! crash isolation under 4 worker threads, placement on OS threads,
//! shutdown rules, and cross-worker wakes under both idle policies.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smarm::{Config, Engine, ExitReason, JoinError, RunError};

fn engine(workers: usize) -> Engine {
    Engine::builder().workers(workers).build().expect("engine starts")
}

#[test]
fn block_on_returns_the_root_value() {
    let value = engine(4).block_on(|| {
        let rt = smarm::current_runtime().unwrap();
        let handles: Vec<_> = (0..8).map(|_| rt.spawn(smarm::yield_now).unwrap()).collect();
        handles.into_iter().map(|h| h.join()).filter(Result::is_ok).count()
    });
    assert_eq!(value, Ok(8));
}

#[test]
fn root_panic_and_config_errors_are_typed() {
    let err = engine(2).block_on(|| -> u32 { panic!("root gave up") }).unwrap_err();
    assert_eq!(err, RunError::Panicked("root gave up".into()));
    let err = Engine::builder().workers(0).build().unwrap_err();
    assert!(
        matches!(err, RunError::Build(smarm::BuildError::Config(smarm::ConfigError::NoWorkers))),
        "{err}"
    );
    let err = smarm::runtime::init(Config { stack_size: 1024, ..Config::default() }).unwrap_err();
    assert!(err.to_string().contains("stack_size"), "{err}");
}

/// Absurd sizes are typed errors, not allocation-failure aborts.
#[test]
fn absurd_configs_are_typed_errors() {
    use smarm::{BuildError, ConfigError};
    let err = Engine::builder().workers(1 << 30).build().unwrap_err();
    assert_eq!(err, RunError::Build(BuildError::Config(ConfigError::TooManyWorkers(1 << 30))), "{err}");
    let beyond = smarm::MAX_PROCESSES + 1;
    let err = Engine::builder().max_processes(beyond).build().unwrap_err();
    assert_eq!(err, RunError::Build(BuildError::Config(ConfigError::MaxProcesses(beyond))), "{err}");
    let err = Engine::builder().max_processes(0).build().unwrap_err();
    assert_eq!(err, RunError::Build(BuildError::Config(ConfigError::MaxProcesses(0))), "{err}");
    let err = smarm::try_run_with(Config { max_processes: Some(usize::MAX), ..Config::default() }, || ())
        .unwrap_err();
    assert!(err.to_string().contains("max_processes"), "{err}");
    let err =
        smarm::try_run_with(Config { worker_count: usize::MAX, ..Config::default() }, || ()).unwrap_err();
    assert!(err.to_string().contains("worker_count"), "{err}");
    // The largest allowed sizes are still accepted by validation.
    let limits = Config {
        worker_count: smarm::MAX_WORKERS,
        max_processes: Some(smarm::MAX_PROCESSES),
        ..Config::default()
    };
    assert_eq!(limits.validate(), Ok(()));
    // The pid index space: a u32 index, less the queues' end marker.
    assert_eq!(smarm::MAX_PROCESSES, u32::MAX as usize);
    // The cap allocates nothing: a runtime capped at the whole index space
    // builds at once, and its slab starts empty and grows with its
    // processes.
    let doubled = smarm::try_run_with(
        Config { max_processes: Some(smarm::MAX_PROCESSES), ..Config::default() },
        || {
            let rt = smarm::current_runtime().unwrap();
            assert_eq!(rt.max_processes(), smarm::MAX_PROCESSES);
            let before = rt.slab_len();
            let handles: Vec<_> = (0..5_000u32).map(|i| smarm::spawn(move || i * 2).unwrap()).collect();
            let sum: u64 = handles.into_iter().map(|h| u64::from(h.join().unwrap())).sum();
            assert!(rt.slab_len() > before && rt.slab_len() <= 5_001, "{}", rt.slab_len());
            sum
        },
    );
    assert_eq!(doubled, Ok(4_999 * 5_000));
}

#[test]
fn crash_isolation_1000_processes_every_tenth_panics_on_4_workers() {
    let survivors = Arc::new(AtomicUsize::new(0));
    let s = survivors.clone();
    let checked = engine(4)
        .block_on(move || {
            let rt = smarm::current_runtime().unwrap();
            let handles: Vec<_> = (0..1_000)
                .map(|i| {
                    let s = s.clone();
                    rt.spawn(move || {
                        smarm::yield_now();
                        if i % 10 == 7 {
                            panic!("process {i} panicked on purpose");
                        }
                        smarm::yield_now();
                        s.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap()
                })
                .collect();
            let mut checked = 0;
            for (i, h) in handles.into_iter().enumerate() {
                match h.join() {
                    Ok(()) => assert_ne!(i % 10, 7, "process {i} should have panicked"),
                    Err(JoinError::Exited(ExitReason::Panicked(m))) => {
                        assert_eq!(i % 10, 7, "process {i} panicked: {m}");
                        assert_eq!(m, format!("process {i} panicked on purpose"));
                    }
                    Err(e) => panic!("process {i}: unexpected {e}"),
                }
                checked += 1;
            }
            checked
        })
        .unwrap();
    assert_eq!(checked, 1_000);
    assert_eq!(survivors.load(Ordering::SeqCst), 900);
}

#[test]
fn each_worker_has_its_own_thread_and_processes_stay_on_it() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    // One thread per worker, whatever the CPU count; without the hand-off
    // (`tests/worker_handoff.rs`) each keeps the thread it starts on.
    Engine::builder()
        .workers(4)
        .threads(4)
        .worker_handoff(false)
        .build()
        .expect("engine starts")
        .block_on(move || {
            let handles: Vec<_> = (0..4)
                .map(|w| {
                    let s = s.clone();
                    smarm::spawn_on(w, move || {
                        for _ in 0..3 {
                            let name = std::thread::current().name().map(str::to_owned);
                            s.lock().unwrap().push((w, smarm::current_worker().unwrap(), name));
                            smarm::sleep(Duration::from_millis(1));
                        }
                    })
                    .unwrap()
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        })
        .unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 12);
    for (placed, worker, thread) in seen.iter() {
        assert_eq!(placed, worker);
        assert_eq!(thread.as_deref(), Some(format!("smarm-driver-{worker}").as_str()));
    }
    let threads: HashSet<_> = seen.iter().map(|(_, _, t)| t.clone()).collect();
    assert_eq!(threads.len(), 4);
}

/// Fewer threads than workers: thread `t` drives workers `t`, `t + 2`, …
/// (without the hand-off, which may move them later), and a process still
/// never leaves its worker.
#[test]
fn workers_share_threads_and_processes_stay_on_their_worker() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let engine =
        Engine::builder().workers(6).threads(2).worker_handoff(false).build().expect("engine starts");
    assert_eq!(engine.threads(), 2);
    engine
        .block_on(move || {
            let handles: Vec<_> = (0..6)
                .map(|w| {
                    let s = s.clone();
                    smarm::spawn_on(w, move || {
                        for _ in 0..3 {
                            let name = std::thread::current().name().map(str::to_owned);
                            s.lock().unwrap().push((w, smarm::current_worker().unwrap(), name));
                            smarm::sleep(Duration::from_millis(1));
                        }
                    })
                    .unwrap()
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        })
        .unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 18);
    for (placed, worker, thread) in seen.iter() {
        assert_eq!(placed, worker);
        assert_eq!(thread.as_deref(), Some(format!("smarm-driver-{}", worker % 2).as_str()));
    }
}

/// The builder's defaults: as many workers as CPUs, one thread each; more
/// threads than workers are clamped, and more workers than CPUs get at most
/// one thread per CPU.
#[test]
fn default_workers_and_threads_follow_the_cpus() {
    let cpus = smarm::available_cpus();
    assert!(cpus >= 1);
    assert_eq!(Engine::builder().as_config().worker_count, cpus);
    let engine = Engine::builder().build().expect("engine starts");
    assert_eq!(engine.runtime().worker_count(), cpus);
    assert_eq!(engine.threads(), cpus);
    assert_eq!(engine.block_on(|| 7).unwrap(), 7);
    let engine = Engine::builder().workers(2).threads(64).build().expect("engine starts");
    assert_eq!(engine.threads(), 2);
    engine.wait().unwrap();
    let engine = Engine::builder().workers(4 * cpus).build().expect("engine starts");
    assert_eq!(engine.threads(), cpus);
    engine.wait().unwrap();
    let engine = Engine::builder().workers(3).threads(0).build().expect("engine starts");
    assert_eq!(engine.threads(), 1);
    engine.wait().unwrap();
}

/// The Savina token ring with more workers than this machine has CPUs
/// (whatever it has): 503 processes spread round-robin over 4 × CPUs
/// workers (at least 4), 100,000 hops, so nearly every hop crosses to
/// another worker. Not timed: it must finish, in order, with every process
/// accounted for — both with the default threads (at most one per CPU) and
/// with one thread per worker.
#[test]
fn token_ring_100k_hops_on_more_workers_than_cpus() {
    const RING: usize = 503;
    const HOPS: u64 = 100_000;
    let workers = (4 * smarm::available_cpus()).max(4);
    for threads in [None, Some(workers)] {
        let mut builder = Engine::builder().workers(workers);
        if let Some(threads) = threads {
            builder = builder.threads(threads);
        }
        // The one-thread-per-worker run pays a futex wake at most hops on a
        // small machine: fewer hops keep it short.
        let hops = if threads.is_some() { HOPS / 10 } else { HOPS };
        let (last, visits) = builder
            .build()
            .expect("engine starts")
            .block_on(move || {
                let runtime = smarm::current_runtime().unwrap();
                let (done, finished) = smarm::channel::<(usize, u64)>();
                let (first, mut from) = smarm::channel::<u64>();
                let mut members = Vec::with_capacity(RING);
                for member in 0..RING {
                    let (to, next) = if member == RING - 1 {
                        (first.clone(), None)
                    } else {
                        let (to, next) = smarm::channel();
                        (to, Some(next))
                    };
                    let done = done.clone();
                    let mine = from;
                    members.push(
                        runtime
                            .spawn(move || {
                                let home = smarm::current_worker();
                                let mut visits = 0u64;
                                let mut expected = None;
                                while let Ok(token) = mine.recv() {
                                    // Each lap takes exactly RING hops.
                                    if let Some(expected) = expected {
                                        assert_eq!(token, expected);
                                    }
                                    assert_eq!(smarm::current_worker(), home);
                                    visits += 1;
                                    if token == 0 {
                                        done.send((member, visits)).unwrap();
                                        return visits;
                                    }
                                    expected = token.checked_sub(RING as u64);
                                    if to.send(token - 1).is_err() {
                                        break;
                                    }
                                }
                                done.send((usize::MAX, visits)).unwrap();
                                visits
                            })
                            .unwrap(),
                    );
                    match next {
                        Some(next) => from = next,
                        None => break,
                    }
                }
                first.send(hops).unwrap();
                drop(first);
                drop(done);
                let mut last = None;
                let mut visits = 0;
                while let Ok((member, seen)) = finished.recv() {
                    if member != usize::MAX {
                        last = Some(member);
                    }
                    visits += seen;
                }
                for member in members {
                    member.join().unwrap();
                }
                (last, visits)
            })
            .unwrap();
        assert_eq!(last, Some((hops % RING as u64) as usize));
        // The first member sees the token first, then once per hop.
        assert_eq!(visits, hops + 1);
    }
}

#[test]
fn orphaned_timers_do_not_hold_the_runtime_open() {
    let start = Instant::now();
    engine(2)
        .block_on(|| {
            // A wait whose timeout is an hour away, ended another way: the
            // timer stays in the heap, stale.
            let waker = smarm::begin_wait().unwrap();
            let deadline = smarm::now().unwrap() + Duration::from_secs(3600);
            smarm::wake_at(&waker, deadline).unwrap();
            smarm::retire_wait();
            smarm::spawn_on(1, || {
                let waker = smarm::begin_wait().unwrap();
                smarm::wake_at(&waker, smarm::now().unwrap() + Duration::from_secs(3600)).unwrap();
                smarm::retire_wait();
            })
            .unwrap()
            .join()
            .unwrap();
        })
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(60), "shutdown waited for a stale timer");
}

#[test]
fn wait_and_shutdown_end_the_engine() {
    // wait: spawned through the handle, no root.
    let e = engine(2);
    let count = Arc::new(AtomicUsize::new(0));
    for _ in 0..10 {
        let c = count.clone();
        e.runtime()
            .spawn(move || {
                smarm::sleep(Duration::from_millis(2));
                c.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
    }
    e.wait().unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 10);

    // shutdown: parked-forever processes are stopped and unwound.
    let e = engine(2);
    let handles: Vec<_> = (0..6)
        .map(|_| {
            e.runtime()
                .spawn(|| {
                    let _wait = smarm::begin_wait().unwrap();
                    smarm::park();
                    unreachable!("woken with no waker");
                })
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(10));
    e.shutdown();
    for h in handles {
        // Shutdown stops every parked process: each ends stopped.
        assert!(matches!(h.try_join(), Ok(Err(JoinError::Exited(ExitReason::Stopped)))));
    }
}

/// Cross-worker ping-pong: every message crosses to the other worker's
/// thread, which may be spinning or parked.
fn ping_pong(spin_budget_cycles: u64, rounds: u32) {
    let e = Engine::builder().workers(2).spin_budget_cycles(spin_budget_cycles).build().unwrap();
    let total = e
        .block_on(move || {
            let (to_pong, pong_rx) = smarm::channel::<u32>();
            let (to_ping, ping_rx) = smarm::channel::<u32>();
            let pong = smarm::spawn_on(1, move || {
                while let Ok(n) = pong_rx.recv() {
                    assert_eq!(smarm::current_worker(), Some(1));
                    if to_ping.send(n + 1).is_err() {
                        break;
                    }
                }
            })
            .unwrap();
            let mut n = 0;
            for _ in 0..rounds {
                to_pong.send(n).unwrap();
                n = ping_rx.recv().unwrap();
            }
            drop(to_pong);
            pong.join().unwrap();
            n
        })
        .unwrap();
    assert_eq!(total, rounds);
}

#[test]
fn cross_worker_wakes_with_spinning() {
    ping_pong(Config::default().spin_budget_cycles, 2_000);
}

#[test]
fn cross_worker_wakes_with_park_at_once() {
    ping_pong(0, 2_000);
}

#[test]
fn many_engines_in_sequence_leave_no_threads_behind() {
    for round in 0..5 {
        let v = engine(3).block_on(move || round * 2).unwrap();
        assert_eq!(v, round * 2);
    }
}
