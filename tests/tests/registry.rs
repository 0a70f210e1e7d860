//! The named registry through the public API: one name per pid, one pid per
//! name, dead holders behave as absent — on one worker and on four.

mod common;
#[allow(unused_imports)]
use common::{ms, next_worker, record, Drive, Trace};

use smarm::{JoinHandle, Pid, RegisterError};

/// A process that lives until the returned sender is dropped.
fn parked(worker: usize) -> (JoinHandle, smarm::Sender<()>) {
    let (tx, rx) = smarm::channel::<()>();
    let h = smarm::spawn_on(worker, move || while rx.recv().is_ok() {}).unwrap();
    (h, tx)
}

fn finish((h, tx): (JoinHandle, smarm::Sender<()>)) {
    drop(tx);
    h.join().unwrap();
}

fn basics(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let a = parked(1 % workers);
        let b = parked(2 % workers);
        let (pa, pb) = (a.0.pid(), b.0.pid());

        assert_eq!(smarm::whereis("alpha"), None);
        assert_eq!(smarm::register("alpha", pa), Ok(()));
        assert_eq!(smarm::whereis("alpha"), Some(pa));
        assert_eq!(smarm::name_of(pa).as_deref(), Some("alpha"));
        assert_eq!(smarm::name_of(pb), None);
        // Registering the same binding again changes nothing.
        assert_eq!(smarm::register("alpha", pa), Ok(()));

        // One name per pid.
        assert_eq!(smarm::register("beta", pa), Err(RegisterError::AlreadyNamed { name: "alpha".into() }));
        assert_eq!(smarm::whereis("beta"), None);
        // One pid per name, against a live holder.
        assert_eq!(smarm::register("alpha", pb), Err(RegisterError::NameTaken { holder: pa }));
        assert_eq!(smarm::name_of(pb), None);

        // Unregister frees both sides.
        assert_eq!(smarm::unregister("alpha"), Some(pa));
        assert_eq!(smarm::unregister("alpha"), None);
        assert_eq!(smarm::whereis("alpha"), None);
        assert_eq!(smarm::name_of(pa), None);
        assert_eq!(smarm::register("alpha", pb), Ok(()));
        assert_eq!(smarm::register("beta", pa), Ok(()));
        assert_eq!(smarm::whereis("alpha"), Some(pb));
        assert_eq!(smarm::whereis("beta"), Some(pa));

        // A registered process can look itself up from anywhere.
        let (seen_tx, seen) = smarm::channel();
        let looker = smarm::spawn_on(3 % workers, move || {
            seen_tx.send((smarm::whereis("alpha"), smarm::whereis("beta"))).unwrap();
        })
        .unwrap();
        assert_eq!(seen.recv(), Ok((Some(pb), Some(pa))));
        looker.join().unwrap();

        finish(a);
        finish(b);
    });
}

drive_tests!(basics => register_whereis_unregister_name_of, register_whereis_unregister_name_of_on_4_workers, register_whereis_unregister_name_of_on_4_threads);

fn dead_holders(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let a = parked(1 % workers);
        let pa = a.0.pid();
        smarm::register("svc", pa).unwrap();
        finish(a);
        // Dead: absent everywhere, without anyone unregistering.
        assert_eq!(smarm::whereis("svc"), None);
        assert_eq!(smarm::name_of(pa), None);
        assert_eq!(smarm::unregister("svc"), None);

        // Dead holder, binding never touched since: the name is free.
        let b = parked(2 % workers);
        let pb = b.0.pid();
        smarm::register("svc", pb).unwrap();
        finish(b);
        let c = parked(3 % workers);
        let pc = c.0.pid();
        assert_eq!(smarm::register("svc", pc), Ok(()));
        assert_eq!(smarm::whereis("svc"), Some(pc));
        assert_eq!(smarm::name_of(pb), None);
        // And the new holder may not take a second name while holding it.
        assert_eq!(smarm::register("other", pc), Err(RegisterError::AlreadyNamed { name: "svc".into() }));

        // Registering a dead or stale pid.
        assert_eq!(smarm::register("ghost", pa), Err(RegisterError::NoProc(pa)));
        let made_up = Pid::from_parts(9_999, 5);
        assert_eq!(smarm::register("ghost", made_up), Err(RegisterError::NoProc(made_up)));
        assert_eq!(smarm::whereis("ghost"), None);
        finish(c);
        assert_eq!(smarm::whereis("svc"), None);
    });
}

drive_tests!(dead_holders => dead_holders_behave_as_absent, dead_holders_behave_as_absent_on_4_workers, dead_holders_behave_as_absent_on_4_threads);

fn race_for_a_name(drive: Drive) {
    const CONTENDERS: usize = 8;
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        // Each contender tries to take "leader" and reports; the winner
        // holds it until released, the losers report the holder they saw.
        let (report_tx, reports) = smarm::channel::<(Pid, Result<(), RegisterError>)>();
        let (release_tx, release) = smarm::channel::<()>();
        let release = std::sync::Arc::new(smarm::Mutex::new(release));
        let handles: Vec<_> = (0..CONTENDERS)
            .map(|_| {
                let report_tx = report_tx.clone();
                let release = release.clone();
                rt.spawn(move || {
                    let me = smarm::self_pid().unwrap();
                    smarm::yield_now();
                    let result = smarm::register("leader", me);
                    let won = result.is_ok();
                    report_tx.send((me, result)).unwrap();
                    if won {
                        let _ = release.lock().recv();
                    }
                })
                .unwrap()
            })
            .collect();
        drop(report_tx);
        let mut winners = Vec::new();
        let mut holders = Vec::new();
        for _ in 0..CONTENDERS {
            match reports.recv().unwrap() {
                (pid, Ok(())) => winners.push(pid),
                (_, Err(RegisterError::NameTaken { holder })) => holders.push(holder),
                (_, Err(e)) => panic!("unexpected {e}"),
            }
        }
        assert_eq!(winners.len(), 1, "more than one process holds the name");
        assert!(holders.iter().all(|h| *h == winners[0]));
        assert_eq!(smarm::whereis("leader"), Some(winners[0]));
        assert_eq!(smarm::name_of(winners[0]).as_deref(), Some("leader"));
        drop(release_tx);
        for h in handles {
            h.join().unwrap();
        }
        // The winner is gone: the name is free for the root.
        let me = smarm::self_pid().unwrap();
        assert_eq!(smarm::register("leader", me), Ok(()));
        assert_eq!(smarm::unregister("leader"), Some(me));
    });
}

drive_tests!(race_for_a_name => racing_registrations_have_one_winner, racing_registrations_have_one_winner_on_4_workers, racing_registrations_have_one_winner_on_4_threads);

#[test]
fn registry_outside_a_process_is_typed() {
    let pid = Pid::from_parts(0, 0);
    assert_eq!(smarm::register("x", pid), Err(RegisterError::NotInProcess));
    assert_eq!(smarm::whereis("x"), None);
    assert_eq!(smarm::unregister("x"), None);
    assert_eq!(smarm::name_of(pid), None);
    let e: &dyn std::error::Error = &RegisterError::AlreadyNamed { name: "a".into() };
    assert!(e.to_string().contains("unregister"));
}
