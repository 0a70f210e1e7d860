//! The actor mutex through the public API: exclusion under contention, FIFO
//! hand-off, `try_lock`, `lock_timeout` (grant-first), and waiters or
//! holders stopped mid-wait — on one worker and on four.

mod common;
#[allow(unused_imports)]
use common::{ms, next_worker, record, Drive, Trace};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smarm::LockError;

fn exclusion(drive: Drive) {
    const PROCESSES: usize = 8;
    const ITERATIONS: u64 = 200;
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let counter = Arc::new(smarm::Mutex::new(0u64));
        let inside = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..PROCESSES)
            .map(|p| {
                let (counter, inside) = (counter.clone(), inside.clone());
                rt.spawn(move || {
                    for i in 0..ITERATIONS {
                        // Three ways in: lock, lock_timeout, try_lock polling.
                        let mut guard = match p % 3 {
                            0 => counter.lock(),
                            1 => counter.lock_timeout(Duration::from_secs(30)).unwrap(),
                            _ => loop {
                                if let Some(g) = counter.try_lock() {
                                    break g;
                                }
                                smarm::yield_now();
                            },
                        };
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                        // Read, switch away, write: only exclusion makes
                        // the count exact.
                        let v = *guard;
                        smarm::yield_now();
                        *guard = v + 1;
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(guard);
                        if i.is_multiple_of(3) {
                            smarm::yield_now();
                        }
                    }
                })
                .unwrap()
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*counter.lock(), PROCESSES as u64 * ITERATIONS);
        assert!(counter.try_lock().is_some(), "the mutex was left locked");
    });
}

drive_tests!(exclusion => mutual_exclusion_under_contention, mutual_exclusion_under_contention_on_4_workers, mutual_exclusion_under_contention_on_4_threads);

fn fifo_handoff(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let log = Arc::new(smarm::Mutex::new(Vec::<String>::new()));
        let guard = log.lock();
        let (queued_tx, queued) = smarm::channel::<&'static str>();
        let names = ["a", "b", "c", "d", "e"];
        let handles: Vec<_> = names
            .iter()
            .enumerate()
            .map(|(i, &name)| {
                let (log, queued_tx) = (log.clone(), queued_tx.clone());
                let h = smarm::spawn_on(i % workers, move || {
                    queued_tx.send(name).unwrap();
                    let mut g = log.lock();
                    g.push(format!("{name}+"));
                    // Hold it across a switch: nobody barges in.
                    smarm::yield_now();
                    g.push(format!("{name}-"));
                })
                .unwrap();
                // It announced itself and went straight into lock (on one
                // driver thread it is parked there already); let it park
                // before the next one queues.
                assert_eq!(queued.recv(), Ok(name));
                smarm::sleep(ms(5));
                h
            })
            .collect();
        assert!(log.try_lock().is_none());
        drop(guard);
        // Handed to "a", not freed: still held.
        assert!(log.try_lock().is_none(), "the hand-off let a barger in");
        for h in handles {
            h.join().unwrap();
        }
        let expected: Vec<String> = names.iter().flat_map(|n| [format!("{n}+"), format!("{n}-")]).collect();
        assert_eq!(*log.lock(), expected);
    });
}

drive_tests!(fifo_handoff => waiters_acquire_in_fifo_order, waiters_acquire_in_fifo_order_on_4_workers, waiters_acquire_in_fifo_order_on_4_threads);

#[test]
fn try_lock_fails_while_held() {
    smarm::run(|| {
        let m = Arc::new(smarm::Mutex::new(5));
        let g = m.try_lock().unwrap();
        assert!(m.try_lock().is_none());
        let m2 = m.clone();
        let other = smarm::spawn(move || assert!(m2.try_lock().is_none())).unwrap();
        other.join().unwrap();
        drop(g);
        let mut g = m.try_lock().unwrap();
        *g += 1;
        drop(g);
        assert_eq!(*m.lock(), 6);
    });
    // Outside a process a contended lock_timeout sleeps the thread, then
    // times out.
    let m = smarm::Mutex::new(1);
    let g = m.lock_timeout(ms(1)).unwrap();
    assert_eq!(m.lock_timeout(ms(1)).unwrap_err(), LockError::Timeout);
    drop(g);
    assert_eq!(m.into_inner(), 1);
}

fn lock_timeouts(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let m = Arc::new(smarm::Mutex::new(0u32));
        let other = (smarm::current_worker().unwrap() + 1) % workers;
        let (held_tx, held) = smarm::channel::<()>();
        let m2 = m.clone();
        let holder = smarm::spawn_on(other, move || {
            let mut g = m2.lock();
            held_tx.send(()).unwrap();
            smarm::sleep(ms(40));
            *g += 1;
        })
        .unwrap();
        held.recv().unwrap();
        let now = || smarm::now().unwrap();

        // Held throughout: Timeout, no earlier than the deadline.
        let start = now();
        assert_eq!(m.lock_timeout(ms(5)).unwrap_err(), LockError::Timeout);
        assert!(now() - start >= ms(5));
        assert!(m.try_lock().is_none());

        // Released in time: granted, long before the deadline.
        let start = now();
        let g = m.lock_timeout(Duration::from_secs(10)).unwrap();
        assert!(now() - start < Duration::from_secs(5));
        assert_eq!(*g, 1);
        drop(g);
        holder.join().unwrap();

        // The waiter that timed out left the queue: the unlock that follows
        // frees the lock instead of granting it to nobody.
        let m3 = m.clone();
        let (held_tx, held) = smarm::channel::<()>();
        let holder = smarm::spawn_on(other, move || {
            let _g = m3.lock();
            held_tx.send(()).unwrap();
            smarm::sleep(ms(20));
        })
        .unwrap();
        held.recv().unwrap();
        assert_eq!(m.lock_timeout(ms(2)).unwrap_err(), LockError::Timeout);
        holder.join().unwrap();
        assert!(m.try_lock().is_some(), "a timed-out waiter was granted the lock");
    });
}

drive_tests!(lock_timeouts => lock_timeout_times_out_while_held_and_succeeds_when_released, lock_timeout_times_out_while_held_and_succeeds_when_released_on_4_workers, lock_timeout_times_out_while_held_and_succeeds_when_released_on_4_threads);

/// Runs a `lock_timeout(5ms)` waiter against the root holding the lock;
/// `release` decides how the root gives it up.
fn grant_race(release: fn(smarm::MutexGuard<'_, u32>)) -> Result<u32, LockError> {
    smarm::run(move || {
        let m = Arc::new(smarm::Mutex::new(7u32));
        let guard = m.lock();
        let (result_tx, result) = smarm::channel();
        let m2 = m.clone();
        let waiter = smarm::spawn(move || {
            let got = m2.lock_timeout(ms(5)).map(|g| *g);
            result_tx.send(got).unwrap();
        })
        .unwrap();
        smarm::yield_now(); // the waiter parks, its timer armed
        release(guard);
        let got = result.recv().unwrap();
        waiter.join().unwrap();
        assert!(m.try_lock().is_some(), "the lock was left held");
        got
    })
}

#[test]
fn lock_timeout_grant_landing_before_the_timer_wins() {
    // The deadline passes while the worker thread is blocked; the unlock
    // grants before the timer can fire. Grant first: the waiter owns it.
    let got = grant_race(|guard| {
        std::thread::sleep(ms(20));
        drop(guard);
    });
    assert_eq!(got, Ok(7));
}

#[test]
fn lock_timeout_grant_after_the_timer_wake_still_wins() {
    // The timer wakes the waiter first (it is queued behind us), and the
    // unlock grants before it runs: the grant is found and kept.
    let got = grant_race(|guard| {
        std::thread::sleep(ms(20));
        smarm::yield_now(); // next pass: the timer fires, then we run first
        drop(guard);
    });
    assert_eq!(got, Ok(7));
}

#[test]
fn lock_timeout_times_out_when_the_holder_waits_past_the_deadline() {
    let got = grant_race(|guard| {
        smarm::sleep(ms(20));
        drop(guard);
    });
    assert_eq!(got, Err(LockError::Timeout));
}

fn stopped_waiters(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let m = Arc::new(smarm::Mutex::new(Vec::<&'static str>::new()));
        let spawn_waiter = |name: &'static str, worker: usize| {
            let m = m.clone();
            let got = Arc::new(AtomicBool::new(false));
            let g = got.clone();
            let h = smarm::spawn_on(worker, move || {
                m.lock().push(name);
                g.store(true, Ordering::SeqCst);
            })
            .unwrap();
            smarm::sleep(ms(2)); // parked in lock, in spawn order
            (h, got)
        };

        // 1. Stopped while parked in the queue: it leaves it, and the next
        //    waiter still gets the lock.
        let guard = m.lock();
        let (a, a_got) = spawn_waiter("a", 1 % workers);
        let (b, b_got) = spawn_waiter("b", 2 % workers);
        rt.request_stop(a.pid()).unwrap();
        assert!(a.join().unwrap_err().is_stopped());
        drop(guard);
        b.join().unwrap();
        assert!(!a_got.load(Ordering::SeqCst) && b_got.load(Ordering::SeqCst));

        // 2. Stopped after the grant landed, before collecting it: it
        //    passes the lock on as it unwinds. ("c" shares our worker, so
        //    it cannot run between the grant and the stop.)
        let guard = m.lock();
        let (c, c_got) = spawn_waiter("c", smarm::current_worker().unwrap());
        let (d, d_got) = spawn_waiter("d", 3 % workers);
        drop(guard); // granted to "c", which has not run yet
        rt.request_stop(c.pid()).unwrap();
        assert!(c.join().unwrap_err().is_stopped());
        d.join().unwrap();
        assert!(!c_got.load(Ordering::SeqCst) && d_got.load(Ordering::SeqCst));

        // 3. A holder stopped while parked holding the lock releases it as
        //    it unwinds.
        let m2 = m.clone();
        let holder = smarm::spawn_on(1 % workers, move || {
            let _g = m2.lock();
            smarm::sleep(Duration::from_secs(60));
        })
        .unwrap();
        smarm::sleep(ms(2));
        let (e, e_got) = spawn_waiter("e", 2 % workers);
        rt.request_stop(holder.pid()).unwrap();
        assert!(holder.join().unwrap_err().is_stopped());
        e.join().unwrap();
        assert!(e_got.load(Ordering::SeqCst));

        assert_eq!(*m.lock(), ["b", "d", "e"]);
        assert!(m.try_lock().is_some());
    });
}

drive_tests!(stopped_waiters => stopped_waiters_and_holders_do_not_lose_the_lock, stopped_waiters_and_holders_do_not_lose_the_lock_on_4_workers, stopped_waiters_and_holders_do_not_lose_the_lock_on_4_threads);
