//! Supervisors when things go wrong while they act: a group restart whose
//! second start fails, a start that keeps failing while requests arrive,
//! and children that take too long to stop. On one worker, four workers
//! and four threads.

mod common;
use common::*;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smarm::{ChildSpec, ExitReason, Restart, Shutdown, StartError, Strategy, Supervisor};

/// Counts the instances of a child alive right now: one more while a body
/// runs, one less when it ends (however it ends).
struct Alive(Arc<AtomicUsize>);

impl Alive {
    fn new(count: &Arc<AtomicUsize>) -> Alive {
        count.fetch_add(1, Ordering::SeqCst);
        Alive(count.clone())
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A child that lives until stopped, counted in `alive`; `starts` counts
/// calls of its start function; it fails the calls for which `fail` says so.
fn counted_child(
    name: &str,
    alive: &Arc<AtomicUsize>,
    starts: &Arc<AtomicUsize>,
    fail: impl Fn(usize) -> bool + Send + Sync + 'static,
    crash: Option<smarm::Receiver<()>>,
) -> ChildSpec {
    let (alive, starts) = (alive.clone(), starts.clone());
    let crash = Arc::new(std::sync::Mutex::new(crash));
    ChildSpec::new(name.to_string(), move || {
        let attempt = starts.fetch_add(1, Ordering::SeqCst) + 1;
        if fail(attempt) {
            return Err(StartError::Failed(format!("start {attempt} refused on purpose")));
        }
        let alive = alive.clone();
        // The first instance may be told to crash; later ones just live.
        let crash = crash.lock().unwrap().take();
        smarm::spawn(move || {
            let _alive = Alive::new(&alive);
            match crash {
                Some(crash) => {
                    let _ = crash.recv();
                    panic!("crashed on purpose");
                }
                None => loop {
                    smarm::sleep(Duration::from_secs(60));
                },
            }
        })
        .map_err(StartError::from)
    })
}

/// Waits (yielding) until `condition` holds.
fn until(condition: impl Fn() -> bool) {
    while !condition() {
        smarm::sleep(Duration::from_millis(1));
    }
}

/// c1 crashes; its group restarts; c2's start then fails once. The new c1
/// must be stopped and the whole group started again: in the end exactly
/// one c1 and one c2 run.
fn group_restart(strategy: Strategy) -> impl FnOnce(Drive) {
    move |drive: Drive| {
        drive.run(move || {
            let (c1_alive, c2_alive) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
            let (c1_starts, c2_starts) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
            let (crash_tx, crash_rx) = smarm::channel::<()>();
            let sup = Supervisor::new()
                .strategy(strategy)
                .intensity(10, Duration::from_secs(60))
                .child(counted_child("c1", &c1_alive, &c1_starts, |_| false, Some(crash_rx)))
                // c2's second start (the first restart) fails.
                .child(counted_child("c2", &c2_alive, &c2_starts, |attempt| attempt == 2, None))
                .start()
                .unwrap();
            until(|| c1_alive.load(Ordering::SeqCst) == 1 && c2_alive.load(Ordering::SeqCst) == 1);
            crash_tx.send(()).unwrap();
            // c1 restarted twice (the failed group, then the good one); c2
            // tried twice after its first start.
            until(|| c2_starts.load(Ordering::SeqCst) == 3 && c2_alive.load(Ordering::SeqCst) == 1);
            until(|| c1_alive.load(Ordering::SeqCst) == 1);
            assert_eq!(c1_starts.load(Ordering::SeqCst), 3, "the group was not restarted as a whole");
            smarm::sleep(Duration::from_millis(5));
            assert_eq!(c1_alive.load(Ordering::SeqCst), 1, "a restarted c1 was left running");
            assert_eq!(c2_alive.load(Ordering::SeqCst), 1);
            let children = sup.which_children().unwrap();
            assert!(children.iter().all(|child| child.pid.is_some()), "{children:?}");
            sup.stop().unwrap();
            assert_eq!(c1_alive.load(Ordering::SeqCst) + c2_alive.load(Ordering::SeqCst), 0);
        });
    }
}

fn one_for_all_group(drive: Drive) {
    group_restart(Strategy::OneForAll)(drive)
}
drive_tests!(one_for_all_group => one_for_all_restarts_the_whole_group_when_a_start_fails, one_for_all_group_on_4_workers, one_for_all_group_on_4_threads);

fn rest_for_one_group(drive: Drive) {
    group_restart(Strategy::RestForOne)(drive)
}
drive_tests!(rest_for_one_group => rest_for_one_restarts_the_whole_group_when_a_start_fails, rest_for_one_group_on_4_workers, rest_for_one_group_on_4_threads);

/// A child whose restart keeps failing: the supervisor answers
/// `which_children` and `stop` between attempts, and each attempt counts.
fn answers_while_retrying(drive: Drive) {
    drive.run(move || {
        let alive = Arc::new(AtomicUsize::new(0));
        let starts = Arc::new(AtomicUsize::new(0));
        let refuse = Arc::new(AtomicBool::new(false));
        let (crash_tx, crash_rx) = smarm::channel::<()>();
        let r = refuse.clone();
        let sup = Supervisor::new()
            .intensity(100_000, Duration::from_secs(60))
            .child(counted_child("flaky", &alive, &starts, move |_| r.load(Ordering::SeqCst), Some(crash_rx)))
            .start()
            .unwrap();
        until(|| alive.load(Ordering::SeqCst) == 1);
        refuse.store(true, Ordering::SeqCst);
        crash_tx.send(()).unwrap();
        until(|| starts.load(Ordering::SeqCst) >= 3);
        // Still refusing: the supervisor is in its retries, and answers.
        let children = sup.which_children().unwrap();
        assert!(refuse.load(Ordering::SeqCst));
        assert_eq!(children.len(), 1);
        assert_eq!(children[0].pid, None, "a child whose start fails has no pid");
        let before = starts.load(Ordering::SeqCst);
        until(|| starts.load(Ordering::SeqCst) > before + 2);
        // And stops while still retrying.
        let watch = smarm::monitor(sup.pid());
        sup.stop().unwrap();
        assert_eq!(watch.rx.recv().unwrap().reason, ExitReason::Normal);
        assert_eq!(alive.load(Ordering::SeqCst), 0);
    });
}
drive_tests!(answers_while_retrying => supervisor_answers_while_it_retries_a_restart, supervisor_answers_while_retrying_on_4_workers, supervisor_answers_while_retrying_on_4_threads);

/// A child whose cleanup waits for `release` (or ten seconds, so a broken
/// supervisor cannot hang the test forever), counted in `cleaned` when done.
fn slow_to_stop(
    release: &Arc<AtomicBool>,
    cleaned: &Arc<AtomicBool>,
    pid_tx: smarm::Sender<smarm::Pid>,
) -> ChildSpec {
    let (release, cleaned) = (release.clone(), cleaned.clone());
    ChildSpec::new("slow", move || {
        let (release, cleaned, pid_tx) = (release.clone(), cleaned.clone(), pid_tx.clone());
        smarm::spawn(move || {
            struct Cleanup(Arc<AtomicBool>, Arc<AtomicBool>);
            impl Drop for Cleanup {
                fn drop(&mut self) {
                    let deadline = smarm::now().unwrap() + Duration::from_secs(10);
                    while !self.0.load(Ordering::SeqCst) && smarm::now().unwrap() < deadline {
                        smarm::yield_now();
                    }
                    self.1.store(true, Ordering::SeqCst);
                }
            }
            let _cleanup = Cleanup(release, cleaned);
            pid_tx.send(smarm::self_pid().unwrap()).unwrap();
            loop {
                smarm::sleep(Duration::from_secs(60));
            }
        })
        .map_err(StartError::from)
    })
    .restart(Restart::Temporary)
}

/// After the shutdown timeout (or at once, brutally) the supervisor stops
/// waiting: `stop()` returns while the child still cleans up, the child is
/// reported killed, and its slot comes back once it ends.
fn shutdown_promise(shutdown: Shutdown) -> impl FnOnce(Drive) {
    move |drive: Drive| {
        drive.run(move || {
            let rt = smarm::current_runtime().unwrap();
            let (release, cleaned) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
            let (pid_tx, pid_rx) = smarm::channel();
            let sup = Supervisor::new()
                .child(slow_to_stop(&release, &cleaned, pid_tx).shutdown(shutdown))
                .start()
                .unwrap();
            let child = pid_rx.recv().unwrap();
            let watch = smarm::monitor(child);
            sup.stop().unwrap();
            // The supervisor is gone; the child is still in its cleanup.
            assert!(!cleaned.load(Ordering::SeqCst), "stop() waited for the slow cleanup");
            assert!(rt.is_alive(child));
            release.store(true, Ordering::SeqCst);
            assert_eq!(watch.rx.recv().unwrap().reason, ExitReason::Killed);
            assert!(cleaned.load(Ordering::SeqCst));
            until(|| rt.live() == 1);
        });
    }
}

fn timeout_promise(drive: Drive) {
    shutdown_promise(Shutdown::Timeout(Duration::from_millis(20)))(drive)
}
drive_tests!(timeout_promise => a_shutdown_timeout_bounds_the_wait_for_a_plain_process, timeout_promise_on_4_workers, timeout_promise_on_4_threads);

fn brutal_promise(drive: Drive) {
    shutdown_promise(Shutdown::Brutal)(drive)
}
drive_tests!(brutal_promise => a_brutal_kill_does_not_wait_for_cleanup, brutal_promise_on_4_workers, brutal_promise_on_4_threads);
