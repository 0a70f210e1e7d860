//! Actor-local storage: each process has its own value, and it survives
//! yields and sleeps — across 4 worker threads, and on the single-thread
//! host.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smarm::{ActorLocal, Engine, NotInProcess};

smarm::local! {
    /// A per-process name.
    static NAME: String = String::from("unnamed");
    static COUNTER: u64 = 0;
}

static INITS: AtomicUsize = AtomicUsize::new(0);
static COUNTED_INIT: ActorLocal<Vec<u32>> = ActorLocal::new(|| {
    INITS.fetch_add(1, Ordering::SeqCst);
    Vec::new()
});

fn exercise(id: u64) {
    NAME.set(format!("process {id}")).unwrap();
    for round in 0..20u64 {
        COUNTER.with_mut(|c| *c += id);
        if round % 2 == 0 {
            smarm::yield_now();
        } else {
            smarm::sleep(Duration::from_micros(200));
        }
        assert_eq!(NAME.with(|n| n.clone()), format!("process {id}"));
        assert_eq!(COUNTER.get().unwrap(), id * (round + 1));
    }
    assert_eq!(COUNTER.take().unwrap(), id * 20);
    assert_eq!(COUNTER.get().unwrap(), 0);
    assert_eq!(NAME.replace("done".into()).unwrap(), format!("process {id}"));
}

#[test]
fn values_survive_yields_and_sleeps_on_4_workers() {
    let threads = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    let t = threads.clone();
    Engine::builder()
        .workers(4)
        // One OS thread per worker whatever the CPU count, each keeping
        // its worker (no hand-off): values must survive on every thread.
        .threads(4)
        .worker_handoff(false)
        .build()
        .unwrap()
        .block_on(move || {
            let rt = smarm::current_runtime().unwrap();
            let handles: Vec<_> = (1..=64u64)
                .map(|id| {
                    let t = t.clone();
                    rt.spawn(move || {
                        t.lock().unwrap().insert(std::thread::current().id());
                        exercise(id);
                    })
                    .unwrap()
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            // The root's own value was never touched by the others.
            assert_eq!(NAME.get().unwrap(), "unnamed");
        })
        .unwrap();
    assert_eq!(threads.lock().unwrap().len(), 4, "processes did not spread over the worker threads");
}

#[test]
fn values_survive_on_the_single_thread_host() {
    smarm::run_with(smarm::Config { worker_count: 2, ..smarm::Config::default() }, || {
        let handles: Vec<_> = (1..=8u64).map(|id| smarm::spawn(move || exercise(id)).unwrap()).collect();
        for h in handles {
            h.join().unwrap();
        }
    });
}

#[test]
fn init_runs_once_per_process_and_outside_a_process_is_an_error() {
    let before = INITS.load(Ordering::SeqCst);
    smarm::run(|| {
        let handles: Vec<_> = (0..5u32)
            .map(|i| {
                smarm::spawn(move || {
                    COUNTED_INIT.with_mut(|v| v.push(i));
                    smarm::yield_now();
                    COUNTED_INIT.with_mut(|v| v.push(i));
                    assert_eq!(COUNTED_INIT.get().unwrap(), vec![i, i]);
                })
                .unwrap()
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    assert_eq!(INITS.load(Ordering::SeqCst) - before, 5);
    assert_eq!(NAME.get(), Err(NotInProcess));
    assert_eq!(COUNTER.set(3), Err(NotInProcess));
}

#[test]
fn a_panic_inside_with_does_not_poison_the_value() {
    let r = smarm::run(|| {
        smarm::spawn(|| {
            COUNTER.set(5).unwrap();
            let caught = std::panic::catch_unwind(|| COUNTER.with_mut(|_| panic!("inside with_mut")));
            assert!(caught.is_err());
            // The borrow was released by the unwind.
            COUNTER.with_mut(|c| *c += 1);
            assert_eq!(COUNTER.get().unwrap(), 6);
        })
        .unwrap()
        .join()
    });
    assert_eq!(r, Ok(()));
}
