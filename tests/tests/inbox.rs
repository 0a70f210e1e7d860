//! An inbox sees when its senders are gone: its typed addresses are
//! counted, and once the last is dropped (its holder ended, was stopped or
//! panicked) a receive on the empty inbox returns
//! `Disconnected(NoSenders)` — after every message already queued — rather
//! than waiting forever. On one worker, four workers on one thread and the
//! four-thread Engine. Every wait is bounded, so a regression fails rather
//! than hangs.

mod common;
use common::{ms, Drive};

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use smarm::actor::{Disconnected, InboxRecvError, InboxTryRecvError};
use smarm::{Actor, Ctx, Inbox, InboxAddr};

/// Long enough for any send to land; short enough that a regression (a
/// receive that waits instead of reporting the disconnection) fails soon.
const BOUND: Duration = Duration::from_secs(5);

const GONE: InboxRecvError = InboxRecvError::Disconnected(Disconnected::NoSenders);

/// Receives until the inbox reports something other than a message; every
/// wait bounded by `BOUND`.
fn drain<M: Send + 'static>(inbox: &Inbox<M>) -> (Vec<M>, InboxRecvError) {
    let mut got = vec![];
    loop {
        match inbox.recv_timeout(BOUND) {
            Ok(m) => got.push(m),
            Err(e) => return (got, e),
        }
    }
}

/// Polls `f` on this thread until it is ready or `BOUND` passes.
fn block_on_bounded<F: Future>(f: F) -> Option<F::Output> {
    struct ThreadWaker(std::thread::Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let deadline = Instant::now() + BOUND;
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return Some(v);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::park_timeout(deadline - now);
    }
}

/// Joins `thread` without blocking the worker when called from a process
/// (a single-threaded host drives every worker from that same thread).
fn join_thread<T>(thread: std::thread::JoinHandle<T>) -> T {
    let start = Instant::now();
    while !thread.is_finished() {
        assert!(start.elapsed() < Duration::from_secs(10), "the thread never finished");
        smarm::sleep(ms(1));
    }
    thread.join().unwrap()
}

/// Holds an inbox address; on `Send(n)` sends `n` and `n + 1000`, on
/// `Stop` stops, on `Panic` sends `n` then panics.
struct Holder {
    to: InboxAddr<u64>,
}

enum H {
    Send(u64),
    SendAndStop(u64),
    Panic(u64),
    Stop,
}

impl Actor for Holder {
    type Msg = H;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, msg: H) {
        match msg {
            H::Send(n) => {
                self.to.send(n).unwrap();
                self.to.send(n + 1000).unwrap();
            }
            H::SendAndStop(n) => {
                self.to.send(n).unwrap();
                ctx.stop_self();
            }
            H::Panic(n) => {
                self.to.send(n).unwrap();
                panic!("holder {n} panics holding the inbox address");
            }
            H::Stop => ctx.stop_self(),
        }
    }
}

// --------------------------------------------------- every holder ended

fn holders_end(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let inbox = rt.new_inbox::<u64>();
        // Nothing was connected yet: a receive waits (and times out).
        assert_eq!(inbox.recv_timeout(ms(10)), Err(InboxRecvError::Timeout));
        let holders: Vec<_> = (0..6u64)
            .map(|i| rt.spawn_actor_on(i as usize % workers, Holder { to: inbox.addr() }).unwrap())
            .collect();
        for (i, h) in holders.iter().enumerate() {
            h.send(H::Send(i as u64)).unwrap();
            h.send(H::Send(10 + i as u64)).unwrap();
            h.send(H::Stop).unwrap();
        }
        drop(holders);
        // Every message already sent is received first, then the
        // disconnection, instead of a wait that never ends.
        let (mut got, end) = drain(&inbox);
        got.sort_unstable();
        let mut want: Vec<u64> = (0..6).flat_map(|i| [i, i + 1000, 10 + i, 10 + i + 1000]).collect();
        want.sort_unstable();
        assert_eq!(got, want, "nothing queued is lost");
        assert_eq!(end, GONE);
        // It stays disconnected, for every way of receiving.
        assert_eq!(inbox.try_recv(), Err(InboxTryRecvError::Disconnected(Disconnected::NoSenders)));
        assert_eq!(inbox.recv(), Err(GONE));
        assert_eq!(inbox.recv_timeout(ms(10)), Err(GONE));
        // A new address reconnects it.
        let again = inbox.addr();
        assert_eq!(inbox.recv_timeout(ms(10)), Err(InboxRecvError::Timeout));
        again.send(7).unwrap();
        drop(again);
        assert_eq!(inbox.recv_timeout(BOUND), Ok(7));
        assert_eq!(inbox.recv_timeout(BOUND), Err(GONE));
    });
}
drive_tests!(holders_end => holders_ended_disconnects_after_the_queued_messages_1, holders_ended_disconnects_after_the_queued_messages_4, holders_ended_disconnects_after_the_queued_messages_engine);

/// A receiver already parked (a process, an OS thread, async code) is
/// woken by the last address being dropped elsewhere.
fn parked_receivers_wake(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        // A process parked in `recv`, woken by the holder stopping later.
        let inbox = rt.new_inbox::<u64>();
        let holder = rt.spawn_actor_on(workers - 1, Holder { to: inbox.addr() }).unwrap();
        let stopper = smarm::spawn_on(0, move || {
            smarm::sleep(ms(20));
            holder.send(H::SendAndStop(1)).unwrap();
        })
        .unwrap();
        let (got, end) = drain(&inbox);
        assert_eq!((got, end), (vec![1], GONE));
        stopper.join().unwrap();
        // An OS thread that drives no worker, and async code.
        let rt2 = rt.clone();
        let thread = std::thread::spawn(move || {
            let inbox = rt2.new_inbox::<u64>();
            let addr = inbox.addr();
            let dropper = std::thread::spawn(move || {
                std::thread::sleep(ms(20));
                addr.send(2).unwrap();
                std::thread::sleep(ms(20));
                drop(addr);
            });
            let on_thread = drain(&inbox);
            dropper.join().unwrap();
            let inbox = rt2.new_inbox::<u64>();
            let addr = inbox.addr();
            let dropper = std::thread::spawn(move || {
                std::thread::sleep(ms(20));
                drop(addr);
            });
            let awaited = block_on_bounded(inbox.recv_async());
            dropper.join().unwrap();
            (on_thread, awaited)
        });
        let (on_thread, awaited) = join_thread(thread);
        assert_eq!(on_thread, (vec![2], GONE));
        assert_eq!(awaited, Some(Err(GONE)), "the awaited receive saw the disconnection in time");
    });
}
drive_tests!(parked_receivers_wake => a_parked_receiver_wakes_on_the_last_drop_1, a_parked_receiver_wakes_on_the_last_drop_4, a_parked_receiver_wakes_on_the_last_drop_engine);

// ----------------------------------------------------- panicking holders

/// The fan-out whose worker panics: the collector gets the messages sent
/// before the panic, then the disconnection — it does not hang.
fn panicking_holder(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        // Handler actors: one finishes, the other panics holding the last
        // address.
        let inbox = rt.new_inbox::<u64>();
        let done = rt.spawn_actor_on(0, Holder { to: inbox.addr() }).unwrap();
        let doomed = rt.spawn_actor_on(workers - 1, Holder { to: inbox.addr() }).unwrap();
        done.send(H::SendAndStop(1)).unwrap();
        doomed.send(H::Panic(2)).unwrap();
        drop((done, doomed));
        let (mut got, end) = drain(&inbox);
        got.sort_unstable();
        assert_eq!((got, end), (vec![1, 2], GONE));
        // Processes: every worker of the fan-out panics.
        let inbox = rt.new_inbox::<u64>();
        let fan: Vec<_> = (0..4u64)
            .map(|i| {
                let addr = inbox.addr();
                smarm::spawn_on(i as usize % workers, move || {
                    addr.send(i).unwrap();
                    if i % 2 == 1 {
                        panic!("fan-out worker {i} panics");
                    }
                })
                .unwrap()
            })
            .collect();
        let (mut got, end) = drain(&inbox);
        got.sort_unstable();
        assert_eq!((got, end), (vec![0, 1, 2, 3], GONE));
        let panicked = fan.into_iter().map(|h| h.join()).filter(Result::is_err).count();
        assert_eq!(panicked, 2);
    });
}
drive_tests!(panicking_holder => a_panicking_holder_disconnects_the_collector_1, a_panicking_holder_disconnects_the_collector_4, a_panicking_holder_disconnects_the_collector_engine);

// ------------------------------------------------ live addresses and rules

fn live_clone(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let inbox = rt.new_inbox::<u64>();
        let kept = inbox.addr();
        let holder = rt.spawn_actor_on(workers - 1, Holder { to: kept.clone() }).unwrap();
        holder.send(H::SendAndStop(3)).unwrap();
        assert_eq!(inbox.recv_timeout(BOUND), Ok(3));
        // The holder has ended, but a clone lives: the inbox keeps waiting.
        assert_eq!(inbox.recv_timeout(ms(50)), Err(InboxRecvError::Timeout));
        assert_eq!(inbox.try_recv(), Err(InboxTryRecvError::Empty));
        // A clone of a clone, then the original dropped: still connected.
        let copy = kept.clone();
        drop(kept);
        assert_eq!(inbox.recv_timeout(ms(20)), Err(InboxRecvError::Timeout));
        copy.send(4).unwrap();
        drop(copy);
        assert_eq!(drain(&inbox), (vec![4], GONE));
    });
}
drive_tests!(live_clone => a_live_clone_keeps_the_inbox_waiting_1, a_live_clone_keeps_the_inbox_waiting_4, a_live_clone_keeps_the_inbox_waiting_engine);

/// An untyped address is not counted: once one is made the inbox never
/// reports the disconnection (it cannot know), and it still delivers.
#[test]
fn an_untyped_address_turns_disconnection_off() {
    Drive::Single(1).run(|| {
        let rt = smarm::current_runtime().unwrap();
        let inbox = rt.new_inbox::<u64>();
        drop(inbox.addr());
        assert_eq!(inbox.recv_timeout(BOUND), Err(GONE));
        let address = inbox.address();
        let typed = inbox.addr();
        drop(typed);
        assert_eq!(inbox.recv_timeout(ms(20)), Err(InboxRecvError::Timeout), "not disconnected");
        address.send(5u64).unwrap();
        assert_eq!(inbox.recv_timeout(BOUND), Ok(5));
        assert_eq!(inbox.try_recv(), Err(InboxTryRecvError::Empty));
    });
}

/// An address inside a queued message counts too; dropping an inbox whose
/// queue holds its own address does not deadlock.
enum Link {
    Me(InboxAddr<Link>),
}

#[test]
fn addresses_inside_queued_messages_count() {
    Drive::Single(1).run(|| {
        let rt = smarm::current_runtime().unwrap();
        let inbox = rt.new_inbox::<Link>();
        let addr = inbox.addr();
        addr.send(Link::Me(inbox.addr())).unwrap();
        drop(addr);
        // The queued message's address keeps it connected until received
        // and dropped.
        let Ok(Link::Me(inner)) = inbox.recv_timeout(BOUND) else { panic!("the message was lost") };
        assert_eq!(inbox.try_recv().err(), Some(InboxTryRecvError::Empty));
        drop(inner);
        assert_eq!(inbox.recv_timeout(BOUND).err(), Some(GONE));
        // Dropped with its own address queued: no self-deadlock.
        let addr = inbox.addr();
        addr.send(Link::Me(addr.clone())).unwrap();
        drop(inbox);
        assert!(addr.send(Link::Me(addr.clone())).is_err(), "the inbox is gone");
    });
}
