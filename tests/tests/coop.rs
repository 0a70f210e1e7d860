//! The cooperative budget: a process that never parks yields at its
//! `coop_budget`-th channel, mutex, spawn or actor-send operation, so it cannot starve
//! the processes on its worker. This binary keeps the default allocator:
//! no allocation ever preempts here, only the budget does.

mod common;
#[allow(unused_imports)]
use common::{ms, next_worker, record, Drive, Trace};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smarm::Config;

fn flood(drive: Drive) {
    // The receiver takes this many, then drops the channel.
    const TAKEN: usize = 20_000;
    // Far more than the receiver takes: reaching it means the receiver
    // never ran (and, left alone, the queue would grow until the process
    // aborts on a failed allocation).
    const STARVED: u64 = 5_000_000;
    let workers = drive.workers();
    drive.run(move || {
        // Both ends on one worker, which is not the root's when there are
        // several.
        let worker = next_worker(workers);
        let (tx, rx) = smarm::channel::<u64>();
        let (report_tx, report_rx) = smarm::channel::<(&str, u64)>();
        let report = report_tx.clone();
        let receiver = smarm::spawn_on(worker, move || {
            let mut longest = 0;
            for expected in 0..TAKEN as u64 {
                assert_eq!(rx.recv(), Ok(expected));
                longest = longest.max(rx.len() as u64);
            }
            drop(rx);
            report.send(("longest queue", longest)).unwrap();
        })
        .unwrap();
        let sender = smarm::spawn_on(worker, move || {
            let mut sent = 0u64;
            // A loop with no yield, no park, no allocation
            // beyond the queue's.
            while tx.send(sent).is_ok() {
                sent += 1;
                assert!(
                    sent < STARVED,
                    "the receiver never ran: the flooding sender was never made to yield"
                );
            }
            report_tx.send(("sent", sent)).unwrap();
        })
        .unwrap();
        let mut longest = None;
        let mut sent = None;
        for _ in 0..2 {
            match report_rx.recv().unwrap() {
                ("longest queue", n) => longest = Some(n),
                (_, n) => sent = Some(n),
            }
        }
        receiver.join().unwrap();
        sender.join().unwrap();
        let (longest, sent) = (longest.unwrap(), sent.unwrap());
        // The sender saw the disconnection after at most a few budgets past
        // what was taken, and the queue never held more than a few budgets'
        // worth: memory stays bounded.
        let budget = u64::from(smarm_core_default_budget());
        assert!(sent >= TAKEN as u64, "sent {sent}");
        assert!(sent <= TAKEN as u64 + 4 * budget, "sent {sent}: the sender ran on long past the drop");
        assert!(longest <= 4 * budget, "the queue reached {longest} messages");
    });
}

fn smarm_core_default_budget() -> u32 {
    Config::default().coop_budget
}

drive_tests!(flood => flooding_sender_yields_to_its_receiver_and_sees_the_drop, flooding_sender_yields_to_its_receiver_and_sees_the_drop_on_4_workers, flooding_sender_yields_to_its_receiver_and_sees_the_drop_on_4_threads);

/// Runs `op` in a loop in a fresh root process on one worker with the given
/// budget and returns how many ops completed before a process spawned
/// beside it got to run.
fn ops_before_neighbour_runs(budget: u32, op: impl Fn() + Send + 'static) -> usize {
    let config = Config { coop_budget: budget, ..Config::default() };
    smarm::run_with(config, move || {
        // Start from a full budget.
        smarm::yield_now();
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        // The spawn is the budget's first operation.
        smarm::spawn(move || r.store(true, Ordering::SeqCst)).unwrap();
        let mut count = 0;
        while !ran.load(Ordering::SeqCst) {
            op();
            count += 1;
            assert!(count < 100_000, "the neighbour never ran");
        }
        count
    })
}

#[test]
fn every_budgeted_operation_spends_and_the_last_one_yields() {
    // Budget 8: the spawn and six more operations run; the seventh after
    // the spawn finds the budget at its last unit and yields first.
    const BUDGET: u32 = 8;
    let expected = BUDGET as usize - 1;

    let check = |name: &str, count: usize| assert_eq!(count, expected, "{name}");
    // A channel holding `n` messages, for receives that find one at once.
    let holding = |n: u32| {
        let (tx, rx) = smarm::channel::<u32>();
        for v in 0..n {
            tx.send(v).unwrap();
        }
        (tx, rx)
    };

    let (_tx, rx) = smarm::channel::<u32>();
    check("try_recv", ops_before_neighbour_runs(BUDGET, move || assert!(rx.try_recv().is_err())));
    let (tx, _rx) = smarm::channel::<u32>();
    check("send", ops_before_neighbour_runs(BUDGET, move || tx.send(1).unwrap()));
    let (tx, _rx) = smarm::channel::<u32>();
    check("try_send", ops_before_neighbour_runs(BUDGET, move || tx.try_send(1).unwrap()));
    let (tx, _rx) = smarm::channel::<u32>();
    check("send_timeout", ops_before_neighbour_runs(BUDGET, move || tx.send_timeout(1, ms(1)).unwrap()));
    let (_tx, rx) = holding(100);
    check("recv", ops_before_neighbour_runs(BUDGET, move || assert!(rx.recv().is_ok())));
    let (_tx, rx) = holding(100);
    check("recv_timeout", ops_before_neighbour_runs(BUDGET, move || assert!(rx.recv_timeout(ms(1)).is_ok())));
    let (_tx, rx) = holding(100);
    check("iter", ops_before_neighbour_runs(BUDGET, move || assert!(rx.iter().next().is_some())));
    let (_tx, rx) = holding(1);
    check(
        "try_recv_match",
        ops_before_neighbour_runs(BUDGET, move || assert!(rx.try_recv_match(|v| *v > 5).is_err())),
    );
    let mutex = Arc::new(smarm::Mutex::new(0u32));
    let m = mutex.clone();
    check("lock", ops_before_neighbour_runs(BUDGET, move || *m.lock() += 1));
    check("try_lock", ops_before_neighbour_runs(BUDGET, move || *mutex.try_lock().unwrap() += 1));
    check("spawn", ops_before_neighbour_runs(BUDGET, || drop(smarm::spawn(|| {}).unwrap())));
    // A send to a handler actor: the actor is spawned (not a budgeted
    // operation) at the first call, on the process's own worker.
    let sink = std::sync::OnceLock::new();
    check(
        "actor send",
        ops_before_neighbour_runs(BUDGET, move || {
            // The sink runs only once this process has yielded, by when
            // the loop is over: every send here finds it alive.
            sink.get_or_init(|| smarm::spawn_actor(Sink).unwrap()).send(1).unwrap()
        }),
    );
}

/// Stops at its first message, so that the runtime can end (a live actor
/// keeps it running).
struct Sink;

impl smarm::Actor for Sink {
    type Msg = u32;
    fn handle(&mut self, ctx: &mut smarm::Ctx<'_, Self>, _msg: u32) {
        ctx.stop_self();
    }
}

/// Sends itself `n` messages in its first turn and reports once it has
/// handled them all.
struct SelfFlood {
    n: u32,
    handled: u32,
    done: smarm::Sender<u32>,
}

impl smarm::Actor for SelfFlood {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut smarm::Ctx<'_, Self>) {
        for _ in 0..self.n {
            ctx.addr().send(()).unwrap();
        }
    }
    fn handle(&mut self, ctx: &mut smarm::Ctx<'_, Self>, (): ()) {
        self.handled += 1;
        if self.handled == self.n {
            self.done.send(self.handled).unwrap();
            ctx.stop_self();
        }
    }
}

#[test]
fn a_handlers_operations_past_the_budget_leave_the_next_process_a_full_budget() {
    // A handler's sends spend the driver's budget, where nothing can yield;
    // the process resumed next still yields at its own budget's end.
    const BUDGET: u32 = 8;
    let config = Config { coop_budget: BUDGET, ..Config::default() };
    let count = smarm::run_with(config, move || {
        let runtime = smarm::current_runtime().unwrap();
        let (done, handled) = smarm::channel();
        runtime.spawn_actor_on(0, SelfFlood { n: 4 * BUDGET, handled: 0, done }).unwrap();
        assert_eq!(handled.recv().unwrap(), 4 * BUDGET);
        // As `ops_before_neighbour_runs`, right after the handler's turns.
        smarm::yield_now();
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        smarm::spawn(move || r.store(true, Ordering::SeqCst)).unwrap();
        let (tx, _rx) = smarm::channel::<u32>();
        let mut count = 0;
        while !ran.load(Ordering::SeqCst) {
            tx.send(1).unwrap();
            count += 1;
            assert!(count < 100_000, "the neighbour never ran");
        }
        count
    });
    assert_eq!(count, BUDGET as usize - 1);
}

#[test]
fn a_budget_of_zero_never_yields() {
    let (_tx, rx) = smarm::channel::<u32>();
    let count = smarm::run_with(Config { coop_budget: 0, ..Config::default() }, move || {
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        smarm::spawn(move || r.store(true, Ordering::SeqCst)).unwrap();
        for _ in 0..10_000 {
            assert!(rx.try_recv().is_err());
        }
        let before = ran.load(Ordering::SeqCst);
        smarm::yield_now();
        assert!(ran.load(Ordering::SeqCst));
        before
    });
    assert!(!count, "the neighbour ran during 10,000 operations with the budget off");
}

#[test]
fn no_budget_yield_while_preemption_is_disabled() {
    let (_tx, rx) = smarm::channel::<u32>();
    smarm::run_with(Config { coop_budget: 2, ..Config::default() }, move || {
        smarm::yield_now();
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        smarm::spawn(move || r.store(true, Ordering::SeqCst)).unwrap(); // the last unit but one
        {
            let _no_preempt = smarm::NoPreempt::new();
            for _ in 0..100 {
                assert!(rx.try_recv().is_err()); // spent, but no yield here
            }
            assert!(!ran.load(Ordering::SeqCst), "yielded with preemption disabled");
        }
        // The budget stayed spent: the next operation yields.
        assert!(rx.try_recv().is_err());
        assert!(ran.load(Ordering::SeqCst));
    });
}

#[test]
fn the_engine_builder_sets_the_budget() {
    let engine = smarm::Engine::builder().workers(1).coop_budget(4).build().unwrap();
    assert_eq!(engine.runtime().config().coop_budget, 4);
    let (_tx, rx) = smarm::channel::<u32>();
    let count = engine
        .block_on(move || {
            smarm::yield_now();
            let ran = Arc::new(AtomicBool::new(false));
            let r = ran.clone();
            smarm::spawn(move || r.store(true, Ordering::SeqCst)).unwrap();
            let mut count = 0;
            while !ran.load(Ordering::SeqCst) {
                assert!(rx.try_recv().is_err());
                count += 1;
                assert!(count < 100_000, "the neighbour never ran");
            }
            count
        })
        .unwrap();
    assert_eq!(count, 3);
}

#[test]
fn a_process_that_parks_keeps_its_budget_refilled() {
    // Ping-pong parks at every message: the budget (1, the smallest that
    // is on) yields at every operation but loses nothing.
    let got = smarm::run_with(Config { coop_budget: 1, ..Config::default() }, || {
        let (to_pong, from_ping) = smarm::channel::<u32>();
        let (to_ping, from_pong) = smarm::channel::<u32>();
        let ponger = smarm::spawn(move || {
            for v in &from_ping {
                to_ping.send(v + 1).unwrap();
            }
        })
        .unwrap();
        let mut v = 0;
        for _ in 0..1_000 {
            to_pong.send(v).unwrap();
            v = from_pong.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        drop(to_pong);
        ponger.join().unwrap();
        v
    });
    assert_eq!(got, 1_000);
}
