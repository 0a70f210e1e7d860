//! `JoinHandle<T>`: a process's return value comes back through `join`, as
//! with `std::thread` and tokio; a panic and a stop come back as
//! `JoinError::Exited` with the same reason monitors see. Each scenario on
//! one worker, four workers on one thread, and the four-thread Engine.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{next_worker, Drive};
use smarm::{ExitReason, JoinError, JoinHandle};

/// A value of a type with a destructor, counted: every value made is
/// dropped exactly once, joined or not.
struct Counted {
    value: u64,
    drops: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn values(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        // A plain value, from the caller's worker and from another one.
        let here: JoinHandle<i32> = smarm::spawn(|| 42).unwrap();
        let there = smarm::spawn_on(next_worker(workers), || String::from("from afar")).unwrap();
        assert_eq!(here.join(), Ok(42));
        assert_eq!(there.join().as_deref(), Ok("from afar"));

        // Through the runtime handle (round-robin placement), many at once:
        // each handle gets its own process's value.
        let rt = smarm::current_runtime().unwrap();
        let handles: Vec<JoinHandle<u64>> = (0..100u64).map(|i| rt.spawn(move || i * i).unwrap()).collect();
        let squares: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(squares, (0..100u64).map(|i| i * i).collect::<Vec<_>>());

        // A value with a destructor: joined ones are moved out, unjoined
        // ones are dropped with their slot; each exactly once.
        let drops = Arc::new(AtomicUsize::new(0));
        let d = drops.clone();
        let joined = smarm::spawn(move || Counted { value: 7, drops: d }).unwrap();
        let counted = joined.join().unwrap();
        assert_eq!(counted.value, 7);
        assert_eq!(drops.load(Ordering::SeqCst), 0, "the joined value was dropped early");
        drop(counted);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        let d = drops.clone();
        let detached = smarm::spawn_on(next_worker(workers), move || Counted { value: 8, drops: d }).unwrap();
        while !detached.is_finished() {
            smarm::yield_now();
        }
        drop(detached);
        assert_eq!(drops.load(Ordering::SeqCst), 2, "an unjoined value was not dropped once");

        // A body returning nothing: the handle is `JoinHandle<()>`, and
        // writing it without a type still compiles.
        let unit: JoinHandle = smarm::spawn(|| {}).unwrap();
        assert_eq!(unit.join(), Ok(()));
    });
}
drive_tests!(values => values_come_back_through_join, values_come_back_through_join_on_4_workers, values_come_back_through_join_on_4_threads);

fn panics(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let h: JoinHandle<u32> = smarm::spawn_on(next_worker(workers), || panic!("no value today")).unwrap();
        let monitor = smarm::monitor(h.pid());
        let error = h.join().unwrap_err();
        assert!(error.is_panic() && !error.is_stopped());
        assert_eq!(error.panic_message(), Some("no value today"));
        // The same reason the monitor saw: one vocabulary for a death.
        let down = monitor.rx.recv().unwrap();
        assert_eq!(error, JoinError::Exited(down.reason));
    });
}
drive_tests!(panics => a_panic_comes_back_as_its_message, a_panic_comes_back_as_its_message_on_4_workers, a_panic_comes_back_as_its_message_on_4_threads);

fn stops(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let h: JoinHandle<u32> = smarm::spawn_on(next_worker(workers), || {
            smarm::sleep(Duration::from_secs(60));
            5
        })
        .unwrap();
        smarm::sleep(Duration::from_millis(2));
        smarm::request_stop(h.pid()).unwrap();
        let error = h.join().unwrap_err();
        assert!(error.is_stopped() && !error.is_panic());
        assert_eq!(error, JoinError::Exited(ExitReason::Stopped));
        assert_eq!(error.reason(), Some(&ExitReason::Stopped));
    });
}
drive_tests!(stops => a_stop_comes_back_as_stopped, a_stop_comes_back_as_stopped_on_4_workers, a_stop_comes_back_as_stopped_on_4_threads);

/// `try_join` gives the handle back while the process runs, and the value
/// once it has ended.
fn try_joins(drive: Drive) {
    drive.run(move || {
        let (tx, rx) = smarm::channel::<()>();
        let mut handle = smarm::spawn(move || {
            rx.recv().unwrap();
            "done"
        })
        .unwrap();
        handle = match handle.try_join() {
            Err(running) => running,
            Ok(result) => panic!("finished before it was told to: {result:?}"),
        };
        tx.send(()).unwrap();
        loop {
            match handle.try_join() {
                Ok(result) => {
                    assert_eq!(result, Ok("done"));
                    break;
                }
                Err(running) => {
                    handle = running;
                    smarm::yield_now();
                }
            }
        }
    });
}
drive_tests!(try_joins => try_join_returns_the_handle_until_the_value_is_there, try_join_on_4_workers, try_join_on_4_threads);

/// `smarm::run` and the Engine's `block_on` return the root's value
/// through the same typed handle.
#[test]
fn the_root_value_comes_back_from_run_and_block_on() {
    assert_eq!(smarm::run(|| vec![1, 2, 3]), vec![1, 2, 3]);
    let engine = smarm::Engine::builder().workers(2).build().unwrap();
    assert_eq!(engine.block_on(|| "engine").unwrap(), "engine");
}

/// The README's first example, as written there.
#[test]
fn readme_first_example() {
    let sum = smarm::run(|| {
        let workers: Vec<smarm::JoinHandle<u64>> = (0..10u64)
            .map(|i| {
                smarm::spawn(move || {
                    smarm::sleep(Duration::from_millis(10 - i));
                    i
                })
                .unwrap()
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum::<u64>()
    });
    assert_eq!(sum, 45);
}

/// `live()` no longer counts a process once its `join` has returned.
fn live_count(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let handles: Vec<_> = (0..200usize)
            .map(|i| {
                smarm::spawn_on(i % workers, move || {
                    if i % 3 == 0 {
                        smarm::yield_now()
                    }
                })
                .unwrap()
            })
            .collect();
        let mut remaining = handles.len();
        for handle in handles {
            handle.join().unwrap();
            remaining -= 1;
            // The root plus the processes not yet joined; nobody else runs.
            assert!(rt.live() <= 1 + remaining, "live {} after a join, {} remain", rt.live(), remaining);
        }
        assert_eq!(rt.live(), 1, "only the root is live once every join returned");
    });
}
drive_tests!(live_count => live_is_exact_when_join_returns, live_is_exact_when_join_returns_on_4_workers, live_is_exact_when_join_returns_on_4_threads);

#[test]
fn a_join_after_the_process_ended_gives_its_slot_back_at_once() {
    // One worker: the slab's free list hands out the slot given back last.
    let drops = Arc::new(AtomicUsize::new(0));
    let counted = drops.clone();
    smarm::run(move || {
        let ended = smarm::spawn(move || Counted { value: 7, drops: counted }).unwrap();
        let pid = ended.pid();
        while !ended.is_finished() {
            smarm::yield_now();
        }
        let value = ended.join().unwrap();
        assert_eq!(value.value, 7);
        drop(value);
        // The join that found the process ended reclaimed its slot: the
        // next spawn takes it, in the next generation.
        let next = smarm::spawn(|| ()).unwrap();
        assert_eq!(
            next.pid().index(),
            pid.index(),
            "the ended process's slot was not given back by its join"
        );
        assert_ne!(next.pid(), pid);
        next.join().unwrap();
    });
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the joined value is dropped once");
}

#[test]
fn a_process_stopped_before_it_ever_ran_drops_its_body_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let counted = Counted { value: 1, drops: drops.clone() };
    smarm::run(move || {
        // Spawned and stopped before the root yields: it never runs.
        let never = smarm::spawn(move || {
            let held = counted;
            held.value
        })
        .unwrap();
        smarm::request_stop(never.pid()).unwrap();
        assert_eq!(never.join().unwrap_err(), JoinError::Exited(ExitReason::Stopped));
    });
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the unrun body's captures are dropped once");
}
