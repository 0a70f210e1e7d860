//! The std-shaped surface of channels: rendezvous (`bounded(0)`),
//! iterators, `send_timeout` / `send_deadline` / `recv_deadline` — on one
//! worker, on four driven by one thread, and on the four-thread Engine.

mod common;
#[allow(unused_imports)]
use common::{ms, next_worker, record, Drive, Trace};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smarm::{RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError};

/// A message that counts its drops.
struct Counted {
    drops: Arc<AtomicUsize>,
    value: u32,
}

impl Counted {
    fn new(drops: &Arc<AtomicUsize>, value: u32) -> Counted {
        Counted { drops: drops.clone(), value }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Parks (in short sleeps) until `cond` holds; panics after ten seconds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = smarm::now().unwrap();
    while !cond() {
        assert!(smarm::now().unwrap() - start < Duration::from_secs(10), "gave up waiting until {what}");
        smarm::sleep(ms(1));
    }
}

// ---------------------------------------------------------------- rendezvous

fn rendezvous_send_blocks(drive: Drive) {
    const MESSAGES: usize = 200;
    let workers = drive.workers();
    drive.run(move || {
        let (tx, rx) = smarm::bounded::<usize>(0);
        // Sends completed so far, counted by the sender after each returns.
        let returned = Arc::new(AtomicUsize::new(0));
        let r = returned.clone();
        let sender = smarm::spawn_on(next_worker(workers), move || {
            for i in 0..MESSAGES {
                tx.send(i).unwrap();
                r.store(i + 1, Ordering::SeqCst);
            }
        })
        .unwrap();

        // The first send parks with its value offered, and stays parked.
        wait_until("the sender offers", || rx.len() == 1);
        smarm::sleep(ms(5));
        assert_eq!(
            returned.load(Ordering::SeqCst),
            0,
            "a rendezvous send returned before the value was taken"
        );
        assert_eq!(rx.len(), 1);

        for i in 0..MESSAGES {
            // Give the sender every chance to run ahead: it cannot, since
            // send(i) completes only once message i is taken.
            if i % 16 == 0 {
                smarm::sleep(ms(1));
            } else {
                smarm::yield_now();
            }
            assert!(returned.load(Ordering::SeqCst) <= i, "send({i}) returned before it was received");
            assert_eq!(rx.recv(), Ok(i));
        }
        sender.join().unwrap();
        assert_eq!(returned.load(Ordering::SeqCst), MESSAGES);
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
    });
}

drive_tests!(rendezvous_send_blocks => rendezvous_send_blocks_until_the_value_is_taken, rendezvous_send_blocks_until_the_value_is_taken_on_4_workers, rendezvous_send_blocks_until_the_value_is_taken_on_4_threads);

#[test]
fn rendezvous_send_waits_for_the_receiver_trace() {
    // One worker: the exact order of a rendezvous.
    let t: Trace = Arc::default();
    let t2 = t.clone();
    smarm::run(move || {
        let (tx, rx) = smarm::bounded::<u32>(0);
        let ts = t2.clone();
        let sender = smarm::spawn(move || {
            for i in 0..2 {
                record(&ts, format!("send {i}"));
                tx.send(i).unwrap();
                record(&ts, format!("sent {i}"));
            }
        })
        .unwrap();
        smarm::yield_now(); // the sender offers 0 and parks
        record(&t2, format!("offers {}", rx.len()));
        smarm::yield_now(); // still parked: nothing happens
        let v = rx.try_recv().unwrap(); // takes 0 from the parked sender
        record(&t2, format!("got {v}"));
        smarm::yield_now(); // the sender returns, offers 1 and parks
                            // A receiver parked in recv: the sender hands 1 over and returns.
        let v = rx.recv().unwrap();
        record(&t2, format!("got {v}"));
        sender.join().unwrap();
    });
    let trace = t.lock().unwrap().clone();
    assert_eq!(trace, ["send 0", "offers 1", "got 0", "sent 0", "send 1", "got 1", "sent 1"]);
}

#[test]
fn rendezvous_try_send_succeeds_only_into_a_waiting_recv() {
    smarm::run(|| {
        let (tx, rx) = smarm::bounded::<u32>(0);
        assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
        let (got_tx, got_rx) = smarm::channel();
        let receiver = smarm::spawn(move || {
            got_tx.send(rx.recv()).unwrap();
            // A selective receive does not take any message: no hand-off.
            got_tx.send(rx.recv_match(|v| *v == 3)).unwrap();
            drop(rx);
        })
        .unwrap();
        smarm::yield_now(); // the receiver parks in recv
        assert_eq!(tx.try_send(2), Ok(()), "a receiver parked in recv takes a try_send");
        // Handed once: a second try_send before the receiver ran is Full.
        assert_eq!(tx.try_send(9), Err(TrySendError::Full(9)));
        assert_eq!(got_rx.recv(), Ok(Ok(2)));
        smarm::yield_now(); // the receiver parks in recv_match
        assert_eq!(tx.try_send(3), Err(TrySendError::Full(3)));
        tx.send(3).unwrap();
        assert_eq!(got_rx.recv(), Ok(Ok(3)));
        receiver.join().unwrap();
        assert_eq!(tx.try_send(4), Err(TrySendError::Disconnected(4)));
    });
}

fn rendezvous_receiver_dropped(drive: Drive) {
    let workers = drive.workers();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    drive.run(move || {
        let (tx, rx) = smarm::bounded::<Counted>(0);
        let (result_tx, result_rx) = smarm::channel();
        let senders: Vec<_> = (0..3)
            .map(|k| {
                let (tx, result_tx, d) = (tx.clone(), result_tx.clone(), d.clone());
                smarm::spawn_on((k + 1) % workers, move || {
                    let outcome = tx.send(Counted::new(&d, k as u32));
                    result_tx.send(outcome.map_err(|SendError(v)| v.value)).unwrap();
                })
                .unwrap()
            })
            .collect();
        drop(result_tx);
        wait_until("three senders offer", || rx.len() == 3);
        assert_eq!(
            result_rx.try_recv(),
            Err(TryRecvError::Empty),
            "a send returned before anything was taken"
        );
        drop(rx);
        let mut back: Vec<u32> = (0..3).map(|_| result_rx.recv().unwrap().unwrap_err()).collect();
        back.sort_unstable();
        assert_eq!(back, [0, 1, 2], "every parked sender gets its message back");
        for s in senders {
            s.join().unwrap();
        }
        // Each message was dropped once, by its sender, not by the channel.
        assert_eq!(d.load(Ordering::SeqCst), 3);
        assert!(tx.is_closed());
        assert_eq!(tx.send(Counted::new(&d, 7)).unwrap_err().0.value, 7);
    });
    assert_eq!(drops.load(Ordering::SeqCst), 4);
}

drive_tests!(rendezvous_receiver_dropped => rendezvous_receiver_dropped_returns_the_waiting_messages, rendezvous_receiver_dropped_returns_the_waiting_messages_on_4_workers, rendezvous_receiver_dropped_returns_the_waiting_messages_on_4_threads);

fn rendezvous_select(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (_idle_tx, idle) = smarm::channel::<u32>();
        let (tx, rz) = smarm::bounded::<u32>(0);
        // No sender waits: the rendezvous arm is not ready.
        assert_eq!(smarm::select_timeout(&[&idle, &rz], ms(5)), None);

        let returned = Arc::new(AtomicBool::new(false));
        let r = returned.clone();
        let sender = smarm::spawn_on(next_worker(workers), move || {
            smarm::sleep(ms(2));
            tx.send(5).unwrap();
            r.store(true, Ordering::SeqCst);
            tx.send(6).unwrap();
        })
        .unwrap();
        // Parks until the sender offers; the arm is ready while it waits.
        assert_eq!(smarm::select(&[&idle, &rz]), 1);
        smarm::sleep(ms(2));
        assert!(!returned.load(Ordering::SeqCst), "select took the value");
        assert_eq!(rz.try_recv(), Ok(5));
        // And a second time, through select_timeout.
        assert_eq!(smarm::select_timeout(&[&idle, &rz], Duration::from_secs(10)), Some(1));
        assert_eq!(rz.try_recv(), Ok(6));
        sender.join().unwrap();
        assert!(returned.load(Ordering::SeqCst));
        // Every sender gone: the arm is ready (closed) for good.
        assert_eq!(smarm::select(&[&idle, &rz]), 1);
        assert_eq!(rz.try_recv(), Err(TryRecvError::Disconnected));
    });
}

drive_tests!(rendezvous_select => rendezvous_select_arm_is_ready_while_a_sender_waits, rendezvous_select_arm_is_ready_while_a_sender_waits_on_4_workers, rendezvous_select_arm_is_ready_while_a_sender_waits_on_4_threads);

fn rendezvous_timeouts(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let now = || smarm::now().unwrap();
        let (tx, rx) = smarm::bounded::<String>(0);

        // Nobody receives: the value comes back after the deadline, and
        // its offer is gone (no late delivery).
        let start = now();
        match tx.send_timeout("late".into(), ms(10)) {
            Err(SendTimeoutError::Timeout(v)) => assert_eq!(v, "late"),
            other => panic!("expected Timeout, got {other:?}"),
        }
        assert!(now() - start >= ms(10), "timed out early");
        assert_eq!(rx.len(), 0);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));

        // Nobody sends: recv_timeout times out.
        let start = now();
        assert_eq!(rx.recv_timeout(ms(10)), Err(RecvTimeoutError::Timeout));
        assert!(now() - start >= ms(10));

        // A receiver that takes before the deadline: Ok, well before it.
        let (got_tx, got_rx) = smarm::channel();
        let receiver = smarm::spawn_on(next_worker(workers), move || {
            smarm::sleep(ms(5));
            got_tx.send(rx.recv_timeout(Duration::from_secs(10))).unwrap();
        })
        .unwrap();
        let start = now();
        tx.send_timeout("taken".into(), Duration::from_secs(10)).unwrap();
        assert!(now() - start < Duration::from_secs(5));
        assert_eq!(got_rx.recv().unwrap().as_deref(), Ok("taken"));
        receiver.join().unwrap();

        // A receiver waiting with a deadline gets a plain send.
        let (tx, rx) = smarm::bounded::<u32>(0);
        let (got_tx, got_rx) = smarm::channel();
        let receiver = smarm::spawn_on(next_worker(workers), move || {
            got_tx.send(rx.recv_timeout(Duration::from_secs(10))).unwrap();
            got_tx.send(rx.recv_deadline(smarm::now().unwrap() + ms(5))).unwrap();
        })
        .unwrap();
        smarm::sleep(ms(2));
        tx.send(8).unwrap();
        assert_eq!(got_rx.recv(), Ok(Ok(8)));
        assert_eq!(got_rx.recv(), Ok(Err(RecvTimeoutError::Timeout)));
        receiver.join().unwrap();
        // The receiver is gone: Disconnected, with the value.
        match tx.send_timeout(9, ms(1)) {
            Err(SendTimeoutError::Disconnected(9)) => {}
            other => panic!("expected Disconnected(9), got {other:?}"),
        }
    });
}

drive_tests!(rendezvous_timeouts => rendezvous_send_and_recv_time_out, rendezvous_send_and_recv_time_out_on_4_workers, rendezvous_send_and_recv_time_out_on_4_threads);

#[test]
fn rendezvous_sender_stopped_while_waiting_withdraws_its_value() {
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    smarm::run(move || {
        let (tx, rx) = smarm::bounded::<Counted>(0);
        let sender = smarm::spawn(move || {
            let _ = tx.send(Counted::new(&d, 1));
            unreachable!("the send returned in a stopped process");
        })
        .unwrap();
        smarm::yield_now(); // the sender offers and parks
        assert_eq!(rx.len(), 1);
        smarm::current_runtime().unwrap().request_stop(sender.pid()).unwrap();
        let m = smarm::monitor(sender.pid());
        assert_eq!(m.rx.recv().unwrap().reason, smarm::ExitReason::Stopped);
        assert!(sender.join().unwrap_err().is_stopped());
        // The unwinding sender took its value back (and dropped it): a
        // send that never returned delivers nothing.
        assert_eq!(rx.len(), 0);
        assert_eq!(rx.try_recv().err(), Some(TryRecvError::Disconnected));
    });
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

fn rendezvous_stress(drive: Drive) {
    const SENDERS: u64 = 4;
    const PER: u64 = 300;
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (tx, rx) = smarm::bounded::<(u64, u64)>(0);
        let handles: Vec<_> = (0..SENDERS)
            .map(|k| {
                let tx = tx.clone();
                rt.spawn(move || {
                    for seq in 0..PER {
                        tx.send((k, seq)).unwrap();
                    }
                })
                .unwrap()
            })
            .collect();
        drop(tx);
        let mut next = [0u64; SENDERS as usize];
        let mut count = 0;
        // Receive through every receiving call, in turn.
        loop {
            let got = match count % 4 {
                0 => rx.recv().ok(),
                1 => rx.recv_timeout(Duration::from_secs(10)).ok(),
                2 => rx.iter().next(),
                _ => {
                    smarm::select(&[&rx]);
                    match rx.try_recv() {
                        Ok(v) => Some(v),
                        Err(TryRecvError::Empty) => continue,
                        Err(TryRecvError::Disconnected) => None,
                    }
                }
            };
            let Some((k, seq)) = got else { break };
            assert!(rx.len() <= SENDERS as usize, "more offers than senders");
            assert_eq!(seq, next[k as usize], "sender {k} out of order");
            next[k as usize] += 1;
            count += 1;
        }
        assert_eq!(count, SENDERS * PER);
        for h in handles {
            h.join().unwrap();
        }
    });
}

drive_tests!(rendezvous_stress => rendezvous_counts_every_message, rendezvous_counts_every_message_on_4_workers, rendezvous_counts_every_message_on_4_threads);

// ----------------------------------------------------------------- iterators

fn iterators(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        // `for v in &rx` parks between messages and ends at disconnection.
        let (tx, rx) = smarm::channel::<u32>();
        let sender = smarm::spawn_on(next_worker(workers), move || {
            for i in 0..100 {
                tx.send(i).unwrap();
                if i % 10 == 0 {
                    smarm::sleep(ms(1));
                }
            }
        })
        .unwrap();
        let mut got = Vec::new();
        for v in &rx {
            got.push(v);
        }
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        assert_eq!(rx.iter().next(), None, "a finished iterator stays finished");
        sender.join().unwrap();

        // `for v in rx` owns the receiver; over a rendezvous too.
        let (tx, rx) = smarm::bounded::<u32>(0);
        let sender = smarm::spawn_on(next_worker(workers), move || {
            for i in 0..20 {
                tx.send(i).unwrap();
            }
        })
        .unwrap();
        let sum: u32 = rx.into_iter().sum();
        assert_eq!(sum, (0..20).sum());
        sender.join().unwrap();
    });
}

drive_tests!(iterators => iter_and_into_iter_end_when_the_senders_are_gone, iter_and_into_iter_end_when_the_senders_are_gone_on_4_workers, iter_and_into_iter_end_when_the_senders_are_gone_on_4_threads);

#[test]
fn try_iter_takes_what_is_there_now() {
    smarm::run(|| {
        let (tx, rx) = smarm::channel::<u32>();
        assert_eq!(rx.try_iter().count(), 0);
        for i in 0..5 {
            tx.send(i).unwrap();
        }
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
        tx.send(5).unwrap();
        drop(tx);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [5]);
        assert_eq!(rx.try_iter().next(), None);
        // The blocking iterator ends at once too: disconnected and empty.
        assert_eq!(rx.iter().next(), None);
    });
    // Outside a process the blocking iterator blocks the thread, as std's
    // does, and ends once the senders are gone.
    let (tx, rx) = smarm::channel::<u32>();
    tx.send(1).unwrap();
    tx.send(2).unwrap();
    let feeder = std::thread::spawn(move || {
        std::thread::sleep(ms(5));
        tx.send(3).unwrap();
    });
    assert_eq!(rx.iter().collect::<Vec<_>>(), [1, 2, 3]);
    feeder.join().unwrap();
}

// -------------------------------------------------------------- send_timeout

fn bounded_send_timeout(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let now = || smarm::now().unwrap();

        // Unbounded: never times out.
        let (tx, rx) = smarm::channel::<u32>();
        tx.send_timeout(1, Duration::ZERO).unwrap();
        assert_eq!(rx.try_recv(), Ok(1));

        // Full, nobody receives: Timeout with the message, not before the
        // deadline; the queue is untouched.
        let (tx, rx) = smarm::bounded::<String>(1);
        tx.send("fills".into()).unwrap();
        let start = now();
        match tx.send_timeout("waits".into(), ms(10)) {
            Err(SendTimeoutError::Timeout(v)) => assert_eq!(v, "waits"),
            other => panic!("expected Timeout, got {other:?}"),
        }
        assert!(now() - start >= ms(10), "timed out early");
        let deadline = now() + ms(5);
        match tx.send_deadline("waits".into(), deadline) {
            Err(SendTimeoutError::Timeout(v)) => assert_eq!(v, "waits"),
            other => panic!("expected Timeout, got {other:?}"),
        }
        assert!(now() >= deadline);
        assert_eq!(rx.len(), 1);

        // Room made before the deadline: Ok, well before it.
        let (back_tx, back_rx) = smarm::channel();
        let receiver = smarm::spawn_on(next_worker(workers), move || {
            smarm::sleep(ms(5));
            let first = rx.recv().unwrap();
            back_tx.send((first, rx)).unwrap();
        })
        .unwrap();
        let start = now();
        tx.send_timeout("fits".into(), Duration::from_secs(10)).unwrap();
        assert!(now() - start < Duration::from_secs(5));
        let (first, rx) = back_rx.recv().unwrap();
        receiver.join().unwrap();
        assert_eq!(first, "fills");
        assert_eq!(rx.try_recv().as_deref(), Ok("fits"));

        // The receiver dropped while the sender waits: Disconnected, with
        // the message.
        tx.send("fills".into()).unwrap();
        let dropper = smarm::spawn_on(next_worker(workers), move || {
            smarm::sleep(ms(5));
            drop(rx);
        })
        .unwrap();
        match tx.send_timeout("orphan".into(), Duration::from_secs(10)) {
            Err(SendTimeoutError::Disconnected(v)) => assert_eq!(v, "orphan"),
            other => panic!("expected Disconnected, got {other:?}"),
        }
        dropper.join().unwrap();
    });
}

drive_tests!(bounded_send_timeout => send_timeout_waits_for_room_then_gives_the_message_back, send_timeout_waits_for_room_then_gives_the_message_back_on_4_workers, send_timeout_waits_for_room_then_gives_the_message_back_on_4_threads);

#[test]
fn timed_calls_outside_a_process() {
    // A plain thread waits on the platform's clock, as std's calls do.
    let (tx, rx) = smarm::bounded::<u32>(1);
    tx.send_timeout(1, ms(1)).unwrap();
    assert_eq!(tx.send_timeout(2, ms(1)), Err(SendTimeoutError::Timeout(2)));
    assert_eq!(rx.recv_timeout(ms(1)), Ok(1));
    assert_eq!(rx.recv_timeout(ms(1)), Err(RecvTimeoutError::Timeout));
    let (tx, rx) = smarm::bounded::<u32>(0);
    assert_eq!(tx.send_timeout(3, ms(1)), Err(SendTimeoutError::Timeout(3)));
    drop(rx);
    assert_eq!(tx.send_timeout(4, ms(1)), Err(SendTimeoutError::Disconnected(4)));
}

#[test]
fn send_timeout_error_displays_and_converts() {
    fn text(e: &dyn std::error::Error) -> String {
        e.to_string()
    }
    assert!(text(&SendTimeoutError::Timeout(1u8)).contains("timed out"));
    assert!(text(&SendTimeoutError::Disconnected(1u8)).contains("receiver"));
    assert!(text(&SendTimeoutError::NotInProcess(1u8)).contains("try_send"));
    assert_eq!(SendTimeoutError::Timeout(3u8).into_inner(), 3);
    assert_eq!(SendTimeoutError::NotInProcess(4u8).into_inner(), 4);
    assert_eq!(SendTimeoutError::from(SendError(5u8)), SendTimeoutError::Disconnected(5));
    assert_eq!(TrySendError::from(SendError(6u8)), TrySendError::Disconnected(6));
    assert_eq!(SendError(7u8).into_inner(), 7);
    assert_eq!(format!("{:?}", SendTimeoutError::Timeout(String::new())), "Timeout(..)");
}
