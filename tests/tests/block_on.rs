//! `smarm::block_on`: futures inside processes and on plain threads.
//! Woken from another thread (many times, by a future that keeps its
//! first waker), by a process after its timer, from a process to a plain
//! thread; a ready future; a pending-forever future stopped by
//! `request_stop` (its destructor runs once); a handler actor, where it
//! polls once and never blocks. On one worker, four workers on one
//! thread, and the four-thread Engine.

mod common;
use common::*;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;

use smarm::{CannotBlock, ExitReason, JoinError};

/// Ready once `count` reaches `target`. Keeps only the waker of its first
/// poll, as a future may when `will_wake` says the waker is the same.
struct Count {
    count: Arc<AtomicUsize>,
    target: usize,
    kept: Arc<Mutex<Option<Waker>>>,
    polls: Arc<AtomicUsize>,
}

impl Count {
    fn new(target: usize) -> (Count, Arc<AtomicUsize>, Arc<Mutex<Option<Waker>>>) {
        let count = Arc::new(AtomicUsize::new(0));
        let kept = Arc::new(Mutex::new(None));
        let future =
            Count { count: count.clone(), target, kept: kept.clone(), polls: Arc::new(AtomicUsize::new(0)) };
        (future, count, kept)
    }
}

impl Future for Count {
    type Output = usize;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        {
            let mut kept = self.kept.lock().unwrap();
            if kept.is_none() {
                *kept = Some(cx.waker().clone());
            }
        }
        let now = self.count.load(Ordering::Acquire);
        if now >= self.target {
            Poll::Ready(now)
        } else {
            Poll::Pending
        }
    }
}

/// Bumps the count and wakes through the kept waker (once the future has
/// polled).
fn bump(count: &AtomicUsize, kept: &Mutex<Option<Waker>>) {
    count.fetch_add(1, Ordering::Release);
    let waker = kept.lock().unwrap().clone();
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// A ready future, inside a process and on the test's own thread.
fn ready(drive: Drive) {
    let inside = drive.run(|| smarm::block_on(async { 6 * 7 }).unwrap());
    assert_eq!(inside, 42);
    assert_eq!(smarm::block_on(async { "outside" }).unwrap(), "outside");
}
drive_tests!(ready => a_ready_future_1, a_ready_future_4, a_ready_future_engine);

/// Four OS threads each bump and wake 250 times, through the waker the
/// future kept from its first poll; the process parks in between and
/// sees every bump. Three processes do it at once.
fn woken_from_threads(drive: Drive) {
    drive.run(|| {
        let processes: Vec<_> = (0..3)
            .map(|_| {
                smarm::spawn(|| {
                    let (future, count, kept) = Count::new(1_000);
                    let polls = future.polls.clone();
                    let wakers: Vec<_> = (0..4)
                        .map(|_| {
                            let (count, kept) = (count.clone(), kept.clone());
                            thread::spawn(move || {
                                // Start once the future has polled: the
                                // wakes then land while it is parked.
                                while kept.lock().unwrap().is_none() {
                                    thread::yield_now();
                                }
                                (0..250).for_each(|_| bump(&count, &kept))
                            })
                        })
                        .collect();
                    let got = smarm::block_on(future).unwrap();
                    wakers.into_iter().for_each(|w| w.join().unwrap());
                    (got, polls.load(Ordering::Relaxed))
                })
                .unwrap()
            })
            .collect();
        for process in processes {
            let (got, polls) = process.join().unwrap();
            assert_eq!(got, 1_000);
            // Parked between polls: far fewer polls than wakes is fine,
            // but at least one poll after the first.
            assert!((2..=1_001).contains(&polls), "{polls} polls");
        }
    });
}
drive_tests!(woken_from_threads => woken_from_other_threads_1, woken_from_other_threads_4, woken_from_other_threads_engine);

/// A process sleeps (a timer) and then wakes the future another process
/// waits on, ten times.
fn woken_after_a_timer(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (future, count, kept) = Count::new(10);
        let ticker = smarm::spawn_on(next_worker(workers), move || {
            for _ in 0..10 {
                smarm::sleep(ms(1));
                bump(&count, &kept);
            }
        })
        .unwrap();
        assert_eq!(smarm::block_on(future).unwrap(), 10);
        ticker.join().unwrap();
    });
}
drive_tests!(woken_after_a_timer => woken_by_a_process_after_its_timer_1, woken_by_a_process_after_its_timer_4, woken_by_a_process_after_its_timer_engine);

/// A plain thread waits in `block_on` for a future a process completes.
fn thread_waits_on_a_process(drive: Drive) {
    drive.run(|| {
        let (future, count, kept) = Count::new(5);
        let (report_tx, report) = smarm::channel();
        let waiter = thread::spawn(move || report_tx.send(smarm::block_on(future).unwrap()).unwrap());
        for _ in 0..5 {
            smarm::sleep(ms(1));
            bump(&count, &kept);
        }
        assert_eq!(report.recv().unwrap(), 5);
        waiter.join().unwrap();
    });
}
drive_tests!(thread_waits_on_a_process => a_thread_blocks_on_a_future_1, a_thread_blocks_on_a_future_4, a_thread_blocks_on_a_future_engine);

/// Counts its drops.
struct Forever(Arc<AtomicUsize>);

impl Future for Forever {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

impl Drop for Forever {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A process waiting on a future that never completes is stopped: the
/// future is dropped once, as the process unwinds.
fn stopped_while_waiting(drive: Drive) {
    drive.run(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (started_tx, started) = smarm::channel::<()>();
        let waiter = {
            let drops = drops.clone();
            smarm::spawn(move || {
                started_tx.send(()).unwrap();
                let _ = smarm::block_on(Forever(drops));
            })
            .unwrap()
        };
        started.recv().unwrap();
        smarm::sleep(ms(5));
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        smarm::request_stop(waiter.pid()).unwrap();
        assert_eq!(waiter.join(), Err(JoinError::Exited(ExitReason::Stopped)));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}
drive_tests!(stopped_while_waiting => a_stopped_process_drops_its_future_once_1, a_stopped_process_drops_its_future_once_4, a_stopped_process_drops_its_future_once_engine);

/// In a handler actor `block_on` never blocks the worker: a ready future
/// gives its output; a pending one comes back, polled once, and is
/// dropped once by whoever holds it.
#[test]
fn a_handler_polls_once_and_hands_the_future_back() {
    struct Probe {
        report: smarm::Sender<(Option<u32>, bool)>,
        drops: Arc<AtomicUsize>,
    }
    impl smarm::Actor for Probe {
        type Msg = ();
        fn handle(&mut self, ctx: &mut smarm::Ctx<'_, Self>, _: ()) {
            let ready = smarm::block_on(async { 9 }).ok();
            let pending: Result<(), CannotBlock<Forever>> = smarm::block_on(Forever(self.drops.clone()));
            let handed_back = match pending {
                Err(back) => {
                    let future = back.into_inner();
                    // Still the caller's, not dropped by block_on.
                    self.drops.load(Ordering::SeqCst) == 0 && {
                        drop(future);
                        true
                    }
                }
                Ok(()) => false,
            };
            let _ = self.report.send((ready, handed_back));
            ctx.stop_self();
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let got = {
        let drops = drops.clone();
        smarm::run(move || {
            let (report, rx) = smarm::channel();
            let probe = smarm::spawn_actor(Probe { report, drops }).unwrap();
            probe.send(()).unwrap();
            rx.recv().unwrap()
        })
    };
    assert_eq!(got, (Some(9), true));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

/// An async receive built on the public pieces: `Selectable::register`
/// with a task's `Waiter`. Driven by `block_on` in a process and on a
/// plain thread, fed by a process that sleeps between sends; every message
/// in comes out, in order.
struct AsyncRecv<'a>(&'a smarm::Receiver<u32>);

impl Future for AsyncRecv<'_> {
    type Output = Option<u32>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<u32>> {
        use smarm::Selectable;
        loop {
            match self.0.try_recv() {
                Ok(v) => return Poll::Ready(Some(v)),
                Err(smarm::TryRecvError::Disconnected) => return Poll::Ready(None),
                Err(smarm::TryRecvError::Empty) => {
                    // `true`: it became ready meanwhile; look again.
                    if !self.0.register(&smarm::Waiter::from_task(cx.waker())) {
                        return Poll::Pending;
                    }
                }
            }
        }
    }
}

fn async_recv(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (tx, rx) = smarm::channel::<u32>();
        let (thread_tx, thread_rx) = smarm::channel::<u32>();
        let feeder = smarm::spawn_on(next_worker(workers), move || {
            for i in 0..50 {
                tx.send(i).unwrap();
                thread_tx.send(i).unwrap();
                if i % 5 == 0 {
                    smarm::sleep(ms(1));
                }
            }
        })
        .unwrap();
        let (report_tx, report) = smarm::channel();
        let on_thread = thread::spawn(move || {
            let mut got = Vec::new();
            while let Some(v) = smarm::block_on(AsyncRecv(&thread_rx)).unwrap() {
                got.push(v);
            }
            report_tx.send(got).unwrap();
        });
        let mut got = Vec::new();
        while let Some(v) = smarm::block_on(AsyncRecv(&rx)).unwrap() {
            got.push(v);
        }
        feeder.join().unwrap();
        assert_eq!(got, (0..50).collect::<Vec<_>>());
        assert_eq!(report.recv().unwrap(), (0..50).collect::<Vec<_>>());
        on_thread.join().unwrap();
    });
}
drive_tests!(async_recv => an_async_recv_on_a_channel_1, an_async_recv_on_a_channel_4, an_async_recv_on_a_channel_engine);
