//! `select` and `select_timeout` through the public API: the motivating
//! server pattern, priority order, the closed-arm starvation case, timeouts,
//! stale registrations, and a counted stress run — on one worker and four.

mod common;
#[allow(unused_imports)]
use common::{ms, next_worker, record, Drive, Trace};

use std::time::Duration;

use smarm::{ExitReason, Pid, Selectable, Sender, TryRecvError};

/// A request to the server: a number to double and where to reply
/// `(double, workers lost so far)`.
type Request = (u64, Sender<(u64, u32)>);

#[derive(Debug, PartialEq)]
enum Event {
    Watching(Pid),
    WorkerDown(Pid, ExitReason),
    Served(u32),
}

fn call(inbox: &Sender<Request>, n: u64) -> (u64, u32) {
    let (reply_tx, reply_rx) = smarm::channel();
    inbox.send((n, reply_tx)).unwrap();
    reply_rx.recv().unwrap()
}

fn motivating_pattern(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (inbox_tx, inbox) = smarm::channel::<Request>();
        let (events_tx, events) = smarm::channel::<Event>();
        let (crash_tx, crash_rx) = smarm::channel::<()>();
        let server = smarm::spawn_on(next_worker(workers), move || {
            // A worker the server depends on; it dies when told to.
            let worker = smarm::spawn_on(next_worker(workers), move || {
                let _ = crash_rx.recv();
                panic!("worker crashed");
            })
            .unwrap();
            let mut watching = Some(smarm::monitor(worker.pid()));
            events_tx.send(Event::Watching(worker.pid())).unwrap();
            drop(worker);
            let (mut lost, mut served) = (0, 0);
            loop {
                // The Down arm comes first: a death notice is never starved
                // by a busy inbox.
                let arm = match &watching {
                    Some(m) => smarm::select(&[&m.rx, &inbox]),
                    None => 1 + smarm::select(&[&inbox]),
                };
                if arm == 0 {
                    // Monitors are one-shot: the arm retires with its Down.
                    let down = watching.take().unwrap().rx.try_recv().unwrap();
                    lost += 1;
                    events_tx.send(Event::WorkerDown(down.pid, down.reason)).unwrap();
                    continue;
                }
                match inbox.try_recv() {
                    Ok((n, reply)) => {
                        served += 1;
                        let _ = reply.send((2 * n, lost));
                    }
                    Err(TryRecvError::Disconnected) => break,
                    Err(TryRecvError::Empty) => panic!("select returned an empty inbox as ready"),
                }
            }
            events_tx.send(Event::Served(served)).unwrap();
        })
        .unwrap();

        let Event::Watching(worker) = events.recv().unwrap() else { panic!("no Watching event") };
        for n in 1..=3 {
            assert_eq!(call(&inbox_tx, n), (2 * n, 0));
        }
        crash_tx.send(()).unwrap();
        assert_eq!(
            events.recv().unwrap(),
            Event::WorkerDown(worker, ExitReason::Panicked("worker crashed".into()))
        );
        // The server reacted and keeps serving, now without its worker.
        assert_eq!(call(&inbox_tx, 10), (20, 1));
        drop(inbox_tx);
        assert_eq!(events.recv().unwrap(), Event::Served(4));
        server.join().unwrap();
    });
}

drive_tests!(motivating_pattern => motivating_pattern_inbox_plus_monitor_down, motivating_pattern_inbox_plus_monitor_down_on_4_workers, motivating_pattern_inbox_plus_monitor_down_on_4_threads);

#[test]
fn lowest_ready_index_wins() {
    smarm::run(|| {
        let (a_tx, a) = smarm::channel::<u32>();
        let (b_tx, b) = smarm::channel::<u32>();
        let (c_tx, c) = smarm::channel::<u32>();
        c_tx.send(3).unwrap();
        b_tx.send(2).unwrap();
        assert_eq!(smarm::select(&[&a, &b, &c]), 1);
        assert_eq!(b.try_recv(), Ok(2));
        assert_eq!(smarm::select(&[&a, &b, &c]), 2);
        assert_eq!(c.try_recv(), Ok(3));
        a_tx.send(1).unwrap();
        b_tx.send(2).unwrap();
        c_tx.send(3).unwrap();
        for (expected, arm) in [(0, &a), (1, &b), (2, &c)] {
            assert_eq!(smarm::select(&[&a, &b, &c]), expected);
            assert!(arm.try_recv().is_ok());
        }
        assert_eq!(smarm::select_timeout(&[&a, &b, &c], ms(1)), None);

        // Parked, then two arms become ready before the selector runs: the
        // one sent to second but with the lower index wins.
        // (Keep senders of `b` and `c`: the sender's exit must not close
        // them, or a closed `b` would be ready forever.)
        let _keep = (b_tx.clone(), c_tx.clone());
        let sender = smarm::spawn(move || {
            c_tx.send(30).unwrap();
            b_tx.send(20).unwrap();
            drop(a_tx);
        })
        .unwrap();
        assert_eq!(smarm::select(&[&b, &c]), 0);
        assert_eq!(b.try_recv(), Ok(20));
        assert_eq!(smarm::select(&[&b, &c]), 1);
        assert_eq!(c.try_recv(), Ok(30));
        sender.join().unwrap();
    });
}

#[test]
fn a_closed_arm_is_ready_forever_and_must_be_dropped() {
    smarm::run(|| {
        let (a_tx, a) = smarm::channel::<u32>();
        let (b_tx, b) = smarm::channel::<u32>();
        drop(a_tx);
        for v in 1..=3 {
            b_tx.send(v).unwrap();
        }
        // The closed arm starves the one after it: it is returned every
        // time, and its try_recv reports the closure every time.
        for _ in 0..100 {
            assert_eq!(smarm::select(&[&a, &b]), 0);
            assert_eq!(a.try_recv(), Err(TryRecvError::Disconnected));
        }
        assert_eq!(b.len(), 3, "the arm behind a closed one was served");
        // A closed arm behind a ready one does not preempt it.
        assert_eq!(smarm::select(&[&b, &a]), 0);
        // Dropped from the arm set, it no longer starves anything.
        for v in 1..=3 {
            assert_eq!(smarm::select(&[&b]), 0);
            assert_eq!(b.try_recv(), Ok(v));
        }
        // A parked select is woken by an arm's closure.
        let closer = smarm::spawn(move || {
            smarm::sleep(ms(2));
            drop(b_tx);
        })
        .unwrap();
        let (_keep, c) = smarm::channel::<u32>();
        assert_eq!(smarm::select(&[&c, &b]), 1);
        assert_eq!(b.try_recv(), Err(TryRecvError::Disconnected));
        closer.join().unwrap();
    });
}

fn timeouts(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let now = || smarm::now().unwrap();
        let (a_tx, a) = smarm::channel::<u32>();
        let (b_tx, b) = smarm::channel::<u32>();

        let start = now();
        assert_eq!(smarm::select_timeout(&[&a, &b], ms(10)), None);
        assert!(now() - start >= ms(10), "select_timeout returned early");

        // Ready at once: no waiting, even with a zero timeout.
        b_tx.send(1).unwrap();
        assert_eq!(smarm::select_timeout(&[&a, &b], Duration::ZERO), Some(1));
        assert_eq!(b.try_recv(), Ok(1));

        // A message before the deadline wins, well before it.
        let b_tx2 = b_tx.clone();
        let sender = smarm::spawn_on(next_worker(workers), move || {
            smarm::sleep(ms(5));
            a_tx.send(7).unwrap();
            smarm::sleep(ms(20));
            b_tx2.send(8).unwrap();
        })
        .unwrap();
        let start = now();
        assert_eq!(smarm::select_timeout(&[&a, &b], Duration::from_secs(10)), Some(0));
        assert!(now() - start < Duration::from_secs(5));
        assert_eq!(a.try_recv(), Ok(7));

        // That select left a stale registration on `b` (and a stale timer);
        // `b` gets a message during the sleep below. It may not wake this
        // one-shot sleep early: the wake carries a consumed epoch.
        let start = now();
        smarm::sleep(ms(30));
        assert!(now() - start >= ms(30), "a stale select registration woke a sleep");
        // `b` got its message before the sender exited and closed `a`.
        assert_eq!(smarm::select(&[&b, &a]), 0);
        assert_eq!(b.try_recv(), Ok(8));
        sender.join().unwrap();
        // The sender is gone: `a` is closed, hence ready; `b` still has a
        // sender (ours), so it is not.
        assert_eq!(smarm::select(&[&b, &a]), 1);
        assert_eq!(a.try_recv(), Err(TryRecvError::Disconnected));
        assert_eq!(smarm::select_timeout(&[&b], ms(1)), None);
        drop(b_tx);
    });
}

drive_tests!(timeouts => select_timeout_times_out_then_sees_a_message, select_timeout_times_out_then_sees_a_message_on_4_workers, select_timeout_times_out_then_sees_a_message_on_4_threads);

#[test]
fn select_outside_a_process_checks_once() {
    let (tx, rx) = smarm::channel::<u8>();
    assert_eq!(smarm::select_timeout(&[&rx], ms(1)), None);
    tx.send(1).unwrap();
    assert_eq!(smarm::select_timeout(&[&rx], ms(1)), Some(0));
    assert_eq!(smarm::select(&[&rx]), 0);
}

fn stress(drive: Drive) {
    const SENDERS: usize = 8;
    const ARMS: usize = 3;
    const PER: u64 = 2_000;
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..ARMS).map(|_| smarm::channel::<(usize, u64)>()).unzip();
        let handles: Vec<_> = (0..SENDERS)
            .map(|k| {
                let tx = txs[k % ARMS].clone();
                rt.spawn(move || {
                    for seq in 0..PER {
                        tx.send((k, seq)).unwrap();
                        if seq.is_multiple_of(50) {
                            smarm::yield_now();
                        }
                    }
                })
                .unwrap()
            })
            .collect();
        drop(txs);

        let mut open: Vec<usize> = (0..ARMS).collect();
        let mut count = [0u64; ARMS];
        let mut sum = [0u64; ARMS];
        let mut next = [0u64; SENDERS];
        let mut timeouts = 0u64;
        while !open.is_empty() {
            let arms: Vec<&dyn Selectable> = open.iter().map(|&i| &rxs[i] as &dyn Selectable).collect();
            // Alternate the two entry points; a timeout is just another lap.
            let picked = if (count.iter().sum::<u64>() + timeouts).is_multiple_of(2) {
                Some(smarm::select(&arms))
            } else {
                smarm::select_timeout(&arms, ms(50))
            };
            let Some(picked) = picked else {
                timeouts += 1;
                continue;
            };
            let arm = open[picked];
            match rxs[arm].try_recv() {
                Ok((k, seq)) => {
                    assert_eq!(k % ARMS, arm, "message from sender {k} on the wrong arm");
                    assert_eq!(seq, next[k], "sender {k} out of order");
                    next[k] += 1;
                    count[arm] += 1;
                    sum[arm] += seq;
                }
                Err(TryRecvError::Disconnected) => open.retain(|&i| i != arm),
                Err(TryRecvError::Empty) => panic!("select returned arm {arm} ready, but it is empty"),
            }
        }
        for h in handles {
            h.join().unwrap();
        }
        for arm in 0..ARMS {
            let senders = (0..SENDERS).filter(|k| k % ARMS == arm).count() as u64;
            assert_eq!(count[arm], senders * PER, "arm {arm} count");
            assert_eq!(sum[arm], senders * PER * (PER - 1) / 2, "arm {arm} sum");
        }
        assert_eq!(next, [PER; SENDERS]);
        assert_eq!(count.iter().sum::<u64>(), SENDERS as u64 * PER);
    });
}

drive_tests!(stress => stress_8_senders_3_arms_every_message_once, stress_8_senders_3_arms_every_message_once_on_4_workers, stress_8_senders_3_arms_every_message_once_on_4_threads);
