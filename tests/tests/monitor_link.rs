//! Monitors, links and exit trapping through the public API, checked
//! against Erlang's semantics — on one worker and on four.

mod common;
#[allow(unused_imports)]
use common::{ms, next_worker, record, Drive, Trace};

use std::time::Duration;

use smarm::{Down, ExitReason, ExitSignal, JoinHandle, NoProc, Pid, Receiver, TryRecvError};

/// Worker `k` places after the caller's (wrapping).
fn worker_after(workers: usize, k: usize) -> usize {
    (smarm::current_worker().unwrap() + k) % workers
}

/// A process that parks in `recv` until told to exit (or stopped), and
/// answers pings meanwhile: proof it is alive and responsive.
struct Peer {
    handle: JoinHandle,
    ping: smarm::Sender<smarm::Sender<()>>,
}

impl Peer {
    fn spawn(worker: usize) -> Peer {
        let (ping, inbox) = smarm::channel::<smarm::Sender<()>>();
        let handle = smarm::spawn_on(worker, move || {
            while let Ok(reply) = inbox.recv() {
                let _ = reply.send(());
            }
        })
        .unwrap();
        Peer { handle, ping }
    }

    fn pid(&self) -> Pid {
        self.handle.pid()
    }

    fn is_responsive(&self) -> bool {
        let (tx, rx) = smarm::channel();
        self.ping.send(tx).is_ok() && rx.recv().is_ok()
    }

    /// Tells it to return normally and waits for it.
    fn finish(self) {
        drop(self.ping);
        self.handle.join().unwrap();
    }
}

fn no_down(rx: &Receiver<Down>) {
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "unexpected Down");
}

fn normal_exit_does_not_propagate(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let peer = Peer::spawn(worker_after(workers, 1));
        let watch = smarm::monitor(peer.pid());
        let p = peer.pid();
        let (go_tx, go) = smarm::channel::<()>();
        let child = smarm::spawn_on(worker_after(workers, 2), move || {
            smarm::link(p).unwrap();
            // Held until we monitor it: on four threads it could otherwise
            // be gone before the monitor is made (a correct NoProc).
            let _ = go.recv();
        })
        .unwrap();
        let child_watch = smarm::monitor(child.pid());
        drop(go_tx);
        child.join().unwrap();
        assert_eq!(child_watch.rx.recv().unwrap().reason, ExitReason::Normal);
        smarm::sleep(ms(2));
        assert!(peer.is_responsive(), "a normal exit killed a linked peer");
        no_down(&watch.rx);
        peer.finish();
        assert_eq!(watch.rx.recv().unwrap().reason, ExitReason::Normal);

        // A trapping peer is told, as Erlang's {'EXIT', Pid, normal}, and
        // lives on.
        let (trapped_tx, trapped_rx) = smarm::channel::<Result<ExitSignal, TryRecvError>>();
        let (linked_tx, linked_rx) = smarm::channel::<Pid>();
        let trapper = smarm::spawn_on(worker_after(workers, 1), move || {
            let exits = smarm::trap_exit().unwrap();
            let (go_tx, go) = smarm::channel::<()>();
            let child = smarm::spawn_on(worker_after(workers, 1), move || {
                let _ = go.recv();
            })
            .unwrap();
            smarm::link(child.pid()).unwrap();
            linked_tx.send(child.pid()).unwrap();
            drop(go_tx);
            // `join` returns after the death notifications: the signal is
            // already queued.
            child.join().unwrap();
            trapped_tx.send(exits.try_recv()).unwrap();
            trapped_tx.send(exits.try_recv()).unwrap();
        })
        .unwrap();
        let child = linked_rx.recv().unwrap();
        assert_eq!(trapped_rx.recv().unwrap(), Ok(ExitSignal { from: child, reason: ExitReason::Normal }));
        assert_eq!(trapped_rx.recv().unwrap(), Err(TryRecvError::Empty), "one exit, one signal");
        trapper.join().unwrap();
    });
}

drive_tests!(normal_exit_does_not_propagate => normal_exit_does_not_kill_a_linked_peer_but_a_trapper_is_told, normal_exit_does_not_kill_a_linked_peer_on_4_workers, normal_exit_does_not_kill_a_linked_peer_on_4_threads);

fn trapping_peer_gets_exit_signals(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let exits = smarm::trap_exit().unwrap();
        let me = smarm::self_pid().unwrap();

        // A panic arrives as a message, with the message text.
        let crasher = smarm::spawn_on(worker_after(workers, 1), move || {
            smarm::link(me).unwrap();
            panic!("boom {}", 7);
        })
        .unwrap();
        let pid = crasher.pid();
        assert!(crasher.join().is_err());
        assert_eq!(
            exits.recv().unwrap(),
            ExitSignal { from: pid, reason: ExitReason::Panicked("boom 7".into()) }
        );

        // A stop arrives too, as Stopped; the link was made from our side.
        let sleeper =
            smarm::spawn_on(worker_after(workers, 2), || smarm::sleep(Duration::from_secs(60))).unwrap();
        smarm::link(sleeper.pid()).unwrap();
        smarm::request_stop(sleeper.pid()).unwrap();
        let pid = sleeper.pid();
        assert!(sleeper.join().unwrap_err().is_stopped());
        assert_eq!(exits.recv().unwrap(), ExitSignal { from: pid, reason: ExitReason::Stopped });
        assert_eq!(exits.try_recv(), Err(TryRecvError::Empty));
        // We are still here: trapping kept us alive.
    });
}

drive_tests!(trapping_peer_gets_exit_signals => trapping_peer_receives_the_exit_as_a_message, trapping_peer_receives_the_exit_as_a_message_on_4_workers, trapping_peer_receives_the_exit_as_a_message_on_4_threads);

fn abnormal_exit_stops_linked_peers(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        // crasher — p — q: a chain of links; only `crasher` links to `p`.
        let p = Peer::spawn(worker_after(workers, 1));
        let q = Peer::spawn(worker_after(workers, 2));
        let (p_pid, q_pid) = (p.pid(), q.pid());
        let p_watch = smarm::monitor(p_pid);
        let q_watch = smarm::monitor(q_pid);
        let rt = smarm::current_runtime().unwrap();
        rt.link(p_pid, q_pid).unwrap();
        let (go_tx, go) = smarm::channel::<()>();
        let crasher = smarm::spawn_on(worker_after(workers, 3), move || {
            smarm::link(p_pid).unwrap();
            go.recv().unwrap();
            panic!("crashed on purpose");
        })
        .unwrap();
        let c_pid = crasher.pid();
        let c_watch = smarm::monitor(c_pid);
        smarm::sleep(ms(2));
        assert!(p.is_responsive() && q.is_responsive());
        go_tx.send(()).unwrap();

        let crashed = ExitReason::Panicked("crashed on purpose".into());
        assert_eq!(c_watch.rx.recv().unwrap().reason, crashed);
        let p_down = p_watch.rx.recv().unwrap();
        assert_eq!(p_down.pid, p_pid);
        let p_reason = ExitReason::Linked { peer: c_pid, reason: Box::new(crashed) };
        assert_eq!(p_down.reason, p_reason);
        // The stop propagates on along p's own link, with its reason.
        let q_down = q_watch.rx.recv().unwrap();
        assert_eq!(q_down.reason, ExitReason::Linked { peer: p_pid, reason: Box::new(p_reason) });
        assert!(q_down.reason.is_abnormal());
        assert!(crasher.join().is_err());
        // Stopped by the link, not panicked: join reports the same reason
        // as the monitors.
        assert_eq!(p.handle.join(), Err(smarm::JoinError::Exited(p_down.reason)));
        assert_eq!(q.handle.join(), Err(smarm::JoinError::Exited(q_down.reason)));
        assert!(!rt.is_alive(p_pid) && !rt.is_alive(q_pid));
    });
}

drive_tests!(abnormal_exit_stops_linked_peers => abnormal_exit_stops_linked_peers_with_the_reason_for_their_monitors, abnormal_exit_stops_linked_peers_with_the_reason_for_their_monitors_on_4_workers, abnormal_exit_stops_linked_peers_with_the_reason_for_their_monitors_on_4_threads);

fn unlink_before_death(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let p = Peer::spawn(worker_after(workers, 1));
        let q = Peer::spawn(worker_after(workers, 1));
        let watches = [smarm::monitor(p.pid()), smarm::monitor(q.pid())];
        let (p_pid, q_pid) = (p.pid(), q.pid());
        let crasher = smarm::spawn_on(worker_after(workers, 2), move || {
            smarm::link(p_pid).unwrap();
            smarm::link(q_pid).unwrap();
            smarm::link(q_pid).unwrap(); // twice is once
            smarm::unlink(p_pid);
            smarm::unlink(q_pid);
            panic!("unlinked crash");
        })
        .unwrap();
        assert!(crasher.join().is_err());
        // Unlinked from the other side: the trapping root gets no signal.
        let exits = smarm::trap_exit().unwrap();
        let (go_tx, go) = smarm::channel::<()>();
        let crasher = smarm::spawn_on(worker_after(workers, 3), move || {
            let _ = go.recv();
            panic!("unlinked too");
        })
        .unwrap();
        smarm::link(crasher.pid()).unwrap();
        smarm::unlink(crasher.pid());
        drop(go_tx);
        assert!(crasher.join().is_err());
        smarm::sleep(ms(2));
        assert_eq!(exits.try_recv(), Err(TryRecvError::Empty));

        assert!(p.is_responsive() && q.is_responsive());
        for w in &watches {
            no_down(&w.rx);
        }
        p.finish();
        q.finish();
        for w in &watches {
            assert_eq!(w.rx.recv().unwrap().reason, ExitReason::Normal);
        }
    });
}

drive_tests!(unlink_before_death => unlink_before_death_means_no_signal, unlink_before_death_means_no_signal_on_4_workers, unlink_before_death_means_no_signal_on_4_threads);

#[test]
fn monitor_of_a_dead_or_stale_pid_is_noproc_at_once() {
    smarm::run(|| {
        let rt = smarm::current_runtime().unwrap();
        // Finished, its handle still held (slot not reclaimed yet).
        let held = smarm::spawn(|| {}).unwrap();
        let dead = held.pid();
        smarm::yield_now();
        assert!(held.is_finished());
        // Finished and reclaimed.
        let gone = smarm::spawn(|| {}).unwrap();
        let reclaimed = gone.pid();
        gone.join().unwrap();
        let made_up = Pid::from_parts(12_345, 99);
        for pid in [dead, reclaimed, made_up] {
            assert!(!rt.is_alive(pid));
            let m = smarm::monitor(pid);
            assert_eq!(m.target, pid);
            let down = m.rx.try_recv().expect("NoProc must be there at once");
            assert_eq!((down.id, down.pid, down.reason), (m.id, pid, ExitReason::NoProc));
            // One Down, then nothing more can come.
            assert_eq!(m.rx.try_recv(), Err(TryRecvError::Disconnected));
        }
        held.join().unwrap();
    });
    // Outside a process there is no runtime to watch in: NoProc.
    let m = smarm::monitor(Pid::from_parts(0, 0));
    assert_eq!(m.rx.try_recv().unwrap().reason, ExitReason::NoProc);
}

fn demonitor_and_two_monitors(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (go_tx, go) = smarm::channel::<()>();
        let target = smarm::spawn_on(worker_after(workers, 1), move || {
            let _ = go.recv();
        })
        .unwrap();
        let pid = target.pid();
        let first = smarm::monitor(pid);
        let second = smarm::monitor(pid);
        let cancelled = smarm::monitor(pid);
        assert_ne!(first.id, second.id);
        assert_ne!(second.id, cancelled.id);
        assert!(smarm::demonitor(&cancelled), "an active monitor was not active");
        assert!(!smarm::demonitor(&cancelled), "demonitor twice");
        go_tx.send(()).unwrap();
        target.join().unwrap();
        let downs = [first.rx.recv().unwrap(), second.rx.recv().unwrap()];
        assert_eq!(downs[0], Down { id: first.id, pid, reason: ExitReason::Normal });
        assert_eq!(downs[1], Down { id: second.id, pid, reason: ExitReason::Normal });
        // One Down each, and none for the cancelled monitor, ever.
        assert_eq!(first.rx.try_recv(), Err(TryRecvError::Disconnected));
        assert_eq!(second.rx.try_recv(), Err(TryRecvError::Disconnected));
        assert_eq!(cancelled.rx.try_recv(), Err(TryRecvError::Disconnected));
        // Demonitor after the Down: not active any more, and the queued
        // Down is discarded.
        let (go_tx, go) = smarm::channel::<()>();
        let target = smarm::spawn_on(worker_after(workers, 2), move || {
            let _ = go.recv();
        })
        .unwrap();
        let late = smarm::monitor(target.pid());
        drop(go_tx);
        target.join().unwrap();
        smarm::sleep(ms(1));
        assert!(!smarm::demonitor(&late));
        assert_eq!(late.rx.try_recv(), Err(TryRecvError::Disconnected));
    });
}

drive_tests!(demonitor_and_two_monitors => demonitor_means_no_down_and_two_monitors_give_two_downs, demonitor_means_no_down_and_two_monitors_give_two_downs_on_4_workers, demonitor_means_no_down_and_two_monitors_give_two_downs_on_4_threads);

fn reasons(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        // Stopped.
        let sleeper =
            smarm::spawn_on(worker_after(workers, 1), || smarm::sleep(Duration::from_secs(60))).unwrap();
        let m = smarm::monitor(sleeper.pid());
        smarm::sleep(ms(1));
        smarm::request_stop(sleeper.pid()).unwrap();
        let down = m.rx.recv().unwrap();
        assert_eq!((down.pid, down.reason), (sleeper.pid(), ExitReason::Stopped));
        assert!(sleeper.join().unwrap_err().is_stopped());

        // Stopped before it ever ran (it shares our worker: it cannot start
        // before we park).
        let never = smarm::spawn_on(worker_after(workers, 0), || unreachable!()).unwrap();
        let m = smarm::monitor(never.pid());
        smarm::request_stop(never.pid()).unwrap();
        assert_eq!(m.rx.recv().unwrap().reason, ExitReason::Stopped);
        assert!(never.join().unwrap_err().is_stopped());

        // Panicked, with the message.
        let (go_tx, go) = smarm::channel::<()>();
        let crasher = smarm::spawn_on(worker_after(workers, 3), move || {
            let _ = go.recv();
            panic!("bad input: {}", 42);
        })
        .unwrap();
        let m = smarm::monitor(crasher.pid());
        drop(go_tx);
        let down = m.rx.recv().unwrap();
        assert_eq!(down.reason, ExitReason::Panicked("bad input: 42".into()));
        assert!(down.reason.is_abnormal());
        assert_eq!(down.reason.to_string(), "panicked: bad input: 42");
        assert!(crasher.join().is_err());
        assert!(!ExitReason::Normal.is_abnormal());
    });
}

drive_tests!(reasons => monitors_see_stopped_and_panicked_reasons, monitors_see_stopped_and_panicked_reasons_on_4_workers, monitors_see_stopped_and_panicked_reasons_on_4_threads);

#[test]
fn linking_to_a_dead_or_stale_pid_is_noproc() {
    smarm::run(|| {
        let done = smarm::spawn(|| {}).unwrap();
        let pid = done.pid();
        done.join().unwrap();
        assert_eq!(smarm::link(pid), Err(NoProc(pid)));
        let made_up = Pid::from_parts(7_777, 3);
        assert_eq!(smarm::link(made_up), Err(NoProc(made_up)));
        // Linking to oneself is allowed and harmless.
        let me = smarm::self_pid().unwrap();
        assert_eq!(smarm::link(me), Ok(()));
        // The failed links left nothing behind: a live peer still links.
        let peer = Peer::spawn(0);
        assert_eq!(smarm::link(peer.pid()), Ok(()));
        smarm::unlink(peer.pid());
        peer.finish();
    });
    // Outside a process: no caller to link.
    let pid = Pid::from_parts(0, 0);
    assert_eq!(smarm::link(pid), Err(NoProc(pid)));
    assert!(smarm::trap_exit().is_none());
}

fn down_before_reclaim(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let mut same_index = 0;
        for round in 0..50usize {
            // Detached: the slot is reclaimed right after finalize. On even
            // rounds it shares our worker, so the reclaim is done before we
            // run again and the next spawn can take the slot.
            let worker = worker_after(workers, if round.is_multiple_of(2) { 0 } else { round % workers });
            let (go_tx, go) = smarm::channel::<()>();
            let h = smarm::spawn_on(worker, move || {
                let _ = go.recv();
            })
            .unwrap();
            let pid = h.pid();
            let m = smarm::monitor(pid);
            drop(h);
            drop(go_tx);
            let down = m.rx.recv().unwrap();
            assert_eq!((down.pid, down.reason), (pid, ExitReason::Normal));
            // The slot may be free again: whatever is spawned into it gets
            // a new generation, and the old pid stays dead everywhere.
            let next = smarm::spawn_on(worker, || {}).unwrap();
            if next.pid().index() == pid.index() {
                same_index += 1;
                assert_ne!(next.pid().generation(), pid.generation(), "pid reused");
            }
            assert_ne!(next.pid(), pid);
            assert!(!rt.is_alive(pid));
            assert_eq!(smarm::link(pid), Err(NoProc(pid)));
            assert_eq!(smarm::monitor(pid).rx.try_recv().unwrap().reason, ExitReason::NoProc);
            assert_eq!(rt.request_stop(pid), Err(NoProc(pid)));
            next.join().unwrap();
        }
        // The free list hands a slot straight back: the check above bit.
        assert!(same_index > 0, "no slot was reused; the test proved nothing");
    });
}

drive_tests!(down_before_reclaim => down_arrives_before_the_slot_is_reused, down_arrives_before_the_slot_is_reused_on_4_workers, down_arrives_before_the_slot_is_reused_on_4_threads);

fn join_after_notifications(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        // Finalize delivers death notifications before it wakes joiners; a
        // join must not return earlier than that either (on another OS
        // thread the outcome is known a little before finalize runs).
        let exits = smarm::trap_exit().unwrap();
        let me = smarm::self_pid().unwrap();
        for round in 0..2_000 {
            let (go_tx, go) = smarm::channel::<()>();
            let target = smarm::spawn_on(worker_after(workers, 1 + round % 3), move || {
                smarm::link(me).unwrap();
                let _ = go.recv();
                if round % 2 == 1 {
                    panic!("round {round}");
                }
            })
            .unwrap();
            let pid = target.pid();
            let m = smarm::monitor(pid);
            drop(go_tx);
            // Vary when the join arrives relative to the exit.
            for _ in 0..(round * 37) % 400 {
                std::hint::spin_loop();
            }
            let joined = target.join();
            let down = m.rx.try_recv().unwrap_or_else(|e| panic!("round {round}: joined, but no Down: {e}"));
            assert_eq!(down.pid, pid);
            // A trapping linked process is told of every exit, normal ones
            // included, before the join returns.
            let exit =
                exits.try_recv().unwrap_or_else(|e| panic!("round {round}: joined, no ExitSignal: {e}"));
            assert_eq!((exit.from, &exit.reason), (pid, &down.reason));
            if round % 2 == 1 {
                assert!(joined.is_err());
            } else {
                assert_eq!((joined, down.reason), (Ok(()), ExitReason::Normal));
            }
        }
        assert_eq!(exits.try_recv(), Err(TryRecvError::Empty));
    });
}

drive_tests!(join_after_notifications => join_returns_after_the_death_notifications, join_returns_after_the_death_notifications_on_4_workers, join_returns_after_the_death_notifications_on_4_threads);

/// `exit(pid, reason)` with Erlang's rules, against a trapping and a
/// non-trapping target on another worker.
fn exit_signals(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let me = smarm::self_pid().unwrap();
        // A target that sleeps, optionally trapping exits and forwarding
        // every signal it gets to us.
        let spawn_target = |trap: bool, worker: usize| {
            let (signals_tx, signals) = smarm::channel::<ExitSignal>();
            let (ready_tx, ready) = smarm::channel::<()>();
            let handle = smarm::spawn_on(worker, move || {
                let exits = if trap { smarm::trap_exit() } else { None };
                ready_tx.send(()).unwrap();
                loop {
                    match &exits {
                        Some(exits) => match exits.recv_timeout(Duration::from_secs(60)) {
                            Ok(signal) => signals_tx.send(signal).unwrap(),
                            Err(_) => return,
                        },
                        None => smarm::sleep(Duration::from_secs(60)),
                    }
                }
            })
            .unwrap();
            ready.recv().unwrap();
            (handle, signals)
        };
        let other = worker_after(workers, 1);

        // Normal to a non-trapping target: dropped.
        let (target, _signals) = spawn_target(false, other);
        let watch = smarm::monitor(target.pid());
        smarm::exit(target.pid(), ExitReason::Normal).unwrap();
        smarm::sleep(ms(2));
        assert!(
            smarm::current_runtime().unwrap().is_alive(target.pid()),
            "a normal exit signal ended a process"
        );
        no_down(&watch.rx);
        // Any other reason: it ends with that reason, as monitors and join see.
        let shutdown = ExitReason::Other("shutdown".into());
        smarm::exit(target.pid(), shutdown.clone()).unwrap();
        assert_eq!(watch.rx.recv().unwrap().reason, shutdown);
        assert_eq!(target.join(), Err(smarm::JoinError::Exited(shutdown.clone())));
        // A dead target is NoProc.
        assert!(smarm::exit(watch.target, ExitReason::Killed).is_err());

        // A trapping target receives Normal and other reasons as messages
        // and lives on.
        let (target, signals) = spawn_target(true, other);
        let watch = smarm::monitor(target.pid());
        smarm::exit(target.pid(), ExitReason::Normal).unwrap();
        assert_eq!(signals.recv().unwrap(), ExitSignal { from: me, reason: ExitReason::Normal });
        smarm::exit(target.pid(), shutdown.clone()).unwrap();
        assert_eq!(signals.recv().unwrap(), ExitSignal { from: me, reason: shutdown });
        no_down(&watch.rx);
        // Killed cannot be trapped: it ends, and its monitors see Killed.
        smarm::exit(target.pid(), ExitReason::Killed).unwrap();
        assert_eq!(watch.rx.recv().unwrap().reason, ExitReason::Killed);
        assert_eq!(target.join(), Err(smarm::JoinError::Exited(ExitReason::Killed)));
        assert_eq!(signals.try_recv(), Err(TryRecvError::Disconnected), "a kill arrived as a message");

        // A killed process's trapping link peers get `killed` as a message;
        // its non-trapping peers end, linked.
        let exits = smarm::trap_exit().unwrap();
        let (victim, _signals) = spawn_target(false, other);
        smarm::link(victim.pid()).unwrap();
        smarm::exit(victim.pid(), ExitReason::Killed).unwrap();
        assert_eq!(exits.recv().unwrap(), ExitSignal { from: victim.pid(), reason: ExitReason::Killed });
        assert!(victim.join().unwrap_err().is_stopped());
    });
}

drive_tests!(exit_signals => exit_signals_follow_erlangs_rules, exit_signals_follow_erlangs_rules_on_4_workers, exit_signals_follow_erlangs_rules_on_4_threads);

/// Outside a process there is no sender: `exit` is `NoProc`.
#[test]
fn exit_outside_a_process_is_noproc() {
    let pid = smarm::run(|| smarm::self_pid().unwrap());
    assert!(smarm::exit(pid, ExitReason::Killed).is_err());
}
