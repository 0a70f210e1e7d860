//! Preemption at allocation, in a binary whose global allocator is
//! `smarm::PreemptingAlloc<System>`: CPU-bound processes that allocate share
//! one worker; a loop that does not allocate is stoppable with `check!()`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smarm::{Engine, PreemptingAlloc};

#[global_allocator]
static A: PreemptingAlloc<std::alloc::System> = PreemptingAlloc::new(std::alloc::System);

/// Iterations per process; each allocates and frees one box.
fn iterations() -> u64 {
    if cfg!(target_arch = "aarch64") {
        200_000
    } else {
        1_000_000
    }
}

/// Two CPU-bound processes on one worker, allocating in a loop and never
/// yielding themselves. Each records the other's count when it reaches half
/// of its own work: both must have seen the other progress, so each reached
/// a count while the other was still running.
fn allocating_processes_share_the_worker(engine: Engine) {
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let seen = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let done = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let n = iterations();
    let (c, s, d) = (counts.clone(), seen.clone(), done.clone());
    engine
        .block_on(move || {
            let handles: Vec<_> = (0..2usize)
                .map(|me| {
                    let (c, s, d) = (c.clone(), s.clone(), d.clone());
                    smarm::spawn_on(0, move || {
                        let other = 1 - me;
                        for i in 0..n {
                            let b = std::hint::black_box(Box::new(i));
                            c[me].store(*b + 1, Ordering::Relaxed);
                            if i == n / 2 {
                                s[me].store(c[other].load(Ordering::Relaxed), Ordering::Relaxed);
                                assert!(
                                    !d[other].load(Ordering::Relaxed),
                                    "the other process finished first"
                                );
                            }
                        }
                        d[me].store(true, Ordering::Relaxed);
                    })
                    .unwrap()
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        })
        .unwrap();
    assert_eq!(counts[0].load(Ordering::Relaxed), n);
    assert_eq!(counts[1].load(Ordering::Relaxed), n);
    let (a, b) = (seen[0].load(Ordering::Relaxed), seen[1].load(Ordering::Relaxed));
    assert!(a > 0 && a < n, "process 0 at half-way saw process 1 at {a} of {n}");
    assert!(b > 0 && b < n, "process 1 at half-way saw process 0 at {b} of {n}");
}

#[test]
fn two_allocating_processes_on_one_worker_both_progress() {
    let engine = Engine::builder().workers(1).timeslice(Duration::from_micros(500)).build().unwrap();
    allocating_processes_share_the_worker(engine);
}

#[test]
fn two_allocating_processes_on_one_worker_both_progress_with_default_timeslice() {
    allocating_processes_share_the_worker(Engine::builder().workers(1).build().unwrap());
}

#[test]
fn a_check_loop_without_allocation_is_stoppable() {
    for workers in [1, 2] {
        Engine::builder()
            .workers(workers)
            .timeslice(Duration::from_millis(1))
            .build()
            .unwrap()
            .block_on(move || {
                let rt = smarm::current_runtime().unwrap();
                let spins = Arc::new(AtomicU64::new(0));
                let s = spins.clone();
                // On the root's own worker when there is one worker: only
                // check!()'s timeslice yield lets the root run again.
                let busy = smarm::spawn_on(workers - 1, move || {
                    let mut local = 0u64;
                    loop {
                        local = std::hint::black_box(local.wrapping_add(1));
                        s.store(local, Ordering::Relaxed);
                        smarm::check!();
                    }
                })
                .unwrap();
                while spins.load(Ordering::Relaxed) == 0 {
                    smarm::yield_now();
                }
                smarm::sleep(Duration::from_millis(5));
                let pid = busy.pid();
                rt.request_stop(pid).unwrap();
                assert!(busy.join().unwrap_err().is_stopped());
                assert!(!rt.is_alive(pid));
            })
            .unwrap();
    }
}

#[test]
fn preemption_is_not_taken_under_no_preempt() {
    // A process holding NoPreempt allocates past its timeslice: it keeps
    // the worker, so the other process sees no progress until it lets go.
    let engine = Engine::builder().workers(1).timeslice(Duration::from_micros(200)).build().unwrap();
    let other = Arc::new(AtomicU64::new(0));
    let o = other.clone();
    engine
        .block_on(move || {
            let o2 = o.clone();
            let spinner = smarm::spawn_on(0, move || {
                for i in 0..iterations() / 10 {
                    let b = std::hint::black_box(Box::new(i));
                    o2.store(*b + 1, Ordering::Relaxed);
                }
            })
            .unwrap();
            smarm::yield_now(); // let it start, and get preempted back to us
            let before = {
                let _no_preempt = smarm::NoPreempt::new();
                let before = o.load(Ordering::Relaxed);
                let start = std::time::Instant::now();
                while start.elapsed() < Duration::from_millis(5) {
                    std::hint::black_box(vec![0u8; 64]);
                }
                assert_eq!(o.load(Ordering::Relaxed), before, "preempted under NoPreempt");
                before
            };
            spinner.join().unwrap();
            assert!(o.load(Ordering::Relaxed) > before);
        })
        .unwrap();
}
