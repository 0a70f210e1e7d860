//! Channels through the public API: order, disconnection, timeouts,
//! selective receive, bounded back-pressure, drop safety and stops — on one
//! worker and on four.

mod common;
#[allow(unused_imports)]
use common::{ms, next_worker, record, Drive, Trace};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smarm::{ExitReason, RecvError, RecvTimeoutError, SendError, Sender, TryRecvError, TrySendError};

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

fn fifo(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (tx, rx) = smarm::channel::<u32>();
        let sender = smarm::spawn_on(next_worker(workers), move || {
            for i in 0..1_000 {
                tx.send(i).unwrap();
                if i.is_multiple_of(7) {
                    smarm::yield_now();
                }
            }
        })
        .unwrap();
        for i in 0..1_000 {
            assert_eq!(rx.recv(), Ok(i));
        }
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
        sender.join().unwrap();
    });
}

drive_tests!(fifo => messages_arrive_in_send_order, messages_arrive_in_send_order_on_4_workers, messages_arrive_in_send_order_on_4_threads);

#[test]
fn send_to_a_dropped_receiver_returns_the_message() {
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    smarm::run(move || {
        let (tx, rx) = smarm::channel::<Counted>();
        tx.send(Counted::new(&d, 1)).unwrap();
        tx.send(Counted::new(&d, 2)).unwrap();
        assert!(!tx.is_closed());
        drop(rx);
        // The two queued messages went with the receiver.
        assert_eq!(d.load(Ordering::SeqCst), 2);
        assert!(tx.is_closed());

        let SendError(back) = tx.send(Counted::new(&d, 3)).unwrap_err();
        assert_eq!(back.value, 3);
        assert_eq!(d.load(Ordering::SeqCst), 2, "the returned message was dropped by the channel");
        let back = match tx.try_send(back) {
            Err(TrySendError::Disconnected(v)) => v,
            other => panic!("expected Disconnected, got {other:?}"),
        };
        assert_eq!(back.value, 3);
        // A clone sees the closure too.
        let tx2 = tx.clone();
        let SendError(back) = tx2.send(back).unwrap_err();
        assert_eq!(back.value, 3);
        drop(back);
        assert_eq!(d.load(Ordering::SeqCst), 3);
    });
    assert_eq!(drops.load(Ordering::SeqCst), 3);
}

fn disconnect(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        // Queued messages are delivered before the disconnection.
        let (tx, rx) = smarm::channel::<u32>();
        let tx2 = tx.clone();
        tx.send(1).unwrap();
        tx2.send(2).unwrap();
        drop(tx);
        assert!(!rx.senders_gone());
        tx2.send(3).unwrap();
        drop(tx2);
        assert!(rx.senders_gone());
        assert_eq!(rx.len(), 3);
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Ok(2));
        assert_eq!(rx.try_recv(), Ok(3));
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
        assert!(rx.is_empty());

        // A parked receiver is woken by the last sender's drop, after every
        // message its senders sent.
        let rt = smarm::current_runtime().unwrap();
        let (tx, rx) = smarm::channel::<u32>();
        let (result_tx, result_rx) = smarm::channel::<(Vec<u32>, RecvError)>();
        let receiver = smarm::spawn_on(next_worker(workers), move || {
            let mut got = Vec::new();
            loop {
                match rx.recv() {
                    Ok(v) => got.push(v),
                    Err(e) => {
                        result_tx.send((got, e)).unwrap();
                        return;
                    }
                }
            }
        })
        .unwrap();
        let senders: Vec<_> = (0..3u32)
            .map(|k| {
                let tx = tx.clone();
                rt.spawn(move || {
                    smarm::sleep(ms(2));
                    for i in 0..10 {
                        tx.send(k * 100 + i).unwrap();
                    }
                })
                .unwrap()
            })
            .collect();
        drop(tx);
        for s in senders {
            s.join().unwrap();
        }
        let (mut got, err) = result_rx.recv().unwrap();
        assert_eq!(err, RecvError::Disconnected);
        got.sort_unstable();
        let expected: Vec<u32> = (0..3).flat_map(|k| (0..10).map(move |i| k * 100 + i)).collect();
        assert_eq!(got, expected);
        receiver.join().unwrap();
    });
}

drive_tests!(disconnect => recv_disconnects_after_the_last_sender_and_the_queue, recv_disconnects_after_the_last_sender_and_the_queue_on_4_workers, recv_disconnects_after_the_last_sender_and_the_queue_on_4_threads);

#[test]
fn try_recv_tells_empty_from_disconnected() {
    smarm::run(|| {
        let (tx, rx) = smarm::channel::<u8>();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        tx.send(4).unwrap();
        assert_eq!(rx.try_recv(), Ok(4));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        tx.send(5).unwrap();
        drop(tx);
        assert_eq!(rx.try_recv(), Ok(5));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    });
    // Outside a process the calls block the thread, as std's do.
    let (tx, rx) = smarm::channel::<u8>();
    tx.send(1).unwrap();
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.recv_timeout(ms(1)), Err(RecvTimeoutError::Timeout));
    tx.send(2).unwrap();
    assert_eq!(rx.recv(), Ok(2));
    drop(tx);
    assert_eq!(rx.recv(), Err(RecvError::Disconnected));
}

#[test]
fn errors_display_and_are_errors() {
    fn text(e: &dyn std::error::Error) -> String {
        e.to_string()
    }
    assert!(text(&SendError(1u8)).contains("receiver"));
    assert!(text(&TrySendError::Full(1u8)).contains("full"));
    assert!(text(&TrySendError::Disconnected(1u8)).contains("receiver"));
    assert!(!text(&RecvError::Disconnected).is_empty());
    assert!(text(&RecvError::NotInProcess).contains("try_recv"));
    assert!(text(&TryRecvError::Empty).contains("empty"));
    assert!(!text(&TryRecvError::Disconnected).is_empty());
    assert!(text(&RecvTimeoutError::Timeout).contains("timed out"));
    assert_ne!(text(&RecvTimeoutError::Timeout), text(&RecvTimeoutError::Disconnected));
    assert_eq!(TrySendError::Full(7u8).into_inner(), 7);
    assert_eq!(TrySendError::Disconnected(8u8).into_inner(), 8);
}

fn recv_timeouts(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let now = || smarm::now().unwrap();

        // Nothing arrives: Timeout, no earlier than the deadline.
        let (tx, rx) = smarm::channel::<u32>();
        let start = now();
        assert_eq!(rx.recv_timeout(ms(10)), Err(RecvTimeoutError::Timeout));
        assert!(now() - start >= ms(10), "timed out early");

        // Every sender gone: Disconnected at once, not Timeout.
        drop(tx);
        let start = now();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Err(RecvTimeoutError::Disconnected));
        assert!(now() - start < Duration::from_secs(5));

        // A message before the deadline wins, well before it.
        let (tx, rx) = smarm::channel::<u32>();
        let sender = smarm::spawn_on(next_worker(workers), move || {
            smarm::sleep(ms(5));
            tx.send(42).unwrap();
            smarm::sleep(ms(5));
            // The receiver is parked again; dropping the last sender wakes it.
        })
        .unwrap();
        let start = now();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(42));
        assert!(now() - start < Duration::from_secs(5));
        // Parked with a deadline when the last sender goes: Disconnected.
        let start = now();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Err(RecvTimeoutError::Disconnected));
        assert!(now() - start < Duration::from_secs(5));
        sender.join().unwrap();

        // The stale timers of the waits above do not cut a later sleep short.
        let start = now();
        smarm::sleep(ms(20));
        assert!(now() - start >= ms(20));
    });
}

drive_tests!(recv_timeouts => recv_timeout_tells_timeout_from_disconnected, recv_timeout_tells_timeout_from_disconnected_on_4_workers, recv_timeout_tells_timeout_from_disconnected_on_4_threads);

#[test]
fn recv_timeout_message_landing_past_the_deadline_still_wins() {
    // The receiver's deadline passes while the worker thread is blocked,
    // and the message is sent before the timer can fire: message first.
    smarm::run(|| {
        let (tx, rx) = smarm::channel::<u32>();
        let (result_tx, result_rx) = smarm::channel();
        let receiver = smarm::spawn(move || {
            let start = smarm::now().unwrap();
            let got = rx.recv_timeout(ms(5));
            result_tx.send((got, smarm::now().unwrap() - start)).unwrap();
        })
        .unwrap();
        smarm::yield_now(); // the receiver parks
        std::thread::sleep(ms(20));
        tx.send(9).unwrap();
        let (got, waited) = result_rx.recv().unwrap();
        assert_eq!(got, Ok(9));
        assert!(waited >= ms(5), "the deadline had passed: {waited:?}");
        receiver.join().unwrap();
    });
}

#[test]
fn try_recv_match_takes_the_first_match_and_keeps_the_rest_in_order() {
    smarm::run(|| {
        let (tx, rx) = smarm::channel::<u32>();
        for v in [1, 2, 3, 4, 5, 6] {
            tx.send(v).unwrap();
        }
        let even = |v: &u32| v.is_multiple_of(2);
        assert_eq!(rx.try_recv_match(even), Ok(2));
        assert_eq!(rx.try_recv_match(even), Ok(4));
        assert_eq!(rx.try_recv_match(|v| *v > 4), Ok(5));
        assert_eq!(rx.try_recv_match(|v| *v > 10), Err(TryRecvError::Empty));
        assert_eq!(rx.recv_match(even), Ok(6));
        assert_eq!(rx.len(), 2);
        assert_eq!(rx.try_recv(), Ok(1));
        // No match and no sender left: no match can ever come.
        drop(tx);
        assert_eq!(rx.try_recv_match(|v| *v > 10), Err(TryRecvError::Disconnected));
        assert_eq!(rx.recv_match(|v| *v > 10), Err(RecvError::Disconnected));
        // The non-matching message is still there, in order.
        assert_eq!(rx.try_recv(), Ok(3));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    });
}

fn recv_match_parks(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (tx, rx) = smarm::channel::<u32>();
        // Count the predicate's calls: one per message it looks at.
        let evaluated = Arc::new(AtomicUsize::new(0));
        let (e, seen) = (evaluated.clone(), evaluated.clone());
        let sender = smarm::spawn_on(next_worker(workers), move || {
            for v in 1..=20 {
                tx.send(v).unwrap();
                if v == 5 {
                    // Let the receiver scan what is there before the rest
                    // arrives, so it must park and scan again.
                    while seen.load(Ordering::SeqCst) < 5 {
                        smarm::yield_now();
                    }
                }
                smarm::yield_now();
            }
        })
        .unwrap();
        let got = rx.recv_match(|v| {
            e.fetch_add(1, Ordering::SeqCst);
            *v == 10
        });
        assert_eq!(got, Ok(10));
        // It parked (the sender waited for its first scan) and looked at
        // each arrival once: the messages it looked at before it parked
        // are not scanned again, so ten messages are ten calls.
        assert_eq!(evaluated.load(Ordering::SeqCst), 10, "each message is looked at once");
        // A second selective receive, for a message not sent yet.
        assert_eq!(rx.recv_match(|v| *v == 15), Ok(15));
        sender.join().unwrap();
        let rest: Vec<u32> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        let expected: Vec<u32> = (1..=20).filter(|v| *v != 10 && *v != 15).collect();
        assert_eq!(rest, expected);
        assert_eq!(rx.recv_match(|_| true), Err(RecvError::Disconnected));
    });
}

drive_tests!(recv_match_parks => recv_match_parks_and_rescans_on_arrivals, recv_match_parks_and_rescans_on_arrivals_on_4_workers, recv_match_parks_and_rescans_on_arrivals_on_4_threads);

#[test]
fn bounded_send_parks_when_full_and_resumes_when_the_receiver_takes() {
    let t: Trace = Arc::default();
    let t2 = t.clone();
    smarm::run(move || {
        let (tx, rx) = smarm::bounded::<u32>(1);
        let ts = t2.clone();
        let sender = smarm::spawn(move || {
            for i in 0..3 {
                record(&ts, format!("send {i}"));
                tx.send(i).unwrap();
                record(&ts, format!("sent {i}"));
            }
        })
        .unwrap();
        smarm::yield_now(); // the sender fills the channel and parks
        record(&t2, format!("len {}", rx.len()));
        for _ in 0..3 {
            let v = rx.recv().unwrap();
            record(&t2, format!("got {v}"));
            smarm::yield_now(); // the room lets the parked sender resume
        }
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
        sender.join().unwrap();
    });
    let trace = t.lock().unwrap().clone();
    assert_eq!(
        trace,
        ["send 0", "sent 0", "send 1", "len 1", "got 0", "sent 1", "send 2", "got 1", "sent 2", "got 2"]
    );
}

#[test]
fn bounded_try_send_full_gives_the_value_back() {
    smarm::run(|| {
        let (tx, rx) = smarm::bounded::<String>(2);
        tx.try_send("a".into()).unwrap();
        tx.try_send("b".into()).unwrap();
        match tx.try_send("c".into()) {
            Err(TrySendError::Full(v)) => assert_eq!(v, "c"),
            other => panic!("expected Full, got {other:?}"),
        }
        assert_eq!(rx.len(), 2);
        assert_eq!(rx.recv().as_deref(), Ok("a"));
        tx.try_send("c".into()).unwrap();
        assert_eq!(tx.try_send("d".into()).unwrap_err().into_inner(), "d");
        assert_eq!(rx.recv().as_deref(), Ok("b"));
        assert_eq!(rx.recv().as_deref(), Ok("c"));
        drop(rx);
        match tx.try_send("e".into()) {
            Err(TrySendError::Disconnected(v)) => assert_eq!(v, "e"),
            other => panic!("expected Disconnected, got {other:?}"),
        }
        // A capacity of 0 is a rendezvous: with no receiver waiting in
        // recv there is no room at all (channel_std.rs covers the rest).
        let (tx, rx) = smarm::bounded::<u8>(0);
        assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    });
}

fn bounded_receiver_drop_releases_parked_senders(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (tx, rx) = smarm::bounded::<String>(1);
        tx.send("fills".into()).unwrap();
        let (result_tx, result_rx) = smarm::channel();
        let senders: Vec<_> = (0..3)
            .map(|k| {
                let tx = tx.clone();
                let result_tx = result_tx.clone();
                smarm::spawn_on(k % workers, move || {
                    let outcome = tx.send(format!("parked {k}"));
                    result_tx.send(outcome.map_err(|SendError(v)| v)).unwrap();
                })
                .unwrap()
            })
            .collect();
        drop(result_tx);
        smarm::sleep(ms(5)); // all three park on the full channel
        assert_eq!(result_rx.try_recv(), Err(TryRecvError::Empty));
        drop(rx);
        let mut back: Vec<String> = (0..3).map(|_| result_rx.recv().unwrap().unwrap_err()).collect();
        back.sort();
        assert_eq!(back, ["parked 0", "parked 1", "parked 2"]);
        for s in senders {
            s.join().unwrap();
        }
    });
}

drive_tests!(bounded_receiver_drop_releases_parked_senders => bounded_receiver_drop_returns_the_parked_senders_messages, bounded_receiver_drop_returns_the_parked_senders_messages_on_4_workers, bounded_receiver_drop_returns_the_parked_senders_messages_on_4_threads);

fn bounded_stress(drive: Drive) {
    const SENDERS: u64 = 6;
    const PER: u64 = 500;
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (tx, rx) = smarm::bounded::<(u64, u64)>(3);
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
        while let Ok((k, seq)) = rx.recv() {
            assert!(rx.len() <= 3, "bounded channel over capacity");
            assert_eq!(seq, next[k as usize], "sender {k} out of order");
            next[k as usize] += 1;
            count += 1;
        }
        assert_eq!(count, SENDERS * PER);
        assert!(next.iter().all(|&n| n == PER));
        for h in handles {
            h.join().unwrap();
        }
    });
}

drive_tests!(bounded_stress => bounded_channel_counts_every_message, bounded_channel_counts_every_message_on_4_workers, bounded_channel_counts_every_message_on_4_threads);

/// A message that owns a sender of its own channel.
struct Node(#[allow(dead_code)] Sender<Node>);

fn drop_owned_senders(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        // Channel A carries senders of channel B. Dropping A's receiver
        // drops the queued senders; the last one takes B's lock and wakes
        // B's parked receiver. Done under A's lock, the lock-order
        // assertion (no channel lock under another) would fire.
        let (tx_b, rx_b) = smarm::channel::<u32>();
        let (tx_a, rx_a) = smarm::channel::<Sender<u32>>();
        for _ in 0..3 {
            tx_a.send(tx_b.clone()).unwrap();
        }
        drop(tx_b);
        let woken = Arc::new(AtomicBool::new(false));
        let w = woken.clone();
        let waiter = smarm::spawn_on(next_worker(workers), move || {
            assert_eq!(rx_b.recv(), Err(RecvError::Disconnected));
            w.store(true, Ordering::SeqCst);
        })
        .unwrap();
        smarm::sleep(ms(2)); // the waiter parks on B
        assert!(!woken.load(Ordering::SeqCst));
        drop(rx_a);
        waiter.join().unwrap();
        assert!(woken.load(Ordering::SeqCst));
        assert!(tx_a.is_closed());

        // Channel C carries the receiver of channel D: dropping C's
        // receiver closes D for its sender.
        let (tx_d, rx_d) = smarm::channel::<u32>();
        let (tx_c, rx_c) = smarm::channel::<smarm::Receiver<u32>>();
        tx_c.send(rx_d).unwrap();
        tx_d.send(1).unwrap();
        drop(rx_c);
        assert_eq!(tx_d.send(2), Err(SendError(2)));

        // A channel whose messages own its own sender: the last sender is
        // in the queue, dropped with it.
        let (tx_n, rx_n) = smarm::channel::<Node>();
        tx_n.send(Node(tx_n.clone())).unwrap();
        tx_n.send(Node(tx_n.clone())).unwrap();
        drop(tx_n);
        assert!(!rx_n.senders_gone());
        drop(rx_n);
    });
}

drive_tests!(drop_owned_senders => dropping_a_receiver_drops_queued_senders_after_its_lock, dropping_a_receiver_drops_queued_senders_after_its_lock_on_4_workers, dropping_a_receiver_drops_queued_senders_after_its_lock_on_4_threads);

fn pipeline(drive: Drive) {
    let workers = drive.workers();
    const STAGES: usize = 4;
    const MESSAGES: u64 = 2_000;
    drive.run(move || {
        // root → stage 0 → … → stage 3 → root, each stage on its own worker
        // (when there are four), each adding one.
        let (first_tx, mut rx) = smarm::channel::<u64>();
        let mut stages = Vec::new();
        for s in 0..STAGES {
            let (tx, next_rx) = smarm::channel::<u64>();
            let input = std::mem::replace(&mut rx, next_rx);
            stages.push(
                smarm::spawn_on((s + 1) % workers, move || {
                    while let Ok(v) = input.recv() {
                        tx.send(v + 1).unwrap();
                    }
                })
                .unwrap(),
            );
        }
        let feeder = smarm::spawn(move || {
            for v in 0..MESSAGES {
                first_tx.send(v).unwrap();
                if v.is_multiple_of(16) {
                    smarm::yield_now();
                }
            }
        })
        .unwrap();
        for v in 0..MESSAGES {
            assert_eq!(rx.recv(), Ok(v + STAGES as u64));
        }
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
        feeder.join().unwrap();
        for s in stages {
            s.join().unwrap();
        }
    });
}

drive_tests!(pipeline => pipeline_through_four_stages, pipeline_across_4_workers, pipeline_across_4_threads);

fn stop_parked_receiver(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (tx, rx) = smarm::channel::<String>();
        let returned = Arc::new(AtomicBool::new(false));
        let r = returned.clone();
        let receiver = smarm::spawn_on(next_worker(workers), move || {
            let _ = rx.recv();
            r.store(true, Ordering::SeqCst);
        })
        .unwrap();
        let m = smarm::monitor(receiver.pid());
        smarm::sleep(ms(5)); // it parks in recv
        assert!(rt.is_alive(receiver.pid()));
        rt.request_stop(receiver.pid()).unwrap();
        assert_eq!(m.rx.recv().unwrap().reason, ExitReason::Stopped);
        assert!(receiver.join().unwrap_err().is_stopped());
        assert!(!returned.load(Ordering::SeqCst), "recv returned in a stopped process");
        // The receiver unwound and was dropped: the message comes back.
        let SendError(back) = tx.send("late".into()).unwrap_err();
        assert_eq!(back, "late");
        assert!(tx.is_closed());
    });
}

drive_tests!(stop_parked_receiver => receiver_stopped_in_recv_ends_stopped_and_closes_the_channel, receiver_stopped_in_recv_ends_stopped_and_closes_the_channel_on_4_workers, receiver_stopped_in_recv_ends_stopped_and_closes_the_channel_on_4_threads);

/// A process parked in `recv` on an unbounded channel is handed the next
/// value directly; the values sent behind it are queued. They come out
/// in send order, each once, whether the receiver is handed a value or
/// finds a queue.
#[test]
fn a_value_handed_to_a_parked_receiver_comes_out_first_and_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let got = smarm::run(move || {
        let (tx, rx) = smarm::channel::<Counted>();
        let receiver = smarm::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..3 {
                got.push(rx.recv().unwrap().value);
            }
            // Parked again, then handed one more, in a recv_timeout.
            got.push(rx.recv_timeout(Duration::from_secs(5)).unwrap().value);
            got
        })
        .unwrap();
        smarm::sleep(ms(5)); // it parks in recv
        for value in 0..3 {
            tx.send(Counted::new(&d, value)).unwrap();
        }
        smarm::sleep(ms(5)); // it takes the three and parks again
        tx.send(Counted::new(&d, 3)).unwrap();
        receiver.join().unwrap()
    });
    assert_eq!(got, [0, 1, 2, 3]);
    assert_eq!(drops.load(Ordering::SeqCst), 4, "every value dropped once");
}

/// A value handed to a parked receiver that is stopped before it runs is
/// dropped once, with the receiver, and never returned by its recv.
#[test]
fn a_value_handed_to_a_receiver_stopped_before_it_runs_is_dropped_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    smarm::run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (tx, rx) = smarm::channel::<Counted>();
        let returned = Arc::new(AtomicBool::new(false));
        let r = returned.clone();
        let receiver = smarm::spawn(move || {
            let _ = rx.recv();
            r.store(true, Ordering::SeqCst);
        })
        .unwrap();
        smarm::sleep(ms(5)); // it parks in recv
                             // Handed (the receiver is parked), then stopped before it runs:
                             // one worker, and this process does not yield in between.
        tx.send(Counted::new(&d, 1)).unwrap();
        rt.request_stop(receiver.pid()).unwrap();
        assert!(receiver.join().unwrap_err().is_stopped());
        assert!(!returned.load(Ordering::SeqCst), "recv returned in a stopped process");
        assert_eq!(d.load(Ordering::SeqCst), 1, "the handed value went with the receiver");
        let SendError(back) = tx.send(Counted::new(&d, 2)).unwrap_err();
        assert_eq!(back.value, 2);
    });
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

/// An unbounded receiver takes the whole queue at its first look and
/// returns the rest from its own buffer: `len`, selective receive, select
/// readiness and the receiver's drop all see those messages, and every
/// message is dropped exactly once.
#[test]
fn messages_taken_in_a_batch_stay_visible_until_received() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = smarm::channel::<Counted>();
    for value in 0..6 {
        tx.send(Counted::new(&drops, value)).unwrap();
    }
    // The first receive takes the batch: five stay with the receiver.
    assert_eq!(rx.try_recv().map(|m| m.value).ok(), Some(0));
    assert_eq!(rx.len(), 5);
    tx.send(Counted::new(&drops, 6)).unwrap();
    assert_eq!(rx.len(), 6, "taken and queued messages both count");
    // A selective receive looks at the taken ones first, then the queue,
    // and leaves the rest in order.
    assert_eq!(rx.try_recv_match(|m| m.value == 6).map(|m| m.value).ok(), Some(6));
    assert_eq!(rx.try_recv_match(|m| m.value == 3).map(|m| m.value).ok(), Some(3));
    assert!(matches!(rx.try_recv_match(|m| m.value == 9), Err(TryRecvError::Empty)));
    // With nothing queued, the taken messages still make a select ready.
    let (_idle_tx, idle) = smarm::channel::<Counted>();
    assert_eq!(smarm::select_timeout(&[&idle, &rx], Duration::ZERO), Some(1));
    assert_eq!(rx.try_recv().map(|m| m.value).ok(), Some(1));
    assert_eq!(drops.load(Ordering::SeqCst), 4);
    // Senders gone: the taken messages still come out before Disconnected.
    drop(tx);
    assert_eq!(rx.try_iter().map(|m| m.value).collect::<Vec<_>>(), [2, 4, 5]);
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Disconnected)));
    assert_eq!(drops.load(Ordering::SeqCst), 7);

    // A receiver dropped with messages taken drops each of them once.
    let (tx, rx) = smarm::channel::<Counted>();
    for value in 0..10 {
        tx.send(Counted::new(&drops, value)).unwrap();
    }
    assert!(rx.try_recv().is_ok());
    tx.send(Counted::new(&drops, 10)).unwrap();
    drop(rx);
    assert_eq!(drops.load(Ordering::SeqCst), 7 + 11);
    assert!(tx.send(Counted::new(&drops, 11)).is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 7 + 12);
}

/// A producer and a consumer on two threads: every message arrives once,
/// in order, however the consumer's batches fall.
fn producer_consumer(drive: Drive) {
    const COUNT: u64 = 200_000;
    let workers = drive.workers();
    let (sum, received) = drive.run(move || {
        let (tx, rx) = smarm::channel::<u64>();
        let consumer = smarm::spawn_on(next_worker(workers), move || {
            let (mut sum, mut next) = (0u64, 0u64);
            for value in rx.iter() {
                assert_eq!(value, next, "in order");
                next += 1;
                sum += value;
            }
            (sum, next)
        })
        .unwrap();
        for value in 0..COUNT {
            tx.send(value).unwrap();
        }
        drop(tx);
        consumer.join().unwrap()
    });
    assert_eq!(received, COUNT);
    assert_eq!(sum, COUNT * (COUNT - 1) / 2);
}
drive_tests!(producer_consumer => producer_consumer_one_worker, producer_consumer_four_workers, producer_consumer_four_threads);
