//! The core runtime through the public API: scheduling order, spawn/join
//! accounting, cancellation, placement and limits — on one worker and on
//! four workers driven by one thread.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smarm::{Config, ExitReason, JoinError, SpawnError};

fn config(workers: usize) -> Config {
    Config { worker_count: workers, ..Config::default() }
}

type Trace = Arc<Mutex<Vec<String>>>;

fn trace() -> Trace {
    Arc::new(Mutex::new(Vec::new()))
}

fn record(t: &Trace, event: impl Into<String>) {
    t.lock().unwrap().push(event.into());
}

fn take(t: &Trace) -> Vec<String> {
    std::mem::take(&mut *t.lock().unwrap())
}

#[test]
fn spawn_order_is_fifo_on_one_worker() {
    let t = trace();
    let t2 = t.clone();
    smarm::run(move || {
        let handles: Vec<_> = ["a", "b", "c"]
            .into_iter()
            .map(|name| {
                let t = t2.clone();
                smarm::spawn(move || record(&t, name)).unwrap()
            })
            .collect();
        record(&t2, "root");
        for h in handles {
            h.join().unwrap();
        }
    });
    assert_eq!(take(&t), ["root", "a", "b", "c"]);
}

fn yield_interleaving(workers: usize) {
    let t = trace();
    let t2 = t.clone();
    smarm::run_with(config(workers), move || {
        let worker = smarm::current_worker().unwrap();
        let handles: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|name| {
                let t = t2.clone();
                smarm::spawn_on(worker, move || {
                    for i in 0..3 {
                        record(&t, format!("{name}{i}"));
                        smarm::yield_now();
                    }
                })
                .unwrap()
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    assert_eq!(take(&t), ["a0", "b0", "a1", "b1", "a2", "b2"]);
}

#[test]
fn yield_interleaves_round_robin() {
    yield_interleaving(1);
}

#[test]
fn yield_interleaves_round_robin_on_4_workers() {
    yield_interleaving(4);
}

fn sleep_order(workers: usize) {
    let t = trace();
    let t2 = t.clone();
    smarm::run_with(config(workers), move || {
        let rt = smarm::current_runtime().unwrap();
        let handles: Vec<_> = [("slow", 60u64), ("fast", 10), ("middle", 35)]
            .into_iter()
            .map(|(name, ms)| {
                let t = t2.clone();
                rt.spawn(move || {
                    smarm::sleep(Duration::from_millis(ms));
                    record(&t, name);
                })
                .unwrap()
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    assert_eq!(take(&t), ["fast", "middle", "slow"]);
}

#[test]
fn sleepers_wake_in_deadline_order() {
    sleep_order(1);
}

#[test]
fn sleepers_wake_in_deadline_order_on_4_workers() {
    sleep_order(4);
}

#[test]
fn sleep_lasts_at_least_its_duration() {
    let elapsed = smarm::run(|| {
        let start = smarm::now().unwrap();
        smarm::sleep(Duration::from_millis(20));
        smarm::now().unwrap() - start
    });
    assert!(elapsed >= Duration::from_millis(20), "woke after {elapsed:?}");
}

fn many_spawns(workers: usize, rounds: u64, batch: u64) {
    let sum = Arc::new(AtomicU64::new(0));
    let count = Arc::new(AtomicU64::new(0));
    let (s2, c2) = (sum.clone(), count.clone());
    smarm::run_with(config(workers), move || {
        let rt = smarm::current_runtime().unwrap();
        let max = rt.max_processes();
        for round in 0..rounds {
            let handles: Vec<_> = (0..batch)
                .map(|i| {
                    let (s, c) = (s2.clone(), c2.clone());
                    let n = round * batch + i;
                    rt.spawn(move || {
                        s.fetch_add(n, Ordering::Relaxed);
                        c.fetch_add(1, Ordering::Relaxed);
                    })
                    .unwrap()
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            // Every slot but the root's is free again, and every stack is
            // back in the pool.
            assert_eq!(rt.free_slots(), max - 1, "round {round}");
            assert_eq!(rt.pooled_stacks() as u64, batch, "round {round}");
        }
    });
    let n = rounds * batch;
    assert_eq!(count.load(Ordering::Relaxed), n);
    assert_eq!(sum.load(Ordering::Relaxed), n * (n - 1) / 2);
}

#[test]
fn hundred_thousand_spawn_join_on_one_worker() {
    many_spawns(1, 100, 1_000);
}

#[test]
fn many_spawn_join_on_4_workers() {
    many_spawns(4, 25, 1_000);
}

/// Sets a flag when dropped: proof that a stopped process unwound.
struct DropFlag(Arc<AtomicBool>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn stop_cases(workers: usize) {
    smarm::run_with(config(workers), || {
        let rt = smarm::current_runtime().unwrap();

        // Parked forever (a wait nobody will wake): the stop wakes and
        // unwinds it; its destructors run.
        let dropped = Arc::new(AtomicBool::new(false));
        let d = dropped.clone();
        let parked = rt
            .spawn(move || {
                let _flag = DropFlag(d);
                let _wait = smarm::begin_wait().unwrap();
                smarm::park();
                unreachable!("a parked process with no waker was resumed");
            })
            .unwrap();
        smarm::sleep(Duration::from_millis(5));
        assert!(rt.is_alive(parked.pid()));
        rt.request_stop(parked.pid()).unwrap();
        let pid = parked.pid();
        assert!(parked.join().unwrap_err().is_stopped());
        assert!(dropped.load(Ordering::SeqCst), "stopped process did not unwind");
        // Stale pid: NoProc everywhere.
        assert_eq!(rt.request_stop(pid), Err(smarm::NoProc(pid)));
        assert!(!rt.is_alive(pid));

        // Ready but never run: stopped before its body starts.
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let ready = rt.spawn(move || r.store(true, Ordering::SeqCst)).unwrap();
        rt.request_stop(ready.pid()).unwrap();
        assert!(ready.join().unwrap_err().is_stopped());
        assert!(!ran.load(Ordering::SeqCst), "a process stopped while ready ran its body");

        // Running a check!() loop on our own worker: the timeslice makes
        // check!() yield, so we get to stop it.
        let spins = Arc::new(AtomicU64::new(0));
        let s = spins.clone();
        let worker = smarm::current_worker().unwrap();
        let busy = smarm::spawn_on(worker, move || loop {
            s.fetch_add(1, Ordering::Relaxed);
            smarm::check!();
        })
        .unwrap();
        smarm::yield_now();
        assert!(spins.load(Ordering::Relaxed) > 0, "the busy process never ran");
        rt.request_stop(busy.pid()).unwrap();
        assert!(busy.join().unwrap_err().is_stopped());
    });
}

#[test]
fn stop_parked_ready_and_busy_processes() {
    stop_cases(1);
}

#[test]
fn stop_parked_ready_and_busy_processes_on_4_workers() {
    stop_cases(4);
}

#[test]
fn join_reports_panic_message_and_others_continue() {
    let survivors = Arc::new(AtomicUsize::new(0));
    let s = survivors.clone();
    smarm::run_with(config(4), move || {
        let rt = smarm::current_runtime().unwrap();
        let handles: Vec<_> = (0..40)
            .map(|i| {
                let s = s.clone();
                rt.spawn(move || {
                    smarm::yield_now();
                    if i % 10 == 3 {
                        panic!("process {i} gave up");
                    }
                    s.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap()
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok(()) => assert_ne!(i % 10, 3),
                Err(JoinError::Exited(ExitReason::Panicked(m))) => {
                    assert_eq!(m, format!("process {i} gave up"))
                }
                Err(e) => panic!("unexpected {e}"),
            }
        }
    });
    assert_eq!(survivors.load(Ordering::SeqCst), 36);
}

#[test]
fn full_slab_is_a_typed_error() {
    smarm::run_with(Config { max_processes: Some(4), ..Config::default() }, || {
        let rt = smarm::current_runtime().unwrap();
        let gate = Arc::new(AtomicBool::new(false));
        let mut held: Vec<_> = (0..3)
            .map(|_| {
                let g = gate.clone();
                smarm::spawn(move || {
                    while !g.load(Ordering::SeqCst) {
                        smarm::yield_now();
                    }
                })
                .unwrap()
            })
            .collect();
        assert_eq!(rt.free_slots(), 0);
        assert_eq!(smarm::spawn(|| {}).unwrap_err(), SpawnError::Full);
        assert_eq!(rt.spawn(|| {}).unwrap_err(), SpawnError::Full);
        gate.store(true, Ordering::SeqCst);
        held.pop().unwrap().join().unwrap();
        // A slot came back: spawning works again.
        smarm::spawn(|| {}).unwrap().join().unwrap();
        for h in held {
            h.join().unwrap();
        }
    });
}

#[test]
fn placement_follows_the_spec() {
    smarm::run_with(config(4), || {
        let rt = smarm::current_runtime().unwrap();
        let me = smarm::current_worker().unwrap();
        // From inside a process: the caller's worker.
        let tx = Arc::new(Mutex::new(Vec::new()));
        let t = tx.clone();
        smarm::spawn(move || t.lock().unwrap().push(smarm::current_worker().unwrap()))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(*tx.lock().unwrap(), [me]);
        // Through the handle: round-robin over all four.
        tx.lock().unwrap().clear();
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let t = tx.clone();
                rt.spawn(move || t.lock().unwrap().push(smarm::current_worker().unwrap())).unwrap()
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let mut workers = tx.lock().unwrap().clone();
        workers.sort();
        assert_eq!(workers, [0, 1, 2, 3]);
        // Explicit placement, and a process stays where it was put.
        let t = tx.clone();
        tx.lock().unwrap().clear();
        smarm::spawn_on(2, move || {
            for _ in 0..3 {
                t.lock().unwrap().push(smarm::current_worker().unwrap());
                smarm::yield_now();
            }
        })
        .unwrap()
        .join()
        .unwrap();
        assert_eq!(*tx.lock().unwrap(), [2, 2, 2]);
        assert_eq!(smarm::spawn_on(9, || {}).unwrap_err(), SpawnError::NoSuchWorker(9));
    });
}

#[test]
fn outside_a_process_errors_are_typed() {
    assert_eq!(smarm::spawn(|| {}).unwrap_err(), SpawnError::NotInProcess);
    assert!(smarm::self_pid().is_none());
    assert!(smarm::begin_wait().is_err());
    smarm::yield_now(); // a no-op, not a crash
}

#[test]
fn self_pid_matches_handle_and_stats_count() {
    smarm::run(|| {
        let rt = smarm::current_runtime().unwrap();
        let seen = Arc::new(Mutex::new(None));
        let s = seen.clone();
        let h = smarm::spawn(move || *s.lock().unwrap() = smarm::self_pid()).unwrap();
        let pid = h.pid();
        h.join().unwrap();
        assert_eq!(*seen.lock().unwrap(), Some(pid));
        // Statistics are published at the end of a pass; a yield may run
        // on within the same pass (up to `process_budget` resumes).
        let mut stats = rt.stats(0).unwrap();
        for _ in 0..1_000 {
            if stats.exited >= 1 && stats.switches >= 3 {
                break;
            }
            smarm::yield_now();
            stats = rt.stats(0).unwrap();
        }
        assert!(stats.spawned >= 2 && stats.exited >= 1 && stats.switches >= 3, "{stats:?}");
    });
}

#[test]
fn root_panic_is_reported_by_try_run() {
    let err = smarm::try_run(|| -> u32 { panic!("root failed") }).unwrap_err();
    assert_eq!(err, smarm::RunError::Panicked("root failed".into()));
}

/// After `block_on` or `run` returns, a spawn through a handle kept from
/// inside is refused with a typed error, and nothing leaks.
#[test]
fn spawning_into_a_finished_runtime_is_refused() {
    let engine = smarm::Engine::builder().workers(2).build().unwrap();
    let rt = engine.block_on(|| smarm::current_runtime().unwrap()).unwrap();
    assert!(rt.is_closed());
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    match rt.spawn(move || r.store(true, Ordering::SeqCst)) {
        Err(SpawnError::Closed) => {}
        other => panic!("spawn into a finished engine: {other:?}"),
    }
    assert_eq!(rt.free_slots(), rt.max_processes(), "a refused spawn kept a slot");
    assert_eq!(rt.live(), 0);
    assert!(!ran.load(Ordering::SeqCst));

    let rt = smarm::run(|| smarm::current_runtime().unwrap());
    assert!(matches!(rt.spawn(|| ()), Err(SpawnError::Closed)));
    assert!(matches!(rt.spawn_on(0, || ()), Err(SpawnError::Closed)));
    assert_eq!(rt.free_slots(), rt.max_processes());
}

/// What a process spawns runs as soon as it switches out — before older
/// ready processes, in spawn order, and depth first: a fresh process's own
/// spawns run before its siblings.
#[test]
fn fresh_spawns_run_next_in_spawn_order_depth_first() {
    let t = trace();
    let t2 = t.clone();
    smarm::run_with(config(1), move || {
        let tx = t2.clone();
        // `x` is an older ready process: it yields between records.
        let x = smarm::spawn(move || {
            for i in 0..3 {
                record(&tx, format!("x{i}"));
                smarm::yield_now();
            }
        })
        .unwrap();
        smarm::yield_now(); // x runs: x0, then x is behind us in the ready queue.
        let ta = t2.clone();
        let a = smarm::spawn(move || {
            record(&ta, "a");
            let children: Vec<_> = ["a1", "a2"]
                .into_iter()
                .map(|name| {
                    let t = ta.clone();
                    smarm::spawn(move || record(&t, name)).unwrap()
                })
                .collect();
            drop(children);
        })
        .unwrap();
        let tb = t2.clone();
        let b = smarm::spawn(move || record(&tb, "b")).unwrap();
        smarm::yield_now(); // a's batch runs before x resumes.
        for h in [a, b, x] {
            h.join().unwrap();
        }
    });
    assert_eq!(take(&t), ["x0", "a", "a1", "a2", "b", "x1", "x2"]);
}

/// Fresh spawns are bounded per pass: a process that keeps spawning does
/// not starve the ready queue.
#[test]
fn a_chain_of_fresh_spawns_does_not_starve_the_ready_queue() {
    const CHAIN: usize = 1_000;
    let t = trace();
    let t2 = t.clone();
    fn link(t: Trace, left: usize) {
        record(&t, "c");
        if left > 0 {
            let t2 = t.clone();
            drop(smarm::spawn(move || link(t2, left - 1)).unwrap());
        }
    }
    smarm::run_with(config(1), move || {
        let tx = t2.clone();
        let x = smarm::spawn(move || {
            for _ in 0..CHAIN {
                record(&tx, "x");
                smarm::yield_now();
            }
        })
        .unwrap();
        smarm::yield_now(); // x is now an older ready process.
        let tc = t2.clone();
        let chain = smarm::spawn(move || link(tc, CHAIN)).unwrap();
        chain.join().unwrap();
        x.join().unwrap();
    });
    let events = take(&t);
    // The longest run of chain links between two records of `x` is bounded
    // by the per-pass budget of fresh spawns (64 by default).
    let mut longest = 0;
    let mut run = 0;
    for e in &events {
        if e == "c" {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    assert_eq!(events.iter().filter(|e| *e == "c").count(), CHAIN + 1);
    assert!(longest <= 64, "x waited behind {longest} fresh spawns");
    assert!(longest >= 32, "fresh spawns should run back to back ({longest})");
}

/// Depth-first order keeps a tree's live set small: a 4-level tree of
/// 11,111 processes never has more than a few dozen alive at once.
#[test]
fn a_tree_holds_only_its_frontier_alive() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static ALIVE: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);
    fn node(level: u32, parent: smarm::Sender<u64>) {
        if level == 4 {
            let _ = parent.send(1);
        } else {
            let (tx, rx) = smarm::channel();
            for _ in 0..10 {
                let tx = tx.clone();
                let now = ALIVE.fetch_add(1, Ordering::Relaxed) + 1;
                PEAK.fetch_max(now, Ordering::Relaxed);
                drop(smarm::spawn(move || node(level + 1, tx)).unwrap());
            }
            drop(tx);
            let sum: u64 = (0..10).map(|_| rx.recv().unwrap()).sum();
            let _ = parent.send(sum);
        }
        ALIVE.fetch_sub(1, Ordering::Relaxed);
    }
    let leaves = smarm::run_with(config(1), || {
        let (tx, rx) = smarm::channel();
        ALIVE.fetch_add(1, Ordering::Relaxed);
        drop(smarm::spawn(move || node(0, tx)).unwrap());
        rx.recv().unwrap()
    });
    assert_eq!(leaves, 10_000);
    assert_eq!(ALIVE.load(Ordering::Relaxed), 0);
    let peak = PEAK.load(Ordering::Relaxed);
    assert!(peak <= 200, "{peak} processes alive at once (breadth first holds 11,111)");
}

/// A process that spawns in a loop (each spawn sent one message, as a
/// fork-join does) cannot outrun its spawns: a worker runs a batch of them
/// before resuming the spawner again, so the live set — each with its stack
/// — stays bounded rather than growing to every process spawned. On one
/// worker and across two (spawns through the handle go round-robin).
#[test]
fn a_spawning_loop_does_not_outrun_its_spawns() {
    const SPAWNS: usize = 20_000;
    for workers in [1, 2] {
        let (peak, reported) = smarm::run_with(config(workers), || {
            let runtime = smarm::current_runtime().unwrap();
            let (done, finished) = smarm::channel::<()>();
            let mut peak = 0;
            for _ in 0..SPAWNS {
                let (to_child, inbox) = smarm::channel::<u32>();
                let done = done.clone();
                drop(runtime.spawn(move || {
                    std::hint::black_box(inbox.recv().unwrap());
                    done.send(()).unwrap();
                }));
                to_child.send(7).unwrap();
                peak = peak.max(runtime.live());
            }
            drop(done);
            (peak, std::iter::from_fn(|| finished.recv().ok()).count())
        });
        assert_eq!(reported, SPAWNS, "every child reported ({workers} workers)");
        assert!(peak <= 2_000, "{peak} processes alive at once on {workers} workers");
    }
}
