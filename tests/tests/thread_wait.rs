//! Plain OS threads block where processes park: channel `recv`, `send` on a
//! full or rendezvous channel, `select`, the mutex, `join`, a monitor's
//! `Down`, a gen_server `call` — with and without a timeout — on one
//! worker, four workers on one thread, and four threads. Every message in
//! is counted out.

mod common;
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use smarm::{
    CallError, ExitReason, GenServer, JoinError, LockError, RecvError, RecvTimeoutError, SendTimeoutError,
    Server,
};

/// A process feeds 200 messages to a thread that `recv`s them; the thread's
/// `recv_timeout` on an idle channel times out, and once the senders are
/// gone `recv` is `Disconnected`.
fn thread_receives(drive: Drive) {
    drive.run(|| {
        let (tx, rx) = smarm::channel::<u64>();
        let (report_tx, report) = smarm::channel();
        let (go_tx, go) = smarm::channel::<()>();
        let reader = thread::spawn(move || {
            let mut sum = 0;
            for _ in 0..200 {
                sum += rx.recv().expect("a message");
            }
            // Nothing comes until the process says go.
            let idle = rx.recv_timeout(ms(20));
            report_tx.send((sum, idle)).unwrap();
            go.recv().unwrap();
            report_tx.send((0, rx.recv_timeout(ms(10_000)))).unwrap();
            rx.recv()
        });
        for i in 1..=200 {
            tx.send(i).unwrap();
            if i % 16 == 0 {
                smarm::sleep(ms(1));
            }
        }
        let (sum, idle) = report.recv().unwrap();
        assert_eq!(sum, 200 * 201 / 2);
        assert_eq!(idle, Err(RecvTimeoutError::Timeout));
        go_tx.send(()).unwrap();
        tx.send(7).unwrap();
        assert_eq!(report.recv().unwrap().1, Ok(7));
        drop(tx);
        assert_eq!(reader.join().unwrap(), Err(RecvError::Disconnected));
    });
}
drive_tests!(thread_receives => a_thread_receives_from_a_process_1, a_thread_receives_from_a_process_4, a_thread_receives_from_a_process_engine);

/// A thread sends 100 messages into a channel of one slot (it sleeps
/// while full) to a process that drains slowly; then a `send_timeout`
/// on the full channel times out and hands the message back.
fn thread_sends_into_a_full_channel(drive: Drive) {
    drive.run(|| {
        let (tx, rx) = smarm::bounded::<u32>(1);
        let writer = thread::spawn(move || {
            for i in 0..100 {
                tx.send(i).expect("the receiver is alive");
            }
            tx
        });
        let mut got = Vec::new();
        for _ in 0..100 {
            got.push(rx.recv().unwrap());
            if got.len() % 10 == 0 {
                smarm::sleep(ms(1));
            }
        }
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        let tx = writer.join().unwrap();
        // One slot, filled; nobody drains: the timed send gives up.
        let filler = tx.clone();
        let timed = thread::spawn(move || {
            filler.send(1).unwrap();
            filler.send_timeout(2, ms(20))
        });
        match timed.join().unwrap() {
            Err(SendTimeoutError::Timeout(v)) => assert_eq!(v, 2),
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert_eq!(rx.try_recv(), Ok(1));
    });
}
drive_tests!(thread_sends_into_a_full_channel => a_thread_sleeps_on_a_full_channel_1, a_thread_sleeps_on_a_full_channel_4, a_thread_sleeps_on_a_full_channel_engine);

/// Rendezvous both ways between a thread and a process.
fn rendezvous_with_a_thread(drive: Drive) {
    drive.run(|| {
        let (to_process, from_thread) = smarm::bounded::<u32>(0);
        let (to_thread, from_process) = smarm::bounded::<u32>(0);
        let peer = thread::spawn(move || {
            for i in 0..50 {
                to_process.send(i).unwrap();
            }
            (0..50).map(|_| from_process.recv().unwrap()).sum::<u32>()
        });
        let sum: u32 = (0..50).map(|_| from_thread.recv().unwrap()).sum();
        for i in 0..50 {
            to_thread.send(i * 2).unwrap();
        }
        assert_eq!(sum, 49 * 50 / 2);
        assert_eq!(peer.join().unwrap(), 49 * 50);
    });
}
drive_tests!(rendezvous_with_a_thread => a_rendezvous_with_a_thread_1, a_rendezvous_with_a_thread_4, a_rendezvous_with_a_thread_engine);

/// A thread selects over two channels a process feeds, and its
/// `select_timeout` on idle arms gives `None`.
fn thread_selects(drive: Drive) {
    drive.run(|| {
        let (a_tx, a) = smarm::channel::<u32>();
        let (b_tx, b) = smarm::channel::<u32>();
        let selector = thread::spawn(move || {
            let idle = smarm::select_timeout(&[&a, &b], ms(20));
            let (mut from_a, mut from_b) = (0, 0);
            while from_a + from_b < 60 {
                match smarm::select(&[&a, &b]) {
                    0 => from_a += a.try_recv().map(|_| 1).unwrap_or(0),
                    _ => from_b += b.try_recv().map(|_| 1).unwrap_or(0),
                }
            }
            (idle, from_a, from_b)
        });
        smarm::sleep(ms(40));
        for i in 0..30 {
            a_tx.send(i).unwrap();
            b_tx.send(i).unwrap();
            smarm::yield_now();
        }
        let (idle, from_a, from_b) = selector.join().unwrap();
        assert_eq!(idle, None);
        assert_eq!((from_a, from_b), (30, 30));
    });
}
drive_tests!(thread_selects => a_thread_selects_1, a_thread_selects_4, a_thread_selects_engine);

/// Two threads and two processes increment under one smarm mutex; a
/// thread's `lock_timeout` while a process holds it times out.
fn thread_and_processes_share_a_mutex(drive: Drive) {
    drive.run(|| {
        let counter = Arc::new(smarm::Mutex::new(0u32));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let counter = counter.clone();
                thread::spawn(move || {
                    for _ in 0..500 {
                        *counter.lock() += 1;
                    }
                })
            })
            .collect();
        let processes: Vec<_> = (0..2)
            .map(|_| {
                let counter = counter.clone();
                smarm::spawn(move || {
                    for i in 0..500 {
                        let mut guard = counter.lock();
                        *guard += 1;
                        if i % 50 == 0 {
                            // Held across a park: the threads must sleep.
                            smarm::sleep(ms(1));
                        }
                        drop(guard);
                    }
                })
                .unwrap()
            })
            .collect();
        processes.into_iter().for_each(|p| p.join().unwrap());
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(*counter.lock(), 2_000);

        let held = counter.lock();
        let contender = {
            let counter = counter.clone();
            thread::spawn(move || counter.lock_timeout(ms(20)).map(|_| ()).err())
        };
        let outcome = contender.join().unwrap();
        drop(held);
        assert_eq!(outcome, Some(LockError::Timeout));
    });
}
drive_tests!(thread_and_processes_share_a_mutex => a_thread_sleeps_on_the_mutex_1, a_thread_sleeps_on_the_mutex_4, a_thread_sleeps_on_the_mutex_engine);

/// A thread joins processes: one returns a value after a while, one
/// panics (the thread sees its `ExitReason`), one is stopped.
fn thread_joins(drive: Drive) {
    drive.run(|| {
        let worth = smarm::spawn(|| {
            smarm::sleep(ms(10));
            42u32
        })
        .unwrap();
        let crash = smarm::spawn(|| -> u32 {
            smarm::sleep(ms(5));
            panic!("boom on purpose")
        })
        .unwrap();
        let (parked_tx, parked) = smarm::channel::<()>();
        let stuck = smarm::spawn(move || {
            let _keep = parked_tx;
            smarm::sleep(ms(60_000));
        })
        .unwrap();
        let stuck_pid = stuck.pid();
        // The thread reports through a smarm channel: the root must stay
        // parked where the scheduler can run the stopped process's end
        // (on one driver, a std `join` here would hold the only driver).
        let (report_tx, report) = smarm::channel();
        let joiner =
            thread::spawn(move || report_tx.send((worth.join(), crash.join(), stuck.join())).unwrap());
        smarm::sleep(ms(20));
        smarm::request_stop(stuck_pid).unwrap();
        let (worth, crash, stuck) = report.recv().unwrap();
        joiner.join().unwrap();
        assert_eq!(worth, Ok(42));
        match crash {
            Err(JoinError::Exited(ExitReason::Panicked(message))) => {
                assert!(message.contains("boom on purpose"))
            }
            other => panic!("expected the panic, got {other:?}"),
        }
        assert_eq!(stuck, Err(JoinError::Exited(ExitReason::Stopped)));
        // The stopped process's sender went with it.
        assert_eq!(parked.recv(), Err(RecvError::Disconnected));
    });
}
drive_tests!(thread_joins => a_thread_joins_processes_1, a_thread_joins_processes_4, a_thread_joins_processes_engine);

/// A gen_server called from a thread (and timed out once), and a monitor's
/// `Down` received on a thread.
struct Adder(u64);

impl GenServer for Adder {
    type Call = Option<u64>;
    type Reply = u64;
    type Cast = ();
    type Info = ();
    fn handle_call(&mut self, request: Option<u64>) -> u64 {
        match request {
            Some(n) => {
                self.0 += n;
                self.0
            }
            None => {
                // Slow: longer than the caller's timeout.
                smarm::sleep(ms(50));
                self.0
            }
        }
    }
    fn handle_cast(&mut self, _: ()) {}
}

fn thread_calls_and_monitors(drive: Drive) {
    drive.run(|| {
        let server = Server::new(Adder(0)).start().unwrap();
        let rt = smarm::current_runtime().unwrap();
        let watch = rt.monitor(server.pid());
        // The threads report through channels: a process blocking in
        // `std::thread::JoinHandle::join` would hold its worker's thread,
        // which on one driver is the server's too.
        let (report, results) = smarm::channel();
        let calls = Arc::new(AtomicUsize::new(0));
        let caller = {
            let server = server.clone();
            let calls = calls.clone();
            thread::spawn(move || {
                let total = (1..=20).fold(0, |_, n| server.call(Some(n)).unwrap());
                calls.fetch_add(20, Ordering::Relaxed);
                let slow = server.call_timeout(None, ms(5));
                report.send((total, slow)).unwrap();
            })
        };
        let (total, slow) = results.recv().unwrap();
        caller.join().unwrap();
        assert_eq!((total, calls.load(Ordering::Relaxed)), (210, 20));
        assert_eq!(slow, Err(CallError::Timeout));
        let pid = server.pid();
        let (report, downs) = smarm::channel();
        let (early_tx, early) = smarm::channel();
        let watcher = thread::spawn(move || {
            // The server is alive: a timed wait for its Down times out.
            early_tx.send(watch.rx.recv_timeout(ms(20)).is_err()).unwrap();
            report.send(watch.rx.recv()).unwrap()
        });
        assert!(early.recv().unwrap(), "no Down before the server stops");
        server.stop().unwrap();
        drop(server);
        let down = downs.recv().unwrap().expect("a Down");
        watcher.join().unwrap();
        assert_eq!((down.pid, down.reason), (pid, ExitReason::Normal));
    });
}
drive_tests!(thread_calls_and_monitors => a_thread_calls_and_monitors_1, a_thread_calls_and_monitors_4, a_thread_calls_and_monitors_engine);

/// A handler actor may not sleep its worker: a `recv` there is
/// `NotInProcess` at once, as before.
#[test]
fn a_handler_still_cannot_wait() {
    struct Probe(smarm::Sender<RecvError>);
    impl smarm::Actor for Probe {
        type Msg = ();
        fn handle(&mut self, ctx: &mut smarm::Ctx<'_, Self>, _: ()) {
            let (_keep, rx) = smarm::channel::<()>();
            let _ = self.0.send(rx.recv().unwrap_err());
            ctx.stop_self();
        }
    }
    let got = smarm::run(|| {
        let (tx, rx) = smarm::channel();
        let probe = smarm::spawn_actor(Probe(tx)).unwrap();
        probe.send(()).unwrap();
        rx.recv().unwrap()
    });
    assert_eq!(got, RecvError::NotInProcess);
}

/// A thread blocked in `recv` on a channel whose sender a parked process
/// holds gets `Disconnected` when the Engine shuts down (the process is
/// stopped, its stack unwinds, the sender drops); a thread blocked in
/// `join` on that process sees it stopped.
#[test]
fn engine_shutdown_releases_threads_in_recv_and_join() {
    let engine = smarm::Engine::builder().workers(2).build().unwrap();
    let (tx, rx) = smarm::channel::<u32>();
    let (parked_tx, parked) = smarm::channel::<()>();
    let holder = engine
        .runtime()
        .spawn(move || {
            let _keep = tx;
            parked_tx.send(()).unwrap();
            smarm::sleep(ms(600_000));
        })
        .unwrap();
    // This thread waits for the holder to park, as any thread may.
    parked.recv().unwrap();
    let reader = thread::spawn(move || rx.recv());
    let joiner = thread::spawn(move || holder.join());
    thread::sleep(ms(20));
    engine.shutdown();
    assert_eq!(reader.join().unwrap(), Err(RecvError::Disconnected));
    assert_eq!(joiner.join().unwrap(), Err(JoinError::Exited(ExitReason::Stopped)));
}

/// A handler actor that answers asks and feeds an inbox.
struct Replier {
    to: smarm::InboxAddr<u32>,
}

enum R {
    Ask(u32, smarm::ReplyTo<u32>),
    /// Sends this many numbers to the inbox.
    Feed(u32),
    /// Takes the reply handle and never answers (keeps it).
    Sit(smarm::ReplyTo<u32>),
}

struct Sitter(Vec<smarm::ReplyTo<u32>>, Replier);

impl smarm::Actor for Sitter {
    type Msg = R;
    fn handle(&mut self, _: &mut smarm::Ctx<'_, Self>, msg: R) {
        match msg {
            R::Ask(n, reply) => {
                let _ = reply.send(n * 2);
            }
            R::Feed(count) => {
                for i in 0..count {
                    let _ = self.1.to.send(i);
                }
            }
            R::Sit(reply) => self.0.push(reply),
        }
    }
}

/// A plain thread receives on an inbox an actor feeds, and waits on asks,
/// with and without timeouts: every message in comes out, a timeout is
/// `Timeout` and the inbox stays usable.
fn thread_inbox_and_ask(drive: Drive) {
    drive.run(|| {
        let runtime = smarm::current_runtime().unwrap();
        let inbox = runtime.new_inbox::<u32>();
        let actor = runtime.spawn_actor(Sitter(Vec::new(), Replier { to: inbox.addr() })).unwrap();
        let (report_tx, report) = smarm::channel();
        let thread = {
            let runtime = runtime.clone();
            let actor = actor.clone();
            thread::spawn(move || {
                // Asks: answered, and one never answered that times out.
                let answers: Vec<u32> =
                    (1..=20).map(|n| runtime.ask(&actor, |reply| R::Ask(n, reply)).wait().unwrap()).collect();
                let timed = runtime.ask(&actor, |reply| R::Ask(5, reply)).wait_timeout(ms(5_000));
                let sat = runtime.ask(&actor, R::Sit).wait_timeout(ms(20));
                // The inbox: idle first (times out), then 100 messages.
                let idle = inbox.recv_timeout(ms(20));
                actor.send(R::Feed(100)).unwrap();
                let fed: Vec<u32> = (0..100).map(|_| inbox.recv().unwrap()).collect();
                report_tx.send((answers, timed, sat, idle, fed)).unwrap();
            })
        };
        let (answers, timed, sat, idle, fed) = report.recv().unwrap();
        thread.join().unwrap();
        assert_eq!(answers, (1..=20).map(|n| n * 2).collect::<Vec<_>>());
        assert_eq!(timed, Ok(10));
        assert_eq!(sat, Err(smarm::actor::InboxRecvError::Timeout));
        assert_eq!(idle, Err(smarm::actor::InboxRecvError::Timeout));
        assert_eq!(fed, (0..100).collect::<Vec<_>>());
        runtime.stop_actor(actor.pid(), smarm::ExitReason::Normal).unwrap();
    });
}
drive_tests!(thread_inbox_and_ask => a_thread_waits_on_an_inbox_and_asks_1, a_thread_waits_on_an_inbox_and_asks_4, a_thread_waits_on_an_inbox_and_asks_engine);
